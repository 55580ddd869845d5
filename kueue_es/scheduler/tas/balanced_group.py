"""Balanced placement of a pod-set group (a leader with its workers) under TASBalancedPlacement (alpha, off):
the leader-aware variant of :mod:`.balanced`, as Kueue runs its balanced placement with one leader to place.

The workers' request governs, as in :mod:`.group`: every domain carries the workers' plain counts and, for the
leader, whether it can take it and how many worker slices still fit once it is there (:class:`.GroupCounts`).
The steps of :mod:`.balanced` change as follows.

1. The greedy estimate first gives the leader to the first domain in the leader order (leader capacity, then the
   preferred-affinity score when domains score, with-leader slices descending, with-leader pods ascending, level
   values), counting its with-leader slices, then takes the other domains in the plain order until the slices
   are held; no domain able to take the leader, or too few slices, and the group is not balanced. The threshold
   is ⌊slices / domains taken⌋, at most the leader domain's with-leader slices and the last other domain's
   slices. Pruning drops a domain (and its subtree) holding fewer slices than the threshold and takes the leader
   away from one holding the threshold only without it; the group's domains are then recounted from their
   children, with-leader counts included. A group whose pruned domains no longer hold the request is tried once
   more at the lower threshold that leaves the last domain room for the leader (its with-leader slices), when
   that is still above zero and not below the best threshold so far.
2. The dynamic program tracks the leader besides the pods still to place: a domain is taken either with the
   leader (its with-leader pods) or without it (its plain pods), and the set must place the leader. Where the
   request is above the slice level, the requested level's domains are tried by leader capacity, with-leader
   slices, their children's capacity entropy and level values.
3. The picked domains are sorted in the leader order; the first takes the leader and the threshold plus as much
   of the remainder as its with-leader slices allow, the others the threshold plus what their slices allow.

Any step that finds nothing hands the group back to the joint search of :mod:`.group`. As in :mod:`.balanced`,
a pruned group is recounted with the inner slice layers' rounding, and a spread giving a domain more slices than
it holds (with the leader, for the leader's domain) falls back instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from kueue_es.scheduler.tas.balanced import entropy, sibling_runs
from kueue_es.scheduler.tas.group import GroupCounts
from projections.topology import TopologyTree


class Caps(NamedTuple):
    """A run of domains' counts: plain pods and slices, with-leader pods and slices, leader capacity."""

    p: list[int]
    s: list[int]
    pw: list[int]
    sw: list[int]
    ld: list[int]


class GroupShares(NamedTuple):
    """A balanced group placement: the fit level, each domain's worker slices there, the leader's domain."""

    fit_level: int
    shares: dict[int, int]
    leader: int


def _caps(gc: GroupCounts, level: int, a: int, b: int) -> Caps:
    return Caps(list(gc.base.pods[level][a:b]), list(gc.base.slices[level][a:b]), list(gc.pods_wl[level][a:b]),
                list(gc.slices_wl[level][a:b]), list(gc.leader[level][a:b]))


def _scores(gc: GroupCounts, level: int, a: int, b: int) -> list[int] | None:
    aff = gc.base.affinity
    return list(aff[level][a:b]) if aff is not None else None


def _leader_first(caps: Caps, scores: Sequence[int] | None):
    return lambda i: (-caps.ld[i], -scores[i] if scores else 0, -caps.sw[i], caps.pw[i], i)


def _plain(caps: Caps, scores: Sequence[int] | None):
    return lambda i: (-scores[i] if scores else 0, -caps.s[i], caps.p[i], i)


def greedy(caps: Caps, need: int, scores: Sequence[int] | None) -> tuple[int, int, int | None] | None:
    """(domains taken, the leader's domain, the last other domain taken or None) as the greedy search would
    place one leader and ``need`` slices, or None when they do not fit."""
    n = len(caps.s)
    if n == 0:
        return None
    home = min(range(n), key=_leader_first(caps, scores))
    if caps.ld[home] <= 0:
        return None
    remaining = need - caps.sw[home]
    taken, last = 1, None
    for i in sorted((i for i in range(n) if i != home), key=_plain(caps, scores)):
        if remaining <= 0 or caps.s[i] <= 0:
            break
        taken, last = taken + 1, i
        remaining -= caps.s[i]
    return (taken, home, last) if remaining <= 0 else None


def _clear(caps: Caps, i: int, threshold: int) -> None:
    """Kueue's pruning of one domain: below the threshold it holds nothing; holding it only without the leader,
    it can no longer take the leader."""
    if caps.s[i] < threshold:
        caps.p[i] = caps.s[i] = caps.pw[i] = caps.sw[i] = caps.ld[i] = 0
    elif caps.ld[i] > 0 and caps.sw[i] < threshold:
        caps.pw[i] = caps.sw[i] = caps.ld[i] = 0


def prune(tree: TopologyTree, gc: GroupCounts, r: int, g0: int, g1: int, threshold: int, slice_level: int,
          size: int, inner: Mapping[int, int]) -> tuple[Caps, Caps | None]:
    """The group's domains (level ``r``, indices ``g0``..``g1``) and their children, pruned at ``threshold``
    and recounted (the children are None when ``r`` is the leaf level)."""
    if r == tree.depth - 1:
        top = _caps(gc, r, g0, g1)
        for i in range(g1 - g0):
            _clear(top, i, threshold)
        return top, None
    c0 = tree.child_start[r][g0]
    kids = _caps(gc, r + 1, c0, tree.child_end[r][g1 - 1])
    for c in range(len(kids.s)):
        _clear(kids, c, threshold)
    unit = inner.get(r + 1, 1)
    whole = kids.p if unit == 1 else [p - p % unit for p in kids.p]
    whole_wl = kids.pw if unit == 1 else [p - p % unit for p in kids.pw]
    top = Caps([], [], [], [], [])
    for a, b in zip(tree.child_start[r][g0:g1], tree.child_end[r][g0:g1], strict=True):
        a, b = a - c0, b - c0
        pods = sum(whole[a:b])
        slices = pods // size if r == slice_level else sum(kids.s[a:b])
        capable = [c for c in range(a, b) if kids.ld[c] > 0]
        if capable:
            pw = pods - min(whole[c] - whole_wl[c] for c in capable)
            sw = pw // size if r == slice_level else slices - min(kids.s[c] - kids.sw[c] for c in capable)
            ld = max(kids.ld[a:b])
        else:
            pw = sw = ld = 0
        for column, value in zip(top, (pods, slices, pw, sw, ld), strict=True):
            column.append(value)
    for i in range(g1 - g0):
        _clear(top, i, threshold)
    return top, kids


def optimal(caps: Caps, need: int, size: int, order: Sequence[int], scores: Sequence[int] | None) -> list[int] | None:
    """As many domains as :func:`greedy` takes, placing the leader and ``need`` slices with the least total
    capacity: a dynamic program over (domains taken, leaders and pods still to place) keeping the first way found
    to each state, trying the domains in ``order``, each with the leader (its with-leader pods) or without."""
    found = greedy(caps, need, scores)
    if found is None:
        return None
    k = found[0]
    ways: list[dict[tuple[int, int], tuple[int, ...]]] = [{} for _ in range(k + 1)]
    ways[0][(1, need * size)] = ()
    for d in order:
        for i in range(k, 0, -1):
            before, after = ways[i - 1], ways[i]
            for leaders, pods in sorted(before):
                if leaders <= 0 and pods <= 0:
                    continue
                path = before[(leaders, pods)] + (d,)
                if leaders > 0 and caps.ld[d] > 0:
                    after.setdefault((leaders - caps.ld[d], pods - caps.pw[d]), path)
                if caps.s[d] > 0:
                    after.setdefault((leaders, pods - caps.p[d]), path)
    done = [pods for leaders, pods in ways[k] if leaders == 0 and pods <= 0]
    return list(ways[k][(0, max(done))]) if done else None


def spread(picked: Sequence[int], caps: Caps, need: int, threshold: int,
           scores: Sequence[int] | None) -> tuple[dict[int, int], int] | None:
    """(slices per picked domain, the leader's domain): in the leader order, the first takes the leader and the
    threshold plus what its with-leader slices allow of the remainder, the others the threshold plus what their
    slices allow; None when they cannot all be placed."""
    extra = need - len(picked) * threshold
    if extra < 0:
        return None
    ordered = sorted(picked, key=_leader_first(caps, scores))
    home = ordered[0]
    if caps.ld[home] <= 0:
        return None
    shares: dict[int, int] = {}
    for d in ordered:
        room = caps.sw[d] if d == home else caps.s[d]
        take = min(room - threshold, extra) if extra > 0 or d == home else 0
        shares[d] = threshold + take
        extra -= take
        if take < 0 or shares[d] > room:
            return None
    return None if extra > 0 else (shares, home)


def _group_lower(tree: TopologyTree, gc: GroupCounts, r: int, g0: int, g1: int,
                 below: bool) -> tuple[Caps, list[int] | None]:
    if below:
        c0, c1 = tree.child_start[r][g0], tree.child_end[r][g1 - 1]
        return _caps(gc, r + 1, c0, c1), _scores(gc, r + 1, c0, c1)
    return _caps(gc, r, g0, g1), _scores(gc, r, g0, g1)


def place_group_balanced(tree: TopologyTree, gc: GroupCounts, *, requested: int, slice_level: int, slices: int,
                         slice_size: int, inner: Mapping[int, int]) -> GroupShares | None:
    """The balanced placement of a group's workers (``slices`` of ``slice_size``) and its one leader, or None to
    fall back to the joint search."""
    if slices <= 0:
        return None
    r = requested
    below = r < slice_level
    groups = sibling_runs(tree, r)
    best = best_count = 0
    winner = None
    for g0, g1 in groups:
        if g1 <= g0:
            continue
        lower, lower_scores = _group_lower(tree, gc, r, g0, g1, below)
        est = greedy(lower, slices, lower_scores)
        if est is None:
            continue
        taken, home, last = est
        threshold = min(slices // taken, lower.sw[home])
        if last is not None:
            threshold = min(threshold, lower.s[last])
        reserved = min(threshold, lower.sw[last]) if last is not None else threshold
        if threshold <= 0 or threshold < best:
            continue
        scores = _scores(gc, r, g0, g1)
        pruned = prune(tree, gc, r, g0, g1, threshold, slice_level, slice_size, inner)
        fit = greedy(pruned[0], slices, scores)
        if fit is None and reserved < threshold:
            if reserved <= 0 or reserved < best:
                continue
            threshold = reserved
            pruned = prune(tree, gc, r, g0, g1, threshold, slice_level, slice_size, inner)
            fit = greedy(pruned[0], slices, scores)
        if fit is None:
            continue
        if threshold > best or fit[0] < best_count:
            best, best_count, winner = threshold, fit[0], (g0, g1, pruned)
    if winner is None:
        return None
    g0, g1, (top, kids) = winner
    if below:
        assert kids is not None
        c0 = tree.child_start[r][g0]
        starts, ends = tree.child_start[r][g0:g1], tree.child_end[r][g0:g1]
        ent = [entropy(kids.p[a - c0:b - c0]) for a, b in zip(starts, ends, strict=True)]
        order = sorted(range(g1 - g0), key=lambda d: (-top.ld[d], -top.sw[d], -ent[d], d))
        chosen = optimal(top, slices, slice_size, order, _scores(gc, r, g0, g1))
        if chosen is None:
            return None
        lower = sorted(c - c0 for d in chosen for c in range(starts[d], ends[d]))
        caps = Caps(*([column[c] for c in lower] for column in kids))
        base, fit_level = [c0 + c for c in lower], r + 1
    else:
        caps, base, fit_level = top, list(range(g0, g1)), r
    scores = [gc.base.affinity[fit_level][i] for i in base] if gc.base.affinity is not None else None
    picked = optimal(caps, slices, slice_size, range(len(base)), scores)
    found = None if picked is None else spread(picked, caps, slices, best, scores)
    if found is None:
        return None
    shares, home = found
    return GroupShares(fit_level, {base[d]: n for d, n in shares.items()}, base[home])
