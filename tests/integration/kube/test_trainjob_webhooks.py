"""Kueue's TrainJob webhooks against the real apiserver, with ``trainer.kubeflow.org/trainjob`` among the frameworks
(TopologyAwareScheduling on, as by default).

The trainer.kubeflow.org/v1alpha1 API is served from the minimal CRDs of :mod:`connectors.k8s.crds`; kueue-es's
webhook server answers ``mtrainjob.kb.io`` and ``vtrainjob.kb.io`` for this test's namespace only, reading runtimes
from the apiserver. A TrainJob naming a runtime that is not there is refused; a queued one created running is stored
suspended with its queue name in ``spec.labels``; one whose derived pod set asks for a slice larger than its pods is
refused in Kueue's words.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, framework_webhooks, namespace

from connectors.k8s import crds
from connectors.k8s import trainjob_webhook as tw
from connectors.k8s.errors import Forbidden
from connectors.k8s.pod_webhook import namespace_lookup
from connectors.k8s.resources import CLUSTER_TRAINING_RUNTIMES, TRAINJOBS
from connectors.k8s.webhook import default_queue_lookup
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"
LABEL = "kueue-es-trainjob-webhook-test"
SLICE = {"kueue.x-k8s.io/podset-required-topology": "block",
         "kueue.x-k8s.io/podset-slice-required-topology": "rack", "kueue.x-k8s.io/podset-slice-size": "3"}


def _runtime(name: str) -> dict[str, Any]:
    return {"apiVersion": CLUSTER_TRAINING_RUNTIMES.api_version, "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name}, "spec": {"mlPolicy": {"numNodes": 2}, "template": {"spec": {"replicatedJobs": [{
                "name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox"}]}}}}}]}}}}


def _trainjob(ns: str, name: str, runtime: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"suspend": False, "runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime"}}
    if annotations:
        spec["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": annotations}}]
    return {"apiVersion": TRAINJOBS.api_version, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": ns, "labels": {Q: "user-queue"}}, "spec": spec}


@pytest.mark.asyncio
async def test_trainjobs_are_defaulted_and_checked_against_their_runtime(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    runtime = f"torch-{sfx}"
    settings = tw.TrainJobWebhooks.of(load_config({"integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]}}))
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.trainjob_crd(), crds.training_runtime_crd(cluster=True)])
        ns = await namespace(kc, "trainjob-wh", {LABEL: sfx})
        reviewers = tw.reviewers(settings, namespace_lookup(kc), default_queue_lookup(kc),
                                 runtime_of=tw.runtime_lookup(kc))
        async with framework_webhooks(kc, tmp_path / "certs", LABEL, sfx, tw.KIND, settings, reviewers=reviewers):
            async def in_effect() -> str | None:  # the apiserver picks the configurations up asynchronously
                try:
                    await kc.request("POST", TRAINJOBS.collection_path(ns), query=[("dryRun", "All")],
                                     body=_trainjob(ns, "probe", runtime))
                except Forbidden as exc:
                    return str(exc)
                return None

            refusal = await eventually(in_effect, what="the TrainJob webhook in effect")
            assert f"runtime '{runtime}' not found" in refusal
            await kc.create(CLUSTER_TRAINING_RUNTIMES, _runtime(runtime))
            stored = msgspec.json.decode(await kc.create(TRAINJOBS, _trainjob(ns, "queued", runtime), ns))
            assert stored["spec"]["suspend"] is True and stored["spec"]["labels"] == {Q: "user-queue"}
            with pytest.raises(Forbidden) as refused:
                await kc.create(TRAINJOBS, _trainjob(ns, "sliced", runtime, SLICE), ns)
            assert ('job[node].annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: "3": must not be '
                    "greater than pod set count 2") in str(refused.value)
