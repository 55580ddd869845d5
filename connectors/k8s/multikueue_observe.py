"""What a MultiKueue manager's connector appends of its workers and writes of them: a worker reached or lost
(``MultiKueueClusterObserved``), the conditions, topology placement and preemption gates of each copy
(``RemoteWorkloadObserved``), the managedBy or replicas of owners the log does not hold (``OwnerObserved``, read
again after :func:`owner_retry_after` when the read fails), and each MultiKueueCluster's ``Active`` condition as the
log says (:meth:`ObservedWorkers._write_cluster_status`).

:class:`ObservedWorkers` is a part of :class:`connectors.k8s.multikueue.MultiKueueConnector`, whose ``__init__``
sets the state it uses and which provides the pass's keys (``_pass_keys``), ``_config`` and ``_opening``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.clusterprofile import CONNECTION_FAILED
from connectors.k8s.errors import KubeError, NotFound
from connectors.k8s.framework_webhook import value_at
from connectors.k8s.multikueue_adapters import Adapter, adapter_of, group_size
from connectors.k8s.multikueue_copies import desired_on
from connectors.k8s.multikueue_worker import (
    CONNECTING,
    Worker,
    remote_conditions,
    remote_gates,
    topology_pod_sets,
    uid_of,
)
from connectors.k8s.resources import BY_KIND
from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from kueue_es.scheduler.multikueue import check_of
from projections.admissionchecks import MultiKueueWorld, cluster_active
from projections.cluster import ClusterState

if TYPE_CHECKING:
    from connectors.k8s.multikueue import MultiKueueStats, PassKeys

log = structlog.get_logger("kueue_es.k8s.multikueue")

OWNER_RETRY_BASE_S = 0.005
OWNER_RETRY_MAX_S = 1000.0
"""An owner that could not be read is read again after ``OWNER_RETRY_BASE_S`` doubled for each failure in a row,
at most ``OWNER_RETRY_MAX_S``: the per-item backoff with which Kueue's workload reconciler is requeued when it
returns the read's error (controller-runtime's default rate limiter: 5 ms doubling, capped at 1000 s)."""


def owner_retry_after(failures: int) -> float:
    """Seconds until an owner read that failed ``failures`` times in a row (at least once) is tried again."""
    return min(OWNER_RETRY_BASE_S * 2.0 ** min(failures - 1, 64), OWNER_RETRY_MAX_S)


@dataclass
class OwnerRetry:
    """An owner that could not be read: how many reads failed in a row, and when (the connector's clock) it is
    read again unless its workload moves first."""

    failures: int
    due: float


class ObservedWorkers:
    """The connector's observations of its workers (a base of :class:`connectors.k8s.multikueue.MultiKueueConnector`,
    which sets the state below in its ``__init__``)."""

    client: KubeClient
    state: ClusterState
    stats: MultiKueueStats
    workers: dict[str, Worker]
    custom: dict[tuple[str, str], Adapter]
    clock: Callable[[], float]
    append: Any
    _owners_unread: dict[str, OwnerRetry]
    _written_active: dict[str, tuple[str, int, tuple[str, str, str]]]

    async def _observe(self, keys: PassKeys | None = None) -> None:
        """Append what changed: a worker reached or lost, a copy's conditions (of the workloads ``keys`` names)."""
        keys = keys if keys is not None else self._pass_keys()
        events: list[ev.AnyEvent] = []
        now = _now()
        links = self.state.cluster_links
        for name in sorted(self.workers):
            w = self.workers[name]
            link = links.get(name)
            seen = (w.connected, w.reason if not w.connected else "", w.message if not w.connected else "")
            if w.reconnecting or (w.reason, w.message) == (CONNECTION_FAILED, CONNECTING):
                continue  # not tried yet, or being listed again after a cut watch: the link stays as it was
            if link is None or (link.connected, link.reason, link.message) != seen:
                events.append(ev.MultiKueueClusterObserved(time=now, key=name, connected=seen[0], reason=seen[1],
                                                           message=seen[2]))
        for name, names in keys.by_worker.items():
            w = self.workers[name]
            if not w.connected:
                continue  # what a worker not reached holds is not known: nothing is said of it
            for key in names:
                wl = self.state.workloads.get(key)
                if wl is None:
                    continue
                raw = w.workloads.get(key)
                if raw is not None and w.deleted.get(key) == uid_of(raw):
                    raw = None  # deleted: what the watch, lagging, still brings of it is not there (Kueue reads it)
                known = wl.remotes.get(name) if wl.remotes else None
                if known is None and name not in desired_on(self.state, wl):
                    continue  # a copy the log forgot (evicted) or never wanted there: deleted, not reported
                if raw is None:
                    if known is not None:
                        events.append(ev.RemoteWorkloadObserved(time=now, key=key, uid=wl.uid, cluster=name,
                                                                exists=False))
                    continue
                if known is None and (raw.get("metadata") or {}).get("deletionTimestamp"):
                    continue  # going away: not the workload's new copy, nor is one made over it until it is gone
                conds, placed, gates_ = remote_conditions(raw), topology_pod_sets(raw), remote_gates(raw)
                if (known is None or list(known.conditions) != conds or list(known.topology_pod_sets) != placed
                        or (list(known.preemption_gates) != gates_ and not self._opening(known, gates_))):
                    events.append(ev.RemoteWorkloadObserved(time=now, key=key, uid=wl.uid, cluster=name,
                                                            conditions=conds, topology_pod_sets=placed,
                                                            preemption_gates=gates_))
        events += await self._observe_owners(now, keys.owners)
        if events:
            self.stats.observed += len(events)
            await self.append(events)

    async def _observe_owners(self, now: int, keys: list[str]) -> list[ev.AnyEvent]:
        """``OwnerObserved`` for each workload of ``keys`` behind a MultiKueue check whose owner the log does not
        hold and whose managedBy it does not know yet (read once: the field is immutable in each of those kinds),
        quota or not, as Kueue's MultiKueue controller reads it before it looks at quota (a pending workload whose
        owner is not handed to MultiKueue is rejected before it reserves); a group's size only once its workload
        holds quota, as Kueue reads it when it nominates. An owner that cannot be read (gone, or the read refused
        or failed) holds back its own workload only, the others observed meanwhile, as Kueue reconciles each
        workload apart: read again once its backoff (:func:`owner_retry_after`, counting the failures in a row) is
        over, or at once when its workload moves, as an event requeues Kueue's reconciler at once."""
        events: list[ev.AnyEvent] = []
        config = self._config()
        for key in keys:
            retry = self._owners_unread.pop(key, None)
            wl = self.state.workloads.get(key)
            if wl is None:
                continue
            adapter = adapter_of(wl, config, self.custom)
            if adapter is None or adapter.in_log or check_of(self.state, wl) is None:
                continue
            if adapter.grouped:  # its replicas, read again whenever its workload moves until it is on a worker
                if not wl.reserving or wl.cluster_name or wl.component_index is None:
                    continue
            elif wl.owner_managed_by is not None or not adapter.managed_by_at:
                continue
            try:
                owner = msgspec.json.decode(await self.client.get(adapter.resource, wl.owner[2], wl.namespace))
                replicas = group_size(owner) if adapter.grouped else None
            except KubeError as exc:  # Kueue's read fails and is retried: nothing is decided meanwhile
                failures = (retry.failures if retry is not None else 0) + 1
                after = owner_retry_after(failures)
                self._owners_unread[key] = OwnerRetry(failures, self.clock() + after)
                if not isinstance(exc, NotFound):
                    self.stats.errors += 1
                    log.warning("MultiKueue owner not read, will retry", workload=key, kind=adapter.resource.kind,
                                owner=wl.owner[2], error=str(exc), retry_after_s=after)
                continue
            if adapter.grouped:
                if replicas != wl.owner_replicas:
                    events.append(ev.OwnerObserved(time=now, key=key, uid=wl.uid, replicas=replicas))
                continue
            managed_by = value_at(owner, adapter.managed_by_at) or ""
            events.append(ev.OwnerObserved(time=now, key=key, uid=wl.uid, managed_by=managed_by))
        return events

    async def _write_cluster_status(self) -> None:
        """Each MultiKueueCluster's Active condition as the log says (:func:`cluster_active`). A write that fails
        (refused, invalid, the apiserver erring) is counted and tried again on the next pass, the other clusters
        and the copies served meanwhile: Kueue's cluster reconciler runs apart from its workload reconciler."""
        clusters = self.state.multikueue_clusters
        for name in [n for n in self._written_active if n not in clusters]:
            del self._written_active[name]
        world = MultiKueueWorld(self.state.multikueue_configs, clusters, self.state.cluster_links)
        for name in sorted(clusters):
            want = cluster_active(name, world)
            cluster = clusters[name]
            written = (cluster.metadata.uid, cluster.metadata.generation, want) if want is not None else None
            if written is None or self._written_active.get(name) == written:
                continue
            conditions = desired_cluster_active(cluster, want, _now())
            if conditions is None:
                self._written_active[name] = written
                continue
            try:
                await self.client.patch(BY_KIND["MultiKueueCluster"], name,
                                        {"status": {"conditions": conditions}}, subresource="status")
            except NotFound:
                continue
            except KubeError as exc:
                self.stats.errors += 1
                log.warning("MultiKueueCluster Active condition not written, will retry", cluster=name,
                            error=str(exc))
                continue
            self._written_active[name] = written


def desired_cluster_active(cluster: o.MultiKueueCluster, want: tuple[str, str, str], now_ms: int
                           ) -> list[dict[str, Any]] | None:
    """The cluster's conditions with ``Active`` as ``want`` (status, reason, message: :func:`cluster_active`)
    says at the cluster's generation, the others kept, its lastTransitionTime moved only when the status flips;
    None when it shows that already. A spec edit that leaves the connection as it was still has the condition
    written, at the new generation (Kueue #15962, in release-0.18 and 0.19: its cluster controller no longer takes
    a condition of an older generation for up to date)."""
    current = next((c for c in cluster.status.conditions if c.type == "Active"), None)
    if current is not None and (current.status, current.reason, current.message) == want \
            and current.observed_generation == cluster.metadata.generation:
        return None
    ltt = current.last_transition_time if current is not None and current.status == want[0] else format_time(now_ms)
    others = [msgspec.to_builtins(c) for c in cluster.status.conditions if c.type != "Active"]
    cond = {"type": "Active", "status": want[0], "reason": want[1], "message": want[2], "lastTransitionTime": ltt,
            "observedGeneration": cluster.metadata.generation}
    return [*others, cond]


def _now() -> int:
    return int(time.time() * 1000)
