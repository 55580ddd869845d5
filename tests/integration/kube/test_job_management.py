"""Which Jobs are managed, a started Job's queue labels and a deleted Job's Workload, against the real apiserver.

A Job in ``kube-system`` is left alone even with a queue name (Kueue's default ``managedJobsNamespaceSelector``).
``AssignQueueLabelsForPods`` (on by default) labels the started Job's pods with their LocalQueue and ClusterQueue;
``FinishOrphanedWorkloads`` (on by default) finishes a Workload whose Job is gone (``OwnerNotFound``) before it is
deleted. With both off, the pods get only the pod-set label and the orphan is deleted without finishing.
"""

from __future__ import annotations

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, local_queue, queues

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import JOBS, workload_name
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import DEFAULT, load_config

pytestmark = pytest.mark.kube
GATES_OFF = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                         "featureGates": {"AssignQueueLabelsForPods": False, "FinishOrphanedWorkloads": False}})


async def _running(kc, ns: str, name: str) -> dict | None:
    j = await get(kc, "Job", name, ns)
    return None if j["spec"].get("suspend") else j


async def _gone(kc, name: str, ns: str) -> bool:
    try:
        await get(kc, "Workload", name, ns)
    except NotFound:
        return True
    return False


@pytest.mark.asyncio
@pytest.mark.parametrize("gates_on", [True, False], ids=["default-gates", "gates-off"])
async def test_queue_labels_and_the_orphan_of_a_deleted_job(kube_apiserver, tmp_path, gates_on: bool) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "orphan", {"cpu": 2})
        async with kueue_es(kc, tmp_path / "log", config=DEFAULT if gates_on else GATES_OFF) as (_, journal):
            j = await create(kc, job(q.ns, "j", "user-queue"))
            wl = workload_name("j", j["metadata"]["uid"])
            started = await eventually(lambda: _running(kc, q.ns, "j"), what="the Job to start")
            labels = started["spec"]["template"]["metadata"]["labels"]
            queue_labels = {k: v for k, v in labels.items() if k.endswith("-queue-name")}
            assert labels["kueue.x-k8s.io/podset"] == "main"
            assert queue_labels == ({"kueue.x-k8s.io/local-queue-name": "user-queue",
                                     "kueue.x-k8s.io/cluster-queue-name": q.cq} if gates_on else {})

            await kc.delete(JOBS, "j", q.ns)
            await eventually(lambda: _gone(kc, wl, q.ns), what="the orphaned Workload deleted")
            finished = [r.event for r in [r async for r in journal.log.read()]
                        if isinstance(r.event, ev.WorkloadFinished) and r.event.key == f"{q.ns}/{wl}"]
            if gates_on:
                assert [(f.reason, f.message) for f in finished] == [
                    ("OwnerNotFound", "The workload's owner no longer exists")]
            else:
                assert finished == []


@pytest.mark.asyncio
async def test_a_job_in_kube_system_is_not_managed(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "managed", {"cpu": 2})
        lq = f"lq-{q.sfx}"
        await create(kc, local_queue("kube-system", lq, q.cq))
        async with kueue_es(kc, tmp_path / "log") as (_, journal):
            await create(kc, job("kube-system", f"sys-{q.sfx}", lq))
            await create(kc, job(q.ns, "user", "user-queue"))
            await eventually(lambda: _running(kc, q.ns, "user"), what="the Job in a managed namespace to start")
            workloads = {r.event.key for r in [r async for r in journal.log.read()]
                         if isinstance(r.event, ev.ObjectUpserted) and isinstance(r.event.obj, o.Workload)}
            assert not [k for k in workloads if k.startswith("kube-system/")]
            assert (await get(kc, "Job", f"sys-{q.sfx}", "kube-system"))["spec"]["suspend"] is True
