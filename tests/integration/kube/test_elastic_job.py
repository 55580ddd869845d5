"""An elastic batch/v1 Job scaled up and down against the real apiserver, as Kueue runs it through workload slices.

A Job annotated ``kueue.x-k8s.io/elastic-job: "true"`` (``ElasticJobsViaWorkloadSlices`` on, Kueue's default) gets
a first slice named with its generation in the hash, is admitted and runs (there is no job controller here: the
test plays it, setting ``status.active``). Its parallelism raised beyond the quota, it gets a new slice naming the
old one in ``kueue.x-k8s.io/workload-slice-replacement-for``, which waits while the Job runs on the old one; once
the quota grows the scheduler admits the new slice and finishes the old one ``WorkloadSliceReplaced``, and the Job runs on the new slice — never suspended meanwhile, no ``Stopped`` Event, no
Workload deleted. The pods (made by the test, gated by the ``kueue.x-k8s.io/elastic-job`` gate the Job webhook
puts on the template) are ungated once the slice counting them is admitted, not before, and the started Job's
template carries the chain's ``kueue.x-k8s.io/workload-slice-name``. Its parallelism then lowered, the admitted
slice takes the smaller count in place. An elastic Job already running without a Workload is not suspended: its
first slice is made, and once it is admitted only as many gated pods as it counts are ungated. Annotated
``kueue.x-k8s.io/elastic-job-scale-up-strategy: partial``, a scale-up is admitted in part and probed for the
rest; the slice admitted in part evicted, it alone is finished once the Job stopped on it, and its probe is
admitted in its place (Kueue #15661, #15417).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues, running

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.jobs import JOBS
from connectors.k8s.recorder import EVENTS
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workload_slices import slice_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
ELASTIC = "kueue.x-k8s.io/elastic-job"
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
STRATEGY = "kueue.x-k8s.io/elastic-job-scale-up-strategy"
CLUSTER_QUEUES = BY_KIND["ClusterQueue"]


def _condition(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


async def _workload(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    with contextlib.suppress(Exception):
        return await get(kc, "Workload", name, ns)
    return None


async def _admitted(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    wl = await _workload(kc, ns, name)
    admitted = _condition(wl, "Admitted") if wl else None
    return wl if admitted is not None and admitted["status"] == "True" else None


async def _job_events(kc: KubeClient, ns: str, name: str) -> list[tuple[str, str]]:
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Job"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"]) for e in msgspec.json.decode(raw)["items"]]


@contextlib.asynccontextmanager
async def _never_suspended(kc: KubeClient, ns: str, name: str) -> AsyncIterator[None]:
    """Poll the Job while the block runs; once it is done, fail if the Job was ever seen suspended."""
    seen: list[bool] = []

    async def watch() -> None:
        while True:
            if not await running(kc, ns, name):
                seen.append(True)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert seen == [], "the Job was never suspended"


@pytest.mark.asyncio
async def test_an_elastic_job_scales_up_through_a_new_slice_without_stopping(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "elastic", {"cpu": 4})
        async with kueue_es(kc, tmp_path / "log"):
            doc = job(q.ns, "el", "user-queue", parallelism=2)
            doc["metadata"]["annotations"] = {ELASTIC: "true"}
            doc["spec"]["template"]["spec"]["schedulingGates"] = [{"name": ELASTIC}]  # as Kueue's webhook gates it
            del doc["spec"]["completions"]  # the pod count follows parallelism alone
            created = await create(kc, doc)
            uid = created["metadata"]["uid"]
            first = slice_name("Job", "batch", "el", uid, created["metadata"]["generation"])
            await eventually(lambda: running(kc, q.ns, "el"), what="the Job started on its first slice")
            first_wl = await _admitted(kc, q.ns, first)
            assert first_wl is not None and first_wl["metadata"]["annotations"][ELASTIC] == "true"
            started = await get(kc, "Job", "el", q.ns)
            assert started["spec"]["template"]["metadata"]["annotations"][SLICE_NAME] == first, \
                "the pods carry the chain's name"
            for i in range(2):
                await create(kc, _pod(q.ns, f"el-{i}", created))
            await kc.patch(JOBS, "el", {"status": {"active": 2}}, q.ns, subresource="status")
            await eventually(lambda: _ungated(kc, q.ns, "el-0", "el-1"), what="the first slice's pods ungated")

            async with _never_suspended(kc, q.ns, "el"):
                # 6 pods do not fit in 4 cpu: the new slice waits, the Job runs on its old one
                scaled = msgspec.json.decode(await kc.patch(JOBS, "el", {"spec": {"parallelism": 6}}, q.ns))
                second = slice_name("Job", "batch", "el", uid, scaled["metadata"]["generation"])
                assert second != first
                await eventually(lambda: _pending(kc, q.ns, second), what="the new slice pending")
                for i in range(2, 6):  # the job controller adds the pods, gated by the template
                    await create(kc, _pod(q.ns, f"el-{i}", created))
                await kc.patch(JOBS, "el", {"status": {"active": 6}}, q.ns, subresource="status")
                await asyncio.sleep(1.0)
                assert not await _ungated(kc, q.ns, "el-2"), "a pod of the waiting slice stays gated"
                assert await _admitted(kc, q.ns, first) is not None, "the old slice keeps its admission"
                assert await running(kc, q.ns, "el")

                cq = await get(kc, "ClusterQueue", q.cq)
                cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 6
                await kc.replace(CLUSTER_QUEUES, q.cq, cq)
                new = await eventually(lambda: _admitted(kc, q.ns, second), what="the new slice admitted")
                assert new["metadata"]["annotations"][REPLACES] == f"{q.ns}/{first}"
                assert new["spec"]["podSets"][0]["count"] == 6
                await eventually(lambda: _ungated(kc, q.ns, *(f"el-{i}" for i in range(6))),
                                 what="the new slice's pods ungated")
                old = await get(kc, "Workload", first, q.ns)
                finished = _condition(old, "Finished")
                assert finished is not None and finished["status"] == "True"
                assert finished["reason"] == "WorkloadSliceReplaced"
                await eventually(lambda: _no_finalizer(kc, q.ns, first), what="the replaced slice let go")

                # scale down: the admitted slice takes the count in place, no new slice
                await kc.patch(JOBS, "el", {"spec": {"parallelism": 3}}, q.ns)
                await eventually(lambda: _count_is(kc, q.ns, second, 3), what="the slice's count lowered")
                await asyncio.sleep(0.5)
            assert await _admitted(kc, q.ns, second) is not None, "still admitted after the scale-down"
            reasons = [r for r, _ in await _job_events(kc, q.ns, "el")]
            assert "Stopped" not in reasons and "DeletedWorkload" not in reasons
            names = {w["metadata"]["name"] for w in msgspec.json.decode(await kc.request(
                "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{q.ns}/workloads"))["items"]}
            assert names == {first, second}, "no third slice, none deleted"


@pytest.mark.asyncio
async def test_a_running_elastic_job_gets_its_first_slice_and_only_the_pods_it_counts_run(kube_apiserver,
                                                                                       tmp_path) -> None:
    """An elastic Job already running, with no Workload (made while no webhook suspended it), is not suspended: its
    first slice is made at once; once admitted, only as many of its gated pods as the slice counts are ungated,
    lowest name first."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "elastic-running", {"cpu": 4})
        doc = job(q.ns, "er", "user-queue", parallelism=2, suspend=False)
        doc["metadata"]["annotations"] = {ELASTIC: "true"}
        doc["spec"]["template"]["spec"]["schedulingGates"] = [{"name": ELASTIC}]
        del doc["spec"]["completions"]
        created = await create(kc, doc)
        for i in range(3):  # one pod too many, as while a scale-down takes effect
            await create(kc, _pod(q.ns, f"er-{i}", created))
        await kc.patch(JOBS, "er", {"status": {"active": 3}}, q.ns, subresource="status")
        async with _never_suspended(kc, q.ns, "er"):
            async with kueue_es(kc, tmp_path / "log"):
                first = slice_name("Job", "batch", "er", created["metadata"]["uid"], created["metadata"]["generation"])
                await eventually(lambda: _admitted(kc, q.ns, first), what="the first slice admitted")
                await eventually(lambda: _ungated(kc, q.ns, "er-0", "er-1"), what="the pods the slice counts ungated")
                await asyncio.sleep(1.0)
                assert not await _ungated(kc, q.ns, "er-2"), "the pod beyond the slice's count stays gated"
        assert "Stopped" not in [r for r, _ in await _job_events(kc, q.ns, "er")]


def _pod(ns: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
    """A pod of Job ``owner`` as its job controller makes it: controlled by it, labelled with its uid, gated as
    its template is."""
    uid = owner["metadata"]["uid"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"batch.kubernetes.io/controller-uid": uid},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                              "uid": uid, "controller": True}]},
            "spec": {"schedulingGates": [{"name": ELASTIC}],
                     "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}


async def _ungated(kc: KubeClient, ns: str, *names: str) -> bool:
    for name in names:
        pod = await get(kc, "Pod", name, ns)
        if pod["spec"].get("schedulingGates"):
            return False
    return True


async def _pending(kc: KubeClient, ns: str, name: str) -> bool:
    wl = await _workload(kc, ns, name)
    reserved = _condition(wl, "QuotaReserved") if wl else None
    return reserved is not None and reserved["status"] == "False"


async def _no_finalizer(kc: KubeClient, ns: str, name: str) -> bool:
    wl = await _workload(kc, ns, name)
    return wl is not None and not wl["metadata"].get("finalizers")


async def _count_is(kc: KubeClient, ns: str, name: str, count: int) -> bool:
    wl = await _workload(kc, ns, name)
    return wl is not None and wl["spec"]["podSets"][0]["count"] == count


PARTIAL_SCALE_UP = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                "featureGates": {"ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp": True}})


def _granted(wl: dict[str, Any]) -> int | None:
    return wl["status"]["admission"]["podSetAssignments"][0].get("count")


async def _gated(kc: KubeClient, ns: str, *names: str) -> list[str]:
    return [n for n in names if (await get(kc, "Pod", n, ns))["spec"].get("schedulingGates")]


async def _partial_job(kc: KubeClient, ns: str, name: str) -> tuple[dict[str, Any], str, str]:
    """An elastic Job of 5 pods scaling up in part, started on its first slice: (the Job as made, its uid, the
    first slice's name)."""
    doc = job(ns, name, "user-queue", parallelism=5)
    doc["metadata"]["annotations"] = {ELASTIC: "true", STRATEGY: "partial"}
    doc["spec"]["template"]["spec"]["schedulingGates"] = [{"name": ELASTIC}]
    del doc["spec"]["completions"]
    created = await create(kc, doc)
    uid = created["metadata"]["uid"]
    first = slice_name("Job", "batch", name, uid, created["metadata"]["generation"])
    await eventually(lambda: running(kc, ns, name), what="the Job started on its first slice")
    return created, uid, first


@pytest.mark.asyncio
async def test_a_partial_scale_up_is_admitted_in_part_then_probed_for_the_rest(kube_apiserver, tmp_path) -> None:
    """Kueue's KEP-12100 with a batch/v1 Job (``kueue.x-k8s.io/elastic-job-scale-up-strategy: partial``,
    ``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp`` on): 5 pods running in a 7-cpu ClusterQueue, the Job
    scaled to 10 gets a slice asking for 10 with ``minCount`` 5, admitted with 7 (the old slice finished as
    replaced), and only 2 more pods run; a scale-up probe asking for 10 with ``minCount`` 7, named apart, waits;
    once the quota grows to 10 the probe is admitted whole, replaces the partial slice, and every pod runs. Scaled
    down to 4, below the probe's ``minCount``, the slice takes count and ``minCount`` 4 in place and runs on. The
    Job is never suspended."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "elastic-partial", {"cpu": 7})
        async with kueue_es(kc, tmp_path / "log", config=PARTIAL_SCALE_UP):
            created, uid, first = await _partial_job(kc, q.ns, "ep")
            first_wl = await _admitted(kc, q.ns, first)
            assert first_wl is not None and "minCount" not in first_wl["spec"]["podSets"][0], \
                "a first slice is never admitted in part"
            for i in range(5):
                await create(kc, _pod(q.ns, f"ep-{i}", created))
            await kc.patch(JOBS, "ep", {"status": {"active": 5}}, q.ns, subresource="status")
            await eventually(lambda: _ungated(kc, q.ns, *(f"ep-{i}" for i in range(5))), what="5 pods ungated")

            async with _never_suspended(kc, q.ns, "ep"):
                scaled = msgspec.json.decode(await kc.patch(JOBS, "ep", {"spec": {"parallelism": 10}}, q.ns))
                generation = scaled["metadata"]["generation"]
                partial = slice_name("Job", "batch", "ep", uid, generation)
                for i in range(5, 10):
                    await create(kc, _pod(q.ns, f"ep-{i}", created))
                await kc.patch(JOBS, "ep", {"status": {"active": 10}}, q.ns, subresource="status")
                partial_wl = await eventually(lambda: _admitted(kc, q.ns, partial), what="the scale-up admitted")
                assert partial_wl["spec"]["podSets"][0]["count"] == 10
                assert partial_wl["spec"]["podSets"][0]["minCount"] == 5, "at least the old slice's pods"
                assert _granted(partial_wl) == 7, "as many as fit"
                await eventually(lambda: _finished_as_replaced(kc, q.ns, first), what="the first slice replaced")

                probe = slice_name("Job", "batch", "ep", uid, generation, probe=7)
                await eventually(lambda: _pending(kc, q.ns, probe), what="the scale-up probe waiting")
                probe_wl = await get(kc, "Workload", probe, q.ns)
                assert probe_wl["metadata"]["annotations"][REPLACES] == f"{q.ns}/{partial}"
                assert probe_wl["metadata"]["annotations"][SLICE_NAME] == first
                assert (probe_wl["spec"]["podSets"][0]["count"], probe_wl["spec"]["podSets"][0]["minCount"]) == (10, 7)
                await eventually(lambda: _ungated(kc, q.ns, "ep-5", "ep-6"), what="the 2 pods granted ungated")
                await asyncio.sleep(1.0)
                assert await _gated(kc, q.ns, *(f"ep-{i}" for i in range(10))) == ["ep-7", "ep-8", "ep-9"]
                assert await _admitted(kc, q.ns, partial) is not None, "the partial slice runs on"

                cq = await get(kc, "ClusterQueue", q.cq)
                cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 10
                await kc.replace(CLUSTER_QUEUES, q.cq, cq)
                whole = await eventually(lambda: _admitted(kc, q.ns, probe), what="the probe admitted")
                assert _granted(whole) == 10
                await eventually(lambda: _finished_as_replaced(kc, q.ns, partial), what="the partial slice replaced")
                await eventually(lambda: _ungated(kc, q.ns, *(f"ep-{i}" for i in range(10))), what="all pods ungated")
                await asyncio.sleep(1.0)

                # KEP-12100's scale-down: below the probe's minCount (7), which comes down with the count
                await kc.patch(JOBS, "ep", {"spec": {"parallelism": 4}}, q.ns)
                shrunk = await eventually(lambda: _counts(kc, q.ns, probe, 4), what="the slice scaled down in place")
                assert shrunk["spec"]["podSets"][0]["minCount"] == 4
                assert await _admitted(kc, q.ns, probe) is not None, "the slice runs on"
            names = {w["metadata"]["name"] for w in msgspec.json.decode(await kc.request(
                "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{q.ns}/workloads"))["items"]}
            assert names == {first, partial, probe}, "no further probe once all is granted, nor on the scale-down"


async def _counts(kc: KubeClient, ns: str, name: str, count: int) -> dict[str, Any] | None:
    wl = await _workload(kc, ns, name)
    return wl if wl is not None and wl["spec"]["podSets"][0]["count"] == count else None


async def _finished_as_replaced(kc: KubeClient, ns: str, name: str) -> bool:
    wl = await _workload(kc, ns, name)
    finished = _condition(wl, "Finished") if wl else None
    return finished is not None and finished["status"] == "True" and finished["reason"] == "WorkloadSliceReplaced"


async def _finished_out_of_sync(kc: KubeClient, ns: str, name: str) -> bool:
    wl = await _workload(kc, ns, name)
    finished = _condition(wl, "Finished") if wl else None
    return finished is not None and finished["status"] == "True" and finished["reason"] == "OutOfSync"


async def _names(kc: KubeClient, ns: str) -> set[str]:
    return {w["metadata"]["name"] for w in msgspec.json.decode(await kc.request(
        "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"))["items"]}


@pytest.mark.asyncio
async def test_an_evicted_partial_slice_is_finished_alone_and_its_probe_is_admitted_in_its_place(
        kube_apiserver, tmp_path) -> None:
    """KEP-12100's eviction, as merged Kueue runs it (#15661, #15417): the Job's slice admitted with 7 of 10
    and its probe (10, ``minCount`` 7) waiting, the ClusterQueue drained (``HoldAndDrain``) evicts the slice,
    which stays the Job's until its pods are gone: the Job is stopped on it, its quota held while pods are
    active. Once none is (the test plays the job controller), the quota goes back and that slice alone is
    finished ``OutOfSync``; the probe is neither finished nor replaced by a new slice. Once the ClusterQueue
    runs again the probe, its predecessor holding no quota, is admitted at its ``minCount`` (7, all that
    fits), the Job is started on it with its parallelism kept, and a further probe (10, ``minCount`` 7)
    follows it."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "elastic-evict", {"cpu": 7})
        async with kueue_es(kc, tmp_path / "log", config=PARTIAL_SCALE_UP):
            _, uid, first = await _partial_job(kc, q.ns, "er")
            await kc.patch(JOBS, "er", {"status": {"active": 5}}, q.ns, subresource="status")
            scaled = msgspec.json.decode(await kc.patch(JOBS, "er", {"spec": {"parallelism": 10}}, q.ns))
            generation = scaled["metadata"]["generation"]
            partial = slice_name("Job", "batch", "er", uid, generation)
            probe = slice_name("Job", "batch", "er", uid, generation, probe=7)
            await eventually(lambda: _admitted(kc, q.ns, partial), what="the scale-up admitted with 7")
            await eventually(lambda: _pending(kc, q.ns, probe), what="the scale-up probe waiting")

            await kc.patch(CLUSTER_QUEUES, q.cq, {"spec": {"stopPolicy": "HoldAndDrain"}})

            async def suspended() -> bool:
                return not await running(kc, q.ns, "er")

            await eventually(suspended, what="the Job stopped on its evicted slice")
            evicted = await get(kc, "Workload", partial, q.ns)
            assert (_condition(evicted, "Evicted") or {}).get("status") == "True"
            assert evicted["status"].get("admission"), "its quota held while pods are active (Kueue #15661)"
            assert not await _finished_out_of_sync(kc, q.ns, partial)
            # the job controller
            await kc.patch(JOBS, "er", {"status": {"active": 0}}, q.ns, subresource="status")
            await eventually(lambda: _finished_out_of_sync(kc, q.ns, partial), what="the evicted slice finished")
            await asyncio.sleep(1.0)
            assert await _pending(kc, q.ns, probe), "the probe kept, waiting"
            assert not await _finished_out_of_sync(kc, q.ns, probe)
            assert await _names(kc, q.ns) == {first, partial, probe}, "no new slice (no recreation)"
            kept = await get(kc, "Workload", probe, q.ns)
            assert kept["metadata"]["annotations"][REPLACES] == f"{q.ns}/{partial}"
            assert kept["metadata"]["annotations"][SLICE_NAME] == first
            assert (kept["spec"]["podSets"][0]["count"], kept["spec"]["podSets"][0]["minCount"]) == (10, 7)

            await kc.patch(CLUSTER_QUEUES, q.cq, {"spec": {"stopPolicy": "None"}})
            again = await eventually(lambda: _admitted(kc, q.ns, probe),
                                     what="the probe admitted at its minCount")
            assert _granted(again) == 7
            await eventually(lambda: running(kc, q.ns, "er"), what="the Job started on the probe")
            assert (await get(kc, "Job", "er", q.ns))["spec"]["parallelism"] == 10, "its parallelism kept"

            async def next_probe() -> str | None:
                fresh = await _names(kc, q.ns) - {first, partial, probe}
                return next(iter(fresh)) if len(fresh) == 1 else None

            rest = await eventually(next_probe, what="a probe for the rest")
            await eventually(lambda: _pending(kc, q.ns, rest), what="the probe for the rest waiting")
            rest_wl = await get(kc, "Workload", rest, q.ns)
            assert rest_wl["metadata"]["annotations"][REPLACES] == f"{q.ns}/{probe}"
            assert rest_wl["metadata"]["annotations"][SLICE_NAME] == first
            assert (rest_wl["spec"]["podSets"][0]["count"],
                    rest_wl["spec"]["podSets"][0]["minCount"]) == (10, 7)
            assert await _admitted(kc, q.ns, probe) is not None, "the probe runs on"
            assert not await _finished_out_of_sync(kc, q.ns, probe)
            assert await _names(kc, q.ns) == {first, partial, probe, rest}
