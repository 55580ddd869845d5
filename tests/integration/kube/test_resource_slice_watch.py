"""On a real apiserver: the connector watches ResourceSlices (resource.k8s.io/v1, cluster-scoped) into the log with
what Kueue reads of them (driver, pool, node, devices with their attributes and capacities), and their deletion."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from kubehelp import connect, create, eventually

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

pytestmark = pytest.mark.kube

SLICE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node1-gpus"},
    "spec": {"driver": "gpu.example.com", "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
             "nodeName": "node1",
             "devices": [{"name": "gpu-0", "attributes": {"profile": {"string": "80gb"}},
                          "capacity": {"memory": {"value": "80Gi"}}}]},
}


async def _events(log: MemoryLog) -> list[ev.ObjectUpserted | ev.ObjectDeleted]:
    return [r.event async for r in log.read()
            if isinstance(r.event, ev.ObjectUpserted | ev.ObjectDeleted) and r.event.key == "node1-gpus"]


@pytest.mark.asyncio
async def test_resource_slices_are_watched_into_the_log(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        watcher = Watcher(kc, journal.mirror, journal.append, kinds=("ResourceSlice",), timeout_seconds=30,
                          backoff_s=0.2)
        task = asyncio.create_task(watcher.run())
        try:
            await asyncio.wait_for(watcher.wait_synced(), 30)
            await create(kc, SLICE)

            async def upserted() -> o.ResourceSlice | None:
                found = [e.obj for e in await _events(log) if isinstance(e, ev.ObjectUpserted)]
                return found[-1] if found and isinstance(found[-1], o.ResourceSlice) else None

            rs = await eventually(upserted, what="the ResourceSlice in the log")
            assert (rs.spec.driver, rs.spec.pool.name, rs.spec.node_name) == ("gpu.example.com", "node1", "node1")
            (device,) = rs.spec.devices
            assert device.attributes["profile"].string == "80gb"
            assert device.capacity["memory"].value == "80Gi"
            await kc.delete(BY_KIND["ResourceSlice"], "node1-gpus")

            async def deleted() -> bool:
                return any(isinstance(e, ev.ObjectDeleted) for e in await _events(log))

            await eventually(deleted, what="the ResourceSlice's deletion in the log")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
