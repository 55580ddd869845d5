"""The command-line tools over a Kafka log: ``import``, ``replay``, ``audit``, ``explain``, ``metrics``, ``pending``,
``log inspect`` and ``replay --verify`` with ``--log kafka://HOST:PORT/TOPIC``, as over the embedded log.

Objects are imported into a new topic and into an embedded log; a scheduler replica (a real process) decides on
the topic and stops gracefully (leaving its snapshot on the snapshot topic). Then each tool reads the topic:
``replay`` gives the queues and workloads the embedded log gives before any decision, and after the decisions the
workloads the replica admitted; ``replay`` starts from the replica's snapshot and equals a fold from the
beginning; ``--to`` stops before the first reservation; ``audit`` shows the reservation at its Kafka offset.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from procs import start_replica

REPO = Path(__file__).resolve().parents[3]
OBJECTS = REPO / "tests" / "fixtures" / "cluster.yaml"
PENDING = "team-a/infer-2"
"""The one workload of ``OBJECTS`` that is pending: the replica admits it."""


async def cli(*args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_ES_")}
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "kueue_es", *args], cwd=REPO, env=env,
                                   capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


async def ok(*args: str) -> str:
    code, out, err = await cli(*args)
    assert code == 0, f"kueue-es {' '.join(args)} exited with {code}:\n{err}"
    return out


def _phases(replay: dict) -> dict[str, str]:
    return {f"{w['namespace']}/{w['name']}": w["state"] for w in replay["workloads"]}


@pytest.mark.asyncio
async def test_the_tools_read_a_kafka_log(kafka_bootstrap: str, tmp_path: Path) -> None:
    url = f"kafka://{kafka_bootstrap}/cli-{secrets.token_hex(3)}"
    # a topic that does not exist is refused from the cluster's topic list (the client's own metadata wait for it
    # would take 30 s); asked first, it runs beside the rest
    missing = asyncio.create_task(
        cli("replay", "--log", f"kafka://{kafka_bootstrap}/no-such-topic-{secrets.token_hex(3)}"))
    embedded = str(tmp_path / "log")
    # commands that do not depend on each other run side by side (each is a process of its own)
    imported = json.loads((await asyncio.gather(ok("import", "-f", str(OBJECTS), "--log", url, "-o", "json"),
                                                ok("import", "-f", str(OBJECTS), "--log", embedded, "-o", "json")))[0])
    assert imported["appended"] == 11
    again = json.loads(await ok("import", "-f", str(OBJECTS), "--log", url, "-o", "json"))
    assert again["appended"] == 0, "import reads the Kafka log and appends only what changed"

    before, same = map(json.loads, await asyncio.gather(ok("replay", "--log", url, "-o", "json"),
                                                        ok("replay", "--log", embedded, "-o", "json")))
    assert {k: v for k, v in before.items() if k != "log"} == {k: v for k, v in same.items() if k != "log"}
    assert _phases(before)[PENDING] == "Pending"

    replica = await start_replica("cli", url)
    try:
        await replica.wait_for("active")
        for _ in range(120):
            after = json.loads(await ok("replay", "--log", url, "-o", "json", "--no-checkpoints"))
            if _phases(after)[PENDING] == "Admitted":
                break
            await asyncio.sleep(0.5)
    finally:
        assert await replica.terminate() == 0
    after = json.loads(await ok("replay", "--log", url, "-o", "json", "--no-checkpoints"))
    assert _phases(after)[PENDING] == "Admitted", after

    # the replica's final snapshot is where a replay starts; it changes nothing of the answer
    from_snapshot = json.loads(await ok("replay", "--log", url, "-o", "json"))
    assert "snapshots" in from_snapshot["checkpoint"]["path"]
    assert {k: v for k, v in from_snapshot.items() if k != "checkpoint"} == after

    # audit: the reservation of an admitted workload, at its Kafka offset; replay --to just before it
    trail = json.loads(await ok("audit", "--log", url, PENDING, "-o", "json"))
    reserved = next(s for s in trail["steps"] if s["step"] == "QuotaReserved")
    assert reserved["offset"] >= 1_000_000, "a Kafka log offset: record * 1,000,000 + index"
    just_before = str(reserved["offset"] - 1)
    earlier, metrics, explained, pending, inspected, verified = await asyncio.gather(
        ok("replay", "--log", url, "--to", just_before, "-o", "json"),
        ok("metrics", "--log", url),
        ok("explain", "--log", url, PENDING),
        ok("pending", "--log", url, "--to", just_before, "--cluster-queue", "cq-b"),
        ok("log", "inspect", "--log", url, "-o", "json"),
        ok("replay", "--log", url, "--verify"))
    assert _phases(json.loads(earlier))[PENDING] == "Pending"

    assert 'kueue_admitted_workloads_total{cluster_queue="cq-b"' in metrics
    assert "Admitted" in explained
    assert "infer-2" in pending
    inspected = json.loads(inspected)
    assert inspected["events"] == sum(inspected["byType"].values()) > 11
    assert inspected["byType"]["QuotaReserved"] >= 1 and inspected["byType"]["ObjectUpserted"] == 11
    assert "re-run to identical results" in verified

    code, _, err = await missing
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1, err
