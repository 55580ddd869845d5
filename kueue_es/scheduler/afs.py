"""Admission Fair Sharing (config ``admissionFairSharing`` set, ClusterQueue ``admissionScope.admissionMode:
UsageBasedAdmissionFairSharing``): LocalQueues that consumed less go first.

Each LocalQueue has a *consumed* usage per resource (floats: cpu in cores, other resources in their units), an
exponentially decayed history of what it had admitted — or, under ``AdmissionFairSharingAnchorAtQuotaReservation``
(beta, on: Kueue v0.20's *accounting anchor*), of what its workloads hold quota for, admitted or not:

* every ``usageSamplingInterval`` after its last update, consumed ← consumed·(1−α) + admitted·α with
  α = 1 − 0.5^(elapsed / usageHalfLifeTime) — the LocalQueue controller's sample (a half-life of 0 empties it);
* when one of its workloads reaches the anchor (is admitted; under the gate, reserves quota), consumed is first
  decayed towards the anchored usage (now including that workload) over the time since the last update, then the
  workload's *entry penalty* — its requests × (1 − 0.5^(interval / half-life)) — is added, and the update time
  moves to now;
* with the gate off, until then (quota reserved, admission checks pending) that penalty is *pending* and counts
  on top; a workload released before admission leaves no trace, where under the gate each reservation settles
  one penalty.

Kueue samples the LocalQueues of a ClusterQueue that does not order by usage as well (its LocalQueue controller
checks only that Admission Fair Sharing is on): theirs decays towards their admitted usage at the samples, with
no entry penalty, no settlement and the anchor at admission, for their status and usage gauge.

A LocalQueue's first appearance in the log seeds it (Kueue v0.20's warm start, #12891): the consumed usage its
status persisted, if any, from that time on — so a takeover from Kueue (or a LocalQueue recreated) starts from what
``status.fairSharing.admissionFairSharingStatus.consumedResources`` held; a new LocalQueue starts empty.

A LocalQueue's usage is Σ_resource weight·(consumed + pending) ÷ the LocalQueue's ``fairSharing.weight``
(+∞ for a weight ≤ 0). All of it is a function of the log: the projection records when each LocalQueue's
admitted usage changed (``ClusterState.afs_history``) and this module folds those facts, in log order, with the
configuration — the samples falling at fixed steps after each update, so the result does not depend on when or
how often the scheduler looks. Under the recorded configuration the fold is the projection's own ledger
(``ClusterState.afs_ledger``), extended as the history grows, per LocalQueue (a deleted one is forgotten alone);
under another (a tool's ``--config``), one of this module's, memoised on the state. None is kept unless the
recorded Configuration turns Admission Fair Sharing on (with none recorded, what reads the log reads Kueue's
defaults: off), and it stays bounded then: past a few entries a LocalQueue's is compacted into a checkpoint of
this fold's exact floats under the recorded configuration, which folds on bit for bit as the raw entries would (:mod:`projections.afs_ledger`, where the arithmetic lives and the rule for a changed
configuration is given).
"""

from __future__ import annotations

import math
from collections.abc import Container
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any

from events.quantity import decimal_string
from events.timefmt import format_time
from kueue_es.scheduler import config_record
from kueue_es.scheduler.config import AdmissionFairSharingConfig, SchedulerConfig
from kueue_es.scheduler.quota import fair_weight
from projections.afs_ledger import AfsLedger, LedgerQueue, amount
from projections.cluster import ClusterState
from projections.cluster_afs import USAGE_BASED
from projections.workloads import RESERVED

if TYPE_CHECKING:
    from projections.workloads import WorkloadInfo

def enabled_for(config: SchedulerConfig, state: ClusterState, cq: str) -> bool:
    """Whether Admission Fair Sharing orders ClusterQueue ``cq``'s workloads."""
    if config.admission_fair_sharing is None:
        return False
    obj = state.cluster_queues.get(cq)
    scope = obj.spec.admission_scope if obj is not None else None
    return scope is not None and scope.admission_mode == USAGE_BASED


class AfsFold(AfsLedger):
    """A fold of the state's history under a configuration other than the recorded one (an override): the
    recorded one's is the projection's (:meth:`ClusterState.afs_ledger`)."""

    def __init__(self, afs: AdmissionFairSharingConfig) -> None:
        super().__init__(*afs.key)


def fold(state: ClusterState, config: SchedulerConfig) -> AfsLedger:
    """The state's history folded under ``config``: the projection's ledger where ``config`` has the recorded
    half-life and sampling interval (it checkpoints the history with it: folded once), else a fold of its own
    (memoised on the state, extended incrementally)."""
    assert config.admission_fair_sharing is not None
    key = config.admission_fair_sharing.key
    ledger = state.afs_ledger(key)
    if ledger is not None:
        return ledger
    memo: AfsFold | None = state.derived.get("afs")
    if memo is None or memo.key() != key:
        memo = state.derived["afs"] = AfsFold(config.admission_fair_sharing)
    history = state.afs_history
    for lq in sorted(set(memo.lists) | set(history)):  # an override, in a tool: its own walk of every LocalQueue
        memo.extend(lq, history.get(lq))
    return memo


def pending_penalty(state: ClusterState, fold_: AfsLedger, lq: str, cq: str) -> dict[str, float]:
    """Penalties of the LocalQueue's workloads holding quota without being admitted yet (none under the
    reservation anchor, which settles them when they reserve)."""
    out: dict[str, float] = {}
    if fold_.penalty_alpha == 0 or state.afs_anchor_at_reservation or not state.cq_uses_afs(cq):
        return out  # Kueue pushes entry penalties only for ClusterQueues ordering by Admission Fair Sharing
    workloads = state.workloads
    for key in sorted(state.reserving.get(cq, ())):
        wl: WorkloadInfo = workloads[key]
        if wl.phase != RESERVED or f"{wl.namespace}/{wl.queue_name}" != lq:
            continue
        for fr, v in wl.usage.items():
            r = fr.split("/", 1)[1]
            out[r] = out.get(r, 0.0) + amount(r, v) * fold_.penalty_alpha
    return out


def lq_usage(state: ClusterState, config: SchedulerConfig, lq: str, cq: str, now: int,
             fold_: AfsLedger | None = None) -> float:
    """Σ weight·(consumed + pending penalty) ÷ the LocalQueue's weight (+∞ for a weight ≤ 0)."""
    f = fold_ if fold_ is not None else fold(state, config)
    consumed = f.consumed(lq, now)
    penalty = pending_penalty(state, f, lq, cq)
    weights = config.admission_fair_sharing.resource_weights  # type: ignore[union-attr]
    total = 0.0
    for r in sorted(set(consumed) | set(penalty)):
        total += weights.get(r, 1.0) * (consumed.get(r, 0.0) + penalty.get(r, 0.0))
    obj = state.local_queues.get(lq)
    fs = obj.spec.fair_sharing if obj is not None else None
    weight = fair_weight(fs)
    if weight <= 0:
        return math.inf
    return total / weight


def workload_usage(state: ClusterState, config: SchedulerConfig, now: int):
    """For ordering preemption candidates: the usage of a workload's LocalQueue when its ClusterQueue uses
    Admission Fair Sharing, else None (memoised per LocalQueue for the call)."""
    f = fold(state, config)
    memo: dict[str, float | None] = {}

    def usage(wl: WorkloadInfo) -> float | None:
        lq = f"{wl.namespace}/{wl.queue_name}"
        if lq not in memo:
            memo[lq] = (lq_usage(state, config, lq, wl.cluster_queue, now, f)
                        if enabled_for(config, state, wl.cluster_queue) else None)
        return memo[lq]

    return usage


def queue_head(state: ClusterState, config: SchedulerConfig | None, cq: str, now: int,
               taken: Container[str] = ()) -> str | None:
    """The workload ClusterQueue ``cq``'s queue offers next, none of ``taken``: by Admission Fair Sharing
    (:func:`head`) where it orders ``cq``, else the queue's own order (:meth:`ClusterQueueQueue.head`)."""
    q = state.queues.get(cq)
    if q is None:
        return None
    if config is not None and enabled_for(config, state, cq):
        return head(state, config, cq, now, taken)
    return q.head(taken)


def head(state: ClusterState, config: SchedulerConfig, cq: str, now: int,
         taken: Container[str] = ()) -> str | None:
    """The head of an Admission-Fair-Sharing queue: lowest LocalQueue usage, then the sticky workload, then
    priority, queue-order time and UID (leaving out the workloads ``taken`` already)."""
    q = state.queues.get(cq)
    if q is None or not q.active:
        return None
    f = fold(state, config)
    usage: dict[str, float] = {}
    best: tuple | None = None
    workloads = state.workloads
    for sk in q.active:
        key = sk[3]
        if key in taken:
            continue
        wl = workloads[key]
        lq = f"{wl.namespace}/{wl.queue_name}"
        u = usage.get(lq)
        if u is None:
            u = usage[lq] = lq_usage(state, config, lq, cq, now, f)
        candidate = (u, 0 if key == q.sticky else 1, sk)
        if best is None or candidate < best:
            best = candidate
    return best[2][3] if best is not None else None


def usage_samples(state: ClusterState) -> list[tuple[tuple[str, ...], float]]:
    """``kueue_local_queue_admission_fair_sharing_usage`` (Kueue v0.19 #12326): per LocalQueue (name, namespace,
    ClusterQueue), :func:`lq_usage` at the log's time. Kueue's LocalQueue controller sets it when it samples the
    consumed usage: while ``admissionFairSharing`` is configured, for a LocalQueue whose ClusterQueue is active.
    Kueue does so whatever that ClusterQueue's admission mode (``localqueue_controller.go`` checks only that
    Admission Fair Sharing is on; its ``TestLocalQueueReconcileReportsAdmissionFairSharingUsageMetric`` reports one
    of a ClusterQueue without it): its consumed usage then decays towards the admitted usage, with no entry
    penalty."""
    config = config_record.in_force(state)
    if config is None or config.admission_fair_sharing is None:
        return []
    f = fold(state, config)
    out = []
    for key in sorted(state.local_queues):
        if state.local_queue_active(key)[0] != "True":
            continue
        cq = state.local_queues[key].spec.cluster_queue
        namespace, _, name = key.partition("/")
        out.append(((name, namespace, cq), lq_usage(state, config, key, cq, state.time, f)))
    return out


def local_queue_status(state: ClusterState, config: SchedulerConfig, lq: str, now: int) -> dict[str, Any] | None:
    """The ``status.fairSharing`` Kueue's LocalQueue controller writes under Admission Fair Sharing (config stanza,
    gate on) on an active LocalQueue: ``weightedShare`` 0 (nothing computes it for a LocalQueue) and
    ``admissionFairSharingStatus`` with the consumed usage as of its last update (``consumedResources``: cpu in
    cores, the rest in their units, decimal SI rounded down to nano-units, as Kueue's decimal arithmetic keeps
    them) and that update's time (``lastUpdate``): a sample every
    ``usageSamplingInterval`` from the last update, or an admission's settlement. None where Kueue writes
    nothing, leaving what is there: Admission Fair Sharing off, a stopped LocalQueue or one whose ClusterQueue is
    missing or inactive (its controller returns before), or one this state has no history of (restored from an
    older snapshot). Written whatever the ClusterQueue's admission mode, as Kueue's LocalQueue controller samples
    every LocalQueue (Kueue v0.20 ``pkg/controller/core/localqueue_controller.go``): one whose ClusterQueue does
    not order by it decays towards its admitted usage, without entry penalties."""
    obj = state.local_queues.get(lq)
    if obj is None or config.admission_fair_sharing is None or not state.afs_tracks(obj.spec.cluster_queue):
        return None
    if state.local_queue_active(lq)[0] != "True":
        return None
    shown = fold(state, config).shown(lq, now)
    if shown is None:
        return None
    consumed, last = shown
    return {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {r: _quantity(v) for r, v in sorted(consumed.items())},
        "lastUpdate": format_time(last)}}


def sampled_between(state: ClusterState, config: SchedulerConfig, after: int, upto: int) -> list[str]:
    """The LocalQueues with a sample in (``after``, ``upto``], sorted: those whose status moved as the log's time
    went from one to the other (none without Admission Fair Sharing). The earliest sample after ``after`` is kept:
    until a LocalQueue's ledger moves, a later window ending before it is answered without walking them (the
    status writer asks at every pass, mostly between two samples)."""
    if config.admission_fair_sharing is None or upto <= after:
        return []
    f = fold(state, config)
    memo = f.memos.get("sampled_between")
    if memo is not None and memo[0] <= after and (memo[1] is None or upto < memo[1]):
        return []  # nothing folded in since, and no LocalQueue's first sample after memo[0] is due by upto
    out = []
    first: int | None = None
    for lq in sorted(f.queues):
        due = _next_due(f, f.queues[lq], after)
        if due is None:
            continue
        if due <= upto:
            out.append(lq)
        if first is None or due < first:
            first = due
    f.memos["sampled_between"] = (after, first)
    return out


def next_sample(state: ClusterState, config: SchedulerConfig) -> int | None:
    """The first sample after the log's time that moves some LocalQueue's consumed usage as its status shows it
    (None: none will, or Admission Fair Sharing is off), for the scheduler's next deadline: Kueue's LocalQueue
    controller re-samples every ``usageSamplingInterval``. A LocalQueue whose shown usage already is what the
    samples converge to (its admitted usage; nothing under a half-life of 0) is left out, so an idle log does not
    wake for samples that only move ``lastUpdate``."""
    if config.admission_fair_sharing is None:
        return None
    f = fold(state, config)
    now = state.time
    memo = f.memos.get("next_sample")
    if memo is not None and memo[0] <= now and (memo[1] is None or now < memo[1]):
        return memo[1]  # nothing folded in since and that sample not due yet: every LocalQueue's answer stands
    best: int | None = None
    for lq in sorted(f.queues):
        q = f.queues[lq]
        due = _next_due(f, q, now)
        if due is not None and (best is None or due < best) and not _converged(f, q, now):
            best = due
    f.memos["next_sample"] = (now, best)
    return best


def _next_due(f: AfsLedger, q: LedgerQueue, after: int) -> int | None:
    """A LocalQueue's first sample after ``after``, on its grid (from its last sample, else its anchor); None while
    it has neither."""
    start = q.last if q.last is not None else q.anchor
    if start is None:
        return None
    return start + ((max(after, start) - start) // f.interval + 1) * f.interval


def _converged(f: AfsLedger, q: LedgerQueue, now: int) -> bool:
    """Whether the consumed usage shown at ``now`` is what further samples lead to (rounded as shown: the samples
    move it monotonically towards the admitted usage, so nothing in between shows otherwise)."""
    consumed = f._samples(q, now)[0]
    if f.half_life <= 0:
        limit: dict[str, float] = {}
    else:
        limit = {r: q.admitted.get(r, 0.0) for r in set(consumed) | set(q.admitted)}
    shown = {r: _quantity(v) for r, v in consumed.items()}
    return shown == {r: _quantity(v) for r, v in limit.items()}


def _quantity(value: float) -> str:
    """A consumed amount as Kueue writes it: decimal SI, rounded down to nano-units."""
    nanos = Decimal(repr(max(0.0, value))).scaleb(9).to_integral_value(rounding=ROUND_FLOOR)
    return decimal_string(nanos.scaleb(-9))
