"""On a real apiserver: a namespace's LimitRange decides what Jobs that ask for nothing are counted as.

The connector watches LimitRanges and RuntimeClasses (with the RBAC the manifests grant) and the scheduler
counts each Workload's pod template as Kueue adjusts it in memory — the Workload and the Job are never written
with the defaults. With a defaultRequest of 2 cpu and a 3-cpu queue, the first Job that asks for nothing is
admitted with 2 cpu and the second waits for quota (with no LimitRange both would be admitted, at 0 cpu);
lowering the defaultRequest to 1 cpu re-counts the waiting one, which is then admitted with 1 cpu while the first
keeps what its admission holds.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube


def _job(ns: str, name: str) -> dict[str, Any]:
    """A suspended Job for ``user-queue`` whose container asks for no resources at all."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "10"]}]}}},
    }


def _limit_range(ns: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": ns},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": cpu}}]}}


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.mark.asyncio
async def test_a_limit_range_default_request_decides_admission(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, _, sfx = await queues(kc, "limits", {"cpu": 3})
        await create(kc, _limit_range(ns, "2"))
        async with kueue_es(kc, tmp_path / "log") as (_, journal):

            async def workload(job: dict[str, Any], want: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", workload_name(job["metadata"]["name"], job["metadata"]["uid"]), ns)
                    c = _cond(wl, "QuotaReserved")
                    if c is not None and (c["status"] == "True" if want == "admitted" else c["reason"] == want):
                        return wl
                return None

            def usage(wl: dict[str, Any]) -> dict[str, str]:
                return wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]

            first = await create(kc, _job(ns, "first"))
            wl = await eventually(lambda: workload(first, "admitted"), what="the first Job's Workload admitted")
            assert usage(wl) == {"cpu": "2"}
            assert not wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0].get("resources")  # not written

            second = await create(kc, _job(ns, "second"))
            wl = await eventually(lambda: workload(second, "WaitingForQuota"), what="the second Job waiting for quota")
            assert "insufficient unused quota for cpu in flavor" in _cond(wl, "QuotaReserved")["message"]

            await kc.patch(BY_KIND["LimitRange"], "defaults", _limit_range(ns, "1"), ns)
            wl = await eventually(lambda: workload(second, "admitted"), what="the second Job admitted at 1 cpu")
            assert usage(wl) == {"cpu": "1"}
            wl = await workload(first, "admitted")
            assert wl is not None and usage(wl) == {"cpu": "2"}  # admitted: keeps what its admission holds

            # RuntimeClasses reach the log too (cluster-scoped, node.k8s.io)
            rc = f"kata-{sfx}"
            await create(kc, {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": rc},
                              "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}})
            got = await eventually(lambda: journal.mirror.state.runtime_classes.get(rc),
                                   what="the RuntimeClass in the log")
            assert got.overhead is not None and got.overhead.pod_fixed == {"cpu": "250m"}
            assert journal.mirror.state.limit_summary(ns).container.default_request == (("cpu", "1"),)
