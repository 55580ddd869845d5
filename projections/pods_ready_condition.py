"""The PodsReady condition a Job integration keeps on its Workload while waitForPodsReady is in force.

Kueue's job reconciler rewrites the condition on every pass from three facts: whether the Workload is admitted
(its Admitted condition is True), whether the Job's pods are ready, and the condition it shows now. Not admitted
(pending, only holding quota, released after an eviction) is always "waiting for the start"; admitted and
ready is "started", or "recovered" when it was waiting for a recovery; admitted and not ready is "waiting for
recovery" after a loss of readiness (a True condition, or a recovery still awaited), else "waiting for the start".

The fold applies the rule wherever one of the facts changes in the log (a ``PodsReadyChanged``, a reservation, an
admission, a release, the stopped Job of an evicted Workload), so the condition follows from the log alone and a
re-admitted Workload no longer shows the readiness of its previous admission. It writes nothing while
waitForPodsReady is off, as Kueue does not.
"""

from __future__ import annotations

from events import objects as o

WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
WAIT_FOR_SCHEDULING = "WaitForScheduling"
STARTED = "Started"
RECOVERED = "Recovered"

NOT_READY = "Not all pods are ready or succeeded"
RECOVERING = "At least one pod has failed, waiting for recovery"
READY = "All pods reached readiness and the workload is running"


def pods_ready_condition(current: o.Condition | None, admitted: bool, ready: bool,
                         scheduling: bool = False) -> tuple[str, str, str]:
    """(status, reason, message) of the PodsReady condition that follows ``current``. ``scheduling``: a current
    ``PodsScheduled`` observation says a required pod is not scheduled (WaitForPodsReadyUnscheduledTimeout,
    :mod:`projections.pods_scheduled`), so an admitted workload waiting for its start waits for its scheduling."""
    if not admitted:
        return "False", WAIT_FOR_START, NOT_READY
    if ready:
        recovering = current is not None and current.reason in (WAIT_FOR_RECOVERY, RECOVERED)
        return "True", RECOVERED if recovering else STARTED, READY
    if current is not None and (current.status == "True" or current.reason == WAIT_FOR_RECOVERY):
        return "False", WAIT_FOR_RECOVERY, RECOVERING
    return "False", WAIT_FOR_SCHEDULING if scheduling else WAIT_FOR_START, NOT_READY
