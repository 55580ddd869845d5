"""Topology-aware scheduling inside flavor assignment: which flavors a pod set's topology request allows.

During the per-flavor scan TAS only filters (Kueue's messages, in its order); the placement itself runs once the
flavors are chosen (:mod:`kueue_es.scheduler.tasplace`).
"""

from __future__ import annotations

from collections.abc import Collection

from events import objects as o
from projections.workloads import PodSetInfo


def explicit(req: o.PodSetTopologyRequest | None) -> bool:
    """The pod set asks for TAS itself (a Job's podIndexLabel alone is no request)."""
    return req is not None and bool(
        req.unconstrained or req.required or req.preferred or req.pod_set_slice_required_topology
        or req.pod_set_slice_size or req.podset_slice_required_topology_constraints)


def wants_tas(ps: PodSetInfo, tas_only: bool) -> bool:
    """Explicitly, or implied because every flavor of the ClusterQueue is a TAS flavor."""
    return explicit(ps.topology) or tas_only


def requested_levels(req: o.PodSetTopologyRequest | None, multi_layer: bool = True) -> list[str]:
    """The levels a flavor's topology must have: required or preferred, the slice level (the outer slice layer's)
    and, with TASMultiLayerTopology, every inner slice layer's."""
    if req is None:
        return []
    layers = req.podset_slice_required_topology_constraints
    out = [lv for lv in (req.required, req.preferred, req.pod_set_slice_required_topology) if lv]
    return out + [lay.topology for lay in (layers if multi_layer else layers[:1])]


def tas_ineligible(info, name: str, flavor: o.ResourceFlavor, ps: PodSetInfo, multi_layer: bool = True,
                   covered: Collection[str] = ()) -> str | None:
    """Why an existing flavor, of a resource group covering ``covered``, cannot serve the pod set's topology
    request, or None (always, while Kueue's TopologyAwareScheduling gate is off: Kueue then skips this check).

    A pod set asking for TAS may still take a flavor with no topology from a group covering none of the resources
    its pods request (Kueue v0.20, #8963): a quota-only group, such as the "credits" a transformation derives from
    them, which the pods' placement on the TAS flavor never reads."""
    if not info.tas:
        return None
    is_tas = bool(flavor.spec.topology_name)
    if not wants_tas(ps, info.tas_only):
        return f'Flavor "{name}" supports only TopologyAwareScheduling' if is_tas else None
    if not is_tas:
        if not quota_only(ps, covered):
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        return None
    levels = info.tas_levels.get(name)
    if levels is None:
        return f'Flavor "{name}" information missing in TAS cache'
    if any(lv not in levels for lv in requested_levels(ps.topology, multi_layer)):
        return f'Flavor "{name}" does not contain the requested level'
    return None


def quota_only(ps: PodSetInfo, covered: Collection[str]) -> bool:
    """None of the resources the pod set's pods request themselves (the adjusted template's, before the
    Configuration's rules: what placement counts) is among ``covered``: the group serves the pod set quota only."""
    return not any(r in covered for r, _ in ps.placement_requests)
