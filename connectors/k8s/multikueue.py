"""MultiKueue on a manager: the worker clusters' side of Kueue's MultiKueue controllers (its adapters' kinds:
batch/v1 Jobs, plain Pods and pod groups, JobSets, the Kubeflow training jobs, MPIJobs, RayJobs, RayClusters, RayServices, AppWrappers,
TrainJobs, LeaderWorkerSets, StatefulSets).

Everything decided is decided by the pure side from the log (:mod:`kueue_es.scheduler.multikueue`: nominations,
the worker that runs a workload, Retry, the local finish); this module only observes and applies:

* **clients.** One client per MultiKueueCluster, built from its kubeconfig: the key ``kubeconfig`` of the Secret
  ``spec.clusterSource.kubeConfig.location`` in Kueue's namespace (the Configuration's ``namespace``), read once
  and then watched (a worker's client is rebuilt when its Secret or MultiKueueCluster changes; a Secret that cannot
  be read is that worker's ``BadKubeConfig`` only), or a file for ``locationType: Path`` (under
  ``/etc/multikueue/kubeconfigs`` while MultiKueueKubeConfigPathValidation is on; read again only once the file
  changed: :func:`file_version`), or, under MultiKueueClusterProfile, a ClusterProfile and the Configuration's
  credential plugin (:mod:`connectors.k8s.clusterprofile`; the gate off, ``MultiKueueClusterProfileFeatureDisabled``,
  as Kueue). Each worker's Workloads and Jobs
  carrying ``kueue.x-k8s.io/multikueue-origin=<origin>`` are listed and watched (anew on the new label when the
  Configuration's origin changes: :meth:`MultiKueueConnector._rewatch`); whether that works is appended
  as ``MultiKueueClusterObserved`` (connected, or ``BadKubeConfig`` / ``ClientConnectionFailed`` with the error)
  whenever it changes (a cut watch is only a reconnect, the worker skipped until listed again: reported lost only
  if that relist fails, as Kueue), and the MultiKueueCluster's ``Active`` condition is written from the log
  (:func:`projections.admissionchecks.cluster_active`), as are the MultiKueue checks' (``checkstatus``).
* **observations.** The conditions MultiKueue reads of each copy (QuotaReserved, Admitted, Evicted, Finished) and
  which of its pod sets the worker placed by topology, or its absence, are appended as ``RemoteWorkloadObserved`` for the manager's Workload of the same namespace and
  name whenever they differ from what the log holds.
* **copies.** For every manager Workload with a MultiKueue check: while it holds quota, is not evicted and not
  finished, a copy (labels, annotations and spec of the manager's Workload, the origin label added) exists on each
  nominated worker — none made and none deleted while another of its admission checks is not Ready (Kueue
  #9866: :func:`kueue_es.scheduler.multikueue.copies_on`, the rule followed here) — or on its worker once
  ``status.clusterName`` is set (the copy admitted there, never made
  again: its absence is Kueue's Retry) — and there, a copy of its Job (the
  manager Job's metadata and spec, the origin label and ``kueue.x-k8s.io/prebuilt-workload-name`` added,
  ``managedBy``, the selector and the generated labels dropped, suspended: the worker's Kueue runs it on the
  copied Workload). Every other copy this origin made is deleted (its Job first, then the Workload, its
  finalizers removed; a Job copy too whose Workload copy is gone already), which also collects the copies of
  Workloads gone from the manager, and so is a copy on a nominated worker left finished by a sync failure
  (``OutOfSync``, ``OwnerNotFound``: :func:`connectors.k8s.multikueue_copies.stale`), made anew once gone. A JobSet
  (:data:`ADAPTERS`, by owner kind) is copied as Kueue's JobSet adapter does (:func:`jobset_copy`), a Kubeflow
  training job or MPIJob as Kueue's Kubeflow and MPIJob adapters do (:func:`run_policy_copy`), a RayJob,
  RayCluster, AppWrapper or TrainJob as Kueue's adapters of those kinds do (:func:`suspended_copy`), a RayService
  as Kueue's (:func:`rayservice_copy`), each made of the owner as it was before the manager's integration
  started it (:func:`as_before_start`), and their
  managedBy (``spec.managedBy``, ``spec.runPolicy.managedBy``) read from the manager's apiserver and appended
  (``OwnerObserved``), as the log holds none of them. A LeaderWorkerSet is copied once for all its groups'
  Workloads (:func:`lws_copy`), its ``spec.replicas`` read and appended instead, and deleted with any of its
  groups' copies; a group's Workload is copied nowhere while it waits for its group
  (:func:`kueue_es.scheduler.multikueue.group_target`). A Pod, which has no managedBy (nothing read), is copied
  by :func:`pod_copy`, each Pod of a pod group alike (:meth:`MultiKueueConnector._owner_names`), its status
  mirrored by :func:`pod_status`.
* **status.** Once the manager's Job has been started (its Workload admitted), or its copy is suspended too or
  finished, its status follows the copy's on the worker, written to the status subresource (Kueue's batch/v1
  MultiKueue adapter); any other owner's whenever its copy's changes (Kueue's JobSet, Kubeflow, MPIJob, RayJob,
  RayCluster, RayService, AppWrapper and TrainJob adapters), but a LeaderWorkerSet's (Kueue's LWS adapter copies
  none).
* **custom kinds.** Under MultiKueueAdaptersForCustomJobs, each kind of ``multiKueue.externalFrameworks`` gets
  Kueue's generic adapter once the manager's API discovery shows its resource (:func:`discover`,
  :meth:`MultiKueueConnector._discover`): its managedBy read, the object copied whole (:func:`custom_copy`), its
  status mirrored, its copies watched and collected on the workers.
* **spec sync.** Under MultiKueueRemoteSpecSync, a RayService's ``serveConfigV2`` edited on the manager is patched
  onto its copy on the workload's worker (:meth:`MultiKueueConnector._sync_spec`, the decision
  :func:`kueue_es.scheduler.multikueue.remote_spec_patch`); the manager's RayServices are watched for it
  (:attr:`MultiKueueConnector.synced_owners`), so that an edit moves its workload at once.

Level-triggered: every move of the log and every change a worker's watch brings wakes a pass. A pass looks only at
the workloads that moved since the last one (:class:`PassKeys`): those the log's records were about, and, per
worker, those whose copies its watches showed changed or whose writes there failed; everything on the first pass,
when an AdmissionCheck or the Configuration changes, and for a worker whose watches listed afresh.

This module keeps the connector's run loop and passes (which workloads a pass looks at, the workers kept, the
custom kinds found); the rest is in modules of its own, where the functions named above without a module are:
:mod:`connectors.k8s.multikueue_adapters` (the adapter table, the copies it makes, :func:`pod_status`,
:func:`discover`), :mod:`connectors.k8s.multikueue_worker` (a worker as the connector sees it, its holds, what is
read of a copy), :mod:`connectors.k8s.multikueue_kubeconfigs` (where a worker's kubeconfig comes from,
:func:`file_version`, :func:`client_from`), :mod:`connectors.k8s.multikueue_connection` (each worker's connect,
watch, backoff and timeout loop, :meth:`MultiKueueConnector._rewatch`), :mod:`connectors.k8s.multikueue_observe`
(what is appended of the workers, the MultiKueueClusters' Active condition) and
:mod:`connectors.k8s.multikueue_copies` (the copies made, mirrored, synced and deleted on the workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from connectors.k8s import kubeconfig_checks
from connectors.k8s.client import KubeClient
from connectors.k8s.clusterprofile import ClusterProfiles
from connectors.k8s.discovery import discover
from connectors.k8s.errors import KubeError
from connectors.k8s.follow_one import stopped as _stopped
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer, ListedWhile
from connectors.k8s.multikueue_adapters import (
    ADAPTERS,
    Adapter,
    SyncedOwner,
    custom_copy,
    synced_owner,
)
from connectors.k8s.multikueue_connection import WorkerConnections
from connectors.k8s.multikueue_copies import CopiedWorkloads
from connectors.k8s.multikueue_kubeconfigs import (
    KUBECONFIG_DIR,
    SETTLED_NS,
    FileVersion,
    KubeconfigSecret,
    KubeconfigSources,
)
from connectors.k8s.multikueue_observe import ObservedWorkers, OwnerRetry
from connectors.k8s.multikueue_worker import Worker
from connectors.k8s.resources import LEADER_WORKER_SETS, Resource
from events import schema as ev
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config_record import in_force
from kueue_es.scheduler.multikueue import REMOTE_SPEC_SYNC, adapters_in_force, external_kinds
from projections import gates

log = structlog.get_logger("kueue_es.k8s.multikueue")


@dataclass
class MultiKueueStats:
    observed: int = 0
    copies_created: int = 0
    copies_deleted: int = 0
    jobs_created: int = 0
    statuses_mirrored: int = 0
    specs_synced: int = 0
    errors: int = 0


@dataclass
class PassKeys:
    """The manager Workloads one pass looks at: by worker, and those whose owner's managedBy is to be read. Only
    what moved since the last pass (in the log or on that worker) is looked at, not every workload with every
    worker."""

    by_worker: dict[str, list[str]]
    owners: list[str]


ALL_MOVE = frozenset({"AdmissionCheck"})
"""Kinds whose change may move every workload for the connector (which check is a MultiKueue one)."""


class MultiKueueConnector(KubeconfigSources, WorkerConnections, ObservedWorkers, CopiedWorkloads):
    def __init__(self, client: KubeClient, journal: Journal, *, append: Any, retry_s: float = 1.0,
                 watch_timeout_s: int = 300, absent_retry_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        """Seconds, for the owner reads' backoff (:data:`OWNER_RETRY_BASE_S`)."""
        self.absent_retry_s = absent_retry_s
        """How often a kind a worker does not serve (the JobSet CRD not installed there) is looked for again."""
        self.journal = journal
        self.state = journal.mirror.state
        self.append = append
        self.retry_s = retry_s
        self.wait: Callable[[float], Awaitable[None]] = asyncio.sleep
        """How a worker whose connection failed waits out its backoff (:meth:`_failed_attempt`)."""
        self.establish_wait: Callable[[float], Awaitable[None]] = asyncio.sleep
        """How a connection's watches are given their time to open (:meth:`_establishing`)."""
        self.watch_timeout_s = watch_timeout_s
        self.stats = MultiKueueStats()
        self.kubeconfig_dir = KUBECONFIG_DIR
        """Where a ``locationType: Path`` kubeconfig must be while MultiKueueKubeConfigPathValidation is on."""
        self.settled_ns = SETTLED_NS
        """How long after it was last written a kubeconfig file is trusted unchanged while its version is (see
        :data:`SETTLED_NS`)."""
        self.workers: dict[str, Worker] = {}
        self._wake = asyncio.Event()
        self._written_active: dict[str, tuple[str, int, tuple[str, str, str]]] = {}
        """MultiKueueCluster -> the uid and generation of the object last written and its Active condition (status,
        reason, message): a cluster made again under that name is another object, and one edited another
        generation, written anew."""
        self._secrets: dict[str, KubeconfigSecret] = {}
        """MultiKueueCluster -> its kubeconfig Secret as last read and watched."""
        self.profiles = ClusterProfiles(client, self._wake, watch_timeout_s=watch_timeout_s, retry_s=retry_s)
        """The ClusterProfiles MultiKueueClusters name, under MultiKueueClusterProfile."""
        self._moved: set[str] = set()
        """Workload keys whose state in the log moved since the last pass (:meth:`_on_applied`)."""
        self._all_moved = True
        """The next pass looks at every workload (the first pass, or a change that may move them all)."""
        self._owners_unread: dict[str, OwnerRetry] = {}
        """Workloads whose owner could not be read yet -> when it is read again (:func:`owner_retry_after`)."""
        self._files: dict[str, tuple[FileVersion, tuple[bytes, str, str]]] = {}
        """MultiKueueCluster -> (its kubeconfig file's version, what was read there): a ``locationType: Path``
        kubeconfig is read again only once the file changed (Kueue watches the file)."""
        self.custom: dict[tuple[str, str], Adapter] = {}
        """Custom kind (``multiKueue.externalFrameworks``, under MultiKueueAdaptersForCustomJobs) -> its generic
        adapter, once its resource was found on the manager's apiserver (:meth:`_discover`)."""
        self._watched: tuple[str, ...] | None = None
        """The kinds the workers' watches follow (:meth:`_adapters`), as of the last pass: another set re-opens
        them."""
        self.synced_owners: dict[str, Informer[SyncedOwner]] = {
            ADAPTERS[kind].resource.kind: ListedWhile(
                partial(self._syncing_specs, kind), client, ADAPTERS[kind].resource, partial(synced_owner, fields),
                partial(self._owners_edited, ADAPTERS[kind].resource), what=f"manager {kind[1]}s", log=log,
                watch_timeout_s=watch_timeout_s, optional=True)
            for kind, fields in sorted(REMOTE_SPEC_SYNC.items())}
        """Owner kind -> the manager's owners of that kind whose spec edits are forwarded to their copies
        (:data:`REMOTE_SPEC_SYNC`), listed and watched while MultiKueueRemoteSpecSync is on and the kind's framework
        enabled (Kueue's MultiKueue controller watches them then), so that an edit reaches the copy at once."""
        listeners = getattr(journal.mirror, "listeners", None)
        if listeners is not None:
            listeners.append(self._on_applied)

    def _config(self) -> SchedulerConfig:
        return in_force(self.state) or DEFAULT

    def _syncing_specs(self, kind: tuple[str, str]) -> bool:
        """Whether the manager's owners of ``kind`` are listed for their spec edits: MultiKueue and
        MultiKueueRemoteSpecSync on, and the kind's framework enabled (Kueue registers its adapter, whose local
        watch this is, only then)."""
        config = self._config()
        return (config.gate(gates.MULTIKUEUE) and config.gate(gates.MULTIKUEUE_REMOTE_SPEC_SYNC)
                and kind in adapters_in_force(config))

    def _owners_edited(self, r: Resource, keys: set[str]) -> None:
        """The manager's owners ``keys`` of kind ``r`` changed in a forwarded field (or came, or went): their
        workloads are looked at on the next pass."""
        self._moved |= self._workloads_of(r, keys)
        self._wake.set()

    async def run(self) -> None:
        signal = self.journal.subscribe()
        waker = asyncio.create_task(self._forward(signal))
        informers = [asyncio.create_task(i.run(absent_retry_s=self.absent_retry_s), name=f"k8s-multikueue-{kind}")
                     for kind, i in self.synced_owners.items()]
        try:
            while True:
                try:
                    await self.sync()
                except KubeError as exc:
                    self.stats.errors += 1
                    self._all_moved = True  # what the failed pass took to look at is looked at again
                    log.warning("MultiKueue pass failed, will retry", error=str(exc))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.retry_s):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            waker.cancel()
            for task in informers:
                await _stopped(task)
            for w in self.workers.values():
                await self._stop(w)
            for name in sorted(self._secrets):
                await self._stop_secret(name)
            await self.profiles.close()

    async def _forward(self, signal: Any) -> None:
        while True:
            await signal.wait()
            self._wake.set()

    def _on_applied(self, records: list[ev.Record]) -> None:
        """Index what the records moved: the workloads they are about (a Job's, its Workload's); a configuration
        or an admission check, everything."""
        workload_of = getattr(self.journal.mirror, "workload_of", {})
        for r in records:
            e = r.event
            if isinstance(e, ev.ConfigRecorded):
                self._all_moved = True
                continue
            kind = (type(e.obj).__struct_config__.tag if isinstance(e, ev.ObjectUpserted)  # type: ignore[attr-defined]
                    else e.kind if isinstance(e, ev.ObjectDeleted) else "")
            if kind in ALL_MOVE:
                self._all_moved = True
            key = getattr(e, "key", "")
            if not key:
                continue
            if kind in ("", "Workload"):
                self._moved.add(key)
            elif kind == "Job" and key in workload_of:
                self._moved.add(workload_of[key])

    def _pass_keys(self) -> PassKeys:
        """What this pass looks at (see :class:`PassKeys`); what it takes is cleared for the next one. A worker not
        reached keeps nothing: it lists afresh, so looks at everything, once reached again."""
        every = self._all_moved
        moved, self._moved, self._all_moved = self._moved, set(), False
        workloads = self.state.workloads
        by_worker: dict[str, list[str]] = {}
        for name in sorted(self.workers):
            w = self.workers[name]
            if not w.connected or w.client is None:
                continue
            copied = self._copied(w)
            if every or w.relisted:
                keys = set(workloads) | copied
            else:
                keys = {k for k in moved | w.moved if k in workloads or k in copied}
            w.moved, w.relisted = set(), False
            by_worker[name] = sorted(keys)
        for key in [k for k in self._owners_unread if k not in workloads]:
            del self._owners_unread[key]  # a workload gone is read no more
        now = self.clock()
        due = {k for k, retry in self._owners_unread.items() if retry.due <= now}
        owners = set(workloads) if every else moved & workloads.keys() | due
        return PassKeys(by_worker, sorted(owners))

    # --- one pass ------------------------------------------------------------------------------------------------

    async def sync(self) -> None:
        config = self._config()
        if not config.gate(gates.MULTIKUEUE):
            return
        await self._discover(config)
        await self._sync_workers(config)
        keys = self._pass_keys()
        await self._observe(keys)
        await self._write_cluster_status()
        await self.sync_copies(config.multi_kueue.origin, keys)

    async def _discover(self, config: SchedulerConfig) -> None:
        """The custom kinds in force get their generic adapter once the manager's apiserver serves them (looked for
        on every pass until then); a kind no longer configured loses it. When the set of adapters in force changes
        (those, or the built-in ones of the frameworks enabled), every workload is looked at again and the workers'
        watches follow the new set of kinds."""
        wanted = external_kinds(config)
        found = {kind: a for kind, a in self.custom.items() if kind in wanted}
        for kind in wanted:
            if kind in found:
                continue
            try:
                r = await discover(self.client, kind)
            except KubeError as exc:
                self.stats.errors += 1
                log.warning("MultiKueue custom kind not looked up, will retry", kind=kind, error=str(exc))
                continue
            if r is not None:
                found[kind] = Adapter(r, custom_copy, in_log=False)
                log.info("MultiKueue custom kind found", kind=kind, resource=r.plural)
        self.custom = found
        watched = tuple(a.resource.kind for a in self._adapters(config))
        if watched == self._watched:
            return
        self._watched = watched
        self._all_moved = True
        for w in self.workers.values():
            if w.task is not None:
                await self._rewatch(w, w.origin)

    def _adapters(self, config: SchedulerConfig | None = None) -> list[Adapter]:
        """Every adapter whose owners' copies are watched and collected on the workers: those the Configuration
        (``config``, by default the one in force) builds, as Kueue's MultiKueue controller watches only its
        adapters' kinds there — the built-in ones of the enabled frameworks (:func:`adapters_in_force`) — and the
        custom kinds' found."""
        kinds = adapters_in_force(config or self._config())
        return [*(a for kind, a in ADAPTERS.items() if kind in kinds), *self.custom.values()]

    async def sync_copies(self, origin: str, keys: PassKeys | None = None) -> None:
        """The copies on every worker reached, of the workloads ``keys`` names (by default, what moved)."""
        keys = keys if keys is not None else self._pass_keys()
        uncopied: set[str] = set()
        for name, names in keys.by_worker.items():
            w = self.workers.get(name)
            if w is not None and w.connected and w.client is not None:
                uncopied |= await self._sync_copies(w, origin, names)
        await self._stop_uncopied(uncopied)

    async def _sync_workers(self, config: SchedulerConfig) -> None:
        clusters = self.state.multikueue_clusters
        for name in sorted(set(self.workers) - set(clusters)):
            await self._stop(self.workers.pop(name))
        for name in sorted(set(self._secrets) - set(clusters)):
            await self._stop_secret(name)
        for name in sorted(set(self._files) - set(clusters)):
            del self._files[name]
        for name in sorted(set(self.profiles.followed) - set(clusters)):
            await self.profiles.forget(name)
        for name in sorted(clusters):
            read = await self._kubeconfig(clusters[name], config)
            if read is None:
                continue  # its Secret not read yet: the read wakes the next pass
            source, error, reason = read
            w = self.workers.get(name)
            if w is not None and w.source == source and source:
                if w.task is not None and w.origin != config.multi_kueue.origin:
                    await self._rewatch(w, config.multi_kueue.origin)
                continue
            old = w
            if old is not None:
                await self._stop(old)
            w = self.workers[name] = Worker(name, source)
            if old is not None:
                w.hold_as(old)
            refused = "" if error else kubeconfig_checks.insecure_reason(source)
            if refused:  # Kueue checks the kubeconfig before it builds a client from it
                error, reason = f"load client config failed: {refused}", kubeconfig_checks.REASON
            if error:
                w.reason, w.message = reason, error
                continue
            await self._rewatch(w, config.multi_kueue.origin)  # its client built there (:meth:`_connect`)


    def _group_keys(self, copies: Any) -> set[str]:
        """The manager Workloads that the LeaderWorkerSet copies ``copies`` names (namespace/name) serve: those of
        the manager's set of that name (one per group; a copy names none of them, as it serves them all)."""
        return self._workloads_of(LEADER_WORKER_SETS, copies)

    def _workloads_of(self, r: Resource, owners: Any) -> set[str]:
        """The manager Workloads whose owner is an object of kind ``r`` that ``owners`` names (namespace/name)."""
        wanted = set(owners)
        if not wanted:
            return set()
        api_version, kind = r.api_version, r.kind
        return {k for k, wl in self.state.workloads.items()
                if wl.owner and wl.owner[1] == kind and wl.owner[0] == api_version
                and f"{wl.namespace}/{wl.owner[2]}" in wanted}

    def _copied(self, w: Worker) -> set[str]:
        """The manager Workload keys this origin has copies for on ``w`` (:meth:`Worker.copied`), with those its
        LeaderWorkerSet copies serve."""
        return w.copied() | self._group_keys(w.owners.get(LEADER_WORKER_SETS.kind, {}))


