"""A StatefulSet's ``kueue.x-k8s.io/admission-gated-by`` under ``AdmissionGatedBy`` (Kueue v0.20's StatefulSet
reconciler, #13931): the Workload of the pod group a StatefulSet holds takes the set's gates (not its pods'), loses
those the set drops (never gains one: Kueue's Workload webhook refuses it), and ``UpdatedWorkload`` "Updated workload
AdmissionGatedBy to "<gates>"" is recorded on the set; with the gate off the set's annotation is neither copied nor
followed. No cluster needed: the pod integration runs against a mirror, its writes recorded by a fake client."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from test_pods_integration import POD_ON, GroupClient, _set_pod_raw, _watch, group_workload_obs, integration

from connectors.k8s.statefulsets import StatefulSetRevision, decode
from events import objects as o
from events import schema as ev

GATE = "kueue.x-k8s.io/admission-gated-by"
STS_ON = {**POD_ON, "integrations": {"frameworks": ["pod", "statefulset"]}}


def _set(annotations: dict[str, str]) -> StatefulSetRevision:
    sts = decode(msgspec.json.encode({"metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid",
                                                   "annotations": annotations}}))
    assert isinstance(sts, StatefulSetRevision)
    return sts


def _pods_of_set(pod_annotations: dict[str, str]) -> dict[str, dict[str, Any]]:
    raws = {n: _set_pod_raw(n) for n in "ab"}
    for raw in raws.values():
        raw["metadata"]["annotations"] |= pod_annotations
    return raws


async def _reconcile(set_annotations: dict[str, str], *objs: o.KObject, gate_on: bool = True,
                     pod_annotations: dict[str, str] | None = None) -> tuple[Any, list[ev.AnyEvent]]:
    raws = _pods_of_set(pod_annotations or {})
    config = {**STS_ON, "featureGates": {"AdmissionGatedBy": gate_on}}
    pods, _, appended, client = integration(*objs, config=config, client=GroupClient(raws))
    pods.statefulsets.known["ns/web"] = _set(set_annotations)
    pods.statefulsets.synced.set()
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    return client, appended


@pytest.mark.asyncio
@pytest.mark.parametrize(("set_annotations", "pod_annotations", "gate_on", "want"), [
    ({GATE: "example.com/a"}, {}, True, "example.com/a"),
    ({GATE: "example.com/a"}, {}, False, None),  # the gate off: not copied
    ({}, {GATE: "example.com/p"}, True, None),  # the set's gate counts, not its pods'
    ({GATE: ""}, {}, True, None),  # an empty annotation gates nothing
])
async def test_the_workload_of_a_statefulsets_group_takes_the_sets_gate(
        set_annotations: dict[str, str], pod_annotations: dict[str, str], gate_on: bool, want: str | None) -> None:
    client, _ = await _reconcile(set_annotations, gate_on=gate_on, pod_annotations=pod_annotations)
    (created,) = [c for c in client.calls if c[0] == "create"]
    assert created[1] == "Workload"
    assert created[-1]["metadata"]["annotations"].get(GATE) == want


def _gated_group_workload(gate: str) -> o.Workload:
    wl = group_workload_obs()
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, annotations={**wl.metadata.annotations, GATE: gate}))


@pytest.mark.asyncio
@pytest.mark.parametrize(("set_gate", "want"), [("example.com/b", "example.com/b"), (None, None)])
async def test_a_statefulsets_workload_loses_the_gates_the_set_drops(set_gate: str | None, want: str | None) -> None:
    client, appended = await _reconcile({GATE: set_gate} if set_gate is not None else {},
                                        _gated_group_workload("example.com/a,example.com/b"))
    synced = [c for c in client.calls if c[:2] == ("patch", "Workload")]
    assert synced == [("patch", "Workload", "g", "", "", {"metadata": {"resourceVersion": "3",
                                                                       "annotations": {GATE: want}}})]
    assert [(e.key, e.kind, e.action, e.workload, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("ns/web", "StatefulSet", "UpdatedWorkload", "ns/g", f'Updated workload AdmissionGatedBy to "{want or ""}"')]


@pytest.mark.asyncio
@pytest.mark.parametrize(("set_gate", "gate_on"), [
    ("example.com/a,example.com/b", True),  # in step with the set, whatever its pods carry (none here)
    ("example.com/a,example.com/b,example.com/c", True),  # a gate is never added
    ("example.com/b", False),  # the gate off: left as it is
])
async def test_a_statefulsets_workload_is_otherwise_left_alone(set_gate: str, gate_on: bool) -> None:
    client, appended = await _reconcile({GATE: set_gate}, _gated_group_workload("example.com/a,example.com/b"),
                                        gate_on=gate_on)
    assert not [c for c in client.calls if c[:2] == ("patch", "Workload") and GATE in c[-1]["metadata"].get(
        "annotations", {})]
    assert not [e for e in appended if isinstance(e, ev.JobActed) and e.action == "UpdatedWorkload"]


def test_an_event_recorded_on_a_statefulset_names_it_as_an_apps_v1_object() -> None:
    from connectors.k8s.decision_events import EventLedger
    from projections.cluster import ClusterState

    ledger = EventLedger()
    acted = ev.JobActed(time=1, key="ns/web", uid="sts-uid", kind="StatefulSet", action="UpdatedWorkload",
                        workload="ns/g", message='Updated workload AdmissionGatedBy to ""')
    ledger.fold(ev.Record(7, acted), ClusterState(), {})
    (ready,) = ledger.ready.values()
    assert tuple(ready.before)[:4] == ("apps/v1", "StatefulSet", "ns", "web")
