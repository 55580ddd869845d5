"""A Job's Workload kept in step with the Job against the real apiserver, as Kueue's job reconciler keeps it.

A suspended Job whose ``kueue.x-k8s.io/queue-name`` is changed while its Workload is pending has that Workload
moved to the new LocalQueue, and is admitted and started through it. A suspended Job whose parallelism is
changed while its Workload is pending has the Workload rewritten to match (Event ``UpdatedWorkload``), and is
admitted with the new count. One whose ``kueue.x-k8s.io/priority-class`` is changed has its Workload given the
new WorkloadPriorityClass and its value (Event ``UpdatedWorkload``).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    job,
    kueue_es,
    local_queue,
    priority_class,
    queues,
    running,
)

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.jobs import JOBS, workload_name
from connectors.k8s.recorder import EVENTS

pytestmark = pytest.mark.kube


async def _job_events(kc: KubeClient, ns: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events on Job ``ns/name``."""
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Job"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"]) for e in msgspec.json.decode(raw)["items"]]


async def _recorded(kc: KubeClient, ns: str, name: str, event: tuple[str, str]) -> bool:
    return event in await _job_events(kc, ns, name)


async def _pending_in(kc: KubeClient, ns: str, name: str, queue: str) -> dict[str, Any] | None:
    """The Workload ``ns/name`` once it is in LocalQueue ``queue`` and kueue-es found no room for it there."""
    try:
        wl = await get(kc, "Workload", name, ns)
    except Exception:  # noqa: BLE001 - not there yet
        return None
    conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
    reserved = conditions.get("QuotaReserved")
    if wl["spec"]["queueName"] != queue or reserved is None or reserved["status"] != "False":
        return None
    return wl


@pytest.mark.asyncio
async def test_a_suspended_job_moved_to_another_queue_is_admitted_through_it(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "job-moved", {"cpu": 2})
        await create(kc, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                          "metadata": {"name": f"cq-none-{q.sfx}"},
                          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                              {"name": q.flavor, "resources": [{"name": "cpu", "nominalQuota": 0}]}]}]}})
        await create(kc, local_queue(q.ns, "no-room", f"cq-none-{q.sfx}"))
        async with kueue_es(kc, tmp_path / "log"):
            uid = (await create(kc, job(q.ns, "j", "no-room")))["metadata"]["uid"]
            wl = workload_name("j", uid)
            pending = await eventually(lambda: _pending_in(kc, q.ns, wl, "no-room"), what="the Workload pending")
            assert not await running(kc, q.ns, "j")

            await kc.patch(JOBS, "j", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}}, q.ns)
            await eventually(lambda: running(kc, q.ns, "j"), what="the Job admitted through its new queue")
            admitted = await get(kc, "Workload", wl, q.ns)
            assert admitted["spec"]["queueName"] == "user-queue"
            assert admitted["status"]["admission"]["clusterQueue"] == q.cq
            assert admitted["metadata"]["uid"] == pending["metadata"]["uid"], "the same Workload, moved: not a new one"
            started = ("Started", f"Admitted by clusterQueue {q.cq}")  # recorded from the log, after the write
            await eventually(lambda: _recorded(kc, q.ns, "j", started), what="the Started Event")
            events = await _job_events(kc, q.ns, "j")
            assert not [e for e in events if e[0] in ("UpdatedWorkload", "DeletedWorkload")], "no Event for a move"


@pytest.mark.asyncio
async def test_a_suspended_job_made_smaller_gets_its_workload_rewritten(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "job-smaller", {"cpu": 2})
        async with kueue_es(kc, tmp_path / "log"):
            uid = (await create(kc, job(q.ns, "j", "user-queue", parallelism=3)))["metadata"]["uid"]
            wl = workload_name("j", uid)
            pending = await eventually(lambda: _pending_in(kc, q.ns, wl, "user-queue"), what="3 cpu pending in 2")

            await kc.patch(JOBS, "j", {"spec": {"parallelism": 2}}, q.ns)  # completions stay 3: 2 pods at a time
            await eventually(lambda: running(kc, q.ns, "j"), what="the Job admitted with 2 pods")
            rewritten = await get(kc, "Workload", wl, q.ns)
            assert [ps["count"] for ps in rewritten["spec"]["podSets"]] == [2]
            assert rewritten["metadata"]["uid"] == pending["metadata"]["uid"], "rewritten in place, not made anew"
            updated = ("UpdatedWorkload", f"Updated not matching Workload for suspended job: {q.ns}/{wl}")
            await eventually(lambda: _recorded(kc, q.ns, "j", updated), what="the UpdatedWorkload Event")


@pytest.mark.asyncio
async def test_a_new_priority_class_label_reprioritises_the_workload(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "job-priority", {"cpu": 2})
        low, high = f"low-{q.sfx}", f"high-{q.sfx}"
        await create(kc, priority_class(low, 100))
        await create(kc, priority_class(high, 1000))
        async with kueue_es(kc, tmp_path / "log"):
            uid = (await create(kc, job(q.ns, "j", "user-queue", cpu="3",
                                        labels={"kueue.x-k8s.io/priority-class": low})))["metadata"]["uid"]
            wl = workload_name("j", uid)
            before = await eventually(lambda: _pending_in(kc, q.ns, wl, "user-queue"), what="the Workload pending")
            assert (before["spec"]["priorityClassRef"]["name"], before["spec"]["priority"]) == (low, 100)

            await kc.patch(JOBS, "j", {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": high}}}, q.ns)

            async def reprioritised() -> dict[str, Any] | None:
                spec = (await get(kc, "Workload", wl, q.ns))["spec"]
                return spec if spec["priorityClassRef"]["name"] == high else None

            spec = await eventually(reprioritised, what="the Workload given the new class")
            assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                "name": high}
            assert spec["priority"] == 1000
            updated = ("UpdatedWorkload", f"Updated workload priority class: {q.ns}/{wl}")
            await eventually(lambda: _recorded(kc, q.ns, "j", updated), what="the UpdatedWorkload Event")
