"""The cohort forest: ClusterQueues as leaves, Cohort objects (explicit or implied by a name) as inner nodes.

A Cohort named by a ClusterQueue or as a parent but never created exists implicitly with no quota. A cycle in
parent links disables every ClusterQueue of that tree, as in Kueue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events import objects as o


@dataclass
class CohortForest:
    parent: dict[str, str] = field(default_factory=dict)
    """Node -> parent cohort. Nodes are ``cq:NAME`` and ``co:NAME``."""
    children: dict[str, list[str]] = field(default_factory=dict)
    root: dict[str, str] = field(default_factory=dict)
    """Node -> its root node (itself when it has no parent)."""
    cyclic: set[str] = field(default_factory=set)
    """Nodes whose parent chain loops."""
    members: dict[str, list[str]] = field(default_factory=dict)
    """Root -> the ClusterQueue names of its tree, sorted."""
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)
    """ClusterQueue name -> :meth:`cohort_path`, as asked."""

    def cq_root(self, cq: str) -> str:
        return self.root.get("cq:" + cq, "cq:" + cq)

    def tree_cluster_queues(self, cq: str) -> list[str]:
        return self.members.get(self.cq_root(cq), [cq])

    @property
    def cohort_names(self) -> frozenset[str]:
        """Every cohort of the forest: a Cohort object, or a name a ClusterQueue or a Cohort refers to."""
        return frozenset(n[3:] for n in self.root if n.startswith("co:"))

    def cohort_path(self, cq: str) -> tuple[str, ...]:
        """The names of the cohorts above ClusterQueue ``cq``, its own first and the root last; none without a
        cohort, or when its cohort's parent links loop (Kueue then finds no ancestors for its workloads)."""
        found = self.paths.get(cq)
        if found is None:
            node = "cq:" + cq
            parent = self.parent.get(node)
            found = () if parent is None or node in self.cyclic else (
                parent[3:], *(n[3:] for n in self.ancestors(parent)))
            self.paths[cq] = found
        return found

    def ancestors(self, node: str) -> list[str]:
        out = []
        seen = {node}
        n = self.parent.get(node)
        while n is not None and n not in seen:
            out.append(n)
            seen.add(n)
            n = self.parent.get(n)
        return out

    def depth_below(self, node: str) -> int:
        """Height of ``node``: 0 for a ClusterQueue, 1 + tallest child for a cohort."""
        kids = self.children.get(node, [])
        if not kids:
            return 0 if node.startswith("cq:") else 1
        return 1 + max(self.depth_below(k) for k in kids)


def build_forest(cluster_queues: dict[str, o.ClusterQueue], cohorts: dict[str, o.Cohort]) -> CohortForest:
    f = CohortForest()
    for name in sorted(cohorts):
        parent = cohorts[name].spec.parent_name
        if parent:
            f.parent["co:" + name] = "co:" + parent
    for name in sorted(cluster_queues):
        cohort = cluster_queues[name].spec.cohort_name
        if cohort:
            f.parent["cq:" + name] = "co:" + cohort
    nodes = set(f.parent) | set(f.parent.values()) | {"cq:" + n for n in cluster_queues}
    nodes |= {"co:" + n for n in cohorts}
    for child in sorted(f.parent):
        f.children.setdefault(f.parent[child], []).append(child)
    for node in sorted(nodes):
        seen = [node]
        n = node
        while n in f.parent:
            n = f.parent[n]
            if n in seen:
                f.cyclic.update(seen[seen.index(n):])
                f.cyclic.add(node)
                break
            seen.append(n)
        f.root[node] = n
    for node in sorted(nodes):
        if node.startswith("cq:"):
            f.members.setdefault(f.root[node], []).append(node[3:])
    return f


def spec_root(cluster_queues: dict[str, o.ClusterQueue], cohorts: dict[str, o.Cohort], cq: str) -> str:
    """``build_forest(cluster_queues, cohorts).cq_root(cq)`` without building the forest: the same walk up
    the spec links from ``cq:NAME``, ending at a node without a parent or, when the links loop, at the first
    node met twice (the key the forest gives). For a caller that only needs one root while the forest is not
    built."""
    spec = cluster_queues.get(cq)
    node = "cq:" + cq
    if spec is None or not spec.spec.cohort_name:
        return node
    seen = {node}
    node = "co:" + spec.spec.cohort_name
    while node not in seen:
        seen.add(node)
        found = cohorts.get(node[3:])
        parent = found.spec.parent_name if found is not None else ""
        if not parent:
            return node
        node = "co:" + parent
    return node
