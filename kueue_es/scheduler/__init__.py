"""The scheduler: a pure function from projected state and time to decision events.

``decide(state, config, now)`` first lets the workload controller's rules act (releases, backoffs, timeouts,
admission checks) and, when they have nothing to say, runs one scheduling cycle. The caller appends the
decisions to the log as one batch and applies them; calling again until nothing is returned reaches the same
fixed point Kueue's controllers would. Nothing here reads a clock, draws a random number or does I/O.
"""

from __future__ import annotations

from events import schema as ev
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.scheduler.reconcile import next_deadline, reconcile
from projections.cluster import ClusterState

__all__ = ["DEFAULT", "SchedulerConfig", "decide", "decide_as_older", "next_deadline", "settle"]


def decide(state: ClusterState, config: SchedulerConfig = DEFAULT, now: int | None = None) -> list[ev.Decision]:
    """Decisions for the next batch, numbered ``state.last_cycle + 1``; ``now`` defaults to the log's time."""
    t = state.time if now is None else now
    cycle = state.last_cycle + 1
    return (unrefused(state, reconcile(state, config, t, cycle), t)
            or unrefused(state, run_cycle(state, config, t, cycle), t))


_EVICTIONS = (ev.WorkloadPreempted, ev.WorkloadEvicted)


def unrefused(state: ClusterState, batch: list[ev.Decision], now: int) -> list[ev.Decision]:
    """``batch`` without the preemptions and evictions of workloads whose last eviction the connector rejected
    and the fold took back (:attr:`ClusterState.refused_evictions`), until the workload's next event (the
    watch showing it anew, which also lifts the writer's block) or the refusal's backoff ends (Kueue's: the
    scheduling loop's for a preemption, the workload controller's per-item one for any other eviction:
    :func:`projections.eviction_undo.retry_after`): a writer that keeps refusing them does not make them
    decided on every turn, and one whose refusal lifts gets the eviction again. (A preemptor of such a victim
    shows its preemption failed: :func:`kueue_es.scheduler.cycle._preempt`.)"""
    refused = state.refused_evictions
    if not refused or not batch:
        return batch
    return [d for d in batch
            if not (isinstance(d, _EVICTIONS) and d.key in refused and refused[d.key].retry_at > now)]


def decide_as_older(state: ClusterState, config: SchedulerConfig = DEFAULT, now: int | None = None) -> list[ev.Decision]:
    """What :func:`decide` gave before session 32, for ``replay --verify`` of logs written then: no eviction of a
    deactivated pending workload, no skipped attempt written only to settle ``admission_cycle_preemption_skips``.
    Looks at every workload and leaves the record of what the controller rules looked at alone (that changes no
    decision), so it can be asked beside :func:`decide`."""
    t = state.time if now is None else now
    cycle = state.last_cycle + 1
    return (reconcile(state, config, t, cycle, full=True, evict_deactivated_pending=False)
            or run_cycle(state, config, t, cycle, settle_skips=False))


def settle(state: ClusterState, config: SchedulerConfig = DEFAULT, now: int | None = None,
           max_batches: int = 100_000) -> list[list[ev.Decision]]:
    """Decide and apply (to ``state`` only) until quiet; returns the batches. For callers without a log."""
    batches = []
    offset = state.offset
    for _ in range(max_batches):
        batch = decide(state, config, now)
        if not batch:
            break
        for e in batch:
            offset += 1
            state.apply(ev.Record(offset, e))
        batches.append(batch)
    return batches
