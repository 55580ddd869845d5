"""Kueue v0.20 (#14309): the fold never shows Admitted=True while one of the workload's AdmissionChecks is
Rejected — a WorkloadAdmitted decided before the rejection arrived is not taken, the workload keeps its
reservation until the controller deactivates it."""

from __future__ import annotations

import msgspec

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import decide
from kueue_es.scheduler.config import load_config
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
KQ = "kueue.x-k8s.io/v1beta2"
OBJECTS = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
    {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}},
    {"apiVersion": KQ, "kind": "AdmissionCheck", "metadata": {"name": "approval"},
     "spec": {"controllerName": "example.com/approval"},
     "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active"}]}},
    {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": "approval"}]},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}},
    {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
     "spec": {"clusterQueue": "cq"}},
    {"apiVersion": KQ, "kind": "Workload",
     "metadata": {"name": "w", "namespace": "ns", "uid": "uid-w", "creationTimestamp": "2024-01-01T00:00:00Z"},
     "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}},
]


def _apply(state: ClusterState, events) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def test_an_admission_decided_before_a_rejection_does_not_set_admitted() -> None:
    state = ClusterState()
    for d in OBJECTS:
        obj = msgspec.convert(d, o.KueueObject)
        _apply(state, [ev.ObjectUpserted(time=T0, key=obj.key, obj=obj)])
    config = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"})
    _apply(state, decide(state, config, now=T0))
    assert state.workloads["ns/w"].phase == "QuotaReserved"
    _apply(state, [ev.AdmissionCheckStateChanged(time=T0 + 1000, key="ns/w", check="approval", state="Ready")])
    admitted = [d for d in decide(state, config, now=T0 + 1000) if isinstance(d, ev.WorkloadAdmitted)]
    assert admitted
    _apply(state, [ev.AdmissionCheckStateChanged(time=T0 + 2000, key="ns/w", check="approval", state="Rejected")])
    _apply(state, admitted)  # the admission lands after the rejection
    wl = state.workloads["ns/w"]
    assert wl.phase == "QuotaReserved"
    adm = wl.condition("Admitted")
    assert adm is None or adm.status != "True"
