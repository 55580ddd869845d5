"""A single Pod's Workload takes the job annotations Kueue copies under a gate
(:data:`connectors.k8s.copied_metadata.GATED`), as a Job's does: Kueue builds a single Pod's Workload through its
generic job path, and KEP-6915 has ``kueue.x-k8s.io/admission-gated-by`` work for every kind it manages, the Pod
included. The Pod's gate, once removed, is removed from its Workload too, with Kueue's ``UpdatedWorkload`` on the Pod."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from test_pods_integration import NAME, POD_ON, integration, managed_pod, pod_workload

from connectors.k8s import pod_sync
from events import schema as ev
from projections.cluster import ClusterState

GATE = "kueue.x-k8s.io/admission-gated-by"
THRESHOLD = "kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"
PODS_READY = "kueue.x-k8s.io/wait-for-pods-ready"
ANNOTATIONS = {GATE: "example.com/gate", THRESHOLD: "2", PODS_READY: '{"timeoutSeconds": 30}', "other": "x"}


def _state(**gates: bool) -> ClusterState:
    state = ClusterState()
    state.apply(ev.Record(1, ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates})))
    return state


def _raw(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": annotations},
            "spec": {"containers": [{"name": "c"}]}}


@pytest.mark.parametrize(("gates", "want"), [
    ({"AdmissionGatedBy": True, "TASReplaceMultipleFailedNodes": True, "WorkloadLevelWaitForPodsReady": True},
     {GATE: "example.com/gate", THRESHOLD: "2", PODS_READY: '{"timeoutSeconds": 30}'}),
    ({"AdmissionGatedBy": True}, {GATE: "example.com/gate"}),
    ({"AdmissionGatedBy": False}, None),  # each gate off: its annotation stays on the Pod
    ({"TASReplaceMultipleFailedNodes": True}, {GATE: "example.com/gate", THRESHOLD: "2"}),  # AdmissionGatedBy: beta
])
def test_a_pods_workload_takes_the_gated_annotations_whose_gate_is_on(gates: dict[str, bool],
                                                                       want: dict[str, str] | None) -> None:
    body = pod_sync.workload_for(_state(**gates), _raw(ANNOTATIONS), "w")
    assert body["metadata"].get("annotations") == want


def test_an_empty_admission_gate_is_not_copied() -> None:
    body = pod_sync.workload_for(_state(AdmissionGatedBy=True), _raw({GATE: ""}), "w")
    assert "annotations" not in body["metadata"]


def _annotated(annotations: dict[str, str]) -> Any:
    pod = managed_pod()
    return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, annotations=annotations))


def _gated_workload(gate: str) -> Any:
    wl = pod_workload()
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(wl.metadata, annotations={GATE: gate}))


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate_on", "pod_gate", "want"), [
    (True, None, [None]),  # the Pod's gate was removed: the Workload's goes
    (True, "a.com/x", ["a.com/x"]),  # one of two gates removed
    (True, "a.com/x,b.com/y", []),  # unchanged
    (True, "a.com/x,c.com/z", []),  # adds one: a Workload never gains a gate
    (False, None, []),  # the gate off: left as it is
])
async def test_a_pods_removed_admission_gate_is_removed_from_its_workload(
        gate_on: bool, pod_gate: str | None, want: list[str | None]) -> None:
    pods, _, appended, client = integration(_gated_workload("a.com/x,b.com/y"),
                                            config={**POD_ON, "featureGates": {"AdmissionGatedBy": gate_on}})
    pods.pods["ns/p"] = _annotated({GATE: pod_gate} if pod_gate is not None else {})
    await pods.reconcile("ns/p")
    synced = [c for c in client.calls if c[:2] == ("patch", "Workload")]
    assert synced == [("patch", "Workload", NAME, "", "", {"metadata": {"resourceVersion": "3",
                                                                        "annotations": {GATE: g}}}) for g in want]
    assert [(e.key, e.kind, e.action, e.message) for e in appended] == [
        ("ns/p", "Pod", "UpdatedWorkload", f'Updated workload AdmissionGatedBy to "{g or ""}"') for g in want]
