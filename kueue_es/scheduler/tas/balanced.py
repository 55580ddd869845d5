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

Any step that finds nothing hands the request back to the normal search. Every order ends on level values, so
no result depends on iteration order. Pod-set groups (leaders) are not modelled, so neither are Kueue's leader
terms. Two deliberate differences, both where Kueue's own result would break the slicing: recounting a pruned
group keeps the inner slice layers' rounding (Kueue recounts without it), and slices handed down from a fit
level above the slice level are counted as the slice level counts them, not as pods divided by the slice size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import log2

from projections.topology import TopologyTree

from kueue_es.scheduler.tas.counts import Counts

Values = Sequence[int] | Mapping[int, int]


def place_balanced(tree: TopologyTree, counts: Counts, *, requested: int, slice_level: int, slices: int,
                   slice_size: int, inner: Mapping[int, int]) -> tuple[int, dict[int, int]] | None:
    """(fit level, domain index -> slices) at the fit level, or None to fall back to the normal search."""
    if slices <= 0:
        return None
    r = requested
    below = r < slice_level
    starts, ends = (tree.child_start[r], tree.child_end[r]) if r < tree.depth - 1 else ((), ())
    if r == 0:
        groups = [range(len(counts.pods[0]))]
    else:
        groups = [range(a, b) for a, b in zip(tree.child_start[r - 1], tree.child_end[r - 1], strict=True)]
    best = best_count = 0
    winner: tuple[list[int], dict[int, int], dict[int, int], dict[int, int], dict[int, int]] | None = None
    for group in groups:
        domains = list(group)
        if below:
            kids = [c for d in domains for c in range(starts[d], ends[d])]
            taken = _greedy(kids, counts.pods[r + 1], counts.slices[r + 1], slices)
            last_slices = counts.slices[r + 1][taken[-1]] if taken else 0
        else:
            taken = _greedy(domains, counts.pods[r], counts.slices[r], slices)
            last_slices = counts.slices[r][taken[-1]] if taken else 0
        if not taken:
            continue
        threshold = min(slices // len(taken), last_slices)
        if threshold < best:
            continue
        gp, gs, kp, ks = _prune(tree, counts, r, domains, threshold, slice_level, slice_size, inner)
        taken_r = _greedy(domains, gp, gs, slices)
        if not taken_r:
            continue
        if threshold > best or len(taken_r) < best_count:
            best, best_count, winner = threshold, len(taken_r), (domains, gp, gs, kp, ks)
    if winner is None:
        return None
    domains, gp, gs, kp, ks = winner
    if below:
        chosen = _optimal(domains, gp, gs, slices, slice_size, entropy=(tree, r, kp))
        if chosen is None:
            return None
        lower, lp, ls, fit_level = [c for d in chosen for c in range(starts[d], ends[d])], kp, ks, r + 1
    else:
        lower, lp, ls, fit_level = domains, gp, gs, r
    picked = _optimal(lower, lp, ls, slices, slice_size)
    if picked is None or slices < len(picked) * best:
        return None
    extra = slices - len(picked) * best
    shares: dict[int, int] = {}
    for d in sorted(picked, key=lambda d: (-ls[d], lp[d], d)):
        take = min(ls[d] - best, extra) if extra > 0 else 0
        shares[d] = best + take
        extra -= take
    if extra > 0:
        return None
    return fit_level, shares


def _greedy(domains: Sequence[int], pods: Values, slices: Values, need: int) -> list[int]:
    """The domains the greedy search would take to hold ``need`` slices (BestFit order: slices descending, pods
    ascending, level values), or [] when they all together do not hold them."""
    taken: list[int] = []
    remaining = need
    for d in sorted((d for d in domains if slices[d] > 0), key=lambda d: (-slices[d], pods[d], d)):
        if remaining <= 0:
            break
        taken.append(d)
        remaining -= slices[d]
    return taken if remaining <= 0 else []


def _prune(tree: TopologyTree, counts: Counts, r: int, domains: Sequence[int], threshold: int, slice_level: int,
           slice_size: int, inner: Mapping[int, int]
           ) -> tuple[dict[int, int], dict[int, int], dict[int, int], dict[int, int]]:
    """Pods and slices of the group's domains (and of their children) once every child, then every domain,
    holding fewer than ``threshold`` slices is dropped. Below the slice level a child holds no slices (Kueue
    counts them only down to the slice level), so a group whose level is the slice level keeps nothing unless
    its domains are leaves."""
    gp: dict[int, int] = {}
    gs: dict[int, int] = {}
    kp: dict[int, int] = {}
    ks: dict[int, int] = {}
    if r == tree.depth - 1:
        for d in domains:
            gp[d], gs[d] = counts.pods[r][d], counts.slices[r][d]
    else:
        unit = inner.get(r + 1, 1)
        child_pods, child_slices = counts.pods[r + 1], counts.slices[r + 1]
        starts, ends = tree.child_start[r], tree.child_end[r]
        for d in domains:
            pods = held = 0
            for c in range(starts[d], ends[d]):
                if child_slices[c] < threshold:
                    kp[c] = ks[c] = 0
                    continue
                kp[c], ks[c] = child_pods[c], child_slices[c]
                pods += kp[c] - kp[c] % unit
                held += ks[c]
            gp[d] = pods
            gs[d] = pods // slice_size if r == slice_level else held
    for d in domains:
        if gs[d] < threshold:
            gp[d] = gs[d] = 0
    return gp, gs, kp, ks


def _entropy(values: list[int]) -> float:
    """Shannon entropy (bits) of a capacity distribution; 0 for an empty one. Summed in sorted order, so equal
    distributions compare equal whatever the order of the domains holding them."""
    total = sum(values)
    if total <= 0:
        return 0.0
    return -sum(v / total * log2(v / total) for v in sorted(values) if v > 0)


def _optimal(domains: Sequence[int], pods: Values, slices: Values, need: int, slice_size: int,
             entropy: tuple[TopologyTree, int, Mapping[int, int]] | None = None) -> list[int] | None:
    """Exactly as many of ``domains`` as the greedy search takes, holding ``need`` slices with the least total
    capacity: a dynamic program over (domains taken, pods still to place), the first way found to each state
    kept. Domains are tried in level-value order, or — with ``entropy`` (the tree, the domains' level and their
    children's pods) — by slices, then children's capacity entropy (highest first), then level values."""
    k = len(_greedy(domains, pods, slices, need))
    if k == 0:
        return None
    if entropy is None:
        ordered = sorted(domains)
    else:
        tree, level, child_pods = entropy
        starts, ends = tree.child_start[level], tree.child_end[level]
        ent = {d: _entropy([child_pods.get(c, 0) for c in range(starts[d], ends[d])]) for d in domains}
        ordered = sorted(domains, key=lambda d: (-slices[d], -ent[d], d))
    ways: list[dict[int, tuple[int, ...]]] = [{} for _ in range(k + 1)]
    ways[0][need * slice_size] = ()
    for d in ordered:
        if slices[d] <= 0:
            continue
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
