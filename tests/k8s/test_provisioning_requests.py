"""Applying the ProvisioningRequest check's decisions, against an in-memory apiserver stand-in (no cluster).

The stand-in keeps objects by path and answers create / get / merge-patch / delete with the apiserver's status
codes; what it cannot show (admission, watch) the kube integration tests do (``tests/integration/kube``).
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

from connectors.k8s import crds
from connectors.k8s.client import ListMeta, RawList
from connectors.k8s.errors import AlreadyExists, Conflict, NotFound, from_response
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.provreqs import RequestApplier
from connectors.k8s.resources import BY_KIND, POD_TEMPLATES, PROVISIONING_REQUESTS
from connectors.k8s.watch import Watcher
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]))
OWNER = o.OwnerReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload", name="wl", uid="wl-uid",
                         controller=True, block_owner_deletion=True)


class FakeKube:
    """Objects by path; merge patches; uid preconditions on delete; a kind can be 'not served'."""

    def __init__(self, served: bool = True) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.served = served
        self._uids = itertools.count(1)

    def _check(self, resource) -> None:
        if resource is PROVISIONING_REQUESTS and not self.served:
            raise NotFound("the server could not find the requested resource", 404)

    async def create(self, resource, body: dict[str, Any], namespace: str = "") -> bytes:
        self._check(resource)
        path = resource.object_path(body["metadata"]["name"], namespace)
        self.calls.append(("create", path))
        if path in self.objects:
            raise AlreadyExists(f"{path} exists", 409, "AlreadyExists")
        obj = msgspec.json.decode(msgspec.json.encode(body))
        obj["metadata"]["uid"] = f"uid-{next(self._uids)}"
        self.objects[path] = obj
        return msgspec.json.encode(obj)

    async def get(self, resource, name: str, namespace: str = "", subresource: str = "") -> bytes:
        self._check(resource)
        path = resource.object_path(name, namespace)
        if path not in self.objects:
            raise NotFound(f"{path} not found", 404)
        return msgspec.json.encode(self.objects[path])

    async def patch(self, resource, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        path = resource.object_path(name, namespace)
        self.calls.append(("patch", path))
        if path not in self.objects:
            raise NotFound(f"{path} not found", 404)
        _merge(self.objects[path], body)
        return msgspec.json.encode(self.objects[path])

    async def delete(self, resource, name: str, namespace: str = "", *, uid: str = "") -> bytes:
        self._check(resource)
        path = resource.object_path(name, namespace)
        self.calls.append(("delete", path))
        if path not in self.objects:
            raise NotFound(f"{path} not found", 404)
        if uid and self.objects[path]["metadata"]["uid"] != uid:
            raise Conflict("uid precondition failed", 409)
        return msgspec.json.encode(self.objects.pop(path))

    async def list(self, resource, **_: Any) -> RawList:
        self._check(resource)
        return RawList(metadata=ListMeta(resource_version="100"))

    async def request(self, method: str, path: str, **_: Any) -> bytes:
        if path == PROVISIONING_REQUESTS.collection_path() and not self.served:
            raise from_response(404, b"{}", path)
        return b"{}"


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = v


async def _journal(*events: ev.AnyEvent) -> LocalJournal:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid=WL.metadata.uid, obj=WL), *events])
    return journal


def created(attempt: int = 1) -> ev.ProvisioningRequestCreated:
    name = f"wl-prov-{attempt}"
    template = o.PodTemplate(api_version="v1", metadata=o.ObjectMeta(name=f"ppt-{name}-main", namespace="ns",
                                                                    owner_references=[OWNER]),
                             template=o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(name="c", image="i")])))
    request = o.ProvisioningRequest(
        api_version="autoscaling.x-k8s.io/v1",
        metadata=o.ObjectMeta(name=name, namespace="ns", labels={"kueue.x-k8s.io/managed": "true"},
                              owner_references=[OWNER]),
        spec=o.ProvisioningRequestSpec(provisioning_class_name="check-capacity.autoscaling.x-k8s.io", pod_sets=[
            o.ProvisioningRequestPodSet(pod_template_ref=o.PodTemplateRef(name=f"ppt-{name}-main"), count=2)]))
    return ev.ProvisioningRequestCreated(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0, check="prov",
                                         attempt=attempt, request=request, pod_templates=[template])


async def _records(journal: LocalJournal) -> list[ev.Record]:
    return [r async for r in journal.log.read()]


async def _outcomes(journal: LocalJournal) -> list[tuple[str, int, str]]:
    return [(type(r.event).__name__, r.event.decision, getattr(r.event, "reason", ""))
            for r in await _records(journal) if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]


@pytest.mark.asyncio
async def test_templates_then_the_request_then_the_templates_belong_to_the_request() -> None:
    kube = FakeKube()
    journal = await _journal(created())
    applier = RequestApplier(kube, journal)  # type: ignore[arg-type]
    await applier.apply_pending()
    pr, pt = PROVISIONING_REQUESTS.object_path("wl-prov-1", "ns"), POD_TEMPLATES.object_path("ppt-wl-prov-1-main", "ns")
    assert kube.calls == [("create", pt), ("create", pr), ("patch", pt)]
    request = kube.objects[pr]
    assert request["kind"] == "ProvisioningRequest" and request["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert request["metadata"]["ownerReferences"][0]["uid"] == "wl-uid"
    assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": "ppt-wl-prov-1-main"}, "count": 2}]
    assert kube.objects[pt]["metadata"]["ownerReferences"] == [{
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "name": "wl-prov-1",
        "uid": request["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert kube.objects[pt]["template"]["spec"]["containers"] == [{"name": "c", "image": "i"}]
    assert await _outcomes(journal) == [("DecisionApplied", 1, "")]
    assert not journal.mirror.request_decisions


@pytest.mark.asyncio
async def test_applying_again_after_a_restart_is_harmless() -> None:
    kube = FakeKube()
    journal = await _journal(created())
    await RequestApplier(kube, journal).apply_pending()  # type: ignore[arg-type]
    before = dict(kube.objects)
    # a restart before the outcome reached the log: the same decision once more
    again = LocalJournal(MemoryLog(), Mirror())
    await again.append([ev.ObjectUpserted(time=1, key=WL.key, uid=WL.metadata.uid, obj=WL), created()])
    await RequestApplier(kube, again).apply_pending()  # type: ignore[arg-type]
    assert kube.objects.keys() == before.keys()
    assert await _outcomes(again) == [("DecisionApplied", 1, "")]


@pytest.mark.asyncio
async def test_a_request_of_that_name_owned_by_another_workload_is_refused() -> None:
    kube = FakeKube()
    stranger = msgspec.to_builtins(created().request)
    stranger["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    await kube.create(PROVISIONING_REQUESTS, stranger, "ns")
    journal = await _journal(created())
    await RequestApplier(kube, journal).apply_pending()  # type: ignore[arg-type]
    assert await _outcomes(journal) == [("DecisionRejected", 1, "AlreadyExists")]


@pytest.mark.asyncio
async def test_a_gone_workload_rejects_and_a_missing_crd_waits() -> None:
    journal = await _journal(created())
    await journal.append([ev.ObjectDeleted(time=3, key=WL.key, uid="wl-uid", kind="Workload")])
    await RequestApplier(FakeKube(), journal).apply_pending()  # type: ignore[arg-type]
    assert await _outcomes(journal) == [("DecisionRejected", 1, "NotFound")]

    kube = FakeKube(served=False)
    journal = await _journal(created())
    applier = RequestApplier(kube, journal, retry_s=0.0)  # type: ignore[arg-type]
    await applier.apply_pending()
    assert await _outcomes(journal) == [] and applier.stats.errors == 1
    assert journal.mirror.request_decisions, "still pending: applied once the autoscaler's CRD is there"
    kube.served = True
    applier._retry._at = {k: 0.0 for k in applier._retry._at}  # its retry is due
    await applier.apply_pending()
    assert await _outcomes(journal) == [("DecisionApplied", 1, "")]


@pytest.mark.asyncio
async def test_delete_by_uid_and_an_already_gone_request_counts_as_deleted() -> None:
    kube = FakeKube()
    journal = await _journal(created())
    applier = RequestApplier(kube, journal)  # type: ignore[arg-type]
    await applier.apply_pending()
    uid = kube.objects[PROVISIONING_REQUESTS.object_path("wl-prov-1", "ns")]["metadata"]["uid"]

    def deleted(name: str, request_uid: str) -> ev.ProvisioningRequestDeleted:
        return ev.ProvisioningRequestDeleted(time=3, key=WL.key, uid="wl-uid", cycle=2, input=2, name=name,
                                             namespace="ns", reason="Finished", request_uid=request_uid)

    await journal.append([deleted("wl-prov-1", "another-instance"), deleted("wl-prov-1", uid),
                          deleted("wl-prov-9", "")])
    await applier.apply_pending()
    assert PROVISIONING_REQUESTS.object_path("wl-prov-1", "ns") not in kube.objects
    assert await _outcomes(journal) == [("DecisionApplied", 1, ""), ("DecisionApplied", 3, ""),
                                                      ("DecisionApplied", 4, ""), ("DecisionApplied", 5, "")]


@pytest.mark.asyncio
async def test_the_status_writer_leaves_request_decisions_to_their_applier() -> None:
    journal = await _journal(created())
    writer = StatusWriter(None, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)  # status already as desired: the writer acknowledges what it wrote, nothing else
    assert await _outcomes(journal) == []


@pytest.mark.asyncio
async def test_an_optional_kind_that_is_not_served_lists_as_empty() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    watcher = Watcher(FakeKube(served=False), journal.mirror, journal.append)  # type: ignore[arg-type]
    assert await watcher.relist(PROVISIONING_REQUESTS) is None
    with pytest.raises(NotFound):
        await Watcher(_NoPods(), journal.mirror, journal.append).relist(BY_KIND["Pod"])  # type: ignore[arg-type]


class _NoPods:
    async def list(self, resource, **_: Any) -> RawList:
        raise NotFound("no", 404)


def test_the_provisioning_request_crd_is_the_autoscalers_v1() -> None:
    doc = crds.provisioning_request_crd()
    assert doc["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    (version,) = doc["spec"]["versions"]
    assert version["name"] == "v1" and version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["podSets", "provisioningClassName"]
    assert spec["properties"]["podSets"]["items"]["properties"]["count"]["minimum"] == 1
    # what the connector creates fits the schema's fields
    body = msgspec.to_builtins(created().request)
    assert set(body["spec"]) <= set(spec["properties"])


def test_the_active_condition_of_a_provisioning_check() -> None:
    from connectors.k8s.checkstatus import desired_active

    ref = o.AdmissionCheckParameters(api_group="kueue.x-k8s.io", kind="ProvisioningRequestConfig", name="prc")
    ac = o.AdmissionCheck(metadata=o.ObjectMeta(name="prov", generation=2), spec=o.AdmissionCheckSpec(
        controller_name="kueue.x-k8s.io/provisioning-request", parameters=ref))
    config = o.ProvisioningRequestConfig(metadata=o.ObjectMeta(name="prc"))
    t = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    (cond,) = desired_active(ac, {}, t) or []
    assert cond == {"type": "Active", "status": "False", "reason": "BadParametersRef",
                    "message": 'provisioningrequestconfigs.kueue.x-k8s.io "prc" not found',
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}
    shown = msgspec.structs.replace(ac, status=o.AdmissionCheckStatus(conditions=[
        o.Condition(type="Other", status="True"), msgspec.convert(cond, o.Condition)]))
    assert desired_active(shown, {}, t + 5000) is None, "already shown: nothing to write"
    other, active = desired_active(shown, {"prc": config}, t + 5000) or []
    assert other["type"] == "Other"
    assert (active["status"], active["reason"], active["lastTransitionTime"]) == ("True", "Active",
                                                                                 "2026-01-01T00:00:05Z")
    foreign = msgspec.structs.replace(ac, spec=o.AdmissionCheckSpec(controller_name="example.com/mine"))
    assert desired_active(foreign, {"prc": config}, t) is None, "another controller's check"
