"""Kueue's ``deployment`` integration against the real apiserver: kueue-es's Deployment and Pod webhooks (for this
test's namespaces only) and the connector with ``pod`` and ``deployment`` among the frameworks.

A Deployment naming a queue is stored with its pod template marked (``kueue.x-k8s.io/managed``, its queue name,
``kueue.x-k8s.io/pod-suspending-parent: deployment``); its pods are gated by the Pod webhook (with no Kueue
finalizer, as Kueue since #8530) and held as single Pods, one Workload each, and ungated once admitted. The test cluster runs no kube-controller-manager, so nothing
makes the ReplicaSet or its pods: the test makes them as the Deployment and ReplicaSet controllers would (the
ReplicaSet controlled by the Deployment, each pod by the ReplicaSet, from its template). The validating webhook
refuses a malformed queue name and a queue name changed while a replica is ready (the test writes
``status.readyReplicas``, which no controller here would). A pod without the parent's annotation is looked through
its ReplicaSet to the Deployment, as Kueue's walk passes over a ReplicaSet: a queued Deployment's is left as made.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get, kueue_es, pod_webhooks, queues, scheduling_gates

from connectors.k8s import crds, pod_sync
from connectors.k8s.errors import Forbidden
from connectors.k8s.resources import BY_KIND, DEPLOYMENTS, REPLICA_SETS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
PODS, NAMESPACES = BY_KIND["Pod"], BY_KIND["Namespace"]
Q = "kueue.x-k8s.io/queue-name"
MANAGED = "kueue.x-k8s.io/managed"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
GATE = "kueue.x-k8s.io/admission"


def _deployment(ns: str, name: str, labels: dict[str, str] | None = None, replicas: int = 3) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                           "command": ["sleep", "3600"],
                                                           "resources": {"requests": {"cpu": "1"}}}]}}}}


def _owned(owner: dict[str, Any]) -> list[dict[str, Any]]:
    meta = owner["metadata"]
    return [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}]


def _replica_set(deployment: dict[str, Any], hash_: str) -> dict[str, Any]:
    """The ReplicaSet the Deployment controller would make: its template with ``pod-template-hash``."""
    template = msgspec.json.decode(msgspec.json.encode(deployment["spec"]["template"]))
    template["metadata"]["labels"]["pod-template-hash"] = hash_
    name = deployment["metadata"]["name"]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{name}-{hash_}", "namespace": deployment["metadata"]["namespace"],
                         "labels": dict(template["metadata"]["labels"]), "ownerReferences": _owned(deployment)},
            "spec": {"replicas": deployment["spec"]["replicas"],
                     "selector": {"matchLabels": {"app": name, "pod-template-hash": hash_}}, "template": template}}


def _replica(rs: dict[str, Any], suffix: str) -> dict[str, Any]:
    """A pod as the ReplicaSet controller makes one: its template's metadata and spec, the ReplicaSet its
    controller."""
    template = rs["spec"]["template"]
    meta = template["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{rs['metadata']['name']}-{suffix}", "namespace": rs["metadata"]["namespace"],
                         "labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": _owned(rs)},
            "spec": {**template["spec"], "restartPolicy": "Always"}}


def _unmarked(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` without Kueue's marks from its template (the managed label, the parent's annotation)."""
    pod["metadata"]["labels"].pop(MANAGED, None)
    pod["metadata"]["annotations"].pop(PARENT, None)
    return pod


@pytest.mark.asyncio
async def test_a_queued_deployments_pods_are_gated_admitted_one_by_one_and_ungated(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod", "deployment"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        async with pod_webhooks(kc, tmp_path / "certs", "kueue-es-deploy-test", sfx, config):
            q = await queues(kc, "deploy", {"cpu": 2}, sfx=sfx, flavor_labels={"pool": "a"})
            await kc.patch(NAMESPACES, q.ns, {"metadata": {"labels": {"kueue-es-deploy-test": sfx}}})

            async def dry_run(deployment: dict[str, Any]) -> dict[str, Any]:
                return msgspec.json.decode(await kc.request("POST", DEPLOYMENTS.collection_path(q.ns),
                                                            query=[("dryRun", "All")], body=deployment))

            async def effective() -> bool:  # the apiserver picks the configurations up asynchronously
                with contextlib.suppress(Exception):
                    out = await dry_run(_deployment(q.ns, "probe", {Q: "user-queue"}))
                    return (out["spec"]["template"]["metadata"].get("annotations") or {}).get(PARENT) == "deployment"
                return False

            async def validating() -> bool:
                try:
                    await dry_run(_deployment(q.ns, "probe", {Q: "Bad_Queue"}))
                except Forbidden as exc:
                    return "vdeployment.kb.io" in str(exc)
                return False

            await eventually(effective, what="the mutating Deployment webhook in effect")
            await eventually(validating, what="the validating Deployment webhook in effect")

            web = msgspec.json.decode(await kc.create(DEPLOYMENTS, _deployment(q.ns, "web", {Q: "user-queue"}),
                                                      q.ns))
            template = web["spec"]["template"]["metadata"]
            assert template["labels"] == {"app": "web", MANAGED: "true", Q: "user-queue"}
            assert template["annotations"] == {PARENT: "deployment"}
            plain = msgspec.json.decode(await kc.create(DEPLOYMENTS, _deployment(q.ns, "plain"), q.ns))
            assert "annotations" not in plain["spec"]["template"]["metadata"], "no queue name: left alone"

            # no kube-controller-manager: make the ReplicaSet and its pods as its controllers would
            rs = msgspec.json.decode(await kc.create(REPLICA_SETS, _replica_set(web, "5d8f"), q.ns))
            pods = [await create(kc, _replica(rs, s)) for s in ("a", "b", "c")]
            for pod in pods:
                assert GATE in scheduling_gates(pod) and not pod["metadata"].get("finalizers"), "no finalizer (#8530)"
                assert pod["metadata"]["labels"][MANAGED] == "true"

            # a pod of that ReplicaSet made without the parent's annotation (from a template of before the
            # Deployment was Kueue's, say): looked through its ReplicaSet to the queued Deployment, it is left as
            # made; the same pod under a Deployment naming no queue is a queued plain Pod, gated
            stray = _unmarked(_replica(rs, "x"))
            made = await create(kc, stray)
            assert not scheduling_gates(made) and not made["metadata"].get("finalizers"), "the Deployment's"
            plain_rs = msgspec.json.decode(await kc.create(REPLICA_SETS, _replica_set(plain, "7c9b"), q.ns))
            queued_plain = _unmarked(_replica(plain_rs, "x"))
            queued_plain["metadata"]["labels"][Q] = "user-queue"
            assert GATE in scheduling_gates(await create(kc, queued_plain)), "not a queued Deployment's: gated"
            for name in (stray["metadata"]["name"], queued_plain["metadata"]["name"]):
                await kc.patch(PODS, name, {"metadata": {"finalizers": None}}, q.ns)
                await kc.delete(PODS, name, q.ns)

            async with kueue_es(kc, tmp_path / "log", config=config) as (connector, journal):
                async def ungated() -> list[str] | None:
                    names = [p["metadata"]["name"] for p in pods
                             if not scheduling_gates(await get(kc, "Pod", p["metadata"]["name"], q.ns))]
                    return names if len(names) == 2 else None

                started = await eventually(ungated, what="two of the three pods admitted (2 cpu of quota)")
                for name in started:
                    pod = await get(kc, "Pod", name, q.ns)
                    assert pod["spec"]["nodeSelector"] == {"pool": "a"}
                    wl = await get(kc, "Workload", pod_sync.workload_name(name, pod["metadata"]["uid"]), q.ns)
                    assert wl["metadata"]["ownerReferences"][0]["kind"] == "Pod"
                    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == web["metadata"]["uid"], (
                        "DeploymentJobUIDLabel: the Deployment's UID, found through the ReplicaSet")
                    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [1], "each pod a single Pod"
                    assert wl["status"]["admission"]["clusterQueue"] == q.cq
                waiting = next(p for p in pods if p["metadata"]["name"] not in started)
                assert GATE in scheduling_gates(await get(kc, "Pod", waiting["metadata"]["name"], q.ns))
                ours = {k for k in journal.mirror.state.workloads if k.startswith(f"{q.ns}/")}
                assert len(ours) == 3 and connector.pods is not None and connector.pods.stats.created == 3

            # the validating webhook: the queue name is fixed once a replica is ready
            await kc.patch(DEPLOYMENTS, "web", {"status": {"replicas": 3, "readyReplicas": 2}}, q.ns, subresource="status")
            with pytest.raises(Forbidden, match=r'metadata.labels\[kueue.x-k8s.io/queue-name\]: Invalid value: '
                                                r'"user-queue": field is immutable'):
                await kc.patch(DEPLOYMENTS, "web", {"metadata": {"labels": {Q: "other"}}}, q.ns)
