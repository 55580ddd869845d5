"""``kueue-es audit`` shows a state an admission check's own controller set on the Workload, at the upsert that
carried it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import anyio
import msgspec
import pytest
from clihelp import append, kueue_es
from fixtures import eventgen as g

from events import objects as o
from events import schema as ev
from events.filelog import FileLog
from kueue_es import checkpoints
from kueue_es.cli import main
from kueue_es.commands import audit as audit_command
from kueue_es.commands.audit import step_json
from projections import snapshot
from projections.audit import AuditTrail
from projections.cluster import ClusterState

JOB = g.workload("team", "job", queue="lq")


def _shown(rv: int, t: int, *states: o.AdmissionCheckState) -> ev.ObjectUpserted:
    w = msgspec.structs.replace(JOB, metadata=msgspec.structs.replace(JOB.metadata, resource_version=str(rv)),
                                status=o.WorkloadStatus(admission_checks=list(states)))
    return g.upsert(w, g.T0 + t)


def test_audit_shows_the_check_state_its_controller_set_on_the_workload(tmp_path: Path) -> None:
    check = o.AdmissionCheck(metadata=g.meta("ext"), spec=o.AdmissionCheckSpec(controller_name="example.com/external"))
    events: list[ev.AnyEvent] = [
        g.upsert(g.flavor("f0"), g.T0), g.upsert(check, g.T0), g.upsert(g.cluster_queue("cq", checks=["ext"]), g.T0),
        g.upsert(g.local_queue("team", "lq", "cq"), g.T0), g.upsert(JOB, g.T0),
        ev.QuotaReserved(key=JOB.key, admission=g.admission("cq", "f0", 1000), time=g.T0 + 1000, cycle=1, input=4),
    ]
    (listed,) = g.fold(g.records([events])).workloads[JOB.key].check_states.values()
    ready = msgspec.structs.replace(listed, state="Ready", message="capacity found")
    events += [_shown(2, 2000, listed), _shown(3, 3000, ready), _shown(4, 4000, ready)]  # 6: the watch; 7, 8
    path = tmp_path / "log"
    append(path, events)
    r = kueue_es("audit", "--log", path, "team/job", "-o", "json")
    assert r.code == 0, r.err
    steps = [s for s in json.loads(r.out)["steps"] if s["step"] == "AdmissionCheck"]
    assert [(s["offset"], s["reason"], s["message"], s["observed"]) for s in steps] == [
        (7, "ext=Ready", "capacity found", True)]
    table = kueue_es("audit", "--log", path, "team/job").out
    assert "ext=Ready: capacity found; observed in status" in table


def _write(path: Path, batches: list[list[ev.AnyEvent]], checkpoint_every: int) -> list[ev.Record]:
    """Append ``batches``, with a checkpoint after every ``checkpoint_every``-th, as ``kueue-es run`` keeps them."""
    log = FileLog.open(path, fsync="never")
    recs: list[ev.Record] = []
    try:
        for i, batch in enumerate(batches, 1):
            offsets = anyio.run(log.append, batch)
            recs += [ev.Record(off, e) for off, e in zip(offsets, batch, strict=True)]
            if i % checkpoint_every == 0:
                state = g.fold(recs)
                crc, last = log.last_frame  # type: ignore[misc]
                checkpoints.save(path, last, checkpoints.pack(last, state.time, crc, snapshot.encode(state)))
    finally:
        log.close_sync()
    return recs


def _expected(recs: list[ev.Record], key: str | None = None) -> list[dict]:
    """The steps a trail with the cluster-state fold beside it from offset 0 shows, as ``-o json`` has them."""
    trail = AuditTrail(keys=None if key is None else [key], state=ClusterState()).apply_all(recs)
    return json.loads(json.dumps([step_json(s) for s in (trail.steps() if key is None else trail.timeline(key))]))


def _external_checks_log(seed: int) -> list[list[ev.AnyEvent]]:
    rng = random.Random(seed)
    pool = (*g.OPS, *("ext_check", "ext_state") * 4)
    return g.with_generations(g.interpret([g.Op(rng.choice(pool), rng.randrange(64), rng.randrange(64),
                                                rng.randrange(64)) for _ in range(120)]))


def test_audit_brings_the_fold_in_from_a_checkpoint_and_shows_what_the_fold_from_offset_0_shows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log"
    recs = _write(path, _external_checks_log(4), checkpoint_every=5)
    expected = _expected(recs)
    assert any(s["step"] == "AdmissionCheck" and s["observed"] for s in expected)
    restored: list[int] = []
    real = audit_command.nearest_state

    def spy(log, *, to, at=None):  # noqa: ANN001, ANN202
        state, where = real(log, to=to, at=at)
        restored.append(state.offset if where is not None else -1)
        return state, where

    monkeypatch.setattr(audit_command, "nearest_state", spy)
    assert main(["audit", "--log", str(path), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == expected
    assert len(restored) == 1 and restored[0] > 0  # from a checkpoint, not from offset 0
    for key in sorted({s["workload"] for s in expected})[:4]:
        r = kueue_es("audit", "--log", path, key, "-o", "json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["steps"] == _expected(recs, key), key


def test_audit_with_quarantine_brings_the_fold_in_without_the_events_set_aside(tmp_path: Path) -> None:
    import events.filelog as fl

    path = tmp_path / "log"
    batches = _external_checks_log(4)
    recs = _write(path, batches[:3], checkpoint_every=1000)
    future = msgspec.msgpack.encode({"type": "EventFromTheFuture", "time": 7})
    real = fl.encode_batch
    fl.encode_batch = lambda events: msgspec.msgpack.encode([msgspec.Raw(future)])
    try:
        (bad,) = append(path, [ev.ClockTicked(time=0)])  # written by a "newer version"
    finally:
        fl.encode_batch = real
    for batch in batches[3:]:
        offsets = append(path, batch)
        recs += [ev.Record(off, e) for off, e in zip(offsets, batch, strict=True)]
    r = kueue_es("audit", "--log", path, "--quarantine", "-o", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert [q["offset"] for q in data["quarantined"]] == [bad]
    assert data["steps"] == _expected(recs)
    assert any(s["step"] == "AdmissionCheck" and s["observed"] and s["offset"] > bad for s in data["steps"])


def test_audit_shows_a_reservation_given_back_to_a_stopped_queue_as_quota_released(tmp_path: Path) -> None:
    """A workload waiting for its checks whose queue stops gives its quota back (``QuotaReservationUnset``): its
    audit step says the quota was released, as a releasing requeue's does."""
    check = o.AdmissionCheck(metadata=g.meta("ext"), spec=o.AdmissionCheckSpec(controller_name="example.com/external"))
    events: list[ev.AnyEvent] = [
        g.upsert(g.flavor("f0"), g.T0), g.upsert(check, g.T0), g.upsert(g.cluster_queue("cq", checks=["ext"]), g.T0),
        g.upsert(g.local_queue("team", "lq", "cq"), g.T0), g.upsert(JOB, g.T0),
        ev.QuotaReserved(key=JOB.key, admission=g.admission("cq", "f0", 1000), time=g.T0 + 1000, cycle=1, input=4),
        ev.QuotaReservationUnset(key=JOB.key, reason="Suspended", message="LocalQueue lq is stopped",
                                 time=g.T0 + 2000, cycle=2, input=5),
    ]
    path = tmp_path / "log"
    append(path, events)
    r = kueue_es("audit", "--log", path, "team/job", "-o", "json")
    assert r.code == 0, r.err
    (step,) = [s for s in json.loads(r.out)["steps"] if s["step"] == "Unreserved"]
    assert (step["offset"], step["reason"], step["message"]) == (6, "Suspended", "LocalQueue lq is stopped")
    table = kueue_es("audit", "--log", path, "team/job").out
    assert "Suspended: LocalQueue lq is stopped; quota released" in table
