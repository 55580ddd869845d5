"""Kueue's Kubeflow training-operator integrations, the pure part (:mod:`connectors.k8s.kubeflow`): which
frameworks turn them on, the Workload a PyTorchJob, TFJob, XGBoostJob, PaddleJob or JAXJob gets (replica types in
Kueue's order, lowercased, counts from replicas, TAS ranked by replica index), its priority class, what starting and
stopping write, when it is finished, active and ready — shapes from Kueue's ``*_controller_test.go`` of
``pkg/controller/jobs/kubeflow/jobs`` (no cluster needed)."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from runpolicyhelp import replica, run_policy

from connectors.k8s import job_selection, podsetinfo
from connectors.k8s import kubeflow as kf
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections.cluster import ClusterState

UID = "kf-uid"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
RANK = {"podIndexLabel": "training.kubeflow.org/replica-index"}
PYTORCH, TF = kf.KINDS["PyTorchJob"], kf.KINDS["TFJob"]


def raw_job(kind: kf.TrainingKind, specs: dict[str, Any], *, suspend: bool | None = True,
            scheduling_priority: str = "") -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": kind.KIND,
            "metadata": {"name": "job", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"runPolicy": run_policy(suspend, scheduling_priority), kind.specs_field: specs}}


def view(kind: kf.TrainingKind, raw: dict[str, Any]) -> Any:
    return msgspec.convert(raw, kind.ITEM)


# --- configuration ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(kf.KINDS))
def test_each_kind_is_managed_only_when_its_framework_is_listed(kind: str) -> None:
    framework = f"kubeflow.org/{kind.lower()}"
    config = load_config({"integrations": {"frameworks": ["batch/job", framework]}})
    assert config.manages_kubeflow(kind) and config.kubeflow_kinds == {kind}
    assert not DEFAULT.manages_kubeflow(kind) and not DEFAULT.kubeflow_kinds
    assert not load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}}).manages_kubeflow(
        kind)


@pytest.mark.parametrize(("frameworks", "child_managed"), [(["batch/job"], True),
                                                           (["batch/job", "kubeflow.org/pytorchjob"], False)])
def test_under_manage_jobs_without_queue_name_a_pytorchjobs_children_are_left_to_it(
        frameworks: list[str], child_managed: bool) -> None:
    """Kueue's ``IsOwnerManagedByKueue``: a kubeflow.org/v1 PyTorchJob is a parent Kueue runs, its integration on."""
    config = load_config({"manageJobsWithoutQueueName": True, "integrations": {"frameworks": frameworks}})
    ns = {"kubernetes.io/metadata.name": "ns"}
    assert job_selection.is_managed({}, ("kubeflow.org/v1", "PyTorchJob"), ns, config) is child_managed
    assert job_selection.is_managed({}, ("kubeflow.org/v1", "TFJob"), ns, config), "another kind's is not"


# --- the Workload -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "prefix"), [("PyTorchJob", "pytorchjob"), ("TFJob", "tfjob"),
                                              ("XGBoostJob", "xgboostjob"), ("PaddleJob", "paddlejob"),
                                              ("JAXJob", "jaxjob")])
def test_the_workload_name_hashes_kind_group_name_and_uid(kind: str, prefix: str) -> None:
    digest = hashlib.sha1(f"{kind}\nkubeflow.org\njob\n{UID}".encode()).hexdigest()[:5]
    assert kf.KINDS[kind].workload_name("job", UID) == f"{prefix}-job-{digest}"


@pytest.mark.parametrize(("kind", "specs", "want"), [
    ("PyTorchJob", {"Worker": replica(3), "Master": replica(None)}, [("master", 1), ("worker", 3)]),
    ("TFJob", {"Evaluator": replica(1), "Worker": replica(4), "PS": replica(2), "Chief": replica(1)},
     [("chief", 1), ("ps", 2), ("worker", 4), ("evaluator", 1)]),
    ("TFJob", {"Worker": replica(2), "Master": replica(1)}, [("master", 1), ("worker", 2)]),
    ("XGBoostJob", {"Worker": replica(2), "Master": replica(1)}, [("master", 1), ("worker", 2)]),
    ("PaddleJob", {"Worker": replica(2), "Master": replica(1)}, [("master", 1), ("worker", 2)]),
    ("JAXJob", {"Worker": replica(2)}, [("worker", 2)]),
])
def test_a_pod_set_per_replica_type_in_kueues_order_lowercased_of_replicas_pods(
        kind: str, specs: dict[str, Any], want: list[tuple[str, int]]) -> None:
    """Kueue's ``OrderedReplicaTypes`` per kind, whatever order the map is written in; replicas default to 1; a
    replica type the kind does not order gets no pod set."""
    training = kf.KINDS[kind]
    raw = raw_job(training, {**specs, "Other": replica(5)})
    sets = training.pod_sets(raw, tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == want
    by_pod_set = {t.lower(): t for t in specs}
    assert all(ps["template"] == specs[by_pod_set[ps["name"]]]["template"] for ps in sets)
    assert all("topologyRequest" not in ps for ps in sets), "none while TopologyAwareScheduling is off"


def test_under_tas_each_pod_set_asks_for_its_templates_topology_ranked_by_replica_index() -> None:
    raw = raw_job(PYTORCH, {"Master": replica(1, {REQUIRED: "cloud.com/block"}), "Worker": replica(3)})
    sets = PYTORCH.pod_sets(raw, tas=True)
    assert [ps["topologyRequest"] for ps in sets] == [{"required": "cloud.com/block", **RANK}, RANK]


def test_the_workload_is_owned_queued_and_finalized() -> None:
    raw = raw_job(TF, {"PS": replica(1), "Worker": replica(2)})
    body = TF.workload_for(ClusterState(), NO_KEYS, raw, "wl")
    meta, spec = body["metadata"], body["spec"]
    assert meta["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "job",
                                        "uid": UID, "controller": True, "blockOwnerDeletion": True}]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": UID}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert spec["queueName"] == "lq" and "priority" not in spec
    assert [(ps["name"], ps["count"]) for ps in spec["podSets"]] == [("ps", 1), ("worker", 2)]


@pytest.mark.parametrize(("scheduling", "master", "worker", "want"), [
    ("", "", "", None),
    ("scheduling-priority", "master-priority", "worker-priority", "scheduling-priority"),
    ("", "master-priority", "worker-priority", "master-priority"),
    ("", "", "worker-priority", "worker-priority"),
])
def test_the_priority_class_is_the_run_policys_then_the_first_replica_types_in_order(
        scheduling: str, master: str, worker: str, want: str | None) -> None:
    """Kueue's ``TestPriorityClass`` cases (PyTorchJob: Master before Worker)."""
    raw = raw_job(PYTORCH, {"Worker": replica(2, priority_class=worker), "Master": replica(1, priority_class=master)},
                  scheduling_priority=scheduling)
    assert PYTORCH.priority_class(view(PYTORCH, raw)) == want


def test_suspended_is_the_run_policys_suspend_absent_meaning_running() -> None:
    specs = {"Worker": replica(1)}
    assert view(PYTORCH, raw_job(PYTORCH, specs, suspend=True)).spec.suspend
    assert not view(PYTORCH, raw_job(PYTORCH, specs, suspend=False)).spec.suspend
    assert not view(PYTORCH, raw_job(PYTORCH, specs, suspend=None)).spec.suspend


# --- starting and stopping ----------------------------------------------------------------------------------------


def _admitted(*names: str) -> SimpleNamespace:
    return SimpleNamespace(admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "on-demand"}, count=1) for n in names]), check_states={})


def test_start_merges_each_pod_sets_info_into_its_replicas_template_and_unsuspends() -> None:
    raw = raw_job(PYTORCH, {"Worker": replica(2, node_selector={"zone": "a"}), "Master": replica(1)})
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "m"}, labels={"x": "1"}),
             podsetinfo.PodSetInfo(node_selector={"pool": "w"})]
    patch = PYTORCH.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"} and patch["spec"]["runPolicy"] == {"suspend": False}
    specs = patch["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["template"]["spec"]["nodeSelector"] == {"pool": "m"}
    assert specs["Master"]["template"]["metadata"]["labels"] == {"x": "1"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] == {"zone": "a", "pool": "w"}


def test_start_fails_when_the_admission_lacks_a_replicas_pod_set() -> None:
    job = view(TF, raw_job(TF, {"Chief": replica(1), "Worker": replica(2)}))
    with pytest.raises(kf.BadPodSets, match="expecting 2 podset, got 1"):
        TF.start_infos(ClusterState(), _admitted("chief"), job)
    with pytest.raises(kf.BadPodSets, match="expecting 2 podset, got 2"):
        TF.start_infos(ClusterState(), _admitted("chief", "workers"), job)


def test_stop_suspends_and_restores_each_template_as_its_workload_recorded_it() -> None:
    raw = raw_job(PYTORCH, {"Master": replica(1, node_selector={"pool": "m", "zone": "a"}),
                            "Worker": replica(2, node_selector={"pool": "w"})}, suspend=False)
    saved = [o.PodSet(name="master", count=1, template=o.PodTemplateSpec(spec=o.PodSpec(node_selector={"zone": "a"}))),
             o.PodSet(name="worker", count=2)]
    patch = PYTORCH.stop_patch(raw, saved)
    assert patch["spec"]["runPolicy"] == {"suspend": True}
    specs = patch["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["template"]["spec"]["nodeSelector"] == {"pool": None, "zone": "a"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] is None


def test_stop_writes_no_empty_metadata_into_a_template_that_has_none() -> None:
    raw = raw_job(PYTORCH, {"Master": replica(1), "Worker": replica(2)}, suspend=False)
    for spec in raw["spec"]["pytorchReplicaSpecs"].values():
        del spec["template"]["metadata"]
    patch = PYTORCH.stop_patch(raw, [o.PodSet(name="master", count=1), o.PodSet(name="worker", count=2)])
    templates = [spec["template"] for spec in patch["spec"]["pytorchReplicaSpecs"].values()]
    assert len(templates) == 2 and all("metadata" not in t for t in templates)


# --- what its status says -----------------------------------------------------------------------------------------


def _with_status(**status: Any) -> Any:
    return view(PYTORCH, {**raw_job(PYTORCH, {"Worker": replica(1)}), "status": status})


def test_finished_on_a_succeeded_or_failed_condition_with_its_message() -> None:
    assert PYTORCH.finished(_with_status(conditions=[{"type": "Running", "status": "True"}])) is None
    assert PYTORCH.finished(_with_status(conditions=[{"type": "Succeeded", "status": "False"}])) is None
    assert PYTORCH.finished(_with_status(conditions=[
        {"type": "Succeeded", "status": "True", "message": "PyTorchJob job is successfully completed."}])) == (
        "Succeeded", "PyTorchJob job is successfully completed.")
    assert PYTORCH.finished(_with_status(conditions=[{"type": "Failed", "status": "True", "message": "boom"}])) == (
        "Failed", "boom")


def test_pods_ready_is_the_running_condition_and_active_any_replicas_active_pods() -> None:
    assert PYTORCH.pods_ready(_with_status(conditions=[{"type": "Running", "status": "True"}]))
    assert not PYTORCH.pods_ready(_with_status(conditions=[{"type": "Running", "status": "False"}]))
    assert not PYTORCH.is_active(_with_status(replicaStatuses={"Master": {"succeeded": 1}}))
    assert PYTORCH.is_active(_with_status(replicaStatuses={"Master": {}, "Worker": {"active": 2}}))
