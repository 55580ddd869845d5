"""AdmissionGatedBy when the recorded Configuration turns the gate on or off under workloads that carry the
annotation (a scenario runs under one configuration): the fold takes them out of their queue or puts them back,
the controller rules follow with the condition, and what they decide looking only at what changed is what a look
at every workload decides. A snapshot keeps the gate."""

from __future__ import annotations

import msgspec

from events import schema as ev
from events.manifests import load_text
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.reconcile import reconcile
from projections import snapshot
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
GATE = "kueue.x-k8s.io/admission-gated-by"
OBJECTS = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: team}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: default}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{name: cpu, nominalQuota: 0}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: team}}
spec: {{clusterQueue: cq}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: gated
  namespace: team
  uid: uid-gated
  annotations: {{{GATE}: example.com/approver}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}}}
"""


def _document(on: bool) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"AdmissionGatedBy": on}}


def _record(state: ClusterState, *events: ev.Event) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _state(gate_on: bool) -> ClusterState:
    state = ClusterState()
    _record(state, ev.ConfigRecorded(time=T0, document=_document(gate_on), writer="test", id=f"c-{gate_on}"))
    for obj in load_text(OBJECTS, "objects").objects:
        _record(state, ev.ObjectUpserted(time=T0, key=obj.key, uid=obj.metadata.uid, obj=obj))
    return state


def _queued(state: ClusterState) -> bool:
    q = state.queues.get("cq")
    return q is not None and "team/gated" in q.shapes


def _quota_reserved(state: ClusterState) -> tuple[str, str]:
    c = state.workloads["team/gated"].condition("QuotaReserved")
    assert c is not None
    return c.reason, c.message


def _switch(state: ClusterState, on: bool, now: int) -> list[tuple[str, str]]:
    """Record the configuration turning the gate ``on`` (or off), then settle under it; before settling, a look
    at the touched workloads decides what a look at every workload does (returned: the QuotaReserved=False
    reasons and messages the controller rules write first)."""
    doc = _document(on)
    _record(state, ev.ConfigRecorded(time=now, document=doc, writer="test", id=f"c-{on}-{now}"))
    config = load_config(doc)
    full = reconcile(state, config, now, state.last_cycle + 1, full=True)
    assert reconcile(state, config, now, state.last_cycle + 1) == full
    settle(state, config, now)
    return [(d.reason, d.message) for d in full if isinstance(d, ev.WorkloadPending)]


def test_turning_the_gate_on_takes_a_gated_workload_out_of_its_queue_and_off_puts_it_back() -> None:
    state = _state(gate_on=False)
    assert _queued(state), "gate off: the annotation is not looked at"
    settle(state, load_config(_document(False)), T0)
    assert state.workloads["team/gated"].condition("QuotaReserved").reason != "AdmissionGated"

    assert _switch(state, True, T0 + 1000) == [("AdmissionGated", "Admission is gated by: example.com/approver")]
    assert not _queued(state)
    assert _quota_reserved(state) == ("AdmissionGated", "Admission is gated by: example.com/approver")

    restored = snapshot.decode(snapshot.encode(state))
    assert restored.workloads["team/gated"].admission_gate == "example.com/approver"
    assert snapshot.digest(restored) == snapshot.digest(state)

    assert _switch(state, False, T0 + 2000) == [
        ("PendingEvaluation", "Workload is pending evaluation in the scheduling queue")], \
        "with the gate off the condition is not kept, and not cleared as Kueue's gate logic clears it"
    assert _queued(state)


def test_an_empty_annotation_gates_nothing() -> None:
    state = _state(gate_on=True)
    assert not _queued(state)
    wl = state.workloads["team/gated"]
    obj = next(o for o in load_text(OBJECTS, "objects").objects if o.key == "team/gated")
    meta = msgspec.structs.replace(obj.metadata, annotations={GATE: ""}, resource_version="2")
    _record(state, ev.ObjectUpserted(time=T0, key=obj.key, uid=obj.metadata.uid,
                                     obj=msgspec.structs.replace(obj, metadata=meta)))
    assert wl.admission_gate == "" and _queued(state)
