"""The ``kueue.x-k8s.io/resource-in-use`` finalizer on ClusterQueues, ResourceFlavors, AdmissionChecks and
Topologies, as Kueue's controllers keep it.

Level-triggered over the mirror: for every object the mirror marks (it changed, or something it used to be used
by changed while it is being deleted), :func:`projections.in_use.finalizer_action` says whether to add the
finalizer (the object lives without it) or remove it (it is being deleted and nothing uses it any more — a
ClusterQueue no workload reserves quota in, a flavor no ClusterQueue lists, ...). The change is one merge patch
of ``metadata.finalizers`` conditioned on the resourceVersion it was computed from; a conflict or a 404 waits
for the watch to bring the newer object, which marks it again.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import Conflict, NotFound
from connectors.k8s.journal import Journal
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries
from projections.in_use import FINALIZER, KINDS, finalizer_action, objects, users

log = structlog.get_logger("kueue_es.k8s.finalizers")


@dataclass
class FinalizerStats:
    added: int = 0
    removed: int = 0
    conflicts: int = 0
    errors: int = 0


class Finalizers:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0, concurrency: int = 8) -> None:
        self.client = client
        self.journal = journal
        self.mirror = journal.mirror
        self.concurrency = concurrency
        self.stats = FinalizerStats()
        self._retry = Retries(retry_s)
        self._done: dict[str, str] = {}
        """Key -> resourceVersion we last patched, so a mirror that has not caught up does not repeat it."""

    async def run(self) -> None:
        # everything the log holds once: objects created while no replica ran lack the finalizer
        state = self.mirror.state
        self.mirror.dirty_finalizers.update(f"{kind}/{name}" for kind in KINDS
                                            for name in objects(state, kind))
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _take(self) -> set[str]:
        keys = self.mirror.dirty_finalizers | self._retry.due()
        self.mirror.dirty_finalizers = set()
        return keys

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what="finalizer update", stats=self.stats, log=log, object=key)

    async def sync(self, key: str) -> None:
        kind, _, name = key.partition("/")
        obj = objects(self.mirror.state, kind).get(name)
        if obj is None:
            self._done.pop(key, None)
            return
        rv = obj.metadata.resource_version
        if self._done.get(key) == rv:
            return
        action = finalizer_action(self.mirror.state, kind, obj)
        if action is None:
            return
        finalizers = [f for f in obj.metadata.finalizers if f != FINALIZER]
        if action == "add":
            finalizers.append(FINALIZER)
        try:
            await self.client.patch(BY_KIND[kind], name, {
                "metadata": {"uid": obj.metadata.uid, "resourceVersion": rv, "finalizers": finalizers or None}})
        except Conflict:
            self.stats.conflicts += 1
            return
        except NotFound:
            return
        self._done[key] = rv
        if action == "add":
            self.stats.added += 1
            log.debug("finalizer added", object=key)
        else:
            self.stats.removed += 1
            log.info("finalizer removed: no longer in use", object=key)

    def in_use(self, key: str) -> list[str]:
        """What keeps ``key``'s finalizer on (for logs and tests)."""
        kind, _, name = key.partition("/")
        return users(self.mirror.state, kind, name)
