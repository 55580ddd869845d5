"""A StatefulSet scaled to zero keeps its group's Workload on hold (Kueue v0.20's StatefulSet reconciler: #12233, and
#15279 for the resize). The set stays an owner of the Workload at zero, so the Workload stays when the pods are gone;
the pod integration puts it on hold (``WorkloadOnHoldChanged``: QuotaReserved=False ``OnHold``, its quota given
back). Scaled up again, to another size, the Workload is resized to the new replica count (same uid), its hold is
cleared, and it is admitted and its pods started. No cluster is needed: the pod integration runs against a mirror,
and a fake apiserver records its writes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.eventgen import cluster_queue, flavor, local_queue
from test_pods_integration import _watch
from test_statefulset_workload_owner import PODS, _gone, _pod, _setup, _workload, _workload_patches

from connectors.k8s.client import JSON_PATCH
from connectors.k8s.mirror import Mirror
from connectors.k8s.pods_integration import PodIntegration
from connectors.k8s.statefulsets import StatefulSetRevision, decode
from events import objects as o
from events import schema as ev
from kueue_es.scheduler import decide
from projections.workloads import ADMITTED, PENDING, on_hold, status_of

QUEUES = (flavor("f0"), cluster_queue("cq", quotas={"f0": 10}), local_queue("ns", "lq", "cq"))


def _fold(mirror: Mirror, events: list[ev.AnyEvent]) -> None:
    for e in events:
        mirror.apply(ev.Record(mirror.offset + 1, e))


def _schedule(mirror: Mirror) -> None:
    """The scheduler's decisions, folded until quiet."""
    for _ in range(10):
        batch = decide(mirror.state)
        if not batch:
            return
        _fold(mirror, list(batch))


def _admitted(pods: PodIntegration, mirror: Mirror) -> None:
    for obj in QUEUES:
        _fold(mirror, [ev.ObjectUpserted(time=1, key=obj.key, uid=obj.metadata.uid, obj=obj)])
    _schedule(mirror)
    assert mirror.state.workloads["ns/g"].phase == ADMITTED


def _scale(pods: PodIntegration, replicas: int) -> None:
    raw = {"metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid",
                        "labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "spec": {"replicas": replicas}}
    pods.client.sets["web"] = raw  # type: ignore[attr-defined]
    sts = decode(msgspec.json.encode(raw))
    assert isinstance(sts, StatefulSetRevision)
    pods.statefulsets.known[sts.key] = sts


def _holds(appended: list[ev.AnyEvent]) -> list[bool]:
    return [e.on_hold for e in appended if isinstance(e, ev.WorkloadOnHoldChanged)]


def _show(mirror: Mirror, rv: str, *, count: int | None = None, status: o.WorkloadStatus | None = None) -> o.Workload:
    """The Workload as the apiserver stores it now (its status as kueue-es's writer wrote it), brought by the watch."""
    obs = mirror.workloads["ns/g"]
    spec = obs.spec if count is None else msgspec.structs.replace(obs.spec, pod_sets=[
        msgspec.structs.replace(obs.spec.pod_sets[0], count=count)])
    new = msgspec.structs.replace(obs, spec=spec, status=status if status is not None else obs.status,
                                  metadata=msgspec.structs.replace(obs.metadata, resource_version=rv))
    _fold(mirror, [ev.ObjectUpserted(time=2, key=new.key, uid=new.metadata.uid, obj=new)])
    return new


@pytest.mark.asyncio
async def test_scaled_to_zero_the_set_stays_an_owner_and_its_workload_is_put_on_hold() -> None:
    """statefulset_test.go "should set the workload OnHold on scale-to-zero": the set is not taken off the Workload's
    owners, and the admitted Workload is put on hold, which gives its quota back."""
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 2, {n: _pod(n) for n in PODS})
    _admitted(pods, mirror)
    _scale(pods, 0)
    await pods.reconcile("group/ns/g")
    assert _workload_patches(api) == [], "the set stays among the owners at zero"
    assert _holds(appended) == [True]
    await pods.reconcile("group/ns/g")
    assert _holds(appended) == [True], "once, until the log shows it"
    _fold(mirror, appended)
    wl = mirror.state.workloads["ns/g"]
    assert on_hold(wl) and wl.phase == PENDING and wl.admission is None


@pytest.mark.asyncio
async def test_at_zero_the_workload_stays_once_its_pods_are_gone_and_is_put_on_hold() -> None:
    """The pods are gone while the set is at zero: the set still owns the Workload, so it is neither finished nor
    deleted (the garbage collector would keep it too), and it is put on hold."""
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 0, {})
    _admitted(pods, mirror)
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    assert [e for e in appended if isinstance(e, ev.WorkloadFinished)] == []
    assert not [c for c in api.calls if c[0] in ("delete", "patch")], "neither let go nor deleted"
    assert _holds(appended) == [True]
    assert pods.kept_by_set == {"ns/g": "ns/web"}


@pytest.mark.asyncio
async def test_scaled_back_up_to_another_size_the_same_workload_is_resized_released_admitted_and_started(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """statefulset_controller_test.go (#15279): scaled up from zero to 3, the Workload on hold (count 2) is resized to
    3 in place, conditioned on its resourceVersion, before its hold is cleared; then it is queued, admitted, and the
    remade pods join it and are started. Its uid never changes."""
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 2, {n: _pod(n) for n in PODS})
    uid = mirror.workloads["ns/g"].metadata.uid
    _admitted(pods, mirror)
    _scale(pods, 0)
    await pods.reconcile("group/ns/g")
    _fold(mirror, appended)
    _show(mirror, "4", status=o.WorkloadStatus(conditions=list(mirror.state.workloads["ns/g"].conditions)))
    _gone(pods, api)
    await pods.reconcile("group/ns/g")
    assert [e for e in appended if isinstance(e, ev.WorkloadFinished)] == []

    _scale(pods, 3)
    pods.dirty.clear()
    pods._on_statefulsets({"ns/web"})
    assert pods.dirty == {"group/ns/g"}, "the set's change marks the group it keeps"
    api.calls.clear()
    await pods.reconcile(pods.dirty.pop())
    (resize,) = [c for c in api.calls if c[:2] == ("patch", "Workload")]
    assert resize[4] == JSON_PATCH and resize[5] == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "4"},
        {"op": "replace", "path": "/spec/podSets/0/count", "value": 3}]
    assert _holds(appended) == [True], "the hold stays until the Workload shows the new count"
    await pods.reconcile("group/ns/g")
    assert len([c for c in api.calls if c[:2] == ("patch", "Workload")]) == 1, "once per version"

    _show(mirror, "5", count=3)
    await pods.reconcile("group/ns/g")
    assert _holds(appended) == [True, False]
    _fold(mirror, [e for e in appended if isinstance(e, ev.WorkloadOnHoldChanged)][-1:])
    wl = mirror.state.workloads["ns/g"]
    assert not on_hold(wl) and wl.pod_sets[0].count == 3
    _schedule(mirror)
    assert mirror.state.workloads["ns/g"].phase == ADMITTED

    remade = {n: _pod(n, uid=f"new-{n}") for n in ("web-0", "web-1", "web-2")}
    for raw in remade.values():
        raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "3"
    api.pods.update(remade)
    for raw in remade.values():
        _watch(pods, raw)
    monkeypatch.setattr("connectors.k8s.pods_integration.admission_shown", lambda wl, obs: True)
    api.calls.clear()
    await pods.reconcile("group/ns/g")
    patches = [c for c in api.calls if c[:2] == ("patch", "Workload")]
    if patches:  # the remade pods become owners first
        _show_owners(mirror, patches[-1][5], "6")
        api.calls.clear()
        await pods.reconcile("group/ns/g")
    assert not [c for c in api.calls if c[0] in ("create", "delete")], "no new Workload, no pod removed as excess"
    assert sorted(c[2] for c in api.calls if c[:2] == ("patch", "Pod")) == ["web-0", "web-1", "web-2"], "started"
    assert mirror.workloads["ns/g"].metadata.uid == uid


def _show_owners(mirror: Mirror, patch: dict[str, Any], rv: str) -> None:
    obs = mirror.workloads["ns/g"]
    refs = [msgspec.convert(r, o.OwnerReference) for r in patch["metadata"]["ownerReferences"]]
    new = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, owner_references=refs,
                                                                       resource_version=rv))
    _fold(mirror, [ev.ObjectUpserted(time=3, key=new.key, uid=new.metadata.uid, obj=new)])


@pytest.mark.asyncio
async def test_scaled_back_up_to_the_same_size_the_hold_is_cleared_without_a_resize() -> None:
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 0, {})
    _admitted(pods, mirror)
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    _fold(mirror, appended)
    _scale(pods, 2)
    await pods.reconcile("group/ns/g")
    assert _workload_patches(api) == [] and _holds(appended) == [True, False]


@pytest.mark.asyncio
@pytest.mark.parametrize("active", [False, True], ids=["deactivated", "set-not-owner-no-quota"])
async def test_no_hold_for_an_inactive_workload_or_one_neither_owned_by_the_set_nor_holding_quota(
        active: bool) -> None:
    """Kueue puts on hold only an active, unfinished Workload that the set owns or that holds quota."""
    pods, mirror, appended, api = _setup(_workload(active=active, set_owner=not active), 0,
                                         {n: _pod(n) for n in PODS})
    await pods.reconcile("group/ns/g")
    assert _holds(appended) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("role", ["", "0ther000"], ids=["same-role", "another-role"])
async def test_pods_of_a_scale_up_the_set_is_not_seen_at_yet_leave_the_held_workload_to_its_resize(role: str) -> None:
    """The pods' watch may run ahead of the StatefulSets': pods of a scale-up to 3 arrive while the set is still seen
    at zero and the Workload, on hold, counts 2 — of its role, or of one it has no pod set for (before their roles
    settle). They are not removed as beyond its count, nor is the Workload rewritten or deleted as one its group no
    longer matches while it is on hold: the set's resize and release come first (same uid), and the group's matching
    rules apply to it once released."""
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 0, {})
    _admitted(pods, mirror)
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    _fold(mirror, appended)
    remade = {n: _pod(n, uid=f"new-{n}") for n in ("web-0", "web-1", "web-2")}
    for raw in remade.values():
        raw["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "3"
        if role:
            raw["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = role
        _watch(pods, raw)
    api.pods.update(remade)
    api.calls.clear()
    await pods.reconcile("group/ns/g")
    assert not [c for c in api.calls if c[0] == "delete"], "none removed as excess"
    assert not [c for c in api.calls if c[1] == "Workload"], "nor the Workload rewritten as one they no longer match"
    assert mirror.workloads["ns/g"].metadata.uid == "wl-uid"


def _activate(mirror: Mirror, active: bool, rv: str) -> None:
    """The held Workload's ``spec.active`` set so, as the apiserver shows it (its status as last written)."""
    obs = mirror.workloads["ns/g"]
    status = msgspec.convert(status_of(mirror.state.workloads["ns/g"]), o.WorkloadStatus)
    new = msgspec.structs.replace(obs, spec=msgspec.structs.replace(obs.spec, active=active), status=status,
                                  metadata=msgspec.structs.replace(obs.metadata, resource_version=rv))
    _fold(mirror, [ev.ObjectUpserted(time=5, key=new.key, uid=new.metadata.uid, obj=new)])


@pytest.mark.asyncio
async def test_a_held_workload_deactivated_then_reactivated_at_zero_is_put_on_hold_again() -> None:
    """Deactivated, the held Workload shows QuotaReserved=False ``Deactivated`` (Kueue's workload controller words
    deactivation before the hold), so it is no longer on hold; reactivated while its set is still at zero, it is put
    on hold again, as Kueue's StatefulSet reconciler does for an active Workload it owns."""
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 0, {})
    _admitted(pods, mirror)
    pods.members["ns/g"] = set()
    await pods.reconcile("group/ns/g")
    _fold(mirror, appended)
    _activate(mirror, False, "5")
    _schedule(mirror)
    wl = mirror.state.workloads["ns/g"]
    assert wl.condition("QuotaReserved").reason == "Deactivated" and not on_hold(wl)
    await pods.reconcile("group/ns/g")
    assert _holds(appended) == [True], "an inactive Workload is not put on hold"

    _activate(mirror, True, "6")
    pods.dirty.clear()
    await pods.reconcile("group/ns/g")
    assert _holds(appended) == [True, True]
    _fold(mirror, appended[-1:])
    wl = mirror.state.workloads["ns/g"]
    assert on_hold(wl) and wl.phase == PENDING and wl.admission is None


@pytest.mark.asyncio
async def test_scaled_to_zero_a_group_left_with_pods_of_another_role_only_is_held_not_deleted() -> None:
    """The set scaled to zero while a rolling update left a pod of another role (its template changed in what
    admission looks at) and its own pods went first: the group no longer matches its Workload, but the set keeps
    the Workload (it owns it; Kueue v0.20 holds it at zero, the pod reconciler does not delete the set's Workload):
    it is put on hold, not deleted as one its group no longer matches."""
    other = _pod("web-1", uid="new-web-1")
    other["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = "0ther000"
    pods, mirror, appended, api = _setup(_workload(set_owner=True), 2, {"web-0": _pod("web-0"), "web-1": other})
    _admitted(pods, mirror)
    _scale(pods, 0)
    pods.pods.pop("ns/web-0", None)
    pods.members["ns/g"].discard("ns/web-0")
    api.pods.pop("web-0")
    api.calls.clear()
    await pods.reconcile("group/ns/g")  # ends at the group's wait for replacement pods, which the log then shows
    _fold(mirror, appended)
    await pods.reconcile("group/ns/g")
    assert not [c for c in api.calls if c[1] == "Workload"], "the set's Workload is not rewritten nor deleted"
    assert _holds(appended) == [True]
