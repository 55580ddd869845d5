"""Place a pod-set group (a leader and its workers, e.g. a LeaderWorkerSet) in one joint run (§2.7 rule 25).

Kueue places the two pod sets of a group together: the one with the smaller count is the leader (always one
pod, whatever its count says), the other holds the workers, and the workers' topology request, node selection
and slices govern the run. Every domain carries, besides the workers' pods and slices, whether the leader fits
(``leader``) and how many workers still fit once it is there (``pods_wl``/``slices_wl``): a leaf subtracts the
leader's requests before counting workers again; a parent takes its children's counts less the smallest loss any
leader-capable child suffers (0 when none can take the leader), and the largest ``leader``. The search orders
domains by ``leader`` first, then the with-leader slices and pods, and needs a domain taking the leader and
every slice; a preferred request climbs as a single pod set does, and the top level's greedy run takes the first
leader-capable domain whose loss to the leader still leaves the level room for every slice (with-leader slices)
before the rest in the plain order. The descent gives the leader to
the first domain in each order that can take it while its loss leaves room for every slice (moved first, as the
greedy run does), with the with-leader counts, and the workers the rest.

The leader's assignment is the leaves holding the leader; the workers' the leaves holding workers. Deliberate
differences, all where Kueue's own run would lose the leader or assign more workers than asked (it then logs an
error and writes an empty or oversized assignment): best fit swaps only among domains that can take the
leader; LeastFreeCapacity takes the first domain holding the leader and every slice with it (Kueue checks the
slices without the leader); a domain taking the leader and only part of the pods keeps its with-leader count
(Kueue keeps the leader only in slice units); and where the descent would strand pods, the leader moves to the
domain the with-leader counts assumed (:func:`trim_with_leader`). Under TASBalancedPlacement (alpha) a group
whose request is preferred is first spread evenly, leader-aware (:mod:`.balanced_group`), falling back to the
search below when that finds nothing. Workers that end in a partial slice (TASPartialSlices) are placed by
:mod:`.group_partial`.

Under TASRespectNodeAffinityPreferred the workers' preferred node affinity ranks the domains as for a single pod
set (:mod:`.search`), but below the leader: the order with a leader is leader capacity, then the score, then the
with-leader counts; every best-fit pick keeps to the first domain's score tier; and a required request whose first
domain cannot take the group takes, as Kueue's scan does, the tightest of the first tier after it that can.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from kueue_es.scheduler.tas.counts import Counts, fill_counts
from kueue_es.scheduler.tas.descent import pool_children
from kueue_es.scheduler.tas.search import NotFit, order, spread_not_fit, take_in_order, tightest
from kueue_es.scheduler.tas.spreading import LevelSpread, fit_spread
from projections.topology import FlavorSnapshot, TopologyTree, fit_in_leaf


class GroupCounts:
    """Per-level counts of a group: the plain ones (``base``, what the workers alone fit) and the leader-aware
    ones."""

    __slots__ = ("base", "pods_wl", "slices_wl", "leader")

    def __init__(self, base: Counts, pods_wl: list[list[int]], slices_wl: list[list[int]],
                 leader: list[list[int]]) -> None:
        self.base = base
        self.pods_wl = pods_wl
        self.slices_wl = slices_wl
        self.leader = leader


def fill_group_counts(snap: FlavorSnapshot, per_pod: tuple[tuple[str, int], ...],
                      leader_per_pod: tuple[tuple[str, int], ...], *,
                      assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool,
                      excluded: Mapping, within: tuple[int, int] | None, slice_size: int, slice_level: int,
                      inner: Mapping[int, int] | None, scores: Sequence[int] | None = None,
                      nodes=None, leader_own=None) -> GroupCounts:
    """``scores``: each leaf's preferred-affinity score for the workers (None with the gate off); ``nodes``: the
    workers' node view under TASNodeFeasibilityForAllLevels (:mod:`.pernode`), or None; ``leader_own``: the
    leader's own node filter under TASLeaderPodSetFeasibility (:mod:`.leader_nodes`), or None to hold the leader
    to the workers' (a leaf they exclude then takes no leader)."""
    tree = snap.tree
    base = fill_counts(snap, per_pod, assumed=assumed, simulate_empty=simulate_empty, excluded=excluded,
                       within=within, slice_size=slice_size, slice_level=slice_level, inner=inner, scores=scores,
                       nodes=nodes)
    columns = snap.free if simulate_empty else snap.remaining
    ids = tree.ids[-1]
    leaves = base.pods[-1]
    leader_leaf = [0] * tree.leaf_count
    wl_leaf = list(leaves)
    for i in range(tree.leaf_count):
        workers_refuse = i in base.leaf_why
        if workers_refuse and (leader_own is None or base.leaf_why[i] is None):
            continue  # held to the workers' filters, or outside the domain a replacement keeps to
        if leader_own is not None and i in leader_own.leaves:
            continue
        minus = dict(assumed.get(ids[i], {})) if assumed else {}
        on_nodes = None
        if nodes is not None:
            on_nodes = nodes.with_leader(i, per_pod, leader_per_pod,
                                         leader_own.nodes if leader_own is not None else None)
        if fit_in_leaf(columns, i, leader_per_pod, minus) > 0 and on_nodes != -1:
            leader_leaf[i] = 1
            if workers_refuse:
                continue  # the leader alone: no worker here, with or without it
            for r, q in leader_per_pod:
                minus[r] = minus.get(r, 0) + q
            wl_leaf[i] = fit_in_leaf(columns, i, per_pod, minus)
            if on_nodes is not None:
                wl_leaf[i] = min(wl_leaf[i], on_nodes)
    return _roll_up(tree, base, wl_leaf, leader_leaf, slice_size, slice_level, inner)


def _roll_up(tree: TopologyTree, base: Counts, wl_leaf: list[int], leader_leaf: list[int], size: int,
             slice_level: int, inner: Mapping[int, int] | None) -> GroupCounts:
    depth = tree.depth
    pods, slices = base.pods, base.slices
    pods_wl: list[list[int]] = [[] for _ in range(depth)]
    slices_wl: list[list[int]] = [[] for _ in range(depth)]
    leader: list[list[int]] = [[] for _ in range(depth)]
    pods_wl[-1], leader[-1] = wl_leaf, leader_leaf
    slices_wl[-1] = [p // size for p in wl_leaf] if slice_level == depth - 1 else [0] * len(wl_leaf)
    for lvl in range(depth - 2, -1, -1):
        unit = inner.get(lvl + 1, 1) if inner else 1
        cp, cpw, cs, csw, cl = pods[lvl + 1], pods_wl[lvl + 1], slices[lvl + 1], slices_wl[lvl + 1], leader[lvl + 1]
        row_wl, row_swl, row_l = [], [], []
        for d, (a, b) in enumerate(zip(tree.child_start[lvl], tree.child_end[lvl], strict=True)):
            capable = [c for c in range(a, b) if cl[c] > 0]
            if capable:
                loss = min((cp[c] - cp[c] % unit) - (cpw[c] - cpw[c] % unit) for c in capable)
                slice_loss = min(cs[c] - csw[c] for c in capable)
                with_leader = pods[lvl][d] - loss
                swl = with_leader // size if lvl == slice_level else sum(cs[a:b]) - slice_loss
            else:
                with_leader = swl = 0
            row_wl.append(with_leader)
            row_swl.append(swl if lvl <= slice_level else 0)
            row_l.append(max(cl[a:b], default=0))
        pods_wl[lvl], slices_wl[lvl], leader[lvl] = row_wl, row_swl, row_l
    return GroupCounts(base, pods_wl, slices_wl, leader)


def leader_order(gc: GroupCounts, level: int, lfc: bool) -> list[int]:
    """Kueue's order with a leader: leader capacity descending, preferred-affinity score descending (when domains
    score), with-leader slices (descending for BestFit, ascending for LeastFreeCapacity), with-leader pods
    ascending, level values."""
    lead, swl, pwl = gc.leader[level], gc.slices_wl[level], gc.pods_wl[level]
    aff = gc.base.scores(level) or [0] * len(lead)
    sign = 1 if lfc else -1
    return sorted(range(len(lead)), key=lambda i: (-lead[i], -aff[i], sign * swl[i], pwl[i], i))


class WholeSlices:
    """How the group search reads a level when the workers make whole slices only: a domain fits with the leader and
    the slices it holds beside it (``slices_wl``), best fit taking the tightest of those. :mod:`.group_partial`
    reads it with a partial slice too."""

    __slots__ = ()
    extra = 0
    """Slices the failure messages count beyond the whole ones."""

    def capacity(self, gc: GroupCounts, level: int) -> Sequence[int]:
        """Each domain's whole slices beside the leader (and whatever else must fit with it)."""
        return gc.slices_wl[level]

    def best(self, gc: GroupCounts, level: int, domains: Sequence[int], slices: int,
             scores: Sequence[int] | None) -> int:
        """Best fit's pick among ``domains`` (the first qualifies)."""
        return tightest(domains, slices, gc.slices_wl[level], scores, gc.leader[level], 1)

    def leader_cost(self, gc: GroupCounts, level: int, d: int, *, domains: Sequence[int]) -> int | None:
        """Whole slices ``domains`` give up when ``d`` takes the leader (None: it cannot)."""
        return gc.base.slices[level][d] - gc.slices_wl[level][d]

    def close(self, gc: GroupCounts, level: int, ordered: Sequence[int], slices: int, chosen: list[int],
              not_fit: NotFit) -> tuple[int, list[int]] | str:
        """The top level's greedy run's domains, once they cover the whole slices (``ordered``: the domains the
        run may add, in order)."""
        return level, chosen


WHOLE_SLICES = WholeSlices()


def find_group_fit_level(gc: GroupCounts, level: int, *, slices: int, required: bool, unconstrained: bool,
                         lfc: bool, not_fit: NotFit, no_domains: Callable[[int], str],
                         spread: LevelSpread | None = None,
                         fit: WholeSlices = WHOLE_SLICES) -> tuple[int, list[int]] | str:
    """(fit level, domains chosen there) for the group, or the failure message (§2.5 with a leader). ``spread``: a
    required request's topology spreading (:mod:`.spreading`); ``fit``: how a domain's capacity reads (whole slices,
    or also a partial one: :mod:`.group_partial`, whose BestFit pick decides for its level whenever the first
    domain in order can take the leader, even if it cannot hold the partial slice, as Kueue's does)."""
    base = gc.base
    requested = slices + fit.extra
    while True:
        sc, pc = base.slices[level], base.pods[level]
        if not sc:
            return no_domains(level)
        lead, cap, aff = gc.leader[level], fit.capacity(gc, level), base.scores(level)
        ordered = leader_order(gc, level, lfc)
        fitting = [lead[d] >= 1 and cap[d] >= slices for d in range(len(sc))]
        best = partial(fit.best, gc, level, slices=slices, scores=aff)
        if spread is not None:
            return fit_spread(spread, level, ordered, fits=fitting.__getitem__, best=best, lfc=lfc,
                              no_fit=partial(spread_not_fit, sc, pc, lfc, not_fit, requested, level))
        top = ordered[0]
        if lfc:
            hit = next((d for d in ordered if fitting[d]), None)
            if hit is not None:
                return level, [hit]
            if required:
                return not_fit(pc[ordered[-1]], requested, level)
        elif lead[top] >= 1 and (fitting[top] or fit.extra):
            # a partial slice: the first domain ranks by whole slices only, so the pick may find another that fits
            pick = best(ordered)
            if fitting[pick]:
                return level, [pick]
        if required:
            k = next((k for k, d in enumerate(ordered) if fitting[d]), None) if aff is not None and not lfc else None
            if k is not None:
                return level, [best(ordered[k:])]
            return not_fit(sc[top], requested, level)
        if level > 0 and not unconstrained:
            level -= 1
            continue
        if lead[top] == 0:
            return not_fit(0, requested, level)
        ordered = leader_home_first(ordered, slices, 1, base.slices[level], lead,
                                    partial(fit.leader_cost, gc, level, domains=ordered))
        chosen, remaining = take_leader_first(gc, ordered, level, slices, lfc)
        if remaining > 0:
            return not_fit(slices - remaining, requested, level)
        return fit.close(gc, level, order(base, level, ordered[1:], lfc), slices, chosen, not_fit)


def leader_home_first(domains: Sequence[int], need: int, leaders: int, value: Sequence[int], lead: Sequence[int],
                      cost: Callable[[int], int | None]) -> Sequence[int]:
    """``domains`` with the first one able to take the ``leaders`` while they keep room for ``need`` units (its
    ``cost``, the units they lose to the leader, within their slack; None: it cannot) moved first, as Kueue's
    greedy run and every level's walk do (``prioritizeLeaderDomain``); unchanged when the first already is, or
    none is."""
    if leaders <= 0 or len(domains) < 2:
        return domains
    total = sum(value[d] for d in domains)
    for k, d in enumerate(domains):
        if lead[d] < leaders:
            continue
        c = cost(d)
        if c is not None and total - c >= need:
            return domains if k == 0 else [d, *domains[:k], *domains[k + 1:]]
    return domains


def take_leader_first(gc: GroupCounts, ordered: Sequence[int], level: int, slices: int,
                      lfc: bool) -> tuple[list[int], int]:
    """The top level's greedy run for a group: the first domain in ``ordered`` (BestFit swapping it for the
    tightest leader-capable domain of its tier when it holds every slice beside the leader), with its with-leader
    slices, then the others in the plain order (BestFit swapping the one that would close the count for the
    tightest that does) until ``slices`` are covered; (the domains taken, the slices still missing: 0 or less when
    covered).

    The first swap is Kueue's step, kept though it never picks another domain: a first domain holding every whole
    slice beside the leader has already fitted alone unless a partial slice does not fit too, and the partial slice
    costs at most one more slice, so that domain holds exactly ``slices`` beside the leader, the most of its affinity
    tier (or, moved ahead of a better-scored tier, is alone in its own). Hence ``ordered[0]`` is always taken and the
    partial slice's extra domain, sought in ``ordered[1:]``, is never a domain passed over."""
    base = gc.base
    sc, swl, aff = base.slices[level], gc.slices_wl[level], base.scores(level)
    top = ordered[0]
    if not lfc and swl[top] >= slices:
        top = tightest(ordered, slices, swl, aff, gc.leader[level], 1)
        return [top], slices - swl[top]
    rest = order(base, level, [d for d in ordered[1:] if sc[d] > 0], lfc)
    chosen, remaining = take_in_order(rest, slices - swl[top], sc, aff, lfc)
    return [top, *chosen], remaining


def trim_with_leader(domains: Sequence[int], need: int, leaders: int, value: Sequence[int],
                     value_wl: Sequence[int], lead: Sequence[int], unit: int, bestfit: bool,
                     out: dict[int, int], out_leader: dict[int, int], scores: Sequence[int] | None = None) -> list[int]:
    """Kueue's ``updateCountsToMinimumGeneric`` with a leader: in order (the leader's domain first:
    :func:`leader_home_first`), the first domains take the leader
    (with their with-leader counts) until it is placed, the others their plain counts, until ``need`` units
    (slices of ``unit`` pods) are covered; BestFit swaps in the tightest domain that covers the rest. Where that
    walk strands units (the leader taken by a domain that then holds too few workers, which Kueue answers with
    an empty assignment), the leader goes instead to the leader-capable domain losing the fewest units to it —
    the one the with-leader counts assumed — and the workers fill the domains in the same order. ``scores``: the
    domains' preferred-affinity scores, when they score (best fit keeps to the first domain's tier)."""
    pods: dict[int, int] = {}
    leads: dict[int, int] = {}
    domains = leader_home_first(domains, need, leaders, value, lead, lambda d: value[d] - value_wl[d])
    taken = _walk(domains, need, leaders, value, value_wl, lead, unit, bestfit, pods, leads, scores)
    if taken is None and leaders > 0:
        pods, leads = {}, {}
        taken = _walk_min_loss(domains, need, leaders, value, value_wl, lead, unit, bestfit, pods, leads, scores)
    if taken is None:
        raise AssertionError(f"TAS group descent: {need} unit(s), {leaders} leader(s) do not fit (counts are "
                             "inconsistent)")
    out.update(pods)
    out_leader.update(leads)
    return taken


def _walk(domains: Sequence[int], need: int, leaders: int, value: Sequence[int], value_wl: Sequence[int],
          lead: Sequence[int], unit: int, bestfit: bool, out: dict[int, int],
          out_leader: dict[int, int], scores: Sequence[int] | None) -> list[int] | None:
    taken: list[int] = []
    remaining = need
    for k, d in enumerate(domains):
        if leaders > 0:
            if bestfit and value_wl[d] >= remaining and lead[d] >= leaders:
                d = tightest(domains[k:], remaining, value_wl, scores, lead, leaders)
            if value_wl[d] >= remaining and lead[d] >= leaders:
                out[d], out_leader[d] = remaining * unit, leaders
                taken.append(d)
                return taken
            take, lead_here = min(value_wl[d], remaining), min(lead[d], leaders)
            out[d], out_leader[d] = take * unit, lead_here
            remaining -= take
            leaders -= lead_here
            taken.append(d)
            continue
        if remaining <= 0:
            return taken
        if bestfit and value[d] >= remaining:
            d = tightest(domains[k:], remaining, value, scores)
        out[d] = min(value[d], remaining) * unit
        remaining -= min(value[d], remaining)
        taken.append(d)
        if remaining <= 0:
            return taken
    return taken if remaining <= 0 and leaders <= 0 else None


def _walk_min_loss(domains: Sequence[int], need: int, leaders: int, value: Sequence[int],
                   value_wl: Sequence[int], lead: Sequence[int], unit: int, bestfit: bool, out: dict[int, int],
                   out_leader: dict[int, int], scores: Sequence[int] | None) -> list[int] | None:
    capable = [d for d in domains if lead[d] >= leaders]
    if not capable:
        return None
    home = min(capable, key=lambda d: value[d] - value_wl[d])  # the first of the least losses, in order
    room = {d: value_wl[d] if d == home else value[d] for d in domains}
    out_leader[home] = leaders
    out[home] = 0
    taken = [home]
    return taken if fill_rooms(domains, need, room, unit, bestfit, scores, out, taken) else None


def fill_rooms(domains: Sequence[int], need: int, room: dict[int, int], unit: int, bestfit: bool,
               scores: Sequence[int] | None, out: dict[int, int], taken: list[int]) -> bool:
    """``need`` units (of ``unit`` pods) given out in order to the domains' ``room`` (BestFit taking the tightest
    that holds the rest), added to ``out`` and ``taken``; whether they all found room."""
    remaining = need
    for k, d in enumerate(domains):
        if remaining <= 0:
            break
        if bestfit and room[d] >= remaining:
            d = tightest(domains[k:], remaining, room, scores)
        got = min(room[d], remaining)
        if got:
            out[d] = out.get(d, 0) + got * unit
            if d not in taken:
                taken.append(d)
        remaining -= got
        room[d] -= got
    return remaining <= 0


def descend_group(tree: TopologyTree, gc: GroupCounts, fit_level: int, chosen: list[int], *, count: int,
                  slice_size: int, slice_level: int, lfc: bool, inner: Mapping[int, int] | None,
                  shares: Mapping[int, int] | None = None,
                  leader_at: int | None = None) -> tuple[dict[int, int], dict[int, int]]:
    """(leaf -> worker pods, leaf -> leaders) for the domains ``chosen`` at ``fit_level`` (§2.6 with a leader).
    ``shares``/``leader_at``: the worker slices a balanced placement gave each chosen domain and the domain it
    gave the leader; each then goes down its own subtree (in slice units above the slice level)."""
    bestfit = not lfc
    last = tree.depth - 1
    base = gc.base
    assigned: dict[int, int] = {}
    leaders: dict[int, int] = {}
    level = fit_level

    def cut(domains: Sequence[int], level: int) -> list[int]:
        return trim_with_leader(domains, count // slice_size, 1, base.slices[level], gc.slices_wl[level],
                                gc.leader[level], slice_size, bestfit, assigned, leaders, base.scores(level))

    if shares is not None and leader_at is not None:
        assigned = {d: n * slice_size for d, n in shares.items()}
        leaders = {leader_at: 1}
        chosen = sorted(shares)
    else:
        chosen = cut(chosen, level)
    while shares is None and level < min(last, slice_level):
        pooled = pool_children(tree, base, level, chosen, lfc)
        level += 1
        assigned, leaders = {}, {}
        chosen = cut(pooled, level)
    return spread_down(tree, gc, level, chosen, assigned, leaders, slice_size=slice_size, slice_level=slice_level,
                       lfc=lfc, inner=inner)


def spread_down(tree: TopologyTree, gc: GroupCounts, level: int, chosen: list[int], assigned: dict[int, int],
                leaders: dict[int, int], *, slice_size: int, slice_level: int, lfc: bool,
                inner: Mapping[int, int] | None) -> tuple[dict[int, int], dict[int, int]]:
    """From the ``chosen`` domains of ``level`` (their worker pods ``assigned``, their ``leaders``) down to the
    leaves, each domain within its own subtree: (leaf -> worker pods, leaf -> leaders)."""
    bestfit = not lfc
    last = tree.depth - 1
    base = gc.base
    while level < last:
        starts, ends = tree.child_start[level], tree.child_end[level]
        child = level + 1
        if level < slice_level:  # a balanced placement's shares, above the slice level
            unit, value, value_wl = slice_size, base.slices[child], gc.slices_wl[child]
        else:
            unit = inner.get(child, 1) if inner else 1
            pods, pods_wl = base.pods[child], gc.pods_wl[child]
            value = pods if unit == 1 else [p // unit for p in pods]
            value_wl = pods_wl if unit == 1 else [p // unit for p in pods_wl]
        parents, parent_leaders = assigned, leaders
        assigned, leaders = {}, {}
        next_chosen: list[int] = []
        for d in chosen:
            kids = order(base, child, range(starts[d], ends[d]), lfc)
            next_chosen += trim_with_leader(kids, parents[d] // unit, parent_leaders.get(d, 0), value, value_wl,
                                            gc.leader[child], unit, bestfit, assigned, leaders, base.scores(child))
        chosen = next_chosen
        level = child
    return assigned, leaders
