"""One scheduling cycle, as Kueue runs it, as a pure function of projected state and time.

Phases (Kueue's ``schedule()``):
1. heads — the first pending workload of every active ClusterQueue;
2. snapshot — a quota tree copied from the projection;
3. nominate — flavor assignment, preemption targets, partial admission;
4. order — non-borrowing first, then priority, then queue time (or the fair-sharing tournament);
5. admit — in that order, each entry charging the snapshot so later entries see it;
6. requeue — failed entries get QuotaReserved=False and are parked or kept, per queueing strategy.
The output is a list of decision events; nothing is mutated outside the cycle's own snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events import objects as o
from events import schema as ev
from events.quantity import format_quantity
from projections.cluster import ClusterState, selector_matches
from projections.workloads import WorkloadInfo

from kueue_es.scheduler.config import SchedulerConfig
from kueue_es.scheduler.flavors import Assignment, Granular, Mode, assign_flavors
from kueue_es.scheduler.preemption import Target, find_targets
from kueue_es.scheduler.quota import QuotaNode, QuotaTree, build_quota_tree

PARK_ALWAYS_HEAP = frozenset({"FailedAfterNomination", "PendingPreemption", "PendingMigration", "PreemptionFailed"})


@dataclass
class Entry:
    wl: WorkloadInfo
    cq: str
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    status: str = ""
    """Non-empty when the entry was not nominated: the QuotaReserved=False reason."""
    message: str = ""
    requeue_reason: str = ""


class CycleContext:
    """What one cycle reads (the projection) and mutates (its own quota tree)."""

    def __init__(self, state: ClusterState, config: SchedulerConfig, now: int) -> None:
        self.state = state
        self.config = config
        self.now = now
        self.tree: QuotaTree = build_quota_tree(state)

    def reserving_in(self, cq: str) -> list[WorkloadInfo]:
        wls = self.state.workloads
        return [wls[k] for k in sorted(self.state.reserving.get(cq, ()))]

    def preemption_oracle(self, wl: WorkloadInfo, node: QuotaNode, fr: str, val: int) -> tuple[Granular, int]:
        targets = find_targets(self, wl, node, {fr: val}, {fr: val})
        if not targets:
            return Granular.NO_CANDIDATES, node.lowest_fitting_height(fr, val)[0]
        for t in targets:
            self.tree.charge(t.workload.cluster_queue, t.workload.usage, -1)
        try:
            borrow = node.lowest_fitting_height(fr, val)[0]
        finally:
            for t in targets:
                self.tree.charge(t.workload.cluster_queue, t.workload.usage, 1)
        if all(t.workload.cluster_queue != node.name for t in targets):
            return Granular.RECLAIM, borrow
        return Granular.PREEMPT, borrow


def inactive_reason(state: ClusterState, cq: str) -> str | None:
    """Why a ClusterQueue cannot admit (Kueue's Active=False reasons), or None when it is active."""
    obj = state.cluster_queues.get(cq)
    if obj is None:
        return "NotFound"
    spec = obj.spec
    reasons = []
    if spec.stop_policy not in ("None", ""):
        reasons.append("Stopped")
    if "cq:" + cq in state.forest.cyclic:
        reasons.append("Unknown")
    for rg in spec.resource_groups:
        for fq in rg.flavors:
            if fq.name not in state.flavors:
                reasons.append("FlavorNotFound")
                break
    checks = spec.admission_checks_strategy.admission_checks if spec.admission_checks_strategy else []
    if any(c.name not in state.admission_checks for c in checks):
        reasons.append("AdmissionCheckNotFound")
    for rg in spec.resource_groups:
        for fq in rg.flavors:
            f = state.flavors.get(fq.name)
            if f is not None and f.spec.topology_name and f.spec.topology_name not in state.topologies:
                reasons.append("TopologyNotFound")
    return reasons[0] if reasons else None


def required_checks(state: ClusterState, cq: str, flavors: set[str]) -> list[str]:
    spec = state.cluster_queues[cq].spec
    rules = spec.admission_checks_strategy.admission_checks if spec.admission_checks_strategy else []
    return sorted(r.name for r in rules if not r.on_flavors or flavors & set(r.on_flavors))


def heads(state: ClusterState) -> list[Entry]:
    out = []
    for cq in sorted(state.queues):
        q = state.queues[cq]
        key = q.head()
        if key is None or inactive_reason(state, cq) is not None:
            continue
        out.append(Entry(state.workloads[key], cq))
    return out


def nominate(ctx: CycleContext, e: Entry) -> None:
    state, wl = ctx.state, e.wl
    if any(s.state in ("Retry", "Rejected") for s in wl.check_states.values()):
        e.status, e.message = "PendingEvaluation", "The workload has failed admission checks"
        return
    cq = state.cluster_queues[e.cq]
    labels = state.namespaces.get(wl.namespace)
    if labels is None:
        e.status, e.message = "Misconfigured", f"Namespace {wl.namespace} doesn't exist"
        e.requeue_reason = "NamespaceMismatch"
        return
    if not selector_matches(cq.spec.namespace_selector, labels):
        e.status, e.message = "Misconfigured", "Workload namespace doesn't match ClusterQueue selector"
        e.requeue_reason = "NamespaceMismatch"
        return
    e.assignment = assign_flavors(ctx, wl, e.cq)
    if e.assignment.mode == Mode.PREEMPT:
        e.targets = _targets(ctx, e)
    if e.assignment.mode == Mode.NO_FIT or (e.assignment.mode == Mode.PREEMPT and not e.targets):
        _try_partial(ctx, e)


def _targets(ctx: CycleContext, e: Entry) -> list[Target]:
    a = e.assignment
    assert a is not None
    node = ctx.tree.cluster_queues[e.cq]
    return find_targets(ctx, e.wl, node, dict(a.usage), a.needs_preemption_frs())


def _try_partial(ctx: CycleContext, e: Entry) -> None:
    """Kueue's PodSetReducer: the largest counts (down to minCount) that fit or can preempt."""
    pod_sets = e.wl.pod_sets
    deltas = [ps.count - ps.min_count if ps.min_count is not None else 0 for ps in pod_sets]
    total = sum(deltas)
    if total <= 0:
        return

    def counts_for(k: int) -> list[int]:
        return [ps.count - (d * k) // total for ps, d in zip(pod_sets, deltas, strict=True)]

    lo, hi, found = 1, total, None
    while lo <= hi:
        mid = (lo + hi) // 2
        a = assign_flavors(ctx, e.wl, e.cq, counts_for(mid))
        targets: list[Target] = []
        ok = a.mode == Mode.FIT
        if a.mode == Mode.PREEMPT:
            probe = Entry(e.wl, e.cq, a)
            targets = _targets(ctx, probe)
            ok = bool(targets)
        if ok:
            found = (a, targets)
            hi = mid - 1
        else:
            lo = mid + 1
    if found is not None:
        e.assignment, e.targets = found


def order_entries(entries: list[Entry]) -> list[Entry]:
    def key(e: Entry) -> tuple:
        borrow = e.assignment.borrow if e.assignment is not None else 0
        return (borrow, -e.wl.priority, e.wl.queue_order_time(), e.wl.uid)

    return sorted(entries, key=key)


def run_cycle(state: ClusterState, config: SchedulerConfig, now: int, cycle: int) -> list[ev.Decision]:
    ctx = CycleContext(state, config, now)
    entries = heads(state)
    for e in entries:
        nominate(ctx, e)
    out: list[ev.Decision] = []
    victims: set[str] = set()
    base = {"time": now, "cycle": cycle, "input": state.offset}
    for e in order_entries(entries):
        wl, a = e.wl, e.assignment
        if e.status:
            _pending(out, state, e, e.status, e.message, e.requeue_reason, base)
            continue
        assert a is not None
        if a.mode == Mode.NO_FIT:
            _pending(out, state, e, a.reason, a.message, "NoFit", base)
            continue
        if a.mode == Mode.PREEMPT and not e.targets:
            _pending(out, state, e, "WaitingForQuota", a.message, "PreemptionNoCandidates", base)
            if state.cluster_queues[e.cq].spec.preemption.reclaim_within_cohort != "Any":
                _reserve_capacity(ctx, e)
            continue
        if any(t.workload.key in victims for t in e.targets):
            _pending(out, state, e, "WaitingForQuota",
                     "Workload has overlapping preemption targets with another workload", "FailedAfterNomination", base)
            continue
        node = ctx.tree.cluster_queues[e.cq]
        removed = [t.workload for t in e.targets]
        for w in removed:
            ctx.tree.charge(w.cluster_queue, w.usage, -1)
        fits = all(v <= node.available(fr) for fr, v in a.usage.items())
        for w in removed:
            ctx.tree.charge(w.cluster_queue, w.usage, 1)
        if not fits:
            _pending(out, state, e, "WaitingForQuota", "Workload no longer fits after processing another workload",
                     "FailedAfterNomination", base)
            continue
        for w in removed:
            victims.add(w.key)
            ctx.tree.charge(w.cluster_queue, w.usage, -1)
        ctx.tree.charge(e.cq, a.usage, 1)
        if e.targets:
            _preempt(out, state, e, base)
            continue
        _admit(out, state, e, base)
    return out


def _reserve_capacity(ctx: CycleContext, e: Entry) -> None:
    """A preemptor without candidates still holds back capacity so lower priorities can't take it this cycle."""
    a = e.assignment
    assert a is not None
    node = ctx.tree.cluster_queues[e.cq]
    for fr, req in a.usage.items():
        used = node.usage.get(fr, 0)
        nominal = node.nominal.get(fr, 0)
        if a.borrow > 0:
            bl = node.borrowing_limit.get(fr)
            amount = req if bl is None else min(req, nominal + bl - used)
        else:
            amount = max(0, min(req, nominal - used))
        if amount > 0:
            node.add_usage(fr, amount)


def _pending(out: list[ev.Decision], state: ClusterState, e: Entry, reason: str, message: str,
             requeue_reason: str, base: dict) -> None:
    wl = e.wl
    strategy = state.cluster_queues[e.cq].spec.queueing_strategy
    if strategy == "StrictFIFO":
        parked = requeue_reason == "NamespaceMismatch"
    else:
        parked = requeue_reason not in PARK_ALWAYS_HEAP
    current = wl.condition("QuotaReserved")
    if not parked and current is not None and current.reason == reason and current.message == message:
        return  # nothing new to say: no event, so a blocked head does not flood the log
    out.append(ev.WorkloadPending(key=wl.key, uid=wl.uid, reason=reason, message=message,
                                  requeue_reason=requeue_reason, parked=parked, **base))


def _preempt(out: list[ev.Decision], state: ClusterState, e: Entry, base: dict) -> None:
    wl = e.wl
    a = e.assignment
    assert a is not None
    issued = 0
    for t in e.targets:
        victim = t.workload
        if victim.evicted:
            continue
        issued += 1
        out.append(ev.WorkloadPreempted(
            key=victim.key, uid=victim.uid, reason=t.reason, preemptor=wl.key,
            message=_preemption_message(state, wl, victim, t.reason), **base))
    msg = (a.message + ". " if a.message else "") + f"Pending the preemption of {len(e.targets)} workload(s)"
    _pending(out, state, e, "WaitingForPreemptedWorkloads", msg, "PendingPreemption", base)


_REASON_TEXT = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def _path(state: ClusterState, cq: str) -> str:
    forest = state.forest
    parts = [cq] + [n[3:] for n in forest.ancestors("cq:" + cq)]
    return "/" + "/".join(reversed(parts))


def _preemption_message(state: ClusterState, preemptor: WorkloadInfo, victim: WorkloadInfo, reason: str) -> str:
    job_uid = preemptor.labels.get("kueue.x-k8s.io/job-uid", "UNKNOWN")
    return (f"Preempted to accommodate a workload (UID: {preemptor.uid}, JobUID: {job_uid}) due to "
            f"{_REASON_TEXT[reason]}; preemptor path: {_path(state, preemptor.cluster_queue)}; "
            f"preemptee path: {_path(state, victim.cluster_queue)}")


def admission_of(e: Entry) -> o.Admission:
    a = e.assignment
    assert a is not None
    psas = []
    for ps in a.pod_sets:
        psas.append(o.PodSetAssignment(
            name=ps.name,
            flavors=dict(sorted(ps.flavors.items())),
            resource_usage={r: format_quantity(r, ps.requests[r]) for r in sorted(ps.flavors)},
            count=ps.count,
        ))
    return o.Admission(cluster_queue=e.cq, pod_set_assignments=psas)


def _admit(out: list[ev.Decision], state: ClusterState, e: Entry, base: dict) -> None:
    wl = e.wl
    admission = admission_of(e)
    out.append(ev.QuotaReserved(key=wl.key, uid=wl.uid, admission=admission,
                                message=f"Quota reserved in ClusterQueue {e.cq}", **base))
    flavors = {f for psa in admission.pod_set_assignments for f in psa.flavors.values()}
    checks = required_checks(state, e.cq, flavors)
    if all(wl.check_states.get(c) is not None and wl.check_states[c].state == "Ready" for c in checks):
        out.append(ev.WorkloadAdmitted(key=wl.key, uid=wl.uid, message="The workload is admitted", **base))
