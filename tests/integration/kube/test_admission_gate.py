"""AdmissionGatedBy against the real apiserver, as Kueue's e2e for it: a Job created with the
``kueue.x-k8s.io/admission-gated-by`` annotation gets a Workload carrying it, which shows QuotaReserved=False
AdmissionGated (with the Normal Event ``AdmissionGated``) and is not admitted although its queue has room; once the
annotation is removed from the Job, the Workload's goes too, the gate is cleared (Event ``AdmissionGateCleared``),
and the Job is admitted and started. With the gate off the annotation is not copied and the Job starts at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues, workload_events

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import JOBS, workload_name
from kueue_es.scheduler.config import DEFAULT, load_config

pytestmark = pytest.mark.kube
GATE = "kueue.x-k8s.io/admission-gated-by"
GATE_OFF = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                        "featureGates": {"AdmissionGatedBy": False}})


def _quota_reserved(wl: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == "QuotaReserved"), None)


async def _running(kc: KubeClient, ns: str) -> bool:
    return not (await get(kc, "Job", "j", ns))["spec"].get("suspend")


@pytest.mark.asyncio
@pytest.mark.parametrize("gate_on", [True, False], ids=["default-gates", "gate-off"])
async def test_a_gated_job_is_admitted_once_its_annotation_is_removed(kube_apiserver, tmp_path, gate_on: bool) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "gated", {"cpu": 2})
        async with kueue_es(kc, tmp_path / "log", config=DEFAULT if gate_on else GATE_OFF):
            doc = job(q.ns, "j", "user-queue")
            doc["metadata"]["annotations"] = {GATE: "example.com/approver"}
            name = workload_name("j", (await create(kc, doc))["metadata"]["uid"])

            async def workload() -> dict[str, Any] | None:
                try:
                    return await get(kc, "Workload", name, q.ns)
                except NotFound:
                    return None

            if not gate_on:
                await eventually(lambda: _running(kc, q.ns), what="the Job to start, its annotation ignored")
                wl = await get(kc, "Workload", name, q.ns)
                assert GATE not in (wl["metadata"].get("annotations") or {})
                return

            async def gated() -> dict[str, Any] | None:
                wl = await workload()
                qr = _quota_reserved(wl) if wl is not None else None
                return wl if qr is not None and qr["reason"] == "AdmissionGated" else None

            wl = await eventually(gated, what="the Workload to show AdmissionGated")
            assert wl["metadata"]["annotations"][GATE] == "example.com/approver"
            assert _quota_reserved(wl)["message"] == "Admission is gated by: example.com/approver"
            gated_event = ("Normal", "AdmissionGated", "Workload admission is gated by: example.com/approver")
            await eventually(lambda: _has(kc, wl, gated_event), what="the AdmissionGated Event")
            await asyncio.sleep(1)
            assert not await _running(kc, q.ns), "the queue has room, yet the gated Job stays suspended"
            assert "admission" not in ((await get(kc, "Workload", name, q.ns)).get("status") or {})

            await kc.patch(JOBS, "j", {"metadata": {"annotations": {GATE: None}}}, q.ns)

            async def ungated() -> bool:
                wl = await workload()
                return wl is not None and GATE not in (wl["metadata"].get("annotations") or {})

            await eventually(ungated, what="the Workload's annotation to be removed by the Job integration")
            await eventually(lambda: _running(kc, q.ns), what="the Job to be admitted and started")
            cleared = ("Normal", "AdmissionGateCleared", "Admission gate cleared, workload is now admissible")
            await eventually(lambda: _has(kc, wl, cleared), what="the AdmissionGateCleared Event")
            assert (await get(kc, "Workload", name, q.ns))["status"]["admission"]["clusterQueue"] == q.cq


async def _has(kc: KubeClient, wl: dict[str, Any], event: tuple[str, str, str]) -> bool:
    return event in await workload_events(kc, wl)
