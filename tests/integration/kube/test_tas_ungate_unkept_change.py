"""A gated TAS pod changed in a way the log does not keep is still ungated, against the real apiserver.

The log keeps only part of a pod (:mod:`connectors.k8s.trim`) and the watch does not append an update that changes
none of it, so a label someone adds to a gated pod leaves the log at the pod's older resourceVersion for good. The
ungater, which plans from the log, must still ungate that pod when its turn comes (review F2 of session 35: it
patched on the log's version only, met 409, and never looked again).

The Job (one pod, hostname topology) runs; the job controller (the test: there is none here) made its pod, which
the ungater placed; that pod is being replaced: the replacement waits gated while the first still holds the
domain's only slot, and meanwhile someone labels it ``team=a``. When the first pod is gone, the replacement is
ungated onto the node of the assignment.
"""

from __future__ import annotations

import secrets

import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    job,
    job_pod,
    kueue_es,
    queues,
    ready_node,
    running,
    scheduling_gates,
)

from connectors.k8s import crds
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube
KUEUE = "kueue.x-k8s.io/v1beta2"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY = "kueue.x-k8s.io/topology"
WAIT = 60.0
PODS = BY_KIND["Pod"]


async def _host(kc, ns: str, pod: str) -> str | None:
    """The pod's node once it is no longer gated by topology."""
    found = await get(kc, "Pod", pod, ns)
    return None if TOPOLOGY in scheduling_gates(found) else found["spec"]["nodeSelector"][HOSTNAME]


@pytest.mark.asyncio
async def test_a_replacement_pod_labelled_while_it_waits_gated_is_ungated_when_the_slot_frees(
        kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    pool, topo = f"unkept-{sfx}", f"topo-{sfx}"
    nodes = [f"{sfx}-n1", f"{sfx}-n2"]
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        for n in nodes:
            await ready_node(kc, n, {HOSTNAME: n, "pool": pool})
        await create(kc, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": topo},
                          "spec": {"levels": [{"nodeLabel": HOSTNAME}]}})
        q = await queues(kc, "unkept", {"cpu": 1}, sfx=sfx, flavor_labels={"pool": pool},
                         flavor_spec={"topologyName": topo})
        async with kueue_es(kc, tmp_path / "log") as (_, journal):
            doc = job(q.ns, "j", "user-queue")
            doc["spec"]["template"]["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-required-topology": HOSTNAME}
            await create(kc, doc)
            await eventually(lambda: running(kc, q.ns, "j"), WAIT, what="the Job admitted and started")
            await job_pod(kc, q.ns, "j", "j-a")
            host = await eventually(lambda: _host(kc, q.ns, "j-a"), WAIT, what="the first pod ungated")
            assert host in nodes

            # the replacement: gated, the slot still held by the first pod; in the log as it was created
            b = await job_pod(kc, q.ns, "j", "j-b")
            assert TOPOLOGY in scheduling_gates(b)
            pods = journal.mirror.state.pods
            await eventually(lambda: f"{q.ns}/j-b" in pods, WAIT, what="the replacement in the log")
            created_rv = b["metadata"]["resourceVersion"]

            # someone labels it: nothing the log keeps changes; a pod created after it, in the same watch, shows
            # that the watch went past the label's version (and dropped it)
            labelled = await kc.patch(PODS, "j-b", {"metadata": {"labels": {"team": "a"}}}, q.ns)
            assert b"team" in labelled
            await create(kc, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "marker", "namespace": q.ns, "annotations": {"kueue.x-k8s.io/workload": "none"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
            await eventually(lambda: f"{q.ns}/marker" in pods, WAIT, what="the watch past the label")
            assert pods[f"{q.ns}/j-b"].metadata.resource_version == created_rv, "the label's version is not kept"
            assert await _host(kc, q.ns, "j-b") is None, "no free slot yet"

            # the first pod goes (never bound: deleted at once): its slot is the replacement's
            await kc.delete(PODS, "j-a", q.ns)
            assert await eventually(lambda: _host(kc, q.ns, "j-b"), WAIT, what="the labelled replacement ungated") \
                == host
            assert (await get(kc, "Pod", "j-b", q.ns))["metadata"]["labels"]["team"] == "a"
