"""Which of waitForPodsReady's clocks an admitted workload whose pods are not ready runs on, and since when: one
reading for the fold's clocks (:class:`projections.cluster.ClusterState`) and the scheduler's timeouts
(:mod:`kueue_es.scheduler.pods_ready_timeouts`). Pure.

Kueue's workload controller: a workload waiting for its pods to recover (its PodsReady condition False with reason
``WaitForRecovery``, written once its pods were ready and one was lost) runs on the recovery timeout from the
condition's lastTransitionTime, and on none when no recovery timeout is set; any other not-ready workload runs on
the timeout from its admission.
"""

from __future__ import annotations

from events.timefmt import parse_time
from projections.pods_ready_condition import WAIT_FOR_RECOVERY
from projections.workloads import WorkloadInfo


def pods_ready_wait(wl: WorkloadInfo) -> tuple[int | None, int | None]:
    """``(admitted at, lost readiness at)`` of an admitted workload whose pods are not ready: one of them is set,
    the first unless it waits for a recovery (None for both: no admission time known)."""
    c = wl.condition("PodsReady")
    if c is not None and c.status == "False" and c.reason == WAIT_FOR_RECOVERY and c.last_transition_time:
        return None, parse_time(c.last_transition_time)
    return wl.admitted_at, None


def own_deadline(own: tuple[int | None, int | None], waiting: int | None, recovering: int | None) -> int | None:
    """When a workload's own timeouts (``own``: timeout, recovery timeout in ms) run out for the wait it is in (None:
    they do not cover it, so the configuration's applies)."""
    timeout, recovery = own
    if recovering is not None:
        return recovering + recovery if recovery is not None else None
    if waiting is not None and timeout is not None:
        return waiting + timeout
    return None
