"""Kueue's terminating-pod controller (FailureRecoveryPolicy, alpha, off): force pods stuck terminating on an
unreachable node to ``Failed``.

Which pod and when is :mod:`connectors.k8s.forceful_termination`; here it is carried out. The pods looked at are
those in the log that opted in and are being deleted (the log keeps every bound pod that is not terminal, with
its ``kueue.x-k8s.io/`` annotations and its deletion), each time it or the node it is bound to changes, and again
once its grace period ends (this process's clock, as Kueue's controller requeues on its own). Under the
Configuration recorded in the log: with the gate off nothing is written. The write reads the live pod first (for
its ``deletionGracePeriodSeconds``, which the log leaves out, its current version, and whether it is still opted
in, deleting and not terminal: the log may lag), then patches its status conditioned on that version; a pod gone
counts as done, a conflict is tried again after the retry delay (the change that caused it, another controller's
condition or finalizer, is not one the log keeps, so no newer version of the pod would bring it back), as Kueue's
reconciler is requeued on a failed patch. The pod then leaves the log (it is terminal), which is what TAS node failure
and a Job waiting for its replacement read. Kueue's Warning Event is not recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import msgspec
import structlog

from connectors.k8s import forceful_termination as ft
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.journal import Journal
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries, take_due, wake_after
from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections import gates

log = structlog.get_logger("kueue_es.k8s.failure_recovery")
PODS = BY_KIND["Pod"]


@dataclass
class RecoveryStats:
    failed: int = 0
    conflicts: int = 0
    errors: int = 0


def _now_ms() -> int:
    return int(time.time() * 1000)


class FailureRecovery:
    def __init__(self, client: KubeClient, journal: Journal, *, grace_ms: int = ft.GRACE_MS,
                 retry_s: float = 1.0, concurrency: int = 4) -> None:
        self.client = client
        self.journal = journal
        self.state = journal.mirror.state
        self.grace_ms = grace_ms
        self.concurrency = concurrency
        self.stats = RecoveryStats()
        self._retry = Retries(retry_s)
        self._on_node: dict[str, set[str]] = {}
        """Node name -> keys of the opted-in, deleting pods bound to it."""
        self._node_of: dict[str, str] = {}
        """Pod key -> the node it is indexed under."""
        self._due: dict[str, int] = {}
        """Pod key -> when (ms, wall clock) its grace period ends."""
        self._dirty: set[str] = set()
        self._gate_was: bool | None = None
        for key, pod in self.state.pods.items():
            self._index(key, pod)
        journal.mirror.listeners.append(self._on_applied)

    # --- what changed --------------------------------------------------------------------------------------

    def _index(self, key: str, pod: o.Pod | None) -> None:
        old = self._node_of.pop(key, None)
        if old is not None:
            self._on_node.get(old, set()).discard(key)
        if pod is None or not ft.opted_in(pod):
            self._due.pop(key, None)
            return
        self._node_of[key] = pod.spec.node_name
        self._on_node.setdefault(pod.spec.node_name, set()).add(key)
        self._dirty.add(key)

    def _on_applied(self, records: list[ev.Record]) -> None:
        for r in records:
            e = r.event
            if isinstance(e, ev.ObjectUpserted):
                if isinstance(e.obj, o.Pod):
                    self._index(e.key, e.obj)
                elif isinstance(e.obj, o.Node):
                    self._dirty.update(self._on_node.get(e.key, ()))
            elif isinstance(e, ev.ObjectDeleted) and e.kind == "Pod":
                self._index(e.key, None)

    def _take(self) -> set[str]:
        gate = self.state.gate(gates.FAILURE_RECOVERY_POLICY)
        if gate and not self._gate_was:  # turned on: every followed pod counts anew
            self._dirty.update(self._node_of)
        self._gate_was = gate
        keys = self._dirty | take_due(self._due, _now_ms()) | self._retry.due()
        self._dirty = set()
        return keys if gate else set()

    def _timeout(self) -> float | None:
        """Until the next grace period ends or the next retry is due (at most a second: the gate may turn on)."""
        return wake_after(self._due, self._retry, _now_ms())

    async def run(self) -> None:
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._timeout)

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what="forceful termination", stats=self.stats, log=log, pod=key)

    # --- one pod -------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        pod = self.state.pods.get(key)
        if pod is None:
            return
        found = ft.verdict(pod, self.state.nodes.get(pod.spec.node_name), _now_ms(), self.grace_ms)
        if found.action == ft.WAIT:
            assert found.at is not None
            self._due[key] = found.at
        elif found.action == ft.FAIL:
            await self._fail(key, pod)

    async def _fail(self, key: str, pod: o.Pod) -> None:
        m = pod.metadata
        try:
            live = msgspec.json.decode(await self.client.get(PODS, m.name, m.namespace))
        except NotFound:
            return
        live_meta = live.get("metadata") or {}
        if live_meta.get("uid") != m.uid:
            return  # another pod of that name: the log will show it
        if not ft.still_stuck(live):
            return  # terminal (or no longer opted in) since the log's view: its newer version brings it back
        text = ft.message(pod.spec.node_name, int(live_meta.get("deletionGracePeriodSeconds") or 0), self.grace_ms)
        body = ft.status_patch(live, text, format_time(_now_ms()))
        # a conflict: it changed, most likely in what the log does not keep (another controller's condition, a
        # finalizer): no newer version comes to the log, so it is looked at again later, on the live pod read anew
        if not await self._retry.written(self.client.patch(PODS, m.name, body, m.namespace, subresource="status"),
                                         key, self.stats):
            return
        self.stats.failed += 1
        log.info("forcefully terminated pod on unreachable node", pod=key, node=pod.spec.node_name)
