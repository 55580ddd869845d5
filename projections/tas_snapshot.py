"""One TAS flavor's capacity per leaf domain for a scheduling cycle, and how many pods of a shape fit in it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from events import objects as o
from projections.topology_tree import TopologyTree

PODS = "pods"


class FlavorSnapshot:
    """One TAS flavor's topology with its capacity: free (allocatable minus non-TAS pods) and remaining (free
    minus TAS usage) per leaf, as one integer column per resource. ``fork`` gives a copy a scheduling cycle may
    charge; the tree and the free columns are shared read-only.

    How many pods of one shape fit in every leaf is what each placement starts from; it is cached per shape and,
    after a charge, recomputed only for the leaves charged (see :meth:`pods_fitting`)."""

    __slots__ = ("flavor", "topology", "tree", "tolerations", "free", "remaining", "_layers", "_dirty", "_fits",
                 "_shared_fits")

    def __init__(self, flavor: str, topology: str, tree: TopologyTree, tolerations: tuple[o.Toleration, ...],
                 free: dict[str, list[int]], remaining: dict[str, list[int]],
                 shared_fits: dict[tuple[Any, ...], list[int]] | None = None, layers: Any = None) -> None:
        self.flavor = flavor
        self.topology = topology
        self.tree = tree
        self.tolerations = tolerations
        self.free = free
        self.remaining = remaining
        self._layers = layers
        """Where :attr:`nodes` comes from (:class:`projections.topology.NodeLayers`), or None."""
        self._dirty: list[int] = []
        """Leaves charged since this snapshot was made, in order (a log the fit caches catch up with)."""
        self._fits: dict[tuple[Any, ...], list[Any]] = {}
        """Shape -> [position in the dirty log, pods fitting per leaf]."""
        self._shared_fits = shared_fits if shared_fits is not None else {}
        """Shape -> pods fitting per leaf in the uncharged columns, shared by every fork of one state."""

    def fork(self) -> FlavorSnapshot:
        return FlavorSnapshot(self.flavor, self.topology, self.tree, self.tolerations, self.free,
                              {r: list(col) for r, col in self.remaining.items()},
                              self._shared_fits if not self._dirty else None, self._layers)

    @property
    def nodes(self) -> Any:
        """The nodes under each leaf (a :class:`projections.tas_node_layer.NodeLayer`) when the lowest level is
        not the hostname, else None; built on first read (only TASNodeFeasibilityForAllLevels reads it)."""
        layers = self._layers
        return layers.of(self.tree) if layers is not None else None

    def charge(self, domains: Iterable[tuple[Sequence[str], int]], per_pod: Mapping[str, int], sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (-1) the usage of ``count`` pods of ``per_pod`` requests (plus one ``pods``
        each) on each domain named by its values; domains not in this topology are ignored, as in Kueue."""
        tree = self.tree
        for values, count in domains:
            at = tree.domain_index(values)
            if at is None or at[0] != tree.depth - 1:
                continue
            self._charge_leaf(at[1], per_pod, count, sign)

    def charge_leaf_usage(self, leaf: int, usage: Mapping[str, int], sign: int = 1) -> None:
        for r, v in usage.items():
            self._column(r)[leaf] -= sign * v
        self._dirty.append(leaf)

    def _charge_leaf(self, leaf: int, per_pod: Mapping[str, int], count: int, sign: int) -> None:
        for r, v in per_pod.items():
            if v:
                self._column(r)[leaf] -= sign * v * count
        self._column(PODS)[leaf] -= sign * count
        self._dirty.append(leaf)

    def _column(self, r: str) -> list[int]:
        col = self.remaining.get(r)
        if col is None:
            col = self.remaining[r] = [0] * self.tree.leaf_count
        return col

    def pods_fitting(self, per_pod: tuple[tuple[str, int], ...], simulate_empty: bool = False) -> list[int]:
        """Per leaf, how many pods requesting ``per_pod`` (sorted (resource, amount) pairs) fit: the minimum over
        resources of remaining // request, a zero request being unlimited, never below 0 nor above 2^31-1 (as
        Kueue counts in int32). ``simulate_empty`` counts in the free columns (no TAS usage). The list is the
        cache's: do not modify it."""
        columns = self.free if simulate_empty else self.remaining
        key = (per_pod, simulate_empty)
        entry = self._fits.get(key)
        if entry is not None:
            if not simulate_empty and entry[0] < len(self._dirty):
                counts = entry[1]
                for i in set(self._dirty[entry[0]:]):
                    counts[i] = fit_in_leaf(columns, i, per_pod)
                entry[0] = len(self._dirty)
            return entry[1]
        shared = self._shared_fits.get(key)
        if shared is not None:
            counts = list(shared)
            if not simulate_empty:
                for i in set(self._dirty):
                    counts[i] = fit_in_leaf(columns, i, per_pod)
        else:
            counts = fit_in_leaves(columns, self.tree.leaf_count, per_pod)
            if simulate_empty or not self._dirty:
                if len(self._shared_fits) > 64:
                    self._shared_fits.clear()
                self._shared_fits[key] = list(counts)
        if len(self._fits) > 64:
            self._fits.clear()
        self._fits[key] = [len(self._dirty), counts]
        return counts

    def leaf_remaining(self, leaf_id: str) -> dict[str, int]:
        """Remaining capacity of one leaf (for explanations and tests)."""
        i = self.tree.index[-1][leaf_id]
        return {r: col[i] for r, col in sorted(self.remaining.items()) if col[i]}

    def tas_usage(self) -> dict[str, dict[str, int]]:
        """Leaf id -> TAS usage (free - remaining), non-zero entries only."""
        out: dict[str, dict[str, int]] = {}
        n = self.tree.leaf_count
        for r in sorted(set(self.free) | set(self.remaining)):
            free = self.free.get(r) or [0] * n
            rem = self.remaining.get(r) or [0] * n
            for i in range(n):
                used = free[i] - rem[i]
                if used:
                    out.setdefault(self.tree.ids[-1][i], {})[r] = used
        return out

    def fits(self, domains: Iterable[tuple[Sequence[str], int]], per_pod: Mapping[str, int]) -> bool:
        """Kueue's ``TASFlavorSnapshot.Fits``: every domain is a current leaf with room for its pods."""
        tree = self.tree
        shape = tuple(sorted(per_pod.items()))
        for values, count in domains:
            at = tree.domain_index(values)
            if at is None or at[0] != tree.depth - 1:
                return False
            if fit_in_leaf(self.remaining, at[1], shape) < count:
                return False
        return True


MAX_INT32 = 2**31 - 1


def fit_in_leaves(columns: Mapping[str, list[int]], n: int, per_pod: Sequence[tuple[str, int]]) -> list[int]:
    """:meth:`FlavorSnapshot.pods_fitting` for every leaf, one pass per requested resource."""
    counts: list[int] | None = None
    for r, q in per_pod:
        if q <= 0:
            continue
        col = columns.get(r)
        if col is None:
            return [0] * n
        c = [x // q for x in col]
        counts = c if counts is None else list(map(min, counts, c))
    if counts is None:
        return [MAX_INT32] * n
    return [0 if x < 0 else (x if x < MAX_INT32 else MAX_INT32) for x in counts]


def fit_in_leaf(columns: Mapping[str, list[int]], i: int, per_pod: Sequence[tuple[str, int]],
                minus: Mapping[str, int] | None = None) -> int:
    """Pods of ``per_pod`` fitting in leaf ``i`` (less ``minus``, usage assumed on top of the columns)."""
    best = MAX_INT32
    for r, q in per_pod:
        if q <= 0:
            continue
        col = columns.get(r)
        rem = (col[i] if col is not None else 0) - (minus.get(r, 0) if minus else 0)
        best = min(best, max(0, rem // q))
    return best


class TASSnapshots(Mapping[str, FlavorSnapshot]):
    """The TAS flavor snapshots of one scheduling cycle, keyed by flavor name.

    Under Kueue's TASHandleOverlappingFlavors (``overlapping_flavors``, on by default) :meth:`charge` keeps
    flavors consistent: usage on a flavor whose lowest level is the hostname is usage on every such flavor, since
    their nodes may be the same. Off, each flavor is charged alone, and two flavors over one node can both fill
    it."""

    def __init__(self, flavors: dict[str, FlavorSnapshot], overlapping_flavors: bool = True) -> None:
        self._flavors = flavors
        self.overlapping_flavors = overlapping_flavors

    def __getitem__(self, flavor: str) -> FlavorSnapshot:
        return self._flavors[flavor]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._flavors))

    def __len__(self) -> int:
        return len(self._flavors)

    def fork(self) -> TASSnapshots:
        return TASSnapshots({f: s.fork() for f, s in self._flavors.items()}, self.overlapping_flavors)

    def _sharing(self, flavor: str) -> list[FlavorSnapshot]:
        """The snapshots usage on ``flavor`` is charged to: itself, then (overlapping flavors) every other
        flavor whose lowest level is the hostname, in name order."""
        snap = self._flavors[flavor]
        if not (self.overlapping_flavors and snap.tree.hostname_lowest):
            return [snap]
        return [snap] + [self._flavors[n] for n in sorted(self._flavors)
                         if n != flavor and self._flavors[n].tree.hostname_lowest]

    def charge(self, flavor: str, domains: Sequence[tuple[Sequence[str], int]], per_pod: Mapping[str, int],
               sign: int = 1) -> None:
        if flavor not in self._flavors:
            return
        for snap in self._sharing(flavor):
            snap.charge(domains, per_pod, sign)

    def charge_usage(self, usage: Iterable[tuple[str, str, tuple[tuple[str, int], ...]]], sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (-1) usage in the fold's form, (flavor, leaf domain id, amounts) — e.g. an
        admitted workload's — with the same sharing between hostname-level flavors as :meth:`charge`."""
        for flavor, did, amounts in usage:
            if flavor not in self._flavors:
                continue
            for other in self._sharing(flavor):
                leaf = other.tree.index[-1].get(did) if other.tree.levels else None
                if leaf is not None:
                    other.charge_leaf_usage(leaf, dict(amounts), sign)
