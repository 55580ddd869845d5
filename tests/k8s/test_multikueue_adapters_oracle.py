"""Kueue's MultiKueue adapter tests as the oracle (``pkg/controller/jobs/**/*_multikueue_adapter_test.go`` and
the adapters they exercise): what the manager's owner is written when its copy's status is deferred (the
batch/v1 adapter's ``determineStatusUpdate``), whether a Job's copy is settled enough to be mirrored to a
suspended manager Job, and what of an elastic Job is forwarded to its copy
(``needElasticJobSync``/``syncElasticJob``). Each case names the Kueue test or function it follows."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

import pytest

from connectors.k8s.multikueue_copies import _settled, adapted_patch
from connectors.k8s.multikueue_elastic import elastic_patch
from kueue_es.scheduler.config import DEFAULT, load_config
from projections.workloads import ADMITTED, PodSetInfo, WorkloadInfo

ADAPTED = {"type": "Suspended", "status": "True", "reason": "MultiKueueAdapter",
           "message": "Set by MultiKueue adapter", "lastProbeTime": ANY, "lastTransitionTime": ANY}
"""The condition Kueue's batch/v1 adapter writes on a suspended manager Job whose copy runs
(``job_multikueue_adapter.go`` ``determineStatusUpdate``, the branch for Kubernetes 1.36's suspend
validation)."""


# --- job_multikueue_adapter.go determineStatusUpdate: the deferred branch -----------------------------------

@pytest.mark.parametrize(("local", "want"), [
    pytest.param({}, {"conditions": [ADAPTED]},
                 id="Test_multiKueueAdapter_SyncJob_DeferredWhenLocalSuspended: never started, condition "
                    "added"),
    pytest.param({"active": 2, "ready": 2}, {"conditions": [ADAPTED]},
                 id="deferred: the manager Job's active pods are not touched (status.Active is not "
                    "propagated)"),
    pytest.param({"startTime": "t0", "active": 1}, {"conditions": [ADAPTED]},
                 id="deferred: a start time shown does not keep the condition from being set"),
    pytest.param({"conditions": [{"type": "Suspended", "status": "False", "reason": "JobResumed"}]},
                 {"conditions": [ADAPTED]},
                 id="setJobStatusCondition: a False Suspended condition is replaced"),
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


# --- job_multikueue_adapter.go determineStatusUpdate: the branches that mirror the copy's status ------------

@pytest.mark.parametrize(("copy", "settled"), [
    pytest.param({"spec": {"suspend": True}, "status": {"active": 2}}, True,
                 id="sync intermediate status from remote suspended job"),
    pytest.param({"spec": {"suspend": False},
                  "status": {"conditions": [{"type": "Complete", "status": "True"}]}},
                 True, id="RemoteJobFinished_Completed"),
    pytest.param({"spec": {"suspend": False},
                  "status": {"conditions": [{"type": "Failed", "status": "True"}]}},
                 True, id="RemoteJobFinished_Failed"),
    pytest.param({"spec": {"suspend": False}, "status": {"active": 1}}, False,
                 id="DeferredWhenLocalSuspended: the copy runs"),
    pytest.param({"spec": {"suspend": False},
                  "status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}}, False,
                 id="Job.Finished reads Complete and Failed only"),
    pytest.param({"spec": {"suspend": False},
                  "status": {"conditions": [{"type": "Complete", "status": "False"}]}},
                 False, id="Job.Finished wants the condition True"),
])
def test_a_jobs_copy_is_mirrored_to_a_suspended_manager_job_once_suspended_or_finished(
        copy: dict[str, Any], settled: bool) -> None:
    assert _settled(copy) is settled


# --- job_multikueue_adapter.go needElasticJobSync / syncElasticJob (Test_multiKueueAdapter_SyncJob
# ElasticJob_*) ----------------------------------------------------------------------------------------------

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
JOB = ("batch/v1", "Job")


def _job(parallelism: int | None = None, *, prebuilt: str | None = None) -> dict[str, Any]:
    """A Job as the Kueue cases build it (``newJob()``, annotated elastic), with ``parallelism`` and its
    copy's prebuilt Workload label."""
    spec: dict[str, Any] = {} if parallelism is None else {"parallelism": parallelism}
    labels = {} if prebuilt is None else {PREBUILT: prebuilt}
    return {"metadata": {"name": "test", "namespace": "ns", "labels": labels,
                         "annotations": {"kueue.x-k8s.io/elastic-job": "true"}}, "spec": spec}


def _synced(name: str, pods: int) -> WorkloadInfo:
    """The Workload slice being synced, asking for ``pods`` pods of its one pod set."""
    sets = (PodSetInfo(name="main", count=pods, min_count=None, requests=(("cpu", 1000),)),)
    return WorkloadInfo(key=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue_name="lq",
                        created=0, priority=0, priority_class="", pod_sets=sets, phase=ADMITTED, elastic=True)


@pytest.mark.parametrize(("remote", "local", "synced", "want"), [
    pytest.param(_job(prebuilt="test-workload"), _job(), _synced("test-workload", 1), None,
                 id="ElasticJob_RemoteInSync"),
    pytest.param(_job(prebuilt="test-workload"), _job(2), _synced("test-workload", 1), None,
                 id="ElasticJob_LocalIsStale: grown while the old slice is synced, nothing forwarded"),
    pytest.param(_job(), _job(), _synced("test-workload-new", 1),
                 {"metadata": {"annotations": {PREBUILT: "test-workload-new"}}},
                 id="ElasticJob_WorkloadNameOnlyChange_EdgeCase: the name set where the gate (on) puts it"),
])
def test_an_elastic_jobs_copy_takes_the_manager_size_and_slice_name(
        remote: dict[str, Any], local: dict[str, Any], synced: WorkloadInfo,
        want: dict[str, Any] | None) -> None:
    assert elastic_patch(DEFAULT, JOB, remote, local, synced) == want


def test_an_elastic_jobs_copy_out_of_sync_takes_the_manager_parallelism() -> None:
    """ElasticJob_RemoteOutOfSync: the copy's ``parallelism`` becomes the manager's 22. (Kueue then names the
    new slice in an annotation next to the old label; kueue-es rewrites the label, see the report.)"""
    patch = elastic_patch(DEFAULT, JOB, _job(prebuilt="test-workload"), _job(22),
                          _synced("job-test-f53b2", 22))
    assert patch is not None and patch["spec"] == {"parallelism": 22}


def test_nothing_is_forwarded_to_an_elastic_jobs_copy_with_elastic_jobs_off() -> None:
    """needElasticJobSync: ``ElasticJobsViaWorkloadSlices`` off, the size is not synced."""
    off = load_config({"featureGates": {"ElasticJobsViaWorkloadSlices": False}})
    assert elastic_patch(off, JOB, _job(prebuilt="test-workload"), _job(22),
                         _synced("job-test-f53b2", 22)) is None
