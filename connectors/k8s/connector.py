"""The Kubernetes connector assembled: watcher → log → writer and Job integration; and, when this process owns
the log, the scheduler loop beside it.

:class:`Connector` runs, as one task group, the appender and the watcher, and — once every watched kind has
been listed (``ready``) — the Workload status writer, the Job, Pod, JobSet, MPIJob, Kubeflow training-job, RayJob,
RayCluster, LeaderWorkerSet, AppWrapper, TrainJob, RayService and SparkApplication integrations, the queue status writer, the
resource-in-use finalizers, the retention deletions, the ProvisioningRequest applier, the topology ungater, the
terminating-pod controller (FailureRecoveryPolicy), the TAS node controller's failing of pods pinned to a node they
cannot run on, the provisioning and MultiKueue checks' Active condition, the
MultiKueue worker clusters and the recorder of Kueue's Kubernetes Events, so
nothing is written to the cluster before the log has caught up with it.
:func:`schedule` is the scheduler for a :class:`LocalJournal`: decide on the mirror's state, append the batch
(which applies it), repeat until quiet, then wait for the log to move or a controller deadline to pass (it then
appends a clock tick). Like Kueue, which starts its scheduler only once its informers' caches are synced, it
decides nothing before the connector has listed every kind (``ready``): a Workload listed before its
WorkloadPriorityClass would otherwise be ordered with priority 0, and admitted ahead of one that outranks it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

import structlog

from connectors.k8s.appwrapper_integration import AppWrapperIntegration
from connectors.k8s.checkstatus import CheckStatusWriter
from connectors.k8s.client import KubeClient
from connectors.k8s.failure_recovery import FailureRecovery
from connectors.k8s.finalizers import Finalizers
from connectors.k8s.forceful_termination import GRACE_MS as FORCEFUL_TERMINATION_GRACE_MS
from connectors.k8s.jobs import JobIntegration
from connectors.k8s.jobset_integration import JobSetIntegration
from connectors.k8s.journal import Journal, LocalJournal
from connectors.k8s.kubeflow_integration import INTEGRATIONS as KUBEFLOW_INTEGRATIONS
from connectors.k8s.lws_integration import LeaderWorkerSetIntegration
from connectors.k8s.manager_quota import ManagerQuotaConnector
from connectors.k8s.mpijob_integration import MPIJobIntegration
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.pinned_pods import PinnedPods
from connectors.k8s.pods_integration import PodIntegration
from connectors.k8s.provreqs import RequestApplier
from connectors.k8s.queues import QueueStatusWriter
from connectors.k8s.ray_integration import RayClusterIntegration, RayJobIntegration, RayServiceIntegration
from connectors.k8s.recorder import EventRecorder
from connectors.k8s.resources import WATCHED
from connectors.k8s.retention import RetentionEnforcer
from connectors.k8s.spark_integration import SparkApplicationIntegration
from connectors.k8s.trainjob_integration import TrainJobIntegration
from connectors.k8s.ungater import Ungater
from connectors.k8s.variants import VariantWriter
from connectors.k8s.watch import Appender, Watcher
from connectors.k8s.workload_priority import WorkloadPriorities
from connectors.k8s.writer import StatusWriter
from events import schema as ev
from kueue_es import metrics
from kueue_es.scheduler import DEFAULT, SchedulerConfig, decide, next_deadline
from projections.cluster import ClusterState

log = structlog.get_logger("kueue_es.k8s")

RecordConfig = Callable[[ClusterState], list[ev.AnyEvent]]


class Connector:
    def __init__(self, client: KubeClient, journal: Journal, *, kinds: Sequence[str] = WATCHED,
                 watch_timeout_s: int = 300, jobs: bool = True, queue_status: bool = True,
                 finalizers: bool = True, events: bool = True, instance: str = "",
                 forceful_termination_grace_ms: int = FORCEFUL_TERMINATION_GRACE_MS) -> None:
        self.client = client
        self.journal = journal
        self.appender = Appender(journal.append)
        self.watcher = Watcher(client, journal.mirror, self.appender.emit, kinds=kinds,
                               timeout_seconds=watch_timeout_s, emit_event=self.appender.emit_nowait)
        self.writer = StatusWriter(client, journal, append=self.appender.emit)
        self.jobs = JobIntegration(client, journal, append=self.appender.emit) if jobs else None
        self.pods = (PodIntegration(client, journal, append=self.appender.emit, watch_timeout_s=watch_timeout_s)
                     if jobs else None)
        self.jobsets = (JobSetIntegration(client, journal, append=self.appender.emit, watch_timeout_s=watch_timeout_s)
                        if jobs else None)
        self.mpijobs = (MPIJobIntegration(client, journal, append=self.appender.emit, watch_timeout_s=watch_timeout_s)
                        if jobs else None)
        self.leaderworkersets = (LeaderWorkerSetIntegration(client, journal, append=self.appender.emit,
                                                            watch_timeout_s=watch_timeout_s) if jobs else None)
        self.kubeflow = ([cls(client, journal, append=self.appender.emit, watch_timeout_s=watch_timeout_s)
                          for cls in KUBEFLOW_INTEGRATIONS.values()] if jobs else [])
        """One integration per Kubeflow training-operator kind (PyTorchJob, TFJob, ...)."""
        self.rayjobs = (RayJobIntegration(client, journal, append=self.appender.emit, watch_timeout_s=watch_timeout_s)
                        if jobs else None)
        self.rayclusters = (RayClusterIntegration(client, journal, append=self.appender.emit,
                                                  watch_timeout_s=watch_timeout_s) if jobs else None)
        self.appwrappers = (AppWrapperIntegration(client, journal, append=self.appender.emit,
                                                  watch_timeout_s=watch_timeout_s) if jobs else None)
        self.trainjobs = (TrainJobIntegration(client, journal, append=self.appender.emit,
                                              watch_timeout_s=watch_timeout_s) if jobs else None)
        self.rayservices = (RayServiceIntegration(client, journal, append=self.appender.emit,
                                                  watch_timeout_s=watch_timeout_s) if jobs else None)
        self.sparkapplications = (SparkApplicationIntegration(client, journal, append=self.appender.emit,
                                                              watch_timeout_s=watch_timeout_s) if jobs else None)
        if self.jobs is not None:  # one parents registry (child_jobs.Parents) every job reconciler walks up
            parents = self.jobs.parents
            parents.hold("JobSet", self.jobsets.known)  # type: ignore[union-attr]
            parents.hold("MPIJob", self.mpijobs.known)  # type: ignore[union-attr]
            parents.hold("Pod", self.pods.pods, complete=False)  # type: ignore[union-attr]
            parents.hold("RayJob", self.rayjobs.known)  # type: ignore[union-attr]  # its submitter Job, RayCluster
            # the kinds the Job webhook's walk reads too (job_selection.owner_resource): one it follows and
            # this did not would leave a Job the webhook let run as a child to be queued on a Workload of its
            # own
            parents.hold("RayCluster", self.rayclusters.known)  # type: ignore[union-attr]
            parents.hold("LeaderWorkerSet", self.leaderworkersets.known)  # type: ignore[union-attr]
            parents.hold("AppWrapper", self.appwrappers.known)  # type: ignore[union-attr]  # what it wraps
            parents.hold("TrainJob", self.trainjobs.known)  # type: ignore[union-attr]  # its JobSet
            parents.hold("RayService", self.rayservices.known)  # type: ignore[union-attr]  # its RayClusters
            parents.hold("SparkApplication", self.sparkapplications.known)  # type: ignore[union-attr]  # its driver
            for training in self.kubeflow:  # a training job is a parent Kueue runs too (job_selection)
                parents.hold(training.KIND, training.known)
            for watched in (self.jobsets, self.mpijobs, *self.kubeflow, self.rayjobs, self.rayclusters,
                            self.appwrappers, self.trainjobs, self.rayservices, self.sparkapplications):
                watched.parents = parents  # type: ignore[union-attr]
        self.queues = QueueStatusWriter(client, journal) if queue_status else None
        self.finalizers = Finalizers(client, journal) if finalizers else None
        self.retention = RetentionEnforcer(client, journal, append=self.appender.emit)
        self.priorities = WorkloadPriorities(client, journal)
        self.variants = VariantWriter(client, journal, append=self.appender.emit)
        self.requests = RequestApplier(client, journal, append=self.appender.emit)
        self.ungater = Ungater(client, journal)
        self.failure_recovery = FailureRecovery(client, journal, grace_ms=forceful_termination_grace_ms)
        self.pinned_pods = PinnedPods(client, journal, events=events, instance=instance)
        self.checks = CheckStatusWriter(client, journal)
        self.multikueue = MultiKueueConnector(client, journal, append=self.appender.emit,
                                              watch_timeout_s=watch_timeout_s)
        self.manager_quota = ManagerQuotaConnector(self.multikueue)
        self.recorder = EventRecorder(client, journal, instance=instance) if events else None

    @property
    def ready(self) -> bool:
        return self.watcher.is_synced

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.appender.run(), name="k8s-appender")
            tg.create_task(self.watcher.run(), name="k8s-watcher")
            await self.watcher.wait_synced()
            log.info("synced", offset=self.journal.mirror.offset, stats=self.watcher.stats.listed)
            tg.create_task(self.writer.run(), name="k8s-writer")
            if self.jobs is not None:
                tg.create_task(self.jobs.run(), name="k8s-jobs")
            if self.pods is not None:
                tg.create_task(self.pods.run(), name="k8s-pods")
            if self.jobsets is not None:
                tg.create_task(self.jobsets.run(), name="k8s-jobsets")
            if self.mpijobs is not None:
                tg.create_task(self.mpijobs.run(), name="k8s-mpijobs")
            if self.leaderworkersets is not None:
                tg.create_task(self.leaderworkersets.run(), name="k8s-leaderworkersets")
            for integ in self.kubeflow:
                tg.create_task(integ.run(), name=f"k8s-{integ.NOUN}s")
            if self.rayjobs is not None:
                tg.create_task(self.rayjobs.run(), name="k8s-rayjobs")
            if self.rayclusters is not None:
                tg.create_task(self.rayclusters.run(), name="k8s-rayclusters")
            if self.appwrappers is not None:
                tg.create_task(self.appwrappers.run(), name="k8s-appwrappers")
            if self.trainjobs is not None:
                tg.create_task(self.trainjobs.run(), name="k8s-trainjobs")
            if self.rayservices is not None:
                tg.create_task(self.rayservices.run(), name="k8s-rayservices")
            if self.sparkapplications is not None:
                tg.create_task(self.sparkapplications.run(), name="k8s-sparkapplications")
            if self.queues is not None:
                tg.create_task(self.queues.run(), name="k8s-queue-status")
            if self.finalizers is not None:
                tg.create_task(self.finalizers.run(), name="k8s-finalizers")
            tg.create_task(self.retention.run(), name="k8s-retention")
            tg.create_task(self.priorities.run(), name="k8s-workload-priorities")
            tg.create_task(self.variants.run(), name="k8s-variants")
            tg.create_task(self.requests.run(), name="k8s-provisioning-requests")
            tg.create_task(self.ungater.run(), name="k8s-ungater")
            tg.create_task(self.failure_recovery.run(), name="k8s-failure-recovery")
            tg.create_task(self.pinned_pods.run(), name="k8s-pinned-pods")
            tg.create_task(self.checks.run(), name="k8s-admission-check-status")
            tg.create_task(self.multikueue.run(), name="k8s-multikueue")
            tg.create_task(self.manager_quota.run(), name="k8s-multikueue-quota")
            if self.recorder is not None:
                tg.create_task(self.recorder.run(), name="k8s-events")


async def schedule(journal: LocalJournal, config: SchedulerConfig = DEFAULT, *, ticks: bool = True,
                   idle_s: float = 1.0, record_config: RecordConfig | None = None,
                   ready: Callable[[], Awaitable[None]] | None = None) -> None:
    """The scheduler over a log this process owns (see the module docstring); runs until cancelled.
    ``record_config`` gives what to append before deciding: the record of the Kueue Configuration when it is not
    the one in force (``ServiceOptions.config_to_record``). ``ready`` is awaited before the first decision
    (``Connector.watcher.wait_synced``); None decides at once, on whatever the log holds."""
    if ready is not None:
        await ready()
    state = journal.mirror.state
    signal = journal.subscribe()
    while True:
        started = time.perf_counter()
        batch: list[ev.AnyEvent] = (record_config(state) if record_config is not None else []) or list(
            decide(state, config))
        took = time.perf_counter() - started
        if not batch and ticks:
            deadline = next_deadline(state, config)
            now = int(time.time() * 1000)
            if deadline is not None and deadline <= now and state.time < now:
                batch = [ev.ClockTicked(time=now, id=f"tick-{now}")]
        if batch:
            await journal.append(batch)
            metrics.ATTEMPTS.observe(batch, took)
            continue
        await signal.wait(idle_s)
