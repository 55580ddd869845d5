"""Replace one unhealthy node in an existing assignment (§4 rule 9, Kueue's ``findReplacementAssignment``).

The node's domain is dropped and its k pods placed again, restricted to the domain the rest of the assignment
requires: for broken slices, the domain of the slice level (or, with slice layers, of the innermost layer the k
pods no longer fill) whose count plus k makes whole slices again, and the k pods are placed in slices of the
innermost layer they still fill (single pods if none); for a required request, the required-level ancestor of
the first remaining domain. The result is merged with the remaining domains (sorted by level values, equal
domains summed).

When the remaining assignment needs a domain it cannot tell — its other nodes are failed ones gone from the
topology (TASReplaceMultipleFailedNodes), or no slice-level domain is the broken one — there is no replacement
(Kueue v0.20, #16321: not placed outside the required domain; the failure message is Kueue's for a replacement not
found, the fix's own text not being at hand). The failed node as the whole assignment requires no domain.

Two deliberate differences from Kueue: "within a domain" compares level values, not a string prefix of the
joined domain id (Kueue's prefix test lets rack ``r1`` match ``r10``); and when several slice-level domains
could take the broken slice, the first in level-value order is used (Kueue iterates a Go map).

:func:`replace_in_workload` repairs every pod set on the node as Kueue's replacement pass does: flavors in name
order, within a flavor the pod sets in the order the placement runs them (a pod-set group's members together, at
its first member's place), each replaced alone — a group's leader and workers are not placed jointly again — with
the pods already re-placed for the ones before it assumed, shared across overlapping hostname flavors under
TASHandleOverlappingFlavors as in :func:`~kueue_es.scheduler.tas.workload.place_workload`. Without that, two pod
sets on the failed node (an LWS leader and a worker sharing it) could both be given the last free slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kueue_es.scheduler.tas.elastic import merge
from kueue_es.scheduler.tas.layers import layers_of, slice_key, slice_size, slices_requested
from kueue_es.scheduler.tas.partial import tail_last, tail_size
from kueue_es.scheduler.tas.place import level_key, place
from kueue_es.scheduler.tas.request import (
    DEFAULT_OPTIONS,
    AssumedUsage,
    NoPlacement,
    Placement,
    PodSetRequest,
    TASOptions,
    add_assumed,
)
from kueue_es.scheduler.tas.workload import groups
from projections.topology import FlavorSnapshot, domain_id


class Replacement(msgspec.Struct, frozen=True):
    """``placement`` is the repaired assignment; ``added`` the part placed for the replaced node (what is newly
    charged)."""

    placement: Placement
    added: Placement


def replace_node(snap: FlavorSnapshot, req: PodSetRequest, current: Placement, node: str, *,
                 assumed: Mapping[str, Mapping[str, int]] | None = None,
                 options: TASOptions = DEFAULT_OPTIONS, listed: frozenset[str] = frozenset()) -> Replacement | NoPlacement:
    """``listed``: other failed nodes waiting for their own replacement (TASReplaceMultipleFailedNodes), whose
    domains may be gone from the topology without making the assignment stale; they stay in it as they are."""
    tree = snap.tree
    remaining = [(v, c) for v, c in current.domains if not (v and v[-1] == node)]
    k = 0
    for v, c in current.domains:
        if v and v[-1] == node:
            k = c
    live = []
    for v, c in remaining:
        if tree.has_domain(domain_id(v)):
            live.append((v, c))
        elif not (v and v[-1] in listed):
            return NoPlacement("Cannot replace the node, because the existing topologyAssignment is invalid, "
                               f"as it contains the stale domain {v[0]}")
    topo = req.topology
    within = _required_domain(snap, req, live, k, options.partial_slices)
    if within is None and remaining and _needs_domain(snap, req, k):
        # Kueue v0.20 (#16321): the rest of the assignment requires a domain it no longer tells (its nodes are
        # other failed ones, gone from the topology, or no slice-level domain is the broken one); placing the
        # pods anywhere could leave it, so there is no replacement
        return NoPlacement(f"cannot find replacement assignment for unhealthy node: {node}")
    request = msgspec.structs.replace(req, count=k)
    size = slice_size(topo)
    if slices_requested(topo) and within is not None and isinstance(size, int) and k % size:
        # the pods no longer make whole slices: keep the innermost layer they still make whole, if any
        whole = next((lay for lay in reversed(layers_of(topo)) if k % lay.size == 0), None)
        request = msgspec.structs.replace(request, topology=msgspec.structs.replace(
            topo, podset_slice_required_topology_constraints=(),
            pod_set_slice_required_topology=whole.topology if whole else None,
            pod_set_slice_size=whole.size if whole else 1))
    res = place(snap, request, assumed=assumed, within=within, options=options)
    if isinstance(res, NoPlacement):
        return res
    if not res.domains:
        return NoPlacement(f"cannot find replacement assignment for unhealthy node: {node}")
    merged = merge(tree, remaining, res.domains)
    size = slice_size(topo)
    skey = slice_key(topo, tree.levels[-1]) if tree.levels else ""
    if (isinstance(size, int) and skey in tree.levels and slices_requested(topo)
            and tail_size(sum(c for _, c in merged), size, len(layers_of(topo)), options.partial_slices)):
        merged = tail_last(tree, merged, tree.levels.index(skey), size)
    return Replacement(Placement(res.levels, merged, res.hostname_prefix_encoding), res)


def replace_in_workload(snapshots: Mapping[str, FlavorSnapshot],
                        requests: Sequence[tuple[str, PodSetRequest, Placement]], node: str, *,
                        options: TASOptions = DEFAULT_OPTIONS,
                        listed: frozenset[str] = frozenset()) -> dict[str, Replacement] | tuple[str, NoPlacement]:
    """The replacements of ``node`` for ``requests`` ((TAS flavor, request, current placement) per pod set on the
    node, in pod-set order), by pod-set name; or (pod set, why) for the first that has none. ``listed``: as for
    :func:`replace_node`."""
    current = {req.name: placement for _, req, placement in requests}
    by_flavor: dict[str, list[PodSetRequest]] = {}
    for flavor, req, _ in requests:
        by_flavor.setdefault(flavor, []).append(req)
    shared: AssumedUsage = {}
    out: dict[str, Replacement] = {}
    for flavor in sorted(by_flavor):
        snap = snapshots[flavor]
        assumed: AssumedUsage = shared if options.overlapping_flavors and snap.tree.hostname_lowest else {}
        for req in (r for group in groups(by_flavor[flavor]) for r in group):
            result = replace_node(snap, req, current[req.name], node, assumed=assumed, options=options,
                                  listed=listed)
            if isinstance(result, NoPlacement):
                return req.name, result
            out[req.name] = result
            add_assumed(assumed, result.added, req.per_pod())
    return out


def _needs_domain(snap: FlavorSnapshot, req: PodSetRequest, k: int) -> bool:
    """The replacement of ``k`` pods must stay in a domain of the remaining assignment: the request's level is
    known and it is required, or the ``k`` pods break slices."""
    levels = snap.tree.levels
    key = level_key(levels, req.topology, req.implied)
    if key is None or key not in levels:
        return False
    size = slice_size(req.topology)
    broken = slices_requested(req.topology) and isinstance(size, int) and k % size != 0
    return broken or (req.topology is not None and req.topology.required is not None)


def _required_domain(snap: FlavorSnapshot, req: PodSetRequest, remaining: list[tuple[tuple[str, ...], int]],
                     k: int, partial: bool) -> tuple[str, ...] | None:
    tree = snap.tree
    levels = tree.levels
    topo = req.topology
    key = level_key(levels, topo, req.implied)
    if key is None or key not in levels or not remaining:
        return None
    last = tree.depth - 1
    size = slice_size(topo)
    if slices_requested(topo) and isinstance(size, int) and k % size:
        # the innermost layer the pods no longer make whole confines them (the outer slice without layers)
        layers = layers_of(topo)
        broken = next((lay for lay in reversed(layers) if k % lay.size), None) if len(layers) > 1 else None
        key, size = (broken.topology, broken.size) if broken is not None else (slice_key(topo, levels[-1]), size)
        if key not in levels:
            return None
        slice_level = levels.index(key)
        held: dict[int, int] = {}
        for v, c in remaining:
            at = tree.domain_index(v)
            if at is None or at[0] != last:
                continue
            anc = tree.ancestor(last, at[1], slice_level)
            held[anc] = held.get(anc, 0) + c
        if tail_size(sum(held.values()) + k, size, len(layers), partial):
            return _tail_domain(tree, held, k, size, slice_level)
        for anc in sorted(held):
            if (held[anc] + k) % size == 0:
                return tree.values[slice_level][anc]
        return None
    if topo is None or topo.required is None:
        return None
    at = tree.domain_index(remaining[0][0])
    if at is None or at[0] != last:
        return None
    return tree.values[levels.index(key)][tree.ancestor(last, at[1], levels.index(key))]


def _tail_domain(tree, held: dict[int, int], k: int, size: int, slice_level: int) -> tuple[str, ...] | None:
    """Under TASPartialSlices, with a partial slice: the slice-level domain, in the assignment's order, whose pods
    plus the ``k`` lost ones make whole slices, or for the last one (which holds the tail, or takes it over when
    the one holding it lost every pod) whole slices and the tail."""
    rest = (sum(held.values()) + k) % size
    order = list(held)
    for i, anc in enumerate(order):
        if (held[anc] + k) % size == (rest if i == len(order) - 1 else 0):
            return tree.values[slice_level][anc]
    return None
