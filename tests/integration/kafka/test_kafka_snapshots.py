"""Snapshots encoded in the background: a forked child encodes the state as it was when the snapshot was
started, while the scheduler goes on changing it (the service's snapshots go through this path; the
exactly-once and takeover tests restore them from the broker)."""

from __future__ import annotations

import random

import pytest
from fixtures.eventgen import fold, interpret, random_ops, records

from connectors.kafka import snapshots
from kueue_es.background import EncoderFailed
from projections import snapshot


@pytest.mark.asyncio
async def test_background_snapshot_is_the_state_at_the_call() -> None:
    recs = records(interpret(random_ops(random.Random(7), 400)))
    half = len(recs) // 2
    state = fold(recs[:half])
    want = snapshots.pack("log", 3, 12, state.offset, snapshot.encode(state))
    digest_then = snapshot.digest(state)

    packing = snapshots.pack_in_background(state, "log", 3, 12, state.offset)
    fold(recs[half:], state)  # the scheduler moves on before the child has finished
    assert snapshot.digest(state) != digest_then

    value = await packing
    assert value == want
    rec, restored = snapshots.unpack(value)
    assert (rec.topic, rec.partition, rec.next, rec.offset) == ("log", 3, 12, recs[half - 1].offset)
    assert snapshot.digest(restored) == digest_then


@pytest.mark.asyncio
async def test_a_failing_encoder_is_reported_with_its_exit_code() -> None:
    packing = snapshots.pack_in_background(object(), "log", 0, 1, 0)  # type: ignore[arg-type]
    with pytest.raises(EncoderFailed, match=r"snapshot encoder \(pid \d+\) exited with 1"):
        await packing
