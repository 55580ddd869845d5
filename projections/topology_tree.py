"""The static domains of a TAS flavor's topology, built from its nodes (Kueue's ``tas_topology_tree.go``).

A node belongs to a flavor iff it carries every ``nodeLabels`` pair and every level label; only schedulable, Ready
nodes count (but for a topology whose lowest level is the hostname under SchedulerLibraryIntegration, which keeps
every node for the scheduler's filters: :func:`projections.topology.tas_snapshots`); a leaf is the set of nodes with equal level values (the hostname alone when the lowest level is
``kubernetes.io/hostname``) and parents are the distinct prefixes of the level values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from events import objects as o
from events.quantity import QuantityError, to_int

HOSTNAME = "kubernetes.io/hostname"


def domain_id(values: Sequence[str]) -> str:
    """Kueue's domain id: the level values joined with ``,`` (just the hostname for hostname leaves)."""
    return ",".join(values)


# --- the domain tree ----------------------------------------------------------------------------------------------


def node_is_usable(node: o.Node) -> bool:
    """Kueue's node cache keeps only schedulable nodes whose Ready condition is True."""
    if node.spec.unschedulable:
        return False
    for c in node.status.conditions:
        if c.type == "Ready":
            return c.status == "True"
    return False


def node_matches_flavor(node: o.Node, node_labels: Mapping[str, str], levels: Sequence[str]) -> bool:
    labels = node.metadata.labels
    for k, v in node_labels.items():
        if labels.get(k) != v:
            return False
    return all(k in labels for k in levels)


class TopologyTree:
    """The static domains of one TAS flavor: levels, the domains at each level in level-value order, parent and
    child links, the node of each hostname leaf and each leaf's allocatable capacity. Immutable once built;
    shared by every snapshot until a node, the topology or the flavor changes."""

    __slots__ = ("levels", "hostname_lowest", "values", "ids", "index", "parent", "child_start", "child_end",
                 "leaf_node", "node_leaf", "capacity", "has_taints", "has_cordoned", "_masks")

    def __init__(self, levels: Sequence[str], nodes: Iterable[o.Node]) -> None:
        self.levels: tuple[str, ...] = tuple(levels)
        depth = len(self.levels)
        self.hostname_lowest = depth > 0 and self.levels[-1] == HOSTNAME
        leaves: dict[str, tuple[tuple[str, ...], o.Node, dict[str, int]]] = {}
        node_leaf_id: dict[str, str] = {}
        for node in sorted(nodes, key=lambda n: n.metadata.name):
            labels = node.metadata.labels
            values = tuple(labels[k] for k in self.levels)
            lid = values[-1] if self.hostname_lowest else domain_id(values)
            found = leaves.get(lid)
            if found is None:
                found = leaves[lid] = (values, node, {})
            cap = found[2]
            for r, q in node.status.allocatable.items():
                try:
                    cap[r] = cap.get(r, 0) + to_int(r, q)
                except QuantityError:
                    continue
            node_leaf_id[node.metadata.name] = lid
        ordered = sorted(leaves.items(), key=lambda kv: kv[1][0])
        self.values: list[list[tuple[str, ...]]] = [[] for _ in range(depth)]
        self.ids: list[list[str]] = [[] for _ in range(depth)]
        self.parent: list[list[int]] = [[] for _ in range(depth)]
        self.child_start: list[list[int]] = [[] for _ in range(depth)]
        self.child_end: list[list[int]] = [[] for _ in range(depth)]
        if depth:
            self.values[-1] = [v for _, (v, _, _) in ordered]
            self.ids[-1] = [lid for lid, _ in ordered]
        # parents: distinct prefixes, in order (leaves are sorted, so each parent's children are contiguous)
        for lvl in range(depth - 2, -1, -1):
            vals, parents, starts, ends = self.values[lvl], self.parent[lvl + 1], self.child_start[lvl], self.child_end[lvl]
            prev: tuple[str, ...] | None = None
            for i, child in enumerate(self.values[lvl + 1]):
                prefix = child[: lvl + 1]
                if prefix != prev:
                    if prev is not None:
                        ends.append(i)
                    vals.append(prefix)
                    starts.append(i)
                    prev = prefix
                parents.append(len(vals) - 1)
            if prev is not None:
                ends.append(len(self.values[lvl + 1]))
            self.ids[lvl] = [domain_id(v) for v in vals]
        self.index: list[dict[str, int]] = [{d: i for i, d in enumerate(ids)} for ids in self.ids]
        self.leaf_node: list[o.Node] = [n for _, (_, n, _) in ordered]
        self.capacity: list[dict[str, int]] = [c for _, (_, _, c) in ordered]
        leaf_pos = self.index[-1] if depth else {}
        self.node_leaf: dict[str, int] = {name: leaf_pos[lid] for name, lid in node_leaf_id.items()}
        self.has_taints = self.hostname_lowest and any(n.spec.taints for n in self.leaf_node)
        self.has_cordoned = self.hostname_lowest and any(n.spec.unschedulable for n in self.leaf_node)
        """Some leaf is a cordoned node (only under SchedulerLibraryIntegration, which keeps them)."""
        self._masks: dict[bytes, Any] = {}
        """Per-node filter results, by the request's selector/tolerations/affinity (see scheduler.tas.nodes)."""

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def leaf_count(self) -> int:
        return len(self.ids[-1]) if self.levels else 0

    def domain_index(self, values: Sequence[str]) -> tuple[int, int] | None:
        """(level, index) of the domain an assignment names by ``values`` (full values, or the hostname alone)."""
        if not self.levels:
            return None
        if self.hostname_lowest and len(values) == 1:
            i = self.index[-1].get(values[0])
            return None if i is None else (self.depth - 1, i)
        lvl = len(values) - 1
        if lvl >= self.depth or lvl < 0:
            return None
        i = self.index[lvl].get(domain_id(values))
        return None if i is None else (lvl, i)

    def prefix_index(self, values: Sequence[str]) -> tuple[int, int] | None:
        """(level, index) of the domain whose full level values are ``values`` (a prefix of a leaf's values)."""
        lvl = len(values) - 1
        if lvl < 0 or lvl >= self.depth:
            return None
        did = values[-1] if self.hostname_lowest and lvl == self.depth - 1 else domain_id(values)
        i = self.index[lvl].get(did)
        return None if i is None or self.values[lvl][i] != tuple(values) else (lvl, i)

    def has_domain(self, did: str) -> bool:
        return any(did in ix for ix in self.index)

    def ancestor(self, level: int, leaf: int, up_to: int) -> int:
        """Index of the domain at level ``up_to`` above the domain ``leaf`` at ``level``."""
        i = leaf
        for lvl in range(level, up_to, -1):
            i = self.parent[lvl][i]
        return i


# --- snapshots ----------------------------------------------------------------------------------------------------
