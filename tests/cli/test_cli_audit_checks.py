"""``kueue-es audit`` shows a state an admission check's own controller set on the Workload, at the upsert that
carried it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from clihelp import append, kueue_es
from fixtures import eventgen as g

from events import objects as o
from events import schema as ev

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
