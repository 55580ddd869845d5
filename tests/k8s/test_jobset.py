"""Kueue's JobSet integration, the pure part (:mod:`connectors.k8s.jobset`): the Workload a JobSet gets, what
starting and stopping it write, when it is finished, and its reclaimable and ready pods — shapes from Kueue's
``jobset_controller_test.go`` (no cluster needed)."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest

from connectors.k8s import job_selection
from connectors.k8s import jobset as js
from connectors.k8s.job_priority import PriorityClassNotFound, WorkloadPriorityClassNotFound
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, KeysToCopy, load_config
from projections.cluster import ClusterState
from projections.workloads import PodSetInfo, WorkloadInfo

UID = "js-uid"
SPOT = o.Toleration(key="spot", operator="Exists", effect="NoSchedule")


def replicated(name: str, replicas: int, parallelism: int | None = 1, completions: int | None = 1,
               annotations: dict[str, str] | None = None, priority_class: str = "") -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {
        "metadata": {"annotations": annotations} if annotations else {},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                 **({"priorityClassName": priority_class} if priority_class else {})}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    return {"name": name, "replicas": replicas, "template": {"spec": job_spec}}


def raw_jobset(*rjs: dict[str, Any], labels: dict[str, str] | None = None,
               annotations: dict[str, str] | None = None, suspend: bool = True) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq", **(labels or {})},
                         **({"annotations": annotations} if annotations else {})},
            "spec": {"suspend": suspend, "replicatedJobs": list(rjs)}}


def view(raw: dict[str, Any]) -> js.JobSet:
    return msgspec.convert(raw, js.JobSet)


# --- configuration --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("frameworks", "on"), [([], False), (["batch/job"], False),
                                                (["batch/job", "jobset.x-k8s.io/jobset"], True)])
def test_jobsets_are_managed_only_when_the_frameworks_list_them(frameworks: list[str], on: bool) -> None:
    """Kueue's defaulting lists ``batch/job`` alone when none are listed."""
    assert load_config({"integrations": {"frameworks": frameworks}}).manages_jobsets is on
    assert not DEFAULT.manages_jobsets


@pytest.mark.parametrize(("frameworks", "child_managed"), [(["batch/job"], True),
                                                           (["batch/job", "jobset.x-k8s.io/jobset"], False)])
def test_under_manage_jobs_without_queue_name_a_jobsets_jobs_are_left_to_it(frameworks: list[str],
                                                                            child_managed: bool) -> None:
    """Kueue leaves the child of a parent one of its enabled integrations runs to that parent."""
    config = load_config({"manageJobsWithoutQueueName": True, "integrations": {"frameworks": frameworks}})
    owner = ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert job_selection.is_managed({}, owner, {"kubernetes.io/metadata.name": "ns"}, config) is child_managed


# --- the Workload ---------------------------------------------------------------------------------------------


def test_the_workload_name_hashes_kind_group_name_and_uid() -> None:
    digest = hashlib.sha1(f"JobSet\njobset.x-k8s.io\ntrain\n{UID}".encode()).hexdigest()[:5]
    assert js.workload_name("train", UID) == f"jobset-train-{digest}"
    assert js.workload_name("x" * 300, UID, short=True) == f"jobset-{'x' * 50}-" + hashlib.sha1(
        f"JobSet\njobset.x-k8s.io\n{'x' * 300}\n{UID}".encode()).hexdigest()[:5]


def test_one_pod_set_per_replicated_job_of_replicas_times_its_jobs_pods() -> None:
    """Kueue's "no annotations" case: 2 × min(1, 1) and 3 × min(2, 3); parallelism defaults to 1, completions
    to the parallelism."""
    raw = raw_jobset(replicated("job1", 2), replicated("job2", 3, parallelism=2, completions=3),
                     replicated("job3", 2, parallelism=None, completions=None),
                     replicated("job4", 4, parallelism=3, completions=None))
    sets = js.pod_sets(raw, tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("job1", 2), ("job2", 6), ("job3", 2), ("job4", 12)]
    assert sets[0]["template"] == raw["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert all("topologyRequest" not in ps for ps in sets), "none while TopologyAwareScheduling is off"


def test_under_tas_each_pod_set_asks_for_its_templates_topology_ranked_by_job_and_completion_index() -> None:
    raw = raw_jobset(replicated("job1", 2, annotations={"kueue.x-k8s.io/podset-required-topology": "cloud.com/block"}),
                     replicated("job2", 3, parallelism=2, completions=3))
    sets = js.pod_sets(raw, tas=True)
    assert sets[0]["topologyRequest"] == {"required": "cloud.com/block",
                                          "podIndexLabel": "batch.kubernetes.io/job-completion-index",
                                          "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index", "subGroupCount": 2}
    assert sets[1]["topologyRequest"] == {"podIndexLabel": "batch.kubernetes.io/job-completion-index",
                                          "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index", "subGroupCount": 3}


def test_the_workload_is_owned_queued_finalized_and_carries_the_provreq_annotations() -> None:
    """Kueue's "workload is created with podsets and a ProvReq annotation" case."""
    raw = raw_jobset(replicated("replicated-job-1", 1), replicated("replicated-job-2", 2, 2, 2),
                     annotations={"provreq.kueue.x-k8s.io/test-annotation": "test-val",
                                  "invalid-provreq-prefix/test-annotation-2": "test-val-2"})
    body = js.workload_for(ClusterState(), NO_KEYS, raw, "wl")
    meta, spec = body["metadata"], body["spec"]
    assert meta["annotations"] == {"provreq.kueue.x-k8s.io/test-annotation": "test-val"}
    assert meta["ownerReferences"] == [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
                                        "uid": UID, "controller": True, "blockOwnerDeletion": True}]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": UID}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert spec["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in spec["podSets"]] == [("replicated-job-1", 1), ("replicated-job-2", 4)]
    assert "priority" not in spec and "maximumExecutionTimeSeconds" not in spec


def _classes(s: ClusterState) -> ClusterState:
    s.workload_priority_classes["test-wpc"] = o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="test-wpc"),
                                                                       value=100)
    s.priority_classes["test-pc"] = o.PriorityClass(metadata=o.ObjectMeta(name="test-pc"), value=200)
    return s


@pytest.mark.parametrize(("label", "pod_class", "want"), [
    ("test-wpc", "", ("WorkloadPriorityClass", "test-wpc", 100)),
    ("", "test-pc", ("PriorityClass", "test-pc", 200)),
    ("test-wpc", "test-pc", ("WorkloadPriorityClass", "test-wpc", 100)),
])
def test_the_priority_comes_from_the_label_else_the_pods_priority_class(label: str, pod_class: str,
                                                                        want: tuple[str, str, int]) -> None:
    """Kueue's three priority cases: the WorkloadPriorityClass label wins over the pods' PriorityClass."""
    raw = raw_jobset(replicated("a", 1), replicated("b", 1, priority_class=pod_class),
                     labels={"kueue.x-k8s.io/priority-class": label} if label else None)
    spec = js.workload_for(_classes(ClusterState()), NO_KEYS, raw, "wl")["spec"]
    assert (spec["priorityClassRef"]["kind"], spec["priorityClassRef"]["name"], spec["priority"]) == want


def test_a_missing_class_gets_no_workload_a_bad_max_exec_label_no_maximum_execution_time() -> None:
    with pytest.raises(WorkloadPriorityClassNotFound):
        js.workload_for(ClusterState(), NO_KEYS, raw_jobset(replicated("a", 1),
                                                            labels={"kueue.x-k8s.io/priority-class": "nope"}), "wl")
    with pytest.raises(PriorityClassNotFound):
        js.workload_for(ClusterState(), NO_KEYS, raw_jobset(replicated("a", 1, priority_class="nope")), "wl")
    body = js.workload_for(ClusterState(), NO_KEYS, raw_jobset(
        replicated("a", 1), labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"}), "wl")
    assert "maximumExecutionTimeSeconds" not in body["spec"]


def test_the_max_exec_label_and_the_copied_labels_reach_the_workload() -> None:
    raw = raw_jobset(replicated("a", 1), labels={"kueue.x-k8s.io/max-exec-time-seconds": "60", "team": "x"})
    body = js.workload_for(ClusterState(), KeysToCopy(labels=("team",)), raw, "wl")
    assert body["spec"]["maximumExecutionTimeSeconds"] == 60
    assert body["metadata"]["labels"] == {"team": "x", "kueue.x-k8s.io/job-uid": UID}


# --- starting and stopping ------------------------------------------------------------------------------------


def _admitted(*names: str) -> tuple[ClusterState, WorkloadInfo]:
    s = ClusterState()
    s.flavors["on-demand"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="on-demand"), spec=o.ResourceFlavorSpec(
        node_labels={"instance-type": "on-demand"}, tolerations=[SPOT]))
    s.flavors["spot"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="spot"), spec=o.ResourceFlavorSpec(
        node_labels={"instance-type": "spot"}))
    wl = WorkloadInfo(key="ns/wl", uid="u", namespace="ns", name="wl", queue_name="lq", created=0, priority=0,
                      priority_class="", pod_sets=tuple(PodSetInfo(name=n, count=1, min_count=None, requests=())
                                                        for n in names))
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "on-demand" if i == 0 else "spot"}, count=1)
        for i, n in enumerate(names)])
    return s, wl


def _template(patch: dict[str, Any], i: int) -> dict[str, Any]:
    return patch["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]


def test_starting_gives_each_replicated_job_its_flavors_node_labels_and_unsuspends() -> None:
    raw = raw_jobset(replicated("leader", 1), replicated("workers", 2, 2, 2))
    state, wl = _admitted("leader", "workers")
    patch = js.start_patch(raw, js.start_infos(state, wl, view(raw)))
    assert patch["metadata"] == {"resourceVersion": "5"} and patch["spec"]["suspend"] is False
    leader, workers = _template(patch, 0), _template(patch, 1)
    assert leader["spec"]["nodeSelector"] == {"instance-type": "on-demand"}
    assert leader["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    assert workers["spec"]["nodeSelector"] == {"instance-type": "spot"} and "tolerations" not in workers["spec"]
    assert leader["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "leader"
    assert workers["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "workers"
    assert patch["spec"]["replicatedJobs"][1]["replicas"] == 2, "the rest of each replicated Job is kept"
    assert raw["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].get("nodeSelector") is None, \
        "the JobSet read is not changed"


def test_a_replicated_job_without_an_assignment_does_not_start() -> None:
    raw = raw_jobset(replicated("leader", 1), replicated("workers", 2))
    state, wl = _admitted("leader")
    with pytest.raises(js.BadPodSets):
        js.start_infos(state, wl, view(raw))


def test_stopping_suspends_and_restores_each_template_as_the_workload_recorded_it() -> None:
    raw = raw_jobset(replicated("leader", 1), replicated("workers", 2), suspend=False)
    started = js.start_patch(raw, js.start_infos(*_admitted("leader", "workers"), view(raw)))
    running = {**raw, "spec": {**raw["spec"], "suspend": False, "replicatedJobs": started["spec"]["replicatedJobs"]}}
    saved = [o.PodSet(name=ps["name"], count=ps["count"], template=msgspec.convert(ps["template"], o.PodTemplateSpec))
             for ps in js.pod_sets(raw, tas=False)]
    patch = js.stop_patch(running, saved)
    assert patch["spec"]["suspend"] is True and patch["metadata"] == {"resourceVersion": "5"}
    assert patch["spec"]["replicatedJobs"] == raw["spec"]["replicatedJobs"]


# --- status ---------------------------------------------------------------------------------------------------


def _with_status(raw: dict[str, Any], **status: Any) -> js.JobSet:
    return view({**raw, "status": status})


@pytest.mark.parametrize(("conditions", "want"), [
    ([], None),
    ([{"type": "Completed", "status": "False"}], None),
    ([{"type": "Completed", "status": "True", "message": "jobset completed successfully"}],
     ("Succeeded", "jobset completed successfully")),
    ([{"type": "Failed", "status": "True", "message": "jobset failed"}], ("Failed", "jobset failed")),
    ([{"type": "Suspended", "status": "True"}], None),
])
def test_finished_by_its_completed_or_failed_condition(conditions: list[dict[str, str]],
                                                       want: tuple[str, str] | None) -> None:
    assert js.finished(_with_status(raw_jobset(replicated("a", 1)), conditions=conditions)) == want


@pytest.mark.parametrize(("statuses", "want"), [
    (None, ()),
    ([], ()),
    ([{"name": "replicated-job-1", "succeeded": 1}], (("replicated-job-1", 2),)),
    ([{"name": "replicated-job-2", "succeeded": 1}], (("replicated-job-2", 3),)),
    ([{"name": "replicated-job-1", "succeeded": 1}, {"name": "replicated-job-2", "succeeded": 2}],
     (("replicated-job-1", 2), ("replicated-job-2", 6))),
])
def test_reclaimable_pods_are_the_succeeded_jobs_pods(statuses: list[dict[str, Any]] | None,
                                                      want: tuple[tuple[str, int], ...]) -> None:
    """Kueue's TestReclaimablePods cases."""
    raw = raw_jobset(replicated("replicated-job-1", 1, 2, 2), replicated("replicated-job-2", 2, 3, 6))
    jobset = _with_status(raw, replicatedJobsStatus=statuses) if statuses is not None else view(raw)
    assert js.reclaimable_pods(jobset) == want


@pytest.mark.parametrize(("statuses", "want"), [
    ([{"name": "replicated-job-1", "ready": 1, "succeeded": 1}, {"name": "replicated-job-2", "ready": 3}], True),
    ([{"name": "replicated-job-1", "ready": 1}, {"name": "replicated-job-2", "ready": 1, "succeeded": 2}], False),
])
def test_pods_ready_once_every_job_is_ready_or_succeeded(statuses: list[dict[str, Any]], want: bool) -> None:
    """Kueue's TestPodsReady cases."""
    raw = raw_jobset(replicated("replicated-job-1", 2), replicated("replicated-job-2", 3))
    assert js.pods_ready(_with_status(raw, replicatedJobsStatus=statuses)) is want


def test_active_while_some_replicated_job_has_active_pods() -> None:
    raw = raw_jobset(replicated("a", 1))
    assert not js.is_active(_with_status(raw, replicatedJobsStatus=[{"name": "a", "active": 0}]))
    assert js.is_active(_with_status(raw, replicatedJobsStatus=[{"name": "a", "active": 1}]))
