"""The scheduler decides only once the connector has listed every kind, as Kueue starts only on synced caches.

Two Workloads wait for a ClusterQueue with room for one: ``low`` (no priority class, created first) and
``high`` (WorkloadPriorityClass of value 1000). The WorkloadPriorityClass's list is held back. With the gate,
nothing is decided while it is missing, and once it is listed ``high`` is admitted. Let decide early, the
scheduler orders both at priority 0 and admits the older ``low`` — the CI flake this gate removed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubehelp import KUEUE, connect, create, eventually, get, kueue_es, queues

from connectors.k8s import crds
from events import schema as ev

pytestmark = pytest.mark.kube


def _workload(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "lq", **spec, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36",
                                                          "resources": {"requests": {"cpu": "3"}}}]}}}]}}


def _reserved_in(wl: dict[str, Any]) -> str | None:
    return ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")


@pytest.mark.asyncio
@pytest.mark.parametrize("decide_before_synced", [False, True], ids=["gated", "ungated"])
async def test_no_decision_before_every_kind_is_listed(kube_apiserver, tmp_path, decide_before_synced) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, cq, sfx = await queues(kc, "sync", {"cpu": 3}, lq="lq")
        wpc = f"high-{sfx}"
        await create(kc, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": wpc},
                          "value": 1000})
        await create(kc, _workload(ns, "low"))
        await asyncio.sleep(1.1)  # creationTimestamp has whole seconds: "low" is strictly older
        await create(kc, _workload(ns, "high", priority=0, priorityClassRef={  # Kueue's CRD wants a priority with
            "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": wpc}))  # the ref: the class decides

        release = asyncio.Event()
        async with kueue_es(kc, tmp_path / "log", hold=("WorkloadPriorityClass",), release=release, synced=False,
                            decide_before_synced=decide_before_synced) as (connector, journal):
            state = journal.mirror.state
            keys = (f"{ns}/low", f"{ns}/high")
            await eventually(lambda: all(k in state.workloads for k in keys), what="both Workloads in the log")
            await asyncio.sleep(1.5)  # scheduling rounds, were the scheduler deciding
            assert not connector.ready
            decided = [r.event async for r in journal.log.read() if isinstance(r.event, ev.Decision)]
            if not decide_before_synced:
                assert decided == [], "nothing is decided while a kind is still to be listed"
            release.set()

            expected, other = ("low", "high") if decide_before_synced else ("high", "low")

            async def admitted() -> bool:
                return _reserved_in(await get(kc, "Workload", expected, ns)) == cq

            await eventually(admitted, 60, f"{expected} admitted")
            await asyncio.sleep(1.0)
            assert _reserved_in(await get(kc, "Workload", other, ns)) is None, "the queue has room for one"
