"""What one placement is asked for, and what it answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from events import objects as o
from events import tas_assignment
from events.quantity import MAX_INT64
from kueue_es.scheduler.tas.spreading import Occupancy
from projections.host_ports import Holder, HostPort
from projections.topology import PODS
from projections.workloads import PodSetInfo


class PodSetRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One pod set to place: ``count`` pods, each requesting ``requests`` (Kueue units, from the pod template; a
    ``pods: 1`` is added by the placement). ``implied`` is TAS implied by a TAS-only ClusterQueue for a pod set
    that does not ask for it. The node selection fields are the pod set's with the Ready admission checks'
    podSetUpdates already merged in; the flavor's tolerations are added by the placement. ``preferred_terms`` (the
    template's preferred node affinity) orders the domains only under TASRespectNodeAffinityPreferred."""

    name: str
    count: int
    requests: tuple[tuple[str, int], ...]
    topology: o.PodSetTopologyRequest | None = None
    implied: bool = False
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[o.Toleration, ...] = ()
    affinity_terms: tuple[o.NodeSelectorTerm, ...] | None = None
    preferred_terms: tuple[o.PreferredSchedulingTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    """The host ports each pod takes on its node (checked only under SchedulerLibraryIntegration)."""
    spreading: Occupancy | None = None
    """Under TASTopologySpreading, what its ``kueue.x-k8s.io/podset-topology-spreading`` rules see in the flavor
    (:mod:`.spreading`); None: no spreading."""
    claims: tuple[str, ...] = ()
    """The ResourceClaimTemplates (``namespace/name``) whose claims each pod will hold, which the nodes' devices
    must serve under KueueDRADeviceFeasibility (:mod:`.devices`); read only under that gate."""

    @classmethod
    def of(cls, ps: PodSetInfo, count: int | None = None, *, implied: bool = False,
           namespace: str = "") -> PodSetRequest:
        """The request of pod set ``ps`` (of a workload in ``namespace``) with ``count`` pods (default: its full
        count)."""
        return cls(name=ps.name, count=ps.count if count is None else count, requests=ps.placement_requests,
                   topology=ps.topology, implied=implied, node_selector=ps.node_selector,
                   tolerations=ps.tolerations, affinity_terms=ps.affinity_terms, preferred_terms=ps.preferred_terms,
                   host_ports=ps.host_ports, claims=tuple(f"{namespace}/{t}" for t in ps.claim_templates))

    def per_pod(self) -> dict[str, int]:
        """Single-pod requests including one ``pods``."""
        out = dict(self.requests)
        out[PODS] = out.get(PODS, 0) + 1
        return out


class NodePorts(msgspec.Struct, frozen=True, kw_only=True):
    """The host ports the scheduler library's NodePorts filter sees taken: by node, each bound pod's (its owning
    workload's key, empty for none; its ports), and the workloads a preemption simulation has released."""

    holders: dict[str, tuple[Holder, ...]] = {}
    released: frozenset[str] = frozenset()


class TASOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The feature gates placement reads (from the Configuration's ``featureGates``): TASBalancedPlacement
    (alpha, off), TASMultiLayerTopology (beta, on), TASHandleOverlappingFlavors (beta, on; also how the
    cycle's snapshots share usage, :func:`projections.topology.tas_snapshots`), TASProfileMixed (beta, on:
    unconstrained requests use LeastFreeCapacity; off, every request uses BestFit) and
    TASAssignmentsEncodingByHostnamePrefix (beta, on: how a placement is written, :meth:`Placement.encode`) and
    TASRespectNodeAffinityPreferred (alpha, off: a pod set's preferred node affinity ranks the domains first),
    TASNodeFeasibilityForAllLevels (beta, on: below a lowest level other than the hostname every node is checked on
    its own, :mod:`kueue_es.scheduler.tas.pernode`), TASPartialSlices (beta, on: a pod set whose count is not a
    multiple of its slice size gets a last, partial slice, :mod:`kueue_es.scheduler.tas.partial`),
    TASLeaderPodSetFeasibility (beta, on: a pod-set group's leader is placed on the nodes its own filters allow,
    :mod:`kueue_es.scheduler.tas.leader_nodes`), TASTopologySpreading (alpha, off: a pod set's
    ``kueue.x-k8s.io/podset-topology-spreading`` rules, read by :func:`kueue_es.scheduler.tasplace.with_spreading`
    into :attr:`PodSetRequest.spreading`).
    ``library`` is SchedulerLibraryIntegration (alpha, off): None while off; on, the pods holding host ports that
    the scheduler's filters see (:mod:`kueue_es.scheduler.tas.library`)."""

    balanced: bool = False
    multi_layer: bool = True
    overlapping_flavors: bool = True
    profile_mixed: bool = True
    hostname_prefix_encoding: bool = True
    node_affinity_preferred: bool = False
    node_feasibility: bool = True
    partial_slices: bool = True
    leader_feasibility: bool = True
    spreading: bool = False
    library: NodePorts | None = None
    devices: Any = None
    """KueueDRADeviceFeasibility (alpha, off): None while off; on, the cluster's devices a pod set's claims are
    checked against (a :class:`kueue_es.scheduler.tas.devices.DeviceWorld`, or the cycle's
    :class:`~kueue_es.scheduler.tas.devices.LazyDeviceWorld` built on first use; :mod:`kueue_es.scheduler.tas.devices`)."""


DEFAULT_OPTIONS = TASOptions()


class Placement(msgspec.Struct, frozen=True):
    """A topology assignment: ``levels`` and the domains with their pod counts, ordered by level values. When
    the lowest level is the hostname, ``levels`` is just that level and each domain's values the hostname.
    ``hostname_prefix_encoding`` is the TASAssignmentsEncodingByHostnamePrefix gate it was placed under, which
    decides only its wire form (:meth:`encode`), carried here so that whoever writes it needs no gates."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]
    hostname_prefix_encoding: bool = True

    @property
    def count(self) -> int:
        return sum(c for _, c in self.domains)

    def domain_assignments(self) -> list[o.TopologyDomainAssignment]:
        return [o.TopologyDomainAssignment(values=list(v), count=c) for v, c in self.domains]

    def encode(self) -> o.TopologyAssignment:
        """The v1beta2 wire form written into ``podSetAssignments[].topologyAssignment``."""
        return tas_assignment.encode(list(self.levels), self.domain_assignments(),
                                     by_hostname_prefix=self.hostname_prefix_encoding)

    @classmethod
    def decode(cls, ta: o.TopologyAssignment) -> Placement:
        return cls(tuple(ta.levels), tuple((tuple(d.values), d.count) for d in tas_assignment.decode(ta)))


class NoPlacement(msgspec.Struct, frozen=True):
    """No placement; ``message`` is Kueue's reason text (the pod set's TAS failure message)."""

    message: str


Result = Placement | NoPlacement

AssumedUsage = dict[str, dict[str, int]]
"""Leaf domain id -> usage already placed by earlier pod sets of the same workload in this computation."""


def add_assumed(assumed: AssumedUsage, placement: Placement, per_pod: Mapping[str, int]) -> None:
    """Record ``placement``'s usage (``per_pod`` includes ``pods``) so later pod sets see it."""
    for values, count in placement.domains:
        u = assumed.setdefault(",".join(values), {})
        for r, v in per_pod.items():
            if v:
                u[r] = min(MAX_INT64, u.get(r, 0) + min(MAX_INT64, v * count))  # Kueue's saturating int64
