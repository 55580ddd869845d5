"""A Job's Workload and Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer, and the one Workload a Job keeps,
against the real apiserver (no garbage collector or job controller runs here: kueue-es deletes a deleted Job's
Workload itself, and the test completes Jobs as the job controller would).

The Workload made for a Job carries the finalizer; it loses it once the Job completes (the Workload stays,
finished), and goes with it when its Job is deleted — the Workload is gone, not left terminating. A Workload
deleted under its running Job stops the Job ("Workload is deleted") and then goes, and the Job is given a new
one. A second Workload controlled by the Job is deleted (Event ``DeletedWorkload``), the Job keeping its own.
A deleted Job's Workload is finished ``OwnerNotFound`` before it loses the finalizer (no version of it is without
the finalizer and not ``Finished``), as Kueue takes the finalizer off the version its ``Finished`` write returned.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kubehelp import (
    KUEUE,
    complete_job,
    connect,
    create,
    eventually,
    get,
    job,
    kueue_es,
    queues,
    running,
    versions,
)

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import JOBS, WORKLOADS, workload_name
from connectors.k8s.recorder import EVENTS
from projections.in_use import FINALIZER

pytestmark = pytest.mark.kube


async def _workload(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return await get(kc, "Workload", name, ns)
    except NotFound:
        return None


async def _gone(kc: KubeClient, ns: str, name: str) -> bool:
    return await _workload(kc, ns, name) is None


def _finalizers(wl: dict[str, Any] | None) -> list[str]:
    return list(((wl or {}).get("metadata") or {}).get("finalizers") or [])


def _finished(wl: dict[str, Any] | None) -> bool:
    return any(c["type"] == "Finished" and c["status"] == "True"
               for c in ((wl or {}).get("status") or {}).get("conditions") or [])


async def _job_events(kc: KubeClient, ns: str, name: str) -> list[tuple[str, str]]:
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Job"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"]) for e in msgspec.json.decode(raw)["items"]]


async def _started(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    """Job ``ns/name`` created, and its Workload once it runs on it."""
    uid = (await create(kc, job(ns, name, "user-queue")))["metadata"]["uid"]
    wl = workload_name(name, uid)
    await eventually(lambda: running(kc, ns, name), what=f"{name} to start")
    found = await _workload(kc, ns, wl)
    assert found is not None
    return found


@pytest.mark.asyncio
async def test_the_finalizer_on_a_jobs_workload_and_when_it_goes(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "wl-fin", {"cpu": 1})
        async with kueue_es(kc, tmp_path / "log"):
            # --- made with it; taken off once the Job completed: the Workload stays, finished --------------------
            done = await _started(kc, q.ns, "done")
            name = done["metadata"]["name"]
            assert _finalizers(done) == [FINALIZER]
            await complete_job(kc, q.ns, "done")

            async def let_go() -> dict[str, Any] | None:
                wl = await _workload(kc, q.ns, name)
                return wl if _finished(wl) and FINALIZER not in _finalizers(wl) else None

            finished = await eventually(let_go, what="the finished Workload without its finalizer")
            assert finished["metadata"]["uid"] == done["metadata"]["uid"]
            assert not finished["metadata"].get("deletionTimestamp")

            # --- its Job deleted: the Workload goes, it is not left terminating ---------------------------------
            orphan = await _started(kc, q.ns, "deleted")
            assert _finalizers(orphan) == [FINALIZER]
            await kc.delete(JOBS, "deleted", q.ns)
            await eventually(lambda: _gone(kc, q.ns, orphan["metadata"]["name"]), what="the deleted Job's Workload gone")

            # --- deleted under its running Job: the Job is stopped, the Workload goes, a new one comes ----------
            first = await _started(kc, q.ns, "kept")
            await kc.delete(WORKLOADS, first["metadata"]["name"], q.ns)
            stopped = ("Stopped", "Workload is deleted")

            async def stopped_and_gone() -> bool:
                return (stopped in await _job_events(kc, q.ns, "kept")
                        and (await _workload(kc, q.ns, first["metadata"]["name"]) or {}).get("metadata", {}).get(
                            "uid") != first["metadata"]["uid"])

            await eventually(stopped_and_gone, what="the Job stopped and its deleted Workload gone")

            async def anew() -> dict[str, Any] | None:
                wl = await _workload(kc, q.ns, first["metadata"]["name"])
                return wl if wl is not None and wl["metadata"]["uid"] != first["metadata"]["uid"] else None

            again = await eventually(anew, what="a new Workload for the Job")
            assert _finalizers(again) == [FINALIZER]
            await eventually(lambda: running(kc, q.ns, "kept"), what="the Job running again on it")


@pytest.mark.asyncio
async def test_a_workload_too_many_for_its_job_is_deleted(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "wl-extra", {"cpu": 1})
        async with kueue_es(kc, tmp_path / "log"):
            own = await _started(kc, q.ns, "j")
            j = await get(kc, "Job", "j", q.ns)
            extra = {"apiVersion": KUEUE, "kind": "Workload",
                     "metadata": {"name": "zz-extra", "namespace": q.ns, "finalizers": [FINALIZER],
                                  "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                                       "uid": j["metadata"]["uid"], "controller": True}]},
                     "spec": {"queueName": "user-queue", "podSets": own["spec"]["podSets"]}}
            await create(kc, extra)
            await eventually(lambda: _gone(kc, q.ns, "zz-extra"), what="the extra Workload deleted")
            deleted = ("DeletedWorkload", f"Deleted not matching Workload: {q.ns}/zz-extra")

            async def recorded() -> bool:
                return deleted in await _job_events(kc, q.ns, "j")

            await eventually(recorded, what="the DeletedWorkload Event")
            kept = await _workload(kc, q.ns, own["metadata"]["name"])
            assert kept is not None and kept["metadata"]["uid"] == own["metadata"]["uid"], "the Job keeps its own"
            assert await running(kc, q.ns, "j")


@pytest.mark.asyncio
async def test_a_deleted_jobs_workload_shows_finished_before_it_loses_its_finalizer(kube_apiserver, tmp_path) -> None:
    """Kueue's ``FinalizeOrphanedWorkload`` finishes the orphan, then takes the finalizer off the version that
    write returned: every version of the Workload the apiserver stores without the finalizer shows it ``Finished``
    ``OwnerNotFound`` (none lets it go, or be deleted, unseen finished)."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "wl-orphan", {"cpu": 1})
        async with kueue_es(kc, tmp_path / "log"):
            orphan = await _started(kc, q.ns, "orphan")
            name, seen = orphan["metadata"]["name"], []

            async def record() -> None:
                async for wl in versions(kc, WORKLOADS, orphan["metadata"]["resourceVersion"],
                                         field_selector=f"metadata.namespace={q.ns}"):
                    if wl["metadata"]["name"] == name:
                        seen.append(wl)

            recorder = asyncio.create_task(record())
            try:
                await kc.delete(JOBS, "orphan", q.ns)
                await eventually(lambda: _gone(kc, q.ns, name), what="the deleted Job's Workload gone")
                await eventually(lambda: any(FINALIZER not in _finalizers(w) for w in seen),
                                 what="the recorder to see the Workload without its finalizer")
            finally:
                recorder.cancel()
        unfinalized = [w for w in seen if FINALIZER not in _finalizers(w)]
        assert all([(c["status"], c["reason"]) for c in w["status"].get("conditions", []) if c["type"] == "Finished"]
                   == [("True", "OwnerNotFound")] for w in unfinalized), [
            (w["metadata"]["resourceVersion"], w["status"].get("conditions")) for w in unfinalized]
