"""The MultiKueue connector's pass over the worker clusters, against fake clients: what it creates and deletes
where, and that one failed write does not hold back the others (Kueue reconciles each workload and worker apart)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import ANY

import msgspec
import pytest
from fixtures import fastyaml
from fixtures.multikueue_states import (
    MK_CONFIG,
    dispatched_state,
    owned_state,
    quota_released,
    with_frameworks,
)

from connectors.k8s.errors import Forbidden, KubeError
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import ADAPTERS
from connectors.k8s.multikueue_observe import OWNER_RETRY_BASE_S
from connectors.k8s.multikueue_worker import Worker, kept
from connectors.k8s.resources import JOBSETS
from events import schema as ev
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import DEFAULT
from kueue_es.statefile import load_state

SCENARIO = Path(__file__).parents[1] / "scheduler" / "scenarios" / "multikueue-dispatch.yaml"
NO_PATH_CHECK = msgspec.structs.replace(DEFAULT, feature_gates={"MultiKueueKubeConfigPathValidation": False})
START = 1_704_067_200_000
KEY = "default/job-a"


def _state(tmp_path: Path):
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    state = load_state(str(path), None, START).state
    for name in ("worker1", "worker2"):
        state.apply(ev.Record(state.offset + 1, ev.MultiKueueClusterObserved(time=START, key=name, connected=True)))
    settle(state, MK_CONFIG, now=START)
    return state


class ManagerClient:
    """The manager's apiserver: answers reads of its Workloads."""

    def __init__(self, state) -> None:
        self.state = state

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace, "labels": {}},
                                    "spec": {"queueName": "lq", "podSets": []}})


class WorkerClient:
    """A worker's apiserver: records the writes; ``refuse`` makes every create fail as a worker may (a namespace
    missing there, a forbidden write)."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.created: list[str] = []

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        if self.refuse:
            raise Forbidden(f'workloads "{body["metadata"]["name"]}" is forbidden', 403)
        self.created.append(f"{resource.kind}:{namespace}/{body['metadata']['name']}")
        return msgspec.json.encode(body)


def _connector(state, workers: dict[str, WorkerClient]) -> MultiKueueConnector:
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(ManagerClient(state), journal, append=None)  # type: ignore[arg-type]
    for name, client in workers.items():
        mk.workers[name] = Worker(name, b"kubeconfig", client=client, connected=True)  # type: ignore[arg-type]
    return mk


def _version(uid: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": rv}}


@pytest.mark.parametrize(("cached", "answer", "watched", "keeps"), [
    (None, _version("u", "7"), "", "answer"),
    (_version("u", "9"), _version("u", "7"), "", "cached"),  # the watch brought a later version before the answer
    (_version("u", "7"), _version("u", "9"), "", "answer"),  # the watch has not brought the write yet
    (_version("u", "9"), _version("u", "9"), "", "answer"),
    (_version("u", "10"), _version("u", "9"), "", "cached"),  # ordered as numbers, not as text
    (_version("old", "9"), _version("u", "7"), "", "answer"),  # another object of that name (deleted since)
    (_version("u", "x9"), _version("u", "7"), "", "answer"),  # not comparable: the answer, as before
    (None, _version("u", "7"), "6", "answer"),  # the watch has not reached the write yet
    (None, _version("u", "7"), "7", "cached"),  # the watch showed it made, then deleted: gone
    (None, _version("u", "7"), "12", "cached"),
    (_version("new", "11"), _version("u", "7"), "12", "cached"),  # deleted, and another made since
    (_version("old", "5"), _version("u", "7"), "6", "answer"),  # the old one's DELETED not shown yet
    (None, _version("u", "7"), "x12", "answer"),  # not comparable: the answer
    (None, _version("u", "x7"), "12", "answer"),
])
def test_a_writes_answer_never_takes_a_workers_object_back_to_an_earlier_version(
        cached: dict[str, Any] | None, answer: dict[str, Any], watched: str, keeps: str) -> None:
    """The manager keeps a worker's object its watch brought later than its own write's answer (read late): the
    watch, past that version, would never bring it forward again; nor is an answer kept that the watch, at version
    ``watched``, went past without the object (it showed it deleted): nothing would take it away again."""
    assert kept(cached, answer, watched) is (cached if keeps == "cached" else answer)


@pytest.mark.asyncio
async def test_a_worker_refusing_a_copy_does_not_keep_the_others_from_theirs(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    refusing, taking = WorkerClient(refuse=True), WorkerClient()
    mk = _connector(state, {"worker1": refusing, "worker2": taking})
    await mk.sync_copies("multikueue")
    assert taking.created == ["Workload:default/job-a"]
    assert mk.stats.errors == 1 and mk.stats.copies_created == 1


class RecordingManager(ManagerClient):
    def __init__(self, state) -> None:
        super().__init__(state)
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        return b"{}"


@pytest.mark.asyncio
async def test_the_manager_job_shows_the_copy_status_as_it_is_not_merged_into_the_last_one(tmp_path: Path) -> None:
    """Kueue's batch/v1 adapter replaces the manager Job's status with the copy's: a count the copy dropped (a Job
    omits ``active`` once no pod runs) is dropped here too, or a finished Job would keep its running pods (which
    the apiserver refuses for a finished Job)."""
    state = _state(tmp_path)
    job = state.jobs["default/a"]
    started = msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, suspend=False))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key=started.key, obj=started)))
    manager = RecordingManager(state)
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    running = {"metadata": {"resourceVersion": "1"}, "status": {"active": 1, "ready": 1, "startTime": "t0"}}
    done = {"metadata": {"resourceVersion": "2"}, "status": {
        "ready": 0, "succeeded": 1, "startTime": "t0", "completionTime": "t1",
        "conditions": [{"type": "Complete", "status": "True"}]}}
    await mk._mirror_status(Worker("worker1", b""), ADAPTERS["batch/v1", "Job"], "default/a", running)
    await mk._mirror_status(Worker("worker1", b""), ADAPTERS["batch/v1", "Job"], "default/a", done)
    assert {k: v for k, v in manager.patches[0]["status"].items() if v is not None} == running["status"]
    status = manager.patches[1]["status"]
    assert status["active"] is None and status["succeeded"] == 1 and status["completionTime"] == "t1"
    assert {k: v for k, v in status.items() if v is not None} == done["status"]


ADAPTED_SUSPENDED = {"type": "Suspended", "status": "True", "reason": "MultiKueueAdapter",
                     "message": "Set by MultiKueue adapter", "lastProbeTime": ANY, "lastTransitionTime": ANY}


class RunningWorker(WorkerClient):
    """A worker that ran the Job's copy to completion: reads of it answer its final status; deletions are
    recorded."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__()
        self.job = job
        self.deleted: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.job)

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"


@pytest.mark.asyncio
async def test_a_workload_finished_on_its_worker_gets_the_job_final_status_before_its_copies_go(
        tmp_path: Path) -> None:
    """Kueue copies the worker Job's status to the manager's before finishing the workload there, and deletes the
    remote objects after: the final status must reach the manager's Job, whatever the watch had shown of it."""
    state = _state(tmp_path)
    job = state.jobs["default/a"]
    started = msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, suspend=False))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key=started.key, obj=started)))
    for e in (ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY, cluster="worker1"),
              ev.RemoteWorkloadFinished(time=START, cycle=2, input=0, key=KEY, cluster="worker1", reason="Succeeded")):
        state.apply(ev.Record(state.offset + 1, e))
    assert state.workloads[KEY].cluster_name == "worker1"
    done = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "9",
                         "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                    "kueue.x-k8s.io/multikueue-origin": "multikueue"}},
            "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}
    worker = RunningWorker(done)
    manager = RecordingManager(state)
    mk = _connector(state, {"worker1": worker})
    mk.client = manager  # type: ignore[assignment]
    running = {**done, "metadata": {**done["metadata"], "resourceVersion": "5"}, "status": {"active": 1}}
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners.setdefault("Job", {})["default/a"] = running  # the watch had not shown the completion yet
    await mk.sync_copies("multikueue")
    assert [p["status"]["succeeded"] for p in manager.patches] == [1]
    assert worker.deleted == ["Job:default/a", "Workload:default/job-a"]

    # a Job of that name this manager did not make is never read for its status
    manager.patches.clear()
    worker.job = {**done, "metadata": {"name": "a", "namespace": "default", "resourceVersion": "11", "labels": {}}}
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].moved.add(KEY)  # as the worker's watch marks it
    await mk.sync_copies("multikueue")
    assert worker.deleted[2:] == ["Workload:default/job-a"]
    assert manager.patches == []


@pytest.mark.asyncio
@pytest.mark.parametrize("copy_state", ["finished", "suspended"])
async def test_a_manager_job_never_started_gets_the_status_of_a_copy_finished_or_suspended(
        tmp_path: Path, copy_state: str) -> None:
    """Kueue's batch/v1 adapter defers the status only while the manager's Job is suspended and the copy runs:
    a copy finished (the workload done on the worker before the manager's Job was started, which it never will
    be now) or suspended too (evicted there) has its status mirrored all the same."""
    state = _state(tmp_path)
    assert state.jobs["default/a"].spec.suspend
    manager = RecordingManager(state)
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    copy = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "9"},
            "spec": {"suspend": copy_state == "suspended"},
            "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
            if copy_state == "finished" else {"conditions": [{"type": "Suspended", "status": "True"}]}}
    await mk._mirror_status(Worker("worker1", b""), ADAPTERS["batch/v1", "Job"], "default/a", copy)
    assert [{k: v for k, v in p["status"].items() if v is not None} for p in manager.patches] == [copy["status"]]
    running = {**copy, "metadata": {**copy["metadata"], "resourceVersion": "10"}, "spec": {"suspend": False},
               "status": {"active": 1}}
    manager.patches.clear()
    await mk._mirror_status(Worker("worker1", b""), ADAPTERS["batch/v1", "Job"], "default/a", running)
    assert [p["status"] for p in manager.patches] == [{"conditions": [ADAPTED_SUSPENDED]}], (
        "a copy running while the manager's Job is suspended is not mirrored yet: the Job, never started, is only "
        "shown suspended")


@pytest.mark.asyncio
async def test_a_copy_being_deleted_is_not_reported_again_for_the_evicted_workload(tmp_path: Path) -> None:
    """The eviction made the log forget the copies; the one still on the worker until this pass deletes it must
    not be reported as the workload's again (its next reservation would take it for a new admission)."""
    state = _state(tmp_path)
    wl = state.workloads[KEY]
    state.apply(ev.Record(state.offset + 1, ev.WorkloadEvicted(time=START, cycle=9, input=0, key=KEY, uid=wl.uid,
                                                               reason="AdmissionCheck", message="evicted")))
    appended: list[ev.AnyEvent] = []

    async def append(events: list[ev.AnyEvent]) -> None:
        appended.extend(events)

    mk = _connector(state, {"worker1": WorkerClient()})
    mk.append = append
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}, "status": {
        "conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
    await mk._observe()
    assert [e for e in appended if isinstance(e, ev.RemoteWorkloadObserved)] == []


@pytest.mark.asyncio
async def test_a_copy_deleted_on_the_workload_s_worker_is_not_made_there_again(tmp_path: Path) -> None:
    """Someone deleted the copy on the worker that runs the workload: Kueue answers with Retry ("Admitting remote
    no longer exists") and the eviction that follows, making no copy there again (the worker's
    Kueue would start the Job copy left behind on the new one), nor a Job copy for it."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    assert state.workloads[KEY].cluster_name == "worker1"
    worker = WorkerClient()
    mk = _connector(state, {"worker1": worker})
    mk.workers["worker1"].moved.add(KEY)  # the watch showed the copy deleted
    await mk.sync_copies("multikueue")
    assert worker.created == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("reason", "stale"), [("OutOfSync", True), ("OwnerNotFound", True), ("Succeeded", False)])
async def test_a_copy_finished_by_a_sync_failure_is_dropped_and_made_anew_on_a_nominated_worker(
        tmp_path: Path, reason: str, stale: bool) -> None:
    """A copy finished OutOfSync or OwnerNotFound stays finished for ever on its worker: after the Retry and the
    eviction it brings (Kueue #13047, #14997), the requeued workload is nominated there again and that copy, were
    it kept as the new one, would hold it (the check Pending, nothing decided on it: Kueue #14736). It is
    deleted, its Job copy first, and made anew once the worker's watch shows it gone. A copy finished otherwise is
    left (it ends the workload)."""
    state = _state(tmp_path)
    assert state.workloads[KEY].nominated == ("worker1", "worker2") and not state.workloads[KEY].cluster_name
    job = {"metadata": {"name": "a", "namespace": "default", "uid": "job-copy", "resourceVersion": "5",
                        "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                   "kueue.x-k8s.io/multikueue-origin": "multikueue"}}, "status": {}}
    worker = RunningWorker(job)
    mk = _connector(state, {"worker1": worker, "worker2": WorkerClient()})
    w1 = mk.workers["worker1"]
    w1.workloads[KEY] = {
        "metadata": {"name": "job-a", "namespace": "default", "uid": "old-copy", "resourceVersion": "8",
                     "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
                     "ownerReferences": [{"kind": "Job", "name": "a"}]},
        "status": {"conditions": [{"type": "Finished", "status": "True", "reason": reason, "message": "m",
                                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
    w1.owners.setdefault("Job", {})["default/a"] = job
    await mk.sync_copies("multikueue")
    if not stale:
        assert worker.deleted == [] and worker.created == []
        return
    assert worker.deleted == ["Job:default/a", "Workload:default/job-a"] and worker.created == []
    w1.moved.add(KEY)
    await mk.sync_copies("multikueue")  # the watch has not shown it deleted yet: nothing more
    assert worker.deleted == ["Job:default/a", "Workload:default/job-a"] and worker.created == []
    del w1.workloads[KEY]  # the watch shows it deleted
    w1.gone("Workload", KEY, "old-copy")
    w1.moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert worker.created == ["Workload:default/job-a"]


@pytest.mark.asyncio
@pytest.mark.parametrize("manager_side", ["evicted", "deleted"])
async def test_an_owner_copy_whose_workload_copy_is_gone_is_deleted_all_the_same(tmp_path: Path,
                                                                                 manager_side: str) -> None:
    """Kueue deletes the owner's copy first because its Workload copy may be gone already (deleted there, or
    collected): an evicted workload's, or a deleted one's, Job copy left on the worker without its Workload copy
    is deleted all the same (else the worker keeps it, suspended, for ever)."""
    state = _state(tmp_path)
    wl = state.workloads[KEY]
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    if manager_side == "evicted":
        state.apply(ev.Record(state.offset + 1, ev.WorkloadEvicted(
            time=START, cycle=2, input=0, key=KEY, uid=wl.uid, reason="AdmissionCheck", message="evicted")))
        quota_released(state, KEY)
    else:
        state.apply(ev.Record(state.offset + 1, ev.ObjectDeleted(time=START, kind="Workload", key=KEY)))
    left = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                    "kueue.x-k8s.io/multikueue-origin": "multikueue"}}, "status": {}}
    worker = RunningWorker(left)
    mk = _connector(state, {"worker1": worker})
    mk.workers["worker1"].owners.setdefault("Job", {})["default/a"] = left
    await mk.sync_copies("multikueue")
    assert "Job:default/a" in worker.deleted
    assert mk.workers["worker1"].owners["Job"] == {}


def _path_cluster(location: str):
    from events import objects as o

    return o.MultiKueueCluster(metadata=o.ObjectMeta(name="w"), spec=o.MultiKueueClusterSpec(
        cluster_source=o.MultiKueueClusterSource(kube_config=o.MultiKueueKubeConfig(location=location,
                                                                                   location_type="Path"))))


@pytest.mark.asyncio
async def test_a_kubeconfig_path_is_read_only_from_a_regular_file(tmp_path: Path) -> None:
    """With MultiKueueKubeConfigPathValidation off Kueue reads a ``locationType: Path`` kubeconfig with
    ``os.ReadFile``, through links (a Secret mounted as a volume is a link to its data): so does kueue-es, without
    blocking; anything but a regular file is a bad config, never read (a FIFO would stall the whole connector)."""
    import os
    import threading

    state = _state(tmp_path)
    mk = _connector(state, {})
    real = tmp_path / "kubeconfig"
    real.write_bytes(b"apiVersion: v1\n")
    assert await mk._kubeconfig(_path_cluster(str(real)), NO_PATH_CHECK) == (b"apiVersion: v1\n", "", "")
    link = tmp_path / "link"
    link.symlink_to(real)
    assert await mk._kubeconfig(_path_cluster(str(link)), NO_PATH_CHECK) == (b"apiVersion: v1\n", "", "")
    from connectors.k8s.multikueue_kubeconfigs import read_kubeconfig_file

    # a path resolved by the gate's check that is a link when opened was changed since: not followed
    assert read_kubeconfig_file(str(link), resolved=True) == (
        b"", f"open {link}: too many levels of symbolic links")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[tuple[bytes, str]] = []
    reader = threading.Thread(target=lambda: got.append(asyncio.run(mk._kubeconfig(_path_cluster(str(fifo)),
                                                                                   NO_PATH_CHECK))), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # unblock the stalled read before failing
        open(fifo, "wb").close()  # noqa: SIM115 - a writer lets the blocked open return
        reader.join(5)
    assert got and got[0][0] == b"" and "not a regular file" in got[0][1]


@pytest.mark.asyncio
async def test_a_missing_kubeconfig_file_is_reported_in_kueues_words(tmp_path: Path) -> None:
    """Kueue's multikueue_test.go ("... kubeconfig provided by file"): a ``locationType: Path`` kubeconfig that is
    not there is ``BadKubeConfig`` "load client config failed: open <path>: no such file or directory", Go's words
    for the failed open."""
    mk = _connector(_state(tmp_path), {})
    gone = tmp_path / "testing.kubeconfig"
    assert await mk._kubeconfig(_path_cluster(str(gone)), NO_PATH_CHECK) == (
        b"", f"load client config failed: open {gone}: no such file or directory", "BadKubeConfig")


@pytest.mark.asyncio
async def test_a_kubeconfig_path_outside_the_allowed_directory_is_refused_while_its_gate_is_on(
        tmp_path: Path) -> None:
    """MultiKueueKubeConfigPathValidation (beta, on): a ``locationType: Path`` kubeconfig is read only from under
    Kueue's directory for them (``/etc/multikueue/kubeconfigs``), the path cleaned, absolute, its links resolved;
    any other is the cluster's ``BadKubeConfig`` with Kueue's message, never read. Off, any path is read."""
    state = _state(tmp_path)
    mk = _connector(state, {})
    allowed, elsewhere = tmp_path / "kubeconfigs", tmp_path / "elsewhere"
    allowed.mkdir()
    elsewhere.mkdir()
    (allowed / "w1").write_bytes(b"inside\n")
    (elsewhere / "w1").write_bytes(b"outside\n")
    (allowed / "escape").symlink_to(elsewhere / "w1")
    (allowed / "alias").symlink_to(allowed / "w1")
    mk.kubeconfig_dir = str(allowed)

    async def read(location: str, config=DEFAULT) -> tuple[bytes, str, str]:
        return await mk._kubeconfig(_path_cluster(location), config)

    assert await read(str(allowed / "w1")) == (b"inside\n", "", "")
    assert await read(str(allowed / "alias")) == (b"inside\n", "", ""), "a link is resolved, then checked"
    refused = "load client config failed: kubeconfig path is not under the allowed prefix: "
    assert await read(str(elsewhere / "w1")) == (
        b"", f'{refused}"{elsewhere / "w1"}" is not under "{allowed}"', "BadKubeConfig")
    assert await read(str(allowed / "escape")) == (
        b"", f'{refused}"{elsewhere / "w1"}" is not under "{allowed}"', "BadKubeConfig")
    assert await read("kubeconfigs/w1") == (b"", f"{refused}path must be absolute", "BadKubeConfig")
    assert await read("../w1") == (b"", f'{refused}path contains ".."', "BadKubeConfig")
    assert await read("") == (b"", "load client config failed: kubeconfig path must not be empty", "BadKubeConfig")
    assert await read(str(allowed / "gone")) == (
        b"", f"load client config failed: cannot resolve kubeconfig path symlinks: lstat {allowed / 'gone'}: "
             "no such file or directory", "BadKubeConfig")
    mk.kubeconfig_dir = str(tmp_path / "missing")
    assert await read(str(allowed / "w1")) == (
        b"", f'{refused}"{allowed / "w1"}" is not under "{tmp_path / "missing"}"', "BadKubeConfig")
    assert await read(str(elsewhere / "w1"), NO_PATH_CHECK) == (b"outside\n", "", "")


@pytest.mark.asyncio
async def test_a_refused_kubeconfig_path_is_its_worker_s_bad_kube_config(tmp_path: Path) -> None:
    """The refusal is what the cluster's Active condition shows (its reason and message), as Kueue writes it."""
    state = _state(tmp_path)
    mk = _connector(state, {})
    mk.kubeconfig_dir = str(tmp_path / "kubeconfigs")
    state.multikueue_clusters = {"w": _path_cluster(str(tmp_path / "w"))}
    await _synced_workers(mk, DEFAULT)
    w = mk.workers["w"]
    assert not w.connected and w.client is None and w.reason == "BadKubeConfig"
    assert w.message.startswith("load client config failed: kubeconfig path is not under the allowed prefix: ")


@pytest.mark.asyncio
async def test_a_worker_job_this_manager_did_not_make_is_not_deleted_with_the_copy(tmp_path: Path) -> None:
    """Kueue deletes a remote object only once it has checked it carries its origin label: the Job the copy's
    owner reference names may be one of the worker's own."""
    state = _state(tmp_path)
    stranger = {"metadata": {"name": "theirs", "namespace": "default", "labels": {}}, "status": {}}
    worker = RunningWorker(stranger)
    mk = _connector(state, {"worker1": worker})
    mk.workers["worker1"].workloads["default/gone"] = {"metadata": {
        "name": "gone", "namespace": "default", "ownerReferences": [{"kind": "Job", "name": "theirs"}]}}
    await mk.sync_copies("multikueue")
    assert worker.deleted == ["Workload:default/gone"]


def _jobset_state(tmp_path: Path):
    """The dispatch scenario's workload owned by a JobSet (an owner the log does not hold), dispatched to
    worker1 and finished there."""
    state = dispatched_state(tmp_path, "jobset.x-k8s.io/v1alpha2", "JobSet", finished=True)
    assert state.workloads[KEY].owner[1] == "JobSet" and state.workloads[KEY].cluster_name == "worker1"
    return state


class JobSetManager(RecordingManager):
    """The manager's apiserver holding a running JobSet."""

    status: dict[str, Any] = {"restarts": 1, "replicatedJobsStatus": [{"name": "w", "active": 1}],
                              "conditions": [{"type": "StartupPolicyCompleted", "status": "True"}]}

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind != "JobSet":
            return await super().get(resource, name, namespace)
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace}, "status": self.status})


DONE_JOBSET = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "9",
                            "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                       "kueue.x-k8s.io/multikueue-origin": "multikueue"}},
               "status": {"terminalState": "Completed", "conditions": [{"type": "Completed", "status": "True"}]}}


@pytest.mark.asyncio
async def test_the_manager_jobset_status_is_replaced_by_the_copy_s(tmp_path: Path) -> None:
    """Kueue's JobSet adapter sets the manager JobSet's status to the copy's whole: what the manager's has and the
    copy's has not (a replicated Job's active count) is cleared, not merged into the finished status."""
    state = _jobset_state(tmp_path)
    manager = JobSetManager(state)
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    await mk._mirror_status(Worker("worker1", b""), ADAPTERS["jobset.x-k8s.io/v1alpha2", "JobSet"], "default/a", DONE_JOBSET)
    assert manager.patches == [{"status": {"restarts": None, "replicatedJobsStatus": None,
                                           **DONE_JOBSET["status"]}}]


@pytest.mark.asyncio
async def test_a_jobset_finished_on_its_worker_gets_its_final_status_before_its_copies_go(tmp_path: Path) -> None:
    """As for a Job: the worker JobSet's last status, read there and only from this manager's copy, reaches the
    manager's JobSet before the copies are deleted."""
    state = _jobset_state(tmp_path)
    worker = RunningWorker(DONE_JOBSET)
    manager = JobSetManager(state)
    mk = _connector(state, {"worker1": worker})
    mk.client = manager  # type: ignore[assignment]
    running = {**DONE_JOBSET, "metadata": {**DONE_JOBSET["metadata"], "resourceVersion": "5"}, "status": {}}
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners.setdefault("JobSet", {})["default/a"] = running
    await mk.sync_copies("multikueue")
    assert [p["status"]["terminalState"] for p in manager.patches] == ["Completed"]
    assert worker.deleted == ["JobSet:default/a", "Workload:default/job-a"]

    manager.patches.clear()
    worker.job = {**DONE_JOBSET, "metadata": {"name": "a", "namespace": "default", "resourceVersion": "11"}}
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].moved.add(KEY)  # as the worker's watch marks it
    await mk.sync_copies("multikueue")
    assert worker.deleted[2:] == ["Workload:default/job-a"]
    assert manager.patches == []


@pytest.mark.asyncio
async def test_a_worker_jobset_this_manager_did_not_make_is_not_deleted_with_the_copy(tmp_path: Path) -> None:
    state = _state(tmp_path)
    stranger = {"metadata": {"name": "theirs", "namespace": "default", "labels": {}}, "status": {}}
    worker = RunningWorker(stranger)
    mk = _connector(state, {"worker1": worker})
    mk.workers["worker1"].workloads["default/gone"] = {"metadata": {
        "name": "gone", "namespace": "default", "ownerReferences": [{"kind": "JobSet", "name": "theirs"}]}}
    await mk.sync_copies("multikueue")
    assert worker.deleted == ["Workload:default/gone"]


def _kubeconfig(worker: str) -> bytes:
    """A kubeconfig Kueue takes (a server by name, its CA inline, a bearer token), for ``worker``."""
    return fastyaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": worker,
        "clusters": [{"name": worker, "cluster": {"server": f"https://{worker}.example:6443",
                                                  "certificate-authority-data": "Q0E="}}],
        "users": [{"name": worker, "user": {"token": "t"}}],
        "contexts": [{"name": worker, "context": {"cluster": worker, "user": worker}}]}).encode()


def _secret(name: str, kubeconfig: bytes, rv: str = "1") -> dict[str, Any]:
    import base64

    return {"metadata": {"name": name, "namespace": "kueue-system", "resourceVersion": rv},
            "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()}}


class SecretsManager(RecordingManager):
    """The manager's apiserver holding the workers' kubeconfig Secrets: every read of one (a get, or a list by
    name) is counted; a Secret named in ``refuse`` cannot be read (a forbidden read); ``changes`` feeds the
    Secrets' watch."""

    def __init__(self, state, secrets: dict[str, dict[str, Any]], refuse: frozenset[str] = frozenset()) -> None:
        super().__init__(state)
        self.secrets, self.refuse = secrets, refuse
        self.reads: list[str] = []
        self.cut = False
        self.changes: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    def _read(self, name: str) -> dict[str, Any] | None:
        self.reads.append(name)
        if name in self.refuse:
            raise Forbidden(f'secrets "{name}" is forbidden: User "kueue-es" cannot get resource "secrets"', 403)
        return self.secrets.get(name)

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind != "Secret":
            return await super().get(resource, name, namespace)
        secret = self._read(name)
        if secret is None:
            from connectors.k8s.errors import NotFound

            raise NotFound(f'secrets "{name}" not found', 404)
        return msgspec.json.encode(secret)

    async def list(self, resource: Any, *, field_selector: str = "", namespace: str = "", **_: Any) -> Any:
        from connectors.k8s.client import ListMeta, RawList

        secret = self._read(field_selector.removeprefix("metadata.name="))
        return RawList(metadata=ListMeta(resource_version="1"),
                       items=[msgspec.Raw(msgspec.json.encode(secret))] if secret else [])

    async def watch(self, resource: Any, rv: str, *, field_selector: str = "", **_: Any):
        from connectors.k8s.client import WatchEvent

        name = field_selector.removeprefix("metadata.name=")
        if self.cut:
            from connectors.k8s.errors import Unavailable

            raise Unavailable("watch /api/v1/namespaces/kueue-system/secrets: connection reset")
        while True:
            kind, secret = await self.changes.get()
            if secret["metadata"]["name"] != name:
                await self.changes.put((kind, secret))
                await asyncio.sleep(0)
                continue
            yield WatchEvent(type=kind, object=msgspec.Raw(msgspec.json.encode(secret)))


class IdleWorker(WorkerClient):
    """A worker reached, holding none of this origin's copies: its watches open and wait."""

    async def list(self, resource: Any, **_: Any) -> Any:
        from connectors.k8s.client import RawList

        return RawList()

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if on_open is not None:
            on_open()
        await asyncio.Event().wait()
        yield  # pragma: no cover

    async def close(self) -> None:
        return None


def _built_clients(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Worker clients built from any kubeconfig (recorded): an idle worker each."""
    from connectors.k8s import multikueue_kubeconfigs

    built: list[bytes] = []

    async def client_from(kubeconfig: bytes) -> Any:
        built.append(kubeconfig)
        return IdleWorker()

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", client_from)
    return built


async def _passes(mk: MultiKueueConnector, n: int) -> None:
    """``n`` passes, each after the tasks they started ran."""
    for _ in range(n):
        await mk.sync()
        for _ in range(5):
            await asyncio.sleep(0)


async def _synced_workers(mk: MultiKueueConnector, config: Any) -> None:
    """The workers as ``config`` says, once the tasks that started ran (a worker's client is built there)."""
    await mk._sync_workers(config)
    for _ in range(5):
        await asyncio.sleep(0)


async def _close(mk: MultiKueueConnector) -> None:
    """Stop the tasks the passes started (the workers' watches, the Secrets')."""
    for w in mk.workers.values():
        await mk._stop(w)
    for name in sorted(getattr(mk, "_secrets", {})):
        await mk._stop_secret(name)


def _appending(mk: MultiKueueConnector) -> list[ev.AnyEvent]:
    appended: list[ev.AnyEvent] = []

    async def append(events: list[ev.AnyEvent]) -> None:
        appended.extend(events)
        for e in events:
            mk.state.apply(ev.Record(mk.state.offset + 1, e))

    mk.append = append
    return appended


@pytest.mark.asyncio
async def test_a_cluster_profile_reference_is_reported_as_kueue_reports_it_with_its_gate_off(tmp_path: Path) -> None:
    """With MultiKueueClusterProfile (alpha) off, as by default, a cluster naming a ClusterProfile is not reached:
    its reason and message are that gate's, as in Kueue (on: :mod:`tests.k8s.test_clusterprofile_access`)."""
    from events import objects as o

    mk = _connector(_state(tmp_path), {})
    cluster = o.MultiKueueCluster(metadata=o.ObjectMeta(name="w"), spec=o.MultiKueueClusterSpec(
        cluster_source=o.MultiKueueClusterSource(cluster_profile_ref=o.ClusterProfileReference(name="p"))))
    assert await mk._kubeconfig(cluster, DEFAULT) == (
        b"", "load client config failed: MultiKueueClusterProfile feature gate is disabled",
        "MultiKueueClusterProfileFeatureDisabled")


@pytest.mark.asyncio
async def test_a_secret_that_cannot_be_read_is_its_worker_s_bad_config_the_others_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue loads each MultiKueueCluster's client config apart: a Secret read refused (not merely missing) makes
    that cluster's Active condition False with the error and is retried; the other worker connects and gets its
    copies meanwhile."""
    state = _state(tmp_path)
    _built_clients(monkeypatch)
    manager = SecretsManager(state, {"worker2-secret": _secret("worker2-secret", _kubeconfig("w2"))},
                             refuse=frozenset({"worker1-secret"}))
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    mk.retry_s = 3600
    appended = _appending(mk)
    try:
        await _passes(mk, 3)
    finally:
        await _close(mk)
    links = state.cluster_links
    assert links["worker2"].connected and mk.workers["worker2"].connected
    assert not links["worker1"].connected and links["worker1"].reason == "BadKubeConfig"
    assert "forbidden" in links["worker1"].message
    assert [e.key for e in appended if isinstance(e, ev.MultiKueueClusterObserved)] == ["worker1"]
    assert isinstance(mk.workers["worker2"].client, IdleWorker)
    assert mk.workers["worker2"].client.created == ["Workload:default/job-a"]


@pytest.mark.asyncio
async def test_a_missing_secret_is_named_as_kueues_cached_read_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue's multikueue_test.go ("Should properly manage the active condition of AdmissionChecks and
    MultiKueueClusters, kubeconfig provided by secret"): a MultiKueueCluster whose Secret is missing is
    ``BadKubeConfig`` 'load client config failed: Secret "testing-secret" not found', the kind as Kueue's cached
    client names it, not the resource an apiserver read names."""
    state = _state(tmp_path)
    _built_clients(monkeypatch)
    manager = SecretsManager(state, {"worker2-secret": _secret("worker2-secret", _kubeconfig("w2"))})
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    mk.retry_s = 3600
    _appending(mk)
    try:
        await _passes(mk, 3)
    finally:
        await _close(mk)
    link = state.cluster_links["worker1"]
    assert (link.connected, link.reason, link.message) == (
        False, "BadKubeConfig", 'load client config failed: Secret "worker1-secret" not found')
    assert state.cluster_links["worker2"].connected


@pytest.mark.asyncio
async def test_a_kubeconfig_secret_is_read_once_then_again_only_when_it_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue's cluster reconciler reads a worker's Secret when the MultiKueueCluster or the Secret changes (it
    watches Secrets), not whenever anything else moves: passes read nothing new; a changed Secret rebuilds that
    worker's client from the new kubeconfig."""
    state = _state(tmp_path)
    built = _built_clients(monkeypatch)
    manager = SecretsManager(state, {"worker1-secret": _secret("worker1-secret", _kubeconfig("w1")),
                                     "worker2-secret": _secret("worker2-secret", _kubeconfig("w2"))})
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    _appending(mk)
    try:
        await _passes(mk, 4)
        assert sorted(manager.reads) == ["worker1-secret", "worker2-secret"]
        assert sorted(built) == sorted([_kubeconfig("w1"), _kubeconfig("w2")])
        await manager.changes.put(("MODIFIED", _secret("worker1-secret", _kubeconfig("w1-rotated"), rv="2")))
        await _passes(mk, 2)
    finally:
        await _close(mk)
    assert sorted(manager.reads) == ["worker1-secret", "worker2-secret"]
    assert sorted(built) == sorted([_kubeconfig("w1"), _kubeconfig("w1-rotated"), _kubeconfig("w2")])


@pytest.mark.asyncio
async def test_a_workers_client_is_fenced_as_the_managers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that lost its Lease writes to no worker either: each worker's client is built with the manager
    client's fence (``run --kube``'s, the Lease's; :attr:`KubeClient.fence`)."""
    state = _state(tmp_path)
    _built_clients(monkeypatch)
    manager = SecretsManager(state, {"worker1-secret": _secret("worker1-secret", _kubeconfig("w1"))})

    def fence(method: str, path: str) -> None:
        raise AssertionError("not called here")

    manager.fence = fence  # type: ignore[attr-defined]
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    _appending(mk)
    try:
        await _passes(mk, 2)
    finally:
        await _close(mk)
    assert mk.workers["worker1"].client.fence is fence  # type: ignore[union-attr]


class JobSetsLater(IdleWorker):
    """A worker whose JobSet CRD is installed only after the connector connected: JobSets are not served until
    ``served``; then ``events`` feeds their watch."""

    def __init__(self) -> None:
        super().__init__()
        self.served = False
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def list(self, resource: Any, **_: Any) -> Any:
        from connectors.k8s.client import RawList
        from connectors.k8s.errors import NotFound

        if resource.kind == "JobSet" and not self.served:
            raise NotFound("the server could not find the requested resource", 404)
        return RawList()

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        from connectors.k8s.client import WatchEvent

        if on_open is not None:
            on_open()
        if resource.kind != "JobSet":
            await asyncio.Event().wait()
        while True:
            yield WatchEvent(type="MODIFIED", object=msgspec.Raw(msgspec.json.encode(await self.events.get())))


@pytest.mark.asyncio
async def test_a_jobset_crd_installed_on_a_worker_after_connecting_is_watched_without_a_reconnect(
        tmp_path: Path) -> None:
    """Kueue lists a worker's JobSets again on its next reconcile: a CRD installed there after the connector
    connected gets its JobSet copies watched (their status mirrored) on the same connection."""
    state = with_frameworks(_state(tmp_path))  # the JobSet adapter built
    mk = _connector(state, {})
    mk.absent_retry_s = 0.01
    worker = JobSetsLater()
    w = Worker("worker1", b"kubeconfig", client=worker)  # type: ignore[arg-type]
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert w.connected and w.owners["JobSet"] == {}
        worker.served = True
        copy = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "7"},
                "status": {"terminalState": "Completed"}}
        await worker.events.put(copy)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if w.owners["JobSet"]:
                break
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert w.connected
    assert w.owners["JobSet"] == {"default/a": copy}


@pytest.mark.asyncio
async def test_a_log_move_looks_only_at_the_workloads_it_moved(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue reconciles a workload when it or one of its copies changes, not every workload with every worker on
    any change: after a first pass over all of them, a pass looks only at what moved since (in the log, or on a
    worker), counted by the workloads whose workers are worked out."""
    from connectors.k8s import multikueue_copies
    from connectors.k8s.mirror import Mirror
    from events import objects as o

    state = _state(tmp_path)
    for i in range(10):
        other = o.Workload(metadata=o.ObjectMeta(name=f"other-{i}", namespace="default", uid=f"other-{i}"),
                           spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key=other.key, obj=other)))
    mirror = Mirror(state)
    mk = MultiKueueConnector(ManagerClient(state), SimpleNamespace(mirror=mirror), append=None)  # type: ignore[arg-type]
    for name in ("worker1", "worker2"):
        mk.workers[name] = Worker(name, b"kubeconfig", client=WorkerClient(), connected=True)  # type: ignore[arg-type]
    looked_at: list[tuple[str, str]] = []
    real = multikueue_copies.desired_on

    def desired_on(state, wl):
        looked_at.append(wl.key)
        return real(state, wl)

    monkeypatch.setattr(multikueue_copies, "desired_on", desired_on)

    async def a_pass() -> set[str]:
        looked_at.clear()
        await mk.sync_copies("multikueue")  # the copies' part of a pass (its observations look at the same keys)
        return set(looked_at)

    assert len(await a_pass()) == 11, "the first pass looks at every workload"
    assert await a_pass() == set(), "nothing moved"
    wl = state.workloads[KEY]
    mirror.apply_batch([ev.Record(state.offset + 1, ev.RemoteWorkloadObserved(
        time=START, key=KEY, uid=wl.uid, cluster="worker1", conditions=[]))])
    assert await a_pass() == {KEY}
    mk.workers["worker2"].moved.add("default/other-3")  # its copy changed on worker2 (the watch's mark)
    assert await a_pass() == {"default/other-3"}
    assert await a_pass() == set()


@pytest.mark.asyncio
async def test_a_cut_secret_watch_keeps_the_worker_on_the_kubeconfig_it_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue reads a Secret from its informer's cache, which a cut watch does not empty: the worker keeps its
    client while the Secret is read again; it is not a bad config."""
    state = _state(tmp_path)
    built = _built_clients(monkeypatch)
    manager = SecretsManager(state, {"worker1-secret": _secret("worker1-secret", _kubeconfig("w1")),
                                     "worker2-secret": _secret("worker2-secret", _kubeconfig("w2"))})
    manager.cut = True
    mk = _connector(state, {})
    mk.client = manager  # type: ignore[assignment]
    mk.retry_s = 0.001
    _appending(mk)
    try:
        for _ in range(4):
            await mk.sync()
            await asyncio.sleep(0.01)
    finally:
        await _close(mk)
    assert manager.reads.count("worker1-secret") > 1, "read again after the cut"
    assert sorted(built) == sorted([_kubeconfig("w1"), _kubeconfig("w2")])
    assert all(link.connected for link in state.cluster_links.values())


class CuttingWorker(IdleWorker):
    """A worker whose first Workload watch is cut as soon as it opened (the others wait): the watches of each kind
    open at any one time are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.cuts = 1
        self.open: dict[str, int] = {}

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        from connectors.k8s.errors import Unavailable

        if on_open is not None:
            on_open()
        if resource.kind == "Workload" and self.cuts:
            self.cuts -= 1
            raise Unavailable("watch workloads: connection reset")
        self.open[resource.kind] = self.open.get(resource.kind, 0) + 1
        try:
            await asyncio.Event().wait()
        finally:
            self.open[resource.kind] -= 1
        yield  # pragma: no cover


@pytest.mark.asyncio
async def test_a_cut_watch_reconnects_the_worker_without_leaving_the_other_watches_running(tmp_path: Path) -> None:
    """A cut watch loses the worker's connection: its other watches stop with it and are opened again with the new
    listing, one per kind — not left running beside the new ones, one more set for every cut."""
    state = _state(tmp_path)
    worker = CuttingWorker()
    mk = _connector(state, {"worker1": worker})
    mk.retry_s = 0.001
    w = mk.workers["worker1"]
    w.connected = False
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        for _ in range(50):
            await asyncio.sleep(0.002)
            if not worker.cuts and w.connected and worker.open.get("Workload"):
                break
        assert w.connected and not worker.cuts
        assert set(worker.open.values()) == {1}, worker.open
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Clock:
    """The connector's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class OwnersManager:
    """The manager's apiserver holding JobSets handed to MultiKueue; reading one named in ``failing`` fails as the
    apiserver may (a refused read, an internal error)."""

    def __init__(self, failing: dict[str, Exception]) -> None:
        self.failing = failing

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if name in self.failing:
            raise self.failing[name]
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace},
                                    "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [Forbidden('jobsets "a" is forbidden', 403),
                                   KubeError("Internal error occurred", 500)], ids=["forbidden", "internal"])
async def test_an_owner_that_cannot_be_read_holds_back_only_its_own_workload(tmp_path: Path,
                                                                             error: Exception) -> None:
    """Kueue reconciles each workload apart: one JobSet's managedBy failing to be read leaves that workload
    undecided and read again on the next pass; the other workloads' owners are read and observed meanwhile."""
    from events import objects as o

    state = owned_state(tmp_path, JOBSETS.api_version, JOBSETS.kind)
    other = o.Workload(
        metadata=o.ObjectMeta(name="job-b", namespace="default", uid="job-b", owner_references=[o.OwnerReference(
            api_version=JOBSETS.api_version, kind=JOBSETS.kind, name="b", uid="b-uid", controller=True)]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key=other.key, obj=other)))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].reserving and state.workloads["default/job-b"].reserving
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    clock = Clock()
    mk = MultiKueueConnector(OwnersManager({"a": error}), journal, append=None,  # type: ignore[arg-type]
                             clock=clock)
    first = mk._pass_keys().owners
    assert first == [KEY, "default/job-b"]
    observed = await mk._observe_owners(START, first)
    assert [(e.key, e.managed_by) for e in observed] == [("default/job-b", "kueue.x-k8s.io/multikueue")]
    assert mk.stats.errors == 1
    clock.now += OWNER_RETRY_BASE_S
    assert mk._pass_keys().owners == [KEY], "read again once its backoff is over"
    del mk.client.failing["a"]
    assert [e.key for e in await mk._observe_owners(START, [KEY])] == [KEY]


@pytest.mark.asyncio
async def test_a_pod_owner_is_never_read_for_a_managed_by(tmp_path: Path) -> None:
    """Kueue's Pod adapter takes every Pod as MultiKueue's: nothing is read of it, nothing observed, and its
    workload is dispatched without it."""
    from connectors.k8s.errors import NotFound

    state = owned_state(tmp_path, "v1", "Pod")
    settle(state, MK_CONFIG, now=START)
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    manager = OwnersManager({"a": NotFound('pods "a" not found', 404)})
    mk = MultiKueueConnector(manager, journal, append=None, clock=Clock())  # type: ignore[arg-type]
    assert await mk._observe_owners(START, [KEY]) == []
    assert not mk._owners_unread and mk.stats.errors == 0
    assert state.workloads[KEY].nominated


@pytest.mark.asyncio
async def test_an_owner_not_read_is_forgotten_once_its_workload_is_gone(tmp_path: Path) -> None:
    """A workload whose owner could not be read is read again only while it exists: deleted (its JobSet deleted
    first, so never read), nothing of it is kept."""
    from connectors.k8s.errors import NotFound

    state = owned_state(tmp_path, JOBSETS.api_version, JOBSETS.kind)
    settle(state, MK_CONFIG, now=START)
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    clock = Clock()
    mk = MultiKueueConnector(OwnersManager({"a": NotFound('jobsets "a" not found', 404)}), journal,
                             append=None, clock=clock)  # type: ignore[arg-type]
    assert await mk._observe_owners(START, mk._pass_keys().owners) == []
    clock.now += OWNER_RETRY_BASE_S
    assert mk._pass_keys().owners == [KEY]
    state.apply(ev.Record(state.offset + 1, ev.ObjectDeleted(time=START, key=KEY, kind="Workload")))
    assert KEY not in state.workloads
    assert mk._pass_keys().owners == []
    assert not mk._owners_unread


@pytest.mark.asyncio
async def test_an_owner_read_failing_again_and_again_is_retried_after_a_doubling_bounded_backoff(
        tmp_path: Path) -> None:
    """Kueue's reconciler returning the read's error is requeued with controller-runtime's per-item backoff: 5 ms,
    doubled for each failure in a row, at most 1000 s. A pass before the backoff is over does not read the owner
    again; its workload moving in the log reads it at once (an event requeues Kueue's reconciler at once), the
    failures still counted; a read that succeeds forgets them."""
    state = owned_state(tmp_path, JOBSETS.api_version, JOBSETS.kind)
    settle(state, MK_CONFIG, now=START)
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    clock = Clock()
    manager = OwnersManager({"a": KubeError("Internal error occurred", 500)})
    mk = MultiKueueConnector(manager, journal, append=None, clock=clock)  # type: ignore[arg-type]
    waits = []
    for _ in range(22):
        assert await mk._observe_owners(START, mk._pass_keys().owners) == []
        wait = mk._owners_unread[KEY].due - clock.now
        clock.now += wait - 0.001
        assert mk._pass_keys().owners == [], "not read before its backoff is over"
        clock.now += 0.001
        waits.append(round(wait, 3))
    assert waits[:4] == [0.005, 0.01, 0.02, 0.04]
    assert waits[-3:] == [1000.0] * 3 and max(waits) == 1000.0
    assert mk._owners_unread[KEY].failures == 22
    mk._moved.add(KEY)  # its workload moved: read at once
    assert mk._pass_keys().owners == [KEY]
    assert await mk._observe_owners(START, [KEY]) == []
    assert mk._owners_unread[KEY].failures == 23
    del manager.failing["a"]
    mk._moved.add(KEY)
    assert [e.key for e in await mk._observe_owners(START, mk._pass_keys().owners)] == [KEY]
    assert not mk._owners_unread


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kubeconfig files the connector reads from now on, one entry per read."""
    from connectors.k8s import multikueue_kubeconfigs

    reads: list[str] = []
    real = multikueue_kubeconfigs.read_kubeconfig_file

    def read_kubeconfig_file(location: str, resolved: bool = False) -> tuple[bytes, str]:
        reads.append(location)
        return real(location, resolved)

    monkeypatch.setattr(multikueue_kubeconfigs, "read_kubeconfig_file", read_kubeconfig_file)
    return reads


@pytest.mark.asyncio
async def test_a_kubeconfig_file_is_read_again_only_once_it_changed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue watches a ``locationType: Path`` kubeconfig and loads it again when the file is written or replaced:
    a pass finding the file as it was reads nothing and keeps the worker's client; a file rewritten in place (the
    same size) or replaced by a rename gives the worker a client built from what it holds now. A file written
    within the last moments is read on every pass, its content compared (a same-sized write within one tick of
    the filesystem's clock would leave its times as they were)."""
    import os

    from connectors.k8s import multikueue_kubeconfigs

    state = _state(tmp_path)
    built = _built_clients(monkeypatch)
    reads = _counted_reads(monkeypatch)
    path = tmp_path / "w.kubeconfig"

    def write(content: bytes, *, long_ago: bool = True, via_rename: bool = False) -> None:
        target = tmp_path / "next" if via_rename else path
        target.write_bytes(content)
        if long_ago:  # written before the last moments: its version trusted at once, its times its own
            os.utime(target, ns=(START * 10**6, START * 10**6 + len(reads)))
        if via_rename:
            os.replace(target, path)
        mk.settled_ns = 0 if long_ago else multikueue_kubeconfigs.SETTLED_NS

    w1, w2, w3 = (_kubeconfig(w) for w in ("w1", "w2", "w3"))
    mk = _connector(state, {})
    write(w1)
    state.multikueue_clusters = {"w": _path_cluster(str(path))}
    try:
        for _ in range(3):
            await _synced_workers(mk, NO_PATH_CHECK)
        assert (len(reads), built) == (1, [w1]), "read once, not on every pass"
        write(w2)
        for _ in range(2):
            await _synced_workers(mk, NO_PATH_CHECK)
        assert (len(reads), built) == (2, [w1, w2])
        write(w3, via_rename=True)
        for _ in range(2):
            await _synced_workers(mk, NO_PATH_CHECK)
        assert (len(reads), built) == (3, [w1, w2, w3])
        write(w3, long_ago=False)
        for _ in range(2):
            await _synced_workers(mk, NO_PATH_CHECK)
        assert (len(reads), built) == (5, [w1, w2, w3]), "just written: read again, the client kept"
    finally:
        await _close(mk)


@pytest.mark.asyncio
async def test_a_kubeconfig_file_changed_just_now_is_read_again_whatever_its_modification_time_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's modification time may be set back (``cp -p``, ``tar``), its change time not: a file changed in the
    last moments is read on every pass even when its modification time is long past, as a second same-sized copy
    within one tick, its modification time set back alike, would leave its version as it was."""
    import os

    state = _state(tmp_path)
    built = _built_clients(monkeypatch)
    reads = _counted_reads(monkeypatch)
    path = tmp_path / "w.kubeconfig"
    path.write_bytes(_kubeconfig("w1"))
    os.utime(path, ns=(START * 10**6, START * 10**6))
    mk = _connector(state, {})
    state.multikueue_clusters = {"w": _path_cluster(str(path))}
    try:
        for _ in range(2):
            await _synced_workers(mk, NO_PATH_CHECK)
        assert (len(reads), built) == (2, [_kubeconfig("w1")])
    finally:
        await _close(mk)


class SelectingWorker(IdleWorker):
    """An idle worker recording the label selector of every list, and of each watch while it is open."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []
        self.watching: list[str] = []

    async def list(self, resource: Any, *, label_selector: str = "", **_: Any) -> Any:
        self.listed.append(label_selector)
        return await super().list(resource)

    async def watch(self, resource: Any, rv: str, *, label_selector: str = "", on_open: Any = None, **_: Any):
        if on_open is not None:
            on_open()
        self.watching.append(label_selector)
        try:
            await asyncio.Event().wait()
        finally:
            self.watching.remove(label_selector)
        yield  # pragma: no cover


@pytest.mark.asyncio
async def test_a_changed_origin_moves_the_worker_watches_to_its_label(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The Configuration's ``multiKueue.origin`` may change while kueue-es runs (a Configuration recorded anew; Kueue
    reads it when it starts): the workers' watches then follow the new origin's label, every one of the old
    origin's closed, the copies listed anew; the client is kept."""
    from connectors.k8s import multikueue_kubeconfigs

    worker = SelectingWorker()
    clients: list[bytes] = []

    async def client_from(kubeconfig: bytes) -> Any:
        clients.append(kubeconfig)
        return worker

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", client_from)
    state = with_frameworks(_state(tmp_path))  # every built-in adapter's kind watched
    path = tmp_path / "w.kubeconfig"
    path.write_bytes(_kubeconfig("w"))
    state.multikueue_clusters = {"w": _path_cluster(str(path))}
    mk = _connector(state, {})
    east = msgspec.structs.replace(NO_PATH_CHECK, multi_kueue=msgspec.structs.replace(
        NO_PATH_CHECK.multi_kueue, origin="east"))
    kinds = 1 + len(ADAPTERS)

    async def settled() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    try:
        await _synced_workers(mk, NO_PATH_CHECK)
        await settled()
        assert mk.workers["w"].connected
        assert worker.watching == ["kueue.x-k8s.io/multikueue-origin=multikueue"] * kinds
        mk.workers["w"].workloads["default/job-a"] = {"metadata": {"name": "job-a"}}  # a copy of the old origin
        await _synced_workers(mk, east)
        await settled()
        assert worker.watching == ["kueue.x-k8s.io/multikueue-origin=east"] * kinds
        assert worker.listed[-kinds:] == ["kueue.x-k8s.io/multikueue-origin=east"] * kinds
        assert mk.workers["w"].connected and mk.workers["w"].workloads == {}
        assert clients == [_kubeconfig("w")]
    finally:
        await _close(mk)


@pytest.mark.asyncio
@pytest.mark.parametrize(("unsafe", "why"), [
    ((b"certificate-authority-data: Q0E=", b"insecure-skip-tls-verify: true"),
     "insecure TLS verification is not allowed for cluster w"),
    ((b"current-context: w", b"current-context: elsewhere"),
     "invalid configuration: [context was not found for specified context: elsewhere, cluster has no server "
     "defined]"),
], ids=["skips-tls-verification", "current-context-resolves-to-no-cluster"])
async def test_an_insecure_kubeconfig_is_its_worker_s_insecure_kube_config_no_client_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unsafe: tuple[bytes, bytes], why: str) -> None:
    """Kueue checks a kubeconfig before building a client from it (a current context naming no cluster the file
    holds refused by its client library as it builds the client config, in that library's words): an unsafe one
    leaves its worker unconnected, its Active condition's reason ``InsecureKubeConfig`` with Kueue's message, no
    client built; the file made safe, the worker connects."""
    state = _state(tmp_path)
    built = _built_clients(monkeypatch)
    path = tmp_path / "w.kubeconfig"
    path.write_bytes(_kubeconfig("w").replace(*unsafe))
    state.multikueue_clusters = {"w": _path_cluster(str(path))}
    mk = _connector(state, {})
    try:
        await _synced_workers(mk, NO_PATH_CHECK)
        w = mk.workers["w"]
        assert (w.connected, w.client, w.reason) == (False, None, "InsecureKubeConfig")
        assert w.message == f"load client config failed: {why}"
        assert built == []
        path.write_bytes(_kubeconfig("w"))
        await _synced_workers(mk, NO_PATH_CHECK)
        assert built == [_kubeconfig("w")] and mk.workers["w"].client is not None
    finally:
        await _close(mk)


@pytest.mark.asyncio
async def test_a_cancellation_while_a_worker_s_watches_stop_is_not_swallowed() -> None:
    """Stopping a worker's watches waits for them to end; the connector's own cancellation (a shutdown) coming
    meanwhile ends the connector, or its task group would wait for it for ever. A cancellation from before (the
    connector stopping every worker as it ends) does not cut that stop short."""
    release = asyncio.Event()

    async def watches() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()  # its connection still being closed

    w = Worker("w", b"")
    w.task = asyncio.create_task(watches())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(MultiKueueConnector._stop_watches(w))
    await asyncio.sleep(0)
    stopping.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await stopping

    async def ending() -> list[bool]:
        """A task cancelled already, stopping two workers in its cleanup."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        stopped = []
        for worker in workers:
            await MultiKueueConnector._stop_watches(worker)
            stopped.append(worker.task is None)
        return stopped

    workers = [Worker(name, b"") for name in ("a", "b")]
    for worker in workers:
        worker.task = asyncio.create_task(asyncio.Event().wait())
    task = asyncio.create_task(ending())
    await asyncio.sleep(0)
    task.cancel()
    assert await task == [True, True]
