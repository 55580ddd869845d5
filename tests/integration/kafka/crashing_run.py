"""``kueue-es run`` that SIGKILLs itself at a chosen point of its Nth decision transaction (tests only).

Environment: ``CRASH_POINT`` — ``after_send`` (the batch is written to the partition, its transaction still
open), ``before_commit`` (the consumer offsets are in the transaction too), ``in_commit`` (EndTxn is on its way)
or ``after_commit`` (committed, not yet read back); ``CRASH_AT_TXN`` — which decision transaction (1-based).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from aiokafka import AIOKafkaProducer

from kueue_es.cli import main

POINT = os.environ["CRASH_POINT"]
AT = int(os.environ["CRASH_AT_TXN"])
_count = 0
_send_offsets = AIOKafkaProducer.send_offsets_to_transaction
_commit = AIOKafkaProducer.commit_transaction


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def send_offsets_to_transaction(self, offsets, group_id):  # type: ignore[no-untyped-def]
    global _count
    _count += 1  # only decision transactions send offsets (catch-up markers do not)
    if _count == AT and POINT == "after_send":
        await self.flush()
        _die()
    await _send_offsets(self, offsets, group_id)
    if _count == AT and POINT == "before_commit":
        await self.flush()
        _die()


async def commit_transaction(self):  # type: ignore[no-untyped-def]
    if _count == AT and POINT == "in_commit":
        asyncio.get_running_loop().call_soon(_die)  # right after EndTxn is queued
    await _commit(self)
    if _count == AT and POINT == "after_commit":
        _die()


AIOKafkaProducer.send_offsets_to_transaction = send_offsets_to_transaction  # type: ignore[method-assign]
AIOKafkaProducer.commit_transaction = commit_transaction  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
