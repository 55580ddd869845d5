"""A fenced Kafka scheduler replica does not set its shard up again before the group has its word (review s36 L2).

Fenced means another producer of the shard started: maybe the owner the group gave the shard to, which this replica
has not heard of yet. Setting up again at once (InitProducerId) would fence that owner back, and the two would take
turns until the group told this one. The shard waits for a rebalance, which keeps it here (set up at once) or takes
it away, or failing one a session timeout (a member the group dropped is told within it).

The replica's loop (``SchedulerReplica._iteration``) runs with the group consumer and the transactional producer
stood in for, a clock of the test's own, and ``ShardEngine.setup`` recorded instead of run.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import ProducerFenced

from connectors.kafka import scheduler_service
from connectors.kafka.scheduler_service import Phase, SchedulerReplica, ServiceOptions, ShardEngine, _Listener
from connectors.kafka.settings import KafkaSettings
from events import schema as ev

SESSION_S = 10.0


class _Consumer:
    def __init__(self, **_kwargs: Any) -> None:
        pass

    async def getmany(self, *_tps: Any, timeout_ms: int = 0) -> dict[Any, list[Any]]:
        return {}

    def assignment(self) -> set[Any]:
        return set()

    def pause(self, *_tps: Any) -> None:
        pass


class _FencedProducer:
    """Another producer of the shard has started: this one's next transaction is refused."""

    async def begin_transaction(self) -> None:
        raise ProducerFenced()

    async def stop(self) -> None:
        pass


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def _fenced(monkeypatch: pytest.MonkeyPatch) -> tuple[SchedulerReplica, ShardEngine, list[int], list[str], _Clock]:
    """A replica active on shard 0 whose next decision transaction is fenced; the setups it starts, and its reports."""
    clock = _Clock()
    monkeypatch.setattr(scheduler_service, "time", SimpleNamespace(monotonic=clock.monotonic,
                                                                  perf_counter=time.perf_counter))
    monkeypatch.setattr(scheduler_service, "AIOKafkaConsumer", _Consumer)
    monkeypatch.setattr(scheduler_service, "decide", lambda _s, _c: [ev.ClockTicked(time=2000, id="d")])
    monkeypatch.setattr(ServiceOptions, "config_to_record", lambda *_: [])
    setups: list[int] = []

    async def setup(self: ShardEngine, _consumer: Any) -> None:  # InitProducerId: fences every other producer
        setups.append(self.partition)

    monkeypatch.setattr(ShardEngine, "setup", setup)
    reports: list[str] = []
    opts = ServiceOptions(ticks=False, freeze_gc=False, stats_interval_s=0, instance_id="zombie",
                          offsets_interval_s=0)
    replica = SchedulerReplica(KafkaSettings(bootstrap="127.0.0.1:9", session_timeout_ms=int(SESSION_S * 1000)),
                               opts, lambda kind, _fields: reports.append(kind))
    e = ShardEngine(replica, 0)
    e.phase, e.fresh = Phase.ACTIVE, False
    e.producer = _FencedProducer()  # type: ignore[assignment]
    replica.engines[0] = e
    replica.assignment = {0}
    return replica, e, setups, reports, clock


def test_a_fenced_shard_is_not_set_up_again_before_the_group_keeps_it_here(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        replica, e, setups, reports, clock = _fenced(monkeypatch)
        stop = asyncio.Event()
        await replica._iteration(stop)
        assert "fenced" in reports and e.phase is Phase.SETUP
        for _ in range(4):  # a few seconds on, no word from the group: setting up would fence the owner back
            clock.now += 2
            await replica._iteration(stop)
        assert setups == []
        await _Listener(replica).on_partitions_assigned([e.tp])  # a rebalance keeps the shard here
        await replica._iteration(stop)
        assert setups == [0]

    asyncio.run(main())


def test_a_fenced_shard_the_group_gives_away_is_never_set_up_again(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        replica, e, setups, reports, clock = _fenced(monkeypatch)
        stop = asyncio.Event()
        await replica._iteration(stop)
        clock.now += 2
        await replica._iteration(stop)
        listener = _Listener(replica)
        await listener.on_partitions_revoked([e.tp])  # the group tells this replica the shard is another's
        await listener.on_partitions_assigned([])
        clock.now += 2 * SESSION_S
        await replica._iteration(stop)
        assert setups == [] and replica.engines == {}
        assert reports[-1] == "standby"

    asyncio.run(main())


def test_without_word_from_the_group_a_fenced_shard_is_set_up_after_a_session_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The group would have told a member it dropped within a session timeout: this one is still the owner."""
    async def main() -> None:
        replica, _e, setups, _reports, clock = _fenced(monkeypatch)
        stop = asyncio.Event()
        await replica._iteration(stop)
        clock.now += SESSION_S
        await replica._iteration(stop)
        assert setups == [0]

    asyncio.run(main())
