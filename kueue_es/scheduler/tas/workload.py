"""Place every TAS pod set of one workload (§2.8 rule 28).

Flavors run in name order and, within a flavor, pod sets in the order given (their index in the workload). Each
placed pod set's usage is assumed for the ones after it — across all flavors whose lowest level is the hostname,
which may share nodes, under TASHandleOverlappingFlavors (``options.overlapping_flavors``); per flavor otherwise.
The first failure stops the run. The pod sets of a pod-set group (``podSetGroupName``) run together, at the
place of the group's first member: the one with the smaller count (the second on a tie) is the leader, the
other the workers (:func:`~kueue_es.scheduler.tas.place.place_group`); a failure names the group's first member.
A group of other than 2 pod sets with pods, or of 2 neither of which has 1 pod, is placed member by member,
each alone (:func:`groups`: Kueue's job webhooks refuse one, a Workload created or imported as is may carry
one). Kueue gives every member of a failed group the failure and the flavor assigner marks only the one its
result map yields first (Go map order), so one member, not the whole group, turns Preempt or NoFit and is
named in the message; kueue-es names the first. (Kueue's ``downgradeTASFlavorMode``, which marks the whole
group, belongs to a retry of flavor assignment after a TAS failure that the reference snapshot does not have:
§2 rule 2.) The marking does not change the preemption: once the simulate-empty run fits, every TAS pod set
turns Preempt anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kueue_es.scheduler.tas.elastic import place_from, place_group_from, usable
from kueue_es.scheduler.tas.nodes import go_quote
from kueue_es.scheduler.tas.pernode import record_on_nodes
from kueue_es.scheduler.tas.place import place, place_group
from kueue_es.scheduler.tas.request import (
    DEFAULT_OPTIONS,
    AssumedUsage,
    NoPlacement,
    Placement,
    PodSetRequest,
    TASOptions,
    add_assumed,
)
from projections.topology import FlavorSnapshot


class WorkloadPlacement(msgspec.Struct, frozen=True):
    """Placements by pod-set name; on failure ``failed`` names the pod set and ``message`` says why (the pod
    sets placed before it are still listed)."""

    placements: dict[str, Placement]
    failed: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.failed is None


def place_workload(snapshots: Mapping[str, FlavorSnapshot], requests: Sequence[tuple[str, PodSetRequest]], *,
                   simulate_empty: bool = False, options: TASOptions = DEFAULT_OPTIONS,
                   previous: Mapping[str, Placement] | None = None) -> WorkloadPlacement:
    """``requests``: (TAS flavor, request) per pod set, in pod-set order. Pod sets with no pods are skipped.
    ``previous``: by pod-set name, the placements of the elastic Job slice this workload replaces, under
    ElasticJobsViaWorkloadSlicesWithTAS (:mod:`.elastic`); a pod set with a usable one starts from it."""
    by_flavor: dict[str, list[PodSetRequest]] = {}
    for flavor, req in requests:
        by_flavor.setdefault(flavor, []).append(req)
    shared: AssumedUsage = {}
    placements: dict[str, Placement] = {}
    for flavor in sorted(by_flavor):
        snap = snapshots.get(flavor)
        if snap is None:
            return WorkloadPlacement(placements, by_flavor[flavor][0].name,
                                     f"Flavor {go_quote(flavor)} information missing in TAS cache")
        assumed: AssumedUsage = shared if options.overlapping_flavors and snap.tree.hostname_lowest else {}
        for group in groups([r for r in by_flavor[flavor] if r.count > 0]):
            if previous:
                kept = _from_previous(snap, group, previous, assumed, simulate_empty, options)
                if isinstance(kept, tuple):
                    return WorkloadPlacement(placements, kept[0], kept[1].message)
                if kept is not None:
                    placements.update((req.name, res) for req, res in kept)
                    continue
            if len(group) == 1:
                req = group[0]
                res = place(snap, req, assumed=assumed, simulate_empty=simulate_empty, options=options)
                if isinstance(res, NoPlacement):
                    return WorkloadPlacement(placements, req.name, res.message)
                placed = [(req, res)]
            else:
                leader, workers = leader_and_workers(group)
                pair = place_group(snap, workers, leader, assumed=assumed, simulate_empty=simulate_empty,
                                   options=options)
                if isinstance(pair, NoPlacement):
                    return WorkloadPlacement(placements, group[0].name, pair.message)
                placed = [(leader, pair[0]), (workers, pair[1])]
            for req, res in placed:
                placements[req.name] = res
                add_assumed(assumed, res, req.per_pod())
                if len(group) == 1:
                    record_on_nodes(snap, req, res, assumed, options)
    return WorkloadPlacement(placements)


def _from_previous(snap: FlavorSnapshot, group: Sequence[PodSetRequest], previous: Mapping[str, Placement],
                   assumed: AssumedUsage, simulate_empty: bool, options: TASOptions
                   ) -> list[tuple[PodSetRequest, Placement]] | tuple[str, NoPlacement] | None:
    """The group placed from its previous placements (their usage added to ``assumed``), (the failing pod set, why),
    or None when it is to be placed anew."""
    if len(group) == 1:
        req = group[0]
        before = previous.get(req.name)
        if not usable(snap, before):
            return None
        assert before is not None
        res = place_from(snap, req, before, assumed=assumed, simulate_empty=simulate_empty, options=options)
        return (req.name, res) if isinstance(res, NoPlacement) else [(req, res)]
    leader, workers = leader_and_workers(group)
    found = place_group_from(snap, leader, workers, previous, assumed=assumed, simulate_empty=simulate_empty,
                             options=options)
    return (workers.name, found) if isinstance(found, NoPlacement) else found


def group_name(req: PodSetRequest) -> str | None:
    return req.topology.pod_set_group_name if req.topology is not None else None


def groups(requests: Sequence[PodSetRequest]) -> list[list[PodSetRequest]]:
    """The requests grouped by pod-set group, each group at its first member's place; ungrouped ones alone,
    and so the members of a group that is not a leader and its workers (:func:`is_leader_and_workers`), each
    at its own place. Kueue v0.20 places the first two members of such a group as if the smaller were a
    one-pod leader and admits the others with no topology assignment (their pods run ungated, placed nowhere);
    kueue-es places each member as a pod set of its own, so every one that asks for a topology has one."""
    out: list[list[PodSetRequest]] = []
    by_name: dict[str, list[PodSetRequest]] = {}
    for req in requests:
        name = group_name(req)
        if name is None:
            out.append([req])
        elif name in by_name:
            by_name[name].append(req)
        else:
            by_name[name] = [req]
            out.append(by_name[name])
    return [part for group in out
            for part in ([group] if len(group) == 1 or is_leader_and_workers(group)
                         else [[r] for r in group])]


def is_leader_and_workers(group: Sequence[PodSetRequest]) -> bool:
    """Two pod sets, one of 1 pod: the only group shape Kueue's job webhooks let through (#7061)."""
    return len(group) == 2 and (group[0].count == 1 or group[1].count == 1)


def leader_and_workers(group: Sequence[PodSetRequest]) -> tuple[PodSetRequest, PodSetRequest]:
    """Kueue's pick: the second member leads unless its count is larger than the first's (of a group
    :func:`is_leader_and_workers`)."""
    first, second = group[0], group[1]
    return (first, second) if second.count > first.count else (second, first)
