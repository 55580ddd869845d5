"""import -> replay -> audit -> log inspect, through the real ``kueue-es`` command, on tests/fixtures/cluster.yaml."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from clihelp import FIXTURES, append, kueue_es
from fixtures import fastyaml

from events import schema as ev
from events.objects import Admission, PodSetAssignment
from events.timefmt import parse_time

CLUSTER = FIXTURES / "cluster.yaml"
IMPORT_TIME = "2024-05-01T08:00:00Z"
PENDING_MSG = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand"


def t(clock: str) -> int:
    return parse_time(f"2024-05-01T{clock}Z")


def decisions() -> list[list[ev.AnyEvent]]:
    """What a scheduler might decide after the import (offsets 11..18)."""
    adm = Admission(cluster_queue="cq-b", pod_set_assignments=[
        PodSetAssignment(name="main", flavors={"cpu": "on-demand"}, resource_usage={"cpu": "500m"}, count=1)])
    return [
        [ev.WorkloadPending(key="team-a/infer-2", reason="Pending", message=PENDING_MSG, time=t("10:02:00"),
                            cycle=1, input=10)],                                                         # 11
        [ev.WorkloadPending(key="team-a/infer-2", reason="Pending", message=PENDING_MSG, time=t("10:02:01"),
                            cycle=2, input=11)],                                                         # 12
        [ev.WorkloadPreempted(key="team-a/train-1", reason="InCohortReclamation",
                              message="Preempted to accommodate a workload (UID: 2) due to reclamation within the cohort",
                              preemptor="team-a/infer-2", time=t("10:02:02"), cycle=3, input=12)],       # 13
        [ev.JobStopped(key="team-a/train-1", time=t("10:02:10"))],                                     # 14
        [ev.WorkloadRequeued(key="team-a/train-1", status=True, reason="Preempted", release=True,
                             time=t("10:02:11"), cycle=4, input=14),                                     # 15
         ev.QuotaReserved(key="team-a/infer-2", admission=adm, time=t("10:02:11"), cycle=4, input=14),  # 16
         ev.WorkloadAdmitted(key="team-a/infer-2", time=t("10:02:11"), cycle=4, input=14)],             # 17
        [ev.WorkloadFinished(key="team-a/infer-2", reason="Succeeded", message="done", time=t("10:30:00"))],  # 18
    ]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    r = kueue_es("import", "-f", CLUSTER, "--log", path, "--time", IMPORT_TIME)
    assert r.code == 0, r.err
    assert "workload/team-a/train-1 imported at offset 8" in r.out
    assert f"appended 11 events to {path} (offsets 0..10)" in r.out
    for batch in decisions():
        append(path, batch)
    return path


def replay_json(log: Path, *extra: str | Path) -> dict:
    r = kueue_es("replay", "--log", log, "-o", "json", *extra)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_import_appends_observed_events_with_times_and_ids(tmp_path: Path) -> None:
    path = tmp_path / "log"
    r = kueue_es("import", "-f", CLUSTER, "--log", path, "-o", "json")  # empty log, no --time: epoch 0
    assert r.code == 0, r.err
    assert "no creationTimestamp" in r.err and "--time" in r.err  # a warning, on one line
    out = json.loads(r.out)
    assert out["appended"] == 11
    rows = {e["key"]: e for e in out["events"]}
    assert rows["team-a/train-1"]["time"] == "2024-05-01T10:00:00.000Z"  # its creationTimestamp
    assert rows["cq-a"]["time"] == "1970-01-01T00:00:00.000Z"
    assert rows["team-a/lq-a"]["kind"] == "LocalQueue"
    # the same objects at the same times get the same ids: already the latest in the log, they are unchanged
    again = json.loads(kueue_es("import", "-f", CLUSTER, "--log", path, "-o", "json",
                                "--time", "1970-01-01T00:00:00Z").out)
    assert again["appended"] == 0 and again["events"] == []
    assert [e["id"] for e in again["unchanged"]] == [e["id"] for e in out["events"]]
    text = kueue_es("import", "-f", CLUSTER, "--log", path, "--time", "1970-01-01T00:00:00Z")
    assert text.code == 0 and "workload/team-a/train-1 unchanged" in text.out and "appended nothing" in text.out
    # a later time gives new ids to undated objects only: they are appended, the dated ones stay unchanged
    later = json.loads(kueue_es("import", "-f", CLUSTER, "--log", path, "-o", "json",
                                "--time", "2024-06-01T00:00:00Z").out)
    ids = {e["key"]: e["id"] for e in later["events"]}
    assert "cq-a" in ids and ids["cq-a"] != rows["cq-a"]["id"]
    assert [e["offset"] for e in later["events"]] == list(range(11, 11 + len(ids)))
    assert {e["key"] for e in later["unchanged"]} == {"team-a/train-1", "team-a/infer-2", "team-a/etl-0"}
    # re-importing the first version of cq-a is a change again (its latest event is the later one)
    back = json.loads(kueue_es("import", "-f", CLUSTER, "--log", path, "-o", "json",
                               "--time", "1970-01-01T00:00:00Z").out)
    assert {e["key"] for e in back["events"]} == set(ids)


def test_importing_the_same_objects_again_without_a_time_appends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log"
    first = json.loads(kueue_es("import", "-f", CLUSTER, "--log", path, "-o", "json").out)
    assert first["appended"] == 11
    # the log's latest time is now 10:01:00, not the epoch the undated objects were observed at: still the same
    again = json.loads(kueue_es("import", "-f", CLUSTER, "--log", path, "-o", "json").out)
    assert again["appended"] == 0 and len(again["unchanged"]) == 11
    # an undated object that did change is observed at the log's latest time
    changed = CLUSTER.read_text().replace("nominalQuota: 10", "nominalQuota: 12", 1)
    assert changed != CLUSTER.read_text()
    (tmp_path / "changed.yaml").write_text(changed)
    out = json.loads(kueue_es("import", "-f", tmp_path / "changed.yaml", "--log", path, "-o", "json").out)
    assert [(e["key"], e["time"]) for e in out["events"]] == [("cq-a", "2024-05-01T10:01:00.000Z")]


def test_import_defaults_to_the_latest_time_in_the_log(tmp_path: Path) -> None:
    path = tmp_path / "log"
    assert kueue_es("import", "-f", CLUSTER, "--log", path).code == 0
    # train-1 and infer-2 carry creationTimestamps: the latest is 10:01:00
    doc = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: late\n"
    r = kueue_es("import", "-f", "-", "--log", path, "-o", "yaml", stdin=doc)
    assert r.code == 0, r.err
    assert fastyaml.safe_load(r.out)["events"][0]["time"] == "2024-05-01T10:01:00.000Z"


def test_import_reads_deletions_and_every_events_time(log: Path) -> None:
    """A log that holds more than imports: an object deleted since is imported again (its content unchanged), the
    Workloads the decisions left alone stay unchanged, and the latest time is that of any event (here the
    decisions' WorkloadFinished at 10:30, after the deletion)."""
    append(log, [ev.ObjectDeleted(key="team-a/etl-0", kind="Workload", time=t("10:05:00"))])
    out = json.loads(kueue_es("import", "-f", CLUSTER, "--log", log, "-o", "json", "--time", IMPORT_TIME).out)
    assert [(e["kind"], e["key"], e["offset"]) for e in out["events"]] == [("Workload", "team-a/etl-0", 20)]
    assert {e["key"] for e in out["unchanged"]} >= {"team-a/train-1", "team-a/infer-2", "cq-a"}
    doc = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: late\n"
    r = kueue_es("import", "-f", "-", "--log", log, "-o", "yaml", stdin=doc)
    assert r.code == 0, r.err
    assert fastyaml.safe_load(r.out)["events"][0]["time"] == "2024-05-01T10:30:00.000Z"


def test_replay_shows_queues_and_workloads(log: Path) -> None:
    r = kueue_es("replay", "--log", log)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"Log {log}: state at offset 18, time 2024-05-01T10:30:00Z"
    cq_a = next(line for line in lines if line.startswith("cq-a "))
    assert cq_a.split()[:5] == ["cq-a", "research", "1", "0", "0"]
    assert "on-demand/cpu 0/10" in cq_a and "on-demand/memory 0/64Gi" in cq_a and "spot/cpu 0/4" in cq_a
    wl = {line.split()[0]: line.split() for line in lines if line.startswith("team-a/")}
    assert wl["team-a/train-1"][:4] == ["team-a/train-1", "Pending", "cq-a", "1000"]
    assert wl["team-a/infer-2"][:4] == ["team-a/infer-2", "Finished", "cq-b", "10"]
    assert wl["team-a/infer-2"][-1] == "Succeeded"
    assert wl["team-a/etl-0"][1] == "Finished"


def test_replay_to_an_offset_and_at_a_time(log: Path) -> None:
    before_release = replay_json(log, "--to", "14")
    cqs = {q["name"]: q for q in before_release["clusterQueues"]}
    assert before_release["offset"] == 14
    assert (cqs["cq-a"]["reservingWorkloads"], cqs["cq-a"]["admittedWorkloads"]) == (1, 1)
    assert cqs["cq-a"]["usage"][0] == {"flavor": "on-demand", "resource": "cpu", "used": "6", "nominal": "10"}
    assert cqs["cq-a"]["usage"][1]["used"] == "24Gi"
    wls = {w["name"]: w for w in before_release["workloads"]}
    assert wls["train-1"]["state"] == "Admitted"
    assert wls["train-1"]["flavors"] == {"main": {"cpu": "on-demand", "memory": "on-demand"}}
    evicted = {c["type"]: c for c in wls["train-1"]["status"]["conditions"]}["Evicted"]
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert wls["infer-2"]["state"] == "Pending" and wls["infer-2"]["message"] == PENDING_MSG
    record = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    assert wls["train-1"]["status"]["schedulingStats"] == record

    admitted = replay_json(log, "--at", "2024-05-01T10:05:00Z")
    assert admitted["offset"] == 17 and admitted["time"] == "2024-05-01T10:02:11Z"
    cqs = {q["name"]: q for q in admitted["clusterQueues"]}
    assert cqs["cq-b"]["usage"] == [{"flavor": "on-demand", "resource": "cpu", "used": "500m", "nominal": "2"}]
    assert (cqs["cq-b"]["reservingWorkloads"], cqs["cq-b"]["admittedWorkloads"], cqs["cq-a"]["pendingWorkloads"]) \
        == (1, 1, 1)
    wls = {w["name"]: w for w in admitted["workloads"]}
    assert wls["infer-2"]["state"] == "Admitted" and wls["train-1"]["state"] == "Pending"
    assert wls["train-1"]["clusterQueue"] == "cq-a"

    early = fastyaml.safe_load(kueue_es("replay", "--log", log, "--at", "2024-05-01T09:59:00Z", "-o", "yaml").out)
    assert {w["name"] for w in early["workloads"]} == {"etl-0"}  # train-1 and infer-2 were created later
    last = fastyaml.safe_load(kueue_es("replay", "--log", log, "-o", "yaml").out)
    assert {w["name"]: w for w in last["workloads"]}["train-1"]["status"]["schedulingStats"] == record  # kept


def test_snapshot_then_the_rest_equals_replaying_everything(log: Path, tmp_path: Path) -> None:
    snap = tmp_path / "state.snap"
    mid = replay_json(log, "--to", "13", "--save-snapshot", snap)
    assert snap.stat().st_size > 0 and mid["offset"] == 13
    assert replay_json(log, "--snapshot", snap) == replay_json(log)
    assert replay_json(log, "--snapshot", snap, "--to", "15") == replay_json(log, "--to", "15")


def test_audit_of_one_workload(log: Path) -> None:
    r = kueue_es("audit", "--log", log, "team-a/infer-2")
    assert r.code == 0, r.err
    rows = [line.split(None, 4) for line in r.out.splitlines()[1:]]
    assert [(row[0], row[2]) for row in rows] == [
        ("9", "Submitted"), ("9", "Queued"), ("11", "Pending"), ("16", "QuotaReserved"), ("17", "Admitted"),
        ("18", "Finished"),
    ]
    pending = r.out.splitlines()[3]
    assert PENDING_MSG in pending and "x2, last at offset 12" in pending
    assert "2024-05-01T10:02:00.000Z" in pending
    reserved = r.out.splitlines()[4]
    assert "cq-b" in reserved and "flavors cpu=on-demand" in reserved and "pods main=1" in reserved

    steps = json.loads(kueue_es("audit", "--log", log, "train-1", "-n", "team-a", "-o", "json").out)["steps"]
    assert [(s["offset"], s["step"]) for s in steps] == [
        (8, "Submitted"), (8, "QuotaReserved"), (8, "Admitted"), (13, "Preempted"), (14, "JobStopped"),
        (15, "Requeued"),
    ]
    assert steps[1]["observed"] and steps[1]["flavors"] == {"main": {"cpu": "on-demand", "memory": "on-demand"}}
    assert steps[1]["counts"] == {"main": 3}
    pre = steps[3]
    assert (pre["reason"], pre["preemptor"], pre["clusterQueue"], pre["cycle"]) == (
        "InCohortReclamation", "team-a/infer-2", "cq-a", 3)
    assert pre["time"] == "2024-05-01T10:02:02.000Z" and pre["timeMs"] == t("10:02:02")
    assert steps[5]["released"] is True


def test_audit_of_a_cluster_queue_as_csv_and_a_time_window(log: Path) -> None:
    r = kueue_es("audit", "--log", log, "--cluster-queue", "cq-b", "-o", "csv")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert {row["clusterQueue"] for row in rows} == {"cq-b"}
    assert [(row["offset"], row["workload"], row["step"]) for row in rows] == [
        ("9", "team-a/infer-2", "Submitted"), ("9", "team-a/infer-2", "Queued"), ("11", "team-a/infer-2", "Pending"),
        ("16", "team-a/infer-2", "QuotaReserved"), ("17", "team-a/infer-2", "Admitted"),
        ("18", "team-a/infer-2", "Finished"),
    ]
    assert rows[2]["repeat"] == "2" and rows[2]["lastOffset"] == "12"

    window = kueue_es("audit", "--log", log, "--since", "2024-05-01T10:02:05Z", "--until", "2024-05-01T10:02:11Z")
    assert window.code == 0, window.err
    assert [line.split()[0] for line in window.out.splitlines()[1:]] == ["14", "15", "16", "17"]


def test_audit_of_an_unknown_workload_fails(log: Path) -> None:
    r = kueue_es("audit", "--log", log, "team-a/nope")
    assert r.code == 1
    assert r.err.strip() == f'kueue-es: error: (NotFound) Workload "team-a/nope" not found in log {log}'


def test_audit_of_a_cluster_queue_the_log_never_saw_is_not_found(log: Path) -> None:
    """Not found (exit 1) like an unknown workload; one the log has seen but without any step: no history, exit 0."""
    r = kueue_es("audit", "--log", log, "--cluster-queue", "nope")
    assert (r.code, r.out) == (1, "")
    assert r.err.strip() == f'kueue-es: error: (NotFound) ClusterQueue "nope" not found in log {log}'
    idle = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: idle\nspec: {}\n"
    assert kueue_es("import", "-f", "-", "--log", log, stdin=idle).code == 0
    r = kueue_es("audit", "--log", log, "--cluster-queue", "idle")
    assert (r.code, r.out, r.err) == (0, "No admission history matches.\n", "")
    r = kueue_es("audit", "--log", log, "--cluster-queue", "cq-a", "--since", "2030-01-01T00:00:00Z")
    assert (r.code, r.out) == (0, "No admission history matches.\n")


def test_log_inspect(log: Path) -> None:
    r = kueue_es("log", "inspect", "--log", log, "-o", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["events"] == 19 and data["endOffset"] == 19
    assert data["byType"] == {"JobStopped": 1, "ObjectUpserted": 11, "QuotaReserved": 1, "WorkloadAdmitted": 1,
                              "WorkloadFinished": 1, "WorkloadPending": 2, "WorkloadPreempted": 1,
                              "WorkloadRequeued": 1}
    (seg,) = data["segments"]
    assert (seg["file"], seg["baseOffset"], seg["endOffset"], seg["frames"]) == ("00000000000000000000.seg", 0, 19, 7)
    assert seg["bytes"] == data["bytes"] == (log / seg["file"]).stat().st_size
    assert data["firstTime"] == "2024-05-01T08:00:00.000Z" and data["lastTime"] == "2024-05-01T10:30:00.000Z"
    text = kueue_es("log", "inspect", "--log", log).out
    assert text.startswith(f"Log {log}: 19 events in 1 segment, {data['bytes']} bytes")
    assert any(line.split() == ["WorkloadPending", "2"] for line in text.splitlines())
