"""ProvisioningRequest pieces that need no cluster: the autoscaler's CRD, the checks' Active condition, the
status writer leaving request decisions to their applier (which tests/integration/kube/test_tas_connector.py
runs against the real apiserver), and the applier holding a creation until the stored Workload holds its quota
reservation, as Kueue's check controller does (tests/integration/kube/test_provreq_after_reservation.py shows it
against the real apiserver), and the applier's loop carrying out each workload on its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import pytest
from fixtures.provflow import T0, Flow

from connectors.k8s import crds
from connectors.k8s.checkstatus import desired_active
from connectors.k8s.errors import AlreadyExists, Forbidden, Invalid, KubeError, Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.provreq_readiness import Reject, Wait, create_verdict, missing_reservation
from connectors.k8s.provreqs import RequestApplier
from connectors.k8s.recorder import events_of
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.message_limits import truncate_message
from kueue_es.scheduler import decide

WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]))
OWNER = o.OwnerReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload", name="wl", uid="wl-uid",
                         controller=True, block_owner_deletion=True)


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
async def test_the_status_writer_leaves_request_decisions_to_their_applier() -> None:
    journal = await _journal(created())
    writer = StatusWriter(None, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)  # status already as desired: the writer acknowledges what it wrote, nothing else
    assert await _outcomes(journal) == []


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
    ref = o.AdmissionCheckParameters(api_group="kueue.x-k8s.io", kind="ProvisioningRequestConfig", name="prc")
    ac = o.AdmissionCheck(metadata=o.ObjectMeta(name="prov", generation=2), spec=o.AdmissionCheckSpec(
        controller_name="kueue.x-k8s.io/provisioning-request", parameters=ref))
    config = o.ProvisioningRequestConfig(metadata=o.ObjectMeta(name="prc"))
    t = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    (cond,) = desired_active(ac, {}, t) or []
    assert cond == {"type": "Active", "status": "False", "reason": "BadParametersRef",
                    "message": 'ProvisioningRequestConfig.kueue.x-k8s.io "prc" not found',
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


def test_a_checks_active_condition_takes_the_generation_a_spec_edit_brings() -> None:
    """Kueue #14931: a ProvisioningRequest check edited and still active (another config that exists) gets its
    ``Active`` condition written anew at its new generation, its lastTransitionTime kept."""
    shown = o.Condition(type="Active", status="True", reason="Active", message="The admission check is active",
                        last_transition_time="2026-01-01T00:00:00Z", observed_generation=1)
    ac = o.AdmissionCheck(metadata=o.ObjectMeta(name="prov", generation=2), spec=o.AdmissionCheckSpec(
        controller_name="kueue.x-k8s.io/provisioning-request", parameters=o.AdmissionCheckParameters(
            api_group="kueue.x-k8s.io", kind="ProvisioningRequestConfig", name="other")),
        status=o.AdmissionCheckStatus(conditions=[shown]))
    configs = {"other": o.ProvisioningRequestConfig(metadata=o.ObjectMeta(name="other"))}
    (cond,) = desired_active(ac, configs, 1_767_225_700_000) or []
    assert cond == {**msgspec.to_builtins(shown), "observedGeneration": 2}
    at_2 = msgspec.structs.replace(ac, status=o.AdmissionCheckStatus(conditions=[msgspec.convert(cond, o.Condition)]))
    assert desired_active(at_2, configs, 1_767_225_700_000) is None



# --- a creation waits for the stored reservation ------------------------------------------------------------------

RESERVED = o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved")
ADMISSION = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(name="main", count=2)])


def stored(*conditions: o.Condition, admission: o.Admission | None = ADMISSION, check: str | None = "Pending",
           uid: str = "wl-uid") -> o.Workload:
    """``WL`` as the apiserver would show it: ``conditions``, ``admission``, and check ``prov`` in state
    ``check`` (None: not listed)."""
    checks = [o.AdmissionCheckState(name="prov", state=check)] if check is not None else []
    return msgspec.structs.replace(WL, metadata=msgspec.structs.replace(WL.metadata, uid=uid),
                                   status=o.WorkloadStatus(conditions=list(conditions), admission=admission,
                                                           admission_checks=checks))


@pytest.mark.parametrize(("workload", "missing"), [
    (stored(), "the Workload holds no quota reservation"),
    (stored(o.Condition(type="QuotaReserved", status="False", reason="Pending")),
     "the Workload holds no quota reservation"),
    (stored(RESERVED, admission=None), "the Workload holds no quota reservation"),
    (stored(RESERVED, o.Condition(type="Finished", status="True")), "the Workload is finished"),
    (stored(RESERVED, o.Condition(type="Evicted", status="True")), "the Workload is evicted"),
    (stored(RESERVED, check=None), "the Workload does not list admission check 'prov'"),
    (stored(RESERVED, check="Ready"), "admission check 'prov' is Ready, not Pending"),
    (stored(RESERVED, check="Retry"), "admission check 'prov' is Retry, not Pending"),
    (stored(RESERVED, o.Condition(type="Evicted", status="False")), None),
    (stored(RESERVED), None),
])
def test_what_kueue_requires_of_the_stored_workload_before_it_creates_a_request(workload: o.Workload,
                                                                                missing: str | None) -> None:
    assert missing_reservation(workload, "prov") == missing


def deleted(name: str = "wl-prov-1", key: str = WL.key) -> ev.ProvisioningRequestDeleted:
    return ev.ProvisioningRequestDeleted(time=3, key=key, uid="wl-uid", cycle=2, input=1, name=name, namespace="ns",
                                         reason="Evicted")


def test_create_verdict() -> None:
    def verdict(stored_wl: o.Workload | None, *, logged: str | None = "wl-uid", seen: bool = False,
                later: tuple[ev.AnyEvent, ...] = ()) -> Wait | Reject | None:
        return create_verdict(created(), logged_uid=logged, stored=stored_wl, request_seen=seen, later=later)

    assert verdict(stored(RESERVED)) is None
    assert verdict(stored()) == Wait("the Workload holds no quota reservation")
    assert verdict(None) == verdict(stored(RESERVED, uid="older")) == Wait("the watch does not show this Workload yet")
    # the log lost the Workload (or holds another instance): never created, whatever the cluster shows
    assert verdict(stored(RESERVED), logged=None) == verdict(stored(RESERVED), logged="newer") == Reject(
        "NotFound", "the Workload no longer exists")
    # created before a restart (the watch shows the request): applied again, which only records it
    assert verdict(stored(), seen=True) is None
    # withdrawn: a later decision deletes the request the stored Workload never allowed
    withdrawn = verdict(stored(), later=(deleted("wl-prov-9"), deleted()))
    assert isinstance(withdrawn, Reject) and withdrawn.reason == "Withdrawn"
    assert "ns/wl-prov-1 (Evicted)" in withdrawn.message and "holds no quota reservation" in withdrawn.message
    assert verdict(stored(), later=(deleted("wl-prov-9"), deleted(key="ns/other"))) == Wait(
        "the Workload holds no quota reservation")
    # one the stored Workload allows is created even if deleted later, as before
    assert verdict(stored(RESERVED), later=(deleted(),)) is None


class FakeClient:
    """Records the calls; every create succeeds (uid ``uid-<name>``); a Workload ``<name>`` read is stored with uid
    ``<name>-uid`` (or :attr:`uids`'s) and pod set ``main`` of template :attr:`template`. :attr:`bodies`: each create's body."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.bodies: dict[str, dict[str, Any]] = {}
        self.template: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
        self.uids: dict[str, str] = {}

    async def get(self, resource: Any, name: str, ns: str) -> bytes:
        assert resource.kind == "Workload", resource
        self.calls.append(("get", name))
        return msgspec.json.encode({"metadata": {"name": name, "namespace": ns, "uid": self.uids.get(name, f"{name}-uid")},
                                    "spec": {"podSets": [{"name": "main", "count": 2, "template": self.template}]}})

    async def create(self, resource: object, body: dict[str, Any], ns: str) -> bytes:
        self.calls.append(("create", body["metadata"]["name"]))
        self.bodies[body["metadata"]["name"]] = body
        return msgspec.json.encode({"metadata": {"uid": f"uid-{body['metadata']['name']}"}})

    async def patch(self, resource: object, name: str, body: object, ns: str) -> bytes:
        self.calls.append(("patch", name))
        return b"{}"

    async def delete(self, resource: object, name: str, ns: str, *, uid: str = "") -> None:
        self.calls.append(("delete", name))


def upserted(w: o.Workload) -> ev.ObjectUpserted:
    return ev.ObjectUpserted(time=5, key=w.key, uid=w.metadata.uid, obj=w)


@pytest.mark.asyncio
async def test_the_applier_creates_once_the_watch_shows_the_reservation() -> None:
    journal = await _journal(created())
    client = FakeClient()
    applier = RequestApplier(client, journal)  # type: ignore[arg-type]
    await applier.apply_pending()
    assert client.calls == [] and await _outcomes(journal) == []
    assert applier.held == {1: "the Workload holds no quota reservation"} and applier.stats.held == 1
    await applier.apply_pending()  # nothing new: still held, counted once
    assert client.calls == [] and applier.stats.held == 1

    await journal.append([upserted(stored(RESERVED, check=None))])  # the reservation's first write
    await applier.apply_pending()
    assert client.calls == [] and applier.held == {1: "the Workload does not list admission check 'prov'"}

    await journal.append([upserted(stored(RESERVED))])
    await applier.apply_pending()
    assert client.calls == [("get", "wl"), ("create", "ppt-wl-prov-1-main"), ("create", "wl-prov-1"),
                            ("patch", "ppt-wl-prov-1-main")]
    assert await _outcomes(journal) == [("DecisionApplied", 1, "")]
    assert applier.held == {}


@pytest.mark.asyncio
async def test_a_held_creation_withdrawn_by_a_later_deletion_is_rejected_and_the_deletion_applied() -> None:
    journal = await _journal(created(), deleted())
    client = FakeClient()
    await RequestApplier(client, journal).apply_pending()  # type: ignore[arg-type]
    assert client.calls == [("delete", "wl-prov-1")]
    assert await _outcomes(journal) == [("DecisionRejected", 1, "Withdrawn"), ("DecisionApplied", 2, "")]
    assert not journal.mirror.request_decisions


class Overlapping(FakeClient):
    """Each delete takes a turn of the event loop; counts how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = self.most = 0

    async def delete(self, resource: object, name: str, ns: str, *, uid: str = "") -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.calls.append(("delete", name))
        await asyncio.sleep(0)
        self.in_flight -= 1


@pytest.mark.asyncio
async def test_the_applier_carries_out_different_workloads_decisions_side_by_side_each_ones_in_log_order() -> None:
    """One decision at a time, a burst's requests trailed their stored reservations by seconds
    (``benchmarks/provreq_burst.py``, BENCHMARKS.md): different workloads' decisions go side by side, a workload's
    own still strictly one after the other, in log order."""
    journal = await _journal(deleted("a-1", key="ns/a"), deleted("b-1", key="ns/b"), deleted("a-2", key="ns/a"))
    client = Overlapping()
    await RequestApplier(client, journal).apply_pending()  # type: ignore[arg-type]
    assert client.most == 2, "a's and b's at once"
    assert [c for c in client.calls if c[1].startswith("a-")] == [("delete", "a-1"), ("delete", "a-2")]
    assert sorted(off for _, off, _ in await _outcomes(journal)) == [1, 2, 3]


class Squatted(FakeClient):
    """A PodTemplate already at the decision's template name, asking ``cpu`` ("": nothing, as the derived one);
    the rest as :class:`FakeClient`."""

    def __init__(self, cpu: str) -> None:
        super().__init__()
        self.cpu, self.squatted = cpu, True

    async def create(self, resource: object, body: dict[str, Any], ns: str) -> bytes:
        name = body["metadata"]["name"]
        if name.startswith("ppt-") and self.squatted:
            self.calls.append(("create refused", name))
            raise AlreadyExists(f"podtemplates {name!r} already exists", 409, "AlreadyExists")
        return await super().create(resource, body, ns)

    async def get(self, resource: Any, name: str, ns: str) -> bytes:
        if resource.kind == "Workload":
            return await super().get(resource, name, ns)
        self.calls.append(("get", name))
        self.squatted = False  # the next create, after the delete, makes it anew
        requests = {"requests": {"cpu": self.cpu}} if self.cpu else {}
        return msgspec.json.encode({"metadata": {"name": name, "uid": "foreign"}, "template": {"spec": {
            "containers": [{"name": "other", "image": "other", "resources": requests}]}}})


@pytest.mark.asyncio
@pytest.mark.parametrize(("cpu", "gate", "replaced"), [("5", None, True), ("", None, False), ("5", False, False)],
                         ids=["differs", "alike", "gate-off"])
async def test_a_podtemplate_at_the_derived_name_unlike_the_derived_one_is_replaced(
        cpu: str, gate: bool | None, replaced: bool) -> None:
    """Kueue v0.20's EnforceProvisioningPodTemplateContents (beta, on; #13015): a PodTemplate found at the
    predictable ``ppt-…`` name is taken only when alike what Kueue derives (tolerations, each container's requests
    and limits: not names or images); one that differs is deleted and made anew, so the ProvisioningRequest never
    asks capacity for pods the Workload's quota did not cover. Off, the one found is taken as it is."""
    config = ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        **({} if gate is None else {"featureGates": {"EnforceProvisioningPodTemplateContents": gate}})})
    journal = await _journal(config, created(), upserted(stored(RESERVED)))
    client = Squatted(cpu)
    applier = RequestApplier(client, journal)  # type: ignore[arg-type]
    await applier.apply_pending()
    found = [("get", "wl"), ("create refused", "ppt-wl-prov-1-main"), *([("get", "ppt-wl-prov-1-main")] if gate is None else [])]
    replacing = [("delete", "ppt-wl-prov-1-main"), ("create", "ppt-wl-prov-1-main")] if replaced else []
    assert client.calls == [*found, *replacing, ("create", "wl-prov-1"), ("patch", "ppt-wl-prov-1-main")]
    assert applier.stats.templates_replaced == int(replaced)
    assert await _outcomes(journal) == [("DecisionApplied", 2, "")]


@pytest.mark.asyncio
async def test_the_pod_template_is_the_pod_sets_whole_template_with_what_the_admission_decides() -> None:
    """Kueue writes a request's PodTemplate from the pod set's whole template (its provisioning integration test
    compares the containers with the Workload's): command, env, volume mounts, volumes, spread constraints... stay;
    what the decision decides (template labels and annotations, node selector, tolerations, scheduling gates,
    each container's requests and limits) is the decision's, so the template's own gate and an earlier admission's
    annotation stay out. kueue-es wrote only the fold's view of the template, which carries none of the rest."""
    e = created()
    (pt,) = e.pod_templates
    derived = o.PodTemplateSpec(
        metadata=o.TemplateMeta(labels={"app": "x"}),
        spec=o.PodSpec(node_selector={"ns1": "ns1v"}, containers=[o.Container(
            name="c", image="i", resources=o.ResourceRequirements(requests={"example.com/gpu": "1"},
                                                                  limits={"example.com/gpu": "1"}))]))
    e = msgspec.structs.replace(e, pod_templates=[msgspec.structs.replace(pt, template=derived)])
    client = FakeClient()
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-zone-a"}}]
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    client.template = {
        "metadata": {"labels": {"app": "x"}, "annotations": {"kueue.x-k8s.io/workload": "an-earlier-one"}},
        "spec": {"serviceAccountName": "trainer", "volumes": volumes, "topologySpreadConstraints": spread,
                 "schedulingGates": [{"name": "example.com/own-gate"}],
                 "containers": [{"name": "c", "image": "i", "command": ["python", "train.py"],
                                 "env": [{"name": "EPOCHS", "value": "3"}],
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                 "resources": {"limits": {"example.com/gpu": "1"}}}]}}
    journal = await _journal(e, upserted(stored(RESERVED)))
    await RequestApplier(client, journal).apply_pending()  # type: ignore[arg-type]
    assert await _outcomes(journal) == [("DecisionApplied", 1, "")]
    body = client.bodies["ppt-wl-prov-1-main"]
    assert body["metadata"] == msgspec.to_builtins(pt.metadata)
    assert body["template"] == {"metadata": {"labels": {"app": "x"}}, "spec": {
        "serviceAccountName": "trainer", "volumes": volumes, "topologySpreadConstraints": spread,
        "nodeSelector": {"ns1": "ns1v"},
        "containers": [{"name": "c", "image": "i", "command": ["python", "train.py"],
                        "env": [{"name": "EPOCHS", "value": "3"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "resources": {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}}]}}


@pytest.mark.asyncio
async def test_a_creation_for_a_workload_the_apiserver_no_longer_holds_is_rejected() -> None:
    """The stored Workload is read for its pod sets' templates: another Workload of the name (a new uid) is not
    the one the decision was for, so nothing is created."""
    client = FakeClient()
    client.uids["wl"] = "another-uid"
    journal = await _journal(created(), upserted(stored(RESERVED)))
    await RequestApplier(client, journal).apply_pending()  # type: ignore[arg-type]
    assert client.calls == [("get", "wl")]
    assert await _outcomes(journal) == [("DecisionRejected", 1, "NotFound")]


# --- a creation the apiserver refuses (Kueue #4114, #4190: handleError) -------------------------------------

class Refusing(FakeClient):
    """Every create of ``name`` fails with ``error``; a ProvisioningRequest read is owned by ``owner_uid``."""

    def __init__(self, name: str, error: KubeError, owner_uid: str = "") -> None:
        super().__init__()
        self.refused, self.error, self.owner_uid = name, error, owner_uid

    async def create(self, resource: object, body: dict[str, Any], ns: str) -> bytes:
        if body["metadata"]["name"] == self.refused:
            self.calls.append(("create refused", self.refused))
            raise self.error
        return await super().create(resource, body, ns)

    async def get(self, resource: Any, name: str, ns: str) -> bytes:
        if resource.kind == "ProvisioningRequest":
            self.calls.append(("get", name))
            return msgspec.json.encode({"metadata": {"uid": "other",
                                                     "ownerReferences": [{"uid": self.owner_uid}]}})
        return await super().get(resource, name, ns)


REFUSED = 'ProvisioningRequest.autoscaling.x-k8s.io "wl-prov-1" is invalid: spec.parameters: Too long'


async def _refused(client: Refusing) -> list[ev.AnyEvent]:
    journal = await _journal(created(), upserted(stored(RESERVED)))
    applier = RequestApplier(client, journal)  # type: ignore[arg-type]
    await applier.apply_pending()
    await applier.apply_pending()  # ended: not tried again here
    assert not journal.mirror.request_decisions
    assert applier.stats.failed == 1 and applier.stats.errors == 0
    outcomes = [r.event for r in await _records(journal)][3:]
    # the Events ledger of the connector's mirror has the Warning FailedCreate ready, on the Workload
    (ready,) = journal.mirror.kube_events.ready.values()
    (event,) = events_of(ready)
    assert (event.involved.name, event.type, event.reason, event.message) == (
        "wl", "Warning", "FailedCreate", truncate_message(outcomes[0].message))  # type: ignore[union-attr]
    return outcomes


def _failed(message: str) -> ev.ProvisioningRequestCreateFailed:
    return ev.ProvisioningRequestCreateFailed(time=0, key="ns/wl", uid="wl-uid", decision=1, check="prov",
                                              name="wl-prov-1", message=message, id="create-failed-1")


def _without_time(events: list[ev.AnyEvent]) -> list[ev.AnyEvent]:
    return [msgspec.structs.replace(e, time=0) for e in events]


@pytest.mark.asyncio
async def test_a_request_the_apiserver_refuses_fails_its_creation_in_kueues_words() -> None:
    client = Refusing("wl-prov-1", Invalid(f"POST ...: 422 Invalid: {REFUSED}", 422, "Invalid", REFUSED))
    assert _without_time(await _refused(client)) == [
        _failed(f'Error creating ProvisioningRequest "wl-prov-1": {REFUSED}'),
        ev.DecisionRejected(time=0, key="ns/wl", uid="wl-uid", decision=1, reason="Invalid", message=REFUSED,
                            id="rejected-1")]
    assert client.calls == [("get", "wl"), ("create", "ppt-wl-prov-1-main"), ("create refused", "wl-prov-1")]


DENIED = 'admission webhook "deny.example.com" denied the request: no PodTemplates here'
INVALID_TEMPLATE = ('PodTemplate "ppt-wl-prov-1-main" is invalid: template.spec.containers[0].image: '
                    "Required value")


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [Forbidden(f"POST ...: 403 Forbidden: {DENIED}", 403, "Forbidden", DENIED),
                                   Invalid(f"POST ...: 422 Invalid: {INVALID_TEMPLATE}", 422, "Invalid",
                                           INVALID_TEMPLATE)])
async def test_a_pod_template_the_apiserver_refuses_fails_the_creation_before_the_request(
        error: KubeError) -> None:
    client = Refusing("ppt-wl-prov-1-main", error)
    failed, rejected = await _refused(client)
    assert failed == msgspec.structs.replace(
        _failed(f'Error creating PodTemplate "ppt-wl-prov-1-main": {error.detail}'), time=failed.time)
    assert isinstance(rejected, ev.DecisionRejected) and rejected.reason == error.reason
    assert client.calls == [("get", "wl"), ("create refused", "ppt-wl-prov-1-main")]


@pytest.mark.asyncio
async def test_a_request_name_another_workloads_request_holds_fails_the_creation() -> None:
    exists = 'provisioningrequests.autoscaling.x-k8s.io "wl-prov-1" already exists'
    client = Refusing("wl-prov-1", AlreadyExists(f"POST ...: 409 AlreadyExists: {exists}", 409,
                                                 "AlreadyExists", exists), owner_uid="another-workload")
    failed, rejected = await _refused(client)
    assert isinstance(failed, ev.ProvisioningRequestCreateFailed)
    assert failed.message == f'Error creating ProvisioningRequest "wl-prov-1": {exists}'
    assert isinstance(rejected, ev.DecisionRejected) and rejected.reason == "AlreadyExists"


@pytest.mark.asyncio
async def test_a_refusal_longer_than_a_condition_message_is_cut_as_kueue_cuts_it() -> None:
    long = "x" * 40_000
    failed, _ = await _refused(Refusing("wl-prov-1", Invalid("POST ...: 422", 422, "Invalid", long)))
    assert isinstance(failed, ev.ProvisioningRequestCreateFailed)
    assert len(failed.message.encode()) == 32 * 1024 and failed.message.endswith("x ...")
    assert failed.message.startswith('Error creating ProvisioningRequest "wl-prov-1": xxx')


# --- the applier's loop: each workload on its own (KeyedWorkers) ----------------------------------------------------

def _of(name: str, *conditions: o.Condition) -> o.Workload:
    """Workload ``ns/<name>`` as :func:`stored` makes ``WL`` (uid ``<name>-uid``)."""
    w = stored(*conditions, uid=f"{name}-uid")
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, name=name))


def created_for(w: o.Workload) -> ev.ProvisioningRequestCreated:
    """:func:`created` for workload ``w``: request ``<name>-prov-1``, template ``ppt-<name>-prov-1-main``."""
    e = created()
    name = f"{w.metadata.name}-prov-1"
    owner = msgspec.structs.replace(OWNER, name=w.metadata.name, uid=w.metadata.uid)
    (pt,) = e.pod_templates
    pt = msgspec.structs.replace(pt, metadata=msgspec.structs.replace(
        pt.metadata, name=f"ppt-{name}-main", owner_references=[owner]))
    request = msgspec.structs.replace(e.request, metadata=msgspec.structs.replace(
        e.request.metadata, name=name, owner_references=[owner]))
    return msgspec.structs.replace(e, key=w.key, uid=w.metadata.uid, request=request, pod_templates=[pt])


class Hanging(FakeClient):
    """Every create of a name starting with ``slow`` waits until :attr:`release` is set (a call the apiserver
    takes long to answer); :attr:`started` is set when it begins, :attr:`made` holds each other create's
    name as an event set when it is done."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.started, self.release = asyncio.Event(), asyncio.Event()
        self.made: dict[str, asyncio.Event] = {}

    def made_event(self, name: str) -> asyncio.Event:
        return self.made.setdefault(name, asyncio.Event())

    async def create(self, resource: object, body: dict[str, Any], ns: str) -> bytes:
        name = body["metadata"]["name"]
        if name.startswith(self.slow):
            self.started.set()
            await self.release.wait()
        answer = await super().create(resource, body, ns)
        self.made_event(name).set()
        return answer


async def _until(journal: LocalJournal, done: Callable[[], Awaitable[bool]]) -> None:
    """Wait until ``done()``, looking again at every append (the guard: the caller's ``asyncio.timeout``)."""
    signal = journal.subscribe()
    while not await done():
        await signal.wait()


@contextlib.asynccontextmanager
async def _running(applier: RequestApplier) -> AsyncIterator[None]:
    task = asyncio.create_task(applier.run())
    try:
        async with asyncio.timeout(10):  # a guard only: every wait below is on an event
            yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_one_workloads_slow_call_holds_back_no_other_workloads_decisions() -> None:
    """Review F7 (session 35): the applier awaited a whole round, every workload's chain, before it looked at the
    log again, so a decision for ``fast`` appended while ``slow``'s PodTemplate create hung (up to five calls of
    up to 30 s each on a slow apiserver) waited for it. Each workload is carried out on its own now: ``fast``'s
    request is created, and its outcome appended, while ``slow``'s call still hangs; ``slow``'s own later
    decision still waits for it (a workload's decisions strictly in log order)."""
    slow, fast = _of("slow", RESERVED), _of("fast", RESERVED)
    journal = await _journal(upserted(slow), upserted(fast))
    client = Hanging("ppt-slow")
    async with _running(applier := RequestApplier(client, journal)):  # type: ignore[arg-type]
        (slow_at,) = await journal.append([created_for(slow)])
        await client.started.wait()
        slow_later, fast_at = await journal.append([deleted("slow-prov-1", key=slow.key), created_for(fast)])
        await client.made_event("fast-prov-1").wait()
        await _until(journal, lambda: _has_outcome(journal, fast_at))
        assert not await _has_outcome(journal, slow_at), "slow's create still hangs"
        assert ("delete", "slow-prov-1") not in client.calls, "slow's deletion waits for its creation"
        client.release.set()
        await _until(journal, lambda: _has_outcome(journal, slow_later))
    assert [c for c in client.calls if "slow" in c[1]] == [
        ("get", "slow"), ("create", "ppt-slow-prov-1-main"), ("create", "slow-prov-1"), ("patch", "ppt-slow-prov-1-main"),
        ("delete", "slow-prov-1")]
    assert (applier.stats.created, applier.stats.deleted, applier.stats.applied) == (2, 1, 3)


async def _has_outcome(journal: LocalJournal, offset: int) -> bool:
    return any(off == offset for _, off, _ in await _outcomes(journal))


@pytest.mark.asyncio
async def test_the_loop_looks_at_a_held_creation_again_when_the_log_moves() -> None:
    """Held for the stored reservation, a creation is looked at again on the log's next move (the watch bringing
    the reservation the status writer stored), with no timer and no new decision of its workload."""
    journal = await _journal()
    client = Hanging("never")
    async with _running(applier := RequestApplier(client, journal)):  # type: ignore[arg-type]
        (at,) = await journal.append([created()])
        while not applier.held:  # the loop takes the decision in, and holds it
            await asyncio.sleep(0)
        assert applier.held == {at: "the Workload holds no quota reservation"} and client.calls == []
        await journal.append([upserted(stored(RESERVED))])
        await client.made_event("wl-prov-1").wait()
        await _until(journal, lambda: _has_outcome(journal, at))
    assert applier.held == {} and applier.stats.held == 1


class FailingOnce(Hanging):
    """The first create of a name starting with ``slow`` fails (the apiserver gives no answer); the rest
    succeed, none hangs."""

    def __init__(self, slow: str) -> None:
        super().__init__(slow)
        self.release.set()

    async def create(self, resource: object, body: dict[str, Any], ns: str) -> bytes:
        if body["metadata"]["name"].startswith(self.slow) and not self.started.is_set():
            self.started.set()
            self.calls.append(("create failed", body["metadata"]["name"]))
            # no answer (an answered error fails the creation)
            raise Unavailable("POST ...: connection reset")
        return await super().create(resource, body, ns)


@pytest.mark.asyncio
async def test_the_loop_retries_a_failed_decision_when_due_its_workloads_later_ones_after_it() -> None:
    """A call the apiserver never answered retries its decision after ``retry_s``: the loop wakes for it
    though nothing else happens, and the workload's later decision waits for it (one of another workload does
    not)."""
    flaky, other = _of("flaky", RESERVED), _of("other", RESERVED)
    journal = await _journal(upserted(flaky), upserted(other))
    client = FailingOnce("flaky-prov")
    async with _running(applier := RequestApplier(client, journal, retry_s=0.01)):  # type: ignore[arg-type]
        (_, later, _) = await journal.append([created_for(flaky), deleted("flaky-prov-1", key=flaky.key),
                                              created_for(other)])
        await _until(journal, lambda: _has_outcome(journal, later))
    assert [c for c in client.calls if "flaky" in c[1]] == [
        ("get", "flaky"), ("create", "ppt-flaky-prov-1-main"), ("create failed", "flaky-prov-1"),
        ("get", "flaky"), ("create", "ppt-flaky-prov-1-main"), ("create", "flaky-prov-1"), ("patch", "ppt-flaky-prov-1-main"),
        ("delete", "flaky-prov-1")]
    assert ("create", "other-prov-1") in client.calls
    assert (applier.stats.errors, applier.stats.applied) == (1, 3)


# --- a reservation given back keeps its request (Kueue's controller leaves a workload without quota alone) ---------


@pytest.mark.asyncio
async def test_a_request_created_before_the_queue_stopped_is_not_deleted_with_the_reservation() -> None:
    """The scheduler's own decisions, run through the applier: job-a's request is created once the stored Workload
    shows its reservation; its LocalQueue then stops before the watch shows the request, and job-a gives its quota
    back (QuotaReservationUnset). Kueue's check controller ignores a workload that holds no quota and is neither
    finished nor evicted, so the request stays for the next reservation; kueue-es deleted it (ReservationForgotten:
    a request the watch never showed, of a pending workload, taken for one of a reservation the fold forgot)."""
    f = Flow("provisioning-happy-path.yaml")
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([r.event for r in f.records])
    state = journal.mirror.state
    first = next(r.event for r in f.records if isinstance(r.event, ev.ObjectUpserted) and r.event.key == "default/job-a")
    wl = state.workloads["default/job-a"]
    shown = msgspec.structs.replace(first.obj, status=o.WorkloadStatus(
        conditions=[RESERVED], admission=wl.admission, admission_checks=list(wl.check_states.values())))
    await journal.append([ev.ObjectUpserted(time=T0 + 1000, key=wl.key, uid=wl.uid, obj=shown)])
    client = FakeClient()
    client.uids["job-a"] = wl.uid
    applier = RequestApplier(client, journal)  # type: ignore[arg-type]
    await applier.apply_pending()
    assert ("create", "job-a-prov-1") in client.calls

    lq = state.local_queues["default/lq"]
    held = msgspec.structs.replace(lq, spec=msgspec.structs.replace(lq.spec, stop_policy="Hold"))
    await journal.append([ev.ObjectUpserted(time=T0 + 10_000, key=lq.key, uid=lq.metadata.uid, obj=held)])
    decided = []
    while batch := decide(state, now=T0 + 10_000):
        decided += [type(d).__name__ for d in batch]
        await journal.append(batch)
    assert "QuotaReservationUnset" in decided
    await applier.apply_pending()
    assert not [c for c in client.calls if c[0] == "delete"]
