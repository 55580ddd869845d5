"""MultiKueue's adapters on the connector's side, as data and pure functions: for each owner kind Kueue's
MultiKueue runs on a worker (:data:`ADAPTERS`, keyed by (apiVersion, kind); custom kinds' generic adapters,
once :func:`connectors.k8s.discovery.discover` found their resource), how the copy created there is made of
the manager's owner (:func:`owner_copy`, from the owner as
it was before its integration started it, :func:`as_before_start`; the Workload's copy, :func:`workload_copy`), how
a copy's status is mirrored back (:func:`replacing_patch`, a Pod's :func:`pod_status`), how many Workloads a
LeaderWorkerSet makes (:func:`group_size`), and what of a manager's owner is kept for its spec edits to be forwarded
(:func:`synced_owner`). The connector that applies them is :mod:`connectors.k8s.multikueue`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

import msgspec

from connectors.k8s import appwrapper, jobset, kubeflow, mpijob, raycluster, rayjob, rayservice, trainjob
from connectors.k8s import leaderworkerset as lws
from connectors.k8s import statefulset_multikueue as sts_mk
from connectors.k8s.errors import KubeError
from connectors.k8s.framework_webhook import suspended, value_at
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.multikueue_identifiers import place_prebuilt
from connectors.k8s.pod_roles import GROUP_LABEL
from connectors.k8s.pod_webhook import ADMISSION_GATE
from connectors.k8s.prebuilt import KEY as PREBUILT_WORKLOAD
from connectors.k8s.resources import (
    APPWRAPPERS,
    BY_KIND,
    JOBSETS,
    KUBEFLOW_JOBS,
    LEADER_WORKER_SETS,
    MPIJOBS,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    STATEFUL_SETS,
    TRAINJOBS,
    Resource,
)
from connectors.k8s.workload_slices import is_slice, unstarted, unstarted_template
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.multikueue import adapters_in_force, external_kinds
from projections import gates
from projections.preemption_gates import MULTIKUEUE_GATE
from projections.workloads import WorkloadInfo

JOBS = BY_KIND["Job"]
MULTIKUEUE_PODS = Resource("Pod", "", "v1", "pods", True, status_subresource=True)
"""Pods as MultiKueue lists them on a worker: every one of its origin, ended or not (not the pod integration's
view of non-terminal Pods only, which would lose a copy's last status)."""
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
JOB_STATUS_FIELDS = ("conditions", "startTime", "completionTime", "active", "succeeded", "failed", "terminating",
                     "completedIndexes", "failedIndexes", "uncountedTerminatedPods", "ready")
"""batch/v1 JobStatus's fields: a mirrored status sets each, to null where the copy has none."""
GENERATED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name")
"""Labels the apiserver puts on a Job's pod template: a copy gets its own."""


def workload_copy(manager_wl: dict[str, Any], origin: str, gated: bool = False) -> dict[str, Any]:
    """The copy of a manager's Workload created on a worker (Kueue's ``cloneForCreate``); ``gated``
    (MultiKueueOrchestratedPreemption): with the ``kueue.x-k8s.io/multikueue`` preemption gate alone in its spec, so
    that it is created closed. The manager Workload's own gates are the manager's and are not copied (Kueue #12587,
    v0.18 and later): one that nothing opens on the worker would keep the copy from ever preempting there."""
    meta = manager_wl.get("metadata") or {}
    spec = copy.deepcopy(manager_wl.get("spec") or {})
    if gated:
        spec["preemptionGates"] = [{"name": MULTIKUEUE_GATE}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin},
                     "annotations": dict(meta.get("annotations") or {})},
        "spec": spec,
    }


WORKLOAD_PRIORITY_CLASS = ("kueue.x-k8s.io", "WorkloadPriorityClass")
POD_PRIORITY_CLASS = ("scheduling.k8s.io", "PriorityClass")


def _priority_class(wl: dict[str, Any]) -> tuple[tuple[str, str] | None, str]:
    """A Workload's ``priorityClassRef`` as ((group, kind) or None, name)."""
    ref = (wl.get("spec") or {}).get("priorityClassRef")
    if not isinstance(ref, dict):
        return None, ""
    return (ref.get("group") or "", ref.get("kind") or ""), ref.get("name") or ""


def priority_patch(manager_wl: dict[str, Any], copy_wl: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch giving the copy ``copy_wl`` of a manager's Workload the manager's ``priorityClassRef`` and
    ``priority`` when its priority changed since the copy was made (its Job's priority-class label edited, the
    class's value changed), as Kueue's MultiKueue controller updates a copy in place (``reconcileGroup`` step 5,
    #8464); None when they agree. As Kueue's ``PriorityChanged``: only a copy on a WorkloadPriorityClass is
    updated, never from a manager Workload on a PriorityClass, and a changed class name or ``spec.priority`` is a
    change (Kueue compares the effective priority, the priority-boost annotation added; a copy keeps the
    annotations it was made with, so only ``spec.priority`` can be brought in line, and only it is compared)."""
    manager_kind, manager_name = _priority_class(manager_wl)
    copy_kind, copy_name = _priority_class(copy_wl)
    if manager_kind == POD_PRIORITY_CLASS or copy_kind != WORKLOAD_PRIORITY_CLASS:
        return None
    manager_spec, copy_spec = manager_wl.get("spec") or {}, copy_wl.get("spec") or {}
    renamed = bool(copy_name) and copy_name != manager_name
    if not renamed and (copy_spec.get("priority") or 0) == (manager_spec.get("priority") or 0):
        return None
    return {"spec": {"priorityClassRef": manager_spec.get("priorityClassRef"),
                     "priority": manager_spec.get("priority")}}


def job_copy(manager_job: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's Job created on the worker that runs it: suspended, on the prebuilt copy of its
    Workload; a started Job's with the pod template the Workload was made from (what the manager's Job integration
    added when it started the Job there is not copied), a suspended one's with its own, as Kueue copies it (labels,
    annotations, node selector or gates the user changed on it after its Workload was made kept). A slice made
    while the Job ran has in its template what the start on an earlier slice wrote: what a start writes by key
    is left out of it, as the stop does (:func:`connectors.k8s.workload_slices.unstarted_template`), or the
    worker's start on its own copy of the slice would conflict with the earlier slice's name."""
    meta = manager_job.get("metadata") or {}
    spec = copy.deepcopy(manager_job.get("spec") or {})
    for key in ("managedBy", "selector", "manualSelector"):
        spec.pop(key, None)
    pod_sets = (manager_wl.get("spec") or {}).get("podSets") or []
    started = bool(pod_sets) and spec.get("suspend") is not True
    template = copy.deepcopy(pod_sets[0].get("template") if started else spec.get("template") or {})
    if started and is_slice((manager_wl.get("metadata") or {}).get("annotations") or {}):
        template = unstarted_template(template)
    labels = {k: v for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()
              if k not in GENERATED_LABELS}
    template.setdefault("metadata", {})["labels"] = labels
    spec["template"] = template
    spec["suspend"] = True
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin,
                                PREBUILT_WORKLOAD: manager_wl["metadata"]["name"]},
                     "annotations": annotations},
        "spec": spec,
    }


def _clone_for_worker(r: Resource, manager_owner: dict[str, Any], manager_wl: dict[str, Any], origin: str
                      ) -> dict[str, Any]:
    """An owner's copy as Kueue's adapters of kinds the log does not hold make it: its labels, annotations and spec,
    the origin label and ``kueue.x-k8s.io/prebuilt-workload-name`` added and ``managedBy`` dropped, so that the
    worker's controller of the kind runs it, on the prebuilt copy of its Workload."""
    meta = manager_owner.get("metadata") or {}
    spec = copy.deepcopy(manager_owner.get("spec") or {})
    spec.pop("managedBy", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    return {
        "apiVersion": r.api_version, "kind": r.kind,
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin,
                                PREBUILT_WORKLOAD: manager_wl["metadata"]["name"]},
                     "annotations": annotations},
        "spec": spec,
    }


def jobset_copy(manager_jobset: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's JobSet created on the worker that runs it (Kueue's JobSet adapter,
    :func:`_clone_for_worker`)."""
    return _clone_for_worker(JOBSETS, manager_jobset, manager_wl, origin)


def suspended_copy(r: Resource, manager_owner: dict[str, Any], manager_wl: dict[str, Any], origin: str
                   ) -> dict[str, Any]:
    """The copy of a manager's owner of kind ``r`` (a RayJob, RayCluster, AppWrapper or TrainJob: Kueue's adapters
    of those kinds) created on the worker that runs it: :func:`_clone_for_worker`, suspended at ``spec.suspend`` as
    the manager's owner is when Kueue copies it (before the manager's workload is admitted; here the copy may be
    made after the manager's integration started it), for the worker's Kueue to start on its prebuilt Workload."""
    clone = _clone_for_worker(r, manager_owner, manager_wl, origin)
    clone["spec"]["suspend"] = True
    return clone


def rayservice_copy(manager_service: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's RayService created on the worker that runs it (Kueue's RayService adapter, the Ray
    kinds' shared one): :func:`_clone_for_worker`, suspended where the RayService integration suspends it
    (``spec.rayClusterConfig.suspend``), for the worker's Kueue to start on its prebuilt Workload, as
    :func:`suspended_copy` does the other Ray kinds."""
    clone = _clone_for_worker(RAYSERVICES, manager_service, manager_wl, origin)
    config = clone["spec"].get(rayservice.CLUSTER_CONFIG)
    clone["spec"][rayservice.CLUSTER_CONFIG] = {**(config if isinstance(config, dict) else {}), "suspend": True}
    return clone


def trainjob_copy(manager_trainjob: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's TrainJob (:func:`suspended_copy`) without the ``podTemplateOverrides`` entries Kueue
    wrote when the manager's integration started it (its flavors' node selectors there): Kueue's TrainJob adapter
    takes its own admission out of the copy, for the worker's Kueue to write its own."""
    clone = suspended_copy(TRAINJOBS, manager_trainjob, manager_wl, origin)
    overrides = [ov for ov in clone["spec"].pop("podTemplateOverrides", None) or [] if not trainjob.is_kueues(ov)]
    if overrides:
        clone["spec"]["podTemplateOverrides"] = overrides
    return clone


def lws_copy(manager_lws: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's LeaderWorkerSet created on the worker its groups run on (Kueue's LWS adapter): its
    labels, annotations and spec, the origin label and the manager's set's UID
    (``kueue.x-k8s.io/multikueue-origin-uid``) added, which the worker's Kueue names the group Workloads it runs
    the set's pods on from, so that they are those the manager copied there. One copy serves every group: no
    ``kueue.x-k8s.io/prebuilt-workload-name``, and no managedBy to drop (the kind has none)."""
    meta = manager_lws.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    return {
        "apiVersion": LEADER_WORKER_SETS.api_version, "kind": LEADER_WORKER_SETS.kind,
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin},
                     "annotations": {**annotations, lws.ORIGIN_UID_ANNOTATION: str(meta.get("uid", ""))}},
        "spec": copy.deepcopy(manager_lws.get("spec") or {}),
    }


def run_policy_copy(manager_owner: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's Kubeflow training job or MPIJob created on the worker that runs it (Kueue's Kubeflow
    and MPIJob adapters): its labels, annotations and spec, Kueue's two labels added and
    ``spec.runPolicy.managedBy`` dropped, so that the worker's operator runs it, on the prebuilt copy of its
    Workload."""
    meta = manager_owner.get("metadata") or {}
    spec = copy.deepcopy(manager_owner.get("spec") or {})
    run_policy = spec.get("runPolicy")
    if isinstance(run_policy, dict):
        run_policy.pop("managedBy", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    return {
        "apiVersion": manager_owner.get("apiVersion", ""), "kind": manager_owner.get("kind", ""),
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin,
                                PREBUILT_WORKLOAD: manager_wl["metadata"]["name"]},
                     "annotations": annotations},
        "spec": spec,
    }


def custom_copy(manager_owner: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's owner of a custom kind (``multiKueue.externalFrameworks``) created on the worker that
    runs it, as Kueue's generic adapter makes it: the whole object, without its resourceVersion and
    ``spec.managedBy`` (so that the worker's controller of the kind runs it), Kueue's two labels added."""
    made = copy.deepcopy(manager_owner)
    meta = made.setdefault("metadata", {})
    meta.pop("resourceVersion", None)
    spec = made.get("spec")
    if isinstance(spec, dict):
        spec.pop("managedBy", None)
    meta["labels"] = {**(meta.get("labels") or {}), PREBUILT_WORKLOAD: manager_wl["metadata"]["name"],
                      ORIGIN_LABEL: origin}
    return made


def pod_copy(manager_pod: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's Pod created on the worker that runs it (Kueue's Pod adapter): its name, namespace,
    labels, annotations and spec alone (no finalizers, owners or status), Kueue's two labels added. The spec keeps
    the admission gate the manager's Pod still has, which the worker's Kueue lifts once the copied Workload is
    admitted there."""
    meta = manager_pod.get("metadata") or {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin,
                                PREBUILT_WORKLOAD: manager_wl["metadata"]["name"]},
                     "annotations": dict(meta.get("annotations") or {})},
        "spec": copy.deepcopy(manager_pod.get("spec") or {}),
    }


def pod_status(manager_pod: dict[str, Any], remote_status: dict[str, Any]) -> dict[str, Any] | None:
    """The status the manager's Pod gets from its copy's ``remote_status`` (Kueue's Pod adapter): the copy's
    whole, except that a manager's Pod still gated keeps its own ``PodScheduled`` condition (``SchedulingGated``)
    until the copy is scheduled (#12262: the copy's ``Unschedulable`` would make that cluster's autoscaler scale up
    for a Pod that never runs there); the copy's ``PodScheduled=True`` is taken, so a Pod that runs or ran on its
    worker shows it (#13136, in v0.20). None: nothing is written, the manager's Pod being deleted."""
    meta = manager_pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    status = copy.deepcopy(remote_status)
    gated = any(g.get("name") == ADMISSION_GATE for g in (manager_pod.get("spec") or {}).get("schedulingGates") or [])
    own = next((c for c in (manager_pod.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled"), None)
    conditions = status.get("conditions") or []
    at = next((i for i, c in enumerate(conditions) if c.get("type") == "PodScheduled"), None)
    if gated and own is not None and (at is None or conditions[at].get("status") != "True"):
        status["conditions"] = ([*conditions[:at], own, *conditions[at + 1:]] if at is not None
                                else [*conditions, own])
    return status


def replacing_patch(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``current`` into ``wanted`` whole: each of ``wanted``'s fields, a field only
    ``current`` has nulled, down into the maps both have (a Kubeflow job's ``replicaStatuses`` per replica type),
    where a merge would keep a count the copy dropped."""
    out: dict[str, Any] = dict.fromkeys(k for k in current if k not in wanted)
    for key, value in wanted.items():
        old = current.get(key)
        out[key] = replacing_patch(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    return out


class Adapter(NamedTuple):
    """The connector's side of one of Kueue's MultiKueue adapters (the pure side's is
    :data:`kueue_es.scheduler.multikueue.ADAPTERS`, keyed alike)."""

    resource: Resource
    """Where owners of its kind are, on the manager and on the workers."""
    make_copy: Any
    """(manager owner, manager Workload, origin) -> the owner's copy created on the worker."""
    in_log: bool
    """The log holds owners of its kind (a Job): its managedBy and suspension are read there; else its managedBy
    is read from the manager's apiserver and appended (``OwnerObserved``)."""
    status_fields: tuple[str, ...] = ()
    """Its status's fields, each set by a mirrored status (to null where the copy has none); empty: those the
    manager's owner has when mirrored."""
    managed_by_at: tuple[str, ...] = ("spec", "managedBy")
    """The keys down to its managedBy, for an owner the log does not hold; empty: the kind has none, and its
    adapter takes every owner as MultiKueue's without reading it (a Pod)."""
    cleared_under: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(feature gate, keys down to a field): fields its copy goes without while the gate is on."""
    stop_patch: Any = None
    """(raw owner, its Workload's pod sets) -> the merge patch its integration stops it with (suspended, each pod
    template as the Workload recorded it): what the copy of a started owner is made from (:func:`as_before_start`);
    None: the owner is copied as it is."""
    suspend_at: tuple[str, ...] = ("spec", "suspend")
    """The keys down to its suspend flag."""
    mirrors_status: bool = True
    """Its copy's status is written to the manager's owner. Not a LeaderWorkerSet's: its controller on the
    manager, which no managedBy stops, would write its own over it at once (Kueue's LWS adapter copies none)."""
    mirrored: Any = None
    """(the manager's owner, its copy's status) -> the status the manager's owner is given (None: none now);
    unset: the copy's as it is."""
    group_label: str = ""
    """A label whose value, on the owner, names a group of objects of its kind the Workload runs on together (a
    pod group's ``kueue.x-k8s.io/pod-group-name``): each of them is copied and mirrored."""
    grouped: bool = False
    """Its owner makes several Workloads (one per LeaderWorkerSet group) and one copy of it serves them all on
    their worker: not its managedBy but its replicas are read (``OwnerObserved``), and it is deleted with any of
    its Workloads' copies, as Kueue's LWS adapter deletes it."""


RUN_POLICY_MANAGED_BY = ("spec", "runPolicy", "managedBy")
RUN_POLICY_SUSPEND = ("spec", "runPolicy", "suspend")
RAYSERVICE_SUSPEND = ("spec", rayservice.CLUSTER_CONFIG, "suspend")
ADAPTERS = {
    ("batch/v1", "Job"): Adapter(JOBS, job_copy, in_log=True, status_fields=JOB_STATUS_FIELDS, cleared_under=(
        (gates.MULTIKUEUE_BATCH_JOB_CLEARING_TTL, ("spec", "ttlSecondsAfterFinished")),)),
    ("v1", "Pod"): Adapter(MULTIKUEUE_PODS, pod_copy, in_log=False, managed_by_at=(), mirrored=pod_status,
                           group_label=GROUP_LABEL),
    (JOBSETS.api_version, JOBSETS.kind): Adapter(JOBSETS, jobset_copy, in_log=False, stop_patch=jobset.stop_patch),
    **{(r.api_version, r.kind): Adapter(r, run_policy_copy, in_log=False, managed_by_at=RUN_POLICY_MANAGED_BY,
                                        stop_patch=kubeflow.KINDS[r.kind].stop_patch, suspend_at=RUN_POLICY_SUSPEND)
       for r in KUBEFLOW_JOBS.values()},
    (MPIJOBS.api_version, MPIJOBS.kind): Adapter(MPIJOBS, run_policy_copy, in_log=False,
                                                 managed_by_at=RUN_POLICY_MANAGED_BY, stop_patch=mpijob.stop_patch,
                                                 suspend_at=RUN_POLICY_SUSPEND),
    **{(r.api_version, r.kind): Adapter(r, partial(suspended_copy, r), in_log=False, stop_patch=stop)
       for r, stop in ((RAYJOBS, rayjob.stop_patch), (RAYCLUSTERS, raycluster.stop_patch),
                       (APPWRAPPERS, appwrapper.stop_patch))},
    (RAYSERVICES.api_version, RAYSERVICES.kind): Adapter(RAYSERVICES, rayservice_copy, in_log=False,
                                                         stop_patch=rayservice.stop_patch,
                                                         suspend_at=RAYSERVICE_SUSPEND),
    (TRAINJOBS.api_version, TRAINJOBS.kind): Adapter(TRAINJOBS, trainjob_copy, in_log=False),
    (LEADER_WORKER_SETS.api_version, LEADER_WORKER_SETS.kind): Adapter(LEADER_WORKER_SETS, lws_copy, in_log=False,
                                                                       mirrors_status=False, grouped=True),
    sts_mk.KIND: Adapter(STATEFUL_SETS, sts_mk.statefulset_copy, in_log=False, managed_by_at=(),
                         mirrors_status=False),
}
"""(apiVersion, kind) of an owner MultiKueue runs on a worker -> its adapter."""


MAX_GROUPS = 1_000_000
"""The most Workloads Kueue's LWS adapter takes a LeaderWorkerSet to make (a bound on ``spec.replicas``)."""


class InvalidReplicas(KubeError):
    """A LeaderWorkerSet's ``spec.replicas`` out of Kueue's bounds: its read counts as failed, retried."""


def group_size(lws_obj: dict[str, Any]) -> int:
    """How many Workloads a LeaderWorkerSet makes, as Kueue's LWS adapter counts them: ``spec.replicas``, 1 when
    unset; a count below 0 or above :data:`MAX_GROUPS` is refused (:class:`InvalidReplicas`), as Kueue's
    "invalid LeaderWorkerSet replicas" error is retried."""
    replicas = value_at(lws_obj, ("spec", "replicas"))
    if replicas is None:
        return 1
    if not isinstance(replicas, int) or isinstance(replicas, bool) or not 0 <= replicas <= MAX_GROUPS:
        raise InvalidReplicas(f"invalid LeaderWorkerSet replicas: {replicas!r}")
    return replicas


def owner_copy(adapter: Adapter, manager_owner: dict[str, Any], manager_wl: dict[str, Any], origin: str,
               config: SchedulerConfig) -> dict[str, Any]:
    """The owner's copy created on the worker: its adapter's copy, without the fields its gates in force clear
    (Kueue's Job adapter drops a Job's ``ttlSecondsAfterFinished`` under
    MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster: the worker deleting the finished copy would
    look like a lost copy and have it dispatched again); its prebuilt Workload named in the form
    WorkloadIdentifierAnnotations says (:func:`connectors.k8s.multikueue_identifiers.place_prebuilt`)."""
    made = adapter.make_copy(as_before_start(adapter, manager_owner, manager_wl), manager_wl, origin)
    for gate, keys in adapter.cleared_under:
        parent = value_at(made, keys[:-1])
        if config.gate(gate) and isinstance(parent, dict):
            parent.pop(keys[-1], None)
    return place_prebuilt(made, manager_owner, manager_wl["metadata"]["name"], config)


def as_before_start(adapter: Adapter, manager_owner: dict[str, Any], manager_wl: dict[str, Any]) -> dict[str, Any]:
    """The manager's owner as it was before its integration started it: a started (unsuspended) owner stopped as
    that integration stops it (suspended, each pod template given back what the Workload's pod set of its
    name, for the Ray kinds its position, recorded: the node selector, tolerations, labels, annotations and
    scheduling gates the admission added taken out; a slice's pod sets as they were before any start,
    :func:`connectors.k8s.workload_slices.unstarted`, since one made while the owner ran records the start on
    an earlier slice, as the stop gives them back). Kueue copies the owner before the manager's workload is
    admitted, so before it is started; here the copy may be made after (a worker reached late), and the
    worker's Kueue writes its own admission onto it. A
    suspended owner is copied as it is, as Kueue copies it: its pod templates may hold labels, annotations, a node
    selector or gates the user changed after its Workload was made (Kueue makes no new Workload for those), which
    the Workload's pod sets do not. The batch/v1 Job's copy takes its template from the Workload
    (:func:`job_copy`)."""
    if adapter.stop_patch is None or suspended(manager_owner, adapter.suspend_at):
        return manager_owner
    pod_sets = msgspec.convert((manager_wl.get("spec") or {}).get("podSets") or [], list[o.PodSet])
    if is_slice((manager_wl.get("metadata") or {}).get("annotations") or {}):
        pod_sets = unstarted(pod_sets)
    stopped = adapter.stop_patch({**manager_owner, "metadata": {"resourceVersion": ""}}, pod_sets)
    return {**manager_owner, "spec": merge_patched(manager_owner.get("spec") or {}, stopped["spec"])}


class _OwnerMeta(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    name: str
    namespace: str = ""
    uid: str = ""


class SyncedOwner(msgspec.Struct, frozen=True):
    """A manager's owner of a kind whose spec edits are forwarded to its copy (:data:`REMOTE_SPEC_SYNC`), as the
    connector's informer keeps it: only the fields forwarded, so that no other change (its status, mirrored from
    the copy) marks it changed."""

    metadata: _OwnerMeta
    synced: dict[str, Any]
    """The forwarded fields, at their places in the object (``{"spec": {"serveConfigV2": ...}}``)."""

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


def synced_owner(fields: tuple[tuple[str, ...], ...], raw: msgspec.Raw | bytes) -> SyncedOwner | None:
    """Decode a manager's owner, keeping of it the ``fields`` forwarded to its copy (None: not an object)."""
    obj = msgspec.json.decode(raw)
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not meta.get("name"):
        return None
    synced: dict[str, Any] = {}
    for keys in fields:
        value = value_at(obj, keys)
        if value is None:
            continue
        at = synced
        for key in keys[:-1]:
            at = at.setdefault(key, {})
        at[keys[-1]] = value
    return SyncedOwner(msgspec.convert(meta, _OwnerMeta), synced)


def adapter_of(wl: WorkloadInfo, config: SchedulerConfig = DEFAULT,
               custom: Mapping[tuple[str, str], Adapter] = MappingProxyType({})) -> Adapter | None:
    """The adapter of the workload's owner, if the Configuration ``config`` builds one
    (:func:`kueue_es.scheduler.multikueue.adapters_in_force`: its framework enabled, or its kind one of the custom
    kinds, whose adapters ``custom`` holds once their resource was found,
    :func:`connectors.k8s.discovery.discover`)."""
    kind = (wl.owner[0], wl.owner[1]) if wl.owner else None
    if kind in external_kinds(config):
        return custom.get(kind)  # type: ignore[call-overload]
    return ADAPTERS.get(kind) if kind in adapters_in_force(config) else None  # type: ignore[call-overload]
