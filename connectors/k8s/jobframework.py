"""The steps Kueue's one job reconciler (``jobframework/reconciler.go``) takes for every kind of job it runs.

Kueue writes that reconciler once, over an interface each kind implements (suspended, active, finished, pods
ready, reclaimable pods, run and stop with the admission's pod-set information). Here :class:`JobReconciler`
holds the steps and each kind is a subclass naming only its own reads and writes — the batch/v1 Job
(:mod:`connectors.k8s.jobs`), the JobSet (:mod:`connectors.k8s.jobset_integration`), the MPIJob
(:mod:`connectors.k8s.mpijob_integration`), the training operator's jobs (:mod:`connectors.k8s.kubeflow_integration`)
and the RayJob and RayCluster (:mod:`connectors.k8s.ray_integration`). So a step changed for one kind is changed for
all, as in Kueue. The Pod integration is a reconciler of its own, as Kueue's is; it
shares with these only the small pieces of :mod:`connectors.k8s.owner_index`.

What a pass does once the kind has found the job's Workload (:meth:`JobReconciler._with_workload`):

* the Workload **finished or being deleted**: its finalizer goes once the apiserver shows it finished; one
  being deleted first has its running job stopped ("Workload is deleted");
* the job **finished** → ``WorkloadFinished`` (the kind's reason and message);
* **in step** (:meth:`JobReconciler._sync_workload`; a kind may add steps of its own): a generated Workload
  whose pod sets or maximum execution time the job no longer matches (:meth:`JobReconciler.job_pod_sets`,
  Kueue's ``EquivalentToWorkload``) is rewritten from the suspended job while it holds no quota
  (``UpdatedWorkload``), else deleted (``DeletedWorkload``) and made anew, a running job stopped first
  (:mod:`connectors.k8s.job_sync`); a generated Workload takes the WorkloadPriorityClass the job's label names
  now (``UpdatedWorkload``), and the Workload of a suspended job, neither evicted nor holding quota, the queue
  its label names now; under ``AdmissionGatedBy`` the Workload loses the ``kueue.x-k8s.io/admission-gated-by``
  gates the job no longer carries (never gains one); one write a pass;
* **reclaimable pods** → ``ReclaimablePodsChanged`` when the kind's count (each at most its pod set's:
  :func:`within_pod_sets`) differs from the Workload's — only under Kueue's ``ReclaimablePods`` gate: with it
  off the step is skipped and nothing is written to ``status.reclaimablePods``;
* **PodsReady** → ``PodsReadyChanged`` as the job's pods become ready or not, ``WaitForStart`` first under
  waitForPodsReady (:func:`connectors.k8s.pods_ready.pods_ready_transition`);
* **admitted** (in the log and as the apiserver stores it) and not running → start; **not admitted** and
  running → stop (``Stopped`` with the eviction's message; a kind may keep such a job running, as the Job does
  an elastic one whose new slice waits); **evicted**, suspended, no active pods and still
  holding quota → ``JobStopped``. An eviction (not a deactivation) stops the job, or gives the quota back,
  only once the apiserver shows the Workload evicted, as Kueue's reconciler reads it
  (:func:`eviction_unshown`): its status write may still be refused, and then it never happened.

An **elastic** job of a kind that runs on workload slices (``SLICED``: the batch/v1 Job and the Ray kinds;
``kueue.x-k8s.io/elastic-job: "true"`` under ``ElasticJobsViaWorkloadSlices``) takes the slice pass instead
(:meth:`JobReconciler._sliced`, :mod:`connectors.k8s.workload_slices`): its not-finished slices compared with its pod
counts say which one it runs on, which counts change in place, when a new slice is made; it is not stopped while a
new slice waits; running on an admitted slice, its gated pods are released pod set by pod set. Its live slices
take the WorkloadPriorityClass its label names now, as a generated Workload does (Kueue #13780).

A job naming a **prebuilt** Workload (``kueue.x-k8s.io/prebuilt-workload-name``, :mod:`connectors.k8s.prebuilt`;
:meth:`JobReconciler._with_prebuilt`) runs on that one once it controls it — adopted when nothing does, finished
``OutOfSync`` when it no longer matches the job — and never gets one made for it: it waits, suspended, meanwhile.

And with no Workload yet (:meth:`JobReconciler._without_workload`): a running job is suspended first
("Missing Workload"), then one with no active pods is given one — unless a priority class it names is not in
the log (``WorkloadPriorityClassNotFound`` for a WorkloadPriorityClass, once per version of the job).

A job with a Kueue-managed ancestor (:func:`connectors.k8s.child_jobs.managed_ancestor`, read through the
reconciler's ``parents``, a parent whose integration is off from the apiserver) is a child: no Workload of its
own, kept suspended while the ancestor's newest unfinished Workload is missing or not admitted
(:meth:`JobReconciler._child`); the batch/v1 Job and the RayCluster take this step first.

Every write is conditioned on the resourceVersion read; an action is not repeated on the same version of the
job (:func:`connectors.k8s.owner_index.once`); the Events go through the log (``JobActed`` of the kind).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from connectors.k8s import (
    child_jobs,
    copied_metadata,
    elastic_provreq,
    job_selection,
    job_sync,
    parent_reads,
    podsetinfo,
    prebuilt,
    workload_slices,
)
from connectors.k8s import workload_finalizer as wf
from connectors.k8s.client import JSON_PATCH, KubeClient
from connectors.k8s.errors import AlreadyExists, Conflict, Invalid, KubeError, NotFound
from connectors.k8s.integration_log import IntegrationLog, creation_latency_ms
from connectors.k8s.job_events import CREATED_WORKLOAD, MISSING_WORKLOAD, STARTED, STOPPED, stop_message
from connectors.k8s.job_priority import (
    NOT_FOUND_REASON,
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    missing_class,
    missing_pod_class,
    not_found_message,
)
from connectors.k8s.job_sync import DELETE, DELETED_WORKLOAD, STOP, UPDATED_WORKLOAD
from connectors.k8s.journal import Journal
from connectors.k8s.owner_index import once
from connectors.k8s.pods_ready import is_admitted, pods_ready_transition
from connectors.k8s.resources import BY_KIND, Resource
from connectors.k8s.stored_workload import eviction_unwritten, shows
from connectors.k8s.workers import Retries
from connectors.k8s.writer import desired_status, observed_status
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.update_rules import admission_gate_errors
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config_record import in_force
from projections import gates
from projections.cluster import ClusterState
from projections.pods_ready_condition import WAIT_FOR_START
from projections.workload_pods_ready import WAIT_FOR_PODS_READY_ANNOTATION
from projections.workloads import ADMISSION_GATED_BY_ANNOTATION, ADMITTED, FINISHED, WorkloadInfo

WORKLOADS = BY_KIND["Workload"]
PODS = BY_KIND["Pod"]
FAILED_TO_START = "FailedToStart"
CLASS_MISSING = "class-missing"
POD_CLASS_MISSING = "pod-class-missing"
"""The action marker of a job reported for a missing WorkloadPriorityClass (not "create": once the class is
there, the same version of the job is given its Workload)."""


class KubeJob(Protocol):
    """What the steps read of any kind of job: its key and metadata, and ``spec.suspend``."""

    @property
    def key(self) -> str: ...

    @property
    def metadata(self) -> o.ObjectMeta: ...

    @property
    def spec(self) -> Any: ...


J = TypeVar("J", bound=KubeJob)


@dataclass
class JobFrameworkStats:
    """What the shared steps count; a kind's stats add its own."""

    created: int = 0
    started: int = 0
    stopped: int = 0
    finished: int = 0
    orphans: int = 0
    conflicts: int = 0
    errors: int = 0
    failed_to_start: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    """Jobs given no Workload, or whose Workload was not rewritten: a job the kind's builder cannot read (an
    AppWrapper whose pod sets cannot be inferred, say)."""
    class_missing: int = 0
    """Times a job was given no Workload because its WorkloadPriorityClass is not there (yet)."""
    pod_class_missing: int = 0
    """Times a job was given no Workload because its pods' PriorityClass is not there (yet)."""
    reprioritised: int = 0
    """Generated Workloads given the priority class their job's label names now."""
    requeued: int = 0
    """Workloads given the queue name their suspended job's label names now."""
    finalizers_removed: int = 0
    """Workloads the resource-in-use finalizer was taken off."""
    updated: int = 0
    """Generated Workloads rewritten to match their suspended job again."""
    deleted: int = 0
    """Generated Workloads deleted for no longer matching their job (a new one follows)."""
    adopted: int = 0
    """Prebuilt Workloads a job was made the controller of."""
    out_of_sync: list[str] = field(default_factory=list)
    """Prebuilt Workloads finished for no longer matching their job."""
    extras_deleted: int = 0
    """Workloads deleted for being one too many for their job."""
    slice_counts: int = 0
    """Workload slices given their elastic job's pod counts in place."""
    pods_ungated: int = 0
    """Pods of elastic jobs whose elastic-job scheduling gate was lifted."""


ANCESTRY_RETRY_FACTOR = 30.0
"""Retry delays (the integration's ``retry_s``) before a job whose ancestry is cyclic or too deep is looked at
again (one whose parent is not there yet: one)."""


def failed_to_start_message(error: Exception) -> str:
    """The ``FailedToStart`` message of a job whose admission cannot be applied: Kueue's error text unchanged —
    a conflict's own (:class:`connectors.k8s.podsetinfo.MergeConflict`), else, for pod sets the admission does
    not number as the job has them, under Kueue's ``ErrInvalidPodsetInfo`` ("invalid podset infos")."""
    if isinstance(error, podsetinfo.MergeConflict):
        return str(error)
    return f"invalid podset infos: {error}"


def admission_shown(wl: WorkloadInfo, obs: o.Workload) -> bool:
    """Whether the apiserver shows the Workload admitted as the log decided (``Admitted=True``, the same admission
    and check states): a job starts from its Workload as stored, like Kueue's, never from a decision whose
    status write may still fail or be lost with a crash."""
    if not shows(obs, "Admitted"):
        return False
    desired, current = desired_status(wl), observed_status(obs)
    return all(desired.get(k) == current.get(k) for k in ("admission", "admissionChecks"))


def eviction_unshown(state: ClusterState, wl: WorkloadInfo, obs: o.Workload | None) -> bool:
    """Whether the log holds ``wl`` evicted, by a decision still awaiting its outcome
    (:meth:`projections.eviction_undo.KeptEvictions.awaits_outcome`), while the apiserver still shows it
    admitted and not evicted.
    Kueue's job reconciler stops a job (and gives its quota back) for the Workload it reads: Evicted=True, or
    not Admitted. So a running job waits for the eviction's status write, which may still be refused: then
    nothing happened (the fold takes the eviction back) and the job runs on. A deactivated Workload is stopped
    at once, as before (its quota is given back at the deactivation)."""
    if not wl.evicted or wl.phase != ADMITTED or not wl.active or obs is None:
        return False
    return shows(obs, "Admitted") and eviction_unwritten(state, wl.key, obs)


def within_pod_sets(reclaimable: tuple[tuple[str, int], ...], obs: o.Workload) -> tuple[tuple[str, int], ...]:
    """The kind's reclaimable pods, each at most its pod set's count in ``obs`` (Kueue #12670: an elastic Job
    scaled below the pods it reclaimed would otherwise be given a count its Workload's webhook refuses)."""
    counts = {ps.name: ps.count for ps in obs.spec.pod_sets}
    return tuple((name, min(count, counts.get(name, count))) for name, count in reclaimable)


def only_removes_gates(obs: o.Workload, gate: str | None) -> bool:
    """Whether giving the Workload ``gate`` (None: none) as its admission gates only removes some: what Kueue's
    Workload webhook lets an update do under ``AdmissionGatedBy``."""
    old = {"annotations": obs.metadata.annotations}
    return not admission_gate_errors(old, {"annotations": {ADMISSION_GATED_BY_ANNOTATION: gate or ""}})


def admission_gate_patch(obs: o.Workload, gate: str | None) -> dict[str, Any]:
    """The merge patch giving the Workload ``obs`` the admission gate ``gate`` (None: removing it), conditioned on
    its resourceVersion."""
    return {"metadata": {"resourceVersion": obs.metadata.resource_version,
                         "annotations": {ADMISSION_GATED_BY_ANNOTATION: gate}}}


def admission_gate_change(state: ClusterState, job_annotations: Mapping[str, str],
                          obs: o.Workload) -> tuple[str | None] | None:
    """Under ``AdmissionGatedBy``, the admission gate (in a 1-tuple; None: none) the Workload ``obs`` is to take
    from its job's ``job_annotations`` when they differ and that only removes gates (a Workload never gains one:
    Kueue's Workload webhook refuses it); None: nothing to write."""
    if not state.gate(gates.ADMISSION_GATED_BY):
        return None
    gate = job_annotations.get(ADMISSION_GATED_BY_ANNOTATION) or None
    if obs.metadata.annotations.get(ADMISSION_GATED_BY_ANNOTATION) == gate or not only_removes_gates(obs, gate):
        return None
    return (gate,)


def stored_workloads(mirror: Any, wl_keys: Sequence[str] | set[str]) -> list[tuple[o.Workload, WorkloadInfo | None]]:
    """The Workloads of ``wl_keys`` the apiserver stores (and the log's view of each, when it has them), by key."""
    out: list[tuple[o.Workload, WorkloadInfo | None]] = []
    for wl_key in sorted(wl_keys):
        obs = mirror.workloads.get(wl_key)
        if obs is not None:
            out.append((obs, mirror.state.workloads.get(wl_key)))
    return out


class JobReconciler(Generic[J]):
    """The shared steps; a subclass names its kind and implements the reads and writes marked below."""

    KIND: str
    """The kind the Events of ``JobActed`` are recorded on."""
    NOUN: str
    """How log lines name one such job (also their key's name)."""
    RESOURCE: Resource
    """Where such jobs are read and patched."""
    PODS_READY_WITHOUT_WAITING = False
    """Whether ``PodsReady`` is tracked (past ``WaitForStart``) also while waitForPodsReady is off."""

    def __init__(self, client: KubeClient, journal: Journal, stats: JobFrameworkStats, logger: Any, *,
                 retry_s: float, append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None) -> None:
        self.client = client
        self.journal = journal
        self.append = append or journal.append
        self.mirror = journal.mirror
        self.state = journal.mirror.state
        self.stats = stats
        self.log = logger
        self._retry = Retries(retry_s)
        self._acted: dict[str, tuple[str, str]] = {}
        """Job key -> (action, job resourceVersion) last done, so a stale view does not repeat it."""
        self._class_warned: dict[str, tuple[str, str]] = {}
        """Job key -> (the priority class found missing, job resourceVersion) last reported
        (:meth:`_class_gone`)."""
        self._log = IntegrationLog(self.append, self.mirror, stats, kind=self.KIND, log=logger)
        self.parents = child_jobs.Parents()
        """Where a job's parents are read (:func:`child_jobs.managed_ancestor`): the connector registers what the
        integrations hold, one registry for all kinds."""
        self._discovered: parent_reads.Found = {}
        """The resources of external kinds found through discovery (:func:`parent_reads.read_parent_meta`)."""

    # --- what a kind tells -------------------------------------------------------------------------------------

    def finished(self, job: J) -> tuple[str, str] | None:
        """``(reason, message)`` once the job completed or failed (None: not finished)."""
        raise NotImplementedError

    def is_running(self, job: J) -> bool:
        """Whether the job runs, as far as starting and stopping it goes."""
        return not job.spec.suspend

    def restoring(self, job: J) -> bool:
        """Whether an admitted job was stopped and is not restored yet (its stop is to be finished first)."""
        return False

    def is_active(self, job: J) -> bool:
        """Whether any of its pods is active."""
        raise NotImplementedError

    def stops_unadmitted(self, job: J, wl: WorkloadInfo) -> bool:
        """Whether a running job whose Workload is not admitted is stopped (an elastic job is only when evicted:
        it runs on while its new slice waits, :mod:`connectors.k8s.workload_slices`; Kueue's reconciler, whose
        eviction step comes before)."""
        return bool(wl.evicted) or not self.sliced(job)

    def pods_running(self, job: J) -> bool:
        """Whether its pods run, as PodsReady counts them."""
        return not job.spec.suspend

    def pods_ready(self, job: J, wl: WorkloadInfo) -> bool:
        """Kueue's ``PodsReady`` of the job under its Workload's admission."""
        raise NotImplementedError

    def reclaimable_pods(self, job: J) -> tuple[tuple[str, int], ...]:
        """``(pod set, count)`` of the pods the job no longer needs."""
        raise NotImplementedError

    def pod_priority_class(self, job: J) -> str | None:
        """The PriorityClass its pods name."""
        raise NotImplementedError

    def workload_for(self, raw: dict[str, Any], name: str) -> dict[str, Any]:
        """The Workload to create for the job as stored; raises as :meth:`_create_workload` handles."""
        raise NotImplementedError

    def suspend_spec(self) -> dict[str, Any]:
        """The part of the job's spec a merge patch sets to suspend it (an MPIJob keeps it in its run policy)."""
        return {"suspend": True}

    def job_pod_sets(self, job: J, *, generated: bool) -> list[o.PodSet] | None:
        """The pod sets the job makes now, in its Workload's order, as Kueue compares them with the Workload's
        (``generated``: against a Workload built from the job; None: the kind's are not compared)."""
        return None

    def max_exec(self, job: J) -> int | None:
        """The job's maximum execution time as Kueue reads it when comparing the job with its Workload."""
        return None

    def controller_ref(self, job: J) -> dict[str, Any]:
        """The controller ownerReference the job's Workloads carry (a prebuilt one once adopted)."""
        raise NotImplementedError

    SLICED = False
    """Whether the kind runs on workload slices when elastic (:meth:`sliced`)."""
    SCALES_UP_IN_PART = False
    """Whether the kind, run on slices, reads the partial scale-up strategy (KEP-12100, :meth:`partial`)."""

    def sliced(self, job: J) -> bool:
        """Whether the job runs on workload slices: a kind that does, ``kueue.x-k8s.io/elastic-job: "true"``
        under ``ElasticJobsViaWorkloadSlices`` (:mod:`connectors.k8s.workload_slices`)."""
        return self.SLICED and workload_slices.elastic(self.state, job.metadata.annotations)

    def restored_pod_sets(self, job: J, obs: o.Workload) -> list[o.PodSet]:
        """The pod sets whose templates stopping the job on ``obs`` gives back to its own: the Workload's; a
        slice's as they were before any start (:func:`connectors.k8s.workload_slices.unstarted`: one made
        while the job ran carries the start on an earlier slice, which a later start would conflict with)."""
        sets = list(obs.spec.pod_sets)
        return workload_slices.unstarted(sets) if self.sliced(job) else sets

    def partial(self, annotations: dict[str, str]) -> bool:
        """Whether a job of this kind with ``annotations`` scales up in part
        (:func:`connectors.k8s.workload_slices.partial_scale_up`)."""
        return self.SCALES_UP_IN_PART and workload_slices.partial_scale_up(self.state, annotations)

    def slice_counts(self, job: J) -> dict[str, int] | None:
        """The job's pod counts by pod set, as its slices are compared with it (None: they cannot be told)."""
        raise NotImplementedError

    def slice_pod_selector(self, job: J) -> str:
        """The label selector that finds the job's pods (empty: it has none yet)."""
        raise NotImplementedError

    def slice_pod_set(self, pod: dict[str, Any]) -> str:
        """The pod set one of the job's pods counts against."""
        return workload_slices.pod_set_label(pod)

    def slice_version(self, job: J) -> int | str:
        """What the job's slice names are hashed over (:func:`connectors.k8s.workload_slices.slice_name`): its
        generation, unless the kind says more (Kueue's ``ElasticWorkloadNameProvider``)."""
        return job.metadata.generation

    def slice_pods_version(self, job: J) -> str:
        """Besides the job's version, what changes when its pods do (a RayJob's: its RayCluster's version)."""
        return ""

    def releases_slice_pods(self, job: J) -> bool:
        """Whether the job running on an admitted slice may have gated pods to release."""
        return self.is_running(job)

    async def _read_current(self, job: J) -> dict[str, Any] | None:
        """The job as stored, when it is still the version the view holds (None: changed or gone meanwhile)."""
        raise NotImplementedError

    async def _read_to_create(self, job: J) -> dict[str, Any] | None:
        """The job as stored, to build its Workload from (None: not the job the view holds any more)."""
        raise NotImplementedError

    async def _start(self, job: J, wl: WorkloadInfo, obs: o.Workload) -> None:
        raise NotImplementedError

    async def _stop(self, job: J, obs: o.Workload, why: str) -> None:
        raise NotImplementedError

    async def _sync_workload(self, job: J, obs: o.Workload, wl: WorkloadInfo, *, generated: bool) -> bool:
        """Bring the Workload in step with the job (module docstring): a ``generated`` one the job no longer
        matches, then priority class and queue, then the admission gate; whether the pass ends here (something
        was written, or is awaited)."""
        if generated and await self._out_of_step(job, obs, wl):
            return True
        running = self.is_running(job)
        if await self._in_step(job, obs, wl, running=running, generated=generated):
            return True
        if await self._admission_gate(job, obs):
            return True
        return not running and await self._pods_ready_annotation(job, obs)

    # --- running -----------------------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        raise NotImplementedError

    async def reconcile_guarded(self, key: str) -> None:
        await self._retry.attempt(self.reconcile, key, what=f"{self.NOUN} reconcile", stats=self.stats,
                                  log=self.log, conflict_waits=True, **{self.NOUN: key})

    def _config(self) -> SchedulerConfig:
        """The Kueue Configuration recorded in the log. Kueue manages a job only in a namespace its
        ``managedJobsNamespaceSelector`` selects, and skips one in a namespace it cannot find; here that is one not
        in the log yet, whose arrival marks its jobs dirty (:mod:`connectors.k8s.job_selection`)."""
        return in_force(self.state) or DEFAULT

    def _namespace_left_out(self, job: J, config: SchedulerConfig) -> bool:
        """Kueue's reconciler, under its locked ``ManagedJobsNamespaceSelectorAlwaysRespected``, leaves a live job
        alone, first thing, unless ``managedJobsNamespaceSelector`` selects its namespace: no ancestor walk (so no
        ``JobNestingTooDeep``), no child held, no Workload, whatever its queue name."""
        return not job_selection.namespace_managed(self.state.namespaces.get(job.metadata.namespace), config)

    def _managed(self, job: J, config: SchedulerConfig) -> bool:
        """Whether the job is Kueue's: a queue name (or ``manageJobsWithoutQueueName``) in a managed namespace."""
        meta = job.metadata
        return job_selection.is_managed(meta.labels, job_selection.controller(meta.owner_references),
                                        self.state.namespaces.get(meta.namespace), config)

    async def _once(self, key: str, action: str, job: J, work: Any) -> None:
        """Run ``work`` unless the same action already ran on this very version of the job."""
        await once(self._acted, key, (action, job.metadata.resource_version), work)

    async def _append_once(self, wl: WorkloadInfo, event: ev.AnyEvent) -> bool:
        return await self._log.append_once(wl, event)

    async def _report(self, job: J, action: str, **what: str) -> None:
        await self._log.report(job.key, job.metadata.uid, action, **what)

    # --- a job with a Kueue-managed ancestor ------------------------------------------------------------------

    async def _as_child(self, job: J, config: SchedulerConfig) -> bool:
        """Kueue's reconciler is generic: a job of any kind with a Kueue-managed ancestor
        (:func:`child_jobs.managed_ancestor`; a queued JobSet's Job, a queued RayJob's RayCluster, a JobSet under
        a queued MPIJob) gets no Workload of its own and is held suspended while the ancestor's is missing or not
        admitted (:meth:`_child`). True when the job is such a child, or its ancestry cannot be told
        (:meth:`_ancestry_failed`): either way nothing else is done with it."""
        external = config.external_job_kinds
        try:
            ancestor = await child_jobs.walk_reading(
                job.metadata, lambda reads: self.parents.parent_of(config, self.state.jobs, reads),
                lambda namespace, ref: self._read_parent(external, namespace, ref),
                config.manage_jobs_without_queue_name)
        except child_jobs.AncestryError as exc:
            await self._ancestry_failed(job, exc)
            return True
        if ancestor is None:
            return False
        if not config.gate(gates.SKIP_CHILD_JOB_SUSPENSION):
            await self._child(job, ancestor)
        return True

    async def _read_parent(self, external: frozenset[tuple[str, str]], namespace: str,
                           ref: o.OwnerReference) -> o.ObjectMeta | None:
        """A parent the walk passes through that no integration holds (a JobSet with the JobSet integration
        off, a ReplicaSet), or one of the ``external`` kinds (``integrations.externalFrameworks``), read from
        the apiserver: a failure other than not found fails the step, retried."""
        return await parent_reads.read_parent_meta(self.client, namespace, ref, external, self._discovered)

    async def _child(self, job: J, ancestor: o.ObjectMeta) -> None:
        """A job with a Kueue-managed ancestor, with ``SkipChildJobSuspension`` off (Kueue v0.20 turns it on, and
        then leaves the child as it is): suspended while the ancestor's Workload is missing or not admitted
        (reference §7.1 item 3; Normal ``Suspended`` "Kueue managed child job suspended")."""
        owned = self.mirror.controlled.get(ancestor.uid, set())
        parent = child_jobs.parent_workload(owned, self.mirror.workloads, self.state.workloads)
        sliced = any(workload_slices.elastic(self.state, meta.annotations) for meta in (job.metadata, ancestor))
        if child_jobs.held(job, parent, finished=self.finished(job) is not None, sliced=sliced):
            await self._once(job.key, "suspend-child", job, self._suspend_child(job))

    async def _ancestry_failed(self, job: J, exc: child_jobs.AncestryError) -> None:
        """Kueue's reconcile fails, and is retried: the job is left alone and looked at again later — soon for a
        parent not there yet (the lists other integrations keep may lag the log), after a while otherwise. Too
        many parents get the job a Warning ``JobNestingTooDeep``, once per version of the job."""
        missing = isinstance(exc, child_jobs.OwnerMissing)
        self._retry.later(job.key, 1.0 if missing else ANCESTRY_RETRY_FACTOR)
        if missing:
            self.log.debug(f"{self.NOUN} waits for its controller", error=str(exc), **{self.NOUN: job.key})
            return
        self.log.warning(f"cannot tell the {self.NOUN}'s Kueue-managed ancestor", error=str(exc),
                         **{self.NOUN: job.key})
        if isinstance(exc, child_jobs.ChainTooLong):
            await self._once(job.key, "nesting-too-deep", job, self._report(
                job, child_jobs.NESTING_TOO_DEEP, message=child_jobs.NESTING_TOO_DEEP_MESSAGE))

    async def _suspend_child(self, job: J) -> None:
        await self.client.patch(self.RESOURCE, job.metadata.name, {
            "metadata": {"resourceVersion": job.metadata.resource_version}, "spec": self.suspend_spec()},
            job.metadata.namespace)
        self.log.info(f"suspended a child {self.NOUN} whose parent's workload is not admitted",
                      **{self.NOUN: job.key})
        await self._report(job, child_jobs.SUSPENDED, message=child_jobs.SUSPENDED_MESSAGE)

    # --- the steps ---------------------------------------------------------------------------------------------

    async def _without_workload(self, job: J, name: str, *, why: str = MISSING_WORKLOAD, create: bool = True,
                                elastic: bool = False) -> None:
        """A managed job with none of its own Workload (to be ``name``): suspend it (``Stopped`` with ``why``),
        then — when the kind may ``create`` one and no pod is active — create it (module docstring). An
        ``elastic`` job's first slice is created as it runs, pods active or not: its pods wait at their
        scheduling gate instead (Kueue's reconciler lets a workload-slice job stay active)."""
        if self.finished(job) is not None:
            return
        key = job.key
        if not job.spec.suspend and not elastic:
            await self._once(key, "suspend", job, self._suspend_only(job, name, why))
            return
        if not create or (self.is_active(job) and not elastic):
            return  # Kueue waits for the pods of a suspended job to go first
        labels = job.metadata.labels
        missing = missing_class(self.state, labels)
        missing_pc = missing_pod_class(self.state, labels, self.pod_priority_class(job))
        if missing is not None:
            await self._once(key, CLASS_MISSING, job, self._class_missing(job, missing))
        elif missing_pc is not None:
            await self._once(key, POD_CLASS_MISSING, job, self._pod_class_missing(job, missing_pc))
        else:
            await self._once(key, "create", job, self._create_workload(job, name))

    async def _with_workload(self, job: J, obs: o.Workload, wl: WorkloadInfo, *, generated: bool = True) -> None:
        """One step with the job's Workload, as stored (``obs``) and in the log (``wl``) (module docstring);
        ``generated``: the Workload was made for the job, not named by it."""
        key = job.key
        if self._acted.get(key, ("",))[0].partition(":")[0] == "create":
            del self._acted[key]  # seen: if it is ever deleted, it is created again (a slice's: ``create:<name>``)
        if wl.phase == FINISHED or wf.deleting(obs):
            await self._release(job, wl, obs)
            return  # as Kueue's reconciler: nothing else is done with a finished Workload, or one going
        done = self.finished(job)
        if done is not None:
            reason, message = done  # the message as the job gives it, empty too: Kueue's reconciler adds none
            await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason=reason,
                                                            message=message))
            return
        if await self._sync_workload(job, obs, wl, generated=generated):
            return  # as Kueue's reconciler: the rest waits for the Workload that shows it
        reclaimable = within_pod_sets(self.reclaimable_pods(job), obs) if self.state.reclaim_enabled else ()
        if self.state.reclaim_enabled and reclaimable != wl.reclaimable:
            await self._append_once(wl, ev.ReclaimablePodsChanged(
                time=_now(), key=wl.key, uid=wl.uid,
                reclaimable_pods=[o.ReclaimablePod(name=n, count=c) for n, c in reclaimable]))
            return  # as Kueue's reconciler: the rest waits for the Workload that shows them
        await self._track_pods_ready(job, wl)
        await self._checks_pending(job, wl)
        admitted, running = is_admitted(wl), self.is_running(job)
        if admitted and not running:
            if admission_shown(wl, obs):
                await self._once(key, "start", job, self._start(job, wl, obs))
        elif not admitted and running:
            if self.stops_unadmitted(job, wl) and not eviction_unshown(self.state, wl, obs):
                await self._once(key, "stop", job, self._stop(job, obs, stop_message(wl)))
        elif admitted and self.restoring(job):
            await self._once(key, "stop", job, self._stop(job, obs, stop_message(wl)))  # finish restoring first
        elif (wl.evicted and wl.reserving and not wl.job_stopped and not self.is_active(job)
              and not eviction_unshown(self.state, wl, obs)):
            await self._append_once(wl, ev.JobStopped(time=_now(), key=wl.key, uid=wl.uid))
        elif admitted:
            await self._running_admitted(job, wl)

    async def _running_admitted(self, job: J, wl: WorkloadInfo) -> None:
        """A running job on its admitted Workload: nothing to do, unless it runs on slices: then its pods'
        elastic-job gate is lifted (Kueue's ``StartWorkloadSlicePods``), once per slice and version of the job."""
        if self.sliced(job) and self.releases_slice_pods(job):
            # a slot of its own: the slice passes' other writes (a new slice, counts) leave it done
            await self._once(f"{job.key}/ungate", f"ungate@{wl.uid}{self.slice_pods_version(job)}", job,
                             self._ungate_pods(job, wl))

    # --- elastic jobs (workload slices) --------------------------------------------------------------------

    def _slices(self, key: str, uid: str) -> list[workload_slices.Slice]:
        """The Workloads job ``key`` (``uid``) controls, stored and in the log."""
        return [(obs, wl) for obs, wl in self._owned(key)
                if wl is not None and any(r.controller and r.uid == uid for r in obs.metadata.owner_references)]

    def _owned(self, key: str) -> Sequence[tuple[o.Workload, WorkloadInfo | None]]:
        """The Workloads a job of this name controls, as stored (and in the log, when it has them)."""
        raise NotImplementedError

    def _sliced_workload(self, meta: dict[str, Any], workload: dict[str, Any],
                         counts: dict[str, int] | None = None) -> dict[str, Any]:
        """``workload``, about to be created for the job of raw ``meta``, made one of its slices when it runs on
        slices (:func:`connectors.k8s.workload_slices.as_slice`), its pod sets counting ``counts`` when given (the
        job's :meth:`slice_counts`, when they are not its spec's)."""
        annotations = meta.get("annotations") or {}
        if self.SLICED and workload_slices.elastic(self.state, annotations):
            for ps in workload["spec"]["podSets"]:
                ps["count"] = (counts or {}).get(ps["name"], ps["count"])
            owned = self._slices(f"{meta['namespace']}/{meta['name']}", meta["uid"])
            workload_slices.as_slice(workload, owned, partial=self.partial(annotations))
        return workload

    async def _sliced(self, job: J, owned: Sequence[workload_slices.Slice]) -> bool:
        """One pass of an elastic job on its workload slices ``owned`` (:func:`connectors.k8s.workload_slices.ensure`):
        whether it was done here (False: the slices do not apply, the job's Workload is found as any job's)."""
        partial = self.partial(job.metadata.annotations)
        counts = self.slice_counts(job)
        if counts is None:  # Kueue's reconcile fails: nothing is done
            self.log.error(f"elastic {self.NOUN}: its pod sets cannot be told", **{self.NOUN: job.key})
            return True
        step = workload_slices.ensure(counts, owned, partial=partial)
        if step.finish_old is not None:
            await self._finish_out_of_sync(job, step.finish_old[1])
        if step.error:
            self.log.error(f"elastic {self.NOUN}: workload slices left as they are", error=step.error,
                           **{self.NOUN: job.key})
            return True
        if not step.applies:
            return False
        finishing = step.finish_old[0].key if step.finish_old is not None else None
        staying = [s for s in workload_slices.not_finished(owned) if s[0].key != finishing]
        if await self._slice_priorities(job, staying):
            return True
        live = workload_slices.not_finished(owned)
        for behind in live:  # the admitted slice a new one waits behind still runs the job: its pods are released
            if is_admitted(behind[1]) and (step.keep is None or behind[0].key != step.keep[0].key) \
                    and self.is_running(job):
                await self._running_admitted(job, behind[1])
        keep = step.keep or self._started_first(job, step.probed)
        if keep is None:
            name = self._slice_name(job, workload_slices.probe_level(live) if partial else None, owned)
            if not live:  # the first slice: made whether the job runs or not (its pods wait at their gate)
                await self._without_workload(job, name, elastic=True)
            else:  # a scale-up: the job runs on while the new slice waits (a probe after it, at the same version)
                await self._once(job.key, f"create:{name}", job, self._create_workload(job, name))
            return True
        obs, wl = keep
        if step.set_counts:
            if wl.key not in self.mirror.pending:
                rv = obs.metadata.resource_version
                await self._once(job.key, f"counts@{rv}", job, self._set_counts(job, obs))
            return True  # the rest waits for the Workload that shows the counts
        for old_obs, old_wl in owned:
            if old_obs.key != obs.key and wf.release(old_obs, old_wl, job_running=False) == wf.REMOVE:
                await self._unfinalize(old_obs)  # a slice finished (replaced, out of sync): its finalizer goes
        # as Kueue: not rewritten (re-prioritised above)
        await self._with_workload(job, obs, wl, generated=False)
        return True

    def _started_first(self, job: J, probed: workload_slices.Slice | None) -> workload_slices.Slice | None:
        """The slice admitted in part that a probe is due behind
        (:attr:`connectors.k8s.workload_slices.SliceStep.probed`), when the job does not run: it is started
        on that slice first, and probes for the rest once it runs, so the probe never keeps a stopped job
        waiting. (A partial slice evicted under a waiting probe leaves the job stopped and the probe its own,
        Kueue #15417: admitted at its floor, the probe is this slice.) None: the probe is made now."""
        if probed is None or self.is_running(job):
            return None
        return probed

    async def _ungate_pods(self, job: J, wl: WorkloadInfo) -> None:
        """Lift the elastic-job gate of the job's pods (:meth:`slice_pod_selector`) that the slice grants, pod set
        by pod set (:func:`connectors.k8s.workload_slices.released_by_pod_set`), each patch applied only to the
        pod as read. A pod gone meanwhile is skipped; one changed meanwhile (the topology ungater, say) fails the
        pass once the others are done, so that it is retried: a pod left gated changes nothing the job's version
        counts, so no later pass of that version would come (Kueue requeues)."""
        ns, selector = job.metadata.namespace, self.slice_pod_selector(job)
        if not selector:
            return
        granted = workload_slices.granted(wl)  # a partial admission's counts, not the spec's
        identities = elastic_provreq.identities(self.state, wl, granted)  # both before the fold may move on
        raw = await self.client.request("GET", PODS.collection_path(ns), query=[("labelSelector", selector)])
        stale: list[str] = []
        pods = msgspec.json.decode(raw).get("items") or []
        if identities is not None:  # a gated pod that cannot take its request identity stays so, not counted
            pods = elastic_provreq.able(pods, identities, self.slice_pod_set, workload_slices.has_gate)
        for pod in workload_slices.released_by_pod_set(pods, granted, self.slice_pod_set):
            if not is_admitted(wl):
                break  # evicted meanwhile: the eviction's record brings the pass that stops the job
            ops = workload_slices.ungate_ops(pod)
            if ops is None:
                continue
            if identities is not None:
                ops += elastic_provreq.identity_ops(pod, identities[self.slice_pod_set(pod)])  # type: ignore[arg-type]
            try:
                await self.client.patch(PODS, pod["metadata"]["name"], ops, ns, content_type=JSON_PATCH)
            except (NotFound, Invalid):
                continue
            except Conflict:  # the pod changed since it was read (its resourceVersion test failed)
                stale.append(pod["metadata"]["name"])
                continue
            self.stats.pods_ungated += 1
            meta = pod["metadata"]
            self.log.info("lifted the elastic-job gate of a pod", workload=wl.key, pod=meta["name"],
                          **{self.NOUN: job.key})
            await self._log.gate_removed(f"{ns}/{meta['name']}", meta.get("uid", ""),
                                         workload_slices.ELASTIC_JOB_GATE,
                                         wl)  # never a pod group's, as Kueue's elastic-job ungater records it
        if stale:  # a KubeError, not a Conflict: the worker retries it rather than wait for a watch event
            raise KubeError(f"pods {', '.join(f'{ns}/{n}' for n in stale)}: changed while their elastic-job gate "
                            "was being lifted", 409, "Conflict")

    def _slice_name(self, job: J, probe: int | None = None, owned: Sequence[workload_slices.Slice] = ()) -> str:
        """The name of a new slice of the job; ``probe``: a scale-up probe's level
        (:func:`connectors.k8s.workload_slices.probe_level`); ``owned``: the job's slices, a name one of them has
        not taken again (:func:`connectors.k8s.workload_slices.fresh_name_extra`)."""
        meta, kind, group = job.metadata, self.RESOURCE.kind, self.RESOURCE.group
        short, version = self.state.gate(gates.SHORT_WORKLOAD_NAMES), self.slice_version(job)
        name = workload_slices.slice_name(kind, group, meta.name, meta.uid, version, short=short, probe=probe)
        extra = workload_slices.fresh_name_extra(version, probe, name, owned)
        return workload_slices.slice_name(kind, group, meta.name, meta.uid, version, short=short,
                                          extra=extra) if extra else name

    async def _finish_out_of_sync(self, job: J, wl: WorkloadInfo) -> None:
        """An old slice that lost its quota, or was evicted, while a new one waits: finished ``OutOfSync``."""
        if await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid,
                                                            reason=workload_slices.OUT_OF_SYNC,
                                                            message=workload_slices.OUT_OF_SYNC_MESSAGE)):
            self.log.info("finished an out-of-sync workload slice", workload=wl.key, **{self.NOUN: job.key})

    async def _set_counts(self, job: J, obs: o.Workload) -> None:
        """Give the slice the job's pod counts in place (a scale-down, or a slice holding no quota), conditioned
        on its resourceVersion; Kueue records no Event for it."""
        counts = self.slice_counts(job)
        if counts is None:
            return
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, workload_slices.counts_patch(obs, counts),
                                    obs.metadata.namespace, content_type=JSON_PATCH)
        except NotFound:
            return
        self.stats.slice_counts += 1
        self.log.info("gave the workload slice its job's pod counts", workload=obs.key, counts=counts,
                      **{self.NOUN: job.key})

    async def _checks_pending(self, job: J, wl: WorkloadInfo) -> None:
        """Report the Workload's pending admission checks on the job (``UpdatedAdmissionCheck``), when the kind
        does it itself (a Job's come from the log: :mod:`connectors.k8s.job_events`)."""

    async def _track_pods_ready(self, job: J, wl: WorkloadInfo) -> None:
        """``PodsReadyChanged`` as the job's pods become ready or not; under waitForPodsReady, Kueue's first write
        (``WaitForStart``) to a Workload that shows no PodsReady condition yet — what the condition shows after
        that the fold derives (:mod:`projections.pods_ready_condition`)."""
        change = pods_ready_transition(wl, running=self.pods_running(job), ready=self.pods_ready(job, wl))
        if change is None:
            return
        if not self.state.waits_for_pods_ready and (not self.PODS_READY_WITHOUT_WAITING or change[1] == WAIT_FOR_START):
            return
        await self._append_once(wl, ev.PodsReadyChanged(time=_now(), key=wl.key, uid=wl.uid, ready=change[0],
                                                        reason=change[1]))

    async def _in_step(self, job: J, obs: o.Workload, wl: WorkloadInfo, *, running: bool, generated: bool) -> bool:
        """Give a ``generated`` Workload the priority class the job's label names now, and any the queue
        (:mod:`connectors.k8s.job_sync`); whether the pass ends here (something was written, or is awaited)."""
        if wl.key in self.mirror.pending:
            return False  # decided from the Workload as stored: wait until it shows every decision
        key, rv, labels = job.key, obs.metadata.resource_version, job.metadata.labels
        if generated and await self._priority(job, obs, wl):
            return True
        queue = job_sync.queue_change(labels, obs, wl, running=running)
        if queue is not None:
            await self._once(key, f"queue@{rv}", job, self._set_queue(job, obs, queue))
            return True
        return False

    async def _priority(self, job: J, obs: o.Workload, wl: WorkloadInfo) -> bool:
        """Give the Workload the priority class the job's label names now (Kueue's ``UpdateWorkloadPriority``,
        :func:`connectors.k8s.job_sync.priority_change`); whether the pass ends here (written, or the class
        awaited)."""
        key, rv = job.key, f"{obs.metadata.name}@{obs.metadata.resource_version}"
        try:
            priority = job_sync.priority_change(self.state, job.metadata.labels, self.pod_priority_class(job),
                                                obs, wl)
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            await self._class_gone(job, obs, exc)
            return True  # as Kueue's reconcile, which fails on the lookup: the rest waits for the class
        if job_sync.looks_up_class(job.metadata.labels, obs, wl):
            # found: reported again should it go. A Workload that looked nothing up (an older slice on a pod
            # PriorityClass, a finished one) says nothing of the class, so it leaves the slot as it is.
            self._class_warned.pop(key, None)
        if priority is None:
            return False
        await self._once(key, f"priority:{rv}", job, self._set_priority(job, obs, *priority))
        return True

    async def _class_gone(self, job: J, obs: o.Workload,
                          exc: WorkloadPriorityClassNotFound | PriorityClassNotFound) -> None:
        """:meth:`_priority_missing` once per version of the job and class missing (:attr:`_class_warned`),
        whichever of its Workloads (an elastic job's live slices) looked it up and however often their status
        changed meanwhile (an eviction, a drain): Kueue's repeats of one Event are seen as one, as the
        LeaderWorkerSet's (:mod:`connectors.k8s.lws_integration`). A new version of the job, or the class
        found and then gone again, is reported again (ro-diff-c L2)."""
        marker = (f"{type(exc).__name__}:{exc.name}", job.metadata.resource_version)
        await once(self._class_warned, job.key, marker, self._priority_missing(job, obs, exc))

    async def _slice_priorities(self, job: J, live: Sequence[workload_slices.Slice]) -> bool:
        """Kueue #13780: an elastic job's live slices (``live``, oldest first) take the priority class its
        label names now, as a Workload made for a job does (the slice it runs on, and one a new slice waits
        behind), one write a pass; whether the pass ends here."""
        for obs, wl in live:
            if wl.key not in self.mirror.pending and await self._priority(job, obs, wl):
                return True
        return False

    async def _out_of_step(self, job: J, obs: o.Workload, wl: WorkloadInfo) -> bool:
        """A generated Workload the job no longer matches (:func:`connectors.k8s.job_sync.out_of_step_sets`): the
        running job stopped first, then the Workload rewritten or deleted (not while a decision about it is still
        to be written); whether it does not match."""
        mine = self.job_pod_sets(job, generated=True)
        if mine is None:
            return False
        action = job_sync.out_of_step_sets(self.state, mine, obs, wl, running=self.is_running(job),
                                           suspended=bool(job.spec.suspend), max_exec=self.max_exec(job))
        if action == STOP:
            await self._once(job.key, "stop", job, self._stop(job, obs, job_sync.NO_MATCHING_WORKLOAD))
        elif action and wl.key not in self.mirror.pending:
            work = self._delete_workload(job, obs) if action == DELETE else self._update_workload(job, obs)
            await self._once(job.key, f"{action}@{obs.metadata.resource_version}", job, work)
        return bool(action)

    async def _admission_gate(self, job: J, obs: o.Workload) -> bool:
        """Under ``AdmissionGatedBy``: the Workload's ``kueue.x-k8s.io/admission-gated-by`` set to the job's when
        that only removes gates (a Workload never gains one: Kueue's Workload webhook refuses it); whether it was
        written."""
        change = admission_gate_change(self.state, job.metadata.annotations, obs)
        if change is None:
            return False
        await self._once(job.key, f"admission-gate@{obs.metadata.resource_version}", job,
                         self._sync_admission_gate(job, obs, change[0]))
        return True

    async def _pods_ready_annotation(self, job: J, obs: o.Workload) -> bool:
        """Under ``WorkloadLevelWaitForPodsReady``, for a suspended job: the Workload's
        ``kueue.x-k8s.io/wait-for-pods-ready`` set to the job's when they differ (None: removed), in place, with
        ``UpdatedWorkload``; whether it was written."""
        wanted = copied_metadata.pods_ready_annotation(self.state, job.metadata.annotations)
        if not self.state.gate(gates.WORKLOAD_LEVEL_WAIT_FOR_PODS_READY) or (
                obs.metadata.annotations.get(WAIT_FOR_PODS_READY_ANNOTATION) == wanted):
            return False
        await self._once(job.key, f"pods-ready-annotation@{obs.metadata.resource_version}", job,
                         self._sync_pods_ready_annotation(job, obs, wanted))
        return True

    async def _sync_pods_ready_annotation(self, job: J, obs: o.Workload, value: str | None) -> None:
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, {"metadata": {
                "resourceVersion": obs.metadata.resource_version,
                "annotations": {WAIT_FOR_PODS_READY_ANNOTATION: value}}}, obs.metadata.namespace)
        except NotFound:
            return
        await self._report(job, UPDATED_WORKLOAD, workload=obs.key,
                           message=f"Updated workload WaitForPodsReady annotation to {value or ''}")

    async def _with_prebuilt(self, job: J, name: str) -> None:
        """A job naming prebuilt Workload ``name`` (module docstring): the step with it once it is usable, else
        the job waits without one (suspended; none is created)."""
        wl_key = f"{job.metadata.namespace}/{name}"
        wl, obs = self.state.workloads.get(wl_key), self.mirror.workloads.get(wl_key)
        if wl is not None and obs is not None:
            usable = await self._prebuilt_usable(job, wl, obs)
            if usable is None:
                return  # adopted just now: the rest waits for the Workload that shows it
            if usable:
                await self._with_workload(job, obs, wl, generated=False)
                return
        await self._without_workload(job, name, why=prebuilt.MISSING, create=False)

    async def _prebuilt_usable(self, job: J, wl: WorkloadInfo, obs: o.Workload) -> bool | None:
        """Whether the job runs on its prebuilt Workload (:mod:`connectors.k8s.prebuilt`): True once it controls
        it and the two are equivalent; False when another object controls it, or it is out of sync (then
        finished ``OutOfSync``) — the job then waits as for a missing one; None once an uncontrolled one was
        just adopted."""
        controller = prebuilt.controller_uid(obs)
        if controller is None:
            await self._once(job.key, "adopt", job, self._adopt(job, obs))
            return None
        if controller != job.metadata.uid:
            return False
        if self._scaled_up_slice(job, obs):
            # Kueue: a newly scaled-up replacement is not compared (its job may not be synced yet)
            return True
        mine = self.job_pod_sets(job, generated=False)
        if mine is None or job_sync.equivalent_sets(self.state, mine, obs, wl, self.max_exec(job),
                                                    suspended=bool(job.spec.suspend)):
            return True
        if wl.phase != FINISHED and await self._append_once(wl, ev.WorkloadFinished(
                time=_now(), key=wl.key, uid=wl.uid, reason=prebuilt.OUT_OF_SYNC, message=prebuilt.OUT_OF_SYNC_MESSAGE)):
            self.stats.out_of_sync.append(wl.key)
            self.log.warning(f"prebuilt workload out of sync with its {self.NOUN}: finished", workload=wl.key,
                             **{self.NOUN: job.key})
        return False

    def _scaled_up_slice(self, job: J, obs: o.Workload) -> bool:
        """Whether the prebuilt Workload ``obs`` is a scaled-up slice of the elastic ``job`` (it names the
        slice it replaces): Kueue's ``ensureOneWorkload`` runs such a job on it without the in-sync check, so
        that a MultiKueue worker's copy not yet given its new size is neither stopped nor its slice
        finished."""
        return (workload_slices.elastic(self.state, job.metadata.annotations)
                and workload_slices.REPLACEMENT_FOR in obs.metadata.annotations)

    async def _release(self, job: J, wl: WorkloadInfo, obs: o.Workload) -> None:
        """The finalizer of the job's Workload once it is finished, or being deleted — then the running job is
        stopped and its templates restored first (:func:`connectors.k8s.workload_finalizer.release`; a job that
        finished is not stopped)."""
        running = self.is_running(job) and self.finished(job) is None
        action = wf.release(obs, wl, job_running=running)
        if action == wf.STOP:
            await self._once(job.key, "stop", job, self._stop(job, obs, wf.WORKLOAD_DELETED))
        elif action == wf.REMOVE:
            await self._unfinalize(obs)

    async def _orphaned(self, obs: o.Workload, wl: WorkloadInfo | None, *, gone: bool) -> None:
        """The Workload of a job that is gone (``gone``), or of one being deleted. Only once the job no longer
        exists is it an orphan (Kueue's #12849): finished ``OwnerNotFound``, its finalizer taken off once the
        apiserver shows that (:meth:`_let_go`) and deleted, as the garbage collector would through its
        ownerReference. While the job is being deleted its Workload waits, unless it is being deleted
        too (a foreground deletion waits for it): then it just loses the finalizer."""
        if not gone:
            if wf.deleting(obs):
                await self._unfinalize(obs)
            return
        rv = await self._let_go(obs, wl)
        if rv is None or wf.deleting(obs):
            return
        try:
            await self.client.delete(WORKLOADS, obs.metadata.name, obs.metadata.namespace, uid=obs.metadata.uid)
        except (NotFound, Conflict):
            return
        self.stats.orphans += 1
        self.log.info(f"deleted the workload of a deleted {self.NOUN}", workload=obs.key)

    async def _let_go(self, obs: o.Workload, wl: WorkloadInfo | None) -> str | None:
        """A Workload whose owner is gone or going: finished ``OwnerNotFound`` (under ``FinishOrphanedWorkloads``),
        then its finalizer taken off on the version the apiserver shows finished
        (:func:`connectors.k8s.workload_finalizer.let_go`). Its resourceVersion after that (None: gone, or not
        shown finished yet — the watch brings that version, which marks the job, or the ownerless Workload)."""
        return await wf.let_go(obs, wl, finish_orphaned=self.state.gate(gates.FINISH_ORPHANED_WORKLOADS),
                               append=self._append_once, unfinalize=self._unfinalize)

    # --- actions -------------------------------------------------------------------------------------------

    async def _create_workload(self, job: J, name: str) -> None:
        raw = await self._read_to_create(job)
        if raw is None:
            return
        key, rv = job.key, job.metadata.resource_version
        try:
            body = self.workload_for(raw, name)
        except WorkloadPriorityClassNotFound as exc:
            # the job changed since the log saw it, or the class went meanwhile: reported on what the log holds
            if raw["metadata"]["resourceVersion"] == rv:
                self._acted[key] = (CLASS_MISSING, rv)
                await self._class_missing(job, exc.name)
            return
        except PriorityClassNotFound as exc:
            if raw["metadata"]["resourceVersion"] == rv:
                self._acted[key] = (POD_CLASS_MISSING, rv)
            await self._pod_class_missing(job, exc.name)
            return
        except InvalidInput as exc:
            # Kueue's job webhook refuses such a job at creation; created without the webhook, it gets no
            # Workload (and so never runs) until its labels are fixed
            self.stats.invalid.append(key)
            self.log.error(f"{self.NOUN} refused: no workload created", error=str(exc), **{self.NOUN: key})
            return
        try:
            created = await self.client.create(WORKLOADS, body, job.metadata.namespace)
        except AlreadyExists:
            return
        self.stats.created += 1
        self.log.info("created workload", workload=name, **{self.NOUN: key})
        await self._log.report(job.key, job.metadata.uid, CREATED_WORKLOAD,
                               workload=f"{job.metadata.namespace}/{name}",
                               creation_latency_ms=creation_latency_ms(job.metadata, created))

    async def _class_missing(self, job: J, wpc_name: str) -> None:
        """Kueue creates no Workload for a job whose WorkloadPriorityClass is missing, and warns on the job."""
        self.stats.class_missing += 1
        self.log.warning("WorkloadPriorityClass not found: no workload created", priority_class=wpc_name,
                         **{self.NOUN: job.key})
        await self._report(job, NOT_FOUND_REASON, message=not_found_message(wpc_name))

    async def _pod_class_missing(self, job: J, pc_name: str) -> None:
        """Kueue creates no Workload for a job whose pods' PriorityClass is missing; it records no Event (its
        reconcile fails on the lookup and is retried), so neither does kueue-es."""
        self.stats.pod_class_missing += 1
        self.log.warning("PriorityClass not found: no workload created", priority_class=pc_name,
                         **{self.NOUN: job.key})

    async def _suspend_only(self, job: J, name: str, why: str) -> None:
        await self.client.patch(self.RESOURCE, job.metadata.name, {
            "metadata": {"resourceVersion": job.metadata.resource_version}, "spec": self.suspend_spec()},
            job.metadata.namespace)
        self.log.info(f"suspended a {self.NOUN} that has no workload yet", **{self.NOUN: job.key})
        await self._report(job, STOPPED, workload=f"{job.metadata.namespace}/{name}", message=why)

    def _evicted_meanwhile(self, job: J, wl: WorkloadInfo, admission: o.Admission) -> bool:
        """Whether the fold evicted ``wl`` (or changed its admission) since its start began with ``admission``,
        while the job was read: the start is then not made and forgotten, so that the same version of the job is
        started once admitted again (the eviction's record marks the job for the pass that decides anew)."""
        if wl.admission is admission and is_admitted(wl):
            return False
        self._acted.pop(job.key, None)
        return True

    async def _started(self, job: J, wl: WorkloadInfo, cluster_queue: str, **what: Any) -> None:
        """Count, log and report a job just started on ``wl``, admitted by ``cluster_queue`` when the start was
        made (the fold may have evicted ``wl`` while the job was written)."""
        self.stats.started += 1
        self.log.info(f"started {self.NOUN}", workload=wl.key, cluster_queue=cluster_queue,
                      **what, **{self.NOUN: job.key})
        await self._report(job, STARTED, workload=wl.key, cluster_queue=cluster_queue)

    async def _failed_to_start(self, job: J, wl: WorkloadInfo, error: Exception) -> None:
        """The admission cannot be merged into the job's templates: its Workload is finished ``FailedToStart``
        with Kueue's error text as it is (:func:`failed_to_start_message`)."""
        self.stats.failed_to_start.append(job.key)
        await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason=FAILED_TO_START,
                                                        message=failed_to_start_message(error)))

    async def _set_priority(self, job: J, obs: o.Workload, ref: dict[str, str] | None,
                            priority: int | None) -> None:
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.priority_patch(obs, ref, priority),
                                obs.metadata.namespace)
        self.stats.reprioritised += 1
        self.log.info(f"gave the workload its {self.NOUN}'s priority class", workload=obs.key,
                      priority_class=ref["name"] if ref else None, priority=priority, **{self.NOUN: job.key})
        await self._report(job, UPDATED_WORKLOAD, workload=obs.key,
                           message=job_sync.priority_updated_message(obs.key))

    async def _priority_missing(self, job: J, obs: o.Workload,
                                exc: WorkloadPriorityClassNotFound | PriorityClassNotFound) -> None:
        """Kueue cannot resolve the priority class the job names now: its reconcile fails and is retried; here the
        job waits until the class is in the log (which marks it dirty). A missing WorkloadPriorityClass is reported
        on the job as at the Workload's creation (Kueue's ``ExtractPriority`` reports it on every path to the
        lookup, #13775); a missing PriorityClass is not (Kueue records no Event for it)."""
        self.log.warning(f"the {self.NOUN}'s priority class is not there: its workload keeps its priority",
                         workload=obs.key, error=str(exc), **{self.NOUN: job.key})
        if isinstance(exc, WorkloadPriorityClassNotFound):
            await self._report(job, NOT_FOUND_REASON, message=not_found_message(exc.name))

    async def _set_queue(self, job: J, obs: o.Workload, queue: str) -> None:
        """Give the Workload of a suspended job the queue its label names now (Kueue records no Event)."""
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.queue_patch(obs, queue), obs.metadata.namespace)
        self.stats.requeued += 1
        self.log.info(f"moved the workload to its {self.NOUN}'s queue", workload=obs.key, queue=queue,
                      previous=obs.spec.queue_name, **{self.NOUN: job.key})

    async def _adopt(self, job: J, obs: o.Workload) -> None:
        """Make the job the controller owner of its prebuilt Workload, conditioned on the Workload's
        resourceVersion (a Workload gone meanwhile: its deletion comes with the watch)."""
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name,
                                    prebuilt.adoption_patch(job, obs, self.controller_ref(job)), obs.metadata.namespace)
        except NotFound:
            return
        self.stats.adopted += 1
        self.log.info("adopted a prebuilt workload", workload=obs.key, **{self.NOUN: job.key})

    async def _sync_admission_gate(self, job: J, obs: o.Workload, gate: str | None) -> None:
        """Give the Workload the job's admission gate (None: remove it), conditioned on the Workload's
        resourceVersion; ``UpdatedWorkload`` on the job, as Kueue's reconciler records it."""
        await self.client.patch(WORKLOADS, obs.metadata.name, admission_gate_patch(obs, gate), obs.metadata.namespace)
        self.log.info(f"synced the workload's admission gate with its {self.NOUN}'s", workload=obs.key, gate=gate,
                      **{self.NOUN: job.key})
        await self._report(job, UPDATED_WORKLOAD, workload=obs.key,
                           message=job_sync.admission_gate_updated_message(gate))

    async def _update_workload(self, job: J, obs: o.Workload) -> None:
        """Rewrite the Workload's spec from the suspended job it no longer matches (built as at creation, from the
        job as stored), conditioned on the Workload's resourceVersion; ``UpdatedWorkload``."""
        raw = await self._read_current(job)
        if raw is None:
            return  # changed since the log saw it: the watch brings the newer one
        try:
            spec = self.workload_for(raw, obs.metadata.name)["spec"]
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            self.log.warning(f"the {self.NOUN}'s priority class is not there: its workload is not updated",
                             workload=obs.key, error=str(exc), **{self.NOUN: job.key})
            return
        except InvalidInput as exc:
            self.stats.invalid.append(job.key)
            self.log.error(f"{self.NOUN} refused: its workload is not updated", workload=obs.key, error=str(exc),
                           **{self.NOUN: job.key})
            return
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.spec_patch(obs, spec),
                                    obs.metadata.namespace)
        except NotFound:
            return
        self.stats.updated += 1
        self.log.info(f"updated the workload to match its {self.NOUN}", workload=obs.key, **{self.NOUN: job.key})
        await self._report(job, UPDATED_WORKLOAD, workload=obs.key, message=job_sync.updated_message(obs.key))

    async def _delete_workload(self, job: J, obs: o.Workload) -> None:
        """Delete the Workload the job no longer matches, its finalizer first, conditioned on its uid and
        resourceVersion; ``DeletedWorkload``. The job is then given a new one as any job without a Workload is."""
        if not await self._unfinalize_and_delete(obs):
            return
        self.stats.deleted += 1
        self.log.info(f"deleted the workload its {self.NOUN} no longer matches", workload=obs.key,
                      **{self.NOUN: job.key})
        await self._report(job, DELETED_WORKLOAD, workload=obs.key, message=job_sync.deleted_message(obs.key))

    async def _delete_extras(self, job: J, extras: list[o.Workload]) -> None:
        """Delete the Workloads of the job beyond the one it keeps (:func:`connectors.k8s.job_sync.one_workload_of`),
        each finalizer first, conditioned on its uid and resourceVersion; ``DeletedWorkload`` for each one deleted
        (one already being deleted only loses its finalizer)."""
        for obs in extras:
            if not await self._unfinalize_and_delete(obs):
                continue
            self.stats.extras_deleted += 1
            self.log.info(f"deleted a workload the {self.NOUN} does not keep", workload=obs.key, **{self.NOUN: job.key})
            await self._report(job, DELETED_WORKLOAD, workload=obs.key, message=job_sync.deleted_message(obs.key))

    async def _unfinalize_and_delete(self, obs: o.Workload) -> bool:
        """Take the finalizer off ``obs``, then delete it: whether this deleted it
        (:func:`connectors.k8s.workload_finalizer.delete_unfinalized`)."""
        return await wf.delete_unfinalized(self.client, obs, await self._unfinalize(obs))

    async def _unfinalize(self, obs: o.Workload) -> str | None:
        """Take the finalizer off ``obs`` (:func:`connectors.k8s.workload_finalizer.unfinalize`): the Workload's
        resourceVersion after it (None: the Workload is gone)."""
        rv = await wf.unfinalize(self.client, obs)
        if wf.holds(obs) and rv is not None:
            self.stats.finalizers_removed += 1
            self.log.info("took the finalizer off the workload", workload=obs.key, deleting=wf.deleting(obs))
        return rv


def _now() -> int:
    return int(time.time() * 1000)

