"""A pod-set group whose workers end in a partial slice (TASPartialSlices with TASGroupedPodSetSlicing).

A LeaderWorkerSet's workers asking for slices need not be a multiple of the slice size (Kueue v0.20): they are
placed as whole slices and one last, partial slice of ``count % size`` workers, itself within one domain of the
slice level, beside the group's leader. Kueue's own example is a 16-pod group (a leader and 15 workers) in racks
of 4 hosts: three racks of 4 workers and one of the 3 remaining workers with the leader.

Every domain at or above the slice level then carries two more capacities besides the group's (:mod:`.group`):
the whole slices it holds beside the partial slice (``tc``), and beside both the leader and the partial slice
(``tlc``); :data:`~kueue_es.scheduler.tas.partial.NO_TAIL` where it cannot. At the slice level they come from its
pods, and from its pods beside the leader, less the partial slice; above, from its children's slices less the
cheapest way to seat the partial slice (and the leader) in them: both in one child, or each in its own.

The group's own search (:func:`~kueue_es.scheduler.tas.group.find_group_fit_level`, read through
:class:`WithTail`) asks a domain to take the leader and ``tlc`` whole slices, best fit picking among the first tier
whenever the first domain can take the leader (it ranks by whole slices, so it may not hold the partial slice
when another does); a preferred request climbs as usual,
a required one is spread by its topology spreading rules as the whole-slice group is, and the top level's greedy
run adds, when none of the domains it took has room for the partial slice beside its share, the first other
domain that can hold it. Going down, each level first moves ahead the first domain that can take the leader
while the whole slices the leader and the partial slice cost (together, at their cheapest seat) leave room for the
rest (Kueue's prioritizeLeaderDomain); its walk then looks for a domain closing the count
with the partial slice (and the leader, if still unplaced) that is no roomier than best fit's pick; otherwise it
gives the leader and the whole slices out as for the group, then the partial slice to a domain taken that still has
room for it, or else the first other one. Where that walk strands something, the leader and the partial slice are
seated first where they cost the fewest slices (the seat the capacities assumed) and the workers fill the rest.
Below the slice level the partial slice is only pods of its domain. The workers' assignment lists the slice-level
domain holding the partial slice last. With the gate off, only the whole slices are placed, as before; balanced
placement (TASBalancedPlacement) does not take such a group and leaves it to this search, as Kueue does.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from kueue_es.scheduler.tas.descent import pool_children
from kueue_es.scheduler.tas.group import GroupCounts, WholeSlices, fill_rooms, leader_home_first, spread_down
from kueue_es.scheduler.tas.partial import (
    NO_TAIL,
    best_fit_with_tail,
    hosting,
    tail_capacities,
    with_tail_home,
)
from kueue_es.scheduler.tas.search import NotFit, tightest
from projections.topology import TopologyTree


def leader_tail_seat(d: int, domains: Sequence[int], sc: Sequence[int], swl: Sequence[int], tc: Sequence[int],
                     tlc: Sequence[int]) -> tuple[int, int] | None:
    """The leader in ``d`` and the partial slice where they cost the fewest whole slices: (that cost, the partial
    slice's position in ``domains``), beside the leader in ``d`` or in another domain, the first on a tie; None
    when the partial slice has no home. ``sc``/``swl``/``tc``/``tlc``: each domain's whole slices, beside the
    leader, beside the partial slice, and beside both."""
    seats = []
    for j, e in enumerate(domains):
        if e == d:
            if tlc[d] != NO_TAIL:
                seats.append((sc[d] - tlc[d], j))
        elif tc[e] != NO_TAIL:
            seats.append((sc[d] - swl[d] + sc[e] - tc[e], j))
    return min(seats) if seats else None


def group_tail_capacities(tree: TopologyTree, gc: GroupCounts, size: int, tail: int,
                          slice_level: int) -> tuple[list[list[int]], list[list[int]]]:
    """(``tc``, ``tlc``) per level down to the slice level (empty lists below): each domain's whole slices beside
    the partial slice (:func:`~.partial.tail_capacities`), and beside the leader and the partial slice."""
    base = gc.base
    tc = tail_capacities(tree, base.pods, base.slices, size, tail, slice_level)
    tlc: list[list[int]] = [[] for _ in range(tree.depth)]
    tlc[slice_level] = [hosting(p, tail, size) if lead > 0 else NO_TAIL
                        for p, lead in zip(gc.pods_wl[slice_level], gc.leader[slice_level], strict=True)]
    for lvl in range(slice_level - 1, -1, -1):
        cs, cswl, ctc, ctlc, cl = (base.slices[lvl + 1], gc.slices_wl[lvl + 1], tc[lvl + 1], tlc[lvl + 1],
                                   gc.leader[lvl + 1])
        row = []
        for d, (a, b) in enumerate(zip(tree.child_start[lvl], tree.child_end[lvl], strict=True)):
            kids = range(a, b)
            seats = [s for c in kids if cl[c] > 0 and (s := leader_tail_seat(c, kids, cs, cswl, ctc, ctlc))]
            row.append(NO_TAIL if not seats
                       else min(sum(cs[a:b]) - min(seats)[0], hosting(gc.pods_wl[lvl][d], tail, size)))
        tlc[lvl] = row
    return tc, tlc


class WithTail(WholeSlices):
    """How the group search reads a level when the workers end in a partial slice: a domain fits with the leader,
    the whole slices and the partial slice (``tlc``), best fit taking the one with the fewest whole slices to spare
    beside them; the top level's greedy run then needs a home for the partial slice among the domains it took (the
    first, with the leader, beside both), else adds the first other domain that can hold it."""

    __slots__ = ("tc", "tlc")
    extra = 1

    def __init__(self, tc: list[list[int]], tlc: list[list[int]]) -> None:
        self.tc, self.tlc = tc, tlc

    def capacity(self, gc: GroupCounts, level: int) -> Sequence[int]:
        return self.tlc[level]

    def best(self, gc: GroupCounts, level: int, domains: Sequence[int], slices: int,
             scores: Sequence[int] | None) -> int:
        return best_fit_with_tail(domains, slices, gc.slices_wl[level], self.tlc[level], scores, gc.leader[level], 1)

    def leader_cost(self, gc: GroupCounts, level: int, d: int, *, domains: Sequence[int]) -> int | None:
        """The whole slices lost to the leader in ``d`` and the partial slice where it costs fewest: in ``d`` too,
        or in the cheapest other domain (None: the partial slice then has no home)."""
        seat = leader_tail_seat(d, domains, gc.base.slices[level], gc.slices_wl[level], self.tc[level],
                                self.tlc[level])
        return None if seat is None else seat[0]

    def close(self, gc: GroupCounts, level: int, ordered: Sequence[int], slices: int, chosen: list[int],
              not_fit: NotFit) -> tuple[int, list[int]] | str:
        top, sc, t = chosen[0], gc.base.slices[level], self.tc[level]
        took, left = [], slices
        for d in chosen:
            took.append(min(gc.slices_wl[level][d] if d == top else sc[d], left))
            left -= took[-1]
        rooms = [self.tlc[level][d] if d == top else t[d] for d in chosen]
        homed = with_tail_home(chosen, took, rooms, ordered, t)
        return (level, homed) if homed is not None else not_fit(slices, slices + 1, level)


class _Level:
    """One level's capacities, as the walk reads them."""

    __slots__ = ("sc", "swl", "tc", "tlc", "lead", "scores")

    def __init__(self, gc: GroupCounts, tc: list[list[int]], tlc: list[list[int]], level: int) -> None:
        base = gc.base
        self.sc, self.swl, self.lead = base.slices[level], gc.slices_wl[level], gc.leader[level]
        self.tc, self.tlc = tc[level], tlc[level]
        self.scores = base.scores(level)

    def whole(self, d: int, leader: bool) -> int:
        return self.swl[d] if leader else self.sc[d]

    def beside_tail(self, d: int, leader: bool) -> int:
        return self.tlc[d] if leader else self.tc[d]

    def seat(self, d: int, domains: Sequence[int]) -> tuple[int, int] | None:
        """:func:`leader_tail_seat` with the leader in ``d``, among ``domains``."""
        return leader_tail_seat(d, domains, self.sc, self.swl, self.tc, self.tlc)

    def leader_cost(self, d: int, domains: Sequence[int]) -> int | None:
        """The whole slices the leader in ``d`` and the partial slice cost at their cheapest (None: no home)."""
        seat = self.seat(d, domains)
        return None if seat is None else seat[0]


def _closing(at: _Level, domains: Sequence[int], remaining: int, leaders: int, bestfit: bool) -> int | None:
    """The domain that closes the count with the partial slice (and ``leaders``), no roomier than best fit's
    whole-slice pick; None when the first domain cannot close it."""
    first, with_leader = domains[0], leaders > 0
    if at.whole(first, with_leader) < remaining or at.lead[first] < leaders:
        return None
    home = whole = first
    if bestfit:
        capw = at.swl if with_leader else at.sc
        capt = at.tlc if with_leader else at.tc
        home = best_fit_with_tail(domains, remaining, capw, capt, at.scores, at.lead, leaders)
        whole = tightest(domains, remaining, capw, at.scores, at.lead, leaders)
    if (at.beside_tail(home, with_leader) < remaining or at.lead[home] < leaders
            or at.whole(home, with_leader) > at.whole(whole, with_leader)):
        return None
    return home


def _walk(at: _Level, domains: Sequence[int], need: int, leaders: int, size: int, tail: int, bestfit: bool,
          out: dict[int, int], out_leader: dict[int, int]) -> list[int] | None:
    """The leader and the whole slices given out in order (the closing domain taking the partial slice too),
    then the partial slice to a domain with room for it; None when something is stranded."""
    taken: list[int] = []
    remaining = need
    for k, d in enumerate(domains):
        if remaining <= 0 and leaders <= 0:
            break
        home = _closing(at, domains[k:], remaining, leaders, bestfit)
        if home is not None:
            out[home] = remaining * size + tail
            if leaders:
                out_leader[home] = leaders
            taken.append(home)
            return taken
        with_leader = leaders > 0
        value = at.swl if with_leader else at.sc
        if bestfit and value[d] >= remaining and at.lead[d] >= leaders:
            d = tightest(domains[k:], remaining, value, at.scores, at.lead, leaders)
        got = min(value[d], remaining)
        here = min(at.lead[d], leaders)
        out[d] = got * size
        if here:
            out_leader[d] = here
        remaining -= got
        leaders -= here
        taken.append(d)
    if remaining > 0 or leaders > 0:
        return None
    for d in taken:
        cap = at.beside_tail(d, d in out_leader)
        if cap != NO_TAIL and out[d] // size <= cap:
            out[d] += tail
            return taken
    extra = next((d for d in domains if d not in taken and at.tc[d] != NO_TAIL), None)
    if extra is None:
        return None
    out[extra] = tail
    taken.append(extra)
    return taken


def _seated(at: _Level, domains: Sequence[int], need: int, size: int, tail: int, bestfit: bool,
            out: dict[int, int], out_leader: dict[int, int]) -> list[int] | None:
    """The leader and the partial slice seated first where they cost the fewest whole slices (together, or each
    in its own domain; the first in order on a tie), then the whole slices in order in what is left."""
    seats: list[tuple[int, int, int]] = []  # (cost, leader's domain, partial slice's domain)
    for k, d in enumerate(domains):
        seat = at.seat(d, domains) if at.lead[d] >= 1 else None
        if seat is not None:
            seats.append((seat[0], k, seat[1]))
    if not seats:
        return None
    _, li, ti = min(seats)
    lhome, thome = domains[li], domains[ti]
    room = {d: at.sc[d] for d in domains}
    room[lhome] = at.tlc[lhome] if lhome == thome else at.swl[lhome]
    if lhome != thome:
        room[thome] = at.tc[thome]
    out_leader[lhome] = 1
    out[lhome] = out.get(lhome, 0)
    out[thome] = out.get(thome, 0) + tail
    taken = [lhome] if lhome == thome else [lhome, thome]
    return taken if fill_rooms(domains, need, room, size, bestfit, at.scores, out, taken) else None


def trim_group_tail(at: _Level, domains: Sequence[int], need: int, size: int, tail: int, bestfit: bool,
                    out: dict[int, int], out_leader: dict[int, int]) -> list[int]:
    """One level's walk for a group with a partial slice (see the module docstring)."""
    pods: dict[int, int] = {}
    leads: dict[int, int] = {}
    ordered = leader_home_first(domains, need, 1, at.sc, at.lead, partial(at.leader_cost, domains=domains))
    taken = _walk(at, ordered, need, 1, size, tail, bestfit, pods, leads)
    if taken is None:
        pods, leads = {}, {}
        taken = _seated(at, domains, need, size, tail, bestfit, pods, leads)
    if taken is None:
        raise AssertionError("TAS group descent: the leader, the whole slices and the partial slice do not fit "
                             "(counts are inconsistent)")
    out.update(pods)
    out_leader.update(leads)
    return taken


def descend_group_tail(tree: TopologyTree, gc: GroupCounts, tc: list[list[int]], tlc: list[list[int]],
                       fit_level: int, chosen: list[int], *, count: int, slice_size: int, tail: int,
                       slice_level: int, lfc: bool) -> tuple[dict[int, int], dict[int, int]]:
    """(leaf -> worker pods, leaf -> leaders) for the domains ``chosen`` at ``fit_level``: down to the slice level
    the chosen domains' children are pooled and walked again, below it each domain goes down its own subtree."""
    bestfit = not lfc
    need = count // slice_size
    assigned: dict[int, int] = {}
    leaders: dict[int, int] = {}
    level = fit_level
    chosen = trim_group_tail(_Level(gc, tc, tlc, level), chosen, need, slice_size, tail, bestfit, assigned, leaders)
    while level < slice_level:
        pooled = pool_children(tree, gc.base, level, chosen, lfc)
        level += 1
        assigned, leaders = {}, {}
        chosen = trim_group_tail(_Level(gc, tc, tlc, level), pooled, need, slice_size, tail, bestfit, assigned, leaders)
    return spread_down(tree, gc, level, chosen, assigned, leaders, slice_size=slice_size, slice_level=slice_level,
                       lfc=lfc, inner=None)
