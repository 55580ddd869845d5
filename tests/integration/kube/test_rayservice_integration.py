"""Kueue's RayService integration against the real apiserver, with ``ray.io/rayservice`` and ``ray.io/raycluster``
among the frameworks.

KubeRay is not installed: the ray.io/v1 API is served from the minimal CRDs of
:func:`connectors.k8s.crds.rayservice_crd` and :func:`connectors.k8s.crds.raycluster_crd` and no operator runs, so
the test plays it. A queued RayService gets its Workload (Kueue's name; the ``head`` and worker group's pod sets from
``spec.rayClusterConfig``), is admitted, and its cluster config is unsuspended with the flavor's node labels in the
head's and the worker group's templates. The RayCluster "KubeRay" then makes from it, controlled by the RayService
and carrying its queue label, is its child: no Workload of its own and left running — while a queued RayCluster of
no RayService, made after it, gets one. The service's ``Ready`` condition makes its Workload's PodsReady true.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import admitted_workload, connect, eventually, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s import raycluster as rc
from connectors.k8s import rayservice as rs
from connectors.k8s.resources import BY_KIND, RAYCLUSTERS, RAYSERVICES
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"


def _template(cpu: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def _cluster_config() -> dict[str, Any]:
    return {"suspend": True, "headGroupSpec": {"rayStartParams": {}, "template": _template("1")},
            "workerGroupSpecs": [{"groupName": "Workers", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
                                  "rayStartParams": {}, "template": _template("1")}]}


def _rayservice(ns: str) -> dict[str, Any]:
    return {"apiVersion": RAYSERVICES.api_version, "kind": "RayService",
            "metadata": {"name": "svc", "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": _cluster_config()}}


def _raycluster(ns: str, name: str, spec: dict[str, Any], owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {Q: "user-queue"}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": RAYCLUSTERS.api_version, "kind": "RayCluster", "metadata": meta, "spec": spec}


@pytest.mark.asyncio
async def test_a_queued_rayservice_runs_its_cluster_on_its_admitted_workload_and_its_raycluster_is_not_queued_apart(
        kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayservice", "ray.io/raycluster"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.rayservice_crd(), crds.raycluster_crd()])
        q = await queues(kc, "raysvc", {"cpu": 4, "memory": "1Gi"}, flavor_labels={"pool": "a"})
        service = msgspec.json.decode(await kc.create(RAYSERVICES, _rayservice(q.ns), q.ns))
        uid = service["metadata"]["uid"]
        async with kueue_es(kc, tmp_path / "log", config=config) as (connector, _):
            wl_name = rs.workload_name("svc", uid)

            wl = await admitted_workload(kc, wl_name, q.ns, "the RayService's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2)]
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "RayService"

            async def started() -> dict[str, Any] | None:
                obj = msgspec.json.decode(await kc.get(RAYSERVICES, "svc", q.ns))
                return obj if obj["spec"]["rayClusterConfig"].get("suspend") is False else None

            running = await eventually(started, what="the RayService's cluster config unsuspended")
            cluster_config = running["spec"]["rayClusterConfig"]
            for name, template in (("head", cluster_config["headGroupSpec"]["template"]),
                                   ("workers", cluster_config["workerGroupSpecs"][0]["template"])):
                assert template["spec"]["nodeSelector"] == {"pool": "a"}, name
                assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == name
            assert running["spec"]["serveConfigV2"] == "applications: []", "the rest of the spec kept"

            # play KubeRay: the RayService's cluster, made from its (now admitted) config, controlled by it
            owner = {"apiVersion": RAYSERVICES.api_version, "kind": "RayService", "name": "svc", "uid": uid,
                     "controller": True, "blockOwnerDeletion": True}
            await kc.create(RAYCLUSTERS, _raycluster(q.ns, "svc-raycluster-x", cluster_config, owner), q.ns)
            # and a queued RayCluster of its own, made after it: the integration gives it a Workload
            alone = msgspec.json.decode(await kc.create(RAYCLUSTERS, _raycluster(q.ns, "alone", _cluster_config()),
                                                        q.ns))
            wl_alone = rc.workload_name("alone", alone["metadata"]["uid"])

            async def created() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    return await get(kc, "Workload", wl_alone, q.ns)
                return None

            await eventually(created, what="the lone RayCluster's workload")
            assert connector.rayclusters is not None and f"{q.ns}/svc-raycluster-x" in connector.rayclusters.known
            listed = await kc.list(BY_KIND["Workload"], field_selector=f"metadata.namespace={q.ns}")
            names = sorted(msgspec.json.decode(item)["metadata"]["name"] for item in listed.items)
            assert names == sorted([wl_name, wl_alone]), "the service's RayCluster has no Workload of its own"
            child = msgspec.json.decode(await kc.get(RAYCLUSTERS, "svc-raycluster-x", q.ns))
            assert child["spec"]["suspend"] is False, "its parent's Workload is admitted: left running"

            # play KubeRay: the service is Ready
            await kc.patch(RAYSERVICES, "svc", {"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "RayServiceReady", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, q.ns, subresource="status")

            async def pods_ready() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", wl_name, q.ns)
                cond = next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == "PodsReady"), None)
                return cond if cond is not None and cond["status"] == "True" else None

            await eventually(pods_ready, what="the RayService's workload PodsReady")
