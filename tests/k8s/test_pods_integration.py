"""The plain-Pod integration carrying out its steps (:mod:`connectors.k8s.pods_integration`) against a mirror and a
client that records what it is asked: nothing while the Configuration leaves the pod framework out, the
Workload created, the Pod stopped as Kueue stops one, finalized, its Workload finished or, once it is gone,
deleted; the log records that move the Pod's Workload make the Pod dirty; its Events are the Pod's (no cluster
needed)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from fixtures.jobs import namespace

from connectors.k8s import pod_sync
from connectors.k8s.decision_events import EventLedger
from connectors.k8s.errors import Conflict, NotFound, Unavailable
from connectors.k8s.job_events import job_events
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.pod_roles import role_hash
from connectors.k8s.pod_sync import ManagedPod, ManagedPodSpec, ManagedPodStatus
from connectors.k8s.pods_integration import PodIntegration
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from projections.workloads import ADMITTED

UID = "pod-uid"
NAME = pod_sync.workload_name("p", UID)
KEY = f"ns/{NAME}"
POD_ON = {"integrations": {"frameworks": ["batch/job", "pod"]}, "waitForPodsReady": {"enable": False}}


def _config(**doc: Any) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **doc})


def managed_pod(*, gated: bool = True, phase: str = "Pending", uid: str = UID) -> ManagedPod:
    return ManagedPod(
        metadata=o.ObjectMeta(name="p", namespace="ns", uid=uid, resource_version="5",
                              labels={"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "lq"},
                              finalizers=["kueue.x-k8s.io/managed"]),
        spec=ManagedPodSpec(scheduling_gates=[{"name": "kueue.x-k8s.io/admission"}] if gated else []),
        status=ManagedPodStatus(phase=phase))


def pod_workload(owner_uid: str = UID, *, finalizer: bool = False, deleting: bool = False,
                 finished: bool = False) -> o.Workload:
    return o.Workload(
        metadata=o.ObjectMeta(name=NAME, namespace="ns", uid="wl-uid", resource_version="3",
                              finalizers=["kueue.x-k8s.io/resource-in-use"] if finalizer else [],
                              deletion_timestamp="2026-01-01T00:00:00Z" if deleting else None,
                              owner_references=[o.OwnerReference(api_version="v1", kind="Pod", name="p",
                                                                 uid=owner_uid, controller=True)]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1, template=o.PodTemplateSpec(
            spec=o.PodSpec(containers=[o.Container(name="c",
                                                   resources=o.ResourceRequirements(requests={"cpu": "1"}))])))]),
        status=o.WorkloadStatus(conditions=[o.Condition(type="Finished", status="True", reason="Succeeded")]
                                if finished else []))


class Client:
    """Records every call; a GET of the Pod answers ``pod`` (None: 404)."""

    def __init__(self, pod: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.pod = pod

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.calls.append(("get", resource.kind, name))
        if self.pod is None:
            raise NotFound(f"{resource.kind} {name} not found")
        return msgspec.json.encode(self.pod)

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        self.calls.append(("create", resource.kind, body))
        return msgspec.json.encode(body)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = "") -> bytes:
        self.calls.append(("patch", resource.kind, name, subresource, content_type, body))
        return b"{}"

    async def delete(self, resource: Any, name: str, namespace: str = "", *, uid: str = "",
                     resource_version: str = "") -> bytes:
        self.calls.append(("delete", resource.kind, name, uid))
        return b"{}"


def integration(*objs: o.KObject, config: dict[str, Any] | None = POD_ON, client: Client | None = None
                ) -> tuple[PodIntegration, Mirror, list[ev.AnyEvent], Client]:
    mirror = Mirror()
    if config is not None:
        mirror.apply(ev.Record(1, _config(**config)))
    for obj in (namespace(), *objs):
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=1, key=obj.key, uid=obj.metadata.uid,
                                                                    obj=obj)))
    appended: list[ev.AnyEvent] = []

    async def append(events: list[ev.AnyEvent]) -> list[int]:
        appended.extend(events)
        return [mirror.offset + len(appended)] * len(events)

    client = client or Client()
    pods = PodIntegration(client, LocalJournal(MemoryLog(), mirror), append=append)  # type: ignore[arg-type]
    for key, obs in mirror.workloads.items():
        pods.owners.add(key, obs)
    return pods, mirror, appended, client


@pytest.mark.asyncio
async def test_off_by_default_a_managed_pod_is_left_alone() -> None:
    pods, _, appended, client = integration(config=None)
    pods.pods["ns/p"] = managed_pod()
    await pods.reconcile("ns/p")
    assert client.calls == [] and appended == []


@pytest.mark.asyncio
async def test_a_gated_pod_gets_its_workload_made_from_the_pod_as_stored() -> None:
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": UID, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    pods, _, appended, client = integration(client=Client(raw))
    pods.pods["ns/p"] = managed_pod()
    await pods.reconcile("ns/p")
    (_, kind, body), = [c for c in client.calls if c[0] == "create"]
    assert kind == "Workload" and body["metadata"]["name"] == NAME
    assert body["spec"]["podSets"][0]["template"] == {"spec": raw["spec"]}
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and (acted.kind, acted.key, acted.action, acted.workload) == (
        "Pod", "ns/p", "CreatedWorkload", KEY)
    await pods.reconcile("ns/p")
    assert len([c for c in client.calls if c[0] == "create"]) == 1, "not twice for one version of the Pod"


@pytest.mark.asyncio
async def test_an_evicted_running_pod_is_marked_deleted_and_its_quota_released() -> None:
    pods, mirror, appended, client = integration(pod_workload())
    wl = mirror.state.workloads[KEY]
    wl.phase, wl.evicted = ADMITTED, "Preempted"
    wl.conditions = (o.Condition(type="Evicted", status="True", reason="Preempted", message="Preempted by x"),)
    pods.pods["ns/p"] = managed_pod(gated=False, phase="Running")
    await pods.reconcile("ns/p")
    status, delete = client.calls
    assert status[:5] == ("patch", "Pod", "p", "status", "application/strategic-merge-patch+json")
    (cond,) = status[5]["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "TerminationTarget", "True", "WorkloadEvictedDueToPreempted", "Preempted by x")
    assert delete == ("delete", "Pod", "p", UID)
    stopped, released = appended
    assert isinstance(stopped, ev.JobActed) and (stopped.action, stopped.message) == ("Stopped", "Preempted by x")
    assert isinstance(released, ev.JobStopped) and released.key == KEY


@pytest.mark.asyncio
async def test_a_pod_is_stopped_once_though_the_condition_shows_before_its_deletion() -> None:
    pods, mirror, appended, client = integration(pod_workload())
    mirror.state.workloads[KEY].phase = "Pending"
    pods.pods["ns/p"] = managed_pod(gated=False, phase="Running")
    await pods.reconcile("ns/p")
    pods.pods["ns/p"] = msgspec.structs.replace(managed_pod(gated=False, phase="Running"), metadata=msgspec.structs.replace(
        managed_pod().metadata, resource_version="6"))  # the TerminationTarget condition written, not yet deleted
    await pods.reconcile("ns/p")
    assert [c[0] for c in client.calls] == ["patch", "delete"]
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["Stopped"]


@pytest.mark.asyncio
@pytest.mark.parametrize(("strict", "precondition"), [(True, {"resourceVersion": "5"}), (False, {})])
async def test_an_ended_pod_finishes_its_workload_then_loses_the_finalizer(strict: bool, precondition: dict) -> None:
    """Kueue's RemoveFinalizersWithStrictPatch (beta, on): the finalizer goes in a patch conditioned on the Pod's
    resourceVersion; off, the list last seen is written without one (a finalizer added meanwhile would go too)."""
    pods, mirror, appended, client = integration(pod_workload(), config={
        **POD_ON, "featureGates": {"RemoveFinalizersWithStrictPatch": strict}})
    mirror.state.workloads[KEY].phase = ADMITTED
    pods.pods["ns/p"] = managed_pod(gated=False, phase="Succeeded")
    await pods.reconcile("ns/p")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished) and finished.reason == "Succeeded" and client.calls == []
    mirror.apply(ev.Record(mirror.offset + 1, finished))
    appended.clear()
    await pods.reconcile("ns/p")
    assert client.calls == [("patch", "Pod", "p", "", "", {"metadata": {**precondition, "finalizers": None}})]
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and (acted.action, acted.workload) == ("FinishedWorkload", KEY)


@pytest.mark.asyncio
@pytest.mark.parametrize("gate", [True, False])
async def test_the_workload_of_a_pod_that_is_gone_is_finished_and_deleted(gate: bool) -> None:
    config = {**POD_ON, "featureGates": {"FinishOrphanedWorkloads": gate}}
    pods, _, appended, client = integration(pod_workload(), config=config)
    await pods.reconcile("ns/p")
    assert client.calls == [("get", "Pod", "p"), ("delete", "Workload", NAME, "wl-uid")]
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == (
        [("OwnerNotFound", KEY)] if gate else [])


@pytest.mark.asyncio
async def test_a_pod_still_there_out_of_the_watch_keeps_its_workload() -> None:
    pods, _, appended, client = integration(pod_workload(), client=Client({"metadata": {"uid": UID}}))
    await pods.reconcile("ns/p")
    assert client.calls == [("get", "Pod", "p")] and appended == []


@pytest.mark.asyncio
async def test_a_pod_made_anew_under_the_same_name_gets_a_workload_of_its_own() -> None:
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": "new", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {}}
    pods, _, _, client = integration(pod_workload(), client=Client(raw))
    pods.pods["ns/p"] = managed_pod(uid="new")
    await pods.reconcile("ns/p")
    assert client.calls[0] == ("delete", "Workload", NAME, "wl-uid"), "the old Pod's, without asking: it is gone"
    (_, _, body), = [c for c in client.calls if c[0] == "create"]
    assert body["metadata"]["name"] == pod_sync.workload_name("p", "new")


def test_the_records_that_move_a_pods_workload_make_the_pod_dirty() -> None:
    pods, mirror, _, _ = integration()
    pods.pods["ns/p"] = managed_pod()
    mirror.listeners.append(pods._on_applied)
    obs = pod_workload()
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=KEY, uid="wl-uid", obj=obs))])
    assert pods.dirty == {"ns/p"} and pods.owners.owner_of == {KEY: "ns/p"}
    pods.dirty.clear()
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.WorkloadFinished(time=3, key=KEY, uid="wl-uid"))])
    assert pods.dirty == {"ns/p"}
    pods.dirty.clear()
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=4, key=KEY, uid="wl-uid", kind="Workload"))])
    assert pods.dirty == {"ns/p"} and pods.workloads_of == {}
    pods.dirty.clear()
    mirror.apply_batch([ev.Record(mirror.offset + 1, _config(**POD_ON, namespace="elsewhere"))])
    assert pods.dirty == {"ns/p"}, "another Configuration: every Pod is looked at again"


def test_the_events_of_a_pod_action_are_the_pods_from_kueues_pod_controller() -> None:
    ledger = EventLedger()
    acted = ev.JobActed(time=5, key="ns/p", uid=UID, kind="Pod", action="Started", workload=KEY, cluster_queue="cq")
    ledger.fold(ev.Record(9, acted), Mirror().state, {})
    entry = ledger.ready[9]
    (event,) = job_events(entry.event, entry.before)  # type: ignore[arg-type]
    assert (event.involved.api_version, event.involved.kind, event.involved.name) == ("v1", "Pod", "p")
    assert (event.reason, event.message, event.component) == ("Started", "Admitted by clusterQueue cq",
                                                              "pod-kueue-controller")
    job = ev.JobActed(time=5, key="ns/train", uid="j", action="Started", cluster_queue="cq")
    ledger.fold(ev.Record(10, job), Mirror().state, {})
    (event,) = job_events(job, ledger.ready[10].before)  # type: ignore[arg-type]
    assert (event.involved.kind, event.component) == ("Job", "batch/job-kueue-controller")


def _group_raw(name: str, *, gated: bool = True, phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1",
                         "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "lq",
                                    "kueue.x-k8s.io/pod-group-name": "g"},
                         "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
                         "finalizers": ["kueue.x-k8s.io/managed"]},
            "spec": {"containers": [{"name": "c"}],
                     "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}] if gated else []},
            "status": {"phase": phase}}


class GroupClient(Client):
    """A GET of a Pod answers it from ``raws``."""

    def __init__(self, raws: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.raws = raws

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.calls.append(("get", resource.kind, name))
        return msgspec.json.encode(self.raws[name])


def _watch(pods: PodIntegration, raw: dict[str, Any]) -> None:
    pod = pods._decode(msgspec.json.encode(raw))
    assert pod is not None
    pods.pods[pod.key] = pod


def group_workload_obs() -> o.Workload:
    return o.Workload(
        metadata=o.ObjectMeta(name="g", namespace="ns", uid="wl-uid", resource_version="3",
                              annotations={"kueue.x-k8s.io/is-group-workload": "true"},
                              owner_references=[o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}")
                                                for n in "ab"]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="7aa6c7b8", count=2, template=o.PodTemplateSpec(
            spec=o.PodSpec(containers=[o.Container(name="c")])))]))


@pytest.mark.asyncio
async def test_a_pod_group_gets_one_workload_once_all_its_pods_are_there() -> None:
    raws = {n: _group_raw(n) for n in "ab"}
    pods, _, appended, client = integration(client=GroupClient(raws))
    _watch(pods, raws["a"])
    await pods.reconcile("group/ns/g")
    assert client.calls == [], "one of two Pods: no Workload yet"
    (compose,) = appended
    assert isinstance(compose, ev.JobActed) and (compose.key, compose.action, compose.message) == (
        "ns/a", "ErrWorkloadCompose", "'g' group has fewer runnable pods than expected")
    await pods.reconcile("group/ns/g")
    assert len(appended) == 1, "recorded once while nothing changed"
    ledger = EventLedger()
    ledger.fold(ev.Record(9, compose), Mirror().state, {})
    (event,) = job_events(compose, ledger.ready[9].before)  # type: ignore[arg-type]
    assert (event.type, event.reason, event.involved.name) == ("Warning", "ErrWorkloadCompose", "a")
    appended.clear()
    _watch(pods, raws["b"])
    await pods.reconcile("ns/b")
    await pods.reconcile("group/ns/g")
    (_, kind, body), = [c for c in client.calls if c[0] == "create"]
    assert kind == "Workload" and body["metadata"]["name"] == "g"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("7aa6c7b8", 2)]
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["CreatedWorkload"]


def _annotated_group_raw(name: str) -> dict[str, Any]:
    """A group's Pod naming its group ``g`` in an annotation (Kueue's WorkloadIdentifierAnnotations form), and a
    stale label of another group (read only with the gate off)."""
    raw = _group_raw(name)
    raw["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "old"
    raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-name"] = "g"
    return raw


@pytest.mark.asyncio
@pytest.mark.parametrize("gate", [True, False], ids=["gate-on", "gate-off"])
async def test_a_pod_group_named_in_an_annotation_is_one_under_workload_identifier_annotations(gate: bool) -> None:
    """As Kueue's ``GetPodGroupName``: under the gate (beta, on) the annotation names the group, before the label;
    off, the label alone does."""
    raws = {n: _annotated_group_raw(n) for n in "ab"}
    config = {**POD_ON, "featureGates": {"WorkloadIdentifierAnnotations": gate}}
    pods, _, appended, client = integration(config=config, client=GroupClient(raws))
    for n in "ab":
        _watch(pods, raws[n])
    group = "g" if gate else "old"
    assert {pods._decode(msgspec.json.encode(raws[n])).group or "old" for n in "ab"} == {group}  # type: ignore[union-attr]
    await pods.reconcile(f"group/ns/{group}")
    (_, kind, body), = [c for c in client.calls if c[0] == "create"]
    assert kind == "Workload" and body["metadata"]["name"] == group
    assert sorted(r["name"] for r in body["metadata"]["ownerReferences"]) == ["a", "b"]


def _admitted_group_of_two(pods: PodIntegration, mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    """Group ``g``'s Workload admitted for its one role, both its gated Pods ``a`` and ``b`` watched, and the
    admission shown in the Workload's stored status."""
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="7aa6c7b8", flavors={}, count=2)])
    for n in "ab":
        _watch(pods, _group_raw(n))
    monkeypatch.setattr("connectors.k8s.pods_integration.admission_shown", lambda wl, obs: True)


@pytest.mark.asyncio
async def test_an_admitted_pod_group_has_every_pod_started_with_its_roles_admission(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pods, mirror, appended, client = integration(group_workload_obs())
    _admitted_group_of_two(pods, mirror, monkeypatch)
    await pods.reconcile("group/ns/g")
    patched = [c for c in client.calls if c[0] == "patch"]
    assert [c[2] for c in patched] == ["a", "b"]
    assert all(c[5]["spec"]["schedulingGates"] is None for c in patched)
    assert all(c[5]["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "7aa6c7b8" for c in patched)
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["Started", "Started"]


EVICTIONS = [
    ev.WorkloadDeactivated(time=5, key="ns/g", uid="wl-uid", cycle=1, input=0, reason="Deactivated", message="deactivated"),
    ev.WorkloadPreempted(time=5, key="ns/g", uid="wl-uid", cycle=1, input=0, reason="InClusterQueue", message="preempted"),
]


class EvictingClient(Client):
    """The fold applies ``eviction`` while the first Pod's start is written (the connector folds the log
    concurrently with a pass)."""

    def __init__(self, mirror: Mirror, eviction: ev.AnyEvent) -> None:
        super().__init__()
        self.mirror, self.eviction = mirror, eviction

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = "") -> bytes:
        answer = await super().patch(resource, name, body, namespace, subresource, content_type)
        if name == "a":
            self.mirror.apply(ev.Record(self.mirror.offset + 1, self.eviction))
        return answer


@pytest.mark.asyncio
@pytest.mark.parametrize("eviction", EVICTIONS, ids=["deactivated", "preempted"])
async def test_a_group_evicted_while_its_pods_start_reports_the_started_one_and_starts_no_other(
        eviction: ev.AnyEvent, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step started from the admission the pass saw; once the fold evicts the Workload (deactivated: the
    admission gone; preempted: kept, the Workload evicted), the Pod already ungated is reported Started on that
    admission's ClusterQueue and the others stay gated (the next pass, which the eviction's record marks, stops the
    started one; a gated one is not Kueue's to stop)."""
    pods, mirror, appended, _ = integration(group_workload_obs())
    client = EvictingClient(mirror, eviction)
    pods.client = client  # type: ignore[assignment]
    _admitted_group_of_two(pods, mirror, monkeypatch)
    await pods.reconcile("group/ns/g")
    assert [c[2] for c in client.calls if c[0] == "patch"] == ["a"]
    assert [(e.action, e.key, e.workload, e.cluster_queue) for e in appended if isinstance(e, ev.JobActed)] == [
        ("Started", "ns/a", "ns/g", "cq")]
    assert pods.stats.started == 1 and pods.stats.errors == 0


@pytest.mark.asyncio
async def test_a_finished_pod_group_finishes_its_workload_and_its_records_mark_the_group() -> None:
    pods, mirror, appended, _ = integration(group_workload_obs())
    mirror.state.workloads["ns/g"].phase = ADMITTED
    for n in "ab":
        _watch(pods, _group_raw(n, gated=False, phase="Succeeded"))
    mirror.listeners.append(pods._on_applied)
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.JobStopped(time=3, key="ns/g", uid="wl-uid"))])
    assert pods.dirty == {"group/ns/g"}
    await pods.reconcile("group/ns/g")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished) and (finished.reason, finished.message) == (
        "Succeeded", "Pods succeeded: 2/2.")


def foreign_workload_obs() -> o.Workload:
    """A Workload named as group ``g`` but not made for a group (a Job's: no ``is-group-workload``), whose pod set
    happens to be named as the group's role."""
    obs = group_workload_obs()
    return msgspec.structs.replace(obs, metadata=msgspec.structs.replace(
        obs.metadata, annotations={}, owner_references=[
            o.OwnerReference(api_version="batch/v1", kind="Job", name="train", uid="job-uid", controller=True)]))


@pytest.mark.asyncio
@pytest.mark.parametrize("validate_owner", [True, False])
async def test_a_pod_group_takes_the_workload_of_its_name_made_for_something_else_only_without_the_gate(
        validate_owner: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """PodIntegrationValidateGroupOwner (beta, on): the admitted Workload of a Job named as the group is not the
    group's, so its gated Pods are not started on that Workload's quota; the group is told why, once. Off, the
    group takes it (its Pods made owners of it first, as of any Workload the group matches) and its Pods start."""
    config = {**POD_ON, "featureGates": {"PodIntegrationValidateGroupOwner": validate_owner}}
    pods, mirror, appended, client = integration(foreign_workload_obs(), config=config)
    _admitted_group_of_two(pods, mirror, monkeypatch)
    await pods.reconcile("group/ns/g")
    await pods.reconcile("group/ns/g")
    if not validate_owner:
        assert [c[2] for c in client.calls if c[0] == "patch"] == ["g"]
        owned = msgspec.structs.replace(foreign_workload_obs(), metadata=msgspec.structs.replace(
            foreign_workload_obs().metadata, resource_version="4", owner_references=[
                *foreign_workload_obs().metadata.owner_references,
                *(o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in "ab")]))
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="ns/g", uid="wl-uid", obj=owned)))
        _admitted_group_of_two(pods, mirror, monkeypatch)
        await pods.reconcile("group/ns/g")
        assert [c[2] for c in client.calls if c[0] == "patch"] == ["g", "a", "b"]
        assert [e.action for e in appended if isinstance(e, ev.JobActed)] == [
            "OwnerReferencesAdded", "Started", "Started"]
        return
    assert client.calls == [], "neither started, nor given a Workload of their own, nor that one touched"
    (conflict,) = appended
    assert isinstance(conflict, ev.JobActed) and (conflict.key, conflict.action, conflict.message) == (
        "ns/a", "WorkloadNameConflict",
        'A Workload named "g" already exists but is not a pod group workload; this pod group cannot be admitted')
    ledger = EventLedger()
    ledger.fold(ev.Record(9, conflict), Mirror().state, {})
    (event,) = job_events(conflict, ledger.ready[9].before)  # type: ignore[arg-type]
    assert (event.type, event.reason, event.action, event.involved.name, event.component) == (
        "Warning", "WorkloadNameConflict", "Admission", "a", "pod-kueue-controller")


@pytest.mark.asyncio
async def test_a_pod_group_gets_its_own_workload_once_the_one_of_its_name_made_for_something_else_is_gone() -> None:
    raws = {n: _group_raw(n) for n in "ab"}
    pods, mirror, appended, client = integration(foreign_workload_obs(), client=GroupClient(raws))
    for n in "ab":
        _watch(pods, raws[n])
    await pods.reconcile("group/ns/g")
    assert client.calls == [] and [e.action for e in appended] == ["WorkloadNameConflict"]
    mirror.listeners.append(pods._on_applied)
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=4, key="ns/g", uid="wl-uid",
                                                                      kind="Workload"))])
    assert "group/ns/g" in pods.dirty
    await pods.reconcile("group/ns/g")
    (_, kind, body), = [c for c in client.calls if c[0] == "create"]
    assert kind == "Workload" and body["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"


@pytest.mark.asyncio
async def test_a_fast_admission_group_gets_its_workload_from_its_first_pod() -> None:
    raw = _group_raw("a")
    raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-fast-admission"] = "true"
    pods, _, appended, client = integration(client=GroupClient({"a": raw}))
    _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    (_, _, body), = [c for c in client.calls if c[0] == "create"]
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("7aa6c7b8", 2)]


@pytest.mark.asyncio
async def test_the_succeeded_pods_of_a_running_group_become_reclaimable_through_the_log() -> None:
    pods, mirror, appended, _ = integration(group_workload_obs())
    mirror.state.workloads["ns/g"].phase = ADMITTED
    _watch(pods, _group_raw("a", gated=False, phase="Succeeded"))
    _watch(pods, _group_raw("b", gated=False, phase="Running"))
    await pods.reconcile("group/ns/g")
    (changed,) = appended
    assert isinstance(changed, ev.ReclaimablePodsChanged) and changed.key == "ns/g"
    assert changed.reclaimable_pods == [o.ReclaimablePod(name="7aa6c7b8", count=1)]


@pytest.mark.asyncio
async def test_a_group_missing_a_pod_says_it_waits_for_replacement_pods_through_the_log() -> None:
    pods, mirror, appended, client = integration(group_workload_obs())
    mirror.state.workloads["ns/g"].phase = ADMITTED
    _watch(pods, _group_raw("a", gated=False, phase="Failed"))
    _watch(pods, _group_raw("b", gated=False, phase="Running"))
    await pods.reconcile("group/ns/g")
    (waiting,) = appended
    assert isinstance(waiting, ev.ReplacementPodsChanged) and (waiting.key, waiting.waiting) == ("ns/g", True)
    assert client.calls == [], "the rest waits for the Workload that shows the condition"


def _admit_group(mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="7aa6c7b8", flavors={}, count=2)])
    monkeypatch.setattr("connectors.k8s.pods_integration.admission_shown", lambda wl, obs: True)


@pytest.mark.asyncio
async def test_a_replacement_pod_becomes_an_owner_of_its_groups_workload_before_it_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue's TestReconciler "replacement pods are owning the workload": once the Workload matches, every Pod the
    group keeps is one of its owners (else the garbage collector takes it once the Pods it was made of are gone),
    with ``OwnerReferencesAdded`` on the Workload; the replaced Pod keeps its reference."""
    raws = {"a": _group_raw("a", gated=False, phase="Failed"), "b": _group_raw("b", gated=False, phase="Running"),
            "c": _group_raw("c")}
    pods, mirror, appended, client = integration(group_workload_obs(), client=GroupClient(raws))
    _admit_group(mirror, monkeypatch)
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    await pods.reconcile("group/ns/g")
    (call,) = [c for c in client.calls if c[0] == "patch"]
    assert call[:3] == ("patch", "Workload", "g")
    assert call[5]["metadata"]["resourceVersion"] == "3"
    assert [(r["name"], r["uid"]) for r in call[5]["metadata"]["ownerReferences"]] == [
        ("a", "uid-a"), ("b", "uid-b"), ("c", "uid-c")]
    (added,) = appended
    assert isinstance(added, ev.JobActed) and (added.kind, added.key, added.uid, added.action, added.message) == (
        "Workload", "ns/g", "wl-uid", "OwnerReferencesAdded", "Added 1 owner reference(s)")
    ledger = EventLedger()
    ledger.fold(ev.Record(10, added), mirror.state, {})
    (event,) = job_events(added, ledger.ready[10].before)  # type: ignore[arg-type]
    assert (event.involved.api_version, event.involved.kind, event.involved.name, event.type, event.reason,
            event.component) == ("kueue.x-k8s.io/v1beta2", "Workload", "g", "Normal", "OwnerReferencesAdded",
                                 "pod-kueue-controller")

    owned = msgspec.structs.replace(group_workload_obs(), metadata=msgspec.structs.replace(
        group_workload_obs().metadata, resource_version="4", owner_references=[
            o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in "abc"]))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="ns/g", uid="wl-uid", obj=owned)))
    _admit_group(mirror, monkeypatch)
    client.calls.clear()
    await pods.reconcile("group/ns/g")
    assert [(c[1], c[2]) for c in client.calls if c[0] == "patch"] == [("Pod", "a"), ("Pod", "c")], \
        "the replaced Pod finalized, the replacement started; no more owners to add"
    assert len([e for e in appended if isinstance(e, ev.JobActed) and e.action == "OwnerReferencesAdded"]) == 1


MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


def _max_exec(obs: o.Workload, seconds: int | None) -> o.Workload:
    return msgspec.structs.replace(obs, spec=msgspec.structs.replace(obs.spec, maximum_execution_time_seconds=seconds))


@pytest.mark.asyncio
async def test_a_gated_groups_workload_follows_a_changed_max_exec_time() -> None:
    """Kueue's TestReconciler "workload is recreated when max exec time changes": the group's Pods now say 10 s,
    its Workload (no quota) 5 s: it no longer matches, and is rewritten from the Pods (``UpdatedWorkload``)."""
    raws = {n: _group_raw(n) for n in "ab"}
    for raw in raws.values():
        raw["metadata"]["labels"][MAX_EXEC] = "10"
    pods, _, appended, client = integration(_max_exec(group_workload_obs(), 5), client=GroupClient(raws))
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    await pods.reconcile("group/ns/g")
    (call,) = [c for c in client.calls if c[0] == "patch"]
    assert call[:3] == ("patch", "Workload", "g") and call[5]["spec"]["maximumExecutionTimeSeconds"] == 10
    (updated,) = [e for e in appended if isinstance(e, ev.JobActed)]
    assert (updated.key, updated.action, updated.message) == (
        "ns/a", "UpdatedWorkload", "Updated not matching Workload for suspended job: ns/g")


@pytest.mark.asyncio
@pytest.mark.parametrize(("label", "workload", "wanted"), [
    ("10", 5, 10), (None, 5, None), ("10", 10, "unchanged")], ids=["changed", "removed", "same"])
async def test_a_gated_pods_workload_follows_a_changed_max_exec_time(label: str | None, workload: int,
                                                                     wanted: int | str | None) -> None:
    """A single gated Pod's Workload holding no quota (Kueue's ``EquivalentToWorkload`` compares the maximum
    execution time first): rewritten from the Pod as stored, ``UpdatedWorkload`` on the Pod."""
    pod = managed_pod()
    if label is not None:
        pod = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(
            pod.metadata, labels={**pod.metadata.labels, MAX_EXEC: label}))
    pods, _, appended, client = integration(_max_exec(pod_workload(), workload),
                                            client=Client(msgspec.to_builtins(pod)))
    pods.pods["ns/p"] = pod
    await pods.reconcile("ns/p")
    await pods.reconcile("ns/p")
    patches = [c for c in client.calls if c[0] == "patch" and c[1] == "Workload"]
    acted = [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)]
    if wanted == "unchanged":
        assert patches == [] and acted == []
        return
    (call,) = patches
    assert call[5]["metadata"]["resourceVersion"] == "3" and call[5]["spec"]["maximumExecutionTimeSeconds"] == wanted
    assert acted == [("UpdatedWorkload", f"Updated not matching Workload for suspended job: {KEY}")]


def _ready(raw: dict[str, Any], ready: bool) -> dict[str, Any]:
    raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return raw


@pytest.mark.asyncio
async def test_an_admitted_groups_pods_ready_is_every_pod_ready_under_wait_for_pods_ready() -> None:
    """Kueue's PodsReady for a group: every Pod of it Ready. Without it under waitForPodsReady (on by default), an
    admitted group would be evicted at the timeout however its Pods run."""
    pods, mirror, appended, _ = integration(group_workload_obs(), config={**POD_ON, "waitForPodsReady": {}})
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.conditions = (o.Condition(type="PodsReady", status="False", reason="WaitForStart"),)
    _watch(pods, _ready(_group_raw("a", gated=False), True))
    _watch(pods, _ready(_group_raw("b", gated=False), False))
    await pods.reconcile("group/ns/g")
    assert not [e for e in appended if isinstance(e, ev.PodsReadyChanged)], "one of two Pods ready: not yet"
    _watch(pods, _ready(_group_raw("b", gated=False), True))
    await pods.reconcile("group/ns/g")
    (ready,) = [e for e in appended if isinstance(e, ev.PodsReadyChanged)]
    assert (ready.key, ready.ready, ready.reason) == ("ns/g", True, "Started")


@pytest.mark.asyncio
async def test_a_groups_pods_of_another_role_do_not_count_for_its_pods_ready() -> None:
    """A StatefulSet's pod of a new revision (its template changed what admission looks at: another role) stays
    gated and is none of the Workload's: Kueue reads PodsReady, and whether the group is held back, over the Pods
    it keeps (those of the Workload's roles)."""
    pods, mirror, appended, _ = integration(group_workload_obs(), config={**POD_ON, "waitForPodsReady": {}})
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.conditions = (o.Condition(type="PodsReady", status="False", reason="WaitForStart"),)
    _watch(pods, _ready(_group_raw("a", gated=False), True))
    _watch(pods, _ready(_group_raw("b", gated=False), True))
    other = _group_raw("c")
    other["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]
    _watch(pods, other)
    await pods.reconcile("group/ns/g")
    (ready,) = [e for e in appended if isinstance(e, ev.PodsReadyChanged)]
    assert (ready.key, ready.ready, ready.reason) == ("ns/g", True, "Started")


def _unqueued_pod(owner: o.OwnerReference | None = None) -> ManagedPod:
    pod = managed_pod()
    return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(
        pod.metadata, labels={"kueue.x-k8s.io/managed": "true"}, owner_references=[owner] if owner else []))


@pytest.mark.asyncio
@pytest.mark.parametrize(("without_queue", "owner", "created"), [
    (True, None, True),
    (False, None, False),
    (True, o.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="j", controller=True), False),
], ids=["option-on", "option-off", "child-of-a-job"])
async def test_a_managed_pod_naming_no_queue_gets_a_workload_in_no_queue_under_the_option(
        without_queue: bool, owner: o.OwnerReference | None, created: bool) -> None:
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": UID, "labels": {"kueue.x-k8s.io/managed": "true"}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    pods, _, _, client = integration(config={**POD_ON, "manageJobsWithoutQueueName": without_queue},
                                     client=Client(raw))
    pods.pods["ns/p"] = _unqueued_pod(owner)
    await pods.reconcile("ns/p")
    made = [c[2] for c in client.calls if c[0] == "create"]
    assert bool(made) == created
    if created:
        assert made[0]["metadata"]["name"] == NAME and "queueName" not in made[0]["spec"]


@pytest.mark.asyncio
async def test_a_pod_group_naming_no_queue_gets_a_workload_in_no_queue_under_the_option() -> None:
    """As a single Pod (above): the group's Workload names no queue (it raised on the missing label, for good)."""
    raws = {n: _group_raw(n) for n in "ab"}
    for raw in raws.values():
        del raw["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    pods, _, _, client = integration(config={**POD_ON, "manageJobsWithoutQueueName": True},
                                     client=GroupClient(raws))
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    (made,) = [c[2] for c in client.calls if c[0] == "create"]
    assert made["metadata"]["name"] == "g" and "queueName" not in made["spec"]


# --- prebuilt Workloads --------------------------------------------------------------------------------------------

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def _prebuilt_raw(name: str = "p", *, group: bool = False) -> dict[str, Any]:
    raw = _group_raw(name) if group else {
        "metadata": {"name": name, "namespace": "ns", "uid": UID, "resourceVersion": "5",
                     "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "lq"},
                     "finalizers": ["kueue.x-k8s.io/managed"]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                 "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
    raw["metadata"]["labels"][PREBUILT] = "pre"
    return raw


def _prebuilt_workload(owner_uid: str = "", *, cpu: str = "1", role: str = "") -> o.Workload:
    refs = [o.OwnerReference(api_version="v1", kind="Pod", name="p", uid=owner_uid, controller=True)] if owner_uid else []
    ps = o.PodSet(name=role or "main", count=2 if role else 1, template=o.PodTemplateSpec(spec=o.PodSpec(
        containers=[o.Container(name="c", resources=o.ResourceRequirements(requests={"cpu": cpu}))])))
    return o.Workload(metadata=o.ObjectMeta(name="pre", namespace="ns", uid="pre-uid", resource_version="7",
                                            owner_references=refs),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[ps]))


@pytest.mark.asyncio
async def test_a_pod_naming_a_prebuilt_workload_waits_for_it_then_adopts_it() -> None:
    pods, mirror, appended, client = integration()
    mirror.listeners.append(pods._on_applied)
    _watch(pods, _prebuilt_raw())
    await pods.reconcile("ns/p")
    assert client.calls == [] and appended == [], "no Workload made for it: it waits, gated"
    pods.dirty.clear()
    obs = _prebuilt_workload()
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key="ns/pre", uid="pre-uid", obj=obs))])
    assert pods.dirty == {"ns/p"}, "the Workload it names arriving wakes it"
    await pods.reconcile("ns/p")
    (call,) = client.calls
    assert call[:3] == ("patch", "Workload", "pre")
    assert call[5]["metadata"]["ownerReferences"] == [pod_sync.controller_ref("p", UID)]
    assert call[5]["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": UID} and pods.stats.adopted == 1
    adopted = _prebuilt_workload(UID)
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="ns/pre", uid="pre-uid",
                                                                        obj=adopted))])
    client.calls.clear()
    await pods.reconcile("ns/p")
    assert client.calls == [] and appended == [], "its own now: it waits for its admission"


@pytest.mark.asyncio
async def test_a_running_pod_whose_prebuilt_workload_is_out_of_sync_finishes_it_and_is_stopped() -> None:
    pods, _, appended, client = integration(_prebuilt_workload(UID, cpu="2"))
    raw = _prebuilt_raw()
    raw["spec"]["schedulingGates"] = []
    _watch(pods, raw)
    await pods.reconcile("ns/p")
    finished = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert [(e.key, e.reason, e.message) for e in finished] == [
        ("ns/pre", "OutOfSync", "The prebuilt workload is out of sync with its user job")]
    assert [c[:4] for c in client.calls] == [("patch", "Pod", "p", "status"), ("delete", "Pod", "p", UID)]
    (stopped,) = [e for e in appended if isinstance(e, ev.JobActed)]
    assert (stopped.action, stopped.message) == ("Stopped", "missing workload")
    assert not any(c[0] == "create" for c in client.calls)


@pytest.mark.asyncio
async def test_a_pod_leaves_a_prebuilt_workload_another_object_controls() -> None:
    foreign = _prebuilt_workload()
    foreign = msgspec.structs.replace(foreign, metadata=msgspec.structs.replace(foreign.metadata, owner_references=[
        o.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="job-uid", controller=True)]))
    pods, _, appended, client = integration(foreign)
    _watch(pods, _prebuilt_raw())
    await pods.reconcile("ns/p")
    assert client.calls == [] and appended == []


@pytest.mark.asyncio
async def test_a_pod_group_naming_group_and_prebuilt_workload_in_annotations_takes_that_workload() -> None:
    """The form a LeaderWorkerSet's pods are adopted in under ``WorkloadIdentifierAnnotations`` (beta, on):
    group and prebuilt names as annotations only (Kueue's "should set queue-name when adopting a pod without
    it"); the pod integration reads both there and makes the group's pods owners of that Workload."""
    pods, _, _, client = integration(_prebuilt_workload(role="7aa6c7b8"))
    for n in "ab":
        raw = _group_raw(n)
        meta = raw["metadata"]
        del meta["labels"]["kueue.x-k8s.io/pod-group-name"]
        meta["annotations"].update({"kueue.x-k8s.io/pod-group-name": "g", PREBUILT: "pre"})
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    (call,) = client.calls
    assert call[:3] == ("patch", "Workload", "pre")
    assert [r["name"] for r in call[5]["metadata"]["ownerReferences"]] == ["a", "b"]


@pytest.mark.asyncio
async def test_a_pod_group_makes_its_pods_owners_of_its_prebuilt_workload_and_runs_on_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pods, mirror, appended, client = integration(_prebuilt_workload(role="7aa6c7b8"))
    mirror.listeners.append(pods._on_applied)
    for n in "ab":
        _watch(pods, _prebuilt_raw(n, group=True))
    await pods.reconcile("group/ns/g")
    (call,) = client.calls
    assert call[:3] == ("patch", "Workload", "pre")
    assert [(r["name"], r.get("controller")) for r in call[5]["metadata"]["ownerReferences"]] == [
        ("a", None), ("b", None)]
    owned = msgspec.structs.replace(_prebuilt_workload(role="7aa6c7b8"), metadata=o.ObjectMeta(
        name="pre", namespace="ns", uid="pre-uid", resource_version="8",
        owner_references=[o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in "ab"]))
    pods.dirty.clear()
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="ns/pre", uid="pre-uid",
                                                                        obj=owned))])
    assert pods.dirty == {"group/ns/g"}, "the group's prebuilt Workload, not named after it, wakes the group"
    wl = mirror.state.workloads["ns/pre"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="7aa6c7b8", flavors={}, count=2)])
    monkeypatch.setattr("connectors.k8s.pods_integration.admission_shown", lambda wl, obs: True)
    client.calls.clear()
    await pods.reconcile("group/ns/g")
    assert [c[2] for c in client.calls if c[0] == "patch"] == ["a", "b"]
    assert not any(c[0] == "create" for c in client.calls) and [
        (e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("Workload", "OwnerReferencesAdded", "Added 2 owner reference(s)"), ("Pod", "Started", ""),
        ("Pod", "Started", "")]


@pytest.mark.asyncio
@pytest.mark.parametrize("gate", [True, False], ids=["MultiKueue", "gate-off"])
async def test_a_prebuilt_groups_pods_stay_gated_while_its_workload_has_a_multikueue_check(
        gate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A LeaderWorkerSet's group on a MultiKueue manager (the set has no managedBy: its controller makes the pods
    here too, which name the group's prebuilt Workload): admitted once a worker admitted its copy, the Workload
    runs there, and Kueue's reconciler skips local execution for Pods whose Workload has a MultiKueue check."""
    mk = o.AdmissionCheck(metadata=o.ObjectMeta(name="mk", uid="mk-uid"),
                          spec=o.AdmissionCheckSpec(controller_name="kueue.x-k8s.io/multikueue"))
    owned = o.ObjectMeta(name="pre", namespace="ns", uid="pre-uid", resource_version="8", owner_references=[
        o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in "ab"])
    config = {**POD_ON, "featureGates": {"MultiKueue": gate}}
    pods, mirror, appended, client = integration(
        msgspec.structs.replace(_prebuilt_workload(role="7aa6c7b8"), metadata=owned), mk, config=config)
    for n in "ab":
        _watch(pods, _prebuilt_raw(n, group=True))
    wl = mirror.state.workloads["ns/pre"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="7aa6c7b8", flavors={}, count=2)])
    wl.check_states = {"mk": o.AdmissionCheckState(name="mk", state="Ready",
                                                   message='The workload got reservation on "worker1"')}
    monkeypatch.setattr("connectors.k8s.pods_integration.admission_shown", lambda wl, obs: True)
    await pods.reconcile("group/ns/g")
    started = [c[2] for c in client.calls if c[0] == "patch" and c[1] == "Pod"]
    acted = [e.action for e in appended if isinstance(e, ev.JobActed)]
    if gate:
        assert started == [] and acted == [], "the group runs on the worker; its pods here stay gated"
    else:
        assert started == ["a", "b"] and acted == ["Started", "Started"]


@pytest.mark.asyncio
@pytest.mark.parametrize("fast", [False, True], ids=["gate-off", "FastQuotaReleaseInPodIntegration"])
async def test_the_configurations_gate_says_whether_terminating_pods_hold_an_evicted_groups_quota(fast: bool) -> None:
    config = {**POD_ON, "featureGates": {"FastQuotaReleaseInPodIntegration": fast}}
    pods, mirror, appended, _ = integration(group_workload_obs(), config=config)
    wl = mirror.state.workloads["ns/g"]
    wl.phase, wl.evicted = ADMITTED, "Preempted"
    wl.conditions = (o.Condition(type="Evicted", status="True", reason="Preempted", message="Preempted by x"),
                     o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved"))
    for n in "ab":
        raw = _group_raw(n, gated=False, phase="Running")
        raw["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
        raw["spec"]["nodeName"] = "n1"
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    assert [type(e).__name__ for e in appended if not isinstance(e, ev.JobActed)] == (
        ["JobStopped"] if fast else [])


UNFINALIZE = ("patch", "Workload", NAME, "", "", {"metadata": {"uid": "wl-uid", "resourceVersion": "3",
                                                               "finalizers": None}})
UNFINALIZE_SHOWN = ("patch", "Workload", NAME, "", "", {"metadata": {"uid": "wl-uid", "resourceVersion": "4",
                                                                     "finalizers": None}})


def finished_shown(obs: o.Workload, reason: str = "OwnerNotFound", rv: str = "4") -> o.Workload:
    """``obs`` as the apiserver shows it once the status writer wrote its ``Finished``: the next version."""
    finished = o.Condition(type="Finished", status="True", reason=reason)
    return msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, resource_version=rv),
                                   status=msgspec.structs.replace(obs.status, conditions=[finished]))


def show_finished(pods: PodIntegration, mirror: Mirror, appended: list[ev.AnyEvent], obs: o.Workload) -> None:
    """The log takes the ``WorkloadFinished`` the pass appended, and the watch brings the version showing it; the
    dirty keys of both are dropped (each test says which pass it runs)."""
    (finished,) = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    shown = finished_shown(obs, finished.reason)
    mirror.apply_batch([ev.Record(mirror.offset + 1, finished),
                        ev.Record(mirror.offset + 2, ev.ObjectUpserted(time=2, key=obs.key, uid=obs.metadata.uid,
                                                                       obj=shown))])
    pods.dirty.clear()


@pytest.mark.asyncio
async def test_a_finished_workload_loses_its_finalizer_with_its_pods() -> None:
    """As for a Job's: once the apiserver shows it finished, the Pod is finalized and then the Workload's
    ``resource-in-use`` finalizer goes."""
    pods, mirror, _, client = integration(pod_workload(finalizer=True, finished=True))
    mirror.state.workloads[KEY].phase = "Finished"
    pods.pods["ns/p"] = managed_pod(gated=False, phase="Succeeded")
    await pods.reconcile("ns/p")
    assert [c[:3] for c in client.calls] == [("patch", "Pod", "p"), ("patch", "Workload", NAME)]
    assert client.calls[1] == UNFINALIZE and pods.stats.finalizers_removed == 1


@pytest.mark.asyncio
async def test_a_workload_being_deleted_has_its_pod_stopped_then_loses_its_finalizer() -> None:
    pods, mirror, appended, client = integration(pod_workload(finalizer=True, deleting=True))
    mirror.state.workloads[KEY].phase = ADMITTED
    pods.pods["ns/p"] = managed_pod(gated=False, phase="Running")
    await pods.reconcile("ns/p")
    status, delete, unfinalize = client.calls
    (cond,) = status[5]["status"]["conditions"]
    assert (cond["reason"], cond["message"]) == ("WorkloadDeleted", "Workload is deleted")
    assert delete == ("delete", "Pod", "p", UID) and unfinalize == UNFINALIZE
    assert [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [("Stopped", "Workload is deleted")]


@pytest.mark.asyncio
async def test_a_pod_being_deleted_lets_its_workload_go() -> None:
    """Kueue's reconciler, first thing for a Pod being deleted: its Workload is finished ``OwnerNotFound`` and loses
    its finalizer; the Pod loses Kueue's."""
    pods, mirror, appended, client = integration(pod_workload(finalizer=True))
    mirror.state.workloads[KEY].phase = ADMITTED
    pod = managed_pod(gated=False, phase="Running")
    pods.pods["ns/p"] = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(
        pod.metadata, deletion_timestamp="2026-01-01T00:00:00Z"))
    await pods.reconcile("ns/p")
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == [("OwnerNotFound", KEY)]
    assert client.calls == [("patch", "Pod", "p", "", "", {"metadata": {"resourceVersion": "5",
                                                                        "finalizers": None}})]
    client.calls.clear()
    show_finished(pods, mirror, appended, pod_workload(finalizer=True))
    await pods.reconcile("ns/p")
    assert client.calls == [UNFINALIZE_SHOWN], "the finalizer goes on the version showing the Workload finished"


@pytest.mark.asyncio
async def test_the_workload_of_a_pod_that_is_gone_loses_its_finalizer_before_it_is_deleted() -> None:
    pods, mirror, appended, client = integration(pod_workload(finalizer=True))
    await pods.reconcile("ns/p")
    assert client.calls == [("get", "Pod", "p")], "finished first: nothing written to the Workload"
    client.calls.clear()
    show_finished(pods, mirror, appended, pod_workload(finalizer=True))
    await pods.reconcile("ns/p")
    assert client.calls == [("get", "Pod", "p"), UNFINALIZE_SHOWN, ("delete", "Workload", NAME, "wl-uid")]


@pytest.mark.asyncio
async def test_a_gone_pods_workload_the_log_has_finished_keeps_its_finalizer_until_the_apiserver_shows_it() -> None:
    """Kueue finishes an orphan, then takes the finalizer off the version that write returned: the Finished the log
    holds is the status writer's to write, so the finalizer (and the deletion) wait for the version showing it,
    and never race that write (a 409 either way, or the Workload deleted never shown finished)."""
    pods, mirror, appended, client = integration(pod_workload(finalizer=True))
    await pods.reconcile("ns/p")
    (finished,) = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    mirror.apply(ev.Record(mirror.offset + 1, finished))  # in the log, not written yet
    pods._acted.clear()  # a pass that does not know what the first one did (a restart)
    await pods.reconcile("ns/p")
    assert client.calls == [("get", "Pod", "p")] * 2


@pytest.mark.asyncio
async def test_a_leaderworkerset_groups_workload_is_kept_while_it_has_no_pods() -> None:
    """A LeaderWorkerSet's group Workload (a group Workload owned by the set) made before the set's pods: the pod
    integration, looking at the groups without members when it starts, let it go and deleted it (finished
    OwnerNotFound), a kube flake when the set's integration made it first. The set owns it: it stays."""
    obs = group_workload_obs()
    lws = o.OwnerReference(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet", name="serve",
                           uid="lws-uid", controller=True)
    obs = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, owner_references=[lws]))
    pods, _, appended, client = integration(obs, client=Client(None))
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert client.calls == [] and appended == []


@pytest.mark.asyncio
async def test_an_evicted_leaderworkerset_groups_workload_with_no_pods_left_gives_its_quota_back() -> None:
    """Kueue's #14578: a LeaderWorkerSet's (or StatefulSet's) Workload evicted with none of its Pods left has
    no Pod to wait for: its quota goes at once (it stays, its owner's), once, and its eviction marks it."""
    obs = group_workload_obs()
    lws = o.OwnerReference(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet", name="serve",
                           uid="lws-uid", controller=True)
    obs = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, owner_references=[lws]))
    pods, mirror, appended, client = integration(obs, client=Client(None))
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="7aa6c7b8", flavors={}, count=2)])
    wl.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    await pods.reconcile("group/ns/g")
    assert appended == [], "admitted: nothing to give back"
    pods.dirty.clear()
    evicted = ev.WorkloadEvicted(time=9, cycle=1, input=-1, key="ns/g", uid="wl-uid", reason="Preempted", message="x")
    mirror.apply(ev.Record(mirror.offset + 1, evicted))
    pods._on_applied([ev.Record(mirror.offset, evicted)])
    assert "group/ns/g" in pods.dirty
    await pods.reconcile("group/ns/g")
    assert [type(e).__name__ for e in appended] == ["JobStopped"]
    assert client.calls == [], "the set owns it: it stays"


@pytest.mark.asyncio
async def test_the_workload_of_a_pod_group_none_of_whose_pods_is_left_is_let_go_and_deleted() -> None:
    obs = group_workload_obs()
    obs = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(
        obs.metadata, finalizers=["kueue.x-k8s.io/resource-in-use"]))
    pods, mirror, appended, client = integration(obs, client=Client(None))
    mirror.listeners.append(pods._on_applied)
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert [c[:3] for c in client.calls] == [("get", "Pod", "a"), ("get", "Pod", "b")], "finished first"
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == [("OwnerNotFound", "ns/g")]
    client.calls.clear()
    await pods.reconcile("group/ns/g")
    assert client.calls == [], "once, until the watch brings the Workload showing it finished"
    (finished,) = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    mirror.apply_batch([ev.Record(mirror.offset + 1, finished),
                        ev.Record(mirror.offset + 2, ev.ObjectUpserted(time=2, key="ns/g", uid="wl-uid",
                                                                       obj=finished_shown(obs)))])
    assert pods.dirty == {"group/ns/g"}, "the version showing it finished marks the group none of whose Pods is left"
    await pods.reconcile(pods.dirty.pop())
    assert [c[:3] for c in client.calls] == [("get", "Pod", "a"), ("get", "Pod", "b"), ("patch", "Workload", "g"),
                                             ("delete", "Workload", "g")]
    assert client.calls[2][5]["metadata"]["resourceVersion"] == "4" and client.calls[3] == (
        "delete", "Workload", "g", "wl-uid"), "on the version showing it finished, in one pass"
    client.calls.clear()
    await pods.reconcile("group/ns/g")
    assert client.calls == [], "once, until the watch brings the Workload's deletion"


class MovedOnClient(Client):
    """Every Pod is gone (404); the first write to the Workload is refused: it moved on meanwhile (its status
    written from the log, as the ``WaitingForReplacementPods`` the group's last pass recorded)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.refuse = 1

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = "") -> bytes:
        if resource.kind == "Workload" and self.refuse:
            self.refuse -= 1
            self.calls.append(("conflict", resource.kind, name))
            raise Conflict(f"workloads {name}: the object has been modified")
        return await super().patch(resource, name, body, namespace, subresource, content_type)


@pytest.mark.asyncio
async def test_a_gone_groups_workload_that_moved_on_while_it_was_let_go_is_let_go_in_its_newer_version() -> None:
    """No Pod of the group left, and its Workload written meanwhile (the write of a record an earlier pass of the
    group appended): the let-go is refused for the older version, and the newer one the watch brings marks the
    group, which has no member left to mark it, so that the Workload still goes, as the garbage collector would
    delete it once none of its owners is there."""
    obs = group_workload_obs()
    obs = finished_shown(msgspec.structs.replace(obs, metadata=msgspec.structs.replace(
        obs.metadata, finalizers=["kueue.x-k8s.io/resource-in-use"])), "Succeeded", rv="3")
    pods, mirror, _, client = integration(obs, client=MovedOnClient())
    mirror.listeners.append(pods._on_applied)
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert ("conflict", "Workload", "g") in client.calls and not [c for c in client.calls if c[0] == "delete"]
    pods.dirty.clear()
    newer = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, resource_version="4"))
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key="ns/g", uid="wl-uid",
                                                                       obj=newer))])
    assert pods.dirty == {"group/ns/g"}, "the newer Workload marks the group none of whose Pods is left"
    client.calls.clear()
    await pods.reconcile("group/ns/g")
    assert [c[:3] for c in client.calls if c[0] != "get"] == [("patch", "Workload", "g"), ("delete", "Workload", "g")]


class UnavailableOnceClient(Client):
    """Every Pod is gone (404); the first ``verb`` of a Workload fails as an apiserver that is briefly unavailable
    (a 503, a timeout, a cut connection): the Workload is left as it was, so no newer version of it comes."""

    def __init__(self, verb: str = "patch") -> None:
        super().__init__(None)
        self.verb = verb
        self.fail = 1

    def _flake(self, verb: str, resource: Any, name: str) -> None:
        if verb == self.verb and resource.kind == "Workload" and self.fail:
            self.fail -= 1
            self.calls.append(("unavailable", resource.kind, name))
            raise Unavailable(f"{verb} workloads/{name}: 503 Service Unavailable")

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = "") -> bytes:
        self._flake("patch", resource, name)
        return await super().patch(resource, name, body, namespace, subresource, content_type)

    async def delete(self, resource: Any, name: str, namespace: str = "", *, uid: str = "",
                     resource_version: str = "") -> bytes:
        self._flake("delete", resource, name)
        return await super().delete(resource, name, namespace, uid=uid, resource_version=resource_version)


def _writes(client: Client) -> list[tuple[Any, ...]]:
    return [c[:3] for c in client.calls if c[0] != "get"]


@pytest.mark.asyncio
async def test_a_gone_groups_workload_whose_let_go_failed_is_let_go_on_the_retry() -> None:
    """The finalizer removal fails but not for a conflict: the Workload is unchanged, so the watch brings nothing;
    the retry the failure schedules lets it go (as Kueue's reconciler, requeued on the error)."""
    obs = finished_shown(msgspec.structs.replace(group_workload_obs(), metadata=msgspec.structs.replace(
        group_workload_obs().metadata, finalizers=["kueue.x-k8s.io/resource-in-use"])), rv="3")
    pods, mirror, _, client = integration(obs, client=UnavailableOnceClient())
    mirror.listeners.append(pods._on_applied)
    pods.members["ns/g"] = set()
    with pytest.raises(Unavailable):
        await pods.reconcile("group/ns/g")
    assert _writes(client) == [("unavailable", "Workload", "g")]
    client.calls.clear()
    await pods.reconcile("group/ns/g")  # the retry
    assert _writes(client) == [("patch", "Workload", "g"), ("delete", "Workload", "g")]


@pytest.mark.asyncio
async def test_a_gone_pods_workload_whose_let_go_failed_is_let_go_on_the_retry() -> None:
    pods, mirror, appended, client = integration(pod_workload(finalizer=True), client=UnavailableOnceClient())
    await pods.reconcile("ns/p")  # finished first
    show_finished(pods, mirror, appended, pod_workload(finalizer=True))
    with pytest.raises(Unavailable):
        await pods.reconcile("ns/p")
    assert _writes(client) == [("unavailable", "Workload", NAME)]
    client.calls.clear()
    await pods.reconcile("ns/p")  # the retry
    assert _writes(client) == [("patch", "Workload", NAME), ("delete", "Workload", NAME)]


@pytest.mark.asyncio
async def test_a_not_matching_group_workload_whose_deletion_failed_is_deleted_on_the_retry() -> None:
    pods, mirror, _, client = integration(group_workload_obs(), client=UnavailableOnceClient("delete"))
    mirror.state.workloads["ns/g"].phase = ADMITTED
    for n in "ab":
        raw = _group_raw(n)
        raw["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]  # another role
        _watch(pods, raw)
    with pytest.raises(Unavailable):
        await pods.reconcile("group/ns/g")
    client.calls.clear()
    await pods.reconcile("group/ns/g")  # the retry
    assert _writes(client) == [("delete", "Workload", "g")] and pods.stats.deleted == 1


@pytest.mark.asyncio
async def test_a_pod_group_with_a_pod_still_there_out_of_the_watch_keeps_its_workload() -> None:
    pods, _, appended, client = integration(group_workload_obs(), client=GroupClient(
        {"a": {"metadata": {"uid": "uid-a"}}}))
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert client.calls == [("get", "Pod", "a")] and appended == []


class OutOfWatchClient(GroupClient):
    """The apiserver's Pods, answered from ``raws`` (a name not there: 404), none of them managed: a list of
    the managed Pods is empty."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if name not in self.raws:
            self.calls.append(("get", resource.kind, name))
            raise NotFound(f"{resource.kind} {name} not found")
        return await super().get(resource, name, namespace)

    async def list(self, resource: Any, *, label_selector: str = "") -> Any:
        from connectors.k8s.client import ListMeta, RawList
        return RawList(metadata=ListMeta(resource_version="10"), items=[])


@pytest.mark.asyncio
async def test_a_gone_groups_workload_kept_for_a_pod_out_of_the_watch_is_let_go_on_the_next_relist() -> None:
    """No managed Pod of the group is left, but the apiserver still has one of the Pods its Workload names (out of
    the watch's selection): the Workload stays. That Pod then goes unseen, and nothing of the Workload changes:
    the next relist of the managed Pods (after a 410 Gone) marks the group, as it does at a restart, so that the
    Workload goes, as Kueue's informers redeliver every object on a relist."""
    obs = group_workload_obs()
    obs = finished_shown(msgspec.structs.replace(obs, metadata=msgspec.structs.replace(
        obs.metadata, finalizers=["kueue.x-k8s.io/resource-in-use"])), "Succeeded", rv="3")
    client = OutOfWatchClient({"a": {"metadata": {"uid": "uid-a"}}})
    pods, _, appended, _ = integration(obs, client=client)
    await pods.informer.relist()
    pods.dirty.clear()
    await pods.reconcile("group/ns/g")
    assert client.calls == [("get", "Pod", "a")] and appended == [], "a is still there"
    client.raws.clear()  # a goes: out of the watch, unseen
    client.calls.clear()
    await pods.informer.relist()
    assert pods.dirty == {"group/ns/g"}, "the relist sweeps again"
    await pods.reconcile(pods.dirty.pop())
    assert [c[:3] for c in client.calls] == [("get", "Pod", "a"), ("get", "Pod", "b"), ("patch", "Workload", "g"),
                                             ("delete", "Workload", "g")]
    assert appended == [], "finished already"


def _labelled(pod: ManagedPod, **labels: str) -> ManagedPod:
    return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(
        pod.metadata, labels={**pod.metadata.labels, **labels}))


def wpc(name: str, value: int) -> o.WorkloadPriorityClass:
    return o.WorkloadPriorityClass(metadata=o.ObjectMeta(name=name, uid=f"wpc-{name}"), value=value)


@pytest.mark.asyncio
async def test_a_gated_pod_whose_queue_name_changed_moves_its_workload() -> None:
    """As Kueue's reconciler for a suspended job (a Pod: gated) whose Workload is neither evicted nor holding quota:
    the Workload takes the queue its label names now; no Event."""
    pods, _, appended, client = integration(pod_workload())
    pods.pods["ns/p"] = _labelled(managed_pod(), **{"kueue.x-k8s.io/queue-name": "other"})
    await pods.reconcile("ns/p")
    assert client.calls == [("patch", "Workload", NAME, "", "", {"metadata": {"resourceVersion": "3"},
                                                                 "spec": {"queueName": "other"}})]
    assert appended == [] and pods.stats.requeued == 1
    await pods.reconcile("ns/p")
    assert len(client.calls) == 1, "once for this version of the Workload"
    pods, mirror, _, client = integration(pod_workload())
    pods.pods["ns/p"] = _labelled(managed_pod(gated=False, phase="Running"), **{"kueue.x-k8s.io/queue-name": "other"})
    mirror.state.workloads[KEY].phase = ADMITTED
    await pods.reconcile("ns/p")
    assert not [c for c in client.calls if c[1] == "Workload"], "a running Pod's admitted Workload keeps its queue"


@pytest.mark.asyncio
async def test_a_pods_changed_priority_class_label_reprioritises_its_workload() -> None:
    pods, _, appended, client = integration(wpc("high", 1000), pod_workload())
    pods.pods["ns/p"] = _labelled(managed_pod(), **{"kueue.x-k8s.io/priority-class": "high"})
    await pods.reconcile("ns/p")
    assert client.calls == [("patch", "Workload", NAME, "", "", {
        "metadata": {"resourceVersion": "3"},
        "spec": {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
                 "priority": 1000}})]
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and (acted.key, acted.kind, acted.action, acted.message) == (
        "ns/p", "Pod", "UpdatedWorkload", f"Updated workload priority class: {KEY}")


@pytest.mark.asyncio
async def test_a_pods_missing_workload_priority_class_is_reported_and_its_workload_waits_for_it() -> None:
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": UID,
                        "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": "high"}},
           "spec": {"containers": [{"name": "c"}]}}
    pods, mirror, appended, client = integration(client=Client(raw))
    pods.pods["ns/p"] = _labelled(managed_pod(), **{"kueue.x-k8s.io/priority-class": "high"})
    await pods.reconcile("ns/p")
    await pods.reconcile("ns/p")
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and (acted.kind, acted.action, acted.message) == (
        "Pod", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "high" not found')
    assert client.calls == [], "no Workload; reported once for this version of the Pod"
    ledger = EventLedger()
    ledger.fold(ev.Record(9, acted), Mirror().state, {})
    (event,) = job_events(acted, ledger.ready[9].before)  # type: ignore[arg-type]
    assert (event.type, event.reason, event.involved.kind, event.component) == (
        "Warning", "WorkloadPriorityClassNotFound", "Pod", "pod-kueue-controller")
    mirror.listeners.append(pods._on_applied)
    cls = wpc("high", 1000)
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=cls.key, uid="wpc-high", obj=cls))])
    assert "ns/p" in pods.dirty
    await pods.reconcile("ns/p")
    (_, _, body), = [c for c in client.calls if c[0] == "create"]
    assert body["spec"]["priority"] == 1000, "the same version of the Pod gets its Workload once the class is there"


@pytest.mark.asyncio
async def test_a_pods_label_changed_to_a_missing_class_is_reported_and_its_workload_keeps_its_priority() -> None:
    """As for a Job (Kueue's ``ExtractPriority`` reports the miss on every path to the lookup, #13775)."""
    pods, _, appended, client = integration(pod_workload())
    pods.pods["ns/p"] = _labelled(managed_pod(), **{"kueue.x-k8s.io/priority-class": "missing"})
    await pods.reconcile("ns/p")
    await pods.reconcile("ns/p")
    assert client.calls == [], "the Workload keeps its priority"
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and (acted.key, acted.kind, acted.action, acted.message) == (
        "ns/p", "Pod", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "missing" not found')


@pytest.mark.asyncio
async def test_a_gated_pod_groups_queue_name_change_moves_its_workload() -> None:
    pods, _, _, client = integration(group_workload_obs())
    for n in "ab":
        raw = _group_raw(n)
        raw["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    assert client.calls == [("patch", "Workload", "g", "", "", {"metadata": {"resourceVersion": "3"},
                                                                "spec": {"queueName": "other"}})]


def _waiting_on_check(wl: Any, message: str) -> None:
    wl.phase = "QuotaReserved"
    wl.check_states = {"prov": o.AdmissionCheckState(name="prov", state="Pending", message=message),
                       "other": o.AdmissionCheckState(name="other", state="Ready", message="fine")}


@pytest.mark.asyncio
async def test_a_gated_pod_is_told_what_its_workloads_admission_checks_wait_for_each_new_message_once() -> None:
    """Kueue's ``UpdatedAdmissionCheck`` for a Pod: held back (gated) while its Workload holds quota but is not
    admitted, the Pending checks' messages, on the Pod from ``pod-kueue-controller``."""
    pods, mirror, appended, _ = integration(pod_workload())
    wl = mirror.state.workloads[KEY]
    _waiting_on_check(wl, "capacity in 10m")
    pods.pods["ns/p"] = managed_pod()
    await pods.reconcile("ns/p")
    await pods.reconcile("ns/p")
    (told,) = appended
    assert isinstance(told, ev.JobActed) and (told.key, told.kind, told.action, told.message) == (
        "ns/p", "Pod", "UpdatedAdmissionCheck", "prov: capacity in 10m")
    ledger = EventLedger()
    ledger.fold(ev.Record(9, told), Mirror().state, {})
    (event,) = job_events(told, ledger.ready[9].before)  # type: ignore[arg-type]
    assert (event.type, event.reason, event.message, event.component) == (
        "Normal", "UpdatedAdmissionCheck", "prov: capacity in 10m", "pod-kueue-controller")
    _waiting_on_check(wl, "capacity in 5m")
    await pods.reconcile("ns/p")
    assert [e.message for e in appended if isinstance(e, ev.JobActed)] == [
        "prov: capacity in 10m", "prov: capacity in 5m"]
    mirror.pending[KEY] = {}  # a decision about it still to be written: Kueue sees the status written before
    _waiting_on_check(wl, "capacity in 1m")
    await pods.reconcile("ns/p")
    assert len(appended) == 2


@pytest.mark.asyncio
async def test_every_pod_of_a_group_is_told_what_its_workloads_admission_checks_wait_for() -> None:
    pods, mirror, appended, _ = integration(group_workload_obs())
    _waiting_on_check(mirror.state.workloads["ns/g"], "capacity in 10m")
    for n in "ab":
        _watch(pods, _group_raw(n))
    await pods.reconcile("group/ns/g")
    assert [(e.key, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("ns/a", "UpdatedAdmissionCheck", "prov: capacity in 10m"),
        ("ns/b", "UpdatedAdmissionCheck", "prov: capacity in 10m")]


@pytest.mark.asyncio
async def test_a_pod_being_deleted_lets_go_only_the_prebuilt_workload_it_controls() -> None:
    """Kueue lets go of the Workloads a Pod being deleted owns: a prebuilt one another object controls is not the
    Pod's to finish."""
    other = _prebuilt_workload()
    other = msgspec.structs.replace(other, metadata=msgspec.structs.replace(other.metadata, owner_references=[
        o.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="j-uid", controller=True)]))
    pods, mirror, appended, client = integration(other)
    raw = _prebuilt_raw()
    raw["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    _watch(pods, raw)
    await pods.reconcile("ns/p")
    assert not [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert not [c for c in client.calls if c[1] == "Workload"]
    pods, mirror, appended, client = integration(_prebuilt_workload(UID))
    _watch(pods, raw)
    await pods.reconcile("ns/p")
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == [("OwnerNotFound", "ns/pre")]


@pytest.mark.asyncio
async def test_a_prebuilt_workload_follows_its_pods_queue_but_not_its_priority_class() -> None:
    """As Kueue's ``ensureOneWorkload``, which re-resolves the priority of a matched generated Workload only; the
    queue name of a suspended job's Workload follows it either way."""
    pods, _, _, client = integration(wpc("high", 1000), _prebuilt_workload(UID))
    raw = _prebuilt_raw()
    raw["metadata"]["labels"] |= {"kueue.x-k8s.io/priority-class": "high", "kueue.x-k8s.io/queue-name": "other"}
    _watch(pods, raw)
    await pods.reconcile("ns/p")
    assert [c for c in client.calls if c[0] == "patch"] == [
        ("patch", "Workload", "pre", "", "", {"metadata": {"resourceVersion": "7"}, "spec": {"queueName": "other"}})]


@pytest.mark.asyncio
async def test_a_leaderworkerset_groups_workload_keeps_the_queue_its_set_gave_it_whatever_its_pods_say() -> None:
    """Kueue's #11191: the queue of a serving group's Workload is its set's to move (the LeaderWorkerSet
    reconciler, on a queue change while no group is ready); its gated pods, relabelled after, still naming the old
    queue do not move it back."""
    lws = o.OwnerReference(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet", name="serve",
                           uid="lws-uid", controller=True)
    obs = _prebuilt_workload(role="7aa6c7b8")
    owners = [lws, *(o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in "ab")]
    obs = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, owner_references=owners),
                                  spec=msgspec.structs.replace(obs.spec, queue_name="other"))
    pods, _, _, client = integration(obs)
    for n in "ab":
        raw = _prebuilt_raw(n, group=True)
        raw["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = "serve"
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    assert [c for c in client.calls if c[1] == "Workload" and "queueName" in c[5].get("spec", {})] == []


@pytest.mark.asyncio
async def test_a_group_workload_none_of_whose_pods_has_its_roles_is_deleted_before_anything_else() -> None:
    """As Kueue's reconciler, which finds the Workload not matching before keeping it in step: no replacement
    Pods are waited for (none of its role is left), it is deleted (``DeletedWorkload`` on the group's first Pod),
    and the group then gets a new one as any group without one."""
    pods, mirror, appended, client = integration(group_workload_obs())
    mirror.state.workloads["ns/g"].phase = ADMITTED
    for n in "ab":
        raw = _group_raw(n)
        raw["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]  # another role
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    assert [c[:3] for c in client.calls] == [("delete", "Workload", "g")]
    (deleted,) = appended
    assert isinstance(deleted, ev.JobActed) and (deleted.key, deleted.action, deleted.message) == (
        "ns/a", "DeletedWorkload", "Deleted not matching Workload: ns/g")
    assert pods.stats.deleted == 1


@pytest.mark.asyncio
async def test_a_relist_forgets_a_pod_deleted_unseen_but_not_its_namesake_naming_the_same_workload() -> None:
    """After a 410 Gone the relist reports the Pods deleted meanwhile: one that named a prebuilt Workload stops
    naming it, unless a Pod made anew under its name names it too."""
    def raw(name: str, uid: str) -> msgspec.Raw:
        return msgspec.Raw(msgspec.json.encode({"metadata": {
            "name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1",
            "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/prebuilt-workload-name": f"pre-{name}"}}}))

    class Listing(Client):
        items: list[msgspec.Raw] = []

        async def list(self, resource: Any, *, label_selector: str = "") -> Any:
            from connectors.k8s.client import ListMeta, RawList
            return RawList(metadata=ListMeta(resource_version="10"), items=self.items)

    client = Listing()
    pods, *_ = integration(client=client)
    client.items = [raw("p", "u1"), raw("q", "u2")]
    await pods.informer.relist()
    assert set(pods.named_by) == {"ns/pre-p", "ns/pre-q"}
    client.items = [raw("p", "u3")]
    await pods.informer.relist()
    assert pods.named_by == {"ns/pre-p": {"ns/p"}}, "q forgotten, p's namesake still names pre-p"


@pytest.mark.asyncio
async def test_a_pod_is_stopped_once_though_another_pass_sees_the_condition_before_the_deletion_returns() -> None:
    """A pass that reads the Pod with the condition written while the stop still waits for its deletion does not
    stop it again."""
    pods, mirror, appended, client = integration(pod_workload())
    mirror.state.workloads[KEY].phase = "Pending"
    running = managed_pod(gated=False, phase="Running")
    pods.pods["ns/p"] = running
    marked = msgspec.structs.replace(running, metadata=msgspec.structs.replace(running.metadata,
                                                                               resource_version="6"))
    status_patch = client.patch

    async def patch_then_another_pass(*args: Any, **kw: Any) -> bytes:
        answer = await status_patch(*args, **kw)
        if pods.pods["ns/p"] is running:  # the watch brings the marked Pod; another key's pass reads it
            pods.pods["ns/p"] = marked
            await pods.reconcile("ns/p")
        return answer

    client.patch = patch_then_another_pass  # type: ignore[method-assign]
    await pods.reconcile("ns/p")
    assert [c[0] for c in client.calls] == ["patch", "delete"]
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["Stopped"]
    assert pods.stats.stopped == 1


@pytest.mark.asyncio
async def test_a_pod_whose_stop_was_refused_is_stopped_by_the_next_pass() -> None:
    pods, mirror, appended, client = integration(pod_workload())
    mirror.state.workloads[KEY].phase = "Pending"
    pods.pods["ns/p"] = managed_pod(gated=False, phase="Running")
    status_patch = client.patch

    async def refused_once(*args: Any, **kw: Any) -> bytes:
        client.patch = status_patch  # type: ignore[method-assign]
        raise Conflict("pods p: the object has been modified")

    client.patch = refused_once  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        await pods.reconcile("ns/p")
    await pods.reconcile("ns/p")
    assert [c[0] for c in client.calls] == ["patch", "delete"]
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["Stopped"] and pods.stats.stopped == 1


async def _work_until_idle(pods: PodIntegration, *keys: str) -> None:
    """Run the integration's workers on ``keys`` marked dirty (as its watch marks them) until they are idle."""
    import asyncio

    from connectors.k8s.workers import KeyedWorkers
    workers = KeyedWorkers(pods.reconcile_guarded)
    pods._mark(set(keys))
    task = asyncio.create_task(workers.run(pods._take, pods._signal, pods._retry.timeout))
    for _ in range(200):
        await asyncio.sleep(0.005)
        if workers.idle and not pods.dirty:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.asyncio
async def test_a_groups_pod_is_reconciled_under_its_groups_key_so_two_passes_never_create_its_workload_twice(
) -> None:
    """As Kueue's Pod event handler, a group's Pod is reconciled under its group's key: a change to another of its
    Pods while the group's Workload is being created waits for that pass, which sees the Workload then."""
    import asyncio
    raws = {n: _group_raw(n) for n in "ab"}
    client = GroupClient(raws)
    pods, mirror, _, _ = integration(client=client)
    for n in "ab":
        _watch(pods, raws[n])
    creating = client.create

    async def create_then_the_watch_brings_b_anew(resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        if len([c for c in client.calls if c[0] == "create"]) == 0:
            raws["b"] = {**raws["b"], "metadata": {**raws["b"]["metadata"], "resourceVersion": "2"}}
            _watch(pods, raws["b"])
            pods._mark({"ns/b"})
            await asyncio.sleep(0.05)  # another pass, if one may run, creates meanwhile
        answer = await creating(resource, body, namespace)
        obs = group_workload_obs()
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=obs.key, uid="wl-uid", obj=obs)))
        return answer

    client.create = create_then_the_watch_brings_b_anew  # type: ignore[method-assign]
    await _work_until_idle(pods, "ns/a")
    assert len([c for c in client.calls if c[0] == "create"]) == 1


@pytest.mark.asyncio
async def test_a_groups_workload_whose_creation_failed_is_created_on_the_retry() -> None:
    """The create fails (a 503): no Workload, and no newer version of the Pods comes; the retry makes it."""
    raws = {n: _group_raw(n) for n in "ab"}
    client = GroupClient(raws)
    pods, _, _, _ = integration(client=client)
    for n in "ab":
        _watch(pods, raws[n])
    creating, failures = client.create, [Unavailable("create workloads: 503 Service Unavailable")]

    async def unavailable_once(resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        if failures:
            raise failures.pop()
        return await creating(resource, body, namespace)

    client.create = unavailable_once  # type: ignore[method-assign]
    with pytest.raises(Unavailable):
        await pods.reconcile("group/ns/g")
    await pods.reconcile("group/ns/g")  # the retry
    assert [c[:2] for c in client.calls if c[0] == "create"] == [("create", "Workload")]


class GoneClient(GroupClient):
    """A GET of a Pod no longer in ``raws`` answers 404."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if name not in self.raws:
            self.calls.append(("get", resource.kind, name))
            raise NotFound(f"{resource.kind} {name} not found")
        return await super().get(resource, name, namespace)


def _evicted_running_group() -> tuple[PodIntegration, Mirror, GoneClient]:
    """Group ``g``'s Workload admitted then preempted, its Pods ``a`` and ``b`` running and stopped by one pass."""
    raws = {n: _group_raw(n, gated=False, phase="Running") for n in "ab"}
    client = GoneClient(raws)
    pods, mirror, _, _ = integration(group_workload_obs(), client=client)
    wl = mirror.state.workloads["ns/g"]
    wl.phase, wl.evicted = ADMITTED, "Preempted"
    wl.conditions = (o.Condition(type="Evicted", status="True", reason="Preempted", message="Preempted by x"),
                     o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved"))
    for n in "ab":
        _watch(pods, raws[n])
    return pods, mirror, client


def _watch_delete(pods: PodIntegration, client: GoneClient, name: str) -> None:
    """The watch sees Pod ``name`` deleted (as the informer reports it) and the apiserver no longer has it."""
    raw = client.raws.pop(name)
    pod = pods._decode(msgspec.json.encode(raw))
    assert pod is not None
    del pods.pods[pod.key]
    pods._unname(pod)
    pods._mark({pod.key})


@pytest.mark.asyncio
async def test_a_groups_stopped_pods_are_forgotten_once_the_watch_sees_them_go() -> None:
    pods, _, client = _evicted_running_group()
    await pods.reconcile("group/ns/g")
    assert [c[:3] for c in client.calls if c[0] == "delete"] == [("delete", "Pod", "a"), ("delete", "Pod", "b")]
    assert pods._stopped == {"ns/a": "uid-a", "ns/b": "uid-b"}
    _watch_delete(pods, client, "a")
    assert pods.dirty == {"group/ns/g"}, "a group's Pod is its group's to reconcile"
    await pods.reconcile("group/ns/g")
    assert pods._stopped == {"ns/b": "uid-b"} and "ns/a" not in pods._acted and pods.group_of == {"ns/b": "ns/g"}
    _watch_delete(pods, client, "b")
    await pods.reconcile("group/ns/g")
    assert pods._stopped == {} and pods.group_of == {} and pods.members == {}
    assert not {"ns/a", "ns/b"} & pods._acted.keys()


@pytest.mark.asyncio
async def test_what_was_done_for_a_group_is_forgotten_once_it_and_its_workload_are_gone() -> None:
    pods, mirror, client = _evicted_running_group()
    mirror.listeners.append(pods._on_applied)
    await pods.reconcile("group/ns/g")
    for n in "ab":
        _watch_delete(pods, client, n)
    await pods.reconcile("group/ns/g")
    assert ("delete", "Workload", "g", "wl-uid") in client.calls and "group/ns/g" in pods._acted
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=3, key="ns/g", uid="wl-uid",
                                                                      kind="Workload"))])
    assert pods._acted == {}, "the group's Workload deleted after its Pods"
    waiting, *_ = integration(client=GroupClient({"a": _group_raw("a")}))
    _watch(waiting, _group_raw("a"))
    await waiting.reconcile("group/ns/g")
    assert "group/ns/g" in waiting._acted, "one of two Pods: the group waits"
    del waiting.pods["ns/a"]
    await waiting.reconcile("group/ns/g")
    assert waiting._acted == {}, "a group gone without a Workload"


@pytest.mark.asyncio
async def test_a_group_stops_naming_its_prebuilt_workload_once_none_of_its_pods_names_it() -> None:
    raws = {n: _prebuilt_raw(n, group=True) for n in "ab"}
    client = GoneClient(raws)
    pods, *_ = integration(client=client)
    for n in "ab":
        _watch(pods, raws[n])
    assert pods.named_by == {"ns/pre": {"group/ns/g"}}
    _watch_delete(pods, client, "a")
    assert pods.named_by == {"ns/pre": {"group/ns/g"}}, "b still names it"
    _watch_delete(pods, client, "b")
    assert pods.named_by == {}


@pytest.mark.asyncio
async def test_a_single_pod_made_anew_under_a_group_pods_name_is_its_own_and_the_group_lets_the_old_one_go() -> None:
    """A relist reads the namesake before it reports the group's Pod gone: the name is the new Pod's from then on."""
    raws = {n: _group_raw(n) for n in "ab"}
    pods, *_ = integration(client=GoneClient(raws))
    for n in "ab":
        _watch(pods, raws[n])
    single = _group_raw("a")
    del single["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    single["metadata"]["uid"] = "uid-a2"
    pods.dirty.clear()
    _watch(pods, single)
    assert pods.group_of == {"ns/b": "ns/g"} and pods.members == {"ns/g": {"ns/b"}}
    assert pods.dirty == {"group/ns/g"}, "the group is looked at again"
    pods._mark({"ns/a"})
    assert pods.dirty == {"group/ns/g", "ns/a"}, "the new Pod is reconciled under its own key"


@pytest.mark.asyncio
async def test_a_key_marked_before_its_pod_joined_a_group_does_not_run_a_second_pass_of_the_group() -> None:
    """A Pod's own key marked (or set to retry) while it was single, then the Pod is read in a group (made anew
    under its name): that key is handed to the group's, so no pass runs beside the group's own and creates too."""
    import asyncio
    raws = {n: _group_raw(n) for n in "ab"}
    client = GroupClient(raws)
    pods, mirror, _, _ = integration(client=client)
    for n in "ab":
        _watch(pods, raws[n])
    creating = client.create

    async def slow_create(resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        if len([c for c in client.calls if c[0] == "create"]) == 0:
            raws["b"] = {**raws["b"], "metadata": {**raws["b"]["metadata"], "resourceVersion": "2"}}
            _watch(pods, raws["b"])
            pods.dirty.add("ns/a")  # marked (or retried) under ns/a's own key while it was a single Pod
            pods._signal.set()
            await asyncio.sleep(0.05)  # another pass of the group, if one may run, creates meanwhile
        answer = await creating(resource, body, namespace)
        obs = group_workload_obs()
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=obs.key, uid="wl-uid", obj=obs)))
        return answer

    client.create = slow_create  # type: ignore[method-assign]
    await _work_until_idle(pods, "ns/b")
    assert len([c for c in client.calls if c[0] == "create"]) == 1


@pytest.mark.asyncio
async def test_a_failed_action_on_a_gone_pod_does_not_forget_what_was_done_to_its_namesake() -> None:
    """The old group's pass acts on the Pod it read; meanwhile the watch brings a namesake in another group, whose
    pass records its own action. The old action failing forgets only its own record, not the namesake's."""
    from connectors.k8s.owner_index import once
    acted: dict[str, tuple[str, str]] = {}

    async def fails_after_the_namesake_acted() -> None:
        acted["ns/a"] = ("start", "7")  # the namesake's pass, under the same Pod key
        raise Conflict("the Pod read is gone")

    with pytest.raises(Conflict):
        await once(acted, "ns/a", ("stop", "3"), fails_after_the_namesake_acted())
    assert acted == {"ns/a": ("start", "7")}


@pytest.mark.asyncio
async def test_a_pending_group_workload_none_of_whose_pods_has_its_roles_is_rewritten_in_place() -> None:
    """As newer Kueue's ``ensureOneWorkload``: the group gated and its Workload holding no quota, the Workload's
    spec is rewritten from the Pods as stored, conditioned on its resourceVersion, the Pods not yet its owners
    added, and ``UpdatedWorkload`` "Updated not matching Workload for suspended job: <ns>/<name>" recorded on the
    group's first Pod; nothing is deleted."""
    raws = {n: _group_raw(n) for n in "cd"}
    for raw in raws.values():
        raw["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]  # another role
    pods, mirror, appended, client = integration(group_workload_obs(), client=GroupClient(raws))
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    assert not [c for c in client.calls if c[0] == "delete"]
    (_, kind, name, _, _, patch), = [c for c in client.calls if c[0] == "patch"]
    role = role_hash(raws["c"]["spec"])
    assert (kind, name, patch["metadata"]["resourceVersion"]) == ("Workload", "g", "3")
    assert [(ps["name"], ps["count"]) for ps in patch["spec"]["podSets"]] == [(role, 2)]
    assert patch["spec"]["queueName"] == "lq"
    assert [r["name"] for r in patch["metadata"]["ownerReferences"]] == ["a", "b", "c", "d"]
    (updated,) = appended
    assert isinstance(updated, ev.JobActed) and (updated.key, updated.action, updated.message) == (
        "ns/c", "UpdatedWorkload", "Updated not matching Workload for suspended job: ns/g")
    await pods.reconcile("group/ns/g")
    assert len([c for c in client.calls if c[0] == "patch"]) == 1, "once while nothing changed"
    assert pods.stats.updated == 1 and pods.stats.deleted == 0


def _orphan_raw(name: str, group: str) -> dict[str, Any]:
    """A queued StatefulSet's gated pod, its StatefulSet deleted with ``--cascade=orphan``: no controller left."""
    raw = _group_raw(name)
    raw["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group
    raw["metadata"]["annotations"] |= {"kueue.x-k8s.io/pod-suspending-parent": "statefulset",
                                       "kueue.x-k8s.io/pod-group-serving": "true"}
    return raw


class OrphansClient(GroupClient):
    """Pods from ``raws``; the StatefulSet is gone (404)."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind == "StatefulSet":
            self.calls.append(("get", resource.kind, name))
            raise NotFound(f"statefulsets {name} not found")
        return await super().get(resource, name, namespace)


@pytest.mark.asyncio
async def test_the_pods_a_deleted_statefulset_orphaned_are_let_go_once_it_is_gone() -> None:
    """As Kueue's StatefulSet reconciler, which lists a StatefulSet's pods by the group name it derives from its
    name: pods left without a controller by ``--cascade=orphan`` are ungated and lose Kueue's finalizer once no
    StatefulSet of that name is there, and the StatefulSet's going marks their group."""
    from connectors.k8s.statefulset_webhook import workload_name

    group = workload_name("web")
    raws = {n: _orphan_raw(n, group) for n in ("web-0", "web-1")}
    client = OrphansClient(raws)
    config = {**POD_ON, "integrations": {"frameworks": ["pod", "statefulset"]}}
    pods, _, _, client = integration(config=config, client=client)
    pods.statefulsets.synced.set()
    for raw in raws.values():
        _watch(pods, raw)
    pods.dirty.clear()
    pods._on_statefulsets({"ns/web"})
    assert pods.dirty == {f"group/ns/{group}"}
    await pods.reconcile(f"group/ns/{group}")
    assert ("get", "StatefulSet", "web") in client.calls
    let_go = sorted(c[2] for c in client.calls if c[0] == "patch" and c[1] == "Pod")
    assert let_go == ["web-0", "web-1"] and pods.stats.let_go == 2


def _set_pod_raw(name: str) -> dict[str, Any]:
    """A pod the worker's StatefulSet controller made of set ``web`` (Kueue's StatefulSet webhook's group ``g``)."""
    raw = _group_raw(name)
    raw["metadata"]["annotations"] |= {"kueue.x-k8s.io/pod-suspending-parent": "statefulset",
                                       "kueue.x-k8s.io/pod-group-serving": "true"}
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                           "uid": "sts-uid", "controller": True}]
    return raw


@pytest.mark.asyncio
@pytest.mark.parametrize("copied", [True, False], ids=["multikueue-copy", "own-set"])
async def test_a_multikueue_copy_of_a_statefulset_runs_on_the_copied_workload_and_makes_none(copied: bool) -> None:
    """On a worker, as Kueue's StatefulSet reconciler with a set carrying the origin label: its pods' group runs on the
    Workload the manager copied there (the one the set names), gated while it is missing, never on one of the
    worker's own making; a set of the worker's own gets its group's Workload made from its pods."""
    from connectors.k8s.statefulsets import StatefulSetRevision, decode

    raws = {n: _set_pod_raw(n) for n in ("web-0", "web-1")}
    config = {**POD_ON, "integrations": {"frameworks": ["pod", "statefulset"]}}
    pods, mirror, _, client = integration(config=config, client=GroupClient(raws))
    labels = {"kueue.x-k8s.io/multikueue-origin": "multikueue", "kueue.x-k8s.io/prebuilt-workload-name": "g"}
    sts = decode(msgspec.json.encode({"metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid",
                                                   "labels": labels if copied else {}}}))
    assert isinstance(sts, StatefulSetRevision)
    pods.statefulsets.known["ns/web"] = sts
    pods.statefulsets.synced.set()
    mirror.listeners.append(pods._on_applied)
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    created = [c for c in client.calls if c[0] == "create"]
    if not copied:
        assert [c[1] for c in created] == ["Workload"], "the worker's own set: its group's Workload is made"
        return
    assert created == [] and not any(c[0] == "patch" and c[1] == "Pod" for c in client.calls), (
        "no Workload made for a copy's pods: they wait, gated, for the copied one")
    copied_wl = msgspec.structs.replace(group_workload_obs(), metadata=o.ObjectMeta(
        name="g", namespace="ns", uid="wl-uid", resource_version="3",
        labels={"kueue.x-k8s.io/multikueue-origin": "multikueue"},
        annotations={"kueue.x-k8s.io/is-group-workload": "true"}))
    mirror.apply_batch([ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key="ns/g", uid="wl-uid",
                                                                        obj=copied_wl))])
    client.calls.clear()
    await pods.reconcile("group/ns/g")
    (call,) = client.calls
    assert call[:3] == ("patch", "Workload", "g"), "the copy's pods made owners of the copied Workload"
    assert [r["name"] for r in call[5]["metadata"]["ownerReferences"]] == ["web-0", "web-1"]


async def _reconcile_with_set(raws: dict[str, dict[str, Any]], sts_raw: dict[str, Any]) -> Any:
    """One pass over group ``g`` of ``raws`` with the statefulset framework on and StatefulSet ``sts_raw`` listed;
    the fake apiserver that recorded its calls."""
    from connectors.k8s.statefulsets import StatefulSetRevision, decode

    config = {**POD_ON, "integrations": {"frameworks": ["pod", "statefulset"]}}
    pods, _, _, client = integration(config=config, client=GroupClient(raws))
    sts = decode(msgspec.json.encode(sts_raw))
    assert isinstance(sts, StatefulSetRevision)
    pods.statefulsets.known[f"ns/{sts.metadata.name}"] = sts
    pods.statefulsets.synced.set()
    for raw in raws.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    return client


@pytest.mark.asyncio
@pytest.mark.parametrize(("of_a_set", "want"), [(True, "sts-uid"), (False, None)], ids=["statefulset", "plain"])
async def test_a_statefulsets_group_workload_carries_the_sets_uid_as_job_uid(of_a_set: bool, want: str | None) -> None:
    """Kueue #9897: the Workload of the group a StatefulSet holds carries the set's uid in ``kueue.x-k8s.io/job-uid``
    (as Kueue's StatefulSet reconciler writes it); a plain pod group's Workload carries none, as Kueue gives it none."""
    raws = {n: _set_pod_raw(n) if of_a_set else _group_raw(n) for n in ("web-0", "web-1")}
    client = await _reconcile_with_set(raws, {"metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid"}})
    (created,) = [c for c in client.calls if c[0] == "create"]
    assert created[1] == "Workload"
    assert (created[-1]["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == want


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate", "serving", "want"), [(None, False, True), (False, False, False),
                                                       (None, True, False)])
async def test_a_groups_succeeded_pod_counts_as_ready_under_the_gate(gate: bool | None, serving: bool,
                                                                      want: bool) -> None:
    """Kueue v0.20's ``PodIntegrationCountSucceededPodsAsReady`` (on by default): a Pod of a group that is not
    serving and has succeeded counts as ready, so the group is not evicted at the recovery timeout once one of its
    Pods completes; off, or for a serving group, only a Ready Pod does."""
    config: dict[str, Any] = {**POD_ON, "waitForPodsReady": {}}
    if gate is not None:
        config["featureGates"] = {"PodIntegrationCountSucceededPodsAsReady": gate}
    pods, mirror, appended, _ = integration(group_workload_obs(), config=config)
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.conditions = (o.Condition(type="PodsReady", status="False", reason="WaitForStart"),)
    done = _group_raw("a", gated=False, phase="Succeeded")
    running = _ready(_group_raw("b", gated=False), True)
    for raw in (done, running):
        if serving:
            raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-serving"] = "true"
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    changes = [(e.ready, e.reason) for e in appended if isinstance(e, ev.PodsReadyChanged)]
    assert changes == ([(True, "Started")] if want else [])


def _budget_group(counts: tuple[str | None, ...], ready: tuple[bool, ...]) -> list[dict[str, Any]]:
    """A group of ``len(counts)`` admitted Pods out of a total of 4, each naming the tolerated count of not-ready
    Pods ``counts[i]`` (None: no annotation) and Ready or not as ``ready[i]`` says."""
    raws = []
    for i, (count, is_ready) in enumerate(zip(counts, ready, strict=True)):
        raw = _ready(_group_raw(f"p{i}", gated=False), is_ready)
        raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "4"
        if count is not None:
            raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-max-not-ready-count"] = count
        raws.append(raw)
    return raws


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate", "counts", "ready", "want"), [
    (True, ("1", "1", "1", "1"), (True, True, True, False), True),  # one not ready: within the budget
    (False, ("1", "1", "1", "1"), (True, True, True, False), False),  # gate off: every Pod must be ready
    (True, ("2", "2", "2"), (True, True, True), True),  # the fourth Pod not made yet counts as not ready
    (True, ("1", "1", "1"), (True, True, False), False),  # that one and a not-ready Pod: over the budget
    (True, ("3", "1", "2", "3"), (True, True, False, False), False),  # the strictest value (1) applies
    (True, ("2", "2", None, "2"), (True, True, False, True), False),  # a Pod without one: budget 0
    (True, ("4", "4", "4", "4"), (True, False, False, False), False),  # not below the total: invalid, so 0
    (True, ("x", "x", "x", "x"), (True, True, True, False), False),  # not a number: 0
])
async def test_a_groups_pods_ready_tolerates_its_max_not_ready_count_under_the_gate(
        gate: bool, counts: tuple[str | None, ...], ready: tuple[bool, ...], want: bool) -> None:
    """Kueue v0.20's ``WaitForPodsReadyMaxNotReady`` (alpha, off): a group whose every Pod names
    ``kueue.x-k8s.io/pod-group-max-not-ready-count`` is ready while no more of its total count lack a ready Pod than
    the smallest value tolerates; off, or without a valid value on every Pod, every Pod must be ready."""
    config: dict[str, Any] = {**POD_ON, "waitForPodsReady": {}, "featureGates": {"WaitForPodsReadyMaxNotReady": gate}}
    base = group_workload_obs()
    obs = msgspec.structs.replace(base, metadata=msgspec.structs.replace(base.metadata, owner_references=[
        o.OwnerReference(api_version="v1", kind="Pod", name=f"p{i}", uid=f"uid-p{i}") for i in range(len(counts))]),
        spec=msgspec.structs.replace(base.spec, pod_sets=[msgspec.structs.replace(base.spec.pod_sets[0], count=4)]))
    pods, mirror, appended, _ = integration(obs, config=config)
    wl = mirror.state.workloads["ns/g"]
    wl.phase = ADMITTED
    wl.conditions = (o.Condition(type="PodsReady", status="False", reason="WaitForStart"),)
    for raw in _budget_group(counts, ready):
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    changes = [(e.ready, e.reason) for e in appended if isinstance(e, ev.PodsReadyChanged)]
    assert changes == ([(True, "Started")] if want else [])


class OwnersClient(Client):
    """A GET answers the object of that kind and name in ``objects`` (absent: 404)."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        super().__init__()
        self.objects = objects

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.calls.append(("get", resource.kind, name))
        if (resource.kind, name) not in self.objects:
            raise NotFound(f"{resource.kind} {name} not found")
        return msgspec.json.encode(self.objects[(resource.kind, name)])


def _deployment_chain(*, queued: bool = True) -> dict[tuple[str, str], dict[str, Any]]:
    """A Deployment's pod as Kueue's Deployment webhook marks it, its ReplicaSet and the Deployment."""
    controller = {"controller": True, "apiVersion": "apps/v1"}
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": UID,
                        "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/managed": "true"},
                        "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "deployment"},
                        "ownerReferences": [{**controller, "kind": "ReplicaSet", "name": "dep-abc", "uid": "rs-uid"}]},
           "spec": {"containers": [{"name": "c"}]}}
    rs = {"metadata": {"name": "dep-abc", "namespace": "ns", "uid": "rs-uid",
                       "ownerReferences": [{**controller, "kind": "Deployment", "name": "dep", "uid": "dep-uid"}]}}
    dep = {"metadata": {"name": "dep", "namespace": "ns", "uid": "dep-uid",
                        "labels": {"kueue.x-k8s.io/queue-name": "lq"} if queued else {}}}
    return {("Pod", "p"): pod, ("ReplicaSet", "dep-abc"): rs, ("Deployment", "dep"): dep}


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate", "queued", "want"), [(None, True, "dep-uid"), (False, True, UID),
                                                      (None, False, UID)])
async def test_a_deployments_pods_workload_carries_the_deployments_uid_under_the_gate(
        gate: bool | None, queued: bool, want: str) -> None:
    """Kueue v0.20's ``DeploymentJobUIDLabel`` (on by default): the Workload of a pod of a Deployment Kueue holds
    carries the Deployment's UID (found through the pod's ReplicaSet) in ``kueue.x-k8s.io/job-uid``; off, or for
    a Deployment Kueue does not hold (no queue name on it), the Pod's."""
    config: dict[str, Any] = {**POD_ON} if gate is None else {**POD_ON, "featureGates": {"DeploymentJobUIDLabel": gate}}
    pods, _, _, client = integration(config=config, client=OwnersClient(_deployment_chain(queued=queued)))
    pods.pods["ns/p"] = managed_pod()
    await pods.reconcile("ns/p")
    (_, kind, body), = [c for c in client.calls if c[0] == "create"]
    assert kind == "Workload" and body["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == want


@pytest.mark.asyncio
async def test_a_deployments_pod_whose_replicaset_is_gone_keeps_its_own_uid() -> None:
    chain = _deployment_chain()
    del chain[("ReplicaSet", "dep-abc")]
    pods, _, _, client = integration(client=OwnersClient(chain))
    pods.pods["ns/p"] = managed_pod()
    await pods.reconcile("ns/p")
    (_, _, body), = [c for c in client.calls if c[0] == "create"]
    assert body["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == UID


def _pods_of_one_deployment(n: int) -> dict[tuple[str, str], dict[str, Any]]:
    """``n`` pods (``p0``...) of the Deployment of :func:`_deployment_chain`, through its one ReplicaSet."""
    chain = _deployment_chain()
    pod = chain.pop(("Pod", "p"))
    for i in range(n):
        chain[("Pod", f"p{i}")] = {**pod, "metadata": {**pod["metadata"], "name": f"p{i}", "uid": f"uid-p{i}"}}
    return chain


def _named_pod(i: int) -> ManagedPod:
    p = managed_pod(uid=f"uid-p{i}")
    return msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, name=f"p{i}"))


@pytest.mark.asyncio
async def test_the_pods_of_one_deployment_read_its_replicaset_and_deployment_once_a_pass() -> None:
    """Under ``DeploymentJobUIDLabel``, five pods of one Deployment handled in one pass (three at once, two after)
    cost one GET of the ReplicaSet and one of the Deployment; the next pass reads them again (a queue name taken
    off the Deployment meanwhile is seen)."""
    client = OwnersClient(_pods_of_one_deployment(6))
    pods, _, _, _ = integration(client=client)
    for i in range(6):
        pods.pods[f"ns/p{i}"] = _named_pod(i)
    await asyncio.gather(*(pods.reconcile(f"ns/p{i}") for i in range(3)))
    for i in (3, 4):
        await pods.reconcile(f"ns/p{i}")
    owner_gets = [c for c in client.calls if c[0] == "get" and c[1] != "Pod"]
    assert owner_gets == [("get", "ReplicaSet", "dep-abc"), ("get", "Deployment", "dep")]
    created = [c[2] for c in client.calls if c[0] == "create"]
    assert [b["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] for b in created] == ["dep-uid"] * 5
    client.objects[("Deployment", "dep")]["metadata"]["labels"] = {}
    pods._take()  # the next pass
    await pods.reconcile("ns/p5")
    assert len([c for c in client.calls if c[0] == "get" and c[1] != "Pod"]) == 4
    assert client.calls[-1][2]["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == "uid-p5"


@pytest.mark.asyncio
async def test_a_failed_owner_read_is_not_kept_for_the_pass() -> None:
    class Flaky(OwnersClient):
        failures = 1

        async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
            if resource.kind == "ReplicaSet" and self.failures:
                self.failures -= 1
                self.calls.append(("get", resource.kind, name))
                raise RuntimeError("connection reset")
            return await super().get(resource, name, namespace)

    client = Flaky(_pods_of_one_deployment(2))
    pods, _, _, _ = integration(client=client)
    pods.pods["ns/p0"], pods.pods["ns/p1"] = _named_pod(0), _named_pod(1)
    with pytest.raises(RuntimeError):
        await pods.reconcile("ns/p0")
    await pods.reconcile("ns/p1")
    assert [c[1] for c in client.calls if c[0] == "get" and c[1] != "Pod"] == ["ReplicaSet", "ReplicaSet",
                                                                              "Deployment"]


@pytest.mark.asyncio
async def test_a_statefulsets_new_queue_name_is_put_on_its_gated_pods() -> None:
    """Kueue's StatefulSet reconciler (``syncQueueLabel``, #9830): the set's queue name, changed while none of its
    replicas was ready, is patched onto its gated pods (conditioned on their resourceVersion); the pods' watch then
    brings them back, and their group's Workload follows their queue name."""
    raws = {n: _set_pod_raw(n) for n in ("web-0", "web-1")}
    client = await _reconcile_with_set(raws, {"metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid",
                                                           "labels": {"kueue.x-k8s.io/queue-name": "good"}},
                                              "spec": {"replicas": 2}})
    patches = [(c[2], c[5]) for c in client.calls if c[0] == "patch" and c[1] == "Pod"]
    assert patches == [(n, {"metadata": {"resourceVersion": "1", "labels": {"kueue.x-k8s.io/queue-name": "good"}}})
                       for n in ("web-0", "web-1")]
    assert not [c for c in client.calls if c[0] == "create"], "no Workload made on the old queue name"
