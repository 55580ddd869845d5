"""The status writer and Kueue's Workload webhook rule on MultiKueue's ``status.clusterName`` (Kueue #7278), against
the real apiserver calling kueue-es's validating webhook: a writer behind the log (the nomination and the
assignment both decided before it wrote either) gets clusterName onto the Workload, nominating the worker first; and
the apiserver's refusal of a clusterName not nominated is a 403 the writer takes for the status refused.

The webhook is registered with an objectSelector on this test's label, so other tests sharing the cluster never
reach it.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import KUEUE, cluster_queue, connect, create, queues, validating_webhooks

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.writer import StatusWriter, _refusal
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

pytestmark = pytest.mark.kube
LABEL = "kueue-es-writer-cluster-name-test"
WORKLOADS = BY_KIND["Workload"]


def _workload(ns: str, name: str, sfx: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "labels": {LABEL: sfx}},
            "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


@pytest.mark.asyncio
async def test_a_writer_behind_the_log_nominates_before_it_sets_the_cluster_name(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, fl, cq, _ = await queues(kc, "mkwriter", {"cpu": 4}, sfx=sfx)
        probe = cluster_queue(f"probe-{sfx}", {fl: {"cpu": 1}}, queueingStrategy="Sometimes")
        probe["metadata"]["labels"] = {LABEL: sfx}
        async with validating_webhooks(kc, tmp_path / "certs", f"kueue-es-mkwriter-{sfx}",
                                       {"matchLabels": {LABEL: sfx}}, probe, {}):
            # --- the apiserver's refusal: a 403 the writer reads as the status refused ----------------------------
            await create(kc, _workload(ns, "direct", sfx))
            with pytest.raises(Forbidden) as refused:
                await kc.patch(WORKLOADS, "direct", {"status": {"clusterName": "worker2"}}, ns, subresource="status")
            assert 'admission webhook "vworkload.kb.io" denied the request' in str(refused.value)
            assert "when setting clusterName it must be one of the nominatedClusterNames" in str(refused.value)
            assert _refusal(refused.value)

            # --- the log holds reservation, nomination and assignment; the Workload shows none of them ------------
            shown = msgspec.convert(await create(kc, _workload(ns, "wl", sfx)), o.Workload)
            key, uid = shown.key, shown.metadata.uid
            admission = o.Admission(cluster_queue=cq, pod_set_assignments=[
                o.PodSetAssignment(name="main", flavors={"cpu": fl}, resource_usage={"cpu": "1"}, count=1)])
            base = {"key": key, "uid": uid, "input": 0}
            journal = LocalJournal(MemoryLog(), Mirror())
            await journal.append([ev.ObjectUpserted(time=1, key=key, uid=uid, obj=shown),
                                  ev.QuotaReserved(time=2, cycle=1, admission=admission, **base),
                                  ev.ClustersNominated(time=3, cycle=2, clusters=["worker1", "worker2"], **base),
                                  ev.WorkerClusterAssigned(time=4, cycle=3, cluster="worker2", **base)])
            writer = StatusWriter(kc, journal)
            await writer.sync(key)
            status = msgspec.json.decode(await kc.get(WORKLOADS, "wl", ns))["status"]
            assert status["clusterName"] == "worker2" and not status.get("nominatedClusterNames")
            assert status["admission"]["clusterQueue"] == cq
            outcomes = [type(r.event).__name__ async for r in journal.log.read()
                        if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]
            assert outcomes == ["DecisionApplied"] * 3
            assert (writer.stats.writes, writer.stats.errors) == (2, 0)
