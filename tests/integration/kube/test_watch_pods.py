"""What the watcher puts in the log of Pods and Nodes, against the real apiserver (see connectors.k8s.trim).

* pods nobody needs (unbound, of no Kueue workload) never reach the log; a bound pod does, trimmed;
* an update that changes nothing the log keeps (a condition, a foreign annotation) is not appended;
* a pod that fails leaves the watch's field selector: the log records it as deleted;
* a Node heartbeat that changes only what is trimmed is not appended; a readiness change is.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import pytest
from kubehelp import connect, create, eventually, namespace

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import schema as ev
from events.log import MemoryLog

pytestmark = pytest.mark.kube
PODS, NODES = BY_KIND["Pod"], BY_KIND["Node"]


def _pod(ns: str, name: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


async def _events(log: MemoryLog, key: str) -> list[ev.AnyEvent]:
    return [r.event async for r in log.read() if r.event.key == key]


@pytest.mark.asyncio
async def test_pods_and_nodes_in_the_log_are_trimmed_and_quiet(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "pods")
        node = f"node-{secrets.token_hex(3)}"
        await create(kc, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"r": "1"}}})
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        watcher = Watcher(kc, journal.mirror, journal.append, kinds=("Pod", "Node"), timeout_seconds=30)
        task = asyncio.create_task(watcher.run())
        try:
            await asyncio.wait_for(watcher.wait_synced(), 30)
            await create(kc, _pod(ns, "stray"))
            await create(kc, _pod(ns, "mine", annotations={"kueue.x-k8s.io/workload": "wl", "big": "x" * 1000},
                                  labels={"app": "x", "kueue.x-k8s.io/podset": "main"}))
            await kc.request("POST", PODS.object_path("mine", ns, "binding"), body={
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "mine"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
            state = journal.mirror.state
            await eventually(lambda: state.pods.get(f"{ns}/mine") and state.pods[f"{ns}/mine"].spec.node_name,
                             what="the bound pod in the log")
            kept = state.pods[f"{ns}/mine"]
            assert kept.metadata.annotations == {"kueue.x-k8s.io/workload": "wl"}
            assert kept.metadata.labels == {"kueue.x-k8s.io/podset": "main"}
            assert kept.spec.containers[0].image == "" and kept.spec.containers[0].resources.requests
            before = len(await _events(log, f"{ns}/mine"))

            # nothing the log keeps changes: not appended
            await kc.patch(PODS, "mine", {"metadata": {"annotations": {"other": "y"}}}, ns)
            await kc.patch(PODS, "mine", {"status": {"conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                ns, subresource="status")
            await eventually(lambda: watcher.stats.unchanged >= 2, what="two unchanged updates seen")
            # a change it keeps, then the pod fails: out of the selection, deleted in the log
            await kc.patch(PODS, "mine", {"status": {"phase": "Running"}}, ns, subresource="status")
            await kc.patch(PODS, "mine", {"status": {"phase": "Failed"}}, ns, subresource="status")
            await eventually(lambda: f"{ns}/mine" not in state.pods, what="the failed pod gone from the log")
            after = await _events(log, f"{ns}/mine")
            assert [type(e).__name__ for e in after[before:]] == ["ObjectUpserted", "ObjectDeleted"]
            assert not await _events(log, f"{ns}/stray"), "an unbound pod of no workload is not needed"

            # a Node: an annotation rewrite is quiet, readiness is not
            await kc.patch(NODES, node, {"metadata": {"annotations": {"agent": "1"}}})
            await kc.patch(NODES, node, {"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                subresource="status")
            await eventually(lambda: state.nodes.get(node) and state.nodes[node].status.conditions,
                             what="the Ready node in the log")
            assert [type(e).__name__ for e in await _events(log, node)] == ["ObjectUpserted", "ObjectUpserted"]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(Exception):
                await kc.delete(NODES, node)
