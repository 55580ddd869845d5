"""``/metrics`` of ``kueue-es run`` over the embedded log, scraped over HTTP; a restart (a replay) brings the
counters back where they were."""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest
from fixtures.scrape import kueue_samples

from kueue_es.cli import main

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, accept: str = "") -> tuple[str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode(), resp.headers["Content-Type"]


DURATION = "kueue_admission_attempt_duration_seconds"


def attempts(samples: dict) -> dict[str, float]:
    """admission_attempts_total per result."""
    return {dict(labels)["result"]: v for (name, labels), v in samples.items()
            if name == "kueue_admission_attempts_total"}


def durations(live: dict) -> dict[str, float]:
    """How many attempts admission_attempt_duration_seconds observed, per result (checked against its buckets)."""
    out = {}
    for (name, labels), v in live.items():
        lbl = dict(labels)
        if name == DURATION + "_count":
            out[lbl["result"]] = v
            buckets = {b["le"]: n for (nm, ls), n in live.items() if nm == DURATION + "_bucket"
                       for b in [dict(ls)] if b["result"] == lbl["result"]}
            assert list(buckets) == ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
                                     "+Inf"]  # Kueue's: the client's defaults
            assert buckets["+Inf"] == v and lbl["replica_role"] == "standalone"
    return out


class Service:
    def __init__(self, log_dir: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_ES_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kueue_es", "run", "--log", str(log_dir), "--metrics-port", str(port)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.active = json.loads(self.proc.stdout.readline())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def test_metrics_are_served_and_survive_a_restart(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    assert main(["import", "-f", str(REPO / "tests/fixtures/cluster.yaml"), "--log", str(log_dir)]) == 0
    port = free_port()
    reserved = ("kueue_quota_reserved_workloads_total",
                (("cluster_queue", "cq-b"), ("priority_class", ""), ("replica_role", "standalone")))
    service = Service(log_dir, port)
    try:
        assert service.active["event"] == "active" and service.active["metricsPort"] == port
        deadline = time.monotonic() + 30
        found: dict = {}
        while reserved not in found and time.monotonic() < deadline:  # the scheduler admits infer-2 in cq-b
            time.sleep(0.2)
            text, content_type = scrape(port)
            found = kueue_samples(text)
        assert found.get(reserved) == 1, text
        assert content_type.startswith("text/plain; version=0.0.4")
        assert found[("kueue_cluster_queue_status",
                      (("cluster_queue", "cq-a"), ("replica_role", "standalone"), ("status", "active")))] == 1
        assert "process_cpu_seconds_total" in text  # the process metrics come along
        assert f'kueue_build_info{{build_date="",compiler="{platform.python_implementation().lower()}",' \
               f'git_commit="",git_version="{version("kueue-es")}",go_version="python{platform.python_version()}"' in text
        text, content_type = scrape(port, accept="application/openmetrics-text; version=1.0.0")
        assert content_type.startswith("application/openmetrics-text") and text.rstrip().endswith("# EOF")
        time.sleep(1.5)  # nothing left to decide: what it shows now is the settled log
        text = scrape(port)[0]
        before = kueue_samples(text)
        # every attempt this process made is timed once, under the result the counter gives it (the log was
        # imported with no decision in it, so the counter counts this process's attempts alone)
        assert durations(kueue_samples(text, live=True)) == attempts(before) != {}
        service.stop()
    finally:
        service.kill()

    again = Service(log_dir, port)  # a restart is a replay: counters and histograms come back, none reset
    try:
        text = scrape(port)[0]
        after = kueue_samples(text)
        assert after == before
        # ... but the live attempt durations, like Kueue's, start from zero: only this process's attempts
        new = {r: v - attempts(before).get(r, 0) for r, v in attempts(after).items()}
        assert durations(kueue_samples(text, live=True)) == {r: v for r, v in new.items() if v}
        again.stop()
    finally:
        again.kill()
    cli = subprocess.run([sys.executable, "-m", "kueue_es", "metrics", "--log", str(log_dir)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and kueue_samples(cli.stdout) == before


def test_metrics_port_setting(tmp_path: Path) -> None:
    from events.errors import InvalidInput
    from kueue_es import config

    assert config.load(env={}).metrics.port == 0  # not served unless asked for
    assert config.load(env={"KUEUE_ES_METRICS_PORT": "8080"}).metrics.port == 8080
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics:\n  port: 70000\n")
    with pytest.raises(InvalidInput, match=r"\$\.metrics\.port: must be a port number \(0-65535\), not 70000"):
        config.load(str(bad), env={})


def test_attempt_durations_observe_attempts_only_under_the_counters_result() -> None:
    from fixtures.eventgen import admission

    from events import schema as ev
    from kueue_es.metrics import AttemptDurations

    d = AttemptDurations()
    reserved = ev.QuotaReserved(time=1, cycle=1, input=0, key="ns/a", admission=admission("cq", "f0", 1000))
    no_fit = ev.WorkloadPending(time=1, cycle=2, input=0, key="ns/b", reason="WaitingForQuota", message="m",
                                requeue_reason="NoFit")
    d.observe([reserved, no_fit], 0.005)  # on the bound: counted in its bucket (le)
    d.observe([no_fit], 12.0)  # past the largest bound
    d.observe([ev.ClockTicked(time=2, id="t")], 0.1)  # no attempt
    d.observe([], 0.1)
    family = d.family()
    assert family.samples == [(("inadmissible",), [0] * 11 + [1], 12.0), (("success",), [1] * 12, 0.005)]
