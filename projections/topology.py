"""Topology-aware scheduling: the capacity of each TAS flavor's topology domains, derived from the fold.

Two parts:

* :class:`TASFold` is kept by :class:`~projections.cluster.ClusterState` as events are applied: the TAS usage of
  workloads holding quota (charged and released together with quota), the usage of bound pods Kueue does not
  place (non-TAS pods), and generation counters saying when nodes, pods or usage changed. It is derived data: a
  state snapshot leaves it out and a restore rebuilds it from the workloads and pods.
* :func:`tas_snapshots` turns the state into one :class:`FlavorSnapshot` per TAS flavor (a ResourceFlavor with a
  ``topologyName`` whose Topology exists): the domain tree of the flavor's nodes (:class:`TopologyTree`), the
  free capacity of every leaf and what TAS workloads use of it. What is expensive is memoised on the generation
  counters, so a cycle after an unrelated event costs a copy of a few integer columns.

Kueue's rules (``pkg/cache/scheduler/tas_*.go``): a node belongs to a flavor iff it carries every ``nodeLabels``
pair and every level label; only schedulable, Ready nodes count; a leaf is the set of nodes with equal level
values (the hostname alone when the lowest level is ``kubernetes.io/hostname``); static capacity is the sum of
``status.allocatable``; bound, non-terminal pods without TAS annotations use capacity (their requests plus one
``pods``); workloads with a ``topologyAssignment`` use, per domain, single-pod requests x count plus count pods,
and for flavors whose lowest level is the hostname that usage is summed across all such flavors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from events import objects as o
from events import tas_assignment
from events.errors import InvalidInput
from events.quantity import QuantityError, to_int
from projections.workloads import WorkloadInfo, pod_requests

if TYPE_CHECKING:
    from projections.cluster import ClusterState

HOSTNAME = "kubernetes.io/hostname"
PODS = "pods"

TAS_POD_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)
"""A pod carrying any of these is placed by Kueue; its usage comes from its workload's assignment instead."""

Usage = dict[str, int]
"""Resource name -> amount in Kueue units (cpu in milli)."""


# --- the fold -----------------------------------------------------------------------------------------------------


class TASFold:
    """What :class:`ClusterState` keeps current, event by event, for topology-aware scheduling."""

    __slots__ = ("usage", "charged", "pod_usage", "node_usage", "nodes_generation", "pods_generation",
                 "usage_generation")

    def __init__(self) -> None:
        self.usage: dict[str, dict[str, Usage]] = {}
        """Flavor -> domain id -> TAS usage of workloads holding quota."""
        self.charged: dict[str, tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...]] = {}
        """Workload key -> exactly what was charged for it (flavor, domain id, usage), so releasing undoes it."""
        self.pod_usage: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}
        """Pod key -> (node, usage) of each bound, running non-TAS pod."""
        self.node_usage: dict[str, Usage] = {}
        """Node name -> summed non-TAS pod usage."""
        self.nodes_generation = 0
        """Bumped when a Node, Topology or ResourceFlavor changes (the domain trees depend on them)."""
        self.pods_generation = 0
        """Bumped when the non-TAS usage of some node changes."""
        self.usage_generation = 0
        """Bumped when TAS usage is charged or released."""

    @property
    def generation(self) -> tuple[int, int, int]:
        return self.nodes_generation, self.pods_generation, self.usage_generation

    # workloads

    def charge(self, wl: WorkloadInfo) -> None:
        """Charge the TAS usage of ``wl``'s admission (replacing whatever was charged for it before)."""
        self.release(wl.key)
        entries = workload_tas_usage(wl)
        if not entries:
            return
        self.charged[wl.key] = entries
        self._apply(entries, 1)

    def release(self, key: str) -> None:
        entries = self.charged.pop(key, None)
        if entries:
            self._apply(entries, -1)

    def _apply(self, entries: Iterable[tuple[str, str, tuple[tuple[str, int], ...]]], sign: int) -> None:
        for flavor, domain, amounts in entries:
            per_domain = self.usage.setdefault(flavor, {})
            u = per_domain.setdefault(domain, {})
            for r, v in amounts:
                nv = u.get(r, 0) + sign * v
                if nv:
                    u[r] = nv
                else:
                    u.pop(r, None)
            if not u:
                del per_domain[domain]
                if not per_domain:
                    del self.usage[flavor]
        self.usage_generation += 1

    # pods and nodes

    def pod_changed(self, key: str, pod: o.Pod | None) -> None:
        """Keep the non-TAS usage of pod ``key`` current (``pod`` None when it was deleted)."""
        new = _non_tas_usage(pod) if pod is not None else None
        old = self.pod_usage.get(key)
        if new == old:
            return
        if old is not None:
            self._node_add(old[0], old[1], -1)
            del self.pod_usage[key]
        if new is not None:
            self._node_add(new[0], new[1], 1)
            self.pod_usage[key] = new
        self.pods_generation += 1

    def _node_add(self, node: str, amounts: tuple[tuple[str, int], ...], sign: int) -> None:
        u = self.node_usage.setdefault(node, {})
        for r, v in amounts:
            nv = u.get(r, 0) + sign * v
            if nv:
                u[r] = nv
            else:
                u.pop(r, None)
        if not u:
            del self.node_usage[node]

    def nodes_changed(self) -> None:
        self.nodes_generation += 1


def workload_tas_usage(wl: WorkloadInfo) -> tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...]:
    """(flavor, domain id, usage) for every domain of every pod-set assignment of ``wl`` with a topology."""
    adm = wl.admission
    if adm is None:
        return ()
    out: list[tuple[str, str, tuple[tuple[str, int], ...]]] = []
    for psa in adm.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None:
            continue
        try:
            domains = tas_assignment.decode(ta)
        except InvalidInput:
            continue  # a malformed assignment in the log places nothing; it cannot be refused any more
        per_pod = _single_pod_requests(wl, psa)
        for flavor in sorted(set(psa.flavors.values())):
            for d in domains:
                amounts = dict((r, v * d.count) for r, v in per_pod)
                amounts[PODS] = amounts.get(PODS, 0) + d.count
                out.append((flavor, domain_id(d.values), tuple(sorted(amounts.items()))))
    return tuple(out)


def _single_pod_requests(wl: WorkloadInfo, psa: o.PodSetAssignment) -> tuple[tuple[str, int], ...]:
    """Kueue takes a pod's requests from the pod-set template; lacking the pod set, resourceUsage / count."""
    for ps in wl.pod_sets:
        if ps.name == psa.name:
            return ps.requests
    count = psa.count or 1
    try:
        return tuple(sorted((r, to_int(r, q) // count) for r, q in psa.resource_usage.items()))
    except QuantityError:
        return ()


def _non_tas_usage(pod: o.Pod) -> tuple[str, tuple[tuple[str, int], ...]] | None:
    if not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
        return None
    annotations = pod.metadata.annotations
    if annotations and any(k in annotations for k in TAS_POD_ANNOTATIONS):
        return None
    try:
        amounts = pod_requests(pod.spec)
    except QuantityError:
        amounts = {}
    amounts[PODS] = amounts.get(PODS, 0) + 1
    return pod.spec.node_name, tuple(sorted(amounts.items()))


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
                 "leaf_node", "node_leaf", "capacity", "has_taints", "_masks")

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


class FlavorSnapshot:
    """One TAS flavor's topology with its capacity: free (allocatable minus non-TAS pods) and remaining (free
    minus TAS usage) per leaf, as one integer column per resource. ``fork`` gives a copy a scheduling cycle may
    charge; the tree and the free columns are shared read-only.

    How many pods of one shape fit in every leaf is what each placement starts from; it is cached per shape and,
    after a charge, recomputed only for the leaves charged (see :meth:`pods_fitting`)."""

    __slots__ = ("flavor", "topology", "tree", "tolerations", "free", "remaining", "_dirty", "_fits", "_shared_fits")

    def __init__(self, flavor: str, topology: str, tree: TopologyTree, tolerations: tuple[o.Toleration, ...],
                 free: dict[str, list[int]], remaining: dict[str, list[int]],
                 shared_fits: dict[tuple[Any, ...], list[int]] | None = None) -> None:
        self.flavor = flavor
        self.topology = topology
        self.tree = tree
        self.tolerations = tolerations
        self.free = free
        self.remaining = remaining
        self._dirty: list[int] = []
        """Leaves charged since this snapshot was made, in order (a log the fit caches catch up with)."""
        self._fits: dict[tuple[Any, ...], list[Any]] = {}
        """Shape -> [position in the dirty log, pods fitting per leaf]."""
        self._shared_fits = shared_fits if shared_fits is not None else {}
        """Shape -> pods fitting per leaf in the uncharged columns, shared by every fork of one state."""

    def fork(self) -> FlavorSnapshot:
        return FlavorSnapshot(self.flavor, self.topology, self.tree, self.tolerations, self.free,
                              {r: list(col) for r, col in self.remaining.items()},
                              self._shared_fits if not self._dirty else None)

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

    :meth:`charge` keeps flavors consistent: usage on a flavor whose lowest level is the hostname is usage on
    every such flavor (Kueue's TASHandleOverlappingFlavors)."""

    def __init__(self, flavors: dict[str, FlavorSnapshot]) -> None:
        self._flavors = flavors

    def __getitem__(self, flavor: str) -> FlavorSnapshot:
        return self._flavors[flavor]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._flavors))

    def __len__(self) -> int:
        return len(self._flavors)

    def fork(self) -> TASSnapshots:
        return TASSnapshots({f: s.fork() for f, s in self._flavors.items()})

    def charge(self, flavor: str, domains: Sequence[tuple[Sequence[str], int]], per_pod: Mapping[str, int],
               sign: int = 1) -> None:
        snap = self._flavors.get(flavor)
        if snap is None:
            return
        snap.charge(domains, per_pod, sign)
        if snap.tree.hostname_lowest:
            for name in sorted(self._flavors):
                other = self._flavors[name]
                if name != flavor and other.tree.hostname_lowest:
                    other.charge(domains, per_pod, sign)


def tas_snapshots(state: ClusterState) -> TASSnapshots:
    """A fresh (forked) set of TAS flavor snapshots of ``state``; the expensive parts are memoised."""
    fold = state.tas
    memo = state.derived.get("tas")
    if memo is None or memo[0] != fold.generation:
        trees_memo = state.derived.get("tas-trees")
        if trees_memo is None or trees_memo[0] != fold.nodes_generation:
            trees_memo = state.derived["tas-trees"] = (fold.nodes_generation, _trees(state))
        trees: dict[str, tuple[str, TopologyTree]] = trees_memo[1]
        free_memo = state.derived.get("tas-free")
        if free_memo is None or free_memo[0] != fold.generation[:2]:
            free_memo = state.derived["tas-free"] = (
                fold.generation[:2], {f: _free_columns(t, fold.node_usage) for f, (_, t) in trees.items()})
        free: dict[str, dict[str, list[int]]] = free_memo[1]
        hostname_usage = _hostname_usage(fold, trees)
        flavors: dict[str, FlavorSnapshot] = {}
        for name in sorted(trees):
            topology, tree = trees[name]
            spec = state.flavors[name].spec
            usage = hostname_usage if tree.hostname_lowest else fold.usage.get(name, {})
            flavors[name] = FlavorSnapshot(name, topology, tree, tuple(spec.tolerations), free[name],
                                           _remaining(tree, free[name], usage))
        memo = state.derived["tas"] = (fold.generation, TASSnapshots(flavors))
    return memo[1].fork()


def _trees(state: ClusterState) -> dict[str, tuple[str, TopologyTree]]:
    usable = [n for _, n in sorted(state.nodes.items()) if node_is_usable(n)]
    out: dict[str, tuple[str, TopologyTree]] = {}
    by_shape: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], TopologyTree] = {}
    for name in sorted(state.flavors):
        spec = state.flavors[name].spec
        if not spec.topology_name:
            continue
        topo = state.topologies.get(spec.topology_name)
        if topo is None or not topo.spec.levels:
            continue
        levels = tuple(lv.node_label for lv in topo.spec.levels)
        shape = (levels, tuple(sorted(spec.node_labels.items())))
        tree = by_shape.get(shape)
        if tree is None:
            tree = by_shape[shape] = TopologyTree(
                levels, (n for n in usable if node_matches_flavor(n, spec.node_labels, levels)))
        out[name] = (spec.topology_name, tree)
    return out


def _free_columns(tree: TopologyTree, node_usage: Mapping[str, Usage]) -> dict[str, list[int]]:
    n = tree.leaf_count
    names = sorted({r for cap in tree.capacity for r in cap})
    cols = {r: [cap.get(r, 0) for cap in tree.capacity] for r in names}
    for node in sorted(node_usage):
        leaf = tree.node_leaf.get(node)
        if leaf is None:
            continue
        for r, v in node_usage[node].items():
            col = cols.get(r)
            if col is None:
                col = cols[r] = [0] * n
            col[leaf] -= v
    return cols


def _hostname_usage(fold: TASFold, trees: Mapping[str, tuple[str, TopologyTree]]) -> dict[str, Usage]:
    """TAS usage summed over every TAS flavor whose lowest level is the hostname."""
    total: dict[str, Usage] = {}
    for name in sorted(trees):
        if not trees[name][1].hostname_lowest:
            continue
        for did, u in fold.usage.get(name, {}).items():
            t = total.setdefault(did, {})
            for r, v in u.items():
                t[r] = t.get(r, 0) + v
    return total


def _remaining(tree: TopologyTree, free: dict[str, list[int]], usage: Mapping[str, Usage]) -> dict[str, list[int]]:
    rem = {r: list(col) for r, col in free.items()}
    leaves = tree.index[-1] if tree.levels else {}
    n = tree.leaf_count
    for did in sorted(usage):
        i = leaves.get(did)
        if i is None:
            continue  # usage on a domain no current node backs (deleted, NotReady) is ignored
        for r, v in usage[did].items():
            col = rem.get(r)
            if col is None:
                col = rem[r] = [0] * n
            col[i] -= v
    return rem
