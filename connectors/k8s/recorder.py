"""Create the Kubernetes Events of the decisions the connector carried out, as Kueue's event recorders would.

The mirror's :class:`connectors.k8s.decision_events.EventLedger` says which decisions reached the cluster (their
``DecisionApplied``: a status write, a deletion, a ProvisioningRequest) and which Events Kueue records for each,
and what the job integration did to Jobs (:mod:`connectors.k8s.job_events`: the Workload created, the Job started
or stopped, its Workload finished). Here every such decision or action gets its Events created as core/v1
Events, in order, up to ``concurrency`` at a time, each stamped with its time in the log (the decision's outcome,
the action's record; never this process's clock), reported by Kueue's component (``reportingComponent``) and
named by :func:`event_name`:

* idempotent: a restart folds the log again and offers every decision of the last window once more; an Event
  that exists already (409 AlreadyExists) is done, so nothing is recorded twice. Kubernetes' series
  aggregation is not used: each decision's Event is one Event;
* never in the way: this runs beside the status writer and the other writers, and a failure only delays or
  loses an Event. A create that may succeed later (no answer, 5xx, 429) is retried with a doubling delay,
  ``attempts`` times in all; then, or at once for a refusal (forbidden, invalid, namespace gone), the decision's
  Events are dropped with a warning;
* not stale: a decision carried out longer than the ledger's window ago (wall clock; the apiserver's default
  event TTL) is not recorded — its Event would have expired already.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.decision_events import Before, KubeEvent, Ready, event_name, kueue_events
from connectors.k8s.errors import AlreadyExists, KubeError
from connectors.k8s.job_events import job_events
from connectors.k8s.journal import Journal
from connectors.k8s.resources import Resource
from connectors.k8s.workers import KeyedWorkers, Retries
from events import schema as ev

log = structlog.get_logger("kueue_es.k8s.recorder")
EVENTS = Resource("Event", "", "v1", "events", True)
"""Written, never watched."""
MAX_INSTANCE = 128
"""The apiserver's limit on ``reportingInstance``."""


@dataclass
class RecorderStats:
    created: int = 0
    existing: int = 0
    """Events found already there (created before a restart): not created again."""
    dropped: int = 0
    """Decisions whose Events were given up on (refused, or ``attempts`` tries failed)."""
    stale: int = 0
    """Decisions whose Events were not created (nor written) because they were carried out longer than the
    window ago."""
    errors: int = 0


def micro_time(us: int) -> str:
    """Kubernetes' MicroTime: RFC 3339 with six fractional digits, UTC."""
    return datetime.fromtimestamp(us // 1_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{us % 1_000_000:06d}Z"


def events_of(entry: Ready) -> tuple[KubeEvent, ...]:
    """The Events of a ready entry: a decision's (Kueue's scheduler and controllers), or a Job's (its reconciler)."""
    if isinstance(entry.before, Before):
        return kueue_events(entry.event, entry.before)  # type: ignore[arg-type]
    return job_events(entry.event, entry.before)


def event_body(e: KubeEvent, decision: ev.AnyEvent, offset: int, index: int, micros: int,
               instance: str) -> dict[str, Any]:
    """The core/v1 Event for the ``index``-th Event of the record at ``offset``, at ``micros`` (µs): what Kueue's
    recorder (client-go's events.k8s.io one) writes — eventTime, action, reportingComponent/Instance, no
    deprecated source/first/lastTimestamp/count (clients show eventTime where those are empty)."""
    obj = e.involved
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(e, decision, offset, index), "namespace": obj.namespace},
        "involvedObject": {"apiVersion": obj.api_version, "kind": obj.kind, "namespace": obj.namespace,
                           "name": obj.name, "uid": obj.uid},
        "type": e.type,
        "reason": e.reason,
        "action": e.action,
        "message": e.message,
        "reportingComponent": e.component,
        "reportingInstance": f"{e.component}-{instance}"[:MAX_INSTANCE],
        "eventTime": micro_time(micros + index),
    }


class EventRecorder:
    def __init__(self, client: KubeClient, journal: Journal, *, instance: str = "", attempts: int = 5,
                 retry_s: float = 1.0, concurrency: int = 8, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.journal = journal
        self.ledger = journal.mirror.kube_events
        self.instance = instance or socket.gethostname()
        self.attempts = attempts
        self.concurrency = concurrency
        self.clock = clock
        self.stats = RecorderStats()
        self._retry = Retries(retry_s)
        self._failures: dict[int, int] = {}

    async def run(self) -> None:
        """Record every ready decision's Events, forever (run it as a task)."""
        await KeyedWorkers(self.record_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _take(self) -> set[str]:
        # zero-padded: the workers take keys in sorted order, which is then the log's order
        keys = {f"{off:015d}" for off in self.ledger.dirty} | self._retry.due()
        self.ledger.dirty = set()
        return keys

    async def record_guarded(self, key: str) -> None:
        offset = int(key)
        entry = self.ledger.ready.get(offset)
        if entry is None:
            self._failures.pop(offset, None)
            return  # done, or expired from the window
        try:
            await self.record(offset, entry)
        except Exception as exc:  # noqa: BLE001 - an Event is never worth stopping for
            self.stats.errors += 1
            failures = self._failures[offset] = self._failures.get(offset, 0) + 1
            fields = {"decision": offset, "kind": type(entry.event).__name__, "object": entry.event.key,
                      "error": str(exc)}
            if not isinstance(exc, KubeError):
                log.exception("recording events crashed, dropped", **fields)
            elif not exc.retriable or failures >= self.attempts:
                # refused (forbidden, invalid, namespace gone): the same request would be refused again
                log.warning("recording events failed, dropped", attempts=failures, **fields)
            else:
                log.info("recording events failed, will retry", attempt=failures, **fields)
                self._retry.later(key, 2 ** (failures - 1))
                return
            self.stats.dropped += 1
            self._done(offset)
            return
        self._done(offset)

    async def record(self, offset: int, entry: Ready) -> None:
        """Create the decision's (or the Job action's) Events, in order (an existing one is done)."""
        if entry.applied < self.clock() * 1000 - self.ledger.window_ms:
            self.stats.stale += 1
            return
        for i, e in enumerate(events_of(entry)):
            body = event_body(e, entry.event, offset, i, entry.micros, self.instance)
            try:
                await self.client.create(EVENTS, body, e.involved.namespace)
            except AlreadyExists:
                self.stats.existing += 1
                continue
            self.stats.created += 1

    def _done(self, offset: int) -> None:
        self.ledger.ready.pop(offset, None)
        self._failures.pop(offset, None)
