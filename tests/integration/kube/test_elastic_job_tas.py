"""An elastic batch/v1 Job under topology-aware scheduling scaled up against the real apiserver
(``ElasticJobsViaWorkloadSlicesWithTAS`` on): the pods the scale-up adds are ungated by topology too.

The Job (``podset-preferred-topology`` on hostname, 1-cpu nodes) starts on its first slice, two pods on two nodes.
Its parallelism raised to 4, the new slice is admitted with a placement built around the old one (the two nodes
kept, two more added) and the old slice finished. The pods the job controller then adds (the test plays it, from
the Job's template, which still names the first slice in ``kueue.x-k8s.io/workload`` and the chain in
``kueue.x-k8s.io/workload-slice-name``) are counted as the new slice's with the running two, as Kueue's TAS ungater
lists a slice's pods by the chain's name: only they are ungated, onto the two nodes the running pods leave free.
There is no scheduler or kubelet: the test creates the Nodes and the Pods.
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
    job,
    job_pod,
    kueue_es,
    queues,
    ready_node,
    running,
    scheduling_gates,
)

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import JOBS
from connectors.k8s.workload_slices import slice_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
KUEUE = "kueue.x-k8s.io/v1beta2"
HOSTNAME = "kubernetes.io/hostname"
ELASTIC, TOPOLOGY = "kueue.x-k8s.io/elastic-job", "kueue.x-k8s.io/topology"
WAIT = 60.0
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "featureGates": {"ElasticJobsViaWorkloadSlicesWithTAS": True}})


async def _hosts(kc, ns: str, *pods: str) -> list[str] | None:
    """Each pod's node, once none of them is gated any more."""
    found = [await get(kc, "Pod", p, ns) for p in pods]
    if any(scheduling_gates(p) for p in found):
        return None
    return [p["spec"]["nodeSelector"][HOSTNAME] for p in found]


def _admitted(wl: dict[str, Any]) -> bool:
    conditions = (wl.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


@pytest.mark.asyncio
async def test_the_pods_a_scale_up_adds_are_ungated_onto_the_domains_the_running_ones_leave(
        kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    pool, topo = f"eltas-{sfx}", f"topo-{sfx}"
    nodes = [f"{sfx}-n{i}" for i in range(1, 6)]
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        for n in nodes:
            await ready_node(kc, n, {HOSTNAME: n, "pool": pool})
        await create(kc, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": topo},
                          "spec": {"levels": [{"nodeLabel": HOSTNAME}]}})
        q = await queues(kc, "eltas", {"cpu": 5}, sfx=sfx, flavor_labels={"pool": pool},
                         flavor_spec={"topologyName": topo})
        async with kueue_es(kc, tmp_path / "log", config=CONFIG):
            doc = job(q.ns, "el", "user-queue", parallelism=2)
            doc["metadata"]["annotations"] = {ELASTIC: "true"}
            doc["spec"]["template"]["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-preferred-topology": HOSTNAME}
            doc["spec"]["template"]["spec"]["schedulingGates"] = [{"name": ELASTIC}]  # as Kueue's webhook gates it
            del doc["spec"]["completions"]
            created = await create(kc, doc)
            uid = created["metadata"]["uid"]
            first = slice_name("Job", "batch", "el", uid, created["metadata"]["generation"])
            await eventually(lambda: running(kc, q.ns, "el"), WAIT, what="the Job started on its first slice")
            for i in range(2):
                await job_pod(kc, q.ns, "el", f"el-{i}")
            await kc.patch(JOBS, "el", {"status": {"active": 2}}, q.ns, subresource="status")
            old_hosts = await eventually(lambda: _hosts(kc, q.ns, "el-0", "el-1"), WAIT,
                                         what="the first slice's pods ungated")
            assert len(set(old_hosts)) == 2 and set(old_hosts) <= set(nodes)

            scaled = msgspec.json.decode(await kc.patch(JOBS, "el", {"spec": {"parallelism": 4}}, q.ns))
            second = slice_name("Job", "batch", "el", uid, scaled["metadata"]["generation"])

            async def admitted() -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):  # not made yet
                    wl = await get(kc, "Workload", second, q.ns)
                    return wl if _admitted(wl) else None
                return None

            wl = await eventually(admitted, WAIT, what="the new slice admitted")
            (psa,) = wl["status"]["admission"]["podSetAssignments"]
            assert psa["count"] == 4

            async def replaced() -> bool:
                conditions = (await get(kc, "Workload", first, q.ns)).get("status", {}).get("conditions") or []
                return any(c["type"] == "Finished" and c["reason"] == "WorkloadSliceReplaced" for c in conditions)

            await eventually(replaced, WAIT, what="the old slice finished, replaced")
            template = (await get(kc, "Job", "el", q.ns))["spec"]["template"]["metadata"]["annotations"]
            assert template["kueue.x-k8s.io/workload"] == first, "the Job runs on, its template naming the first slice"
            for i in range(2, 4):
                await job_pod(kc, q.ns, "el", f"el-{i}")
            await kc.patch(JOBS, "el", {"status": {"active": 4}}, q.ns, subresource="status")
            new_hosts = await eventually(lambda: _hosts(kc, q.ns, "el-2", "el-3"), WAIT,
                                         what="the added pods ungated by topology")
            assert len(set(new_hosts)) == 2 and not set(new_hosts) & set(old_hosts), \
                "one per node, onto the nodes the running pods leave free"
            assert await _hosts(kc, q.ns, "el-0", "el-1") == old_hosts, "the running pods untouched"
