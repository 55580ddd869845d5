"""Kueue's ``manageJobsWithoutQueueName`` against the real apiserver (connector only, no webhook).

With the option on, a Job created unsuspended without a queue name in a managed namespace is suspended after
the fact and given a Workload with no ``queueName``, which stays pending as Kueue shows it
(``QuotaReserved=False`` ``Misconfigured`` "LocalQueue  doesn't exist"); once the suspended Job is labelled with
a queue, that same Workload moves there, is admitted and the Job started.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues, running

from connectors.k8s import crds
from connectors.k8s.jobs import JOBS, workload_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube


def _conditions(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}


@pytest.mark.asyncio
async def test_a_job_without_a_queue_waits_in_none_until_labelled(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "no-queue", {"cpu": 2})
        # only this test's namespace: the session's other tests create Jobs without a queue name too
        config = load_config({"manageJobsWithoutQueueName": True, "managedJobsNamespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": q.ns}}})
        async with kueue_es(kc, tmp_path / "log", config=config):
            body = job(q.ns, "j", "", suspend=False)
            del body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
            uid = (await create(kc, body))["metadata"]["uid"]
            wl_name = workload_name("j", uid)

            async def pending() -> dict[str, Any] | None:
                try:
                    wl = await get(kc, "Workload", wl_name, q.ns)
                except Exception:  # noqa: BLE001 - not there yet
                    return None
                reserved = _conditions(wl).get("QuotaReserved")
                return wl if reserved is not None and reserved["status"] == "False" else None

            wl = await eventually(pending, what="the Workload pending in no queue")
            assert "queueName" not in wl["spec"]
            reserved = _conditions(wl)["QuotaReserved"]
            assert (reserved["reason"], reserved["message"]) == ("Misconfigured", "LocalQueue  doesn't exist")
            assert not await running(kc, q.ns, "j"), "suspended after the fact"

            await kc.patch(JOBS, "j", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}}, q.ns)
            await eventually(lambda: running(kc, q.ns, "j"), what="the Job admitted through its new queue")
            admitted = await get(kc, "Workload", wl_name, q.ns)
            assert admitted["spec"]["queueName"] == "user-queue"
            assert admitted["status"]["admission"]["clusterQueue"] == q.cq
            assert admitted["metadata"]["uid"] == wl["metadata"]["uid"], "the same Workload, moved"
