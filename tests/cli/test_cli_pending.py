"""``kueue-es pending``: a queue's pending workloads at a point of a log, through the real command.

The log: the objects of ``tests/scheduler/visibility/two-local-queues.yaml`` imported, two scheduling cycles
appended as the scheduler decides them (two heads parked), then a later, more urgent workload imported at 00:05.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import REPO, append, fold, kueue_es, one_line_error
from fixtures import fastyaml

from kueue_es.scheduler.config import DEFAULT
from kueue_es.scheduler.cycle import run_cycle

CASE = REPO / "tests" / "scheduler" / "visibility" / "two-local-queues.yaml"
LATE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: urgent, namespace: team-a, uid: u-urgent, creationTimestamp: '2024-01-01T00:05:00Z'}
spec:
  queueName: lq-b
  priority: 20
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}}
"""
BEFORE = ["team-a/big", "team-b/x1", "team-a/b0", "team-a/a1", "team-a/b1", "team-a/a2"]


def _cycles(log: Path, n: int) -> None:
    """Append ``n`` scheduling cycles, decided on the log's state as the scheduler would."""
    for _ in range(n):
        state = fold(log)
        batch = run_cycle(state, DEFAULT, state.time, state.last_cycle + 1)
        assert batch
        append(log, batch)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pending")
    objects = tmp / "objects.yaml"
    objects.write_text(fastyaml.safe_dump_all(fastyaml.safe_load(CASE.read_text())["objects"]))
    path = tmp / "log"
    assert kueue_es("import", "-f", objects, "--log", path, "--time", "2024-01-01T00:00:00Z").code == 0
    _cycles(path, 2)
    late = tmp / "late.yaml"
    late.write_text(LATE)
    assert kueue_es("import", "-f", late, "--log", path).code == 0
    return path


def _json(*args: str | Path) -> dict:
    r = kueue_es("pending", *args, "-o", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _keys(doc: dict) -> list[str]:
    return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in doc["items"]]


def test_what_was_pending_at_a_time_and_in_which_order(log: Path) -> None:
    then = _json("--log", log, "--cluster-queue", "cq", "--at", "2024-01-01T00:01:00Z")
    assert _keys(then) == BEFORE
    assert [i["positionInClusterQueue"] for i in then["items"]] == [0, 1, 2, 3, 4, 5]
    assert [i["positionInLocalQueue"] for i in then["items"]] == [0, 0, 0, 1, 1, 2]
    now = _json("--log", log, "--cluster-queue", "cq")
    assert _keys(now) == ["team-a/urgent", *BEFORE]


def test_json_is_the_api_summary_with_owner_references_from_the_log(log: Path) -> None:
    doc = _json("--log", log, "--local-queue", "team-a/lq-a", "--offset", "1", "--limit", "1")
    assert doc == {
        "kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {},
        "items": [{"metadata": {"name": "a1", "namespace": "team-a", "creationTimestamp": "2024-01-01T00:00:10Z",
                                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-a1",
                                                     "uid": "5863cf0e-b0e7-43bf-a445-f41fa1abedfa"}]},
                   "priority": 5, "localQueueName": "lq-a", "positionInClusterQueue": 4, "positionInLocalQueue": 1}]}
    v1beta1 = _json("--log", log, "--local-queue", "team-a/lq-a", "--api-version", "v1beta1")
    assert v1beta1["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"


def test_to_an_offset_and_yaml(log: Path) -> None:
    """Offset 7: the queues are in the log, no workload yet."""
    r = kueue_es("pending", "--log", log, "--cluster-queue", "cq", "--to", "7", "-o", "yaml")
    assert r.code == 0, r.err
    assert fastyaml.safe_load(r.out) == {"kind": "PendingWorkloadsSummary",
                                     "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {}, "items": []}


def test_table(log: Path) -> None:
    r = kueue_es("pending", "--log", log, "--local-queue", "team-a/lq-b")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["POSITION", "IN", "LOCALQUEUE", "NAMESPACE", "NAME", "LOCALQUEUE", "PRIORITY",
                                "CREATED"]
    assert [line.split()[:5] for line in lines[1:]] == [
        ["0", "0", "team-a", "urgent", "lq-b"], ["3", "1", "team-a", "b0", "lq-b"], ["5", "2", "team-a", "b1", "lq-b"]]
    empty = kueue_es("pending", "--log", log, "--local-queue", "team-a/orphan")
    assert empty.code == 0 and empty.out == "No pending workloads in LocalQueue team-a/orphan.\n"


def test_an_unknown_queue_is_not_found_exit_1(log: Path) -> None:
    """As ``kubectl get`` of a missing object: one line naming the kind and the name, exit 1."""
    r = kueue_es("pending", "--log", log, "--cluster-queue", "nope")
    assert r.code == 1
    assert one_line_error(r) == ('kueue-es: error: (NotFound) ClusterQueue "nope" not found in the log at offset 17 '
                                 "(known: cq)")
    r = kueue_es("pending", "--log", log, "--local-queue", "team-c/lq-a")
    assert r.code == 1 and '(NotFound) LocalQueue "team-c/lq-a" not found in the log' in one_line_error(r)


def test_bad_flags_exit_2(log: Path) -> None:
    r = kueue_es("pending", "--log", log, "--local-queue", "lq-a")
    assert r.code == 2 and "not an object key: 'lq-a' (expected NAMESPACE/NAME)" in one_line_error(r)
    r = kueue_es("pending", "--log", log)
    assert r.code == 2 and "one of the arguments --cluster-queue --local-queue is required" in one_line_error(r)
    r = kueue_es("pending", "--log", log, "--cluster-queue", "cq", "--limit", "many")
    assert r.code == 2 and "--limit" in one_line_error(r)
    r = kueue_es("pending", "--log", log.parent / "missing", "--cluster-queue", "cq")
    assert r.code == 2 and "no such log" in one_line_error(r)
