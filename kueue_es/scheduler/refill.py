"""``FairSharingRefill`` (alpha, off; Kueue v0.20): under Fair Sharing, a ClusterQueue that reserves quota for its
head in a cycle brings its next workload into the same cycle, where it competes in the tournament against the
entries left, ranked on the usage the cycle has charged so far.

* Only the Fair Sharing tournament refills, and not while ``waitForPodsReady.blockAdmission`` holds the cycle (it
  admits one workload at a time already).
* Only an entry the cycle reserves quota for refills: one that preempts, waits or is skipped frees no slot.
* Under ``ConcurrentAdmission`` a variant's admission refills nothing and spends no budget (Kueue's
  ``VariantAdmitted``): the cycle's view does not hold that admission yet, so a successor could be another
  variant of the same parent.
* A cycle pops at most :data:`BUDGET` successors, across all its ClusterQueues (Kueue's fixed default; its
  configuration has no field for it yet). An empty queue costs nothing; a pop costs one whatever comes of it.
* A successor that cannot be nominated (failed admission checks, a misconfiguration) is requeued with that status
  as any head is. One nominated acts on its assignment only if that fits as it is: otherwise (it would preempt,
  wait for preempted workloads, or no longer fits) it is not acted on and goes back to its queue's heap with
  QuotaReserved=False ``WaitingForQuota``, :data:`DEFERRED` followed by what its assignment found, to compete
  again in the next cycle against fresh usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kueue_es.scheduler import afs
from projections import gates

if TYPE_CHECKING:
    from kueue_es.scheduler.config import SchedulerConfig
    from projections.cluster import ClusterState
    from projections.workloads import WorkloadInfo

BUDGET = 8
"""Successors one cycle may pop after its ClusterQueues' heads (Kueue's default refill budget)."""

DEFERRED = "Workload was evaluated mid-cycle and is deferred to the next scheduling cycle: "
"""The start of the QuotaReserved=False message of a successor whose assignment does not fit as it is."""


def enabled(config: SchedulerConfig, block_admission: bool) -> bool:
    """Whether a cycle under ``config`` refills: the gate on, Fair Sharing on, blockAdmission not in force."""
    return (config.fair_sharing_enabled and not block_admission
            and gates.enabled(config.feature_gates, gates.FAIR_SHARING_REFILL))


class RefillPass:
    """One cycle's refills: the budget left and the workloads the cycle has taken from their queues."""

    __slots__ = ("budget", "config", "now", "state", "taken")

    def __init__(self, state: ClusterState, config: SchedulerConfig, now: int, taken: list[str]) -> None:
        self.state = state
        self.config = config
        self.now = now
        self.budget = BUDGET
        self.taken: set[str] = set(taken)
        """The cycle's heads and the successors popped so far: none of them is popped again."""

    def successor(self, cq: str) -> WorkloadInfo | None:
        """Pop the next workload of ClusterQueue ``cq``'s queue (its Admission Fair Sharing order where that
        applies), spending one of the budget; None when the budget is spent or nothing else waits there."""
        if self.budget <= 0:
            return None
        key = afs.queue_head(self.state, self.config, cq, self.now, self.taken)
        if key is None:
            return None
        self.budget -= 1
        self.taken.add(key)
        return self.state.workloads[key]
