"""A connector mirror restored from a checkpoint, then folding the rest of the log, is the mirror a fold of the whole
log gives: ``kueue-es run --kube`` restarts from one (``connectors/k8s/mirror_snapshot.py``).

The logs are the property tests' random event sequences (``tests/fixtures/eventgen.py``) as the connector would
have written them: every Workload owned by a Job (upserted first), every decision carried out or refused a batch
later, what the job integration did to a Job recorded, and ProvisioningRequest decisions owed an outcome.
"""

from __future__ import annotations

import asyncio
import random
import zlib
from typing import Any

import msgspec
import pytest
from fixtures import eventgen
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.k8s import mirror_snapshot
from connectors.k8s.decision_events import Before, Involved, PendingChecks
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.filelog import FileLog
from kueue_es import checkpoints
from projections import snapshot

RESTORED = {"state", "inventory", "workloads", "pending", "request_decisions", "job_of", "workload_of",
            "kube_events"}
"""The mirror's fields a checkpoint holds; the others are rebuilt (``dirty_*``) or the process's own."""
REBUILT = {"dirty_workloads", "dirty_jobs", "dirty_queues", "dirty_retention", "dirty_finalizers", "dirty_orphans",
           "dirty_variants", "dirty_priorities", "listeners", "named_by", "owned_by", "controlled"}


def _job(ns: str, name: str) -> o.Job:
    """Job ``name``, naming its Workload as its prebuilt one (what the mirror indexes Jobs by)."""
    return o.Job(metadata=o.ObjectMeta(name=name, namespace=ns, uid=f"job-{ns}-{name}", resource_version="1",
                                       labels={"kueue.x-k8s.io/queue-name": "lq0"},
                                       annotations={"kueue.x-k8s.io/prebuilt-workload-name": name[len("job-"):]}),
                 spec=o.JobSpec(suspend=True, parallelism=1, completions=1))


def _owned(w: o.Workload) -> o.Workload:
    ref = o.OwnerReference(api_version="batch/v1", kind="Job", name=f"job-{w.metadata.name}",
                           uid=f"job-{w.metadata.namespace}-job-{w.metadata.name}", controller=True)
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, owner_references=[ref]))


def _request(e: ev.Decision) -> ev.ProvisioningRequestCreated:
    ns, _, name = e.key.partition("/")
    req = o.ProvisioningRequest(metadata=o.ObjectMeta(name=f"{name}-check-1", namespace=ns))
    return ev.ProvisioningRequestCreated(time=e.time, key=e.key, uid=e.uid, cycle=e.cycle, input=e.input,
                                         check="check", attempt=1, request=req)


def connector_log(batches: list[list[ev.AnyEvent]]) -> list[list[ev.Record]]:
    """``batches`` as the connector's log would hold them (see the module docstring), as records."""
    out: list[list[ev.Record]] = []
    offset, jobs, owed = 0, set(), []

    def add(events: list[ev.AnyEvent]) -> None:
        nonlocal offset
        if events:
            out.append([ev.Record(offset + i, e) for i, e in enumerate(events)])
            offset += len(events)

    for i, batch in enumerate(batches):
        events: list[ev.AnyEvent] = []
        for e in batch:
            if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Workload):
                ns, name = e.obj.metadata.namespace, f"job-{e.obj.metadata.name}"
                if (ns, name) not in jobs:
                    jobs.add((ns, name))
                    job = _job(ns, name)
                    events.append(ev.ObjectUpserted(time=e.time, key=job.key, uid=job.metadata.uid, obj=job))
                e = msgspec.structs.replace(e, obj=_owned(e.obj))
            events.append(e)
            if isinstance(e, ev.Decision) and i % 7 == 3:
                events.append(_request(e))
        first = offset
        add(events)
        owed += [(first + j, e) for j, e in enumerate(events) if isinstance(e, ev.Decision)]
        if i % 2 == 1 and owed:  # the outcomes of what was owed, a batch later
            t = max(e.time for _, e in owed)
            outcomes: list[ev.AnyEvent] = []
            for n, (off, d) in enumerate(owed):
                if n % 5 == 4:
                    outcomes.append(ev.DecisionRejected(time=t, key=d.key, uid=d.uid, decision=off, reason="Conflict"))
                else:
                    outcomes.append(ev.DecisionApplied(time=t, key=d.key, uid=d.uid, decision=off))
                if isinstance(d, ev.QuotaReserved):
                    ns, _, name = d.key.partition("/")
                    outcomes.append(ev.JobActed(time=t, key=f"{ns}/job-{name}", uid=f"job-{ns}-job-{name}",
                                                action="Started", workload=d.key))
            owed = owed[len(owed) // 3:] if i % 4 == 1 else []  # some stay owed across the checkpoint
            add(outcomes)
    return out


def _fold(batches: list[list[ev.Record]], mirror: Mirror | None = None) -> Mirror:
    mirror = mirror if mirror is not None else Mirror()
    for b in batches:
        mirror.apply_batch(b)
    return mirror


def _ledger(m: Mirror) -> dict[str, Any]:
    led = vars(m.kube_events).copy()
    led["ready"] = list(led["ready"].items())  # order matters: the oldest expire first
    return led


def assert_same(full: Mirror, restored: Mirror) -> None:
    assert snapshot.digest(restored.state) == snapshot.digest(full.state)
    for name in sorted(RESTORED - {"state", "kube_events"}):
        assert getattr(restored, name) == getattr(full, name), name
    assert restored.named_by == full.named_by, "the prebuilt-name index is rebuilt from the Jobs"
    assert restored.owned_by == full.owned_by, "the index of the Workloads each Job controls, from the Workloads"
    assert restored.controlled == full.controlled, "the index of the Workloads by controller uid, from the Workloads"
    assert _ledger(restored) == _ledger(full)
    # every key of what is there is the workers' to look at, as after the full fold
    present_workloads = full.state.workloads.keys() | full.workloads.keys() | full.pending.keys()
    assert full.dirty_workloads & present_workloads <= restored.dirty_workloads
    assert full.dirty_jobs & (full.state.jobs.keys() | full.workload_of.keys()) <= restored.dirty_jobs
    assert "*" in restored.dirty_queues or full.dirty_queues <= restored.dirty_queues
    assert {k for k in full.dirty_retention if k in full.pending} <= restored.dirty_retention
    assert {k for k in full.dirty_variants if k in full.pending} <= restored.dirty_variants


def test_the_checkpoint_covers_every_field_of_the_mirror() -> None:
    # a field added to the mirror must be checkpointed (RESTORED) or rebuilt on restore (REBUILT)
    assert set(vars(Mirror())) == RESTORED | REBUILT


@settings(max_examples=150, deadline=None)
@given(ops=eventgen.op_lists(), cut=st.floats(0, 1))
def test_restored_mirror_folds_on_to_the_mirror_of_the_whole_log(ops: list[eventgen.Op], cut: float) -> None:
    batches = connector_log(eventgen.interpret(ops))
    k = round(cut * len(batches))
    prefix = _fold(batches[:k])
    state = snapshot.decode(snapshot.encode(prefix.state))
    restored = _fold(batches[k:], mirror_snapshot.restore(state, mirror_snapshot.encode(prefix)))
    assert_same(_fold(batches), restored)


def test_a_restored_mirror_holds_each_kind_of_ledger_entry_and_what_is_owed() -> None:
    batches = connector_log(eventgen.interpret(eventgen.random_ops(random.Random(7), 120)))
    m = _fold(batches)
    last = next(r.event for b in reversed(batches) for r in reversed(b) if isinstance(r.event, ev.Decision))
    m.apply_batch([ev.Record(m.offset + 1, _request(last))])  # a request decision still owed its outcome
    job = Involved("batch/v1", "Job", "ns0", "job-x", "uid-x")
    m.kube_events.pending_checks(m.offset, batches[-1][-1].event, "ns0/job-x", job, "check: waiting")
    kinds = {type(r.before) for r in m.kube_events.ready.values()}
    assert kinds == {Involved, PendingChecks, Before}, kinds  # all three shapes
    assert m.pending and m.request_decisions and m.kube_events.awaiting
    restored = mirror_snapshot.restore(snapshot.decode(snapshot.encode(m.state)), mirror_snapshot.encode(m))
    assert_same(m, restored)
    assert restored.dirty_queues == {"*"} and restored.kube_events.dirty == set(m.kube_events.ready)


def test_a_connector_part_of_another_offset_or_shape_is_refused() -> None:
    m = _fold(connector_log(eventgen.interpret(eventgen.random_ops(random.Random(3), 40))))
    data = mirror_snapshot.encode(m)
    other = snapshot.decode(snapshot.encode(m.state))
    other.offset -= 1
    with pytest.raises(InvalidInput, match="of offset"):
        mirror_snapshot.restore(other, data)
    with pytest.raises(InvalidInput, match="not a kueue-es connector checkpoint"):
        mirror_snapshot.restore(m.state, b"\x93\x01\x02")


def test_kube_restarts_only_from_a_checkpoint_with_a_usable_connector_part(tmp_path) -> None:
    batches = connector_log(eventgen.interpret(eventgen.random_ops(random.Random(5), 60)))
    log = FileLog.open(tmp_path / "log", fsync="never")

    async def write() -> None:
        for b in batches:
            await log.append([r.event for r in b])
    asyncio.run(write())
    m = _fold([b for b in log.scan()])
    crc, last = log.frame_checksum(m.offset)
    assert last == m.offset
    raw = snapshot.encode(m.state)
    # an embedded run's checkpoint (no connector part) at the end, a --kube one before it, a damaged one after
    half = _fold([b for b in log.scan() if b[-1].offset <= batches[len(batches) // 2][-1].offset])
    half_crc, _ = log.frame_checksum(half.offset)
    checkpoints.save(log.directory, half.offset, checkpoints.pack(
        half.offset, half.state.time, half_crc, snapshot.encode(half.state), lambda: mirror_snapshot.encode(half)))
    checkpoints.save(log.directory, m.offset, checkpoints.pack(m.offset, m.state.time, crc, raw))
    start = checkpoints.restore(log, connector=mirror_snapshot.restore)
    assert start.connector is not None and start.connector.offset == half.offset
    assert any("holds no connector state" in p for p in start.passed_over)
    assert checkpoints.restore(log).state.offset == m.offset  # replays take the newest, connector part or not
    damaged = checkpoints.Checkpoint(format=checkpoints.FORMAT, offset=m.offset, time=m.state.time,
                                     frame_checksum=crc, state=zlib.compress(raw, 1),
                                     connector=zlib.compress(b"\x93\x01", 1))
    checkpoints.save(log.directory, m.offset, msgspec.msgpack.encode(damaged))
    start = checkpoints.restore(log, connector=mirror_snapshot.restore)
    assert start.connector is not None and start.connector.offset == half.offset
    assert any("damaged connector state" in p for p in start.passed_over)
    assert_same(m, _fold([b for b in log.scan(half.offset + 1)], start.connector))
    asyncio.run(log.close())


@pytest.mark.parametrize("events", [True, False])
def test_with_kubernetes_events_off_the_ledger_keeps_nothing_carried_out(tmp_path, events: bool) -> None:
    from connectors.kafka.scheduler_service import ServiceOptions
    from kueue_es.kube_service import _EmbeddedLog

    batches = connector_log(eventgen.interpret(eventgen.random_ops(random.Random(11), 150)))
    log = FileLog.open(tmp_path / "log", fsync="never")

    async def write_and_open() -> Mirror:
        for b in batches:
            await log.append([r.event for r in b])
        await log.close()
        backend = _EmbeddedLog(str(tmp_path / "log"), ServiceOptions(checkpoints_kept=0), lambda k, f: None,
                               events=events)
        try:
            return (await backend.open()).mirror
        finally:
            await backend.close()

    mirror = asyncio.run(write_and_open())
    full = _fold(batches)
    assert snapshot.digest(mirror.state) == snapshot.digest(full.state)
    ready = mirror.kube_events.ready
    if events:
        assert list(ready.items()) == list(full.kube_events.ready.items())
    else:  # only what became ready in the log's last millisecond is left of it
        assert len(full.kube_events.ready) > 10 and 0 < len(ready) < len(full.kube_events.ready)
        assert {e.applied for e in ready.values()} == {max(e.applied for e in full.kube_events.ready.values())}
    assert mirror.kube_events.awaiting == full.kube_events.awaiting
