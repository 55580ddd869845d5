"""On a real apiserver: the connector watches ResourceClaims (resource.k8s.io/v1) into the log only while they hold
devices (``status.allocation``, what KueueDRADeviceFeasibility counts as taken), and their deletion."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from kubehelp import connect, create, eventually, namespace

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

pytestmark = pytest.mark.kube


def _claim(ns: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}


@pytest.mark.asyncio
async def test_resource_claims_are_watched_into_the_log_once_allocated(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "claims")
        key = f"{ns}/gpu"
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        watcher = Watcher(kc, journal.mirror, journal.append, kinds=("ResourceClaim",), timeout_seconds=30,
                          backoff_s=0.2)
        task = asyncio.create_task(watcher.run())

        async def events() -> list[ev.ObjectUpserted | ev.ObjectDeleted]:
            return [r.event async for r in log.read()
                    if isinstance(r.event, ev.ObjectUpserted | ev.ObjectDeleted) and r.event.key == key]

        try:
            await asyncio.wait_for(watcher.wait_synced(), 30)
            await create(kc, _claim(ns))
            await asyncio.sleep(1)
            assert await events() == [], "a claim holding no device is not in the log"
            allocation = {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-0"}]}}
            await kc.patch(BY_KIND["ResourceClaim"], "gpu", {"status": {"allocation": allocation}}, ns, "status")

            async def upserted() -> o.ResourceClaim | None:
                found = [e.obj for e in await events() if isinstance(e, ev.ObjectUpserted)]
                return found[-1] if found and isinstance(found[-1], o.ResourceClaim) else None

            claim = await eventually(upserted, what="the allocated ResourceClaim in the log")
            assert claim.held() == (("gpu.example.com", "node1", "gpu-0", False),)
            await kc.delete(BY_KIND["ResourceClaim"], "gpu", ns)

            async def deleted() -> bool:
                return any(isinstance(e, ev.ObjectDeleted) for e in await events())

            await eventually(deleted, what="the ResourceClaim's deletion in the log")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
