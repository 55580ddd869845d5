"""``kueue-es demo`` as a new user runs it: the installed console script, in an empty directory."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("kueue-es")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "kueue_es"]
    proc = subprocess.run(cmd + args, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_demo_prints_summary_and_working_next_commands(tmp_path) -> None:
    if not SCRIPT.exists():
        pytest.skip("no kueue-es console script next to the interpreter (package not installed)")
    proc = _run(["demo"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "kueue-es demo:" in out and "no cluster and no Kafka" in out
    assert "workload class" in out and "avg time to admission" in out
    assert "clusterqueue class" in out and "avg usage of nominal" in out
    assert "Simulated wall time" in out and "lower bound" in out and "Decisions" in out
    assert "The event log is in ./kueue-es-demo-log" in out
    assert (tmp_path / "kueue-es-demo-log").is_dir()
    m = re.search(r"^batch\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)
    assert m and m.group(1) == m.group(2) == m.group(3) and int(m.group(4)) > 0, "batch work gets preempted"
    commands = [line.split("#")[0].strip() for line in out.splitlines() if line.startswith("  kueue-es ")]
    assert any(c.startswith("kueue-es audit --log ./kueue-es-demo-log ") for c in commands)
    assert any(c.startswith("kueue-es replay --log ./kueue-es-demo-log") for c in commands)
    assert "kueue-es replay --log ./kueue-es-demo-log --verify" in commands
    for c in commands:  # every suggested command works as printed
        r = _run(shlex.split(c)[1:], tmp_path)
        assert r.returncode == 0, (c, r.stderr)
        assert r.stdout.strip(), c

    first = {p.name: p.read_bytes() for p in (tmp_path / "kueue-es-demo-log").glob("*.seg")}
    again = _run(["demo"], tmp_path)  # run again: the previous demo log is replaced, not appended to
    assert again.returncode == 0 and "was replaced" in again.stdout
    assert {p.name: p.read_bytes() for p in (tmp_path / "kueue-es-demo-log").glob("*.seg")} == first
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert leftovers == [], "the replaced log, renamed aside, is removed"


def test_demo_json_and_refusal_to_overwrite_foreign_data(tmp_path) -> None:
    proc = _run(["demo", "-o", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"workloadClasses"' in proc.stdout and '"simulatedWallSeconds"' in proc.stdout
    other = tmp_path / "other"
    other.mkdir()
    (other / "kueue-es-demo-log").mkdir()
    (other / "kueue-es-demo-log" / "notes.txt").write_text("mine")
    proc = _run(["demo"], other)
    assert proc.returncode == 2
    assert "not a log written by the demo" in proc.stderr
    assert (other / "kueue-es-demo-log" / "notes.txt").read_text() == "mine"


def test_demo_keeps_a_log_it_did_not_write(tmp_path) -> None:
    """A log of the same shape (segments and LOCK) that ``import`` wrote is not the demo's to replace."""
    (tmp_path / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
    assert _run(["import", "--log", "kueue-es-demo-log", "-f", "ns.yaml"], tmp_path).returncode == 0
    log = tmp_path / "kueue-es-demo-log"
    before = {p.name: p.read_bytes() for p in log.glob("*.seg")}
    proc = _run(["demo"], tmp_path)
    assert proc.returncode == 2 and "not a log written by the demo" in proc.stderr
    assert {p.name: p.read_bytes() for p in log.glob("*.seg")} == before and before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kueue-es-demo-log", "ns.yaml"]


def _previous_demo_log(tmp_path: Path) -> Path:
    log = tmp_path / "kueue-es-demo-log"
    log.mkdir()
    (log / "00000000000000000000.seg").write_bytes(b"")
    return log


def test_the_previous_log_is_checked_and_moved_aside_under_its_writer_lock(tmp_path, monkeypatch) -> None:
    """Between the check that the log is the demo's and its removal, no writer may take it: one that did would
    append to a directory about to be deleted."""
    from events.errors import LogLocked
    from events.filelog import take_writer_lock
    from kueue_es.commands import demo

    log = _previous_demo_log(tmp_path)
    seen = []

    def written_by_simulator(target: Path) -> bool:
        with pytest.raises(LogLocked):
            take_writer_lock(target)
        seen.append(target)
        return True

    monkeypatch.setattr(demo, "_written_by_simulator", written_by_simulator)
    stale = tmp_path / f".kueue-es-demo-log.replaced-{os.getpid()}"  # left by a run killed half-way
    stale.mkdir()
    (stale / "x.seg").write_bytes(b"")
    assert demo._clear_previous_demo(log) is True
    assert seen == [log] and not log.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [stale.name]


def test_a_replaced_log_that_cannot_be_removed_is_reported_not_fatal(tmp_path, monkeypatch, capsys) -> None:
    from kueue_es.commands import demo

    log = _previous_demo_log(tmp_path)
    monkeypatch.setattr(demo, "_written_by_simulator", lambda target: True)

    def rmtree(path: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(demo.shutil, "rmtree", rmtree)
    assert demo._clear_previous_demo(log) is True
    assert not log.exists()
    (aside,) = [p for p in tmp_path.iterdir()]
    assert aside.name.startswith(".kueue-es-demo-log.replaced-")
    assert capsys.readouterr().err == (f"kueue-es: warning: could not remove the replaced demo log, renamed to {aside}: "
                                       "[Errno 13] Permission denied\n")
