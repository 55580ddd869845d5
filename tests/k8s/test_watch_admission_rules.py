"""The watch folds a stored object whatever Kueue's admission rules say of it — gated or not, they are the
validating webhooks' to apply when the object is written: Kueue's controllers act on what is stored, and a relist
must never delete from the log an object a newer, stricter rule would refuse. What the projections cannot fold
(a malformed quantity) is still skipped."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.manifests import validate_object
from kueue_es.scheduler.config_record import record
from projections.cluster import ClusterState

SLICE = {"podSetSliceRequiredTopology": "rack"}
"""A slice topology without its size: TASValidateWorkloadSliceSize."""

BAD_LABEL = {"app": "a b"}
"""WorkloadValidationForPodSetMetadata."""


def _watcher(feature_gates: dict[str, bool] | None) -> Watcher:
    state = ClusterState()
    if feature_gates is not None:
        doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": feature_gates}
        recorded = record(state, doc, writer="test")
        assert recorded is not None
        state.apply(ev.Record(1, recorded))

    async def emit(events: Any) -> None:
        return None

    return Watcher(None, Mirror(state), emit)  # type: ignore[arg-type]  # decoding needs no client


def _workload(topology: dict | None = None, labels: dict | None = None, requests: dict | None = None, *,
              annotations: dict | None = None, min_count: int | None = None, conditions: list | None = None,
              queue: str = "lq") -> bytes:
    spec = {"containers": [{"name": "c", "resources": {"requests": requests}}]} if requests else {}
    ps: dict[str, Any] = {"name": "main", "count": 1, "template": {"metadata": {"labels": labels or {}},
                                                                   "spec": spec}}
    if topology:
        ps["topologyRequest"] = topology
    pod_sets = [ps]
    if min_count is not None:  # two pod sets with a minimum count
        pod_sets = [{**ps, "name": name, "count": 2, "minCount": min_count} for name in ("main", "second")]
    return msgspec.json.encode({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                "metadata": {"name": "w", "namespace": "team", "uid": "u", "resourceVersion": "1",
                                             "annotations": annotations or {}},
                                "spec": {"queueName": queue, "podSets": pod_sets},
                                "status": {"conditions": conditions or []}})


def _cluster_queue() -> bytes:
    return msgspec.json.encode({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                "metadata": {"name": "cq", "uid": "u", "resourceVersion": "1"}, "spec": {
                                    "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                                        {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}],
                                    "admissionChecksStrategy": {"admissionChecks": [{"name": "ac",
                                                                                     "onFlavors": ["b"]}]}}})


CASES = [
    ("TASValidateWorkloadSliceSize", "Workload", _workload(SLICE), "team/w", "podSetSliceSize"),
    ("WorkloadValidationForPodSetMetadata", "Workload", _workload(labels=BAD_LABEL), "team/w", "metadata.labels"),
    ("RejectUpdatesToCQWithInvalidOnFlavors", "ClusterQueue", _cluster_queue(), "cq", "onFlavors[0]"),
    ("ungated: the pods resource", "Workload", _workload(requests={"pods": "1"}), "team/w", "pods"),
    ("WorkloadValidateResourcesAreNonNegative", "Workload", _workload(requests={"cpu": "-1"}), "team/w",
     "requests[cpu]"),
    ("AdmissionGatedBy", "Workload", _workload(annotations={"kueue.x-k8s.io/admission-gated-by": "gate"}), "team/w",
     "admission-gated-by"),
    ("PartialAdmission", "Workload", _workload(min_count=1), "team/w", "minCount"),
    ("ungated: a condition's reason", "Workload", _workload(conditions=[
        {"type": "Finished", "status": "True", "reason": "not a reason", "lastTransitionTime": "2024-01-01T00:00:00Z"}]),
     "team/w", "conditions[0].reason"),
    ("ungated: a reference name", "Workload", _workload(queue="Team_Q"), "team/w", "queueName"),
    ("CRD: a slice size below 1", "Workload", _workload({**SLICE, "podSetSliceSize": 0}), "team/w",
     "podSetSliceSize"),  # stored under a CRD without the minimum (kueue-es's before session 42)
    ("CRD: a negative subGroupCount", "Workload", _workload({"subGroupCount": -1}), "team/w",
     "subGroupCount"),  # Kueue v0.19's CRD only warned (#13101)
]


@pytest.mark.parametrize(("rule", "kind", "raw", "key", "field"), CASES, ids=[c[0] for c in CASES])
def test_a_stored_object_an_admission_rule_refuses_is_folded(rule: str, kind: str, raw: bytes, key: str,
                                                             field: str) -> None:
    with pytest.raises(InvalidInput, match=field.replace("[", r"\[").replace("]", r"\]")):
        validate_object(msgspec.json.decode(raw, type=o.KueueObject), f"{kind} {key}")  # refused as input
    for recorded in (None, {}):  # Kueue's defaults: every gate above on
        watcher = _watcher(recorded)
        obj = watcher._decode(BY_KIND[kind], raw)
        assert obj is not None and obj.key == key and not watcher.stats.skipped


def test_what_the_projections_cannot_fold_is_skipped() -> None:
    watcher = _watcher(None)
    assert watcher._decode(BY_KIND["Workload"], _workload(requests={"cpu": "lots"})) is None
    assert "cpu" in watcher.stats.skipped["Workload team/w"]
