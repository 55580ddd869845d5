"""MultiKueue for the Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob) and MPIJobs, as
Kueue's ``kubeflowjob_multikueue_adapter.go`` and ``mpijob_multikueue_adapter.go`` run them: the adapter chosen by
the owner's kind on both sides, its ``spec.runPolicy.managedBy`` read by the connector and waited for, the
rejection's wording, the copy made on the worker, and the status mirrored back before the copies go."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import MK_CONFIG, WorkerApi, apply, owned_state

from connectors.k8s.errors import Conflict
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import ADAPTERS, adapter_of, run_policy_copy
from connectors.k8s.multikueue_worker import Worker
from connectors.k8s.resources import KUBEFLOW_JOBS, MPIJOBS
from events import schema as ev
from kueue_es.scheduler import decide, settle
from kueue_es.scheduler import multikueue as pure
from kueue_es.scheduler.multikueue import unmanaged_reason

SCENARIO = Path(__file__).parents[1] / "scheduler" / "scenarios" / "multikueue-dispatch.yaml"
START = 1_704_067_200_000
KEY = "default/job-a"
MK = "kueue.x-k8s.io/multikueue"
KINDS = [("kubeflow.org/v1", k) for k in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")] + [
    ("kubeflow.org/v2beta1", "MPIJob")]


# --- the pure side --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("api_version", "kind"), KINDS)
def test_a_kubeflow_job_waits_for_its_managed_by_then_is_dispatched(tmp_path: Path, api_version: str,
                                                                   kind: str) -> None:
    """Kueue's adapter reads the job's ``spec.runPolicy.managedBy`` first: until the connector observed it nothing
    is decided; handed to MultiKueue, the job is nominated to the workers as a Job is."""
    state = owned_state(tmp_path, api_version, kind)
    assert state.workloads[KEY].owner == (api_version, kind, "a")
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].reserving and not state.workloads[KEY].nominated
    apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by=MK))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].nominated == ("worker1",)
    assert state.workloads[KEY].check_states["mk"].state == "Pending"


@pytest.mark.parametrize(("api_version", "kind", "field"), [
    *((v, k, "spec.managedBy") for v, k in KINDS[:-1]), ("kubeflow.org/v2beta1", "MPIJob", "spec.runPolicy.managedBy")])
def test_a_kubeflow_job_not_handed_to_multikueue_is_rejected_in_kueues_words(tmp_path: Path, api_version: str,
                                                                            kind: str, field: str) -> None:
    """Kueue's Kubeflow adapter names ``spec.managedBy`` in its message (though it reads
    ``spec.runPolicy.managedBy``); its MPIJob adapter names the field it reads."""
    state = owned_state(tmp_path, api_version, kind)
    apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by="kubeflow.org/training-operator"))
    decided = []
    for _ in range(5):
        batch = decide(state, MK_CONFIG, now=START)
        decided += batch
        apply(state, *batch)
    message = f'The owner is not managed by Kueue: Expecting {field} to be "{MK}" not "kubeflow.org/training-operator"'
    assert [(d.state, d.message) for d in decided if isinstance(d, ev.AdmissionCheckUpdated)] == [
        ("Rejected", message)]
    assert unmanaged_reason(state, state.workloads[KEY]) == message
    wl = state.workloads[KEY]
    assert not wl.reserving and wl.active and not wl.nominated, "rejected while pending, not deactivated"


# --- the connector: the adapter, the copy ---------------------------------------------------------------------


@pytest.mark.parametrize(("api_version", "kind"), KINDS)
def test_an_adapter_is_chosen_by_the_kubeflow_kind_on_both_sides(api_version: str, kind: str) -> None:
    adapter = adapter_of(SimpleNamespace(owner=(api_version, kind, "a")), MK_CONFIG)  # type: ignore[arg-type]
    assert adapter is not None and (adapter.resource.api_version, adapter.resource.kind) == (api_version, kind)
    assert adapter.make_copy is run_policy_copy and not adapter.in_log
    assert adapter.managed_by_at == ("spec", "runPolicy", "managedBy")
    assert (api_version, kind) in pure.ADAPTERS
    assert {a.resource for a in ADAPTERS.values()} >= {*KUBEFLOW_JOBS.values(), MPIJOBS}


MANAGER_WL = {"metadata": {"name": "job-a", "namespace": "default"}, "spec": {"queueName": "lq", "podSets": []}}


def _pytorchjob(managed_by: str | None = MK, **status: Any) -> dict[str, Any]:
    run_policy: dict[str, Any] = {"suspend": False}
    if managed_by is not None:
        run_policy["managedBy"] = managed_by
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "a", "namespace": "default", "uid": "p", "resourceVersion": "3",
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "x"}},
        "spec": {"runPolicy": run_policy,
                 "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": []}}}}},
        "status": status,
    }


def test_the_kubeflow_copy_is_the_manager_one_for_the_worker_operator() -> None:
    """Kueue's Kubeflow and MPIJob adapters: metadata and spec as the manager's, Kueue's two labels added,
    ``spec.runPolicy.managedBy`` dropped (the worker's operator runs it), no status."""
    manager = _pytorchjob(conditions=[{"type": "Running", "status": "True"}])
    c = run_policy_copy(manager, MANAGER_WL, "mk-origin")
    assert (c["apiVersion"], c["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert c["metadata"] == {"name": "a", "namespace": "default", "annotations": {"team": "x"},
                             "labels": {"kueue.x-k8s.io/queue-name": "lq",
                                        "kueue.x-k8s.io/multikueue-origin": "mk-origin",
                                        "kueue.x-k8s.io/prebuilt-workload-name": "job-a"}}
    assert c["spec"] == {"runPolicy": {"suspend": False},
                         "pytorchReplicaSpecs": manager["spec"]["pytorchReplicaSpecs"]}
    assert "status" not in c and manager["spec"]["runPolicy"]["managedBy"] == MK  # the manager's left as it is
    mpijob = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m", "namespace": "ns"},
              "spec": {"slotsPerWorker": 1, "runPolicy": {"managedBy": MK, "cleanPodPolicy": "Running"}}}
    assert run_policy_copy(mpijob, MANAGER_WL, "o")["spec"] == {"slotsPerWorker": 1,
                                                              "runPolicy": {"cleanPodPolicy": "Running"}}


# --- the connector: reading, mirroring, deleting --------------------------------------------------------------


class Manager:
    """The manager's apiserver holding PyTorchJob ``default/a`` (as ``job``) and its Workload; records status
    patches."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.patches: list[dict[str, Any]] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.job if resource.kind == "PyTorchJob" else MANAGER_WL)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        return b"{}"


def _connector(state, manager: Manager, workers: dict[str, WorkerApi]) -> MultiKueueConnector:
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    for name, client in workers.items():
        mk.workers[name] = Worker(name, b"kubeconfig", client=client, connected=True)  # type: ignore[arg-type]
    return mk


@pytest.mark.asyncio
@pytest.mark.parametrize("managed_by", [MK, None])
async def test_the_connector_reads_the_run_policy_managed_by(tmp_path: Path, managed_by: str | None) -> None:
    state = owned_state(tmp_path, "kubeflow.org/v1", "PyTorchJob")
    settle(state, MK_CONFIG, now=START)
    mk = _connector(state, Manager(_pytorchjob(managed_by)), {})
    assert [(e.key, e.managed_by) for e in await mk._observe_owners(START, [KEY])] == [(KEY, managed_by or "")]


def _running_on_worker1(tmp_path: Path):
    state = owned_state(tmp_path, "kubeflow.org/v1", "PyTorchJob")
    apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by=MK))
    settle(state, MK_CONFIG, now=START)
    apply(state, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY, cluster="worker1"))
    assert state.workloads[KEY].cluster_name == "worker1"
    return state


@pytest.mark.asyncio
async def test_the_worker_runs_the_copy_and_the_manager_job_shows_its_status_whole(tmp_path: Path) -> None:
    """The copy is created on the workload's worker; then, whenever the copy's status changes, it replaces the
    manager job's (Kueue's Kubeflow adapter copies the status whole): a field only the manager's had is cleared,
    down into the replica statuses (a merge would keep the manager's active count beside the copy's succeeded)."""
    state = _running_on_worker1(tmp_path)
    manager = Manager(_pytorchjob(replicaStatuses={"Master": {"active": 1}}, startTime="t0", lastReconcileTime="t0"))
    worker = WorkerApi()
    mk = _connector(state, manager, {"worker1": worker})
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    await mk.sync_copies("multikueue")
    assert [(c["kind"], c["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"])
            for c in worker.created] == [("PyTorchJob", "job-a")], "named in an annotation (WorkloadIdentifierAnnotations)"
    assert "managedBy" not in worker.created[0]["spec"]["runPolicy"]
    done = {**worker.created[0], "metadata": {**worker.created[0]["metadata"], "resourceVersion": "8"},
            "status": {"startTime": "t0", "conditions": [{"type": "Succeeded", "status": "True"}],
                       "replicaStatuses": {"Master": {"succeeded": 1}}}}
    mk.workers["worker1"].owners["PyTorchJob"]["default/a"] = done
    mk.workers["worker1"].moved.add(KEY)  # as the worker's watch marks it
    await mk.sync_copies("multikueue")
    assert manager.patches[-1] == {"status": {
        "lastReconcileTime": None, "startTime": "t0", "conditions": [{"type": "Succeeded", "status": "True"}],
        "replicaStatuses": {"Master": {"active": None, "succeeded": 1}}}}
    count = len(manager.patches)
    await mk.sync_copies("multikueue")
    assert len(manager.patches) == count  # the copy unchanged: not written again


def _finished_on_worker1(tmp_path: Path, manager: Manager) -> tuple[MultiKueueConnector, WorkerApi]:
    """A PyTorchJob's workload finished on worker1, whose copy succeeded there (the watch has not shown its status
    yet): the connector over it and the worker's apiserver."""
    state = _running_on_worker1(tmp_path)
    apply(state, ev.RemoteWorkloadFinished(time=START, cycle=2, input=0, key=KEY, cluster="worker1",
                                            reason="Succeeded"))
    done = {**_pytorchjob(None, conditions=[{"type": "Succeeded", "status": "True"}]),
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": "9",
                         "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                    "kueue.x-k8s.io/multikueue-origin": "multikueue"}}}
    worker = WorkerApi(done)
    mk = _connector(state, manager, {"worker1": worker})
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners["PyTorchJob"] = {"default/a": {**done, "status": {}}}
    return mk, worker


@pytest.mark.asyncio
async def test_a_kubeflow_job_finished_on_its_worker_gets_its_final_status_before_its_copies_go(
        tmp_path: Path) -> None:
    manager = Manager(_pytorchjob())
    mk, worker = _finished_on_worker1(tmp_path, manager)
    await mk.sync_copies("multikueue")
    assert [p["status"]["conditions"][0]["type"] for p in manager.patches] == ["Succeeded"]
    assert worker.deleted == ["PyTorchJob:default/a", "Workload:default/job-a"]


class ConflictingOnce(Manager):
    """A manager whose first status write of the owner conflicts (someone else wrote it meanwhile)."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(job)
        self.conflicts = 1

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("the object has been modified")
        return await super().patch(resource, name, body, namespace, subresource)


@pytest.mark.asyncio
async def test_the_copies_wait_for_a_final_status_write_that_conflicted(tmp_path: Path) -> None:
    """The owner's last status goes to the manager before its copies are deleted: a write of it that conflicts is
    tried again on the next pass, and only then are the copies deleted (deleting them at once lost that status)."""
    manager = ConflictingOnce(_pytorchjob())
    mk, worker = _finished_on_worker1(tmp_path, manager)
    await mk.sync_copies("multikueue")
    assert (manager.patches, worker.deleted) == ([], [])
    await mk.sync_copies("multikueue")
    assert [p["status"]["conditions"][0]["type"] for p in manager.patches] == ["Succeeded"]
    assert worker.deleted == ["PyTorchJob:default/a", "Workload:default/job-a"]
