"""Kueue's Workload preemption gates (MultiKueueOrchestratedPreemption, KEP-8303) at the edges:
``spec.preemptionGates[].name`` and ``status.preemptionGates[].{name, position, lastTransitionTime}`` read in
v1beta2 and v1beta1 alike, and the schema's refusals, each naming the object and the field."""

from __future__ import annotations

import pytest
from fixtures import fastyaml

from events import objects as o
from events.errors import InvalidInput
from events.manifests import load_text

GATE = "kueue.x-k8s.io/multikueue"


def _workload(version: str = "v1beta2", spec_gates: list | None = None, status_gates: list | None = None) -> dict:
    doc: dict = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload",
                 "metadata": {"name": "w", "namespace": "ns"},
                 "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
                     "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}
    if spec_gates is not None:
        doc["spec"]["preemptionGates"] = spec_gates
    if status_gates is not None:
        doc["status"] = {"preemptionGates": status_gates}
    return doc


def _load(doc: dict) -> o.Workload:
    wl = load_text(fastyaml.safe_dump(doc), "wl.yaml").objects[0]
    assert isinstance(wl, o.Workload)
    return wl


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_gates_read_in_both_versions(version: str) -> None:
    wl = _load(_workload(version, [{"name": GATE}], [
        {"name": GATE, "position": "Open", "lastTransitionTime": "2024-01-01T00:00:00Z"}]))
    assert wl.spec.preemption_gates == [o.PreemptionGate(name=GATE)]
    assert wl.status.preemption_gates == [o.PreemptionGateState(name=GATE, position="Open",
                                                                last_transition_time="2024-01-01T00:00:00Z")]


@pytest.mark.parametrize(("doc", "error"), [
    (_workload(spec_gates=[{"name": ""}]), "field `spec.preemptionGates[0].name` must not be empty"),
    (_workload(spec_gates=[{"name": "g" * 64}]), "field `spec.preemptionGates[0].name` must be at most 63"),
    (_workload(spec_gates=[{"name": GATE}, {"name": GATE}]),
     f"field `spec.preemptionGates[1].name`: duplicate value '{GATE}'"),
    (_workload(spec_gates=[{"name": GATE}], status_gates=[{"name": GATE, "position": "Ajar"}]),
     "field `status.preemptionGates[0].position` must be one of Open, Closed, not 'Ajar'"),
    (_workload(spec_gates=[{"name": GATE}], status_gates=[{"name": GATE, "position": "Open",
                                                           "lastTransitionTime": "yesterday"}]),
     "status.preemptionGates[0].lastTransitionTime"),
    (_workload(status_gates=[{"position": "Closed"}]), "field `status.preemptionGates[0].name` must not be empty"),
])
def test_refusals_name_the_object_and_the_field(doc: dict, error: str) -> None:
    with pytest.raises(InvalidInput, match="wl.yaml") as exc:
        _load(doc)
    assert error in str(exc.value)
