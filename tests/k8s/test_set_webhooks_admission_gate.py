"""The StatefulSet and LeaderWorkerSet validating webhooks under ``AdmissionGatedBy`` (beta, on): as Kueue v0.20's
(and its Job webhook, :func:`connectors.k8s.job_validation.gate_update`), an update may remove admission gates from
``kueue.x-k8s.io/admission-gated-by``, never add one; with the gate off the annotation is not looked at."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import msgspec
import pytest
from test_lws_reconcile import raw_lws

from connectors.k8s import deployment_webhook as dw
from connectors.k8s import lws_webhook
from connectors.k8s import statefulset_webhook as sw
from kueue_es.scheduler.config import load_config

GATE = "kueue.x-k8s.io/admission-gated-by"
AT = f"metadata.annotations[{GATE}]"
ADDED = f"{AT}: Forbidden: cannot add admission gate after creation"
NEW_ONE = f"{AT}: Forbidden: can only remove gates, not add new ones"
CASES = [
    (None, "example.com/a", ADDED),
    ("example.com/a", "example.com/b", NEW_ONE),
    ("example.com/a,example.com/b", "example.com/b", None),
    ("example.com/a", None, None),
]


def _annotated(obj: dict[str, Any], gate: str | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    if gate is not None:
        out["metadata"]["annotations"] = {**out["metadata"].get("annotations", {}), GATE: gate}
    return out


def _sts(gate: str | None) -> dict[str, Any]:
    return _annotated({"apiVersion": "apps/v1", "kind": "StatefulSet",
                       "metadata": {"name": "web", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                       "spec": {"replicas": 2, "serviceName": "web",
                                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}, gate)


def _sts_review(old: dict[str, Any], new: dict[str, Any], gate_on: bool) -> dict[str, Any]:
    config = load_config({"integrations": {"frameworks": ["pod", "statefulset"]},
                          "featureGates": {"AdmissionGatedBy": gate_on}})
    reviews = sw.reviewers(dw.ParentDefaulting.of(config, "statefulset"), None, None)  # type: ignore[arg-type]
    request = {"uid": "u", "operation": "UPDATE", "object": new, "oldObject": old}
    return asyncio.run(reviews[sw.VALIDATING_PATH](msgspec.json.encode({"request": request})))["response"]


@pytest.mark.parametrize(("old", "new", "error"), CASES)
@pytest.mark.parametrize("gate_on", [True, False])
def test_a_statefulsets_admission_gates_are_removed_never_added(old: str | None, new: str | None, error: str | None,
                                                                gate_on: bool) -> None:
    response = _sts_review(_sts(old), _sts(new), gate_on)
    want = error if gate_on else None
    assert response["allowed"] is (want is None)
    if want is not None:
        assert want in response["status"]["message"]


@pytest.mark.parametrize(("old", "new", "error"), CASES)
@pytest.mark.parametrize("gate_on", [True, False])
def test_a_leaderworkersets_admission_gates_are_removed_never_added(old: str | None, new: str | None,
                                                                    error: str | None, gate_on: bool) -> None:
    lws = raw_lws(replicas=1)
    errors = lws_webhook.update_errors(_annotated(lws, old), _annotated(lws, new), {"AdmissionGatedBy": gate_on})
    assert errors == ([error] if error is not None and gate_on else [])
