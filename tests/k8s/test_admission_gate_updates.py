"""Kueue's rule for the ``kueue.x-k8s.io/admission-gated-by`` annotation on update (``AdmissionGatedBy``, beta,
on): gates may be removed, never added — none on an object created without one, no new one beside the old. The
Workload webhook and the Job webhook hold to it; with the gate off neither looks."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s import job_validation, validating
from events.update_rules import admission_gate_errors

GATE = "kueue.x-k8s.io/admission-gated-by"
AT = f"metadata.annotations[{GATE}]"
OFF = {"AdmissionGatedBy": False}
ADDED = "Forbidden: cannot add admission gate after creation"
NEW_ONE = "Forbidden: can only remove gates, not add new ones"


def _meta(gate: str | None) -> dict[str, Any]:
    return {"annotations": {GATE: gate}} if gate is not None else {}


@pytest.mark.parametrize(("old", "new", "want"), [
    ("example.com/a,example.com/b", "example.com/b", []),
    ("example.com/a,example.com/b", None, []),
    ("example.com/a", "", []),
    ("example.com/a, example.com/b", "example.com/b,example.com/a", []),  # order and spaces aside
    (None, None, []),
    (None, "example.com/a", [ADDED]),
    ("", "example.com/a", [ADDED]),  # an empty annotation gated nothing
    ("example.com/a", "example.com/a,example.com/b", [NEW_ONE]),
    ("example.com/a", "example.com/b", [NEW_ONE]),
    # Kueue decides on the raw values: a blank value is added, a gate beside a blank one is a new one
    (None, "  ", [ADDED]),
    ("", " ", [ADDED]),
    ("  ", "example.com/a", [NEW_ONE]),
    ("  ", " ", []),
    ("example.com/a", "  ", []),
])
def test_gates_are_removed_never_added(old: str | None, new: str | None, want: list[str]) -> None:
    assert admission_gate_errors(_meta(old), _meta(new)) == want


# --- Workloads ---------------------------------------------------------------------------------------------------

def _workload(gate: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                           "metadata": {"name": "w", "namespace": "team"},
                           "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
                               "spec": {"containers": [{"name": "c"}]}}}]}}
    if gate is not None:
        doc["metadata"]["annotations"] = {GATE: gate}
    return doc


def _workload_review(old: dict, new: dict, gates: dict | None = None) -> dict:
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "UPDATE", "object": new, "oldObject": old}})
    return validating.review(body, "Workload", gates or {})["response"]


def test_a_workload_loses_gates_but_gains_none() -> None:
    assert _workload_review(_workload("example.com/a,example.com/b"), _workload("example.com/a"))["allowed"]
    assert _workload_review(_workload("example.com/a"), _workload(None))["allowed"]
    refused = _workload_review(_workload(None), _workload("example.com/a"))
    assert refused["allowed"] is False and refused["status"]["message"] == (
        f"Workload team/w: field `{AT}`: {ADDED}")
    refused = _workload_review(_workload("example.com/a"), _workload("example.com/a,example.com/b"))
    assert refused["status"]["message"] == f"Workload team/w: field `{AT}`: {NEW_ONE}"


def test_with_the_gate_off_a_workload_may_gain_gates() -> None:
    assert _workload_review(_workload(None), _workload("example.com/a"), OFF)["allowed"] is True
    assert _workload_review(_workload("example.com/a"), _workload("example.com/a,example.com/b"), OFF)["allowed"]


# --- Jobs --------------------------------------------------------------------------------------------------------

def _job(gate: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if gate is not None:
        meta["annotations"] = {GATE: gate}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def _job_review(old: dict, new: dict, gates: dict | None = None) -> dict:
    async def no_default(namespace: str) -> bool:
        return False

    body = msgspec.json.encode({"request": {"uid": "u", "operation": "UPDATE", "namespace": "team",
                                            "object": new, "oldObject": old}})
    return asyncio.run(job_validation.review(body, gates or {}, no_default))["response"]


def test_a_job_loses_gates_but_gains_none() -> None:
    assert _job_review(_job("example.com/a,example.com/b"), _job("example.com/b"))["allowed"] is True
    assert _job_review(_job("example.com/a"), _job(None))["allowed"] is True
    assert _job_review(_job(None), _job("example.com/a"))["status"]["message"] == f"{AT}: {ADDED}"
    assert _job_review(_job("example.com/a"), _job("example.com/c"))["status"]["message"] == f"{AT}: {NEW_ONE}"
    running = copy.deepcopy(_job(None))
    running["spec"]["suspend"] = False
    gained = copy.deepcopy(running)
    gained["metadata"]["annotations"] = {GATE: "example.com/a"}
    assert _job_review(running, gained)["status"]["message"] == f"{AT}: {ADDED}", "suspended or not"


def test_with_the_gate_off_a_job_may_gain_gates() -> None:
    assert _job_review(_job(None), _job("example.com/a"), OFF)["allowed"] is True
