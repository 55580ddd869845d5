"""An elastic job's size, forwarded from a MultiKueue manager to its copy on the worker: a batch/v1 Job's
``parallelism`` (Kueue's batch/v1 MultiKueue adapter's ``needElasticJobSync``/``syncElasticJob``) and a RayCluster's
worker replicas (Kueue's Ray MultiKueue adapter's ``ElasticReplicaSync``, wired for RayClusters alone: a RayJob's or
RayService's workers live on a RayCluster the worker makes, which the manager has no copy of, so those keep the
create-once copy). Under ``MultiKueueRayInTreeAutoscaling`` an autoscaled RayCluster's or RayJob's sizes go the other
way instead (:mod:`connectors.k8s.multikueue_ray_autoscaling`).

Under ``ElasticJobsViaWorkloadSlices``, for an owner annotated ``kueue.x-k8s.io/elastic-job: "true"`` whose copy
already runs on the workload's worker, each sync compares the size of the copy and of the manager's owner (a Job's
``parallelism``; a RayCluster's worker groups' pod counts, ``replicas`` times ``numOfHosts`` when that is above 1, by
group name), and the Workload the copy names (``kueue.x-k8s.io/prebuilt-workload-name``) with the one being synced.
When either differs, the copy is patched (:func:`elastic_patch`): a Job's copy takes the manager's ``parallelism``;
each of a RayCluster's copy's worker groups the manager's has takes that group's ``replicas``, ``minReplicas``,
``maxReplicas`` and ``numOfHosts`` (a field the manager's lacks is dropped), and its ``enableInTreeAutoscaling``
becomes the manager's (the manager owns the counts: no autoscaler may fight it there); and the copy names the
synced Workload, where it names one now (label or annotation; else where the Configuration puts it,
:func:`connectors.k8s.multikueue_identifiers.as_annotation`). So a scale-up reaches the worker once its new slice
is admitted there (the copy then runs on the new slice, its UID unchanged), and a scale-down, which lowers the
admitted slice in place, at once.

A scale-down lowers the admitted slice's counts in place on the manager: its copies, on any worker, take the
manager's pod sets (:func:`copy_scaled_down`; Kueue's workload controller updates an elastic copy whose spec went
down, where it deletes any other copy out of sync), so the worker's slice asks for what the copy now runs.

A stale sync is skipped: the size grows while the Workload synced does not ask for it (the old slice, still
admitted, synced after the owner grew, before its new slice is admitted) — Kueue compares the synced Workload's
name with the one the owner's generation now makes; kueue-es compares the counts that name stands for, the synced
Workload's pod counts against the owner's, which also holds for slices named apart (``-readmit-``, scale-up
probes).
"""

from __future__ import annotations

import copy
from typing import Any

from connectors.k8s import raycluster
from connectors.k8s.multikueue_identifiers import as_annotation, workload_name_of
from connectors.k8s.prebuilt import KEY as PREBUILT_WORKLOAD
from connectors.k8s.workload_slices import ELASTIC_JOB_ANNOTATION, scaled_down
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.workloads import WorkloadInfo

JOB = ("batch/v1", "Job")
RAYCLUSTER = ("ray.io/v1", raycluster.KIND)
SYNCED_KINDS = frozenset({JOB, RAYCLUSTER})
"""(apiVersion, kind) of the owners whose size the manager forwards (Kueue's batch/v1 adapter, and the Ray adapter's
hook, wired for RayClusters only)."""

GROUP_SIZE_FIELDS = ("replicas", "minReplicas", "maxReplicas", "numOfHosts")
"""A worker group's fields the manager's values replace on the copy."""


def sizes(owner_kind: tuple[str, str], obj: dict[str, Any]) -> dict[str, int]:
    """What a sync compares of an owner: a Job's ``parallelism`` (absent: none), a RayCluster's
    :func:`worker_counts`."""
    if owner_kind == JOB:
        parallelism = (obj.get("spec") or {}).get("parallelism")
        return {"parallelism": parallelism} if parallelism is not None else {}
    return worker_counts(obj)


def worker_counts(obj: dict[str, Any]) -> dict[str, int]:
    """A RayCluster's worker groups' pod counts by pod set (the group's name, as its pod set is named)."""
    groups = (obj.get("spec") or {}).get("workerGroupSpecs") or []
    return {str(g.get("groupName", "")).lower(): raycluster.worker_count(g) for g in groups if isinstance(g, dict)}


def stale(wl: WorkloadInfo, remote_counts: dict[str, int], local_counts: dict[str, int],
          local: dict[str, Any] | None = None) -> bool:
    """The size grows (in all) while ``wl``, the Workload being synced, does not ask for the manager's: an old slice
    synced after its owner grew, its new slice not admitted yet. A RayCluster's counts are its pod sets'; a Job's
    (``local``, the manager's Job) one pod set counts ``min(parallelism, completions)``."""
    if sum(remote_counts.values()) >= sum(local_counts.values()):
        return False
    asked = {ps.name: ps.count for ps in wl.spec_sets}
    if "parallelism" in local_counts:
        completions = ((local or {}).get("spec") or {}).get("completions")
        pods = local_counts["parallelism"] if completions is None else min(local_counts["parallelism"], completions)
        return asked.get("main") != pods
    return any(asked.get(name) != count for name, count in local_counts.items())


def _groups_patched(remote: dict[str, Any], local: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The copy's worker groups with the manager's sizes (by group name), or None when none changes."""
    wanted = {g.get("groupName"): g for g in (local.get("spec") or {}).get("workerGroupSpecs") or []
              if isinstance(g, dict)}
    out, changed = [], False
    for group in (remote.get("spec") or {}).get("workerGroupSpecs") or []:
        src = wanted.get(group.get("groupName")) if isinstance(group, dict) else None
        if src is None:
            out.append(group)
            continue
        group = copy.deepcopy(group)
        for field in GROUP_SIZE_FIELDS:
            if group.get(field) == src.get(field):
                continue
            changed = True
            if field in src:
                group[field] = copy.deepcopy(src[field])
            else:
                group.pop(field, None)
        out.append(group)
    return out if changed else None


def named(remote: dict[str, Any], workload_name: str, config: SchedulerConfig) -> dict[str, Any]:
    """A metadata merge patch making the copy name ``workload_name`` where it names its Workload now ({} when it
    does already)."""
    meta = remote.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    out: dict[str, Any] = {}
    if PREBUILT_WORKLOAD in labels and labels[PREBUILT_WORKLOAD] != workload_name:
        out["labels"] = {PREBUILT_WORKLOAD: workload_name}
    if PREBUILT_WORKLOAD in annotations and annotations[PREBUILT_WORKLOAD] != workload_name:
        out["annotations"] = {PREBUILT_WORKLOAD: workload_name}
    if PREBUILT_WORKLOAD not in labels and PREBUILT_WORKLOAD not in annotations:
        out["annotations" if as_annotation(config, workload_name) else "labels"] = {PREBUILT_WORKLOAD: workload_name}
    return out


def _job_spec(remote: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    """A Job's copy takes the manager's ``parallelism``."""
    wanted = (local.get("spec") or {}).get("parallelism")
    return {} if (remote.get("spec") or {}).get("parallelism") == wanted else {"parallelism": wanted}


def _raycluster_spec(remote: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    """A RayCluster's copy takes the manager's worker group sizes and in-tree autoscaling flag."""
    spec: dict[str, Any] = {}
    groups = _groups_patched(remote, local)
    if groups is not None:
        spec["workerGroupSpecs"] = groups
    wanted_autoscaling = (local.get("spec") or {}).get("enableInTreeAutoscaling")
    if (remote.get("spec") or {}).get("enableInTreeAutoscaling") != wanted_autoscaling:
        spec["enableInTreeAutoscaling"] = wanted_autoscaling
    return spec


def elastic_patch(config: SchedulerConfig, owner_kind: tuple[str, str], remote: dict[str, Any],
                  local: dict[str, Any], wl: WorkloadInfo) -> dict[str, Any] | None:
    """The merge patch that forwards the manager's owner ``local`` (of kind ``owner_kind``) onto its copy ``remote``
    on the worker running ``wl`` (module docstring); None when there is nothing to forward: another kind, the gate
    off, the manager's not elastic, a stale sync, or size and Workload name agree already."""
    if owner_kind not in SYNCED_KINDS or not config.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES):
        return None
    if ((local.get("metadata") or {}).get("annotations") or {}).get(ELASTIC_JOB_ANNOTATION) != "true":
        return None
    remote_counts, local_counts = sizes(owner_kind, remote), sizes(owner_kind, local)
    if stale(wl, remote_counts, local_counts, local):
        return None
    if remote_counts == local_counts and workload_name_of(remote) == wl.name:
        return None
    spec = _job_spec(remote, local) if owner_kind == JOB else _raycluster_spec(remote, local)
    patch: dict[str, Any] = {}
    if spec:
        patch["spec"] = spec
    meta = named(remote, wl.name, config)
    if meta:
        patch["metadata"] = meta
    return patch or None


def copy_scaled_down(config: SchedulerConfig, wl: WorkloadInfo, remote_wl: dict[str, Any]) -> bool:
    """Whether the copy ``remote_wl`` of the elastic ``wl`` is to take the manager's pod sets: the same pod sets,
    some asking for more pods than the manager's Workload now does and none for fewer (a scale-down in place)."""
    if not wl.elastic or not config.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES):
        return False
    have = {ps.get("name"): ps.get("count", 1) for ps in (remote_wl.get("spec") or {}).get("podSets") or []
            if isinstance(ps, dict)}
    want = {ps.name: ps.count for ps in wl.spec_sets}
    return set(have) == set(want) and scaled_down(have, want)
