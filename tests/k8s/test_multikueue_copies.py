"""What the MultiKueue connector writes on a worker: the copies of a manager's Workload and Job, and the conditions
of a copy it reads back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import MK_CONFIG

from connectors.k8s import appwrapper, jobset, kubeflow, mpijob, podsetinfo, raycluster, rayjob, rayservice
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.multikueue_adapters import (
    ADAPTERS,
    adapter_of,
    job_copy,
    jobset_copy,
    owner_copy,
    pod_copy,
    pod_status,
    workload_copy,
)
from connectors.k8s.multikueue_worker import remote_conditions
from connectors.k8s.resources import JOBSETS
from events import objects as o
from kueue_es.scheduler import multikueue as pure
from kueue_es.scheduler.config import DEFAULT
from projections.gates import WORKLOAD_IDENTIFIER_ANNOTATIONS
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


GATE = {"name": "kueue.x-k8s.io/admission"}
MANAGER_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "pu", "resourceVersion": "3",
                 "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/managed": "true"},
                 "annotations": {"team": "x"}, "finalizers": ["kueue.x-k8s.io/managed"],
                 "ownerReferences": [{"kind": "ReplicaSet", "name": "r"}]},
    "spec": {"schedulingGates": [GATE], "containers": [{"name": "c", "image": "busybox"}]},
    "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]},
}


def test_the_pod_copy_is_the_manager_pods_metadata_and_spec_on_the_prebuilt_workload() -> None:
    """Kueue's Pod adapter: name, namespace, labels, annotations and spec (its admission gate kept, for the worker's
    Kueue to lift), Kueue's two labels added; no finalizers, owners, status."""
    c = pod_copy(MANAGER_POD, MANAGER_WL, "mk-origin")
    assert c == {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "p", "namespace": "ns", "annotations": {"team": "x"},
                              "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/managed": "true",
                                         "kueue.x-k8s.io/multikueue-origin": "mk-origin",
                                         "kueue.x-k8s.io/prebuilt-workload-name": "job-a-1"}},
                 "spec": MANAGER_POD["spec"]}
    label_form = msgspec.structs.replace(MK_CONFIG, feature_gates={WORKLOAD_IDENTIFIER_ANNOTATIONS: False})
    assert owner_copy(ADAPTERS["v1", "Pod"], MANAGER_POD, MANAGER_WL, "mk-origin", label_form) == c


def test_a_gated_manager_pod_gets_its_copys_status_but_keeps_its_own_pod_scheduled() -> None:
    remote = {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    assert pod_status(MANAGER_POD, remote) == {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}
    assert pod_status(MANAGER_POD, {"phase": "Running"})["conditions"] == MANAGER_POD["status"]["conditions"]
    ungated = {**MANAGER_POD, "spec": {"containers": []}}
    assert pod_status(ungated, remote) == remote
    assert pod_status({**MANAGER_POD, "status": {}}, remote) == remote
    deleting = {**MANAGER_POD, "metadata": {**MANAGER_POD["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert pod_status(deleting, remote) is None
    assert remote["conditions"][1]["reason"] == "Unschedulable"  # the copy's own is left as it is


def test_a_gated_manager_pod_takes_its_copys_pod_scheduled_once_the_copy_was_scheduled() -> None:
    """Kueue #13136 (baseline/e2e_test.go "Should overwrite the manager Pod's SchedulingGated condition once it runs
    on the worker", "Should create a pod on worker if admitted"): once the copy is scheduled on its worker, its
    ``PodScheduled=True`` replaces the manager's ``SchedulingGated``, so a running or finished Pod shows it ran."""
    running = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
    assert pod_status(MANAGER_POD, running) == running
    finished = {"phase": "Succeeded", "conditions": [
        {"type": "Initialized", "status": "True", "reason": "PodCompleted"},
        {"type": "Ready", "status": "False", "reason": "PodCompleted"},
        {"type": "PodScheduled", "status": "True"}]}
    assert pod_status(MANAGER_POD, finished) == finished


def test_a_pods_adapter_reads_no_managed_by_and_is_there_with_the_pod_framework() -> None:
    def wl(*owner: str) -> WorkloadInfo:
        return SimpleNamespace(owner=owner)  # type: ignore[return-value]  # adapter_of reads the owner only

    assert adapter_of(wl("v1", "Pod", "p"), MK_CONFIG) is ADAPTERS["v1", "Pod"]
    assert ADAPTERS["v1", "Pod"].managed_by_at == () and ADAPTERS["v1", "Pod"].resource.field_selector == ""
    assert adapter_of(wl("v1", "Pod", "p"), DEFAULT) is None


def test_an_adapter_is_chosen_by_the_owner_kind_alike_on_both_sides() -> None:
    def wl(*owner: str) -> WorkloadInfo:
        return SimpleNamespace(owner=owner)  # type: ignore[return-value]  # adapter_of reads the owner only

    assert adapter_of(wl("jobset.x-k8s.io/v1alpha2", "JobSet", "js"), MK_CONFIG).resource is JOBSETS
    assert adapter_of(wl("batch/v1", "Job", "a"), MK_CONFIG).make_copy is job_copy
    assert adapter_of(wl("kubeflow.org/v1", "MXJob", "m"), MK_CONFIG) is None and adapter_of(wl(), MK_CONFIG) is None
    assert sorted(ADAPTERS) == sorted(pure.ADAPTERS) == sorted(pure.ADAPTER_FRAMEWORKS)


def test_an_adapter_is_there_only_with_its_framework_enabled() -> None:
    """Kueue builds a MultiKueue adapter only for an enabled integration framework (``integrations.frameworks``):
    by default (batch/job alone) a JobSet has none, and the connector makes no copy of it."""
    def wl(*owner: str) -> WorkloadInfo:
        return SimpleNamespace(owner=owner)  # type: ignore[return-value]  # adapter_of reads the owner only

    assert adapter_of(wl("jobset.x-k8s.io/v1alpha2", "JobSet", "js"), DEFAULT) is None
    assert adapter_of(wl("batch/v1", "Job", "a"), DEFAULT) is ADAPTERS["batch/v1", "Job"]
    only_jobsets = msgspec.structs.replace(DEFAULT, integrations=msgspec.convert(
        {"frameworks": ["jobset.x-k8s.io/jobset"]}, type(MK_CONFIG.integrations)))
    assert adapter_of(wl("jobset.x-k8s.io/v1alpha2", "JobSet", "js"), only_jobsets) is ADAPTERS[
        "jobset.x-k8s.io/v1alpha2", "JobSet"]
    assert adapter_of(wl("batch/v1", "Job", "a"), only_jobsets) is None


def test_a_suspended_job_is_copied_with_its_own_pod_template() -> None:
    """A Job never started may have its pod template's labels, annotations, node selector and gates changed
    (Kubernetes allows it while suspended; Kueue makes no new Workload for those): Kueue copies the Job as it is,
    so the worker runs what the user changed."""
    template = {"metadata": {"labels": {"app": "a", "job-name": "a"}},
                "spec": {"nodeSelector": {"disk": "nvme"}, "containers": [{"name": "c", "image": "busybox"}],
                         "restartPolicy": "Never"}}
    pending = {**MANAGER_JOB, "spec": {**MANAGER_JOB["spec"], "suspend": True, "template": template}}
    assert job_copy(pending, MANAGER_WL, "mk-origin")["spec"]["template"] == {
        "metadata": {"labels": {"app": "a"}}, "spec": template["spec"]}


TTL_ON = msgspec.structs.replace(DEFAULT, feature_gates={TTL_GATE: True})


def test_the_job_copy_drops_ttl_seconds_after_finished_while_its_gate_is_on() -> None:
    """MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster (alpha, off since v0.20): on, the worker's
    copy of a Job has no ``spec.ttlSecondsAfterFinished``, so the worker's TTL controller cannot delete the finished
    copy (which MultiKueue would take for lost and dispatch again); off, as by default, it is copied as the rest of
    the spec. The manager's Job keeps it either way."""
    job_adapter = ADAPTERS[("batch/v1", "Job")]
    manager_job = {**MANAGER_JOB, "spec": {**MANAGER_JOB["spec"], "ttlSecondsAfterFinished": 30}}
    on = owner_copy(job_adapter, manager_job, MANAGER_WL, "mk-origin", TTL_ON)
    assert "ttlSecondsAfterFinished" not in on["spec"] and on["spec"]["parallelism"] == 1
    off = owner_copy(job_adapter, manager_job, MANAGER_WL, "mk-origin", DEFAULT)
    assert off["spec"]["ttlSecondsAfterFinished"] == 30
    assert manager_job["spec"]["ttlSecondsAfterFinished"] == 30


def test_only_the_batch_job_copy_is_cleared_of_its_ttl() -> None:
    """The gate is the batch/v1 Job adapter's alone: another kind's copy keeps whatever its spec says."""
    jobset_adapter = ADAPTERS[(JOBSETS.api_version, JOBSETS.kind)]
    manager_jobset = {**MANAGER_JOBSET, "spec": {**MANAGER_JOBSET["spec"], "ttlSecondsAfterFinished": 5}}
    assert owner_copy(jobset_adapter, manager_jobset, MANAGER_WL, "mk-origin", TTL_ON)["spec"] == {
        "suspend": True, "replicatedJobs": MANAGER_JOBSET["spec"]["replicatedJobs"], "ttlSecondsAfterFinished": 5}


# --- a copy made after the manager's owner was started ----------------------------------------------------------

POD = {"metadata": {"labels": {"app": "a"}},
       "spec": {"nodeSelector": {"disk": "ssd"}, "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}
SUBMITTED = {
    "JobSet": (jobset, {"suspend": True, "replicatedJobs": [
        {"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 1, "template": POD}}}]}),
    "PyTorchJob": (kubeflow.KINDS["PyTorchJob"], {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": POD}, "Worker": {"replicas": 2, "template": POD}}}),
    "MPIJob": (mpijob, {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": POD}, "Worker": {"replicas": 2, "template": POD}}}),
    "RayJob": (rayjob, {"suspend": True, "entrypoint": "python run.py", "rayClusterSpec": {
        "headGroupSpec": {"template": POD}, "workerGroupSpecs": [{"groupName": "G", "replicas": 2, "template": POD}]}}),
    "RayCluster": (raycluster, {"suspend": True, "headGroupSpec": {"template": POD},
                                "workerGroupSpecs": [{"groupName": "G", "replicas": 2, "template": POD}]}),
    "RayService": (rayservice, {"serveConfigV2": "applications: []", "rayClusterConfig": {
        "suspend": True, "headGroupSpec": {"template": POD},
        "workerGroupSpecs": [{"groupName": "G", "replicas": 2, "template": POD}]}}),
    "AppWrapper": (appwrapper, {"suspend": True, "components": [{"template": {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"parallelism": 2, "template": POD}}}]}),
}
STARTED_WITH = podsetinfo.PodSetInfo(node_selector={"cloud/flavor": "spot"}, labels={"kueue.x-k8s.io/podset": "x"},
                                     annotations={"admitted": "yes"}, scheduling_gates=[{"name": "gate"}],
                                     tolerations=[o.Toleration(key="spot", operator="Exists", effect="NoSchedule")])


@pytest.mark.parametrize("kind", sorted(SUBMITTED))
def test_a_copy_made_after_the_manager_owner_started_is_the_owner_as_submitted(kind: str) -> None:
    """Kueue copies the owner while the manager's workload waits on its MultiKueue check, so before the manager's
    integration starts it; a copy made later (the worker reached late) is still made of the owner as it was then:
    suspended, its pod templates without the node selector, tolerations, labels, annotations and scheduling gates
    the manager's admission gave them (the worker's Kueue gives its own), as the batch/v1 Job's copy takes its
    template from the Workload."""
    adapter = next(a for a in ADAPTERS.values() if a.resource.kind == kind)
    module, spec = SUBMITTED[kind]
    submitted = {"apiVersion": adapter.resource.api_version, "kind": kind,
                 "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "4"}, "spec": spec}
    pod_sets = module.pod_sets(submitted, tas=False)
    manager_wl = {"metadata": {"name": "job-a-1", "namespace": "ns"}, "spec": {"podSets": pod_sets}}
    start = module.start_patch({**submitted, "status": {}}, [STARTED_WITH] * len(pod_sets))
    started = {**submitted, "spec": merge_patched(spec, start["spec"])}
    assert "spot" in str(started["spec"])  # the manager's owner runs with its admission's pod-set info
    late = owner_copy(adapter, started, manager_wl, "mk-origin", DEFAULT)
    assert late == owner_copy(adapter, submitted, manager_wl, "mk-origin", DEFAULT)
    assert "spot" not in str(late["spec"]) and "gate" not in str(late["spec"])
    assert late["spec"] == spec  # the user's node selector kept, suspended


@pytest.mark.parametrize("kind", sorted(set(SUBMITTED) - {"AppWrapper"}))
def test_a_copy_of_an_owner_never_started_keeps_what_the_user_changed_in_its_pod_templates(kind: str) -> None:
    """A pending owner's pod-template labels, annotations, node selector and scheduling gates may change after its
    Workload was made (Kueue compares counts, resources and tolerations only, so makes no new Workload): Kueue
    copies the suspended owner as it is, so the worker runs what the user changed; it is not restored from the
    Workload's pod sets. (An AppWrapper's stop leaves its templates alone.)"""
    adapter = next(a for a in ADAPTERS.values() if a.resource.kind == kind)
    module, spec = SUBMITTED[kind]
    submitted = {"apiVersion": adapter.resource.api_version, "kind": kind,
                 "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "4"}, "spec": spec}
    manager_wl = {"metadata": {"name": "job-a-1", "namespace": "ns"},
                  "spec": {"podSets": module.pod_sets(submitted, tas=False)}}
    edited = msgspec.json.decode(msgspec.json.encode(submitted).replace(b'"ssd"', b'"nvme"'))
    label_form = msgspec.structs.replace(DEFAULT, feature_gates={WORKLOAD_IDENTIFIER_ANNOTATIONS: False})
    made = owner_copy(adapter, edited, manager_wl, "mk-origin", label_form)
    assert "nvme" in str(made["spec"]) and "ssd" not in str(made["spec"])
    assert made == adapter.make_copy(edited, manager_wl, "mk-origin")


# --- a copy of a slice made while the manager's owner ran ---------------------------------------------

EARLIER_START = {"labels": {"kueue.x-k8s.io/podset": "main", "app": "a",
                            "kueue.x-k8s.io/cluster-queue-name": "manager-cq",
                            "kueue.x-k8s.io/local-queue-name": "lq"},
                 "annotations": {"kueue.x-k8s.io/workload": "job-train-1", "team": "x",
                                 "kueue.x-k8s.io/workload-slice-name": "job-train-1"}}
SLICE_ANNOTATIONS = {"kueue.x-k8s.io/elastic-job": "true",
                     "kueue.x-k8s.io/workload-slice-name": "job-train-1",
                     "kueue.x-k8s.io/workload-slice-replacement-for": "ns/job-train-1"}


def _carries_no_earlier_start(meta: dict[str, Any]) -> None:
    assert meta.get("labels") == {"app": "a"} and meta.get("annotations") == {"team": "x"}


def test_the_job_copy_of_a_slice_made_while_the_job_ran_carries_no_earlier_start() -> None:
    """A slice made while the manager's elastic Job ran copies into its template what the start on the
    earlier slice wrote (its ``kueue.x-k8s.io/workload``, the manager's queue labels, the topology gate): the
    Job's copy leaves that out, as the stop does, or the worker's start on its own copy would conflict with
    it."""
    started = {"metadata": EARLIER_START, "spec": {"containers": [{"name": "c"}], "schedulingGates": [
        {"name": "kueue.x-k8s.io/topology"}, {"name": "user"}]}}
    manager_job = {"metadata": {"name": "train", "namespace": "ns",
                                "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
                   "spec": {"suspend": False, "parallelism": 6, "template": started}}
    slice2 = {"metadata": {"name": "job-train-2", "namespace": "ns", "annotations": SLICE_ANNOTATIONS},
              "spec": {"podSets": [{"name": "main", "count": 6, "template": started}]}}
    template = job_copy(manager_job, slice2, "origin")["spec"]["template"]
    _carries_no_earlier_start(template["metadata"])
    assert template["spec"] == {"containers": [{"name": "c"}], "schedulingGates": [{"name": "user"}]}
    assert slice2["spec"]["podSets"][0]["template"] is started and "kueue.x-k8s.io/workload" in str(started)
    not_a_slice = {**slice2, "metadata": {"name": "job-train-2", "namespace": "ns"}}
    assert job_copy(manager_job, not_a_slice, "origin")["spec"]["template"]["metadata"] == EARLIER_START


def test_a_ray_copy_of_a_slice_made_while_the_cluster_ran_carries_no_earlier_start() -> None:
    """The same for the kinds copied from the owner stopped as its integration stops it
    (:func:`as_before_start`, a RayCluster here): the slice's pod sets are given back without the earlier
    start."""
    adapter = next(a for a in ADAPTERS.values() if a.resource.kind == "RayCluster")
    _, spec = SUBMITTED["RayCluster"]
    submitted = {"apiVersion": adapter.resource.api_version, "kind": "RayCluster",
                 "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "4",
                              "annotations": {"kueue.x-k8s.io/elastic-job": "true"}}, "spec": spec}
    pod_sets = raycluster.pod_sets(submitted, tas=False)
    for ps in pod_sets:
        ps["template"] = {**ps["template"], "metadata": EARLIER_START}
    manager_wl = {"metadata": {"name": "job-a-2", "namespace": "ns", "annotations": SLICE_ANNOTATIONS},
                  "spec": {"podSets": pod_sets}}
    start = raycluster.start_patch({**submitted, "status": {}}, [STARTED_WITH] * len(pod_sets))
    started = {**submitted, "spec": merge_patched(spec, start["spec"])}
    late = owner_copy(adapter, started, manager_wl, "mk-origin", DEFAULT)
    templates = [late["spec"]["headGroupSpec"]["template"], late["spec"]["workerGroupSpecs"][0]["template"]]
    for template in templates:
        assert "manager-cq" not in str(template) and "job-train-1" not in str(template)
        assert template["metadata"]["labels"] == {"app": "a"}
