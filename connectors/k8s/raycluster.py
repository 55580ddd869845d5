"""What Kueue's RayCluster integration (``ray.io/raycluster``) decides about one ray.io/v1 RayCluster, as pure data,
and the Ray cluster spec pieces its RayJob integration (:mod:`connectors.k8s.rayjob`) shares.

Kueue runs a RayCluster through its generic job reconciler; these are the RayCluster's own pieces (Kueue's
``pkg/controller/jobs/raycluster``, ``common.go`` for what RayJobs share), and
:mod:`connectors.k8s.ray_integration` does the I/O around them:

* **a cluster spec's pod sets** (:func:`cluster_pod_sets`): ``head`` (one pod) first, with the Redis cleanup Job of
  a fault-tolerant cluster and the autoscaler sidecar counted in (:mod:`connectors.k8s.ray_head_resources`), then
  one per worker group in the order written (each, head too, with the History Server collector sidecar when
  ``historyServerOptions.collectorOptions`` is written), named by its ``groupName`` and counting ``replicas`` (default 1) times ``numOfHosts`` when
  that is above 1 — ``minReplicas`` and ``maxReplicas`` are not read; with the recorded Configuration's
  ``TopologyAwareScheduling`` on, a topology request from each template's TAS annotations (no rank label);
* **its Workload** (:func:`workload_for`): ``raycluster-<name>-<hash>``, those pod sets, the priority class of the
  first pod template that names one (a WorkloadPriorityClass label first), queue, maximum execution time, copied
  labels and ``provreq.kueue.x-k8s.io/`` annotations as for any job;
* **suspended** is ``spec.suspend`` (absent: running); **starting** merges each pod set's
  :class:`~connectors.k8s.podsetinfo.PodSetInfo` into the head's and each worker group's template and sets
  ``suspend: false``; **stopping** sets ``suspend: true`` with each template restored as its Workload's pod set
  in the same position recorded it (none when the Workload's pod sets do not number the cluster's, Kueue's
  ``RestorePodSetsInfo``) — one merge patch each (:func:`merge_diff`: the worker groups are a list, written
  whole), conditioned on the resourceVersion read;
* a RayCluster **never finishes**; **active** and **pods ready**: its ``status.state`` is ``ready``;
* **compared** (:func:`job_pod_sets`): its Workload is compared with the pod sets it makes now, built as at
  creation from its view written out, so one it no longer matches is rewritten or made anew (Kueue's
  ``EquivalentToWorkload``).

Kueue counts no reclaimable pods for a Ray cluster. An elastic RayCluster's workload slices follow its pod counts
(:func:`counts`), its pods found by KubeRay's ``ray.io/cluster`` label (:func:`pod_selector`). An elastic RayJob
with its autoscaler on counts its worker groups from the live RayCluster it runs on, as Kueue's ``UpdatePodSets``
(docs/kubernetes.md, the Ray kinds).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, ray_head_resources, workload_names
from connectors.k8s.jobset import BadPodSets, job_workload, recorded_info, write_template
from connectors.k8s.resources import RAYCLUSTERS
from connectors.k8s.tas_group_validation import group_of
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState
from projections.workloads import topology_request_from_annotations

__all__ = ["BadPodSets"]

KIND = "RayCluster"
HEAD = "head"
"""The head group's pod set (a worker group may not take the name: the webhooks refuse it)."""
READY = "ready"
"""KubeRay's ``ready`` cluster state."""
CLUSTER_LABEL = "ray.io/cluster"
"""KubeRay's label naming the RayCluster a pod belongs to."""
GENERATION_ANNOTATION = "kueue.x-k8s.io/raycluster-generation"
"""The revision of the RayCluster a Ray object's worker counts were read from, recorded on the object (under
MultiKueue's ``MultiKueueRayInTreeAutoscaling``: ``<uid>-<generation>`` of the worker's cluster)."""


class WorkerGroupSpec(o.View):
    group_name: str = ""
    replicas: int | None = None
    num_of_hosts: int = 0
    template: o.PodTemplateSpec = o.PodTemplateSpec()


class HeadGroupSpec(o.View):
    template: o.PodTemplateSpec = o.PodTemplateSpec()


class RayClusterSpec(o.View):
    suspend: bool | None = None
    managed_by: str | None = None
    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: Any = None
    gcs_fault_tolerance_options: Any = None
    history_server_options: Any = None
    """As written (any JSON): what the head's pod set counts besides its template (:func:`cluster_pod_sets`), read
    again when the Workload is compared with the object (:func:`job_pod_sets`)."""
    head_group_spec: HeadGroupSpec = HeadGroupSpec()
    worker_group_specs: list[WorkerGroupSpec] = []


class RayClusterStatus(o.View):
    state: str = ""
    reason: str = ""


class RayCluster(o.NamespacedView):
    """What the integration reads of a RayCluster; the Workload's templates are built from it as stored."""

    spec: RayClusterSpec = RayClusterSpec()
    status: RayClusterStatus = RayClusterStatus()


NAMES = workload_names.KindNames(RAYCLUSTERS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


# --- a cluster spec's pod sets (shared with RayJobs) ---------------------------------------------------------------


def _templates(cluster_spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(pod set name, raw template)`` of the head then each worker group, the templates as written (not copied)."""
    head_spec = cluster_spec.get("headGroupSpec")
    out = [(HEAD, head_spec.setdefault("template", {}) if isinstance(head_spec, dict) else {})]
    for group in cluster_spec.get("workerGroupSpecs") or []:
        out.append((str(group.get("groupName", "")).lower(), group.setdefault("template", {})))
    return out


def worker_count(group: dict[str, Any]) -> int:
    """The pods of a worker group: ``replicas`` (default 1) times ``numOfHosts`` when that is above 1."""
    replicas = group.get("replicas")
    count = 1 if replicas is None else int(replicas)
    hosts = group.get("numOfHosts") or 0
    return count * hosts if hosts > 1 else count


_ENCODE, _DECODE = msgspec.json.Encoder(), msgspec.json.Decoder()


def _copy(data: Any) -> Any:
    """A deep copy of JSON data (as the apiserver sent it, or a view written out): a JSON round trip, faithful to
    such data and several times as fast as ``copy.deepcopy`` — a Ray object's pod sets are rebuilt at every
    reconcile to be compared with its Workload's (benchmarks/ray_pod_sets.py)."""
    return _DECODE.decode(_ENCODE.encode(data))


def pod_set(name: str, count: int, template: dict[str, Any], *, tas: bool) -> dict[str, Any]:
    """One pod set of ``count`` pods of a copy of raw ``template``; ``tas``: with its topology request."""
    out: dict[str, Any] = {"name": name, "count": count, "template": _copy(template)}
    if tas:
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        request = topology_request_from_annotations(annotations) or o.PodSetTopologyRequest()
        request = msgspec.structs.replace(request, pod_set_group_name=group_of(annotations))
        out["topologyRequest"] = msgspec.to_builtins(request)
    return out


def cluster_pod_sets(cluster_spec: dict[str, Any], *, tas: bool, annotations: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod sets of a raw Ray cluster spec whose Ray object has ``annotations``: the head's, with what KubeRay
    runs beside it (:func:`connectors.k8s.ray_head_resources.account_head`), then each worker group's, all with
    the History Server collector when configured (:func:`~connectors.k8s.ray_head_resources.account_collector`). Raises :class:`~events.errors.InvalidInput` for a fault-tolerant cluster whose head has no
    container."""
    cluster_spec = _copy(cluster_spec)
    groups = cluster_spec.get("workerGroupSpecs") or []
    counts = [1, *(worker_count(g) for g in groups)]
    out = [pod_set(name, count, template, tas=tas)
           for (name, template), count in zip(_templates(cluster_spec), counts, strict=True)]
    ray_head_resources.account_head(out[0]["template"], cluster_spec, annotations)
    ray_head_resources.account_collector([ps["template"] for ps in out], cluster_spec)
    return out


def first_priority_class(pod_sets: list[dict[str, Any]]) -> str | None:
    """The PriorityClass of the first pod set whose template names one."""
    for ps in pod_sets:
        name = (ps["template"].get("spec") or {}).get("priorityClassName")
        if name:
            return str(name)
    return None


def workload(state: ClusterState, keys: KeysToCopy, raw: dict[str, Any], name: str, pod_sets: list[dict[str, Any]],
             owner: dict[str, Any]) -> dict[str, Any]:
    """The Workload of Ray object ``raw`` (as stored) under ``name`` with ``pod_sets``, owned by ``owner``; raises
    as :func:`workload_for` says."""
    return job_workload(state, keys, raw, name, pod_sets, first_priority_class(pod_sets), owner)


def pod_sets(raw_cluster: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the RayCluster as stored."""
    return cluster_pod_sets(raw_cluster.get("spec") or {}, tas=tas, annotations=annotations_of(raw_cluster))


def as_pod_sets(build: Callable[[], list[dict[str, Any]]]) -> list[o.PodSet] | None:
    """The pod sets ``build`` makes from a Ray object's view written out (``msgspec.to_builtins``), as views: what
    its Workload is compared with (Kueue's ``EquivalentToWorkload`` over ``PodSets``); None when they cannot be
    built (a fault-tolerant head without a container: the object has no Workload either)."""
    try:
        return msgspec.convert(build(), list[o.PodSet])
    except InvalidInput:
        return None


def job_pod_sets(cluster: RayCluster) -> list[o.PodSet] | None:
    """The pod sets the RayCluster makes now, as its Workload was built (see :func:`as_pod_sets`)."""
    return as_pod_sets(lambda: pod_sets(msgspec.to_builtins(cluster), tas=False))


def annotations_of(raw: dict[str, Any]) -> dict[str, Any]:
    """A raw object's annotations (none: empty)."""
    return (raw.get("metadata") or {}).get("annotations") or {}


def priority_class(cluster: RayCluster) -> str | None:
    """The PriorityClass the RayCluster's pods name: the head's, else the first worker group's that names one."""
    templates = [cluster.spec.head_group_spec.template, *(g.template for g in cluster.spec.worker_group_specs)]
    return next((t.spec.priority_class_name for t in templates if t.spec.priority_class_name), None)


def workload_for(state: ClusterState, keys: KeysToCopy, raw_cluster: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_cluster`` (as stored) under ``name``, copying ``keys``. Raises
    :class:`~connectors.k8s.job_priority.WorkloadPriorityClassNotFound` or
    :class:`~connectors.k8s.job_priority.PriorityClassNotFound` for a class the log does not hold."""
    meta = raw_cluster["metadata"]
    return workload(state, keys, raw_cluster, name, pod_sets(raw_cluster, tas=state.tas_enabled),
                    controller_ref(meta["name"], meta["uid"]))


# --- starting and stopping -----------------------------------------------------------------------------------------


def pod_set_names(spec: RayClusterSpec) -> list[str]:
    """The names of a cluster spec's pod sets, in Kueue's order."""
    return [HEAD, *(g.group_name.lower() for g in spec.worker_group_specs)]


def bad_len(expected: int, given: int) -> str:
    """Kueue's ``podset.BadPodSetsInfoLenError(expected, given)`` text, which prints its arguments the other
    way round (``"expecting %d podset, got %d"`` over ``got, want``): what the Ray kinds'
    ``RunWithPodSetsInfo`` report."""
    return f"expecting {given} podset, got {expected}"


def infos_for(state: ClusterState, wl: Any, names: list[str], slice_name: str | None = None, *,
              mismatch: Callable[[int, int], str] = bad_len) -> list[podsetinfo.PodSetInfo]:
    """What starting adds to the template of each pod set in ``names``, from the Workload's admission (``wl``: its
    :class:`~projections.workloads.WorkloadInfo`; ``slice_name``: an elastic slice's chain, which the pods carry).
    Raises :class:`BadPodSets` when one has no assignment, its message ``mismatch(pod sets, assignments)``
    (:func:`bad_len`, Kueue's ``BadPodSetsInfoLenError``, unless the kind says otherwise),
    :class:`~connectors.k8s.podsetinfo.MergeConflict` for conflicting checks' updates."""
    given = list(wl.admission.pod_set_assignments if wl.admission is not None else ())
    by_name = {a.name: a for a in given}
    assignments = [by_name.get(n) for n in names]
    if None in assignments:
        raise BadPodSets(mismatch(len(names), len(given)))
    return [podsetinfo.start_info(state, wl, psa, slice_name) for psa in assignments if psa is not None]


def start_infos(state: ClusterState, wl: Any, cluster: RayCluster, slice_name: str | None = None
                ) -> list[podsetinfo.PodSetInfo]:
    """What starting the RayCluster adds to each template, head first (see :func:`infos_for`)."""
    return infos_for(state, wl, pod_set_names(cluster.spec), slice_name)


def group_count(group: WorkerGroupSpec) -> int:
    """A worker group's pods (:func:`worker_count`)."""
    return worker_count({"replicas": group.replicas, "numOfHosts": group.num_of_hosts})


def counts(spec: RayClusterSpec) -> dict[str, int]:
    """A cluster spec's pod counts by pod set, as an elastic object's workload slices are compared with it: the
    head's one, each worker group's ``replicas`` (default 1) times ``numOfHosts`` when that is above 1."""
    return {HEAD: 1, **{group.group_name.lower(): group_count(group) for group in spec.worker_group_specs}}


def autoscaled_counts(spec: RayClusterSpec, live: RayCluster | None) -> dict[str, int] | None:
    """A RayJob's or RayService's cluster spec's pod counts (:func:`counts`), each worker group's taken from
    ``live``, the RayCluster it runs on, when its autoscaler is on and the group's ``replicas`` are set there
    (Kueue's ``UpdatePodSets``: the autoscaler scales the cluster, not its owner). None when ``live`` has a worker
    group the spec does not (Kueue's "PodSet name mismatch" error)."""
    out = counts(spec)
    if live is None or not spec.enable_in_tree_autoscaling:
        return out
    for group in live.spec.worker_group_specs:
        name = group.group_name.lower()
        if name not in out:
            return None
        if group.replicas is not None:
            out[name] = group_count(group)
    return out


def slice_name_extra(generation: int, annotations: dict[str, str]) -> str:
    """What an elastic Ray object's (RayCluster, RayJob, RayService) slice names are hashed over: its
    generation, then ``_`` and the recorded cluster revision (:data:`GENERATION_ANNOTATION`) when it has one,
    as Kueue's ``GetWorkloadNameExtraPart`` does: a resize reflected in annotations leaves the generation as
    it was, and the new slice still gets a name of its own."""
    revision = annotations.get(GENERATION_ANNOTATION)
    return f"{generation}_{revision}" if revision else str(generation)


def pod_selector(cluster: RayCluster) -> str:
    """KubeRay's label on a RayCluster's pods (Kueue's ``PodLabelSelector``)."""
    return f"{CLUSTER_LABEL}={cluster.metadata.name}"


def merge_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns map ``before`` into ``after``: a key gone is written ``null``, a map changed is
    patched key by key, anything else changed (a list: whole) is written as ``after`` has it."""
    out: dict[str, Any] = {k: None for k in before if k not in after}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            inner = merge_diff(old, value)
            if inner:
                out[key] = inner
        elif key not in before or old != value:
            out[key] = value
    return out


def start_templates(cluster_spec: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """A copy of raw ``cluster_spec`` with each pod set's info merged into its template (head first). Raises
    :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
    spec = copy.deepcopy(cluster_spec)
    for (_, template), info in zip(_templates(spec), infos, strict=True):
        write_template(template, podsetinfo.onto_template(msgspec.convert(template, o.PodTemplateSpec), info))
    return spec


def cluster_pod_set_count(cluster_spec: dict[str, Any]) -> int:
    """The pod sets a raw cluster spec makes: the head's and one per worker group (Kueue's
    ``ExpectedPodSetsCount``)."""
    return 1 + len(cluster_spec.get("workerGroupSpecs") or [])


def restored_templates(cluster_spec: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """A copy of raw ``cluster_spec`` with each template given back what its Workload's pod set recorded, by
    position as Kueue's ``RestorePodSetsInfo`` does: the head the first, worker group ``i`` the ``i+1``-th.
    Pod sets that do not number the cluster's (a worker group added or removed since the Workload was made)
    give back nothing at all: Kueue skips the restore ("the pod set count does not match the admitted
    workload")."""
    spec = copy.deepcopy(cluster_spec)
    if len(saved) != cluster_pod_set_count(spec):
        return spec
    for (_, template), ps in zip(_templates(spec), saved, strict=True):
        write_template(template, recorded_info(ps))
    return spec


def _patch(raw_cluster: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": raw_cluster["metadata"]["resourceVersion"]},
            "spec": merge_diff(raw_cluster.get("spec") or {}, spec)}


def start_patch(raw_cluster: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the RayCluster: each template with its info, ``suspend: false``."""
    spec = start_templates(raw_cluster.get("spec") or {}, infos)
    spec["suspend"] = False
    return _patch(raw_cluster, spec)


def stop_patch(raw_cluster: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the RayCluster with its templates restored from ``saved``."""
    spec = restored_templates(raw_cluster.get("spec") or {}, saved)
    spec["suspend"] = True
    return _patch(raw_cluster, spec)


# --- what its status says -------------------------------------------------------------------------------------------


def finished(cluster: RayCluster) -> tuple[str, str] | None:
    """Never: a RayCluster does not finish (Kueue's ``Finished`` says so whatever its state)."""
    return None


def is_active(cluster: RayCluster) -> bool:
    """Kueue's ``IsActive``: the cluster's state is ``ready``."""
    return cluster.status.state == READY


def pods_ready(cluster: RayCluster) -> bool:
    """Kueue's ``PodsReady``: the cluster's state is ``ready``."""
    return cluster.status.state == READY
