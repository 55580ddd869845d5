"""A deterministic workload for scheduler runs against Kafka, and an in-process reference run to compare with.

The "cluster" (a driver in the test process) appends observed events in lockstep with the scheduler: it folds
the committed log, and only when the scheduler has nothing more to say about it (``decide(state) == []`` at
the end of the log) does it append its next batch — new workloads, and ``WorkloadFinished`` for every
workload admitted so far. What it appends depends only on the state, so the committed log of a run is a
function of the scenario alone, however the scheduler processes are killed, restarted or replaced, and
however the broker behaves: the same events in the same order as :func:`reference_run`, which does the same
with a :class:`MemoryLog` and the scheduler in-process. Offsets differ (Kafka's are not dense, catch-up
markers and aborted transactions occupy some), so runs are compared with offsets renumbered densely
(:func:`densify`). The tests start the scheduler once the first observed batch is in, and it records its Kueue
Configuration then, before deciding; the reference run does the same, and :func:`densify` blanks the record's
writer (each scheduler process names itself).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from fixtures.eventgen import T0, cluster_queue, cohort, flavor, local_queue, namespace, upsert, workload

from connectors.kafka.errors import KafkaLogError
from connectors.kafka.log import KafkaLog, batch_records, is_control, reader_kwargs
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from events.log import MemoryLog
from kueue_es.scheduler import DEFAULT, decide
from kueue_es.scheduler.config_record import DEFAULT_DOCUMENT, pending
from projections import snapshot
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, FINISHED

NS = "team"


@dataclass(frozen=True)
class Scenario:
    workloads: int = 5000
    per_batch: int = 250
    cluster_queues: int = 20
    cohorts: int = 4
    quota_cpu: int = 8

    def setup(self) -> list[ev.AnyEvent]:
        objs = [namespace(NS), flavor("f0")]
        objs += [cohort(f"co{i}") for i in range(self.cohorts)]
        objs += [cluster_queue(f"cq{i}", cohort=f"co{i % self.cohorts}", quotas={"f0": self.quota_cpu})
                 for i in range(self.cluster_queues)]
        objs += [local_queue(NS, f"lq{i}", f"cq{i}") for i in range(self.cluster_queues)]
        return [upsert(o, T0) for o in objs]

    def batches(self) -> int:
        return -(-self.workloads // self.per_batch)

    def next_batch(self, k: int, state: ClusterState) -> list[ev.AnyEvent] | None:
        """Observed batch number ``k`` (from 0) given the folded state; None when everything is finished."""
        t = T0 + (k + 1) * 1000
        done = sorted(key for key, wl in state.workloads.items() if wl.phase == ADMITTED)
        out: list[ev.AnyEvent] = [ev.WorkloadFinished(time=t, key=key, uid=state.workloads[key].uid,
                                                      id=f"fin-{key}") for key in done]
        first = k * self.per_batch
        for i in range(first, min(first + self.per_batch, self.workloads)):
            wl = workload(NS, f"w{i:05d}", queue=f"lq{i % self.cluster_queues}", cpu=str(1 + (i * 7) % 4),
                          created=t)
            out.append(upsert(wl, t, id=f"wl-{i}"))
        if not out:
            if all(wl.phase == FINISHED for wl in state.workloads.values()):
                return None
            out = [ev.ClockTicked(time=t, id=f"tick-{k}")]
        return out


# --- comparing runs ------------------------------------------------------------------------------------------


def densify(records: list[ev.Record]) -> list[ev.Record]:
    """The same events at offsets 0, 1, 2, ...; every decision's ``input`` renumbered the same way; configuration
    records without their writer."""
    index = {r.offset: i for i, r in enumerate(records)}
    index[-1] = -1
    out = []
    for i, r in enumerate(records):
        e = r.event
        if isinstance(e, ev.Decision):
            e = msgspec.structs.replace(e, input=index[e.input])
        elif isinstance(e, ev.ConfigRecorded):
            e = msgspec.structs.replace(e, writer="")
        out.append(ev.Record(i, e))
    return out


def fold(records: list[ev.Record]) -> ClusterState:
    state = ClusterState()
    for r in records:
        state.apply(r)
    return state


@dataclass
class RunResult:
    records: list[ev.Record]
    """Every committed event, in log order, with its offset."""
    batches: list[list[ev.Record]] = field(default_factory=list)
    observed_batches: int = 0
    seconds: float = 0.0

    def dense_digest(self) -> str:
        return snapshot.digest(fold(densify(self.records)))


async def reference_run(scenario: Scenario) -> RunResult:
    """The scenario with the scheduler in-process on a MemoryLog (settle after every observed batch)."""
    log = MemoryLog()
    state = ClusterState()
    batches: list[list[ev.Record]] = []

    async def append(events: list[ev.AnyEvent]) -> None:
        offsets = await log.append(events)
        recs = [ev.Record(o, e) for o, e in zip(offsets, events, strict=True)]
        for r in recs:
            state.apply(r)
        batches.append(recs)

    await append(scenario.setup())
    k = 0
    while True:
        while d := decide(state, DEFAULT):
            await append(d)
        nxt = scenario.next_batch(k, state)
        if nxt is None:
            break
        await append(nxt)
        k += 1
        if k == 1:  # where the tests start the scheduler: it records its configuration first
            await append(pending(state, DEFAULT_DOCUMENT, writer=""))
    return RunResult([r for b in batches for r in b], batches, k)


def check_exactly_once(result: RunResult, scenario: Scenario) -> None:
    """Every workload reserved, admitted and finished exactly once; the configuration recorded once, before the
    first decision; every decision batch decided on the state right before it (its ``input`` is the offset of
    the event just before the batch)."""
    configs = [r.offset for r in result.records if isinstance(r.event, ev.ConfigRecorded)]
    first = min(r.offset for r in result.records if isinstance(r.event, ev.Decision))
    assert len(configs) == 1 and configs[0] < first, f"configuration records at {configs}, first decision at {first}"
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for r in result.records:
        if isinstance(r.event, (ev.QuotaReserved, ev.WorkloadAdmitted, ev.WorkloadFinished)):
            counts[type(r.event).__name__][r.event.key] += 1
    keys = {f"{NS}/w{i:05d}" for i in range(scenario.workloads)}
    for kind in ("QuotaReserved", "WorkloadAdmitted", "WorkloadFinished"):
        assert set(counts[kind]) == keys, f"{kind}: {len(keys - set(counts[kind]))} workloads never got one"
        dup = {k: n for k, n in counts[kind].items() if n != 1}
        assert not dup, f"{kind} more than once: {sorted(dup.items())[:5]}"
    prev = -1
    for batch in result.batches:
        for r in batch:
            if isinstance(r.event, ev.Decision):
                assert r.event.input == prev, (
                    f"decision at offset {r.offset} was decided at input {r.event.input}, but the event before "
                    f"its batch is at {prev}")
        prev = batch[-1].offset


# --- the Kafka driver ----------------------------------------------------------------------------------------


class LockstepDriver:
    """Appends the scenario's observed batches to a Kafka log in lockstep with whatever scheduler runs."""

    def __init__(self, settings: KafkaSettings, scenario: Scenario) -> None:
        self.settings = settings
        self.scenario = scenario
        self.tp = TopicPartition(settings.topic, 0)
        self.state = ClusterState()
        self.records: list[ev.Record] = []
        self.batches: list[list[ev.Record]] = []
        self.observed = 0
        self.done = asyncio.Event()
        self.errors = 0
        """Broker errors the driver rode out (failed appends, unreachable end offsets)."""
        self.decision_seen: Callable[[ev.Record, float], None] | None = None
        """Called (from the driver's task) with every decision record and the wall time (ms) it was read."""

    async def run(self, on_batch: Callable[[int], Awaitable[None]] | None = None) -> RunResult:
        started = time.monotonic()
        log = await KafkaLog.open(self.settings)
        consumer = self.consumer = AIOKafkaConsumer(**reader_kwargs(self.settings))
        await consumer.start()
        try:
            consumer.assign([self.tp])
            consumer.seek(self.tp, 0)
            await self._append(log, self.scenario.setup())
            k = 0
            quiet_at = None  # state.offset at which decide() was last found empty
            while True:
                if not await self._pump():
                    continue
                if quiet_at != self.state.offset:
                    if decide(self.state, DEFAULT):
                        continue  # the scheduler has work to do
                    quiet_at = self.state.offset
                nxt = self.scenario.next_batch(k, self.state)
                if nxt is None:
                    break
                await self._append(log, nxt)
                k += 1
                self.observed = k
                if on_batch is not None:
                    await on_batch(k)
        finally:
            self.done.set()
            await consumer.stop()
            await log.close()
        return RunResult(self.records, self.batches, k, time.monotonic() - started)

    async def _pump(self) -> bool:
        """Fold what the next fetch brings; True when everything committed so far has been folded."""
        fetched = await self.consumer.getmany(self.tp, timeout_ms=50)
        now = time.time() * 1000
        for rec in fetched.get(self.tp, ()):
            if is_control(rec.headers):
                continue
            batch = batch_records(rec.value, rec.offset, 0, None)
            for r in batch:
                self.state.apply(r)
                if self.decision_seen is not None and isinstance(r.event, ev.Decision):
                    self.decision_seen(r, now)
            self.records.extend(batch)
            self.batches.append(batch)
        try:
            end = (await asyncio.wait_for(self.consumer.end_offsets([self.tp]), 5))[self.tp]
        except (KafkaError, TimeoutError):  # the broker is away: try again
            self.errors += 1
            await asyncio.sleep(0.2)
            return False
        return await self.consumer.position(self.tp) >= end

    async def _append(self, log: KafkaLog, events: list[ev.AnyEvent]) -> None:
        """Append once: after an error (the broker went away mid-append) look whether the batch was stored
        before trying again — an idempotent producer does not de-duplicate across calls."""
        while True:
            try:
                await log.append(events)
                return
            except KafkaLogError:
                self.errors += 1
            while not await self._pump():
                pass
            if any([r.event for r in b] == events for b in self.batches[-50:]):
                return


async def read_all(settings: KafkaSettings) -> list[ev.Record]:
    """Every committed event of partition 0, in order (what any reader sees)."""
    log = KafkaLog(settings, 0)
    await log._start()  # noqa: SLF001 - no topic creation
    try:
        return [r async for r in log.read()]
    finally:
        await log.close()
