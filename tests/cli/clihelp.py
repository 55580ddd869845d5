"""Running ``kueue-es`` as a subprocess, and writing decisions into a log the way the scheduler would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from events import schema as ev
from events.filelog import FileLog
from projections.cluster import ClusterState

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


@dataclass
class Result:
    code: int
    out: str
    err: str


def kueue_es(*args: str | Path, stdin: str | None = None, env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "kueue_es", *map(str, args)],
        capture_output=True, text=True, input=stdin, timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return Result(proc.returncode, proc.stdout, proc.stderr)


def append(log_dir: Path, events: Sequence[ev.AnyEvent]) -> list[int]:
    log = FileLog.open(log_dir, fsync="never")
    try:
        return anyio.run(log.append, list(events))
    finally:
        log.close_sync()


def log_size(log_dir: Path) -> tuple[int, int]:
    """(events, bytes) of a log, to show that a failed command appended nothing."""
    reader = FileLog.open(log_dir, readonly=True)
    return anyio.run(reader.end_offset), sum(p.stat().st_size for p in log_dir.glob("*.seg"))


def one_line_error(result: Result) -> str:
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("kueue-es"), lines[0]
    return lines[0]


def fold(log_dir: Path) -> ClusterState:
    """The state a replay of the embedded log at ``log_dir`` reaches."""
    state = ClusterState()
    log = FileLog.open(log_dir, readonly=True)
    try:
        for batch in log.scan():
            for record in batch:
                state.apply(record)
    finally:
        log.close_sync()
    return state
