"""``/metrics`` of ``kueue-es run`` over the embedded log, scraped over HTTP; a restart (a replay) brings the
counters back where they were."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

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


def kueue_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) if family.name.startswith("kueue_")
            for s in family.samples}


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
        text, content_type = scrape(port, accept="application/openmetrics-text; version=1.0.0")
        assert content_type.startswith("application/openmetrics-text") and text.rstrip().endswith("# EOF")
        time.sleep(1.5)  # nothing left to decide: what it shows now is the settled log
        before = kueue_samples(scrape(port)[0])
        service.stop()
    finally:
        service.kill()

    again = Service(log_dir, port)  # a restart is a replay: counters and histograms come back, none reset
    try:
        assert kueue_samples(scrape(port)[0]) == before
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
