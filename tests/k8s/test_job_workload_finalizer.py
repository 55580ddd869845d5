"""The ``kueue.x-k8s.io/resource-in-use`` finalizer on a Job's Workload and the one Workload a Job keeps, as Kueue's
job reconciler and workload controller keep them (connectors/k8s/workload_finalizer.py, job_sync.one_workload):
the rules alone, then the Job integration's writes against a mirror, recorded by a fake client in the order
they are sent."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.decision_workers import collecting
from fixtures.jobs import KEY, NAME, UID, integration, job, show_finished, workload

from connectors.k8s import job_sync
from connectors.k8s import workload_finalizer as wf
from connectors.k8s.jobs import ORPHAN, JobIntegration
from connectors.k8s.mirror import Mirror
from connectors.k8s.recorder import events_of
from connectors.k8s.resources import JOB_UID_LABEL
from connectors.k8s.retention import RetentionEnforcer
from events import objects as o
from events import schema as ev
from projections.in_use import FINALIZER
from projections.workloads import ADMITTED, FINISHED, PENDING, RESERVED, WorkloadInfo

OTHER = "example.com/keep-me"
GATE_OFF = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"FinishOrphanedWorkloads": False}}


class Client:
    """Serves the Job as the log holds it; records every write in order; every write succeeds (resourceVersion
    9 after a patch)."""

    def __init__(self, job_doc: dict[str, Any]) -> None:
        self.job_doc = job_doc
        self.calls: list[tuple[str, ...]] = []
        self.bodies: list[dict[str, Any]] = []

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        assert resource.kind == "Job"
        return msgspec.json.encode(self.job_doc)

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        self.calls.append(("patch", resource.kind, name))
        self.bodies.append(body)
        return msgspec.json.encode({**self.job_doc, "metadata": {**self.job_doc["metadata"], "resourceVersion": "9"}})

    async def delete(self, resource: Any, name: str, namespace: str = "", *, uid: str = "",
                     resource_version: str = "") -> bytes:
        self.calls.append(("delete", resource.kind, name, uid, resource_version))
        return b"{}"

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        self.calls.append(("create", resource.kind, body["metadata"]["name"]))
        return msgspec.json.encode(body)


def _meta(w: o.Workload, **changes: Any) -> o.Workload:
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, **changes))


def _held(w: o.Workload, *extra: str) -> o.Workload:
    """``w`` holding the finalizer (and ``extra`` ones)."""
    return _meta(w, finalizers=[*extra, FINALIZER])


def _finished(w: o.Workload) -> o.Workload:
    """``w`` as the apiserver shows it once Finished is written."""
    cond = o.Condition(type="Finished", status="True", reason="Succeeded", message="done")
    return msgspec.structs.replace(w, status=msgspec.structs.replace(w.status, conditions=[cond]))


def _info(phase: str = PENDING) -> WorkloadInfo:
    return WorkloadInfo(key=KEY, uid="wl-uid", namespace="ns", name=NAME, queue_name="lq", created=0, priority=0, priority_class="",
                        pod_sets=(), phase=phase)


def _setup(*objs: o.KObject, before: tuple[ev.AnyEvent, ...] = ()
           ) -> tuple[JobIntegration, Mirror, list[ev.AnyEvent], Client]:
    jobs, mirror, appended = integration(*objs, before=before)
    j = next((x for x in objs if isinstance(x, o.Job)), job())
    client = jobs.client = Client(msgspec.to_builtins(j))  # type: ignore[assignment]
    return jobs, mirror, appended, client


def _upsert(mirror: Mirror, obj: o.KObject) -> None:
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=9, key=obj.key, uid=obj.metadata.uid, obj=obj)))


def _job_events(mirror: Mirror, appended: list[ev.AnyEvent]) -> list[tuple[str, str]]:
    for e in appended:
        mirror.apply(ev.Record(mirror.offset + 1, e))
    return [(k.reason, k.message) for r in mirror.kube_events.ready.values() for k in events_of(r)
            if k.component == "batch/job-kueue-controller"]


def _in_phase(mirror: Mirror, phase: str, key: str = KEY) -> None:
    info = mirror.state.workloads[key]
    info.phase = phase
    if phase in (RESERVED, ADMITTED):
        info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "4"}, count=4)])
        info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    if phase == ADMITTED:
        info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)


# --- the rules ----------------------------------------------------------------------------------------------------


def test_the_removal_keeps_every_other_finalizer_and_is_conditioned_on_the_workload_as_read() -> None:
    w = _held(workload(), OTHER)
    assert wf.removal_patch(w) == {"metadata": {"uid": "wl-uid", "resourceVersion": "3", "finalizers": [OTHER]}}
    assert wf.removal_patch(_held(workload()))["metadata"]["finalizers"] is None, "the list goes with the last one"


@pytest.mark.parametrize(("obs", "phase", "running", "want"), [
    (_held(workload()), PENDING, False, ""),
    (_held(workload()), FINISHED, False, ""),  # finished in the log, not yet shown by the apiserver
    (_finished(_held(workload())), FINISHED, True, wf.REMOVE),
    (_finished(workload()), FINISHED, False, ""),  # nothing to take off
    (_meta(_held(workload()), deletion_timestamp="2026-01-01T00:00:00Z"), ADMITTED, True, wf.STOP),
    (_meta(_held(workload()), deletion_timestamp="2026-01-01T00:00:00Z"), ADMITTED, False, wf.REMOVE),
    (_meta(workload(), deletion_timestamp="2026-01-01T00:00:00Z"), PENDING, False, ""),
], ids=["pending", "finished-not-shown", "finished", "finished-without", "deleted-running", "deleted-stopped",
        "deleted-without"])
def test_when_the_jobs_workload_lets_go(obs: o.Workload, phase: str, running: bool, want: str) -> None:
    assert wf.release(obs, _info(phase), job_running=running) == want


def test_an_orphan_is_finished_unless_finished_or_being_deleted_and_under_the_gate() -> None:
    held, gone = _held(workload()), _meta(_held(workload()), deletion_timestamp="2026-01-01T00:00:00Z")
    assert wf.orphan_steps(held, _info(ADMITTED), finish_orphaned=True) == (True, True)
    assert wf.orphan_steps(held, _info(ADMITTED), finish_orphaned=False) == (False, True)
    assert wf.orphan_steps(held, _info(FINISHED), finish_orphaned=True) == (False, True)
    assert wf.orphan_steps(gone, _info(ADMITTED), finish_orphaned=True) == (False, True)
    assert wf.orphan_steps(workload(), _info(ADMITTED), finish_orphaned=True) == (True, False)


def test_an_orphan_finished_by_the_log_keeps_its_finalizer_until_the_apiserver_shows_it_finished() -> None:
    held = _held(workload())
    assert wf.awaits_finished(held, _info(ADMITTED), finishing=True)
    assert wf.awaits_finished(held, _info(FINISHED), finishing=False), "finished in the log, not written yet"
    assert not wf.awaits_finished(_finished(held), _info(FINISHED), finishing=False), "shown: it goes"
    assert not wf.awaits_finished(held, _info(ADMITTED), finishing=False), "not finished (the gate off): it goes"
    assert not wf.awaits_finished(_meta(held, deletion_timestamp="2026-01-01T00:00:00Z"), _info(FINISHED),
                                  finishing=False), "being deleted: never shown finished, it goes"
    assert not wf.awaits_finished(_meta(held, uid="other"), _info(FINISHED), finishing=False), "another Workload"
    assert not wf.awaits_finished(workload(), _info(FINISHED), finishing=False), "no finalizer to keep"
    assert not wf.awaits_finished(held, None, finishing=False)


def test_a_workload_with_no_owner_is_an_orphan_when_deleted_or_labelled_with_its_job() -> None:
    bare = _meta(workload(), owner_references=[])
    labelled = _meta(bare, labels={JOB_UID_LABEL: UID})
    deleted = _meta(bare, deletion_timestamp="2026-01-01T00:00:00Z")
    assert not wf.ownerless(bare, finish_orphaned=True)
    assert wf.ownerless(labelled, finish_orphaned=True) and not wf.ownerless(labelled, finish_orphaned=False)
    assert wf.ownerless(deleted, finish_orphaned=False)
    assert not wf.ownerless(_meta(workload(), labels={JOB_UID_LABEL: UID}), finish_orphaned=True), "it has an owner"


def test_a_multikueue_copy_on_a_worker_is_no_orphan() -> None:
    """A manager's copy carries the manager Job's uid label and no owner until the Job's copy adopts it."""
    copy = _meta(workload(), owner_references=[],
                 labels={JOB_UID_LABEL: UID, "kueue.x-k8s.io/multikueue-origin": "multikueue"})
    assert not wf.ownerless(copy, finish_orphaned=True)
    assert wf.ownerless(_meta(copy, deletion_timestamp="2026-01-01T00:00:00Z"), finish_orphaned=True)


def _copy(name: str, *, created: str, count: int = 4, uid: str = UID) -> o.Workload:
    w = _meta(workload(count), name=name, uid=f"{name}-uid", creation_timestamp=created)
    ref = msgspec.structs.replace(w.metadata.owner_references[0], uid=uid)
    return _meta(w, owner_references=[ref])


def _pairs(*ws: o.Workload) -> list[tuple[o.Workload, WorkloadInfo]]:
    mirror = Mirror()
    for w in ws:
        _upsert(mirror, w)
    return [(w, mirror.state.workloads[w.key]) for w in ws]


def test_a_job_keeps_its_oldest_matching_workload_and_none_of_another_job_of_its_name() -> None:
    state = Mirror().state
    new, old = _copy("a-new", created="2026-01-02T00:00:00Z"), _copy("z-old", created="2026-01-01T00:00:00Z")
    keep, extras = job_sync.one_workload(state, job(), _pairs(new, old), None)
    assert keep is not None and keep[0].metadata.name == "z-old" and [w.metadata.name for w in extras] == ["a-new"]

    other = _copy("earlier-job", created="2025-01-01T00:00:00Z", uid="another-uid")
    keep, extras = job_sync.one_workload(state, job(), _pairs(other, new), None)
    assert keep is not None and keep[0].metadata.name == "a-new", "another uid's is never the Job's"
    assert [w.metadata.name for w in extras] == ["earlier-job"]


def test_a_matching_workload_is_kept_before_an_older_one_that_no_longer_matches() -> None:
    state = Mirror().state
    stale, fits = _copy("stale", created="2026-01-01T00:00:00Z", count=3), _copy("fits", created="2026-01-02T00:00:00Z")
    keep, extras = job_sync.one_workload(state, job(), _pairs(stale, fits), None)
    assert keep is not None and keep[0].metadata.name == "fits" and [w.metadata.name for w in extras] == ["stale"]
    keep, extras = job_sync.one_workload(state, job(), _pairs(stale), None)
    assert keep is not None and keep[0].metadata.name == "stale" and extras == [], "alone, brought in step"


def test_the_mirror_indexes_every_workload_a_job_controls() -> None:
    mirror = Mirror()
    a, b = _copy("a", created=""), _copy("b", created="")
    for w in (a, b):
        _upsert(mirror, w)
    assert mirror.owned_by == {"ns/train": {"ns/a", "ns/b"}}
    refers = _copy("c", created="")
    _upsert(mirror, _meta(refers, owner_references=[msgspec.structs.replace(refers.metadata.owner_references[0],
                                                                            controller=False)]))
    assert mirror.owned_by == {"ns/train": {"ns/a", "ns/b"}}, "Kueue's #13573: one merely referring to it is not its"
    _upsert(mirror, _meta(a, owner_references=[]))
    assert mirror.owned_by == {"ns/train": {"ns/b"}}, "no longer controlled by it"
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=9, kind="Workload", key="ns/b", uid="b-uid")))
    assert mirror.owned_by == {}


# --- the Job integration ----------------------------------------------------------------------------------------


def test_the_workload_made_for_a_job_carries_the_finalizer() -> None:
    jobs, _, _, _ = _setup(job())
    made = jobs.workload_for(msgspec.to_builtins(job()), NAME)
    assert made["metadata"]["finalizers"] == [FINALIZER]


@pytest.mark.asyncio
async def test_a_finished_workload_lets_go_once_the_apiserver_shows_it_finished() -> None:
    jobs, mirror, _, client = _setup(_held(workload()), job())
    _in_phase(mirror, FINISHED)
    await jobs.reconcile("ns/train")
    assert client.calls == [], "the log's decision is not written yet"
    _upsert(mirror, _finished(_held(workload(), OTHER)))
    await jobs.reconcile("ns/train")
    assert client.calls == [("patch", "Workload", NAME)]
    assert client.bodies == [{"metadata": {"uid": "wl-uid", "resourceVersion": "3", "finalizers": [OTHER]}}]


@pytest.mark.asyncio
async def test_a_deleted_workload_stops_its_running_job_then_lets_go() -> None:
    deleted = _meta(_held(workload()), deletion_timestamp="2026-01-01T00:00:00Z")
    jobs, mirror, appended, client = _setup(deleted, job(suspend=False))
    _in_phase(mirror, ADMITTED)
    await jobs.reconcile("ns/train")
    assert client.calls[0] == ("patch", "Job", "train") and client.bodies[0]["spec"] == {"suspend": True}
    assert ("patch", "Workload", NAME) not in client.calls, "the template is restored from it first"
    assert ("Stopped", wf.WORKLOAD_DELETED) in _job_events(mirror, appended)

    _upsert(mirror, job(resource_version="10"))  # suspended, restored
    client.calls.clear()
    await jobs.reconcile("ns/train")
    assert client.calls == [("patch", "Workload", NAME)]


@pytest.mark.asyncio
async def test_the_workload_of_a_deleted_job_is_finished_let_go_then_deleted() -> None:
    jobs, mirror, appended, client = _setup(_held(workload()), job())
    _in_phase(mirror, ADMITTED)
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=9, kind="Job", key="ns/train", uid=UID)))
    await jobs.reconcile("ns/train")
    assert [(e.reason, e.message) for e in appended if isinstance(e, ev.WorkloadFinished)] == [
        ("OwnerNotFound", "The workload's owner no longer exists")]
    assert client.calls == [], "finished first: nothing written to the Workload, not racing the Finished write"
    await jobs.reconcile("ns/train")
    assert client.calls == [], "not before the apiserver shows it finished"
    assert show_finished(mirror, appended) == {"ns/train"}, "the version showing it finished marks the gone Job"
    await jobs.reconcile("ns/train")
    assert client.calls == [("patch", "Workload", NAME), ("delete", "Workload", NAME, "wl-uid", "")]
    assert client.bodies[0]["metadata"]["resourceVersion"] == "4", "on the version showing it finished"


@pytest.mark.asyncio
async def test_a_job_being_deleted_orphans_its_workload_only_once_it_is_gone() -> None:
    terminating = msgspec.structs.replace(job(), metadata=msgspec.structs.replace(
        job().metadata, deletion_timestamp="2026-01-01T00:00:00Z", labels={}))
    jobs, mirror, appended, client = _setup(_held(workload()), terminating)
    _in_phase(mirror, ADMITTED)
    await jobs.reconcile("ns/train")
    assert appended == [] and client.calls == [], "Kueue's #12849: not while the Job is being deleted"

    _upsert(mirror, _meta(_held(workload()), deletion_timestamp="2026-01-01T00:00:01Z"))
    await jobs.reconcile("ns/train")
    assert appended == [] and client.calls == [("patch", "Workload", NAME)], "a foreground deletion waits for it"

    jobs, mirror, appended, client = _setup(_held(workload()), terminating)
    _in_phase(mirror, ADMITTED)
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=9, kind="Job", key="ns/train", uid=UID)))
    await jobs.reconcile("ns/train")
    assert [e.reason for e in appended if isinstance(e, ev.WorkloadFinished)] == ["OwnerNotFound"]
    show_finished(mirror, appended)
    await jobs.reconcile("ns/train")
    assert client.calls == [("patch", "Workload", NAME), ("delete", "Workload", NAME, "wl-uid", "")]


@pytest.mark.asyncio
async def test_a_workload_whose_job_was_deleted_orphaning_it_is_finished_and_let_go() -> None:
    orphan = _meta(_held(workload()), owner_references=[], labels={JOB_UID_LABEL: UID})
    jobs, mirror, appended, client = _setup(orphan)
    _in_phase(mirror, ADMITTED)
    assert mirror.dirty_orphans == {KEY}
    await jobs.reconcile(ORPHAN + KEY)
    assert [e.reason for e in appended if isinstance(e, ev.WorkloadFinished)] == ["OwnerNotFound"]
    assert client.calls == [], "finished first: the finalizer waits for the version showing it"
    mirror.dirty_orphans = set()
    show_finished(mirror, appended)
    assert mirror.dirty_orphans == {KEY}, "that version marks the ownerless Workload again"
    await jobs.reconcile(ORPHAN + KEY)
    assert client.calls == [("patch", "Workload", NAME)] and client.bodies[0]["metadata"]["resourceVersion"] == "4"

    jobs, mirror, appended, client = _setup(orphan, before=(ev.ConfigRecorded(
        time=1, document=GATE_OFF, writer="test", id="config"),))
    await jobs.reconcile(ORPHAN + KEY)
    assert appended == [] and client.calls == [], "without the gate, only one being deleted is let go"


@pytest.mark.asyncio
async def test_extra_workloads_are_deleted_and_the_job_keeps_its_own() -> None:
    own = _held(_meta(workload(), creation_timestamp="2026-01-01T00:00:00Z"))
    extra = _held(_copy("extra", created="2026-01-02T00:00:00Z"))
    going = _meta(_held(_copy("going", created="2026-01-03T00:00:00Z")), deletion_timestamp="2026-01-04T00:00:00Z")
    jobs, mirror, appended, client = _setup(own, extra, going, job())
    await jobs.reconcile("ns/train")
    assert client.calls == [("patch", "Workload", "extra"), ("delete", "Workload", "extra", "extra-uid", "9"),
                            ("patch", "Workload", "going")], "one being deleted only loses its finalizer"
    assert _job_events(mirror, appended) == [("DeletedWorkload", "Deleted not matching Workload: ns/extra")]
    assert jobs.stats.extras_deleted == 1

    await jobs.reconcile("ns/train")
    assert len(client.calls) == 3, "not again on the same Workloads"
    for key, uid in (("ns/extra", "extra-uid"), ("ns/going", "going-uid")):
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=9, kind="Workload", key=key, uid=uid)))
    await jobs.reconcile("ns/train")
    assert len(client.calls) == 3, "the one it keeps is left alone"


@pytest.mark.asyncio
async def test_a_workload_deleted_for_no_longer_matching_loses_its_finalizer_first() -> None:
    jobs, mirror, _, client = _setup(_held(workload()), job(parallelism=2, completions=2))
    _in_phase(mirror, RESERVED)
    await jobs.reconcile("ns/train")
    assert client.calls == [("patch", "Workload", NAME), ("delete", "Workload", NAME, "wl-uid", "9")]


@pytest.mark.asyncio
async def test_retention_takes_the_finalizer_off_before_deleting() -> None:
    mirror = Mirror()
    _upsert(mirror, _held(workload()))
    mirror.state.workloads[KEY].retention_target = "Workload"
    mirror.pending[KEY] = {41: "RetentionExpired"}
    client = Client({"metadata": {}})
    retention, appended = collecting(RetentionEnforcer, client, mirror)
    await retention.sync(KEY)
    assert client.calls == [("patch", "Workload", NAME), ("delete", "Workload", NAME, "wl-uid", "")]
    assert [type(e).__name__ for e in appended] == ["DecisionApplied"]
