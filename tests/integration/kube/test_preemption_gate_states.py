"""MultiKueueOrchestratedPreemption against the real apiserver, as Kueue's workload controller has it: a Workload
created with a gate in ``spec.preemptionGates`` gets that gate listed in ``status.preemptionGates``, ``Closed``
(what a MultiKueue worker's Kueue writes on the copy the manager makes there, before the manager opens it); its
scheduler, which would preempt for it, leaves it pending with QuotaReserved=False ``PreemptionGated``. Once the
gate's owner writes it ``Open`` the preemption goes ahead: the Closed entry kueue-es wrote is not written back."""

from __future__ import annotations

from typing import Any

import pytest
from kubehelp import KUEUE, connect, create, eventually, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
GATE = "example.com/gate"
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "featureGates": {"MultiKueueOrchestratedPreemption": True}})


def _workload(ns: str, name: str, priority: int, gates: list[str] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": "user-queue", "priority": priority, "podSets": [{
        "name": "main", "count": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "2"}}}]}}}]}
    if gates:
        spec["preemptionGates"] = [{"name": g} for g in gates]
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _cond(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.mark.asyncio
async def test_a_spec_gate_is_listed_closed_and_holds_the_preemption_until_opened(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "pgates", {"cpu": 2}, preemption={"withinClusterQueue": "LowerPriority"})
        async with kueue_es(kc, tmp_path / "log", config=CONFIG):
            await create(kc, _workload(q.ns, "low", 1))

            async def shows(name: str, type_: str) -> dict[str, Any] | None:
                try:
                    wl = await get(kc, "Workload", name, q.ns)
                except NotFound:
                    return None
                c = _cond(wl, type_)
                return wl if c is not None and c["status"] == "True" else None

            await eventually(lambda: shows("low", "QuotaReserved"), what="the low Workload to hold the quota")
            await create(kc, _workload(q.ns, "high", 10, [GATE]))
            high = await eventually(lambda: shows("high", "BlockedOnPreemptionGates"),
                                    what="the high Workload to be held by its closed gate")
            gates = high["status"]["preemptionGates"]
            assert [(g["name"], g["position"]) for g in gates] == [(GATE, "Closed")], "listed, Closed"
            assert gates[0]["lastTransitionTime"]
            qr = _cond(high, "QuotaReserved")
            assert (qr["status"], qr["reason"], qr["message"]) == (
                "False", "PreemptionGated", "Workload requires preemption, but it's gated")
            assert _cond(await get(kc, "Workload", "low", q.ns), "Evicted") is None, "nothing preempted"

            # the gate's owner opens it: the scheduler preempts for it now
            opened = {"name": GATE, "position": "Open", "lastTransitionTime": "2030-01-01T00:00:00Z"}
            await kc.patch(BY_KIND["Workload"], "high", {"status": {"preemptionGates": [opened]}}, q.ns,
                           subresource="status")
            await eventually(lambda: shows("low", "Preempted"), what="the low Workload to be preempted")
            high = await get(kc, "Workload", "high", q.ns)
            assert high["status"]["preemptionGates"] == [opened], "the opening is kept"


@pytest.mark.asyncio
async def test_the_entries_of_gates_the_spec_drops_are_dropped_from_the_status(kube_apiserver, tmp_path) -> None:
    """Kueue's workload controller makes the status list exactly the spec's gates: a spec that names none any more
    leaves none (its entries were kept as they were before)."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "pgdrop", {"cpu": 2})
        async with kueue_es(kc, tmp_path / "log", config=CONFIG):
            await create(kc, _workload(q.ns, "w", 1, [GATE, "example.com/other"]))

            async def listed(n: int) -> dict[str, Any] | None:
                wl = await get(kc, "Workload", "w", q.ns)
                return wl if len((wl.get("status") or {}).get("preemptionGates") or []) == n else None

            await eventually(lambda: listed(2), what="both gates listed")
            await kc.patch(BY_KIND["Workload"], "w", {"spec": {"preemptionGates": [{"name": GATE}]}}, q.ns)
            wl = await eventually(lambda: listed(1), what="the dropped gate's entry gone")
            assert [g["name"] for g in wl["status"]["preemptionGates"]] == [GATE]
            await kc.patch(BY_KIND["Workload"], "w", {"spec": {"preemptionGates": None}}, q.ns)
            await eventually(lambda: listed(0), what="no entry left once the spec names no gate")
