"""Kueue's JobSet webhooks (``mjobset.kb.io``, ``vjobset.kb.io``) as its ``jobset_webhook.go`` and the generic job
defaulting and validation they use: a queued JobSet stored suspended, the defaults, the updates refused in Kueue's
words, the TAS annotations of each replicated Job, and the registration (fail-closed only while the framework is
on)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import jobset_webhook as jw
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import NotFound
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
WPC = "kueue.x-k8s.io/priority-class"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset"]
ON = jw.JobSetWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}}))
WITHOUT_QUEUE = jw.JobSetWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                  "manageJobsWithoutQueueName": True}))
NO_TAS = msgspec.structs.replace(ON, feature_gates={"TopologyAwareScheduling": False})


def _jobset(labels: dict | None = None, *, suspend: bool | None = None, owner: dict | None = None,
            worker_annotations: dict | None = None, replicas: int = 2, parallelism: int = 2) -> dict:
    meta: dict = {"name": "js", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    if owner is not None:
        meta["ownerReferences"] = [owner]
    pod: dict = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    workers_pod = {**pod, "metadata": {"annotations": worker_annotations}} if worker_annotations else pod
    spec: dict = {"replicatedJobs": [
        {"name": "leader", "replicas": 1, "template": {"spec": {"template": pod}}},
        {"name": "workers", "replicas": replicas,
         "template": {"spec": {"parallelism": parallelism, "completions": parallelism, "template": workers_pod}}}]}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": spec}


def _mutate(obj: dict, settings: jw.JobSetWebhooks = ON, *, default_queue: bool = False,
            ns_labels: dict | Exception | None = None, default_priority_class: bool | None = None,
            operation: str = "CREATE", multikueue_queues: set[str] | None = None) -> tuple[dict, list[dict]]:
    async def namespace_labels(name: str) -> dict[str, str]:
        if isinstance(ns_labels, Exception):
            raise ns_labels
        return {"kubernetes.io/metadata.name": name, **(ns_labels or {})}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    async def has_default_class() -> bool:
        return bool(default_priority_class)

    async def multikueue(namespace: str, queue: str) -> bool:
        return f"{namespace}/{queue}" in (multikueue_queues or set())

    reviews = jw.reviewers(settings, namespace_labels, has_default_queue,
                           None if default_priority_class is None else has_default_class,
                           multikueue=None if multikueue_queues is None else multikueue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": operation, "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[jw.MUTATING_PATH](body))["response"]
    return response, msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


SUSPEND = {"op": "add", "path": "/spec/suspend", "value": True}


@pytest.mark.parametrize("suspend", [False, None])
def test_a_queued_jobset_created_running_is_stored_suspended(suspend: bool | None) -> None:
    response, ops = _mutate(_jobset({Q: "lq"}, suspend=suspend))
    assert response["allowed"] and ops == [SUSPEND]


def test_a_suspended_or_unqueued_jobset_is_left_as_it_is() -> None:
    assert _mutate(_jobset({Q: "lq"}, suspend=True))[1] == []
    assert _mutate(_jobset({"app": "x"}, suspend=False))[1] == []
    assert _mutate(_jobset({"app": "x", Q: "lq"}, suspend=False))[1] == [SUSPEND]


def test_the_default_local_queue_is_named_in_a_managed_namespace_only() -> None:
    assert _mutate(_jobset(), default_queue=True)[1] == [
        {"op": "add", "path": "/metadata/labels", "value": {Q: "default"}}, SUSPEND]
    kube_system = {"kubernetes.io/metadata.name": "kube-system"}
    assert _mutate(_jobset(), default_queue=True, ns_labels=kube_system)[1] == []


def test_a_queued_jobset_in_a_namespace_the_selector_leaves_out_is_left_as_it_is() -> None:
    """Kueue's #13375: managedJobsNamespaceSelector (always respected) leaves such a JobSet unmanaged, so it is not
    suspended either (before, it stayed suspended for good)."""
    kube_system = {"kubernetes.io/metadata.name": "kube-system"}
    assert _mutate(_jobset({Q: "lq"}, suspend=False), ns_labels=kube_system)[1] == []
    assert _mutate(_jobset({Q: "lq"}, suspend=False))[1] == [SUSPEND]


def test_a_jobset_whose_controller_kueue_runs_is_left_to_that_parent() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "p", "controller": True}
    assert _mutate(_jobset({Q: "lq"}, owner=owner), default_queue=True)[1] == []
    assert _mutate(_jobset(owner=owner), WITHOUT_QUEUE)[1] == []
    other = {**owner, "apiVersion": "example.com/v1", "kind": "Trainer"}
    assert _mutate(_jobset({Q: "lq"}, owner=other))[1] == [SUSPEND], "a parent Kueue does not run counts for nothing"


PARENTS_ELSEWHERE = [("kubeflow.org/v1", "PyTorchJob", "kubeflow.org/pytorchjob"),
                     ("ray.io/v1", "RayJob", "ray.io/rayjob"),
                     ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkerset.x-k8s.io/leaderworkerset")]


@pytest.mark.parametrize(("api_version", "kind", "framework"), PARENTS_ELSEWHERE)
def test_a_jobset_a_training_job_ray_or_lws_controls_is_left_to_it_when_its_integration_is_on(
        api_version: str, kind: str, framework: str) -> None:
    """Kueue's ``IsOwnerManagedByKueue`` counts every enabled integration's kind: such a parent is the one queued
    (before, the JobSet webhook counted only Jobs, Pods, JobSets and MPIJobs, and suspended this child)."""
    owner = {"apiVersion": api_version, "kind": kind, "name": "parent", "uid": "p", "controller": True}
    on = jw.JobSetWebhooks.of(load_config({"integrations": {"frameworks": [*FRAMEWORKS, "pod", framework]}}))
    assert _mutate(_jobset({Q: "lq"}, owner=owner), on, default_queue=True)[1] == []
    assert _mutate(_jobset({Q: "lq"}, owner=owner))[1] == [SUSPEND], "its integration off: a parent like any"


def test_under_manage_jobs_without_queue_name_a_jobset_of_a_managed_namespace_is_suspended() -> None:
    assert _mutate(_jobset(), WITHOUT_QUEUE)[1] == [SUSPEND]
    assert _mutate(_jobset(), WITHOUT_QUEUE, ns_labels={"kubernetes.io/metadata.name": "kube-system"})[1] == []
    response, ops = _mutate(_jobset(), WITHOUT_QUEUE, ns_labels=NotFound("namespaces \"team\" not found"))
    assert not response["allowed"] and ops == []
    assert response["status"]["message"].startswith("failed to get namespace: ")


def test_the_default_workload_priority_class_is_named_under_its_gate() -> None:
    assert _mutate(_jobset({Q: "lq"}), default_priority_class=True)[1] == [
        {"op": "add", "path": f"/metadata/labels/{WPC.replace('/', '~1')}", "value": "default"}, SUSPEND]
    assert _mutate(_jobset({Q: "lq", WPC: "high"}), default_priority_class=True)[1] == [SUSPEND]
    assert _mutate(_jobset({Q: "lq"}), default_priority_class=None)[1] == [SUSPEND]


def test_no_default_workload_priority_class_in_a_namespace_the_selector_leaves_out() -> None:
    """Kueue's #15851: the default priority-class label is, like the default queue, for managed namespaces only;
    a namespace that cannot be read refuses the object, in Kueue's words."""
    kube_system = {"kubernetes.io/metadata.name": "kube-system"}
    assert _mutate(_jobset(), default_priority_class=True, ns_labels=kube_system)[1] == []
    assert _mutate(_jobset(), default_priority_class=True)[1] == [
        {"op": "add", "path": "/metadata/labels", "value": {WPC: "default"}}]
    response, ops = _mutate(_jobset(), default_priority_class=True, ns_labels=NotFound("namespaces \"team\" not found"))
    assert not response["allowed"] and ops == []
    assert response["status"]["message"].startswith("failed to get namespace: ")


def test_a_jobset_whose_controller_kueue_runs_gets_no_default_workload_priority_class() -> None:
    """Kueue's ``ApplyDefaultWorkloadPriorityClass`` skips an object whose controller is of a kind Kueue runs
    (``IsOwnerManagedByKueueForObject``), as the default queue: that parent's Workload carries the priority."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "p", "controller": True}
    assert _mutate(_jobset(owner=owner), default_priority_class=True)[1] == []
    other = {**owner, "apiVersion": "example.com/v1", "kind": "Trainer"}
    assert _mutate(_jobset(owner=other), default_priority_class=True)[1] == [
        {"op": "add", "path": "/metadata/labels", "value": {WPC: "default"}}], "a parent Kueue does not run"


MANAGED_BY_MK = {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"}


@pytest.mark.parametrize("managed_by", [None, "jobset.sigs.k8s.io/jobset-controller"])
def test_a_jobset_of_a_multikueue_queue_is_handed_to_multikueue(managed_by: str | None) -> None:
    """Kueue's JobSet webhook under the MultiKueue gate: managedBy unset or the JobSet controller's own becomes
    MultiKueue's, after the suspension, for a queue (given or defaulted) behind a MultiKueue check."""
    js = _jobset({Q: "lq"})
    if managed_by is not None:
        js["spec"]["managedBy"] = managed_by
    assert _mutate(js, multikueue_queues={"team/lq"})[1] == [SUSPEND, MANAGED_BY_MK]
    assert _mutate(_jobset(), default_queue=True, multikueue_queues={"team/default"})[1][-2:] == [
        SUSPEND, MANAGED_BY_MK]


def test_a_jobset_is_not_handed_to_multikueue_otherwise() -> None:
    other = _jobset({Q: "lq"})
    other["spec"]["managedBy"] = "example.com/other"
    assert _mutate(other, multikueue_queues={"team/lq"})[1] == [SUSPEND]  # another manager named: kept
    assert _mutate(_jobset({Q: "lq"}), multikueue_queues={"team/other"})[1] == [SUSPEND]  # no check
    assert _mutate(_jobset({Q: "lq"}))[1] == [SUSPEND]  # the MultiKueue gate off: no lookup
    assert _mutate(_jobset(), multikueue_queues={"team/default"})[1] == []  # no queue


def test_an_update_and_the_framework_off_change_nothing() -> None:
    assert _mutate(_jobset({Q: "lq"}, suspend=False), operation="UPDATE")[1] == []
    assert _mutate(_jobset({Q: "lq"}, suspend=False), operation="CREATE")[1] == [SUSPEND]
    off = jw.JobSetWebhooks.of(load_config({}))
    response, ops = _mutate(_jobset({Q: "lq"}, suspend=False), off)
    assert response["allowed"] and ops == []


def _validate(new: dict, old: dict | None = None, settings: jw.JobSetWebhooks = ON, *,
              default_queue: bool = False) -> dict:
    async def has_default_queue(name: str) -> bool:
        return default_queue

    reviews = jw.reviewers(settings, None, has_default_queue)  # type: ignore[arg-type]  # no namespace asked
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    return asyncio.run(reviews[jw.VALIDATING_PATH](msgspec.json.encode({"request": request})))["response"]


def _refusal(new: dict, old: dict | None = None, settings: jw.JobSetWebhooks = ON, **kw: Any) -> str | None:
    response = _validate(new, old, settings, **kw)
    assert response["allowed"] is ("status" not in response)
    return response["status"]["message"] if "status" in response else None


def test_a_created_jobsets_queue_name_and_max_execution_time_are_checked() -> None:
    assert _refusal(_jobset({Q: "lq", MAX_EXEC: "60"})) is None
    assert _refusal(_jobset({Q: "Bad_Queue"})).startswith(f'metadata.labels[{Q}]: Invalid value: "Bad_Queue": ')
    assert _refusal(_jobset({MAX_EXEC: "0"})) == f"metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0"


@pytest.mark.parametrize(("old", "new", "error"), [
    (_jobset({Q: "a"}, suspend=True), _jobset({Q: "b"}, suspend=True), None),
    (_jobset({Q: "a"}, suspend=False), _jobset({Q: "b"}, suspend=False),
     f'metadata.labels[{Q}]: Invalid value: "b": field is immutable'),
    (_jobset({Q: "a", MAX_EXEC: "60"}, suspend=False), _jobset({Q: "a", MAX_EXEC: "90"}, suspend=False),
     f'metadata.labels[{MAX_EXEC}]: Invalid value: "90": field is immutable'),
    (_jobset({Q: "a", MAX_EXEC: "60"}, suspend=True), _jobset({Q: "a", MAX_EXEC: "90"}, suspend=True), None),
    (_jobset({Q: "a", WPC: "low"}, suspend=True), _jobset({Q: "a"}, suspend=True),
     f'metadata.labels[{WPC}]: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload'),
    (_jobset({Q: "a"}, suspend=False), _jobset({Q: "a", WPC: "high"}, suspend=False),
     f'metadata.labels[{WPC}]: Invalid value: "high": WorkloadPriorityClass cannot be added to a non-suspended '
     "workload"),
    (_jobset({Q: "a", WPC: "low"}, suspend=False), _jobset({Q: "a", WPC: "high"}, suspend=False), None),
])
def test_what_an_update_may_change(old: dict, new: dict, error: str | None) -> None:
    assert _refusal(new, old) == error


def test_the_update_rules_come_before_the_create_rules() -> None:
    old, new = _jobset({Q: "a"}, suspend=False), _jobset({Q: "a", MAX_EXEC: "x"}, suspend=False)
    assert _refusal(new, old) == (f'[metadata.labels[{MAX_EXEC}]: Invalid value: "x": field is immutable, '
                                  f'metadata.labels[{MAX_EXEC}]: Invalid value: "x": strconv.Atoi: parsing "x": '
                                  "invalid syntax]")


def test_the_queue_name_stays_where_the_namespace_has_a_default_local_queue() -> None:
    old, new = _jobset({Q: "a"}, suspend=True), _jobset({}, suspend=True)
    assert _refusal(new, old, default_queue=True) == (
        f'metadata.labels[{Q}]: Invalid value: "": queue-name must not be empty in namespace with default queue')
    assert _refusal(new, old) is None


def test_each_replicated_jobs_tas_annotations_are_checked_under_the_gate_on_by_default() -> None:
    both = _jobset({Q: "lq"}, worker_annotations={REQUIRED: "rack", PREFERRED: "block"})
    at = "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
    assert _refusal(both) == (
        f'{at}: Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", "{PREFERRED}", '
        '"kueue.x-k8s.io/podset-unconstrained-topology"]')
    assert _refusal(both, settings=NO_TAS) is None, "no TAS check with the gate off"


def test_a_slice_is_no_larger_than_its_replicated_jobs_pod_set() -> None:
    """The workers' pod set holds replicas × parallelism = 4 pods."""
    def sliced(size: str) -> dict:
        return _jobset({Q: "lq"}, worker_annotations={REQUIRED: "block", SLICE_REQUIRED: "rack", SLICE_SIZE: size})

    assert _refusal(sliced("4"), settings=ON) is None
    assert _refusal(sliced("5"), settings=ON) == (
        f"spec.replicatedJobs[1].template.spec.template.metadata.annotations[{SLICE_SIZE}]: "
        'Invalid value: "5": must not be greater than pod set count 4')


def test_the_framework_off_refuses_nothing() -> None:
    off = jw.JobSetWebhooks.of(load_config({}))
    assert _refusal(_jobset({Q: "Bad_Queue"}), settings=off) is None
    assert _refusal(_jobset({Q: "Bad_Queue"})) is not None


@pytest.mark.parametrize("on", [True, False])
def test_the_jobset_webhooks_fail_closed_only_while_the_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mhook = next(w for w in mutating_configuration(ca, url="https://h", jobsets=on)["webhooks"]
                 if w["name"] == "mjobset.kb.io")
    vhook = next(w for w in validating_configuration(ca, url="https://h", jobsets=on)["webhooks"]
                 if w["name"] == "vjobset.kb.io")
    for hook, path, operations in ((mhook, "/mutate-jobset-x-k8s-io-v1alpha2-jobset", ["CREATE"]),
                                   (vhook, "/validate-jobset-x-k8s-io-v1alpha2-jobset", ["CREATE", "UPDATE"])):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"] == [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"],
                                  "operations": operations, "resources": ["jobsets"], "scope": "Namespaced"}]
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
