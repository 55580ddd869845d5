"""Table-driven scheduler cases: each ``scenarios/*.yaml`` is a state plus the expected outcome.

A case file holds ``objects`` (what a user would kubectl-apply), ``cycles`` and ``want``: per workload either
``admitted: {clusterQueue, flavors: {podSet: {resource: flavor}}, counts: {podSet: n}}``, ``pending: REASON``
(QuotaReserved=False reason; ``message`` optional substring), ``preempted: REASON`` (Preempted condition
reason, with Evicted=True/Preempted), or ``unchanged: true``. Every case runs through the same code path as
``kueue-es schedule``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueue_es.commands.schedule import schedule

CASES = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _cond(status: dict, type_: str) -> dict | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_scenario(case: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(case.read_text())
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
        status = got[key]
        if "admitted" in want:
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
                assert _cond(status, "Admitted") is None
            else:
                assert _cond(status, "Admitted")["status"] == "True"
        elif "pending" in want:
            qr = _cond(status, "QuotaReserved")
            assert "admission" not in status, f"{key}: unexpectedly admitted"
            assert qr is not None and qr["status"] == "False", f"{key}: {qr}"
            assert qr["reason"] == want["pending"], f"{key}: {qr['reason']}: {qr['message']}"
            if "message" in want:
                assert want["message"] in qr["message"], qr["message"]
        elif "preempted" in want:
            pre, evi = _cond(status, "Preempted"), _cond(status, "Evicted")
            assert pre is not None and pre["status"] == "True" and pre["reason"] == want["preempted"], f"{key}: {pre}"
            assert evi is not None and evi["status"] == "True" and evi["reason"] == "Preempted"
            assert "Preempted to accommodate a workload" in pre["message"]
        else:
            raise AssertionError(f"{case.name}: want for {key} says nothing")
    unexpected = set(got) - set(spec["want"])
    assert not unexpected, f"status changed for workloads the case does not expect: {sorted(unexpected)}"
