"""Kueue v0.20's ``WorkloadLevelWaitForPodsReady`` (alpha, off): a job's ``kueue.x-k8s.io/wait-for-pods-ready``
annotation is copied onto its new Workload (whose own timeouts the scheduler then reads), unless the gate is off
or ``DisableWaitForPodsReady`` is on. No cluster needed: the integration runs against a mirror."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.jobs import NAME, UID, integration

from events import schema as ev

ANNOTATION = "kueue.x-k8s.io/wait-for-pods-ready"
VALUE = '{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}'


def _gates(**gates: bool) -> tuple[ev.AnyEvent, ...]:
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    return (ev.ConfigRecorded(time=1, document=document, writer="test", id="config-gates"),)


def _raw_job(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": annotations},
            "spec": {"parallelism": 1, "suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}


@pytest.mark.parametrize(("gates", "annotations", "want"), [
    ({"WorkloadLevelWaitForPodsReady": True}, {ANNOTATION: VALUE}, {ANNOTATION: VALUE}),
    ({}, {ANNOTATION: VALUE}, None),  # the gate off (its default): not copied
    ({"WorkloadLevelWaitForPodsReady": True, "DisableWaitForPodsReady": True}, {ANNOTATION: VALUE}, None),
    ({"WorkloadLevelWaitForPodsReady": True}, {}, None),
])
def test_a_jobs_workload_carries_its_wait_for_pods_ready_annotation_under_the_gate(
        gates: dict[str, bool], annotations: dict[str, str], want: dict[str, str] | None) -> None:
    jobs, _, _ = integration(before=_gates(**gates))
    body = jobs.workload_for(_raw_job(annotations), NAME)
    assert body["metadata"].get("annotations") == want
