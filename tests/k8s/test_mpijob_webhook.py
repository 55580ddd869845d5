"""Kueue's MPIJob webhooks (``mmpijob.kb.io``, ``vmpijob.kb.io``) as its ``mpijob_webhook.go``: a queued MPIJob stored
with ``spec.runPolicy.suspend: true``, the generic job rules read against that flag, the TAS annotations of each
replica type at Kueue's paths, and the registration (fail-closed only while the framework is on)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import mpijob_webhook as mw
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
FRAMEWORKS = ["batch/job", "kubeflow.org/mpijob"]
ON = mw.MPIJobWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}}))
WITHOUT_QUEUE = mw.MPIJobWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                  "manageJobsWithoutQueueName": True}))
OFF = mw.MPIJobWebhooks.of(load_config({}))


def _mpijob(labels: dict | None = None, *, run_policy: dict | None = None, worker_annotations: dict | None = None,
            launcher_annotations: dict | None = None, workers: int = 4) -> dict:
    meta: dict = {"name": "pi", "namespace": "team", "labels": labels or {}}

    def template(annotations: dict | None) -> dict:
        pod: dict = {"spec": {"containers": [{"name": "c", "image": "mpi"}]}}
        return {**pod, "metadata": {"annotations": annotations}} if annotations else pod

    spec: dict = {"mpiReplicaSpecs": {"Worker": {"replicas": workers, "template": template(worker_annotations)},
                                      "Launcher": {"replicas": 1, "template": template(launcher_annotations)}}}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": meta, "spec": spec}


def _mutate(obj: dict, settings: mw.MPIJobWebhooks = ON, *, default_queue: bool = False,
            multikueue_queues: set[str] | None = None) -> tuple[dict, list[dict]]:
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    async def multikueue(namespace: str, queue: str) -> bool:
        return f"{namespace}/{queue}" in (multikueue_queues or set())

    reviews = mw.reviewers(settings, namespace_labels, has_default_queue,
                           multikueue=None if multikueue_queues is None else multikueue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[mw.MUTATING_PATH](body))["response"]
    return response, msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def test_a_queued_mpijob_created_running_is_suspended_in_its_run_policy() -> None:
    assert _mutate(_mpijob({Q: "lq"}))[1] == [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
    assert _mutate(_mpijob({Q: "lq"}, run_policy={"cleanPodPolicy": "Running", "suspend": False}))[1] == [
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]
    assert _mutate(_mpijob({Q: "lq"}, run_policy={"suspend": True}))[1] == []
    assert _mutate(_mpijob({"app": "x"}))[1] == []


def test_defaults_the_local_queue_and_suspends_without_a_queue_name_when_managed() -> None:
    assert _mutate(_mpijob(), default_queue=True)[1] == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"},
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
    assert _mutate(_mpijob(), WITHOUT_QUEUE)[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]


@pytest.mark.parametrize(("api_version", "kind", "framework"), [
    ("kubeflow.org/v1", "PyTorchJob", "kubeflow.org/pytorchjob"), ("ray.io/v1", "RayJob", "ray.io/rayjob"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkerset.x-k8s.io/leaderworkerset")])
def test_an_mpijob_a_training_job_ray_or_lws_controls_is_left_to_it_when_its_integration_is_on(
        api_version: str, kind: str, framework: str) -> None:
    """Kueue's ``IsOwnerManagedByKueue`` counts every enabled integration's kind: such a parent is the one queued
    (before, the MPIJob webhook counted only Jobs, Pods, JobSets and MPIJobs, and suspended this child)."""
    mpijob = _mpijob({Q: "lq"})
    mpijob["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "parent", "uid": "p",
                                              "controller": True}]
    on = mw.MPIJobWebhooks.of(load_config({"integrations": {"frameworks": [*FRAMEWORKS, "pod", framework]}}))
    assert _mutate(mpijob, on, default_queue=True)[1] == []
    assert _mutate(mpijob)[1] == [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}], \
        "its integration off: a parent like any"


def test_the_framework_off_changes_nothing() -> None:
    response, ops = _mutate(_mpijob({Q: "lq"}), OFF)
    assert response["allowed"] and ops == []


def _refusal(new: dict, old: dict | None = None, settings: mw.MPIJobWebhooks = ON) -> str | None:
    async def has_default_queue(name: str) -> bool:
        return False

    reviews = mw.reviewers(settings, None, has_default_queue)  # type: ignore[arg-type]  # no namespace asked
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    response = asyncio.run(reviews[mw.VALIDATING_PATH](msgspec.json.encode({"request": request})))["response"]
    assert response["allowed"] is ("status" not in response)
    return response["status"]["message"] if "status" in response else None


def test_a_created_mpijobs_labels_are_checked() -> None:
    assert _refusal(_mpijob({Q: "lq", MAX_EXEC: "60"})) is None
    assert _refusal(_mpijob({MAX_EXEC: "0"})) == f"metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0"
    assert _refusal(_mpijob({Q: "Bad_Queue"}), settings=OFF) is None


def test_a_created_mpijobs_errors_come_sorted_by_field_path() -> None:
    """Kueue sorts a create's errors by field (the queue-name label's error, checked first, comes after the
    maximum execution time's)."""
    assert _refusal(_mpijob({Q: "Bad_Queue", MAX_EXEC: "0"})) == (
        f"[metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0, metadata.labels[{Q}]: "
        'Invalid value: "Bad_Queue": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
        "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]")


@pytest.mark.parametrize(("suspend", "error"), [
    (True, None), (False, f'metadata.labels[{Q}]: Invalid value: "b": field is immutable')])
def test_the_queue_name_may_change_only_while_the_run_policy_suspends_it(suspend: bool, error: str | None) -> None:
    old = _mpijob({Q: "a"}, run_policy={"suspend": suspend})
    new = _mpijob({Q: "b"}, run_policy={"suspend": suspend})
    assert _refusal(new, old) == error


def test_each_replica_types_tas_annotations_are_checked_in_the_order_of_their_paths() -> None:
    both = {REQUIRED: "rack", PREFERRED: "block"}
    job = _mpijob({Q: "lq"}, worker_annotations=both, launcher_annotations=both)
    detail = (f'Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", "{PREFERRED}", '
              '"kueue.x-k8s.io/podset-unconstrained-topology"]')
    assert _refusal(job) == (f"[spec.mpiReplicaSpecs[Launcher].template.metadata.annotations: {detail}, "
                             f"spec.mpiReplicaSpecs[Worker].template.metadata.annotations: {detail}]")


def test_a_slice_is_no_larger_than_its_replica_types_pods() -> None:
    def sliced(size: str) -> dict:
        return _mpijob({Q: "lq"}, worker_annotations={REQUIRED: "block", SLICE_REQUIRED: "rack", SLICE_SIZE: size})

    assert _refusal(sliced("4")) is None
    assert _refusal(sliced("5")) == (
        f'spec.mpiReplicaSpecs[Worker].template.metadata.annotations[{SLICE_SIZE}]: Invalid value: "5": must not be '
        "greater than pod set count 4")


def test_the_webhook_server_serves_the_mpijob_paths() -> None:
    assert {mw.MUTATING_PATH, mw.VALIDATING_PATH} <= set(FRAMEWORK_PATHS)


@pytest.mark.parametrize("on", [True, False])
def test_the_mpijob_webhooks_fail_closed_only_while_the_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mhook = next(w for w in mutating_configuration(ca, url="https://h", mpijobs=on)["webhooks"]
                 if w["name"] == "mmpijob.kb.io")
    vhook = next(w for w in validating_configuration(ca, url="https://h", mpijobs=on)["webhooks"]
                 if w["name"] == "vmpijob.kb.io")
    for hook, path, operations in ((mhook, "/mutate-kubeflow-org-v2beta1-mpijob", ["CREATE"]),
                                   (vhook, "/validate-kubeflow-org-v2beta1-mpijob", ["CREATE", "UPDATE"])):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"] == [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v2beta1"],
                                  "operations": operations, "resources": ["mpijobs"], "scope": "Namespaced"}]


OFFSET = "kueue.x-k8s.io/pod-index-offset"
SUSPEND_OP = {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}


def test_a_launcher_run_as_a_worker_offsets_the_workers_pod_indexes_under_tas() -> None:
    """Kueue's MPIJob defaulting: the launcher is rank 0, so the Worker template gets a pod-index offset of 1
    for the topology ungater's rank ordering."""
    mpijob = _mpijob({Q: "lq"})
    mpijob["spec"]["runLauncherAsWorker"] = True
    assert _mutate(mpijob)[1] == [SUSPEND_OP, {"op": "add", "path": "/spec/mpiReplicaSpecs/Worker/template/metadata",
                                               "value": {"annotations": {OFFSET: "1"}}}]
    annotated = _mpijob({Q: "lq"}, worker_annotations={REQUIRED: "rack"})
    annotated["spec"]["runLauncherAsWorker"] = True
    assert _mutate(annotated)[1][1:] == [{"op": "add", "value": "1",
                                          "path": "/spec/mpiReplicaSpecs/Worker/template/metadata/annotations/"
                                                  "kueue.x-k8s.io~1pod-index-offset"}]
    grouped = _mpijob({Q: "lq"}, launcher_annotations={"kueue.x-k8s.io/podset-group-name": "g"})
    grouped["spec"]["runLauncherAsWorker"] = True
    no_launcher = _mpijob({Q: "lq"})
    no_launcher["spec"]["runLauncherAsWorker"] = True
    del no_launcher["spec"]["mpiReplicaSpecs"]["Launcher"]
    tas_off = mw.MPIJobWebhooks(**{**msgspec.structs.asdict(ON),
                                   "feature_gates": {**ON.feature_gates, "TopologyAwareScheduling": False}})
    for unchanged, settings in ((_mpijob({Q: "lq"}), ON), (grouped, ON), (no_launcher, ON), (mpijob, tas_off)):
        assert _mutate(unchanged, settings)[1] == [SUSPEND_OP]


MK = "kueue.x-k8s.io/multikueue"


@pytest.mark.parametrize("managed_by", [None, "kubeflow.org/mpi-operator"])
def test_an_mpijob_of_a_multikueue_queue_is_handed_to_multikueue(managed_by: str | None) -> None:
    """Kueue's MPIJob webhook under the MultiKueue gate: ``spec.runPolicy.managedBy`` unset or the MPI operator's
    own becomes MultiKueue's, after the suspension, for a queue behind a MultiKueue check."""
    run_policy = {"suspend": True} if managed_by is None else {"suspend": True, "managedBy": managed_by}
    assert _mutate(_mpijob({Q: "lq"}, run_policy=run_policy), multikueue_queues={"team/lq"})[1] == [
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}]
    assert _mutate(_mpijob({Q: "lq"}), multikueue_queues={"team/lq"})[1] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        {"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}]


def test_an_mpijob_is_not_handed_to_multikueue_otherwise() -> None:
    other = _mpijob({Q: "lq"}, run_policy={"suspend": True, "managedBy": "example.com/other"})
    assert _mutate(other, multikueue_queues={"team/lq"})[1] == []  # another manager named: kept
    assert _mutate(_mpijob({Q: "lq"}, run_policy={"suspend": True}), multikueue_queues={"team/x"})[1] == []
    assert _mutate(_mpijob({Q: "lq"}, run_policy={"suspend": True}))[1] == []  # the gate off: no lookup


def _as_worker(mpijob: dict) -> dict:
    mpijob["spec"]["runLauncherAsWorker"] = True
    return mpijob


def test_the_workers_pod_index_offset_stays_as_defaulted_on_update_under_tas() -> None:
    """Kueue v0.20's #14485: the mutating webhook sets the Worker's offset on creation only, so under
    TopologyAwareScheduling an update of an MPIJob that runs its launcher as a worker must keep the offset that
    defaulting gives (``"1"``; none with the Launcher in a pod-set group): not changed, removed nor added. Other
    MPIJobs are not held to it; the value and its pairing with a group are checked as every template's TAS
    annotations. The update's errors come sorted by field path."""
    at = f"spec.mpiReplicaSpecs[Worker].template.metadata.annotations[{OFFSET}]"
    offset_one = _as_worker(_mpijob({Q: "lq"}, worker_annotations={OFFSET: "1"}))
    assert _refusal(offset_one, offset_one) is None
    assert _refusal(_as_worker(_mpijob({Q: "lq"}, worker_annotations={OFFSET: "5"})), offset_one) == (
        f'{at}: Invalid value: "5": must be "1", the value the defaulting webhook would set')
    assert _refusal(_as_worker(_mpijob({Q: "lq"})), offset_one) == (
        f'{at}: Invalid value: "": must be "1", the value the defaulting webhook would set')
    group = {"kueue.x-k8s.io/podset-group-name": "g", PREFERRED: "rack"}
    grouped = _as_worker(_mpijob({Q: "lq"}, launcher_annotations=group, worker_annotations=group))
    assert _refusal(grouped, grouped) is None
    grouped_offset = _as_worker(_mpijob({Q: "lq"}, worker_annotations={**group, OFFSET: "1"},
                                        launcher_annotations=group))
    assert _refusal(grouped_offset, grouped) == (
        f"[{at}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-group-name' is specified, "
        f'{at}: Invalid value: "1": must be "", the value the defaulting webhook would set]')
    assert _refusal(_mpijob({Q: "lq"}, worker_annotations={OFFSET: "5"}), _mpijob({Q: "lq"})) is None, (
        "the launcher not run as a worker: the offset is not the defaulting's")
    tas_off = mw.MPIJobWebhooks(**{**msgspec.structs.asdict(ON),
                                   "feature_gates": {**ON.feature_gates, "TopologyAwareScheduling": False}})
    assert _refusal(_as_worker(_mpijob({Q: "lq"})), offset_one, tas_off) is None
    both = _as_worker(_mpijob({Q: "b"}, run_policy={"suspend": False}, worker_annotations={OFFSET: "2"}))
    assert _refusal(both, _as_worker(_mpijob({Q: "a"}, run_policy={"suspend": False}))) == (
        f'[metadata.labels[{Q}]: Invalid value: "b": field is immutable, '
        f'{at}: Invalid value: "2": must be "1", the value the defaulting webhook would set]')
    assert _refusal(_mpijob({Q: "lq"}, worker_annotations={OFFSET: "-1"})) == (
        f'{at}: Invalid value: "-1": must be a non-negative integer')
