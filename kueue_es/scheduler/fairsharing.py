"""Fair Sharing (config ``fairSharing`` set): dominant resource shares, the tournament order, fair preemption.

**Dominant resource share (DRS)** of a node (ClusterQueue or Cohort): :mod:`projections.fair_share`, which the
metrics read too (the weighted-share gauges).

**Order of a cycle's entries** (instead of the classical sort): repeatedly, the first remaining ClusterQueue by
name — Kueue takes any — gives its entry at once if it has no cohort; otherwise a tournament over its whole
cohort tree picks the next entry. Every remaining entry of the tree is charged to its ClusterQueue in turn and
the DRS of each node on its path is taken; at each cohort, the winners of the child cohorts and the entries of
the child ClusterQueues compete: a queue's preemptor workload (under ``PrioritizePreemptorWorkloads``) beats
one that is not; then an entry whose node below the cohort does not borrow on the flavor-resources it requests
beats one whose node does; then the lower DRS of that node; then the higher priority; then the
earlier queue-order time (then the earlier candidate). Shares are recomputed at every pick, so each admission
of the cycle moves the next one.

**Fair preemption**: the candidates are the preemptor's own workloads that ``withinClusterQueue`` allows and,
with ``reclaimWithinCohort`` not Never, the workloads it allows in every ClusterQueue of the tree that borrows
on a flavor-resource needing preemption; in Kueue's victim order. The preemptor's request is charged to its
queue for the whole search (so shares include it) and taken off again whenever fit is checked. Target queues
come from the root down: at each cohort the child with the highest DRS (a cohort wins ties; between queues, the
better first candidate) — pruning queues that do not borrow (the preemptor's own excepted) or have no
candidates left, and cohorts that do not borrow and are not on the preemptor's path. For a target queue:
the preemptor's own → its next candidate (``InClusterQueue``); else, when the preemptor's queue does not borrow
on the contested resources → the next candidate (``InCohortReclamation``); else the strategy decides on the
shares of the two nodes just below the lowest common ancestor — ``LessThanOrEqualToFinalShare``: the
preemptor's new share ≤ the target's share without the candidate; ``LessThanInitialShare``: the preemptor's new
share < the target's current share — and the first candidate that passes is preempted (``InCohortFairSharing``)
and the target re-chosen; those that fail wait for the second step (with the default two strategies): per
target queue, the first waiting candidate is preempted if the preemptor's new share is below the target's
current one. Under the ``FairSharingReevaluatePreemptionCandidates`` gate, when the first strategy's pass took
victims from the preemptor's own queue (which lowered its share), the candidates it turned down go through the
first strategy once more before the second step. As soon as the preemptor fits, targets it does not need are
given back (last-but-one first). A preemptor with TAS pod sets fits only where they can be placed too, and its
candidates go by topology domain first (:class:`kueue_es.scheduler.taspreempt.DomainOrder`); when no victims are
found so and two or more domains could each free its largest pod, the search runs again over the candidates of
one such domain at a time, best first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kueue_es.scheduler import preemption_config
from kueue_es.scheduler.preemption import (
    Target,
    candidate_key,
    fits_in,
    own_queue_candidates,
    policy_allows,
    put_back,
    sort_candidates,
    take_off,
    uses_any,
)
from kueue_es.scheduler.quota import QuotaNode, QuotaTree
from kueue_es.scheduler.taspreempt import DomainOrder, TopologyFit
from projections.fair_share import DRS, NEGATIVE, compare, dominant_share, state_flavor_weights
from projections.workloads import WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext, Entry

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


def drs(ctx: CycleContext, node: QuotaNode, extra: dict[str, int] | None = None) -> DRS:
    """The dominant resource share of ``node``, counting ``extra`` (flavor-resource -> amount) on top,
    weighed by the flavors' ``resourceWeights`` (kept by the state while its specs stay, as the statuses read
    them); what each parent could lend is memoised for the cycle (it depends on quota only)."""
    weights = state_flavor_weights(ctx.state)
    return dominant_share(node, extra, ctx.memo.setdefault("lendable", {}), weights)


def _charge(node: QuotaNode, usage: dict[str, int], sign: int) -> None:
    for fr, v in usage.items():
        if v:
            node.add_usage(fr, sign * v)


# --- the order of a cycle's entries -------------------------------------------------------------------------


def fair_order(ctx: CycleContext, entries: list[Entry], pushed: list[Entry] | None = None) -> Iterator[Entry]:
    """Yield ``entries`` in Fair Sharing order. Lazy: each pick sees what the caller did with the previous ones.
    An entry the caller appends to ``pushed`` between picks (a ``FairSharingRefill`` successor, for a queue whose
    entry was yielded already) joins the ones left, ranked with them from the next pick on."""
    tree = ctx.tree
    remaining: dict[str, Entry] = {e.cq: e for e in entries}
    order = sorted(remaining)
    contenders: dict[int, dict[str, _Contender]] = {}
    """Per root (by id): queue name -> the contender of its tree."""
    i = 0
    while True:
        if pushed:
            for e in pushed:
                _push(tree, remaining, contenders, e)
            pushed.clear()
            i = 0
            order = sorted(set(order) | set(remaining))
        if not remaining:
            return
        while order[i] not in remaining:
            i += 1
        first = order[i]
        node = tree.cluster_queues.get(first)
        if node is None or node.parent is None:
            yield remaining.pop(first)
            continue
        root = node.root()
        mine = contenders.get(id(root))
        if mine is None:
            mine = contenders[id(root)] = {q.name: _Contender(remaining[q.name], q)
                                           for q in _subtree_cluster_queues(root) if q.name in remaining}
        for c in mine.values():
            c.refresh(ctx)
        winner = _play(root, remaining, mine)
        assert winner is not None  # the tree holds at least the queue the pick started from
        del remaining[winner.cq]
        del mine[winner.cq]
        yield winner


def _push(tree: QuotaTree, remaining: dict[str, Entry], contenders: dict[int, dict[str, _Contender]], e: Entry) -> None:
    """Entry ``e`` joins the tournament: with the contenders of its tree when those are built already."""
    remaining[e.cq] = e
    node = tree.cluster_queues.get(e.cq)
    if node is not None and node.parent is not None:
        mine = contenders.get(id(node.root()))
        if mine is not None:
            mine[e.cq] = _Contender(e, node)


def _subtree_cluster_queues(node: QuotaNode) -> list[QuotaNode]:
    out: list[QuotaNode] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_cq:
            out.append(n)
        else:
            stack.extend(reversed(n.children))
    return out


class _Contender:
    """An entry in the tournament, with its comparison key at each ancestor of its queue.

    The key at ancestor ``path[i+1]`` is (not its queue's preemptor workload — only under the
    ``PrioritizePreemptorWorkloads`` gate —, borrows on what it requests — only under the
    ``FairSharingPrioritizeNonBorrowing`` gate —, DRS, -priority, queue-order time) of
    ``path[i]`` with the entry's usage counted — which bubbles up like a real charge, the part above each
    node's guarantee reaching its parent. It depends on the usage of ``path[0..i]`` only, so a key is kept
    until one of those nodes is written (``QuotaNode.version``).
    """

    __slots__ = ("entry", "keys", "path", "versions")

    def __init__(self, entry: Entry, cq_node: QuotaNode) -> None:
        self.entry = entry
        self.path = cq_node.path()
        self.versions: list[int] = []
        self.keys: dict[str, tuple] = {}
        """Ancestor name -> the key the entry competes with there."""

    def refresh(self, ctx: CycleContext) -> None:
        path, old = self.path, self.versions
        keep = 0
        if old:
            last = len(path) - 1
            while keep < last and old[keep] == path[keep].version:
                keep += 1
            if keep == last:
                return
        e = self.entry
        usage = e.assignment.usage if e.assignment is not None else {}
        tail = (ctx.order.rank(e.wl.priority), ctx.order.time(e.wl))
        head = not e.preemptor
        extra = dict(usage)
        for level in range(len(path) - 1):
            n = path[level]
            if level >= keep:
                d = drs(ctx, n, extra)
                borrows = d.borrowing_on(usage) if ctx.prioritize_non_borrowing else False
                self.keys[path[level + 1].name] = (head, borrows, *d.key(), *tail)
            extra = {fr: n.delta_above(fr, v) for fr, v in extra.items()}
        self.versions = [n.version for n in path]


def _play(cohort: QuotaNode, remaining: dict[str, Entry], contenders: dict[str, _Contender]) -> Entry | None:
    """The winner under ``cohort``: child cohorts' winners, then child queues' entries; the lowest key wins and
    ties go to the earlier candidate (Kueue's "replace the best only when strictly better")."""
    candidates: list[Entry] = []
    for child in cohort.children:
        if not child.is_cq:
            found = _play(child, remaining, contenders)
            if found is not None:
                candidates.append(found)
    for child in cohort.children:
        if child.is_cq and child.name in remaining:
            candidates.append(remaining[child.name])
    if not candidates:
        return None
    name = cohort.name
    return min(candidates, key=lambda e: contenders[e.cq].keys[name])


# --- fair preemption ----------------------------------------------------------------------------------------


class _Ordering:
    """Kueue's target ClusterQueue ordering: from the root down to the child with the highest share."""

    def __init__(self, ctx: CycleContext, preemptor: QuotaNode, candidates: list[WorkloadInfo], order_key) -> None:
        self.ctx = ctx
        self.preemptor = preemptor
        self.path = {id(n) for n in preemptor.ancestors()}
        self.by_cq: dict[str, list[WorkloadInfo]] = {}
        for w in candidates:
            self.by_cq.setdefault(w.cluster_queue, []).append(w)
        self.pruned: set[int] = set()
        self.order_key = order_key

    def has(self, cq: QuotaNode) -> bool:
        return bool(self.by_cq.get(cq.name))

    def pop(self, cq: QuotaNode) -> WorkloadInfo:
        return self.by_cq[cq.name].pop(0)

    def drop(self, cq: QuotaNode) -> None:
        self.pruned.add(id(cq))

    def __iter__(self) -> Iterator[QuotaNode]:
        if self.preemptor.parent is None:
            while self.has(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        ctx = self.ctx
        best_cq: QuotaNode | None = None
        best_cq_drs = NEGATIVE
        for cq in cohort.children:
            if not cq.is_cq or id(cq) in self.pruned:
                continue
            d = drs(ctx, cq)
            if (d.is_zero and cq is not self.preemptor) or not self.has(cq):
                self.pruned.add(id(cq))
                continue
            c = compare(d, best_cq_drs)
            if c == 0 and best_cq is not None:
                if self.order_key(self.by_cq[cq.name][0]) < self.order_key(self.by_cq[best_cq.name][0]):
                    best_cq = cq
            elif c > 0:
                best_cq, best_cq_drs = cq, d
        best_co: QuotaNode | None = None
        best_co_drs = NEGATIVE
        for co in cohort.children:
            if co.is_cq or id(co) in self.pruned:
                continue
            d = drs(ctx, co)
            if d.is_zero and id(co) not in self.path:
                self.pruned.add(id(co))
            elif compare(d, best_co_drs) >= 0:
                best_co, best_co_drs = co, d
        if best_co is None and best_cq is None:
            self.pruned.add(id(cohort))
            return None
        if best_co is not None and compare(best_co_drs, best_cq_drs) >= 0:
            return self._next(best_co)
        return best_cq

    def almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """The nodes just below the lowest common ancestor of the preemptor's and the target's queues."""
        lca = None
        for a in target.ancestors():
            if id(a) in self.path:
                lca = a
                break
        assert lca is not None
        return _child_towards(self.preemptor, lca), _child_towards(target, lca)


def _child_towards(node: QuotaNode, ancestor: QuotaNode) -> QuotaNode:
    n = node
    while n.parent is not ancestor:
        assert n.parent is not None
        n = n.parent
    return n


def fair_targets(ctx: CycleContext, wl: WorkloadInfo, node: QuotaNode, requests: dict[str, int],
                 needed: dict[str, int], topology: TopologyFit | None = None) -> list[Target]:
    """Victims that let ``wl`` (``requests`` per FR) fit in ``node`` under Fair Sharing (see the module doc);
    ``topology``: its TAS pod sets, which must be placed too (:mod:`kueue_es.scheduler.taspreempt`)."""
    state = ctx.state
    p = state.cluster_queues[node.name].spec.preemption
    now = ctx.now
    candidates = own_queue_candidates(ctx, wl, node.name, p, needed)
    if node.parent is not None and p.reclaim_within_cohort != "Never":
        for cq in _subtree_cluster_queues(node.root()):
            if cq is node or not any(cq.borrowing(fr) for fr in needed):
                continue
            for w in ctx.reserving_in(cq.name):
                if uses_any(w, needed) and policy_allows(p.reclaim_within_cohort, wl, w, ctx.order):
                    candidates.append(w)
    config = preemption_config.config_for(ctx, node.name)
    if not preemption_config.has_rules(config, *preemption_config.TRIGGERS):
        config = None
    if not candidates and config is None:
        return []
    order_key = candidate_key(node.name, now)
    sort_candidates(candidates, node.name, now, ctx.afs_usage)
    domains = DomainOrder.of(topology, candidates)
    if domains is not None:
        ranks = domains.ranks
        candidates.sort(key=lambda w: ranks[w.key])  # stable: the victim order within a rank
    strategies = list(ctx.config.fair_sharing.preemption_strategies) if ctx.config.fair_sharing else []
    if not strategies:
        strategies = [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE]
    targets: list[Target] = []

    def fits(quota_only: bool = False) -> bool:
        """The preemptor fits as the tree stands (its requests not charged); ``quota_only``: its topology aside."""
        return fits_in(node, requests, True, None if quota_only else topology)

    def fits_while_charged(quota_only: bool = False) -> bool:
        """:func:`fits` while the search keeps the preemptor's requests charged (for the shares)."""
        _charge(node, requests, -1)
        try:
            return fits(quota_only)
        finally:
            _charge(node, requests, 1)

    def take(w: WorkloadInfo, reason: str, selection: preemption_config.Selection | None = None) -> bool:
        """Preempt ``w`` (simulated); True when the preemptor now fits."""
        take_off(ctx, w, topology)
        targets.append(Target(w, reason, selection))
        return fits_while_charged()

    def attempt(among: list[WorkloadInfo]) -> list[Target]:
        targets.clear()
        _charge(node, requests, 1)
        fitted = False
        try:
            fitted = bool(among) and _search(ctx, node, among, needed, strategies, order_key, take)
            if not fitted and config is not None:
                # ConfigurablePreemptions: the PreemptionConfig's tiers after Fair Sharing's strategies
                fitted = preemption_config.preempt_tiers(ctx, config, wl, needed, {t.workload.key for t in targets},
                                                         take, lambda: fits_while_charged(quota_only=True))
        finally:
            _charge(node, requests, -1)
        if not fitted:
            for t in targets:
                put_back(ctx, t.workload, topology)
            return []
        # give back, from the last but one, what the preemptor does not need (targets are removed at this point)
        kept: list[Target | None] = list(targets)
        for i in range(len(kept) - 2, -1, -1):
            w = targets[i].workload
            put_back(ctx, w, topology)
            if fits():
                kept[i] = None
            else:
                take_off(ctx, w, topology)
        result = [t for t in kept if t is not None]
        for t in result:
            put_back(ctx, t.workload, topology)
        return result

    found = attempt(candidates)
    if found or domains is None or len(domains.viable) < 2:
        return found
    # The share-based order may spend a queue's borrowing across several domains and clear none: Kueue tries again
    # with the candidates of one domain at a time, best first.
    for keys in domains.viable:
        found = attempt([w for w in candidates if w.key in keys])
        if found:
            return found
    return []


def _search(ctx: CycleContext, node: QuotaNode, candidates: list[WorkloadInfo], needed: dict[str, int],
            strategies: list[str], order_key, take) -> bool:
    """Feed candidates to ``take`` in fair-sharing order until it says the preemptor fits."""
    fitted, retry, own = _first_step(ctx, node, candidates, needed, strategies[0], order_key, take)
    if fitted:
        return True
    if own and retry and ctx.reevaluate_candidates:
        # FairSharingReevaluatePreemptionCandidates: the preemptor's own victims lowered its share, so the
        # candidates the first strategy turned down get one more pass under it (the first pass went through the
        # whole tree: no own candidate is left to lower the share again)
        fitted, retry, _ = _first_step(ctx, node, retry, needed, strategies[0], order_key, take)
        if fitted:
            return True
    if len(strategies) < 2 or not retry:
        return False
    ordering = _Ordering(ctx, node, retry, order_key)
    for target in ordering:
        mine, theirs = ordering.almost_lcas(target) if target is not node else (node, node)
        passed = compare(drs(ctx, mine), drs(ctx, theirs)) < 0
        w = ordering.pop(target)
        if passed and take(w, "InCohortFairSharing"):
            return True
        ordering.drop(target)
    return False


def _first_step(ctx: CycleContext, node: QuotaNode, candidates: list[WorkloadInfo], needed: dict[str, int],
                first: str, order_key, take) -> tuple[bool, list[WorkloadInfo], bool]:
    """One pass of the first strategy over ``candidates``: whether the preemptor fits, the candidates the strategy
    turned down (for the second step), and whether a victim came from the preemptor's own queue."""
    within_nominal = ctx.preempt_within_nominal and not any(node.borrowing(fr) for fr in needed)
    ordering = _Ordering(ctx, node, candidates, order_key)
    retry: list[WorkloadInfo] = []
    own = False
    for target in ordering:
        if target is node:
            own = True
            if take(ordering.pop(target), "InClusterQueue"):
                return True, retry, own
            continue
        if within_nominal:
            if take(ordering.pop(target), "InCohortReclamation"):
                return True, retry, own
            continue
        mine, theirs = ordering.almost_lcas(target)
        preemptor_new, target_old = drs(ctx, mine), drs(ctx, theirs)
        if preemptor_new.zero_weight_borrows and not target_old.zero_weight_borrows:
            while ordering.has(target):
                retry.append(ordering.pop(target))
            continue
        while ordering.has(target):
            w = ordering.pop(target)
            _charge(target, w.usage, -1)
            try:
                target_new = drs(ctx, theirs)
            finally:
                _charge(target, w.usage, 1)
            if first == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
                passed = compare(preemptor_new, target_new) <= 0
            else:
                passed = compare(preemptor_new, target_old) < 0
            if passed:
                if take(w, "InCohortFairSharing"):
                    return True, retry, own
                break  # shares moved: choose the target again
            retry.append(w)
    return False, retry, own
