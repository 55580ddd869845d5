"""A MultiKueue workload evicted on the manager while it runs on a worker (preempted there, its queue stopped with
HoldAndDrain, ...) and still holds quota until its Job stops. Kueue's MultiKueue controller (workload.go
``reconcileGroup``) keeps the remote objects until the quota is released (step 2), has the admitted copy evicted on
its worker through a DeactivationTarget (step 6b), mirrors the evicted copy's Job status to the manager's (step 4,
``SyncJob``), whose job controller then sees no active pod and gives the quota back; only then do the copies go."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import ANY

import msgspec
import pytest
from fixtures.multikueue_states import WorkloadCopyApi, quota_released
from test_multikueue_connector import KEY, START, RecordingManager, _connector, _state

from connectors.k8s.multikueue_copies import adapted_patch, deactivation_patch, emptied_patch
from connectors.k8s.multikueue_worker import Worker
from events import objects as o
from events import schema as ev

ORIGIN = "multikueue"
PREEMPTED = "Preempted to accommodate a workload"


def _job_copy(rv: str, *, suspend: bool, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "a", "namespace": "default", "uid": "j1", "resourceVersion": rv,
                         "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                    "kueue.x-k8s.io/multikueue-origin": ORIGIN}},
            "spec": {"suspend": suspend}, "status": status}


def _workload_copy(rv: str, *conditions: tuple[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "job-a", "namespace": "default", "uid": "c1", "resourceVersion": rv,
                         "generation": 1},
            "status": {"conditions": [{"type": t, "status": s, "reason": t, "message": "",
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"} for t, s in conditions]}}


class Worker1(WorkloadCopyApi):
    """worker1's apiserver: status patches of the Workload copy applied and recorded; its Job copy read; deletions
    and creations recorded."""

    SUBRESOURCE = "status"

    def __init__(self, workload: dict[str, Any], job: dict[str, Any]) -> None:
        super().__init__(workload)
        self.job = job
        self.deleted: list[str] = []
        self.created: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.job)

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        self.created.append(f"{resource.kind}:{namespace}/{body['metadata']['name']}")
        return msgspec.json.encode(body)

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"


class Manager(RecordingManager):
    """The manager's apiserver: its Job as the eviction's stop left it (suspended, ``startTime`` reset, the copy's
    last mirrored ``active`` still shown)."""

    job = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "30"},
           "spec": {"suspend": True}, "status": {"active": 1, "ready": 1}}

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind == "Job":
            return msgspec.json.encode(self.job)
        return await super().get(resource, name, namespace)


def _evicted_on_the_manager(tmp_path: Path):
    """The workload ran on worker1 (its Job started on the manager), then was preempted on the manager: evicted,
    its quota still held."""
    state = _state(tmp_path)
    job = state.jobs["default/a"]
    started = msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, suspend=False),
                                      status=msgspec.structs.replace(job.status, active=1))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key=started.key, obj=started)))
    uid = state.workloads[KEY].uid
    for e in (ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY, cluster="worker1"),
              ev.WorkloadEvicted(time=START, cycle=2, input=0, key=KEY, uid=uid, reason="Preempted", message=PREEMPTED)):
        state.apply(ev.Record(state.offset + 1, e))
    stopped = msgspec.structs.replace(started, spec=msgspec.structs.replace(started.spec, suspend=True))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key=stopped.key, obj=stopped)))
    wl = state.workloads[KEY]
    assert wl.evicted and wl.reserving
    return state


def _connected(state, worker: Worker1):
    manager = Manager(state)
    mk = _connector(state, {"worker1": worker})
    mk.client = manager  # type: ignore[assignment]
    w = mk.workers["worker1"]
    w.workloads[KEY] = worker.workload
    w.owners.setdefault("Job", {})["default/a"] = worker.job
    return mk, manager, w


@pytest.mark.asyncio
async def test_the_admitted_copy_of_a_workload_evicted_on_the_manager_is_deactivated_there_not_deleted(
        tmp_path: Path) -> None:
    worker = Worker1(_workload_copy("10", ("QuotaReserved", "True"), ("Admitted", "True")),
                     _job_copy("5", suspend=False, status={"active": 1, "startTime": "t0"}))
    mk, manager, w = _connected(_evicted_on_the_manager(tmp_path), worker)
    await mk.sync_copies(ORIGIN)
    assert worker.deleted == [] and worker.created == []
    target = {"type": "DeactivationTarget", "status": "True", "reason": "EvictedOnManagerCluster",
              "message": f"Evicted on manager: {PREEMPTED}", "lastTransitionTime": ANY, "observedGeneration": 1}
    assert [p["status"]["conditions"][-1] for p in worker.patches] == [target]
    assert [p["metadata"] for p in worker.patches] == [{"resourceVersion": "10"}], "conditioned on the copy's version"
    assert manager.patches == [], "the copy still runs: Kueue syncs the Job once the copy is evicted"

    # written once: the next pass finds it there
    w.moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert len(worker.patches) == 1 and worker.deleted == []


@pytest.mark.asyncio
async def test_the_stopped_copy_s_status_reaches_the_manager_s_job_and_the_copies_go_once_the_quota_is_released(
        tmp_path: Path) -> None:
    """The worker's Kueue evicted the copy (DeactivatedDueToEvictedOnManagerCluster) and stopped its Job: the copy's
    status, no pod active, replaces the manager Job's (its mirrored ``active`` cleared); the copies stay until the
    manager gives the quota back, then go (the Job's first)."""
    state = _evicted_on_the_manager(tmp_path)
    worker = Worker1(_workload_copy("12", ("QuotaReserved", "False"), ("Admitted", "False"), ("Evicted", "True")),
                     _job_copy("8", suspend=True, status={"conditions": [{"type": "Suspended", "status": "True"}]}))
    mk, manager, w = _connected(state, worker)
    await mk.sync_copies(ORIGIN)
    assert worker.deleted == [] and worker.patches == []
    assert len(manager.patches) == 1
    status = manager.patches[0]["status"]
    assert status["active"] is None and status["conditions"] == [{"type": "Suspended", "status": "True"}]

    quota_released(state, KEY)
    w.moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert worker.deleted == ["Job:default/a", "Workload:default/job-a"]


@pytest.mark.asyncio
async def test_a_manager_job_keeps_its_active_pods_while_its_evicted_copy_still_runs(tmp_path: Path) -> None:
    """Kueue's batch/v1 adapter (``determineStatusUpdate``, deferred): the manager's Job suspended, its copy
    running (evicted there, its Job not stopped yet): the copy's status is not taken, the Job is only shown
    ``Suspended`` True (``MultiKueueAdapter``); its ``active`` stays as last mirrored, so its quota is held
    until the copy, stopped, is mirrored."""
    state = _evicted_on_the_manager(tmp_path)
    worker = Worker1(_workload_copy("12", ("Admitted", "False"), ("Evicted", "True")),
                     _job_copy("8", suspend=False, status={"active": 1, "startTime": "t0"}))
    mk, manager, _ = _connected(state, worker)
    await mk.sync_copies(ORIGIN)
    assert manager.patches == [{"status": {"conditions": [
        {"type": "Suspended", "status": "True", "reason": "MultiKueueAdapter",
         "message": "Set by MultiKueue adapter",
         "lastProbeTime": ANY, "lastTransitionTime": ANY}]}, "metadata": {"resourceVersion": "30"}}]
    assert worker.deleted == []


def test_the_adapted_status_is_written_whatever_the_start_time_and_only_once() -> None:
    assert adapted_patch({"status": {"active": 1, "startTime": "t0"}}) is not None, (
        "not held back by a start time")
    suspended = {"type": "Suspended", "status": "True", "reason": "JobSuspended"}
    assert adapted_patch({"status": {"conditions": [suspended]}}) is None, "shown stopped already"
    turned = adapted_patch({"status": {"conditions": [{**suspended, "status": "False"}]}})
    assert turned is not None and [c["status"] for c in turned["status"]["conditions"]] == ["True"]


def _stored(*conditions: tuple[str, str]) -> o.Workload:
    """The manager's Workload as its apiserver stores it (the connector's mirror of it)."""
    return msgspec.convert({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a", "namespace": "default", "uid": "wl-uid", "resourceVersion": "40"},
        "spec": {"queueName": "lq", "podSets": []},
        "status": {"conditions": [{"type": t, "status": s, "reason": t, "message": "",
                                   "lastTransitionTime": "2024-01-01T00:00:00Z"} for t, s in conditions]}},
        o.Workload)


@pytest.mark.asyncio
async def test_the_copy_is_left_running_until_the_manager_s_stored_workload_shows_the_eviction(
        tmp_path: Path) -> None:
    """Kueue's MultiKueue controller reads the manager's Workload: an eviction whose status write is not in
    yet (and may still be refused, then taken back) deactivates nothing on the worker."""
    worker = Worker1(_workload_copy("10", ("QuotaReserved", "True"), ("Admitted", "True")),
                     _job_copy("5", suspend=False, status={"active": 1, "startTime": "t0"}))
    mk, manager, w = _connected(_evicted_on_the_manager(tmp_path), worker)
    mk.journal.mirror.workloads = {KEY: _stored(("QuotaReserved", "True"), ("Admitted", "True"))}
    await mk.sync_copies(ORIGIN)
    assert worker.patches == [] and worker.deleted == [] and worker.created == []
    # the apiserver shows it evicted: the copy is deactivated on its worker
    mk.journal.mirror.workloads = {
        KEY: _stored(("QuotaReserved", "True"), ("Admitted", "True"), ("Evicted", "True"))}
    w.moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert [p["status"]["conditions"][-1]["type"] for p in worker.patches] == ["DeactivationTarget"]


def test_the_deactivation_message_is_cut_at_32_kib_of_bytes_as_kueue_cuts_a_condition_message() -> None:
    """Kueue's MultiKueue controller passes "Evicted on manager: <message>" through TruncateConditionMessage:
    32 KiB of bytes, the last four " ..."; a message of multi-byte characters is cut by its bytes, not its
    characters (the bytes of the character cut in two each read as U+FFFD, as Go's JSON encoding writes
    them)."""
    message = "Evicted on manager: " + "€" * 20_000  # 20,020 characters, 60,020 bytes
    patch = deactivation_patch(_workload_copy("10", ("Admitted", "True")), message, "2024-01-01T00:00:01Z")
    assert patch is not None
    written = patch["status"]["conditions"][-1]["message"]
    # 20 + 32,742 + 2 bytes, " ..."
    assert written == "Evicted on manager: " + "€" * 10_914 + "\ufffd\ufffd ..."
    # shown so already: nothing to write
    assert deactivation_patch({**_workload_copy("10"), **patch, "metadata": {"generation": 1}}, message,
                              "t") is None


# --- the copies gone on the workers (ro-diff-c H2) -------------------------------------------------------


@pytest.mark.asyncio
async def test_the_stopped_job_copy_is_mirrored_when_the_workload_copy_is_gone_on_its_worker(
        tmp_path: Path) -> None:
    """The Workload copy deleted on a reachable worker (by hand, or by the worker), its Job copy stopped
    there: the Job copy's status still reaches the manager's Job, whose mirrored ``active`` then goes, and the
    quota with it."""
    state = _evicted_on_the_manager(tmp_path)
    stopped = {"conditions": [{"type": "Suspended", "status": "True"}]}
    worker = Worker1(_workload_copy("12", ("Admitted", "False"), ("Evicted", "True")),
                     _job_copy("8", suspend=True, status=stopped))
    mk, manager, w = _connected(state, worker)
    del w.workloads[KEY]  # the copy Workload deleted on the worker (its Job copy stopped there)
    await mk.sync_copies(ORIGIN)
    assert manager.patches, "the stopped copy's status never reaches the manager's Job: its active stays"
    assert manager.patches[0]["status"]["active"] is None
    assert worker.patches == [] and worker.deleted == []


def _with_worker2(mk, *, connected: bool = True, job: dict[str, Any] | None = None) -> None:
    """worker2, the other worker of the check's config, known to the connector: reached or not, showing no
    copy, or ``job`` (a Job copy of the manager's Job ``a``)."""
    client: Any = Worker1({}, job or {})
    w2 = Worker("worker2", b"kubeconfig", client=client, connected=connected)
    if job is not None:
        w2.owners.setdefault("Job", {})["default/a"] = job
    mk.workers["worker2"] = w2


@pytest.mark.asyncio
async def test_the_manager_job_shows_no_pod_once_no_reachable_worker_shows_a_copy_and_the_quota_goes(
        tmp_path: Path) -> None:
    """Both copies deleted on the worker that ran the workload (drift deletion, or by hand) and every worker
    of the check's config reached and showing none: the manager's Job is given the status a copy with no pod
    would have (kueue-es's choice: nothing else would ever clear its mirrored ``active``, and its quota would
    be held for ever), its ``Suspended`` condition as written while a copy runs; written once."""
    state = _evicted_on_the_manager(tmp_path)
    running = _job_copy("8", suspend=False, status={"active": 1})
    worker = Worker1(_workload_copy("12", ("Admitted", "True")), running)
    mk, manager, w = _connected(state, worker)
    _with_worker2(mk)
    del w.workloads[KEY]
    del w.owners["Job"]["default/a"]  # its watch showed both deleted
    await mk.sync_copies(ORIGIN)
    suspended = {"type": "Suspended", "status": "True", "reason": "MultiKueueAdapter",
                 "message": "Set by MultiKueue adapter", "lastProbeTime": ANY, "lastTransitionTime": ANY}
    assert manager.patches == [{"status": {"active": None, "ready": None, "terminating": None,
                                           "conditions": [suspended]}, "metadata": {"resourceVersion": "30"}}]
    assert worker.patches == [] and worker.deleted == [] and worker.created == []

    # the manager's Job shows it: nothing more to write
    manager.job = {**Manager.job, "status": {"conditions": manager.patches[0]["status"]["conditions"]}}
    w.moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert len(manager.patches) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("worker2", ["not reached", "not known", "shows a Job copy"])
async def test_the_manager_job_keeps_its_pods_while_a_worker_may_still_run_them(tmp_path: Path,
                                                                                  worker2: str) -> None:
    """Neither copy shown on the worker that ran it, but another worker of the config not reached (its pods
    may still run there: kueue-es's choice is to hold the quota, as for a lost worker), or showing a copy of
    the manager's Job (an elastic Job's newer slice may run on it): nothing is written to the manager's
    Job."""
    state = _evicted_on_the_manager(tmp_path)
    running = _job_copy("8", suspend=False, status={"active": 1})
    worker = Worker1(_workload_copy("12", ("Admitted", "True")), running)
    mk, manager, w = _connected(state, worker)
    newer = _job_copy("3", suspend=False, status={"active": 1})
    newer["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "job-a-2"  # another slice's
    if worker2 != "not known":
        shown = newer if worker2 == "shows a Job copy" else None
        _with_worker2(mk, connected=worker2 != "not reached", job=shown)
    del w.workloads[KEY]
    del w.owners["Job"]["default/a"]
    await mk.sync_copies(ORIGIN)
    assert manager.patches == []


@pytest.mark.parametrize(("kind", "status", "written"), [
    ("Job", {"active": 2, "ready": 1, "succeeded": 3,
             "conditions": [{"type": "Suspended", "status": "True"}]},
     {"active": None, "ready": None, "terminating": None}),
    ("Job", {"succeeded": 3}, None),
    ("JobSet", {"replicatedJobsStatus": [{"name": "w", "active": 2, "ready": 2, "succeeded": 1},
                                         {"name": "l"}]},
     {"replicatedJobsStatus": [{"name": "w", "active": 0, "ready": 0, "succeeded": 1}, {"name": "l"}]}),
    ("JobSet", {"replicatedJobsStatus": [{"name": "w", "active": 0, "succeeded": 1}]}, None),
    ("MPIJob", {"replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2, "failed": 1}}},
     {"replicaStatuses": {"Launcher": {"active": 0}, "Worker": {"active": 0, "failed": 1}}}),
    ("PyTorchJob", {"replicaStatuses": {"Master": {"succeeded": 1}}}, None),
    ("TrainJob", {"jobsStatus": [{"name": "node", "active": 4, "ready": 4}]},
     {"jobsStatus": [{"name": "node", "active": 0, "ready": 0}]}),
    ("TrainJob", {}, None),
])
def test_the_manager_owner_shown_as_a_copy_with_no_pod_would_be(kind: str, status: dict[str, Any],
                                                                 written: dict[str, Any] | None) -> None:
    """What the manager's owner is given once no worker shows a copy (:func:`emptied_patch`): only its pod
    counts go (a Job gets a ``Suspended`` condition too, unless it shows one True); nothing when none is
    counted."""
    api_version = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "MPIJob": "kubeflow.org/v2beta1",
                   "PyTorchJob": "kubeflow.org/v1", "TrainJob": "trainer.kubeflow.org/v1alpha1"}[kind]
    patch = emptied_patch((api_version, kind), {"status": status})
    assert (patch["status"] if patch is not None else None) == written
