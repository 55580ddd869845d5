"""Keeping a batch/v1 Job's existing Workload in step with the Job, as Kueue's job reconciler does
(``pkg/controller/jobframework/reconciler.go``: ``ensureOneWorkload``, ``EquivalentToWorkload``,
``updateWorkloadToMatchJob``, ``UpdateWorkloadPriority``, and the queue-name update of a suspended Job).

Pure: each function decides from the Job, the Workload as the apiserver stores it and the log's view of it; the
job integration (:mod:`connectors.k8s.jobs`) does the writes, conditioned on the Workload's resourceVersion, and
puts each in the log (``JobActed``) for the Event Kueue records on the Job.

* **Equivalence** (:func:`equivalent`): the Job still corresponds to its Workload when they agree on the maximum
  execution time and, pod set by pod set, on count, minimum count, tolerations (not looked at once the Workload
  is admitted), each container's requests and limits, the pod-level resources and the resource claims. While
  the Workload holds quota the Job is compared with what running it makes of the pod sets; a suspended Job may
  match the Workload's spec instead. A prebuilt Workload that is not equivalent is finished ``OutOfSync``
  (:mod:`connectors.k8s.prebuilt`); a generated one is brought back in step (:func:`out_of_step`).
* **A generated Workload out of step** (the Job's parallelism, completions, resources, tolerations, minimum
  parallelism or ``kueue.x-k8s.io/max-exec-time-seconds`` changed): while the Job is suspended and the Workload
  holds no quota, it is rewritten in place from the Job — pod sets, queue name, priority, maximum execution
  time; ``active`` kept — Event ``UpdatedWorkload`` "Updated not matching Workload for suspended job: <ns>/<name>";
  otherwise it is deleted, Event ``DeletedWorkload`` "Deleted not matching Workload: <ns>/<name>", and the Job
  is given a new one as any Job without a Workload is. A running Job is first stopped (``Stopped`` "No matching
  Workload; restoring pod templates according to existent Workload") and its template restored from the old
  Workload: Kueue deletes the Workload in that same pass, kueue-es once the Job is stopped and restored, since
  the restore needs the old Workload.
* **The priority class** (generated Workloads): when the Job's ``kueue.x-k8s.io/priority-class`` names another
  class than the Workload's ``priorityClassRef`` and the Workload has no class or a WorkloadPriorityClass, its
  priority is resolved anew, as at creation, and written with its class — Event ``UpdatedWorkload`` "Updated
  workload priority class: <ns>/<name>" — admitted or not. A class missing from the log leaves the Workload as
  it is, and the Job waits for it (Kueue's reconcile fails on the lookup), warned as at creation (Warning
  ``WorkloadPriorityClassNotFound``, once per version of the Job). Not written while the Workload holds
  quota if the change would set or remove the class or change its kind: the apiserver refuses that.
* **The queue name** (generated and prebuilt Workloads): while the Job is suspended and its Workload neither
  finished, evicted nor holding quota, a ``kueue.x-k8s.io/queue-name`` label that differs from the Workload's
  ``spec.queueName`` is written there (no Event). The Workload is then queued in its new LocalQueue — also one
  that had none, its Job managed without a queue name (``manageJobsWithoutQueueName``,
  :mod:`connectors.k8s.job_selection`); such a Job losing its label moves its Workload to no queue. Kueue's
  reconcile reaches that step only for a Workload not evicted, and its write of a Workload holding quota is
  refused (``queueName`` is immutable then): both wait.

* **One Workload per Job** (:func:`one_workload`; generated Workloads only, Kueue's ``ensureOneWorkload``
  and ``FindMatchingWorkloads``): of the Workloads a Job of that name controls, the Job keeps the first that is
  its own (this Job's uid) and matches it — oldest first, then by name, where Kueue takes the first its cache
  lists — else the first of its own, which is then brought in step as above. Every other one is deleted
  (its finalizer taken off first; Event ``DeletedWorkload`` "Deleted not matching Workload: <ns>/<name>" for each
  one deleted, none for one already being deleted), and the pass ends there, as Kueue's reconcile does. A
  Workload of an earlier Job of the same name (another uid) is never the Job's: it is deleted (Kueue compares the
  uid under ``FinishOrphanedWorkloads``, on by default; kueue-es always does). A Workload that merely refers to
  the Job, with no controller or another one, is not the Job's to delete. With several Workloads and none
  matching, Kueue deletes them all in one pass (rewriting only the first, for a suspended Job without quota) and
  stops a running Job without restoring its template ("Missing Workload; unable to restore pod templates");
  kueue-es keeps the first to bring in step as it would a Job's only Workload.

Nothing is decided for a finished Job or a finished Workload (the finishing rules come first), nor while a
decision about the Workload waits to be written (:attr:`connectors.k8s.mirror.Mirror.pending`): Kueue decides
from the Workload as stored, and the log and the apiserver then agree on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, prebuilt
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL, workload_priority
from connectors.k8s.resources import KUEUE_GROUP, MIN_PARALLELISM
from events import objects as o
from events.goint import is_go_int
from events.quantity import QuantityError, parse_quantity
from projections import gates
from projections.cluster import ClusterState
from projections.workloads import FINISHED, WorkloadInfo

UPDATED_WORKLOAD, DELETED_WORKLOAD = "UpdatedWorkload", "DeletedWorkload"
"""``JobActed`` actions, and the reasons of the Events recorded on the Job for them."""
UPDATE, DELETE, STOP = "update", "delete", "stop"
"""What :func:`out_of_step` says to do with a generated Workload the Job no longer matches."""
NO_MATCHING_WORKLOAD = "No matching Workload; restoring pod templates according to existent Workload"
"""The ``Stopped`` message of a running Job whose generated Workload no longer matches it."""
WORKLOAD_PRIORITY_CLASS = (KUEUE_GROUP, "WorkloadPriorityClass")


def updated_message(workload_key: str) -> str:
    return f"Updated not matching Workload for suspended job: {workload_key}"


def priority_updated_message(workload_key: str) -> str:
    return f"Updated workload priority class: {workload_key}"


def admission_gate_updated_message(gate: str | None) -> str:
    """Kueue's ``UpdatedWorkload`` message once a Workload is given its job's admission gate (None: removed, the
    job's value then empty), the value Go-quoted (a gate list is plain ASCII, so JSON's quoting is the same)."""
    return f"Updated workload AdmissionGatedBy to {json.dumps(gate or '')}"


def deleted_message(workload_key: str) -> str:
    return f"Deleted not matching Workload: {workload_key}"


# --- what to change ---------------------------------------------------------------------------------------------


def out_of_step(state: ClusterState, job: o.Job, obs: o.Workload, wl: WorkloadInfo, *, running: bool,
                max_exec: int | None) -> str:
    """What Kueue does with the Job's generated Workload ``obs`` (``wl`` in the log): ``""`` when it still matches
    the Job (``max_exec``: the Job's maximum execution time, as Kueue reads it); :data:`STOP` the Job first when
    it is ``running``; else :data:`UPDATE` it in place when it holds no quota, :data:`DELETE` it when it does."""
    mine = [job_pod_set(job, state.gate(gates.PARTIAL_ADMISSION), True)]
    return out_of_step_sets(state, mine, obs, wl, running=running, suspended=job.spec.suspend, max_exec=max_exec)


def out_of_step_sets(state: ClusterState, mine: list[o.PodSet], obs: o.Workload, wl: WorkloadInfo, *,
                     running: bool, suspended: bool, max_exec: int | None) -> str:
    """:func:`out_of_step` for any kind Kueue's job reconciler runs, given the pod sets the job makes now
    (``mine``) and whether it is ``suspended``."""
    if wl.phase == FINISHED or equivalent_sets(state, mine, obs, wl, max_exec, suspended=suspended):
        return ""
    if running:
        return STOP
    return DELETE if wl.reserving else UPDATE


def one_workload(state: ClusterState, job: o.Job, owned: Sequence[tuple[o.Workload, WorkloadInfo]],
                 max_exec: int | None) -> tuple[tuple[o.Workload, WorkloadInfo] | None, list[o.Workload]]:
    """The Workload a Job with generated Workloads keeps among ``owned`` (those a Job of its name controls, as
    stored and in the log), and the others, to delete (see the module docstring). ``max_exec``: the Job's maximum
    execution time, as Kueue reads it."""
    mine = [job_pod_set(job, state.gate(gates.PARTIAL_ADMISSION), True)]
    return one_workload_of(state, mine, owned, uid=job.metadata.uid, suspended=job.spec.suspend, max_exec=max_exec)


def one_workload_of(state: ClusterState, mine: list[o.PodSet], owned: Sequence[tuple[o.Workload, WorkloadInfo]], *,
                    uid: str, suspended: bool, max_exec: int | None
                    ) -> tuple[tuple[o.Workload, WorkloadInfo] | None, list[o.Workload]]:
    """:func:`one_workload` for any kind Kueue's job reconciler runs, given the pod sets the job makes now
    (``mine``), its ``uid`` and whether it is ``suspended``."""
    ordered = sorted(owned, key=lambda p: (p[0].metadata.creation_timestamp or "", p[0].metadata.name))
    own = [p for p in ordered if prebuilt.controller_uid(p[0]) == uid]
    keep = next((p for p in own if equivalent_sets(state, mine, p[0], p[1], max_exec, suspended=suspended)),
                own[0] if own else None)
    return keep, [obs for obs, _ in ordered if keep is None or obs.metadata.uid != keep[0].metadata.uid]


def queue_to_set(job: o.Job, obs: o.Workload, wl: WorkloadInfo, *, running: bool) -> str | None:
    """The queue name to give the Workload of a suspended Job whose ``kueue.x-k8s.io/queue-name`` changed (None:
    none to give — the same, the Job running, the Workload finished, evicted or holding quota; ``""``: none, the
    label gone from a Job managed without one under ``manageJobsWithoutQueueName``, as Kueue writes it — a Job
    without the label that is not managed that way never gets here)."""
    return queue_change(job.metadata.labels, obs, wl, running=running)


def queue_change(labels: Mapping[str, str], obs: o.Workload, wl: WorkloadInfo, *, running: bool) -> str | None:
    """:func:`queue_to_set` for any object Kueue's job reconciler runs (a Job, a Pod, a pod group's first Pod)
    with these ``labels``; ``running``: not suspended (a Pod: neither gated nor ended)."""
    queue = labels.get(QUEUE_LABEL, "")
    if queue == obs.spec.queue_name or running:
        return None
    if wl.phase == FINISHED or wl.evicted or wl.reserving:
        return None
    return queue


def priority_to_set(state: ClusterState, job: o.Job, obs: o.Workload, wl: WorkloadInfo
                    ) -> tuple[dict[str, str] | None, int | None] | None:
    """``(priorityClassRef, priority)`` to give the Job's generated Workload once its priority-class label names
    another class than the Workload's (None for a field: none; None: nothing to change). Raises
    :class:`~connectors.k8s.job_priority.WorkloadPriorityClassNotFound` or
    :class:`~connectors.k8s.job_priority.PriorityClassNotFound` when the class the Job names is not in the log."""
    return priority_change(state, job.metadata.labels, job.spec.template.spec.priority_class_name, obs, wl)


def priority_change(state: ClusterState, labels: Mapping[str, str], pod_priority_class: str | None,
                    obs: o.Workload, wl: WorkloadInfo) -> tuple[dict[str, str] | None, int | None] | None:
    """:func:`priority_to_set` for any object Kueue's job reconciler runs, with these ``labels`` and pods naming
    ``pod_priority_class`` (Kueue's ``UpdateWorkloadPriority``)."""
    if not looks_up_class(labels, obs, wl):
        return None
    ref = obs.spec.priority_class_ref
    resolved = workload_priority(state, labels, pod_priority_class)
    new_ref, priority = resolved if resolved is not None else (None, None)
    if wl.reserving and not _same_kind(ref, new_ref):
        return None  # the apiserver refuses to set, remove or re-kind the class of a Workload holding quota
    return new_ref, priority


def looks_up_class(labels: Mapping[str, str], obs: o.Workload, wl: WorkloadInfo) -> bool:
    """Whether :func:`priority_change` looks up the class the ``labels`` name for Workload ``obs``: not for a
    finished one, one whose class is not a WorkloadPriorityClass, or one whose class the label already names.
    Only a lookup that does not fail says the class is there (ro-diff-d L1)."""
    ref = obs.spec.priority_class_ref
    if wl.phase == FINISHED or (ref is not None and (ref.group, ref.kind) != WORKLOAD_PRIORITY_CLASS):
        return False
    return labels.get(PRIORITY_LABEL, "") != (ref.name if ref is not None else "")


def _same_kind(ref: o.PriorityClassRef | None, new_ref: dict[str, str] | None) -> bool:
    return ref is not None and new_ref is not None and (ref.group, ref.kind) == (new_ref["group"], new_ref["kind"])


def spec_patch(obs: o.Workload, spec: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that gives Workload ``obs`` the pod sets, queue name, priority and maximum execution time
    of ``spec`` (a Workload spec as built for the Job; a field it lacks is removed), keeping the rest, conditioned
    on the Workload's resourceVersion."""
    fields = ("podSets", "queueName", "priorityClassRef", "priority", "maximumExecutionTimeSeconds")
    return {"metadata": {"resourceVersion": obs.metadata.resource_version},
            "spec": {name: spec.get(name) for name in fields}}


def priority_patch(obs: o.Workload, ref: dict[str, str] | None, priority: int | None) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": obs.metadata.resource_version},
            "spec": {"priorityClassRef": ref, "priority": priority}}


def queue_patch(obs: o.Workload, queue: str) -> dict[str, Any]:
    """Move the Workload to LocalQueue ``queue`` (``""``: to none, the field removed, as Kueue's omits it)."""
    return {"metadata": {"resourceVersion": obs.metadata.resource_version}, "spec": {"queueName": queue or None}}


# --- equivalence ------------------------------------------------------------------------------------------------


def generated_min_count(annotations: dict[str, str], count: int, partial_admission: bool) -> int | None:
    """The ``minCount`` a generated Workload's pod set of ``count`` pods gets: the Job's
    ``kueue.x-k8s.io/job-min-parallelism`` under the PartialAdmission gate, when it is a whole number from 1 to
    ``count - 1`` (what Kueue's job webhook lets through)."""
    text = annotations.get(MIN_PARALLELISM)
    if not (partial_admission and text and text.isascii() and text.isdigit()) or not 1 <= int(text) < count:
        return None
    return int(text)


def equivalent(state: ClusterState, job: o.Job, obs: o.Workload, wl: WorkloadInfo, max_exec: int | None, *,
               generated: bool = False) -> bool:
    """Whether the Job still corresponds to its Workload, as Kueue judges it: the same maximum execution time
    (``max_exec``: the Job's, as Kueue reads it — an int32 above 0, else none), and pod sets alike in count,
    minimum count, tolerations (not looked at once the Workload is admitted), each container's resources, the
    pod-level resources and the resource claims (:func:`same_pod_spec`). While the Workload holds quota the
    Job is compared with what running it makes of the pod sets (the admission's count under partial
    admission, the flavors' tolerations); a suspended Job may match the Workload's spec instead.
    ``generated``: the Workload was built from the Job, its minimum count as :func:`generated_min_count` gives it
    (a prebuilt one: any whole number the Job's annotation holds)."""
    mine = [job_pod_set(job, state.gate(gates.PARTIAL_ADMISSION), generated)]
    return equivalent_sets(state, mine, obs, wl, max_exec, suspended=job.spec.suspend)


def equivalent_sets(state: ClusterState, mine: list[o.PodSet], obs: o.Workload, wl: WorkloadInfo,
                    max_exec: int | None, *, suspended: bool) -> bool:
    """:func:`equivalent` for any kind Kueue's job reconciler runs (Kueue's ``EquivalentToWorkload``), given the
    pod sets the job makes now (``mine``, in the Workload's order) and whether it is ``suspended``."""
    if obs.spec.maximum_execution_time_seconds != max_exec:
        return False
    return pod_sets_match(state, mine, obs, wl, suspended=suspended)


def pod_sets_match(state: ClusterState, mine: list[o.PodSet], obs: o.Workload, wl: WorkloadInfo, *,
                   suspended: bool) -> bool:
    """Whether the pod sets a job (or Pod) makes are alike the Workload's, as :func:`equivalent` compares them:
    with what running them under its admission makes while it holds quota (``suspended``: the job is held back,
    and may match the Workload's spec instead), else with its spec."""
    admitted = _true(wl.condition("Admitted"))
    running = _running_pod_sets(state, obs, wl)
    if running is not None:
        if same_pod_sets(mine, running, ignore_tolerations=admitted):
            return True
        return suspended and same_pod_sets(mine, obs.spec.pod_sets, ignore_tolerations=admitted)
    return same_pod_sets(mine, obs.spec.pod_sets, ignore_tolerations=admitted)


def _true(c: o.Condition | None) -> bool:
    return c is not None and c.status == "True"


def _min_count(annotations: dict[str, str], partial_admission: bool) -> int | None:
    text = annotations.get(MIN_PARALLELISM)
    if not partial_admission or text is None or not is_go_int(text):
        return None
    return int(text)


def job_pod_set(job: o.Job, partial_admission: bool, generated: bool) -> o.PodSet:
    """The one pod set ``main`` a Job makes now, as Kueue compares it with its Workload's."""
    spec, annotations = job.spec, job.metadata.annotations
    count = min(spec.parallelism, spec.completions) if spec.completions is not None else spec.parallelism
    min_count = (generated_min_count(annotations, count, partial_admission) if generated
                 else _min_count(annotations, partial_admission))
    return o.PodSet(name="main", count=count, min_count=min_count, template=spec.template)


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


def same_pod_sets(a: list[o.PodSet], b: list[o.PodSet], *, ignore_tolerations: bool) -> bool:
    """Whether two lists of pod sets are alike as Kueue compares a job's with its Workload's (its
    ``ComparePodSetSlices``): as many, and one by one alike in count, minimum count and pod spec
    (:func:`same_pod_spec`); names are not compared."""
    return len(a) == len(b) and all(_same_pod_set(x, y, ignore_tolerations) for x, y in zip(a, b, strict=True))


def _same_pod_set(a: o.PodSet, b: o.PodSet, ignore_tolerations: bool) -> bool:
    return (a.count == b.count and a.min_count == b.min_count
            and same_pod_spec(a.template.spec, b.template.spec, ignore_tolerations=ignore_tolerations))


def same_pod_spec(a: o.PodSpec, b: o.PodSpec, *, ignore_tolerations: bool = False) -> bool:
    """Whether two pod specs are alike as Kueue compares a pod template (its ``ComparePodTemplate``): the same
    tolerations (unless ``ignore_tolerations``), init containers and containers alike in number and, one by
    one, in requests and limits, the same pod-level resources (set on both or neither) and the same resource
    claims in any order (Kueue #14436: both are charged to quota, so a Workload that leaves either out is not
    the job's); nothing else is looked at."""
    return ((ignore_tolerations or list(a.tolerations) == list(b.tolerations))
            and _same_resources(a.init_containers, b.init_containers)
            and _same_resources(a.containers, b.containers)
            and _same_pod_resources(a.resources, b.resources)
            and _same_claims(a.resource_claims, b.resource_claims))


def _same_pod_resources(a: o.ResourceRequirements | None, b: o.ResourceRequirements | None) -> bool:
    """Pod-level ``resources`` alike: absent on both, or requests and limits alike by value."""
    if a is None or b is None:
        return a is b
    return (_quantities(a.requests) == _quantities(b.requests)
            and _quantities(a.limits) == _quantities(b.limits))


def _same_claims(a: list[o.PodResourceClaim], b: list[o.PodResourceClaim]) -> bool:
    """``resourceClaims`` alike whatever their order (a list keyed by name): as many, each name on both sides
    naming the same claim or template."""
    by_name = {c.name: c for c in b}
    return len(a) == len(b) and all(by_name.get(c.name) == c for c in a)


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
