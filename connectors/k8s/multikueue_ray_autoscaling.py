"""Worker-driven Ray autoscaling under MultiKueue (Kueue v0.20's alpha ``MultiKueueRayInTreeAutoscaling`` gate,
KEP-13243, Kueue #13435/#16260/#16315), as pure data.

With the gate on (and ``ElasticJobsViaWorkloadSlices``), an elastic RayCluster or RayJob (annotated
``kueue.x-k8s.io/elastic-job: "true"``) handed to MultiKueue whose cluster spec has ``enableInTreeAutoscaling: true``
(a RayJob's at ``spec.rayClusterSpec``) is resized by the Ray autoscaler on the worker, and the worker owns its worker
groups' sizes (:func:`worker_owns_replicas`). Each sync of its workload, while the manager's object is not suspended:

* **reverse sync**: the worker's counts are read (:func:`runtime_state`) — a RayCluster's from its copy on the
  worker, a RayJob's from the RayCluster KubeRay made for the copy there (the copy's ``status.rayClusterName``; the
  manager has no such RayCluster) — each worker group's ``replicas`` (default 1) times ``numOfHosts`` when above 1,
  with a revision ``<uid>-<generation>`` of the object read; nothing while the copy is suspended (its counts are the
  ones the worker's Kueue restored, not the autoscaler's) or the RayJob's cluster is not there yet. They are written
  on the manager's object as two annotations (:func:`reflect_patch`), its spec untouched:
  ``kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes`` (a JSON list of ``{"name", "count"}`` sorted by name)
  and ``kueue.x-k8s.io/raycluster-generation`` (the revision) — only when the counts differ from those annotated (a
  revision alone changing writes nothing);
* **forward sync**: no sizes are pushed to the worker's copy; it is only made to name the workload synced
  (``kueue.x-k8s.io/prebuilt-workload-name``), and not on a pass that just wrote the annotations (the new slice is
  not made yet).

The manager's pod counts then follow the annotation (:func:`reflected_counts`, read only for an object whose
``spec.managedBy`` is MultiKueue's): each pod set named there takes its count (a malformed annotation is
ignored), so the manager's elastic slices grow (a new slice) and shrink (in place) with the worker's autoscaler.
When the manager suspends the object (eviction, preemption, requeue), the counts' annotation is removed in the
same write (:func:`cleared_on_stop`), so its next admission reserves the spec's counts. Gate off: none of this; the
manager owns the sizes (:mod:`connectors.k8s.multikueue_elastic`). Not modelled (newer than v0.20): a RayService's
resizes reflected the same way, counts outside a worker group's ``minReplicas``/``maxReplicas`` dropped.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from connectors.k8s import raycluster
from connectors.k8s.workload_slices import ELASTIC_JOB_ANNOTATION
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.admissionchecks import MULTIKUEUE_CONTROLLER

GATE = gates.MULTIKUEUE_RAY_IN_TREE_AUTOSCALING
RUNTIME_SIZES_ANNOTATION = "kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes"
"""The worker's per-worker-group pod counts, recorded on the manager's object."""
GENERATION_ANNOTATION = raycluster.GENERATION_ANNOTATION
"""The revision (``<uid>-<generation>``) of the worker object the counts were read from; the manager's slice
names are hashed over it too (:func:`connectors.k8s.raycluster.slice_name_extra`)."""

RAYCLUSTER = ("ray.io/v1", "RayCluster")
RAYJOB = ("ray.io/v1", "RayJob")
KINDS = frozenset({RAYCLUSTER, RAYJOB})


def _cluster_spec(kind: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    inner = spec.get("rayClusterSpec") if kind == RAYJOB else spec
    return inner if isinstance(inner, dict) else {}


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def worker_owns_replicas(config: SchedulerConfig, kind: tuple[str, str], local: dict[str, Any]) -> bool:
    """Whether the worker's autoscaler owns the sizes of the manager's ``local`` of ``kind`` (module docstring)."""
    if kind not in KINDS or not config.gate(GATE) or not config.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES):
        return False
    if _annotations(local).get(ELASTIC_JOB_ANNOTATION) != "true":
        return False
    return _cluster_spec(kind, local).get("enableInTreeAutoscaling") is True


def suspended(kind: tuple[str, str], obj: dict[str, Any]) -> bool:
    """A RayCluster's ``spec.suspend``, a RayJob's."""
    return bool((obj.get("spec") or {}).get("suspend"))


def child_name(kind: tuple[str, str], remote: dict[str, Any]) -> str:
    """The RayCluster on the worker a copy's worker counts are read from: a RayJob's ``status.rayClusterName`` (empty:
    none yet); a RayCluster's own (empty: the copy itself)."""
    if kind != RAYJOB:
        return ""
    return str((remote.get("status") or {}).get("rayClusterName") or "")


def _counts(cluster_spec: dict[str, Any]) -> dict[str, int]:
    groups = cluster_spec.get("workerGroupSpecs") or []
    return {str(g.get("groupName", "")).lower(): raycluster.worker_count(g) for g in groups if isinstance(g, dict)}


def _revision(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('uid', '')}-{meta.get('generation', 0)}"


def runtime_state(kind: tuple[str, str], remote: dict[str, Any],
                  child: dict[str, Any] | None = None) -> tuple[dict[str, int], str] | None:
    """The worker's counts by pod set and their revision: a RayCluster's copy ``remote`` itself, a RayJob's
    ``child`` RayCluster on the worker; None while ``remote`` is suspended or the RayJob's child is missing."""
    if suspended(kind, remote):
        return None
    source = child if kind == RAYJOB else remote
    if source is None:
        return None
    return _counts(source.get("spec") or {}), _revision(source)


class _Size(msgspec.Struct, frozen=True):
    """One entry of the annotation's list."""

    count: int
    name: str = ""


_sizes = msgspec.json.Decoder(list[_Size])


def encode(counts: dict[str, int]) -> str:
    """The annotation's value: ``[{"name":…,"count":…}]`` sorted by name, compact as Go writes it."""
    return json.dumps([{"name": n, "count": counts[n]} for n in sorted(counts)], separators=(",", ":"))


def decode(value: str | None) -> dict[str, int] | None:
    """The counts an annotation value holds; None when absent or malformed."""
    if not value:
        return None
    try:
        return {s.name: s.count for s in _sizes.decode(value)}
    except msgspec.DecodeError:  # not JSON, or not a list of such entries (ValidationError is one)
        return None


def reflect_patch(local: dict[str, Any], state: tuple[dict[str, int], str]) -> dict[str, Any] | None:
    """The merge patch recording the worker's ``state`` on the manager's ``local``; None when the counts annotated
    there are these already (the revision alone is not written)."""
    counts, revision = state
    if decode(_annotations(local).get(RUNTIME_SIZES_ANNOTATION)) == counts:
        return None
    return {"metadata": {"annotations": {RUNTIME_SIZES_ANNOTATION: encode(counts), GENERATION_ANNOTATION: revision}}}


def cleared_on_stop(gate_on: bool, patch: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    """The merge ``patch`` suspending the manager's ``local`` RayCluster or RayJob, with the reflected counts'
    annotation removed when the gate is on and it is there (KEP-13243: re-admission then reserves the spec's counts,
    not the worker's last autoscaled ones; the revision annotation is kept)."""
    if not gate_on or RUNTIME_SIZES_ANNOTATION not in _annotations(local):
        return patch
    meta = dict(patch.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), RUNTIME_SIZES_ANNOTATION: None}
    return {**patch, "metadata": meta}


def reflected_counts(gate_on: bool, managed_by: str | None, annotations: dict[str, str],
                     counts: dict[str, int]) -> dict[str, int]:
    """``counts`` (an object's pod counts by pod set) with each one's named in the reflected annotation taken
    from it (not negative; the head's too, should a hand-edited value name it: Kueue's
    ``applyRuntimeCountsAnnotation`` excludes none), on a manager (``managed_by`` MultiKueue's) with the gate
    on; else ``counts`` as they are."""
    if not gate_on or managed_by != MULTIKUEUE_CONTROLLER:
        return counts
    reflected = decode(annotations.get(RUNTIME_SIZES_ANNOTATION))
    if not reflected:
        return counts
    out = dict(counts)
    for name, count in reflected.items():
        if name in out and count >= 0:
            out[name] = count
    return out
