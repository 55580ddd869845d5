"""``kueue-es run`` without Kafka: the scheduler over the embedded log, stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from events import schema as ev
from events.filelog import FileLog
from kueue_es.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_run_schedules_over_the_embedded_log_until_sigterm(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    assert main(["import", "-f", str(REPO / "tests/fixtures/cluster.yaml"), "--log", str(log_dir)]) == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_ES_")}
    proc = subprocess.Popen([sys.executable, "-m", "kueue_es", "run", "--log", "./log"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        active = json.loads(proc.stdout.readline())
        assert active["event"] == "active" and active["log"] == "log"
        deadline = time.monotonic() + 30
        decisions: list[ev.Record] = []
        while not decisions and time.monotonic() < deadline:
            time.sleep(0.1)
            reader = FileLog.open(log_dir, readonly=True)
            decisions = [r for b in reader.scan() for r in b if isinstance(r.event, ev.Decision)]
        assert any(isinstance(r.event, ev.QuotaReserved) and r.event.key == "team-a/infer-2"
                   for r in decisions), decisions
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        reports = [json.loads(line) for line in out.splitlines()]
        assert reports[-1]["event"] == "stopped"
        assert {r["log"] for r in reports} == {"log"}, "every report names the log alike"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
