"""What Kueue's workload controller does on its own, driven by time and facts in the log.

* an evicted workload whose job has stopped gives its quota back and is requeued (Requeued condition);
* a requeue backoff that has run out sets Requeued=True/BackoffFinished;
* an admitted workload whose pods are not ready within waitForPodsReady's timeout is evicted with backoff;
* admission checks: all Ready admits, Retry evicts, Rejected deactivates;
* a deactivated workload holding quota is evicted; HoldAndDrain evicts what a stopped ClusterQueue admitted.
"""

from __future__ import annotations

from events import schema as ev
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, RESERVED

from kueue_es.scheduler.config import SchedulerConfig, parse_duration
from kueue_es.scheduler.cycle import required_checks

REQUEUE_TRUE_REASONS = frozenset({"Preempted", "NodeFailures"})


def backoff_ms(config: SchedulerConfig, count: int) -> int:
    """waitForPodsReady backoff for the ``count``-th requeue: base·2^(count−1), capped (Kueue's jitter is left out)."""
    rs = config.pods_ready.requeuing_strategy
    seconds = min(rs.backoff_base_seconds * 2 ** max(0, count - 1), rs.backoff_max_seconds)
    return seconds * 1000


def pods_ready_deadline(config: SchedulerConfig, wl) -> int | None:
    pr = config.pods_ready
    if not pr.enable or wl.phase != ADMITTED or wl.pods_ready or wl.evicted or wl.admitted_at is None:
        return None
    return wl.admitted_at + parse_duration(pr.timeout)


def reconcile(state: ClusterState, config: SchedulerConfig, now: int, cycle: int) -> list[ev.Decision]:
    base = {"time": now, "cycle": cycle, "input": state.offset}
    out: list[ev.Decision] = []
    wls = state.workloads
    for key in sorted(state.awaiting_release):
        wl = wls[key]
        evicted = wl.condition("Evicted")
        reason = wl.evicted or "Evicted"
        out.append(ev.WorkloadRequeued(
            key=key, uid=wl.uid, status=reason in REQUEUE_TRUE_REASONS, reason=reason,
            message=evicted.message if evicted is not None else "", release=True, **base))
    for key in sorted(state.backoff):
        wl = wls.get(key)
        if wl is None or wl.requeue_at is None or wl.requeue_at > now or wl.reserving:
            continue
        out.append(ev.WorkloadRequeued(key=key, uid=wl.uid, status=True, reason="BackoffFinished",
                                       message="The workload backoff was finished", **base))
    for cq in sorted(state.reserving):
        cq_obj = state.cluster_queues.get(cq)
        drain = cq_obj is not None and cq_obj.spec.stop_policy == "HoldAndDrain"
        for key in sorted(state.reserving[cq]):
            wl = wls[key]
            if wl.evicted:
                continue
            if not wl.active:
                out.append(ev.WorkloadEvicted(key=key, uid=wl.uid, reason="Deactivated",
                                              message="The workload is deactivated", **base))
                continue
            if drain and wl.phase == ADMITTED:
                out.append(ev.WorkloadEvicted(key=key, uid=wl.uid, reason="ClusterQueueStopped",
                                              message="The ClusterQueue is stopped", **base))
                continue
            states = wl.check_states
            if any(s.state == "Rejected" for s in states.values()):
                names = ", ".join(sorted(k for k, s in states.items() if s.state == "Rejected"))
                out.append(ev.WorkloadDeactivated(key=key, uid=wl.uid, reason="DeactivatedDueToAdmissionCheck",
                                                  message=f"The workload is deactivated due to AdmissionCheck(s) in Rejected state: {names}", **base))
                continue
            if any(s.state == "Retry" for s in states.values()):
                names = ", ".join(sorted(k for k, s in states.items() if s.state == "Retry"))
                out.append(ev.WorkloadEvicted(key=key, uid=wl.uid, reason="AdmissionCheck",
                                              message=f"Evicted due to AdmissionCheck(s) in Retry state: {names}", **base))
                continue
            if wl.phase == RESERVED and wl.admission is not None:
                flavors = {f for p in wl.admission.pod_set_assignments for f in p.flavors.values()}
                checks = required_checks(state, cq, flavors) if cq_obj is not None else []
                if all(states.get(c) is not None and states[c].state == "Ready" for c in checks):
                    out.append(ev.WorkloadAdmitted(key=key, uid=wl.uid, message="The workload is admitted", **base))
                continue
            deadline = pods_ready_deadline(config, wl)
            if deadline is not None and now >= deadline:
                count = wl.requeue_count + 1
                limit = config.pods_ready.requeuing_strategy.backoff_limit_count
                if limit is not None and count > limit:
                    out.append(ev.WorkloadDeactivated(
                        key=key, uid=wl.uid, reason="DeactivatedDueToRequeuingLimitExceeded",
                        message="The workload is deactivated due to exceeding the maximum number of re-queuing retries",
                        **base))
                else:
                    out.append(ev.WorkloadEvicted(
                        key=key, uid=wl.uid, reason="PodsReadyTimeout",
                        message=f"Exceeded the PodsReady timeout {key}", requeue_count=count,
                        requeue_at=now + backoff_ms(config, count), **base))
    return out


def next_deadline(state: ClusterState, config: SchedulerConfig) -> int | None:
    """The earliest future time at which :func:`reconcile` would act without any new event (for clock ticks)."""
    times = [t for k, t in state.backoff.items() if k in state.workloads and not state.workloads[k].reserving]
    if config.pods_ready.enable:
        for cq in state.reserving:
            for key in state.reserving[cq]:
                d = pods_ready_deadline(config, state.workloads[key])
                if d is not None:
                    times.append(d)
    return min(times) if times else None
