"""waitForPodsReady ``blockAdmission``: one workload at a time gets its pods running.

In Kueue, with the option on, the cache tracks which workloads it holds lack PodsReady=True, and the scheduler,
about to admit an entry that fits (and does not take a second pass), checks that none does. If one does, it writes
QuotaReserved=False on the entry (``WaitingForPodsReady``, ``Waiting`` with UnadmittedWorkloadsObservability off)
and then waits, inside the cycle, until every one is ready or gone; then it admits the entry. The workloads
counted are the cache's: active, not finished, holding a quota reservation (admitted or not yet, evicted ones
until their quota is released), in a ClusterQueue it knows — the workload the scheduler has just admitted in the
same cycle included.

Here the scheduler does not wait: the entry gets the condition (once), stays in its queue's heap, and the cycle
ends there (earlier entries' preemptions and statuses stand). That condition marks the entry as held
(``ClusterState.held``). While it is held and a workload still lacks its pods, the scheduler runs no cycle at
all, as Kueue's, parked inside its cycle, runs none: nothing is nominated, preempted, parked or admitted. The
cycle after the event that makes the last of them ready (or takes it away) takes the held entry first, as Kueue
admits it when it wakes, and then the other heads; the next entry that fits then waits in turn.

Kueue admits the held entry on the assignment it waited with, whatever was freed meanwhile; so does the cycle
here: the hold records that assignment's pod-set counts, flavors and TAS placements (``WorkloadPending.waited``),
and the entry is nominated with the counts and flavors pinned, then takes back the placements it waited with
(:func:`kueue_es.scheduler.tasplace.keep_waited`; Kueue computes its topology assignment before it waits and
never again). Only when that no longer fits (a flavor or pod set gone, the quota taken: Kueue would admit it all
the same) is it nominated anew, its flavor scan resumed where the held attempt started; and only when a
placement no longer fits (its node gone or filled) is the topology placed anew on the pinned flavors.
"""

from __future__ import annotations

from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.cluster import ClusterState
from projections.workloads import (
    PODS_READY_WAIT_LEGACY_REASON,
    PODS_READY_WAIT_MESSAGE,
    PODS_READY_WAIT_REASON,
)

REASON = PODS_READY_WAIT_REASON
LEGACY_REASON = PODS_READY_WAIT_LEGACY_REASON
"""The reason while UnadmittedWorkloadsObservability is off."""
MESSAGE = PODS_READY_WAIT_MESSAGE


def reason(config: SchedulerConfig) -> str:
    """The QuotaReserved=False reason Kueue writes on the entry it waits with."""
    return REASON if config.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY) else LEGACY_REASON


def holds_admission(state: ClusterState) -> bool:
    """Whether some workload Kueue's cache holds has pods that are not all ready."""
    if not state.not_ready:
        return False
    wls, cqs = state.workloads, state.cluster_queues
    return any(wls[k].cluster_queue in cqs for k in state.not_ready)


def held(state: ClusterState) -> str | None:
    """The entry the scheduler waits with, if it is still pending in its ClusterQueue's queue (the first by key,
    should a log hold more than one)."""
    if not state.held:
        return None
    wls, queues = state.workloads, state.queues
    for key in sorted(state.held):
        wl = wls[key]
        q = queues.get(wl.cluster_queue)
        if wl.active and q is not None and key in q.entries:
            return key
    return None


def not_ready(state: ClusterState) -> list[str]:
    """The workloads :func:`holds_admission` waits for, in key order."""
    wls, cqs = state.workloads, state.cluster_queues
    return sorted(k for k in state.not_ready if wls[k].cluster_queue in cqs)
