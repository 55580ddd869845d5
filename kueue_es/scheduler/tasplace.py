"""Topology-aware placement in the scheduling cycle: after the flavors are chosen, and in the second pass.

Kueue runs TAS once per workload after quota flavor assignment (a TAS failure never makes it try another
flavor): a Fit whose placement fails becomes Preempt, and a Preempt that would not fit even with every TAS
workload gone becomes NoFit (TopologyPlacementFailed). A pod set whose TAS flavor is covered by a
ProvisioningRequest check gets no placement yet (``delayedTopologyRequest: Pending``); the second pass places it
once the checks are Ready, and also replaces a failed node in place.

Under ``ElasticJobsViaWorkloadSlicesWithTAS`` a slice replacing an elastic Job's admitted slice is placed with that
slice's usage lifted from the snapshots (Kueue's ``SimulateUsageRemoval``), and an elastic one starting from that
slice's placements (:mod:`kueue_es.scheduler.tas.elastic`); admitted, the old slice's domains are free for the rest
of the cycle (the new placement holds the pods it keeps). An elastic workload may not ask for a required topology
under the gate: "required topology is not supported with ElasticJobsViaWorkloadSlices" (NoFit).

The cycle's TAS snapshots are forked once per cycle and charged as entries are admitted, so later entries see
the domains earlier ones took (and, under SchedulerLibraryIntegration, the host ports their pods will hold on the
nodes of a hostname-level placement, as Kueue's anticipated pods of a workload holding quota). A nomination that
no longer fits is assigned again by the cycle, flavors pinned, under ``TASRecomputeAssignmentWithinSchedulingCycle``
(skipped instead with it off).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import msgspec

from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.object_rules import HOSTNAME
from kueue_es.scheduler.flavors import Assignment, Granular, Mode, PodSetResult
from kueue_es.scheduler.multinode import listed_beside, within_threshold
from kueue_es.scheduler.tas import (
    NodePorts,
    Placement,
    PodSetRequest,
    Replacement,
    TASOptions,
    place_workload,
    replace_in_workload,
    spreading,
)
from kueue_es.scheduler.tas.devices import DeviceWorld, LazyDeviceWorld, world_of
from kueue_es.scheduler.tasflavor import explicit, wants_tas
from projections.assumed_ports import holders_by_node
from projections.clusterqueues import ClusterQueueInfo
from projections.gates import (
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES,
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES_WITH_TAS,
    KUEUE_DRA_DEVICE_FEASIBILITY,
    KUEUE_DRA_INTEGRATION_DEVICE_TAINTS,
    SCHEDULER_LIBRARY_INTEGRATION,
    SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS,
    TAS_ASSIGNMENTS_ENCODING_BY_HOSTNAME_PREFIX,
    TAS_BALANCED_PLACEMENT,
    TAS_FAILED_NODE_REPLACEMENT_FAIL_FAST,
    TAS_HANDLE_OVERLAPPING_FLAVORS,
    TAS_LEADER_POD_SET_FEASIBILITY,
    TAS_MULTI_LAYER_TOPOLOGY,
    TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS,
    TAS_PARTIAL_SLICES,
    TAS_PROFILE_MIXED,
    TAS_RECOMPUTE_ASSIGNMENT_WITHIN_SCHEDULING_CYCLE,
    TAS_REPLACE_MULTIPLE_FAILED_NODES,
    TAS_RESPECT_NODE_AFFINITY_PREFERRED,
    TAS_TOPOLOGY_SPREADING,
)
from projections.host_ports import Holder, HostPort, conflict, held_on
from projections.queue_order import QueueOrder
from projections.secondpass import delayed_pod_sets, pod_sets_on_node
from projections.topology import TASSnapshots, tas_snapshots, workload_tas_usage
from projections.workloads import RESERVED, PodSetInfo, WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext

TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
ELASTIC_REQUIRED_TOPOLOGY = "required topology is not supported with ElasticJobsViaWorkloadSlices"
"""Kueue's error for an elastic workload's pod set asking for a required topology, under the gate."""


class CycleTopology:
    """The TAS snapshots one cycle works on, built on first use (cycles without TAS never build them), and the
    feature gates placement reads."""

    __slots__ = ("_snaps", "_state", "admitted", "elastic", "options", "recompute", "spreading_memo")

    def __init__(self, state, config=None) -> None:
        self._state = state
        self._snaps: TASSnapshots | None = None
        options = tas_options(config, state)
        if options.library is not None:  # the cycle's own copy: :meth:`charge` adds to it
            options = msgspec.structs.replace(options, library=msgspec.structs.replace(
                options.library, holders=dict(options.library.holders)))
        self.options = options
        self.recompute = config is None or config.gate(TAS_RECOMPUTE_ASSIGNMENT_WITHIN_SCHEDULING_CYCLE)
        """``TASRecomputeAssignmentWithinSchedulingCycle``: an entry whose placement an earlier entry of the cycle
        took is assigned again with its nominated flavors pinned (``cycle._recompute_for_topology``) and goes on
        as that says; off, it is skipped until the next cycle."""
        self.elastic = config is not None and config.gate(ELASTIC_JOBS_VIA_WORKLOAD_SLICES) \
            and config.gate(ELASTIC_JOBS_VIA_WORKLOAD_SLICES_WITH_TAS)
        """``ElasticJobsViaWorkloadSlicesWithTAS``: a replacement slice is placed around the slice it replaces
        (:func:`released`, :func:`previous`); off, that slice's pods are counted taken like any other's."""
        self.admitted: dict[str, list[WorkloadInfo]] = {}
        """Under TASTopologySpreading, by ClusterQueue, the workloads this cycle reserved quota for, with their
        admission: a later entry of the queue (FairSharingRefill) counts them, as Kueue's snapshot holds them."""
        self.spreading_memo = spreading.SpreadingMemo()
        """Under TASTopologySpreading, the annotations parsed and the assignments decoded this cycle."""

    def reserved(self, cq: str, wl: WorkloadInfo, admission: o.Admission) -> None:
        """Record that the cycle reserved quota for ``wl`` with ``admission`` in ``cq`` (only under
        TASTopologySpreading, whose counts read it)."""
        if self.options.spreading:
            self.admitted.setdefault(cq, []).append(msgspec.structs.replace(wl, admission=admission))

    @property
    def snapshots(self) -> TASSnapshots:
        if self._snaps is None:
            self._snaps = tas_snapshots(self._state, self.options.overlapping_flavors, self.options.library is not None)
        return self._snaps

    def ports_free(self, req: PodSetRequest, placement: Placement, victims: Sequence[WorkloadInfo] = ()) -> bool:
        """Whether no pod of ``req`` placed as ``placement`` would want a host port already held on its node (the
        ``victims``' released); always true without SchedulerLibraryIntegration or below another lowest level."""
        library = self.options.library
        if library is None or not req.host_ports or not placement.levels or placement.levels[-1] != HOSTNAME:
            return True
        gone = library.released | frozenset(v.key for v in victims)
        return not any(conflict(req.host_ports, held_on(library.holders, values[-1], simulate_empty=False,
                                                        released=gone))
                       for values, count in placement.domains if count > 0 and values)

    def charge(self, owner: str, placements: list[tuple[str, PodSetRequest, Placement]]) -> None:
        """Charge workload ``owner``'s ``placements`` for the rest of the cycle: their usage and, under
        SchedulerLibraryIntegration, the host ports of their pods on the nodes of a hostname-level placement."""
        for flavor, req, placement in placements:
            self.snapshots.charge(flavor, placement.domains, req.per_pod())
        library = self.options.library
        if library is None:
            return
        for _, req, placement in placements:
            if req.host_ports and placement.levels and placement.levels[-1] == HOSTNAME:
                hold_ports(library.holders, owner, req.host_ports, placement)


def hold_ports(holders: dict[str, tuple[Holder, ...]], owner: str, ports: tuple[HostPort, ...],
               placement: Placement) -> None:
    """``owner``'s pods, each taking ``ports``, now hold them on the nodes ``placement`` (hostname level) names."""
    for values, count in placement.domains:
        if count > 0 and values:
            holders[values[-1]] = (*holders.get(values[-1], ()), (owner, ports))


def tas_options(config, state=None) -> TASOptions:
    """The placement options a Kueue Configuration's feature gates set (Kueue's defaults without one); under
    SchedulerLibraryIntegration, with the host ports ``state``'s bound pods hold."""
    if config is None:
        return TASOptions()
    library = None
    if config.gate(SCHEDULER_LIBRARY_INTEGRATION):
        library = NodePorts(holders=node_ports(state) if state is not None else {})
    devices = None
    if state is not None and config.gate(KUEUE_DRA_DEVICE_FEASIBILITY):
        taints = config.gate(KUEUE_DRA_INTEGRATION_DEVICE_TAINTS)
        devices = LazyDeviceWorld(lambda: device_world(state, taints))  # built by the first placement checking claims
    return TASOptions(balanced=config.gate(TAS_BALANCED_PLACEMENT), multi_layer=config.gate(TAS_MULTI_LAYER_TOPOLOGY),
                      overlapping_flavors=config.gate(TAS_HANDLE_OVERLAPPING_FLAVORS),
                      profile_mixed=config.gate(TAS_PROFILE_MIXED),
                      hostname_prefix_encoding=config.gate(TAS_ASSIGNMENTS_ENCODING_BY_HOSTNAME_PREFIX),
                      node_affinity_preferred=config.gate(TAS_RESPECT_NODE_AFFINITY_PREFERRED),
                      node_feasibility=config.gate(TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS),
                      partial_slices=config.gate(TAS_PARTIAL_SLICES),
                      leader_feasibility=config.gate(TAS_LEADER_POD_SET_FEASIBILITY),
                      spreading=config.gate(TAS_TOPOLOGY_SPREADING), library=library, devices=devices)


def device_world(state, taints: bool) -> DeviceWorld:
    """Under KueueDRADeviceFeasibility, what ``state`` holds of devices, DeviceClasses, ResourceClaimTemplates,
    ResourceClaims (the devices they hold) and DeviceTaintRules, which TAS checks a pod set's claims against
    (:mod:`kueue_es.scheduler.tas.devices`; ``taints``: KueueDRAIntegrationDeviceTaints)."""
    slices = state.resource_slices
    drivers = sorted({rs.spec.driver for rs in slices.by_name.values()})
    return world_of((p for d in drivers for p in slices.pools(d)),
                    (state.device_classes[k] for k in sorted(state.device_classes)),
                    (state.claim_templates[k] for k in sorted(state.claim_templates)),
                    (state.resource_claims[k] for k in sorted(state.resource_claims)), taints,
                    (state.device_taint_rules[k] for k in sorted(state.device_taint_rules)))


def node_ports(state) -> dict:
    """Node -> the host ports taken on it: by the pods Kueue anticipates for the workloads holding quota with a
    hostname-level topology assignment, and by the bound pods of any other owner
    (:mod:`projections.assumed_ports`); remembered until a pod holding one or the charged TAS usage changes."""
    tas = state.tas
    key = (tas.host_ports.generation, tas.usage_generation)
    memo = state.derived.get("host-ports")
    if memo is None or memo[0] != key:
        memo = state.derived["host-ports"] = (key, holders_by_node(tas.host_ports, state.workloads, tas.charged))
    return memo[1]


def without_victims(options: TASOptions, victims: list[WorkloadInfo]) -> TASOptions:
    """``options`` with the host ports of ``victims``' pods released, as Kueue's simulator preempts their pods."""
    if options.library is None or not victims:
        return options
    released = options.library.released | frozenset(v.key for v in victims)
    return msgspec.structs.replace(options, library=msgspec.structs.replace(options.library, released=released))


def _tas_flavor(info: ClusterQueueInfo, flavors: dict[str, str]) -> tuple[str | None, str]:
    """The one TAS flavor among a pod set's flavors, or Kueue's error when there is none or several."""
    tas = sorted({f for f in flavors.values() if f in info.tas_levels})
    if not tas:
        return None, "no TAS flavor assigned"
    if len(tas) > 1:
        return None, f"more than one TAS flavor assigned: {', '.join(tas)}"
    if info.tas_levels[tas[0]] is None:
        return None, "workload requires Topology, but there is no TAS cache information"
    return tas[0], ""


def _delayed(info: ClusterQueueInfo, flavor: str) -> bool:
    """A ProvisioningRequest check covers the flavor, or the queue has a MultiKueue check (a manager, where the
    topology is placed on the worker and never here): its topology waits (Kueue's delay rule)."""
    return bool(info.multikueue_checks) or any(not on or flavor in on for _, on in info.provisioning_checks)


def _request(wl: WorkloadInfo, ps: PodSetInfo, count: int, info: ClusterQueueInfo,
             updates: list[o.PodSetUpdate] | None = None) -> PodSetRequest:
    req = PodSetRequest.of(ps, count, implied=not explicit(ps.topology) and info.tas_only, namespace=wl.namespace)
    if not updates:
        return req
    selector = dict(req.node_selector)
    tolerations = list(req.tolerations)
    for u in updates:
        selector.update(u.node_selector)
        tolerations.extend(t for t in u.tolerations if t not in tolerations)
    return msgspec.structs.replace(req, node_selector=tuple(sorted(selector.items())),
                                   tolerations=tuple(tolerations))


def released(ctx: CycleContext, replaced: WorkloadInfo | None) -> list[tuple[str, str, tuple[tuple[str, int], ...]]]:
    """The TAS usage of the slice being replaced, lifted while its replacement is placed (and, once that is
    admitted, for the rest of the cycle) under ElasticJobsViaWorkloadSlicesWithTAS; none otherwise."""
    if replaced is None or not ctx.topology.elastic:
        return []
    return list(workload_tas_usage(replaced))


def previous(ctx: CycleContext, wl: WorkloadInfo, replaced: WorkloadInfo | None) -> dict[str, Placement] | None:
    """By pod-set name, the placements of the slice an elastic workload replaces, which its own start from, under
    ElasticJobsViaWorkloadSlicesWithTAS (Kueue's ``getPreviousTopologyAssignment``); None otherwise."""
    if replaced is None or not ctx.topology.elastic or not wl.elastic or replaced.admission is None:
        return None
    out: dict[str, Placement] = {}
    for psa in replaced.admission.pod_set_assignments:
        if psa.topology_assignment is not None:
            try:
                out[psa.name] = Placement.decode(psa.topology_assignment)
            except InvalidInput:
                continue  # a malformed assignment in the log: the pod set is placed anew
    return out


def with_spreading(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo,
                   wanted: list[tuple[str, PodSetRequest]],
                   gone: Collection[str] = ()) -> list[tuple[str, PodSetRequest]]:
    """``wanted`` with what each pod set's topology spreading rules see in its flavor, under TASTopologySpreading
    (:mod:`kueue_es.scheduler.tas.spreading`): the workloads holding quota in ``info``'s ClusterQueue (those this
    cycle reserved for too), but ``wl`` itself and those in ``gone`` (preemption targets), as Kueue's snapshot has
    them. Unchanged with the gate off."""
    if not ctx.topology.options.spreading:
        return wanted
    by_name = {ps.name: ps for ps in wl.pod_sets}
    others: list[WorkloadInfo] | None = None
    out: list[tuple[str, PodSetRequest]] = []
    for flavor, req in wanted:
        ps = by_name.get(req.name)
        memo = ctx.topology.spreading_memo
        spec = memo.spec(ps.spreading) if ps is not None else None
        if spec is None or flavor not in ctx.topology.snapshots:
            out.append((flavor, req))
            continue
        if others is None:
            others = [w for w in ctx.reserving_in(info.name) + ctx.topology.admitted.get(info.name, [])
                      if w.key != wl.key and w.key not in gone]
        occ = spreading.occupancy(ctx.topology.snapshots[flavor].tree, flavor, spec,
                                  spreading.group_key(ps.name, ps.topology), wl.namespace,  # type: ignore[union-attr]
                                  spreading.job_uid(wl.labels), others, memo)
        out.append((flavor, msgspec.structs.replace(req, spreading=occ)))
    return out


def place_nominated(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment,
                    replaced: WorkloadInfo | None = None) -> None:
    """Kueue's TAS step of flavor assignment: place the TAS pod sets of ``a`` (or mark them delayed) and turn the
    assignment's mode as a placement failure requires. ``replaced``: the elastic Job slice ``wl`` replaces."""
    if a.mode == Mode.NO_FIT or not info.tas_levels:
        return
    wanted: list[tuple[str, PodSetRequest]] = []
    results: dict[str, PodSetResult] = {}
    elastic = ctx.topology.elastic and wl.elastic
    for ps, res in zip(wl.pod_sets, a.pod_sets, strict=False):
        res.topology = None
        res.delayed = False
        if res.count == 0 or not wants_tas(ps, info.tas_only):
            continue
        if elastic and ps.topology is not None and ps.topology.required is not None:
            _no_fit(a, res, ELASTIC_REQUIRED_TOPOLOGY, "NoMatchingFlavor")
            continue  # as Kueue, each pod set's error is recorded before the workload is given up
        flavor, error = _tas_flavor(info, res.flavors)
        if flavor is None:
            _no_fit(a, res, error, "NoMatchingFlavor")
            continue
        if _delayed(info, flavor):
            res.delayed = True
            continue
        res.tas_flavor = flavor
        wanted.append((flavor, _request(wl, ps, res.count, info)))
        results[ps.name] = res
    if not wanted or a.mode == Mode.NO_FIT:
        return
    wanted = with_spreading(ctx, wl, info, wanted)
    snaps = ctx.topology.snapshots
    lifted = released(ctx, replaced)
    before = previous(ctx, wl, replaced)
    snaps.charge_usage(lifted, -1)
    try:
        _place_nominated(ctx, a, wanted, results, before)
    finally:
        snaps.charge_usage(lifted, 1)


def _place_nominated(ctx: CycleContext, a: Assignment, wanted: list[tuple[str, PodSetRequest]],
                     results: dict[str, PodSetResult], before: dict[str, Placement] | None) -> None:
    snaps = ctx.topology.snapshots
    if a.mode == Mode.FIT:
        found = place_workload(snaps, wanted, options=ctx.topology.options, previous=before)
        if found.ok:
            for name, placement in found.placements.items():
                results[name].topology = placement
            return
        a.mode = Mode.PREEMPT
        failed = results[found.failed]  # type: ignore[index]
        failed.demote(Granular.PREEMPT)  # each of its resources, as Kueue turns all of the pod set's flavors
        failed.reasons = [found.message]
        a.message = _message(a)
    empty = place_workload(snaps, wanted, simulate_empty=True, options=ctx.topology.options, previous=before)
    if not empty.ok:
        _no_fit(a, results[empty.failed], empty.message, TOPOLOGY_PLACEMENT_FAILED)  # type: ignore[index]
        return
    for res in results.values():
        res.demote(Granular.PREEMPT)  # every resource of a TAS pod set then counts as needing preemption (Kueue's)


def keep_waited(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment,
                waited: dict[str, ev.WaitedPodSet], replaced: WorkloadInfo | None = None) -> None:
    """blockAdmission's held entry, nominated (a Fit, :func:`place_nominated` done) on the pod-set counts and
    flavors it waited with: its pod sets take back the placements they waited with, as Kueue's scheduler admits
    the entry on the assignment it computed before it waited, topology included, never placing it again. All or
    none: only when every pod set placed here waited with a placement of the same levels, and those placements,
    taken together, are still current leaves with room for their pods (a node gone or filled meanwhile: the new
    placements stay)."""
    kept: list[tuple[PodSetResult, str, dict[str, int], Placement]] = []
    for ps, res in zip(wl.pod_sets, a.pod_sets, strict=False):
        if res.topology is None:
            continue
        w = waited.get(ps.name)
        if w is None or not w.topology_domains or w.topology_levels != res.topology.levels:
            return
        kept.append((res, res.tas_flavor, _request(wl, ps, res.count, info).per_pod(),
                     msgspec.structs.replace(res.topology, domains=w.topology_domains)))
    if not kept:
        return
    snaps = ctx.topology.snapshots
    lifted = released(ctx, replaced)
    snaps.charge_usage(lifted, -1)
    charged: list[tuple[str, Placement, dict[str, int]]] = []
    fits = True
    for _, flavor, per_pod, placement in kept:
        if not snaps[flavor].fits(placement.domains, per_pod):
            fits = False
            break
        snaps.charge(flavor, placement.domains, per_pod)
        charged.append((flavor, placement, per_pod))
    for flavor, placement, per_pod in charged:
        snaps.charge(flavor, placement.domains, per_pod, -1)
    snaps.charge_usage(lifted, 1)
    if fits:
        for res, _, _, placement in kept:
            res.topology = placement


def _no_fit(a: Assignment, res: PodSetResult, message: str, reason: str) -> None:
    res.mode = Granular.NO_FIT
    res.reasons = [message]
    a.mode = Mode.NO_FIT
    a.reason = reason
    a.message = _message(a)


def _message(a: Assignment) -> str:
    return "; ".join(f"couldn't assign flavors to pod set {r.name}: {', '.join(sorted(r.reasons))}"
                     for r in a.listed() if r.mode != Granular.FIT and r.reasons)


def tas_requests(wl: WorkloadInfo, info: ClusterQueueInfo,
                  a: Assignment) -> list[tuple[str, PodSetRequest, PodSetResult]]:
    """(TAS flavor, request, result) of the pod sets :func:`place_nominated` found a TAS flavor for (not delayed)."""
    return [(res.tas_flavor, _request(wl, ps, res.count, info), res)
            for ps, res in zip(wl.pod_sets, a.pod_sets, strict=False)
            if res.tas_flavor and not res.delayed and res.count > 0]


def place_preempting(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment,
                     victims: list[WorkloadInfo], replaced: WorkloadInfo | None = None) -> None:
    """Kueue's TAS update of a Preempt nomination: the placement the workload would get once ``victims`` are gone
    (with none, on an empty topology). The cycle reserves it (:func:`reserve_preempting`, or with the capacity a
    preemptor without candidates holds back), so a lower priority later in the cycle cannot take those domains
    only to be preempted by this workload in the next one. A failed placement leaves the pod set without one."""
    if a.mode != Mode.PREEMPT or not info.tas_levels:
        return
    wanted = tas_requests(wl, info, a)
    if not wanted:
        return
    snaps = ctx.topology.snapshots
    requests = with_spreading(ctx, wl, info, [(f, req) for f, req, _ in wanted], {v.key for v in victims})
    before = previous(ctx, wl, replaced)
    if victims:
        usage = [u for v in victims for u in workload_tas_usage(v)] + released(ctx, replaced)
        snaps.charge_usage(usage, -1)
        try:
            found = place_workload(snaps, requests, options=without_victims(ctx.topology.options, victims),
                                   previous=before)
        finally:
            snaps.charge_usage(usage, 1)
    else:
        found = place_workload(snaps, requests, simulate_empty=True, options=ctx.topology.options, previous=before)
    for _, req, res in wanted:
        res.topology = found.placements.get(req.name)


def reserve_preempting(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment,
                       victims: list[WorkloadInfo], replaced: WorkloadInfo | None = None) -> bool:
    """The TAS side of issuing a preemption: with the victims' usage off the cycle's snapshots (as their quota is
    off the cycle's tree), the preemptor's placement must still fit; it is then charged. False, with nothing
    changed, when it no longer fits (an earlier entry of the cycle took its domains). Under
    ElasticJobsViaWorkloadSlicesWithTAS the slice ``wl`` replaces is off for the check too, as Kueue's fit check
    simulates removing it with the targets; it runs on while the victims go, so its usage is then charged again
    beside the preemptor's."""
    usage = [u for v in victims for u in workload_tas_usage(v)]
    placed = [(f, req, res) for f, req, res in tas_requests(wl, info, a) if res.topology is not None]
    if not usage and not placed:
        return True
    snaps = ctx.topology.snapshots
    lifted = released(ctx, replaced)
    snaps.charge_usage(usage + lifted, -1)
    fits = all(snaps[f].fits(res.topology.domains, req.per_pod())  # type: ignore[union-attr]
               and ctx.topology.ports_free(req, res.topology, victims) for f, req, res in placed)  # type: ignore[arg-type]
    snaps.charge_usage(lifted, 1)
    if not fits:
        snaps.charge_usage(usage, 1)
        return False
    ctx.topology.charge(wl.key, [(f, req, res.topology) for f, req, res in placed])  # type: ignore[misc]
    return True


def reserve_placement(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment) -> None:
    """Charge the placements of ``a`` as they are (a preemptor without candidates holding back capacity)."""
    placed = [(f, req, res.topology) for f, req, res in tas_requests(wl, info, a) if res.topology is not None]
    if placed:
        ctx.topology.charge(wl.key, placed)  # type: ignore[arg-type]


def place_at_admission(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment,
                       replaced: WorkloadInfo | None = None) -> str:
    """Re-check the nominated placements against what this cycle admitted before (its usage and host ports) and
    charge them; returns a failure message, with nothing charged, or "" when placed. What no longer fits is not
    placed again here: under ``TASRecomputeAssignmentWithinSchedulingCycle`` the cycle assigns the whole entry
    again, flavors pinned (``cycle._recompute_for_topology``), as Kueue does. Under
    ElasticJobsViaWorkloadSlicesWithTAS the usage of the slice ``wl`` replaces is lifted first and, once ``wl`` is
    placed, stays lifted: its pods are the new placement's."""
    lifted = released(ctx, replaced)
    snaps = ctx.topology.snapshots
    snaps.charge_usage(lifted, -1)
    failure = _place_at_admission(ctx, wl, info, a, replaced)
    if failure:
        snaps.charge_usage(lifted, 1)
    return failure


def _place_at_admission(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, a: Assignment,
                        replaced: WorkloadInfo | None) -> str:
    placed = [(ps, res) for ps, res in zip(wl.pod_sets, a.pod_sets, strict=False) if res.topology is not None]
    if not placed:
        return ""
    snaps = ctx.topology.snapshots
    requests = [(res.tas_flavor, _request(wl, ps, res.count, info)) for ps, res in placed]
    if not all(snaps[f].fits(res.topology.domains, req.per_pod())  # type: ignore[union-attr]
               and ctx.topology.ports_free(req, res.topology)  # type: ignore[arg-type]
               for (f, req), (_, res) in zip(requests, placed, strict=True)):
        return "the nominated topology assignment no longer fits"
    ctx.topology.charge(wl.key, [(f, req, res.topology) for (f, req), (_, res) in zip(requests, placed, strict=True)])
    return ""


def topology_fields(res: PodSetResult) -> dict:
    """The TAS fields of a pod set's assignment (none for a pod set without TAS)."""
    if res.topology is not None:
        return {"topology_assignment": res.topology.encode()}
    if res.delayed:
        return {"delayed_topology_request": "Pending"}
    return {}


# --- the second pass ------------------------------------------------------------------------------------------------


def second_pass_due(state, now: int, order: QueueOrder) -> list[WorkloadInfo]:
    """Workloads whose second pass is due, quota holders first as Kueue orders them (all hold quota)."""
    wls = [state.workloads[k] for k in state.second_pass_due.due(now) if k in state.workloads]
    return sorted(wls, key=lambda w: (order.rank(w.priority), order.time(w), w.uid, w.key))


def second_pass(ctx: CycleContext, wl: WorkloadInfo, base: dict) -> list[ev.Decision]:
    """One second-pass attempt: place delayed topology requests (then Admitted), or replace the first unhealthy
    node in place — or, for a workload owned by a single Pod under SkipReassignmentForPodOwnedWorkloads, keep
    its placement (:func:`_keep`). A failure keeps quota and conditions and is retried after a backoff — except a
    node that cannot be replaced, which evicts the workload under TASFailedNodeReplacementFailFast
    (:func:`_no_replacement`)."""
    adm = wl.admission
    assert adm is not None
    state = ctx.state
    cq = adm.cluster_queue
    info = state.cq_info(cq)
    if info is None:
        return [ev.SecondPassFailed(key=wl.key, uid=wl.uid, message=f"ClusterQueue {cq} not found", **base)]
    if info.inactive is not None:
        return [ev.SecondPassFailed(key=wl.key, uid=wl.uid, message=f"ClusterQueue {cq} is inactive", **base)]
    if wl.phase == RESERVED:
        return _place_delayed(ctx, wl, info, adm, base)
    if wl.unhealthy_nodes and wl.pod_owned and ctx.config.gate(SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS):
        return _keep(wl, base)
    if wl.unhealthy_nodes:
        return _replace(ctx, wl, info, adm, base)
    return []  # the fold keeps a workload due only while it needs a pass: nothing to do otherwise


def _updates(wl: WorkloadInfo, pod_set: str) -> list[o.PodSetUpdate]:
    """The podSetUpdates of the Ready checks for ``pod_set``, in check-name order."""
    out = []
    for name in sorted(wl.check_states):
        cs = wl.check_states[name]
        if cs.state == "Ready":
            out.extend(u for u in cs.pod_set_updates if u.name == pod_set)
    return out


def _pod_set(wl: WorkloadInfo, name: str) -> PodSetInfo | None:
    return next((ps for ps in wl.pod_sets if ps.name == name), None)


def _place_delayed(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, adm: o.Admission,
                   base: dict) -> list[ev.Decision]:
    """Place the pod sets whose topology waited for the checks, then admit. Not fitting, the pass fails — having
    first preempted, where the ClusterQueue's policies allow, the workloads whose removal lets them be placed, as
    Kueue's second pass goes through the ordinary Preempt path (:func:`kueue_es.scheduler.replacepreempt.\
preempt_for_delayed`)."""
    wanted: list[tuple[str, PodSetRequest]] = []
    frs: list[str] = []
    for psa in delayed_pod_sets(adm):
        ps = _pod_set(wl, psa.name)
        flavor, error = _tas_flavor(info, psa.flavors)
        if ps is None or flavor is None:
            return [ev.SecondPassFailed(key=wl.key, uid=wl.uid, message=error or f"pod set {psa.name} not found",
                                        **base)]
        wanted.append((flavor, _request(wl, ps, psa.count if psa.count is not None else ps.count, info,
                                        _updates(wl, psa.name))))
        frs.extend(f"{f}/{r}" for r, f in psa.flavors.items())
    wanted = with_spreading(ctx, wl, info, wanted)  # as in the first pass: Kueue's second pass spreads alike
    found = place_workload(ctx.topology.snapshots, wanted, options=ctx.topology.options)
    if not found.ok:
        from kueue_es.scheduler.replacepreempt import preempt_for_delayed  # it builds on this module

        preempted = preempt_for_delayed(ctx, wl, wanted, frs, found.failed, found.message, base)
        if preempted is not None:
            return preempted
        return [ev.SecondPassFailed(key=wl.key, uid=wl.uid,
                                    message=f"couldn't assign flavors to pod set {found.failed}: {found.message}",
                                    **base)]
    ctx.topology.charge(wl.key, [(f, req, found.placements[req.name]) for f, req in wanted])
    out: list[ev.Decision] = [ev.TopologyAssigned(key=wl.key, uid=wl.uid, pod_set=req.name,
                                                  assignment=found.placements[req.name].encode(), **base)
                              for _, req in wanted]
    out.append(ev.WorkloadAdmitted(key=wl.key, uid=wl.uid, message="The workload is admitted", **base))
    return out


def _replace(ctx: CycleContext, wl: WorkloadInfo, info: ClusterQueueInfo, adm: o.Admission,
             base: dict) -> list[ev.Decision]:
    node = wl.unhealthy_nodes[0]
    requests: list[tuple[str, PodSetRequest, Placement]] = []
    names = set(pod_sets_on_node(adm, node))
    for psa in adm.pod_set_assignments:
        if psa.name not in names:
            continue
        ps = _pod_set(wl, psa.name)
        flavor, error = _tas_flavor(info, psa.flavors)
        if ps is None or flavor is None or psa.topology_assignment is None:
            return _no_replacement(ctx, wl, psa.name, error or f"pod set {psa.name} not found", base)
        req = _request(wl, ps, psa.count if psa.count is not None else ps.count, info, _updates(wl, psa.name))
        requests.append((flavor, req, Placement.decode(psa.topology_assignment)))
    found = replace_in_workload(ctx.topology.snapshots, requests, node, options=ctx.topology.options,
                                listed=listed_beside(wl, ctx.config.gate(TAS_REPLACE_MULTIPLE_FAILED_NODES)))
    if isinstance(found, tuple):
        return _no_replacement(ctx, wl, found[0], found[1].message, base, (requests, node))
    ctx.topology.charge(wl.key, [(f, req, found[req.name].added) for f, req, _ in requests])
    out: list[ev.Decision] = [ev.TopologyAssigned(key=wl.key, uid=wl.uid, pod_set=req.name,
                                                  assignment=found[req.name].placement.encode(), **base)
                              for _, req, _ in requests]
    out.append(ev.UnhealthyNodesChanged(key=wl.key, uid=wl.uid, nodes=list(wl.unhealthy_nodes[1:]), **base))
    return out


def _keep(wl: WorkloadInfo, base: dict) -> list[ev.Decision]:
    """The pod of a workload owned by a single Pod cannot move, and the workload ends with it: a new placement
    would only tell the topology usage that its node is free while the pod still runs there. The placement stays
    (nothing is charged anew) and the node leaves ``unhealthyNodes``, marked kept so that the node controller
    does not list it again before it looks at that node anew."""
    node = wl.unhealthy_nodes[0]
    return [ev.UnhealthyNodesChanged(key=wl.key, uid=wl.uid, nodes=list(wl.unhealthy_nodes[1:]), kept=[node],
                                     **base)]


DEFERRED_REPLACEMENT = "Workload has an unhealthy node, but will fit after in-flight evictions complete"
"""Kueue main's message for a node replacement deferred until the evictions in flight complete."""


def in_flight(state, wl: WorkloadInfo) -> list[WorkloadInfo]:
    """The workloads other than ``wl`` whose eviction is in flight: Evicted in the log while they still hold their
    reservation (their pods have not ended yet), by key."""
    keys = sorted({k for cq in state.reserving for k in state.reserving[cq]})
    return [state.workloads[k] for k in keys
            if k != wl.key and k in state.workloads and state.workloads[k].evicted]


def _after_in_flight(ctx: CycleContext, wl: WorkloadInfo, requests: list[tuple[str, PodSetRequest, Placement]],
                     node: str) -> dict[str, Replacement] | None:
    """``node``'s replacement once the evictions in flight (:func:`in_flight`) complete, or None: their usage taken
    off the cycle's snapshots for the try, then charged back. Their pods stay, with the host ports they hold under
    SchedulerLibraryIntegration: Kueue simulates only the workloads' removal here (``SimulateWorkloadRemoval``), not
    that of their pods, as it does for the targets of a preemption it issues."""
    victims = in_flight(ctx.state, wl)
    if not victims:
        return None
    usage = [u for v in victims for u in workload_tas_usage(v)]
    snaps = ctx.topology.snapshots
    snaps.charge_usage(usage, -1)
    try:
        found = replace_in_workload(snaps, requests, node, options=ctx.topology.options,
                                    listed=listed_beside(wl, ctx.config.gate(TAS_REPLACE_MULTIPLE_FAILED_NODES)))
    finally:
        snaps.charge_usage(usage, 1)
    return None if isinstance(found, tuple) else found


def _no_replacement(ctx: CycleContext, wl: WorkloadInfo, pod_set: str, message: str, base: dict,
                    replacing: tuple[list, str] | None = None) -> list[ev.Decision]:
    """No replacement for the unhealthy node. Under TASFailedNodeReplacementFailFast (on by default) Kueue evicts
    the workload (NodeFailures) — unless the replacement would be found once the evictions already in flight
    complete (:func:`_after_in_flight`): then it defers (Kueue main's ``tryDeferFailedTASReplacement``): the pass
    fails in Kueue's words (:data:`DEFERRED_REPLACEMENT`), preempting nothing, and the placement found is charged
    for the rest of the cycle, as Kueue reserves its net usage, so that no later entry takes it. Without the gate
    the second pass fails: quota, Admitted, placement and
    ``unhealthyNodes`` stay, and the workload is tried again after the second-pass backoff (the fold's
    :func:`projections.secondpass.backoff_ms`), as often as it takes — having first preempted, where its
    ClusterQueue's policies allow, the workloads whose removal makes room for the replacement
    (:mod:`kueue_es.scheduler.replacepreempt`; ``replacing``: the pod sets to move and the node)."""
    failed = ev.SecondPassFailed(key=wl.key, uid=wl.uid,
                                 message=f"couldn't assign flavors to pod set {pod_set}: {message}", **base)
    if (ctx.config.gate(TAS_FAILED_NODE_REPLACEMENT_FAIL_FAST)
            and not within_threshold(wl, ctx.config.gate(TAS_REPLACE_MULTIPLE_FAILED_NODES))):
        found = _after_in_flight(ctx, wl, *replacing) if replacing is not None else None
        if found is not None and replacing is not None:  # deferred: the evictions in flight make room
            ctx.topology.charge(wl.key, [(f, req, found[req.name].added) for f, req, _ in replacing[0]])
            return [ev.SecondPassFailed(key=wl.key, uid=wl.uid, message=DEFERRED_REPLACEMENT, **base)]
        nodes = ",".join(wl.unhealthy_nodes)
        return [ev.WorkloadEvicted(key=wl.key, uid=wl.uid, reason="NodeFailures",
                                   message=f"Workload was evicted as there was no replacement for unhealthy "
                                           f"node(s): {nodes}", **base)]
    if replacing is not None:
        from kueue_es.scheduler.replacepreempt import preempt_for_replacement  # it builds on this module

        preempted = preempt_for_replacement(ctx, wl, replacing[0], replacing[1], pod_set, message, base)
        if preempted is not None:
            return preempted
    return [failed]
