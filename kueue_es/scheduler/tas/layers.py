"""Slices and slice layers of a pod set's topology request (§2.3 rule 10, §2.7 rules 23–24).

The slice level and size come from ``podSetSliceRequiredTopology`` / ``podSetSliceSize``, or from the first
(outer) of the ``podsetSliceRequiredTopologyConstraints`` layers; without either a slice is one pod at the lowest
level. With TASMultiLayerTopology (beta, on) every further layer sets the slice size for the levels from just
below the previous layer down to its own level, so those levels count and hand out pods in multiples of it. An
inner layer must name a level of the topology strictly below the previous layer, and its size must divide the
previous layer's, or the request fails with Kueue's "additional slice layer …" message.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from events import objects as o


class Slicing(msgspec.Struct, frozen=True):
    """``size`` pods per slice at level index ``level``; ``inner``: level index -> size of the inner layer that
    governs it; ``layers``: every layer, when inner ones apply (they change the not-fit message)."""

    size: int
    level: int
    inner: dict[int, int]
    layers: tuple[o.PodSetSliceRequiredTopologyConstraint, ...] = ()


def layers_of(topo: o.PodSetTopologyRequest | None) -> tuple[o.PodSetSliceRequiredTopologyConstraint, ...]:
    return topo.podset_slice_required_topology_constraints if topo is not None else ()


def slice_only(topo: o.PodSetTopologyRequest | None) -> bool:
    """Slices asked for without a required or preferred level: placed from the highest level, unconstrained."""
    return (topo is not None and topo.required is None and topo.preferred is None
            and (topo.pod_set_slice_required_topology is not None or bool(layers_of(topo))))


def slices_requested(topo: o.PodSetTopologyRequest | None) -> bool:
    return topo is not None and ((topo.pod_set_slice_required_topology is not None
                                  and topo.pod_set_slice_size is not None) or bool(layers_of(topo)))


def slice_key(topo: o.PodSetTopologyRequest | None, lowest: str) -> str:
    """The slice level's label key: the slice topology, else the outer layer's, else the lowest level."""
    if topo is not None:
        if topo.pod_set_slice_required_topology is not None:
            return topo.pod_set_slice_required_topology
        if topo.podset_slice_required_topology_constraints:
            return topo.podset_slice_required_topology_constraints[0].topology
    return lowest


def slice_size(topo: o.PodSetTopologyRequest | None) -> int | str:
    """Pods per slice (1 without slices), or the failure message."""
    if topo is None:
        return 1
    if topo.podset_slice_required_topology_constraints:
        size = topo.podset_slice_required_topology_constraints[0].size
    elif topo.pod_set_slice_required_topology is None:
        return 1
    elif topo.pod_set_slice_size is None:
        return "slice topology requested, but slice size not provided"
    else:
        size = topo.pod_set_slice_size
    if size < 1:
        return f"podset slice size must be at least 1, got {size}"
    return size


def inner_sizes(topo: o.PodSetTopologyRequest | None, levels: Sequence[str], level: int, size: int,
                multi_layer: bool) -> dict[int, int] | str:
    """Level index -> slice size of the inner layers (empty with one layer or the gate off), or why they do not
    fit the topology."""
    layers = layers_of(topo)
    if not multi_layer or len(layers) < 2:
        return {}
    out: dict[int, int] = {}
    prev_level, prev_size = level, size
    for layer in layers[1:]:
        if layer.topology not in levels:
            return f"no requested topology level for additional slice layer: {layer.topology}"
        at = levels.index(layer.topology)
        if at <= prev_level:
            return f"additional slice layer topology {layer.topology} must be at a lower level than {levels[prev_level]}"
        if layer.size < 1 or prev_size % layer.size:
            return f"additional slice layer size {layer.size} must evenly divide parent layer size {prev_size}"
        for lvl in range(prev_level + 1, at + 1):
            out[lvl] = layer.size
        prev_level, prev_size = at, layer.size
    return out
