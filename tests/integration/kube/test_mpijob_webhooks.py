"""Kueue's MPIJob webhooks against the real apiserver, with ``kubeflow.org/mpijob`` among the frameworks.

The kubeflow.org/v2beta1 API is served from the minimal CRD of :func:`connectors.k8s.crds.mpijob_crd`; kueue-es's
webhook server answers ``mmpijob.kb.io`` and ``vmpijob.kb.io`` for this test's namespace only. An MPIJob naming a
queue created with ``spec.runPolicy.suspend: false`` is stored suspended, so the MPI operator would start no
launcher before admission (without the webhook it runs until the integration suspends it after the fact). Once
running, a change of its queue name is refused in Kueue's words.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, job, mpijob_webhooks, namespace

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.resources import MPIJOBS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"
LABEL = "kueue-es-mpijob-webhook-test"


def _mpijob(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36"}]}}}
    return {"apiVersion": MPIJOBS.api_version, "kind": "MPIJob",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"slotsPerWorker": 1, "runPolicy": {"suspend": False},
                     "mpiReplicaSpecs": {"Launcher": replica(1), "Worker": replica(2)}}}


@pytest.mark.asyncio
async def test_a_queued_mpijob_created_running_is_stored_suspended(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.mpijob_crd()])
        ns = await namespace(kc, "mpijob-wh", {LABEL: sfx})
        async with mpijob_webhooks(kc, tmp_path / "certs", LABEL, sfx, config):
            async def in_effect() -> bool:  # the apiserver picks the configurations up asynchronously
                dry = msgspec.json.decode(await kc.request(
                    "POST", MPIJOBS.collection_path(ns), query=[("dryRun", "All")],
                    body=_mpijob(ns, "probe", {Q: "user-queue"})))
                return dry["spec"]["runPolicy"].get("suspend") is True

            await eventually(in_effect, what="the MPIJob webhook in effect")
            stored = msgspec.json.decode(await kc.create(MPIJOBS, _mpijob(ns, "queued", {Q: "user-queue"}), ns))
            assert stored["spec"]["runPolicy"]["suspend"] is True
            assert stored["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2, "nothing else changed"

            # under a Job (an enabled kind), as Kueue's walk decides: a child of a queued Job is left running (its
            # Workload is the Job's), of a Job naming no queue suspended (without the walk, a Job controller alone
            # left both running)
            for parent_name, queue in (("unqueued-parent", ""), ("queued-parent", "user-queue")):
                parent = job(ns, parent_name, queue)
                if not queue:
                    del parent["metadata"]["labels"][Q]
                made = await create(kc, parent)
                child = _mpijob(ns, f"under-{parent_name}", {Q: "user-queue"})
                child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": parent_name,
                                                         "uid": made["metadata"]["uid"], "controller": True}]
                stored_child = msgspec.json.decode(await kc.create(MPIJOBS, child, ns))
                assert stored_child["spec"]["runPolicy"].get("suspend", False) is (not queue), parent_name

            # suspended, its queue may change; running (as Kueue unsuspends it on admission), it may not
            await kc.patch(MPIJOBS, "queued", {"metadata": {"labels": {Q: "other-queue"}}}, ns)
            await kc.patch(MPIJOBS, "queued", {"spec": {"runPolicy": {"suspend": False}}}, ns)
            with pytest.raises(Forbidden) as refused:
                await kc.patch(MPIJOBS, "queued", {"metadata": {"labels": {Q: "user-queue"}}}, ns)
            assert f'metadata.labels[{Q}]: Invalid value: "user-queue": field is immutable' in str(refused.value)
            stored = msgspec.json.decode(await kc.get(MPIJOBS, "queued", ns))
            assert stored["metadata"]["labels"][Q] == "other-queue"
