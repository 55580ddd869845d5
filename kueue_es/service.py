"""Service wiring: ``kueue-es run`` — the scheduler as a long-running process over the configured log.

* ``kafka://HOST:PORT/TOPIC`` — a replica of the Kafka scheduler service
  (:mod:`connectors.kafka.scheduler_service`): transactional consume → decide → produce, one active replica
  per shard, standbys take over when it dies;
* a directory (the default, ``./kueue-es-log``) — the embedded log: this process is the log's single writer
  and its scheduler.

Progress is reported as JSON lines on stdout (``{"event": "active", ...}``); SIGTERM/SIGINT stop gracefully
(the Kafka replica leaves its group, so a standby takes over at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from connectors.kafka.scheduler_service import Phase, SchedulerReplica, ServiceOptions, default_instance_id
from connectors.kafka.settings import parse_url
from connectors.kafka.topics import prepare_topics
from events import schema as ev
from events.errors import InvalidInput
from events.filelog import FileLog
from events.manifests import load_file
from kueue_es import checkpoints, metrics
from kueue_es.config import DEFAULT_EMBEDDED_LOG, MetricsSettings, Settings
from kueue_es.scheduler import DEFAULT, SchedulerConfig, decide, next_deadline
from kueue_es.scheduler.config import as_decoded, load_config
from kueue_es.scheduler.config_record import DEFAULT_DOCUMENT
from projections import gates
from projections.cluster import ClusterState
from projections.metrics import Family

Report = Callable[[str, dict[str, Any]], None]


def json_reporter(out: TextIO | None = None) -> Report:
    def report(kind: str, fields: dict[str, Any]) -> None:
        stream = out or sys.stdout
        stream.write(json.dumps({"event": kind, **fields}, sort_keys=False) + "\n")
        stream.flush()

    return report


def kueue_configuration(settings: Settings) -> tuple[SchedulerConfig, dict[str, Any]]:
    """Kueue's Configuration from ``$.scheduler.kueue_config``: decoded, and the document as written, its nulls as
    Kueue reads them (:func:`~kueue_es.scheduler.config.as_decoded`; the scheduler records it in the log). Without
    a file, Kueue's defaults."""
    path = settings.scheduler.kueue_config
    if not path:
        return DEFAULT, dict(DEFAULT_DOCUMENT)
    manifest = load_file(path)
    if len(manifest.configs) != 1 or manifest.objects:
        raise InvalidInput(f"{path}: expected exactly one Kueue Configuration document "
                           "($.scheduler.kueue_config)")
    config = load_config(manifest.configs[0], path)
    for note in (gates.ignored_note(config.feature_gates, path), gates.partly_note(config.feature_gates, path)):
        if note is not None:
            sys.stderr.write(f"kueue-es: warning: {note}\n")
    return config, as_decoded(manifest.configs[0])


def options(settings: Settings) -> ServiceOptions:
    s = settings.scheduler
    config, document = kueue_configuration(settings)
    return ServiceOptions(config=config, config_document=document, config_source=s.kueue_config,
                          snapshot_every_events=s.snapshot_every_events,
                          snapshot_interval_s=s.snapshot_interval_s, checkpoints_kept=s.checkpoints_kept,
                          ticks=s.ticks,
                          instance_id=s.instance_id or default_instance_id(), stats_interval_s=s.stats_interval_s,
                          chain=s.batches_per_transaction,
                          offsets_interval_s=s.offsets_commit_interval_ms / 1000)


async def serve(settings: Settings, stop: asyncio.Event, report: Report) -> None:
    opts = options(settings)
    if settings.kube.enabled:  # kueue-es run --kube: scheduler + Kubernetes connector (kueue_es/kube_service.py)
        from kueue_es import kube_service

        await kube_service.serve(settings, opts, stop, report)
        return
    if settings.uses_kafka:
        kafka, _ = parse_url(settings.log, settings.kafka)
        await prepare_topics(kafka)
        replica = SchedulerReplica(kafka, opts, report)
        shards = SettledShards(replica)
        m = settings.metrics
        async with metrics.serving(m.address, m.port, shards,
                                   lambda: metrics.LEADER if shards.leading() else metrics.FOLLOWER):
            await replica.run(stop)
    else:
        await serve_embedded(settings.log or DEFAULT_EMBEDDED_LOG, opts, stop, report, settings.metrics)


class SettledShards:
    """What ``/metrics`` of a Kafka replica reads: the shards it decides for (those it stands by for, none). A shard
    inside a chained decision transaction has batches applied that the transaction may yet lose
    (:attr:`~connectors.kafka.scheduler_service.ShardEngine.speculative`; an abort reloads the state): a scrape then
    reads what it last read of that shard while it was settled, so no counter shows a decision that is then taken
    back (Prometheus reads a counter going down as a restart). A shard never read settled yet shows nothing."""

    def __init__(self, replica: SchedulerReplica) -> None:
        self.replica = replica
        self.read: dict[int, list[Family]] = {}
        """Per active shard, the families last read of it while it was settled (a fold of the committed log)."""

    def leading(self) -> bool:
        return any(e.phase is Phase.ACTIVE for e in self.replica.engines.values())

    def __call__(self) -> list[list[Family]]:
        read: dict[int, list[Family]] = {}
        for p, e in sorted(self.replica.engines.items()):
            if e.phase is not Phase.ACTIVE:
                continue
            if not e.speculative:
                read[p] = metrics.families_of(e.state)
            elif p in self.read:
                read[p] = self.read[p]
        self.read = read
        return list(read.values())


async def serve_embedded(path: str, opts: ServiceOptions, stop: asyncio.Event, report: Report,
                         metrics_settings: MetricsSettings | None = None) -> None:
    """The scheduler over the embedded log: fold it, then decide → append → apply whenever there is work (the
    Kueue Configuration first, when it is not the one in force)."""
    m = metrics_settings or MetricsSettings()
    log = FileLog.open(path, fsync="always")
    path = str(log.directory)  # as every report names it (the checkpointer's too): "./log" is "log"
    try:
        start = checkpoints.restore(log)
        for passed in start.passed_over:
            report("checkpoint_passed_over", {"log": path, "reason": passed})
        state = start.state or ClusterState()
        restored = state.offset if start.state is not None else None
        for batch in log.scan(state.offset + 1, lazy=True):
            for r in batch:
                state.apply(r)
        ckpt = checkpoints.Checkpointer.of_service(log, opts, report, since=state.offset)
        async with metrics.serving(m.address, m.port, lambda: [state], lambda: metrics.STANDALONE):
            active = {"log": path, "instance": opts.instance_id, "offset": state.offset,
                      "checkpoint": restored}
            report("active", {**active, "metricsPort": m.port} if m.port else active)
            try:
                await _schedule_embedded(log, state, opts, stop, ckpt)
            except BaseException:
                await ckpt.close()
                raise
            await ckpt.close(state)
        report("stopped", {"log": path, "instance": opts.instance_id, "offset": state.offset})
    finally:
        await log.close()


async def _schedule_embedded(log: FileLog, state: ClusterState, opts: ServiceOptions, stop: asyncio.Event,
                             ckpt: checkpoints.Checkpointer) -> None:
    """decide → append → apply until ``stop``, checkpointing as it goes."""
    while not stop.is_set():
        started = time.perf_counter()
        batch: list[Any] = opts.config_to_record(state, opts.instance_id) or decide(state, opts.config)
        took = time.perf_counter() - started
        if not batch and opts.ticks:
            deadline = next_deadline(state, opts.config)
            now = int(time.time() * 1000)
            if deadline is not None and deadline <= now and state.time < now:
                batch = [ev.ClockTicked(time=now, id=f"tick-{now}")]
        if batch:
            offsets = await log.append(batch)
            for off, e in zip(offsets, batch, strict=True):
                state.apply(ev.Record(off, e))
            metrics.ATTEMPTS.observe(batch, took)  # once folded: a scrape sees the attempt in both metrics or neither
            ckpt.after(state, events=len(batch))
            continue
        ckpt.after(state)  # the interval's checkpoint, when it is quiet
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


def run(settings: Settings, report: Report | None = None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code."""
    report = report or json_reporter()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():  # a second signal: do not wait for the graceful shutdown
                os._exit(130)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        await serve(settings, stop, report)

    asyncio.run(main())
    return 0
