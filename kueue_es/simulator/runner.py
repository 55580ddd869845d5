"""Run a scenario end to end: plan → fresh log → simulation → figures (shared by ``simulate`` and ``demo``)."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from events.errors import InvalidInput
from events.filelog import FileLog, list_segments
from kueue_es.scheduler import DEFAULT, SchedulerConfig
from kueue_es.simulator.config import Scenario
from kueue_es.simulator.model import Plan, build_plan
from kueue_es.simulator.sim import STOP_DELAY_MS, Outcome, ProgressFn, Simulation, summarize


@dataclass
class RunResult:
    summary: dict[str, Any]
    plan: Plan
    outcome: Outcome
    log_path: Path


def fresh_log_dir(requested: str | None, default_stem: str, base: Path | None = None) -> Path:
    """``requested`` if it is new or an empty directory; else a new ``<stem>[-N]`` under ``base`` (cwd)."""
    if requested is not None:
        p = Path(requested)
        if p.exists():
            if not p.is_dir():
                raise InvalidInput(f"--log {requested}: a file is in the way")
            if any(p.iterdir()):
                raise InvalidInput(f"--log {requested}: the directory is not empty; a simulation writes a new log "
                                   "(choose a new directory or remove this one)")
        return p
    base = base or Path.cwd()
    p = base / default_stem
    n = 2
    while p.exists():
        p = base / f"{default_stem}-{n}"
        n += 1
    return p


def run(scenario: Scenario, log_dir: Path, *, seed: int = 0, jitter_ms: int = 0, realtime: bool = False,
        config: SchedulerConfig = DEFAULT, progress: ProgressFn | None = None,
        stop_delay_ms: int = STOP_DELAY_MS, config_document: dict[str, Any] | None = None,
        config_source: str = "") -> RunResult:
    """``config_document``: ``config`` as the user wrote it, recorded in the log (None: one that loads as it)."""
    started = time.perf_counter()
    plan = build_plan(scenario, random.Random(seed), jitter_ms)
    log = FileLog.open(log_dir, fsync="never")
    try:
        sim = Simulation(plan, log, config=config, realtime=realtime, progress=progress, stop_delay_ms=stop_delay_ms,
                         config_document=config_document, config_source=config_source)
        outcome = anyio.run(sim.run)
    finally:
        log.close_sync()
    _sync_dir(log_dir)
    real = time.perf_counter() - started
    summary = summarize(plan, outcome, seed=seed, log_path=str(log_dir), real_seconds=real)
    summary["jitterMs"] = jitter_ms
    summary["stopDelayMs"] = stop_delay_ms
    return RunResult(summary, plan, outcome, log_dir)


def _sync_dir(directory: Path) -> None:
    """The log is written without per-batch fsync (a simulation can be rerun); make it durable once, at the end."""
    for _, path in list_segments(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
