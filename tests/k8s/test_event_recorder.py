"""The Event recorder against a scripted client: what it creates, and how it fails (bounded, never blocking).

tests/integration/kube/test_events.py runs it against the real apiserver."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from connectors.k8s.errors import AlreadyExists, Forbidden, Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.recorder import EventRecorder
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.timefmt import format_time, parse_time

T0 = parse_time("2026-01-01T00:00:00Z")
WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1",
                                      creation_timestamp=format_time(T0)),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))


class ScriptedClient:
    """Answers each create with the next scripted outcome (an exception to raise, or None: created)."""

    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes = list(outcomes)
        self.created: list[dict[str, Any]] = []
        self.calls = 0

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        self.calls += 1
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        assert resource.plural == "events" and namespace == body["metadata"]["namespace"]
        self.created.append(body)
        return b"{}"


async def _journal(applied_at: int = T0 + 3_000) -> tuple[LocalJournal, int]:
    journal = LocalJournal(MemoryLog(), Mirror())
    offsets = await journal.append([
        ev.ObjectUpserted(time=T0, key="ns/wl", uid="wl-uid", obj=WL),
        ev.QuotaReserved(time=T0 + 2_000, key="ns/wl", uid="wl-uid", admission=o.Admission(cluster_queue="cq"),
                         cycle=1, input=0),
        ev.WorkloadAdmitted(time=T0 + 2_000, key="ns/wl", uid="wl-uid", cycle=1, input=0),
    ])
    await journal.append([ev.DecisionApplied(time=applied_at, key="ns/wl", uid="wl-uid", decision=off)
                          for off in offsets[1:]])
    return journal, offsets[1]


async def _run(recorder: EventRecorder, until: Any, timeout: float = 5.0) -> None:
    task = asyncio.create_task(recorder.run())
    try:
        async with asyncio.timeout(timeout):
            while not until():
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_creates_kueues_events_stamped_with_the_outcome_time() -> None:
    journal, first = await _journal()
    client = ScriptedClient()
    recorder = EventRecorder(client, journal, instance="replica-0", clock=lambda: T0 / 1000 + 10)  # type: ignore[arg-type]
    await _run(recorder, lambda: not journal.mirror.kube_events.ready)
    assert recorder.stats.created == 2
    quota, admitted = client.created
    assert quota["metadata"]["namespace"] == "ns" and quota["metadata"]["name"].startswith("wl.")
    assert quota["involvedObject"] == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                       "namespace": "ns", "name": "wl", "uid": "wl-uid"}
    assert (quota["type"], quota["reason"], quota["action"]) == ("Normal", "QuotaReserved", "QuotaReserved")
    assert quota["message"] == "Quota reserved in ClusterQueue cq, wait time since queued was 2s"
    assert quota["reportingComponent"] == "kueue-admission"
    assert quota["reportingInstance"] == "kueue-admission-replica-0"
    # eventTime: the outcome's time in the log; decisions carried out in the same ms keep the log's order
    assert quota["eventTime"] == "2026-01-01T00:00:03.000000Z"
    assert admitted["eventTime"] == "2026-01-01T00:00:03.000004Z"
    # as Kueue's events.k8s.io recorder: none of the deprecated fields
    assert not {"source", "firstTimestamp", "lastTimestamp", "count", "series"} & set(quota)
    assert admitted["reason"] == "Admitted"
    assert admitted["message"] == "Admitted by ClusterQueue cq, wait time since reservation was 0s"
    assert quota["metadata"]["name"] != admitted["metadata"]["name"]


@pytest.mark.asyncio
async def test_existing_events_are_done_and_failures_are_retried_or_dropped() -> None:
    journal, first = await _journal()
    ledger = journal.mirror.kube_events
    # the first decision: one 503 (retried), then its Event exists already (created before a restart);
    # the second: refused (no RBAC), which a retry cannot change: dropped at once
    client = ScriptedClient(Unavailable("create events: 503"), Forbidden("create events: 403", 403),
                            AlreadyExists("exists", 409))
    recorder = EventRecorder(client, journal, instance="r", retry_s=0.01,  # type: ignore[arg-type]
                             concurrency=1, clock=lambda: T0 / 1000 + 10)
    await _run(recorder, lambda: not ledger.ready)
    assert (recorder.stats.existing, recorder.stats.created, recorder.stats.dropped) == (1, 0, 1)
    assert recorder.stats.errors == 2
    assert client.calls == 3


@pytest.mark.asyncio
async def test_an_apiserver_that_stays_unavailable_costs_a_bounded_number_of_tries() -> None:
    journal, _ = await _journal()
    ledger = journal.mirror.kube_events
    client = ScriptedClient(*[Unavailable("create events: 503")] * 100)
    recorder = EventRecorder(client, journal, instance="r", attempts=3, retry_s=0.01,  # type: ignore[arg-type]
                             clock=lambda: T0 / 1000 + 10)
    await _run(recorder, lambda: not ledger.ready)
    assert client.calls == 6, "three tries for each of the two decisions"
    assert recorder.stats.dropped == 2 and recorder.stats.created == 0


@pytest.mark.asyncio
async def test_decisions_carried_out_longer_ago_than_the_window_are_not_recorded() -> None:
    journal, _ = await _journal()
    client = ScriptedClient()
    ledger = journal.mirror.kube_events
    recorder = EventRecorder(client, journal, instance="r",  # type: ignore[arg-type]
                             clock=lambda: (T0 + 3_000 + ledger.window_ms + 1) / 1000)
    await _run(recorder, lambda: not ledger.ready)
    assert client.calls == 0 and recorder.stats.stale == 2
