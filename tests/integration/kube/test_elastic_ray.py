"""An elastic RayCluster, and an elastic RayJob, scaled up and down against the real apiserver, as Kueue runs them
through workload slices.

KubeRay is not installed: the ray.io/v1 API is served from :func:`connectors.k8s.crds.raycluster_crd` and the test
plays KubeRay (makes the pods from the templates, writes the status). kueue-es's RayCluster webhooks answer for
this test's namespace: a queued RayCluster annotated ``kueue.x-k8s.io/elastic-job: "true"`` with the in-tree
autoscaler on (``ElasticJobsViaWorkloadSlices`` on, Kueue's default) is stored suspended with the
``kueue.x-k8s.io/elastic-job`` scheduling gate on its head's and worker group's templates. It gets a first slice
named with its generation in the hash, is admitted and started, its templates carrying the chain's
``kueue.x-k8s.io/workload-slice-name``, and its gated pods are released once their slice is admitted. Its worker
group's replicas raised beyond the quota (as the autoscaler would), it gets a new slice naming the old one, which
waits while the cluster runs on — never suspended meanwhile — its new pods gated; once the quota grows the
scheduler admits the new slice in the old one's place and the new pods are released. Its replicas then lowered, the
admitted slice takes the smaller count in place.

An elastic RayJob with the autoscaler on is counted by the RayCluster KubeRay makes for it (the test makes it, as
KubeRay does, with the RayJob's labels and annotations, so the RayCluster webhook gates its templates): its first
slice admitted, the cluster's pods are released; the cluster's worker group scaled up beyond the quota (the RayJob
itself unchanged), a new slice naming the first waits while the RayJob runs on, and once the quota grows it is
admitted in the first one's place and the new pods are released.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, framework_webhooks, get, kueue_es, queues

from connectors.k8s import crds, ray_webhook
from connectors.k8s.client import JSON_PATCH, KubeClient
from connectors.k8s.resources import BY_KIND, RAYCLUSTERS, RAYJOBS, RAYSERVICES
from connectors.k8s.workload_slices import slice_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
CONFIG = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/raycluster"]}})
JOB_CONFIG = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]}})
Q = "kueue.x-k8s.io/queue-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
LABEL = "kueue-es-elastic-raycluster-test"


def _template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
                                     "resources": {"requests": {"cpu": "1"}}}]}}


def _cluster(ns: str) -> dict[str, Any]:
    return {"apiVersion": RAYCLUSTERS.api_version, "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": ns, "labels": {Q: "user-queue"}, "annotations": {ELASTIC: "true"}},
            # the autoscaler sidecar asks for nothing here (its resources counted on the head pod set: KubeRay's
            # 500m/512Mi when not written), so the quotas below count the Ray containers alone
            "spec": {"enableInTreeAutoscaling": True, "autoscalerOptions": {"resources": {}},
                     "headGroupSpec": {"template": _template()},
                     "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "minReplicas": 1,
                                           "maxReplicas": 4, "template": _template()}]}}


async def _cluster_doc(kc: KubeClient, ns: str) -> dict[str, Any]:
    return msgspec.json.decode(await kc.get(RAYCLUSTERS, "rc", ns))


async def _kuberay_pod(kc: KubeClient, ns: str, cluster: dict[str, Any], name: str, group: str | None,
                       cluster_name: str = "rc") -> None:
    """A pod of the cluster as KubeRay makes it: the template's metadata and spec, KubeRay's labels, the cluster
    as controller."""
    template = (cluster["spec"]["headGroupSpec"] if group is None else cluster["spec"]["workerGroupSpecs"][0])["template"]
    meta = template.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), "ray.io/cluster": cluster_name,
              "ray.io/node-type": "head" if group is None else "worker", **({"ray.io/group": group} if group else {})}
    await create(kc, {"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": ns, "labels": labels,
                                   "annotations": meta.get("annotations") or {},
                                   "ownerReferences": [{"apiVersion": RAYCLUSTERS.api_version, "kind": "RayCluster",
                                                        "name": cluster_name, "uid": cluster["metadata"]["uid"],
                                                        "controller": True}]},
                      "spec": template["spec"]})


async def _kuberay_status(kc: KubeClient, ns: str, workers: int, cluster_name: str = "rc") -> None:
    await kc.patch(RAYCLUSTERS, cluster_name, {"status": {"desiredWorkerReplicas": workers}}, ns,
                   subresource="status")


async def _gates(kc: KubeClient, ns: str, name: str) -> list[str]:
    return [g["name"] for g in (await get(kc, "Pod", name, ns))["spec"].get("schedulingGates") or []]


async def _released(kc: KubeClient, ns: str, *names: str) -> bool:
    return all([ELASTIC not in await _gates(kc, ns, n) for n in names])


async def _workload(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    with contextlib.suppress(Exception):
        return await get(kc, "Workload", name, ns)
    return None


def _condition(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


async def _with_condition(kc: KubeClient, ns: str, name: str, type_: str, status: str) -> dict[str, Any] | None:
    wl = await _workload(kc, ns, name)
    cond = _condition(wl, type_) if wl else None
    return wl if cond is not None and cond["status"] == status else None


def _counts(wl: dict[str, Any]) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]]


@pytest.mark.asyncio
async def test_an_elastic_raycluster_scales_its_workers_through_slices_without_stopping(kube_apiserver,
                                                                                       tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.raycluster_crd()])
        q = await queues(kc, "elastic-ray", {"cpu": 4})
        sfx = secrets.token_hex(3)
        await kc.patch(BY_KIND["Namespace"], q.ns, {"metadata": {"labels": {LABEL: sfx}}})
        settings = ray_webhook.RayWebhooks.of(CONFIG, clusters=True)
        async with framework_webhooks(kc, tmp_path / "certs", LABEL, sfx, ray_webhook.raycluster_kind(), settings,
                                      CONFIG), kueue_es(kc, tmp_path / "log", config=CONFIG):
            async def webhook_in_effect() -> bool:  # the apiserver picks the configurations up asynchronously
                dry = msgspec.json.decode(await kc.request("POST", RAYCLUSTERS.collection_path(q.ns),
                                                           query=[("dryRun", "All")], body=_cluster(q.ns)))
                return dry["spec"].get("suspend") is True

            await eventually(webhook_in_effect, what="the RayCluster webhooks in effect")
            created = msgspec.json.decode(await kc.create(RAYCLUSTERS, _cluster(q.ns), q.ns))
            for template in (created["spec"]["headGroupSpec"]["template"],
                             created["spec"]["workerGroupSpecs"][0]["template"]):
                assert template["spec"]["schedulingGates"] == [{"name": ELASTIC}], "gated by the webhook"
            uid = created["metadata"]["uid"]
            first = slice_name("RayCluster", "ray.io", "rc", uid, created["metadata"]["generation"])

            async def started() -> dict[str, Any] | None:
                doc = await _cluster_doc(kc, q.ns)
                return doc if doc["spec"].get("suspend") is False else None

            cluster = await eventually(started, what="the cluster started on its first slice")
            wl = await _with_condition(kc, q.ns, first, "Admitted", "True")
            assert wl is not None and _counts(wl) == [("head", 1), ("workers", 2)]
            assert wl["metadata"]["annotations"][SLICE_NAME] == first
            for template in (cluster["spec"]["headGroupSpec"]["template"],
                             cluster["spec"]["workerGroupSpecs"][0]["template"]):
                assert template["metadata"]["annotations"][SLICE_NAME] == first, "the pods carry the chain's name"

            # play KubeRay: the head and two workers, gated as the templates are
            await _kuberay_pod(kc, q.ns, cluster, "rc-head", None)
            for i in range(2):
                await _kuberay_pod(kc, q.ns, cluster, f"rc-w-{i}", "workers")
            assert await _gates(kc, q.ns, "rc-w-0") == [ELASTIC]
            await _kuberay_status(kc, q.ns, 2)
            await eventually(lambda: _released(kc, q.ns, "rc-head", "rc-w-0", "rc-w-1"),
                             what="the first slice's pods released")

            suspended: list[bool] = []

            async def watch() -> None:
                while True:
                    if (await _cluster_doc(kc, q.ns))["spec"].get("suspend"):
                        suspended.append(True)
                    await asyncio.sleep(0.05)

            watcher = asyncio.create_task(watch())
            try:
                # the autoscaler asks for 4 workers: 5 cpu do not fit in 4, the new slice waits
                scaled = msgspec.json.decode(await kc.patch(RAYCLUSTERS, "rc", [
                    {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}], q.ns,
                    content_type=JSON_PATCH))
                second = slice_name("RayCluster", "ray.io", "rc", uid, scaled["metadata"]["generation"])
                assert second != first
                pending = await eventually(lambda: _with_condition(kc, q.ns, second, "QuotaReserved", "False"),
                                           what="the new slice pending")
                assert pending["metadata"]["annotations"][REPLACES] == f"{q.ns}/{first}"
                for i in range(2, 4):
                    await _kuberay_pod(kc, q.ns, scaled, f"rc-w-{i}", "workers")
                await _kuberay_status(kc, q.ns, 4)
                await asyncio.sleep(1.0)
                assert await _gates(kc, q.ns, "rc-w-2") == [ELASTIC], "a pod of the waiting slice stays gated"
                assert await _with_condition(kc, q.ns, first, "Admitted", "True") is not None

                cq = await get(kc, "ClusterQueue", q.cq)
                cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 6
                await kc.replace(BY_KIND["ClusterQueue"], q.cq, cq)
                new = await eventually(lambda: _with_condition(kc, q.ns, second, "Admitted", "True"),
                                       what="the new slice admitted")
                assert _counts(new) == [("head", 1), ("workers", 4)]
                await eventually(lambda: _released(kc, q.ns, "rc-w-2", "rc-w-3"), what="the new slice's pods released")
                old = await _with_condition(kc, q.ns, first, "Finished", "True")
                assert old is not None and _condition(old, "Finished")["reason"] == "WorkloadSliceReplaced"

                # the autoscaler gives a worker back: the admitted slice takes the count in place, no new slice
                await kc.patch(RAYCLUSTERS, "rc", [
                    {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}], q.ns,
                    content_type=JSON_PATCH)

                async def lowered() -> bool:
                    wl = await _workload(kc, q.ns, second)
                    return wl is not None and _counts(wl) == [("head", 1), ("workers", 3)]

                await eventually(lowered, what="the slice's worker count lowered")
                assert await _with_condition(kc, q.ns, second, "Admitted", "True") is not None
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            assert suspended == [], "the cluster was never suspended"


async def _scales_with_its_cluster(kc: KubeClient, q: Any, owner: dict[str, Any], first: str, resource: Any,
                                   status: dict[str, Any], spec_at: str,
                                   running: Callable[[], Awaitable[Any]]) -> None:
    """Play KubeRay for a started elastic ``owner`` (a RayJob, a RayService): its RayCluster ``<name>-rc`` with its
    labels and annotations, controlled by it, made from its cluster spec (at ``spec_at``), named in its ``status``;
    that cluster's pods released once ``first`` is admitted; then the cluster scaled up beyond the quota (the owner
    unchanged): a new slice naming ``first`` waits while the owner runs on (``running``), and once the quota grows
    it is admitted in ``first``'s place and the new pods are released."""
    ns, uid, name = q.ns, owner["metadata"]["uid"], owner["metadata"]["name"]
    cluster_name = f"{name}-rc"
    spec = owner
    for key in spec_at.split("."):
        spec = spec[key]
    cluster_doc = {"apiVersion": RAYCLUSTERS.api_version, "kind": "RayCluster",
                   "metadata": {"name": cluster_name, "namespace": ns, "labels": owner["metadata"]["labels"],
                                "annotations": owner["metadata"]["annotations"],
                                "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                                     "name": name, "uid": uid, "controller": True}]},
                   "spec": {**spec, "suspend": False}}
    cluster = msgspec.json.decode(await kc.create(RAYCLUSTERS, cluster_doc, ns))
    assert cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["schedulingGates"] == [{"name": ELASTIC}]
    await kc.patch(resource, name, {"status": status}, ns, subresource="status")
    await _kuberay_pod(kc, ns, cluster, f"{name}-head", None, cluster_name)
    for i in range(2):
        await _kuberay_pod(kc, ns, cluster, f"{name}-w-{i}", "workers", cluster_name)
    await _kuberay_status(kc, ns, 2, cluster_name)
    await eventually(lambda: _released(kc, ns, f"{name}-head", f"{name}-w-0", f"{name}-w-1"),
                     what="the first slice's pods released")

    # the autoscaler scales the cluster, not its owner: beyond the quota, the new slice waits
    scaled = msgspec.json.decode(await kc.patch(RAYCLUSTERS, cluster_name, [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}], ns, content_type=JSON_PATCH))

    async def second_slice() -> dict[str, Any] | None:
        return next((w for w in await _owned_workloads(kc, ns, uid)
                     if w["metadata"]["name"] != first and ("workers", 4) in _counts(w)), None)

    second = (await eventually(second_slice, what="the new slice"))["metadata"]["name"]
    pending = await eventually(lambda: _with_condition(kc, ns, second, "QuotaReserved", "False"),
                               what="the new slice pending")
    assert pending["metadata"]["annotations"][REPLACES] == f"{ns}/{first}"
    for i in range(2, 4):
        await _kuberay_pod(kc, ns, scaled, f"{name}-w-{i}", "workers", cluster_name)
    await _kuberay_status(kc, ns, 4, cluster_name)
    await asyncio.sleep(1.0)
    assert await _gates(kc, ns, f"{name}-w-2") == [ELASTIC], "a pod of the waiting slice stays gated"
    assert await running() is not None, "the owner runs on"

    cq = await get(kc, "ClusterQueue", q.cq)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 6
    await kc.replace(BY_KIND["ClusterQueue"], q.cq, cq)
    await eventually(lambda: _with_condition(kc, ns, second, "Admitted", "True"), what="the new slice admitted")
    await eventually(lambda: _released(kc, ns, f"{name}-w-2", f"{name}-w-3"), what="the new slice's pods released")
    old = await _with_condition(kc, ns, first, "Finished", "True")
    assert old is not None and _condition(old, "Finished")["reason"] == "WorkloadSliceReplaced"
    assert await running() is not None, "never stopped"


def _rayjob(ns: str) -> dict[str, Any]:
    cluster_spec = _cluster(ns)["spec"]
    return {"apiVersion": RAYJOBS.api_version, "kind": "RayJob",
            "metadata": {"name": "job", "namespace": ns, "labels": {Q: "user-queue"}, "annotations": {ELASTIC: "true"}},
            "spec": {"suspend": True, "shutdownAfterJobFinishes": True, "entrypoint": "python -c 'print(1)'",
                     "rayClusterSpec": cluster_spec}}


async def _owned_workloads(kc: KubeClient, ns: str, uid: str) -> list[dict[str, Any]]:
    raw = await kc.request("GET", BY_KIND["Workload"].collection_path(ns))
    return [w for w in msgspec.json.decode(raw)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or [])]


@pytest.mark.asyncio
async def test_an_elastic_rayjob_scales_up_with_its_autoscaled_cluster(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.rayjob_crd(), crds.raycluster_crd()])
        q = await queues(kc, "elastic-rayjob", {"cpu": 4, "memory": "1Gi"})
        sfx = secrets.token_hex(3)
        await kc.patch(BY_KIND["Namespace"], q.ns, {"metadata": {"labels": {LABEL: sfx}}})
        settings = ray_webhook.RayWebhooks.of(JOB_CONFIG, clusters=True)
        async with framework_webhooks(kc, tmp_path / "certs", LABEL, sfx, ray_webhook.raycluster_kind(), settings,
                                      JOB_CONFIG), kueue_es(kc, tmp_path / "log", config=JOB_CONFIG):
            async def webhook_in_effect() -> bool:
                dry = msgspec.json.decode(await kc.request("POST", RAYCLUSTERS.collection_path(q.ns),
                                                           query=[("dryRun", "All")], body=_cluster(q.ns)))
                return dry["spec"].get("suspend") is True

            await eventually(webhook_in_effect, what="the RayCluster webhooks in effect")
            created = msgspec.json.decode(await kc.create(RAYJOBS, _rayjob(q.ns), q.ns))
            await kc.patch(RAYJOBS, "job", {"status": {"jobDeploymentStatus": "Suspended"}}, q.ns,
                           subresource="status")
            uid = created["metadata"]["uid"]
            first = slice_name("RayJob", "ray.io", "job", uid, created["metadata"]["generation"])

            async def job_started() -> dict[str, Any] | None:
                doc = msgspec.json.decode(await kc.get(RAYJOBS, "job", q.ns))
                return doc if doc["spec"].get("suspend") is False else None

            job = await eventually(job_started, what="the RayJob started on its first slice")
            wl = await _with_condition(kc, q.ns, first, "Admitted", "True")
            assert wl is not None and _counts(wl) == [("head", 1), ("workers", 2), ("submitter", 1)]

            await _scales_with_its_cluster(kc, q, job, first, RAYJOBS, {"jobDeploymentStatus": "Running",
                                                                        "rayClusterName": "job-rc"},
                                           "spec.rayClusterSpec", job_started)


SERVICE_CONFIG = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayservice"]}})


@pytest.mark.asyncio
async def test_an_elastic_rayservice_scales_up_with_its_autoscaled_cluster(kube_apiserver, tmp_path) -> None:
    """The RayService webhook gates its cluster config's templates; counted by its active RayCluster."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.rayservice_crd(), crds.raycluster_crd()])
        q = await queues(kc, "elastic-raysvc", {"cpu": 4})
        sfx = secrets.token_hex(3)
        await kc.patch(BY_KIND["Namespace"], q.ns, {"metadata": {"labels": {LABEL: sfx}}})
        settings = ray_webhook.RayWebhooks.for_services(SERVICE_CONFIG)
        service_doc = {"apiVersion": RAYSERVICES.api_version, "kind": "RayService",
                       "metadata": {"name": "svc", "namespace": q.ns, "labels": {Q: "user-queue"},
                                    "annotations": {ELASTIC: "true"}},
                       "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": _cluster(q.ns)["spec"]}}
        async with framework_webhooks(kc, tmp_path / "certs", LABEL, sfx, ray_webhook.rayservice_kind(), settings,
                                      SERVICE_CONFIG), kueue_es(kc, tmp_path / "log", config=SERVICE_CONFIG):
            async def webhook_in_effect() -> bool:
                dry = msgspec.json.decode(await kc.request("POST", RAYSERVICES.collection_path(q.ns),
                                                           query=[("dryRun", "All")], body=service_doc))
                return dry["spec"]["rayClusterConfig"].get("suspend") is True

            await eventually(webhook_in_effect, what="the RayService webhooks in effect")
            created = msgspec.json.decode(await kc.create(RAYSERVICES, service_doc, q.ns))
            assert created["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["schedulingGates"] == [
                {"name": ELASTIC}], "gated by the webhook"
            first = slice_name("RayService", "ray.io", "svc", created["metadata"]["uid"],
                               created["metadata"]["generation"])

            async def started() -> dict[str, Any] | None:
                doc = msgspec.json.decode(await kc.get(RAYSERVICES, "svc", q.ns))
                return doc if doc["spec"]["rayClusterConfig"].get("suspend") is False else None

            service = await eventually(started, what="the RayService started on its first slice")
            wl = await _with_condition(kc, q.ns, first, "Admitted", "True")
            assert wl is not None and _counts(wl) == [("head", 1), ("workers", 2)]
            await _scales_with_its_cluster(kc, q, service, first, RAYSERVICES,
                                           {"activeServiceStatus": {"rayClusterName": "svc-rc"}},
                                           "spec.rayClusterConfig", started)


PARTIAL_CONFIG = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/raycluster"]},
                              "featureGates": {"ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp": True}})


@pytest.mark.asyncio
async def test_a_partial_rayclusters_scale_up_is_admitted_in_part_then_probed_for_the_rest(kube_apiserver,
                                                                                            tmp_path) -> None:
    """KEP-12100 for a RayCluster annotated ``kueue.x-k8s.io/elastic-job-scale-up-strategy: partial``: scaled from 2
    to 5 workers with room for one more, its new slice is admitted with 3 workers (its minCount the 2 it ran), one
    more pod is released, and a scale-up probe asking for all 5 (at least 3) waits; once the quota grows the probe
    is admitted and the last pods are released."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.raycluster_crd()])
        q = await queues(kc, "partial-ray", {"cpu": 4})
        async with kueue_es(kc, tmp_path / "log", config=PARTIAL_CONFIG):
            doc = _cluster(q.ns)
            doc["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job-scale-up-strategy"] = "partial"
            doc["spec"]["suspend"] = True  # as the webhooks store it
            for template in (doc["spec"]["headGroupSpec"]["template"], doc["spec"]["workerGroupSpecs"][0]["template"]):
                template["spec"]["schedulingGates"] = [{"name": ELASTIC}]
            created = msgspec.json.decode(await kc.create(RAYCLUSTERS, doc, q.ns))
            uid = created["metadata"]["uid"]
            first = slice_name("RayCluster", "ray.io", "rc", uid, created["metadata"]["generation"])
            await eventually(lambda: _with_condition(kc, q.ns, first, "Admitted", "True"), what="the first slice")

            async def started() -> dict[str, Any] | None:
                cluster = await _cluster_doc(kc, q.ns)
                return cluster if cluster["spec"].get("suspend") is False else None

            cluster = await eventually(started, what="the cluster started")
            await _kuberay_pod(kc, q.ns, cluster, "rc-head", None)
            for i in range(2):
                await _kuberay_pod(kc, q.ns, cluster, f"rc-w-{i}", "workers")
            await _kuberay_status(kc, q.ns, 2)
            await eventually(lambda: _released(kc, q.ns, "rc-head", "rc-w-0", "rc-w-1"), what="its pods released")

            scaled = msgspec.json.decode(await kc.patch(RAYCLUSTERS, "rc", [
                {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 5}], q.ns,
                content_type=JSON_PATCH))
            second = slice_name("RayCluster", "ray.io", "rc", uid, scaled["metadata"]["generation"])
            for i in range(2, 5):
                await _kuberay_pod(kc, q.ns, scaled, f"rc-w-{i}", "workers")
            await _kuberay_status(kc, q.ns, 5)
            partial = await eventually(lambda: _with_condition(kc, q.ns, second, "Admitted", "True"),
                                       what="the scale-up admitted in part")
            assert [ps.get("minCount") for ps in partial["spec"]["podSets"]] == [None, 2]
            assert [a.get("count") for a in partial["status"]["admission"]["podSetAssignments"]] == [1, 3]
            await eventually(lambda: _released(kc, q.ns, "rc-w-2"), what="the granted pod released")

            async def probe() -> dict[str, Any] | None:
                return next((w for w in await _owned_workloads(kc, q.ns, uid)
                             if w["metadata"]["annotations"].get(REPLACES) == f"{q.ns}/{second}"), None)

            waiting = await eventually(probe, what="the scale-up probe")
            assert [(ps["count"], ps.get("minCount")) for ps in waiting["spec"]["podSets"]] == [(1, None), (5, 3)]
            await _kuberay_status(kc, q.ns, 5)
            await asyncio.sleep(1.0)
            assert await _gates(kc, q.ns, "rc-w-3") == [ELASTIC], "beyond the granted pods: still gated"

            cq = await get(kc, "ClusterQueue", q.cq)
            cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 6
            await kc.replace(BY_KIND["ClusterQueue"], q.cq, cq)
            await eventually(lambda: _with_condition(kc, q.ns, waiting["metadata"]["name"], "Admitted", "True"),
                             what="the probe admitted")
            await eventually(lambda: _released(kc, q.ns, "rc-w-3", "rc-w-4"), what="the last pods released")
