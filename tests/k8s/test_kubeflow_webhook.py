"""Kueue's webhooks for the training operator's kubeflow.org/v1 jobs (``mpytorchjob.kb.io``, ``vpytorchjob.kb.io``,
... ; :mod:`connectors.k8s.kubeflow_webhook`) as its ``*_webhook.go`` over the generic job webhook: a queued job
stored with ``spec.runPolicy.suspend: true``, the generic job rules read against that flag, the TAS annotations of
each replica type at Kueue's paths, and the registration per kind (fail-closed only while that kind is on)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import kubeflow_webhook as kw
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
ON = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob"]}})
WITHOUT_QUEUE = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob"]},
                             "manageJobsWithoutQueueName": True})
OTHER_KIND_ON = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/tfjob"]}})
MUTATE, VALIDATE = "/mutate-kubeflow-org-v1-pytorchjob", "/validate-kubeflow-org-v1-pytorchjob"


def _pytorchjob(labels: dict | None = None, *, run_policy: dict | None = None, worker_annotations: dict | None = None,
                master_annotations: dict | None = None, workers: int = 4) -> dict:
    def template(annotations: dict | None) -> dict:
        pod: dict = {"spec": {"containers": [{"name": "c", "image": "torch"}]}}
        return {**pod, "metadata": {"annotations": annotations}} if annotations else pod

    spec: dict = {"pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": template(worker_annotations)},
                                          "Master": {"replicas": 1, "template": template(master_annotations)}}}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": "team", "labels": labels or {}}, "spec": spec}


def _mutate(obj: dict, config: Any = ON, *, default_queue: bool = False, multikueue_queues: set[str] | None = None,
            mutate: str = MUTATE) -> tuple[dict, list[dict]]:
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    async def multikueue(namespace: str, queue: str) -> bool:
        return f"{namespace}/{queue}" in (multikueue_queues or set())

    reviews = kw.reviewers(config, namespace_labels, has_default_queue,
                           multikueue=None if multikueue_queues is None else multikueue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[mutate](body))["response"]
    return response, msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def test_a_queued_pytorchjob_created_running_is_suspended_in_its_run_policy() -> None:
    assert _mutate(_pytorchjob({Q: "lq"}))[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
    assert _mutate(_pytorchjob({Q: "lq"}, run_policy={"cleanPodPolicy": "None", "suspend": False}))[1] == [
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]
    assert _mutate(_pytorchjob({Q: "lq"}, run_policy={"suspend": True}))[1] == []
    assert _mutate(_pytorchjob({"app": "x"}))[1] == []


def test_defaults_the_local_queue_and_suspends_without_a_queue_name_when_managed() -> None:
    assert _mutate(_pytorchjob(), default_queue=True)[1] == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"},
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
    assert _mutate(_pytorchjob(), WITHOUT_QUEUE)[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]


@pytest.mark.parametrize("config", [load_config({}), OTHER_KIND_ON])
def test_the_kinds_framework_off_changes_nothing(config: Any) -> None:
    response, ops = _mutate(_pytorchjob({Q: "lq"}), config)
    assert response["allowed"] and ops == []


def _refusal(new: dict, old: dict | None = None, config: Any = ON) -> str | None:
    async def has_default_queue(name: str) -> bool:
        return False

    reviews = kw.reviewers(config, None, has_default_queue)  # type: ignore[arg-type]  # no namespace asked
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    response = asyncio.run(reviews[VALIDATE](msgspec.json.encode({"request": request})))["response"]
    assert response["allowed"] is ("status" not in response)
    return response["status"]["message"] if "status" in response else None


def test_the_queue_name_is_checked_and_may_change_only_while_suspended() -> None:
    assert _refusal(_pytorchjob({Q: "Bad_Queue"}), config=load_config({})) is None
    assert _refusal(_pytorchjob({Q: "b"}, run_policy={"suspend": True}),
                    _pytorchjob({Q: "a"}, run_policy={"suspend": True})) is None
    assert _refusal(_pytorchjob({Q: "b"}, run_policy={"suspend": False}),
                    _pytorchjob({Q: "a"}, run_policy={"suspend": False})) == (
        f'metadata.labels[{Q}]: Invalid value: "b": field is immutable')


def test_each_replica_types_tas_annotations_are_checked_at_kueues_paths_in_their_order() -> None:
    both = {REQUIRED: "rack", PREFERRED: "block"}
    job = _pytorchjob({Q: "lq"}, worker_annotations=both, master_annotations=both)
    detail = (f'Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", "{PREFERRED}", '
              '"kueue.x-k8s.io/podset-unconstrained-topology"]')
    assert _refusal(job) == (f"[spec.pytorchReplicaSpecs[Master].template.metadata.annotations: {detail}, "
                             f"spec.pytorchReplicaSpecs[Worker].template.metadata.annotations: {detail}]")


def test_a_slice_is_no_larger_than_its_replica_types_pods() -> None:
    def sliced(size: str) -> dict:
        return _pytorchjob({Q: "lq"}, worker_annotations={REQUIRED: "block", SLICE_REQUIRED: "rack",
                                                         SLICE_SIZE: size})

    assert _refusal(sliced("4")) is None
    assert _refusal(sliced("5")) == (
        f'spec.pytorchReplicaSpecs[Worker].template.metadata.annotations[{SLICE_SIZE}]: Invalid value: "5": must '
        "not be greater than pod set count 4")


def test_the_webhook_server_serves_every_kinds_paths() -> None:
    for noun in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob"):
        assert {f"/mutate-kubeflow-org-v1-{noun}", f"/validate-kubeflow-org-v1-{noun}"} <= set(FRAMEWORK_PATHS)


def test_each_kinds_webhooks_fail_closed_only_while_its_framework_is_on() -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    on = frozenset({"PyTorchJob"})
    mutating = {w["name"]: w for w in mutating_configuration(ca, url="https://h", kubeflow=on)["webhooks"]}
    validating = {w["name"]: w for w in validating_configuration(ca, url="https://h", kubeflow=on)["webhooks"]}
    for noun in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob"):
        policy = "Fail" if noun == "pytorchjob" else "Ignore"
        for hook, path, operations in (
                (mutating[f"m{noun}.kb.io"], f"/mutate-kubeflow-org-v1-{noun}", ["CREATE"]),
                (validating[f"v{noun}.kb.io"], f"/validate-kubeflow-org-v1-{noun}", ["CREATE", "UPDATE"])):
            assert hook["failurePolicy"] == policy
            assert hook["clientConfig"]["url"] == "https://h" + path
            assert hook["rules"] == [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "operations": operations,
                                      "resources": [f"{noun}s"], "scope": "Namespaced"}]


def test_an_update_may_only_remove_admission_gates() -> None:
    """As for a Job, a JobSet or an MPIJob (the shared reconciler follows the gate's removal for these kinds too)."""
    gate = "kueue.x-k8s.io/admission-gated-by"
    path = f"metadata.annotations[{gate}]"
    training = kw.KINDS["PyTorchJob"]

    def gated(value: str | None) -> dict:
        job = _pytorchjob({Q: "lq"}, run_policy={"suspend": True})
        if value is not None:
            job["metadata"]["annotations"] = {gate: value}
        return job

    assert kw.update_errors(training, gated("example.com/a,example.com/b"), gated("example.com/a"), {}) == []
    assert kw.update_errors(training, gated("example.com/a"), gated("example.com/a,example.com/c"), {}) == [
        f"{path}: Forbidden: can only remove gates, not add new ones"]
    assert kw.update_errors(training, gated(None), gated("example.com/a"), {}) == [
        f"{path}: Forbidden: cannot add admission gate after creation"]
    assert kw.update_errors(training, gated(None), gated("example.com/a"), {"AdmissionGatedBy": False}) == []


MK = "kueue.x-k8s.io/multikueue"
ALL_KINDS = load_config({"integrations": {"frameworks": ["batch/job", *(f"kubeflow.org/{k.lower()}"
                                                                        for k in kw.WEBHOOK_KINDS)]}})


@pytest.mark.parametrize("managed_by", [None, "kubeflow.org/training-operator"])
def test_a_pytorchjob_of_a_multikueue_queue_is_handed_to_multikueue(managed_by: str | None) -> None:
    """Kueue's Kubeflow webhooks under the MultiKueue gate: ``spec.runPolicy.managedBy`` unset or the training
    operator's own becomes MultiKueue's, after the suspension, for a queue (given or defaulted) behind a MultiKueue
    check."""
    run_policy = None if managed_by is None else {"managedBy": managed_by}
    got = _mutate(_pytorchjob({Q: "lq"}, run_policy=run_policy), multikueue_queues={"team/lq"})[1]
    if managed_by is None:
        assert got == [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
                       {"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}]
    else:
        assert got == [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True},
                       {"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}]
    assert _mutate(_pytorchjob(), default_queue=True, multikueue_queues={"team/default"})[1][-2:] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}]


def test_a_child_pytorchjob_not_suspended_gets_its_run_policy_for_multikueue() -> None:
    """A job with a Kueue-managed parent is not suspended, but handed to MultiKueue all the same (whatever its
    ancestry, as Kueue's webhook): the run policy it lacks is added with the managedBy."""
    child = _pytorchjob({Q: "lq"})
    child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "p", "uid": "p",
                                             "controller": True}]
    assert _mutate(child, multikueue_queues={"team/lq"})[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"managedBy": MK}}]


@pytest.mark.parametrize("kind", sorted(kw.WEBHOOK_KINDS))
def test_every_kubeflow_kind_is_handed_to_multikueue(kind: str) -> None:
    job = {**_pytorchjob({Q: "lq"}, run_policy={"suspend": True}), "kind": kind}
    assert _mutate(job, ALL_KINDS, multikueue_queues={"team/lq"}, mutate=kw.WEBHOOK_KINDS[kind].mutating_path)[1] == [
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}]


def test_a_pytorchjob_is_not_handed_to_multikueue_otherwise() -> None:
    suspend = [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]
    other = _pytorchjob({Q: "lq"}, run_policy={"managedBy": "example.com/other"})
    assert _mutate(other, multikueue_queues={"team/lq"})[1] == suspend  # another manager named: kept
    assert _mutate(_pytorchjob({Q: "lq"}), multikueue_queues={"team/other"})[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]  # no check
    assert _mutate(_pytorchjob({Q: "lq"}))[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]  # the MultiKueue gate off: no lookup
    assert _mutate(_pytorchjob(), multikueue_queues={"team/default"})[1] == []  # no queue
