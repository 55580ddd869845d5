"""MultiKueueManagerQuotaAutomation on a manager: the I/O of Kueue's MultiKueue ClusterQueue controller.

What is decided is decided by :mod:`projections.manager_quota` from the log; this module observes and applies:

* **observe.** Each worker some MultiKueueConfig asking for ``quotaManagement: Automated`` lists, once the MultiKueue
  connector has it connected (its client: :attr:`connectors.k8s.multikueue.MultiKueueConnector.workers`), has its
  LocalQueues and ClusterQueues listed on every pass; what they are (which ClusterQueue each LocalQueue feeds, each
  ClusterQueue's ``spec.resourceGroups``) is appended as ``WorkerQueuesObserved`` whenever it differs from what the
  log holds. A ClusterQueue whose groups do not parse (a quantity the worker's apiserver would have refused) is
  left out. No worker is read while the gate or MultiKueue is off, or no config asks for it.
* **apply.** A manager ClusterQueue whose quota is automated gets its single flavor's resources written into its
  ``spec.resourceGroups`` (a JSON merge patch conditioned on its uid and resourceVersion, as Kueue's ``Update``),
  when they differ from its spec in the log; the watch brings the ClusterQueue back, and the scheduler takes the
  quota from there. A conflict is tried again on the next pass, on the version the log then holds. The condition
  is written with the ClusterQueue's status (:class:`connectors.k8s.queues.QueueStatusWriter`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
import structlog

from connectors.k8s.errors import Conflict, KubeError, NotFound
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.resources import BY_KIND
from events import objects as o
from events import schema as ev
from events.quantity import QuantityError, to_int
from projections import manager_quota

log = structlog.get_logger("kueue_es.k8s.manager_quota")


class _Queue(msgspec.Struct, forbid_unknown_fields=False):
    metadata: o.ObjectMeta
    spec: dict[str, Any] = {}


def local_queues(items: list[msgspec.Raw]) -> dict[str, str]:
    """``namespace/name`` -> ClusterQueue, of a worker's listed LocalQueues."""
    out: dict[str, str] = {}
    for raw in items:
        lq = msgspec.json.decode(raw, type=_Queue)
        out[f"{lq.metadata.namespace}/{lq.metadata.name}"] = str(lq.spec.get("clusterQueue") or "")
    return out


def cluster_queues(items: list[msgspec.Raw]) -> dict[str, list[o.ResourceGroup]]:
    """ClusterQueue -> its ``spec.resourceGroups``, of a worker's listed ClusterQueues (one whose groups do not
    parse left out)."""
    out: dict[str, list[o.ResourceGroup]] = {}
    for raw in items:
        cq = msgspec.json.decode(raw, type=_Queue)
        try:
            groups = msgspec.convert(cq.spec.get("resourceGroups") or [], list[o.ResourceGroup], strict=False)
            for rq in (rq for rg in groups for fq in rg.flavors for rq in fq.resources):
                to_int(rq.name, rq.nominal_quota)
        except (msgspec.ValidationError, QuantityError):
            log.info("worker ClusterQueue's quotas do not parse, left out", cluster_queue=cq.metadata.name)
            continue
        out[cq.metadata.name] = groups
    return out


def automated_workers(state: Any) -> list[str]:
    """The workers listed by a MultiKueueConfig asking for ``quotaManagement: Automated``, sorted."""
    return sorted({c for cfg in state.multikueue_configs.values()
                   if cfg.spec.quota_management == manager_quota.AUTOMATED for c in cfg.spec.clusters})


class ManagerQuotaConnector:
    def __init__(self, multikueue: MultiKueueConnector, *, period_s: float = 1.0) -> None:
        """The manager's client, the journal and the appender are the MultiKueue connector's, whose workers'
        clients this reads through."""
        self.multikueue = multikueue
        self.period_s = period_s
        self.writes = 0
        self._written: dict[str, tuple[str, str]] = {}
        """ClusterQueue -> (uid, resourceVersion) it had when its quota was last written: not written again until
        the log shows another version of it."""

    async def run(self) -> None:
        signal = self.multikueue.journal.subscribe()
        next_observe = 0.0
        while True:
            now = asyncio.get_running_loop().time()
            observe = now >= next_observe
            if observe:
                next_observe = now + self.period_s
            try:
                await self.sync(observe=observe)
            except KubeError as exc:
                log.warning("quota automation pass failed, will retry", error=str(exc))
            await signal.wait(max(0.0, next_observe - asyncio.get_running_loop().time()))

    async def sync(self, *, observe: bool = True) -> None:
        """One pass: the workers' queues listed (``observe``, at most once per ``period_s`` when running), the
        quotas written. Nothing while the gate or MultiKueue is off."""
        if not manager_quota.enabled(self.multikueue.state):
            return
        if observe:
            await self.observe()
        await self.apply()

    async def observe(self) -> None:
        """Append what changed of the queues of each worker reached that an Automated config lists."""
        events: list[ev.AnyEvent] = []
        state = self.multikueue.state
        for name in automated_workers(state):
            w = self.multikueue.workers.get(name)
            if w is None or not w.connected or w.client is None:
                continue  # a worker not reached counts for nothing (the pure side reads its link)
            try:
                lqs = local_queues((await w.client.list(BY_KIND["LocalQueue"])).items)
                cqs = cluster_queues((await w.client.list(BY_KIND["ClusterQueue"])).items)
            except KubeError as exc:
                log.info("worker queues not listed, will retry", worker=name, error=str(exc))
                continue
            known = state.worker_queues.get(name)
            if known is None or known.local_queues != lqs or known.cluster_queues != cqs:
                events.append(ev.WorkerQueuesObserved(time=int(time.time() * 1000), key=name, local_queues=lqs,
                                                      cluster_queues=cqs))
        if events:
            await self.multikueue.append(events)

    async def apply(self) -> None:
        """Write the automated quotas into the spec of each manager ClusterQueue that does not have them yet."""
        state = self.multikueue.state
        world = manager_quota.world_of(state)
        for name in sorted(state.cluster_queues):
            cq = state.cluster_queues[name]
            m = cq.metadata
            if m.deletion_timestamp or self._written.get(name) == (m.uid, m.resource_version):
                continue
            spec = manager_quota.automated_spec(cq, manager_quota.outcome(cq, world))
            if spec is None:
                continue
            body = {"metadata": {"uid": m.uid, "resourceVersion": m.resource_version},
                    "spec": {"resourceGroups": msgspec.to_builtins(spec.resource_groups)}}
            try:
                await self.multikueue.client.patch(BY_KIND["ClusterQueue"], name, body)
            except (Conflict, NotFound):
                continue  # the watch brings the newer version (or the deletion); the next pass looks again
            self._written[name] = (m.uid, m.resource_version)
            self.writes += 1
            log.info("manager ClusterQueue quota written from its workers", cluster_queue=name)
