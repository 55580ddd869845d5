"""``KafkaLog.close`` stops every client even when the caller is cancelled meanwhile.

Stand-ins for the aiokafka clients record their ``stop``; the real clients, against a real broker, are in
``tests/integration/kafka``. A client left running is collected unclosed, which aiokafka reports from ``__del__``
(an error in this suite).
"""

from __future__ import annotations

import asyncio

from connectors.kafka.log import KafkaLog
from connectors.kafka.settings import KafkaSettings


class _Client:
    def __init__(self, stopping: asyncio.Event | None = None) -> None:
        self.stopping = stopping
        self.stopped = False

    async def stop(self) -> None:
        if self.stopping is not None:
            await self.stopping.wait()  # a stop that takes a while (a broker round trip)
        self.stopped = True


def _log_with(producer: _Client, meta: _Client, reader: _Client) -> KafkaLog:
    log = KafkaLog(KafkaSettings(bootstrap="127.0.0.1:9"), 0)
    log._producer, log._meta, log._readers = producer, meta, {reader}  # type: ignore[assignment]  # noqa: SLF001
    return log


def test_a_close_cancelled_while_the_last_append_finishes_still_stops_every_client() -> None:
    async def main() -> list[bool]:
        clients = [_Client(), _Client(), _Client()]
        log = _log_with(*clients)
        append_done = asyncio.Event()
        log._writer = asyncio.create_task(append_done.wait())  # noqa: SLF001 - an append in flight
        closing = asyncio.create_task(log.close())
        await asyncio.sleep(0)
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        append_done.set()
        await asyncio.sleep(0)
        return [c.stopped for c in clients]

    assert asyncio.run(main()) == [True, True, True]


def test_a_close_cancelled_while_a_client_stops_still_stops_the_others() -> None:
    async def main() -> list[bool]:
        slow = asyncio.Event()
        clients = [_Client(slow), _Client(), _Client()]
        log = _log_with(*clients)
        closing = asyncio.create_task(log.close())
        await asyncio.sleep(0)
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        slow.set()
        for _ in range(3):
            await asyncio.sleep(0)
        return [c.stopped for c in clients]

    assert asyncio.run(main()) == [True, True, True]
