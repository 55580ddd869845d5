"""Flavor assignment: for each pod set, pick a ResourceFlavor per resource group, as Kueue does.

Flavors are tried in the ClusterQueue's order. A flavor must exist, have its taints tolerated and match the
pod set's node selection on the flavor's own label keys. Each (flavor, resource) then gets a mode — Fit,
Preempt (via the preemption oracle) or NoFit — and flavorFungibility decides whether to stop at a flavor or
keep looking for a better one.

The scan resumes where the workload's previous attempt stopped (Kueue's FlavorFungibilityPreserveScanProgress):
each resource group starts one past the last flavor tried, as recorded in ``WorkloadInfo.scan``, unless that
record is stale (:func:`resume_scan`). Each attempt records how far it got (:func:`scan_progress`).

With Kueue's ``FlavorFungibility`` gate off (``CycleContext.fungibility``) the ClusterQueue's
``flavorFungibility`` is not read: each group starts at its first flavor, takes the first one that fits (borrowing
or not) and otherwise keeps the first flavor of the best mode met. No scan position is kept then: every resource
that got a flavor records index 0, as Kueue's assigner leaves it, which still reads as flavors left untried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import objects as o
from kueue_es.scheduler import preemption_config
from kueue_es.scheduler.quota_messages import over_capacity, over_capacity_one_pod, unused_quota
from kueue_es.scheduler.tasflavor import tas_ineligible
from projections.workloads import PodSetInfo, WorkloadInfo, pod_set_usage

if TYPE_CHECKING:
    from events.schema import FlavorScan
    from kueue_es.scheduler.cycle import CycleContext
    from kueue_es.scheduler.tas import Placement
    from projections.cluster import ClusterState
    from projections.clusterqueues import ClusterQueueInfo

NO_MATCHING_FLAVOR, EXCEEDS_MAX_QUOTA, WAITING_FOR_QUOTA = "NoMatchingFlavor", "ExceedsMaxQuota", "WaitingForQuota"
_SEVERITY = {NO_MATCHING_FLAVOR: 3, EXCEEDS_MAX_QUOTA: 2, WAITING_FOR_QUOTA: 1, "TopologyPlacementFailed": 0}


class Mode:
    """External assignment modes, worst first (Kueue's FlavorAssignmentMode). Plain ints: the hot path compares
    them millions of times, and enum member lookups and hashing cost more than the comparisons."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3
    NAMES = ("NoFit", "Preempt", "DeferredFit", "Fit")


class Granular:
    """Internal per-flavor outcome, worst first (plain ints, like :class:`Mode`)."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4
    NAMES = ("noFit", "noCandidates", "preempt", "reclaim", "fit")
    MODE = (Mode.NO_FIT, Mode.PREEMPT, Mode.PREEMPT, Mode.PREEMPT, Mode.FIT)
    """Granular -> the external mode it shows as."""


class PodSetResult:
    """The flavors chosen for one pod set, and how they fit."""

    __slots__ = ("attempts", "borrow", "count", "delayed", "flavors", "frs", "last_tried", "mode", "modes",
                 "name", "no_fit_reason", "plan", "reasons", "requests", "tas_flavor", "topology", "tried")

    def __init__(self, name: str, count: int, requests: dict[str, int]) -> None:
        self.name = name
        self.count = count
        self.flavors: dict[str, str] = {}
        """resource -> flavor."""
        self.frs: dict[str, str] = {}
        """resource -> ``flavor/resource`` of the flavor chosen (the quota key, built once per flavor)."""
        self.requests = requests
        """resource -> total for the pod set."""
        self.mode = _FIT
        """The worst of its resource groups' modes, each its flavor's least preferred resource's under the
        preference (Kueue's representative mode): under ``PreemptionOverBorrowing`` a flavor whose resource
        that needs preemption borrows less than one that fits is Fit as a whole, its resource's own mode in
        ``modes``."""
        self.modes: dict[str, int] = {}
        """resource -> its own mode on the flavor chosen, for the resources that do not simply fit (absent: Fit).
        Kueue keeps a mode per resource, and only the resources whose own mode is Preempt need preemption
        (:meth:`Assignment.needs_preemption_frs`): a resource that fits by borrowing is no reason to preempt."""
        self.borrow = 0
        self.reasons: list[str] = []
        self.no_fit_reason = ""
        self.tried: dict[str, list[str]] = {}
        """resource group (first resource) -> what each flavor tried said; recorded only when the cycle traces
        (``CycleContext.trace``, set by ``explain``)."""
        self.attempts: list[Attempt] | None = None
        """The flavors tried that did not simply fit (a Fit without borrowing says nothing), in the order
        tried, for the QuotaReserved Event's summary (:mod:`kueue_es.scheduler.considered`)."""
        self.plan: _Plan | None = None
        self.topology: Placement | None = None
        """The TAS placement, when the pod set has one (see :mod:`kueue_es.scheduler.tasplace`)."""
        self.tas_flavor = ""
        self.delayed = False
        """The topology request waits for the second pass (a ProvisioningRequest check covers the TAS flavor)."""
        self.last_tried: dict[str, int] | None = None
        """resource -> index of the last flavor tried in its group, for the resources that got a flavor before
        their group's last one (the others reached it: -1): what the next attempt resumes from. With the
        ``FlavorFungibility`` gate off, 0 for every resource that got a flavor (no position is kept)."""

    def __repr__(self) -> str:
        return f"PodSetResult({self.name}, {self.count}, {self.flavors}, {Granular.NAMES[self.mode]})"

    def demote(self, mode: int) -> None:
        """Lower the pod set and every resource it got a flavor for to at most ``mode`` (Kueue turns all of a pod
        set's flavors at once when its topology placement fails or must preempt)."""
        if mode < self.mode:
            self.mode = mode
        modes = self.modes
        for r in self.flavors:
            if mode < modes.get(r, _FIT):
                modes[r] = mode


Attempt = tuple[str, int, int, tuple[str, ...]]
"""One flavor tried for one resource group (Kueue's ``FlavorAssignmentAttempt``): (flavor, granular mode,
borrowing level, its reasons)."""


class Assignment:
    __slots__ = ("borrow", "message", "mode", "order", "pod_sets", "reason", "usage")

    def __init__(self, pod_sets: list[PodSetResult], mode: int, borrow: int, usage: dict[str, int], message: str,
                 reason: str, order: tuple[int, ...] | None = None) -> None:
        self.pod_sets = pod_sets
        """One per pod set, in spec order, cut short after the last pod set tried when one gets no flavor (a
        pod-set group's later members are tried with its first, so they may stand past the failing pod set;
        one standing between, not tried, keeps mode Fit and no reasons: in neither message nor mode)."""
        self.mode = mode
        self.borrow = borrow
        self.usage = usage
        """``flavor/resource`` -> total."""
        self.message = message
        self.reason = reason
        self.order = order
        """:func:`_listing_order` of the workload: None when it is spec order."""

    def listed(self) -> list[PodSetResult]:
        """The pod sets in the order Kueue lists them (:func:`_listing_order`), in the pending message and
        in the admission's ``podSetAssignments``."""
        if self.order is None:
            return self.pod_sets
        n = len(self.pod_sets)
        return [self.pod_sets[k] for k in self.order if k < n]

    def needs_preemption_frs(self) -> dict[str, int]:
        """The flavor-resources whose own mode is Preempt, with the amount requested (Kueue's
        ``flavorResourcesNeedPreemption``): another resource of the same pod set that fits, borrowing or not,
        does not count, so it neither narrows the candidates nor makes the preemptor look as if it borrowed."""
        out: dict[str, int] = {}
        for ps in self.pod_sets:
            modes = ps.modes
            if not modes:
                continue
            for r, f in ps.flavors.items():
                if _EXTERNAL[modes.get(r, _FIT)] == Mode.PREEMPT:
                    fr = f"{f}/{r}"
                    out[fr] = self.usage.get(fr, 0)
        return out


def toleration_matches(t: o.Toleration, taint: o.Taint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.operator == "Exists":
        return not t.key or t.key == taint.key
    return t.key == taint.key and t.value == taint.value


def _affinity_matches(term: o.NodeSelectorTerm, labels: dict[str, str]) -> bool:
    for req in term.match_expressions:
        v = labels.get(req.key)
        match req.operator:
            case "In":
                if v is None or v not in req.values:
                    return False
            case "NotIn":
                if v is not None and v in req.values:
                    return False
            case "Exists":
                if v is None:
                    return False
            case "DoesNotExist":
                if v is not None:
                    return False
            case "Gt" | "Lt":
                try:
                    ok = v is not None and (int(v) > int(req.values[0]) if req.operator == "Gt" else int(v) < int(req.values[0]))
                except (ValueError, IndexError):
                    ok = False
                if not ok:
                    return False
    return True


def _go_taint(taint: o.Taint) -> str:
    """A taint as Kueue's message prints it: Go's ``%s`` of the Taint struct's fields in order (key, value, effect,
    timeAdded; a flavor's taint carries no timeAdded here, which Go prints as ``<nil>``)."""
    return f"{{{taint.key} {taint.value} {taint.effect} <nil>}}"


def flavor_eligible(ps: PodSetInfo, flavor: o.ResourceFlavor | None, name: str) -> str | None:
    """Why ``flavor`` cannot serve ``ps``, or None when it can."""
    if flavor is None:
        return f"flavor {name} not found"
    spec = flavor.spec
    for taint in spec.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_matches(t, taint) for t in ps.tolerations) and not any(
            toleration_matches(t, taint) for t in spec.tolerations
        ):
            return f"untolerated taint {_go_taint(taint)} in flavor {name}"
    keys = spec.node_labels
    for k, v in ps.node_selector:
        if k in keys and keys[k] != v:
            return f"flavor {name} doesn't match node affinity"
    if ps.affinity_terms:
        terms = []
        for term in ps.affinity_terms:
            exprs = [e for e in term.match_expressions if e.key in keys]
            if not exprs:
                terms = []
                break
            terms.append(o.NodeSelectorTerm(match_expressions=exprs))
        if terms and not any(_affinity_matches(t, keys) for t in terms):
            return f"flavor {name} doesn't match node affinity"
    return None


_MODE_NAMES = ("no_fit", "no_candidates", "preempt", "reclaim", "fit")
"""How ``tried`` names a granular mode."""
_NO_FIT, _NO_CANDIDATES, _PREEMPT, _RECLAIM, _FIT = 0, 1, 2, 3, 4
_EXTERNAL = Granular.MODE
_M_FIT = Mode.FIT


def _stop_here(mode: int, borrow: int, ff: o.FlavorFungibility) -> bool:
    if mode <= _NO_CANDIDATES:
        return False
    if (mode == _PREEMPT or mode == _RECLAIM) and ff.when_can_preempt == "TryNextFlavor":
        return False
    if borrow > 0 and ff.when_can_borrow == "TryNextFlavor":
        return False
    return True


def _better(mode: int, borrow: int, best_mode: int, best_borrow: int, ff: o.FlavorFungibility) -> bool:
    if mode == _NO_FIT:
        return False
    if best_mode == _NO_FIT:
        return True
    if (mode == _NO_CANDIDATES) != (best_mode == _NO_CANDIDATES):
        # Kueue v0.20 (#13616): a flavor whose preemption found no victims cannot admit in this attempt, so any
        # flavor that can ranks above it whatever the preference
        return best_mode == _NO_CANDIDATES
    if ff.preference == "PreemptionOverBorrowing":
        return (borrow, -mode) < (best_borrow, -best_mode)
    return (-mode, borrow) < (-best_mode, best_borrow)


class _Plan:
    """What a pod set of a given count asks of one ClusterQueue, independent of quota: its requests, and per
    requested resource (in name order) the resource group covering it and the group's resources it requests.
    Memoised per (pod set, count) on the compiled ClusterQueue, so a cycle does not redo it for every head."""

    __slots__ = ("admissions", "ps", "requests", "steps")

    def __init__(self, info, ps: PodSetInfo, count: int, ignore_undeclared: bool) -> None:
        self.ps = ps
        # exact, as Kueue's Amount multiplies (the follow-up to #15026): a total past int64 no longer
        # saturates onto a quota of MaxInt64; only what is written (resourceUsage, resourceRequests) is capped
        requests = {r: v * count for r, v in ps.requests}
        if info.covers_pods:
            requests["pods"] = count
        self.requests = requests
        """resource -> total for the pod set (shared by every result of this plan: read-only)."""
        self.steps = _steps(info, requests, ignore_undeclared)
        self.admissions: dict[tuple, o.PodSetAssignment | o.Admission] = {}
        """chosen flavors -> the PodSetAssignment written for them; (None, *chosen flavors) -> the whole Admission
        of a one-pod-set workload. Both are immutable, so they are shared."""


def _steps(info, requests: dict[str, int], ignore_undeclared: bool) -> list[tuple[str, object, list[str]]]:
    """Per requested resource (in name order) the resource group covering it and the group's resources asked."""
    steps: list[tuple[str, object, list[str]]] = []
    for r in sorted(requests):
        group = info.group_of.get(r)
        if group is None:
            if requests[r] == 0 or ignore_undeclared:
                continue
            steps.append((r, None, []))
            continue
        steps.append((r, group, [x for x in group.covered if x in requests]))
    return steps


def _plan(info, ps: PodSetInfo, count: int, ignore_undeclared: bool) -> _Plan:
    plans = info.plans
    key = (id(ps), count, ignore_undeclared)  # the plan keeps ``ps`` alive, so its id is not reused meanwhile
    plan = plans.get(key)
    if plan is None or plan.ps is not ps:
        if len(plans) > 4096:
            plans.clear()
        plan = plans[key] = _Plan(info, ps, count, ignore_undeclared)
    return plan


def resume_scan(state: ClusterState, wl: WorkloadInfo, cq: str, preserve: bool = True) -> FlavorScan | None:
    """The scan progress the next attempt of ``wl`` in ClusterQueue ``cq`` resumes from, or None when it starts at
    the first flavors: there is none, or it is stale — the queue's allocatable generation has grown since, and it
    was not recorded by the latest batch of decisions (what Kueue's "current or previous cycle" is here). Without
    ``preserve`` (the ``FlavorFungibilityPreserveScanProgress`` gate off) any growth makes it stale.

    An attempt under the ``FlavorFungibility`` gate off resumes from nothing (:func:`assign_flavors`), but the
    record is still what the scheduler compares a new attempt with."""
    scan = wl.scan
    if scan is None:
        return None
    if scan.generation < state.allocatable_generation(cq) and (not preserve or scan.cycle < state.last_cycle):
        return None
    return scan


def scan_progress(a: Assignment) -> tuple[tuple[tuple[str, int], ...], ...] | None:
    """How far an attempt got (``FlavorScan.tried``), or None when no resource got a flavor. As in Kueue, a pod
    set one of whose resource groups got no flavor keeps nothing (its other groups start over too); one whose
    flavors were all chosen keeps them even when its placement failed afterwards (TAS)."""
    tried = tuple(_progress(ps) for ps in a.pod_sets)
    return tried if any(tried) else None


def _progress(ps: PodSetResult) -> tuple[tuple[str, int], ...]:
    flavors = ps.flavors
    if not flavors or ps.plan is None or any(r not in flavors for r, _, _ in ps.plan.steps):
        return ()
    last = ps.last_tried
    return tuple(sorted((r, last.get(r, -1) if last else -1) for r in flavors))


def scan_length(a: Assignment) -> int:
    """How many attempts a pass over the flavors of ``a``'s pod sets may take: one per flavor of every resource
    group each pod set asks for (a longer pass has gone round some group again)."""
    n = 0
    for ps in a.pod_sets:
        if ps.plan is not None:
            groups = {id(g): len(g.flavors) for _, g, _ in ps.plan.steps if g is not None}
            n += sum(groups.values())
    return max(n, 1)


def _held_before(replaced: WorkloadInfo, from_zero: bool) -> dict[str, tuple[dict[str, str], dict[str, int]]]:
    """What each pod set of the replaced slice holds (:func:`projections.workloads.pod_set_usage`), less, under
    ``ElasticJobsViaWorkloadSlicesFlavorChangeFromZero`` (``from_zero``), the pod sets it ran no pods of: those
    bind the replacement to no flavor (Kueue v0.20's #16400; off, the flavors such a pod set got, holding 0 of them,
    still bind it)."""
    held = pod_set_usage(replaced)
    if not from_zero or replaced.admission is None:
        return held
    counts = {ps.name: ps.count for ps in replaced.pod_sets}
    for psa in replaced.admission.pod_set_assignments:
        if (psa.count if psa.count is not None else counts.get(psa.name, 0)) == 0:
            held.pop(psa.name, None)
    return held


def assign_flavors(ctx: CycleContext, wl: WorkloadInfo, cq_name: str, counts: list[int] | None = None,
                   only: dict[str, dict[str, str]] | None = None, info: ClusterQueueInfo | None = None,
                   replaced: WorkloadInfo | None = None) -> Assignment:
    """Assign flavors to every pod set of ``wl`` in ClusterQueue ``cq_name`` (counts override for partial admission).

    ``only`` pins each pod set's resources to the flavors nominated earlier in the cycle (pod set -> resource ->
    flavor), as Kueue does when it recomputes an entry whose preemption targets overlap another's.

    ``replaced`` is the elastic Job slice ``wl`` replaces (ElasticJobsViaWorkloadSlices), holding quota in
    ``cq_name``: a pod set it also has keeps that pod set's flavors (any other flavor is NoFit, "could not assign
    <flavor> flavor since the original workload is assigned: <flavor>"; not one the old slice ran no pods of, under
    ``ElasticJobsViaWorkloadSlicesFlavorChangeFromZero``: :func:`_held_before`) and asks only for what it holds beyond the
    old slice's, so the assignment's ``usage`` is that difference while its pod sets' requests stay whole.

    A pod set with no pods (``count`` 0, as partial admission may cut it) gets flavors too, asking 0 of them
    (:func:`_assign_idle_group`; in a pod-set group with pods, the group's).

    Resources are taken in name order within a pod set, pod sets in group order (:func:`_listing_order`: a
    pod-set group where its first member stands, its members together); as in Kueue, the first resource group
    that gets no flavor ends the attempt, and the message joins the reasons of the pod sets tried until then,
    in that order. Each resource group's scan starts where the previous attempt left it (from the first
    flavor when recomputing with ``only``, or with the ``FlavorFungibility`` gate off)."""
    if info is None:
        info = ctx.info(cq_name)
    resume = resume_scan(ctx.state, wl, cq_name, ctx.preserve_scan) \
        if wl.scan is not None and only is None and ctx.fungibility else None
    node = ctx.tree.cluster_queues[cq_name]
    ignore_undeclared = ctx.ignore_undeclared
    held_before = _held_before(replaced, ctx.flavor_change_from_zero) if replaced is not None else None
    assumed: dict[str, int] = {}
    results: list[PodSetResult] = []
    group_flavors: dict[str, dict[str, str]] = {}
    groups = _group_members(wl)
    reached = -1  # the highest pod-set index tried so far (a group's later members with its first)
    for i, ps in enumerate(wl.pod_sets):
        count = counts[i] if counts is not None else ps.count
        res = PodSetResult(ps.name, count, {})
        res.plan = _plan(info, ps, count, ignore_undeclared)
        res.requests = res.plan.requests
        results.append(res)
    for i, ps in enumerate(wl.pod_sets):
        res = results[i]
        count, plan, requests = res.count, res.plan, res.requests
        assert plan is not None
        gname = group_name(ps)
        members = groups[gname] if gname is not None else [i]
        if members[0] != i:
            continue  # placed with its group's first member
        reached = max(reached, members[-1])
        idle = all(results[k].count == 0 for k in members)
        probe = _probe(info, [wl.pod_sets[k] for k in members]) if idle else None
        steps, gres, peers, lead = plan.steps, res, None, i
        if len(members) > 1:  # the group shares one flavor assignment over its members' summed requests, a member
            # with no pods asking 0 of each resource it requests (so it gets the group's flavor for those too)
            requests = dict(requests)
            for k in members[1:]:
                for r, v in results[k].requests.items():
                    requests[r] = requests.get(r, 0) + v
            steps = _steps(info, requests, ignore_undeclared)
            gres = PodSetResult(ps.name, count, requests)
            peers = [wl.pod_sets[k] for k in members]
            lead = next((k for k in members if results[k].count > 0), i)
        # an elastic slice's group keeps what its first member with pods holds (kueue-es's reading; Kueue checks
        # every member against the replaced slice)
        before = held_before.get(wl.pod_sets[lead].name) if held_before is not None else None
        for r, group, wanted in steps:
            if r in gres.flavors:
                continue
            if group is None:
                gres.mode = _NO_FIT
                gres.reasons[:] = [f"resource {r} unavailable in ClusterQueue"]  # alone, as below
                gres.no_fit_reason = _worse(gres.no_fit_reason, NO_MATCHING_FLAVOR)
                break
            pinned = _pinned(only, [results[k].name for k in members], r) if only is not None else None
            start = 0
            if resume is not None and i < len(resume.tried):
                start = dict(resume.tried[i]).get(r, -1) + 1
            if probe is None:
                _assign_group(ctx, wl, node, info, ps, group, wanted, requests, assumed, gres, pinned, start, before,
                              peers=peers)
            else:
                _assign_idle_group(ctx, wl, node, info, ps, group, wanted, requests, assumed, gres, pinned, start,
                                   before, probe, peers)
            if gres.mode == _NO_FIT:
                break  # as Kueue: the first resource group without a flavor fails the pod set
        if gname is not None and len(members) > 1:
            group_flavors[gname] = _share(gres, [results[k] for k in members[1:]], res)
        if res.mode == _NO_FIT:
            del results[reached + 1:]  # ... and the workload: pod sets past the last one tried are not tried
            break
        if idle:
            continue  # pod sets with no pods hold no quota, whatever flavor they got
        for r, fr in gres.frs.items():
            assumed[fr] = assumed.get(fr, 0) + requests[r] - (before[1].get(r, 0) if before is not None else 0)
    _inherit_group_flavors(wl, results, group_flavors, info)
    order = _listing_order(wl, groups)
    if len(results) == 1:
        r0 = results[0]
        mode, borrow = _EXTERNAL[r0.mode], r0.borrow
    else:
        mode = min((_EXTERNAL[r.mode] for r in results), default=_M_FIT)
        borrow = max((r.borrow for r in results), default=0)
    if mode == _M_FIT:
        return Assignment(results, mode, borrow, assumed, "", WAITING_FOR_QUOTA, order)
    a = Assignment(results, mode, borrow, assumed, "", WAITING_FOR_QUOTA, order)
    a.message = "; ".join(f"couldn't assign flavors to pod set {r.name}: {', '.join(sorted(r.reasons))}"
                          for r in a.listed() if r.mode != _FIT and r.reasons)
    reason = ""
    for r in results:
        if r.mode == _NO_FIT:
            reason = _worse(reason, r.no_fit_reason or NO_MATCHING_FLAVOR)
    a.reason = reason or WAITING_FOR_QUOTA
    return a


def _listing_order(wl: WorkloadInfo, groups: dict[str, list[int]]) -> tuple[int, ...] | None:
    """The workload's pod-set indices in the order Kueue's flavor assigner lists its pod sets, or None when
    that is spec order (``groups``: :func:`_group_members`). Kueue takes a pod-set group where its first
    member stands, with all its members together (in spec order), and keeps that order in the assignment:
    the pending message joins the pod sets' reasons in it and the admission's ``podSetAssignments`` are
    written in it, so a group whose members are not adjacent in the spec (leader, other, worker) is listed
    leader, worker, other."""
    if all(m[-1] - m[0] == len(m) - 1 for m in groups.values()):
        return None  # every group's members are adjacent: spec order
    out: list[int] = []
    for i, ps in enumerate(wl.pod_sets):
        name = group_name(ps)
        if name is None:
            out.append(i)
        elif groups[name][0] == i:
            out.extend(groups[name])
    return tuple(out)


def group_name(ps: PodSetInfo) -> str | None:
    """The pod set's pod-set group (``topologyRequest.podSetGroupName``), if any."""
    return ps.topology.pod_set_group_name if ps.topology is not None else None


def _group_members(wl: WorkloadInfo) -> dict[str, list[int]]:
    """Pod-set group name -> the indices of all its members, in pod-set order, those with no pods included: Kueue
    assigns a group one flavor over every member's requests (a member with no pods asking 0), placed at its first
    member."""
    out: dict[str, list[int]] = {}
    for i, ps in enumerate(wl.pod_sets):
        name = group_name(ps)
        if name is not None:
            out.setdefault(name, []).append(i)
    return out


def _pinned(only: dict[str, dict[str, str]], names: list[str], resource: str) -> str | None:
    """The flavor nominated for ``resource`` to the first of the pod sets ``names`` that got one (a group's members
    share their flavors; a member not asking for the resource has none nominated)."""
    for name in names:
        flavor = only.get(name, {}).get(resource)
        if flavor is not None:
            return flavor
    return None


def _probe(info, pod_sets: list[PodSetInfo]) -> dict[str, int]:
    """What a flavor must be able to hold for pod sets with no pods to prefer it (Kueue v0.20, #15444): one pod of
    each, summed, and as many pods when the ClusterQueue covers ``pods`` — a pod set alone, or a pod-set group none
    of whose members has pods, probed once over the group as Kueue's ``probeRequestsFor`` does (probed member by
    member, each could take a flavor that holds its own pod but not the group's)."""
    probe: dict[str, int] = {}
    for ps in pod_sets:
        for r, v in dict(ps.requests).items():
            probe[r] = probe.get(r, 0) + v
    if info.covers_pods:
        probe["pods"] = len(pod_sets)
    return probe


def _assign_idle_group(ctx, wl, node, info, ps, group, wanted, requests, assumed, res: PodSetResult,
                       pinned: str | None, start: int, before, probe: dict[str, int],
                       peers: list[PodSetInfo] | None = None) -> None:
    """A group's flavor for a pod set with no pods (Kueue v0.20, #15444): the first flavor that could hold one of
    its pods, as the ClusterQueue's maximum capacity goes (its usage aside); when none can, the one a pod set
    asking for nothing would get. Either way the pod set asks for 0 of it."""
    mode, kept, no_fit = res.mode, list(res.reasons), res.no_fit_reason
    tried = len(res.attempts) if res.attempts is not None else 0
    _assign_group(ctx, wl, node, info, ps, group, wanted, requests, assumed, res, pinned, start, before, probe, peers)
    if wanted[0] in res.flavors:
        return
    # the probe is a preference: try again for nothing (what the first pass said is not kept, as in Kueue)
    res.mode, res.no_fit_reason = mode, no_fit
    res.reasons[:] = kept
    if res.attempts is not None:
        del res.attempts[tried:]
    _assign_group(ctx, wl, node, info, ps, group, wanted, requests, assumed, res, pinned, start, before,
                  peers=peers)


def _share(gres: PodSetResult, others: list[PodSetResult], first: PodSetResult) -> dict[str, str]:
    """Give every member of a group the group's outcome, each keeping the flavors of the resources it asks for
    (Kueue's ``resolvePodSetFlavors``); the group's flavors are returned for members asking for nothing."""
    for res in [first, *others]:
        res.flavors = {r: f for r, f in gres.flavors.items() if r in res.requests}
        res.frs = {r: fr for r, fr in gres.frs.items() if r in res.requests}
        res.mode, res.borrow, res.no_fit_reason = gres.mode, gres.borrow, gres.no_fit_reason
        res.modes = {r: m for r, m in gres.modes.items() if r in res.requests}
        res.reasons = list(gres.reasons)
        res.tried = gres.tried
        res.attempts = gres.attempts
        res.last_tried = ({r: v for r, v in gres.last_tried.items() if r in res.requests}
                          if gres.last_tried is not None else None)
    return dict(gres.flavors)


def _inherit_group_flavors(wl: WorkloadInfo, results: list[PodSetResult], group_flavors: dict[str, dict[str, str]],
                           info) -> None:
    """A group member with no requests gets its group's TAS flavors (Kueue's ``resolvePodSetFlavors``): an LWS
    leader asking for nothing is still placed with its workers."""
    for ps, res in zip(wl.pod_sets, results, strict=False):
        name = group_name(ps)
        if name is None or res.requests or res.flavors:
            continue
        tas = {r: f for r, f in sorted(group_flavors.get(name, {}).items()) if f in info.tas_levels}
        res.flavors.update(tas)


def _worse(a: str, b: str) -> str:
    return a if a and _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def _eligible(info, slot, ps: PodSetInfo, multi_layer: bool) -> str | None:
    """Memoised eligibility, in Kueue's order: the flavor exists, suits the pod set's topology request (TAS),
    tolerates and matches its node selection (a plain flavor serves every pod set that asks for no topology)."""
    if slot.plain and ps.topology is None:
        return None
    memo = info.eligibility
    key = (slot, ps, multi_layer)
    try:
        return memo[key]
    except KeyError:
        pass
    if len(memo) > 4096:
        memo.clear()
    why = memo[key] = (tas_ineligible(info, slot.name, slot.flavor, ps, multi_layer, slot.frs)
                       if slot.flavor is not None else None) or \
        flavor_eligible(ps, slot.flavor, slot.name)
    return why


def _why_not(info, slot, pod_sets, multi_layer: bool) -> str | None:
    """Why the flavor of ``slot`` cannot serve the first of ``pod_sets`` it cannot serve, or None."""
    for p in pod_sets:
        why = _eligible(info, slot, p, multi_layer)
        if why is not None:
            return why
    return None


def _assign_group(ctx, wl, node, info, ps, group, wanted, requests, assumed, res: PodSetResult,
                  pinned: str | None = None, start: int = 0,
                  before: tuple[dict[str, str], dict[str, int]] | None = None,
                  probe: dict[str, int] | None = None, peers: list[PodSetInfo] | None = None) -> None:
    """Pick the group's flavor for pod set ``ps``. ``before``: the flavors and quota the replaced slice's pod set
    of that name holds (see :func:`assign_flavors`). ``probe``: what a flavor must be able to hold at most to be
    considered (:func:`_assign_idle_group`). ``peers``: the members of ``ps``'s pod-set group, each of which a
    flavor must suit (Kueue's checkFlavorForPodSets looks at every member, in pod-set order)."""
    ff = info.spec.flavor_fungibility
    fungible = ctx.fungibility
    # the flavor kept: its (mode, borrowing level) for fungibility, name, quota keys, per-resource modes and
    # the highest borrowing level of its resources
    best: tuple[int, int, str, dict[str, str], dict[str, int] | None, int] | None = None
    group_reasons: list[str] = []
    group_no_fit = ""
    tried: list[str] | None = [] if ctx.trace else None  # only ``explain`` reads it: no list per head otherwise
    spec = info.spec
    flavors = group.flavors
    if start and start >= len(flavors):
        start = 0  # the group has fewer flavors than when the progress was recorded: it says nothing about them
    allowed = wl.allowed_flavors if ctx.concurrent_admission else None
    for slot in flavors[start:] if start else flavors:
        name = slot.name
        if pinned is not None and name != pinned:
            continue
        if allowed is not None and name not in allowed:
            # ConcurrentAdmission: a flavor its allowed-flavors annotation does not name is not tried (Kueue's
            # IsFlavorAllowedForVariant), its reason kept for the message
            skipped = f"skipping flavor {name} due to WorkloadAllowedResourceFlavorAnnotation annotation"
            group_reasons.append(skipped)
            if tried is not None:
                tried.append(f"{name}: {skipped}")
            continue
        if peers is not None or not slot.plain or ps.topology is not None:
            why = _why_not(info, slot, peers or (ps,), ctx.topology.options.multi_layer)
            if why is not None:
                group_reasons.append(why)
                if tried is not None:
                    tried.append(f"{name}: {why}")
                _attempt(res, name, _NO_FIT, 0, (why,))
                group_no_fit = _least(group_no_fit, NO_MATCHING_FLAVOR)
                continue
        if probe is not None:
            over = _over_probe(node, slot, name, wanted, probe, ctx.state.byte_valued())
            if over:
                group_reasons.extend(over)
                if tried is not None:
                    tried.append(f"{name}: no_fit ({'; '.join(over)})")
                _attempt(res, name, _NO_FIT, 0, tuple(over))
                group_no_fit = _least(group_no_fit, EXCEEDS_MAX_QUOTA)
                continue
        # the flavor's (mode, borrow) is its least preferred resource's pair (Kueue's representative mode),
        # not the worst mode with the highest level: (fit, 1) and (reclaim, 0) make (reclaim, 0) under the
        # default preference and (fit, 1) under PreemptionOverBorrowing; ``top``, the highest level, is what
        # it borrows
        mode, borrow, top = _FIT, 0, 0
        below: dict[str, int] | None = None  # resource -> its own mode, where that is not Fit
        flavor_reasons: list[str] | None = None
        flavor_no_fit = ""
        frs = slot.frs
        for r in wanted:
            fr = frs[r]
            request = requests[r]
            if before is not None:
                held_on = before[0].get(r, "")
                if held_on != name:  # a slice keeps its flavors; the quota check below still speaks (Kueue's)
                    mode = _NO_FIT
                    sticky = f"could not assign {name} flavor since the original workload is assigned: {held_on}"
                    if flavor_reasons is None:
                        flavor_reasons = [sticky]
                    else:
                        flavor_reasons.append(sticky)
                    flavor_no_fit = _worse(flavor_no_fit, NO_MATCHING_FLAVOR)
                else:
                    request -= before[1].get(r, 0)
            m, b, msg, nf = _fits(ctx, wl, node, spec, name, fr, r, assumed.get(fr, 0), request)
            if m != _FIT:
                if below is None:
                    below = {r: m}
                else:
                    below[r] = m
            if b > top:
                top = b
            # (fit, 0) is preferred over every pair, so it never becomes the flavor's: no comparison for it
            if (m != _FIT or b) and _better(mode, borrow, m, b, ff):
                mode, borrow = m, b
            if msg:
                if flavor_reasons is None:
                    flavor_reasons = [msg]
                else:
                    flavor_reasons.append(msg)
            if nf:
                flavor_no_fit = _worse(flavor_no_fit, nf)
        if mode == _FIT and not borrow:
            # the best outcome there is: it wins over anything kept so far, and the search stops here
            if tried is not None:
                tried.append(f"{name}: fit")
            best = (mode, 0, name, frs, None, 0)
            break
        if tried is not None:
            tried.append(f"{name}: {_MODE_NAMES[mode]}"
                         + (f" ({'; '.join(flavor_reasons)})" if flavor_reasons else "")
                         + (f", borrowing level {borrow}" if borrow else "")
                         + (f", a resource borrowing at level {top}" if top > borrow else ""))
        # Kueue's considered-flavors record: the flavor's mode with its resources' highest borrowing level
        _attempt(res, name, mode, top, tuple(flavor_reasons) if flavor_reasons else ())
        if flavor_reasons:
            group_reasons.extend(flavor_reasons)
        if mode == _NO_FIT:
            group_no_fit = _least(group_no_fit, flavor_no_fit or WAITING_FOR_QUOTA)
        if not fungible:
            # FlavorFungibility off: only a strictly better mode replaces the flavor kept (borrowing levels are
            # not compared), and the first flavor that fits ends the search even when it borrows
            if best is None or mode > best[0]:
                best = (mode, borrow, name, frs, below, top)
            if mode == _FIT:
                break
            continue
        if best is None or _better(mode, borrow, best[0], best[1], ff):
            if mode != _NO_FIT or best is None:
                best = (mode, borrow, name, frs, below, top)
        if _stop_here(mode, borrow, ff):
            break
    else:
        slot = None  # every flavor was tried
    if tried is not None:
        res.tried[wanted[0]] = tried
    if best is None or best[0] == _NO_FIT:
        # the pod set fails here: its message is this group's reasons alone, what earlier groups said (how they
        # could get a flavor by preemption) dropped, as Kueue's assignFlavors replaces its status
        res.mode = _NO_FIT
        res.reasons[:] = group_reasons
        res.no_fit_reason = _worse(res.no_fit_reason, group_no_fit or NO_MATCHING_FLAVOR)
        return
    if group_no_fit:
        # a group that found a flavor still weighs in with the least severe reason of the flavors it passed
        # over, should the pod set fail in a later group (Kueue's resolveNoFitReason takes every resource
        # group's least severe NoFit attempt, then the most severe across the groups)
        res.no_fit_reason = _worse(res.no_fit_reason, group_no_fit)
    mode, _, name, frs, below, top = best
    for r in wanted:
        res.flavors[r] = name
        res.frs[r] = frs[r]
    if below is not None:
        res.modes.update(below)
    if not fungible:  # no position is kept: index 0 for each resource, as Kueue's assigner leaves it
        if res.last_tried is None:
            res.last_tried = {}
        for r in wanted:
            res.last_tried[r] = 0
    elif slot is not None and slot is not flavors[-1]:  # the scan stopped early: the next attempt resumes after it
        at = flavors.index(slot)
        if res.last_tried is None:
            res.last_tried = {}
        for r in wanted:
            res.last_tried[r] = at
    if mode < res.mode:
        res.mode = mode
    if top > res.borrow:
        res.borrow = top  # Kueue's Assignment.Borrowing: the highest level any resource borrows at
    if mode != _FIT:
        res.reasons.extend(group_reasons)


def _attempt(res: PodSetResult, flavor: str, mode: int, borrow: int, reasons: tuple[str, ...]) -> None:
    if res.attempts is None:
        res.attempts = [(flavor, mode, borrow, reasons)]
    else:
        res.attempts.append((flavor, mode, borrow, reasons))


def _over_probe(node, slot, name: str, wanted: list[str], probe: dict[str, int],
                byte_valued: frozenset[str]) -> list[str]:
    """Why flavor ``name`` cannot hold one pod of a pod set with no pods: each resource of the group whose
    one-pod request exceeds the most the ClusterQueue could ever get of it."""
    out = []
    for r in wanted:
        need = probe.get(r, 0)
        cap = node.potential_available(slot.frs[r])
        if need > cap:
            out.append(over_capacity_one_pod(r, name, need, cap, r in byte_valued))
    return out


def _least(a: str, b: str) -> str:
    return a if a and _SEVERITY.get(a, 0) <= _SEVERITY.get(b, 0) else b


def _fits(ctx, wl, node, spec, flavor: str, fr: str, resource: str, assumed: int,
          request: int) -> tuple[int, int, str, str]:
    """Mode of one flavor-resource: (mode, borrow level, message, NoFit reason)."""
    val = assumed + request
    available = node.available(fr)
    if val <= available:  # available never exceeds the potential, so this is a Fit
        if node.usage.get(fr, 0) + val <= node.nominal.get(fr, 0):
            return _FIT, 0, "", ""
        return _FIT, node.lowest_fitting_height(fr, val)[0], "", ""
    max_capacity = node.potential_available(fr)
    if val > max_capacity:
        return (_NO_FIT, 0, over_capacity(resource, flavor, assumed, request, max_capacity,
                                          resource in ctx.state.byte_valued()), EXCEEDS_MAX_QUOTA)
    borrow, may_reclaim = node.lowest_fitting_height(fr, val)
    msg = unused_quota(resource, flavor, val - available, resource in ctx.state.byte_valued())
    p = spec.preemption
    # Kueue v0.20: preemption is simulated only for a request within nominal, one a non-root subtree can hold, or
    # when preempting while borrowing is allowed; a request that would borrow after evicting in its own ClusterQueue
    # waits instead (kubernetes-sigs/kueue#1974: it would be the next reclaim target). Kueue after v0.20 (#16049)
    # also asks when withinClusterQueue is not Never; kueue-es keeps the released rule (docs/scheduling.md).
    can_borrow_preempt = (p.borrow_within_cohort is not None and p.borrow_within_cohort.policy != "Never") or (
        ctx.config.fair_sharing_enabled and p.reclaim_within_cohort != "Never"
    ) or bool(preemption_config.config_name(ctx, node.name))  # ConfigurablePreemptions: its rules may allow it
    if val <= node.nominal.get(fr, 0) or may_reclaim or can_borrow_preempt:
        mode, borrow_after = ctx.preemption_oracle(wl, node, fr, val)
        if mode == _NO_FIT:
            return mode, borrow, msg, WAITING_FOR_QUOTA
        return mode, borrow_after, msg, ""
    return _NO_FIT, borrow, msg, WAITING_FOR_QUOTA
