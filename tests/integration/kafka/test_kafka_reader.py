"""The command-line tools' Kafka reader (``connectors/kafka/reader.py``): one connection to the partition for a
tool's whole run, nothing left running when a tool stops reading early, and progress bars that count Kafka
records (a Kafka log's offsets are not dense, so its events are not counted before they are read)."""

from __future__ import annotations

import threading

import anyio
import pytest
from fixtures.terminal import run_on_terminal
from kafkahelp import fresh_topic, settings

from connectors.kafka.log import KafkaLog, to_offset
from connectors.kafka.reader import KafkaReader
from events import schema as ev
from kueue_es.commands._common import RECORDS

T0 = 1_714_550_400_000


async def append_records(bootstrap: str, topic: str, n: int) -> None:
    """``n`` Kafka records of one clock tick each (appended one after the other: concurrent appends would be
    grouped into fewer records)."""
    log = await KafkaLog.open(settings(bootstrap, topic))
    try:
        for i in range(n):
            await log.append([ev.ClockTicked(time=T0 + i)])
    finally:
        await log.close()


def test_one_connection_and_nothing_left_running(kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = fresh_topic("reader")
    anyio.run(append_records, kafka_bootstrap, topic, 30)
    opened = []
    real_open = KafkaLog.open

    async def counting_open(*args: object, **kw: object) -> KafkaLog:
        log = await real_open(*args, **kw)  # type: ignore[arg-type]
        opened.append(log)
        return log

    monkeypatch.setattr(KafkaLog, "open", counting_open)
    threads = threading.active_count()
    reader = KafkaReader(f"kafka://{kafka_bootstrap}/{topic}")
    try:
        assert reader.record_of(anyio.run(reader.end_offset)) == 30
        batches = reader.scan()
        assert [r.offset for r in next(batches)] == [0]
        batches.close()  # the tool stops reading early
        assert [r.offset for batch in reader.scan() for r in batch] == [to_offset(k) for k in range(30)]
        assert reader.record_of(anyio.run(reader.end_offset)) == 30
    finally:
        reader.close_sync()
    assert len(opened) == 1, "the end offset and both scans share one open partition"
    assert threading.active_count() == threads, "the reader's loop thread and consumers are gone"


def test_progress_bars_count_kafka_records(kafka_bootstrap: str) -> None:
    topic = fresh_topic("progress")
    n = RECORDS.minimum + 100
    anyio.run(append_records, kafka_bootstrap, topic, n)
    url = f"kafka://{kafka_bootstrap}/{topic}"

    code, out = run_on_terminal("replay", "--log", url)
    assert code == 0
    assert "Replaying records" in out and f"state at offset {to_offset(n - 1)}" in out

    code, out = run_on_terminal("log", "inspect", "--log", url)
    assert code == 0
    assert "Inspecting records" in out and f"{n} events in {n} batches" in out

    code, out = run_on_terminal("replay", "--log", url, "--to", str(to_offset(5)))
    assert code == 0
    assert "Replaying" not in out, "six records are too few for a bar"
