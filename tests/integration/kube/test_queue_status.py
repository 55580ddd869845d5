"""ClusterQueue and LocalQueue status written by the connector, as Kueue's queue controllers write it.

Counts and per-flavor usage follow admissions; the Active condition follows what the projection knows (a missing
flavor, a stopped queue); nothing is written while nothing changes; a status someone else overwrote is put
back (the write is conditioned on the resourceVersion, a conflict re-reads and writes again).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from kubehelp import (
    cluster_queue,
    connect,
    create,
    eventually,
    flavor,
    get,
    job,
    kueue_es,
    local_queue,
    queues,
)

from connectors.k8s import crds
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube


def _active(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Active"), None)


def _cpu(status: dict[str, Any], field: str) -> dict[str, Any]:
    (fl,) = status[field]
    return next(r for r in fl["resources"] if r["name"] == "cpu")


@pytest.mark.asyncio
async def test_queue_status_follows_admissions_and_activeness(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, fl, cq, _ = await queues(kc, "qs", {"cpu": 4}, sfx=sfx, cohortName=f"co-{sfx}")
        async with kueue_es(kc, tmp_path / "log") as (connector, _journal):
            assert connector.queues is not None

            async def cq_status(pred) -> dict[str, Any] | None:
                obj = await get(kc, "ClusterQueue", cq)
                return obj["status"] if obj.get("status") and pred(obj["status"]) else None

            async def lq_status(pred) -> dict[str, Any] | None:
                obj = await get(kc, "LocalQueue", "user-queue", ns)
                return obj["status"] if obj.get("status") and pred(obj["status"]) else None

            s = await eventually(lambda: cq_status(lambda s: "flavorsReservation" in s), what="a first CQ status")
            ready = _active({"status": s})
            assert ready is not None and (ready["status"], ready["reason"], ready["message"]) == (
                "True", "Ready", "Can admit new workloads")
            assert _cpu(s, "flavorsReservation") == {"name": "cpu", "total": "0", "borrowed": "0"}

            await create(kc, job(ns, "big", "user-queue", cpu="3"))
            await eventually(lambda: cq_status(lambda s: s.get("admittedWorkloads") == 1), what="big admitted")
            await create(kc, job(ns, "next", "user-queue", cpu="2"))
            s = await eventually(lambda: cq_status(lambda s: s.get("admittedWorkloads") == 1
                                                   and s.get("pendingWorkloads") == 1),
                                 what="1 admitted + 1 pending on the ClusterQueue")
            assert s["reservingWorkloads"] == 1
            assert _cpu(s, "flavorsReservation") == {"name": "cpu", "total": "3", "borrowed": "0"}
            assert _cpu(s, "flavorsUsage") == {"name": "cpu", "total": "3", "borrowed": "0"}
            ls = await eventually(lambda: lq_status(lambda s: s.get("admittedWorkloads") == 1
                                                    and s.get("pendingWorkloads") == 1), what="the LocalQueue too")
            assert ls["reservingWorkloads"] == 1
            assert ls["flavorsReservation"] == [{"name": fl, "resources": [{"name": "cpu", "total": "3"}]}]
            lq_ready = _active({"status": ls})
            assert lq_ready is not None and (lq_ready["reason"], lq_ready["message"]) == (
                "Ready", "Can submit new workloads to localQueue")

            # --- nothing changes: nothing is written ---------------------------------------------------------
            await asyncio.sleep(2.5)
            writes = connector.queues.stats.writes
            await asyncio.sleep(2.5)
            assert connector.queues.stats.writes == writes, "no write while the status holds"

            # --- someone else overwrites it: put back ---------------------------------------------------------
            await kc.patch(BY_KIND["ClusterQueue"], cq, {"status": {"pendingWorkloads": 99}}, subresource="status")
            await eventually(lambda: cq_status(lambda s: s.get("pendingWorkloads") == 1),
                             what="the overwritten status put back")

            # --- a ClusterQueue whose flavor is missing: inactive, and so is its LocalQueue -------------------
            lost_cq, lost_fl = f"lost-{sfx}", f"later-{sfx}"
            await create(kc, cluster_queue(lost_cq, {lost_fl: {"cpu": 1}}))
            await create(kc, local_queue(ns, "lost-queue", lost_cq))

            async def lost_active() -> dict[str, Any] | None:
                return _active(await get(kc, "ClusterQueue", lost_cq))

            c = await eventually(lost_active, what="the Active condition of a ClusterQueue without its flavor")
            assert (c["status"], c["reason"], c["message"]) == (
                "False", "FlavorNotFound", f"Can't admit new workloads: references missing ResourceFlavor(s): {lost_fl}.")
            inactive_since = c["lastTransitionTime"]

            async def lost_lq_active() -> dict[str, Any] | None:
                return _active(await get(kc, "LocalQueue", "lost-queue", ns))

            c = await eventually(lost_lq_active, what="the LocalQueue of the inactive ClusterQueue")
            assert (c["status"], c["reason"]) == ("False", "ClusterQueueIsInactive")

            await asyncio.sleep(1.1)  # the transition time has second precision
            await create(kc, flavor(lost_fl))

            async def became_ready() -> dict[str, Any] | None:
                c = await lost_active()
                return c if c is not None and c["status"] == "True" else None

            c = await eventually(became_ready, what="the ClusterQueue active once its flavor exists")
            assert c["reason"] == "Ready" and c["lastTransitionTime"] > inactive_since

            # --- a stopped LocalQueue: Stopped, and it shows nothing pending -----------------------------------
            await kc.patch(BY_KIND["LocalQueue"], "user-queue", {"spec": {"stopPolicy": "Hold"}}, ns)
            ls = await eventually(lambda: lq_status(lambda s: (_active({"status": s}) or {}).get("reason") == "Stopped"),
                                  what="the stopped LocalQueue")
            assert ls["pendingWorkloads"] == 0 and ls["admittedWorkloads"] == 1
            assert _active({"status": ls})["message"] == "LocalQueue is stopped"  # type: ignore[index]


FAIR = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
                    "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}})


@pytest.mark.asyncio
async def test_fair_sharing_status_on_cluster_queue_cohort_and_local_queue(kube_apiserver, tmp_path) -> None:
    """Under Fair Sharing the ClusterQueue and its Cohort object carry ``status.fairSharing.weightedShare``; under
    Admission Fair Sharing the LocalQueue carries ``status.fairSharing.admissionFairSharingStatus``."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        co = f"co-{sfx}"
        await create(kc, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": co},
                          "spec": {}})
        ns, _, cq, _ = await queues(kc, "fs", {"cpu": 4}, sfx=sfx, cohortName=co,
                                    admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
        async with kueue_es(kc, tmp_path / "log", config=FAIR):

            async def fair(kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
                return ((await get(kc, kind, name, namespace)).get("status") or {}).get("fairSharing")

            assert await eventually(lambda: fair("ClusterQueue", cq), what="the CQ's share") == {"weightedShare": 0}
            assert await eventually(lambda: fair("Cohort", co), what="the Cohort's share") == {"weightedShare": 0}
            lq = await eventually(lambda: fair("LocalQueue", "user-queue", ns), what="the LQ's AFS status")
            assert lq["weightedShare"] == 0
            assert lq["admissionFairSharingStatus"]["consumedResources"] == {}
            assert lq["admissionFairSharingStatus"]["lastUpdate"]
