"""An elastic Job on a ClusterQueue with a ProvisioningRequest check, against the real apiserver, under Kueue v0.20's
``ElasticJobsViaWorkloadSlicesForProvisioningRequests`` (alpha, off; KEP-14615).

The first slice (1 pod) gets a request for 1 pod; the test plays the autoscaler (Provisioned, the node pool in the
class details, which the config's podSetUpdates read into a node selector). The Job starts with the class
annotation on its template but neither the consume annotation nor the request's node selector: those go pod by
pod as the elastic-job gate is lifted, so the first pod names the first request and its node pool. Scaled to 3,
the new slice's request asks for the 2 pods it adds; once provisioned (another node pool) and the slice admitted,
the two new pods are released naming the second request and its pool, while the first keeps its own. A gated pod
already naming another request stays gated and is not counted.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import KUEUE, connect, create, eventually, get, job, kueue_es, queues, running

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.jobs import JOBS
from connectors.k8s.resources import PROVISIONING_REQUESTS
from connectors.k8s.workload_slices import slice_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
ELASTIC = "kueue.x-k8s.io/elastic-job"
CONSUMES = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS = "autoscaling.x-k8s.io/provisioning-class-name"
POOL = "example.com/node-pool"
CLASS_NAME = "queued-provisioning.gke.io"
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "featureGates": {"ElasticJobsViaWorkloadSlicesForProvisioningRequests": True}})


async def _check(kc: KubeClient, sfx: str) -> str:
    await create(kc, {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": f"prc-{sfx}"},
                      "spec": {"provisioningClassName": CLASS_NAME,
                               "podSetUpdates": {"nodeSelector": [{"key": POOL,
                                                                   "valueFromProvisioningClassDetail": "NodePool"}]}}})
    await create(kc, {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": f"prov-{sfx}"},
                      "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                               "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                              "name": f"prc-{sfx}"}}})
    return f"prov-{sfx}"


async def _request(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return msgspec.json.decode(await kc.get(PROVISIONING_REQUESTS, name, ns))
    except Exception:  # noqa: BLE001 - not there yet
        return None


async def _provision(kc: KubeClient, ns: str, name: str, pool: str) -> None:
    now = "2026-01-01T00:00:00Z"
    await kc.patch(PROVISIONING_REQUESTS, name, {"status": {
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted",
                        "lastTransitionTime": now},
                       {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "ready",
                        "lastTransitionTime": now}],
        "provisioningClassDetails": {"NodePool": pool}}}, ns, subresource="status")


def _pod(ns: str, name: str, owner: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod of Job ``owner`` as its job controller makes it from the started template (gated)."""
    uid = owner["metadata"]["uid"]
    template = owner["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {**template["metadata"].get("labels", {}),
                                    "batch.kubernetes.io/controller-uid": uid},
                         "annotations": {**template["metadata"].get("annotations", {}), **(annotations or {})},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                              "uid": uid, "controller": True}]},
            "spec": {"schedulingGates": [{"name": ELASTIC}],
                     **({"nodeSelector": template["spec"]["nodeSelector"]} if template["spec"].get("nodeSelector")
                        else {}),
                     "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}


async def _released(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    pod = await get(kc, "Pod", name, ns)
    return None if pod["spec"].get("schedulingGates") else pod


async def _admitted(kc: KubeClient, ns: str, name: str) -> bool:
    try:
        wl = await get(kc, "Workload", name, ns)
    except Exception:  # noqa: BLE001 - not there yet
        return False
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in wl.get("status", {}).get("conditions", []))


@pytest.mark.asyncio
async def test_each_scale_up_provisions_its_added_pods_and_they_take_its_identity(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        sfx = secrets.token_hex(3)
        check = await _check(kc, sfx)
        q = await queues(kc, "elastic-prov", {"cpu": 8}, sfx=sfx,
                         admissionChecksStrategy={"admissionChecks": [{"name": check}]})
        async with kueue_es(kc, tmp_path / "log", config=CONFIG):
            doc = job(q.ns, "ep", "user-queue", parallelism=1)
            doc["metadata"]["annotations"] = {ELASTIC: "true"}
            doc["spec"]["template"]["spec"]["schedulingGates"] = [{"name": ELASTIC}]
            del doc["spec"]["completions"]
            created = await create(kc, doc)
            uid = created["metadata"]["uid"]
            first = slice_name("Job", "batch", "ep", uid, created["metadata"]["generation"])
            pr1 = await eventually(lambda: _request(kc, q.ns, f"{first}-{check}-1"), what="the first request")
            assert [ps["count"] for ps in pr1["spec"]["podSets"]] == [1]
            await _provision(kc, q.ns, f"{first}-{check}-1", "pool-1")
            await eventually(lambda: running(kc, q.ns, "ep"), what="the Job started on its first slice")
            started = await get(kc, "Job", "ep", q.ns)
            tmeta, tspec = started["spec"]["template"]["metadata"], started["spec"]["template"]["spec"]
            assert tmeta["annotations"].get(CLASS) == CLASS_NAME, "the class is the same for every slice"
            assert CONSUMES not in tmeta["annotations"], "no request named on the shared template"
            assert POOL not in (tspec.get("nodeSelector") or {}), "no request's node pool on the shared template"

            await create(kc, _pod(q.ns, "ep-0", started))
            await kc.patch(JOBS, "ep", {"status": {"active": 1}}, q.ns, subresource="status")
            p0 = await eventually(lambda: _released(kc, q.ns, "ep-0"), what="the first pod released")
            assert p0["metadata"]["annotations"][CONSUMES] == f"{first}-{check}-1"
            assert p0["spec"]["nodeSelector"][POOL] == "pool-1"

            scaled = msgspec.json.decode(await kc.patch(JOBS, "ep", {"spec": {"parallelism": 3}}, q.ns))
            second = slice_name("Job", "batch", "ep", uid, scaled["metadata"]["generation"])
            pr2 = await eventually(lambda: _request(kc, q.ns, f"{second}-{check}-1"), what="the scale-up's request")
            assert [ps["count"] for ps in pr2["spec"]["podSets"]] == [2], "only the 2 added pods are provisioned"
            for i in (1, 2):
                await create(kc, _pod(q.ns, f"ep-{i}", started))
            # a pod already naming another request cannot take this one: left gated, counted for nothing
            await create(kc, _pod(q.ns, "ep-a", started, {CONSUMES: "elsewhere"}))
            await kc.patch(JOBS, "ep", {"status": {"active": 4}}, q.ns, subresource="status")
            await _provision(kc, q.ns, f"{second}-{check}-1", "pool-2")
            await eventually(lambda: _admitted(kc, q.ns, second), what="the scale-up slice admitted")
            for i in (1, 2):
                p = await eventually(lambda i=i: _released(kc, q.ns, f"ep-{i}"), what=f"ep-{i} released")
                assert p["metadata"]["annotations"][CONSUMES] == f"{second}-{check}-1"
                assert p["metadata"]["annotations"][CLASS] == CLASS_NAME
                assert p["spec"]["nodeSelector"][POOL] == "pool-2"
            assert await _released(kc, q.ns, "ep-a") is None, "the conflicting pod stays gated"
            p0 = await get(kc, "Pod", "ep-0", q.ns)
            assert p0["metadata"]["annotations"][CONSUMES] == f"{first}-{check}-1", "the first pod keeps its own"
            assert p0["spec"]["nodeSelector"][POOL] == "pool-1"
