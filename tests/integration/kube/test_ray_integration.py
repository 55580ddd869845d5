"""Kueue's Ray integrations against the real apiserver, with ``ray.io/rayjob`` and ``ray.io/raycluster`` among the
frameworks.

KubeRay is not installed: the ray.io/v1 API is served from the minimal CRDs of :func:`connectors.k8s.crds.rayjob_crd`
and :func:`connectors.k8s.crds.raycluster_crd` and no operator runs, so the test plays it (writes the RayJob's
deployment status through the status subresource). A queued RayJob gets its Workload (Kueue's name; ``head``,
the worker group and ``submitter`` pod sets), is admitted and unsuspended with the flavor's node labels in the head's
and the worker group's templates; a queued RayCluster created meanwhile gets its Workload and waits for the quota;
once the RayJob's deployment is ``Complete`` its Workload finishes with the RayJob's message, and the RayCluster is
admitted and unsuspended in its turn.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, finished_condition, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from connectors.k8s.resources import RAYCLUSTERS, RAYJOBS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"


def _template(cpu: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def _cluster_spec() -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": _template("1")},
            "workerGroupSpecs": [{"groupName": "Workers", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
                                  "rayStartParams": {}, "template": _template("1")}]}


def _rayjob(ns: str) -> dict[str, Any]:
    return {"apiVersion": RAYJOBS.api_version, "kind": "RayJob",
            "metadata": {"name": "job", "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"suspend": True, "shutdownAfterJobFinishes": True, "entrypoint": "python -c 'print(1)'",
                     "rayClusterSpec": _cluster_spec()}}


def _raycluster(ns: str) -> dict[str, Any]:
    return {"apiVersion": RAYCLUSTERS.api_version, "kind": "RayCluster",
            "metadata": {"name": "cluster", "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"suspend": True, **_cluster_spec()}}


@pytest.mark.asyncio
async def test_a_queued_rayjob_and_raycluster_run_only_while_their_workloads_are_admitted(kube_apiserver,
                                                                                          tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.rayjob_crd(), crds.raycluster_crd()])
        q = await queues(kc, "ray", {"cpu": 4, "memory": "1Gi"}, flavor_labels={"pool": "a"})
        job = msgspec.json.decode(await kc.create(RAYJOBS, _rayjob(q.ns), q.ns))
        assert job["spec"]["submissionMode"] == "K8sJobMode", "defaulted as KubeRay's CRD does"
        # play KubeRay: a suspended RayJob's deployment is Suspended
        await kc.patch(RAYJOBS, "job", {"status": {"jobDeploymentStatus": "Suspended"}}, q.ns, subresource="status")
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_job = rj.workload_name("job", job["metadata"]["uid"])

            async def admitted(name: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, q.ns)
                    return wl if wl.get("status", {}).get("admission") else None
                return None

            wl = await eventually(lambda: admitted(wl_job), what="the RayJob's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [
                ("head", 1), ("workers", 2), ("submitter", 1)]
            submitter = wl["spec"]["podSets"][2]["template"]["spec"]["containers"][0]
            assert (submitter["name"], submitter["image"]) == ("ray-job-submitter", "rayproject/ray:2.9.0")
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "RayJob"

            async def started(resource: Any, name: str) -> dict[str, Any] | None:
                obj = msgspec.json.decode(await kc.get(resource, name, q.ns))
                return obj if obj["spec"].get("suspend") is False else None

            ray_job = await eventually(lambda: started(RAYJOBS, "job"), what="the RayJob unsuspended")
            cluster_spec = ray_job["spec"]["rayClusterSpec"]
            for name, template in (("head", cluster_spec["headGroupSpec"]["template"]),
                                   ("workers", cluster_spec["workerGroupSpecs"][0]["template"])):
                assert template["spec"]["nodeSelector"] == {"pool": "a"}, name
                assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == name
            assert cluster_spec["workerGroupSpecs"][0]["maxReplicas"] == 4, "the worker group kept whole"

            # a RayCluster queued meanwhile: its Workload waits for the quota the RayJob holds
            cluster = msgspec.json.decode(await kc.create(RAYCLUSTERS, _raycluster(q.ns), q.ns))
            wl_cluster = rc.workload_name("cluster", cluster["metadata"]["uid"])

            async def pending() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", wl_cluster, q.ns)
                    return wl if "admission" not in wl.get("status", {}) else None
                return None

            wl = await eventually(pending, what="the RayCluster's workload, pending")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2)]

            # play KubeRay: the RayJob completed
            await kc.patch(RAYJOBS, "job", {"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                                                       "message": "Job finished successfully."}},
                           q.ns, subresource="status")

            cond = await finished_condition(kc, wl_job, q.ns, "the RayJob's workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", "Job finished successfully.")
            await eventually(lambda: admitted(wl_cluster), what="the RayCluster's workload admitted in its turn")
            ray_cluster = await eventually(lambda: started(RAYCLUSTERS, "cluster"), what="the RayCluster started")
            assert ray_cluster["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
