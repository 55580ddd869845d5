"""Choosing preemption victims, as Kueue's classical preemptor does (Fair Sharing off).

Candidates come from the preemptor's own ClusterQueue (withinClusterQueue) and, walking up the cohort tree,
from ClusterQueues that borrow (reclaimWithinCohort, borrowWithinCohort). They are removed greedily in
Kueue's candidate order until the preemptor fits, then added back from the second-to-last while it still
fits, so the set is small. Every removal is simulated on the cycle's quota tree and undone afterwards. For a
preemptor with TAS pod sets "fits" covers its topology as well (:mod:`kueue_es.scheduler.taspreempt`): the removed
candidates' domains are freed on the cycle's TAS snapshots and the pod sets must find a placement.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cmp_to_key
from typing import TYPE_CHECKING

from kueue_es.scheduler import preemption_config, siblings
from kueue_es.scheduler.quota import QuotaNode
from projections.queue_order import QueueOrder
from projections.workloads import WorkloadInfo

if TYPE_CHECKING:
    from events import objects as o
    from kueue_es.scheduler.cycle import CycleContext
    from kueue_es.scheduler.taspreempt import TopologyFit
    from projections.cluster import ClusterState

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

CONFIGURABLE_PREEMPTION = "ConfigurablePreemption"

HIERARCHICAL, WITHOUT_BORROWING, WHILE_BORROWING, SAME_QUEUE, CONFIGURED = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Target:
    workload: WorkloadInfo
    reason: str
    selection: preemption_config.Selection | None = None
    """A ``ConfigurablePreemption`` victim's: the PreemptionConfig rules that chose it."""


@dataclass
class _Candidate:
    wl: WorkloadInfo
    kind: int
    node: QuotaNode
    selection: preemption_config.Selection | None = None


def policy_allows(policy: str, preemptor: WorkloadInfo, candidate: WorkloadInfo, order: QueueOrder) -> bool:
    """Whether a preemption policy lets ``preemptor`` evict ``candidate`` (\"newer\": by queue-order time)."""
    if policy == "Any":
        return True
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority and order.time(preemptor) < order.time(candidate)
        )
    return False


def candidate_key(preemptor_cq: str, now: int):
    """Kueue's victim order: evicted first, other ClusterQueues first, lower priority, most recently reserved, uid."""

    def key(wl: WorkloadInfo) -> tuple:
        reserved = wl.reserved_at if wl.reserved_at is not None else now
        return (0 if wl.evicted else 1, 0 if wl.cluster_queue != preemptor_cq else 1, wl.priority, -reserved, wl.uid)

    return key


def candidate_order(preemptor_cq: str, now: int):
    """:func:`candidate_key` for classical candidates."""
    key = candidate_key(preemptor_cq, now)
    return lambda c: key(c.wl)


def sort_candidates(items: list, preemptor_cq: str, now: int, afs_usage=None, wl_of=lambda x: x) -> None:
    """Sort in Kueue's victim order. With Admission Fair Sharing (``afs_usage(wl)`` gives the usage of a
    workload's LocalQueue, or None outside usage-based ClusterQueues), two candidates of one ClusterQueue but
    different LocalQueues go higher usage first, before priority is compared — a rule between such pairs only,
    so the sort compares pairs. LocalQueues are told apart by namespace and name: same-named queues of two
    namespaces are different queues (Kueue v0.20)."""
    key = candidate_key(preemptor_cq, now)
    if afs_usage is None:
        items.sort(key=lambda x: key(wl_of(x)))
        return

    def cmp(x, y) -> int:
        a, b = wl_of(x), wl_of(y)
        ka, kb = key(a), key(b)
        if ka[:2] != kb[:2]:
            return -1 if ka[:2] < kb[:2] else 1
        if a.cluster_queue == b.cluster_queue and (a.namespace, a.queue_name) != (b.namespace, b.queue_name):
            ua, ub = afs_usage(a), afs_usage(b)
            if ua is not None and ub is not None and ua != ub:
                return -1 if ua > ub else 1
        return -1 if ka[2:] < kb[2:] else (1 if ka[2:] > kb[2:] else 0)

    items.sort(key=cmp_to_key(cmp))


def uses_any(wl: WorkloadInfo, frs: dict[str, int]) -> bool:
    """Whether ``wl`` holds quota of any of the flavor-resources ``frs``."""
    return any(fr in frs for fr in wl.usage)



def own_queue_candidates(ctx: CycleContext, wl: WorkloadInfo, cq: str, p: o.ClusterQueuePreemption,
                         needed: dict[str, int]) -> list[WorkloadInfo]:
    """The workloads of the preemptor's own ClusterQueue ``cq`` its ``withinClusterQueue`` policy ``p`` lets it
    preempt, among those holding quota of the flavor-resources it lacks (``needed``)."""
    if p.within_cluster_queue == "Never":
        return []
    return [w for w in ctx.reserving_in(cq)
            if w.key != wl.key and uses_any(w, needed) and policy_allows(p.within_cluster_queue, wl, w, ctx.order)]


def find_targets(ctx: CycleContext, wl: WorkloadInfo, node: QuotaNode, requests: dict[str, int],
                 needed: dict[str, int], topology: TopologyFit | None = None) -> list[Target]:
    """Victims that let ``wl`` (``requests`` per FR) fit in ``node``; ``needed`` are the FRs whose own assignment
    mode is Preempt (the FRs that lack room); ``topology``: its TAS pod sets, which must be placed too.

    ``needed`` picks the candidates (they must hold some of it), the queues to look into (over nominal on it), when a
    candidate stays valid and whether the preemptor is under nominal. The hierarchical advantage, as in Kueue, is
    judged on the whole request: a preemptor that fits one resource only by borrowing has none, even when the
    resource it lacks is within its nominal quota."""
    spec = ctx.state.cluster_queues[node.name].spec
    p = spec.preemption
    now = ctx.now
    candidates = [_Candidate(w, SAME_QUEUE, node) for w in own_queue_candidates(ctx, wl, node.name, p, needed)]
    has_hierarchical = False
    if node.parent is not None and p.reclaim_within_cohort != "Never":
        bwc = p.borrow_within_cohort
        forbid_borrow = bwc is None or bwc.policy == "Never"
        asked = {fr: v for fr, v in requests.items() if v}  # Kueue's request leaves zero quantities out
        advantage = all(node.usage.get(fr, 0) + v <= node.nominal.get(fr, 0) for fr, v in asked.items())
        remaining = {fr: max(0, v - node.local_available(fr)) for fr, v in asked.items()}
        visited: QuotaNode = node
        ancestor = node.parent
        while ancestor is not None:
            for cq_node in _cluster_queues_below(ancestor, skip=visited, frs=needed):
                for w in ctx.reserving_in(cq_node.name):
                    if not uses_any(w, needed) or not policy_allows(p.reclaim_within_cohort, wl, w, ctx.order):
                        continue
                    if advantage:
                        kind = HIERARCHICAL
                        has_hierarchical = True
                    elif forbid_borrow:
                        kind = WITHOUT_BORROWING
                    elif w.priority >= wl.priority or (
                        bwc is not None and bwc.max_priority_threshold is not None and w.priority > bwc.max_priority_threshold
                    ):
                        kind = WITHOUT_BORROWING
                    else:
                        kind = WHILE_BORROWING
                    candidates.append(_Candidate(w, kind, cq_node))
            advantage = advantage or all(
                ancestor.usage.get(fr, 0) + v <= ancestor.subtree.get(fr, 0) for fr, v in remaining.items()
            )
            remaining = {fr: max(0, v - ancestor.local_available(fr)) for fr, v in remaining.items()}
            visited, ancestor = ancestor, ancestor.parent
    config = preemption_config.config_for(ctx, node.name)
    if not preemption_config.has_rules(config, *preemption_config.TRIGGERS):
        config = None
    if not candidates and config is None:
        return []
    hier = [c for c in candidates if c.kind == HIERARCHICAL]
    prio = [c for c in candidates if c.kind in (WITHOUT_BORROWING, WHILE_BORROWING)]
    same = [c for c in candidates if c.kind == SAME_QUEUE]
    for group in (hier, prio, same):
        sort_candidates(group, node.name, now, ctx.afs_usage, lambda c: c.wl)
    ordered = [c for group in (hier, prio, same) for c in group if c.wl.evicted] + [
        c for group in (hier, prio, same) for c in group if not c.wl.evicted
    ]
    other_cq = any(c.kind != SAME_QUEUE for c in candidates)
    bwc = p.borrow_within_cohort
    forbidden = bwc is None or bwc.policy == "Never"
    strictly_under = all(node.usage.get(fr, 0) < node.nominal.get(fr, 0) for fr in needed)
    if not other_cq or (forbidden and not strictly_under):
        attempts = [True]
    elif forbidden and not has_hierarchical:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        targets = _minimal_set(ctx, wl, node, requests, needed, ordered, allow_borrowing, topology, config)
        if targets:
            return targets
    return []


def _cluster_queues_below(ancestor: QuotaNode, skip: QuotaNode, frs: dict[str, int]) -> list[QuotaNode]:
    """ClusterQueues under ``ancestor`` but outside ``skip``, not descending into subtrees within nominal."""
    out: list[QuotaNode] = []
    stack = [c for c in reversed(ancestor.children) if c is not skip]
    while stack:
        n = stack.pop()
        if n.within_nominal(frs):
            continue
        if n.is_cq:
            out.append(n)
        else:
            stack.extend(c for c in reversed(n.children))
    return out


def fits_in(node: QuotaNode, requests: dict[str, int], allow_borrowing: bool, topology: TopologyFit | None) -> bool:
    """Whether ``requests`` (per FR) fit in ``node`` as the cycle's tree stands — within its nominal quota unless
    ``allow_borrowing`` — and, for a TAS preemptor, its ``topology`` can be placed."""
    for fr, req in requests.items():
        if req > node.available(fr):
            return False
        if not allow_borrowing and node.usage.get(fr, 0) + req > node.nominal.get(fr, 0):
            return False
    return topology is None or topology.fits()


def take_off(ctx: CycleContext, wl: WorkloadInfo, topology: TopologyFit | None) -> None:
    """Simulate removing ``wl``: its quota off the cycle's tree and, for a TAS preemptor, its domains freed."""
    ctx.tree.charge(wl.cluster_queue, wl.usage, -1)
    if topology is not None:
        topology.remove(wl)


def put_back(ctx: CycleContext, wl: WorkloadInfo, topology: TopologyFit | None) -> None:
    """Undo :func:`take_off`."""
    ctx.tree.charge(wl.cluster_queue, wl.usage, 1)
    if topology is not None:
        topology.restore(wl)


def _still_valid(c: _Candidate, preemptor: QuotaNode, frs: dict[str, int], allow_borrowing: bool) -> bool:
    if c.kind in (SAME_QUEUE, CONFIGURED):  # a configured candidate is taken whatever the quota rules say
        return True
    if allow_borrowing and c.kind == WITHOUT_BORROWING:
        return False
    preemptor_path = {id(n) for n in [preemptor, *preemptor.ancestors()]}
    n: QuotaNode | None = c.node
    while n is not None and id(n) not in preemptor_path:
        if n.within_nominal(frs):
            return False
        n = n.parent
    return True


def _minimal_set(ctx: CycleContext, wl: WorkloadInfo, node: QuotaNode, requests: dict[str, int],
                 needed: dict[str, int], ordered: list[_Candidate], allow_borrowing: bool,
                 topology: TopologyFit | None, config: o.PreemptionConfig | None) -> list[Target]:
    """One borrowing attempt: the classical candidates still valid in it, then (ConfigurablePreemptions) the
    tiers of ``config`` on the tree as that walk left it, greedily until ``wl`` fits, then the fill-back. The
    config may pick a classical candidate this attempt skipped (Kueue's evaluator offers every workload still
    admitted in the snapshot), and its conditional tiers are judged with this attempt's
    ``allow_borrowing``."""
    chosen: list[_Candidate] = []
    fits = False
    try:
        for c in ordered:
            if not _still_valid(c, node, needed, allow_borrowing):
                continue
            take_off(ctx, c.wl, topology)
            chosen.append(c)
            if fits_in(node, requests, allow_borrowing, topology):
                fits = True
                break
        if not fits and config is not None:

            def take(w: WorkloadInfo, _reason: str, selection: preemption_config.Selection | None) -> bool:
                take_off(ctx, w, topology)
                chosen.append(_Candidate(w, CONFIGURED, ctx.tree.cluster_queues[w.cluster_queue], selection))
                return fits_in(node, requests, allow_borrowing, topology)

            fits = preemption_config.preempt_tiers(ctx, config, wl, needed, {c.wl.key for c in chosen}, take,
                                                   lambda: fits_in(node, requests, allow_borrowing, None))
        if not fits:
            return []
        # Fill back: from the second-to-last down, keep a victim only if the preemptor needs it.
        for i in range(len(chosen) - 2, -1, -1):
            c = chosen[i]
            put_back(ctx, c.wl, topology)
            if fits_in(node, requests, allow_borrowing, topology):
                chosen[i] = None  # type: ignore[call-overload]
            else:
                take_off(ctx, c.wl, topology)
        chosen = [c for c in chosen if c is not None]
        return [Target(c.wl, _reason(c), c.selection) for c in chosen]
    finally:
        for c in chosen:
            if c is not None:
                put_back(ctx, c.wl, topology)


def _reason(c: _Candidate) -> str:
    if c.kind == CONFIGURED:
        return CONFIGURABLE_PREEMPTION
    if c.kind == SAME_QUEUE:
        return IN_CLUSTER_QUEUE
    if c.kind == WHILE_BORROWING:
        return IN_COHORT_RECLAIM_WHILE_BORROWING
    return IN_COHORT_RECLAMATION


_REASON_TEXT = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    CONFIGURABLE_PREEMPTION: "the configured preemption rules",
}


def _path(state: ClusterState, cq: str) -> str:
    forest = state.forest
    parts = [cq] + [n[3:] for n in forest.ancestors("cq:" + cq)]
    return "/" + "/".join(reversed(parts))


def configured_message(preemptor: str, config: str, rules: tuple[tuple[str, tuple[int, ...]], ...]) -> str:
    """The message of a preemption a PreemptionConfig's rules chose (Kueue v0.20's ``EvictionMessage``), on the
    victim's ``Preempted`` and ``Evicted`` conditions and Events in place of :func:`preemption_message`: "Preempted
    by NS/NAME because of preemption config CONFIG rule RULE/0,1; RULE2/0", each rule that selected the victim with
    its selectors' indexes. Kueue keeps the rules in a Go map (random order); kueue-es sorts them by name."""
    merged: dict[str, list[int]] = {}
    for name, indexes in rules:
        merged.setdefault(name, []).extend(indexes)
    listed = "; ".join(f"{name}/{','.join(map(str, merged[name]))}" for name in sorted(merged))
    return f"Preempted by {preemptor} because of preemption config {config} rule {listed}"


def preemption_message(state: ClusterState, preemptor: WorkloadInfo, victim: WorkloadInfo, reason: str) -> str:
    """The ``Preempted`` condition's message on ``victim``, Kueue's wording: who preempted it, why, and both
    ClusterQueues' paths up their Cohort trees."""
    job_uid = preemptor.labels.get("kueue.x-k8s.io/job-uid") or siblings.UNKNOWN  # either unknown: Kueue's word
    return (f"Preempted to accommodate a workload (UID: {preemptor.uid or siblings.UNKNOWN}, JobUID: {job_uid}) due to "
            f"{_REASON_TEXT[reason]}; preemptor path: {_path(state, preemptor.cluster_queue)}; "
            f"preemptee path: {_path(state, victim.cluster_queue)}")
