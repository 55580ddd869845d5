"""A Job's existing Workload kept in step with the Job, as Kueue's job reconciler keeps it
(connectors/k8s/job_sync.py): the queue name of a suspended Job's pending Workload (generated or prebuilt), a
generated Workload the Job no longer matches rewritten (suspended, no quota), deleted and made anew (quota held)
or its running Job stopped first, and the priority class the Job's label names now. No cluster needed: the
integration runs against a mirror, its writes recorded by a fake client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from fixtures.jobs import KEY, NAME, UID, integration, job, workload

from connectors.k8s import job_sync
from connectors.k8s.jobs import STOPPING, JobIntegration
from connectors.k8s.mirror import Mirror
from connectors.k8s.recorder import events_of
from connectors.k8s.writer import desired_status
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED, FINISHED, RESERVED, WorkloadInfo

QUEUE = "kueue.x-k8s.io/queue-name"
WPC = "kueue.x-k8s.io/priority-class"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


class Client:
    """Serves the Job as the log holds it, records every write; every write succeeds."""

    def __init__(self, job_doc: dict[str, Any]) -> None:
        self.job_doc = job_doc
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.created: list[dict[str, Any]] = []

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        assert resource.kind == "Job"
        return msgspec.json.encode(self.job_doc)

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        self.patches.append((resource.kind, name, body))
        return msgspec.json.encode({**self.job_doc, "metadata": {**self.job_doc["metadata"], "resourceVersion": "9"}})

    async def delete(self, resource: Any, name: str, namespace: str = "", *, uid: str = "",
                     resource_version: str = "") -> bytes:
        self.deleted.append((name, uid, resource_version))
        return b"{}"

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        self.created.append(body)
        return msgspec.json.encode(body)


def _setup(wl: o.Workload, j: o.Job, *extra: o.KObject, before: tuple[ev.AnyEvent, ...] = ()
           ) -> tuple[JobIntegration, Mirror, list[ev.AnyEvent], Client]:
    jobs, mirror, appended = integration(*extra, wl, j, before=before)
    client = jobs.client = Client(msgspec.to_builtins(j))  # type: ignore[assignment]
    return jobs, mirror, appended, client


def _in_phase(mirror: Mirror, phase: str, *, evicted: str = "", key: str = KEY) -> None:
    """Put the Workload in ``phase`` in the log (admitted on flavor ``default`` with all its pods)."""
    info = mirror.state.workloads[key]
    info.phase, info.evicted = phase, evicted
    if phase in (RESERVED, ADMITTED):
        info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "4"}, count=4)])
        info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    if phase == ADMITTED:
        info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)


def _stored_admitted(mirror: Mirror, shape: Callable[[WorkloadInfo], None]) -> None:
    """The Workload admitted (:func:`_in_phase`) and shaped by ``shape`` in the log, and its stored status what the
    writer would have written for it (so the integration sees it admitted on the apiserver too)."""
    mirror.state.flavors["default"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="default"),
                                                       spec=o.ResourceFlavorSpec())
    _in_phase(mirror, ADMITTED)
    shape(mirror.state.workloads[KEY])
    raw = msgspec.to_builtins(mirror.workloads[KEY])
    raw["status"] = {k: v for k, v in desired_status(mirror.state.workloads[KEY]).items() if v is not None}
    raw["metadata"]["resourceVersion"] = "5"
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key=KEY, uid="wl-uid",
                                                              obj=msgspec.convert(raw, o.Workload))))
    _in_phase(mirror, ADMITTED)  # the upsert folded anew: shaped again as the log had it
    shape(mirror.state.workloads[KEY])


def _with_spec(wl: o.Workload, **spec: Any) -> o.Workload:
    return msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, **spec))


def _job_events(mirror: Mirror, appended: list[ev.AnyEvent]) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events recorded on the Job once ``appended`` is folded."""
    for e in appended:
        mirror.apply(ev.Record(mirror.offset + 1, e))
    return [(k.type, k.reason, k.message) for r in mirror.kube_events.ready.values() for k in events_of(r)
            if k.component == "batch/job-kueue-controller"]


def _workload_writes(client: Client) -> list[dict[str, Any]]:
    return [body for kind, _, body in client.patches if kind == "Workload"]


# --- the queue name ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_suspended_jobs_new_queue_is_given_to_its_pending_workload() -> None:
    jobs, mirror, appended, client = _setup(workload(), job(labels={QUEUE: "other"}))
    await jobs.reconcile("ns/train")
    assert client.patches == [("Workload", NAME, {"metadata": {"resourceVersion": "3"},
                                                  "spec": {"queueName": "other"}})]
    assert appended == [] and _job_events(mirror, appended) == [], "Kueue records no Event for it"
    await jobs.reconcile("ns/train")
    assert len(client.patches) == 1, "not repeated for the same versions of the Job and the Workload"
    assert jobs.stats.requeued == 1


@pytest.mark.asyncio
async def test_a_prebuilt_workload_follows_its_jobs_queue_too() -> None:
    ref = o.OwnerReference(api_version="batch/v1", kind="Job", name="train", uid=UID, controller=True)
    pre = msgspec.structs.replace(workload(), metadata=o.ObjectMeta(
        name="pre", namespace="ns", uid="pre-uid", resource_version="3", owner_references=[ref]))
    jobs, _, _, client = _setup(pre, job(labels={QUEUE: "other", PREBUILT: "pre"}))
    await jobs.reconcile("ns/train")
    assert client.patches == [("Workload", "pre", {"metadata": {"resourceVersion": "3"},
                                                   "spec": {"queueName": "other"}})]


@pytest.mark.asyncio
@pytest.mark.parametrize(("phase", "evicted"), [
    (RESERVED, ""),  # quota held (checks pending): queueName is immutable, the apiserver refuses it
    (ADMITTED, ""),
    (FINISHED, ""),
    ("Pending", "Preempted"),  # Kueue's reconcile stops at the eviction step while Evicted is True
], ids=["reserved", "admitted", "finished", "evicted"])
async def test_the_queue_is_left_alone(phase: str, evicted: str) -> None:
    jobs, mirror, _, client = _setup(workload(), job(labels={QUEUE: "other"}))
    _in_phase(mirror, phase, evicted=evicted)
    await jobs.reconcile("ns/train")
    assert not [b for b in _workload_writes(client) if "queueName" in b.get("spec", {})]
    _in_phase(mirror, "Pending")  # pending again, not evicted: now it moves
    await jobs.reconcile("ns/train")
    assert [b["spec"] for b in _workload_writes(client)] == [{"queueName": "other"}]


@pytest.mark.asyncio
async def test_nothing_is_changed_while_a_decision_about_the_workload_waits_to_be_written() -> None:
    jobs, mirror, _, client = _setup(workload(), job(labels={QUEUE: "other"}))
    mirror.pending[KEY] = {42: "QuotaReserved"}
    await jobs.reconcile("ns/train")
    assert _workload_writes(client) == []
    del mirror.pending[KEY]
    await jobs.reconcile("ns/train")
    assert len(_workload_writes(client)) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("outcome", [ev.DecisionApplied, ev.DecisionRejected])
async def test_the_outcome_of_the_last_decision_waited_for_brings_the_job_back(outcome: type) -> None:
    """A pass that waited for a decision about the Workload (the Job's label changed meanwhile) is not the last:
    the outcome may come with no newer Workload (a decision that changes nothing is not written, so no watch
    event), and it alone is what the Job waits for."""
    jobs, mirror, _, client = _setup(_classed(), job(labels={WPC: "high"}), _wpc("low", 10), _wpc("high", 1000))
    for off, e in ((10, ev.WorkloadPending(time=2, key=KEY, uid="wl-uid", cycle=1, input=9, reason="Pending",
                                           message="no room")),
                   (11, ev.WorkloadPending(time=2, key=KEY, uid="wl-uid", cycle=2, input=10, reason="Pending",
                                           message="no room"))):
        mirror.apply(ev.Record(off, e))
    await jobs.reconcile("ns/train")
    assert _workload_writes(client) == [], "decided from the Workload as stored: it waits for both decisions"
    mirror.dirty_jobs.clear()
    extra = {"reason": "NotFound"} if outcome is ev.DecisionRejected else {}
    mirror.apply(ev.Record(12, outcome(time=3, key=KEY, uid="wl-uid", decision=10, **extra)))
    assert mirror.dirty_jobs == set(), "one decision still waits"
    mirror.apply(ev.Record(13, outcome(time=3, key=KEY, uid="wl-uid", decision=11, **extra)))
    assert mirror.dirty_jobs == {"ns/train"}
    await jobs.reconcile("ns/train")
    assert [b["spec"]["priority"] for b in _workload_writes(client)] == [1000]


# --- a generated Workload the Job no longer matches -----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("changed", "spec"), [
    (job(parallelism=2, completions=2), {"count": 2}),
    (job(cpu="2"), {"cpu": "2"}),
    (job(labels={MAX_EXEC: "600"}), {"maximumExecutionTimeSeconds": 600}),
    (job(labels={QUEUE: "other"}, parallelism=2, completions=2), {"count": 2, "queueName": "other"}),
], ids=["parallelism", "resources", "max-exec-label", "and-queue"])
async def test_a_suspended_job_that_changed_gets_its_pending_workload_rewritten(changed: o.Job,
                                                                               spec: dict[str, Any]) -> None:
    jobs, mirror, appended, client = _setup(workload(), changed)
    await jobs.reconcile("ns/train")
    ((kind, name, body),) = client.patches
    assert (kind, name) == ("Workload", NAME) and body["metadata"] == {"resourceVersion": "3"}
    (pod_set,) = body["spec"]["podSets"]
    assert pod_set["count"] == spec.get("count", 4)
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": spec.get("cpu", "1")}}
    assert body["spec"]["queueName"] == spec.get("queueName", "lq")
    assert body["spec"]["maximumExecutionTimeSeconds"] == spec.get("maximumExecutionTimeSeconds")
    assert body["spec"]["priorityClassRef"] is None and "active" not in body["spec"], "active is kept"
    assert client.deleted == [] and client.created == []
    assert _job_events(mirror, appended) == [
        ("Normal", "UpdatedWorkload", f"Updated not matching Workload for suspended job: {KEY}")]
    await jobs.reconcile("ns/train")
    assert len(client.patches) == 1 and jobs.stats.updated == 1


@pytest.mark.asyncio
async def test_a_workload_holding_quota_is_deleted_and_made_anew() -> None:
    jobs, mirror, appended, client = _setup(workload(), job(parallelism=2, completions=2))
    _in_phase(mirror, RESERVED)
    await jobs.reconcile("ns/train")
    assert client.deleted == [(NAME, "wl-uid", "3")], "conditioned on its uid and resourceVersion"
    assert client.patches == [] and client.created == []
    assert _job_events(mirror, appended) == [("Normal", "DeletedWorkload", f"Deleted not matching Workload: {KEY}")]

    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=9, kind="Workload", key=KEY, uid="wl-uid")))
    await jobs.reconcile("ns/train")
    (made,) = client.created
    assert made["metadata"]["name"] == NAME and made["spec"]["podSets"][0]["count"] == 2


@pytest.mark.asyncio
async def test_a_running_job_that_no_longer_matches_is_stopped_then_its_workload_deleted() -> None:
    jobs, mirror, appended, client = _setup(workload(), job(parallelism=2, completions=2, suspend=False))
    _in_phase(mirror, ADMITTED)
    client.job_doc["status"]["active"] = 2  # its pods still run: the template is restored once they are gone
    await jobs.reconcile("ns/train")
    ((kind, _, body),) = client.patches
    assert kind == "Job" and body["spec"] == {"suspend": True} and body["metadata"]["annotations"] == {STOPPING: "true"}
    assert client.deleted == [], "the old Workload is what the template is restored from"
    assert _job_events(mirror, appended) == [("Normal", "Stopped", job_sync.NO_MATCHING_WORKLOAD)]

    stopped = job(parallelism=2, completions=2, resource_version="10")  # suspended, restored, no pod left
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=9, key=stopped.key, uid=UID, obj=stopped)))
    await jobs.reconcile("ns/train")
    assert client.deleted == [(NAME, "wl-uid", "3")]


def test_a_workload_built_for_a_job_matches_it() -> None:
    """What the Job integration creates is equivalent to the Job it was made from, whatever it holds: no Workload
    is rewritten right after its creation."""
    for raw in (
        msgspec.to_builtins(job()),
        msgspec.to_builtins(job(parallelism=3, completions=2, labels={MAX_EXEC: "60"})),
        msgspec.to_builtins(job(annotations={"kueue.x-k8s.io/job-min-parallelism": "2"})),
        msgspec.to_builtins(job(annotations={"kueue.x-k8s.io/job-min-parallelism": "+2"})),  # not created with it
        msgspec.to_builtins(job(annotations={"kueue.x-k8s.io/job-min-parallelism": "9"})),
    ):
        raw["spec"]["template"]["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        raw["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"memory": "1Gi"}
        j = msgspec.convert(raw, o.Job)
        jobs, mirror, _ = integration(j)
        body = jobs.workload_for(raw, NAME)
        body["metadata"].update(uid="wl-uid", resourceVersion="1")
        made = msgspec.convert(body, o.Workload)
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=made.key, uid="wl-uid", obj=made)))
        info = mirror.state.workloads[KEY]
        assert job_sync.out_of_step(mirror.state, j, made, info, running=False, max_exec=60 if MAX_EXEC in
                                    j.metadata.labels else None) == "", raw["metadata"]


# --- the priority class ---------------------------------------------------------------------------------------------


def _wpc(name: str, value: int) -> o.WorkloadPriorityClass:
    return o.WorkloadPriorityClass(metadata=o.ObjectMeta(name=name), value=value)


def _classed(kind: str = "WorkloadPriorityClass", name: str = "low", priority: int = 10) -> o.Workload:
    group = "kueue.x-k8s.io" if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
    return _with_spec(workload(), priority_class_ref=o.PriorityClassRef(group=group, kind=kind, name=name),
                      priority=priority)


@pytest.mark.asyncio
@pytest.mark.parametrize("phase", ["Pending", ADMITTED])
async def test_a_new_priority_class_label_reprioritises_the_workload(phase: str) -> None:
    """Pending or admitted: a WorkloadPriorityClass's name may change while the Workload holds quota."""
    jobs, mirror, appended, client = _setup(_classed(), job(labels={WPC: "high"}, suspend=phase == "Pending"),
                                            _wpc("low", 10), _wpc("high", 1000))
    _in_phase(mirror, phase)
    await jobs.reconcile("ns/train")
    assert client.patches == [("Workload", NAME, {"metadata": {"resourceVersion": "3"}, "spec": {
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
        "priority": 1000}})]
    assert _job_events(mirror, appended) == [
        ("Normal", "UpdatedWorkload", f"Updated workload priority class: {KEY}")]
    await jobs.reconcile("ns/train")
    assert len(client.patches) == 1 and jobs.stats.reprioritised == 1


@pytest.mark.asyncio
async def test_a_class_given_to_a_workload_without_one() -> None:
    jobs, _, _, client = _setup(workload(), job(labels={WPC: "high"}), _wpc("high", 1000))
    await jobs.reconcile("ns/train")
    assert [b["spec"] for b in _workload_writes(client)] == [{
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
        "priority": 1000}]


@pytest.mark.asyncio
@pytest.mark.parametrize(("wl", "phase"), [
    (_classed("PriorityClass", "pods"), "Pending"),  # the pod's PriorityClass decided it: Kueue leaves it
    (workload(), RESERVED),  # no class while holding quota: the apiserver refuses to add one
], ids=["pod-priority-class", "reserved-without-class"])
async def test_the_priority_is_left_alone(wl: o.Workload, phase: str) -> None:
    pods = o.PriorityClass(metadata=o.ObjectMeta(name="pods"), value=5)
    jobs, mirror, _, client = _setup(wl, job(labels={WPC: "high"}), _wpc("low", 10), _wpc("high", 1000), pods)
    _in_phase(mirror, phase)
    await jobs.reconcile("ns/train")
    assert not [b for b in _workload_writes(client) if "priorityClassRef" in b.get("spec", {})]
    classed = _classed()  # a pending Workload of a WorkloadPriorityClass: that one follows the label
    classed = msgspec.structs.replace(classed, metadata=msgspec.structs.replace(classed.metadata, resource_version="4"))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key=KEY, uid="wl-uid", obj=classed)))
    _in_phase(mirror, "Pending")
    await jobs.reconcile("ns/train")
    assert [b["spec"]["priority"] for b in _workload_writes(client)] == [1000]


@pytest.mark.asyncio
async def test_a_prebuilt_workloads_priority_is_left_alone() -> None:
    """Kueue updates the priority of the Workload it found for the Job, not of the one the Job names (whose
    queue name it does follow)."""
    ref = o.OwnerReference(api_version="batch/v1", kind="Job", name="train", uid=UID, controller=True)
    pre = msgspec.structs.replace(_classed(), metadata=o.ObjectMeta(
        name="pre", namespace="ns", uid="pre-uid", resource_version="3", owner_references=[ref]))
    jobs, _, _, client = _setup(pre, job(labels={WPC: "high", PREBUILT: "pre", QUEUE: "other"}),
                                _wpc("low", 10), _wpc("high", 9))
    await jobs.reconcile("ns/train")
    assert [b["spec"] for b in _workload_writes(client)] == [{"queueName": "other"}]


@pytest.mark.asyncio
async def test_a_missing_class_is_reported_once_per_job_version_whatever_its_workloads_changes() -> None:
    """The Warning is keyed on the Job's version and the class missing, not on the Workload's version: a
    Workload whose status changes (an eviction, a slice's drain) adds no Warning for the same Job (ro-diff-c
    L2); a new version of the Job, or the class found and gone again, is reported again."""
    jobs, mirror, appended, client = _setup(_classed(), job(labels={WPC: "later"}), _wpc("low", 10))
    await jobs.reconcile("ns/train")
    changed = msgspec.structs.replace(_classed(), metadata=msgspec.structs.replace(
        _classed().metadata, resource_version="4"))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key=KEY, obj=changed)))
    await jobs.reconcile("ns/train")
    warned = ("Job", "WorkloadPriorityClassNotFound")

    def acted() -> list[tuple[str, str]]:
        return [(e.kind, e.action) for e in appended]  # type: ignore[attr-defined]

    assert acted() == [warned], "its Workload's status change adds no Warning"
    newer = job(labels={WPC: "later"}, resource_version="8")
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="ns/train", obj=newer)))
    await jobs.reconcile("ns/train")
    assert acted() == [warned] * 2, "a new version of the Job is reported again"

    # the class made, then deleted again: reported again for the same Job
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=4, key="later", obj=_wpc("later", 77))))
    await jobs.reconcile("ns/train")
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=5, kind="WorkloadPriorityClass",
                                                                key="later")))
    await jobs.reconcile("ns/train")
    assert acted() == [warned, warned, ("Job", "UpdatedWorkload"), warned]


@pytest.mark.asyncio
async def test_a_missing_class_holds_the_job_until_it_exists() -> None:
    """Kueue's reconcile fails on the lookup, so nothing else is done for the Job meanwhile; it warns on the Job as
    when creating its Workload (Kueue's ``ExtractPriority``, #13775: every path to the lookup reports the miss;
    job_controller_test 'Should report a warning when the label is changed to a class that does not exist')."""
    jobs, mirror, appended, client = _setup(_classed(), job(labels={WPC: "later"}), _wpc("low", 10))
    await jobs.reconcile("ns/train")
    await jobs.reconcile("ns/train")
    assert client.patches == [], "the Workload keeps the priority it had"
    assert [type(e).__name__ for e in appended] == ["JobActed"], \
        "reported once for this version of the Job; not even the WaitForStart PodsReady of a pending Workload"
    assert _job_events(mirror, appended) == [
        ("Warning", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "later" not found')]
    mirror.dirty_jobs.clear()
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="later", obj=_wpc("later", 77))))
    assert mirror.dirty_jobs == {"ns/train"}, "the class it waits for makes it dirty"
    await jobs.reconcile("ns/train")
    assert [b["spec"]["priority"] for b in _workload_writes(client)] == [77]
