"""A LeaderWorkerSet's ``kueue.x-k8s.io/admission-gated-by`` under ``AdmissionGatedBy``: each group's new Workload
takes the set's gates, and a kept one loses those the set drops (never gains one; ``UpdatedWorkload`` on the set), as Kueue v0.20's
LeaderWorkerSet reconciler (:mod:`connectors.k8s.leaderworkerset`, :mod:`connectors.k8s.lws_integration`)."""

from __future__ import annotations

import msgspec
import pytest
from test_lws_reconcile import ON, UID, integration, raw_lws, workload

from connectors.k8s import leaderworkerset as lw
from connectors.k8s.lws_integration import SET_PREFIX
from events import objects as o
from events import schema as ev
from projections.workloads import ADMISSION_GATED_BY_ANNOTATION as GATE


def gated_set(value: str) -> dict:
    raw = raw_lws(replicas=1)
    raw["metadata"]["annotations"] = {GATE: value}
    return raw


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate_on", "want"), [(True, "example.com/a"), (False, None)])
async def test_each_groups_new_workload_takes_the_sets_admission_gate_under_the_gate(gate_on: bool,
                                                                                      want: str | None) -> None:
    integ, client, _ = integration(gated_set("example.com/a"),
                                   config={**ON, "featureGates": {"AdmissionGatedBy": gate_on}})
    await integ.reconcile(SET_PREFIX + "ns/lws")
    (created,) = client.created
    assert created["metadata"]["annotations"].get(GATE) == want


def gated_workload(value: str) -> o.Workload:
    wl = workload(0)
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(wl.metadata, annotations={
        **wl.metadata.annotations, GATE: value}))


@pytest.mark.asyncio
@pytest.mark.parametrize(("set_gate", "want"), [("example.com/b", "example.com/b"), ("", None)])
async def test_a_kept_workload_loses_the_gates_the_set_drops(set_gate: str, want: str | None) -> None:
    integ, client, appended = integration(gated_set(set_gate), gated_workload("example.com/a,example.com/b"))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    name = lw.workload_name("lws", UID, 0)
    assert client.patches == [("Workload", name, {"metadata": {"resourceVersion": "3", "annotations": {GATE: want}}})]
    assert [(e.key, e.action, e.workload, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("ns/lws", "UpdatedWorkload", f"ns/{name}", f'Updated workload AdmissionGatedBy to "{set_gate}"')]


@pytest.mark.asyncio
@pytest.mark.parametrize(("set_gate", "config"), [
    ("example.com/a,example.com/b,example.com/c", ON),  # a gate is never added
    ("example.com/b", {**ON, "featureGates": {"AdmissionGatedBy": False}})])
async def test_a_kept_workload_gains_no_gate_and_is_left_alone_with_the_gate_off(set_gate: str,
                                                                                 config: dict) -> None:
    integ, client, _ = integration(gated_set(set_gate), gated_workload("example.com/a,example.com/b"),
                                   config=config)
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert client.patches == []
