"""Exactly-once decisions: the scheduler process is SIGKILLed at random points of a 5,000-workload run.

The run is the lockstep scenario of :mod:`lockstep` (the driver appends the cluster's observed events, a
``kueue-es run --log kafka://...`` process decides). The scheduler is killed with SIGKILL six times: four times by
itself at a point of a random decision transaction (record written but transaction open; offsets added; commit
under way; committed but not yet read back — see ``crashing_run.py``) and twice from outside at a random time.
Each time it is restarted under the same name (static group membership: it gets its shard back at once) and
resumes from the latest snapshot plus the log tail. Then:

* every workload got exactly one QuotaReserved, one WorkloadAdmitted and one WorkloadFinished;
* every decision batch was decided on the state right before it (``input`` = the previous event's offset);
* the committed log is, event for event, the log of an undisturbed in-process run, and the final state
  digest is the same;
* the scheduler's own final snapshot (restored from snapshots and log tails across the kills) is the fold of
  the committed log up to its offset.
"""

from __future__ import annotations

import asyncio
import random
import signal

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from kafkahelp import fresh_topic, settings
from lockstep import LockstepDriver, Scenario, check_exactly_once, densify, fold, read_all, reference_run
from procs import Replica, start_replica

from connectors.kafka import snapshots
from connectors.kafka.log import client_kwargs, is_control
from events import schema as ev
from projections import snapshot

pytestmark = pytest.mark.kafka

SCENARIO = Scenario(workloads=5000, per_batch=250, cluster_queues=50, cohorts=5, quota_cpu=8)
SEED = 20240501
CRASH_POINTS = ("after_send", "before_commit", "in_commit", "after_commit")
EXTERNAL_KILLS = 2


def assert_same_events(got: list, want: list) -> None:
    """Equal event for event; on a difference, name the first one (pytest's diff of 20,000 events takes hours)."""
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        assert g == w, f"event {i} differs:\n  got  {g!r}\n  want {w!r}"
    assert len(got) == len(want), f"{len(got)} events, the undisturbed run has {len(want)}"


def kill_plan(rng: random.Random) -> list[tuple[str, int | float]]:
    """Each incarnation but the last dies: at a transaction point of its n-th decision transaction (the
    process kills itself), or SIGKILLed from outside a random time after it became active."""
    plan: list[tuple[str, int | float]] = [(p, rng.randint(1, 6)) for p in CRASH_POINTS]
    plan += [("external", rng.uniform(0.2, 1.5)) for _ in range(EXTERNAL_KILLS)]
    rng.shuffle(plan)
    return plan


async def aborted_records(s) -> int:
    """Batch records a read_uncommitted reader sees that read_committed readers never will."""
    tp = TopicPartition(s.topic, 0)
    seen = {}
    for isolation in ("read_uncommitted", "read_committed"):
        c = AIOKafkaConsumer(**client_kwargs(s), isolation_level=isolation, enable_auto_commit=False)
        await c.start()
        try:
            c.assign([tp])
            end = (await c.end_offsets([tp]))[tp]
            c.seek(tp, 0)
            offsets = set()
            while await c.position(tp) < end:
                for rec in (await c.getmany(tp, timeout_ms=200)).get(tp, ()):
                    if not is_control(rec.headers):
                        offsets.add(rec.offset)
            seen[isolation] = offsets
        finally:
            await c.stop()
    return len(seen["read_uncommitted"] - seen["read_committed"])


@pytest.mark.asyncio
async def test_sigkill_at_random_points_loses_and_duplicates_nothing(kafka_broker) -> None:
    ref = await reference_run(SCENARIO)
    s = settings(kafka_broker.bootstrap, fresh_topic("eos"))
    url = f"kafka://{s.bootstrap}/{s.topic}"
    env = {"KUEUE_ES_KAFKA_STATIC_MEMBERSHIP": "true", "KUEUE_ES_SCHEDULER_SNAPSHOT_EVERY_EVENTS": "1500"}
    plan = kill_plan(random.Random(SEED))
    replicas: list[Replica] = []
    deaths: list[str] = []
    driver = LockstepDriver(s, SCENARIO)
    started = asyncio.Event()

    async def supervise() -> None:
        await started.wait()  # the driver has created the topics
        for kind, arg in plan:
            if kind == "external":
                r = await start_replica("sched-0", url, env)
                replicas.append(r)
                await r.wait_for("active", timeout=60)
                await asyncio.sleep(float(arg))
                r.kill()
            else:
                r = await start_replica("sched-0", url, env, crash=(kind, int(arg)))
                replicas.append(r)
            assert await r.wait(timeout=120) == -signal.SIGKILL, "".join(r.stderr[-40:])
            deaths.append(f"{kind}:{arg:.2f}" if kind == "external" else f"{kind}#{arg}")
        replicas.append(await start_replica("sched-0", url, env))

    async def on_batch(k: int) -> None:
        started.set()

    supervisor = asyncio.create_task(supervise())
    try:
        async with asyncio.timeout(240):
            result = await driver.run(on_batch)
            await supervisor
        last = replicas[-1]
        # The driver can finish before the last incarnation is up (the last kill may come after the last
        # decision); a SIGTERM during its imports would end it by the signal, not by the graceful stop.
        await last.wait_for("active", timeout=60)
        assert await last.terminate() == 0, "".join(last.stderr[-40:])
    finally:
        supervisor.cancel()
        for r in replicas:
            if r.proc.returncode is None:
                r.kill()
                await r.wait()

    assert len(deaths) == len(plan)
    check_exactly_once(result, SCENARIO)
    assert_same_events([r.event for r in densify(result.records)], [r.event for r in ref.records])
    assert result.dense_digest() == ref.dense_digest()
    assert await read_all(s) == result.records  # a fresh reader sees exactly what the driver saw

    # The batches of the transactions killed after their record was written were aborted, never seen.
    aborted = await aborted_records(s)
    assert aborted >= sum(kind in ("after_send", "before_commit") for kind, _ in plan)

    # Each restart resumed from a snapshot plus the log tail once there was one; the final snapshot, written
    # by the last incarnation at its graceful stop, is the fold of the committed log up to its offset.
    actives = [r.events("active")[-1] for r in replicas if r.events("active")]
    assert len(actives) == len(replicas)
    assert any(a["snapshotOffset"] is not None for a in actives[1:]), actives
    loaded = await snapshots.load_latest(s, 0)
    assert loaded is not None
    rec, state = loaded
    last_decision = max(r.offset for r in result.records if isinstance(r.event, ev.Decision))
    assert rec.offset >= last_decision  # it had read back its own last batch (maybe not the driver's last)
    assert snapshot.digest(state) == snapshot.digest(fold([r for r in result.records if r.offset <= rec.offset]))

    print(f"\n{len(deaths)} SIGKILLs ({', '.join(deaths)}); {aborted} records of aborted transactions; "
          f"{len(result.records)} committed events; run {result.seconds:.1f}s; each incarnation active after "
          f"{[a['setupMs'] for a in actives]} ms of setup (snapshot {[a['snapshotOffset'] for a in actives]})")
