"""Quota over the cohort tree, kept by the projection and borrowed by each scheduling cycle.

Every quantity is per flavor-resource (``FR``, the string ``flavor/resource``), an int in Kueue units; a
missing limit means unlimited. For a node n (a ClusterQueue or a Cohort):

* subtree quota  SQ(n) = own nominal + Σ_children (SQ(c) − G(c))
* guaranteed     G(n)  = max(0, SQ(n) − lendingLimit(n)) when a lending limit is set, else 0
* usage          U(cq) = quota held by its reserving workloads; U(cohort) = Σ_children max(0, U(c) − G(c))
* available      A(root) = SQ − U; A(n) = max(0, G − U) + min(A(parent), borrowing cap)
* potential      P(root) = SQ; P(n) = min(G + P(parent), SQ + borrowingLimit)

The projection builds the tree once per change of the ClusterQueue/Cohort specs and then charges and releases
usage incrementally as reservations come and go (``U(cohort)`` only ever depends on the children's current
usage, so the incremental form equals a fresh build whatever the order of events).

A scheduling cycle assumes admissions and simulates removals on the very same tree inside an *overlay*:
:meth:`QuotaTree.begin` starts it, the first write to a node in the overlay swaps that node's usage map for a
private copy (copy-on-write), and :meth:`QuotaTree.rollback` puts every original map back. A cycle therefore
costs nothing per node it does not touch, and the projection is exactly as it was afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from events import objects as o
from events.quantity import to_int
from projections.cohorts import CohortForest

UNLIMITED = 1 << 62


class QuotaNode:
    __slots__ = ("name", "is_cq", "parent", "children", "nominal", "borrowing_limit", "lending_limit",
                 "subtree", "guaranteed", "usage", "height", "weight", "tree", "epoch", "version")

    def __init__(self, name: str, is_cq: bool, tree: QuotaTree | None = None) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.nominal: dict[str, int] = {}
        self.borrowing_limit: dict[str, int] = {}
        self.lending_limit: dict[str, int] = {}
        self.subtree: dict[str, int] = {}
        self.guaranteed: dict[str, int] = {}
        self.usage: dict[str, int] = {}
        self.height = 0
        self.weight = 1.0
        self.tree = tree
        self.epoch = 0
        """The overlay epoch whose private copy ``usage`` is (see :meth:`QuotaTree.begin`)."""
        self.version = 0
        """Bumped on every write to ``usage``: lets readers cache values derived from it."""

    def __repr__(self) -> str:
        return f"QuotaNode({self.name})"

    # --- reads ----------------------------------------------------------------------------------------------

    def local_available(self, fr: str) -> int:
        return max(0, self.guaranteed.get(fr, 0) - self.usage.get(fr, 0))

    def available(self, fr: str) -> int:
        v = self._avail(fr)
        return v if v > 0 else 0

    def _avail(self, fr: str) -> int:
        p = self.parent
        if p is None:
            return self.subtree.get(fr, 0) - self.usage.get(fr, 0)
        g = self.guaranteed.get(fr, 0) if self.guaranteed else 0
        u = self.usage.get(fr, 0)
        parent_avail = p._avail(fr)
        if self.borrowing_limit:
            bl = self.borrowing_limit.get(fr)
            if bl is not None:
                over = u - g
                cap = self.subtree.get(fr, 0) - g - (over if over > 0 else 0) + bl
                if cap < parent_avail:
                    parent_avail = cap
        local = g - u
        return (local if local > 0 else 0) + parent_avail

    def potential_available(self, fr: str) -> int:
        p = self.parent
        if p is None:
            return self.subtree.get(fr, 0)
        value = self.guaranteed.get(fr, 0) + p.potential_available(fr)
        bl = self.borrowing_limit.get(fr)
        if bl is not None:
            value = min(value, self.subtree.get(fr, 0) + bl)
        return value

    def borrowing(self, fr: str) -> bool:
        return self.usage.get(fr, 0) > self.subtree.get(fr, 0)

    def within_nominal(self, frs: Iterable[str]) -> bool:
        usage, subtree = self.usage, self.subtree
        for fr in frs:
            if usage.get(fr, 0) > subtree.get(fr, 0):
                return False
        return True

    def ancestors(self) -> list[QuotaNode]:
        out, n = [], self.parent
        while n is not None:
            out.append(n)
            n = n.parent
        return out

    def root(self) -> QuotaNode:
        n = self
        while n.parent is not None:
            n = n.parent
        return n

    def path(self) -> list[QuotaNode]:
        """This node and its ancestors, bottom-up."""
        out, n = [], self
        while n is not None:
            out.append(n)
            n = n.parent
        return out

    def delta_above(self, fr: str, delta: int) -> int:
        """How much of ``delta`` more usage of ``fr`` here would reach the parent (the part above guarantees)."""
        g = self.guaranteed.get(fr, 0)
        before = self.usage.get(fr, 0)
        return max(0, before + delta - g) - max(0, before - g)

    def lowest_fitting_height(self, fr: str, val: int) -> tuple[int, bool]:
        """Kueue's borrowing level: height of the lowest subtree that fits ``val`` more (0 = own nominal).

        Also says whether that subtree lies below the root, i.e. reclaiming inside the hierarchy may help.
        """
        if self.usage.get(fr, 0) + val <= self.nominal.get(fr, 0) or self.parent is None:
            return 0, self.parent is not None
        remaining = val - self.local_available(fr)
        n = self.parent
        while n is not None:
            if n.usage.get(fr, 0) + remaining <= n.subtree.get(fr, 0):
                return n.height, n.parent is not None
            remaining -= n.local_available(fr)
            if n.parent is None:
                return n.height, False
            n = n.parent
        return 0, False  # pragma: no cover - loop always returns at the root

    # --- writes ---------------------------------------------------------------------------------------------

    def add_usage(self, fr: str, delta: int) -> None:
        """Charge (or with a negative delta, release) usage and bubble the part above guarantees upward."""
        n: QuotaNode | None = self
        tree = self.tree
        saved = tree.saved if tree is not None else None
        while n is not None and delta:
            usage = n.usage
            if saved is not None and n.epoch != tree.epoch:  # type: ignore[union-attr]
                saved.append((n, usage))
                usage = n.usage = dict(usage)
                n.epoch = tree.epoch  # type: ignore[union-attr]
            before = usage.get(fr, 0)
            after = before + delta
            usage[fr] = after
            n.version += 1
            g = n.guaranteed.get(fr, 0)
            delta = max(0, after - g) - max(0, before - g)
            n = n.parent


class QuotaTree:
    """Every ClusterQueue and Cohort of the projected state as :class:`QuotaNode` s."""

    def __init__(self) -> None:
        self.cluster_queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self.saved: list[tuple[QuotaNode, dict[str, int]]] | None = None
        """While an overlay is open: (node, its usage map before the overlay) for every node written."""
        self.epoch = 0

    def cq(self, name: str) -> QuotaNode | None:
        return self.cluster_queues.get(name)

    def charge(self, cq: str, usage: Mapping[str, int], sign: int = 1) -> None:
        node = self.cluster_queues.get(cq)
        if node is not None:
            for fr, v in usage.items():
                if v:
                    node.add_usage(fr, sign * v)

    # --- the cycle's overlay --------------------------------------------------------------------------------

    def begin(self) -> None:
        """Open a copy-on-write overlay: writes from now on are undone by :meth:`rollback`."""
        if self.saved is not None:
            raise RuntimeError("quota overlay already open")
        self.epoch += 1
        self.saved = []

    def rollback(self) -> None:
        """Close the overlay, restoring every usage map written since :meth:`begin`."""
        saved = self.saved
        self.saved = None
        if saved:
            for node, usage in saved:
                node.usage = usage

    @property
    def in_overlay(self) -> bool:
        return self.saved is not None


def _limits(node: QuotaNode, groups: list[o.ResourceGroup]) -> None:
    for rg in groups:
        for fq in rg.flavors:
            for rq in fq.resources:
                fr = f"{fq.name}/{rq.name}"
                node.nominal[fr] = to_int(rq.name, rq.nominal_quota)
                if rq.borrowing_limit is not None:
                    node.borrowing_limit[fr] = to_int(rq.name, rq.borrowing_limit)
                if rq.lending_limit is not None:
                    node.lending_limit[fr] = to_int(rq.name, rq.lending_limit)


def fair_weight(fs: o.FairSharing | None) -> float:
    """``fairSharing.weight`` as a float (a quantity: "1", "0.5", "500m"); 1 when unset."""
    if fs is None or fs.weight is None:
        return 1.0
    w = fs.weight
    if isinstance(w, int | float):
        return float(w)
    return to_int("cpu", w) / 1000.0


def build_quota_tree(cluster_queues: Mapping[str, o.ClusterQueue], cohorts: Mapping[str, o.Cohort],
                     forest: CohortForest, usage: Mapping[str, Mapping[str, int]]) -> QuotaTree:
    """Quotas from the specs, usage from ``usage``. Cyclic cohort trees are left out (their CQs are inactive)."""
    tree = QuotaTree()
    for name in sorted(cluster_queues):
        if "cq:" + name in forest.cyclic:
            continue
        node = QuotaNode(name, True, tree)
        spec = cluster_queues[name].spec
        _limits(node, spec.resource_groups)
        node.weight = fair_weight(spec.fair_sharing)
        tree.cluster_queues[name] = node
    # every Cohort object is a node, as in Kueue's hierarchy, even one nothing is below or above (its metrics)
    lone = [k for k in ("co:" + n for n in sorted(cohorts)) if k not in forest.parent]
    for key in [*sorted(forest.parent), *lone]:
        if key in forest.cyclic:
            continue
        for k in (key, forest.parent.get(key, key)):
            if k.startswith("co:") and k[3:] not in tree.cohorts:
                node = QuotaNode(k[3:], False, tree)
                cohort = cohorts.get(k[3:])
                if cohort is not None:
                    _limits(node, cohort.spec.resource_groups)
                    node.weight = fair_weight(cohort.spec.fair_sharing)
                tree.cohorts[k[3:]] = node
    for key in sorted(forest.parent):
        if key in forest.cyclic:
            continue
        child = tree.cluster_queues.get(key[3:]) if key.startswith("cq:") else tree.cohorts.get(key[3:])
        parent = tree.cohorts.get(forest.parent[key][3:])
        if child is None or parent is None:
            continue
        child.parent = parent
        parent.children.append(child)
    roots = [n for n in tree.cohorts.values() if n.parent is None]
    roots += [n for n in tree.cluster_queues.values() if n.parent is None]
    for root in roots:
        _aggregate(root)
    for name, node in tree.cluster_queues.items():
        for fr, v in sorted(usage.get(name, {}).items()):
            if v:
                node.add_usage(fr, v)
    return tree


def _aggregate(node: QuotaNode) -> None:
    """Bottom-up: subtree quota, guarantees and heights."""
    subtree = dict(node.nominal)
    height = 0
    for child in node.children:
        _aggregate(child)
        height = max(height, child.height)
        for fr, sq in child.subtree.items():
            subtree[fr] = subtree.get(fr, 0) + sq - child.guaranteed.get(fr, 0)
    node.subtree = subtree
    node.height = 0 if node.is_cq else height + 1
    if node.parent is not None or not node.is_cq:
        node.guaranteed = {fr: max(0, sq - node.lending_limit[fr]) for fr, sq in subtree.items()
                           if fr in node.lending_limit}
