"""A record Kafka acknowledges without its offset is an unknown outcome, never offset -1 (review s36 L1).

aiokafka acknowledges the retry of a batch the broker already has but no longer remembers (DuplicateSequenceNumber)
as a success at offset -1. The producers are stood in for by ones that acknowledge so.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from connectors.kafka.errors import KafkaLogError
from connectors.kafka.log import KafkaLog
from connectors.kafka.scheduler_service import Phase, ServiceOptions, ShardEngine
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState

SETTINGS = KafkaSettings(bootstrap="127.0.0.1:9", topic="log")


class _Producer:
    """Acknowledges records at the offsets in ``offsets``, in turn, then at offset 100."""

    def __init__(self, *offsets: int) -> None:
        self.offsets = list(offsets)

    def _ack(self) -> SimpleNamespace:
        return SimpleNamespace(offset=self.offsets.pop(0) if self.offsets else 100)

    async def send_and_wait(self, *_args: Any, **_kwargs: Any) -> SimpleNamespace:
        return self._ack()

    async def send(self, *_args: Any, **_kwargs: Any) -> asyncio.Future[Any]:
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(self._ack())
        return fut

    async def begin_transaction(self) -> None:
        pass

    async def send_offsets_to_transaction(self, *_args: Any) -> None:
        pass

    async def commit_transaction(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def test_an_append_acknowledged_without_its_offset_fails_naming_it() -> None:
    async def go() -> None:
        log = KafkaLog(SETTINGS)
        log._producer = _Producer(-1, 4)  # type: ignore[assignment]
        with pytest.raises(KafkaLogError, match="without its offset") as err:
            await log.append([ev.ClockTicked(time=1000, id="t1")])
        assert not err.value.retriable  # it is written: appending it again would write it twice
        assert await log.append([ev.ClockTicked(time=2000, id="t2")]) == [4_000_000]  # the next one is unaffected

    asyncio.run(go())


class _Consumer:
    async def position(self, _tp: Any) -> int:
        return 1 << 40


def _engine(producer: _Producer, chain: int) -> ShardEngine:
    replica = SimpleNamespace(settings=SETTINGS, instance_id="r1", options=ServiceOptions(chain=chain),
                              consumer=_Consumer(), batch_headers=[], marker_headers=[], report=lambda *_: None)
    e = ShardEngine(replica, 0)  # type: ignore[arg-type]
    e.phase, e.fresh, e.next = Phase.ACTIVE, False, 3
    e.producer = producer  # type: ignore[assignment]
    return e


def _tick(time: int) -> list[Any]:
    return [ev.ClockTicked(time=time, id=f"t{time}")]


@pytest.mark.parametrize("acks", [(-1,), (3, -1)], ids=["first batch", "second batch"])
def test_a_decision_batch_acknowledged_without_its_offset_is_not_folded_in(
        monkeypatch: pytest.MonkeyPatch, acks: tuple[int, ...]) -> None:
    monkeypatch.setattr("connectors.kafka.scheduler_service.decide", lambda state, _config: _tick(state.time + 1000))
    e = _engine(_Producer(*acks), chain=4)
    before = snapshot.digest(e.state)
    with pytest.raises(KafkaLogError, match="decision batch: Kafka acknowledged the record without its offset"):
        asyncio.run(e._decide_in_transaction(_tick(1000), 0.0))
    assert e.fresh or snapshot.digest(e.state) == before  # nothing at a negative offset is kept
    assert not e.speculative and e.state.offset >= -1


def test_a_marker_acknowledged_without_its_offset_is_no_marker() -> None:
    e = _engine(_Producer(-1), chain=1)
    e.phase = Phase.SETUP
    with pytest.raises(KafkaLogError, match="catch-up marker: Kafka acknowledged the record without its offset"):
        asyncio.run(e._transact(b"marker", []))
    assert e.marker is None and snapshot.digest(e.state) == snapshot.digest(ClusterState())
