"""TASReplaceMultipleFailedNodes (alpha, off): a Job's ``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold``
goes to its Workload only under the gate, and the fold reads it as Kueue's webhook takes it (a whole number from 1
to 8). The scheduler's side is in ``tests/scheduler/scenarios/tas-multiple-failed-nodes*.yaml``."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.jobs import NAME, UID, integration

from events import schema as ev
from projections.workloads import UNHEALTHY_NODES_THRESHOLD_ANNOTATION, unhealthy_threshold_of


def _config(on: bool) -> tuple[ev.AnyEvent, ...]:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "featureGates": {"TASReplaceMultipleFailedNodes": on}}
    return (ev.ConfigRecorded(time=1, document=doc, writer="test", id=f"config-{on}"),)


def _raw_job(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": annotations},
            "spec": {"parallelism": 1, "suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}


@pytest.mark.parametrize(("on", "want"), [(True, {UNHEALTHY_NODES_THRESHOLD_ANNOTATION: "2"}), (False, None)])
def test_the_threshold_goes_to_the_workload_under_the_gate(on: bool, want: dict | None) -> None:
    jobs, _, _ = integration(before=_config(on))
    body = jobs.workload_for(_raw_job({UNHEALTHY_NODES_THRESHOLD_ANNOTATION: "2"}), NAME)
    assert body["metadata"].get("annotations") == want


@pytest.mark.parametrize(("value", "want"), [
    ("1", 1), ("8", 8), ("3", 3), ("0", None), ("9", None), ("-1", None), ("", None), (" 2 ", None), ("1.5", None),
    ("many", None), ("99999999999999999999", None), ("０", None), (None, None),
])
def test_the_threshold_is_read_as_kueues_webhook_takes_it(value: str | None, want: int | None) -> None:
    assert unhealthy_threshold_of(value) == want
