"""A last, partial slice (Kueue's ``TASPartialSlices``, beta, on since v0.20).

A pod set whose count is not a multiple of its slice size is cut into ``count // size`` whole slices and one
shorter slice of ``count % size`` pods (its tail), which, like the whole ones, must stay in one domain of the slice
level. Only a pod set with one slice layer has a tail (several layers must divide evenly, Kueue's webhook says);
with the gate off, or without slices, the tail is empty and placement is as before.

Every domain at or above the slice level gets a second capacity: the whole slices it still holds when it also
holds the tail (:data:`NO_TAIL` when it cannot hold it). At the slice level that is what is left of its pods once
the tail is taken; above, its children's slices less the cheapest child's loss for taking the tail, bounded by its
own pods less the tail. The domain search reads that capacity where the tail must fit, so a set of domains is
chosen only with a home for the tail in it; the descent then gives the tail to a domain already taking whole
slices that still has room for it, or else opens the first unused one that can hold it. The published assignment
lists the slice-level domain holding the tail last (the order pods are ranked in).
"""

from __future__ import annotations

from collections.abc import Sequence

from kueue_es.scheduler.tas.counts import Counts
from kueue_es.scheduler.tas.search import NotFit, SliceFit, order, take_in_order, tier, tightest
from projections.topology import TopologyTree

NO_TAIL = -1
"""A domain that cannot hold the tail; below any number of whole slices, 0 included."""


def tail_size(count: int, size: int, layers: int, enabled: bool) -> int:
    """Pods in the partial slice of a ``count``-pod set cut in ``size``-pod slices over ``layers`` slice layers
    (0: no tail)."""
    if not enabled or size <= 1 or layers > 1:
        return 0
    return count % size


def hosting(pods: int, tail: int, size: int) -> int:
    """Whole slices of ``size`` a domain of ``pods`` holds beside a partial slice of ``tail`` (NO_TAIL: it cannot
    hold the partial slice)."""
    return (pods - tail) // size if pods >= tail else NO_TAIL


def tail_capacities(tree: TopologyTree, pods: list[list[int]], slices: list[list[int]], size: int, tail: int,
                    slice_level: int) -> list[list[int]]:
    """Per level (down to the slice level; empty lists below), each domain's whole slices beside the tail."""
    out: list[list[int]] = [[] for _ in range(tree.depth)]
    out[slice_level] = [hosting(p, tail, size) for p in pods[slice_level]]
    for lvl in range(slice_level - 1, -1, -1):
        child_sc, child_tc = slices[lvl + 1], out[lvl + 1]
        row = []
        for d, (a, b) in enumerate(zip(tree.child_start[lvl], tree.child_end[lvl], strict=True)):
            losses = [child_sc[c] - child_tc[c] for c in range(a, b) if child_tc[c] != NO_TAIL]
            if not losses:
                row.append(NO_TAIL)
                continue
            row.append(min(slices[lvl][d] - min(losses), hosting(pods[lvl][d], tail, size)))
        out[lvl] = row
    return out


def best_fit_with_tail(domains: Sequence[int], need: int, sc: Sequence[int], tc: Sequence[int],
                       scores: Sequence[int] | None, lead: Sequence[int] | None = None, leaders: int = 0) -> int:
    """Among the first affinity tier of ``domains`` (those able to take ``leaders`` when ``lead`` is given), the one
    holding ``need`` whole slices beside the tail (``tc``) with the fewest to spare (then the fewest whole slices,
    ``sc``), the first on a tie; the first domain when none does."""
    cands = tier(domains, scores)
    best, key = cands[0], None
    for d in cands:
        if (lead is None or lead[d] >= leaders) and tc[d] >= need and (key is None or (tc[d], sc[d]) < key):
            best, key = d, (tc[d], sc[d])
    return best


class TailFit(SliceFit):
    """How the search (:func:`~kueue_es.scheduler.tas.search.find_fit_level`) reads a level for a pod set with a
    tail: a domain fits when it holds the whole slices beside the tail (``tails``), best fit taking the one with the
    fewest to spare (:func:`best_fit_with_tail`); the messages count the tail as a slice of its own, and the top
    level's greedy run needs a home for the tail among the domains it took, else adds the first other one that can
    hold it."""

    __slots__ = ("tails",)
    extra = 1
    by_counts = False

    def __init__(self, tails: list[list[int]]) -> None:
        self.tails = tails

    def capacity(self, counts: Counts, level: int) -> Sequence[int]:
        return self.tails[level]

    def best(self, counts: Counts, level: int, domains: Sequence[int], slices: int,
             scores: Sequence[int] | None) -> int:
        return best_fit_with_tail(domains, slices, counts.slices[level], self.tails[level], scores)

    def greedy(self, counts: Counts, level: int, slices: int, lfc: bool, not_fit: NotFit) -> tuple[int, list[int]] | str:
        sc, tc = counts.slices[level], self.tails[level]
        # every domain: one without a whole slice may still be the tail's home
        ordered = order(counts, level, range(len(sc)), lfc)
        chosen, remaining = take_in_order(ordered, slices, sc, counts.scores(level), lfc)
        if remaining > 0:
            return not_fit(slices - remaining, slices + 1, level)
        took, left = [], slices
        for d in chosen:
            took.append(min(sc[d], left))
            left -= sc[d]
        homed = with_tail_home(chosen, took, [tc[d] for d in chosen], ordered, tc)
        return (level, homed) if homed is not None else not_fit(slices, slices + 1, level)


def with_tail_home(chosen: list[int], took: Sequence[int], rooms: Sequence[int], ordered: Sequence[int],
                   tc: Sequence[int]) -> list[int] | None:
    """``chosen`` when one of them has room for the tail beside the whole slices it takes (``took``; ``rooms``: the
    whole slices each holds beside the tail), else with the first other domain of ``ordered`` that can hold the tail
    added; None when there is none."""
    if any(room != NO_TAIL and t <= room for t, room in zip(took, rooms, strict=True)):
        return chosen
    extra = next((d for d in ordered if d not in chosen and tc[d] != NO_TAIL), None)
    return None if extra is None else [*chosen, extra]


def trim_tail(domains: Sequence[int], need: int, sc: Sequence[int], tc: Sequence[int], size: int, tail: int,
              bestfit: bool, out: dict[int, int], scores: Sequence[int] | None = None) -> list[int]:
    """:func:`~kueue_es.scheduler.tas.descent.trim` in whole slices, the tail given to one of the domains: the
    domain that closes the count when it holds the rest beside the tail (and best fit would not pick a smaller
    one), else one taken that still has room for it, else the first other one that can hold it."""
    taken: list[int] = []
    hosted = False
    remaining = need
    for k, d in enumerate(domains):
        if not hosted:
            closing = _closing_with_tail(domains[k:], remaining, sc, tc, bestfit, scores)
            if closing is not None:
                out[closing] = remaining * size + tail
                taken.append(closing)
                return taken
        if bestfit and sc[d] >= remaining:
            d = tightest(domains[k:], remaining, sc, scores)
        if sc[d] >= remaining:
            out[d] = remaining * size
            taken.append(d)
            return _place_tail(taken, domains, tc, size, tail, out)
        out[d] = sc[d] * size
        remaining -= sc[d]
        taken.append(d)
        hosted = hosted or (tc[d] != NO_TAIL and sc[d] <= tc[d])
    raise AssertionError(f"TAS descent: {remaining} slice(s) left after every domain (counts are inconsistent)")


def _closing_with_tail(domains: Sequence[int], remaining: int, sc: Sequence[int], tc: Sequence[int], bestfit: bool,
                       scores: Sequence[int] | None) -> int | None:
    first = domains[0]
    if sc[first] < remaining:
        return None
    home = whole = first
    if bestfit:
        home = best_fit_with_tail(domains, remaining, sc, tc, scores)
        whole = tightest(domains, remaining, sc, scores)
    if tc[home] < remaining or sc[home] > sc[whole]:
        return None
    return home


def _place_tail(taken: list[int], domains: Sequence[int], tc: Sequence[int], size: int, tail: int,
                out: dict[int, int]) -> list[int]:
    for d in taken:
        if tc[d] != NO_TAIL and out[d] // size <= tc[d]:
            out[d] += tail
            return taken
    extra = next((d for d in domains if d not in taken and tc[d] != NO_TAIL), None)
    if extra is None:
        raise AssertionError("TAS descent: no domain left to hold the partial slice (counts are inconsistent)")
    out[extra] = tail
    taken.append(extra)
    return taken


def tail_last(tree: TopologyTree, domains: Sequence[tuple[tuple[str, ...], int]], slice_level: int,
              size: int) -> tuple[tuple[tuple[str, ...], int], ...]:
    """An assignment's domains with those under the slice-level domain holding the tail moved last (the first, in
    their order, whose pods leave the tail over); as they are when the pods make whole slices or the domains are
    not all leaves of ``tree``."""
    domains = tuple(domains)
    rest = sum(c for _, c in domains) % size if size > 1 else 0
    if rest == 0:
        return domains
    owners = slice_level_owners(tree, domains, slice_level)
    if owners is None:
        return domains
    per: dict[int, int] = {}
    for owner, (_, c) in zip(owners, domains, strict=True):
        per[owner] = per.get(owner, 0) + c
    home = next((o for o in owners if per[o] % size == rest), None)
    if home is None:
        return domains
    pairs = list(zip(owners, domains, strict=True))
    return tuple(d for o, d in pairs if o != home) + tuple(d for o, d in pairs if o == home)


def slice_level_owners(tree: TopologyTree, domains: Sequence[tuple[tuple[str, ...], int]],
                       slice_level: int) -> list[int] | None:
    """Each domain's ancestor index at the slice level, or None when one is not a leaf of ``tree``."""
    last = tree.depth - 1
    out = []
    for values, _ in domains:
        at = tree.domain_index(values)
        if at is None or at[0] != last:
            return None
        out.append(tree.ancestor(last, at[1], slice_level))
    return out
