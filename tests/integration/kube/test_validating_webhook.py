"""The validating webhooks for Kueue's kinds, served over HTTPS by kueue-es and called by the real apiserver.

Registered with an objectSelector on this test's label, so other tests sharing the cluster never reach them. An
invalid ClusterQueue, Workload (a pod template label, the ``pods`` resource) and Topology (a level twice) are
refused with a message naming the object and the field (a rule of Kueue's CRDs as the apiserver refuses it, 422
Invalid; one of Kueue's webhooks 403 Forbidden), valid ones are created; a LocalQueue's ``clusterQueue``
and a Topology's ``levels`` stay as they were; a Workload holding quota (written through the
status subresource, which the webhook validates too) keeps its pod sets, the apiserver handing the webhook the old
object; and a gate turned off in the Configuration lets through what it governs.
"""

from __future__ import annotations

import copy
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import (
    KUEUE,
    NOW,
    cluster_queue,
    complete_job,
    connect,
    create,
    eventually,
    flavor,
    get,
    job,
    kueue_es,
    lax_crd,
    local_queue,
    namespace,
    queues,
    refused,
    running,
    schema_takes,
    validating_webhooks,
)

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden, Invalid
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube
LABEL = "kueue-es-validation-test"


def _workload(ns: str, name: str, sfx: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "labels": {LABEL: sfx}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
                "metadata": {"labels": labels or {}},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1"}}}]}}}]}}


def _served(kc, tmp_path, sfx: str, feature_gates: dict[str, bool]):
    """The validating webhooks, for objects labelled ``sfx``."""
    probe = cluster_queue(f"probe-{sfx}", {"f": {"cpu": 1}}, queueingStrategy="Sometimes")
    probe["metadata"]["labels"] = {LABEL: sfx}
    return validating_webhooks(kc, tmp_path / f"certs-{len(feature_gates)}", f"kueue-es-validation-{sfx}",
                               {"matchLabels": {LABEL: sfx}}, probe, feature_gates)


@pytest.mark.asyncio
async def test_invalid_kueue_objects_are_refused_naming_the_field(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns = await namespace(kc, "vwh")
        fl, cq = f"f-{sfx}", f"cq-{sfx}"
        await create(kc, flavor(fl))
        async with _served(kc, tmp_path, sfx, {}) as server:
            # --- ClusterQueue: an admission check on a flavor the queue does not have ----------------------------
            bad_cq = cluster_queue(cq, {fl: {"cpu": 4}},
                                   admissionChecksStrategy={"admissionChecks": [{"name": "ac", "onFlavors": ["x"]}]})
            bad_cq["metadata"]["labels"] = {LABEL: sfx}
            message = await refused(kc, bad_cq)
            assert 'admission webhook "vclusterqueue.kb.io" denied the request' in message
            assert (f"ClusterQueue {cq}: field `spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]`: "
                    f'Unsupported value: "x": supported values: "{fl}"') in message
            good_cq = copy.deepcopy(bad_cq)
            good_cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] = [fl]
            await create(kc, good_cq)

            # --- Workload: a pod template label Kubernetes would refuse on a pod ---------------------------------
            message = await refused(kc, _workload(ns, "bad", sfx, labels={"app": "a b"}))
            assert 'admission webhook "vworkload.kb.io" denied the request' in message
            assert (f"Workload {ns}/bad: field `spec.podSets[0].template.metadata.labels`: Invalid value: \"a b\": "
                    "a valid label must be an empty string") in message
            await create(kc, _workload(ns, "good", sfx, labels={"app": "a-b"}))
            reserved = _workload(ns, "pods", sfx)
            reserved["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"pods": "1"}
            assert (f"Workload {ns}/pods: field `spec.podSets[0].template.spec.containers[0].resources.limits[pods]`: "
                    'Invalid value: "pods": the key is reserved for internal kueue use') in await refused(kc, reserved)

            # --- Topology: levels unique on create, kept on update (CEL rules of Kueue's CRD) ----------------------
            topo = {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": f"topo-{sfx}", "labels": {LABEL: sfx}},
                    "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}}
            with pytest.raises(Invalid) as invalid:  # the apiserver's answer to a CRD's rule: 422, reason Invalid
                await create(kc, topo)
            assert invalid.value.reason == "Invalid" and str(invalid.value).endswith(
                f'admission webhook "vtopology.kb.io" denied the request: Topology.kueue.x-k8s.io "topo-{sfx}" is '
                "invalid: spec.levels: must be unique")
            topo["spec"]["levels"] = [{"nodeLabel": "block"}, {"nodeLabel": "rack"}]
            await create(kc, topo)
            with pytest.raises(Invalid, match=rf'"topo-{sfx}" is invalid: spec.levels: field is immutable'):
                await kc.patch(BY_KIND["Topology"], f"topo-{sfx}", {"spec": {"levels": [{"nodeLabel": "block"}]}})
            await kc.delete(BY_KIND["Topology"], f"topo-{sfx}")

            # --- updates: a LocalQueue's ClusterQueue, the pod sets of a Workload holding quota -------------------
            lq = local_queue(ns, "lq", cq)
            lq["metadata"]["labels"] = {LABEL: sfx}
            await create(kc, lq)
            # a CEL rule's words
            with pytest.raises(Invalid, match=r'LocalQueue.kueue.x-k8s.io "lq" is invalid: '
                                              r'spec.clusterQueue: Invalid value: "string": '
                                              r'field is immutable'):
                await kc.patch(BY_KIND["LocalQueue"], "lq", {"spec": {"clusterQueue": "other"}}, ns)
            await kc.patch(BY_KIND["Workload"], "good", {"status": {
                "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                "message": "Quota reserved in ClusterQueue " + cq, "lastTransitionTime": NOW}],
                "admission": {"clusterQueue": cq, "podSetAssignments": [
                    {"name": "main", "flavors": {"cpu": fl}, "resourceUsage": {"cpu": "1"}, "count": 1}]}}},
                ns, subresource="status")
            held = msgspec.json.decode(await kc.get(BY_KIND["Workload"], "good", ns))
            held["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"] = "other"
            with pytest.raises(Forbidden,
                               match=rf"Workload {ns}/good: field `spec.podSets\.0`: field is immutable"):
                await kc.replace(BY_KIND["Workload"], "good", held, ns)
            assert server.validations_refused >= 7 and server.validations > server.validations_refused

        # --- a gate off lets through what it governs -----------------------------------------------------------
        sfx2 = secrets.token_hex(3)
        async with _served(kc, tmp_path, sfx2, {"WorkloadValidationForPodSetMetadata": False}):
            await create(kc, _workload(ns, "unchecked", sfx2, labels={"app": "a b"}))


@pytest.mark.asyncio
async def test_kueue_es_own_workload_writes_pass_the_webhook(kube_apiserver, tmp_path) -> None:
    """Every Workload kueue-es writes goes through the validating webhook in a cluster: the Workload it creates for
    a Job, the reservation and admission, the eviction of a deactivated one, the finish of a completed one. None
    may be refused (it would hold the workload up for good)."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "vwl", {"cpu": 2})
        job_uid = "kueue.x-k8s.io/job-uid"
        probe = _workload(q.ns, "probe", q.sfx, labels={"app": "a b"})
        probe["metadata"]["labels"] = {job_uid: "probe"}
        selected = {"matchExpressions": [{"key": job_uid, "operator": "Exists"}]}  # the Workloads of Jobs
        async with validating_webhooks(kc, tmp_path / "certs", f"kueue-es-own-writes-{q.sfx}", selected, probe,
                                       {}) as server:
            refused_before, seen_before = server.validations_refused, server.validations
            async with kueue_es(kc, tmp_path / "log"):
                uids = {n: (await create(kc, job(q.ns, n, "user-queue")))["metadata"]["uid"]
                        for n in ("done", "off")}
                for n in uids:
                    await eventually(lambda n=n: running(kc, q.ns, n), what=f"{n} started")
                await complete_job(kc, q.ns, "done")
                await kc.patch(BY_KIND["Workload"], workload_name("off", uids["off"]), {"spec": {"active": False}},
                               q.ns)

                async def settled() -> bool:
                    done = await get(kc, "Workload", workload_name("done", uids["done"]), q.ns)
                    off = await get(kc, "Workload", workload_name("off", uids["off"]), q.ns)
                    finished = any(c["type"] == "Finished" and c["status"] == "True"
                                   for c in done["status"].get("conditions", []))
                    return finished and "admission" not in off["status"] and not await running(kc, q.ns, "off")

                await eventually(settled, timeout=60, what="one finished, the other evicted and stopped")
            assert server.validations_refused == refused_before, "kueue-es refused its own write"
            assert server.validations >= seen_before + 6, "created, reserved, admitted, finished, evicted, ..."


@pytest.mark.asyncio
async def test_a_workload_stored_under_a_laxer_crd_takes_its_status_writes(kube_apiserver, tmp_path) -> None:
    """A Workload an older, laxer CRD stored with a topology level name over 63 characters: the apiserver
    ratchets the marker on an update leaving it as it was, and so does the webhook, which the status
    subresource calls too (else kueue-es could no longer admit, evict or finish it)."""
    async with await connect(kube_apiserver) as kc:
        sfx = secrets.token_hex(3)
        ns = await namespace(kc, "vratchet")
        await crds.install(kc, docs=[lax_crd("Workload", "spec.podSets[].topologyRequest.required")])
        stored = _workload(ns, "w", sfx)
        stored["spec"]["podSets"][0]["topologyRequest"] = {"required": "r" * 64}
        await schema_takes(kc, stored)
        await create(kc, stored)
        await crds.install(kc)  # the marker back
        await schema_takes(kc, stored, False)
        async with _served(kc, tmp_path, sfx, {}) as server:
            seen, refused_before = server.validations, server.validations_refused
            check = {"name": "ac", "state": "Pending", "lastTransitionTime": NOW, "message": ""}
            await kc.patch(BY_KIND["Workload"], "w", {"status": {"admissionChecks": [check]}}, ns,
                           subresource="status")
            await kc.patch(BY_KIND["Workload"], "w", {"metadata": {"labels": {"team": "a"}}}, ns)
            # at least the two writes reached the webhook (another connector's write may too), none refused
            assert server.validations >= seen + 2 and server.validations_refused == refused_before
