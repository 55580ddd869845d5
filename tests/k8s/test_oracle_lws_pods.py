"""Kueue's LeaderWorkerSet reconciler tests as the oracle for what happens to a set's pods
(``pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler_test.go``, the newest version read: v1beta2,
its pods reconciled by the set's reconciler through its StatefulSets). Each case id names Kueue's case."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client

from connectors.k8s import leaderworkerset as lw
from connectors.k8s.errors import NotFound
from connectors.k8s.lws_integration import POD_PREFIX, LeaderWorkerSetIntegration, SetPod
from events import objects as o
from events import schema as ev

ON = {"integrations": {"frameworks": ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]}}
ADMISSION, TOPOLOGY = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"
FINALIZER = "kueue.x-k8s.io/managed"


class _NoSet(Client):
    """The apiserver has no LeaderWorkerSet (the set was deleted, its pods orphaned)."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        raise NotFound(f"{resource.kind} {namespace}/{name} not found")


def _pod(*, gates: tuple[str, ...] = (ADMISSION,), phase: str = "") -> SetPod:
    """A pod of set ``lws`` as the LeaderWorkerSet controller makes it (its StatefulSet its controller), gated
    by the Pod webhook, not yet made a member of its group, with Kueue's finalizer."""
    return msgspec.convert({"metadata": {
        "name": "lws-0", "namespace": "ns", "uid": "pod-uid", "resourceVersion": "7",
        "labels": {lw.SET_NAME_LABEL: "lws", lw.GROUP_INDEX_LABEL: "0"},
        "annotations": {lw.SUSPENDING_PARENT: lw.FRAMEWORK_NAME, "kueue.x-k8s.io/pod-group-serving": "true"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws", "uid": "sts-uid",
                             "controller": True}],
        "finalizers": [FINALIZER]},
        "spec": {"schedulingGates": [{"name": g} for g in (*gates, "other.example.com/gate")]},
        "status": {"phase": phase}}, SetPod)


async def _reconcile_orphan(pod: SetPod) -> list[tuple[str, str, dict[str, Any]]]:
    integ, _, _ = watched_jobs.integration(LeaderWorkerSetIntegration, None, config=ON)
    integ.client = client = _NoSet({}, lw.KIND)
    integ.pods.known["ns/lws-0"] = pod
    await integ.reconcile(POD_PREFIX + "ns/lws-0")
    return client.patches


@pytest.mark.asyncio
@pytest.mark.parametrize("gates", [(ADMISSION,), (ADMISSION, TOPOLOGY), (TOPOLOGY,)],
                         ids=["should ungate pods if leaderworkerset is deleted", "both of Kueue's gates",
                              "the topology gate alone"])
async def test_gated_pods_of_a_deleted_set_are_ungated_and_keep_the_finalizer(gates: tuple[str, ...]) -> None:
    """Kueue: with no LeaderWorkerSet, its pods' Kueue scheduling gates are lifted (``wantPods``: no gate) and
    the finalizer stays (the newest Kueue takes it off no longer, #8571); other gates stay."""
    assert await _reconcile_orphan(_pod(gates=gates)) == [("Pod", "lws-0", {
        "metadata": {"resourceVersion": "7"},
        "spec": {"schedulingGates": [{"name": "other.example.com/gate"}]}})]


@pytest.mark.asyncio
async def test_an_ungated_pod_of_a_deleted_set_is_left_alone() -> None:
    assert await _reconcile_orphan(_pod(gates=())) == []


@pytest.mark.asyncio
async def test_a_gated_pod_of_a_set_the_watch_has_not_shown_yet_stays_gated() -> None:
    """The pods' watch may run ahead of the sets': a set the apiserver has is not gone."""
    integ, client, _ = watched_jobs.integration(LeaderWorkerSetIntegration, None, config=ON)
    client.stored = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": lw.KIND,
                     "metadata": {"name": "lws", "namespace": "ns", "uid": "lws-uid"}}
    integ.pods.known["ns/lws-0"] = _pod()
    await integ.reconcile(POD_PREFIX + "ns/lws-0")
    assert client.patches == []


# --- leaderworkerset_reconciler_priority_test.go (TestReconcilerResolvesPriorityClassOnce) ------------------

UID = "lws-uid"
WPC = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}


def _set(cls: str, replicas: int = 2) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": lw.KIND,
            "metadata": {"name": "lws", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": cls}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 1, "workerTemplate": template}}}


def _component(index: int, cls: str, priority: int) -> o.Workload:
    """A group's Workload naming WorkloadPriorityClass ``cls`` at ``priority`` (Kueue's ``lwsComponent``)."""
    wl = watched_jobs.owned_workload(lw.workload_name("lws", UID, index),
                                     ("leaderworkerset.x-k8s.io/v1", lw.KIND, "lws", UID),
                                     [o.PodSet(name="main", count=1)], uid=f"wl-{index}")
    return msgspec.structs.replace(wl, spec=msgspec.structs.replace(
        wl.spec, priority_class_ref=o.PriorityClassRef(name=cls, **WPC), priority=priority))


def _class(name: str, value: int) -> o.WorkloadPriorityClass:
    return o.WorkloadPriorityClass(metadata=o.ObjectMeta(name=name, uid=f"wpc-{name}"), value=value)


def _priorities(client: Client) -> dict[str, tuple[str, int]]:
    """What each Workload written (patched or created) names: ``name -> (class, priority)``."""
    got = {name: (p["spec"]["priorityClassRef"]["name"], p["spec"]["priority"])
           for kind, name, p in client.patches
           if kind == "Workload" and "priorityClassRef" in p.get("spec", {})}
    got.update({b["metadata"]["name"]: (b["spec"]["priorityClassRef"]["name"], b["spec"]["priority"])
                for b in client.created})
    return got


def _name(index: int) -> str:
    return lw.workload_name("lws", UID, index)


@pytest.mark.asyncio
@pytest.mark.parametrize(("cls", "classes", "components", "want"), [
    ("new-wpc", [("old-wpc", 1000), ("new-wpc", 5000)], [(0, "old-wpc", 1000), (1, "old-wpc", 1000)],
     {0: ("new-wpc", 5000), 1: ("new-wpc", 5000)}),
    ("new-wpc", [("new-wpc", 5000)], [], {0: ("new-wpc", 5000), 1: ("new-wpc", 5000)}),
    ("new-wpc", [("old-wpc", 1000), ("new-wpc", 5000)], [(0, "old-wpc", 1000)],
     {0: ("new-wpc", 5000), 1: ("new-wpc", 5000)}),
    ("high", [("high", 200)], [(0, "high", 100)], {1: ("high", 200)}),
    ("high", [("high", 200), ("low", 10)], [(0, "high", 500), (1, "low", 10)], {1: ("high", 200)}),
], ids=["one read serves a set whose components all move to the class",
        "one read serves a set whose components are all created",
        "one read serves a set that is part created and part updated",
        "a component already naming the class keeps the value it has",
        "a sibling transitioning does not move a component already on the class"])
async def test_each_group_workload_follows_the_sets_priority_class(
        cls: str, classes: list[tuple[str, int]], components: list[tuple[int, str, int]],
        want: dict[int, tuple[str, int]]) -> None:
    """Kueue's ``wantComponent`` per Workload: moved to the set's class at the class's value, created at it;
    one already naming the class keeps its own value (not rewritten: 100, not 200)."""
    objs = [_class(n, v) for n, v in classes] + [_component(i, c, p) for i, c, p in components]
    integ, client, _ = watched_jobs.integration(LeaderWorkerSetIntegration, _set(cls), *objs, config=ON)
    await integ.reconcile("lws/ns/lws")
    assert _priorities(client) == {_name(i): v for i, v in want.items()}


@pytest.mark.asyncio
async def test_a_surplus_component_is_deleted_even_though_the_class_is_missing() -> None:
    """Kueue: the set names a class that does not exist; group 5's Workload (beyond ``replicas: 2``) is
    deleted all the same (``wantAbsent``), the others left waiting for the class."""
    integ, client, _ = watched_jobs.integration(
        LeaderWorkerSetIntegration, _set("missing-wpc"), _component(0, "missing-wpc", 100),
        _component(5, "missing-wpc", 100), config=ON)
    await integ.reconcile("lws/ns/lws")
    assert client.deleted == [("Workload", _name(5))]
    assert client.created == [] and _priorities(client) == {}


def _warnings(appended: list[ev.AnyEvent]) -> list[tuple[str, str, str]]:
    return [(e.key, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)]


@pytest.mark.asyncio
async def test_a_missing_class_is_reported_once_when_creating_the_workloads() -> None:
    """Kueue (newest ``leaderworkerset_reconciler_test.go``, "should report a missing workload priority class
    when creating the workloads"): two groups, one Warning ``WorkloadPriorityClassNotFound`` on the set (the
    fix of #13820 resolves the class once per reconcile), and no Workload created."""
    integ, client, appended = watched_jobs.integration(LeaderWorkerSetIntegration, _set("missing-wpc"),
                                                       config=ON)
    await integ.reconcile("lws/ns/lws")
    assert client.created == []
    assert _warnings(appended) == [("ns/lws", "WorkloadPriorityClassNotFound",
                                    'WorkloadPriorityClass "missing-wpc" not found')]


@pytest.mark.asyncio
async def test_a_missing_class_is_reported_once_when_the_label_is_changed() -> None:
    """Kueue's "should report a missing workload priority class when the label is changed": the set's two
    Workloads name ``existing-wpc``; neither is rewritten, one Warning on the set."""
    integ, client, appended = watched_jobs.integration(
        LeaderWorkerSetIntegration, _set("missing-wpc"), _class("existing-wpc", 1000),
        _component(0, "existing-wpc", 1000), _component(1, "existing-wpc", 1000), config=ON)
    await integ.reconcile("lws/ns/lws")
    assert client.patches == [] and client.created == []
    assert _warnings(appended) == [("ns/lws", "WorkloadPriorityClassNotFound",
                                    'WorkloadPriorityClass "missing-wpc" not found')]


@pytest.mark.asyncio
async def test_a_missing_class_is_reported_once_per_set_version_not_once_per_pass() -> None:
    """Kueue warns on every failed reconcile, and its recorder shows the repeats of one Event as one; here
    the Warning goes in the log once for the set's version and the class, not again on each pass a Workload's
    change brings (a kept Workload's every status change marks the set). A new version of the set, or the
    class found and then gone again, is reported again."""
    integ, _, appended = watched_jobs.integration(
        LeaderWorkerSetIntegration, _set("missing-wpc"), _class("existing-wpc", 1000),
        _component(0, "existing-wpc", 1000), _component(1, "existing-wpc", 1000), config=ON)
    mirror = integ.mirror

    def upsert(obj: o.KObject) -> None:
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=obj.key, uid=obj.metadata.uid,
                                                                    obj=obj)))
    warned = ("ns/lws", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "missing-wpc" not found')
    await integ.reconcile("lws/ns/lws")
    changed = _component(0, "existing-wpc", 1000)
    upsert(msgspec.structs.replace(changed, metadata=msgspec.structs.replace(changed.metadata,
                                                                             resource_version="4")))
    await integ.reconcile("lws/ns/lws")
    await integ.reconcile("lws/ns/lws")
    assert _warnings(appended) == [warned]
    newer = _set("missing-wpc")
    newer["metadata"]["resourceVersion"] = "6"
    integ.known["ns/lws"] = msgspec.convert(newer, LeaderWorkerSetIntegration.ITEM)
    await integ.reconcile("lws/ns/lws")
    assert _warnings(appended) == [warned] * 2
    upsert(_class("missing-wpc", 10))
    await integ.reconcile("lws/ns/lws")
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=3, kind="WorkloadPriorityClass",
                                                               key="missing-wpc", uid="wpc-missing-wpc")))
    await integ.reconcile("lws/ns/lws")
    assert [w for w in _warnings(appended) if w[1] == warned[1]] == [warned] * 3
