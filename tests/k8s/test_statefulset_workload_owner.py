"""A StatefulSet owns its pod group's Workload (Kueue #4799, in v0.16.0 and cherry-picked to v0.14 and v0.15): the set
becomes an owner of the Workload, not its controller, while it has replicas, and stays one once it is scaled to zero
(Kueue v0.20, #12233). With the set as an owner, the Workload stays when every pod of the group is gone while the set
is still there.
This matters for a deactivated Workload: its pods are stopped, and the StatefulSet controller remakes them only once
the old ones are gone. The remade pods join that Workload, stay gated, and get no new Workload. Once the set is gone,
the Workload goes with its last pod, as before. No cluster is needed: the pod integration runs
against a mirror, and a fake apiserver records its writes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from test_pods_integration import POD_ON, Client, _set_pod_raw, _watch, integration

from connectors.k8s.errors import NotFound
from connectors.k8s.mirror import Mirror
from connectors.k8s.pods_integration import PodIntegration
from connectors.k8s.statefulsets import StatefulSetRevision, decode
from events import objects as o
from events import schema as ev

STS_ON = {**POD_ON, "integrations": {"frameworks": ["pod", "statefulset"]}}
SET_REF = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "sts-uid"}
PODS = ("web-0", "web-1")


class Apiserver(Client):
    """Pods and StatefulSets by name (absent: 404); every call recorded."""

    def __init__(self, pods: dict[str, dict[str, Any]], sets: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.pods, self.sets = pods, sets

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.calls.append(("get", resource.kind, name))
        table = self.sets if resource.kind == "StatefulSet" else self.pods
        if name not in table:
            raise NotFound(f"{resource.kind} {name} not found")
        return msgspec.json.encode(table[name])


def _set(replicas: int) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"replicas": replicas}}


def _pod(name: str, uid: str = "") -> dict[str, Any]:
    raw = _set_pod_raw(name)
    raw["metadata"]["uid"] = uid or f"uid-{name}"
    return raw


def _workload(*, active: bool = True, set_owner: bool = False, rv: str = "3") -> o.Workload:
    """The group's Workload as kueue-es makes it: every pod an owner, not the controller, and, with ``set_owner``, its
    StatefulSet too."""
    refs = [o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in PODS]
    if set_owner:
        refs.append(o.OwnerReference(api_version="apps/v1", kind="StatefulSet", name="web", uid="sts-uid"))
    return o.Workload(
        metadata=o.ObjectMeta(name="g", namespace="ns", uid="wl-uid", resource_version=rv,
                              annotations={"kueue.x-k8s.io/is-group-workload": "true"},
                              finalizers=["kueue.x-k8s.io/resource-in-use"], owner_references=refs),
        spec=o.WorkloadSpec(queue_name="lq", active=active, pod_sets=[o.PodSet(
            name="7aa6c7b8", count=2, template=o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(name="c")])))]))


def _setup(wl: o.Workload, replicas: int | None, pods: dict[str, dict[str, Any]]
           ) -> tuple[PodIntegration, Mirror, list[ev.AnyEvent], Apiserver]:
    sets = {"web": _set(replicas)} if replicas is not None else {}
    api = Apiserver(pods, sets)
    integration_, mirror, appended, _ = integration(wl, config=STS_ON, client=api)  # type: ignore[arg-type]
    for raw in sets.values():
        sts = decode(msgspec.json.encode(raw))
        assert isinstance(sts, StatefulSetRevision)
        integration_.statefulsets.known[sts.key] = sts
    integration_.statefulsets.synced.set()
    mirror.listeners.append(integration_._on_applied)
    for raw in pods.values():
        _watch(integration_, raw)
    return integration_, mirror, appended, api


def _show(mirror: Mirror, obs: o.Workload, patch: dict[str, Any], rv: str) -> o.Workload:
    """The Workload as the apiserver stores it after ``patch`` (its owner references), brought by the watch."""
    refs = [msgspec.convert(r, o.OwnerReference) for r in patch["metadata"]["ownerReferences"]]
    new = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, owner_references=refs,
                                                                       resource_version=rv))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=new.key, uid=new.metadata.uid, obj=new)))
    return new


def _workload_patches(api: Apiserver) -> list[dict[str, Any]]:
    return [c[5] for c in api.calls if c[:2] == ("patch", "Workload")]


def _gone(integration_: PodIntegration, api: Apiserver) -> None:
    """Every pod of the group gone, from the apiserver and from the watch."""
    api.pods.clear()
    integration_.pods.clear()


@pytest.mark.asyncio
async def test_a_deactivated_statefulset_groups_workload_stays_while_the_set_remakes_its_pods() -> None:
    """statefulset_test.go "shouldn't delete deactivated Workload": the Workload keeps its uid and ``active: false``
    while the set's stopped pods are gone and remade. Its remade pods join it and stay gated, and no Workload is
    made for them."""
    pods, mirror, appended, api = _setup(_workload(active=False), 2, {n: _pod(n) for n in PODS})
    await pods.reconcile("group/ns/g")
    obs = mirror.workloads["ns/g"]
    for patch in _workload_patches(api):  # the watch brings what was written
        obs = _show(mirror, obs, patch, "4")

    _gone(pods, api)
    api.calls.clear()
    await pods.reconcile("group/ns/g")
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == []
    assert not [c for c in api.calls if c[0] in ("delete", "patch")], "neither let go nor deleted"

    remade = {n: _pod(n, uid=f"new-{n}") for n in PODS}
    api.pods.update(remade)
    for raw in remade.values():
        _watch(pods, raw)
    await pods.reconcile("group/ns/g")
    assert not [c for c in api.calls if c[0] == "create"], "no new Workload for the remade pods"
    assert not [c for c in api.calls if c[:2] == ("patch", "Pod")], "the remade pods stay gated"
    assert _workload_patches(api) == [], "pods of the same names: as Kueue, no owner reference to add"
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == []
    assert obs.metadata.uid == mirror.workloads["ns/g"].metadata.uid and not mirror.state.workloads["ns/g"].active


@pytest.mark.asyncio
@pytest.mark.parametrize(("replicas", "set_owner", "want"), [
    (2, False, [*PODS, "web"]),  # the set has replicas: it becomes an owner, after the pods
    (0, True, None),  # scaled to zero: it stays an owner (Kueue v0.20, #12233), the Workload is put on hold instead
    (2, True, None),  # already an owner: nothing to write
    (0, False, None),
], ids=["added", "kept-at-zero", "kept", "none-at-zero"])
async def test_the_statefulset_is_an_owner_of_its_groups_workload_while_it_has_replicas(
        replicas: int, set_owner: bool, want: list[str] | None) -> None:
    """As Kueue's StatefulSet reconciler (#4799): the set is added as an owner of the group's Workload with
    ``SetOwnerReference`` (not the controller, and not blocking the owner's deletion) while ``spec.replicas`` is not
    zero. Scaled to zero, it stays (Kueue v0.20 keeps it and puts the Workload on hold: test_statefulset_on_hold.py).
    The patch is conditioned on the Workload's resourceVersion, and the rest of the pass waits for the version that
    shows it."""
    pods, _, _, api = _setup(_workload(set_owner=set_owner), replicas, {n: _pod(n) for n in PODS})
    await pods.reconcile("group/ns/g")
    patches = _workload_patches(api)
    assert [[r["name"] for r in p["metadata"]["ownerReferences"]] for p in patches] == ([want] if want else [])
    if want is None:
        return
    (patch,) = patches
    assert patch["metadata"]["resourceVersion"] == "3"
    if "web" in want:
        assert patch["metadata"]["ownerReferences"][-1] == SET_REF
    await pods.reconcile("group/ns/g")
    assert len(_workload_patches(api)) == 1, "once, until the watch brings the Workload that shows it"


@pytest.mark.asyncio
async def test_a_statefulset_groups_workload_goes_with_its_last_pod_once_the_set_is_gone() -> None:
    """The set is gone, so the garbage collector would take the Workload once its pods are gone too: the Workload of
    a group with no pod left is let go as before, finished ``OwnerNotFound``, then deleted. (A set scaled to zero
    keeps it, on hold: test_statefulset_on_hold.py.)"""
    pods, _, appended, api = _setup(_workload(set_owner=True), None, {})
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == [("OwnerNotFound", "ns/g")]


@pytest.mark.asyncio
async def test_a_group_its_set_keeps_is_looked_at_again_when_the_set_goes() -> None:
    """A Workload the set keeps with no pod left has no pod to mark its group. The set's going (or any change of
    it) marks the group, and the Workload is then let go as the garbage collector would delete it."""
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 2, {})
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert appended == [] and not [c for c in api.calls if c[0] != "get"], "the set keeps it"
    api.sets.clear()
    del pods.statefulsets.known["ns/web"]
    pods.dirty.clear()
    pods._on_statefulsets({"ns/web"})
    assert pods.dirty == {"group/ns/g"}
    await pods.reconcile(pods.dirty.pop())
    assert [(e.reason, e.key) for e in appended if isinstance(e, ev.WorkloadFinished)] == [("OwnerNotFound", "ns/g")]


@pytest.mark.asyncio
@pytest.mark.parametrize("set_owner", [False, True], ids=["pods-only", "set-owner"])
async def test_a_deleted_group_workload_with_no_pod_left_loses_its_finalizer(set_owner: bool) -> None:
    """Someone deletes the group's Workload while none of its Pods is left: with no pod to stop, its finalizer goes
    (connectors.k8s.workload_finalizer's rule), also when its StatefulSet, scaled to zero, keeps it among its owners;
    else it stayed Terminating until the set was scaled up or deleted."""
    wl = _workload(set_owner=set_owner)
    deleting = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, deletion_timestamp="2024-05-01T08:00:00Z"))
    pods, mirror, appended, api = _setup(deleting, 0, {})
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    writes = [c for c in api.calls if c[0] == "patch" and c[1] == "Workload"]
    assert writes and "finalizers" in writes[0][5]["metadata"], "the deleted Workload is let go"
    assert not [c for c in api.calls if c[0] == "delete"], "already being deleted: not deleted again"
