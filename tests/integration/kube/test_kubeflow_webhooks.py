"""Kueue's PyTorchJob webhooks against the real apiserver, with ``kubeflow.org/pytorchjob`` among the frameworks.

The kubeflow.org/v1 API is served from the minimal CRD of :func:`connectors.k8s.crds.kubeflow_crd`; kueue-es's
webhook server answers ``mpytorchjob.kb.io`` and ``vpytorchjob.kb.io`` for this test's namespace only. A PyTorchJob
naming a queue created with ``spec.runPolicy.suspend: false`` is stored suspended, so the training operator would
start no pod before admission. Once running, a change of its queue name is refused in Kueue's words.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, framework_webhooks, namespace

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.kubeflow import KINDS
from connectors.k8s.kubeflow_webhook import WEBHOOK_KINDS, KubeflowWebhooks
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"
LABEL = "kueue-es-pytorchjob-webhook-test"
PYTORCH = KINDS["PyTorchJob"]
RESOURCE = PYTORCH.resource


def _pytorchjob(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}}}
    return {"apiVersion": RESOURCE.api_version, "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"runPolicy": {"suspend": False},
                     "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}}


@pytest.mark.asyncio
async def test_a_queued_pytorchjob_created_running_is_stored_suspended(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.kubeflow_crd(PYTORCH.KIND, PYTORCH.specs_field)])
        ns = await namespace(kc, "pytorchjob-wh", {LABEL: sfx})
        async with framework_webhooks(kc, tmp_path / "certs", LABEL, sfx, WEBHOOK_KINDS["PyTorchJob"],
                                      KubeflowWebhooks.of(config, "PyTorchJob")):
            async def in_effect() -> bool:  # the apiserver picks the configurations up asynchronously
                dry = msgspec.json.decode(await kc.request(
                    "POST", RESOURCE.collection_path(ns), query=[("dryRun", "All")],
                    body=_pytorchjob(ns, "probe", {Q: "user-queue"})))
                return dry["spec"]["runPolicy"].get("suspend") is True

            await eventually(in_effect, what="the PyTorchJob webhook in effect")
            stored = msgspec.json.decode(await kc.create(RESOURCE, _pytorchjob(ns, "queued", {Q: "user-queue"}), ns))
            assert stored["spec"]["runPolicy"]["suspend"] is True
            assert stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2, "nothing else changed"

            # suspended, its queue may change; running (as Kueue unsuspends it on admission), it may not
            await kc.patch(RESOURCE, "queued", {"metadata": {"labels": {Q: "other-queue"}}}, ns)
            await kc.patch(RESOURCE, "queued", {"spec": {"runPolicy": {"suspend": False}}}, ns)
            with pytest.raises(Forbidden) as refused:
                await kc.patch(RESOURCE, "queued", {"metadata": {"labels": {Q: "user-queue"}}}, ns)
            assert f'metadata.labels[{Q}]: Invalid value: "user-queue": field is immutable' in str(refused.value)
            stored = msgspec.json.decode(await kc.get(RESOURCE, "queued", ns))
            assert stored["metadata"]["labels"][Q] == "other-queue"
