"""When waitForPodsReady evicts an admitted workload whose pods are not ready, as Kueue's workload controller decides
it, read off the fold's clocks (:class:`projections.cluster.ClusterState`): the deadline of one workload, the
workloads due by a time, and the earliest deadline to come (for clock ticks). Pure: the time is the log's.

- Waiting for its pods to start (no PodsReady condition, or one not ``WaitForRecovery``): ``timeout`` from the
  admission; the eviction's underlying cause is ``WaitForStart``.
- Waiting for a recovery (PodsReady ``WaitForRecovery``: its pods were ready and one was lost): ``recoveryTimeout``
  from the condition's lastTransitionTime, and no eviction while no recovery timeout is set; the underlying cause is
  ``WaitForRecovery``.
- Waiting for its pods' scheduling under ``WaitForPodsReadyUnscheduledTimeout`` (alpha, off; a positive
  ``unscheduledTimeout``): PodsReady ``WaitForScheduling`` and a current PodsScheduled=False observation
  (:mod:`projections.pods_scheduled`): ``unscheduledTimeout`` from the admission (or ``timeout``, if that runs out
  first); with no current observation, ``timeout``. Either way the underlying cause is ``WaitForScheduling``.
- Under ``WorkloadLevelWaitForPodsReady`` (alpha, off), a workload's ``kueue.x-k8s.io/wait-for-pods-ready``
  annotation sets its own timeout and recovery timeout in place of the configuration's
  (:mod:`projections.workload_pods_ready`).
"""

from __future__ import annotations

from kueue_es.scheduler.config import SchedulerConfig, parse_duration
from projections import gates
from projections.cluster import ClusterState
from projections.deadlines import DueIndex
from projections.pods_ready_condition import WAIT_FOR_RECOVERY, WAIT_FOR_SCHEDULING, WAIT_FOR_START
from projections.pods_ready_wait import own_deadline, pods_ready_wait
from projections.pods_scheduled import unscheduled_wait
from projections.workloads import ADMITTED, WorkloadInfo


def recovery_ms(config: SchedulerConfig) -> int | None:
    """``waitForPodsReady.recoveryTimeout`` in ms (None: unset or zero, so a lost readiness is never timed out)."""
    raw = config.pods_ready.recovery_timeout
    return parse_duration(raw) or None if raw else None


def unscheduled_ms(config: SchedulerConfig) -> int | None:
    """``waitForPodsReady.unscheduledTimeout`` in ms while its gate is on (None: off, unset or zero)."""
    raw = config.pods_ready.unscheduled_timeout
    if not raw or not config.gate(gates.WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT):
        return None
    return parse_duration(raw) or None


def _scheduling_cause(wl: WorkloadInfo) -> bool:
    ready = wl.condition("PodsReady")
    return ready is not None and ready.status == "False" and ready.reason == WAIT_FOR_SCHEDULING


def own_in_force(config: SchedulerConfig) -> bool:
    """Workloads' own timeouts count: the gate is on and waitForPodsReady in force."""
    return config.pods_ready.enable and config.gate(gates.WORKLOAD_LEVEL_WAIT_FOR_PODS_READY)


def deadline(config: SchedulerConfig, wl: WorkloadInfo) -> tuple[int, str] | None:
    """``(when, underlying cause)`` of ``wl``'s PodsReady-timeout eviction (None: none is coming)."""
    pr = config.pods_ready
    if not pr.enable or wl.phase != ADMITTED or wl.pods_ready or wl.evicted or wl.admitted_at is None:
        return None
    waiting, recovering = pods_ready_wait(wl)
    cause = WAIT_FOR_RECOVERY if recovering is not None else WAIT_FOR_START
    unscheduled = unscheduled_ms(config) if recovering is None else None
    sooner = None
    if unscheduled is not None and _scheduling_cause(wl):
        cause = WAIT_FOR_SCHEDULING
        if unscheduled_wait(wl):
            assert waiting is not None
            sooner = waiting + unscheduled
    if wl.own_pods_ready is not None and own_in_force(config):
        due = own_deadline(wl.own_pods_ready, waiting, recovering)
        if due is not None:
            return (due if sooner is None else min(due, sooner)), cause
    if recovering is not None:
        recovery = recovery_ms(config)
        return (recovering + recovery, cause) if recovery is not None else None
    assert waiting is not None
    due = waiting + parse_duration(pr.timeout)
    return (due if sooner is None else min(due, sooner)), cause


def due(state: ClusterState, config: SchedulerConfig, now: int) -> set[str]:
    """The workloads whose timeout may have run out by ``now`` (a superset: :func:`deadline` decides)."""
    if not config.pods_ready.enable:
        return set()
    keys = set(state.pods_ready_clock.due(now - parse_duration(config.pods_ready.timeout)))
    recovery = recovery_ms(config)
    if recovery is not None:
        keys.update(state.recovery_clock.due(now - recovery))
    if own_in_force(config):
        keys.update(state.own_pods_ready_clock.due(now))
    unscheduled = unscheduled_ms(config)
    if unscheduled is not None:
        keys.update(state.unscheduled_clock.due(now - unscheduled))
    return keys


def _first_not_in(clock: DueIndex, skip: dict[str, int]) -> int | None:
    if not skip:
        return clock.first()
    return next((t for t, key in clock.ordered() if key not in skip), None)


def next_due(state: ClusterState, config: SchedulerConfig) -> int | None:
    """The earliest time a workload's timeout runs out (None: none is running). A workload whose eviction was
    refused and waits out its backoff (:attr:`ClusterState.refused_evictions`) is left out: its timeout may
    have run out already (a refused timeout eviction's has), and the refusal's own retry wakes the loop, when
    what is due is looked at again (a past-due time would have the loop tick on every turn)."""
    if not config.pods_ready.enable:
        return None
    own = own_in_force(config)
    skip = state.own_pods_ready_clock.at if own else {}
    held = ({k: r.retry_at for k, r in state.refused_evictions.items() if r.retry_at > state.time}
            if state.refused_evictions else {})
    if held:
        skip = {**skip, **held}
    times = []
    start = _first_not_in(state.pods_ready_clock, skip)
    if start is not None:
        times.append(start + parse_duration(config.pods_ready.timeout))
    recovery = recovery_ms(config)
    lost = _first_not_in(state.recovery_clock, skip) if recovery is not None else None
    if lost is not None and recovery is not None:
        times.append(lost + recovery)
    mine = _first_not_in(state.own_pods_ready_clock, held) if own else None
    if mine is not None:
        times.append(mine)
    unscheduled = unscheduled_ms(config)
    first = _first_not_in(state.unscheduled_clock, held) if unscheduled is not None else None
    if first is not None and unscheduled is not None:
        times.append(first + unscheduled)
    return min(times, default=None)
