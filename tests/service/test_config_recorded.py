"""The scheduler records the Kueue Configuration it runs with, and ``replay --verify`` re-runs under it.

The embedded service (``kueue_es.service.serve_embedded``, as ``kueue-es run`` wires it from settings) runs over a
log imported from tests/fixtures/cluster.yaml, whose ``train-1`` was admitted at 10:00:05 without its pods
becoming ready; the log's time is 10:01:00. Under ``waitForPodsReady.timeout: 10s`` the scheduler evicts it at
once; under Kueue's default (30m) it does not — so which configuration a decision was made under shows.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest
from fixtures import fastyaml

from events import schema as ev
from events.filelog import FileLog
from kueue_es import config, service
from kueue_es.cli import main
from kueue_es.scheduler import decide
from projections.cluster import ClusterState

REPO = Path(__file__).resolve().parents[2]
CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
PODS_READY_10S = CONFIG + "waitForPodsReady:\n  timeout: 10s\nmanageJobsWithoutQueueName: true\n"
PODS_READY_10S_FAIR = PODS_READY_10S + "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]\n"


def read(log_dir: Path) -> list[ev.Record]:
    log = FileLog.open(log_dir, readonly=True)
    try:
        return [r for batch in log.scan() for r in batch]
    finally:
        log.close_sync()


def fold(recs: list[ev.Record]) -> ClusterState:
    state = ClusterState()
    for r in recs:
        state.apply(r)
    return state


def configs(recs: list[ev.Record]) -> list[ev.Record]:
    return [r for r in recs if isinstance(r.event, ev.ConfigRecorded)]


def decisions(recs: list[ev.Record]) -> list[ev.Record]:
    return [r for r in recs if isinstance(r.event, ev.Decision)]


async def _serve_until_settled(log_dir: Path, kueue_config: Path, instance: str) -> None:
    settings = config.load(env={}, overrides={"log": str(log_dir), "scheduler": {
        "kueue_config": str(kueue_config), "ticks": False, "instance_id": instance}})
    opts = service.options(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(service.serve_embedded(str(log_dir), opts, stop, lambda kind, fields: None))
    try:
        with anyio.fail_after(60):
            while True:
                await asyncio.sleep(0.05)
                if task.done():
                    task.result()
                    raise AssertionError("the service stopped by itself")
                state = fold(read(log_dir))
                if not (opts.config_to_record(state, instance) or decide(state, opts.config)):
                    break  # what the service's loop would append next: nothing
    finally:
        stop.set()
        await task


def serve_until_settled(log_dir: Path, kueue_config: Path, instance: str) -> list[ev.Record]:
    asyncio.run(_serve_until_settled(log_dir, kueue_config, instance))
    return read(log_dir)


def import_workload(log_dir: Path, tmp_path: Path, name: str) -> None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
           "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                        "creationTimestamp": "2024-05-01T10:02:00Z"},
           "spec": {"queueName": "lq-b", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
               "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}}]}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(fastyaml.safe_dump(doc))
    assert main(["import", "-f", str(path), "--log", str(log_dir)]) == 0


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    log_dir = tmp_path / "log"
    assert main(["import", "-f", str(REPO / "tests/fixtures/cluster.yaml"), "--log", str(log_dir)]) == 0
    return log_dir


def test_the_service_records_its_configuration_and_verify_re_runs_under_it(
        log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kueue_config = tmp_path / "kueue-config.yaml"
    kueue_config.write_text(PODS_READY_10S)
    recs = serve_until_settled(log_dir, kueue_config, "replica-a")

    (recorded,) = configs(recs)
    assert recorded.event.document == fastyaml.safe_load(PODS_READY_10S)  # as written, unused fields too
    assert recorded.event.writer == "replica-a" and recorded.event.source == str(kueue_config)
    made = decisions(recs)
    assert made and recorded.offset < made[0].offset and made[0].event.input >= recorded.offset
    assert any(isinstance(r.event, ev.WorkloadEvicted) and r.event.reason == "PodsReadyTimeout"
               and r.event.key == "team-a/train-1" for r in made), "the 10s timeout decided"
    capsys.readouterr()

    assert main(["replay", "--log", str(log_dir), "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"configuration: recorded at offset {recorded.offset}" in out
    assert "waitForPodsReady (timeout 10s)" in out and "verified:" in out

    defaults = tmp_path / "defaults.yaml"
    defaults.write_text(CONFIG)
    assert main(["replay", "--log", str(log_dir), "--verify", "--config", str(defaults)]) == 1
    out = capsys.readouterr().out
    assert (f"note: --config {defaults} overrides the configuration recorded in the log (at offset "
            f"{recorded.offset})") in out
    assert "MISMATCH" in out and "PodsReadyTimeout" in out

    assert main(["replay", "--log", str(log_dir), "--verify", "-o", "json"]) == 0
    data = fastyaml.safe_load(capsys.readouterr().out)
    assert data["configOverride"] is None and data["batchesBeforeConfiguration"] == 0
    assert [c["offset"] for c in data["configurations"]] == [recorded.offset]
    assert data["configurations"][0]["writer"] == "replica-a"


def test_a_restart_records_the_configuration_again_only_when_it_changed(
        log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Defaults first, then the 10s timeout: each decision verifies only under the configuration in force at its
    point of the log — neither one alone (``--config``) re-runs the whole log to the same decisions."""
    kueue_config = tmp_path / "kueue-config.yaml"
    kueue_config.write_text(CONFIG)
    first = serve_until_settled(log_dir, kueue_config, "replica-a")
    assert len(configs(first)) == 1
    assert not [r for r in decisions(first) if isinstance(r.event, ev.WorkloadEvicted)]

    import_workload(log_dir, tmp_path, "infer-3")
    same = serve_until_settled(log_dir, kueue_config, "replica-b")  # another instance, the same document
    assert len(decisions(same)) > len(decisions(first)), "the restarted service decided something"
    assert configs(same) == configs(first)

    kueue_config.write_text(PODS_READY_10S_FAIR)
    import_workload(log_dir, tmp_path, "infer-4")
    changed = serve_until_settled(log_dir, kueue_config, "replica-c")
    old, new = configs(changed)
    assert old == configs(first)[0] and new.event.writer == "replica-c"
    assert new.event.document == fastyaml.safe_load(PODS_READY_10S_FAIR)
    evicted = [r for r in decisions(changed) if isinstance(r.event, ev.WorkloadEvicted)]
    assert "team-a/train-1" in {r.event.key for r in evicted} and all(r.event.input >= new.offset for r in evicted)

    capsys.readouterr()
    assert main(["replay", "--log", str(log_dir), "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"recorded at offset {old.offset}" in out and f"recorded at offset {new.offset}" in out
    for doc in (CONFIG, PODS_READY_10S_FAIR):
        kueue_config.write_text(doc)
        assert main(["replay", "--log", str(log_dir), "--verify", "--config", str(kueue_config)]) == 1
