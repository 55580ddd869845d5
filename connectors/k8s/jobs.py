"""The batch/v1 Job integration: a Job with a queue label runs only while its Workload is admitted.

Under the Kueue Configuration's ``manageJobsWithoutQueueName`` so does a Job naming no queue, its Workload in no
queue until the Job names one (:mod:`connectors.k8s.job_selection` says which Jobs are Kueue's).

The steps a Job shares with every kind Kueue's one job reconciler runs (no Workload yet; the Workload finished
or being deleted; the Job finished; priority class and queue in step; reclaimable pods; PodsReady; start, stop,
``JobStopped``; a gone Job's Workloads) are :mod:`connectors.k8s.jobframework`'s; this module is the Job's adapter
to them (what a Job's state means, how it is started and stopped, its pod set as its Workload is compared with)
and holds the steps only Jobs take here (one Workload per Job, Workloads left with no owner; an elastic Job's slice
pass is the shared reconciler's, the RayCluster's too, with the Job's pods and count); the
prebuilt Workloads, the rewriting of a Workload the Job no longer matches and the admission gate below are the
shared reconciler's, taken by JobSets and MPIJobs too.

Level-triggered over the mirror; for each Job the mirror marks dirty (the Job or its Workload changed):

* **prebuilt** (the Job names its Workload in ``kueue.x-k8s.io/prebuilt-workload-name``, a label or an
  annotation as the ``WorkloadIdentifierAnnotations`` gate reads them): that Workload is the Job's once the Job
  controls it — adopted when nothing does, finished ``OutOfSync`` when it no longer matches the Job
  (:mod:`connectors.k8s.prebuilt`) — and is then used as a generated one is, below. None is ever created for
  such a Job: while the one it names is missing, controlled by another object or out of sync, the Job waits,
  suspended (a running one is stopped, ``Stopped`` "missing workload");
* **one Workload per Job** (generated ones; :func:`connectors.k8s.job_sync.one_workload`): of the Workloads a
  Job of that name controls, the Job keeps the first of its own that matches it, else the first of its own; the
  others are deleted (``DeletedWorkload``) and the pass ends there;
* **elastic** (``kueue.x-k8s.io/elastic-job: "true"`` under ``ElasticJobsViaWorkloadSlices``): instead of one
  Workload per Job, the Job's not-finished workload slices say which one it runs on
  (:mod:`connectors.k8s.workload_slices`): the first slice made at once, whether the Job runs and its pods are
  active or not (Kueue's reconciler lets a workload-slice Job stay active: its pods wait at their gate); a count
  changed in place (a scale-down, or a slice holding no quota),
  a new slice for a scale-up of one holding quota (made while the Job runs on; under partial scale-up with the old
  slice's granted pods as its ``minCount``, and a further one, a scale-up probe, once the Job's slice is admitted
  in part), an old slice that lost its quota
  finished ``OutOfSync`` (under partial scale-up too: the slice waiting behind it stays the Job's, Kueue
  #15417); a finished slice loses its finalizer; the slice kept is then used as a generated
  Workload is, below, but neither rewritten nor re-prioritised, and a running Job is stopped only when it is
  evicted; running on an admitted slice, its pods lose the ``kueue.x-k8s.io/elastic-job`` scheduling gate the
  Job webhook gave its template — as many as the slice was granted beyond the pods already released;
* **no Workload yet** (and the Job has not finished, and no pod is active): create ``job-<name>-<hash>`` (the
  hash is the first 5 hex digits of SHA-1 over ``Job\\nbatch\\n<name>\\n<uid>``, like Kueue) with a controller
  ownerReference to the Job, the ``kueue.x-k8s.io/resource-in-use`` finalizer, the ``kueue.x-k8s.io/job-uid``
  label, the queue name, the priority
  (:mod:`connectors.k8s.job_priority`: label ``kueue.x-k8s.io/priority-class`` → WorkloadPriorityClass, else the
  template's ``priorityClassName`` → PriorityClass), ``maximumExecutionTimeSeconds`` from
  ``kueue.x-k8s.io/max-exec-time-seconds`` (a value that is not an int32 above 0 gives none, as Kueue's job
  framework reads it; the validating Job webhook refuses a Job whose value is not an integer above 0,
  see ``job_validation.py``), and one pod set ``main`` of ``min(parallelism, completions)`` pods whose template
  is the Job's without the labels the job controller adds, and whose ``topologyRequest`` comes from the template's TAS
  annotations, with the completion index as the pods' rank (none while the recorded Configuration turns
  ``TopologyAwareScheduling`` off), and the Job's ``kueue.x-k8s.io/admission-gated-by`` annotation when it is not
  empty (under the ``AdmissionGatedBy`` gate; the workload is then not admitted until the annotation is gone),
  and the Job's labels and annotations the Configuration says to copy (:mod:`connectors.k8s.copied_metadata`:
  ``integrations.labelKeysToCopy``, and under ``CustomMetricLabels`` what its ``sourceKind: Workload`` entries
  read; copied once, not kept in step). A Job created unsuspended is suspended first. A
  label naming a WorkloadPriorityClass the log does not hold gets the Job no Workload, and a ``JobActed``
  ``WorkloadPriorityClassNotFound`` (Kueue's Warning Event) once per version of the Job; the Workload is
  created when the class appears in the log (the mirror marks the Jobs naming it dirty). So is a pod template's
  ``priorityClassName`` naming a PriorityClass the log does not hold (with no label) — with no Event, as
  Kueue, whose reconcile just fails on the lookup and is retried: only a warning in the log, once per version;
* **the Workload finished, or being deleted** (:mod:`connectors.k8s.workload_finalizer`): nothing else is done
  with it; a finished one loses its finalizer once the apiserver shows it ``Finished``; for one being deleted a
  running Job is stopped ("Workload is deleted") and its template restored, then the finalizer goes;
* **in step with the Job** (:mod:`connectors.k8s.job_sync`; the Workload not finished, no decision about it
  still to be written): a generated Workload the Job no longer matches (count, minimum count, tolerations,
  container resources, maximum execution time) is rewritten from the suspended Job while it holds no quota
  (``UpdatedWorkload``), else deleted (``DeletedWorkload``) and made anew — a running Job is stopped and restored
  first; a generated Workload takes the WorkloadPriorityClass the Job's label names now (``UpdatedWorkload``);
  the Workload of a suspended Job, generated or prebuilt, not evicted and holding no quota, takes the queue name
  its label names now. One write a pass, conditioned on the Workload's resourceVersion (a deletion also on its
  uid); the rest waits for the Workload that shows it;
* **admission gate** (``AdmissionGatedBy`` on; the Workload not finished): when the Job's
  ``kueue.x-k8s.io/admission-gated-by`` differs from its Workload's, the Workload's is set to it — removed when
  the Job's is removed or empty — in one patch conditioned on the Workload's resourceVersion; the rest waits for
  the Workload that shows it. Only gates leave: a Workload is never given a gate it lacks (Kueue's Workload webhook
  refuses that, :func:`connectors.k8s.jobframework.only_removes_gates`), as when the Job was made while the gate was off;
* **admitted** (in the log, and in the Workload's stored status: a Job never starts on a decision whose status
  write is still to come, or lost with a crash) and suspended → start: what :mod:`connectors.k8s.podsetinfo`
  says the admission adds (the flavors' ``nodeLabels`` and tolerations, the pod-set and queue labels, the
  workload annotation, an elastic slice's ``kueue.x-k8s.io/workload-slice-name``, with a topology assignment the
  TAS scheduling gate, and the Ready checks'
  ``podSetUpdates``) is merged into the template (a conflicting key finishes the Workload with
  ``FailedToStart``), partial admission (a ``minCount``) sets ``parallelism`` (and ``completions`` to the same
  under ``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``); then ``suspend: false`` — one patch, conditioned
  on the Job's resourceVersion. A Workload that only holds quota (checks pending, topology delayed) is not
  admitted: its Job stays suspended;
* **not admitted** (pending, evicted, deactivated) and running → stop (an eviction once the apiserver shows
  the Workload evicted: its status write may still be refused, then taken back; a deactivation at once):
  ``suspend: true`` with the annotation ``kueue.x-k8s.io/stopping``, clear ``status.startTime``; once no pod
  is active (the apiserver refuses template changes before that) restore the template exactly as the Workload
  recorded it (labels and annotations — keeping the job controller's labels —, nodeSelector, tolerations,
  schedulingGates, and parallelism after a partial admission, with completions when they follow it: the
  Workload's count, which the apiserver keeps) and drop the annotation;
* **evicted** (as the apiserver shows it, or deactivated), suspended and no active pod → ``JobStopped`` (the
  scheduler then gives the quota back);
* **running**: ``PodsReadyChanged`` when ready + succeeded pods reach the admitted count (``Started``, or
  ``Recovered`` after a loss), and back to not ready (``WaitForRecovery``) — what waitForPodsReady counts on;
  under waitForPodsReady, a Workload that shows no PodsReady condition yet (pending, or admitted with its pods
  not ready) gets ``PodsReadyChanged(ready=False, WaitForStart)``, Kueue's first write; what the condition shows
  after that through admission, eviction and re-admission the fold derives (:mod:`projections.pods_ready_condition`);
* **pods succeeded** (any Workload not finished; under Kueue's ``ReclaimablePods`` gate, else nothing is
  counted): ``ReclaimablePodsChanged`` when the pods the Job no longer
  needs differ from the Workload's ``status.reclaimablePods`` — Kueue's count for a Job: with parallelism above 1
  and some pods succeeded or indexes failed for good (``failedIndexes``; an Indexed Job's completed and failed
  indexes below its completions, :func:`terminal_count`), the pod set's count less the completions still to come,
  when that is positive (the writer then writes the field, and the quota those pods
  held is given back);
* the Job **finished** (condition ``Complete`` or ``Failed``) → ``WorkloadFinished`` (``Succeeded``/``Failed``);
* the Job is **gone** (whatever its labels) → each Workload it controls that is neither finished nor being
  deleted is finished (``OwnerNotFound``; not under ``FinishOrphanedWorkloads`` off), loses its finalizer and is
  deleted (what the garbage collector would do with the ownerReference). While the Job is only **being
  deleted** its Workloads wait (Kueue's #12849), but one being deleted too loses its finalizer. A Workload left with no owner at all (its Job deleted with ``--cascade=orphan``), being deleted
  or carrying the ``kueue.x-k8s.io/job-uid`` label, is finished and let go of the same way, as Kueue's workload
  controller does (the mirror marks it: ``Mirror.dirty_orphans``).

Everything it writes is conditioned on the resourceVersion it read; a conflict just waits for the watch to
bring the newer object. Events it appends are not repeated while the log has not applied them yet. Once a
Workload is created, updated or deleted, or a Job started or stopped (``suspend`` flipped), it appends
``JobActed``: the Kubernetes Event Kueue's job reconciler records on the Job for it
(:mod:`connectors.k8s.job_events`) is recorded from that; so is a missing WorkloadPriorityClass reported.
A Job created unsuspended is suspended at creation by the webhook (``webhook.py``) when it is installed, else
here, after the fact. Whenever kueue-es deletes a Workload itself it takes the finalizer off first (a patch
conditioned on the Workload's resourceVersion), so that nothing it deletes is left terminating.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
import structlog

from connectors.k8s import job_sync, podsetinfo, prebuilt, workload_body, workload_slices
from connectors.k8s import workload_finalizer as wf
from connectors.k8s.client import KubeClient
from connectors.k8s.copied_metadata import copied, workload_annotations
from connectors.k8s.errors import NotFound
from connectors.k8s.job_events import (
    MISSING_WORKLOAD,
    STOPPED,
    job_finished,
)
from connectors.k8s.jobframework import JobFrameworkStats, JobReconciler, stored_workloads
from connectors.k8s.journal import Journal
from connectors.k8s.resources import BY_KIND, JOB_UID_LABEL
from connectors.k8s.tas_group_validation import group_of
from connectors.k8s.workers import KeyedWorkers
from connectors.k8s.workload_body import compared_max_execution_seconds
from connectors.k8s.workload_names import owner_workload_name
from events import objects as o
from events import schema as ev
from events.goint import parse_bool
from projections import gates
from projections.in_use import FINALIZER
from projections.workloads import (
    WorkloadInfo,
    topology_request_from_annotations,
)

log = structlog.get_logger("kueue_es.k8s.jobs")

JOBS = BY_KIND["Job"]
PODS = BY_KIND["Pod"]
WORKLOADS = BY_KIND["Workload"]
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
STOPPING = "kueue.x-k8s.io/stopping"
PODSET_LABEL = podsetinfo.PODSET_LABEL
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
                         "batch.kubernetes.io/job-name")
DROPPED_FROM_TEMPLATE = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name")
ORPHAN = "Workload:"
"""Prefixes the key of a Workload with no owner among the Job keys the workers take (:meth:`JobIntegration._ownerless`)."""


def workload_name(job_name: str, job_uid: str, short: bool = False) -> str:
    """Kueue's name for the Workload of a batch/v1 Job; ``short``: its ``ShortWorkloadNames`` gate (alpha, off),
    which keeps the name a valid label value."""
    return owner_workload_name("Job", "batch", job_name, job_uid, short=short)


def reclaimable_pods(job: o.Job) -> tuple[tuple[str, int], ...]:
    """Kueue's reclaimable pods of a Job's one pod set ``main``: with parallelism above 1 and some pods finished
    for good, the pod set's count (``min(parallelism, completions)``, not the parallelism: Kueue v0.20 #16111) less
    the completions still to come, when that leaves any (as a workload keeps them:
    :func:`projections.workloads.reclaimable_of`). Finished for good: :func:`terminal_count`."""
    parallelism = job.spec.parallelism
    completions = job.spec.completions if job.spec.completions is not None else parallelism
    done = terminal_count(job, completions)
    if parallelism == 1 or done == 0:
        return ()
    count = job_pod_count(job)
    remaining = completions - done
    if remaining >= count:
        return ()
    return (("main", count - remaining),)


def terminal_count(job: o.Job, completions: int) -> int:
    """How many of a Job's pods will not run again. An Indexed Job's (Kueue v0.20 #13178, #13486): its completed
    and failed-for-good indexes (``status.completedIndexes``, ``status.failedIndexes``), each index once and only
    below ``completions`` — after an elastic scale-down ``status.succeeded`` still counts indexes that are gone,
    and the failed ones may name them too. Any other Job's: ``status.succeeded`` (and failed indexes, which only
    an Indexed Job has; a Job kept before its completion mode was read is counted so)."""
    if job.spec.completion_mode != "Indexed":
        return job.status.succeeded + failed_index_count(job.status.failed_indexes)
    intervals = sorted(index_intervals(job.status.completed_indexes) + index_intervals(job.status.failed_indexes))
    n, counted = 0, -1  # counted: the highest index counted so far
    for low, high in intervals:
        low, high = max(low, counted + 1), min(high, completions - 1)
        if low <= high:
            n += high - low + 1
            counted = high
    return n


def index_intervals(indexes: str | None) -> list[tuple[int, int]]:
    """The ``(first, last)`` intervals a Job's index list names (``"1,3-5"``: (1, 1), (3, 5)); malformed parts
    name none."""
    out = []
    for part in (indexes or "").split(","):
        low, _, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            continue
        if 0 <= first <= last:
            out.append((first, last))
    return out


def failed_index_count(indexes: str | None) -> int:
    """How many indexes a Job's ``status.failedIndexes`` names (``"1,3-5"``: 4); malformed parts count none."""
    return sum(last - first + 1 for first, last in index_intervals(indexes))


def job_pod_count(job: o.Job) -> int:
    """The pods a Job runs at once: ``min(parallelism, completions)`` (its Workload's count)."""
    spec = job.spec
    return min(spec.parallelism, spec.completions) if spec.completions is not None else spec.parallelism


def completions_follow_parallelism(annotations: dict[str, str]) -> bool:
    """``kueue.x-k8s.io/job-completions-equal-parallelism`` reads true (as Go's ``strconv.ParseBool``; anything
    else, unreadable included, is false): wherever kueue-es sets a partially admitted Job's parallelism, at
    start and at restore, it sets ``completions`` to the same — every index one rank of a gang that runs at once."""
    return parse_bool(annotations.get(COMPLETIONS_EQUAL_PARALLELISM, "")) is True


def counts_patch(annotations: dict[str, str], parallelism: int) -> dict[str, int]:
    """The ``spec`` fields that give a partially admitted Job ``parallelism`` (and its completions with it when
    the annotation says so; the apiserver lets an Indexed Job change its completions only together with its
    parallelism, to the same value)."""
    if completions_follow_parallelism(annotations):
        return {"parallelism": parallelism, "completions": parallelism}
    return {"parallelism": parallelism}


def is_running(job: o.Job) -> bool:
    """Unsuspended, or suspended by us but not restored yet."""
    return not job.spec.suspend or STOPPING in job.metadata.annotations


class JobIntegration(JobReconciler[o.Job]):
    """The batch/v1 Job adapter of the shared job reconciler (:mod:`connectors.k8s.jobframework`), with the
    Job's own steps: one Workload per Job, elastic Jobs, and Workloads left with no owner."""

    KIND = "Job"
    NOUN = "job"
    RESOURCE = JOBS
    PODS_READY_WITHOUT_WAITING = True
    SLICED = True
    SCALES_UP_IN_PART = True

    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16) -> None:
        super().__init__(client, journal, JobFrameworkStats(), log, retry_s=retry_s, append=append)
        self.concurrency = concurrency
        self.retry_s = retry_s

    async def run(self) -> None:
        """Reconcile every dirty Job, up to ``concurrency`` at a time (one at a time per Job)."""
        await KeyedWorkers(self.reconcile_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _take(self) -> set[str]:
        keys = self.mirror.dirty_jobs | {ORPHAN + k for k in self.mirror.dirty_orphans} | self._retry.due()
        self.mirror.dirty_jobs = set()
        self.mirror.dirty_orphans = set()
        return keys

    # --- one Job -------------------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        if key.startswith(ORPHAN):
            await self._ownerless(key[len(ORPHAN):])
            return
        if not self._config().manages_jobs:
            return  # batch/job is not among the Configuration's frameworks: Kueue runs no Job reconciler
        job = self.state.jobs.get(key)
        if job is None or job.metadata.deletion_timestamp:
            # as Kueue's reconciler, first thing, whatever the Job's labels: its Workloads' finalizers go
            for obs, wl in self._owned(key):
                await self._orphaned(obs, wl, gone=job is None or prebuilt.controller_uid(obs) != job.metadata.uid)
            return
        config = self._config()
        if self._namespace_left_out(job, config):
            return
        if await self._as_child(job, config):
            return  # its ancestor's Workload is the one queued
        if not self._managed(job, config):
            return  # not Kueue's: no queue name (unless manageJobsWithoutQueueName), or a namespace left out
        prebuilt_name = prebuilt.name_of(job, self.state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS))
        if prebuilt_name:
            await self._with_prebuilt(job, prebuilt_name)
            return
        if self.sliced(job) and await self._sliced(job, self._owned(key)):
            return  # an elastic Job's pass, on its workload slices
        keep, extras = job_sync.one_workload(self.state, job, self._owned(key),
                                             compared_max_execution_seconds(job.metadata.labels))
        if extras:
            marker = ",".join(f"{w.metadata.uid}@{w.metadata.resource_version}" for w in extras)
            await self._once(key, f"extras:{marker}", job, self._delete_extras(job, extras))
            return  # as Kueue's reconciler: the rest waits for the Workloads that are left
        name = keep[0].metadata.name if keep is not None else self._new_name(job)
        wl_key = f"{job.metadata.namespace}/{name}"
        wl = self.state.workloads.get(wl_key)
        obs = self.mirror.workloads.get(wl_key)
        if wl is None or obs is None:
            await self._without_workload(job, name, why=MISSING_WORKLOAD)
            return
        await self._with_workload(job, obs, wl)

    # --- what the shared reconciler reads of a Job ------------------------------------------------------------

    def finished(self, job: o.Job) -> tuple[str, str] | None:
        return job_finished(job)

    def is_running(self, job: o.Job) -> bool:
        return is_running(job)

    def restoring(self, job: o.Job) -> bool:
        return STOPPING in job.metadata.annotations

    def is_active(self, job: o.Job) -> bool:
        return job.status.active != 0

    def pods_running(self, job: o.Job) -> bool:
        return not job.spec.suspend and STOPPING not in job.metadata.annotations

    def pods_ready(self, job: o.Job, wl: WorkloadInfo) -> bool:
        """Kueue's Job reconciler: ready + succeeded pods reach the admitted count."""
        count = sum(ps.count for ps in wl.pod_sets)
        if wl.admission is not None:
            counts = [p.count for p in wl.admission.pod_set_assignments if p.count is not None]
            if counts:
                count = sum(counts)
        return (job.status.ready or 0) + job.status.succeeded >= count

    def reclaimable_pods(self, job: o.Job) -> tuple[tuple[str, int], ...]:
        return reclaimable_pods(job)

    def pod_priority_class(self, job: o.Job) -> str | None:
        return job.spec.template.spec.priority_class_name

    def job_pod_sets(self, job: o.Job, *, generated: bool) -> list[o.PodSet]:
        return [job_sync.job_pod_set(job, self.state.gate(gates.PARTIAL_ADMISSION), generated)]

    def max_exec(self, job: o.Job) -> int | None:
        return compared_max_execution_seconds(job.metadata.labels)

    def controller_ref(self, job: o.Job) -> dict[str, Any]:
        return prebuilt.controller_ref(job.metadata.name, job.metadata.uid)

    async def _read_current(self, job: o.Job) -> dict[str, Any] | None:
        try:
            raw = msgspec.json.decode(await self.client.get(JOBS, job.metadata.name, job.metadata.namespace))
        except NotFound:
            return None
        return raw if raw["metadata"]["resourceVersion"] == job.metadata.resource_version else None

    async def _read_to_create(self, job: o.Job) -> dict[str, Any] | None:
        raw = msgspec.json.decode(await self.client.get(JOBS, job.metadata.name, job.metadata.namespace))
        return raw if raw["metadata"]["uid"] == job.metadata.uid else None  # else recreated: the watch brings it

    # --- elastic Jobs (workload slices): the shared steps', with the Job's pods and counts -----------------------

    def slice_counts(self, job: o.Job) -> dict[str, int]:
        return {"main": job_pod_count(job)}

    def slice_pod_selector(self, job: o.Job) -> str:
        """The job controller's label on the Job's pods (Kueue finds them by owner)."""
        return f"batch.kubernetes.io/controller-uid={job.metadata.uid}"

    def slice_pod_set(self, pod: dict[str, Any]) -> str:
        return "main"  # one pod set: every pod counts against it

    def releases_slice_pods(self, job: o.Job) -> bool:
        return self.is_active(job)  # its status counts the pods it makes

    # --- actions -------------------------------------------------------------------------------------------

    def _new_name(self, job: o.Job) -> str:
        """The name to create the Job's Workload under. (One the Job already has is found by its owner, whatever
        its name — one created under the other ``ShortWorkloadNames`` setting is still the Job's.)"""
        return workload_name(job.metadata.name, job.metadata.uid, short=self.state.gate(gates.SHORT_WORKLOAD_NAMES))

    def _owned(self, job_key: str) -> list[tuple[o.Workload, WorkloadInfo]]:
        """The Workloads a Job of this name controls, as stored and in the log, by key."""
        return [(obs, wl) for obs, wl in stored_workloads(self.mirror, self.mirror.owned_by.get(job_key, set()))
                if wl is not None]

    def _partial_admission(self) -> bool:
        """Kueue's PartialAdmission gate under the Configuration recorded in the log: without it, Kueue drops a
        Workload's minCount."""
        return self.state.gate(gates.PARTIAL_ADMISSION)

    def workload_for(self, raw_job: dict[str, Any], name: str) -> dict[str, Any]:
        """The Workload to create for ``raw_job``. Raises
        :class:`WorkloadPriorityClassNotFound` when the class the Job names is not in the log,
        :class:`PriorityClassNotFound` when the PriorityClass its pod template names (with no label) is not."""
        meta, spec = raw_job["metadata"], raw_job.get("spec", {})
        labels = meta.get("labels") or {}
        template = _copy(spec.get("template") or {})
        tmeta = template.setdefault("metadata", {})
        tlabels = {k: v for k, v in (tmeta.get("labels") or {}).items() if k not in DROPPED_FROM_TEMPLATE}
        if tlabels:
            tmeta["labels"] = tlabels
        else:
            tmeta.pop("labels", None)
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        count = min(parallelism, completions) if completions is not None else parallelism
        pod_set: dict[str, Any] = {"name": "main", "count": count, "template": template}
        if self.state.tas_enabled:  # Kueue builds no topology request while TopologyAwareScheduling is off
            pod_set["topologyRequest"] = topology_request(tmeta.get("annotations") or {}, COMPLETION_INDEX)
        min_count = job_sync.generated_min_count(meta.get("annotations") or {}, count, self._partial_admission())
        if min_count is not None:
            pod_set["minCount"] = min_count
        pods_class = (template.get("spec") or {}).get("priorityClassName")
        wl_spec = workload_body.spec(self.state, labels, [pod_set], pods_class)
        job_annotations = meta.get("annotations") or {}
        keys = self._config().keys_to_copy  # Kueue's own labels and annotations win over the copied ones
        annotations = workload_annotations(self.state, keys, job_annotations)
        wl_meta: dict[str, Any] = {
            "name": name, "namespace": meta["namespace"],
            "labels": {**copied(keys.labels, labels), JOB_UID_LABEL: meta["uid"]},
            "finalizers": [FINALIZER],
            "ownerReferences": [prebuilt.controller_ref(meta["name"], meta["uid"])],
        }
        if annotations:
            wl_meta["annotations"] = annotations
        return self._sliced_workload(meta, workload_body.workload(wl_meta, wl_spec))

    async def _start(self, job: o.Job, wl: WorkloadInfo, obs: o.Workload) -> None:
        admission = wl.admission
        assert admission is not None
        psa = next((p for p in admission.pod_set_assignments if p.name == "main"),
                   admission.pod_set_assignments[0] if admission.pod_set_assignments else None)
        slice_chain = workload_slices.pod_slice_name(self.state, obs)
        try:
            info = podsetinfo.start_info(self.state, wl, psa, slice_chain) if psa is not None else podsetinfo.PodSetInfo(
                labels={PODSET_LABEL: "main", **podsetinfo.workload_labels(self.state, wl)})
            merged = podsetinfo.onto_template(job.spec.template, info)
        except podsetinfo.MergeConflict as exc:
            await self._failed_to_start(job, wl, exc)
            return
        template = {"metadata": {"labels": merged.labels or None, "annotations": merged.annotations or None},
                    "spec": {"nodeSelector": merged.node_selector or None,
                             "tolerations": [msgspec.to_builtins(t) for t in merged.tolerations] or None,
                             "schedulingGates": merged.scheduling_gates or None}}
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": job.metadata.resource_version},
            "spec": {"suspend": False, "template": template},
        }
        saved = obs.spec.pod_sets[0] if obs.spec.pod_sets else None
        if (psa is not None and psa.count is not None and saved is not None and saved.min_count is not None
                and psa.count < saved.count and slice_chain is None):
            # partial admission (an admission less reclaimable pods keeps it); a slice's is a partial
            # scale-up's, whose minCount is no minimum of the Job's: its parallelism stays, only the granted
            # pods are released
            patch["spec"].update(counts_patch(job.metadata.annotations, psa.count))
        await self.client.patch(JOBS, job.metadata.name, patch, job.metadata.namespace)
        await self._started(job, wl, admission.cluster_queue, node_selector=merged.node_selector,
                            gated=bool(merged.scheduling_gates))

    async def _stop(self, job: o.Job, obs: o.Workload, why: str) -> None:
        """Suspend (recorded as ``Stopped`` with ``why``), reset the start time, and once no pod is active
        restore the template; each call does what is left."""
        ns, name = job.metadata.namespace, job.metadata.name
        raw: dict[str, Any]
        if not job.spec.suspend:
            raw = msgspec.json.decode(await self.client.patch(JOBS, name, {
                "metadata": {"resourceVersion": job.metadata.resource_version, "annotations": {STOPPING: "true"}},
                "spec": {"suspend": True}}, ns))
            await self._report(job, STOPPED, workload=obs.key, message=why)
        else:
            raw = msgspec.json.decode(await self.client.get(JOBS, name, ns))
            if raw["metadata"]["resourceVersion"] != job.metadata.resource_version:
                return  # the watch brings the newer version
        if (raw.get("status") or {}).get("startTime"):
            raw = msgspec.json.decode(await self.client.patch(JOBS, name, {
                "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
                "status": {"startTime": None}}, ns, subresource="status"))
        if (raw.get("status") or {}).get("active"):
            return  # the template can change only once no pod is active; the Job's next status brings us back
        if not obs.spec.pod_sets:
            return
        saved = self.restored_pod_sets(job, obs)[0]
        tmpl = raw["spec"].get("template") or {}
        tmeta, tspec = tmpl.get("metadata") or {}, tmpl.get("spec") or {}
        cur_labels = tmeta.get("labels") or {}
        want_labels = dict(saved.template.metadata.labels)
        want_labels.update({k: v for k, v in cur_labels.items() if k in JOB_CONTROLLER_LABELS})
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"],
                         "annotations": {STOPPING: None} if STOPPING in (raw["metadata"].get("annotations") or {}) else {}},
            "spec": {"template": {
                "metadata": {"labels": _exact(cur_labels, want_labels),
                             "annotations": _exact(tmeta.get("annotations") or {},
                                                   dict(saved.template.metadata.annotations))},
                "spec": {"nodeSelector": _exact(tspec.get("nodeSelector") or {}, dict(saved.template.spec.node_selector)),
                         "tolerations": [msgspec.to_builtins(t) for t in saved.template.spec.tolerations] or None,
                         "schedulingGates": list(saved.template.spec.scheduling_gates) or None}}},
        }
        if saved.min_count is not None and raw["spec"].get("parallelism") != saved.count:
            # the Workload's count is the Job's own, kept by the apiserver: it outlives a restart of kueue-es
            patch["spec"].update(counts_patch(raw["metadata"].get("annotations") or {}, saved.count))
        await self.client.patch(JOBS, name, patch, ns)
        self.stats.stopped += 1
        log.info("stopped job and restored its template", job=job.key)

    async def _ownerless(self, wl_key: str) -> None:
        """A Workload left with no owner at all (its Job deleted with ``--cascade=orphan``), or being deleted
        with none: Kueue's workload controller finishes it ``OwnerNotFound`` and takes its finalizer off
        (:func:`connectors.k8s.workload_finalizer.ownerless`)."""
        obs = self.mirror.workloads.get(wl_key)
        gate = self.state.gate(gates.FINISH_ORPHANED_WORKLOADS)
        if obs is None or not wf.ownerless(obs, finish_orphaned=gate):
            return
        await self._let_go(obs, self.state.workloads.get(wl_key))


def topology_request(annotations: dict[str, str], index_label: str) -> dict[str, Any]:
    """Kueue's topology request of a pod set: the TAS annotations (a Job's template's, a Pod's own) with the
    pod-set group they name (:func:`connectors.k8s.tas_group_validation.group_of`), and the label that holds
    the pods' rank (what the ungater places indexed pods by: a Job's completion index, a pod group's
    ``kueue.x-k8s.io/pod-group-pod-index``)."""
    req = topology_request_from_annotations(annotations) or o.PodSetTopologyRequest()
    return msgspec.to_builtins(msgspec.structs.replace(req, pod_index_label=index_label,
                                                       pod_set_group_name=group_of(annotations)))


def _exact(current: dict[str, Any], want: dict[str, Any]) -> dict[str, Any] | None:
    """A merge-patch value that turns map ``current`` into exactly ``want`` (``None``: remove the map)."""
    if not want:
        return None
    out: dict[str, Any] = {k: None for k in current if k not in want}
    out.update(want)
    return out


def _copy(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


def _now() -> int:
    return int(time.time() * 1000)
