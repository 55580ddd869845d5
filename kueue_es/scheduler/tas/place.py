"""Place one pod set in one TAS flavor's topology (Kueue's ``findTopologyAssignment``, §2.3–§2.8).

The requested level is ``required``, else ``preferred``, else the highest level for a slice-only request, else
the lowest for an unconstrained or implied one. Unconstrained, implied and slice-only requests use the
LeastFreeCapacity profile while TASProfileMixed is on (the default); the others, and every request with the gate
off, BestFit. Being unconstrained matters beyond the profile, gate or not: such a request never climbs a level
and is never balanced. Slices and their inner layers are resolved by :mod:`.layers`; with TASBalancedPlacement a
request that is neither required nor unconstrained is first tried by :mod:`.balanced` (a pod-set group by
:mod:`.balanced_group`, leader-aware), falling back to the search below when that finds nothing. Under
SchedulerLibraryIntegration (alpha) the scheduler's filters choose the nodes, host ports included (:mod:`.library`). Under TASRespectNodeAffinityPreferred (alpha) the nodes a pod set's preferred
node affinity favours rank their domains first (:mod:`.search`). Under TASNodeFeasibilityForAllLevels (beta, on)
a topology whose lowest level is not the hostname has each node under a leaf checked on its own (:mod:`.pernode`). Under
TASPartialSlices (beta, on) a pod set whose count is not a multiple of its slice size also places a last, partial
slice (:mod:`.partial`; a pod-set group's workers :mod:`.group_partial`; never balanced: Kueue's balanced placement
leaves such a pod set to the search). A pod-set group (LeaderWorkerSet leader and
workers) is placed in one run by :func:`place_group`, the workers' request (and preferred affinity) governing it
(:mod:`.group`). Under TASTopologySpreading (alpha) a required request's ``spreading`` rules filter and rank the
domains of the requested level (:mod:`.spreading`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from events import objects as o
from kueue_es.scheduler.tas.balanced import place_balanced
from kueue_es.scheduler.tas.balanced_group import place_group_balanced
from kueue_es.scheduler.tas.counts import Counts, exclusions, fill_counts
from kueue_es.scheduler.tas.descent import descend
from kueue_es.scheduler.tas.devices import device_excluded
from kueue_es.scheduler.tas.group import GroupCounts, descend_group, fill_group_counts, find_group_fit_level
from kueue_es.scheduler.tas.group_partial import WithTail, descend_group_tail, group_tail_capacities
from kueue_es.scheduler.tas.layers import (
    inner_sizes,
    layers_of,
    slice_key,
    slice_only,
    slice_size,
    slices_requested,
)
from kueue_es.scheduler.tas.leader_nodes import leader_filter
from kueue_es.scheduler.tas.library import library_excluded
from kueue_es.scheduler.tas.nodes import excluded_leaves, go_quote, preferred_scores
from kueue_es.scheduler.tas.partial import TailFit, tail_capacities, tail_last, tail_size
from kueue_es.scheduler.tas.pernode import node_scores, node_view
from kueue_es.scheduler.tas.request import (
    DEFAULT_OPTIONS,
    NoPlacement,
    Placement,
    PodSetRequest,
    Result,
    TASOptions,
)
from kueue_es.scheduler.tas.search import find_fit_level
from kueue_es.scheduler.tas.spreading import LevelSpread, resolve
from projections.topology import HOSTNAME, FlavorSnapshot, TopologyTree

__all__ = ["build", "is_unconstrained", "level_key", "place", "place_group", "slice_size", "slices_requested"]


def level_key(levels: Sequence[str], topo: o.PodSetTopologyRequest | None, implied: bool) -> str | None:
    """The requested level's label key (§2.3 rule 9), or None when the request names none."""
    if topo is not None:
        if topo.required is not None:
            return topo.required
        if topo.preferred is not None:
            return topo.preferred
        if slice_only(topo):
            return levels[0]
        if topo.unconstrained:
            return levels[-1]
    return levels[-1] if implied else None


def is_unconstrained(topo: o.PodSetTopologyRequest | None, implied: bool) -> bool:
    return bool(topo is not None and topo.unconstrained) or implied or slice_only(topo)


def place_group(snap: FlavorSnapshot, workers: PodSetRequest, leader: PodSetRequest, *,
                assumed: Mapping[str, Mapping[str, int]] | None = None, simulate_empty: bool = False,
                options: TASOptions = DEFAULT_OPTIONS) -> tuple[Placement, Placement] | NoPlacement:
    """(leader's placement, workers' placement) of a pod-set group placed jointly, or why it cannot be."""
    return _place(snap, workers, leader, assumed=assumed, simulate_empty=simulate_empty, within=None,
                  options=options)


def place(snap: FlavorSnapshot, req: PodSetRequest, *, assumed: Mapping[str, Mapping[str, int]] | None = None,
          simulate_empty: bool = False, within: Sequence[str] | None = None,
          options: TASOptions = DEFAULT_OPTIONS) -> Result:
    """Where ``req``'s pods go in ``snap``'s topology, or why they cannot.

    ``assumed``: usage of earlier pod sets of the same workload in this computation (leaf id -> usage).
    ``simulate_empty``: ignore every TAS workload's usage (is there room once they are preempted?).
    ``within``: the level values of a domain every pod must stay in (node replacement).
    ``options``: the feature gates placement reads.
    """
    res = _place(snap, req, None, assumed=assumed, simulate_empty=simulate_empty, within=within, options=options)
    assert not isinstance(res, tuple)
    return res


def _place(snap: FlavorSnapshot, req: PodSetRequest, leader: PodSetRequest | None, *,
           assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool, within: Sequence[str] | None,
           options: TASOptions) -> Result | tuple[Placement, Placement]:
    tree = snap.tree
    levels = tree.levels
    topo = req.topology
    size = slice_size(topo)
    if isinstance(size, str):
        return NoPlacement(size)
    required = topo is not None and topo.required is not None
    unconstrained = is_unconstrained(topo, req.implied)
    lfc = unconstrained and options.profile_mixed
    key = level_key(levels, topo, req.implied)
    if key is None:
        return NoPlacement("topology level not specified")
    if key not in levels:
        return NoPlacement(f"no requested topology level: {key}")
    requested = levels.index(key)
    skey = slice_key(topo, levels[-1])
    if skey not in levels:
        return NoPlacement(f"no requested topology level for slices: {skey}")
    slice_level = levels.index(skey)
    if requested > slice_level:
        return NoPlacement(f"podset slice topology {skey} is above the podset topology {key}")
    spread = resolve(tree, req.spreading, requested) if required else None
    if isinstance(spread, str):
        return NoPlacement(spread)
    inner = inner_sizes(topo, levels, slice_level, size, options.multi_layer)
    if isinstance(inner, str):
        return NoPlacement(inner)
    layers = layers_of(topo) if inner else ()

    within_at: tuple[int, int] | None = None
    if within is not None:
        at = tree.prefix_index(within)
        within_at = at if at is not None else (max(0, min(len(within), tree.depth) - 1), -1)
    excluded = excluded_leaves(snap, req)
    if options.library is not None:
        excluded = library_excluded(snap, req, excluded, options.library, simulate_empty)
    excluded = device_excluded(snap, req, excluded, options.devices)
    per_pod = tuple(sorted(req.per_pod().items()))
    nodes = node_view(snap, req, per_pod, assumed, options.devices) if options.node_feasibility else None
    scores = None
    if options.node_affinity_preferred:
        scores = preferred_scores(snap, req) if nodes is None else node_scores(nodes, req)
    if leader is not None:
        return _place_group(snap, req, leader, per_pod, assumed=assumed, simulate_empty=simulate_empty,
                            excluded=excluded, within_at=within_at, size=size, slice_level=slice_level,
                            inner=inner, layers=layers, requested=requested, required=required,
                            unconstrained=unconstrained, lfc=lfc, options=options, scores=scores, nodes=nodes,
                            spread=spread)
    counts = fill_counts(snap, per_pod, assumed=assumed, simulate_empty=simulate_empty, excluded=excluded,
                         within=within_at, slice_size=size, slice_level=slice_level, inner=inner, scores=scores,
                         nodes=nodes)
    slices = req.count // size
    tail = tail_size(req.count, size, len(layers_of(topo)), options.partial_slices)
    if tail:
        return _place_with_tail(snap, counts, per_pod, assumed, simulate_empty, req.count, size, tail, slice_level,
                                requested, required, unconstrained, lfc, options, spread)

    if options.balanced and not required and not unconstrained:
        found = place_balanced(tree, counts, requested=requested, slice_level=slice_level, slices=slices,
                               slice_size=size, inner=inner)
        if found is not None:
            fit_level, shares = found
            leaves = descend(tree, counts, fit_level, list(shares), count=req.count, slice_size=size,
                             slice_level=slice_level, lfc=lfc, inner=inner, shares=shares)
            return build(snap, leaves, options)

    not_fit = _not_fit(snap, counts, per_pod, assumed, simulate_empty, layers, req.count, size)
    found_level = find_fit_level(counts, requested, slices=slices, required=required, unconstrained=unconstrained,
                                 lfc=lfc, not_fit=not_fit, no_domains=partial(_no_domains, tree), spread=spread)
    if isinstance(found_level, str):
        return NoPlacement(found_level)
    fit_level, chosen = found_level
    leaves = descend(tree, counts, fit_level, chosen, count=req.count, slice_size=size, slice_level=slice_level,
                     lfc=lfc, inner=inner)
    return build(snap, leaves, options)


def _place_with_tail(snap: FlavorSnapshot, counts: Counts, per_pod: tuple[tuple[str, int], ...],
                     assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool, count: int, size: int,
                     tail: int, slice_level: int, requested: int, required: bool, unconstrained: bool, lfc: bool,
                     options: TASOptions, spread: LevelSpread | None = None) -> Result:
    """A pod set with a last, partial slice (:mod:`.partial`); never balanced."""
    tree = snap.tree
    tails = tail_capacities(tree, counts.pods, counts.slices, size, tail, slice_level)
    not_fit = _not_fit(snap, counts, per_pod, assumed, simulate_empty, (), count, size)
    found = find_fit_level(counts, requested, slices=count // size, required=required, unconstrained=unconstrained,
                           lfc=lfc, not_fit=not_fit, no_domains=partial(_no_domains, tree), spread=spread,
                           fit=TailFit(tails))
    if isinstance(found, str):
        return NoPlacement(found)
    fit_level, chosen = found
    leaves = descend(tree, counts, fit_level, chosen, count=count, slice_size=size, slice_level=slice_level,
                     lfc=lfc, tail=tail, tails=tails)
    placed = build(snap, leaves, options)
    return Placement(placed.levels, tail_last(tree, placed.domains, slice_level, size),
                     placed.hostname_prefix_encoding)


def _no_domains(tree: TopologyTree, level: int) -> str:
    """Kueue's failure when the searched ``level`` has no domain."""
    return f"no topology domains at level: {tree.levels[level]}"


def _not_fit(snap: FlavorSnapshot, counts: Counts, per_pod: tuple[tuple[str, int], ...],
             assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool,
             layers: Sequence[o.PodSetSliceRequiredTopologyConstraint], count: int, size: int):
    """Kueue's not-fit message maker: (slices that fit, slices requested, level searched) -> message."""
    def not_fit(fit: int, total: int, level: int) -> str:
        suffix = exclusions(snap, counts, per_pod, assumed, simulate_empty).suffix()
        if layers:
            return layered_not_fit(snap, counts, level, count, layers) + suffix
        unit = "pod" if size == 1 else "slice"
        name = go_quote(snap.topology)
        head = (f"topology {name} doesn't allow to fit any of {total} {unit}(s)" if fit == 0
                else f"topology {name} allows to fit only {fit} out of {total} {unit}(s)")
        return head + suffix
    return not_fit


def _place_group(snap: FlavorSnapshot, req: PodSetRequest, leader: PodSetRequest,
                 per_pod: tuple[tuple[str, int], ...], *, assumed: Mapping[str, Mapping[str, int]] | None,
                 simulate_empty: bool, excluded, within_at: tuple[int, int] | None, size: int, slice_level: int,
                 inner, layers, requested: int, required: bool, unconstrained: bool, lfc: bool,
                 options: TASOptions, scores, nodes,
                 spread: LevelSpread | None = None) -> tuple[Placement, Placement] | NoPlacement:
    """The joint run of a group whose workers are ``req`` (:mod:`.group`), ranked by the workers' preferred node
    affinity (``scores``) under TASRespectNodeAffinityPreferred."""
    tree = snap.tree
    leader_per_pod = tuple(sorted(leader.per_pod().items()))
    own = leader_filter(snap, leader, leader_per_pod, assumed=assumed, simulate_empty=simulate_empty,
                        options=options, workers_nodes=nodes)
    gc = fill_group_counts(snap, per_pod, leader_per_pod, assumed=assumed, simulate_empty=simulate_empty,
                           excluded=excluded, within=within_at, slice_size=size, slice_level=slice_level,
                           inner=inner, scores=scores, nodes=nodes, leader_own=own)
    tail = tail_size(req.count, size, len(layers_of(req.topology)), options.partial_slices)
    if tail:
        return _place_group_with_tail(snap, gc, req, per_pod, assumed, simulate_empty, size=size, tail=tail,
                                      slice_level=slice_level, requested=requested, required=required,
                                      unconstrained=unconstrained, lfc=lfc, options=options, spread=spread)
    if options.balanced and not required and not unconstrained:
        balanced = _place_group_balanced(snap, gc, req, size=size, slice_level=slice_level, inner=inner,
                                         requested=requested, lfc=lfc, options=options)
        if balanced is not None:
            return balanced
    not_fit = _not_fit(snap, gc.base, per_pod, assumed, simulate_empty, layers, req.count, size)
    found = find_group_fit_level(gc, requested, slices=req.count // size, required=required,
                                 unconstrained=unconstrained, lfc=lfc, not_fit=not_fit,
                                 no_domains=partial(_no_domains, tree), spread=spread)
    if isinstance(found, str):
        return NoPlacement(found)
    fit_level, chosen = found
    workers, leaders = descend_group(tree, gc, fit_level, chosen, count=req.count, slice_size=size,
                                     slice_level=slice_level, lfc=lfc, inner=inner)
    return build(snap, leaders, options), build(snap, workers, options)


def _place_group_with_tail(snap: FlavorSnapshot, gc: GroupCounts, req: PodSetRequest,
                           per_pod: tuple[tuple[str, int], ...], assumed: Mapping[str, Mapping[str, int]] | None,
                           simulate_empty: bool, *, size: int, tail: int, slice_level: int, requested: int,
                           required: bool, unconstrained: bool, lfc: bool, options: TASOptions,
                           spread: LevelSpread | None) -> tuple[Placement, Placement] | NoPlacement:
    """A group whose workers end in a partial slice (:mod:`.group_partial`), spread as a whole-slice group is;
    never balanced, as in Kueue."""
    tree = snap.tree
    tc, tlc = group_tail_capacities(tree, gc, size, tail, slice_level)
    not_fit = _not_fit(snap, gc.base, per_pod, assumed, simulate_empty, (), req.count, size)
    found = find_group_fit_level(gc, requested, slices=req.count // size, required=required,
                                 unconstrained=unconstrained, lfc=lfc, not_fit=not_fit,
                                 no_domains=partial(_no_domains, tree), spread=spread, fit=WithTail(tc, tlc))
    if isinstance(found, str):
        return NoPlacement(found)
    fit_level, chosen = found
    workers, leaders = descend_group_tail(tree, gc, tc, tlc, fit_level, chosen, count=req.count, slice_size=size,
                                          tail=tail, slice_level=slice_level, lfc=lfc)
    placed = build(snap, workers, options)
    return build(snap, leaders, options), Placement(placed.levels, tail_last(tree, placed.domains, slice_level, size),
                                                    placed.hostname_prefix_encoding)


def _place_group_balanced(snap: FlavorSnapshot, gc: GroupCounts, req: PodSetRequest, *, size: int,
                          slice_level: int, inner, requested: int, lfc: bool,
                          options: TASOptions) -> tuple[Placement, Placement] | None:
    """The group spread evenly (:mod:`.balanced_group`), or None to fall back to the joint search."""
    found = place_group_balanced(snap.tree, gc, requested=requested, slice_level=slice_level,
                                 slices=req.count // size, slice_size=size, inner=inner)
    if found is None:
        return None
    workers, leaders = descend_group(snap.tree, gc, found.fit_level, list(found.shares), count=req.count,
                                     slice_size=size, slice_level=slice_level, lfc=lfc, inner=inner,
                                     shares=found.shares, leader_at=found.leader)
    return build(snap, leaders, options), build(snap, workers, options)


def layered_not_fit(snap: FlavorSnapshot, counts: Counts, level: int, count: int,
                    layers: Sequence[o.PodSetSliceRequiredTopologyConstraint]) -> str:
    """Kueue's not-fit message with inner slice layers: for the domain of the searched level that holds the most
    slices (the first by id on a tie), how many slices of each layer fit in it, out of how many are needed."""
    tree = snap.tree
    head = f"topology {go_quote(snap.topology)} doesn't allow to fit"
    sc, ids = counts.slices[level], tree.ids[level]
    if not sc:
        return head
    best = min(range(len(sc)), key=lambda i: (-sc[i], ids[i]))
    parts = [head]
    for layer in layers:
        if layer.topology not in tree.levels:
            continue
        target = tree.levels.index(layer.topology)
        fit = 0
        if target >= level:
            a, b = descendants(tree, level, best, target)
            fit = sum(p // layer.size for p in counts.pods[target][a:b])
        parts.append(f"{fit}/{count // layer.size} slice(s) fit on level {layer.topology}")
    return "; ".join(parts)


def descendants(tree: TopologyTree, level: int, i: int, target: int) -> tuple[int, int]:
    """The index range, at level ``target``, of the domains under domain ``i`` of ``level``."""
    a, b = i, i + 1
    for lvl in range(level, target):
        a, b = tree.child_start[lvl][a], tree.child_end[lvl][b - 1]
    return a, b


def build(snap: FlavorSnapshot, leaves: Mapping[int, int], options: TASOptions = DEFAULT_OPTIONS) -> Placement:
    """The assignment of ``leaves`` (leaf index -> pods): leaves with pods, in level-value order, to be written
    as ``options`` say."""
    tree = snap.tree
    encoding = options.hostname_prefix_encoding
    ordered = [i for i in sorted(leaves) if leaves[i] > 0]
    if tree.hostname_lowest:
        ids = tree.ids[-1]
        return Placement((HOSTNAME,), tuple(((ids[i],), leaves[i]) for i in ordered), encoding)
    vals = tree.values[-1]
    return Placement(tree.levels, tuple((vals[i], leaves[i]) for i in ordered), encoding)
