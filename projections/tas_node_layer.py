"""The nodes under the leaves of a TAS flavor whose topology does not end at ``kubernetes.io/hostname``.

Kueue's TASNodeFeasibilityForAllLevels (beta, on by default) adds an internal hostname level below such a
topology, one leaf per node keyed by the node's name, so that a pod is counted only where one node holds it. The
tree here keeps its declared leaves; a :class:`NodeLayer` lists, per declared leaf, its nodes and their free
capacity (allocatable less the non-TAS pods bound there), in node-name order within the leaf. TAS usage stays on
the declared leaves, where assignments name it; a node's own share of it is not known (Kueue does not track which
node of a domain a pod lands on). Immutable once built; shared by every fork of a cycle's snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events import objects as o
from events.quantity import QuantityError, to_int
from projections.tas_snapshot import fit_in_leaves
from projections.topology_tree import TopologyTree


class NodeLayer:
    """``nodes[k]`` is a node of declared leaf ``leaf[k]``; the nodes of leaf ``i`` are ``start[i]:end[i]``;
    ``free`` one integer column per resource, indexed like ``nodes``."""

    __slots__ = ("nodes", "leaf", "start", "end", "free", "has_taints", "_fits", "_index", "memo")

    def __init__(self, tree: TopologyTree, nodes: Mapping[str, o.Node],
                 node_usage: Mapping[str, Mapping[str, int]]) -> None:
        by_leaf: list[list[str]] = [[] for _ in range(tree.leaf_count)]
        for name in sorted(tree.node_leaf):
            by_leaf[tree.node_leaf[name]].append(name)
        self.nodes: list[o.Node] = []
        self.leaf: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        names: list[str] = []
        for i, members in enumerate(by_leaf):
            self.start.append(len(names))
            names += members
            self.leaf += [i] * len(members)
            self.end.append(len(names))
        self.nodes = [nodes[n] for n in names]
        capacity = [_allocatable(n) for n in self.nodes]
        resources = sorted({r for cap in capacity for r in cap})
        self.free: dict[str, list[int]] = {r: [cap.get(r, 0) for cap in capacity] for r in resources}
        for k, n in enumerate(names):
            for r, v in sorted(node_usage.get(n, {}).items()):
                col = self.free.get(r)
                if col is None:
                    col = self.free[r] = [0] * len(names)
                col[k] -= v
        self.has_taints = any(n.spec.taints for n in self.nodes)
        self._fits: dict[tuple[tuple[str, int], ...], list[int]] = {}
        self._index: dict[str, int] | None = None
        self.memo: dict[Any, Any] = {}
        """Per-request results of the scheduler's node filters (see :mod:`kueue_es.scheduler.tas.pernode`)."""

    def __len__(self) -> int:
        return len(self.nodes)

    def index(self) -> dict[str, int]:
        """Node name -> its index."""
        if self._index is None:
            self._index = {n.metadata.name: k for k, n in enumerate(self.nodes)}
        return self._index

    def pods_fitting(self, per_pod: tuple[tuple[str, int], ...]) -> list[int]:
        """Per node, how many pods of ``per_pod`` its free capacity holds (cached per shape; do not modify)."""
        found = self._fits.get(per_pod)
        if found is None:
            if len(self._fits) > 64:
                self._fits.clear()
            found = self._fits[per_pod] = fit_in_leaves(self.free, len(self.nodes), per_pod)
        return found


def _allocatable(node: o.Node) -> dict[str, int]:
    out: dict[str, int] = {}
    for r, q in node.status.allocatable.items():
        try:
            out[r] = to_int(r, q)
        except QuantityError:
            continue
    return out
