"""An elastic Job's new slice placed around the pods its old slice runs (Kueue's ElasticJobsViaWorkloadSlicesWithTAS).

Under the gate, a pod set of a slice that replaces an admitted one starts from the old slice's assignment of that
pod set (its *previous* placement), whose pods keep running where they are:

* more pods than before: the previous placement's pods are taken as placed (assumed usage) and only the extra
  pods are placed, by the ordinary search (:func:`~kueue_es.scheduler.tas.place.place`); the result is the two
  merged, domains in level-value order and a domain named twice summed;
* fewer: the previous placement cut to the new count from its end (its last domains give up their pods first);
* as many: the previous placement as it is.

A previous placement naming a domain that is not a current leaf of the flavor's topology (its node gone, not
Ready or cordoned) — or written at other levels — is stale: the pod set is placed anew, as any other.

A pod-set group (a leader and its workers) is placed so only when the workers have a usable previous placement:
the leader then keeps its own previous placement as it is (Kueue #12436, #13574: its pod runs on, it is never
placed again), and the workers are placed as above, alone. A group whose leader has no usable previous placement
(a new leader pod set, or a stale one) is placed anew as a whole: Kueue's code at the time dereferences the
missing placement (a fix proposed upstream, #14729, falls back to a fresh placement, as kueue-es does).

The old slice's own usage is not counted taken while its replacement is placed: the caller lifts it from the
snapshots first (:mod:`kueue_es.scheduler.tasplace`), so the kept pods are counted once, here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kueue_es.scheduler.tas.place import place
from kueue_es.scheduler.tas.request import NoPlacement, Placement, PodSetRequest, TASOptions, add_assumed
from projections.topology import HOSTNAME, FlavorSnapshot, TopologyTree

Domains = tuple[tuple[tuple[str, ...], int], ...]


def merge(tree: TopologyTree, a: Sequence[tuple[tuple[str, ...], int]],
          b: Sequence[tuple[tuple[str, ...], int]]) -> Domains:
    """The domains of ``a`` and ``b`` together, in the order of the topology's leaves (level values), a domain
    both name once with the sum of their counts (Kueue's ``mergeTopologyAssignments``)."""
    merged: dict[tuple[str, ...], int] = {}
    order: dict[tuple[str, ...], tuple[int, ...]] = {}
    for v, c in list(a) + list(b):
        merged[v] = merged.get(v, 0) + c
        at = tree.domain_index(v)
        order[v] = (at[1],) if at is not None else (-1,)
    return tuple((v, merged[v]) for v in sorted(merged, key=lambda v: (order[v], v)))


def truncate(domains: Sequence[tuple[tuple[str, ...], int]], count: int) -> Domains:
    """The first ``count`` pods of ``domains``, in their order (Kueue's ``TruncateAssignment``)."""
    out: list[tuple[tuple[str, ...], int]] = []
    left = count
    for v, c in domains:
        if left <= 0:
            break
        out.append((v, min(c, left)))
        left -= min(c, left)
    return tuple(out)


def usable(snap: FlavorSnapshot, previous: Placement | None) -> bool:
    """``previous`` is a placement in ``snap``'s current topology: its levels are the ones placements there are
    written at, and each of its domains is a current leaf (else it is stale, Kueue's
    ``IsTopologyAssignmentStale``)."""
    if previous is None:
        return False
    tree = snap.tree
    if previous.levels != ((HOSTNAME,) if tree.hostname_lowest else tree.levels):
        return False
    last = tree.depth - 1
    for v, _ in previous.domains:
        at = tree.domain_index(v)
        if at is None or at[0] != last:
            return False
    return True


def _as_placed(previous: Placement, domains: Domains, options: TASOptions) -> Placement:
    return Placement(previous.levels, domains, options.hostname_prefix_encoding)


def place_from(snap: FlavorSnapshot, req: PodSetRequest, previous: Placement, *, assumed: dict[str, dict[str, int]],
               simulate_empty: bool, options: TASOptions) -> Placement | NoPlacement:
    """``req``'s placement starting from its usable ``previous`` one; what it places is added to ``assumed``."""
    per_pod = req.per_pod()
    before = previous.count
    if req.count <= before:
        kept = _as_placed(previous, truncate(previous.domains, req.count) if req.count < before
                          else previous.domains, options)
        add_assumed(assumed, kept, per_pod)
        return kept
    add_assumed(assumed, previous, per_pod)
    extra = place(snap, msgspec.structs.replace(req, count=req.count - before), assumed=assumed,
                  simulate_empty=simulate_empty, options=options)
    if isinstance(extra, NoPlacement):
        return extra
    add_assumed(assumed, extra, per_pod)
    return _as_placed(previous, merge(snap.tree, previous.domains, extra.domains), options)


def place_group_from(snap: FlavorSnapshot, leader: PodSetRequest, workers: PodSetRequest,
                     previous: Mapping[str, Placement], *, assumed: dict[str, dict[str, int]], simulate_empty: bool,
                     options: TASOptions) -> list[tuple[PodSetRequest, Placement]] | NoPlacement | None:
    """A pod-set group from its previous placements: the leader's kept, the workers' as :func:`place_from`; None
    when the group is to be placed anew (either has no usable previous placement)."""
    before_leader, before_workers = previous.get(leader.name), previous.get(workers.name)
    if not usable(snap, before_workers) or not usable(snap, before_leader):
        return None
    assert before_leader is not None and before_workers is not None
    kept = _as_placed(before_leader, before_leader.domains, options)
    add_assumed(assumed, kept, leader.per_pod())
    res = place_from(snap, workers, before_workers, assumed=assumed, simulate_empty=simulate_empty, options=options)
    if isinstance(res, NoPlacement):
        return res
    return [(leader, kept), (workers, res)]
