"""A log another process is writing (it holds the single-writer lock): no command may lose what it stores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clihelp import REPO

from events.filelog import FileLog


def _in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "kueue_es", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _stored(log: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.glob("*.seg"))}


def test_demo_does_not_replace_its_previous_log_while_a_writer_holds_it(tmp_path: Path) -> None:
    """``kueue-es run --log ./kueue-es-demo-log`` writing the demo's log: a second ``kueue-es demo`` used to delete
    the directory under it, and everything the writer appended after went to an unlinked file."""
    assert _in(tmp_path, "demo", "-o", "json").returncode == 0
    log = tmp_path / "kueue-es-demo-log"
    before = _stored(log)
    writer = FileLog.open(log, fsync="never")
    try:
        proc = _in(tmp_path, "demo")
        assert _stored(log) == before
    finally:
        writer.close_sync()
    assert proc.returncode == 2
    assert proc.stderr == (f"kueue-es: error: log kueue-es-demo-log is locked by another writer (pid {os.getpid()}): "
                           "the demo replaces its previous log only when nothing writes to it; stop the writer, or "
                           "pass --log PATH\n")
    assert proc.stdout == ""


def test_a_writer_on_a_log_another_writer_holds_is_misuse(tmp_path: Path) -> None:
    """``import`` and ``run`` on a log a running ``kueue-es run`` holds: exit code 2, one line naming the log and
    the holder, and the log as it was."""
    log = tmp_path / "log"
    ns = tmp_path / "ns.yaml"
    ns.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
    assert _in(tmp_path, "import", "-f", str(ns), "--log", str(log), "--time", "2024-05-01T00:00:00Z").returncode == 0
    before = _stored(log)
    writer = FileLog.open(log, fsync="never")
    try:
        ns.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n")
        imported = _in(tmp_path, "import", "-f", str(ns), "--log", str(log))
        run = _in(tmp_path, "run", "--log", str(log))
    finally:
        writer.close_sync()
    for proc in (imported, run):
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines()[-1] == f"kueue-es: error: log {log} is locked by another writer (pid {os.getpid()})"
    assert _stored(log) == before
