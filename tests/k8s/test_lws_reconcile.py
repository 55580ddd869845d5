"""The LeaderWorkerSet integration's reconcile (:mod:`connectors.k8s.lws_integration`) over a mirror and a fake
client: off unless the framework is listed, a Workload made per group of a queued set (none for one naming no
queue), those of groups scaled away and of a set that is gone let go and deleted, and the set's pods made members
of their group's pod group, or let go once ended (no cluster needed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client

from connectors.k8s import leaderworkerset as lw
from connectors.k8s.decision_events import ACTED_ON_API, Involved
from connectors.k8s.job_events import job_events
from connectors.k8s.lws_integration import POD_PREFIX, SET_PREFIX, LeaderWorkerSetIntegration, SetPod
from events import objects as o
from events import schema as ev

UID = "lws-uid"
ON = {"integrations": {"frameworks": ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]}}
Q = "kueue.x-k8s.io/queue-name"


def raw_lws(replicas: int = 2, queue: str = "lq") -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {Q: queue} if queue else {}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 3, "leaderTemplate": template,
                                                                    "workerTemplate": template}}}


def workload(index: int, uid: str = UID) -> o.Workload:
    return watched_jobs.owned_workload(lw.workload_name("lws", uid, index),
                                       ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "lws", uid),
                                       [o.PodSet(name="leader", count=1), o.PodSet(name="worker", count=2)],
                                       uid=f"wl-{index}")


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                ) -> tuple[LeaderWorkerSetIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(LeaderWorkerSetIntegration, raw, *objs, config=ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, _ = integration(raw_lws(), config={"integrations": {"frameworks": ["batch/job", "pod"]}})
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert (client.created, client.patches, client.deleted) == ([], [], [])


@pytest.mark.asyncio
async def test_a_queued_set_gets_a_workload_per_group() -> None:
    integ, client, _ = integration(raw_lws(replicas=2))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert [b["metadata"]["name"] for b in client.created] == [lw.workload_name("lws", UID, i) for i in (0, 1)]
    assert [b["metadata"]["annotations"][lw.INDEX_ANNOTATION] for b in client.created] == ["0", "1"]


@pytest.mark.asyncio
async def test_a_set_with_more_replicas_than_kueue_takes_gets_nothing_done() -> None:
    """Kueue's #12715: a set whose ``spec.replicas`` is above 1,000,000 is left as it is, its Workloads neither
    made nor deleted (Kueue's reconcile fails with its error), and counted as refused."""
    integ, client, _ = integration(raw_lws(replicas=1_000_001), workload(0))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert (client.created, client.patches, client.deleted) == ([], [], [])
    assert integ.stats.invalid == 1


@pytest.mark.asyncio
async def test_a_multikueue_managers_copy_gets_none_made_on_the_worker() -> None:
    """On a worker, the copy a MultiKueue manager made runs on the group Workloads the manager copies here (named
    from the manager's set's UID): the worker's integration makes none of its own."""
    raw = raw_lws(replicas=2)
    raw["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] = "multikueue"
    raw["metadata"]["annotations"] = {lw.ORIGIN_UID_ANNOTATION: "manager-uid"}
    integ, client, _ = integration(raw)
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert (client.created, client.deleted) == ([], [])


@pytest.mark.asyncio
async def test_a_set_naming_no_queue_gets_none() -> None:
    integ, client, _ = integration(raw_lws(queue=""))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert client.created == []


@pytest.mark.asyncio
async def test_a_scaled_down_groups_workload_is_let_go_and_deleted_and_the_rest_kept() -> None:
    integ, client, _ = integration(raw_lws(replicas=1), workload(0), workload(1))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert client.created == []
    assert client.deleted == [("Workload", lw.workload_name("lws", UID, 1))]
    assert [(kind, name) for kind, name, _ in client.patches] == [("Workload", lw.workload_name("lws", UID, 1))]


@pytest.mark.asyncio
async def test_the_workloads_of_a_set_that_is_gone_are_deleted() -> None:
    integ, client, _ = integration(None, workload(0, uid="old-uid"))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert client.deleted == [("Workload", lw.workload_name("lws", "old-uid", 0))]


@pytest.mark.asyncio
async def test_the_pending_group_workloads_follow_a_queue_change_and_those_holding_quota_wait() -> None:
    """Kueue's #4932 with its reconciler's ``updateWorkload``: a set sent to another queue while none of its groups
    is ready has each kept Workload's ``spec.queueName`` set to its own, conditioned on the Workload's
    resourceVersion, with no Event; one holding quota keeps its queue (the apiserver refuses the change then)."""
    integ, client, appended = integration(raw_lws(replicas=2, queue="other"), workload(0), workload(1))
    integ.state.workloads[workload(1).key].phase = "QuotaReserved"
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert (client.created, client.deleted) == ([], [])
    assert client.patches == [("Workload", lw.workload_name("lws", UID, 0),
                               {"metadata": {"resourceVersion": "3"}, "spec": {"queueName": "other"}})]
    assert appended == []


def set_pod(name: str, *, phase: str = "", labels: dict[str, str] | None = None,
            finalizers: tuple[str, ...] = (), gates: tuple[str, ...] = ()) -> SetPod:
    return msgspec.convert({"metadata": {
        "name": name, "namespace": "ns", "uid": f"{name}-uid", "resourceVersion": "7",
        "labels": {lw.SET_NAME_LABEL: "lws", lw.GROUP_INDEX_LABEL: "1", **(labels or {})},
        "annotations": {lw.SUSPENDING_PARENT: lw.FRAMEWORK_NAME}, "finalizers": list(finalizers)},
        "spec": {"schedulingGates": [{"name": g} for g in gates]}, "status": {"phase": phase}}, SetPod)


GROUP = "kueue.x-k8s.io/pod-group-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


@pytest.mark.asyncio
@pytest.mark.parametrize("gate", [None, True, False], ids=["gate-default", "gate-on", "gate-off"])
async def test_a_pod_of_the_set_is_made_a_member_of_its_groups_pod_group(gate: bool | None) -> None:
    """The group and prebuilt names go where the Configuration's ``WorkloadIdentifierAnnotations`` (beta, on)
    says: annotations while it is on (Kueue's "should set queue-name when adopting a pod without it"), labels
    while it is off (Kueue's "should set default values ..." cases, which turn it off)."""
    integ, client, _ = integration(raw_lws(), config=ON if gate is None else {
        **ON, "featureGates": {"WorkloadIdentifierAnnotations": gate}})
    integ.pods.known["ns/lws-1"] = set_pod("lws-1")
    await integ.reconcile(POD_PREFIX + "ns/lws-1")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["metadata"]["resourceVersion"]) == ("Pod", "lws-1", "7")
    group = lw.workload_name("lws", UID, 1)
    named, other = ("labels", "annotations") if gate is False else ("annotations", "labels")
    assert (patch["metadata"][named][GROUP], patch["metadata"][named][PREBUILT]) == (group, group)
    assert GROUP not in patch["metadata"][other] and PREBUILT not in patch["metadata"][other]
    integ.pods.known["ns/lws-1"] = set_pod("lws-1", labels=patch["metadata"]["labels"])
    await integ.reconcile(POD_PREFIX + "ns/lws-1")
    assert len(client.patches) == 1, "marked once"


@pytest.mark.asyncio
async def test_a_member_still_gated_without_a_queue_name_is_given_the_sets() -> None:
    """Kueue's backfill of the queue name on its members: only while Kueue's scheduling gate holds the pod."""
    integ, client, _ = integration(raw_lws())
    member = {"kueue.x-k8s.io/managed": "true"}
    integ.pods.known["ns/lws-1"] = set_pod("lws-1", labels=member, gates=("other",))
    await integ.reconcile(POD_PREFIX + "ns/lws-1")
    assert client.patches == []
    integ.pods.known["ns/lws-1"] = set_pod("lws-1", labels=member, gates=("other", "kueue.x-k8s.io/admission"))
    await integ.reconcile(POD_PREFIX + "ns/lws-1")
    assert client.patches == [("Pod", "lws-1", {"metadata": {"labels": {Q: "lq"}, "resourceVersion": "7"}})]


@pytest.mark.asyncio
async def test_an_ended_pod_of_the_set_loses_kueues_finalizer() -> None:
    integ, client, _ = integration(raw_lws())
    integ.pods.known["ns/lws-1"] = set_pod("lws-1", phase="Failed", finalizers=("kueue.x-k8s.io/managed", "x"))
    await integ.reconcile(POD_PREFIX + "ns/lws-1")
    assert client.patches == [("Pod", "lws-1", {"metadata": {"resourceVersion": "7", "finalizers": ["x"]}})]


# --- what the set reconciler records, and a Workload following the set's priority class ---------------------------

CONTROLLER = "leaderworkerset.x-k8s.io/leaderworkerset-kueue-controller"


@pytest.mark.asyncio
async def test_each_workload_made_is_a_created_workload_event_on_the_set() -> None:
    """Kueue's LeaderWorkerSet reconciler records ``CreatedWorkload`` on the set per Workload it creates, with its
    integration's recorder."""
    integ, _, appended = integration(raw_lws(replicas=2))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    acted = [e for e in appended if isinstance(e, ev.JobActed)]
    assert [(e.kind, e.key, e.uid, e.action, e.workload) for e in acted] == [
        ("LeaderWorkerSet", "ns/lws", UID, "CreatedWorkload", f"ns/{lw.workload_name('lws', UID, i)}") for i in (0, 1)]
    involved = Involved("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "ns", "lws", UID)
    (event,) = job_events(acted[0], involved)
    assert (event.reason, event.component) == ("CreatedWorkload", CONTROLLER)
    assert event.message == f"Created Workload: ns/{lw.workload_name('lws', UID, 0)}"


def test_a_created_workload_event_is_about_the_leaderworkerset() -> None:
    assert ACTED_ON_API["LeaderWorkerSet"] == "leaderworkerset.x-k8s.io/v1"


def _with_class(name: str) -> dict[str, Any]:
    raw = raw_lws(replicas=1)
    raw["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = name
    return raw


def _wpc(name: str, value: int) -> o.WorkloadPriorityClass:
    return o.WorkloadPriorityClass(metadata=o.ObjectMeta(name=name, uid=f"wpc-{name}"), value=value)


@pytest.mark.asyncio
async def test_a_kept_workload_follows_the_sets_workload_priority_class() -> None:
    """Kueue's reconciler updates the priority of the Workloads it keeps once the set's WorkloadPriorityClass label
    names another class (``UpdateWorkloadPriority``) and records ``UpdatedWorkload`` on the set."""
    integ, client, appended = integration(_with_class("high"), workload(0), _wpc("high", 1000))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    name = lw.workload_name("lws", UID, 0)
    assert client.patches == [("Workload", name, {"metadata": {"resourceVersion": "3"}, "spec": {
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
        "priority": 1000}})]
    assert [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("UpdatedWorkload", f"Updated workload priority class: ns/{name}")]


@pytest.mark.asyncio
async def test_a_kept_workload_waits_for_a_class_the_log_does_not_hold() -> None:
    """Kept as it is, and the set warned (Kueue's "should report a missing workload priority class when the
    label is changed")."""
    integ, client, appended = integration(_with_class("high"), workload(0))
    await integ.reconcile(SET_PREFIX + "ns/lws")
    assert client.patches == []
    assert [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "high" not found')]
