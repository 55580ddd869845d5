"""Jobs whose controller is of a kind Kueue runs and queues — a queued JobSet's Jobs with the JobSet integration on,
a Job's Jobs: Kueue's job reconciler calls them not standalone and gives them no Workload, since the parent's
Workload is the one queued and admitted (a parent is taken as queued when it has a Workload, or under
``manageJobsWithoutQueueName``). All it does is keep such a Job suspended while that Workload is missing or not admitted
(reference §7.1 item 3), so a child made early never runs on quota its parent does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from connectors.k8s.pods_ready import is_admitted
from events import objects as o
from projections.workloads import WorkloadInfo

SUSPENDED = "Suspended"
SUSPENDED_MESSAGE = "Kueue managed child job suspended"
"""The Normal Event Kueue's job reconciler records on a child Job it suspends."""


def parent_workload(job: o.Job, stored: Iterable[o.Workload],
                    folded: Mapping[str, WorkloadInfo]) -> WorkloadInfo | None:
    """The Workload (as the log holds it) of the Job's controller: one whose ownerReferences name the controller's
    uid, the first by key as Kueue takes the first listed; None when there is none (yet)."""
    controller = next((r for r in job.metadata.owner_references if r.controller), None)
    if controller is None or not controller.uid:
        return None
    keys = sorted(w.key for w in stored if w.metadata.namespace == job.metadata.namespace
                  and any(r.uid == controller.uid for r in w.metadata.owner_references))
    return next((folded[k] for k in keys if k in folded), None)


def held(job: o.Job, parent: WorkloadInfo | None, *, finished: bool) -> bool:
    """Whether the child Job is to be suspended: running, not finished, its parent's Workload missing or not
    admitted."""
    return not finished and not job.spec.suspend and (parent is None or not is_admitted(parent))
