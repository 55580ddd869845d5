"""What the MultiKueue connector writes on a worker: the copies of a manager's Workload and Job, and the conditions
of a copy it reads back."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec

from connectors.k8s.multikueue import (
    ADAPTERS,
    adapter_of,
    job_copy,
    jobset_copy,
    owner_copy,
    remote_conditions,
    workload_copy,
)
from connectors.k8s.resources import JOBSETS
from kueue_es.scheduler import multikueue as pure
from kueue_es.scheduler.config import DEFAULT
from projections.workloads import WorkloadInfo

MANAGER_WL = {
    "metadata": {"name": "job-a-1", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                 "labels": {"kueue.x-k8s.io/job-uid": "j"}, "ownerReferences": [{"kind": "Job", "name": "a"}]},
    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
        "metadata": {"labels": {"app": "a", "batch.kubernetes.io/job-name": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}]},
    "status": {"admission": {"clusterQueue": "cq"}},
}
MANAGER_JOB = {
    "metadata": {"name": "a", "namespace": "ns", "uid": "j", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "x"}},
    "spec": {"suspend": False, "managedBy": "kueue.x-k8s.io/multikueue", "selector": {"matchLabels": {"x": "y"}},
             "parallelism": 1, "template": {"metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
                                            "spec": {"nodeSelector": {"added": "at-start"}}}},
    "status": {"active": 1},
}
TTL_GATE = "MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster"


def test_the_workload_copy_is_the_manager_one_with_the_origin_label() -> None:
    c = workload_copy(MANAGER_WL, "mk-origin")
    assert c["metadata"] == {"name": "job-a-1", "namespace": "ns", "annotations": {},
                             "labels": {"kueue.x-k8s.io/job-uid": "j", "kueue.x-k8s.io/multikueue-origin": "mk-origin"}}
    assert c["spec"] == MANAGER_WL["spec"] and "status" not in c


def test_the_job_copy_runs_on_the_prebuilt_workload_as_the_workload_was_made() -> None:
    c = job_copy(MANAGER_JOB, MANAGER_WL, "mk-origin")
    assert c["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "lq",
                                       "kueue.x-k8s.io/multikueue-origin": "mk-origin",
                                       "kueue.x-k8s.io/prebuilt-workload-name": "job-a-1"}
    assert c["metadata"]["annotations"] == {"team": "x"}
    spec = c["spec"]
    assert spec["suspend"] is True and "managedBy" not in spec and "selector" not in spec
    assert spec["template"] == {"metadata": {"labels": {"app": "a"}},
                                "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}
    assert MANAGER_JOB["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # the manager's is left as it is


def test_only_the_conditions_multikueue_reads_are_read() -> None:
    got = remote_conditions({"status": {"conditions": [
        {"type": "PodsReady", "status": "True"},
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Admitted", "status": "True", "reason": "Admitted"}]}})
    assert [(c.type, c.reason) for c in got] == [("Admitted", "Admitted"), ("Finished", "Succeeded")]


MANAGER_JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
    "metadata": {"name": "js", "namespace": "ns", "uid": "s", "resourceVersion": "9",
                 "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "x"}},
    "spec": {"suspend": False, "managedBy": "kueue.x-k8s.io/multikueue",
             "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {"template": {}}}}]},
    "status": {"conditions": [{"type": "Completed", "status": "True"}]},
}


def test_the_jobset_copy_is_the_manager_one_for_the_worker_jobset_controller() -> None:
    """Kueue's JobSet adapter: metadata and spec as the manager's, Kueue's two labels added, managedBy dropped."""
    c = jobset_copy(MANAGER_JOBSET, MANAGER_WL, "mk-origin")
    assert (c["apiVersion"], c["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert c["metadata"] == {"name": "js", "namespace": "ns", "annotations": {"team": "x"},
                             "labels": {"kueue.x-k8s.io/queue-name": "lq",
                                        "kueue.x-k8s.io/multikueue-origin": "mk-origin",
                                        "kueue.x-k8s.io/prebuilt-workload-name": "job-a-1"}}
    assert c["spec"] == {"suspend": False, "replicatedJobs": MANAGER_JOBSET["spec"]["replicatedJobs"]}
    assert "status" not in c and MANAGER_JOBSET["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"


def test_an_adapter_is_chosen_by_the_owner_kind_alike_on_both_sides() -> None:
    def wl(*owner: str) -> WorkloadInfo:
        return SimpleNamespace(owner=owner)  # type: ignore[return-value]  # adapter_of reads the owner only

    assert adapter_of(wl("jobset.x-k8s.io/v1alpha2", "JobSet", "js")).resource is JOBSETS
    assert adapter_of(wl("batch/v1", "Job", "a")).make_copy is job_copy
    assert adapter_of(wl("kubeflow.org/v1", "MXJob", "m")) is None and adapter_of(wl()) is None
    assert sorted(ADAPTERS) == sorted(pure.ADAPTERS)


def test_the_job_copy_drops_ttl_seconds_after_finished_while_its_gate_is_on() -> None:
    """MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster (beta, on): the worker's copy of a Job has
    no ``spec.ttlSecondsAfterFinished``, so the worker's TTL controller cannot delete the finished copy (which
    MultiKueue would take for lost and dispatch again); off, it is copied as the rest of the spec. The manager's
    Job keeps it either way."""
    job_adapter = ADAPTERS[("batch/v1", "Job")]
    manager_job = {**MANAGER_JOB, "spec": {**MANAGER_JOB["spec"], "ttlSecondsAfterFinished": 30}}
    on = owner_copy(job_adapter, manager_job, MANAGER_WL, "mk-origin", DEFAULT)
    assert "ttlSecondsAfterFinished" not in on["spec"] and on["spec"]["parallelism"] == 1
    off_config = msgspec.structs.replace(DEFAULT, feature_gates={TTL_GATE: False})
    off = owner_copy(job_adapter, manager_job, MANAGER_WL, "mk-origin", off_config)
    assert off["spec"]["ttlSecondsAfterFinished"] == 30
    assert manager_job["spec"]["ttlSecondsAfterFinished"] == 30


def test_only_the_batch_job_copy_is_cleared_of_its_ttl() -> None:
    """The gate is the batch/v1 Job adapter's alone: another kind's copy is its adapter's copy whatever it says."""
    jobset_adapter = ADAPTERS[(JOBSETS.api_version, JOBSETS.kind)]
    manager_jobset = {**MANAGER_JOBSET, "spec": {**MANAGER_JOBSET["spec"], "ttlSecondsAfterFinished": 5}}
    assert owner_copy(jobset_adapter, manager_jobset, MANAGER_WL, "mk-origin", DEFAULT) == \
        jobset_copy(manager_jobset, MANAGER_WL, "mk-origin")
