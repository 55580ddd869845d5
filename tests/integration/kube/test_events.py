"""Kueue's Kubernetes Events on a real apiserver: a Job admitted, then preempted by a higher-priority one.

The Events are read the way ``kubectl describe workload`` reads them (a field selector on the involved object's
name, namespace, kind and uid). Restarting the connector folds the log again, which offers every decision of
the last hour to the recorder once more: each Event is found to exist already, none is created twice.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, priority_class, queues

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.recorder import EVENTS

pytestmark = pytest.mark.kube


def _true(obj: dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


async def events_of(kc: KubeClient, wl: dict[str, Any]) -> list[dict[str, Any]]:
    """What ``kubectl describe`` lists for the Workload, oldest first."""
    meta = wl["metadata"]
    selector = (f"involvedObject.name={meta['name']},involvedObject.namespace={meta['namespace']},"
                f"involvedObject.kind=Workload,involvedObject.uid={meta['uid']}")
    raw = await kc.request("GET", EVENTS.collection_path(meta["namespace"]), query=[("fieldSelector", selector)])
    items = msgspec.json.decode(raw)["items"]
    return sorted(items, key=lambda e: (e["eventTime"], e["metadata"]["name"]))


async def all_events(kc: KubeClient, ns: str) -> list[dict[str, Any]]:
    return msgspec.json.decode(await kc.request("GET", EVENTS.collection_path(ns)))["items"]


@pytest.mark.asyncio
async def test_admission_and_preemption_events_and_no_duplicates_after_a_restart(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, fl, cq, sfx = await queues(kc, "events", {"cpu": 2}, lq="lq",
                                       preemption={"withinClusterQueue": "LowerPriority"})
        await create(kc, priority_class(f"low-{sfx}", 100))
        await create(kc, priority_class(f"high-{sfx}", 1000))

        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            low_job = await create(kc, job(ns, "low", "lq", cpu="2",
                                           labels={"kueue.x-k8s.io/priority-class": f"low-{sfx}"}))
            low_name = workload_name("low", low_job["metadata"]["uid"])

            async def low_events(*reasons: str) -> list[dict[str, Any]] | None:
                with contextlib.suppress(NotFound):
                    found = await events_of(kc, await get(kc, "Workload", low_name, ns))
                    return found if [e["reason"] for e in found] == list(reasons) else None
                return None

            found = await eventually(lambda: low_events("QuotaReserved", "Admitted"),
                                     what="QuotaReserved and Admitted Events on the low Workload")
            low = await get(kc, "Workload", low_name, ns)
            quota, admitted = found
            assert {e["involvedObject"]["uid"] for e in found} == {low["metadata"]["uid"]}
            assert {(e["type"], e["reportingComponent"], e["action"]) for e in found} == {
                ("Normal", "kueue-admission", "QuotaReserved"), ("Normal", "kueue-admission", "Admitted")}
            assert re.fullmatch(rf"Quota reserved in ClusterQueue {cq}, wait time since queued was \d+s",
                                quota["message"])
            assert admitted["message"] == f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s"

            # --- a higher-priority Job preempts it ---------------------------------------------------------
            high_job = await create(kc, job(ns, "high", "lq", cpu="2",
                                            labels={"kueue.x-k8s.io/priority-class": f"high-{sfx}"}))
            high_name = workload_name("high", high_job["metadata"]["uid"])

            async def high_admitted() -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):
                    wl = await get(kc, "Workload", high_name, ns)
                    return wl if _true(wl, "Admitted") else None
                return None

            high = await eventually(high_admitted, what="the high Workload to be admitted once the low one stopped")
            # requeued once its Job stopped, the low one finds no quota: Kueue's Warning for the failed attempt
            found = await eventually(
                lambda: low_events("QuotaReserved", "Admitted", "EvictedDueToPreempted", "Preempted",
                                   "WaitingForQuota"),
                what="the preemption Events on the low Workload")
            preemption = (f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, JobUID: "
                          f"{high_job['metadata']['uid']}) due to prioritization in the ClusterQueue; "
                          f"preemptor path: /{cq}; preemptee path: /{cq}")
            priorities = ("preemptor effective priority: 1000 (base: 1000, boost: 0); "
                          "preemptee effective priority: 100 (base: 100, boost: 0)")
            evicted, preempted, waiting = found[2:]
            assert waiting["type"] == "Warning" and waiting["message"].startswith(
                f"couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor {fl}")
            assert (evicted["type"], evicted["message"]) == ("Normal", preemption)
            assert (preempted["type"], preempted["message"]) == ("Normal", f"{preemption}; {priorities}")
            assert {e["involvedObject"]["uid"] for e in found} == {low["metadata"]["uid"]}

            async def high_events() -> list[dict[str, Any]] | None:  # (decisions are recorded concurrently)
                found = await events_of(kc, high)
                reasons = [e["reason"] for e in found if e["reason"] != "WaitingForPreemptedWorkloads"]
                return found if reasons == ["PreemptedWorkload", "QuotaReserved", "Admitted"] else None

            on_high = await eventually(high_events, what="the preemptor's Events")
            assert {e["involvedObject"]["uid"] for e in on_high} == {high["metadata"]["uid"]}
            by_reason = {e["reason"]: e for e in on_high}
            waiting = by_reason["WaitingForPreemptedWorkloads"]  # the preemptor, while its victim stops
            assert waiting["type"] == "Warning"
            assert waiting["message"].endswith("Pending the preemption of 1 workload(s)")
            assert by_reason["PreemptedWorkload"]["message"] == (
                f"Preempted workload {ns}/{low_name} (UID: {low['metadata']['uid']}) in ClusterQueue {cq}; "
                f"{priorities}")
            assert re.fullmatch(rf"Quota reserved in ClusterQueue {cq}, wait time since queued was \d+s",
                                by_reason["QuotaReserved"]["message"])
            mine = {f"{ns}/{low_name}", f"{ns}/{high_name}"}  # (the connector sees other tests' objects too)

            def recorded() -> bool:
                ledger = journal.mirror.kube_events
                return not (mine & set(journal.mirror.pending) or any(d.key in mine for d, _ in ledger.awaiting.values())
                            or any(r.event.key in mine for r in ledger.ready.values()))

            await eventually(recorded, what="every carried-out decision's Events recorded")
            before = {e["metadata"]["name"]: e for e in await all_events(kc, ns)}
            assert connector.recorder is not None
            assert connector.recorder.stats.created >= len(before)

        # --- restart: the log is folded again, every Event of the last hour is offered again -------------------
        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            assert connector.recorder is not None
            stats = connector.recorder.stats
            await eventually(lambda: recorded() and stats.existing >= len(before),
                             what="the replayed decisions' Events to be checked")
            after = {e["metadata"]["name"]: e for e in await all_events(kc, ns)}
            assert set(before) <= set(after)
            assert all(e["metadata"]["resourceVersion"] == before[n]["metadata"]["resourceVersion"]
                       for n, e in after.items() if n in before), "the first run's Events untouched"
            # a decision's Events carry the time of its outcome in the log: recorded twice, they would be twins
            keys = [(e["involvedObject"]["uid"], e["reason"], e["message"], e["eventTime"]) for e in after.values()]
            assert len(keys) == len(set(keys)), "no decision recorded twice"
