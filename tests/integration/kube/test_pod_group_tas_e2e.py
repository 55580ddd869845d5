"""Topology-aware scheduling of a pod group against the real apiserver: kueue-es's Pod webhook (registered for this
test's namespace only) gates each Pod for admission and topology and copies its group index; the group's
Workload asks for one rack (``podset-required-topology``), is admitted onto the only rack with room for all
three, and the ungater lifts each Pod's topology gate onto a node of that rack, one Pod per node, by index.

There is no scheduler or kubelet: the test creates the Nodes (labels, allocatable, Ready) and the Pods.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    kueue_es,
    pod_webhooks,
    queues,
    ready_node,
    scheduling_gates,
)

from connectors.k8s import crds
from connectors.k8s.pod_webhook import PodDefaulting
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
KUEUE = "kueue.x-k8s.io/v1beta2"
RACK, HOSTNAME = "cloud.example.com/rack", "kubernetes.io/hostname"
ADMISSION, TOPOLOGY = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"
INDEX = "kueue.x-k8s.io/pod-group-pod-index"
WAIT = 90.0
PODS, NAMESPACES = BY_KIND["Pod"], BY_KIND["Namespace"]


@contextlib.asynccontextmanager
async def _pod_webhook(kc, tmp_path, sfx: str, config):
    """The Pod webhooks (:func:`kubehelp.pod_webhooks`) for the namespaces labelled ``kueue-es-pod-tas-test=<sfx>``."""
    async with pod_webhooks(kc, tmp_path / "certs", "kueue-es-pod-tas-test", sfx, config) as server:
        yield server


@pytest.mark.asyncio
async def test_a_pod_group_under_a_required_topology_is_ungated_onto_the_nodes_of_one_rack(
        kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    pool, topo = f"podtas-{sfx}", f"topo-{sfx}"
    racks = {"a": [f"{sfx}-a1", f"{sfx}-a2"], "b": [f"{sfx}-b1", f"{sfx}-b2", f"{sfx}-b3"]}
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod"]}})
    assert PodDefaulting.of(config).tas, "TopologyAwareScheduling is on by default"
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        for rack, names in racks.items():
            for n in names:
                await ready_node(kc, n, {RACK: f"{sfx}-rack-{rack}", HOSTNAME: n, "pool": pool})
        await create(kc, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": topo},
                          "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}})
        q = await queues(kc, "podtas", {"cpu": 5}, sfx=sfx, flavor_labels={"pool": pool},
                         flavor_spec={"topologyName": topo})
        await kc.patch(NAMESPACES, q.ns, {"metadata": {"labels": {"kueue-es-pod-tas-test": sfx}}})

        def member(name: str, index: int) -> dict[str, Any]:
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "namespace": q.ns,
                "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/pod-group-name": "trio",
                           "app/index": str(index)},
                "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3",
                                "kueue.x-k8s.io/pod-group-pod-index-label": "app/index",
                                "kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "10"],
                                         "resources": {"requests": {"cpu": "1"}}}]}}

        async with _pod_webhook(kc, tmp_path, sfx, config):
            async def effective() -> bool:  # the apiserver picks the configuration up asynchronously
                with contextlib.suppress(Exception):
                    out = await kc.request("POST", PODS.collection_path(q.ns), query=[("dryRun", "All")],
                                           body=member("probe", 0))
                    return ADMISSION in scheduling_gates(msgspec.json.decode(out))
                return False

            await eventually(effective, what="the pod webhook in effect")
            names = ["p-z", "p-x", "p-y"]  # index order differs from name order: ranks, not names, place them
            for i, name in enumerate(names):
                created = await create(kc, member(name, i))
                assert scheduling_gates(created) == [ADMISSION, TOPOLOGY]
                assert created["metadata"]["labels"][INDEX] == str(i)

            async with kueue_es(kc, tmp_path / "log", config=config):
                async def ungated() -> list[dict[str, Any]] | None:
                    pods = [await get(kc, "Pod", n, q.ns) for n in names]
                    return pods if not any(scheduling_gates(p) for p in pods) else None

                pods = await eventually(ungated, WAIT, what="every pod of the group ungated by topology")
                wl = await get(kc, "Workload", "trio", q.ns)
                (ps,) = wl["spec"]["podSets"]
                assert ps["topologyRequest"] == {"required": RACK, "podIndexLabel": INDEX}
                (psa,) = wl["status"]["admission"]["podSetAssignments"]
                assert psa["topologyAssignment"] is not None
                hosts = [p["spec"]["nodeSelector"][HOSTNAME] for p in pods]
                assert hosts == racks["b"], "the only rack with three free cpus, one pod per node in index order"
                for p in pods:
                    assert p["spec"]["nodeSelector"]["pool"] == pool
                    assert "kueue.x-k8s.io/tas" not in p["metadata"]["labels"], "Kueue set it until v0.14"
                    assert p["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "trio"
