"""The Kubernetes Events Kueue's job reconciler records on a batch/v1 Job, for what kueue-es's job integration did.

Kueue's generic job reconciler (``pkg/controller/jobframework``), through its recorder for the ``batch/job``
integration (``batch/job-kueue-controller``), records on the Job, Normal unless said otherwise:

* ``CreatedWorkload`` "Created Workload: <ns>/<name>" once it created the Job's Workload;
* ``Started`` "Admitted by clusterQueue <cq>" once it unsuspended the Job (Kueue's spelling: lower-case c);
* ``Stopped`` once it suspended a running Job, saying why (:func:`stop_message`): the Workload's ``Evicted``
  message when it was evicted (preempted, deactivated, ...), "Not admitted by cluster queue" when the Job ran
  without an admission, "Missing Workload; unable to restore pod templates" when it ran with no Workload,
  "missing workload" when it ran without the prebuilt Workload it names (:mod:`connectors.k8s.prebuilt`), "No
  matching Workload; restoring pod templates according to existent Workload" when it no longer matched its
  generated one (:mod:`connectors.k8s.job_sync`);
* ``FinishedWorkload`` "Workload '<ns>/<name>' is declared finished" once the Workload finished (the Job
  completed or failed, or could not start), while the Job is still there — not for a prebuilt Workload finished
  out of sync, which Kueue no longer counts as the Job's;
* Warning ``WorkloadPriorityClassNotFound`` 'WorkloadPriorityClass "<name>" not found' when the Job's
  ``kueue.x-k8s.io/priority-class`` label names a class that does not exist, so it was given no Workload
  (:mod:`connectors.k8s.job_priority`) or its Workload keeps its priority (:mod:`connectors.k8s.job_sync`). Kueue records it at every retry of the failed reconcile (its
  recorder folds the repeats into one Event's count); kueue-es once per version of the Job;
* ``UpdatedWorkload`` once it rewrote the Job's generated Workload to match the suspended Job again ("Updated not
  matching Workload for suspended job: <ns>/<name>"), or gave it the priority class the Job's label names now
  ("Updated workload priority class: <ns>/<name>"); ``DeletedWorkload`` "Deleted not matching Workload:
  <ns>/<name>" once it deleted one the Job no longer matches, or one beyond the one Workload the Job keeps
  (:mod:`connectors.k8s.job_sync`);
* ``UpdatedAdmissionCheck`` "<check>: <message>" for each Pending admission check with a message (in the
  order of the Workload's ``status.admissionChecks``: by name), joined with "; ", while the Job is suspended
  and its Workload holds quota but is not admitted, evicted or finished (:func:`pending_checks_message`).

``UpdatedAdmissionCheck`` is an observation, not an action: Kueue records it at every reconcile of such a Job
(any change of the Job or its Workload), and its recorder folds identical ones into one Event's count. kueue-es
derives it from the log alone: the mirror asks :func:`pending_checks_message` after each record about the Job or
its Workload (once the Workload has no decision still to be written, as Kueue sees the written status), and the
ledger makes an Event ready, under that record's offset, whenever the answer is a message other than the last
one (:meth:`connectors.k8s.decision_events.EventLedger.pending_checks`). Folding the log again gives the same
Events at the same offsets, so a restart creates none twice. A message that comes back after another is a new
Event here (Kueue would count it on the earlier one's).

``FinishedWorkload`` comes from the ``WorkloadFinished`` record, the others from the
:class:`events.schema.JobActed` record the job integration appends once it did the write (or found the class
missing); the Event ledger (:class:`connectors.k8s.decision_events.EventLedger`) makes them ready at once and
the recorder creates them under names derived from the record, so a restart creates none twice. A suspend that was already there, or
finishing a stop (restoring the template once the pods are gone), records nothing, as in Kueue.

The pod integration (:mod:`connectors.k8s.pods_integration`) appends ``JobActed`` of kind Pod for what it did to a
plain Pod: the same ``CreatedWorkload``, ``Started``, ``Stopped``, ``UpdatedWorkload`` (the priority class) and
``WorkloadPriorityClassNotFound``, the Warnings ``ErrWorkloadCompose`` and ``WorkloadNameConflict`` (action
``Admission``) of pod groups, and ``FinishedWorkload`` once it finalized a Pod whose Workload finished,
recorded on the Pod from ``pod-kueue-controller``, as Kueue's pod reconciler does (and, of kind Workload,
``OwnerReferencesAdded`` on a group's Workload once its Pods were made its owners); and ``UpdatedAdmissionCheck``
(:func:`checks_message`) on each Pod of a Workload that holds quota but is not admitted while some Pod is held
back (gated), whenever the message changes (the Pods are not the log's, so the integration appends it, and after
a restart may record the current message once more, as Kueue's every reconcile would).

The JobSet, MPIJob and training-job integrations (:mod:`connectors.k8s.watched_jobs`) append ``JobActed`` of their kind for the
same Events, recorded on that object by the kind's recorder (:data:`CONTROLLER_OF`:
``<integration>-kueue-controller``); as the log does not hold those objects, they also append ``FinishedWorkload``
(once per finished Workload) and ``UpdatedAdmissionCheck`` (whenever the message changes) themselves.
The LeaderWorkerSet integration (:mod:`connectors.k8s.lws_integration`) appends ``JobActed`` of kind LeaderWorkerSet
for what its set reconciler records on the set: ``CreatedWorkload`` per group Workload and ``UpdatedWorkload``
when a Workload follows the set's priority class.

On a Job with a Kueue-managed ancestor (:mod:`connectors.k8s.child_jobs`) the Job integration records
``Suspended`` "Kueue managed child job suspended" once it suspended it, and Warning ``JobNestingTooDeep``
"Terminated search for Kueue-managed Job because ancestor depth exceeded limit of 10" when the Job has more parents
than that (Kueue at every retry, kueue-es once per version of the Job). Kueue's other Job Event, ``ErrWorkloadCompose``, is for pod groups.
"""

from __future__ import annotations

from connectors.k8s.decision_events import (
    JOB_CONTROLLER,
    NORMAL,
    POD_CONTROLLER,
    WARNING,
    Involved,
    KubeEvent,
    PendingChecks,
    make_event,
)
from connectors.k8s.job_priority import NOT_FOUND_REASON
from connectors.k8s.resources import JOB_UID_LABEL, LEADER_WORKER_SETS
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import (
    APPWRAPPER_FRAMEWORK,
    JOBSET_FRAMEWORK,
    KUBEFLOW_FRAMEWORKS,
    LWS_FRAMEWORK,
    MPIJOB_FRAMEWORK,
    RAYCLUSTER_FRAMEWORK,
    RAYJOB_FRAMEWORK,
    RAYSERVICE_FRAMEWORK,
    SPARK_FRAMEWORK,
    TRAINJOB_FRAMEWORK,
)
from projections.workloads import RESERVED, WorkloadInfo

CREATED_WORKLOAD, STARTED, STOPPED = "CreatedWorkload", "Started", "Stopped"
FINISHED_WORKLOAD = "FinishedWorkload"
CONTROLLER_OF = {kind: f"{framework}-kueue-controller" for kind, framework in (
    ("JobSet", JOBSET_FRAMEWORK), ("MPIJob", MPIJOB_FRAMEWORK), ("RayJob", RAYJOB_FRAMEWORK),
    ("RayCluster", RAYCLUSTER_FRAMEWORK), (LEADER_WORKER_SETS.kind, LWS_FRAMEWORK), ("AppWrapper", APPWRAPPER_FRAMEWORK),
    ("TrainJob", TRAINJOB_FRAMEWORK), ("RayService", RAYSERVICE_FRAMEWORK),
    ("SparkApplication", SPARK_FRAMEWORK),
    *KUBEFLOW_FRAMEWORKS.items())}
"""The recorder Kueue's job reconciler records a kind's Events with (``<integration>-kueue-controller``), where
not the Job's (``batch/job-kueue-controller``) or the Pod's."""
ACTIONS = (CREATED_WORKLOAD, STARTED, STOPPED)
NOT_ADMITTED = "Not admitted by cluster queue"
MISSING_WORKLOAD = "Missing Workload; unable to restore pod templates"
UPDATED_ADMISSION_CHECK = "UpdatedAdmissionCheck"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def job_finished(job: o.Job) -> tuple[str, str] | None:
    """``(reason, message)`` of a Job that completed or failed: Kueue's ``Succeeded``/``Failed``."""
    for c in job.status.conditions:
        if c.status == "True" and c.type in ("Complete", "Failed"):
            return ("Succeeded" if c.type == "Complete" else "Failed"), c.message
    return None


def pending_checks_message(job: o.Job | None, wl: WorkloadInfo | None) -> str:
    """The ``UpdatedAdmissionCheck`` message Kueue's reconcile of ``job`` would record now, given its Workload
    ``wl``; empty when it records none: no Job or Workload (or another Job's), no queue label, the Job finished
    or running, the Workload finished, evicted, admitted (the Job is started instead) or holding no quota, or
    no Pending check with a message."""
    if job is None or wl is None or not job.spec.suspend or not job.metadata.labels.get(QUEUE_LABEL):
        return ""
    if job.metadata.deletion_timestamp or wl.labels.get(JOB_UID_LABEL, job.metadata.uid) != job.metadata.uid:
        return ""
    if job_finished(job) is not None:
        return ""
    return checks_message(wl)


def checks_message(wl: WorkloadInfo) -> str:
    """The ``UpdatedAdmissionCheck`` message of a Workload that holds quota but is neither admitted, evicted nor
    finished: its Pending checks with a message, by name, as ``<check>: <message>`` joined with "; " (empty:
    none, or not such a Workload). The caller says whether its job is suspended."""
    if wl.phase != RESERVED or wl.evicted:
        return ""
    return "; ".join(f"{name}: {check.message}" for name, check in sorted(wl.check_states.items())
                     if check.state == "Pending" and check.message)


def stop_message(wl: WorkloadInfo | None) -> str:
    """Why a running Job is stopped, as Kueue's reconciler says it: its Workload's eviction message, else that it
    is not admitted; with no Workload, that its pod templates cannot be restored."""
    if wl is None:
        return MISSING_WORKLOAD
    evicted = wl.condition("Evicted")
    if evicted is not None and evicted.status == "True":
        return evicted.message
    return NOT_ADMITTED


def job_events(e: ev.AnyEvent, job: Involved | PendingChecks) -> tuple[KubeEvent, ...]:
    """The Event Kueue records on ``job`` for ``e`` (a ``JobActed`` or a ``WorkloadFinished``), or the
    ``UpdatedAdmissionCheck`` of :class:`PendingChecks` (whatever record ``e`` made them ready)."""
    if isinstance(job, PendingChecks):
        return (make_event(job.job, NORMAL, UPDATED_ADMISSION_CHECK, job.message, JOB_CONTROLLER),)
    by = POD_CONTROLLER if job.kind in ("Pod", "Workload") else CONTROLLER_OF.get(job.kind, JOB_CONTROLLER)
    match e:
        case ev.JobActed(action="CreatedWorkload"):
            return (make_event(job, NORMAL, CREATED_WORKLOAD, f"Created Workload: {e.workload}", by),)
        case ev.JobActed(action="Started"):
            return (make_event(job, NORMAL, STARTED, f"Admitted by clusterQueue {e.cluster_queue}", by),)
        case ev.JobActed(action="Stopped"):
            return (make_event(job, NORMAL, STOPPED, e.message, by),)
        case ev.JobActed(action="ErrWorkloadCompose" | "JobNestingTooDeep"):
            return (make_event(job, WARNING, e.action, e.message, by),)
        case ev.JobActed(action="WorkloadNameConflict"):
            return (make_event(job, WARNING, e.action, e.message, by, action="Admission"),)
        case ev.JobActed(action="WorkloadPriorityClassNotFound"):
            return (make_event(job, WARNING, NOT_FOUND_REASON, e.message, by),)
        case ev.JobActed(action="UpdatedWorkload" | "DeletedWorkload" | "ExcessPodDeleted" | "UpdatedAdmissionCheck"
                         | "Suspended" | "OwnerReferencesAdded"):
            return (make_event(job, NORMAL, e.action, e.message, by),)
        case ev.JobActed(action="FinishedWorkload"):
            return (make_event(job, NORMAL, "FinishedWorkload", f"Workload '{e.workload}' is declared finished", by),)
        case ev.WorkloadFinished():
            return (make_event(job, NORMAL, "FinishedWorkload", f"Workload '{e.key}' is declared finished",
                          JOB_CONTROLLER),)
        case _:
            return ()
