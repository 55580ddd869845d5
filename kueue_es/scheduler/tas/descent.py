"""Phase 2b: from the chosen domains down to the leaves (§2.6 rules 20–22).

The chosen domains are trimmed to exactly the request, greedily in order (BestFit swaps the last one for the
tightest that covers the rest). Down to the slice level the children of all chosen domains are pooled, sorted
and trimmed again in slice units, which keeps the number of domains small at each level; from the slice level
down, each chosen domain's pods are spread over its own sorted children one pod at a time — or one inner slice at
a time where an inner slice layer governs the children's level. A balanced placement hands each of its domains
a share that goes down that domain's own subtree from the fit level (in slice units above the slice level). When
domains score under TASRespectNodeAffinityPreferred, the orders put the score first and BestFit's swap stays
within the score of the domain it replaces (:func:`~kueue_es.scheduler.tas.search.tier`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kueue_es.scheduler.tas.counts import Counts
from kueue_es.scheduler.tas.partial import trim_tail
from kueue_es.scheduler.tas.search import order, tightest
from projections.topology import TopologyTree


def trim(domains: Sequence[int], need: int, value: Sequence[int] | Mapping[int, int], unit: int, bestfit: bool,
         out: dict[int, int], scores: Sequence[int] | None = None) -> list[int]:
    """Kueue's ``updateCountsToMinimumGeneric`` without leaders: take ``domains`` in order until ``need`` units
    (slices of ``unit`` pods, or pods when ``unit`` is 1) are covered; ``out`` gets each taken domain's pods.
    ``scores``: the domains' preferred-affinity scores, when they score."""
    taken: list[int] = []
    remaining = need
    if remaining <= 0 and not domains:
        return taken
    for k, d in enumerate(domains):
        if bestfit and value[d] >= remaining:
            d = tightest(domains[k:], remaining, value, scores)
        if value[d] >= remaining:
            out[d] = remaining * unit
            taken.append(d)
            return taken
        out[d] = value[d] * unit
        remaining -= value[d]
        taken.append(d)
    raise AssertionError(f"TAS descent: {remaining} unit(s) left after every domain (counts are inconsistent)")


def pool_children(tree: TopologyTree, counts: Counts, level: int, chosen: Sequence[int], lfc: bool) -> list[int]:
    """The children of the ``chosen`` domains of ``level``, pooled and sorted in the order of the level below."""
    starts, ends = tree.child_start[level], tree.child_end[level]
    return order(counts, level + 1, [c for d in chosen for c in range(starts[d], ends[d])], lfc)


def descend(tree: TopologyTree, counts: Counts, fit_level: int, chosen: list[int], *, count: int, slice_size: int,
            slice_level: int, lfc: bool, inner: Mapping[int, int] | None = None,
            shares: Mapping[int, int] | None = None, tail: int = 0,
            tails: list[list[int]] | None = None) -> dict[int, int]:
    """Leaf index -> pods, for the domains ``chosen`` at ``fit_level``. ``lfc``: the LeastFreeCapacity profile
    (else BestFit); ``inner``: level -> inner slice size; ``shares``: the slices a balanced placement gave each
    chosen domain; ``tail``: the pods of a partial slice, placed down to the slice level by ``tails``
    (:mod:`.partial`; never with ``shares``)."""
    bestfit = not lfc
    last = tree.depth - 1

    def cut(domains: list[int], level: int, value) -> list[int]:
        scores = counts.scores(level)
        if tail and tails is not None:
            return trim_tail(domains, count // slice_size, value, tails[level], slice_size, tail, bestfit,
                             assigned, scores)
        return trim(domains, count // slice_size, value, slice_size, bestfit, assigned, scores)

    assigned: dict[int, int] = {}
    chosen = cut(chosen, fit_level, shares if shares is not None else counts.slices[fit_level])
    level = fit_level
    while shares is None and level < min(last, slice_level):
        pooled = pool_children(tree, counts, level, chosen, lfc)
        level += 1
        assigned = {}
        chosen = cut(pooled, level, counts.slices[level])
    while level < last:
        starts, ends = tree.child_start[level], tree.child_end[level]
        child = level + 1
        if level < slice_level:
            unit, value = slice_size, counts.slices[child]
        else:
            unit = inner.get(child, 1) if inner else 1
            value = counts.pods[child] if unit == 1 else [p // unit for p in counts.pods[child]]
        parents = assigned
        assigned = {}
        next_chosen: list[int] = []
        for d in chosen:
            kids = order(counts, child, range(starts[d], ends[d]), lfc)
            next_chosen += trim(kids, parents[d] // unit, value, unit, bestfit, assigned, counts.scores(child))
        chosen = next_chosen
        level = child
    return assigned
