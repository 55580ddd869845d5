"""The TAS and ProvisioningRequest pieces of the connector, one at a time, against the real apiserver.

The log is built by hand (a Workload and the decisions), the cluster is real: what the pieces write, and how they
take the apiserver's answers (AlreadyExists, 404 for a kind that is not served, 409 on a stale pod).

* the request applier: templates, then the request, then the templates belong to the request; applying again
  (a restart before the outcome reached the log) changes nothing; a request of that name owned by another
  Workload is refused; a gone Workload rejects; delete by uid; a kind the apiserver does not serve waits (and
  the watcher lists it as empty);
* the ungater: one patch per pod until the log shows it; a pod changed since the log's version (409) is read and
  patched on its live version when the change is one the log does not keep (a label), else waits for the watch.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, get, namespace

from connectors.k8s import crds, provreqs, trim
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.provreqs import RequestApplier
from connectors.k8s.resources import BY_KIND, POD_TEMPLATES, PROVISIONING_REQUESTS, Resource
from connectors.k8s.ungater import Ungater
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.tas_assignment import encode
from projections.workloads import ADMITTED, RESERVED

pytestmark = pytest.mark.kube
PODS = BY_KIND["Pod"]
HOST = "kubernetes.io/hostname"
GATE = {"name": "kueue.x-k8s.io/topology"}


def _workload(ns: str, uid: str) -> o.Workload:
    """As the apiserver would show it once its reservation is written (the applier creates a request only then,
    as Kueue: tests/integration/kube/test_provreq_after_reservation.py)."""
    return o.Workload(metadata=o.ObjectMeta(name="wl", namespace=ns, uid=uid, resource_version="1"),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]),
                      status=o.WorkloadStatus(
                          conditions=[o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved")],
                          admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
                              o.PodSetAssignment(name="main", count=2)]),
                          admission_checks=[o.AdmissionCheckState(name="prov", state="Pending")]))


async def _journal(ns: str, uid: str, *events: ev.AnyEvent) -> LocalJournal:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=f"{ns}/wl", uid=uid, obj=_workload(ns, uid)), *events])
    return journal


def _created(ns: str, uid: str) -> ev.ProvisioningRequestCreated:
    owner = o.OwnerReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload", name="wl", uid=uid,
                             controller=True, block_owner_deletion=True)
    template = o.PodTemplate(
        api_version="v1", metadata=o.ObjectMeta(name="ppt-wl-prov-1-main", namespace=ns, owner_references=[owner]),
        template=o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(
            name="c", image="busybox:1.36", resources=o.ResourceRequirements(requests={"cpu": "1"}))])))
    request = o.ProvisioningRequest(
        api_version="autoscaling.x-k8s.io/v1",
        metadata=o.ObjectMeta(name="wl-prov-1", namespace=ns, labels={"kueue.x-k8s.io/managed": "true"},
                              owner_references=[owner]),
        spec=o.ProvisioningRequestSpec(provisioning_class_name="check-capacity.autoscaling.x-k8s.io", pod_sets=[
            o.ProvisioningRequestPodSet(pod_template_ref=o.PodTemplateRef(name="ppt-wl-prov-1-main"), count=2)]))
    return ev.ProvisioningRequestCreated(time=2, key=f"{ns}/wl", uid=uid, cycle=1, input=0, check="prov",
                                         attempt=1, request=request, pod_templates=[template])


async def _stored_workload(kc, ns: str) -> str:
    """The Workload ``wl`` the decisions are about, made in the apiserver (the applier reads it there for the pod
    set's whole template, as Kueue writes it into the PodTemplate): its uid."""
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wl", "namespace": ns},
           "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [
               {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}}]}}
    return (await create(kc, doc))["metadata"]["uid"]


async def _outcomes(journal: LocalJournal) -> list[tuple[str, int, str]]:
    return [(type(r.event).__name__, r.event.decision, getattr(r.event, "reason", ""))
            async for r in journal.log.read() if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]


async def _get(kc, resource: Resource, name: str, ns: str) -> dict[str, Any]:
    return msgspec.json.decode(await kc.get(resource, name, ns))


@pytest.mark.asyncio
async def test_a_podtemplate_made_beforehand_at_the_derived_name_is_replaced(kube_apiserver) -> None:
    """EnforceProvisioningPodTemplateContents (beta, on): a PodTemplate someone made at the predictable name, asking
    other resources, is replaced by the derived one before the request refers to it."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        ns = await namespace(kc, "provreq-squat")
        uid = await _stored_workload(kc, ns)
        squat = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "ppt-wl-prov-1-main"},
                 "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                       "resources": {"requests": {"cpu": "64"}}}]}}}
        before = msgspec.json.decode(await kc.create(POD_TEMPLATES, squat, ns))
        journal = await _journal(ns, uid, _created(ns, uid))
        await RequestApplier(kc, journal).apply_pending()
        template = await _get(kc, POD_TEMPLATES, "ppt-wl-prov-1-main", ns)
        assert template["metadata"]["uid"] != before["metadata"]["uid"]
        assert template["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
        assert template["metadata"]["ownerReferences"][0]["kind"] == "ProvisioningRequest"
        assert await _outcomes(journal) == [("DecisionApplied", 1, "")]


@pytest.mark.asyncio
async def test_request_applier_against_the_apiserver(kube_apiserver, monkeypatch) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        ns = await namespace(kc, "provreq")
        uid = await _stored_workload(kc, ns)

        journal = await _journal(ns, uid, _created(ns, uid))
        await RequestApplier(kc, journal).apply_pending()
        request = await _get(kc, PROVISIONING_REQUESTS, "wl-prov-1", ns)
        template = await _get(kc, POD_TEMPLATES, "ppt-wl-prov-1-main", ns)
        assert request["metadata"]["ownerReferences"][0]["uid"] == uid
        assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": "ppt-wl-prov-1-main"}, "count": 2}]
        assert template["metadata"]["ownerReferences"] == [{
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "name": "wl-prov-1",
            "uid": request["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        assert template["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
        assert await _outcomes(journal) == [("DecisionApplied", 1, "")]
        assert not journal.mirror.request_decisions

        # a restart before the outcome reached the log: the same decision again changes nothing (the template as
        # the apiserver defaulted it is alike the derived one: kept, EnforceProvisioningPodTemplateContents or not)
        again = await _journal(ns, uid, _created(ns, uid))
        await RequestApplier(kc, again).apply_pending()
        assert (await _get(kc, PROVISIONING_REQUESTS, "wl-prov-1", ns))["metadata"]["resourceVersion"] == \
            request["metadata"]["resourceVersion"]
        assert (await _get(kc, POD_TEMPLATES, "ppt-wl-prov-1-main", ns))["metadata"]["uid"] == \
            template["metadata"]["uid"]
        assert await _outcomes(again) == [("DecisionApplied", 1, "")]

        # a Workload no longer there under the decision's uid (made again under its name): rejected, nothing written
        stranger = await _journal(ns, "another-uid", _created(ns, "another-uid"))
        await RequestApplier(kc, stranger).apply_pending()
        assert await _outcomes(stranger) == [("DecisionRejected", 1, "NotFound")]

        # the same name, but the request belongs to another Workload (this one, made again): refused
        await kc.delete(BY_KIND["Workload"], "wl", ns)
        again_uid = await _stored_workload(kc, ns)
        recreated = await _journal(ns, again_uid, _created(ns, again_uid))
        await RequestApplier(kc, recreated).apply_pending()
        assert await _outcomes(recreated) == [("DecisionRejected", 1, "AlreadyExists")]

        # the Workload is gone before the request could be made: rejected, nothing written
        gone = await _journal(ns, "gone-uid", _created(ns, "gone-uid"))
        await gone.append([ev.ObjectDeleted(time=3, key=f"{ns}/wl", uid="gone-uid", kind="Workload")])
        await RequestApplier(kc, gone).apply_pending()
        assert await _outcomes(gone) == [("DecisionRejected", 1, "NotFound")]

        # deletes: another instance's uid (gone already), this one's, and one never created — all applied
        def deleted(name: str, request_uid: str) -> ev.ProvisioningRequestDeleted:
            return ev.ProvisioningRequestDeleted(time=4, key=f"{ns}/wl", uid=uid, cycle=2, input=2, name=name,
                                                 namespace=ns, reason="Finished", request_uid=request_uid)

        await journal.append([deleted("wl-prov-1", "an-older-instance"), deleted("wl-prov-1", request["metadata"]["uid"]),
                              deleted("wl-prov-9", "")])
        await RequestApplier(kc, journal).apply_pending()
        assert [d for _, d, _ in await _outcomes(journal)] == [1, 3, 4, 5]
        assert not journal.mirror.request_decisions
        with pytest.raises(Exception, match="404"):
            await kc.get(PROVISIONING_REQUESTS, "wl-prov-1", ns)

        # an apiserver that does not serve the kind (no autoscaler CRD): the decision waits, nothing is rejected
        monkeypatch.setattr(provreqs, "PROVISIONING_REQUESTS", Resource(
            "ProvisioningRequest", "autoscaling.x-k8s.io", "v0notserved", "provisioningrequests", True, optional=True))
        made = _created(ns, again_uid)
        waiting = await _journal(ns, again_uid, msgspec.structs.replace(made, request=msgspec.structs.replace(
            made.request, metadata=msgspec.structs.replace(made.request.metadata, name="wl-prov-2"))))
        applier = RequestApplier(kc, waiting)
        await applier.apply_pending()
        assert await _outcomes(waiting) == [] and applier.stats.errors == 1 and waiting.mirror.request_decisions
        # ... and the watcher lists such a kind as empty instead of never syncing
        watcher = Watcher(kc, waiting.mirror, waiting.append)
        assert await watcher.relist(provreqs.PROVISIONING_REQUESTS) is None
        assert watcher.stats.listed["ProvisioningRequest"] == 0


async def _gated_pod(kc, ns: str, name: str) -> o.Pod:
    raw = await create(kc, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/podset": "main"},
        "annotations": {"kueue.x-k8s.io/workload": "wl"}},
        "spec": {"schedulingGates": [GATE, {"name": "example.com/other"}],
                 "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    return msgspec.convert(raw, o.Pod)


async def _ungater(kc, ns: str, phase: str) -> tuple[LocalJournal, Ungater]:
    journal = await _journal(ns, "wl-uid")
    info = journal.mirror.state.workloads[f"{ns}/wl"]
    ta = encode([HOST], [o.TopologyDomainAssignment(values=["n1"], count=1),
                         o.TopologyDomainAssignment(values=["n2"], count=1)])
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", count=2, topology_assignment=ta)])
    info.phase = phase
    return journal, Ungater(kc, journal)


async def _observe(journal: LocalJournal, *pods: o.Pod) -> None:
    await journal.append([ev.ObjectUpserted(time=2, key=p.key, uid=p.metadata.uid, obj=p) for p in pods])


@pytest.mark.asyncio
async def test_ungater_patches_each_pod_once_and_waits_on_conflicts(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "ungate")
        a, b = await _gated_pod(kc, ns, "a"), await _gated_pod(kc, ns, "b")

        journal, ungater = await _ungater(kc, ns, RESERVED)
        await _observe(journal, a, b)
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.ungated == 0, "quota reserved only: nothing runs yet"

        journal, ungater = await _ungater(kc, ns, ADMITTED)
        await _observe(journal, a, b)
        assert ungater._take() == {f"{ns}/wl"}
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.ungated == 2
        for name, node in (("a", "n1"), ("b", "n2")):
            spec = (await get(kc, "Pod", name, ns))["spec"]
            assert spec["schedulingGates"] == [{"name": "example.com/other"}] and spec["nodeSelector"] == {HOST: node}
        # the log still shows both gated (no watch here): planning again would place them again — it does not
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.ungated == 2 and ungater.stats.conflicts == 0

        # a third pod, and the log shows the first two ungated: no free slot, nothing to do
        c = await _gated_pod(kc, ns, "c")
        fresh = [msgspec.convert(await get(kc, "Pod", n, ns), o.Pod) for n in ("a", "b")]
        await _observe(journal, *fresh, c)
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.ungated == 2

        # a pod changed since the version in the log in a way the log does not keep (a label): the watch drops that
        # version, the patch on the log's version meets 409, and the ungater reads the pod and patches it on its
        # live version (the pod would stay gated for good otherwise)
        d = await _gated_pod(kc, ns, "d")
        journal, ungater = await _ungater(kc, ns, ADMITTED)
        await _observe(journal, _kept(d))
        labelled = msgspec.json.decode(await kc.patch(PODS, "d", {"metadata": {"labels": {"team": "a"}}}, ns),
                                       type=o.Pod)
        assert Watcher(kc, journal.mirror, journal.append)._upsert(PODS, _kept(labelled), 3) is None, "dropped"
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.conflicts == 1 and ungater.stats.ungated == 1
        d_now = await get(kc, "Pod", "d", ns)
        assert d_now["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
        assert d_now["spec"]["nodeSelector"] == {HOST: "n1"} and d_now["metadata"]["labels"]["team"] == "a"

        # one changed in a way the log keeps (its other gate lifted): 409, and it waits for the newer version
        e = await _gated_pod(kc, ns, "e")
        journal, ungater = await _ungater(kc, ns, ADMITTED)
        await _observe(journal, _kept(e))
        await kc.patch(PODS, "e", {"spec": {"schedulingGates": [GATE]}}, ns)
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.conflicts == 1 and ungater.stats.ungated == 0
        assert (await get(kc, "Pod", "e", ns))["spec"]["schedulingGates"] == [GATE]
        await _observe(journal, _kept(msgspec.convert(await get(kc, "Pod", "e", ns), o.Pod)))
        assert f"{ns}/wl" in ungater._take()
        await ungater.sync(f"{ns}/wl")
        assert ungater.stats.ungated == 1
        e_now = (await get(kc, "Pod", "e", ns))["spec"]
        assert "schedulingGates" not in e_now and e_now["nodeSelector"] == {HOST: "n1"}


def _kept(pod: o.Pod) -> o.Pod:
    """What the watch appends of ``pod``."""
    view = trim.view(pod)
    assert isinstance(view, o.Pod)
    return view
