"""The watch holds an object to a check Kueue's webhooks make under a feature gate only while the Configuration
recorded in the log turns that gate on: with it off, Kueue takes the object, and so does the watch."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import schema as ev
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


def _workload(topology: dict | None = None, labels: dict | None = None) -> bytes:
    ps: dict[str, Any] = {"name": "main", "count": 1, "template": {"metadata": {"labels": labels or {}}, "spec": {}}}
    if topology:
        ps["topologyRequest"] = topology
    return msgspec.json.encode({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                "metadata": {"name": "w", "namespace": "team", "uid": "u", "resourceVersion": "1"},
                                "spec": {"queueName": "lq", "podSets": [ps]}})


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
]


@pytest.mark.parametrize(("gate", "kind", "raw", "key", "field"), CASES, ids=[c[0] for c in CASES])
def test_skipped_only_while_the_recorded_configuration_turns_the_gate_on(gate: str, kind: str, raw: bytes,
                                                                         key: str, field: str) -> None:
    for recorded in (None, {}, {gate: True}):  # no configuration yet: Kueue's defaults, the gate on
        watcher = _watcher(recorded)
        assert watcher._decode(BY_KIND[kind], raw) is None
        assert field in watcher.stats.skipped[f"{kind} {key}"]
    watcher = _watcher({gate: False})
    obj = watcher._decode(BY_KIND[kind], raw)
    assert obj is not None and obj.key == key and not watcher.stats.skipped
