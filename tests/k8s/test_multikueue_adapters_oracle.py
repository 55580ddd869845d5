"""Kueue's MultiKueue adapter tests as the oracle (``pkg/controller/jobs/**/*_multikueue_adapter_test.go`` and the
adapters they exercise): what the manager's owner is written when its copy's status is deferred (the batch/v1
adapter's ``determineStatusUpdate``), whether a Job's copy is settled enough to be mirrored to a suspended
manager Job, and what a Ray owner is written once its copy was deleted (Kueue's ``WithMarkInactiveOnDelete``).
Each case names the Kueue test or function it follows."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import ANY

import msgspec
import pytest
from fixtures.multikueue_states import KEY, WorkerApi, dispatched_state

from connectors.k8s.json_patch import merge_patched
from connectors.k8s.multikueue_adapters import ADAPTERS
from connectors.k8s.multikueue_copies import _settled, adapted_patch
from connectors.k8s.resources import APPWRAPPERS, RAYCLUSTERS, RAYJOBS, RAYSERVICES, TRAINJOBS

ADAPTED = {"type": "Suspended", "status": "True", "reason": "MultiKueueAdapter",
           "message": "Set by MultiKueue adapter", "lastProbeTime": ANY, "lastTransitionTime": ANY}
"""The condition Kueue's batch/v1 adapter writes on a suspended manager Job whose copy runs
(``job_multikueue_adapter.go`` ``determineStatusUpdate``, the branch for Kubernetes 1.36's suspend validation)."""


# --- job_multikueue_adapter.go determineStatusUpdate: the deferred branch ----------------------------------------

@pytest.mark.parametrize(("local", "want"), [
    pytest.param({}, {"conditions": [ADAPTED]},
                 id="Test_multiKueueAdapter_SyncJob_DeferredWhenLocalSuspended: never started, condition added"),
    pytest.param({"active": 2, "ready": 2}, {"conditions": [ADAPTED]},
                 id="deferred: the manager Job's active pods are not touched (status.Active is not propagated)"),
    pytest.param({"startTime": "t0", "active": 1}, {"conditions": [ADAPTED]},
                 id="deferred: a start time shown does not keep the condition from being set"),
    pytest.param({"conditions": [{"type": "Suspended", "status": "False", "reason": "JobResumed"}]},
                 {"conditions": [ADAPTED]}, id="setJobStatusCondition: a False Suspended condition is replaced"),
    pytest.param({"conditions": [{"type": "Complete", "status": "False"}]},
                 {"conditions": [{"type": "Complete", "status": "False"}, ADAPTED]},
                 id="setJobStatusCondition: appended after the conditions of other types"),
    pytest.param({"conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}, None,
                 id="isJobStatusConditionTrue: shown suspended already, nothing written"),
])
def test_a_suspended_manager_job_whose_copy_runs_gets_only_the_suspended_condition(
        local: dict[str, Any], want: dict[str, Any] | None) -> None:
    patch = adapted_patch({"status": local})
    assert (None if patch is None else patch["status"]) == want


# --- job_multikueue_adapter.go determineStatusUpdate: the branches that mirror the copy's status ---------------

@pytest.mark.parametrize(("copy", "settled"), [
    pytest.param({"spec": {"suspend": True}, "status": {"active": 2}}, True,
                 id="sync intermediate status from remote suspended job"),
    pytest.param({"spec": {"suspend": False}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}},
                 True, id="RemoteJobFinished_Completed"),
    pytest.param({"spec": {"suspend": False}, "status": {"conditions": [{"type": "Failed", "status": "True"}]}},
                 True, id="RemoteJobFinished_Failed"),
    pytest.param({"spec": {"suspend": False}, "status": {"active": 1}}, False,
                 id="DeferredWhenLocalSuspended: the copy runs"),
    pytest.param({"spec": {"suspend": False},
                  "status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}}, False,
                 id="Job.Finished reads Complete and Failed only"),
    pytest.param({"spec": {"suspend": False}, "status": {"conditions": [{"type": "Complete", "status": "False"}]}},
                 False, id="Job.Finished wants the condition True"),
])
def test_a_jobs_copy_is_mirrored_to_a_suspended_manager_job_once_suspended_or_finished(
        copy: dict[str, Any], settled: bool) -> None:
    assert _settled(copy) is settled


# --- ray: WithMarkInactiveOnDelete (Kueue #15380) ------------------------------------------------------------

NOW = "2026-01-01T00:00:00Z"
RAYSERVICE_GONE = {"type": "Ready", "status": "False", "reason": "RemoteDeleted",
                   "message": "The remote RayService was deleted by MultiKueue", "lastTransitionTime": NOW}


@pytest.mark.parametrize(("r", "status", "want"), [
    pytest.param(RAYJOBS, {"jobDeploymentStatus": "Running"}, {"jobDeploymentStatus": "Suspended"},
                 id="rayjob markInactive: a running status becomes Suspended"),
    pytest.param(RAYJOBS, {}, {"jobDeploymentStatus": "Suspended"}, id="rayjob markInactive: New becomes Suspended"),
    *(pytest.param(RAYJOBS, {"jobDeploymentStatus": s}, None, id=f"rayjob markInactive: terminal {s} kept")
      for s in ("Complete", "Failed", "ValidationFailed")),
    pytest.param(RAYSERVICES, {"conditions": [{"type": "Ready", "status": "True", "reason": "R",
                                               "lastTransitionTime": "t0"}]},
                 {"conditions": [RAYSERVICE_GONE]}, id="rayservice markInactive: Ready True turned False"),
    pytest.param(RAYSERVICES, {"conditions": [{"type": "Other", "status": "True"}]},
                 {"conditions": [{"type": "Other", "status": "True"}, RAYSERVICE_GONE]},
                 id="rayservice markInactive: a missing Ready condition added"),
    pytest.param(RAYSERVICES, {"conditions": [{"type": "Ready", "status": "False", "reason": "Mine"}]}, None,
                 id="rayservice markInactive: a Ready False of another reason kept"),
])
def test_a_ray_owner_is_shown_inactive_once_its_copy_is_deleted(r: Any, status: dict[str, Any],
                                                               want: dict[str, Any] | None) -> None:
    adapter = ADAPTERS[r.api_version, r.kind]
    assert adapter.mark_inactive is not None
    patch = adapter.mark_inactive({"status": status}, NOW)
    assert (None if patch is None else patch["status"]) == want


@pytest.mark.parametrize("r", [RAYCLUSTERS, APPWRAPPERS, TRAINJOBS], ids=lambda r: r.kind)
def test_only_the_rayjob_and_rayservice_adapters_mark_their_owner_inactive(r: Any) -> None:
    """Kueue's RayCluster adapter (``raycluster_multikueue_adapter.go``) passes no ``WithMarkInactiveOnDelete``;
    the AppWrapper and TrainJob adapters are not Ray's."""
    assert ADAPTERS[r.api_version, r.kind].mark_inactive is None


class Manager:
    """The manager's apiserver: its Workload and the owner ``owner``, status patches applied and recorded."""

    def __init__(self, owner: dict[str, Any]) -> None:
        self.owner = owner
        self.patches: list[dict[str, Any]] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind == "Workload":
            return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace},
                                        "spec": {"queueName": "lq", "podSets": []}})
        return msgspec.json.encode(self.owner)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        self.owner = merge_patched(self.owner, body)
        return msgspec.json.encode(self.owner)


@pytest.mark.asyncio
async def test_a_rayjob_evicted_while_its_copy_is_deleted_is_shown_suspended_on_the_manager(tmp_path: Path) -> None:
    """ray ``adapter.DeleteRemoteObject``: once the copy this origin made is deleted, the manager's RayJob, whose
    status only ever comes from the copy, is written Suspended (unless terminal), or it would look active for
    ever and its eviction never give the quota back (Kueue #15380)."""
    from types import SimpleNamespace

    from connectors.k8s.multikueue import MultiKueueConnector
    from connectors.k8s.multikueue_worker import Worker

    state = dispatched_state(tmp_path, RAYJOBS.api_version, RAYJOBS.kind)
    copy = {"metadata": {"name": "a", "namespace": "default", "uid": "c", "resourceVersion": "9",
                         "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "job-a",
                                    "kueue.x-k8s.io/multikueue-origin": "multikueue"}},
            "status": {"jobDeploymentStatus": "Running"}}
    manager = Manager({"metadata": {"name": "a", "namespace": "default", "resourceVersion": "4"},
                       "spec": {"suspend": True}, "status": {"jobDeploymentStatus": "Running"}})
    worker = WorkerApi(copy)
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    w = mk.workers["worker1"] = Worker("worker1", b"kubeconfig", client=worker, connected=True)  # type: ignore[arg-type]
    w.owners.setdefault("RayJob", {})["default/a"] = copy
    await mk._delete_copy(w, KEY, "multikueue")
    assert worker.deleted[:1] == ["RayJob:default/a"]
    assert [p["status"] for p in manager.patches] == [{"jobDeploymentStatus": "Suspended"}]
