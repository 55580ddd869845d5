"""On a real apiserver: a parallel Job's succeeded pods become reclaimable and make room for a waiting Job.

A ClusterQueue of 4 cpu admits a Job of 4 pods (1 cpu each); a second Job of 2 pods waits. The test plays the
job controller: 2 of the first Job's pods succeed. The Job integration counts 2 reclaimable pods (Kueue's count
for a Job: parallelism less the completions still to come), the writer puts them in the Workload's
``status.reclaimablePods``, the quota the first Job holds shrinks to its 2 remaining pods — its admission
unchanged — and the waiting Job is admitted and started.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND
from events import schema as ev

pytestmark = pytest.mark.kube
JOBS = BY_KIND["Job"]
NOW = "2026-01-01T00:00:00Z"


def _true(obj: dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


@pytest.mark.asyncio
async def test_succeeded_pods_of_a_parallel_job_let_a_waiting_job_in(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, fl, cq, _ = await queues(kc, "reclaim", {"cpu": 4}, lq="lq")
        async with kueue_es(kc, tmp_path / "log") as (_connector, journal):
            wide = await create(kc, job(ns, "wide", "lq", cpu="1", parallelism=4))
            wide_wl = workload_name("wide", wide["metadata"]["uid"])

            async def workload(name: str, ok) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, ns)
                    return wl if ok(wl) else None
                return None

            async def running(name: str) -> dict[str, Any] | None:
                j = await get(kc, "Job", name, ns)
                return j if not j["spec"].get("suspend") else None

            await eventually(lambda: workload(wide_wl, lambda w: _true(w, "Admitted")), what="the wide Job admitted")
            await eventually(lambda: running("wide"), what="the wide Job started")
            await kc.patch(JOBS, "wide", {"status": {"startTime": NOW, "active": 4, "ready": 4}}, ns,
                           subresource="status")

            narrow = await create(kc, job(ns, "narrow", "lq", cpu="1", parallelism=2))
            narrow_wl = workload_name("narrow", narrow["metadata"]["uid"])
            wl = await eventually(lambda: workload(narrow_wl, lambda w: any(
                c["type"] == "QuotaReserved" and c["status"] == "False" for c in w.get("status", {}).get(
                    "conditions", []))), what="the narrow Job's Workload to wait for quota")
            assert not _true(wl, "QuotaReserved")
            assert (await get(kc, "Job", "narrow", ns))["spec"]["suspend"] is True

            # play the job controller: two of the wide Job's pods succeed, two still run
            await kc.patch(JOBS, "wide", {"status": {"active": 2, "ready": 2, "succeeded": 2}}, ns,
                           subresource="status")

            wl = await eventually(lambda: workload(wide_wl, lambda w: w["status"].get("reclaimablePods")),
                                  what="status.reclaimablePods on the wide Workload")
            assert wl["status"]["reclaimablePods"] == [{"name": "main", "count": 2}]
            assert _true(wl, "Admitted")
            assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 4, "the admission is unchanged"

            await eventually(lambda: workload(narrow_wl, lambda w: _true(w, "Admitted")),
                             what="the narrow Job's Workload admitted in the quota the wide one gave back")
            await eventually(lambda: running("narrow"), what="the narrow Job started")
            state = journal.mirror.state
            assert state.usage[cq] == {f"{fl}/cpu": 4000}
            assert state.workloads[f"{ns}/{wide_wl}"].usage == {f"{fl}/cpu": 2000}
            assert (await get(kc, "Job", "wide", ns))["spec"]["parallelism"] == 4

            records = [r async for r in journal.log.read()]
            reported = [r.event for r in records if isinstance(r.event, ev.ReclaimablePodsChanged)]
            assert [(e.key, [(p.name, p.count) for p in e.reclaimable_pods]) for e in reported] == [
                (f"{ns}/{wide_wl}", [("main", 2)])]
            assert not [r for r in records if isinstance(r.event, ev.DecisionRejected)]
