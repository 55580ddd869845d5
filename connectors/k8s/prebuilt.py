"""Prebuilt Workloads: a batch/v1 Job that names the Workload it runs on instead of being given one.

A Job carrying ``kueue.x-k8s.io/prebuilt-workload-name: <name>`` (a label, or an annotation of the same key) runs
on the Workload ``<name>`` of its namespace, created beforehand — by a user, or by MultiKueue on a worker —
rather than on one the Job integration builds (Kueue's ``pkg/controller/jobframework``):

* which key names it is Kueue's ``WorkloadIdentifierAnnotations`` gate (beta, on): on, the annotation when it is
  not empty, else the label; off, the label when not empty, else the annotation only when its value could not
  be a label value (longer than 63 characters): :func:`name_of`;
* while no Workload of that name exists the Job is given none: it waits, suspended (a running one is suspended,
  recorded as ``Stopped`` "missing workload"), and is looked at again when the Workload arrives (the mirror
  indexes Jobs by the names they carry: :func:`names_carried`);
* a Workload another object controls is not the Job's: the Job waits as if it were missing;
* one without a controller is adopted: the Job becomes its controller owner and its ``kueue.x-k8s.io/job-uid``
  label is set to the Job's uid (:func:`adoption_patch`);
* one the Job controls but which is not :func:`equivalent` to it is finished ``OutOfSync`` (:data:`OUT_OF_SYNC`,
  :data:`OUT_OF_SYNC_MESSAGE`) — Kueue then treats it as no Workload at all, so no ``FinishedWorkload`` Event is
  recorded on the Job — and the Job waits as for a missing one.

From there on it is the Job's Workload as a generated one is: started and stopped with it, finished with it,
finished and deleted when the Job goes (it is owned by it). No ``CreatedWorkload`` Event: nothing was created.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec

from connectors.k8s import podsetinfo
from connectors.k8s.resources import JOB_UID_LABEL, MIN_PARALLELISM
from events import objects as o
from events.goint import is_go_int
from events.quantity import QuantityError, parse_quantity
from projections import gates
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo

KEY = "kueue.x-k8s.io/prebuilt-workload-name"
"""The label key, and the annotation key, naming a Job's prebuilt Workload."""
LABEL_VALUE_MAX = 63
OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"
MISSING = "missing workload"
"""The ``Stopped`` message of a running Job whose prebuilt Workload is not (or not usably) there."""


def name_of(job: o.Job, annotation_first: bool) -> str:
    """The name of the Job's prebuilt Workload (empty: it has none). ``annotation_first``: the
    ``WorkloadIdentifierAnnotations`` gate."""
    label = job.metadata.labels.get(KEY, "")
    annotation = job.metadata.annotations.get(KEY, "")
    if annotation_first:
        return annotation or label
    if label:
        return label
    return annotation if len(annotation) > LABEL_VALUE_MAX else ""


def names_carried(job: o.Job) -> tuple[str, ...]:
    """Every Workload name the Job's label or annotation carries, whichever the gate reads (none: empty)."""
    names = {job.metadata.labels.get(KEY, ""), job.metadata.annotations.get(KEY, "")} - {""}
    return tuple(sorted(names))


def controller_ref(job_name: str, job_uid: str) -> dict[str, Any]:
    """The controller ownerReference a Job's Workload carries, generated or adopted."""
    return {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid, "controller": True,
            "blockOwnerDeletion": True}


def adoption_patch(job: o.Job, obs: o.Workload) -> dict[str, Any]:
    """The merge patch that makes ``job`` the controller of Workload ``obs``: its owner references with the Job's
    (in place of any earlier reference to the same Job), the Job's uid label, conditioned on the Workload's
    resourceVersion."""
    refs = [msgspec.to_builtins(r) for r in obs.metadata.owner_references if r.uid != job.metadata.uid]
    return {"metadata": {"resourceVersion": obs.metadata.resource_version,
                         "ownerReferences": [*refs, controller_ref(job.metadata.name, job.metadata.uid)],
                         "labels": {JOB_UID_LABEL: job.metadata.uid}}}


def controller_uid(obs: o.Workload) -> str | None:
    """The uid of the object controlling the Workload (None: nothing does)."""
    return next((r.uid for r in obs.metadata.owner_references if r.controller), None)


# --- equivalence ------------------------------------------------------------------------------------------------


def equivalent(state: ClusterState, job: o.Job, obs: o.Workload, wl: WorkloadInfo, max_exec: int | None) -> bool:
    """Whether the Job still corresponds to its prebuilt Workload, as Kueue judges it: the same maximum execution
    time (``max_exec``: the Job's, as Kueue reads it here — an int32 above 0, else none), and pod sets alike in
    count, minimum count, tolerations (not looked at once the Workload is admitted) and each container's
    resources. While the Workload holds quota the Job is compared with what running it makes of the pod sets
    (the admission's count under partial admission, the flavors' tolerations); a suspended Job may match the
    Workload's spec instead."""
    if obs.spec.maximum_execution_time_seconds != max_exec:
        return False
    mine = [_job_pod_set(job, state.gate(gates.PARTIAL_ADMISSION))]
    admitted = _true(wl.condition("Admitted"))
    running = _running_pod_sets(state, obs, wl)
    if running is not None:
        if _same_pod_sets(mine, running, admitted):
            return True
        return job.spec.suspend and _same_pod_sets(mine, obs.spec.pod_sets, admitted)
    return _same_pod_sets(mine, obs.spec.pod_sets, admitted)


def _true(c: o.Condition | None) -> bool:
    return c is not None and c.status == "True"


def _min_count(annotations: dict[str, str], partial_admission: bool) -> int | None:
    text = annotations.get(MIN_PARALLELISM)
    if not partial_admission or text is None or not is_go_int(text):
        return None
    return int(text)


def _job_pod_set(job: o.Job, partial_admission: bool) -> o.PodSet:
    spec = job.spec
    count = min(spec.parallelism, spec.completions) if spec.completions is not None else spec.parallelism
    return o.PodSet(name="main", count=count, min_count=_min_count(job.metadata.annotations, partial_admission),
                    template=spec.template)


def _running_pod_sets(state: ClusterState, obs: o.Workload, wl: WorkloadInfo) -> list[o.PodSet] | None:
    """The Workload's pod sets as running them under its admission makes them (None: it holds no quota, or
    its admission does not fit its pod sets)."""
    if not wl.reserving or wl.admission is None:
        return None
    by_name = {a.name: a for a in wl.admission.pod_set_assignments}
    partial = any(ps.min_count is not None and ps.min_count < ps.count for ps in obs.spec.pod_sets)
    out: list[o.PodSet] = []
    for ps in obs.spec.pod_sets:
        psa = by_name.get(ps.name)
        if psa is None:
            return None
        try:
            merged = podsetinfo.onto_template(ps.template, podsetinfo.start_info(state, wl, psa))
        except podsetinfo.MergeConflict:
            return None
        count = psa.count if partial and ps.min_count is not None and psa.count is not None else ps.count
        template = msgspec.structs.replace(ps.template, spec=msgspec.structs.replace(
            ps.template.spec, tolerations=merged.tolerations))
        out.append(msgspec.structs.replace(ps, count=count, template=template))
    return out


def _same_pod_sets(a: list[o.PodSet], b: list[o.PodSet], ignore_tolerations: bool) -> bool:
    return len(a) == len(b) and all(_same_pod_set(x, y, ignore_tolerations) for x, y in zip(a, b, strict=True))


def _same_pod_set(a: o.PodSet, b: o.PodSet, ignore_tolerations: bool) -> bool:
    sa, sb = a.template.spec, b.template.spec
    return (a.count == b.count and a.min_count == b.min_count
            and (ignore_tolerations or list(sa.tolerations) == list(sb.tolerations))
            and _same_resources(sa.init_containers, sb.init_containers)
            and _same_resources(sa.containers, sb.containers))


def _same_resources(a: list[o.Container], b: list[o.Container]) -> bool:
    """Containers alike in number and, one by one, in requests and limits (quantities by value)."""
    return len(a) == len(b) and all(
        _quantities(x.resources.requests) == _quantities(y.resources.requests)
        and _quantities(x.resources.limits) == _quantities(y.resources.limits) for x, y in zip(a, b, strict=True))


def _quantities(values: dict[str, o.Quantity]) -> dict[str, Decimal | str]:
    out: dict[str, Decimal | str] = {}
    for name, q in values.items():
        try:
            out[name] = parse_quantity(q)
        except QuantityError:
            out[name] = str(q)
    return out
