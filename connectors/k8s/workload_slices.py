"""Which Workload an elastic Job runs on, and what its Job integration writes for it (Kueue's
``pkg/workloadslicing``, ``EnsureWorkloadSlices``, as its job reconciler calls it). The shared job reconciler's
slice pass (:meth:`connectors.k8s.jobframework.JobReconciler._sliced`) runs a batch/v1 Job, a RayCluster, a
RayJob and a RayService so, each with its pod counts by pod set; what follows says Job for any.

A Job is elastic when the ``ElasticJobsViaWorkloadSlices`` gate is on and it carries the annotation
``kueue.x-k8s.io/elastic-job: "true"``. Its Workloads are then slices: each named with the Job's generation in its
hash (so a scale-up, which bumps the generation, gets a new name), annotated elastic, and carrying the
``kueue.x-k8s.io/workload-slice-name`` of the first slice of the chain. Of the slices the Job controls that are
not finished (oldest first), :func:`ensure` decides, comparing their pod counts with the Job's:

* **none**: a new slice is made (the Job is not suspended for it, nor does it wait for its pods to go);
* **one**: with other pod set names, the slices do not apply (the Job's Workload is found as for any Job); with
  the same counts it is the Job's; with other counts it takes the Job's counts in place when it holds no quota,
  or when the Job scaled down (no count grows, one shrinks) — Kueue's scale-down, which keeps the Job running;
  otherwise (a scale-up of an admitted slice) a new slice is made, whose
  ``kueue.x-k8s.io/workload-slice-replacement-for`` names the old one (``namespace/name``): the scheduler admits
  it in the old one's place (it finishes that one ``WorkloadSliceReplaced``) while the Job runs on;
* **an evicted slice still holding quota** (evicted in the log and as stored, ``Evicted=True``: an eviction
  whose write may still be refused is none yet, as Kueue reads the stored one) is the Job's, whatever the
  others, unless an admitted slice not evicted replaces it (Kueue #15661, :func:`draining`): its pods may
  still run, so the eviction step stops the Job on it and gives its quota back once no pod is active; finished
  first, its quota would go back while they run;
* **two** (a new slice waiting to replace the old): the old one is finished ``OutOfSync`` when it no longer
  holds quota (an evicted one, once its quota is given back), it is evicted beside an admitted replacement, or
  the new one holds quota as its replacement (admitted, the old one's finish not written); the new one is the
  Job's (other pod set names: the slices do not apply), taking the Job's counts in place when they differ —
  unless it holds quota without replacing the old one, which Kueue reports as an error and does nothing more
  (under partial scale-up too: a waiting probe outlives the slice it replaces, below);
* **more**: an error, nothing done.

The pods: the Job webhook gives an elastic Job's pod template the ``kueue.x-k8s.io/elastic-job`` scheduling gate
(:func:`connectors.k8s.webhook.elastic_gate_ops`), so the pods a scale-up adds wait for their slice; while the Job
runs on an admitted slice, the Job integration lifts the gate from the Job's pods (:func:`ungate_ops`; Kueue's
``StartWorkloadSlicePods``, which finds them by their owner) — only from as many as the slice counts beyond the
pods already running (:func:`pods_to_ungate`, as Kueue's later elastic-job ungater). A Job started on a slice
gives its pods the chain's ``kueue.x-k8s.io/workload-slice-name`` (:func:`pod_slice_name`). A slice made while
the Job runs copies that start in its templates; a Job stopped on it gets them back without it
(:func:`unstarted`).

Partial scale-up (Kueue's KEP-12100, :func:`partial_scale_up`): under the gate
``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp``, a Job annotated
``kueue.x-k8s.io/elastic-job-scale-up-strategy: partial`` lets the scheduler admit its scale-up in part. A new slice replacing one that holds quota gets, for each pod set that
grows, ``minCount`` = the pods the old slice was granted (:func:`baseline`; Kueue's baseline, which the scheduler
must grow past once the old slice is admitted). Once the Job's only slice is admitted in part (granted below its count somewhere,
:func:`admitted_in_part`), :func:`ensure` asks for a new slice, a *scale-up probe*: the Job's counts again, its
``minCount`` the granted counts, named apart by hashing ``<generation>-scale-up-probe-<pods granted>`` instead of
the generation alone (:func:`probe_level`; a retry at the same level makes the same name, a further partial
admission a new one). Probing stops once a slice is granted all it asks for. The pods released follow the granted
counts (:func:`granted`).

Eviction under partial scale-up (Kueue #15417; its ``normalizeActiveSlices``, "evicted admitted with pending
probe, keep probe and finish evicted"): when the slice a waiting scale-up slice (a probe, or the first
scale-up slice) replaces loses its quota (evicted: once the Job stopped on it gave it back, #15661), that
slice alone is finished ``OutOfSync``, as under atomic scale-up; the waiting slice stays the Job's, an
ordinary pending slice whose predecessor is gone, and is scheduled again: the scheduler may admit it at its
``minCount`` without having to grow past a slice that no longer holds quota
(:func:`kueue_es.scheduler.cycle._try_partial`). No new chain is made and no history is looked up. Admitted
in part while the Job is stopped, the Job is started on it first, and probes for the rest once it runs
(:meth:`connectors.k8s.jobframework.JobReconciler._sliced`). A new slice, or probe, whose usual name one of
the Job's slices already has (a probe at the level its admitted predecessor was probed at, the Job's
generation unchanged; a RayJob's scale-up, below its cluster) is named by hashing ``-readmit-<slices the Job
has>`` too (:func:`fresh_name_extra`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from connectors.k8s import podsetinfo
from connectors.k8s.stored_workload import shows
from connectors.k8s.workload_names import owner_workload_name
from events import objects as o
from projections import gates
from projections.workloads import (
    ADMITTED,
    FINISHED,
    SLICE_REPLACEMENT_FOR_ANNOTATION,
    TOPOLOGY_GATE,
    WORKLOAD_ANNOTATION,
    WorkloadInfo,
)

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
"""On a Job (and its slices): the Job scales through workload slices (value ``"true"``)."""
ELASTIC_JOB_GATE = "kueue.x-k8s.io/elastic-job"
"""The scheduling gate an elastic Job's pods carry until a slice counting them is admitted."""
SLICE_NAME_ANNOTATION = podsetinfo.SLICE_NAME_ANNOTATION
"""On a slice, and on the pods of a Job started on one: the name of the first slice of its chain."""
REPLACEMENT_FOR = SLICE_REPLACEMENT_FOR_ANNOTATION
SCALE_UP_STRATEGY_ANNOTATION = "kueue.x-k8s.io/elastic-job-scale-up-strategy"
"""On an elastic Job: ``partial`` lets its scale-ups be admitted in part (``atomic``, the default: all or nothing)."""
SCALE_UP_PARTIAL = "partial"
SCALE_UP_PROBE = "scale-up-probe"
"""Hashed into a scale-up probe's name, with the generation and the pods granted so far."""
READMIT = "readmit"
"""Hashed into the name of a new slice whose usual name one of the Job's slices already has
(:func:`fresh_name_extra`)."""
OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The workload slice is out of sync with its parent job"
STARTED_LABELS = (podsetinfo.PODSET_LABEL, podsetinfo.LQ_LABEL, podsetinfo.CQ_LABEL,
                  podsetinfo.MULTIKUEUE_WORKER_POD_LABEL)
"""The labels a start writes into a pod template, whatever the Workload (:func:`unstarted`)."""
STARTED_ANNOTATIONS = (WORKLOAD_ANNOTATION, SLICE_NAME_ANNOTATION, podsetinfo.UNCONSTRAINED_ANNOTATION)
"""The annotations a start writes into a pod template; the first two name the Workload and its chain."""

Slice = tuple[o.Workload, WorkloadInfo]


def elastic(state: object, annotations: dict[str, str]) -> bool:
    """Whether a job with these annotations is elastic under the Configuration recorded in the log."""
    return state.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES) and annotations.get(ELASTIC_JOB_ANNOTATION) == "true"  # type: ignore[attr-defined]


def partial_scale_up(state: object, annotations: dict[str, str]) -> bool:
    """Whether an elastic Job with these annotations scales up in part: the
    ``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp`` gate on and its scale-up strategy ``partial``
    (any other value, or none, is Kueue's ``atomic``)."""
    return (elastic(state, annotations) and state.gate(gates.ELASTIC_PARTIAL_SCALE_UP)  # type: ignore[attr-defined]
            and annotations.get(SCALE_UP_STRATEGY_ANNOTATION) == SCALE_UP_PARTIAL)


def pod_slice_name(state: object, obs: o.Workload) -> str | None:
    """The chain name a Job started on ``obs`` gives its pods (Kueue's ``SliceName``: the slice's
    ``workload-slice-name``, else its own name); None when ``obs`` is not an elastic slice under the recorded
    Configuration (reference §7.2 rule 8: the annotation is for elastic workloads)."""
    if not elastic(state, obs.metadata.annotations):
        return None
    return obs.metadata.annotations.get(SLICE_NAME_ANNOTATION) or obs.metadata.name


def slice_name(kind: str, group: str, name: str, uid: str, version: int | str, *, short: bool = False,
               probe: int | None = None, extra: str = "") -> str:
    """Kueue's name for a slice of object ``name``: the usual name, its hash taken over the object's
    ``version`` too (its generation; a Ray object's with its cluster revision,
    :func:`connectors.k8s.raycluster.slice_name_extra`); a scale-up probe's (``probe``: the pods granted so
    far, :func:`probe_level`) over ``<version>-scale-up-probe-<probe>``; ``extra`` (:func:`fresh_name_extra`),
    when given, over that."""
    return owner_workload_name(kind, group, name, uid, short=short, extra=extra or name_extra(version, probe))


def name_extra(version: int | str, probe: int | None = None) -> str:
    """What a slice's name is hashed over besides the object (:func:`slice_name`)."""
    return str(version) if probe is None else f"{version}-{SCALE_UP_PROBE}-{probe}"


def fresh_name_extra(version: int | str, probe: int | None, named: str, owned: Sequence[Slice]) -> str:
    """What a new slice's name is hashed over when ``named`` (its usual name, :func:`name_extra`) is taken by one of
    the Job's slices (``owned``: a probe at the level the probe it replaces was made at, the Job's version
    unchanged; a first slice after the Job's slices were all finished at this version; a RayJob's scale-up):
    the usual extra followed by ``-readmit-<number of slices the Job has>``, the same on a retry, another once
    the slice is made. Empty (the usual name) otherwise."""
    if all(obs.metadata.name != named for obs, _ in owned):
        return ""
    return f"{name_extra(version, probe)}-{READMIT}-{len(owned)}"


def not_finished(owned: Sequence[Slice]) -> list[Slice]:
    """The slices not finished, oldest first: by creation time, and (within one second) a slice before the one
    that replaces it. Only a replaced slice still live counts: a scale-up probe and the partial slice it replaces
    both replace something, and a finished first slice must not put the two on one footing (then by name)."""
    live = [(obs, wl) for obs, wl in owned if wl.phase != FINISHED]
    keys = {obs.key for obs, _ in live}

    def order(item: Slice) -> tuple[str, int, str]:
        obs = item[0]
        replaces = obs.metadata.annotations.get(REPLACEMENT_FOR, "")
        return (obs.metadata.creation_timestamp or "", 1 if replaces in keys else 0, obs.metadata.name)

    return sorted(live, key=order)


def counts(obs: o.Workload) -> dict[str, int]:
    """A Workload's pod counts by pod set."""
    return {ps.name: ps.count for ps in obs.spec.pod_sets}


def granted(wl: WorkloadInfo) -> dict[str, int]:
    """The pods a slice may run, by pod set: while it holds quota, its admission's count (a partial admission's
    is below the spec's), never above its spec's count (a scale-down in place lowers the spec, not the
    admission); else, or for a pod set the admission does not count, the spec's count."""
    by_name = {p.name: p.count for p in wl.admission.pod_set_assignments} if wl.admission and wl.reserving else {}
    out = {}
    for ps in wl.spec_sets:
        got = by_name.get(ps.name)
        out[ps.name] = ps.count if got is None else min(got, ps.count)
    return out


def admitted_in_part(wl: WorkloadInfo) -> bool:
    """Whether a slice is admitted with fewer pods than it asks for in some pod set."""
    if wl.phase != ADMITTED:
        return False
    have = granted(wl)
    return any(have[ps.name] < ps.count for ps in wl.spec_sets)


def probe_level(live: Sequence[Slice]) -> int | None:
    """For a new slice replacing the Job's only live slice when that one is admitted in part: the pods it was
    granted in all, hashed into the new slice's name (Kueue's scale-up probe); else None (the generation names it
    alone)."""
    if len(live) != 1 or not admitted_in_part(live[0][1]):
        return None
    return sum(granted(live[0][1]).values())


def baseline(job_counts: dict[str, int], live: Sequence[Slice]) -> dict[str, int]:
    """The ``minCount`` of each pod set of a new slice asking for ``job_counts`` under partial scale-up: for each
    pod set that grows, the pods the slice it replaces (the Job's only live slice, holding quota) was granted.
    Empty for a first slice (never admitted in part) or when the old slice holds no quota."""
    if len(live) != 1 or not live[0][1].reserving:
        return {}
    have = granted(live[0][1])
    return {name: have[name] for name, count in job_counts.items() if name in have and count > have[name]}


def scaled_down(old: dict[str, int], new: dict[str, int]) -> bool:
    """Some pod set shrinks and none grows."""
    return any(new[k] < old[k] for k in old) and not any(new[k] > old[k] for k in old)


@dataclass(frozen=True)
class SliceStep:
    """What :func:`ensure` decided."""

    applies: bool = True
    """False: the slices do not apply (other pod set names); the Job's Workload is found as any Job's."""
    keep: Slice | None = None
    """The slice the Job runs on (None with ``applies``: a new slice is to be made)."""
    set_counts: bool = False
    """``keep`` is to take the Job's pod counts first."""
    finish_old: Slice | None = None
    """An old slice to finish ``OutOfSync``."""
    probed: Slice | None = None
    """With no ``keep``: the Job's only slice, admitted in part, that the new slice (a scale-up probe)
    follows; a Job not running is started on it first
    (:meth:`connectors.k8s.jobframework.JobReconciler._sliced`)."""
    error: str = ""
    """Kueue reports an error and does nothing else."""


def _evicted(item: Slice) -> bool:
    """Evicted in the log and as stored (an eviction whose write may still be refused is none yet)."""
    return bool(item[1].evicted) and shows(item[0], "Evicted")


def draining(live: Sequence[Slice]) -> Slice | None:
    """Kueue #15661: the oldest live slice that is evicted yet still holds quota, unless an admitted slice,
    not evicted, replaces it (its pods are then that one's). Its pods may still run, so it stays the Job's
    until its quota is given back: Kueue's eviction step stops the Job on it and gives the quota back only
    once no pod is active — finishing it first would give the quota back while the pods run. None: no
    such slice."""
    for item in live:
        if not (item[1].reserving and _evicted(item)):
            continue
        key = item[0].key
        taken_over = any(other[0].metadata.annotations.get(REPLACEMENT_FOR) == key
                         and other[1].phase == ADMITTED and not _evicted(other) for other in live)
        if not taken_over:
            return item
    return None


def ensure(job_counts: dict[str, int], owned: Sequence[Slice], *, partial: bool = False) -> SliceStep:
    """Kueue's ``EnsureWorkloadSlices`` over the Workloads the Job controls (module docstring); ``partial``: the Job
    scales up in part (:func:`partial_scale_up`), so its only slice, admitted in part, gets a probe after
    it. A slice waiting behind one evicted is kept either way: the evicted one alone is finished (Kueue
    #15417)."""
    live = not_finished(owned)
    if not live:
        return SliceStep()
    held = draining(live)
    if held is not None:
        return SliceStep(keep=held)  # the eviction step stops the Job on it; its quota goes once no pod runs
    if len(live) == 1:
        obs, wl = current = live[0]
        have = counts(obs)
        if set(have) != set(job_counts):
            return SliceStep(applies=False)
        if have == job_counts:
            if partial and admitted_in_part(wl):
                return SliceStep(probed=current)  # a scale-up probe for the rest, the Job running meanwhile
            return SliceStep(keep=current)
        if not wl.reserving or scaled_down(have, job_counts):
            return SliceStep(keep=current, set_counts=True)
        return SliceStep()  # a scale-up of a slice that holds quota: a new slice
    if len(live) == 2:
        old, new = live
        # Kueue finishes the old slice once it holds no quota, it is evicted (Evicted=True, in the log and as
        # stored: an eviction not written yet, which may still be refused, finishes nothing, nor does a stored
        # one the log has since readmitted), or the new one reserves quota as its replacement (its finish not
        # written); Kueue's scheduler writes the readmission in that same write: its stored view is the log's
        replaced = new[1].reserving and new[0].metadata.annotations.get(REPLACEMENT_FOR) == old[0].key
        finish_old = old if (not old[1].reserving or _evicted(old) or replaced) else None
        have = counts(new[0])
        if set(have) != set(job_counts):
            return SliceStep(applies=False, finish_old=finish_old)
        if new[1].reserving and not replaced:
            return SliceStep(finish_old=finish_old,
                             error="unexpected combination of old and new workload slices with reserved quota")
        return SliceStep(keep=new, set_counts=have != job_counts, finish_old=finish_old)
    return SliceStep(error=f"unexpected number of matching workload slices: {len(live)}")


def unstarted(pod_sets: Sequence[o.PodSet]) -> list[o.PodSet]:
    """The pod sets of a slice, their templates as they were before any start: what stopping the Job on it
    gives its templates back. A slice made while the Job runs (a scale-up, a probe) copies the Job's templates
    with what the start on an earlier slice wrote into them; given back as they are, they would keep naming
    that Workload (``kueue.x-k8s.io/workload``) and chain, so that a start on any other Workload conflicts
    and is finished ``FailedToStart``. So the labels, annotations and topology gate a start writes by key
    (:mod:`connectors.k8s.podsetinfo`: :data:`STARTED_LABELS`, :data:`STARTED_ANNOTATIONS`) are left out.
    A flavor's node selector and tolerations, and a check's updates, cannot be told from the Job's own and
    stay: the slice's own admission agrees with them (its flavors are chosen with that node selector)."""
    out = []
    for ps in pod_sets:
        t = ps.template
        meta = o.TemplateMeta(
            labels={k: v for k, v in t.metadata.labels.items() if k not in STARTED_LABELS},
            annotations={k: v for k, v in t.metadata.annotations.items() if k not in STARTED_ANNOTATIONS})
        gates_ = [g for g in t.spec.scheduling_gates if g.get("name") != TOPOLOGY_GATE]
        spec = msgspec.structs.replace(t.spec, scheduling_gates=gates_)
        out.append(msgspec.structs.replace(ps, template=msgspec.structs.replace(t, metadata=meta, spec=spec,
                                                                                digest=None)))
    return out


def is_slice(annotations: dict[str, str]) -> bool:
    """Whether a Workload with these annotations is a slice: every slice names its chain
    (:func:`slice_annotations`), which no other Workload does."""
    return SLICE_NAME_ANNOTATION in annotations


def unstarted_template(template: dict[str, Any]) -> dict[str, Any]:
    """A slice's raw pod template as :func:`unstarted` gives it back (for a copy built of plain data, whose
    fields the decoded template does not all hold): without the labels, annotations and topology gate a start
    writes by key; everything else as it is. ``template`` is not changed."""
    out = dict(template)
    meta = dict(template.get("metadata") or {})
    for field, started in (("labels", STARTED_LABELS), ("annotations", STARTED_ANNOTATIONS)):
        if isinstance(meta.get(field), dict):
            meta[field] = {k: v for k, v in meta[field].items() if k not in started}
    if "metadata" in template:
        out["metadata"] = meta
    spec = template.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("schedulingGates"), list):
        kept = [g for g in spec["schedulingGates"]
                if not (isinstance(g, dict) and g.get("name") == TOPOLOGY_GATE)]
        out["spec"] = {**spec, "schedulingGates": kept}
    return out


def slice_annotations(name: str, live: Sequence[Slice]) -> dict[str, str]:
    """The annotations of a new slice ``name``, given the Job's slices not finished (:func:`not_finished`): the
    first of a chain names itself; a scale-up's names the slice it replaces and carries that one's chain name.
    Raises ValueError with more than one (Kueue waits for the old one to go)."""
    out = {ELASTIC_JOB_ANNOTATION: "true"}
    if not live:
        return {**out, SLICE_NAME_ANNOTATION: name}
    if len(live) > 1:
        raise ValueError(f"unexpected workload-slices count: {len(live)}")
    old = live[0][0]
    origin = old.metadata.annotations.get(SLICE_NAME_ANNOTATION) or old.metadata.name
    return {**out, REPLACEMENT_FOR: old.key, SLICE_NAME_ANNOTATION: origin}


def as_slice(workload: dict, owned: Sequence[Slice], *, partial: bool) -> None:
    """Make ``workload``, the Workload about to be created for an elastic job whose Workloads are ``owned``, one of
    its slices: :func:`slice_annotations`, and under partial scale-up, for a scale-up, each growing pod set's
    ``minCount`` the pods the slice it replaces was granted (:func:`baseline`). A first slice, a new chain's
    too, keeps the job's own pod sets (no floor looked up in its finished slices: Kueue #15417)."""
    meta = workload["metadata"]
    live = not_finished(owned)
    meta["annotations"] = {**(meta.get("annotations") or {}), **slice_annotations(meta["name"], live)}
    if not partial:
        return
    pod_sets = workload["spec"]["podSets"]
    asked = {ps["name"]: ps["count"] for ps in pod_sets}
    floor = baseline(asked, live)
    for ps in pod_sets:
        if ps["name"] in floor:
            ps["minCount"] = floor[ps["name"]]


def counts_patch(obs: o.Workload, job_counts: dict[str, int]) -> list[dict]:
    """A JSON patch (RFC 6902) giving ``obs`` the Job's pod counts, applied only to the version read (its
    resourceVersion tested first). A pod set's ``minCount`` above its new count (a partial scale-up's slice scaled
    down below the pods its old slice ran) comes down to that count with it (KEP-12100's scale-down step): left
    above, the Workload would break its rule, minCount at most count, and every such write be refused. Nothing else
    of the pod sets changes."""
    ops: list[dict] = [{"op": "test", "path": "/metadata/resourceVersion", "value": obs.metadata.resource_version}]
    for i, ps in enumerate(obs.spec.pod_sets):
        count = job_counts[ps.name]
        if count != ps.count:
            ops.append({"op": "replace", "path": f"/spec/podSets/{i}/count", "value": count})
        if ps.min_count is not None and ps.min_count > count:
            ops.append({"op": "replace", "path": f"/spec/podSets/{i}/minCount", "value": count})
    return ops


def gate_template_ops(template: Any, pointer: str) -> list[dict]:
    """A JSON patch giving the pod template at JSON pointer ``pointer`` (``template``, as the object holds it) the
    elastic-job scheduling gate, unless it has it (Kueue's ``GateTemplate``)."""
    gate = {"name": ELASTIC_JOB_GATE}
    if not isinstance(template, dict):
        return [{"op": "add", "path": pointer, "value": {"spec": {"schedulingGates": [gate]}}}]
    tspec = template.get("spec")
    present = (tspec or {}).get("schedulingGates")
    if present and gate in present:
        return []
    if present:
        return [{"op": "add", "path": f"{pointer}/spec/schedulingGates/-", "value": gate}]
    if tspec is None:
        return [{"op": "add", "path": f"{pointer}/spec", "value": {"schedulingGates": [gate]}}]
    return [{"op": "add", "path": f"{pointer}/spec/schedulingGates", "value": [gate]}]


def has_gate(pod: dict) -> bool:
    """Whether ``pod`` (as the apiserver returns it) carries the elastic-job gate."""
    return any(g.get("name") == ELASTIC_JOB_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def pods_to_ungate(pods: Sequence[dict], granted: int) -> list[dict]:
    """Of a Job's pods, the gated ones to release under a slice that counts ``granted`` pods
    (:func:`released_by_pod_set`); a Job has one pod set, so every pod counts against it."""
    return released_by_pod_set(pods, {"": granted}, lambda _: "")


def pod_set_label(pod: dict) -> str:
    """The pod set a pod was made for: its ``kueue.x-k8s.io/podset`` label (the admission put it on its template)."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(podsetinfo.PODSET_LABEL, "")


def released_by_pod_set(pods: Sequence[dict], granted: dict[str, int],
                        pod_set: Callable[[dict], str] = pod_set_label) -> list[dict]:
    """Of an elastic job's pods, the gated ones to release under a slice that grants ``granted`` pods by pod set:
    in each pod set, as many as it grants beyond the pods already released there, lowest name first (Kueue's
    elastic-job ungater). A terminated pod (``Succeeded``, ``Failed``) counts for neither; a pod of a pod set the
    slice does not grant is not released."""
    out: list[dict] = []
    for name in sorted(granted):
        live = [p for p in pods if pod_set(p) == name
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        gated = sorted((p for p in live if has_gate(p)), key=lambda p: p["metadata"]["name"])
        room = granted[name] - (len(live) - len(gated))
        out += gated[:max(room, 0)]
    return out


def ungate_ops(pod: dict) -> list[dict] | None:
    """A JSON patch lifting the elastic-job gate from ``pod`` (as the apiserver returns it), applied only to the
    version read; None when the pod does not carry the gate."""
    present = (pod.get("spec") or {}).get("schedulingGates") or []
    left = [g for g in present if g.get("name") != ELASTIC_JOB_GATE]
    if len(left) == len(present):
        return None
    ops: list[dict] = [{"op": "test", "path": "/metadata/resourceVersion", "value": pod["metadata"]["resourceVersion"]}]
    if left:
        return [*ops, {"op": "replace", "path": "/spec/schedulingGates", "value": left}]
    return [*ops, {"op": "remove", "path": "/spec/schedulingGates"}]
