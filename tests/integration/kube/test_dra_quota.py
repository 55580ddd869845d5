"""On a real apiserver: Jobs whose pods claim devices through a ResourceClaimTemplate are charged for them.

The connector watches ResourceClaimTemplates (resource.k8s.io/v1, with the RBAC the manifests grant); the
Configuration's ``resources.deviceClassMappings`` charges DeviceClass ``gpu.example.com`` as ``example.com/gpu``
(KueueDRAIntegration, beta, on). The template asks for 2 devices per pod and the ClusterQueue has 3: the first
Job is admitted holding 2, the second waits for quota, its message naming the devices. Deleting the template
makes the waiting one inadmissible with Kueue's "not found" error; recreating it with 1 device per pod gets it
admitted with 1.

Extended resources backed by DRA (KueueDRAIntegrationExtendedResource, beta, on): the connector watches
DeviceClasses too; a Job whose pod asks for ``example.com/dev`` waits while the ClusterQueue, which covers only the
mapped ``example.com/devs``, does not cover it, and is admitted holding ``example.com/devs`` once a DeviceClass
serving ``example.com/dev`` (mapped to ``example.com/devs``) is created.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube

GPU = "example.com/gpu"
CONFIG = load_config({"resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.example.com"]}]}})


def _template(ns: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": count}}]}}}}


def _job(ns: str, name: str) -> dict[str, Any]:
    """A suspended Job for ``user-queue`` whose pod asks for 100m cpu and claims devices from ``gpus``."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpus"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "10"],
                            "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]}}},
    }


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.mark.asyncio
async def test_devices_claimed_through_a_template_are_charged_to_quota(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, _, _ = await queues(kc, "dra", {"cpu": 10, GPU: 3})
        await create(kc, _template(ns, 2))
        async with kueue_es(kc, tmp_path / "log", config=CONFIG) as (_, journal):

            async def workload(job: dict[str, Any], want: str, message: str = "") -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", workload_name(job["metadata"]["name"], job["metadata"]["uid"]), ns)
                    c = _cond(wl, "QuotaReserved")
                    if c is not None and (c["status"] == "True" if want == "admitted" else c["reason"] == want) \
                            and message in c["message"]:
                        return wl
                return None

            def usage(wl: dict[str, Any]) -> dict[str, str]:
                return wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]

            first = await create(kc, _job(ns, "first"))
            wl = await eventually(lambda: workload(first, "admitted"), what="the first Job's Workload admitted")
            assert usage(wl) == {"cpu": "100m", GPU: "2"}
            assert wl["spec"]["podSets"][0]["template"]["spec"]["resourceClaims"] == [
                {"name": "gpu", "resourceClaimTemplateName": "gpus"}]
            assert await eventually(lambda: _unsuspended(kc, ns, "first"), what="the first Job running")

            second = await create(kc, _job(ns, "second"))
            wl = await eventually(lambda: workload(second, "WaitingForQuota"), what="the second Job waiting for quota")
            assert f"insufficient unused quota for {GPU} in flavor" in _cond(wl, "QuotaReserved")["message"]
            assert (await get(kc, "Job", "second", ns))["spec"]["suspend"] is True

            await kc.delete(BY_KIND["ResourceClaimTemplate"], "gpus", ns)
            wl = await eventually(lambda: workload(second, "DRAResourcesUnresolved", "resourceclaimtemplates.resource"
                                                   '.k8s.io "gpus" not found'),
                                  what="the second Job inadmissible without its template")
            requeued = _cond(wl, "Requeued")
            assert requeued is not None and (requeued["status"], requeued["reason"]) == (
                "False", "DRAResourcesUnresolved")

            await create(kc, _template(ns, 1))
            wl = await eventually(lambda: workload(second, "admitted"), what="the second Job admitted with 1 device")
            assert usage(wl) == {"cpu": "100m", GPU: "1"}
            requeued = _cond(wl, "Requeued")
            assert requeued is not None and (requeued["status"], requeued["reason"]) == ("True", "DRAResourcesResolved")
            wl = await workload(first, "admitted")
            assert wl is not None and usage(wl) == {"cpu": "100m", GPU: "2"}  # admitted: keeps what it holds
            assert "gpus" in {k.partition("/")[2] for k in journal.mirror.state.claim_templates}


EXTENDED_CONFIG = load_config({"resources": {"deviceClassMappings": [
    {"name": "example.com/devs", "deviceClassNames": ["dev.example.com"]}]}})


@pytest.mark.asyncio
async def test_an_extended_resource_a_device_class_serves_is_charged_as_its_devices(kube_apiserver, tmp_path) -> None:
    """The Job requests the extended resource: Kueue looks for a DeviceClass serving it only when a container's
    requests name it (a limit alone leaves it an ordinary request, as tests/projections/test_proj_dra_extended.py
    shows)."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, _, _ = await queues(kc, "dra-ext", {"cpu": 10, "example.com/devs": 2})
        async with kueue_es(kc, tmp_path / "log", config=EXTENDED_CONFIG) as (_, journal):
            job = {"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "ext", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
                   "spec": {"suspend": True, "parallelism": 2, "completions": 2, "template": {"spec": {
                       "restartPolicy": "Never",
                       "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "10"],
                                       "resources": {"requests": {"cpu": "100m", "example.com/dev": "1"},
                                                     "limits": {"example.com/dev": "1"}}}]}}}}
            job = await create(kc, job)
            name = workload_name("ext", job["metadata"]["uid"])

            async def reserved(want: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, ns)
                    c = _cond(wl, "QuotaReserved")
                    if c is not None and (c["status"] == "True" if want == "admitted" else c["reason"] == want):
                        return wl
                return None

            await eventually(lambda: reserved("NoMatchingFlavor"), what="the Job waiting: example.com/dev not covered")
            dc = await create(kc, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                   "metadata": {"name": "dev.example.com"},
                                   "spec": {"extendedResourceName": "example.com/dev"}})
            try:
                assert dc["spec"]["extendedResourceName"] == "example.com/dev"
                wl = await eventually(lambda: reserved("admitted"), what="the Job admitted on the class's devices")
                assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {
                    "cpu": "200m", "example.com/devs": "2"}
                assert "dev.example.com" in journal.mirror.state.device_classes
            finally:
                await kc.delete(BY_KIND["DeviceClass"], "dev.example.com")


async def _unsuspended(kc: Any, ns: str, name: str) -> bool:
    return not (await get(kc, "Job", name, ns))["spec"].get("suspend")
