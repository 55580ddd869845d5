"""Balanced placement (alpha gate TASBalancedPlacement, off by default; Kueue's ``tas_balanced_placement.go``,
§2.7 rule 26) for a request that is neither required nor unconstrained, i.e. a preferred level.

Rather than packing the slices into as few domains as the greedy search does, it spreads them evenly:

1. Candidates are the sibling groups of the requested level R: the children of each domain one level above (in
   level-value order), or every top-level domain when R is the top. For each group, the domains the greedy
   search would take (below R when R is above the slice level, else at R) give a **threshold**: the slices per
   domain the most even spread could guarantee — ⌊slices / domains taken⌋, at most what the last one taken
   holds. Domains below the threshold are pruned (their groups recounted); a group whose rest still holds the
   request competes, the highest threshold winning, then the fewest R-level domains, then the earlier group.
2. Within the winner, a dynamic program picks exactly as many domains as the greedy search needs, with the
   smallest total capacity that still holds the request — first the R-level domains (ordered by slices, then
   the entropy of their children's capacity, highest first, then level values), when R is above the slice level,
   then their children (in level-value order).
3. Each picked domain gets the threshold; the slices left over go to the domains with the most room first.

Under TASRespectNodeAffinityPreferred, when domains score, the greedy search and the spread of step 3 put the
preferred-affinity score first, as Kueue's orders do; the greedy search then stops at the first domain in its
order without a slice, as Kueue's does (without scores those all come last). The dynamic program's orders ignore
scores, as Kueue's do.

Any step that finds nothing hands the request back to the normal search. Every order ends on level values, so
no result depends on iteration order. A pod-set group (a leader with its workers) is balanced leader-aware by
:mod:`.balanced_group`, so Kueue's leader terms are left out here. Deliberate differences, all where Kueue's own result would break the slicing: recounting a pruned group
keeps the inner slice layers' rounding (Kueue recounts without it); slices handed down from a fit level above the
slice level are counted as the slice level counts them, not as pods divided by the slice size; and a spread that
would give a domain more slices than it holds falls back instead.

A group and its children are contiguous index ranges of their levels, so they are handled as lists (indices
relative to the range's start), which keeps a request over thousands of hosts to list operations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from math import log2

from kueue_es.scheduler.tas.counts import Counts
from projections.topology import TopologyTree

_SHIFT = 48  # as search.order: counts stay far below 2^48
_MASK = (1 << _SHIFT) - 1


def place_balanced(tree: TopologyTree, counts: Counts, *, requested: int, slice_level: int, slices: int,
                   slice_size: int, inner: Mapping[int, int]) -> tuple[int, dict[int, int]] | None:
    """(fit level, domain index -> slices) at the fit level, or None to fall back to the normal search."""
    if slices <= 0:
        return None
    r = requested
    below = r < slice_level
    aff = counts.affinity
    groups = sibling_runs(tree, r)
    best = best_count = 0
    winner = None
    for g0, g1 in groups:
        if g1 <= g0:
            continue
        ga = aff[r][g0:g1] if aff else None
        if below:
            c0, c1 = tree.child_start[r][g0], tree.child_end[r][g1 - 1]
            lp, ls = counts.pods[r + 1][c0:c1], counts.slices[r + 1][c0:c1]
            la = aff[r + 1][c0:c1] if aff else None
        else:
            lp, ls, la = counts.pods[r][g0:g1], counts.slices[r][g0:g1], ga
        taken = _greedy(lp, ls, slices, la)
        if not taken:
            continue
        threshold = min(slices // len(taken), ls[taken[-1]])
        if threshold < best:
            continue
        pruned = _prune(tree, counts, r, g0, g1, threshold, slice_level, slice_size, inner)
        taken_r = _greedy(pruned[0], pruned[1], slices, ga)
        if not taken_r:
            continue
        if threshold > best or len(taken_r) < best_count:
            best, best_count, winner = threshold, len(taken_r), (g0, g1, pruned)
            if best == slices and best_count == 1:
                break  # a threshold never exceeds the slices asked for, nor a count 1: no later group wins
    if winner is None:
        return None
    g0, g1, (gp, gs, kp, ks) = winner
    if below:
        c0 = tree.child_start[r][g0]
        chosen = optimal(gp, gs, slices, slice_size, lambda ds: by_capacity_and_entropy(
            ds, gs, kp, tree.child_start[r][g0:g1], tree.child_end[r][g0:g1], c0), aff[r][g0:g1] if aff else None)
        if chosen is None:
            return None
        lower = sorted(c - c0 for d in chosen for c in range(tree.child_start[r][g0 + d], tree.child_end[r][g0 + d]))
        lp, ls, base, fit_level = [kp[c] for c in lower], [ks[c] for c in lower], [c0 + c for c in lower], r + 1
    else:
        lp, ls, base, fit_level = gp, gs, list(range(g0, g1)), r
    la = [aff[fit_level][i] for i in base] if aff else None
    picked = optimal(lp, ls, slices, slice_size, sorted, la)
    shares = None if picked is None else spread(picked, lp, ls, slices, best, la)
    if shares is None:
        return None
    return fit_level, {base[d]: n for d, n in shares.items()}


def sibling_runs(tree: TopologyTree, level: int) -> list[tuple[int, int]]:
    """(first, end) of each run of domains of ``level`` sharing a parent; the whole level at the top."""
    if level == 0:
        return [(0, len(tree.ids[0]))]
    return list(zip(tree.child_start[level - 1], tree.child_end[level - 1], strict=True))


def spread(picked: Sequence[int], pods: Sequence[int], slices: Sequence[int], need: int,
           threshold: int, scores: Sequence[int] | None = None) -> dict[int, int] | None:
    """Slices per picked domain: the threshold each, then what is left to the domains with the most slices first
    (Kueue's order: preferred-affinity score descending when ``scores``, slices descending, pods ascending, level
    values), or None when they cannot all be placed."""
    if need < len(picked) * threshold:
        return None
    extra = need - len(picked) * threshold
    shares: dict[int, int] = {}
    for d in sorted(picked, key=lambda d: (-scores[d] if scores else 0, -slices[d], pods[d], d)):
        take = min(slices[d] - threshold, extra) if extra > 0 else 0
        shares[d] = threshold + take
        extra -= take
        if shares[d] > slices[d]:
            return None
    return None if extra > 0 else shares


def _greedy(pods: Sequence[int], slices: Sequence[int], need: int, scores: Sequence[int] | None = None) -> list[int]:
    """The domains the greedy search would take to hold ``need`` slices (BestFit order: slices descending, pods
    ascending, level values; preferred-affinity score first when ``scores``), or [] when they all together do not
    hold them."""
    if not slices:
        return []
    if scores is not None:
        return _greedy_by_affinity(pods, slices, need, scores)
    top = max(slices)
    if top <= 0:
        return []
    if top >= need:  # one domain holds them: the first in BestFit order
        if pods == slices:
            return [slices.index(top)]
        return [min((i for i, s in enumerate(slices) if s == top), key=pods.__getitem__)]
    keys = sorted(((((_MASK - s) << _SHIFT) | p) << _SHIFT) | i
                  for i, (p, s) in enumerate(zip(pods, slices, strict=True)) if s > 0)
    taken: list[int] = []
    remaining = need
    for k in keys:
        if remaining <= 0:
            break
        i = k & _MASK
        taken.append(i)
        remaining -= slices[i]
    return taken if remaining <= 0 else []


def _greedy_by_affinity(pods: Sequence[int], slices: Sequence[int], need: int, scores: Sequence[int]) -> list[int]:
    """Kueue's ``evaluateGreedyAssignment`` when domains score: in order of score (descending), slices
    (descending), pods and level values, domains are taken until they hold ``need`` slices, stopping at the first
    one without a slice."""
    taken: list[int] = []
    remaining = need
    for i in sorted(range(len(slices)), key=lambda i: (-scores[i], -slices[i], pods[i], i)):
        if remaining <= 0 or slices[i] <= 0:
            break
        taken.append(i)
        remaining -= slices[i]
    return taken if remaining <= 0 else []


def _prune(tree: TopologyTree, counts: Counts, r: int, g0: int, g1: int, threshold: int, slice_level: int,
           slice_size: int, inner: Mapping[int, int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Pods and slices of the group's domains, then of their children, once every child and then every domain
    holding fewer than ``threshold`` slices is dropped. Below the slice level a child holds no slices (Kueue
    counts them only down to the slice level), so a group whose level is the slice level keeps nothing unless
    its domains are leaves."""
    if r == tree.depth - 1:
        gp, gs = counts.pods[r][g0:g1], counts.slices[r][g0:g1]
        kp: list[int] = []
        ks: list[int] = []
    else:
        c0, c1 = tree.child_start[r][g0], tree.child_end[r][g1 - 1]
        ks, kp = counts.slices[r + 1][c0:c1], counts.pods[r + 1][c0:c1]
        if ks and min(ks) < threshold:
            ks = [s if s >= threshold else 0 for s in ks]
            kp = [p if s else 0 for p, s in zip(kp, ks, strict=True)]
        unit = inner.get(r + 1, 1)
        whole = kp if unit == 1 else [p - p % unit for p in kp]
        spans = [(a - c0, b - c0) for a, b in zip(tree.child_start[r][g0:g1], tree.child_end[r][g0:g1], strict=True)]
        gp = [sum(whole[a:b]) for a, b in spans]
        gs = [p // slice_size for p in gp] if r == slice_level else [sum(ks[a:b]) for a, b in spans]
    gs = [s if s >= threshold else 0 for s in gs]
    gp = [p if s else 0 for p, s in zip(gp, gs, strict=True)]
    return gp, gs, kp, ks


def entropy(values: Sequence[int]) -> float:
    """Shannon entropy (bits) of a capacity distribution; 0 for an empty one. Summed in sorted order, so equal
    distributions compare equal whatever the order of the domains holding them."""
    total = sum(values)
    if total <= 0:
        return 0.0
    return -sum(v / total * log2(v / total) for v in sorted(values) if v > 0)


def by_capacity_and_entropy(domains: Sequence[int], slices: Sequence[int], child_pods: Sequence[int],
                             starts: Sequence[int], ends: Sequence[int], c0: int) -> list[int]:
    """``domains`` by slices (descending), then their children's capacity entropy (highest first), then level
    values; the entropy is only computed where slices tie."""
    ties = Counter(slices[d] for d in domains)
    ent = {d: entropy(child_pods[starts[d] - c0:ends[d] - c0]) for d in domains if ties[slices[d]] > 1}
    return sorted(domains, key=lambda d: (-slices[d], -ent.get(d, 0.0), d))


def optimal(pods: Sequence[int], slices: Sequence[int], need: int, slice_size: int, order,
            scores: Sequence[int] | None = None) -> list[int] | None:
    """Exactly as many domains as the greedy search takes (in its order by ``scores`` when they are given), holding
    ``need`` slices with the least total capacity: a dynamic program over (domains taken, pods still to place)
    that keeps the first way found to each state, trying the domains in ``order`` (a function sorting a list of
    domains)."""
    k = len(_greedy(pods, slices, need, scores))
    if k == 0:
        return None
    target = need * slice_size
    if k == 1:  # the domain with the fewest pods that still hold the request, the first in order on a tie
        fit = [d for d in range(len(pods)) if slices[d] > 0 and pods[d] >= target]
        if not fit:
            return None
        least = min(pods[d] for d in fit)
        return [order([d for d in fit if pods[d] == least])[0]]
    ways: list[dict[int, tuple[int, ...]]] = [{} for _ in range(k + 1)]
    ways[0][target] = ()
    for d in order([d for d in range(len(pods)) if slices[d] > 0]):
        p = pods[d]
        for i in range(k, 0, -1):
            before, after = ways[i - 1], ways[i]
            for left in sorted(before):
                if left <= 0:
                    continue
                rest = left - p
                if rest not in after:
                    after[rest] = before[left] + (d,)
    done = [left for left in ways[k] if left <= 0]
    return list(ways[k][max(done)]) if done else None
