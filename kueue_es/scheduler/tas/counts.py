"""Phase 1: how many pods (and slices) of the request fit in every domain (§2.4 rules 12–13).

A leaf fits ⌊remaining / request⌋ pods, minimised over the requested resources (a zero request is unlimited; a
missing or negative remaining value gives 0). Parents sum their children; where an inner slice layer governs the
children's level, each child contributes only whole inner slices (its count rounded down to a multiple of the
layer's size). Slice counts are ⌊pods / slice size⌋ at the slice level, the sum of the children's above it, and
0 below. Under TASNodeFeasibilityForAllLevels a leaf that is no node fits at most what its feasible nodes hold
one by one (:mod:`.pernode`). Under TASRespectNodeAffinityPreferred a leaf also carries its node's preferred-affinity score (0 for a
node filtered out) and a parent the sum of its children's, whatever room they have. Everything is a list per level,
indexed like the tree's domains at that level (level-value order), so sorting by index is sorting by level values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kueue_es.scheduler.tas.nodes import Exclusion, Exclusions
from projections.topology import FlavorSnapshot, TopologyTree, fit_in_leaf


class Counts:
    """Per-level pod and slice counts for one request, and the preferred-affinity scores ordering its domains."""

    __slots__ = ("pods", "slices", "leaf_why", "affinity", "nodes")

    def __init__(self, pods: list[list[int]], slices: list[list[int]], leaf_why: dict[int, Exclusion | None],
                 affinity: list[list[int]] | None = None, nodes: Any = None) -> None:
        self.pods = pods
        self.slices = slices
        self.leaf_why = leaf_why
        """Leaves forced to 0 before counting: by a node filter (its reason) or outside ``within`` (None)."""
        self.affinity = affinity
        """Per level, each domain's preferred-affinity score; None when no domain scores (every order is then
        Kueue's without the gate)."""
        self.nodes = nodes
        """The request's :class:`~kueue_es.scheduler.tas.pernode.NodeView` when each node under a declared leaf was
        checked (TASNodeFeasibilityForAllLevels), else None."""

    def scores(self, level: int) -> list[int] | None:
        """Each domain's preferred-affinity score at ``level``; None when no domain scores."""
        return self.affinity[level] if self.affinity is not None else None


def fill_counts(snap: FlavorSnapshot, per_pod: tuple[tuple[str, int], ...], *,
                assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool,
                excluded: Mapping[int, Exclusion], within: tuple[int, int] | None, slice_size: int,
                slice_level: int, inner: Mapping[int, int] | None = None,
                scores: Sequence[int] | None = None, nodes: Any = None) -> Counts:
    """``scores``: each leaf's preferred-affinity score (:func:`~kueue_es.scheduler.tas.nodes.preferred_scores`),
    or None. ``nodes``: the request's :class:`~kueue_es.scheduler.tas.pernode.NodeView` (a leaf then fits no more
    than its feasible nodes hold together), or None."""
    tree = snap.tree
    columns = snap.free if simulate_empty else snap.remaining
    leaves = list(snap.pods_fitting(per_pod, simulate_empty))
    if assumed:
        index = tree.index[-1]
        for did in sorted(assumed):
            i = index.get(did)
            if i is not None:
                leaves[i] = fit_in_leaf(columns, i, per_pod, assumed[did])
    if nodes is not None:
        leaves = list(map(min, leaves, nodes.cap))
    leaf_why: dict[int, Exclusion | None] = {}
    for i, why in excluded.items():
        leaves[i] = 0
        leaf_why[i] = why
    if within is not None:
        lvl, dom = within
        last = tree.depth - 1
        for i in range(tree.leaf_count):
            if i not in leaf_why and tree.ancestor(last, i, lvl) != dom:
                leaves[i] = 0
                leaf_why[i] = None
    pods = roll_up(tree, leaves, inner)
    slices = slice_counts(tree, pods, slice_size, slice_level)
    return Counts(pods, slices, leaf_why, affinity_sums(tree, scores, excluded), nodes)


def affinity_sums(tree: TopologyTree, scores: Sequence[int] | None,
                  excluded: Mapping[int, Exclusion]) -> list[list[int]] | None:
    """Each domain's preferred-affinity score at every level: a leaf's node's (0 when a node filter excludes it,
    as Kueue scores only the nodes it keeps; a leaf outside a replacement's domain keeps its score), a parent's
    the sum of its children's."""
    if scores is None:
        return None
    leaves = [0 if i in excluded else s for i, s in enumerate(scores)]
    if not any(leaves):
        return None
    out: list[list[int]] = [[] for _ in range(tree.depth)]
    out[-1] = leaves
    for lvl in range(tree.depth - 2, -1, -1):
        child = out[lvl + 1]
        out[lvl] = [sum(child[a:b]) for a, b in zip(tree.child_start[lvl], tree.child_end[lvl], strict=True)]
    return out


def limiting_resource(columns: Mapping[str, list[int]], i: int, per_pod: tuple[tuple[str, int], ...],
                      minus: Mapping[str, int] | None) -> str:
    """The resource that leaves leaf ``i`` room for no pod (alphabetically first on a tie), as Kueue reports."""
    for r, q in per_pod:
        if q <= 0:
            continue
        col = columns.get(r)
        rem = (col[i] if col is not None else 0) - (minus.get(r, 0) if minus else 0)
        if rem // q <= 0:
            return r
    return ""


def roll_up(tree: TopologyTree, leaves: list[int], inner: Mapping[int, int] | None = None) -> list[list[int]]:
    """Pods per domain at every level from the leaves' (``inner``: level -> inner slice size of that level)."""
    depth = tree.depth
    pods: list[list[int]] = [[] for _ in range(depth)]
    pods[-1] = leaves
    for lvl in range(depth - 2, -1, -1):
        child = pods[lvl + 1]
        unit = inner.get(lvl + 1, 1) if inner else 1
        if unit > 1:
            child = [c - c % unit for c in child]
        pods[lvl] = [sum(child[a:b]) for a, b in zip(tree.child_start[lvl], tree.child_end[lvl], strict=True)]
    return pods


def slice_counts(tree: TopologyTree, pods: list[list[int]], size: int, level: int) -> list[list[int]]:
    depth = tree.depth
    if size == 1 and level == depth - 1:
        return pods
    slices: list[list[int]] = [[] for _ in range(depth)]
    for lvl in range(depth - 1, level, -1):
        slices[lvl] = [0] * len(pods[lvl])
    slices[level] = [p // size for p in pods[level]]
    for lvl in range(level - 1, -1, -1):
        child = slices[lvl + 1]
        slices[lvl] = [sum(child[a:b]) for a, b in zip(tree.child_start[lvl], tree.child_end[lvl], strict=True)]
    return slices


def exclusions(snap: FlavorSnapshot, counts: Counts, per_pod: tuple[tuple[str, int], ...],
               assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool) -> Exclusions:
    """Kueue's exclusion statistics for the not-fit message (computed only when a placement fails)."""
    if counts.nodes is not None:
        return counts.nodes.exclusions(counts.leaf_why)
    tree = snap.tree
    stats = Exclusions(tree.leaf_count)
    columns = snap.free if simulate_empty else snap.remaining
    leaves = counts.pods[-1]
    ids: Sequence[str] = tree.ids[-1]
    for i in range(tree.leaf_count):
        if i in counts.leaf_why:
            why = counts.leaf_why[i]
            if why is None:
                stats.topology_domain += 1
            else:
                stats.record(why)
            continue
        if leaves[i] == 0:
            r = limiting_resource(columns, i, per_pod, assumed.get(ids[i]) if assumed else None)
            if r:
                stats.resources[r] = stats.resources.get(r, 0) + 1
    return stats
