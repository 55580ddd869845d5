"""Table-driven scheduler cases: each ``scenarios/*.yaml`` is a state plus the expected outcome.

A case file holds ``objects`` (what a user would kubectl-apply), an optional Kueue ``config``, and either

* ``cycles`` and ``want`` — run through the same code path as ``kueue-es schedule`` (the objects folded at the
  latest timestamp they carry, then N scheduling cycles); ``want`` names every workload whose status changes, or
* ``timeline`` — for behaviour driven by time: the objects are loaded as ``kueue-es schedule`` loads them, at
  ``start`` (default 2024-01-01T00:00:00Z), then each step happens ``at`` an offset from ``start``: it applies
  ``objects`` (upserts), ``delete`` (``Kind/key``), ``finish``, ``podsReady`` / ``podsNotReady``,
  ``stopJobs`` (keys, or ``all`` evicted workloads that still hold quota) and ``checks``
  (``{workload, check, state}``) as observed events at that time, then lets the scheduler settle exactly as the
  service does (``decide`` — controller rules, then a cycle — until it has nothing to say), then asserts its
  ``expect`` (only the workloads it names).

Expectations per workload: ``admitted: {clusterQueue, flavors: {podSet: {resource: flavor}}, counts: {podSet: n},
checksPending}``, ``pending: REASON`` (QuotaReserved=False reason; ``message``/``notInMessage`` optional substrings), ``preempted:
REASON`` (Preempted condition reason, with Evicted=True/Preempted), ``evicted: REASON`` (Evicted=True),
``requeued: {status, reason}``, ``requeueCount: N``, ``requeueAt: TIME|null``, ``finished: true``,
``active: false``, ``reservingQuota: bool``, or ``unchanged: true`` (``want`` only).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from events import schema as ev
from events.manifests import load_text
from events.timefmt import format_time, parse_time
from kueue_es.commands.schedule import schedule
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import parse_duration
from kueue_es.statefile import load_state
from projections.workloads import status_of

CASES = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _cond(status: dict, type_: str) -> dict | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


def check_status(case: str, key: str, status: dict, want: dict, wl=None) -> None:
    """Assert one workload's status (as Kueue would show it) against an expectation."""
    checked = False
    if "admitted" in want:
        checked = True
        w = want["admitted"]
        adm = status.get("admission")
        assert adm is not None, f"{key}: not admitted: {_cond(status, 'QuotaReserved')}"
        assert adm["clusterQueue"] == w["clusterQueue"]
        flavors = {p["name"]: p["flavors"] for p in adm["podSetAssignments"]}
        assert flavors == w["flavors"], f"{key}: flavors {flavors}"
        if "counts" in w:
            assert {p["name"]: p["count"] for p in adm["podSetAssignments"]} == w["counts"]
        assert _cond(status, "QuotaReserved")["status"] == "True"
        if w.get("checksPending"):
            adm_cond = _cond(status, "Admitted")
            assert adm_cond is None or adm_cond["status"] != "True"
        else:
            assert _cond(status, "Admitted")["status"] == "True"
    if "pending" in want:
        checked = True
        qr = _cond(status, "QuotaReserved")
        assert "admission" not in status, f"{key}: unexpectedly admitted"
        assert qr is not None and qr["status"] == "False", f"{key}: {qr}"
        assert qr["reason"] == want["pending"], f"{key}: {qr['reason']}: {qr['message']}"
        if "message" in want:
            assert want["message"] in qr["message"], qr["message"]
        if "notInMessage" in want:
            assert want["notInMessage"] not in qr["message"], qr["message"]
    if "preempted" in want:
        checked = True
        pre, evi = _cond(status, "Preempted"), _cond(status, "Evicted")
        assert pre is not None and pre["status"] == "True" and pre["reason"] == want["preempted"], f"{key}: {pre}"
        assert evi is not None and evi["status"] == "True" and evi["reason"] == "Preempted"
        assert "Preempted to accommodate a workload" in pre["message"]
    if "evicted" in want:
        checked = True
        evi = _cond(status, "Evicted")
        assert evi is not None and evi["status"] == "True" and evi["reason"] == want["evicted"], f"{key}: {evi}"
    if "requeued" in want:
        checked = True
        rq, w = _cond(status, "Requeued"), want["requeued"]
        assert rq is not None, f"{key}: no Requeued condition"
        assert rq["status"] == ("True" if w["status"] else "False") and rq["reason"] == w["reason"], f"{key}: {rq}"
    if "requeueCount" in want:
        checked = True
        assert status.get("requeueState", {}).get("count", 0) == want["requeueCount"], f"{key}: {status.get('requeueState')}"
    if "requeueAt" in want:
        checked = True
        got = status.get("requeueState", {}).get("requeueAt")
        assert got == want["requeueAt"], f"{key}: requeueAt {got}"
    if "finished" in want:
        checked = True
        fin = _cond(status, "Finished")
        assert (fin is not None and fin["status"] == "True") == bool(want["finished"]), f"{key}: {fin}"
    if "active" in want:
        checked = True
        assert wl is not None and wl.active == want["active"], f"{key}: active {wl.active if wl else None}"
    if "reservingQuota" in want:
        checked = True
        assert wl is not None and wl.reserving == want["reservingQuota"], f"{key}: phase {wl.phase if wl else None}"
    if not checked:
        raise AssertionError(f"{case}: want for {key} says nothing")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_scenario(case: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(case.read_text())
    if "timeline" in spec:
        run_timeline(case.name, spec, tmp_path)
        return
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(spec["objects"]))
    config = None
    if "config" in spec:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(spec["config"]))
    result = schedule(str(state), spec.get("cycles", 1), str(config) if config else None)
    got = {f"{i['metadata']['namespace']}/{i['metadata']['name']}": i["status"] for i in result["items"]}
    for key, want in spec["want"].items():
        if want.get("unchanged"):
            assert key not in got, f"{key} should be unchanged, got {got.get(key)}"
            continue
        assert key in got, f"{key}: status did not change; changed: {sorted(got)}"
        check_status(case.name, key, got[key], want)
    unexpected = set(got) - set(spec["want"])
    assert not unexpected, f"status changed for workloads the case does not expect: {sorted(unexpected)}"


def run_timeline(name: str, spec: dict, tmp_path: Path) -> None:
    state_file = tmp_path / "state.yaml"
    state_file.write_text(yaml.safe_dump_all(spec["objects"]))
    config_file = None
    if "config" in spec:
        config_file = tmp_path / "config.yaml"
        config_file.write_text(yaml.safe_dump(spec["config"]))
    start = parse_time(spec.get("start", "2024-01-01T00:00:00Z"))
    loaded = load_state(str(state_file), str(config_file) if config_file else None, start)
    state, config = loaded.state, loaded.config

    def apply(events: list) -> None:
        for e in events:
            state.apply(ev.Record(state.offset + 1, e))

    for i, step in enumerate(spec["timeline"]):
        t = start + parse_duration(str(step.get("at", "0s")))
        assert t >= state.time, f"{name}: step {i} goes back in time"
        events: list = [ev.ClockTicked(time=t)]
        if "objects" in step:
            for obj in load_text(yaml.safe_dump_all(step["objects"]), f"{name} step {i}").objects:
                events.append(ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj))
        for ref in step.get("delete", []):
            kind, _, key = ref.partition("/")
            events.append(ev.ObjectDeleted(time=t, key=key, kind=kind))
        for key in step.get("finish", []):
            events.append(ev.WorkloadFinished(time=t, key=key, uid=state.workloads[key].uid))
        for key in step.get("podsReady", []):
            events.append(ev.PodsReadyChanged(time=t, key=key, ready=True))
        for key in step.get("podsNotReady", []):
            events.append(ev.PodsReadyChanged(time=t, key=key, ready=False))
        stop = step.get("stopJobs", [])
        if stop == "all":
            stop = sorted(k for k, w in state.workloads.items() if w.evicted and w.reserving)
        for key in stop:
            events.append(ev.JobStopped(time=t, key=key))
        for c in step.get("checks", []):
            events.append(ev.AdmissionCheckStateChanged(time=t, key=c["workload"], check=c["check"], state=c["state"]))
        apply(events)
        settle(state, config, now=t)
        for key, want in step.get("expect", {}).items():
            wl = state.workloads.get(key)
            assert wl is not None, f"{name}: step {i} (at {format_time(t)}): no workload {key}"
            try:
                check_status(name, key, status_of(wl), want, wl)
            except AssertionError as exc:
                raise AssertionError(f"{name}: step {i} (at {format_time(t)}): {exc}") from None
