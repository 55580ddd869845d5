"""An append whose caller is cancelled while it waits behind the record in flight is never sent: a replica that lost
its Lease (its task group cancelled) must not add its queued watch events and outcomes to the shared log after the
new leader's relist (review s36 lease L4). The producer is stood in for by one whose first answer waits."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from connectors.kafka.log import KafkaLog
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from events.errors import LogClosed

SETTINGS = KafkaSettings(bootstrap="127.0.0.1:9", topic="log")


class _SlowFirst:
    """Answers the first record once :attr:`answer` is set; records every payload sent."""

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.sent: list[int] = []

    async def send_and_wait(self, topic: str, payload: bytes, **_: Any) -> SimpleNamespace:
        self.sent.append(len(payload))
        if len(self.sent) == 1:
            await self.answer.wait()
        return SimpleNamespace(offset=len(self.sent) - 1)

    async def stop(self) -> None:
        pass


def _tick(n: int) -> ev.ClockTicked:
    return ev.ClockTicked(time=n, id=f"t{n}")


def test_an_append_cancelled_while_queued_is_not_sent_and_one_still_awaited_is() -> None:
    async def go() -> None:
        log = KafkaLog(SETTINGS)
        log._producer = producer = _SlowFirst()  # type: ignore[assignment]
        in_flight = asyncio.create_task(log.append([_tick(1)]))
        await asyncio.sleep(0)
        given_up = asyncio.create_task(log.append([_tick(2), _tick(3)]))
        kept = asyncio.create_task(log.append([_tick(4)]))
        await asyncio.sleep(0)
        given_up.cancel()  # the leader's group cancelled on LeadershipLost
        with pytest.raises(asyncio.CancelledError):
            await given_up
        producer.answer.set()
        assert await in_flight == [0]
        assert await kept == [1_000_000], "the next record holds only the append still awaited"
        await log.close()
        assert len(producer.sent) == 2

    asyncio.run(go())


class _Away:
    """A broker out of reach: an idempotent send is never given up."""

    def __init__(self) -> None:
        self.sent = 0

    async def send_and_wait(self, *_: Any, **__: Any) -> SimpleNamespace:
        self.sent += 1
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    async def stop(self) -> None:
        pass


def test_close_with_the_broker_away_gives_up_after_one_request_timeout_and_fails_what_was_not_acknowledged() -> None:
    async def go() -> None:
        log = KafkaLog(KafkaSettings(bootstrap="127.0.0.1:9", topic="log", request_timeout_ms=50))
        log._producer = producer = _Away()  # type: ignore[assignment]
        in_flight = asyncio.create_task(log.append([_tick(1)]))
        await asyncio.sleep(0)
        queued = asyncio.create_task(log.append([_tick(2)]))
        await asyncio.sleep(0)
        async with asyncio.timeout(30):  # a guard only: close gives up after request_timeout_ms
            await log.close()
        with pytest.raises(LogClosed, match="may or may not be stored"):
            await in_flight
        with pytest.raises(LogClosed, match="closed before this append was sent"):
            await queued
        assert producer.sent == 1

    asyncio.run(go())
