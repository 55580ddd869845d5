"""v1beta1 served through kueue-es's conversion webhook, called by the real apiserver.

The CRDs are installed with ``conversion: Webhook`` pointing at a kueue-es webhook server on 127.0.0.1 (its
self-signed CA as the ``caBundle``). v1beta1 objects written the way Kueue's users wrote them — two
ClusterQueues sharing quota through ``spec.cohort``, a Workload whose priority comes from
``priorityClassName``/``priorityClassSource`` — are stored as v1beta2 and read back in either version; the
connector, which reads v1beta2 only, schedules them as Kueue would: the high-priority Workload, created last, is
admitted by borrowing from the cohort, the older low-priority one waits. A Workload's topology assignment written
as v1beta1 ``domains`` is stored as v1beta2 ``slices``; one that cannot be converted is refused with the
webhook's message naming the object and the field. The CRDs go back to strategy ``None`` at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, flavor, free_port, get, kueue_es, namespace

from connectors.k8s import crds
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import KubeError
from connectors.k8s.resources import BY_KIND, Resource
from connectors.k8s.webhook import WebhookServer, default_queue_lookup
from events import objects as o
from events import tas_assignment as tas

pytestmark = pytest.mark.kube
V1, V2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"
WPC_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"


def _v1beta1(kind: str) -> Resource:
    r = BY_KIND[kind]
    return Resource(r.kind, r.group, "v1beta1", r.plural, r.namespaced, status_subresource=r.status_subresource)


async def _create(kc, doc: dict[str, Any]) -> dict[str, Any]:
    kind, ns = doc["kind"], doc["metadata"].get("namespace", "")
    r = _v1beta1(kind) if doc["apiVersion"] == V1 else BY_KIND[kind]
    return msgspec.json.decode(await kc.create(r, doc, ns))


async def _read(kc, version: str, kind: str, name: str, ns: str = "") -> dict[str, Any]:
    r = _v1beta1(kind) if version == V1 else BY_KIND[kind]
    return msgspec.json.decode(await kc.get(r, name, ns))


def _cq(name: str, cohort: str, fl: str, cpu: int) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
        "cohort": cohort, "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"],
                            "flavors": [{"name": fl, "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}


def _workload(api_version: str, ns: str, name: str, lq: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": lq, **spec, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36",
                                                          "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def _reserved_in(wl: dict[str, Any]) -> str | None:
    return ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")


@pytest.mark.asyncio
async def test_v1beta1_objects_are_converted_stored_as_v1beta2_and_scheduled(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        bundle = self_signed(["127.0.0.1"])
        _, cert, key = bundle.write(tmp_path / "certs")
        server = WebhookServer(default_queue_lookup(kc))
        port = free_port()
        await server.start("127.0.0.1", port, str(cert), str(key))
        try:
            await crds.install(kc, docs=crds.all_crds(
                crds.webhook_conversion(bundle.ca_pem, url=f"https://127.0.0.1:{port}")))
            sfx = secrets.token_hex(3)
            ns = await namespace(kc, "conv")
            fl, cohort, cq_a, cq_b = f"f-{sfx}", f"co-{sfx}", f"a-{sfx}", f"b-{sfx}"

            # the apiserver takes the new conversion up asynchronously: a v1beta2 object reads as v1beta1 once
            probe = await _create(kc, {"apiVersion": V2, "kind": "ClusterQueue", "metadata": {
                "name": f"probe-{sfx}"}, "spec": {"cohortName": f"probe-{sfx}"}})

            async def converting() -> bool:
                with contextlib.suppress(KubeError):
                    v1 = await _read(kc, V1, "ClusterQueue", probe["metadata"]["name"])
                    return v1["spec"].get("cohort") == f"probe-{sfx}"
                return False

            await eventually(converting, 60, "the conversion webhook in effect")

            # --- v1beta1 objects as Kueue's users wrote them --------------------------------------------------
            await _create(kc, {**flavor(fl), "apiVersion": V1})
            await _create(kc, {"apiVersion": V1, "kind": "WorkloadPriorityClass", "metadata": {"name": f"high-{sfx}"},
                               "value": 1000})
            await _create(kc, _cq(cq_a, cohort, fl, 2))
            await _create(kc, _cq(cq_b, cohort, fl, 2))
            await _create(kc, {"apiVersion": V1, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns},
                               "spec": {"clusterQueue": cq_a}})
            await _create(kc, _workload(V2, ns, "low", "lq", "3", priority=0))
            await asyncio.sleep(1.1)  # creationTimestamp has whole seconds: "low" is strictly older
            high = await _create(kc, _workload(V1, ns, "high", "lq", "3", priorityClassName=f"high-{sfx}",
                                               priorityClassSource=WPC_SOURCE, priority=0))  # the class decides
            assert high["apiVersion"] == V1 and high["spec"]["priorityClassName"] == f"high-{sfx}"

            # stored as v1beta2, read back either way
            a2 = await _read(kc, V2, "ClusterQueue", cq_a)
            assert a2["spec"]["cohortName"] == cohort and "cohort" not in a2["spec"]
            a1 = await _read(kc, V1, "ClusterQueue", cq_a)
            assert a1["spec"]["cohort"] == cohort and "cohortName" not in a1["spec"]
            h2 = await _read(kc, V2, "Workload", "high", ns)
            assert h2["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                      "name": f"high-{sfx}"}
            assert "priorityClassName" not in h2["spec"] and "priorityClassSource" not in h2["spec"]
            h1 = await _read(kc, V1, "Workload", "high", ns)
            assert (h1["spec"]["priorityClassName"], h1["spec"]["priorityClassSource"]) == (f"high-{sfx}",
                                                                                            WPC_SOURCE)
            assert "priorityClassRef" not in h1["spec"]

            # --- the connector (v1beta2 only) schedules them: priority first, borrowing from the cohort ----------
            async with kueue_es(kc, tmp_path / "log"):
                async def admitted() -> dict[str, Any] | None:
                    wl = await get(kc, "Workload", "high", ns)
                    return wl if _reserved_in(wl) == cq_a else None

                wl = await eventually(admitted, 60, "the high-priority v1beta1 Workload admitted")
                (psa,) = wl["status"]["admission"]["podSetAssignments"]
                assert psa["flavors"] == {"cpu": fl} and psa["resourceUsage"] == {"cpu": "3"}, \
                    "3 cpu in a ClusterQueue of 2: borrowed from the cohort"
                await asyncio.sleep(2)
                low = await get(kc, "Workload", "low", ns)
                assert _reserved_in(low) is None, "one Workload of 3 fits in the cohort's 4"
                cond = next(c for c in low["status"]["conditions"] if c["type"] == "QuotaReserved")
                assert cond["status"] == "False" and "insufficient unused quota" in cond["message"]
            h1 = await _read(kc, V1, "Workload", "high", ns)
            assert h1["status"]["admission"]["clusterQueue"] == cq_a, "the status written as v1beta2 reads as v1beta1"

            # --- a topology assignment: v1beta1 domains in, v1beta2 slices stored ---------------------------------
            tas_wl = await _create(kc, _workload(V1, ns, "placed", "nowhere", "1"))
            domains = [o.TopologyDomainAssignment(values=[f"node-{i}"], count=2) for i in (1, 2, 3)]
            v1_ta = msgspec.to_builtins(o.TopologyAssignmentV1Beta1(levels=[tas.HOSTNAME_LEVEL], domains=domains))
            status = {"admission": {"clusterQueue": "nowhere", "podSetAssignments": [
                {"name": "main", "count": 6, "flavors": {"cpu": fl}, "topologyAssignment": v1_ta}]}}
            await kc.patch(_v1beta1("Workload"), "placed", {"status": status}, ns, subresource="status")
            stored = await _read(kc, V2, "Workload", "placed", ns)
            ta = stored["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
            assert ta == msgspec.to_builtins(tas.encode([tas.HOSTNAME_LEVEL], domains)) and "slices" in ta
            again = await _read(kc, V1, "Workload", "placed", ns)
            assert again["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == v1_ta

            # --- what cannot be converted is refused, naming the object and the field ----------------------------
            bad = {**v1_ta, "domains": [{"values": ["node-1", "extra"], "count": 1}]}
            refused_before = server.conversions_refused
            with pytest.raises(KubeError) as err:
                await kc.patch(_v1beta1("Workload"), tas_wl["metadata"]["name"], {"status": {"admission": {
                    "clusterQueue": "nowhere", "podSetAssignments": [{"name": "main", "topologyAssignment": bad}]}}},
                    ns, subresource="status")
            assert f"Workload {ns}/placed: field `status.admission.podSetAssignments[0].topologyAssignment" \
                   ".domains[0].values`: must have one value per level (1), has 2" in str(err.value)
            assert server.conversions_refused > refused_before
            assert server.conversions > 0
        finally:
            await crds.install(kc)  # strategy None again: the next tests do not depend on this server
            await server.stop()
