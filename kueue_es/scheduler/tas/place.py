"""Place one pod set in one TAS flavor's topology (Kueue's ``findTopologyAssignment``, §2.3–§2.8).

The requested level is ``required``, else ``preferred``, else the highest level for a slice-only request, else
the lowest for an unconstrained or implied one. Unconstrained, implied and slice-only requests use the
LeastFreeCapacity profile (TASProfileMixed, on by default); the others BestFit. Pod-set groups (LeaderWorkerSet
leader/workers), multi-layer slice constraints, balanced placement (alpha) and preferred node affinity (alpha) are
not modelled: every request here has no leader and at most one slice layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from events import objects as o
from projections.topology import HOSTNAME, FlavorSnapshot

from kueue_es.scheduler.tas.counts import exclusions, fill_counts
from kueue_es.scheduler.tas.descent import descend
from kueue_es.scheduler.tas.nodes import excluded_leaves, go_quote
from kueue_es.scheduler.tas.request import NoPlacement, Placement, PodSetRequest, Result
from kueue_es.scheduler.tas.search import find_fit_level


def slice_only(topo: o.PodSetTopologyRequest | None) -> bool:
    return (topo is not None and topo.required is None and topo.preferred is None
            and topo.pod_set_slice_required_topology is not None)


def slices_requested(topo: o.PodSetTopologyRequest | None) -> bool:
    return topo is not None and topo.pod_set_slice_required_topology is not None and topo.pod_set_slice_size is not None


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


def slice_size(topo: o.PodSetTopologyRequest | None) -> int | str:
    """Pods per slice (1 without a slice topology), or the failure message."""
    if topo is None or topo.pod_set_slice_required_topology is None:
        return 1
    if topo.pod_set_slice_size is None:
        return "slice topology requested, but slice size not provided"
    if topo.pod_set_slice_size < 1:
        return f"podset slice size must be at least 1, got {topo.pod_set_slice_size}"
    return topo.pod_set_slice_size


def place(snap: FlavorSnapshot, req: PodSetRequest, *, assumed: Mapping[str, Mapping[str, int]] | None = None,
          simulate_empty: bool = False, within: Sequence[str] | None = None) -> Result:
    """Where ``req``'s pods go in ``snap``'s topology, or why they cannot.

    ``assumed``: usage of earlier pod sets of the same workload in this computation (leaf id -> usage).
    ``simulate_empty``: ignore every TAS workload's usage (is there room once they are preempted?).
    ``within``: the level values of a domain every pod must stay in (node replacement).
    """
    tree = snap.tree
    levels = tree.levels
    topo = req.topology
    size = slice_size(topo)
    if isinstance(size, str):
        return NoPlacement(size)
    required = topo is not None and topo.required is not None
    lfc = is_unconstrained(topo, req.implied)
    key = level_key(levels, topo, req.implied)
    if key is None:
        return NoPlacement("topology level not specified")
    if key not in levels:
        return NoPlacement(f"no requested topology level: {key}")
    requested = levels.index(key)
    slice_key = topo.pod_set_slice_required_topology if topo is not None and topo.pod_set_slice_required_topology \
        is not None else levels[-1]
    if slice_key not in levels:
        return NoPlacement(f"no requested topology level for slices: {slice_key}")
    slice_level = levels.index(slice_key)
    if requested > slice_level:
        return NoPlacement(f"podset slice topology {slice_key} is above the podset topology {key}")

    within_at: tuple[int, int] | None = None
    if within is not None:
        at = tree.prefix_index(within)
        within_at = at if at is not None else (max(0, min(len(within), tree.depth) - 1), -1)
    excluded = excluded_leaves(snap, req)
    per_pod = tuple(sorted(req.per_pod().items()))
    counts = fill_counts(snap, per_pod, assumed=assumed, simulate_empty=simulate_empty, excluded=excluded,
                         within=within_at, slice_size=size, slice_level=slice_level)
    unit = "pod" if size == 1 else "slice"

    def not_fit(fit: int, total: int) -> str:
        name = go_quote(snap.topology)
        head = (f"topology {name} doesn't allow to fit any of {total} {unit}(s)" if fit == 0
                else f"topology {name} allows to fit only {fit} out of {total} {unit}(s)")
        return head + exclusions(snap, counts, per_pod, assumed, simulate_empty).suffix()

    found = find_fit_level(counts, requested, slices=req.count // size, required=required, lfc=lfc, not_fit=not_fit,
                           no_domains=lambda lvl: f"no topology domains at level: {levels[lvl]}")
    if isinstance(found, str):
        return NoPlacement(found)
    fit_level, chosen = found
    leaves = descend(tree, counts, fit_level, chosen, count=req.count, slice_size=size, slice_level=slice_level,
                     lfc=lfc)
    return build(snap, leaves)


def build(snap: FlavorSnapshot, leaves: Mapping[int, int]) -> Placement:
    """The assignment of ``leaves`` (leaf index -> pods): leaves with pods, in level-value order."""
    tree = snap.tree
    if tree.hostname_lowest:
        ids = tree.ids[-1]
        return Placement((HOSTNAME,), tuple(((ids[i],), leaves[i]) for i in sorted(leaves) if leaves[i] > 0))
    vals = tree.values[-1]
    return Placement(tree.levels, tuple((vals[i], leaves[i]) for i in sorted(leaves) if leaves[i] > 0))
