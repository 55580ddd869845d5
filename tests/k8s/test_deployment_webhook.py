"""Kueue's ``deployment`` integration (on the pod one): the Deployment webhooks (``mdeployment.kb.io``,
``vdeployment.kb.io``) as Kueue's ``deployment_webhook.go``, their registration (fail-closed only while the
framework is on), the Pod webhook's gating of a pod whose template says its parent holds it, and the
Configuration rule that ``deployment`` needs ``pod``."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import deployment_webhook as dw
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import NotFound
from connectors.k8s.pod_webhook import PodDefaulting, review
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
WPC = "kueue.x-k8s.io/priority-class"
MANAGED = "kueue.x-k8s.io/managed"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
ON_CONFIG = load_config({"integrations": {"frameworks": ["batch/job", "pod", "deployment"]}})
ON = dw.ParentDefaulting.of(ON_CONFIG, "deployment")


def _deployment(labels: dict | None = None, template_meta: dict | None = None, owner: dict | None = None,
                ready: int = 0) -> dict:
    meta: dict = {"name": "d", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    if owner is not None:
        meta["ownerReferences"] = [owner]
    template: dict = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if template_meta is not None:
        template["metadata"] = template_meta
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 2, "template": template}, "status": {"readyReplicas": ready}}


def _mutate(obj: dict, defaulting: dw.ParentDefaulting = ON, *, default_queue: bool = False,
            ns_labels: dict | Exception | None = None, operation: str = "CREATE") -> tuple[dict, list[dict]]:
    async def namespace_labels(name: str) -> dict[str, str]:
        if isinstance(ns_labels, Exception):
            raise ns_labels
        return {"kubernetes.io/metadata.name": name, **(ns_labels or {})}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    body = msgspec.json.encode({"request": {"uid": "u", "operation": operation, "namespace": "team", "object": obj}})
    out = asyncio.run(dw.mutating_review(body, defaulting, "deployment", namespace_labels, has_default_queue))
    response = out["response"]
    return response, msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def test_a_queued_deployment_marks_its_pod_template_as_held_by_its_parent() -> None:
    response, ops = _mutate(_deployment({Q: "lq", WPC: "high"}))
    assert response["allowed"]
    assert ops == [{"op": "add", "path": "/spec/template/metadata",
                    "value": {"labels": {MANAGED: "true", Q: "lq", WPC: "high"},
                              "annotations": {PARENT: "deployment"}}}]


def test_the_template_gets_the_deployments_queue_over_its_own_and_keeps_the_rest() -> None:
    _, ops = _mutate(_deployment({Q: "new"}, {"labels": {Q: "old", "app": "x"}}), operation="UPDATE")
    assert ops == [{"op": "add", "path": "/spec/template/metadata/labels/kueue.x-k8s.io~1managed", "value": "true"},
                   {"op": "add", "path": "/spec/template/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "new"},
                   {"op": "add", "path": "/spec/template/metadata/annotations",
                    "value": {PARENT: "deployment"}}]


def test_a_deployment_naming_no_queue_is_left_alone_unless_a_default_queue_names_one() -> None:
    assert _mutate(_deployment())[1] == []
    assert _mutate(_deployment(template_meta={"labels": {Q: "lq"}}))[1] == [], "a template's queue is not the parent's"
    _, ops = _mutate(_deployment(), default_queue=True)
    assert ops[0] == {"op": "add", "path": "/metadata/labels", "value": {Q: "default"}}
    assert ops[1]["value"]["labels"][Q] == "default"
    assert _mutate(_deployment(), default_queue=True, ns_labels={"kubernetes.io/metadata.name": "kube-system"}
                   )[1] == [], "no default queue outside the managed namespaces"


def test_a_queued_deployment_in_a_namespace_the_selector_leaves_out_is_left_as_it_is() -> None:
    """Kueue's #13375: its pods are not Kueue's there, so its template is not marked for the Pod webhook to hold."""
    kube_system = {"kubernetes.io/metadata.name": "kube-system"}
    assert _mutate(_deployment({Q: "lq"}), ns_labels=kube_system)[1] == []


def test_under_manage_jobs_without_queue_name_a_deployment_in_a_managed_namespace_is_held() -> None:
    without = dw.ParentDefaulting.of(load_config({"integrations": {"frameworks": ["batch/job", "pod", "deployment"]},
                                                  "manageJobsWithoutQueueName": True}), "deployment")
    _, ops = _mutate(_deployment(), without)
    assert ops[0]["value"] == {"labels": {MANAGED: "true"}, "annotations": {PARENT: "deployment"}}
    job_owned = _deployment(owner={"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True})
    assert _mutate(job_owned, without)[1] == [], "a Kueue-run parent is the one queued"
    response, _ = _mutate(_deployment(), without, ns_labels=NotFound("namespaces \"team\" not found"))
    assert not response["allowed"] and response["status"]["message"].startswith("failed to get namespace")


def test_the_integration_off_changes_and_refuses_nothing() -> None:
    off = dw.ParentDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]}}), "deployment")
    assert not off.enabled
    assert _mutate(_deployment({Q: "lq"}), off) == ({"uid": "u", "allowed": True}, [])
    assert not dw.ParentDefaulting.of(load_config({}), "deployment").enabled, "off by default, as in Kueue"


def _validate(new: dict, old: dict | None = None) -> dict:
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "object": new}
    if old is not None:
        request["oldObject"] = old
    return asyncio.run(dw.validating_review(msgspec.json.encode({"request": request})))["response"]


def test_a_queue_name_must_be_a_dns_subdomain() -> None:
    assert _validate(_deployment({Q: "lq"}))["allowed"]
    refused = _validate(_deployment({Q: "test/queue"}))
    assert not refused["allowed"]
    assert refused["status"]["message"].startswith(f'metadata.labels[{Q}]: Invalid value: "test/queue": ')


@pytest.mark.parametrize(("old", "new", "error"), [
    ({Q: "a"}, {Q: "b"}, None),
    ({}, {Q: "b"}, None),
    ({Q: "a"}, {}, f'metadata.labels[{Q}]: Invalid value: "a": field is immutable'),
    ({Q: "a", WPC: "p"}, {Q: "a", WPC: "q"}, None),  # Kueue: "update priority-class when replicas not ready"
    ({Q: "a"}, {Q: "a", WPC: "q"}, None),  # Kueue: "set priority-class when replicas not ready"
    ({Q: "a", WPC: "p"}, {Q: "a"},
     f'metadata.labels[{WPC}]: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload'),
])
def test_what_may_change_while_no_replica_is_ready(old: dict, new: dict, error: str | None) -> None:
    response = _validate(_deployment(new), _deployment(old))
    assert response["allowed"] is (error is None)
    assert error is None or response["status"]["message"] == error


def test_the_queue_name_is_fixed_once_a_replica_is_ready() -> None:
    response = _validate(_deployment({Q: "b"}, ready=1), _deployment({Q: "a"}, ready=1))
    assert response["status"]["message"] == f'metadata.labels[{Q}]: Invalid value: "a": field is immutable'


@pytest.mark.parametrize("on", [True, False])
def test_the_deployment_webhooks_fail_closed_only_while_the_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mutating = mutating_configuration(ca, url="https://127.0.0.1:9443", pods=True, deployments=on)
    validating = validating_configuration(ca, url="https://127.0.0.1:9443", pods=True, deployments=on)
    mhook = next(w for w in mutating["webhooks"] if w["name"] == "mdeployment.kb.io")
    vhook = next(w for w in validating["webhooks"] if w["name"] == "vdeployment.kb.io")
    for hook, path in ((mhook, "/mutate-apps-v1-deployment"), (vhook, "/validate-apps-v1-deployment")):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"].endswith(path)
        assert hook["rules"] == [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                  "resources": ["deployments"], "scope": "Namespaced"}]
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]


def _pod(annotations: dict, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "d-1", "namespace": "team", "labels": labels or {}, "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "d-rs",
                                              "controller": True}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_a_pod_its_parent_holds_is_gated_without_a_lookup() -> None:
    asked: list[str] = []

    async def lookup(*args: Any) -> Any:
        asked.append(repr(args))
        raise AssertionError("no lookup for a pod its parent holds")

    pod = _pod({PARENT: "deployment"}, {MANAGED: "true", Q: "lq"})
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": pod}})
    pods_on = PodDefaulting.of(ON_CONFIG)
    response = asyncio.run(review(body, pods_on, lookup, lookup, lookup))["response"]
    assert msgspec.json.decode(base64.b64decode(response["patch"])) == [  # no finalizer (Kueue #8530)
        {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1role-hash", "value": "7aa6c7b8"},
        {"op": "add", "path": "/spec/schedulingGates",
         "value": [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}]}]
    assert asked == []


@pytest.mark.parametrize("framework", ["deployment", "statefulset"])
def test_a_serving_framework_without_pod_turns_the_pod_integration_on_by_itself(framework: str) -> None:
    """Kueue since v0.15 (#6736, ``ImplicitlyEnabledFrameworkNames: ["pod"]``): listed without ``pod``, the
    Deployment or StatefulSet integration starts with the whole pod integration, the list staying as written."""
    config = load_config({"integrations": {"frameworks": ["batch/job", framework]}})
    assert config.manages_pods and config.frameworks == ("batch/job", framework)
    assert config.enabled_frameworks == ("batch/job", framework, "pod")
    assert PodDefaulting.of(config).enabled
    assert framework in load_config({"integrations": {"frameworks": [framework, "pod"]}}).frameworks
