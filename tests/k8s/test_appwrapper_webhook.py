"""Kueue's AppWrapper webhooks (``mappwrapper``/``vappwrapper``, its generic ``BaseWebhook``): a queued one stored
with ``spec.suspend: true``, the generic job rules on create and update, the registration; and an object an
AppWrapper wraps left to it by the other kinds' webhooks."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import appwrapper_webhook as aww
from connectors.k8s import job_selection, jobset_webhook
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from events import objects as o
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper"]
CONFIG = load_config({"integrations": {"frameworks": FRAMEWORKS}})
ON = aww.AppWrapperWebhooks.of(CONFIG)
ALL = aww.AppWrapperWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                             "manageJobsWithoutQueueName": True}))
AW_OWNER = {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw", "uid": "u",
            "controller": True}


def _aw(labels: dict | None = None, suspend: bool | None = None) -> dict:
    spec: dict = {"components": [{"template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {}}}]}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": "aw", "namespace": "team", "labels": labels or {}}, "spec": spec}


async def _namespace_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


async def _no_default_queue(name: str) -> bool:
    return False


def _patch(response: dict) -> list[dict]:
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _mutate(obj: dict, settings: aww.AppWrapperWebhooks = ON) -> list[dict]:
    reviews = aww.reviewers(settings, _namespace_labels, _no_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    return _patch(asyncio.run(reviews[aww.KIND.mutating_path](body))["response"])


def _refusal(new: dict, old: dict | None = None) -> str | None:
    reviews = aww.reviewers(ON, _namespace_labels, _no_default_queue)
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    response = asyncio.run(reviews[aww.KIND.validating_path](msgspec.json.encode({"request": request})))["response"]
    return response["status"]["message"] if "status" in response else None


# --- defaulting -------------------------------------------------------------------------------------------------


def test_a_queued_appwrapper_created_running_is_suspended() -> None:
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert _mutate(_aw({Q: "lq"})) == suspend
    assert _mutate(_aw({Q: "lq"}, suspend=True)) == []
    assert _mutate(_aw({"app": "x"})) == [], "not Kueue's"
    assert _mutate(_aw({"app": "x"}), ALL) == suspend, "manageJobsWithoutQueueName"


def test_nothing_is_changed_while_the_integration_is_off() -> None:
    off = aww.AppWrapperWebhooks.of(load_config({"integrations": {"frameworks": ["batch/job"]}}))
    assert _mutate(_aw({Q: "lq"}), off) == []


# --- validation -------------------------------------------------------------------------------------------------


def test_the_generic_rules_on_create() -> None:
    assert _refusal(_aw({Q: "lq"})) is None
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in (_refusal(_aw({Q: "Not_A_Name"})) or "")
    assert "max-exec-time-seconds" in (_refusal(_aw({Q: "lq", "kueue.x-k8s.io/max-exec-time-seconds": "0"})) or "")


def test_a_running_appwrappers_queue_name_is_immutable() -> None:
    old = _aw({Q: "lq"}, suspend=False)
    assert _refusal(_aw({Q: "other"}, suspend=False), old) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable')
    assert _refusal(_aw({Q: "other"}, suspend=True), old) is None
    assert _refusal(_aw({Q: "Not_A_Name"}, suspend=True), _aw({Q: "Not_A_Name"}, suspend=True)) is None, (
        "on update, the update rules only (Kueue's BaseWebhook)")


# --- what an AppWrapper wraps -------------------------------------------------------------------------------------


def test_a_jobset_an_appwrapper_wraps_is_left_to_it() -> None:
    """The JobSet webhook, the AppWrapper integration on: no default queue, not suspended (its parent is Kueue's
    to run); off, the JobSet is queued on its own."""
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
        "name": "js", "namespace": "team", "labels": {Q: "lq"}, "ownerReferences": [AW_OWNER]}, "spec": {}}
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": jobset}})

    def mutate(frameworks: list[str]) -> list[dict]:
        settings = jobset_webhook.JobSetWebhooks.of(load_config({"integrations": {"frameworks": frameworks}}))
        reviews = jobset_webhook.reviewers(settings, _namespace_labels, _no_default_queue)
        return _patch(asyncio.run(reviews[jobset_webhook.KIND.mutating_path](body))["response"])

    assert mutate(FRAMEWORKS) == []
    assert mutate(["batch/job", "jobset.x-k8s.io/jobset"]) == [{"op": "add", "path": "/spec/suspend", "value": True}]


def test_the_job_webhooks_walk_reads_an_appwrapper_from_the_apiserver() -> None:
    ref = o.OwnerReference(api_version="workload.codeflare.dev/v1beta2", kind="AppWrapper", name="aw", uid="u",
                           controller=True)
    resource = job_selection.owner_resource(ref)
    assert resource is not None and (resource.api_version, resource.plural) == (
        "workload.codeflare.dev/v1beta2", "appwrappers")


# --- serving and registering ------------------------------------------------------------------------------------


def test_the_webhook_server_serves_the_appwrapper_paths() -> None:
    assert set(aww.PATHS) <= set(FRAMEWORK_PATHS)
    assert aww.PATHS == ("/mutate-workload-codeflare-dev-v1beta2-appwrapper",
                         "/validate-workload-codeflare-dev-v1beta2-appwrapper")


@pytest.mark.parametrize("on", [True, False])
def test_the_appwrapper_webhooks_fail_closed_only_while_the_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mhook = next(w for w in mutating_configuration(ca, url="https://h", appwrappers=on)["webhooks"]
                 if w["name"] == "mappwrapper.kb.io")
    vhook = next(w for w in validating_configuration(ca, url="https://h", appwrappers=on)["webhooks"]
                 if w["name"] == "vappwrapper.kb.io")
    for hook, path, operations in ((mhook, aww.PATHS[0], ["CREATE"]), (vhook, aww.PATHS[1], ["CREATE", "UPDATE"])):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"] == [{"apiGroups": ["workload.codeflare.dev"], "apiVersions": ["v1beta2"],
                                  "operations": operations, "resources": ["appwrappers"], "scope": "Namespaced"}]
