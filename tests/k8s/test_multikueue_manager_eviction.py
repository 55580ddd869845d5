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

from connectors.k8s.multikueue_copies import adapted_patch, deactivation_patch
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
    """Kueue's batch/v1 adapter (``determineStatusUpdate``, deferred): the manager's Job suspended, its copy running
    (evicted there, its Job not stopped yet): the copy's status is not taken, the Job is only shown ``Suspended``
    True (``MultiKueueAdapter``); its ``active`` stays as last mirrored, so its quota is held until the copy,
    stopped, is mirrored."""
    state = _evicted_on_the_manager(tmp_path)
    worker = Worker1(_workload_copy("12", ("Admitted", "False"), ("Evicted", "True")),
                     _job_copy("8", suspend=False, status={"active": 1, "startTime": "t0"}))
    mk, manager, _ = _connected(state, worker)
    await mk.sync_copies(ORIGIN)
    assert manager.patches == [{"status": {"conditions": [
        {"type": "Suspended", "status": "True", "reason": "MultiKueueAdapter", "message": "Set by MultiKueue adapter",
         "lastProbeTime": ANY, "lastTransitionTime": ANY}]}, "metadata": {"resourceVersion": "30"}}]
    assert worker.deleted == []


def test_the_adapted_status_is_written_whatever_the_start_time_and_only_once() -> None:
    assert adapted_patch({"status": {"active": 1, "startTime": "t0"}}) is not None, "not held back by a start time"
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
