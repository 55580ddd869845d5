"""The Pod webhook's answer to an AdmissionReview (Kueue's ``mpod.kb.io``): the managed label, the finalizer and
the admission gate for a queued Pod in a managed namespace, nothing otherwise, and nothing at all while the Kueue
Configuration leaves the pod integration off (its default)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s.certs import self_signed
from connectors.k8s.child_jobs import OwnerMissing
from connectors.k8s.errors import KubeError, NotFound
from connectors.k8s.pod_webhook import PodDefaulting, controller_of, pod_patch, review, reviewer
from connectors.k8s.webhook import configuration
from kueue_es.scheduler.config import DEFAULT, load_config

Q = "kueue.x-k8s.io/queue-name"
GATED = [{"op": "add", "path": "/metadata/finalizers", "value": ["kueue.x-k8s.io/managed"]},
         {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "kueue.x-k8s.io/admission"}]}]
TAS_GATED = [GATED[0], {"op": "add", "path": "/spec/schedulingGates",
                        "value": [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}]}]
"""What the review adds under Kueue's defaults, TopologyAwareScheduling on: the topology gate too."""
ON = PodDefaulting.of(load_config({"integrations": {"frameworks": ["batch/job", "pod"]}}))
ROLE_OP = {"op": "add", "path": "/metadata/annotations", "value": {"kueue.x-k8s.io/role-hash": "7aa6c7b8"}}
"""The first operation for a Pod made Kueue's without annotations: its role (Kueue's ``addRoleHash``)."""


def _pod(labels: dict | None = None, owner: dict | None = None, **spec: Any) -> dict:
    meta: dict = {"name": "p", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_a_queued_pod_gets_the_managed_label_the_finalizer_and_the_admission_gate() -> None:
    assert pod_patch(_pod({Q: "lq"}), default_queue=False) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1managed", "value": "true"}, *GATED]


def test_what_the_pod_has_already_is_kept_and_added_to() -> None:
    pod = _pod({Q: "lq", "kueue.x-k8s.io/managed": "true"}, schedulingGates=[{"name": "other"}])
    pod["metadata"]["finalizers"] = ["mine"]
    assert pod_patch(pod, default_queue=False) == [
        {"op": "add", "path": "/metadata/finalizers/-", "value": "kueue.x-k8s.io/managed"},
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "kueue.x-k8s.io/admission"}}]


def test_a_pod_without_a_queue_gets_the_default_one_or_nothing() -> None:
    assert pod_patch(_pod(), default_queue=True) == [
        {"op": "add", "path": "/metadata/labels", "value": {Q: "default", "kueue.x-k8s.io/managed": "true"}},
        *GATED]
    assert pod_patch(_pod({"app": "x"}), default_queue=False) == []


def _review(pod: dict, defaulting: PodDefaulting = ON, *, ns_labels: dict | None = None,
            default_queue: bool = False, job_queued: bool | Exception = False,
            default_class: bool | None = None) -> tuple[dict, list[str]]:
    """``default_class``: whether a WorkloadPriorityClass ``default`` exists (None: the gate off, no lookup)."""
    asked: list[str] = []

    async def namespace_labels(name: str) -> dict[str, str]:
        asked.append(f"namespace {name}")
        return {"kubernetes.io/metadata.name": name, **(ns_labels or {})}

    async def has_default_queue(name: str) -> bool:
        asked.append(f"default queue {name}")
        return default_queue

    async def managed_ancestry(namespace: str, obj: dict) -> bool:  # the walk, its one parent a Job
        asked.append(f"job {controller_of(obj)['name']}")  # type: ignore[index]
        if isinstance(job_queued, Exception):
            raise job_queued
        return job_queued

    async def has_default_priority_class() -> bool:
        asked.append("default priority class")
        return bool(default_class)

    body = msgspec.json.encode({"request": {"uid": "u1", "operation": "CREATE", "namespace": "team", "object": pod}})
    lookups: dict[str, Any] = {} if default_class is None else {"has_default_priority_class": has_default_priority_class}
    out = asyncio.run(review(body, defaulting, namespace_labels, has_default_queue, managed_ancestry, **lookups))
    return out["response"], asked


def _ops(response: dict) -> list[dict]:
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def test_off_by_default_every_pod_is_allowed_unchanged_without_a_lookup() -> None:
    assert DEFAULT.frameworks == ("batch/job",) and not DEFAULT.manages_pods
    response, asked = _review(_pod({Q: "lq"}), PodDefaulting.of(DEFAULT))
    assert response == {"uid": "u1", "allowed": True} and asked == []


def test_on_a_queued_pod_in_a_managed_namespace_is_gated() -> None:
    response, asked = _review(_pod({Q: "lq"}))
    assert response["allowed"] and response["patchType"] == "JSONPatch"
    assert _ops(response)[-2:] == TAS_GATED and asked == ["namespace team"]


P = "kueue.x-k8s.io/priority-class"


def _labels(response: dict) -> dict[str, str]:
    """The Pod's labels the patch adds."""
    out: dict[str, str] = {}
    for op in _ops(response):
        if op["path"] == "/metadata/labels":
            out.update(op["value"])
        elif op["path"].startswith("/metadata/labels/"):
            out[op["path"].removeprefix("/metadata/labels/").replace("~1", "/")] = op["value"]
    return out


def test_a_pod_made_kueues_naming_no_priority_class_gets_the_default_workload_priority_class() -> None:
    """Kueue's pod webhook TestDefault "default WorkloadPriorityClass is applied when feature gate is enabled and
    pod has no priority class label": the label, so that the Pod's Workload has that class's priority."""
    response, asked = _review(_pod({Q: "lq"}), default_class=True)
    assert _labels(response) == {P: "default", "kueue.x-k8s.io/managed": "true"}
    assert asked == ["namespace team", "default priority class"]
    response, _ = _review(_pod(), default_queue=True, default_class=True)
    assert _labels(response) == {Q: "default", P: "default", "kueue.x-k8s.io/managed": "true"}


@pytest.mark.parametrize(("labels", "default_class", "asked"), [
    ({Q: "lq", P: "high"}, True, ["namespace team"]),
    ({Q: "lq"}, False, ["namespace team", "default priority class"]),
    ({Q: "lq"}, None, ["namespace team"]),
    ({"app": "x"}, True, ["namespace team", "default queue team"]),
], ids=["names-a-class", "no-default-class", "gate-off", "not-kueues"])
def test_no_default_priority_class_is_given_otherwise(labels: dict, default_class: bool | None,
                                                     asked: list[str]) -> None:
    """The sibling cases: a Pod naming a class keeps it, none named ``default`` or the gate
    (``WorkloadPriorityClassDefaulting``) off gives none, and a Pod left as made is left as made."""
    response, seen = _review(_pod(labels), default_class=default_class)
    assert P not in _labels(response) or _labels(response)[P] == labels.get(P)
    assert seen == asked


def test_the_served_reviewer_asks_the_lookup_it_is_given() -> None:
    """What the server wires (:func:`connectors.k8s.webhook.serve` gives it the Job webhooks' lookup, None while
    the gate is off) is what the review asks."""

    class NamespaceClient:
        async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
            return msgspec.json.encode({"metadata": {"name": name, "labels": {}}})

    async def no(*_: Any) -> bool:
        return False

    async def yes() -> bool:
        return True

    body = msgspec.json.encode({"request": {"uid": "u1", "operation": "CREATE", "namespace": "team",
                                            "object": _pod({Q: "lq"})}})
    for lookup, wanted in ((yes, {P: "default"}), (None, {})):
        out = asyncio.run(reviewer(NamespaceClient(), ON, no, no, lookup)(body))  # type: ignore[arg-type]
        assert {k: v for k, v in _labels(out["response"]).items() if k == P} == wanted


def test_a_pod_its_parent_holds_gets_no_default_priority_class() -> None:
    """Held by its parent's template (``pod-suspending-parent``), the Pod skips Kueue's defaulting, this too."""
    pod = _pod({Q: "lq"})
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}
    response, asked = _review(pod, default_class=True)
    assert P not in _labels(response) and asked == []


def test_a_namespace_the_selector_leaves_out_is_left_alone() -> None:
    selective = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]},
                                              "managedJobsNamespaceSelector": {"matchLabels": {"kueue": "on"}}}))
    assert _ops(_review(_pod({Q: "lq"}), selective)[0]) == []
    assert _ops(_review(_pod({Q: "lq"}), selective, ns_labels={"kueue": "on"})[0])[-2:] == TAS_GATED
    response, _ = _review(_pod({Q: "lq"}), PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]},
                                                                         "namespace": "team"})))
    assert _ops(response) == [], "Kueue's own namespace is left out by default"


def test_the_pods_of_a_queued_job_are_the_job_integrations() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j", "controller": True}
    response, asked = _review(_pod({Q: "lq"}, owner), job_queued=True)
    assert _ops(response) == [] and asked == ["namespace team", "job train"]
    assert _ops(_review(_pod({Q: "lq"}, owner), job_queued=False)[0])[-2:] == TAS_GATED, "a Job Kueue does not manage"
    other = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}
    assert _review(_pod({Q: "lq"}, other))[1] == ["namespace team"], "not a Job: not looked up"


def test_a_failed_walk_refuses_the_pod() -> None:
    """As the other webhooks refuse an object whose ancestors cannot be walked
    (:func:`connectors.k8s.child_jobs.refusal_status`): a parent not there 404, one that cannot be read 500."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "gone", "uid": "j", "controller": True}
    response, _ = _review(_pod({Q: "lq"}, owner), job_queued=OwnerMissing("Job team/gone, controller of a job, not found"))
    assert response["allowed"] is False and response["status"]["code"] == 404
    assert response["status"]["message"] == "Job team/gone, controller of a job, not found"
    response, _ = _review(_pod({Q: "lq"}, owner), job_queued=KubeError("apiserver unreachable"))
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert response["status"]["message"].startswith("failed to get the object's owner")


def test_the_pod_webhook_walks_past_an_unqueued_job_to_a_queued_jobset() -> None:
    """Kueue's pod webhook runs the whole ancestor walk (FindAncestorJobManagedByKueue), not a look at a Job owner
    alone: a queued Pod under a Job naming no queue under a queued JobSet is the JobSet's, left as made (before,
    the unqueued Job was read alone and the Pod gated, held by a gate no integration would lift); under an
    unqueued JobSet it is gated."""
    from connectors.k8s.webhook import ancestry_lookup

    frameworks = {"integrations": {"frameworks": ["batch/job", "pod", "jobset.x-k8s.io/jobset"]}}
    config = load_config(frameworks)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "driver", "uid": "uid-driver", "controller": True}
    pod = _pod({Q: "lq"}, owner)
    for jobset_labels, gated in (({Q: "lq"}, False), ({}, True)):
        api = _Apiserver(("Job", "driver", {"uid": "uid-driver", "labels": {}, "ownerReferences": [
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "uid-js",
             "controller": True}]}), ("JobSet", "js", {"uid": "uid-js", "labels": jobset_labels}))

        async def no(*_: object) -> bool:
            return False

        async def ns_labels(name: str) -> dict[str, str]:
            return {}

        body = msgspec.json.encode({"request": {"uid": "u1", "operation": "CREATE", "namespace": "team",
                                                "object": pod}})
        out = asyncio.run(review(body, PodDefaulting.of(config), ns_labels, no,
                                 ancestry_lookup(api, config)))["response"]  # type: ignore[arg-type]
        assert (_ops(out)[-2:] == TAS_GATED) is gated, jobset_labels
        assert api.reads == [("Job", "driver"), ("JobSet", "js")]


class _Apiserver:
    """Answers GETs as the client does (the body's bytes), recording them."""

    def __init__(self, *objects: tuple[str, str, dict]) -> None:
        self.objects = {(kind, name): {"metadata": {"name": name, "namespace": "team", **meta}}
                        for kind, name, meta in objects}
        self.reads: list[tuple[str, str]] = []

    async def get(self, resource: object, name: str, namespace: str = "", subresource: str = "") -> bytes:
        kind = resource.kind  # type: ignore[attr-defined]
        self.reads.append((kind, name))
        if (kind, name) not in self.objects:
            raise NotFound(f"{kind} {name} not found", 404, "NotFound")
        return msgspec.json.encode(self.objects[(kind, name)])


def test_an_unlabelled_pod_asks_for_the_default_queue() -> None:
    response, asked = _review(_pod(), default_queue=True)
    assert _ops(response)[:2] == [ROLE_OP, {"op": "add", "path": "/metadata/labels",
                                            "value": {Q: "default", "kueue.x-k8s.io/managed": "true"}}]
    assert asked == ["namespace team", "default queue team"]


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE"])
def test_only_creation_is_looked_at(operation: str) -> None:
    async def never(*_: Any) -> Any:
        raise AssertionError("looked up")

    body = msgspec.json.encode({"request": {"uid": "u", "operation": operation, "object": _pod({Q: "lq"})}})
    out = asyncio.run(review(body, ON, never, never, never))
    assert out["response"] == {"uid": "u", "allowed": True}


@pytest.mark.parametrize("on", [True, False])
def test_the_registration_carries_kueues_pod_webhook_beside_the_jobs(on: bool) -> None:
    doc = configuration(self_signed(["127.0.0.1"]).ca_pem, service=("kueue-es-webhook", "kueue-system", 443),
                        excluded_namespaces=("kube-system", "kueue-system"), pods=on)
    pods = next(w for w in doc["webhooks"] if w["name"] == "mpod.kb.io")
    assert pods["clientConfig"]["service"]["path"] == "/mutate--v1-pod"
    assert pods["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert pods["failurePolicy"] == ("Fail" if on else "Ignore"), "fail-closed only while the integration is on"
    assert pods["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}
    jobs = next(w for w in doc["webhooks"] if w["name"] == "mjob.kb.io")
    assert jobs["clientConfig"]["caBundle"] == pods["clientConfig"]["caBundle"] and jobs["failurePolicy"] == "Fail"


def test_a_group_pod_made_kueues_gets_its_role_and_the_mutating_webhook_refuses_nothing() -> None:
    pod = _pod({Q: "lq", "kueue.x-k8s.io/pod-group-name": "g"})
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    response, _ = _review(pod)
    assert {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1role-hash", "value": "7aa6c7b8"} in _ops(
        response)
    response, _ = _review(_pod({Q: "lq", "kueue.x-k8s.io/pod-group-name": "g"}))
    assert response["allowed"] is True and "status" not in response, (
        "a malformed group is the validating webhook's to refuse (tests/k8s/test_pod_validation_review.py)")


@pytest.mark.parametrize("gate", [True, False], ids=["gate-on", "gate-off"])
def test_every_pod_made_kueues_gets_its_role_whatever_names_its_group(gate: bool) -> None:
    """Kueue's ``Default`` records the role of each Pod it gates, in a group (named in the label or, under
    ``WorkloadIdentifierAnnotations``, the annotation) or not."""
    pod = _pod({Q: "lq"})
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-name": "g", "kueue.x-k8s.io/pod-group-total-count": "2"}
    defaulting = PodDefaulting.of(load_config({"integrations": {"frameworks": ["batch/job", "pod"]},
                                               "featureGates": {"WorkloadIdentifierAnnotations": gate}}))
    role = {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1role-hash", "value": "7aa6c7b8"}
    response, _ = _review(pod, defaulting)
    assert role in _ops(response)
    response, _ = _review(_pod({Q: "lq"}), defaulting)
    assert {"op": "add", "path": "/metadata/annotations",
            "value": {"kueue.x-k8s.io/role-hash": "7aa6c7b8"}} in _ops(response), "a single Pod too"


# --- manageJobsWithoutQueueName ---------------------------------------------------------------------------------

UNQUEUED_ON = PodDefaulting.of(load_config({"integrations": {"frameworks": ["batch/job", "pod"]},
                                            "manageJobsWithoutQueueName": True}))


def test_under_the_option_a_pod_naming_no_queue_is_gated_without_a_queue_name() -> None:
    response, asked = _review(_pod({"app": "x"}), UNQUEUED_ON)
    assert _ops(response) == [
        ROLE_OP, {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1managed", "value": "true"},
        *TAS_GATED]
    assert asked == ["namespace team", "default queue team"]
    response, _ = _review(_pod({"app": "x"}), UNQUEUED_ON, default_queue=True)
    assert _ops(response)[1] == {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name",
                                 "value": "default"}, "the default LocalQueue still comes first"
    assert _ops(_review(_pod({"app": "x"}), ON)[0]) == [], "without the option: not Kueue's"


@pytest.mark.parametrize(("kind", "api_version"), [("Job", "batch/v1"), ("Pod", "v1")])
def test_under_the_option_every_job_or_pod_parent_is_kueues_whatever_its_queue(kind: str, api_version: str) -> None:
    owner = {"apiVersion": api_version, "kind": kind, "name": "parent", "uid": "u", "controller": True}
    response, asked = _review(_pod({Q: "lq"}, owner), UNQUEUED_ON)
    assert _ops(response) == [] and asked == ["namespace team"], "no need to read the parent"


def test_under_the_option_a_namespace_left_out_keeps_its_pods() -> None:
    selective = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]},
                                              "manageJobsWithoutQueueName": True,
                                              "managedJobsNamespaceSelector": {"matchLabels": {"kueue": "on"}}}))
    assert _ops(_review(_pod({"app": "x"}), selective)[0]) == []


# --- the MPIJob integration ------------------------------------------------------------------------------------

MPIJOB_OWNER = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": "m", "controller": True}


@pytest.mark.parametrize("without_queue", [False, True])
def test_with_the_mpijob_integration_on_an_mpijobs_worker_pods_are_its_own(without_queue: bool) -> None:
    """The MPI operator makes the workers' Pods with the MPIJob as their controller: Kueue's pod webhook leaves a
    Pod whose owner an enabled integration runs (the MPIJob's Workload admits them); gated here, no integration
    would ever lift the gate."""
    config = {"integrations": {"frameworks": ["batch/job", "pod", "kubeflow.org/mpijob"]},
              "manageJobsWithoutQueueName": without_queue}
    labels = {"app": "x"} if without_queue else {Q: "lq"}
    response, _ = _review(_pod(labels, MPIJOB_OWNER), PodDefaulting.of(load_config(config)))
    assert _ops(response) == []
    config["integrations"] = {"frameworks": ["batch/job", "pod"]}
    response, _ = _review(_pod(labels, MPIJOB_OWNER), PodDefaulting.of(load_config(config)))
    assert _ops(response)[-2:] == TAS_GATED, "the MPIJob integration off: a Pod like any other"


# --- the Kubeflow training-job integrations ---------------------------------------------------------------------

PYTORCHJOB_OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pt", "uid": "p",
                    "controller": True}


@pytest.mark.parametrize("without_queue", [False, True])
def test_with_the_pytorchjob_integration_on_a_pytorchjobs_pods_are_its_own(without_queue: bool) -> None:
    """The training operator makes a PyTorchJob's Pods with the job as their controller: left to it while its
    integration is on (its Workload admits them), a Pod like any other while it is off."""
    config = {"integrations": {"frameworks": ["batch/job", "pod", "kubeflow.org/pytorchjob"]},
              "manageJobsWithoutQueueName": without_queue}
    labels = {"app": "x"} if without_queue else {Q: "lq"}
    response, _ = _review(_pod(labels, PYTORCHJOB_OWNER), PodDefaulting.of(load_config(config)))
    assert _ops(response) == []
    config["integrations"] = {"frameworks": ["batch/job", "pod", "kubeflow.org/tfjob"]}
    response, _ = _review(_pod(labels, PYTORCHJOB_OWNER), PodDefaulting.of(load_config(config)))
    assert _ops(response)[-2:] == TAS_GATED, "the PyTorchJob integration off: a Pod like any other"


# --- the RayCluster integration --------------------------------------------------------------------------------

RAYCLUSTER_OWNER = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "r", "controller": True}


@pytest.mark.parametrize("without_queue", [False, True])
def test_with_the_raycluster_integration_on_a_rayclusters_pods_are_its_own(without_queue: bool) -> None:
    """KubeRay makes the head's and workers' Pods with the RayCluster as their controller: left to it, as Kueue's
    pod webhook leaves a Pod whose owner an enabled integration runs; the integration off, a Pod like any other."""
    config = {"integrations": {"frameworks": ["batch/job", "pod", "ray.io/raycluster"]},
              "manageJobsWithoutQueueName": without_queue}
    labels = {"app": "x"} if without_queue else {Q: "lq"}
    response, _ = _review(_pod(labels, RAYCLUSTER_OWNER), PodDefaulting.of(load_config(config)))
    assert _ops(response) == []
    config["integrations"] = {"frameworks": ["batch/job", "pod", "ray.io/rayjob"]}
    response, _ = _review(_pod(labels, RAYCLUSTER_OWNER), PodDefaulting.of(load_config(config)))
    assert _ops(response)[-2:] == TAS_GATED, "the RayCluster integration off: a Pod like any other"


# --- manageJobsWithoutQueueName: any parent an enabled integration runs -------------------------------------------

JOBSET_OWNER = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "j",
                "controller": True}
RAYJOB_OWNER = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "r", "controller": True}


@pytest.mark.parametrize("owner", [JOBSET_OWNER, RAYJOB_OWNER])
def test_under_manage_jobs_without_queue_name_a_pod_of_any_enabled_kind_is_its_parents(owner: dict) -> None:
    """Under ``manageJobsWithoutQueueName`` Kueue's pod webhook leaves a Pod whose controller is of any kind an
    enabled integration runs (its ancestor walk takes that parent as managed, queue name or not), not only a Job's
    or a Pod's (before, a JobSet's or a RayJob's Pod was gated, and no integration would lift the gate); a Pod like
    any other while that integration is off, and a Job's Pod is gated while ``batch/job`` is off."""
    frameworks = ["batch/job", "pod", "jobset.x-k8s.io/jobset", "ray.io/rayjob"]
    config = {"integrations": {"frameworks": frameworks}, "manageJobsWithoutQueueName": True}
    response, _ = _review(_pod({"app": "x"}, owner), PodDefaulting.of(load_config(config)))
    assert _ops(response) == []
    config["integrations"] = {"frameworks": ["batch/job", "pod"]}
    response, _ = _review(_pod({"app": "x"}, owner), PodDefaulting.of(load_config(config)))
    assert _ops(response)[-2:] == TAS_GATED, "its integration off: a Pod like any other"
    job_owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "jj", "controller": True}
    config["integrations"] = {"frameworks": ["pod"]}
    response, _ = _review(_pod({"app": "x"}, job_owner), PodDefaulting.of(load_config(config)))
    assert _ops(response)[-2:] == TAS_GATED, "batch/job off: a Job is no parent Kueue runs"


def test_a_queued_jobs_pod_is_gated_while_the_job_integration_is_off() -> None:
    """Kueue's walk follows a Job only while ``batch/job`` is enabled: with it off, a Pod naming a queue under a
    queued Job is a Pod like any other, and the Job is not read."""
    job_owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "jj", "controller": True}
    response, asked = _review(_pod({Q: "lq"}, job_owner), PodDefaulting.of(load_config(
        {"integrations": {"frameworks": ["pod"]}})), job_queued=True)
    assert _ops(response)[-2:] == TAS_GATED and "job j" not in asked
    response, _ = _review(_pod({Q: "lq"}, job_owner), ON, job_queued=True)
    assert _ops(response) == [], "batch/job on: the queued Job's Workload admits it"


RS_OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "r", "controller": True}
WITH_DEPLOYMENTS = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod", "deployment"]}}))


def _review_rs(pod: dict, defaulting: PodDefaulting, deployment: dict | None | Exception) -> tuple[dict, list[str]]:
    """:func:`review` of a Pod whose ReplicaSet is controlled by ``deployment`` (its metadata; None: no Deployment;
    an exception: the read fails)."""
    asked: list[str] = []

    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return False

    async def managed_ancestry(namespace: str, obj: dict) -> bool:
        raise AssertionError("a ReplicaSet is no kind an integration runs: not walked that way")

    async def deployment_of(namespace: str, replica_set: str) -> dict | None:
        asked.append(f"replicaset {namespace}/{replica_set}")
        if isinstance(deployment, Exception):
            raise deployment
        return deployment

    body = msgspec.json.encode({"request": {"uid": "u1", "operation": "CREATE", "namespace": "team", "object": pod}})
    out = asyncio.run(review(body, defaulting, namespace_labels, has_default_queue, managed_ancestry, deployment_of))
    return out["response"], asked


def test_a_pod_without_the_parents_annotation_is_looked_through_its_replicaset_to_a_queued_deployment() -> None:
    """As Kueue's walk, which passes over a ReplicaSet to its controller: with the ``deployment`` integration on,
    a Pod of a Deployment naming a queue (here without ``kueue.x-k8s.io/pod-suspending-parent``, say made before
    the Deployment was Kueue's) is the Deployment's and left as made, queue name of its own or not; a Deployment
    naming none leaves it a plain Pod (any, under ``manageJobsWithoutQueueName``); a ReplicaSet or Deployment that
    cannot be read refuses it."""
    queued = {"name": "web", "labels": {Q: "lq"}}
    response, asked = _review_rs(_pod({Q: "lq"}, RS_OWNER), WITH_DEPLOYMENTS, queued)
    assert _ops(response) == [] and asked == ["replicaset team/web-5d8f"]
    assert _ops(_review_rs(_pod({}, RS_OWNER), WITH_DEPLOYMENTS, queued)[0]) == []
    assert _ops(_review_rs(_pod({Q: "lq"}, RS_OWNER), WITH_DEPLOYMENTS, {"name": "web"})[0])[-1]["path"] == (
        "/spec/schedulingGates"), "a Deployment naming no queue: a queued plain Pod"
    assert _ops(_review_rs(_pod({Q: "lq"}, RS_OWNER), WITH_DEPLOYMENTS, None)[0]) != [], "no Deployment above"
    without_queue = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod", "deployment"]},
                                                  "manageJobsWithoutQueueName": True}))
    assert _ops(_review_rs(_pod({}, RS_OWNER), without_queue, {"name": "web"})[0]) == []
    pods_only = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]}}))
    response, asked = _review_rs(_pod({Q: "lq"}, RS_OWNER), pods_only, queued)
    assert _ops(response) != [] and asked == [], "the deployment integration off: not looked through"
    response, _ = _review_rs(_pod({Q: "lq"}, RS_OWNER), WITH_DEPLOYMENTS, NotFound("replicasets web-5d8f not found"))
    assert response["allowed"] is False and response["status"]["code"] == 500


@pytest.mark.parametrize("parent", ["deployment", "statefulset", "leaderworkerset"])
def test_a_pod_its_parent_holds_is_gated_without_kueues_finalizer(parent: str) -> None:
    """Kueue #8530 (``SkipFinalizersForPodsSuspendedByParent``, GA in v0.18, gone from v0.20's gates): a pod
    carrying ``kueue.x-k8s.io/pod-suspending-parent`` gets the gates but no ``kueue.x-k8s.io/managed`` finalizer,
    its parent's controller replacing it; a finalizer of its own is kept. A plain queued pod still gets one."""
    pod = _pod({Q: "lq", "kueue.x-k8s.io/managed": "true"})
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-suspending-parent": parent}
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": pod}})

    async def no_lookup(*args: Any) -> Any:
        raise AssertionError("no lookup for a pod its parent holds")

    response = asyncio.run(review(body, ON, no_lookup, no_lookup, no_lookup))["response"]
    role = {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1role-hash", "value": "7aa6c7b8"}
    assert _ops(response) == [role, TAS_GATED[1]], "its role too, as Kueue's Default records it"
    pod["metadata"]["finalizers"] = ["mine"]
    assert pod_patch(pod, default_queue=False, tas=True, by_parent=True) == [TAS_GATED[1]]
    assert GATED[0] in pod_patch(_pod({Q: "lq"}), default_queue=False), "a plain pod: finalized as before"


@pytest.mark.parametrize("marked", [True, False])
def test_with_only_a_leaderworkerset_listed_the_whole_pod_integration_answers(marked: bool) -> None:
    """Kueue since v0.15 (#6736) sets the pod integration up for a listed LeaderWorkerSet integration, its webhook
    with the Configuration's options: a pod the set's templates marked is gated, and so is a plain queued pod in a
    managed namespace, as with ``pod`` listed."""
    lws_only = PodDefaulting.of(load_config({"integrations": {"frameworks": ["leaderworkerset.x-k8s.io/leaderworkerset"]}}))
    assert lws_only.enabled
    pod = _pod({Q: "lq"})
    if marked:
        pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset"}
    response, asked = _review(pod, lws_only)
    assert _ops(response)[-1] == TAS_GATED[1]
    assert asked == ([] if marked else ["namespace team"])
