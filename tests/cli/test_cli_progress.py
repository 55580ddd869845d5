"""Long replays show a progress bar, but only when stdout is a terminal."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from clihelp import kueue_es
from fixtures.terminal import run_on_terminal

from events import schema as ev
from events.filelog import FileLog
from kueue_es.commands._common import EVENTS


def ticks_log(path: Path, n: int) -> Path:
    log = FileLog.open(path, fsync="never")
    for start in range(0, n, 1000):
        anyio.run(log.append, [ev.ClockTicked(time=1_714_550_400_000 + i) for i in range(start, min(n, start + 1000))])
    log.close_sync()
    return path


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> Path:
    return ticks_log(tmp_path_factory.mktemp("progress") / "log", EVENTS.minimum + 5000)


def test_progress_bar_on_a_terminal(long_log: Path) -> None:
    code, out = run_on_terminal("replay", "--log", long_log)
    assert code == 0
    assert "Replaying events" in out
    assert f"state at offset {EVENTS.minimum + 4999}" in out


def test_no_progress_bar_when_piped(long_log: Path) -> None:
    r = kueue_es("replay", "--log", long_log, "-o", "json")
    assert r.code == 0
    assert "Replaying" not in r.out and "Replaying" not in r.err
    assert r.out.lstrip().startswith("{")


def test_no_progress_bar_for_a_short_replay(tmp_path: Path) -> None:
    code, out = run_on_terminal("replay", "--log", ticks_log(tmp_path / "log", 100))
    assert code == 0
    assert "Replaying" not in out and "state at offset 99" in out


def test_verify_shows_both_passes(long_log: Path) -> None:
    code, out = run_on_terminal("replay", "--log", long_log, "--verify")
    assert code == 0
    assert "Finding decisions in events" in out and "Verifying events" in out
    assert "verified: 0 decision batches" in out


def test_log_verify_shows_a_bar_on_a_terminal(long_log: Path) -> None:
    code, out = run_on_terminal("log", "verify", "--log", long_log, "--checkpoints")
    assert code == 0
    assert "Verifying events" in out and f"{EVENTS.minimum + 5000} events" in out
    piped = kueue_es("log", "verify", "--log", long_log)
    assert piped.code == 0 and "Verifying" not in piped.out + piped.err
