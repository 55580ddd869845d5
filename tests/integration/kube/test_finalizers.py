"""The ``kueue.x-k8s.io/resource-in-use`` finalizer against the real apiserver.

The connector puts it on ClusterQueues, ResourceFlavors, AdmissionChecks and Topologies. Deleting a ClusterQueue
that a running Job's Workload reserves quota in leaves it terminating — it admits nothing new meanwhile — until
that Workload finishes; its flavor, deleted too, stays until no ClusterQueue lists it; a Topology until no flavor
names it; an unused AdmissionCheck goes at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubehelp import (
    KUEUE,
    complete_job,
    connect,
    create,
    eventually,
    flavor,
    get,
    job,
    kueue_es,
    queues,
    running,
)

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND
from projections.in_use import FINALIZER

pytestmark = pytest.mark.kube


async def _obj(kc, kind: str, name: str, ns: str = "") -> dict[str, Any] | None:
    try:
        return await get(kc, kind, name, ns)
    except NotFound:
        return None


async def _finalized(kc, kind: str, name: str) -> bool:
    obj = await _obj(kc, kind, name)
    return obj is not None and FINALIZER in (obj["metadata"].get("finalizers") or [])


async def _gone(kc, kind: str, name: str) -> bool:
    return await _obj(kc, kind, name) is None


async def _terminating(kc, kind: str, name: str) -> bool:
    obj = await _obj(kc, kind, name)
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


@pytest.mark.asyncio
async def test_resource_in_use_finalizers(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, fl, cq, sfx = await queues(kc, "fin", {"cpu": 4})
        topo, tas_fl, check = f"topo-{sfx}", f"tas-{sfx}", f"check-{sfx}"
        await create(kc, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": topo},
                          "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}})
        await create(kc, flavor(tas_fl, {"pool": "tas"}, topologyName=topo))
        await create(kc, {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": check},
                          "spec": {"controllerName": "example.com/none"}})

        async with kueue_es(kc, tmp_path / "log") as (connector, _journal):
            for kind, name in (("ClusterQueue", cq), ("ResourceFlavor", fl), ("ResourceFlavor", tas_fl),
                               ("Topology", topo), ("AdmissionCheck", check)):
                await eventually(lambda k=kind, n=name: _finalized(kc, k, n), what=f"the finalizer on {kind} {name}")

            j1 = await create(kc, job(ns, "j1", "user-queue", cpu="1"))
            await eventually(lambda: running(kc, ns, "j1"), what="j1 to run")

            # --- deleting the ClusterQueue j1 reserves quota in: it stays, terminating, and admits nothing -------
            await kc.delete(BY_KIND["ClusterQueue"], cq)
            await kc.delete(BY_KIND["ResourceFlavor"], fl)
            await eventually(lambda: _terminating(kc, "ClusterQueue", cq), what="the ClusterQueue terminating")
            await create(kc, job(ns, "j2", "user-queue", cpu="1"))
            j2 = await eventually(lambda: _wl(kc, ns, "j2"), what="j2's Workload")

            async def j2_waits() -> dict[str, Any] | None:
                wl = await _obj(kc, "Workload", j2, ns)
                conds = (wl or {}).get("status", {}).get("conditions", [])
                c = next((c for c in conds if c["type"] == "QuotaReserved"), None)
                return c if c is not None and c["status"] == "False" else None

            c = await eventually(j2_waits, what="j2 to wait: its ClusterQueue is terminating")
            assert (c["reason"], c["message"]) == ("Suspended", f"ClusterQueue {cq} is inactive")
            await asyncio.sleep(2.0)
            assert await _terminating(kc, "ClusterQueue", cq), "held while j1 reserves quota in it"
            assert await _terminating(kc, "ResourceFlavor", fl), "held while the ClusterQueue lists it"
            assert connector.finalizers is not None
            assert connector.finalizers.in_use(f"ClusterQueue/{cq}") == [
                f"{ns}/{workload_name('j1', j1['metadata']['uid'])}"]
            assert not await running(kc, ns, "j2")

            # --- j1 finishes: the ClusterQueue goes, then its flavor -------------------------------------------
            await complete_job(kc, ns, "j1")
            await eventually(lambda: _gone(kc, "ClusterQueue", cq), what="the ClusterQueue gone once j1 finished")
            await eventually(lambda: _gone(kc, "ResourceFlavor", fl), what="the flavor gone once no queue lists it")

            # --- a Topology stays while a flavor names it; an unused AdmissionCheck goes at once ---------------
            await kc.delete(BY_KIND["Topology"], topo)
            await kc.delete(BY_KIND["AdmissionCheck"], check)
            await eventually(lambda: _gone(kc, "AdmissionCheck", check), what="the unused AdmissionCheck gone")
            await asyncio.sleep(1.5)
            assert await _terminating(kc, "Topology", topo), "held while a flavor names it"
            await kc.delete(BY_KIND["ResourceFlavor"], tas_fl)
            await eventually(lambda: _gone(kc, "ResourceFlavor", tas_fl), what="the unused TAS flavor gone")
            await eventually(lambda: _gone(kc, "Topology", topo), what="the Topology gone with its last flavor")


async def _wl(kc, ns: str, job_name: str) -> str:
    j = await get(kc, "Job", job_name, ns)
    return workload_name(job_name, j["metadata"]["uid"])
