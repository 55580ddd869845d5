"""Kueue's JobSet integration against the real apiserver, with ``jobset.x-k8s.io/jobset`` among the frameworks.

The JobSet project is not installed: its API is served from the minimal CRD of :func:`connectors.k8s.crds.jobset_crd`
and no JobSet controller runs, so the test plays it (sets the ``Completed`` condition through the status
subresource). Two JobSets each fill the ClusterQueue: the first gets its Workload, is admitted and unsuspended with
the flavor's node labels in every replicated Job's pod template; the second, created unsuspended, is suspended,
gets its Workload and stays suspended while the first holds the quota; the Jobs the JobSet controller makes get
no Workload of their own, and one of the pending JobSet, made running, is suspended; once the first completes its
Workload finishes, the quota goes back and the second starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, finished_condition, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.jobset import workload_name
from connectors.k8s.recorder import EVENTS
from connectors.k8s.resources import BY_KIND, JOBSETS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
NOW = "2026-01-01T00:00:00Z"


def _jobset(ns: str, name: str, *, suspend: bool) -> dict[str, Any]:
    def template(cpu: str) -> dict[str, Any]:
        return {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36",
                                                                   "resources": {"requests": {"cpu": cpu}}}]}}
    return {"apiVersion": JOBSETS.api_version, "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"suspend": suspend, "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": {"template": template("1")}}},
                {"name": "workers", "replicas": 2,
                 "template": {"spec": {"parallelism": 1, "completions": 1, "template": template("1")}}}]}}


async def _jobset_now(kc: Any, ns: str, name: str) -> dict[str, Any]:
    return msgspec.json.decode(await kc.get(JOBSETS, name, ns))


def _child_job(ns: str, jobset: dict[str, Any]) -> dict[str, Any]:
    """The first Job the JobSet controller makes for ``jobset``'s leader, running, with its queue label."""
    meta = jobset["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": f"{meta['name']}-leader-0", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        "ownerReferences": [{"apiVersion": JOBSETS.api_version, "kind": "JobSet", "name": meta["name"],
                             "uid": meta["uid"], "controller": True}]},
        "spec": {"suspend": False, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def _workloads(kc: Any, ns: str) -> list[dict[str, Any]]:
    listed = await kc.list(BY_KIND["Workload"])
    return [w for w in map(msgspec.json.decode, listed.items) if w["metadata"]["namespace"] == ns]


def _pod_template(jobset: dict[str, Any], i: int) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]


@pytest.mark.asyncio
async def test_a_queued_jobset_runs_only_while_its_workload_is_admitted(kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
                          "featureGates": {"SkipChildJobSuspension": False}})  # children held (v0.19)
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.jobset_crd()])
        q = await queues(kc, "jobset", {"cpu": 3}, flavor_labels={"pool": "a"})
        first = msgspec.json.decode(await kc.create(JOBSETS, _jobset(q.ns, "first", suspend=True), q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_first = workload_name("first", first["metadata"]["uid"])

            async def admitted(name: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, q.ns)
                    return wl if wl.get("status", {}).get("admission") else None
                return None

            wl = await eventually(lambda: admitted(wl_first), what="the first JobSet's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1), ("workers", 2)]
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "JobSet"

            async def started(name: str) -> dict[str, Any] | None:
                js = await _jobset_now(kc, q.ns, name)
                return js if js["spec"].get("suspend") is False else None

            js_first = await eventually(lambda: started("first"), what="the first JobSet unsuspended")
            for i, rj in enumerate(("leader", "workers")):
                template = _pod_template(js_first, i)
                assert template["spec"]["nodeSelector"] == {"pool": "a"}, rj
                assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == rj

            # the second is created running (no JobSet webhook here): suspended, queued, held back
            second = msgspec.json.decode(await kc.create(JOBSETS, _jobset(q.ns, "second", suspend=False), q.ns))
            wl_second = workload_name("second", second["metadata"]["uid"])

            async def pending() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", wl_second, q.ns)
                    js = await _jobset_now(kc, q.ns, "second")
                    return wl if js["spec"]["suspend"] and "admission" not in wl.get("status", {}) else None
                return None

            await eventually(pending, what="the second JobSet suspended, with a pending workload")
            assert await admitted(wl_second) is None and (await _jobset_now(kc, q.ns, "second"))["spec"]["suspend"]
            assert "nodeSelector" not in _pod_template(await _jobset_now(kc, q.ns, "second"), 0)["spec"]

            # play the JobSet controller: a Job of each, made running, the queue label copied from the JobSet
            for parent in (js_first, second):
                await create(kc, _child_job(q.ns, parent))

            async def child_suspended() -> bool:
                job = await get(kc, "Job", "second-leader-0", q.ns)
                return job["spec"].get("suspend") is True

            await eventually(child_suspended, what="the pending JobSet's Job suspended (its parent not admitted)")
            assert (await get(kc, "Job", "first-leader-0", q.ns))["spec"].get("suspend") is False, (
                "the admitted JobSet's Job runs")
            owned = [w["metadata"]["ownerReferences"][0]["kind"] for w in await _workloads(kc, q.ns)]
            assert owned == ["JobSet", "JobSet"], "no Workload of a child Job's own"

            # play the JobSet controller: the first completed
            done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully", "lastTransitionTime": NOW}
            await kc.patch(JOBSETS, "first", {"status": {"conditions": [done]}}, q.ns, subresource="status")

            cond = await finished_condition(kc, wl_first, q.ns, "the first JobSet's workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", "jobset completed successfully")
            js_second = await eventually(lambda: started("second"), what="the second JobSet started in its turn")
            assert _pod_template(js_second, 1)["spec"]["nodeSelector"] == {"pool": "a"}

            async def let_go() -> bool:
                wl = await get(kc, "Workload", wl_first, q.ns)
                return "kueue.x-k8s.io/resource-in-use" not in wl["metadata"].get("finalizers", [])

            await eventually(let_go, what="the finished workload's finalizer taken off")


@pytest.mark.asyncio
async def test_a_job_of_a_queued_jobset_without_a_workload_yet_is_its_child(kube_apiserver, tmp_path) -> None:
    """Kueue takes a JobSet naming a queue as its Jobs' managed ancestor from its label, not its Workload: a Job
    made while the JobSet has none yet (here its WorkloadPriorityClass does not exist, so it gets none) is suspended
    and gets no Workload of its own. The Job integration reads the JobSet from the JobSet integration's list."""
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
                          "featureGates": {"SkipChildJobSuspension": False}})  # children held (v0.19)
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.jobset_crd()])
        q = await queues(kc, "jobset-child", {"cpu": 3})
        doc = _jobset(q.ns, "early", suspend=True)
        doc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "not-there"
        parent = msgspec.json.decode(await kc.create(JOBSETS, doc, q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):
            await create(kc, _child_job(q.ns, parent))

            async def child_suspended() -> bool:
                job = await get(kc, "Job", "early-leader-0", q.ns)
                return job["spec"].get("suspend") is True

            await eventually(child_suspended, what="the queued JobSet's Job suspended (its parent has no Workload)")
            await asyncio.sleep(3)  # what a Job of its own would have got by now
            assert await _workloads(kc, q.ns) == [], "neither the JobSet (no priority class) nor its Job has one"


async def _events_on(kc: Any, ns: str, kind: str, name: str) -> list[tuple[str, str, str]]:
    """(reason, message, reporting component) of the Events on the ``kind`` object ``ns/name``."""
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind={kind}"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"], e.get("reportingComponent", "")) for e in msgspec.json.decode(raw)["items"]]


@pytest.mark.asyncio
async def test_a_jobset_runs_on_the_prebuilt_workload_it_names(kube_apiserver, tmp_path) -> None:
    """A JobSet naming a Workload made beforehand (``kueue.x-k8s.io/prebuilt-workload-name``) adopts it, runs on it
    once it is admitted and gets none of its own; its Workload finished, ``FinishedWorkload`` is recorded on it by
    the JobSet integration's recorder (fails without the JobSet's prebuilt step: a ``jobset-...`` Workload is made)."""
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.jobset_crd()])
        q = await queues(kc, "jobset-pre", {"cpu": 3})
        doc = _jobset(q.ns, "pre-js", suspend=True)
        doc["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "pre"
        pod_sets = [{"name": rj["name"], "count": rj["replicas"], "template": rj["template"]["spec"]["template"]}
                    for rj in doc["spec"]["replicatedJobs"]]
        await create(kc, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                          "metadata": {"name": "pre", "namespace": q.ns},
                          "spec": {"queueName": "user-queue", "podSets": pod_sets}})
        js = msgspec.json.decode(await kc.create(JOBSETS, doc, q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):

            async def started() -> dict[str, Any] | None:
                now = await _jobset_now(kc, q.ns, "pre-js")
                return now if now["spec"].get("suspend") is False else None

            await eventually(started, what="the JobSet started on its prebuilt workload")
            wl = await get(kc, "Workload", "pre", q.ns)
            assert [(r["kind"], r["uid"], r.get("controller")) for r in wl["metadata"]["ownerReferences"]] == [
                ("JobSet", js["metadata"]["uid"], True)]
            assert [w["metadata"]["name"] for w in await _workloads(kc, q.ns)] == ["pre"]

            done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully", "lastTransitionTime": NOW}
            await kc.patch(JOBSETS, "pre-js", {"status": {"conditions": [done]}}, q.ns, subresource="status")
            want = ("FinishedWorkload", f"Workload '{q.ns}/pre' is declared finished",
                    "jobset.x-k8s.io/jobset-kueue-controller")

            async def recorded() -> bool:
                return want in await _events_on(kc, q.ns, "JobSet", "pre-js")

            await eventually(recorded, what="FinishedWorkload recorded on the JobSet")
