"""Kueue's JobSet integration (``jobset.x-k8s.io/jobset``): a queued JobSet runs only while its Workload is admitted.

JobSets are another project's API and none of admission's inputs, so the log does not hold them: like the pod
integration this keeps its own list+watch of them (a relist after 410 Gone; while the JobSet CRD is not served,
none exist and the list is tried again now and then), and reads their Workloads from the mirror — the log's state,
and the Workload as the apiserver stores it. A JobSet is looked at again when it changes, and when anything the log
records touches a Workload a JobSet controls (found by its controller ownerReference), its namespace, a priority
class (a JobSet still without a Workload may wait for it) or the Configuration. Nothing is done while the
Configuration in force leaves ``jobset.x-k8s.io/jobset`` out of ``integrations.frameworks``.

Each pass does what Kueue's generic job reconciler does next (``jobframework/reconciler.go``): the steps are
:mod:`connectors.k8s.jobframework`'s, shared with the Job integration; this module is the JobSet's adapter,
with its own pieces from :mod:`connectors.k8s.jobset`:

* the JobSet **gone or being deleted**: each Workload a JobSet of that name controls is finished ``OwnerNotFound``
  (under ``FinishOrphanedWorkloads``) and loses its finalizer; once the JobSet is gone it is deleted, as the
  garbage collector would (:mod:`connectors.k8s.workload_finalizer`); so is the Workload of an earlier JobSet of
  the same name (another uid);
* **no Workload yet** (the JobSet queued — or, under ``manageJobsWithoutQueueName``, not — in a managed namespace
  and not finished): a running one is suspended first (``Stopped``, "Missing Workload; unable to restore pod templates"); a suspended one with no
  active pods gets ``jobset-<name>-<hash>`` (``CreatedWorkload``), built from the JobSet as stored; a priority class
  the log does not hold holds it back (``WorkloadPriorityClassNotFound`` for a WorkloadPriorityClass, once per
  version); a ``max-exec-time-seconds`` that is not an int32 above 0 gives it no maximum execution time;
* the **Workload finished or being deleted**: its finalizer goes once the apiserver shows it finished; one being
  deleted first has its running JobSet stopped ("Workload is deleted");
* the JobSet **finished** (``Completed``/``Failed``): ``WorkloadFinished`` (``Succeeded``/``Failed``);
* **in step**: while the JobSet is suspended and its Workload neither evicted nor holding quota, the queue its
  label names now; the WorkloadPriorityClass its label names now (``UpdatedWorkload``), as for a Job
  (:mod:`connectors.k8s.job_sync`); one write a pass, conditioned on the Workload's resourceVersion;
* **reclaimable pods** (under Kueue's ``ReclaimablePods`` gate, else none are counted):
  ``ReclaimablePodsChanged`` when the succeeded Jobs' pods differ from the Workload's;
* under waitForPodsReady, ``PodsReadyChanged`` as the JobSet's Jobs become ready (every Job ready or succeeded)
  or not, and ``WaitForStart`` first;
* **admitted** (in the log and as the apiserver stores it) and suspended → start
  (:func:`connectors.k8s.jobset.start_patch`, ``Started``); a merge conflict or an admission lacking a replicated
  Job finishes the Workload ``FailedToStart``;
* **not admitted** and running → stop (an eviction once the apiserver shows the Workload evicted, a
  deactivation at once): suspended and the templates restored in one write
  (:func:`connectors.k8s.jobset.stop_patch`, ``Stopped`` with the eviction's message or "Not admitted by cluster
  queue");
* **evicted** (as the apiserver shows it, or deactivated), suspended, no active pods and still holding quota →
  ``JobStopped``.

Every write is conditioned on the resourceVersion read; a conflict waits for the watch. The Events go through
the log (``JobActed`` of kind JobSet). As for a Job, a Workload whose pod sets no longer match the JobSet is
rewritten or made anew, a prebuilt Workload is adopted and run on, the admission gate annotation followed, and
``FinishedWorkload``/``UpdatedAdmissionCheck`` reported on the JobSet (:mod:`connectors.k8s.watched_jobs`). Not
done here (see docs/kubernetes.md): elastic JobSets. MultiKueue runs a JobSet on a worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

from typing import Any

import structlog

from connectors.k8s import jobset as js
from connectors.k8s.resources import JOBSETS
from connectors.k8s.watched_jobs import WatchedJobIntegration
from kueue_es.scheduler.config import SchedulerConfig

log = structlog.get_logger("kueue_es.k8s.jobsets")


class JobSetIntegration(WatchedJobIntegration[js.JobSet]):
    """The JobSet adapter of the shared job reconciler (:mod:`connectors.k8s.jobframework`), with its own
    list+watch of JobSets (:mod:`connectors.k8s.watched_jobs`)."""

    KIND = js.KIND
    NOUN = "jobset"
    RESOURCE = JOBSETS
    LOG = log
    K = js
    ITEM = js.JobSet

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.jobsets = self.known
        """The JobSets, as last listed or watched."""

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_jobsets

    def reclaimable_pods(self, job: js.JobSet) -> tuple[tuple[str, int], ...]:
        return js.reclaimable_pods(job)

    def pod_priority_class(self, job: js.JobSet) -> str | None:
        return js.pods_priority_class(job)

