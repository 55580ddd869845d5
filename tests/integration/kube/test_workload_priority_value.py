"""A Workload's ``spec.priority`` follows its WorkloadPriorityClass's value against the real apiserver, as in
Kueue's workload_controller_test "changing the priority value of PriorityClass changes the priority of the
workload" (v0.20's WorkloadPriorityClass controller, #8442)."""

from __future__ import annotations

import pytest
from kubehelp import KUEUE, connect, create, eventually, get, kueue_es, namespace, priority_class

from connectors.k8s import crds
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube


@pytest.mark.asyncio
async def test_a_class_value_change_reaches_the_workload(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "wpc-value")
        wpc = f"wpc-{ns}"
        await create(kc, priority_class(wpc, 200))
        await create(kc, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "wl", "namespace": ns},
                          "spec": {"queueName": "lq", "priority": 200,
                                   "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                        "name": wpc},
                                   "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                                       {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
        async with kueue_es(kc, tmp_path / "log"):
            await kc.patch(BY_KIND["WorkloadPriorityClass"], wpc, {"value": 150})

            async def repriced() -> bool:
                return (await get(kc, "Workload", "wl", ns))["spec"].get("priority") == 150

            await eventually(repriced, what="spec.priority following the class's new value")
