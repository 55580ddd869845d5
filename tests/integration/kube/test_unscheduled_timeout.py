"""WaitForPodsReadyUnscheduledTimeout (alpha) on a real apiserver: a started Job's pod template names its Workload
(``kueue.x-k8s.io/workload``), the connector reads the Pods' ``PodScheduled`` condition, and the Workload shows
``PodsScheduled`` as Kueue's UnscheduledPodsTracker writes it. No kubelet nor job controller runs here: the test
plays the job controller (creates the Pod from the template) and kube-scheduler (binds it, which sets
PodScheduled=True). An unbound Pod gets its Workload evicted ``unscheduledTimeout`` after the admission
(``PodsReadyTimeout``, the 1h timeout far away); a bound one gets ``PodsScheduled=True`` and no eviction."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
PODS, NODES = BY_KIND["Pod"], BY_KIND["Node"]
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "waitForPodsReady": {"timeout": "1h", "unscheduledTimeout": "4s"},
                      "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True}})


def _cond(obj: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)
    return None if c is None else (c["status"], c["reason"], c.get("message", ""))


async def _started_pod(kc, ns: str, name: str, pods: int = 1) -> str:
    """Wait for the Job to be started and create its ``pods`` Pods from the template, as the job controller would;
    the Workload's name."""
    async def started() -> dict[str, Any] | None:
        j = await get(kc, "Job", name, ns)
        return j if not j["spec"].get("suspend") else None

    j = await eventually(started, what=f"the {name} Job to be started")
    tmpl = j["spec"]["template"]
    wl = workload_name(name, j["metadata"]["uid"])
    assert tmpl["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl  # the tracker links Pods by it
    for i in range(pods):
        await create(kc, {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"{name}-{i}", "namespace": ns, **tmpl["metadata"]},
                          "spec": tmpl["spec"]})
    return wl


async def _bind(kc, ns: str, pod: str, node: str) -> None:
    """Bind ``pod`` to ``node`` as kube-scheduler does (which sets PodScheduled=True)."""
    await kc.request("POST", PODS.object_path(pod, ns, "binding"), body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


async def _pods_scheduled(kc, ns: str, wl_name: str, status: str, what: str) -> dict[str, Any]:
    """The Workload once its PodsScheduled condition has ``status``."""
    async def shown() -> dict[str, Any] | None:
        wl = await get(kc, "Workload", wl_name, ns)
        return wl if (_cond(wl, "PodsScheduled") or ("",))[0] == status else None

    return await eventually(shown, what=what)


@contextlib.asynccontextmanager
async def _kueue_es_with_a_node(kube_apiserver: Any, tmp_path: Any, prefix: str,
                                config: Any) -> AsyncIterator[tuple[Any, str, str]]:
    """(client, namespace, node name): a namespace with queues, a Node (deleted after), kueue-es running."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, _, _, _ = await queues(kc, prefix, {"cpu": 4}, sfx=sfx)
        node = f"node-{sfx}"
        await create(kc, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        try:
            async with kueue_es(kc, tmp_path / "log", config=config, pods_ready_timeout="1h"):
                yield kc, ns, node
        finally:
            with contextlib.suppress(Exception):
                await kc.delete(NODES, node)


@pytest.mark.asyncio
async def test_unscheduled_pods_evict_at_the_unscheduled_timeout_and_bound_ones_do_not(kube_apiserver,
                                                                                       tmp_path) -> None:
    async with _kueue_es_with_a_node(kube_apiserver, tmp_path, "unsched", CONFIG) as (kc, ns, node):
        await create(kc, job(ns, "bound", "user-queue", cpu="1"))
        bound = await _started_pod(kc, ns, "bound")
        await _bind(kc, ns, "bound-0", node)
        wl = await _pods_scheduled(kc, ns, bound, "True", "PodsScheduled=True on the bound Workload")
        assert _cond(wl, "PodsScheduled") == (
            "True", "AllRequiredPodsScheduled", "All required pods were scheduled or succeeded")
        assert _cond(wl, "PodsReady")[:2] == ("False", "WaitForStart")

        await create(kc, job(ns, "stuck", "user-queue", cpu="1"))
        stuck = await _started_pod(kc, ns, "stuck")

        async def evicted() -> dict[str, Any] | None:
            wl = await get(kc, "Workload", stuck, ns)
            return wl if (_cond(wl, "Evicted") or ("",))[0] == "True" else None

        wl = await eventually(evicted, what="the stuck Workload evicted at the unscheduled timeout")
        assert _cond(wl, "Evicted") == ("True", "PodsReadyTimeout", f"Exceeded the PodsReady timeout {ns}/{stuck}")
        assert _cond(wl, "PodsScheduled") == (
            "False", "WaitForScheduling", "At least one required pod is not scheduled")
        wl = await get(kc, "Workload", bound, ns)
        assert _cond(wl, "Evicted") is None and _cond(wl, "PodsScheduled")[0] == "True"


PATIENT = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                       "waitForPodsReady": {"timeout": "1h", "unscheduledTimeout": "120s"},
                       "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True}})


@pytest.mark.asyncio
async def test_a_succeeded_pod_fills_its_slot_though_the_watch_leaves_terminal_pods_out(kube_apiserver,
                                                                                       tmp_path) -> None:
    """Kueue counts a Succeeded Pod as scheduled (it needs no replacement). The Pod watch selects non-terminal
    Pods only, so the first Pod's success reaches the connector as the Pod leaving the watch: it is read once and
    kept as succeeded (:mod:`connectors.k8s.succeeded_pods`), and once the second Pod is bound every slot is
    filled. Without that, the second Pod alone would leave the Workload waiting for the scheduling."""
    async with _kueue_es_with_a_node(kube_apiserver, tmp_path, "succeeded", PATIENT) as (kc, ns, node):
        await create(kc, job(ns, "pair", "user-queue", cpu="1", parallelism=2))
        wl_name = await _started_pod(kc, ns, "pair", pods=2)
        await _bind(kc, ns, "pair-0", node)
        await _pods_scheduled(kc, ns, wl_name, "False", "PodsScheduled=False while pair-1 is unbound")
        await kc.patch(PODS, "pair-0", {"status": {"phase": "Succeeded"}}, ns, subresource="status")
        await _bind(kc, ns, "pair-1", node)
        wl = await _pods_scheduled(kc, ns, wl_name, "True", "PodsScheduled=True: pair-0 succeeded, pair-1 bound")
        assert _cond(wl, "PodsScheduled") == (
            "True", "AllRequiredPodsScheduled", "All required pods were scheduled or succeeded")
        assert _cond(wl, "Evicted") is None
