"""Kueue's RayJob webhooks against the real apiserver, with ``ray.io/rayjob`` among the frameworks.

The ray.io/v1 API is served from the minimal CRD of :func:`connectors.k8s.crds.rayjob_crd`; kueue-es's webhook
server answers ``mrayjob.kb.io`` and ``vrayjob.kb.io`` for this test's namespace only. A RayJob naming a queue
created with ``spec.suspend: false`` is stored suspended, so KubeRay would make no cluster before admission; one
that would keep its cluster after finishing is refused in Kueue's words, and one running may not drop its queue
name (``ValidateRayAndSparkJobUpdates``).
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, job, namespace, rayjob_webhooks

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.resources import RAYJOBS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"
LABEL = "kueue-es-rayjob-webhook-test"


def _rayjob(ns: str, name: str, *, shutdown: bool = True) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0"}]}}
    return {"apiVersion": RAYJOBS.api_version, "kind": "RayJob",
            "metadata": {"name": name, "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"suspend": False, "shutdownAfterJobFinishes": shutdown, "entrypoint": "python x.py",
                     "rayClusterSpec": {"headGroupSpec": {"template": template},
                                        "workerGroupSpecs": [{"groupName": "w", "replicas": 2,
                                                              "template": template}]}}}


@pytest.mark.asyncio
async def test_a_queued_rayjob_created_running_is_stored_suspended(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayjob"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.rayjob_crd()])
        ns = await namespace(kc, "rayjob-wh", {LABEL: sfx})
        async with rayjob_webhooks(kc, tmp_path / "certs", LABEL, sfx, config):
            async def in_effect() -> bool:  # the apiserver picks the configurations up asynchronously
                dry = msgspec.json.decode(await kc.request(
                    "POST", RAYJOBS.collection_path(ns), query=[("dryRun", "All")], body=_rayjob(ns, "probe")))
                return dry["spec"]["suspend"] is True

            await eventually(in_effect, what="the RayJob webhook in effect")
            stored = msgspec.json.decode(await kc.create(RAYJOBS, _rayjob(ns, "queued"), ns))
            assert stored["spec"]["suspend"] is True
            assert stored["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 2, "nothing else changed"

            # under a Job (an enabled kind), as Kueue's walk decides: a child of a queued Job is left running (its
            # Workload is the Job's), of a Job naming no queue suspended (without the walk, a Job controller alone
            # left both running)
            for parent_name, queue in (("unqueued-parent", ""), ("queued-parent", "user-queue")):
                parent = job(ns, parent_name, queue)
                if not queue:
                    del parent["metadata"]["labels"][Q]
                made = await create(kc, parent)
                child = _rayjob(ns, f"under-{parent_name}")
                child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": parent_name,
                                                         "uid": made["metadata"]["uid"], "controller": True}]
                stored_child = msgspec.json.decode(await kc.create(RAYJOBS, child, ns))
                assert stored_child["spec"].get("suspend", False) is (not queue), parent_name
            with pytest.raises(Forbidden) as refused:
                await kc.create(RAYJOBS, _rayjob(ns, "kept", shutdown=False), ns)
            assert ("spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the "
                    "cluster after finishing") in str(refused.value)

            # ValidateRayAndSparkJobUpdates (on by default): a running RayJob may not drop its queue name
            await kc.patch(RAYJOBS, "queued", {"spec": {"suspend": False}}, ns)
            with pytest.raises(Forbidden) as dropped:
                await kc.patch(RAYJOBS, "queued", {"metadata": {"labels": {Q: None}}}, ns)
            assert 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable' in str(
                dropped.value)
