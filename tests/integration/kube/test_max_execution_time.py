"""A Job's maximum execution time against the real apiserver: the deadline alone wakes the scheduler.

A Job labelled ``kueue.x-k8s.io/max-exec-time-seconds: "3"`` gets a Workload with
``maximumExecutionTimeSeconds: 3``, is admitted and started; nothing else happens, yet 3 s after its admission
(time from the log: the scheduler appends a clock tick once the deadline has passed) it is deactivated as Kueue
deactivates it — ``spec.active: false``, Evicted and Requeued ``DeactivatedDueToMaximumExecutionTimeExceeded``
with Kueue's message, its quota released, the time it ran in ``accumulatedPastExecutionTimeSeconds``, the Warning
``MaximumExecutionTimeExceeded`` on the Workload — and its Job is suspended, and stays so.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.jobs import workload_name
from connectors.k8s.recorder import EVENTS
from connectors.k8s.workload_body import MAX_EXEC_LABEL
from events import schema as ev

pytestmark = pytest.mark.kube
MESSAGE = "The workload is deactivated due to exceeding the maximum execution time"
REASON = "DeactivatedDueToMaximumExecutionTimeExceeded"


def _cond(obj: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)
    return None if c is None else (c["status"], c["reason"], c["message"])


@pytest.mark.asyncio
async def test_a_job_is_deactivated_when_its_maximum_execution_time_runs_out(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = (await queues(kc, "maxexec", {"cpu": 4})).ns
        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            j = await create(kc, job(ns, "capped", "user-queue", labels={MAX_EXEC_LABEL: "3"}))
            name = workload_name("capped", j["metadata"]["uid"])
            key = f"{ns}/{name}"

            async def suspended() -> bool:
                return bool((await get(kc, "Job", "capped", ns))["spec"].get("suspend"))

            await eventually(lambda: _not(suspended()), what="the Job to start")
            assert (await get(kc, "Workload", name, ns))["spec"]["maximumExecutionTimeSeconds"] == 3

            async def deactivated() -> dict[str, Any] | None:
                w = await get(kc, "Workload", name, ns)
                return w if _cond(w, "Evicted") == ("True", REASON, MESSAGE) else None

            wl = await eventually(deactivated, timeout=30, what="the Workload deactivated")
            await eventually(suspended, what="the Job suspended again")
            wl = await eventually(lambda: _inactive(kc, name, ns), what="spec.active false")

            assert _cond(wl, "Requeued") == ("False", REASON, MESSAGE)
            assert _cond(wl, "QuotaReserved")[:2] == ("False", "Deactivated")
            assert _cond(wl, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
            assert "admission" not in wl["status"]

            records = [r.event async for r in journal.log.read() if r.event.key == key]
            admitted = next(e for e in records if isinstance(e, ev.WorkloadAdmitted))
            (deactivation,) = [e for e in records if isinstance(e, ev.WorkloadDeactivated)]
            assert deactivation.reason == REASON and deactivation.message == MESSAGE
            ran = deactivation.time - admitted.time
            assert 3000 <= ran < 15_000, f"deactivated {ran} ms after its admission"
            assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == ran // 1000

            async def recorded() -> list[dict[str, Any]] | None:
                got = await events_of(kc, wl)
                reasons = {e["reason"] for e in got}
                return got if {"MaximumExecutionTimeExceeded", f"EvictedDueTo{REASON}"} <= reasons else None

            got = await eventually(recorded, what="the Warning and the eviction Events")
            limit = next(e for e in got if e["reason"] == "MaximumExecutionTimeExceeded")
            assert (limit["type"], limit["message"], limit["reportingComponent"]) == (
                "Warning", "The maximum execution time (3s) exceeded", "kueue-workload-controller")
            assert any(e["reason"] == f"EvictedDueTo{REASON}" and e["message"] == MESSAGE for e in got)

            await asyncio.sleep(2)  # and it stays so: nothing readmits it
            assert await suspended()
            assert not (await get(kc, "Workload", name, ns))["spec"]["active"]
            later = [r.event async for r in journal.log.read() if r.event.key == key]
            assert not any(isinstance(e, ev.QuotaReserved) for e in later[later.index(deactivation):])
            assert connector.writer.stats.deactivations == 1


async def events_of(kc: KubeClient, wl: dict[str, Any]) -> list[dict[str, Any]]:
    """The Events ``kubectl describe`` lists for the Workload."""
    meta = wl["metadata"]
    selector = (f"involvedObject.name={meta['name']},involvedObject.namespace={meta['namespace']},"
                f"involvedObject.kind=Workload,involvedObject.uid={meta['uid']}")
    raw = await kc.request("GET", EVENTS.collection_path(meta["namespace"]), query=[("fieldSelector", selector)])
    return msgspec.json.decode(raw)["items"]


async def _not(value: Any) -> bool:
    return not await value


async def _inactive(kc, name: str, ns: str) -> dict[str, Any] | None:
    w = await get(kc, "Workload", name, ns)
    return w if w["spec"].get("active") is False else None
