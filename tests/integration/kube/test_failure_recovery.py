"""FailureRecoveryPolicy against the real apiserver (Kueue's ``pkg/controller/failurerecovery``): a pod that opted
in (``kueue.x-k8s.io/safe-to-forcefully-terminate: "true"``), stuck terminating on a node tainted
``node.kubernetes.io/unreachable``, is forced to ``Failed`` with the condition ``KueueFailureRecovery`` once the
grace period after its ``deletionTimestamp`` has passed (shortened here from Kueue's minute). The test plays the
node lifecycle controller (taints, a Ready condition gone Unknown); no kubelet runs, so a bound pod being deleted
stays terminating. Left alone: a pod that did not opt in, one on a reachable node, and every pod with the gate off
(its default). A node that becomes unreachable only after the grace period brings its pod in then.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, kueue_es, namespace

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import DEFAULT, load_config

pytestmark = pytest.mark.kube
NODES, PODS = BY_KIND["Node"], BY_KIND["Pod"]
OPT_IN = {"kueue.x-k8s.io/safe-to-forcefully-terminate": "true"}
UNREACHABLE = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
GATE_ON = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                       "featureGates": {"FailureRecoveryPolicy": True}})
GRACE_MS = 2_000


async def _node(kc: KubeClient, name: str, *, unreachable: bool) -> None:
    await create(kc, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    await _set_unreachable(kc, name, unreachable)


async def _set_unreachable(kc: KubeClient, name: str, unreachable: bool) -> None:
    """What the node lifecycle controller does once the kubelet stops reporting: Ready goes Unknown and the
    ``unreachable`` taint is put on the node."""
    await kc.patch(NODES, name, {"spec": {"taints": UNREACHABLE if unreachable else None}})
    cond = {"type": "Ready", "status": "Unknown" if unreachable else "True",
            "reason": "NodeStatusUnknown" if unreachable else "KubeletReady", "message": "test"}
    await kc.patch(NODES, name, {"status": {"conditions": [cond]}}, subresource="status")


async def _pod(kc: KubeClient, ns: str, name: str, node: str, annotations: dict[str, str]) -> None:
    """A pod bound to ``node`` and then deleted: with no kubelet to confirm, it stays terminating (its
    deletionTimestamp one second ahead, its deletionGracePeriodSeconds 1)."""
    await create(kc, {"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": ns, "annotations": annotations},
                      "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                               "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    await kc.delete(PODS, name, ns)


async def _phase(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    pod = await get(kc, "Pod", name, ns)
    assert pod["metadata"].get("deletionTimestamp"), "the pod is still terminating"
    return pod


async def _force_delete(kc: KubeClient, ns: str, name: str) -> None:
    try:
        await kc.request("DELETE", PODS.object_path(name, ns),
                         body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    except NotFound:
        pass


@pytest.mark.asyncio
@pytest.mark.parametrize("gate_on", [True, False], ids=["gate-on", "gate-off"])
async def test_a_pod_stuck_terminating_on_an_unreachable_node_is_failed(kube_apiserver, tmp_path,
                                                                          gate_on: bool) -> None:
    sfx = secrets.token_hex(3)
    down, up, later = f"fr-down-{sfx}", f"fr-up-{sfx}", f"fr-later-{sfx}"
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "failure-recovery")
        for name, unreachable in ((down, True), (up, False), (later, False)):
            await _node(kc, name, unreachable=unreachable)
        pods = {"stuck": (down, OPT_IN), "not-opted-in": (down, {}), "reachable": (up, OPT_IN),
                "unreachable-later": (later, OPT_IN)}
        try:
            async with kueue_es(kc, tmp_path / "log", config=GATE_ON if gate_on else DEFAULT,
                                forceful_termination_grace_ms=GRACE_MS):
                for name, (node, annotations) in pods.items():
                    await _pod(kc, ns, name, node, annotations)
                first = await _phase(kc, ns, "stuck")
                assert first["status"]["phase"] == "Pending"
                assert first["metadata"]["deletionGracePeriodSeconds"] == 1

                async def failed(name: str) -> dict[str, Any] | None:
                    pod = await _phase(kc, ns, name)
                    return pod if pod["status"]["phase"] == "Failed" else None

                if gate_on:
                    pod = await eventually(lambda: failed("stuck"), what="the stuck pod to be Failed")
                    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "KueueFailureRecovery")
                    assert condition["status"] == "True"
                    assert condition["reason"] == "KueueForcefullyTerminated"
                    # Kueue adds deletionGracePeriodSeconds (1) to the grace period as nanoseconds
                    assert condition["message"] == (
                        f"Pod forcefully terminated after 2.000000001s grace period due to unreachable node "
                        f"`{down}` (triggered by `kueue.x-k8s.io/safe-to-forcefully-terminate` annotation)")
                else:
                    await asyncio.sleep(GRACE_MS / 1000 + 3)
                for name in ("not-opted-in", "reachable", "unreachable-later") + (() if gate_on else ("stuck",)):
                    assert (await _phase(kc, ns, name))["status"]["phase"] == "Pending", name
                await _set_unreachable(kc, later, True)
                if gate_on:
                    await eventually(lambda: failed("unreachable-later"),
                                     what="the pod of the node that became unreachable to be Failed")
                else:
                    await asyncio.sleep(2)
                    assert (await _phase(kc, ns, "unreachable-later"))["status"]["phase"] == "Pending"
                assert (await _phase(kc, ns, "reachable"))["status"]["phase"] == "Pending"
        finally:
            for name in pods:
                await _force_delete(kc, ns, name)
            for name in (down, up, later):
                try:
                    await kc.delete(NODES, name)
                except NotFound:
                    pass
