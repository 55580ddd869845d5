"""``status.resourceRequests`` on a real apiserver, written by the connector as Kueue's scheduler writes it.

A Workload that waits for quota shows, in the same status write as its QuotaReserved=False, what each of its pod
sets asks for in all, in Kueue's quantity format; the write that reserves quota for it removes the field. A
Workload the workload controller holds back (its LocalQueue does not exist) shows none, like one admitted at its
first attempt.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubehelp import KUEUE, connect, create, eventually, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube
WORKLOADS = BY_KIND["Workload"]


def _pod_set(name: str, count: int, requests: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "count": count, "template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": requests}}]}}}


def _workload(ns: str, name: str, queue: str, *pod_sets: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": queue, "podSets": list(pod_sets)}}


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


async def _with_condition(kc, ns: str, name: str, status: str) -> dict[str, Any] | None:
    """The Workload once its QuotaReserved condition has ``status``, else None."""
    obj = await get(kc, "Workload", name, ns)
    c = _cond(obj, "QuotaReserved")
    return obj if c is not None and c["status"] == status else None


@pytest.mark.asyncio
async def test_a_waiting_workload_shows_its_requests_until_it_is_admitted(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, cq, _ = await queues(kc, "requests", {"cpu": 4, "memory": "8Gi"})

        async with kueue_es(kc, tmp_path / "log"):
            await create(kc, _workload(ns, "holder", "user-queue", _pod_set("main", 1, {"cpu": "2"})))
            holder = await eventually(lambda: _with_condition(kc, ns, "holder", "True"), what="holder admitted")
            assert "resourceRequests" not in holder["status"], "admitted at its first attempt: nothing to show"

            await create(kc, _workload(ns, "waiting", "user-queue",
                                       _pod_set("driver", 1, {"cpu": "500m", "memory": "1G"}),
                                       _pod_set("workers", 3, {"cpu": "1", "memory": "512Mi"})))
            waiting = await eventually(lambda: _with_condition(kc, ns, "waiting", "False"), what="waiting to wait")
            # one write: whichever version shows the failed attempt's condition shows its requests too
            assert _cond(waiting, "QuotaReserved")["reason"] == "WaitingForQuota"
            assert waiting["status"]["resourceRequests"] == [
                {"name": "driver", "resources": {"cpu": "500m", "memory": "1G"}},
                {"name": "workers", "resources": {"cpu": "3", "memory": "1536Mi"}},
            ]

            await create(kc, _workload(ns, "lost", "nowhere", _pod_set("main", 2, {"cpu": "1"})))
            lost = await eventually(lambda: _with_condition(kc, ns, "lost", "False"), what="lost to be held back")
            assert _cond(lost, "QuotaReserved")["reason"] == "Misconfigured"
            assert "resourceRequests" not in lost["status"], "the workload controller's condition comes alone"

            await kc.delete(WORKLOADS, "holder", ns)
            admitted = await eventually(lambda: _with_condition(kc, ns, "waiting", "True"), what="waiting admitted")
            assert admitted["status"]["admission"]["clusterQueue"] == cq
            assert "resourceRequests" not in admitted["status"], "the admission's write removes them"
