"""The copies a MultiKueue manager keeps on its workers: for every manager Workload with a MultiKueue check, the
workers its copy should be on (:func:`desired_on`), the copy of the Workload and of its owner made there
(:meth:`CopiedWorkloads._run_there`), the owner's status mirrored back, its spec and size forwarded
(``_sync_spec``, ``_sync_elastic``, ``_reflect_autoscaled``), the copy's priority kept the manager's
(``_sync_priority``), a copy whose spec drifted otherwise deleted (``_out_of_sync``), its preemption gate
opened, and every other copy this origin made deleted (:meth:`CopiedWorkloads._delete_copy`).

:class:`CopiedWorkloads` is a part of :class:`connectors.k8s.multikueue.MultiKueueConnector`, whose ``__init__``
sets the state it uses and which provides ``_config``, ``_adapters``, ``_copied`` and the pass that calls it
(``sync_copies``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from connectors.k8s import leaderworkerset as lws
from connectors.k8s import multikueue_elastic as mk_elastic
from connectors.k8s import multikueue_ray_autoscaling as mk_autoscaling
from connectors.k8s import statefulset_multikueue as sts_mk
from connectors.k8s.client import KubeClient
from connectors.k8s.clusterprofile import ClusterProfiles
from connectors.k8s.errors import AlreadyExists, Conflict, KubeError, NotFound
from connectors.k8s.list_watch import Informer
from connectors.k8s.multikueue_adapters import (
    ADAPTERS,
    ORIGIN_LABEL,
    Adapter,
    SyncedOwner,
    adapter_of,
    owner_copy,
    priority_patch,
    replacing_patch,
    workload_copy,
)
from connectors.k8s.multikueue_drift import MADE_FROM, copy_drifted, made_from_json
from connectors.k8s.multikueue_identifiers import group_name_of, workload_name_of
from connectors.k8s.multikueue_worker import (
    WORKLOADS,
    Worker,
    gate_patch,
    remote_conditions,
    uid_of,
    workload_key_of,
)
from connectors.k8s.pod_roles import GROUP_LABEL
from connectors.k8s.resources import (
    JOBSETS,
    KUBEFLOW_JOBS,
    LEADER_WORKER_SETS,
    MPIJOBS,
    RAYCLUSTERS,
    TRAINJOBS,
    Resource,
)
from connectors.k8s.stored_workload import eviction_unwritten
from events import objects as o
from events.message_limits import CONDITION_MESSAGE_BYTES, truncate_message
from events.timefmt import format_time
from kueue_es.scheduler import multikueue_slices
from kueue_es.scheduler.multikueue import (
    adapters_in_force,
    check_of,
    copies_on,
    remote_spec_patch,
    sync_failure,
)
from projections import gates
from projections.admissionchecks import multikueue_config_for
from projections.cluster import ClusterState
from projections.preemption_gates import MULTIKUEUE_GATE, OPEN, gate_state
from projections.workloads import FINISHED, RemoteCopy, WorkloadInfo

if TYPE_CHECKING:
    from connectors.k8s.journal import Journal
    from connectors.k8s.multikueue import MultiKueueStats

log = structlog.get_logger("kueue_es.k8s.multikueue")


def desired_on(state: ClusterState, wl: WorkloadInfo) -> tuple[str, ...]:
    """The workers a copy of ``wl`` should be on, as the scheduler's pure rule decides them
    (:func:`kueue_es.scheduler.multikueue.copies_on`); none while they are held back (:func:`held_back`)."""
    return copies_on(state, wl) or ()


def stopping(state: ClusterState, wl: WorkloadInfo) -> bool:
    """A workload evicted on the manager that still holds quota (its Job not stopped yet): Kueue's MultiKueue
    controller deletes its remote objects only once the quota is released (``reconcileGroup`` step 2), meanwhile
    having the admitted copy evicted on its worker and mirroring the stopped copy's status (steps 6b and 4,
    :meth:`CopiedWorkloads._stop_there`), once the manager's Workload shows the eviction (the controller reads
    the stored Workload: an eviction whose status write is refused never reaches the worker). No copy is made
    for it meanwhile, nor one deleted."""
    return (wl.phase != FINISHED and wl.reserving and bool(wl.evicted) and check_of(state, wl) is not None)


def eviction_unshown(state: ClusterState, wl: WorkloadInfo, obs: o.Workload | None) -> bool:
    """Whether the manager's stored Workload ``obs`` does not show ``wl``'s eviction yet (its status write may
    still be refused, and the fold then takes it back). Kueue's controller acts on the Workload it reads, so
    the copies are left as they are until it does; a deactivation (not taken back) is acted on at once, as the
    job connectors do (:func:`connectors.k8s.jobframework.eviction_unshown`, which also wants it admitted: a
    copy may hold quota on its worker before the manager's checks are all Ready)."""
    return wl.active and obs is not None and eviction_unwritten(state, wl.key, obs)


def stale(state: ClusterState, wl: WorkloadInfo, w: str, raw: dict[str, Any] | None) -> bool:
    """Whether the copy ``raw`` of ``wl`` on worker ``w``, one of the workers its copy should be on, is a copy of an
    earlier run to drop: one finished by a sync failure (:func:`kueue_es.scheduler.multikueue.sync_failure`) on a
    worker that is not running ``wl``. Such a copy stays finished on its worker, and Kueue's controller, its check
    not Ready, decides nothing while it is there (Kueue #14736, left open upstream: its open #14521 drops the copy
    too): deleted, it is made anew once the worker shows it gone, and the requeued workload is dispatched again."""
    if raw is None or wl.cluster_name == w:
        return False
    return any(c.type == "Finished" and c.status == "True" and sync_failure(state, wl, c.reason)
               for c in remote_conditions(raw))


def drift_step_reached(state: ClusterState, wl: WorkloadInfo, shown: Iterable[dict[str, Any]] = ()) -> bool:
    """Whether Kueue's MultiKueue controller reaches its out-of-sync step (``reconcileGroup`` step 5) for
    ``wl``, by what the log knows of its copies on connected workers and what those workers' watches show of
    them now (``shown``, the copies as they are there: the log may not hold their last conditions yet, and
    Kueue reads steps 3 and 4 from the copies it compares in step 5): not while one shows Finished (step 3
    finishes the workload and returns), nor while one shows Evicted and the check is Ready (step 4 retries the
    check and returns; a workload evicted on the manager has no copy it is to keep, :func:`stopping`)."""
    links = state.cluster_links
    check = check_of(state, wl)
    ready = check is not None and check.state == "Ready"
    logged = [remote.conditions for cluster, remote in sorted((wl.remotes or {}).items())
              if (link := links.get(cluster)) is not None and link.connected]
    for conditions in [*logged, *map(remote_conditions, shown)]:
        for c in conditions:
            if c.status == "True" and (c.type == "Finished" or (c.type == "Evicted" and ready)):
                return False
    return True


def held_back(state: ClusterState, wl: WorkloadInfo) -> bool:
    """A workload whose copies are held back (:func:`kueue_es.scheduler.multikueue.copies_on`: a
    LeaderWorkerSet group's workload waiting for the rest of its group, or one on no worker yet while another
    of its admission checks is not Ready): Kueue's controller returns before it touches its copies, so none is
    made and none deleted meanwhile."""
    return copies_on(state, wl) is None


class CopiedWorkloads:
    """The connector's copies on its workers (a base of :class:`connectors.k8s.multikueue.MultiKueueConnector`,
    which sets the state below in its ``__init__``)."""

    client: KubeClient
    journal: Journal
    state: ClusterState
    stats: MultiKueueStats
    custom: dict[tuple[str, str], Adapter]
    profiles: ClusterProfiles
    synced_owners: dict[str, Informer[SyncedOwner]]
    workers: dict[str, Worker]
    _moved: set[str]

    async def _sync_copies(self, w: Worker, origin: str, keys: list[str]) -> set[str]:
        """The copies of the workloads ``keys`` names on worker ``w``: created where wanted, deleted
        elsewhere. Returns the workloads evicted on the manager, still holding quota, that have no copy
        there, for :meth:`_stop_uncopied` once every worker has been looked at."""
        assert w.client is not None
        state, copied = self.state, self._copied(w)
        stored = self.journal.mirror.workloads
        uncopied: set[str] = set()
        for key in keys:
            wl = state.workloads.get(key)
            if wl is not None and held_back(state, wl):
                continue  # looked at again when its group moves
            if wl is not None and stopping(state, wl):
                if eviction_unshown(state, wl, stored.get(key)):
                    continue  # its status write may still be refused (then taken back): as Kueue, wait for it
                if key in copied:
                    try:
                        await self._stop_there(w, wl)
                    except KubeError as exc:
                        self._failed("MultiKueue copy not stopped, will retry", key, w, exc)
                else:
                    uncopied.add(key)
                continue  # its copies go once its quota is released
            if wl is not None and w.name in desired_on(state, wl) and not stale(state, wl, w.name,
                                                                                w.workloads.get(key)):
                try:
                    if key in w.workloads:
                        if self._going(w, key):
                            await self._delete_copy(w, key, origin)  # a finalizer put back taken off again
                            continue  # its successor, where one is to be, is made once it is seen gone
                        scaled = await self._scale_down_copy(w, wl)
                        synced = await self._sync_priority(w, wl)
                        # written in place: as Kueue's step 5 (its ``continue``), not deleted in the same pass
                        if not (scaled or synced) and self._out_of_sync(w, wl, stored.get(key)):
                            await self._delete_copy(w, key, origin)
                            log.info("MultiKueue copy out of sync deleted", workload=key, cluster=w.name)
                            continue
                    if wl.cluster_name != w.name:
                        if key not in w.workloads:
                            await self._create_copy(w, wl, origin)
                        else:
                            await self._open_gate(w, wl)
                    elif key in w.workloads:
                        await self._run_there(w, wl, origin)
                    # else its copy on its worker is gone (deleted there): Kueue retries the check and makes none
                    # anew, the eviction that follows deleting the owner's copy left there
                except KubeError as exc:
                    self._failed("MultiKueue copy not written, will retry", key, w, exc)
            elif key in copied and not (wl is not None and multikueue_slices.keeps_copies(state, wl)):
                try:
                    if not await self._final_status(w, key, origin):
                        w.moved.add(key)  # the owner's last status not written yet: the copies wait for it
                        continue
                    await self._delete_copy(w, key, origin)
                except KubeError as exc:
                    self._failed("MultiKueue copy not deleted, will retry", key, w, exc)
        return uncopied

    @staticmethod
    def _going(w: Worker, key: str) -> bool:
        """Whether the copy of ``key`` on ``w`` is one this origin deleted whose DELETED its watch has not
        shown yet: nothing is written to it, and no copy is made over it until it is gone."""
        raw = w.workloads.get(key)
        return raw is not None and bool(uid_of(raw)) and w.deleted.get(key) == uid_of(raw)

    def _out_of_sync(self, w: Worker, wl: WorkloadInfo, manager: o.Workload | None) -> bool:
        """Whether the copy of ``wl`` on ``w``, one of the workers it is to be on, is to be deleted for a spec
        that drifted from the manager's stored Workload ``manager`` since it was written from it (not as the
        worker stored it: :func:`connectors.k8s.multikueue_drift.copy_drifted`), on a pass that wrote neither
        its priority nor an elastic scale-down in place: Kueue's ``reconcileGroup`` step 5. Kueue gets there
        only when no copy on a reachable worker shows Finished (step 3 finishes the workload first) and none
        shows Evicted while the check is Ready (step 4 retries the check first), in the log or as the
        connected workers' watches show the copies now: :func:`drift_step_reached`. The copy on the workload's
        own worker so deleted is seen gone and its check goes Retry; one on a nominated worker is made anew
        from the manager's spec. A workload the log shows deactivated is not looked at: its eviction decision
        follows, and with it the documented flow (:func:`stopping`, the DeactivationTarget), whatever comes
        first (Kueue's step 5 would delete the copy; upstream #13793 leaves ``active`` out of it)."""
        raw = w.workloads.get(wl.key)
        if manager is None or raw is None or not wl.active:
            return False
        if not copy_drifted(manager, raw):
            return False
        shown = [c.workloads[wl.key] for _, c in sorted(self.workers.items())
                 if c.connected and wl.key in c.workloads]
        return drift_step_reached(self.state, wl, shown)

    def _failed(self, what: str, key: str, w: Worker, exc: KubeError) -> None:
        """One workload's write failed (a namespace missing on the worker, a forbidden write, the worker gone):
        counted and retried on the next pass, the other workloads and workers served meanwhile, as Kueue
        reconciles each workload and each of its workers apart."""
        self.stats.errors += 1
        w.moved.add(key)
        self._unauthorized(w, exc)
        log.warning(what, workload=key, cluster=w.name, error=str(exc))

    def _unauthorized(self, w: Worker, exc: BaseException) -> None:
        """A worker that answered 401 Unauthorized: the credentials its ClusterProfile's plugin gave are got again
        (:meth:`connectors.k8s.clusterprofile.ClusterProfiles.unauthorized`)."""
        if isinstance(exc, KubeError) and exc.status == 401:
            self.profiles.unauthorized(w.name, w.source)

    async def _create_copy(self, w: Worker, wl: WorkloadInfo, origin: str) -> None:
        """The copy of ``wl`` made on ``w`` from the manager's Workload as it is now, recording which version
        of it (:data:`connectors.k8s.multikueue_drift.MADE_FROM`, what its drift is judged by)."""
        assert w.client is not None
        try:
            raw = await self.client.get(WORKLOADS, wl.name, wl.namespace)
        except NotFound:
            return
        gated = self._config().gate(gates.MULTIKUEUE_ORCHESTRATED_PREEMPTION)
        body = workload_copy(msgspec.json.decode(raw), origin, gated)
        _record_made_from(body, raw)
        try:
            created = msgspec.json.decode(await w.client.create(WORKLOADS, body, wl.namespace))
        except AlreadyExists:
            return
        w.keep(WORKLOADS, wl.key, created)
        self.stats.copies_created += 1
        log.info("MultiKueue copy created", workload=wl.key, cluster=w.name)

    async def _scale_down_copy(self, w: Worker, wl: WorkloadInfo) -> bool:
        """An elastic workload scaled down in place on the manager: its copy on ``w`` takes the manager's pod sets
        (:func:`connectors.k8s.multikueue_elastic.copy_scaled_down`), queue and maximum execution time
        (Kueue gives it the manager's whole spec; the priority has its own sync), and records the manager
        version so written (:data:`connectors.k8s.multikueue_drift.MADE_FROM`), the patch conditioned on
        the copy's resourceVersion. True: the copy was written."""
        assert w.client is not None
        raw = w.workloads.get(wl.key)
        if raw is None or not mk_elastic.copy_scaled_down(self._config(), wl, raw):
            return False
        try:
            manager_raw = await self.client.get(WORKLOADS, wl.name, wl.namespace)
        except NotFound:
            return False
        spec = msgspec.json.decode(manager_raw).get("spec") or {}
        rv = (raw.get("metadata") or {}).get("resourceVersion", "")
        patch = {"spec": {f: spec.get(f) for f in ("podSets", "queueName", "maximumExecutionTimeSeconds")},
                 "metadata": {"resourceVersion": rv, "annotations": {MADE_FROM: made_from_json(manager_raw)}}}
        patched = msgspec.json.decode(await w.client.patch(WORKLOADS, wl.name, patch, wl.namespace))
        w.keep(WORKLOADS, wl.key, patched)
        log.info("MultiKueue elastic copy scaled down", workload=wl.key, cluster=w.name)
        return True

    async def _sync_priority(self, w: Worker, wl: WorkloadInfo) -> bool:
        """The copy on ``w`` given the manager Workload's priority once it changed (:func:`priority_patch`, Kueue's
        in-place update of a copy, #8464), the patch conditioned on the copy's resourceVersion. The manager's
        Workload is read only when the log's priority, class name or value, is not the copy's. True: the copy
        was written."""
        assert w.client is not None
        raw = w.workloads.get(wl.key)
        if raw is None or not _priority_differs(wl, raw):
            return False
        try:
            manager_wl = msgspec.json.decode(await self.client.get(WORKLOADS, wl.name, wl.namespace))
        except NotFound:
            return False
        patch = priority_patch(manager_wl, raw)
        if patch is None:
            return False
        await self._patch_copy(w, wl, raw, patch, "")
        log.info("MultiKueue copy priority synced", workload=wl.key, cluster=w.name)
        return True

    @staticmethod
    def _opening(known: RemoteCopy, shown: list[o.PreemptionGateState]) -> bool:
        """The log opened the copy's MultiKueue gate and the worker does not show it open yet: not news (its
        conditions unchanged), the write that opens it (:meth:`_open_gate`) is on its way."""
        opened = gate_state(known.preemption_gates, MULTIKUEUE_GATE)
        shown_gate = gate_state(shown, MULTIKUEUE_GATE)
        return opened is not None and opened.position == OPEN and (shown_gate is None or shown_gate.position != OPEN)

    async def _open_gate(self, w: Worker, wl: WorkloadInfo) -> None:
        """The copy on ``w`` shows the gate the log opened there (``RemotePreemptionGateOpened``), written to its
        status (Kueue's manager patches it so)."""
        assert w.client is not None
        known = wl.remotes.get(w.name) if wl.remotes else None
        raw = w.workloads.get(wl.key)
        if known is None or raw is None:
            return
        gate = gate_state(known.preemption_gates, MULTIKUEUE_GATE)
        if gate is None or gate.position != OPEN:
            return
        patch = gate_patch(raw, gate)
        if patch is not None:
            await self._patch_copy(w, wl, raw, patch, "status")
            log.info("MultiKueue preemption gate opened", workload=wl.key, cluster=w.name)

    @staticmethod
    async def _patch_copy(w: Worker, wl: WorkloadInfo, raw: dict[str, Any], patch: dict[str, Any],
                          subresource: str) -> None:
        """Merge ``patch`` into the copy on ``w`` (its ``subresource``), conditioned on the version ``raw`` shows,
        and keep what the worker answers as the copy known there."""
        assert w.client is not None
        rv = (raw.get("metadata") or {}).get("resourceVersion", "")
        patched = await w.client.patch(WORKLOADS, wl.name, {**patch, "metadata": {"resourceVersion": rv}},
                                       wl.namespace, subresource=subresource)
        w.keep(WORKLOADS, wl.key, msgspec.json.decode(patched))

    async def _stop_there(self, w: Worker, wl: WorkloadInfo) -> None:
        """A workload evicted on the manager while its copy on ``w`` holds quota there: an admitted copy gets
        Kueue's DeactivationTarget (``EvictedOnManagerCluster``, "Evicted on manager: <the eviction's message>"),
        which the worker's Kueue turns into its deactivation (Evicted ``DeactivatedDueToEvictedOnManagerCluster``)
        and the stop of the owner's copy; a copy evicted there has its owner's copies' status mirrored to the
        manager's owners (Kueue's ``SyncJob``), so that the manager's Job shows no active pod once the copy stopped
        and the manager's job controller gives the quota back. No owner copy is made meanwhile. A copy gone
        there (deleted by hand or for drift, or going), its owner's copies left, has those mirrored as the
        watch shows them (kueue-es's choice: nothing else would bring the manager's owner their stop, and
        its quota would be held for ever; ro-diff-c H2)."""
        raw = w.workloads.get(wl.key)
        if raw is None or w.deleted.get(wl.key) == uid_of(raw) or _shows(raw, "Evicted"):
            await self._mirror_owners(w, wl)
        elif _shows(raw, "Admitted"):
            await self._deactivate_copy(w, wl, raw)

    async def _stop_uncopied(self, keys: Iterable[str]) -> None:
        """:meth:`_stop_nowhere` for each of ``keys`` (sorted) still evicted on the manager and holding
        quota."""
        for key in sorted(keys):
            wl = self.state.workloads.get(key)
            if wl is None or not stopping(self.state, wl):
                continue
            try:
                await self._stop_nowhere(wl)
            except KubeError as exc:
                self.stats.errors += 1
                self._moved.add(key)  # looked at again on the next pass
                log.warning("MultiKueue owner not shown stopped, will retry", workload=key, error=str(exc))

    async def _stop_nowhere(self, wl: WorkloadInfo) -> None:
        """A workload evicted on the manager, still holding quota, of which no worker that could run it
        shows a copy (:meth:`_shown_nowhere`: its copies deleted for drift or by hand, their DELETED shown):
        its manager owners are given the status a copy with no pod would have (:func:`emptied_patch`), so
        that its job controller sees no pod and gives the quota back. Kueue's behaviour here is unconfirmed:
        this is kueue-es's choice (no copy is left to mirror; ro-diff-c H2). An owner of a kind
        :data:`EMPTIED` does not list keeps its status, and the quota stays held."""
        adapter = adapter_of(wl, self._config(), self.custom)
        if adapter is None or not adapter.mirrors_status or _kind(adapter) not in EMPTIED:
            return
        found = await self._owner_names(adapter, wl)
        if found is None or _kind(found[0]) not in EMPTIED:
            return
        adapter, names = found
        if not self._shown_nowhere(wl, adapter.resource.kind, names):
            return
        r = adapter.resource
        for name in names:
            local = await self._manager_owner(r, name, wl.namespace)
            patch = emptied_patch(_kind(adapter), local) if local is not None else None
            if local is None or patch is None:
                continue
            rv = (local.get("metadata") or {}).get("resourceVersion", "")
            try:
                await self.client.patch(r, name, {**patch, "metadata": {"resourceVersion": rv}}, wl.namespace,
                                        subresource="status")
            except NotFound:
                continue
            except Conflict:
                self._moved.add(wl.key)  # written again on the next pass
                continue
            self.stats.statuses_mirrored += 1
            log.info("MultiKueue owner shown stopped: no copy left on the workers", kind=r.kind,
                     owner=f"{wl.namespace}/{name}", workload=wl.key)

    def _shown_nowhere(self, wl: WorkloadInfo, kind: str, names: list[str]) -> bool:
        """Whether no worker may still run ``wl``: every worker of its check's MultiKueueConfig that is a
        MultiKueueCluster is reached, and no worker reached shows a copy of it, its Workload's or one of its
        owners ``names`` (of ``kind``, whatever Workload it names: an elastic Job's newer slice may run on
        it), one deleted whose DELETED is not shown yet among them. A worker not reached (lost, reconnecting,
        its kubeconfig not read) may still run its pods: the quota stays held (kueue-es's choice)."""
        check = check_of(self.state, wl)
        ac = self.state.admission_checks.get(check.name) if check is not None else None
        config = multikueue_config_for(ac, self.state.multikueue_configs)[0] if ac is not None else None
        if config is None:
            return False
        for cluster in config.spec.clusters:
            w = self.workers.get(cluster)
            if cluster in self.state.multikueue_clusters and (w is None or not w.connected):
                return False
        owner_keys = [f"{wl.namespace}/{name}" for name in names]
        for w in self.workers.values():
            if not w.connected:
                continue
            copies = w.owners.get(kind, {})
            if wl.key in self._copied(w) or any(k in copies for k in owner_keys):
                return False
        return True

    async def _deactivate_copy(self, w: Worker, wl: WorkloadInfo, raw: dict[str, Any]) -> None:
        """The copy ``raw`` on ``w`` shows the DeactivationTarget the manager's eviction sets on it, written to its
        status conditioned on its resourceVersion (a conflict: written again on the next pass)."""
        assert w.client is not None
        evicted = wl.condition("Evicted")
        patch = deactivation_patch(raw, f"Evicted on manager: {evicted.message if evicted is not None else ''}",
                                   format_time(_now()))
        if patch is None:
            return
        rv = (raw.get("metadata") or {}).get("resourceVersion", "")
        try:
            patched = await w.client.patch(WORKLOADS, wl.name, {**patch, "metadata": {"resourceVersion": rv}},
                                           wl.namespace, subresource="status")
        except NotFound:
            return  # gone: its watch says so, and the copies go with the quota
        except Conflict:
            w.moved.add(wl.key)
            return
        w.keep(WORKLOADS, wl.key, msgspec.json.decode(patched))
        log.info("MultiKueue copy deactivated: evicted on the manager", workload=wl.key, cluster=w.name)

    async def _mirror_owners(self, w: Worker, wl: WorkloadInfo) -> None:
        """The status of the owner's copies on ``w`` (as its watch shows them) mirrored to the manager's owners."""
        adapter = adapter_of(wl, self._config(), self.custom)
        found = await self._owner_names(adapter, wl) if adapter is not None else None
        if found is None:
            return
        adapter, names = found
        copies = w.owners.get(adapter.resource.kind, {})
        for name in names:
            owner_key = f"{wl.namespace}/{name}"
            remote = copies.get(owner_key)
            if remote is None or w.waits_for_deleted(adapter.resource.kind, owner_key):
                continue
            if not await self._mirror_status(w, adapter, owner_key, remote):
                w.moved.add(wl.key)  # written again on the next pass

    async def _run_there(self, w: Worker, wl: WorkloadInfo, origin: str) -> None:
        """The owner's copy on the workload's worker (its adapter's), and its status mirrored to the manager's; a
        pod group's, each of its Pods' (:meth:`_owner_names`)."""
        adapter = adapter_of(wl, self._config(), self.custom)
        if adapter is None:
            return
        found = await self._owner_names(adapter, wl)
        if found is None:
            w.moved.add(wl.key)  # read again on the next pass
            return
        adapter, names = found
        for name in names:
            await self._run_owner_there(w, wl, adapter, name, origin)

    async def _owner_names(self, adapter: Adapter, wl: WorkloadInfo) -> tuple[Adapter, list[str]] | None:
        """The adapter the workload runs on and the manager's objects of its kind: its owner, or, for an owner
        carrying the adapter's group label (a Pod of a pod group), every object of the namespace with that label's
        value (Kueue's Pod adapter syncs the group's Pods, as listed now, sorted here); for Pods a StatefulSet
        holds, while its adapter is in force, the StatefulSet (:mod:`connectors.k8s.statefulset_multikueue`).
        None: the owner is not there."""
        if not adapter.group_label:
            return adapter, [wl.owner[2]]
        r = adapter.resource
        try:
            owner = msgspec.json.decode(await self.client.get(r, wl.owner[2], wl.namespace))
        except NotFound:
            return None
        held_by = sts_mk.holding_statefulset(owner)
        if held_by is not None and sts_mk.KIND in adapters_in_force(self._config()):
            return ADAPTERS[sts_mk.KIND], [held_by]
        group = group_name_of(owner) if adapter.group_label == GROUP_LABEL else (
            ((owner.get("metadata") or {}).get("labels") or {}).get(adapter.group_label))
        if group is None:
            return None  # its label and annotation name two groups: not synced (Kueue's error, retried)
        if not group:
            return adapter, [wl.owner[2]]
        listed = await self.client.list(r, label_selector=f"{adapter.group_label}={group}", namespace=wl.namespace)
        return adapter, sorted(msgspec.json.decode(raw)["metadata"]["name"] for raw in listed.items)

    async def _run_owner_there(self, w: Worker, wl: WorkloadInfo, adapter: Adapter, name: str, origin: str
                               ) -> None:
        """The copy of the manager's object ``name`` (of the adapter's kind) on the workload's worker, and its
        status mirrored."""
        assert w.client is not None
        r, owner_key = adapter.resource, f"{wl.namespace}/{name}"
        if w.waits_for_deleted(r.kind, owner_key):
            return  # the copy this origin deleted there, going away: not this run's; its DELETED moves the workload
        copies = w.owners.setdefault(r.kind, {})
        remote = copies.get(owner_key)
        if remote is None:
            try:
                manager_owner = msgspec.json.decode(await self.client.get(r, name, wl.namespace))
                manager_wl = msgspec.json.decode(await self.client.get(WORKLOADS, wl.name, wl.namespace))
            except NotFound:
                w.moved.add(wl.key)  # read again on the next pass
                return
            try:
                remote = msgspec.json.decode(await w.client.create(
                    r, owner_copy(adapter, manager_owner, manager_wl, origin, self._config()), wl.namespace))
            except AlreadyExists:
                return
            remote = w.keep(r, owner_key, remote)
            self.stats.jobs_created += 1
            log.info("MultiKueue owner copy created", kind=r.kind, owner=owner_key, cluster=w.name)
        elif not (await self._sync_spec(w, r, owner_key, remote)
                  and await self._sync_elastic(w, wl, r, owner_key, copies.get(owner_key, remote))):
            w.moved.add(wl.key)  # written again on the next pass
        remote = copies.get(owner_key, remote)  # as the spec syncs left it
        if not await self._mirror_status(w, adapter, owner_key, remote):
            w.moved.add(wl.key)  # written again on the next pass

    async def _sync_spec(self, w: Worker, r: Resource, owner_key: str, remote: dict[str, Any]) -> bool:
        """The copy ``remote`` already on the workload's worker gets the manager owner's edits of the fields its
        kind forwards (:func:`remote_spec_patch`, MultiKueueRemoteSpecSync; Kueue's adapter patches them in place
        when it syncs the job), the patch conditioned on the copy's resourceVersion. The manager's owner is read
        from the informer (one not listed yet is looked at again once listed). False: the write conflicted, to be
        tried again on the next pass."""
        informer = self.synced_owners.get(r.kind)
        local = informer.known.get(owner_key) if informer is not None else None
        if local is None:
            return True
        patch = remote_spec_patch(self._config(), (r.api_version, r.kind), remote, local.synced)
        if patch is None:
            return True
        rv = (remote.get("metadata") or {}).get("resourceVersion", "")
        namespace, _, name = owner_key.partition("/")
        assert w.client is not None
        try:
            patched = await w.client.patch(r, name, {**patch, "metadata": {"resourceVersion": rv}}, namespace)
        except NotFound:
            return True  # the copy is gone: its watch says so, and Kueue's Retry follows
        except Conflict:
            return False
        w.keep(r, owner_key, msgspec.json.decode(patched))  # the watch brings it too
        self.stats.specs_synced += 1
        log.info("MultiKueue owner copy spec synced", kind=r.kind, owner=owner_key, cluster=w.name)
        return True

    async def _sync_elastic(self, w: Worker, wl: WorkloadInfo, r: Resource, owner_key: str,
                            remote: dict[str, Any]) -> bool:
        """An elastic Job's or RayCluster's copy on the workload's worker gets the manager's size and names the
        workload synced (:func:`connectors.k8s.multikueue_elastic.elastic_patch`), the patch conditioned on the
        copy's resourceVersion; the manager's owner is read from its apiserver. False: the write conflicted or the
        manager's could not be read, to be tried again on the next pass."""
        kind = (r.api_version, r.kind)
        autoscaled_kind = kind in mk_autoscaling.KINDS and self._config().gate(mk_autoscaling.GATE)
        if (kind not in mk_elastic.SYNCED_KINDS and not autoscaled_kind) or not wl.elastic:
            return True
        namespace, _, name = owner_key.partition("/")
        try:
            local = msgspec.json.decode(await self.client.get(r, name, namespace))
        except NotFound:
            return False
        if mk_autoscaling.worker_owns_replicas(self._config(), kind, local):
            try:
                patch = await self._reflect_autoscaled(w, wl, r, kind, local, remote)
            except Conflict:
                return False  # the manager's object changed since it was read: its counts are reflected next pass
        elif kind in mk_elastic.SYNCED_KINDS:
            patch = mk_elastic.elastic_patch(self._config(), kind, remote, local, wl)
        else:
            return True
        if patch is None:
            return True
        rv = (remote.get("metadata") or {}).get("resourceVersion", "")
        patch["metadata"] = {**patch.get("metadata", {}), "resourceVersion": rv}
        assert w.client is not None
        try:
            patched = await w.client.patch(r, name, patch, namespace)
        except NotFound:
            return True  # the copy is gone: its watch says so, and Kueue's Retry follows
        except Conflict:
            return False
        w.keep(r, owner_key, msgspec.json.decode(patched))
        self.stats.specs_synced += 1
        log.info("MultiKueue elastic replicas synced", kind=r.kind, owner=owner_key, workload=wl.key, cluster=w.name)
        return True

    async def _reflect_autoscaled(self, w: Worker, wl: WorkloadInfo, r: Resource, kind: tuple[str, str],
                                  local: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any] | None:
        """Under MultiKueueRayInTreeAutoscaling, an autoscaled Ray object's worker counts (its copy's, or a RayJob's
        RayCluster's on the worker) go onto the manager's object as annotations
        (:mod:`connectors.k8s.multikueue_ray_autoscaling`); once they are there, the patch that makes the copy name
        the workload synced (None: nothing to write on the worker). That write conflicting (the manager's object
        changed since it was read) raises :class:`Conflict`: nothing else would bring the counts there again (the
        manager's Ray objects are not in the log), so the caller tries again on the next pass."""
        if mk_autoscaling.suspended(kind, local):
            return None
        child, child_name = None, mk_autoscaling.child_name(kind, remote)
        if child_name:
            assert w.client is not None
            with contextlib.suppress(NotFound):
                child = msgspec.json.decode(await w.client.get(RAYCLUSTERS, child_name, wl.namespace))
        state = mk_autoscaling.runtime_state(kind, remote, child)
        reflect = None if state is None else mk_autoscaling.reflect_patch(local, state)
        if reflect is not None:
            rv = (local.get("metadata") or {}).get("resourceVersion", "")
            reflect["metadata"]["resourceVersion"] = rv
            namespace, name = wl.namespace, (local.get("metadata") or {}).get("name", "")
            with contextlib.suppress(NotFound):  # gone: its workload goes too (a Conflict is the caller's retry)
                await self.client.patch(r, name, reflect, namespace)
                log.info("MultiKueue autoscaled worker counts reflected", kind=r.kind, owner=f"{namespace}/{name}",
                         workload=wl.key, cluster=w.name)
            return None  # the manager's new slice, once made, is the one the copy is to name
        meta = mk_elastic.named(remote, wl.name, self._config())
        return {"metadata": meta} if meta else None

    async def _final_status(self, w: Worker, key: str, origin: str) -> bool:
        """A workload finished on the worker that ran it: its owner's copy's last status, read from the worker (the
        watch may not have shown it yet), goes to the manager's owner before the copies are deleted (Kueue syncs the
        owner, then finishes the workload and removes the remote objects). False: that write conflicted, so the
        copies stay until the next pass writes it."""
        assert w.client is not None
        wl = self.state.workloads.get(key)
        adapter = adapter_of(wl, self._config(), self.custom) if wl is not None else None
        if (wl is None or adapter is None or not adapter.mirrors_status or wl.phase != FINISHED
                or wl.cluster_name != w.name):
            return True
        adapter, names = await self._owner_names(adapter, wl) or (adapter, [])
        if not adapter.mirrors_status:
            return True
        written = True
        for name in names:
            try:
                remote = msgspec.json.decode(await w.client.get(adapter.resource, name, wl.namespace))
            except NotFound:
                continue
            if ((remote.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL) != origin:
                continue  # not this manager's copy (Kueue validates a remote object's origin before reading it)
            written = await self._mirror_status(w, adapter, f"{wl.namespace}/{name}", remote) and written
        return written

    async def _mirror_status(self, w: Worker, adapter: Adapter, owner_key: str, remote: dict[str, Any]) -> bool:
        """The manager's owner shows the status of its copy: a Job once it has been started, or its copy is
        suspended or finished (Kueue defers the sync while the manager's Job is suspended and the copy runs), an
        owner the log does not hold (a JobSet, Kubeflow job, MPIJob, Ray kind, AppWrapper, TrainJob)
        whenever the copy's changes, suspended or not, as Kueue's adapters of those kinds copy it. A version of the
        copy on ``w`` written once (:attr:`Worker.mirrored`: by uid, another copy of that name is another object)
        is not written again. False: the write conflicted, to be tried again on the next pass."""
        if not adapter.mirrors_status:
            return True
        r = adapter.resource
        seen = (uid_of(remote), (remote.get("metadata") or {}).get("resourceVersion", ""))
        if w.mirrored.get((r.kind, owner_key)) == seen:
            return True
        if adapter.in_log:
            local = self.state.jobs.get(owner_key)
            if local is None:
                return True
            if local.spec.suspend and not _settled(remote):
                return await self._adapt_suspended(r, owner_key)
        status = remote.get("status") or {}
        if not status:
            return True
        namespace, _, name = owner_key.partition("/")
        # the copy's status replaces the manager owner's (Kueue's adapters set it whole): what the copy no longer
        # has is cleared, or a merge would keep it (a Job omits ``active`` once no pod runs)
        if adapter.status_fields:
            current = dict.fromkeys(adapter.status_fields)
        else:
            local = await self._manager_owner(r, name, namespace)
            if local is None:
                return True
            current = local.get("status") or {}
            if adapter.mirrored is not None:
                status = adapter.mirrored(local, status)
                if status is None:
                    return True
        replacing = replacing_patch(current, status)
        try:
            await self.client.patch(r, name, {"status": replacing}, namespace, subresource="status")
        except NotFound:
            return True
        except Conflict:
            return False
        if w.follows(r.kind, owner_key, remote):  # else gone already: nothing would forget it
            w.mirrored[r.kind, owner_key] = seen
        self.stats.statuses_mirrored += 1
        return True

    async def _adapt_suspended(self, r: Resource, owner_key: str) -> bool:
        """The manager's Job is suspended and its copy runs: Kueue's batch/v1 adapter defers the copy's status
        (its Job's start moves the workload again) and only shows the Job ``Suspended`` True
        (``MultiKueueAdapter``, :func:`adapted_patch`); a Job evicted on the manager keeps the active pods
        last mirrored until its copy, stopped on its worker, is mirrored, or until no worker shows a copy
        (:meth:`_stop_nowhere`, :func:`emptied_patch`); its quota is given back then.
        False: the write conflicted, to be tried again on the next pass."""
        namespace, _, name = owner_key.partition("/")
        local = await self._manager_owner(r, name, namespace)
        if local is None:
            return True
        patch = adapted_patch(local)
        if patch is None:
            return True
        rv = (local.get("metadata") or {}).get("resourceVersion", "")
        try:
            await self.client.patch(r, name, {**patch, "metadata": {"resourceVersion": rv}}, namespace,
                                    subresource="status")
        except NotFound:
            return True
        except Conflict:
            return False
        self.stats.statuses_mirrored += 1
        return True

    async def _manager_owner(self, r: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        """The manager's owner as it is now (None: it is gone), read before its status is replaced: an owner whose
        status fields vary with its controller's version (a JobSet, a Kubeflow job) has each of them replaced, as
        Kueue reads it before setting it."""
        try:
            return msgspec.json.decode(await self.client.get(r, name, namespace))
        except NotFound:
            return None

    async def _delete_copy(self, w: Worker, key: str, origin: str) -> None:
        """Delete a copy this origin made: its owner's copy first (the worker's Workload may already be gone), then
        the Workload, its finalizers removed (Kueue's ``RemoveRemoteObjects``). A copy deleted already, held until
        its watch shows it deleted (:attr:`Worker.deleted`, :attr:`Worker.deleted_owners`), is not deleted nor
        counted again: only a finalizer its watch shows on it (put back by the worker) is taken off again, so that
        it goes."""
        assert w.client is not None
        raw = w.workloads.get(key) or {}
        uid = uid_of(raw)
        namespace, _, name = key.partition("/")
        owners_deleted = await self._delete_owner_copies(w, key, raw, origin)
        if (raw.get("metadata") or {}).get("finalizers"):
            with contextlib.suppress(NotFound, Conflict):
                await w.client.patch(WORKLOADS, name, {"metadata": {"finalizers": None}}, namespace)
        held = bool(uid) and w.deleted.get(key) == uid  # deleted before, its DELETED not shown yet
        if not held and (raw or owners_deleted):
            with contextlib.suppress(NotFound):
                await w.client.delete(WORKLOADS, name, namespace)
            if key in w.workloads and uid_of(w.workloads[key]) == uid:  # its DELETED not shown yet
                if uid:
                    w.deleted[key] = uid  # held until then: a new copy is made once the old one is seen gone
                else:
                    del w.workloads[key]
        elif not owners_deleted:
            return  # nothing deleted now: not counted again
        self.stats.copies_deleted += 1
        log.info("MultiKueue copy deleted", workload=key, cluster=w.name)

    async def _delete_owner_copies(self, w: Worker, key: str, raw: dict[str, Any], origin: str) -> bool:
        """Delete the owner copies of the workload ``key`` (its Workload copy ``raw``, or {}) this origin made there,
        each held until its watch shows it deleted (:meth:`Worker.hold_deleted`); one held already is left. The
        owner a copy's reference names is deleted only when it carries this manager's origin label (a worker's own
        object of that name stays). True: one was deleted now."""
        assert w.client is not None
        namespace, _, name = key.partition("/")
        refs = (raw.get("metadata") or {}).get("ownerReferences") or []
        deleted = False
        for a in self._adapters():
            r = a.resource
            copies = w.owners.get(r.kind, {})
            named = [ref["name"] for ref in refs if ref.get("kind") == r.kind and ref.get("name")]
            if a.grouped:  # the set's one copy, which its Workload names in annotations (so does the manager's)
                named += self._group_owners(key, raw)
            found = {n: made for n in named if (made := await self._made_here(w, r, namespace, n, origin))}
            found.update((k.partition("/")[2], obj) for k, obj in copies.items()
                         if k.partition("/")[0] == namespace and workload_name_of(obj) == name)
            for owner_name in sorted(found):
                owner_key = f"{namespace}/{owner_name}"
                if w.waits_for_deleted(r.kind, owner_key):
                    continue  # deleted already, its DELETED not shown yet
                if self._runs_another(w, copies.get(owner_key), key):
                    continue  # an elastic owner's copy, pointed at its newer slice: that one runs on it
                with contextlib.suppress(NotFound):
                    await w.client.delete(r, owner_name, namespace)
                w.hold_deleted(r.kind, owner_key, copies.get(owner_key, found[owner_name]))
                deleted = True
        return deleted

    def _runs_another(self, w: Worker, owner_copy: dict[str, Any] | None, key: str) -> bool:
        """Whether the owner's copy ``owner_copy`` on ``w`` names a Workload other than ``key`` that is to be there
        (an elastic owner's copy the manager pointed at its new slice, :mod:`connectors.k8s.multikueue_elastic`):
        deleting the old slice's copy leaves it."""
        other = workload_key_of(owner_copy) if owner_copy is not None else ""
        wl = self.state.workloads.get(other) if other and other != key else None
        return wl is not None and (w.name in desired_on(self.state, wl) or multikueue_slices.keeps_copies(self.state, wl))

    def _group_owners(self, key: str, raw: dict[str, Any]) -> list[str]:
        """The name of the LeaderWorkerSet whose group's Workload copy ``raw`` is (its owner annotations), or whose
        the manager's Workload ``key`` is: a list of at most one, sorted."""
        annotations = (raw.get("metadata") or {}).get("annotations") or {}
        names = set()
        if annotations.get(lws.OWNER_GVK_ANNOTATION) == lws.GVK and annotations.get(lws.OWNER_NAME_ANNOTATION):
            names.add(annotations[lws.OWNER_NAME_ANNOTATION])
        wl = self.state.workloads.get(key)
        if wl is not None and wl.owner and wl.owner[:2] == (LEADER_WORKER_SETS.api_version, LEADER_WORKER_SETS.kind):
            names.add(wl.owner[2])
        return sorted(names)

    @staticmethod
    async def _made_here(w: Worker, r: Resource, namespace: str, owner_name: str, origin: str
                         ) -> dict[str, Any] | None:
        """The worker's owner of kind ``r`` (the watch's, else read) if it carries this manager's origin label
        (None: it does not, or is not there): Kueue deletes a remote object only once it has checked that."""
        assert w.client is not None
        raw = w.owners.get(r.kind, {}).get(f"{namespace}/{owner_name}")
        if raw is None:
            try:
                raw = msgspec.json.decode(await w.client.get(r, owner_name, namespace))
            except NotFound:
                return None
        return raw if ((raw.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL) == origin else None


def _record_made_from(body: dict[str, Any], manager_raw: bytes) -> None:
    """The copy ``body`` records the manager Workload ``manager_raw`` (its JSON, as read) it is made from;
    none when that one's version is unknown (nor one the manager's own annotations would carry over)."""
    annotations = body["metadata"].setdefault("annotations", {})
    record = made_from_json(manager_raw)
    if record is None:
        annotations.pop(MADE_FROM, None)
    else:
        annotations[MADE_FROM] = record


def _priority_differs(wl: WorkloadInfo, raw: dict[str, Any]) -> bool:
    """Whether the copy ``raw`` of ``wl`` shows another priority than the log's (its class's name, or its base
    value): only then is the manager's Workload read for :func:`priority_patch`."""
    spec = raw.get("spec") or {}
    ref = spec.get("priorityClassRef")
    name = (ref.get("name") or "") if isinstance(ref, dict) else ""
    return name != wl.priority_class or (spec.get("priority") or 0) != wl.priority - wl.boost


def _settled(job_copy: dict[str, Any]) -> bool:
    """Whether a Job's copy is suspended too or finished: Kueue's batch/v1 adapter mirrors its status then even to
    a manager Job still suspended (else a Job done on the worker before the manager's was started would never
    show it); it waits only while the copy runs."""
    if (job_copy.get("spec") or {}).get("suspend") is True:
        return True
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job_copy.get("status") or {}).get("conditions") or [])


DEACTIVATION_TARGET = "DeactivationTarget"
EVICTED_ON_MANAGER = "EvictedOnManagerCluster"
"""Kueue's DeactivationTarget reason for a copy whose workload the manager evicted; the worker's Kueue evicts it
with ``DeactivatedDueToEvictedOnManagerCluster``."""


def deactivation_patch(raw: dict[str, Any], message: str, now: str) -> dict[str, Any] | None:
    """The merge patch of a copy's status that adds Kueue's DeactivationTarget True (``EvictedOnManagerCluster``,
    ``message``, cut as Kueue cuts a condition's message) to its conditions, the others as they are (None: it
    shows it so already)."""
    status = raw.get("status") or {}
    conditions = list(status.get("conditions") or [])
    message = truncate_message(message, CONDITION_MESSAGE_BYTES)
    current = next((c for c in conditions if c.get("type") == DEACTIVATION_TARGET), None)
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            "True", EVICTED_ON_MANAGER, message):
        return None
    kept = current is not None and current.get("status") == "True" and current.get("lastTransitionTime")
    entry = {"type": DEACTIVATION_TARGET, "status": "True", "reason": EVICTED_ON_MANAGER, "message": message,
             "lastTransitionTime": current["lastTransitionTime"] if kept else now,  # type: ignore[index]
             "observedGeneration": (raw.get("metadata") or {}).get("generation", 0)}
    if current is None:
        conditions.append(entry)
    else:
        conditions = [entry if c is current else c for c in conditions]
    return {"status": {"conditions": conditions}}


ADAPTED = ("MultiKueueAdapter", "Set by MultiKueue adapter")
"""The reason and message of the ``Suspended`` condition Kueue's batch/v1 adapter writes
(``determineStatusUpdate``)."""


def adapted_patch(local: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch of a suspended manager Job's status while its copy runs, as Kueue's batch/v1 adapter makes
    it (``determineStatusUpdate``, its deferred branch): the copy's status is not taken (a start time or
    active pods shown on a Job not started yet would block the spec changes its start makes), only a
    ``Suspended`` condition True (``MultiKueueAdapter``) set, so that the Job passes the suspend validation of
    Kubernetes 1.36; one of another status replaced, one True left as it is. Its other fields (``active``
    among them) are left as they are: a Job evicted on the manager shows its pods gone once its copy, stopped
    there, is mirrored, or once no worker shows a copy (:meth:`CopiedWorkloads._stop_nowhere`). None: nothing
    to write."""
    status = local.get("status") or {}
    conditions = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == "Suspended"), None)
    if current is not None and current.get("status") == "True":
        return None
    now = format_time(_now())
    entry = {"type": "Suspended", "status": "True", "reason": ADAPTED[0], "message": ADAPTED[1],
             "lastProbeTime": now, "lastTransitionTime": now}
    conditions = ([*conditions, entry] if current is None
                  else [entry if c is current else c for c in conditions])
    return {"status": {"conditions": conditions}}


EMPTIED: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("batch/v1", "Job"): ("", ("active", "ready", "terminating")),
    (JOBSETS.api_version, JOBSETS.kind): ("replicatedJobsStatus", ("active", "ready")),
    **{(r.api_version, r.kind): ("replicaStatuses", ("active",)) for r in (MPIJOBS, *KUBEFLOW_JOBS.values())},
    (TRAINJOBS.api_version, TRAINJOBS.kind): ("jobsStatus", ("active", "ready")),
}
"""Owner (apiVersion, kind) -> where its status counts its pods (a list or map of per-replica entries; "":
the status itself) and which counts, as its integration reads them to tell it stopped (:func:`emptied_patch`).
Kinds whose integration reads a state or a condition instead (the Ray kinds, an AppWrapper), Pods and
StatefulSets are not here: their quota stays held (kueue-es's choice)."""


def emptied_patch(kind: tuple[str, str], local: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch of the status of the manager's owner ``local`` (of ``kind``, one of :data:`EMPTIED`'s,
    by apiVersion and kind)
    that shows it as a copy with no pod would: each pod count of :data:`EMPTIED` nulled (a Job, which omits
    them then) or 0 (a replica's entry), and a Job shown ``Suspended`` True as :func:`adapted_patch` writes it
    (its other fields, and the entries' other counts, as they are). None: no pod is counted, nothing to
    write."""
    status = local.get("status") or {}
    at, counts = EMPTIED[kind]
    if not at:
        if not any(status.get(c) for c in counts):
            return None
        suspended = (adapted_patch(local) or {}).get("status", {})
        return {"status": {**dict.fromkeys(counts), **suspended}}
    entries = status.get(at)
    emptied: Any
    if isinstance(entries, list):
        emptied = [_zeroed(e, counts) for e in entries]
    elif isinstance(entries, dict):
        emptied = {name: _zeroed(e, counts) for name, e in entries.items()}
    else:
        return None
    return None if emptied == entries else {"status": {at: emptied}}


def _zeroed(entry: Any, counts: tuple[str, ...]) -> Any:
    """A replica's status entry with each of ``counts`` it shows above 0 set to 0."""
    if not isinstance(entry, dict):
        return entry
    return {**entry, **{c: 0 for c in counts if entry.get(c)}}


def _kind(adapter: Adapter) -> tuple[str, str]:
    return adapter.resource.api_version, adapter.resource.kind


def _shows(raw: dict[str, Any], type_: str) -> bool:
    """Whether a Workload copy shows the condition ``type_`` True."""
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (raw.get("status") or {}).get("conditions") or [])


def _now() -> int:
    return int(time.time() * 1000)
