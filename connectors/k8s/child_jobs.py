"""Jobs whose controller is of a kind Kueue runs and queues — a queued JobSet's Jobs with the JobSet integration on,
a Job's Jobs: Kueue's job reconciler calls them not standalone and gives them no Workload, since the parent's
Workload is the one queued and admitted (a parent is taken as queued when it has a Workload, or under
``manageJobsWithoutQueueName``). All it does is keep such a Job suspended while that Workload is missing or not admitted
(reference §7.1 item 3), so a child made early never runs on quota its parent does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from connectors.k8s.pods_ready import is_admitted
from connectors.k8s.workload_finalizer import shows_finished
from events import objects as o
from projections.workloads import WorkloadInfo

SUSPENDED = "Suspended"
SUSPENDED_MESSAGE = "Kueue managed child job suspended"
"""The Normal Event Kueue's job reconciler records on a child Job it suspends."""


def parent_workload(keys: Iterable[str], stored: Mapping[str, o.Workload],
                    folded: Mapping[str, WorkloadInfo]) -> WorkloadInfo | None:
    """Of the Workloads the parent controls (``keys``: the mirror's index by controller uid), the newest the
    apiserver does not show finished, as the log holds it: Kueue lists them oldest first (creation time, then uid)
    and takes the last; None when there is none, or the log does not hold it yet."""
    live = [stored[k] for k in keys if k in stored and not shows_finished(stored[k])]
    if not live:
        return None
    newest = max(live, key=lambda w: (w.metadata.creation_timestamp or "", w.metadata.uid))
    return folded.get(newest.key)


def held(job: o.Job, parent: WorkloadInfo | None, *, finished: bool) -> bool:
    """Whether the child Job is to be suspended: running, not finished, its parent's Workload missing or not
    admitted."""
    return not finished and not job.spec.suspend and (parent is None or not is_admitted(parent))
