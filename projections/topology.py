"""Topology-aware scheduling: the capacity of each TAS flavor's topology domains, derived from the fold.

* :class:`TASFold` is kept by :class:`~projections.cluster.ClusterState` as events are applied: the TAS usage of
  workloads holding quota (charged and released together with quota), the usage of bound pods Kueue does not
  place (non-TAS pods), and generation counters saying when nodes, pods or usage changed. It is derived data: a
  state snapshot leaves it out and a restore rebuilds it from the workloads and pods.
* :func:`tas_snapshots` turns the state into one :class:`~projections.tas_snapshot.FlavorSnapshot` per TAS flavor
  (a ResourceFlavor with a ``topologyName`` whose Topology exists): the domain tree of the flavor's nodes
  (:mod:`projections.topology_tree`), the free capacity of every leaf and what TAS workloads use of it. What is
  expensive is memoised on the generation counters, so a cycle after an unrelated event costs a copy of a few
  integer columns.

Kueue's rules (``pkg/cache/scheduler/tas_*.go``): static capacity is the sum of ``status.allocatable``; bound,
non-terminal pods without TAS annotations use capacity (their requests plus one ``pods``); workloads with a
``topologyAssignment`` use, per domain, single-pod requests x count plus count pods, and for flavors whose lowest
level is the hostname that usage is summed across all such flavors — under TASHandleOverlappingFlavors (on by
default); off, each flavor counts only the usage charged to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from events import objects as o
from events import tas_assignment
from events.errors import InvalidInput
from events.quantity import MAX_INT64, QuantityError, to_int
from projections.host_ports import HostPorts
from projections.pod_adjustment import default_pod_level
from projections.tas_node_layer import NodeLayer
from projections.tas_snapshot import MAX_INT32, PODS, FlavorSnapshot, TASSnapshots, fit_in_leaf, fit_in_leaves
from projections.topology_tree import (
    HOSTNAME,
    TopologyTree,
    domain_id,
    node_is_usable,
    node_matches_flavor,
)
from projections.workloads import WORKLOAD_ANNOTATION, WorkloadInfo, pod_requests

if TYPE_CHECKING:
    from projections.cluster import ClusterState

__all__ = [
    "HOSTNAME",
    "MAX_INT32",
    "PODS",
    "FlavorSnapshot",
    "TASFold",
    "TASSnapshots",
    "TopologyTree",
    "domain_id",
    "fit_in_leaf",
    "fit_in_leaves",
    "node_is_usable",
    "node_matches_flavor",
    "tas_snapshots",
    "workload_tas_usage",
]

TAS_POD_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)
"""A pod carrying any of these is TAS's (Kueue's ``IsTAS``, annotations only since v0.17, #8770; an implied
TAS request's pods get the unconstrained one when started, :mod:`connectors.k8s.podsetinfo`): placed by Kueue,
its usage comes from its workload's assignment instead."""

Usage = dict[str, int]
"""Resource name -> amount in Kueue units (cpu in milli)."""


# --- the fold -----------------------------------------------------------------------------------------------------


class TASFold:
    """What :class:`ClusterState` keeps current, event by event, for topology-aware scheduling."""

    __slots__ = ("usage", "charged", "pod_usage", "node_usage", "nodes_generation", "pods_generation",
                 "usage_generation", "host_ports")

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
        self.host_ports = HostPorts()
        """Bound pods holding host ports, TAS or not (what SchedulerLibraryIntegration's NodePorts filter reads)."""

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
        """Keep the non-TAS usage and the host ports of pod ``key`` current (``pod`` None when it was deleted)."""
        self.host_ports.pod_changed(key, pod, WORKLOAD_ANNOTATION)
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
    finished = _finished_pod_sets(wl)
    for psa in adm.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or psa.name in finished:
            continue
        try:
            domains = tas_assignment.decode(ta)
        except InvalidInput:
            continue  # a malformed assignment in the log places nothing; it cannot be refused any more
        per_pod = _single_pod_requests(wl, psa)
        for flavor in sorted(set(psa.flavors.values())):
            for d in domains:
                # a domain's requests are its pods' scaled up, saturating at MaxInt64 as Kueue's int64 Mul
                amounts = {r: min(MAX_INT64, v * d.count) for r, v in per_pod}
                amounts[PODS] = amounts.get(PODS, 0) + d.count
                out.append((flavor, domain_id(d.values), tuple(sorted(amounts.items()))))
    return tuple(out)


def _finished_pod_sets(wl: WorkloadInfo) -> frozenset[str]:
    """Pod sets all of whose admitted pods are reclaimable (Kueue v0.20: a completed pod set frees its topology
    domains). Only while reclaimable pods count (the ReclaimablePods gate), which is when the fold keeps the
    spec's pod sets apart from the ones it counts."""
    if not wl.reclaimable or wl.spec_pod_sets is None or wl.admission is None:
        return frozenset()
    done = dict(wl.reclaimable)
    return frozenset(psa.name for psa in wl.admission.pod_set_assignments
                     if psa.count is not None and 0 < psa.count <= done.get(psa.name, 0))


def _single_pod_requests(wl: WorkloadInfo, psa: o.PodSetAssignment) -> tuple[tuple[str, int], ...]:
    """Kueue takes a pod's requests from the pod-set template; lacking the pod set, resourceUsage / count."""
    for ps in wl.pod_sets:
        if ps.name == psa.name:
            return ps.placement_requests
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
        amounts = pod_requests(default_pod_level(pod.spec))  # a Pod written without the server's defaulting
    except QuantityError:
        amounts = {}
    amounts[PODS] = amounts.get(PODS, 0) + 1
    return pod.spec.node_name, tuple(sorted(amounts.items()))


def tas_snapshots(state: ClusterState, overlapping_flavors: bool = True, library: bool = False) -> TASSnapshots:
    """A fresh (forked) set of TAS flavor snapshots of ``state``; the expensive parts are memoised.
    ``overlapping_flavors`` is the TASHandleOverlappingFlavors gate of the Configuration in force: whether
    hostname-level usage is shared between flavors (see :class:`TASSnapshots`). ``library`` is
    SchedulerLibraryIntegration: Kueue's node cache then keeps cordoned and not-Ready nodes, which a topology
    whose lowest level is the hostname takes as leaves for the scheduler's filters to judge."""
    fold = state.tas
    memo = state.derived.get("tas")
    if memo is None or memo[0] != (fold.generation, overlapping_flavors, library):
        trees_memo = state.derived.get("tas-trees")
        if trees_memo is None or trees_memo[0] != (fold.nodes_generation, library):
            trees_memo = state.derived["tas-trees"] = ((fold.nodes_generation, library), _trees(state, library))
        trees: dict[str, tuple[str, TopologyTree]] = trees_memo[1]
        free_memo = state.derived.get("tas-free")
        if free_memo is None or free_memo[0] != (fold.generation[:2], library):
            free_memo = state.derived["tas-free"] = (
                (fold.generation[:2], library),
                {f: _free_columns(t, fold.node_usage) for f, (_, t) in trees.items()})
        free: dict[str, dict[str, list[int]]] = free_memo[1]
        layers_memo = state.derived.get("tas-node-layers")
        if layers_memo is None or layers_memo[0] != (fold.generation[:2], library):
            layers_memo = state.derived["tas-node-layers"] = (
                (fold.generation[:2], library), NodeLayers(state.nodes, fold.node_usage))
        layers: NodeLayers = layers_memo[1]
        hostname_usage = _hostname_usage(fold, trees) if overlapping_flavors else {}
        flavors: dict[str, FlavorSnapshot] = {}
        for name in sorted(trees):
            topology, tree = trees[name]
            spec = state.flavors[name].spec
            usage = hostname_usage if overlapping_flavors and tree.hostname_lowest else fold.usage.get(name, {})
            flavors[name] = FlavorSnapshot(name, topology, tree, tuple(spec.tolerations), free[name],
                                           _remaining(tree, free[name], usage),
                                           layers=None if tree.hostname_lowest else layers)
        memo = state.derived["tas"] = ((fold.generation, overlapping_flavors, library),
                                       TASSnapshots(flavors, overlapping_flavors))
    return memo[1].fork()


class NodeLayers:
    """The per-node layers (:class:`NodeLayer`) of the trees whose lowest level is not the hostname, each built the
    first time a snapshot of such a tree is asked for its nodes: the scheduler asks only under
    TASNodeFeasibilityForAllLevels, so with that gate off none is built. Made anew (empty) when the nodes or the
    pods change. It reads the state's nodes and pod usage when a layer is built, so snapshots are read before the
    fold applies anything more (a scheduling cycle's are: the state does not change while it runs)."""

    __slots__ = ("_nodes", "_usage", "_built")

    def __init__(self, nodes: Mapping[str, o.Node], node_usage: Mapping[str, Usage]) -> None:
        self._nodes = nodes
        self._usage = node_usage
        self._built: dict[int, tuple[TopologyTree, NodeLayer]] = {}

    def of(self, tree: TopologyTree) -> NodeLayer:
        """``tree``'s layer, shared by every flavor (and fork) of that tree."""
        found = self._built.get(id(tree))
        if found is None:
            found = self._built[id(tree)] = (tree, NodeLayer(tree, self._nodes, self._usage))
        return found[1]


def _trees(state: ClusterState, library: bool = False) -> dict[str, tuple[str, TopologyTree]]:
    every = [n for _, n in sorted(state.nodes.items())]
    usable = [n for n in every if node_is_usable(n)]
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
            nodes = every if library and levels[-1] == HOSTNAME else usable
            tree = by_shape[shape] = TopologyTree(
                levels, (n for n in nodes if node_matches_flavor(n, spec.node_labels, levels)))
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
