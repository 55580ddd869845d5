"""One scheduling cycle, as Kueue runs it, as a pure function of projected state and time.

Phases (Kueue's ``schedule()``):
1. heads — the first pending workload of every active ClusterQueue;
2. snapshot — the projection's quota tree, in a copy-on-write overlay that is rolled back at the end;
3. nominate — flavor assignment, preemption targets, partial admission;
4. order — non-borrowing first, then priority, then queue time (or the fair-sharing tournament);
5. admit — in that order, each entry charging the snapshot so later entries see it;
6. requeue — failed entries get QuotaReserved=False and are parked or kept, per queueing strategy.
The output is a list of decision events; the projection is left exactly as it was.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from itertools import chain

from events import objects as o
from events import schema as ev
from events.quantity import canonical_quantity
from kueue_es.scheduler import afs, blockadmission, refill, siblings
from kueue_es.scheduler.admissibility import MISCONFIGURED, inadmissible
from kueue_es.scheduler.config import SchedulerConfig
from kueue_es.scheduler.considered import considered_flavors
from kueue_es.scheduler.fairsharing import fair_order, fair_targets
from kueue_es.scheduler.flavors import (
    Assignment,
    Granular,
    Mode,
    PodSetResult,
    assign_flavors,
    resume_scan,
    scan_length,
    scan_progress,
)
from kueue_es.scheduler.preemption import Target, configured_message, find_targets, preemption_message
from kueue_es.scheduler.quota import QuotaNode, QuotaTree
from kueue_es.scheduler.tas import Placement
from kueue_es.scheduler.tasplace import (
    CycleTopology,
    keep_waited,
    place_at_admission,
    place_nominated,
    place_preempting,
    reserve_placement,
    reserve_preempting,
    second_pass,
    second_pass_due,
    topology_fields,
)
from kueue_es.scheduler.taspreempt import TopologyFit
from projections import gates, variants
from projections.cluster import ClusterState
from projections.clusterqueues import ClusterQueueInfo
from projections.preemption_gates import GATED_LEGACY_REASON, GATED_MESSAGE, PREEMPTION_GATED
from projections.queue_order import QueueOrder
from projections.topology import workload_tas_usage
from projections.workloads import ADMITTED, WorkloadInfo, keeps_queued, unadmitted_reason

_NO_FIT, _PREEMPT = Mode.NO_FIT, Mode.PREEMPT
PARK_ALWAYS_HEAP = frozenset({"FailedAfterNomination", "PendingPreemption", "PendingMigration", "PreemptionFailed"})


class Entry:
    __slots__ = ("assignment", "cq", "info", "message", "preemptor", "refilled", "replaced", "requeue_reason",
                 "second_pass", "status", "targets", "wl")

    def __init__(self, wl: WorkloadInfo, cq: str, assignment: Assignment | None = None,
                 targets: list[Target] | None = None, info: ClusterQueueInfo | None = None) -> None:
        self.wl = wl
        self.cq = cq
        self.info = info
        """The compiled ClusterQueue, looked up once per cycle by :func:`heads` (None: look it up when needed)."""
        self.assignment = assignment
        self.targets: list[Target] = targets if targets is not None else []
        self.status = ""
        """Non-empty when the entry was not nominated: the QuotaReserved=False reason."""
        self.message = ""
        self.requeue_reason = ""
        self.preemptor = False
        """Its ClusterQueue's preemptor workload, counted only under ``PrioritizePreemptorWorkloads``."""
        self.replaced: WorkloadInfo | None = None
        """The elastic Job slice it replaces, holding quota in its ClusterQueue (:func:`replaced_slice`)."""
        self.refilled = False
        """Popped mid-cycle by ``FairSharingRefill`` (:mod:`kueue_es.scheduler.refill`)."""
        self.second_pass = False
        """A quota holder's second pass in the Fair Sharing tournament (:func:`_fair_second_passes`)."""

    def __repr__(self) -> str:
        mode = Mode.NAMES[self.assignment.mode] if self.assignment is not None else ""
        return f"Entry({self.wl.key}, {self.cq}, {self.status or mode})"


class CycleContext:
    """What one cycle reads (the projection) and mutates (the projection's quota tree, inside an overlay).

    Use as a context manager: the overlay opens on entry and is rolled back on exit, so the projection is
    unchanged afterwards whatever happened in between.
    """

    def __init__(self, state: ClusterState, config: SchedulerConfig, now: int, *, trace: bool = False) -> None:
        self.state = state
        self.trace = trace
        """Record what each flavor tried said (``PodSetResult.tried``), for ``explain``."""
        self.config = config
        self.now = now
        self.settle_skips = True
        """Whether the cycle writes the skipped attempts :func:`_settle_skips` asks for."""
        self.tree: QuotaTree = state.quota
        self.ignore_undeclared = config.ignore_undeclared
        self.partial_admission = gates.enabled(config.feature_gates, gates.PARTIAL_ADMISSION)
        self.preempt_within_nominal = gates.enabled(config.feature_gates, gates.FAIR_SHARING_PREEMPT_WITHIN_NOMINAL)
        self.prioritize_non_borrowing = gates.enabled(config.feature_gates,
                                                      gates.FAIR_SHARING_PRIORITIZE_NON_BORROWING)
        self.prioritize_preemptors = gates.enabled(config.feature_gates, gates.PRIORITIZE_PREEMPTOR_WORKLOADS)
        """``PrioritizePreemptorWorkloads``: the workload each queue last requeued while waiting for its
        preemptions goes first in the cycle (:func:`order_entries`, the fair-sharing tournament) and, without
        candidates, holds back capacity as if its queue could not always reclaim (:func:`_reserve_capacity`)."""
        self.reevaluate_candidates = gates.enabled(config.feature_gates,
                                                   gates.FAIR_SHARING_REEVALUATE_PREEMPTION_CANDIDATES)
        """``FairSharingReevaluatePreemptionCandidates``: fair preemption runs its first strategy once more over
        the candidates it turned down when it took victims from the preemptor's own queue
        (:mod:`kueue_es.scheduler.fairsharing`)."""
        self.fungibility = gates.enabled(config.feature_gates, gates.FLAVOR_FUNGIBILITY)
        """``FlavorFungibility``: off, the first flavor that fits is taken, a later one only for a strictly better
        mode, the ClusterQueue's ``flavorFungibility`` is not read and no attempt resumes a scan
        (:mod:`kueue_es.scheduler.flavors`)."""
        self.flavor_change_from_zero = gates.enabled(config.feature_gates, gates.ELASTIC_FLAVOR_CHANGE_FROM_ZERO)
        """``ElasticJobsViaWorkloadSlicesFlavorChangeFromZero``: a replacement slice's pod set that had no pods in
        the replaced slice may take any flavor (:func:`kueue_es.scheduler.flavors.assign_flavors`)."""
        self.concurrent_admission = gates.enabled(config.feature_gates, gates.CONCURRENT_ADMISSION)
        """``ConcurrentAdmission``: a flavor a workload's allowed-flavors annotation does not name is skipped
        (:attr:`projections.workloads.WorkloadInfo.allowed_flavors`)."""
        self.preserve_scan = self.fungibility and gates.enabled(config.feature_gates,
                                                                gates.FLAVOR_FUNGIBILITY_PRESERVE_SCAN_PROGRESS)
        """``FlavorFungibilityPreserveScanProgress``: off, any growth of the queue's allocatable generation makes
        the kept scan progress stale, and a skipped entry keeps none (:func:`_scan_after`)."""
        self.info: Callable[[str], ClusterQueueInfo] = state.cq_info  # type: ignore[assignment]
        """The compiled ClusterQueue (only asked for queues that exist)."""
        self.configurable_preemptions = gates.enabled(config.feature_gates, gates.CONFIGURABLE_PREEMPTIONS)
        """``ConfigurablePreemptions``: a ClusterQueue's PreemptionConfig adds preemption candidates
        (:mod:`kueue_es.scheduler.preemption_config`)."""
        self.find_targets = fair_targets if config.fair_sharing_enabled else find_targets
        """Victim search: Fair Sharing's when it is on, else the classical one."""
        self.memo: dict[str, dict] = {}
        """Per-cycle memos of values that depend on quota only (e.g. what a cohort could lend)."""
        self.afs_usage = afs.workload_usage(state, config, now) if config.admission_fair_sharing else None
        """Admission Fair Sharing: a workload's LocalQueue usage (None outside usage-based queues)."""
        self.removed: set[str] = set()
        """Victims chosen earlier in this cycle: their usage is already off the tree, so they are no candidates."""
        self.preempted: list[WorkloadInfo] = []
        """The victims of this cycle's entries, in the order they were chosen, whose quota the cycle took off (not a
        second pass's, which stay charged): :func:`_victims_back` puts them back."""
        self.preempted_tas: list[WorkloadInfo] = []
        """Those of :attr:`preempted` whose TAS usage the cycle took off too: a TAS preemptor's
        (:func:`reserve_preempting`); a preemptor without TAS flavors leaves its victims' domains charged."""
        self.topology = CycleTopology(state, config)
        """The cycle's TAS snapshots, charged as entries are placed."""
        self.block_admission = config.blocks_admission
        """waitForPodsReady.blockAdmission: an entry that fits waits while a workload holding quota has pods not
        ready (:mod:`kueue_es.scheduler.blockadmission`)."""
        self.order = state.queue_order
        """Queue-order time and whether priority orders the heads (the configuration in force)."""
        self.workload_slices = gates.enabled(config.feature_gates, gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
        """``ElasticJobsViaWorkloadSlices``: a workload naming the slice it replaces is measured against it
        (:func:`replaced_slice`); off, the annotation means nothing."""
        self.partial_scale_up = self.workload_slices and gates.enabled(config.feature_gates,
                                                                       gates.ELASTIC_PARTIAL_SCALE_UP)
        """``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp``: a new slice that does not fit whole is cut
        down towards its ``minCount`` (the old slice's granted counts) even with ``PartialAdmission`` off and,
        replacing an admitted slice, is admitted only if it then grows past them (:func:`_try_partial`)."""
        self.orchestrated_preemption = gates.enabled(config.feature_gates, gates.MULTIKUEUE_ORCHESTRATED_PREEMPTION)
        """``MultiKueueOrchestratedPreemption``: an entry that would preempt while one of its preemption gates is
        closed preempts nothing and waits (:mod:`projections.preemption_gates`); under ``ConcurrentAdmission`` too,
        whose variants come with the ``kueue.x-k8s.io/concurrent-admission`` gate closed (Kueue's scheduler checks
        closed gates under either)."""
        self.observability = gates.enabled(config.feature_gates, gates.UNADMITTED_WORKLOADS_OBSERVABILITY)
        """UnadmittedWorkloadsObservability: off, every failed attempt's QuotaReserved=False reason is Kueue's
        fallback ``Pending`` (``requeueAndUpdate``), whatever the attempt found (:func:`_pending`)."""
        self.gated_reason = PREEMPTION_GATED if self.observability else GATED_LEGACY_REASON
        """The QuotaReserved=False reason of an attempt a closed preemption gate stops: Kueue's scheduler gives
        such an entry the reason ``PreemptionGated`` under UnadmittedWorkloadsObservability, and its fallback
        ``Pending`` without it."""
        self.recompute_overlap = gates.enabled(config.feature_gates,
                                               gates.RECOMPUTE_ASSIGNMENT_UPON_PREEMPTION_TARGETS_OVERLAP)
        """``RecomputeAssignmentUponPreemptionTargetsOverlap``: off, an entry whose victims overlap those chosen
        earlier in the cycle is skipped, not assigned again (:func:`_recompute_after_overlap`)."""

    def __enter__(self) -> CycleContext:
        self.tree.begin()
        return self

    def __exit__(self, *exc: object) -> None:
        self.tree.rollback()

    def info_of(self, e: Entry) -> ClusterQueueInfo:
        """The entry's compiled ClusterQueue: the one :func:`heads` looked up, else looked up now."""
        return e.info or self.info(e.cq)

    def reserving_in(self, cq: str) -> list[WorkloadInfo]:
        wls, removed = self.state.workloads, self.removed
        return [wls[k] for k in sorted(self.state.reserving.get(cq, ())) if k not in removed]

    def preemption_oracle(self, wl: WorkloadInfo, node: QuotaNode, fr: str, val: int) -> tuple[int, int]:
        targets = self.find_targets(self, wl, node, {fr: val}, {fr: val})
        if not targets:
            return Granular.NO_CANDIDATES, node.lowest_fitting_height(fr, val)[0]
        for t in targets:
            self.tree.charge(t.workload.cluster_queue, t.workload.usage, -1)
        try:
            borrow = node.lowest_fitting_height(fr, val)[0]
        finally:
            for t in targets:
                self.tree.charge(t.workload.cluster_queue, t.workload.usage, 1)
        if all(t.workload.cluster_queue != node.name for t in targets):
            return Granular.RECLAIM, borrow
        return Granular.PREEMPT, borrow


def inactive_reason(state: ClusterState, cq: str) -> str | None:
    """Why a ClusterQueue cannot admit (Kueue's Active=False reasons), or None when it is active."""
    return state.inactive_reason(cq)


def required_checks(state: ClusterState, cq: str, flavors: set[str]) -> list[str]:
    info = state.cq_info(cq)
    return info.required_checks(flavors) if info is not None else []


def heads(state: ClusterState, config: SchedulerConfig | None = None, now: int | None = None) -> list[Entry]:
    """The head of every active ClusterQueue (by Admission Fair Sharing where it applies)."""
    out = []
    workloads, cq_info = state.workloads, state.cq_info
    at = state.time if now is None else now
    for cq in sorted(state.queues):
        key = afs.queue_head(state, config, cq, at)
        if key is None:
            continue
        info = cq_info(cq)
        if info is None or info.inactive is not None:
            continue
        out.append(Entry(workloads[key], cq, info=info))
    return out


def nominate(ctx: CycleContext, e: Entry) -> None:
    state, wl = ctx.state, e.wl
    if wl.check_states and any(s.state in ("Retry", "Rejected") for s in wl.check_states.values()):
        e.status, e.message = "PendingEvaluation", "The workload has failed admission checks"
        return
    info = ctx.info_of(e)
    blocked = inadmissible(state, wl, info)
    if blocked is not None:
        e.status = MISCONFIGURED
        e.message, e.requeue_reason = blocked
        return
    e.replaced = replaced_slice(ctx, wl, e.cq)
    e.assignment = _assign(ctx, wl, e.cq, info=info, replaced=e.replaced)
    if e.assignment.mode == Mode.PREEMPT:
        e.targets = _targets(ctx, e)
    if (e.assignment.mode == Mode.NO_FIT or (e.assignment.mode == Mode.PREEMPT and not e.targets)) \
            and (ctx.partial_admission or (ctx.partial_scale_up and e.replaced is not None)):
        _try_partial(ctx, e)
    if e.assignment.mode == Mode.PREEMPT and info.tas_levels:
        place_preempting(ctx, wl, info, e.assignment, [t.workload for t in e.targets], e.replaced)


def _nominate_waited(ctx: CycleContext, e: Entry) -> bool:
    """blockAdmission's held entry on the assignment it waited with (:attr:`WorkloadInfo.waited`): its pod sets'
    counts and flavors pinned, as Kueue's scheduler admits it on that assignment when it wakes, whatever was freed
    meanwhile. False, and it is nominated anew, when none is known (held before it was recorded) or that assignment
    no longer fits: a pod set or flavor gone, the quota taken (Kueue would admit it even then, its cache charged
    beyond what is free)."""
    wl = e.wl
    waited = {ps.name: ps for ps in wl.waited}
    if not waited or any(ps.name not in waited for ps in wl.pod_sets):
        return False
    if wl.check_states and any(s.state in ("Retry", "Rejected") for s in wl.check_states.values()):
        return False
    info = ctx.info_of(e)
    if inadmissible(ctx.state, wl, info) is not None:
        return False
    replaced = replaced_slice(ctx, wl, e.cq)
    counts = [waited[ps.name].count for ps in wl.pod_sets]
    a = _assign(ctx, wl, e.cq, counts, {n: dict(ps.flavors) for n, ps in waited.items()}, info, replaced)
    if a.mode != Mode.FIT:
        return False
    if info.tas_levels:
        keep_waited(ctx, wl, info, a, waited, replaced)
    e.replaced, e.assignment = replaced, a
    return True


def replaced_slice(ctx: CycleContext, wl: WorkloadInfo, cq: str) -> WorkloadInfo | None:
    """The slice ``wl`` replaces (its ``kueue.x-k8s.io/workload-slice-replacement-for``), under
    ElasticJobsViaWorkloadSlices and only while that slice holds quota in ``cq``, the ClusterQueue ``wl`` is
    tried in (Kueue looks it up among that ClusterQueue's workloads), and is of ``wl``'s namespace (a workload
    cannot replace, and so finish, another namespace's); else None, and ``wl`` is a workload like any other."""
    key = wl.replaces
    if not key or not ctx.workload_slices or key not in ctx.state.reserving.get(cq, ()):
        return None
    replaced = ctx.state.workloads.get(key)
    return replaced if replaced is not None and replaced.namespace == wl.namespace else None


def _assign(ctx: CycleContext, wl: WorkloadInfo, cq: str, counts: list[int] | None = None,
            only: dict[str, dict[str, str]] | None = None, info: ClusterQueueInfo | None = None,
            replaced: WorkloadInfo | None = None) -> Assignment:
    """Flavor assignment, then the TAS placement of the chosen flavors (which may turn the mode)."""
    if info is None:
        info = ctx.info(cq)
    a = assign_flavors(ctx, wl, cq, counts, only, info, replaced)
    if info.tas_levels:
        place_nominated(ctx, wl, info, a, replaced)
    return a


def _targets(ctx: CycleContext, e: Entry) -> list[Target]:
    """Victims for the entry's assignment; a TAS assignment's pod sets must find a placement with them gone."""
    a = e.assignment
    assert a is not None
    node = ctx.tree.cluster_queues[e.cq]
    return ctx.find_targets(ctx, e.wl, node, dict(a.usage), a.needs_preemption_frs(), TopologyFit.of(ctx, e))


def _try_partial(ctx: CycleContext, e: Entry) -> None:
    """Kueue's ordered PodSetReducer: the pod sets give up pods from the last one towards the first, each down to
    its ``minCount`` before the next is touched, for the smallest cut that fits or can preempt
    (searched as Kueue's ``sort.Search`` searches: :func:`_sort_search`); then each pod set
    cut, from the first, grows back as far as still fits (only when two or more were cut: one alone cannot grow
    past the cut the search found). A slice replacing an admitted one, under
    ``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp``, must end above its ``minCount`` somewhere: all at
    the old slice's counts, it would change nothing, so it stays pending. One replacing a slice that holds quota
    but waits for its admission checks (none of its pods run) may be taken at its ``minCount``: the Job would
    otherwise stall behind a slice that cannot grow (Kueue #15855). Found, the entry takes the reduced
    assignment; else it keeps its full one (and its message)."""
    pod_sets = e.wl.pod_sets
    full = [ps.count for ps in pod_sets]
    floor = [ps.min_count if ps.min_count is not None and ps.min_count < ps.count else ps.count for ps in pod_sets]
    total = sum(full) - sum(floor)
    if total <= 0:
        return

    def attempt(counts: list[int]) -> tuple[Assignment, list[Target]] | None:
        a = _assign(ctx, e.wl, e.cq, counts, info=e.info, replaced=e.replaced)
        if a.mode == Mode.FIT:
            return a, []
        if a.mode == Mode.PREEMPT:
            probe = Entry(e.wl, e.cq, a)
            probe.replaced = e.replaced
            targets = _targets(ctx, probe)
            if targets:
                return a, targets
        return None

    counts, found = _shrink(full, floor, total, attempt)
    if found is None:
        return
    if sum(c < f for c, f in zip(counts, full, strict=True)) >= 2:
        found = _grow_back(counts, full, attempt, found)
    if ctx.partial_scale_up and e.replaced is not None and e.replaced.phase == ADMITTED \
            and all(c <= b for c, b in zip(counts, floor, strict=True)):
        return
    e.assignment, e.targets = found


def _cut(full: list[int], floor: list[int], budget: int) -> list[int]:
    """``budget`` pods taken from the last pod set towards the first, each down to its floor before the next."""
    out = list(full)
    for i in range(len(full) - 1, -1, -1):
        take = min(full[i] - floor[i], budget)
        out[i] -= take
        budget -= take
    return out


def _sort_search(n: int, holds: Callable[[int], bool]) -> int:
    """Go's ``sort.Search``: the first index in ``0..n-1`` where ``holds`` (taken to be false, then true),
    ``n`` when none, probing exactly as Go does. Kueue's reducer stops where this search does; ``holds`` need
    not be monotone (counts that fit need not keep fitting as they shrink), so another bisection could probe
    other counts and decide otherwise."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _shrink(full: list[int], floor: list[int], total: int,
            attempt: Callable[[list[int]], tuple[Assignment, list[Target]] | None]
            ) -> tuple[list[int], tuple[Assignment, list[Target]] | None]:
    """The smallest cut (Kueue's ``sort.Search`` over cuts of 0..``total`` pods) whose counts ``attempt``
    takes, with what it gave. A cut of 0 is the full counts, which :func:`_try_partial` runs only once they
    failed: not attempted again."""
    best: tuple[list[int], tuple[Assignment, list[Target]] | None] = (full, None)

    def fits(cut: int) -> bool:
        nonlocal best
        if cut == 0:
            return False
        counts = _cut(full, floor, cut)
        got = attempt(counts)
        if got is not None:
            best = (counts, got)
        return got is not None

    if _sort_search(total + 1, fits) > total:
        return full, None
    return best


def _grow_back(counts: list[int], full: list[int],
               attempt: Callable[[list[int]], tuple[Assignment, list[Target]] | None],
               found: tuple[Assignment, list[Target]]) -> tuple[Assignment, list[Target]]:
    """Each cut pod set, first to last, grown back to its full count if that still fits, else to the last
    count between the cut and the full one seen to fit by Kueue's search for the first that does not (the
    largest that fits, when fitting is monotone); a later pod set sees only what the earlier ones left. Grows
    ``counts`` in place; returns what ``attempt`` gave for the final counts."""
    for i, target in enumerate(full):
        if counts[i] != target:
            found = _grow_one(counts, i, target, attempt, found)
    return found


def _grow_one(counts: list[int], i: int, target: int,
              attempt: Callable[[list[int]], tuple[Assignment, list[Target]] | None],
              found: tuple[Assignment, list[Target]]) -> tuple[Assignment, list[Target]]:
    """Pod set ``i`` of :func:`_grow_back`: its full count ``target`` in one attempt, else Kueue's
    ``sort.Search`` over the counts strictly between the cut and ``target`` for the first that does not fit,
    ``counts[i]`` ending at the last one seen to."""
    trial = list(counts)
    trial[i] = target
    got = attempt(trial)
    if got is not None:
        counts[i] = target
        return got
    lo = counts[i] + 1

    def misfits(k: int) -> bool:
        nonlocal found
        trial[i] = lo + k
        fit = attempt(trial)
        if fit is not None:
            counts[i], found = lo + k, fit
        return fit is None

    _sort_search(target - lo, misfits)
    return found


def order_entries(entries: list[Entry], order: QueueOrder) -> list[Entry]:
    """Kueue's classical order: preemptor workloads (only flagged under ``PrioritizePreemptorWorkloads``), lower
    borrowing level, higher priority (unless ``PrioritySortingWithinCohort`` is off), earlier queue-order time (then
    UID)."""

    def key(e: Entry) -> tuple:
        wl = e.wl
        return (not e.preemptor, e.assignment.borrow if e.assignment is not None else 0, order.rank(wl.priority),
                order.time(wl), wl.uid)

    return sorted(entries, key=key)


def run_cycle(state: ClusterState, config: SchedulerConfig, now: int, cycle: int, *,
              settle_skips: bool = True) -> list[ev.Decision]:
    """One scheduling cycle's decisions. ``settle_skips=False``: without :func:`_settle_skips`'s writes, as
    kueue-es decided before session 32 (for ``replay --verify`` of logs written then)."""
    # The cycle's temporaries (entries, assignments, ...) live until it ends and form no reference cycles:
    # reference counting frees them all. Left on, the cyclic collector would promote them to the oldest
    # generation in mid-cycle collections and so trigger full collections of the whole projection (tens of
    # milliseconds with 50,000 workloads) every few cycles. It is paused for the whole cycle, the heads
    # included, and resumed after.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        first = blockadmission.held(state) if config.blocks_admission else None
        if first is not None and blockadmission.holds_admission(state):
            return []  # Kueue's scheduler is parked inside the cycle that holds the entry
        entries = heads(state, config, now)
        if first is not None:  # the rest of the cycle Kueue woke up in: second passes come in the next one
            entries = _held_first(state, entries, first)
            second = []
        else:
            second = second_pass_due(state, now, state.queue_order) if state.second_pass else []
        if not entries and not second:
            return []
        with CycleContext(state, config, now) as ctx:
            ctx.settle_skips = settle_skips
            return _run(ctx, entries, cycle, second, first)
    finally:
        if paused:
            gc.enable()


def _fair_second_passes(ctx: CycleContext, due: list[WorkloadInfo]) -> tuple[list[WorkloadInfo], dict[str, list[Entry]]]:
    """Under Fair Sharing, Kueue's iterator ranks a second pass among its ClusterQueue's entries (ahead of the
    head: it holds quota) and it competes in the tournament like any other entry, on its ClusterQueue's share with
    nothing added (its quota is charged already) and borrowing on nothing it requests (its fair_sharing_iterator,
    computeDRS with the entry's net usage). Returns the second passes that cannot compete (their ClusterQueue is
    gone or inactive, which Kueue reports without nominating them), run first as before, and the others as
    entries, per ClusterQueue in ``due``'s order."""
    state = ctx.state
    first: list[WorkloadInfo] = []
    lanes: dict[str, list[Entry]] = {}
    for wl in due:
        adm = wl.admission
        cq = adm.cluster_queue if adm is not None else ""
        info = state.cq_info(cq) if cq else None
        if info is None or info.inactive is not None or cq not in ctx.tree.cluster_queues:
            first.append(wl)
            continue
        e = Entry(wl, cq, info=info)
        e.second_pass = True
        lanes.setdefault(cq, []).append(e)
    return first, lanes


def _queue_up(heads: list[Entry], lanes: dict[str, list[Entry]]) -> tuple[list[Entry], dict[str, list[Entry]]]:
    """Each ClusterQueue's entries in Kueue's order within it, second passes before the head: the first of each
    enters the tournament, the others wait ``behind`` it, in turn."""
    by_cq = {e.cq: e for e in heads}
    contending = [e for e in heads if e.cq not in lanes]
    behind: dict[str, list[Entry]] = {}
    for cq in sorted(lanes):
        queue = lanes[cq] + ([by_cq[cq]] if cq in by_cq else [])
        contending.append(queue[0])
        if len(queue) > 1:
            behind[cq] = queue[1:]
    return contending, behind


def _held_first(state: ClusterState, entries: list[Entry], key: str) -> list[Entry]:
    """The heads with blockAdmission's held entry in place of its ClusterQueue's head: Kueue popped it from there
    in the cycle it waited in, whatever has come ahead of it since."""
    wl = state.workloads[key]
    out = [e for e in entries if e.cq != wl.cluster_queue]
    info = state.cq_info(wl.cluster_queue)
    if info is not None and info.inactive is None:
        out.append(Entry(wl, wl.cluster_queue, info=info))
    return out


def _run(ctx: CycleContext, entries: list[Entry], cycle: int, second: list[WorkloadInfo] = (),
         first: str | None = None) -> list[ev.Decision]:
    state, now = ctx.state, ctx.now
    out: list[ev.Decision] = []
    base = {"time": now, "cycle": cycle, "input": state.offset}
    fair = ctx.config.fair_sharing_enabled
    lanes: dict[str, list[Entry]] = {}
    if fair and second:
        second, lanes = _fair_second_passes(ctx, second)
    for wl in second:  # they hold quota: first in the classical order (under Fair Sharing only those that can't compete)
        out.extend(second_pass(ctx, wl, base))
    for e in entries:
        if e.wl.key != first or not _nominate_waited(ctx, e):
            nominate(ctx, e)
    if ctx.prioritize_preemptors:
        queues = state.queues
        for e in entries:
            q = queues.get(e.cq)
            e.preemptor = q is not None and q.preemptor == e.wl.key
    victims = ctx.removed
    tree = ctx.tree
    # blockAdmission's held entry, if any, goes first: Kueue admits it as it wakes, before the cycle goes on
    held = [e for e in entries if e.wl.key == first]
    rest = [e for e in entries if e.wl.key != first] if held else entries
    block = ctx.block_admission
    pushed: list[Entry] = []
    refills = (refill.RefillPass(state, ctx.config, now, [e.wl.key for e in entries])
               if refill.enabled(ctx.config, block) else None)
    behind: dict[str, list[Entry]] = {}
    if lanes:
        rest, behind = _queue_up(rest, lanes)
    ordered = chain(held, fair_order(ctx, rest, pushed) if fair else order_entries(rest, ctx.order))
    admitted = False
    skips: dict[str, list[_Skip]] = {}
    for e in ordered:
        if e.cq in behind:  # the next entry of its ClusterQueue joins the tournament once this one is through
            nxt = behind[e.cq]
            pushed.append(nxt.pop(0))
            if not nxt:
                del behind[e.cq]
        if e.second_pass:
            out.extend(second_pass(ctx, e.wl, base))
            continue
        a = e.assignment
        if e.status:
            _pending(out, ctx, e, e.status, e.message, e.requeue_reason, base)
            continue
        assert a is not None
        if e.refilled and a.mode != Mode.FIT:
            _pending(out, ctx, e, "WaitingForQuota", refill.DEFERRED + a.message, "FailedAfterNomination", base)
            continue
        if ctx.concurrent_admission and e.wl.owner and siblings.admitted_sibling(
                e.wl, ctx.info_of(e), ctx.reserving_in(e.cq), more_favorable=True) is not None:
            e.assignment = None  # skipped: the next attempt starts at the first flavors
            _pending(out, ctx, e, "PendingEvaluation", siblings.MORE_FAVORABLE_ADMITTED, "FailedAfterNomination", base)
            continue
        if a.mode == _NO_FIT:
            _pending(out, ctx, e, a.reason, a.message, "NoFit", base)
            continue
        if a.mode == _PREEMPT and not e.targets:
            _no_candidates(out, ctx, e, base)
            continue
        if a.mode == _PREEMPT and e.wl.preemption_gated and (ctx.orchestrated_preemption or ctx.concurrent_admission):
            # Kueue's scheduler, after the no-candidates case: a closed preemption gate keeps it from preempting
            # (its assignment stands: it holds nothing back); it waits until the gate opens
            _pending(out, ctx, e, ctx.gated_reason, GATED_MESSAGE, PREEMPTION_GATED, base, preemption_gated=True)
            continue
        node = tree.cluster_queues[e.cq]
        recomputed = False  # Kueue recomputes an entry at most once in a cycle: for the overlap, or else for TAS
        # the slice it replaces is as good as a target: another entry's victim, it is no longer there to replace
        if any(t.workload.key in victims for t in e.targets) or (e.replaced is not None
                                                                  and e.replaced.key in victims):
            outcome = _recompute_after_overlap(ctx, e) if ctx.recompute_overlap else ""
            recomputed = ctx.recompute_overlap
            if outcome == "deferred":
                a = e.assignment
                for fr, v in a.usage.items():
                    if v:
                        node.add_usage(fr, v)
                _pending(out, ctx, e, "WaitingForPreemptedWorkloads", DEFERRED_FIT, "PendingPreemption", base)
                continue
            if outcome == "unresolved":
                _fail_recomputed(out, ctx, e, base)
                continue
            if outcome != "new-targets":
                _skip(out, ctx, skips, e, "WaitingForQuota",
                      "Workload has overlapping preemption targets with another workload", "FailedAfterNomination", base)
                continue
            a = e.assignment
        removed = [t.workload for t in e.targets]
        info = ctx.info_of(e)
        fits = _quota_fits(ctx, node, a, removed)
        if fits and info.tas_levels and not _topology_holds(ctx, e, info, removed):
            fits = False
            if ctx.topology.recompute and not recomputed:
                if _recompute_for_topology(out, ctx, skips, e, base):
                    continue
                a = e.assignment
                removed = [t.workload for t in e.targets]
                fits = _quota_fits(ctx, node, a, removed) and _topology_holds(ctx, e, info, removed)
        if not fits:
            if a.mode == _PREEMPT:
                _skip(out, ctx, skips, e, "WaitingForQuota", "Workload no longer fits after processing another workload",
                      "FailedAfterNomination", base)
            else:
                _pending(out, ctx, e, "WaitingForQuota", "Workload no longer fits after processing another workload",
                         "FailedAfterNomination", base)
            continue
        for w in removed:
            victims.add(w.key)
            tree.charge(w.cluster_queue, w.usage, -1)
        ctx.preempted.extend(removed)
        if info.tas_levels:
            ctx.preempted_tas.extend(removed)
        if e.replaced is not None:
            victims.add(e.replaced.key)  # finished with this admission: no other entry of the cycle takes it
        for fr, v in a.usage.items():
            if v:
                node.add_usage(fr, v)
        if removed:
            _preempt(out, ctx, e, base)
            continue
        if block and (admitted or blockadmission.holds_admission(state)):
            # the workload admitted just before (its pods are not ready yet) or another one holds it: Kueue's
            # scheduler waits here, so this cycle admits nothing more, and none runs until it is let go
            _wait_for_pods_ready(out, ctx, e, base)
            break
        if ctx.concurrent_admission and e.wl.owner and _migrates(out, ctx, e, info, base):
            continue
        if e.replaced is not None:
            out.append(_slice_replaced(e, base))
        _admit(out, state, e, base)
        ctx.topology.reserved(e.cq, e.wl, admission_of(e, state.byte_valued()))
        admitted = True
        if refills is not None and not (ctx.concurrent_admission and variants.parent_name(e.wl)):
            _refill(out, ctx, refills, e, pushed, base)  # a variant refills nothing (Kueue's VariantAdmitted)
    if ctx.settle_skips:
        _settle_skips(out, ctx, skips, base)
    return out


def _refill(out: list[ev.Decision], ctx: CycleContext, refills: refill.RefillPass, e: Entry, pushed: list[Entry],
            base: dict) -> None:
    """``FairSharingRefill``: entry ``e`` reserved quota; its ClusterQueue's next workload, nominated against the
    usage charged so far, joins the tournament (``pushed``), or is requeued now when it cannot be nominated."""
    wl = refills.successor(e.cq)
    if wl is None:
        return
    nxt = Entry(wl, e.cq, info=e.info)
    nxt.refilled = True
    nominate(ctx, nxt)
    if ctx.prioritize_preemptors:
        q = ctx.state.queues.get(e.cq)
        nxt.preemptor = q is not None and q.preemptor == wl.key
    if nxt.status:
        _pending(out, ctx, nxt, nxt.status, nxt.message, nxt.requeue_reason, base)
    else:
        pushed.append(nxt)


def _migrates(out: list[ev.Decision], ctx: CycleContext, e: Entry, info: ClusterQueueInfo, base: dict) -> bool:
    """``ConcurrentAdmission``: a variant that fits while a less favorable sibling is admitted takes over from it
    (the sibling is evicted, the variant waits for it to go) or, its flavor after the policy's last acceptable
    one, waits; True when it is not admitted now (:mod:`kueue_es.scheduler.siblings`)."""
    wl = e.wl
    lower = siblings.admitted_sibling(wl, info, ctx.reserving_in(e.cq), more_favorable=False)
    if lower is None:
        return False
    if not siblings.migration_allowed(wl, info):
        _pending(out, ctx, e, "PendingEvaluation", siblings.BELOW_LAST_ACCEPTABLE, "Generic", base)
        return True
    if not lower.evicted:  # evicted already (its quota not yet released): it is only waited for
        out.append(ev.WorkloadEvicted(key=lower.key, uid=lower.uid, reason=siblings.FLAVOR_MIGRATION,
                                      message=siblings.migration_message(wl), **base))
    a = e.assignment
    assert a is not None
    _pending(out, ctx, e, "WaitingForPreemptedWorkloads", f"{a.message}. {siblings.PENDING_MIGRATION}",
             "PendingMigration", base)
    return True


def _wait_for_pods_ready(out: list[ev.Decision], ctx: CycleContext, e: Entry, base: dict) -> None:
    """QuotaReserved=False while waitForPodsReady.blockAdmission holds the entry, unless it shows that already
    (held with the same assignment). It stays in its queue's heap, so the cycle after the event that opens the
    gate takes it again, on the assignment it waits with (``waited``, :func:`_nominate_waited`), as Kueue admits it.
    Its flavor scan stays where this attempt started, for when that assignment no longer fits: the attempt then
    made finds the same flavors if it can (starting over could find none where the resumed scan found some, and
    the two attempts would take turns for ever)."""
    state, wl = ctx.state, e.wl
    reason = blockadmission.reason(ctx.config)
    current = wl.condition("QuotaReserved")
    assert e.assignment is not None
    waited = tuple(ev.WaitedPodSet(name=ps.name, count=ps.count, flavors=tuple(sorted(ps.flavors.items())),
                                   **_waited_topology(ps.topology))
                   for ps in e.assignment.pod_sets)
    if (current is not None and current.status == "False" and current.reason == reason
            and current.message == blockadmission.MESSAGE and wl.waited == waited):
        return
    scan = resume_scan(state, wl, e.cq, ctx.preserve_scan) if wl.scan is not None else None
    out.append(ev.WorkloadPending(key=wl.key, uid=wl.uid, reason=reason, message=blockadmission.MESSAGE,
                                  parked=False, scan=scan, waited=waited, **base))


def _waited_topology(placement: Placement | None) -> dict:
    """The placement a held pod set waits with, as :class:`events.schema.WaitedPodSet` records it (tuples all
    through, as a decoded event holds it, so that the decision equals its replay)."""
    if placement is None:
        return {}
    return {"topology_levels": tuple(placement.levels),
            "topology_domains": tuple((tuple(values), count) for values, count in placement.domains)}


DEFERRED_FIT = ("Workload has overlapping preemption targets with another workload, but will fit after these "
                "preemptions complete")
"""QuotaReserved=False ``WaitingForPreemptedWorkloads`` of an entry the overlap recompute found fitting once the
cycle's victims are gone (Kueue's words, its TestScheduleRecomputePreemptionTargets)."""


def _reassign(ctx: CycleContext, e: Entry, replaced: WorkloadInfo | None = None) -> tuple[Assignment, list[Target]]:
    """Kueue's recompute of a nomination within the cycle (``getAssignments`` with the nomination's flavors
    pinned): the entry's assignment again, its pod sets' counts and flavors as nominated, on the cycle's quota
    tree and TAS snapshots as the earlier entries left them; if it needs preemption, with its victims and the
    placement it would take once they are gone (on an empty topology without victims), as :func:`nominate` gives
    them. ``replaced``: the slice it replaces, if that still counts."""
    a = e.assignment
    assert a is not None
    info = ctx.info_of(e)
    only = {ps.name: dict(ps.flavors) for ps in a.pod_sets}
    again = _assign(ctx, e.wl, e.cq, [ps.count for ps in a.pod_sets], only, info, replaced)
    if again.mode != Mode.PREEMPT:
        return again, []
    probe = Entry(e.wl, e.cq, again, info=info)
    probe.replaced = replaced
    targets = _targets(ctx, probe)
    if info.tas_levels:
        place_preempting(ctx, e.wl, info, again, [t.workload for t in targets], replaced)
    return again, targets


def _recompute_after_overlap(ctx: CycleContext, e: Entry) -> str:
    """Kueue's recompute when an entry's targets overlap victims already chosen this cycle.

    The entry is assigned again with its nominated flavors pinned, on the cycle's tree from which those victims
    are already removed (and from whose candidates they are excluded). If it now fits, it fits only once the
    victims are gone: DeferredFit, and it waits. If it needs new, disjoint victims, it goes on with those. If it
    fits nowhere, or needs preemption and finds no candidate, the recomputed assignment stands and the entry fails
    as that assignment says (:func:`_fail_recomputed`). Returns ``"deferred"``, ``"new-targets"``,
    ``"unresolved"`` or ``""`` (new targets that still overlap: it is skipped).
    """
    again, targets = _reassign(ctx, e)
    if again.mode == Mode.FIT:
        e.assignment, e.targets = again, []
        return "deferred"
    if not targets:
        e.assignment, e.targets = again, []
        return "unresolved"
    if not any(t.workload.key in ctx.removed for t in targets):
        e.assignment, e.targets = again, targets
        return "new-targets"
    return ""


def _quota_fits(ctx: CycleContext, node: QuotaNode, a: Assignment, removed: list[WorkloadInfo]) -> bool:
    """Whether the assignment's quota fits what the cycle left, with its victims' usage off.

    A replaced slice is no target: its quota stays charged, the assignment's usage being only what the new slice
    adds to it (so a later entry of the cycle sees the new slice's whole request held)."""
    tree = ctx.tree
    for w in removed:
        tree.charge(w.cluster_queue, w.usage, -1)
    try:
        return all(v <= node.available(fr) for fr, v in a.usage.items())
    finally:
        for w in removed:
            tree.charge(w.cluster_queue, w.usage, 1)


def _topology_holds(ctx: CycleContext, e: Entry, info: ClusterQueueInfo, removed: list[WorkloadInfo]) -> bool:
    """Whether the entry's placements still fit what the cycle's earlier entries took (with ``removed``, its
    victims, gone), then charged; False, nothing charged, when an earlier entry took their domains."""
    a = e.assignment
    assert a is not None
    if removed:
        return reserve_preempting(ctx, e.wl, info, a, removed, e.replaced)
    return not place_at_admission(ctx, e.wl, info, a, e.replaced)


@contextmanager
def _victims_back(ctx: CycleContext) -> Iterator[None]:
    """The cycle as Kueue's snapshot shows it to a TAS recompute: the victims of this cycle's preemptions still
    hold their quota and their domains, and are candidates again (Kueue adds each preemptor's usage to its snapshot
    but takes a victim's off only to check a fit, ``fits``; it simulates their removal for the overlap recompute
    alone). A recompute that picks one of them as a target is then skipped as overlapping. Undone on exit."""
    gone = ctx.preempted
    if not gone:
        yield
        return
    keys = {w.key for w in gone}
    usage = [u for w in ctx.preempted_tas for u in workload_tas_usage(w)]
    for w in gone:
        ctx.tree.charge(w.cluster_queue, w.usage, 1)
    if usage:
        ctx.topology.snapshots.charge_usage(usage, 1)
    ctx.removed -= keys
    try:
        yield
    finally:
        ctx.removed |= keys
        if usage:
            ctx.topology.snapshots.charge_usage(usage, -1)
        for w in gone:
            ctx.tree.charge(w.cluster_queue, w.usage, -1)


def _recompute_for_topology(out: list[ev.Decision], ctx: CycleContext, skips: dict[str, list[_Skip]], e: Entry,
                            base: dict) -> bool:
    """``TASRecomputeAssignmentWithinSchedulingCycle``: the entry's quota still fits but its placement does not (an
    earlier entry of the cycle took its domains). As Kueue's scheduler (``updateAssignmentIfNeeded``, then
    ``processEntry`` on the new mode), it is assigned again with its nominated flavors pinned (:func:`_reassign`)
    and goes on as the new assignment says: NoFit is pending with that assignment's reason and message, requeued
    as NoFit (parked); Preempt without candidates holds back capacity and placement as any such entry does; a
    closed preemption gate or victims another entry took stop it; otherwise (Fit, or Preempt with new victims)
    the caller checks it again and admits or preempts. True when the entry is done with."""
    replaced = e.replaced if e.replaced is None or e.replaced.key not in ctx.removed else None
    with _victims_back(ctx):
        e.assignment, e.targets = _reassign(ctx, e, replaced)
    a = e.assignment
    if e.refilled and a.mode != Mode.FIT:
        _pending(out, ctx, e, "WaitingForQuota", refill.DEFERRED + a.message, "FailedAfterNomination", base)
        return True
    if a.mode == _NO_FIT:
        _pending(out, ctx, e, a.reason, a.message, "NoFit", base)
        return True
    if a.mode == _PREEMPT and not e.targets:
        _no_candidates(out, ctx, e, base)
        return True
    if a.mode == _PREEMPT and e.wl.preemption_gated and (ctx.orchestrated_preemption or ctx.concurrent_admission):
        _pending(out, ctx, e, ctx.gated_reason, GATED_MESSAGE, PREEMPTION_GATED, base, preemption_gated=True)
        return True
    if any(t.workload.key in ctx.removed for t in e.targets):
        _skip(out, ctx, skips, e, "WaitingForQuota",
              "Workload has overlapping preemption targets with another workload", "FailedAfterNomination", base)
        return True
    return False


def _fail_recomputed(out: list[ev.Decision], ctx: CycleContext, e: Entry, base: dict) -> None:
    """An overlap recompute that resolved nothing: Kueue reports the recomputed assignment (its message, not the
    overlap's) and requeues the entry as that assignment's failure, NoFit or no candidates, so it is parked as
    inadmissible until something changes instead of being tried again every cycle (its
    TestScheduleRecomputePreemptionTargets, "flavor stickiness with RecomputePreemptionTargetsUponOverlap")."""
    a = e.assignment
    assert a is not None
    if a.mode == _NO_FIT:
        _pending(out, ctx, e, a.reason, a.message, "NoFit", base)
    else:
        _no_candidates(out, ctx, e, base)


def _no_candidates(out: list[ev.Decision], ctx: CycleContext, e: Entry, base: dict) -> None:
    """An entry that needs preemption and has no candidate: requeued as such and, where its queue cannot always
    reclaim (or it is its queue's preemptor workload), holding back capacity for the rest of the cycle."""
    a = e.assignment
    assert a is not None
    _pending(out, ctx, e, "WaitingForQuota", a.message, "PreemptionNoCandidates", base)
    if e.preemptor or ctx.state.cluster_queues[e.cq].spec.preemption.reclaim_within_cohort != "Any":
        _reserve_capacity(ctx, e)
        info = ctx.info_of(e)
        if info.tas_levels:
            reserve_placement(ctx, e.wl, info, a)


def _reserve_capacity(ctx: CycleContext, e: Entry) -> None:
    """A preemptor without candidates still holds back capacity so lower priorities can't take it this cycle: when
    its queue cannot always reclaim (``reclaimWithinCohort`` not Any) or, under ``PrioritizePreemptorWorkloads``,
    when it is its queue's preemptor workload."""
    a = e.assignment
    assert a is not None
    node = ctx.tree.cluster_queues[e.cq]
    for fr, req in a.usage.items():
        used = node.usage.get(fr, 0)
        nominal = node.nominal.get(fr, 0)
        if a.borrow > 0:
            bl = node.borrowing_limit.get(fr)
            amount = req if bl is None else min(req, nominal + bl - used)
        else:
            amount = max(0, min(req, nominal - used))
        if amount > 0:
            node.add_usage(fr, amount)


_CLEARS_SCAN = frozenset({"PendingPreemption", "PendingMigration", "PreemptionFailed", "PreemptionGated"})
"""Requeue reasons of attempts that issued preemptions (or a DeferredFit, or were gated): the next attempt starts
over at the first flavors."""
_ROUND_AGAIN = frozenset({"NoFit", "PreemptionNoCandidates", "FailedAfterNomination"})
"""Requeue reasons of failed attempts that would go round the flavors again with nothing changed."""


def _pending(out: list[ev.Decision], ctx: CycleContext, e: Entry, reason: str, message: str,
             requeue_reason: str, base: dict, *, preemption_gated: bool = False,
             preemption_skipped: bool = False, force: bool = False) -> bool:
    """A failed attempt's QuotaReserved=False (``reason``, granular: Kueue's fallback ``Pending`` with
    UnadmittedWorkloadsObservability off), unless the workload shows it already (``force``: written all the same).
    Whether it was written."""
    state, wl = ctx.state, e.wl
    reason = unadmitted_reason(reason, ctx.observability)
    if state.cluster_queues[e.cq].spec.queueing_strategy == "StrictFIFO":
        parked = requeue_reason == "NamespaceMismatch"
    else:
        parked = requeue_reason not in PARK_ALWAYS_HEAP
    scan = _scan_after(ctx, e, requeue_reason)
    if not parked:
        kept = resume_scan(state, wl, e.cq, ctx.preserve_scan) if wl.scan is not None else None
        if _shows_already(wl, reason, message, kept, scan) and not force:
            return False  # nothing new to say: no event, so a blocked head does not flood the log
        if (kept is not None and not kept.pending and kept.changes == state.changes
                and requeue_reason in _ROUND_AGAIN and not force):
            # It went through all its flavors since the last change and would only go round them again. Kueue
            # does, cycle after cycle; here the next round waits for a change, so the scheduler settles.
            return False
    elif (not ctx.fungibility and scan is not None and keeps_queued(wl, True, scan, ctx.now)
          and _shows_already(wl, reason, message, wl.scan, scan) and not force):
        # FlavorFungibility off: the record reads as untried flavors whatever the attempt found, so Kueue's requeue
        # rule puts the workload back on the heap it was taken from, where it fails the same way cycle after
        # cycle: nothing new to say, it stays where it is
        return False
    out.append(ev.WorkloadPending(key=wl.key, uid=wl.uid, reason=reason, message=message,
                                  requeue_reason=requeue_reason, parked=parked, scan=scan,
                                  preemption_gated=preemption_gated, preemption_skipped=preemption_skipped, **base))
    return True


_Skip = tuple[Entry, str, str, str, bool]
"""A preemption skip of the cycle: the entry, its reason, message and requeue reason, and whether it was written."""


def _skip(out: list[ev.Decision], ctx: CycleContext, skips: dict[str, list[_Skip]], e: Entry, reason: str,
          message: str, requeue_reason: str, base: dict) -> None:
    """A workload skipped after it got preemption targets: its attempt, kept for :func:`_settle_skips`."""
    written = _pending(out, ctx, e, reason, message, requeue_reason, base, preemption_skipped=True)
    skips.setdefault(e.cq, []).append((e, reason, message, requeue_reason, written))


def _settle_skips(out: list[ev.Decision], ctx: CycleContext, skips: dict[str, list[_Skip]], base: dict) -> None:
    """Kueue sets ``admission_cycle_preemption_skips`` at the end of each cycle to the number of the ClusterQueue's
    workloads it skipped, which the fold counts from the cycle's marked attempts. An attempt with nothing new to say
    is not written, so where the written ones would not count the cycle's skips (some written, or none written
    while the gauge shows another number), the others are written too (sorted by ClusterQueue, after the cycle's
    decisions). A cycle that writes none while the gauge already shows its number leaves it there, as Kueue's
    write of the same number would."""
    for cq in sorted(skips):
        entries = skips[cq]
        written = sum(1 for *_, w in entries if w)
        if written == len(entries):
            continue
        shown = ctx.state.metrics.skips.get(cq)
        if not written and shown is not None and shown[1] == len(entries):
            continue
        for e, reason, message, requeue_reason, w in entries:
            if not w:
                _pending(out, ctx, e, reason, message, requeue_reason, base, preemption_skipped=True, force=True)


def _shows_already(wl: WorkloadInfo, reason: str, message: str, kept: ev.FlavorScan | None,
                   scan: ev.FlavorScan | None) -> bool:
    """Whether ``wl`` already shows this QuotaReserved=False status and keeps a scan record that got as far."""
    current = wl.condition("QuotaReserved")
    return (current is not None and current.reason == reason and current.message == message
            and (kept.tried if kept is not None else None) == (scan.tried if scan is not None else None))


def _scan_after(ctx: CycleContext, e: Entry, requeue_reason: str) -> ev.FlavorScan | None:
    """The flavor scan progress an attempt leaves for the next one (Kueue's FlavorFungibilityPreserveScanProgress):
    where its assignment got, kept through skips; none after preemptions were issued, a DeferredFit or a gate,
    nor when the workload was not nominated.

    With ``FlavorFungibilityPreserveScanProgress`` off a skipped entry (``FailedAfterNomination``) keeps none, as
    Kueue's skip then drops the assignment. With ``FlavorFungibility`` off there is no pass over the flavors: the
    record is the attempt's own, index 0 for each resource that got a flavor (:mod:`.flavors`), so it reads as
    untried flavors and Kueue's requeue rule keeps the workload on the heap."""
    a = e.assignment
    if a is None or requeue_reason in _CLEARS_SCAN:
        return None
    if requeue_reason == "FailedAfterNomination" and not ctx.preserve_scan:
        return None
    state, wl = ctx.state, e.wl
    if not ctx.fungibility:
        tried = scan_progress(a)
        if tried is None:
            return None
        return ev.FlavorScan(tried=tried, generation=state.allocatable_generation(e.cq), changes=state.changes)
    kept = resume_scan(state, wl, e.cq, ctx.preserve_scan) if wl.scan is not None else None
    going_on = kept is not None and kept.pending  # this attempt went on with a pass over the flavors
    tried = scan_progress(a)
    if tried is None:
        if not going_on:
            return None
        tried = ()  # the pass ended with no flavor assigned: its end is kept, so it is not started over unchanged
    if going_on:
        changes, attempts = kept.changes, kept.attempts + 1  # type: ignore[union-attr]
    else:
        changes, attempts = state.changes, 1
    if attempts >= scan_length(a) and any(i != -1 for ps in tried for _, i in ps):
        # Pod sets that take turns can keep each other's scans going round for ever (Kueue retries such a
        # workload cycle after cycle); the pass ends once it has had as many attempts as there are flavors.
        tried = tuple(tuple((r, -1) for r, _ in ps) for ps in tried)
    return ev.FlavorScan(tried=tried, generation=state.allocatable_generation(e.cq), changes=changes,
                         attempts=attempts)


def _preempt(out: list[ev.Decision], ctx: CycleContext, e: Entry, base: dict) -> None:
    """Preempt the entry's targets (never the slice it replaces, which keeps running until it is admitted).
    A target whose last preemption the apiserver refused, and whose retry is still to come
    (:attr:`ClusterState.refused_evictions`), is Kueue's failed preemption: with none issued, the preemptor
    shows that it will retry (``PreemptionFailed``, back on the heap for the next cycle)."""
    state, wl = ctx.state, e.wl
    a = e.assignment
    assert a is not None
    refused, failed = state.refused_evictions, 0
    for t in e.targets:
        victim = t.workload
        if victim.evicted:
            continue
        refusal = refused.get(victim.key) if refused else None
        if refusal is not None and refusal.retry_at > ctx.now:
            failed += 1
            continue
        chosen = t.selection  # ConfigurablePreemptions: the config and rules that chose it, as Kueue v0.20 words it
        out.append(ev.WorkloadPreempted(
            key=victim.key, uid=victim.uid, reason=t.reason, preemptor=wl.key,
            message=(configured_message(wl.key, *chosen) if chosen is not None
                     else preemption_message(state, wl, victim, t.reason)),
            preemption_config=chosen.config if chosen is not None else "",
            selected_by=chosen.rules if chosen is not None else (), **base))
    shown = a.message + ". " if a.message else ""
    preempted = len(e.targets) - failed  # issued now or earlier (Kueue counts those under way too)
    if preempted:
        _pending(out, ctx, e, "WaitingForPreemptedWorkloads",
                 shown + f"Pending the preemption of {preempted} workload(s)", "PendingPreemption", base)
    else:
        _pending(out, ctx, e, "WaitingForPreemptedWorkloads",
                 shown + f"Preempting {failed} workload(s) failed, will retry.", "PreemptionFailed", base)


def _slice_replaced(e: Entry, base: dict) -> ev.WorkloadSliceReplaced:
    """The old slice finishes as its replacement is admitted (Kueue's ``replaceWorkloadSlice``, message and all)."""
    old, wl = e.replaced, e.wl
    assert old is not None
    job_uid = wl.labels.get("kueue.x-k8s.io/job-uid", "")
    return ev.WorkloadSliceReplaced(
        key=old.key, uid=old.uid, replacement=wl.key,
        message=f"Replaced to accommodate a workload (UID: {wl.uid}, JobUID: {job_uid}) due to workload slice "
                "aggregation", **base)


_format = lru_cache(maxsize=8192)(canonical_quantity)
"""``resourceUsage`` as Kueue writes it (``1G``, ``1k`` cores)."""


def _pod_set_assignment(ps: PodSetResult, byte_valued: frozenset[str]) -> o.PodSetAssignment:
    names = sorted(ps.flavors) if len(ps.flavors) > 1 else list(ps.flavors)
    return o.PodSetAssignment(
        name=ps.name,
        flavors={r: ps.flavors[r] for r in names},
        resource_usage={r: _format(r, ps.requests[r], r in byte_valued)
                        for r in names if r in ps.requests},  # not an inherited one
        count=ps.count,
        **topology_fields(ps),
    )


def admission_of(e: Entry, byte_valued: frozenset[str]) -> o.Admission:
    """The Admission ``e``'s assignment writes; ``byte_valued`` resources (:meth:`ClusterState.byte_valued`) in
    binary units. The memo on a plan lives as long as the compiled ClusterQueue, which a new configuration
    replaces."""
    a = e.assignment
    assert a is not None
    if any(ps.topology is not None or ps.delayed for ps in a.pod_sets):
        return o.Admission(cluster_queue=e.cq, pod_set_assignments=[_pod_set_assignment(ps, byte_valued)
                                                                             for ps in a.listed()])
    if len(a.pod_sets) == 1 and a.pod_sets[0].plan is not None:
        # one pod set: the same plan (per ClusterQueue) with the same flavors always writes the same Admission
        ps = a.pod_sets[0]
        key = (None, *ps.flavors.items())
        adm = ps.plan.admissions.get(key)
        if adm is None:
            adm = ps.plan.admissions[key] = o.Admission(cluster_queue=e.cq,
                                                        pod_set_assignments=[_pod_set_assignment(ps, byte_valued)])
        return adm  # type: ignore[return-value]
    psas = []
    for ps in a.listed():  # in Kueue's order (a pod-set group's members together)
        plan = ps.plan
        if plan is None:
            psas.append(_pod_set_assignment(ps, byte_valued))
            continue
        # the same plan with the same flavors always writes the same (immutable) PodSetAssignment
        key = tuple(ps.flavors.items())
        psa = plan.admissions.get(key)
        if psa is None:
            psa = plan.admissions[key] = _pod_set_assignment(ps, byte_valued)
        psas.append(psa)
    return o.Admission(cluster_queue=e.cq, pod_set_assignments=psas)


def _admit(out: list[ev.Decision], state: ClusterState, e: Entry, base: dict) -> None:
    wl = e.wl
    admission = admission_of(e, state.byte_valued())
    # explicit keywords: unpacking ``**base`` costs more than building the event itself
    t, cyc, i = base["time"], base["cycle"], base["input"]
    out.append(ev.QuotaReserved(key=wl.key, uid=wl.uid, admission=admission,
                                message=f"Quota reserved in ClusterQueue {e.cq}",
                                considered_flavors=considered_flavors(e.assignment),  # type: ignore[arg-type]
                                time=t, cycle=cyc, input=i))
    if any(ps.delayed for ps in e.assignment.pod_sets):  # type: ignore[union-attr]
        return  # Admitted waits for the second pass to place the delayed topology
    info = e.info or state.cq_info(e.cq)
    if info is not None and info.check_rules:
        flavors = {f for psa in admission.pod_set_assignments for f in psa.flavors.values()}
        checks = info.required_checks(flavors)
        if not all(wl.check_states.get(c) is not None and wl.check_states[c].state == "Ready" for c in checks):
            return
    out.append(ev.WorkloadAdmitted(key=wl.key, uid=wl.uid, message="The workload is admitted", time=t, cycle=cyc,
                                   input=i))
