"""Kueue's Kubeflow Trainer integration, the pure part (:mod:`connectors.k8s.trainjob`): the JobSet a TrainJob's
runtime makes, the Workload it gets, what starting and stopping write, when it is finished, active and ready —
cases after Kueue's ``trainjob_controller_test.go``."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from connectors.k8s import job_selection, podsetinfo
from connectors.k8s import trainjob as tj
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections.cluster import ClusterState

UID = "tj-uid"
Q = "kueue.x-k8s.io/queue-name"
PODSET = "kueue.x-k8s.io/podset"


def replicated(name: str, ancestor: str | None = None, cpu: str = "1", replicas: int | None = None,
               parallelism: int | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"metadata": {"annotations": annotations} if annotations else {},
                                             "spec": {"containers": [{"name": ancestor and name or "c",
                                                                      "resources": {"requests": {"cpu": cpu}}}]}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    out: dict[str, Any] = {"name": name, "template": {"spec": job_spec}}
    if ancestor:
        out["template"]["metadata"] = {"labels": {tj.ANCESTOR_LABEL: ancestor}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def runtime(*jobs: dict[str, Any], num_nodes: int | None = None, policy: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": list(jobs)}}}
    if policy:
        spec["mlPolicy"] = {"numNodes": num_nodes} if num_nodes is not None else {}
    return spec


RUNTIME = runtime(replicated("dataset-initializer", "dataset-initializer", replicas=2),
                  replicated("node", "trainer", cpu="2"), num_nodes=2)


def raw_job(trainer: dict[str, Any] | None = None, overrides: list[dict[str, Any]] | None = None,
            suspend: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch"}, "suspend": suspend}
    if trainer is not None:
        spec["trainer"] = trainer
    if overrides is not None:
        spec["podTemplateOverrides"] = overrides
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "ns", "uid": UID, "resourceVersion": "5", "labels": {Q: "lq"}},
            "spec": spec}


def view(raw: dict[str, Any], status: dict[str, Any] | None = None) -> tj.TrainJob:
    return msgspec.convert({**raw, "status": status or {}}, tj.TrainJob)


# --- configuration and names ------------------------------------------------------------------------------------


def test_trainjobs_are_managed_only_when_the_frameworks_list_them() -> None:
    assert load_config({"integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]}}).manages_trainjobs
    assert not DEFAULT.manages_trainjobs


def test_a_trainjob_is_a_parent_kueue_runs_with_its_framework_on() -> None:
    on = load_config({"manageJobsWithoutQueueName": True,
                      "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset",
                                                      "trainer.kubeflow.org/trainjob"]}})
    off = load_config({"manageJobsWithoutQueueName": True,
                       "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    owner = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    ns = {"kubernetes.io/metadata.name": "ns"}
    assert not job_selection.is_managed({}, owner, ns, on), "its JobSet is left to it"
    assert job_selection.is_managed({}, owner, ns, off)


def test_the_workload_name_hashes_kind_group_name_and_uid() -> None:
    digest = hashlib.sha1(f"TrainJob\ntrainer.kubeflow.org\njob\n{UID}".encode()).hexdigest()[:5]
    assert tj.workload_name("job", UID) == f"trainjob-job-{digest}"


@pytest.mark.parametrize(("ref", "wanted"), [
    ({"name": "r"}, (True, "/r")), ({"name": "r", "kind": "ClusterTrainingRuntime"}, (True, "/r")),
    ({"name": "r", "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"}, (False, "ns/r")),
    ({"name": "r", "kind": "Other"}, None), ({"name": "r", "kind": "TrainingRuntime", "apiGroup": "x.io"}, None)])
def test_the_runtime_named_is_a_cluster_one_unless_its_kind_says_otherwise(ref: dict[str, str],
                                                                           wanted: tuple[bool, str] | None) -> None:
    raw = raw_job()
    raw["spec"]["runtimeRef"] = ref
    assert tj.runtime_wanted(view(raw)) == wanted


# --- the derived JobSet and the Workload ------------------------------------------------------------------------


def test_pod_sets_are_the_runtimes_jobs_with_the_trainjobs_num_nodes_and_resources() -> None:
    raw = raw_job({"numNodes": 3, "resourcesPerNode": {"requests": {"cpu": "4"}}, "image": "img:2"})
    sets = tj.pod_sets(raw, RUNTIME, tas=False)
    assert [(s["name"], s["count"]) for s in sets] == [("dataset-initializer", 1), ("node", 3)], \
        "an initializer runs one Job, the trainer one Job of numNodes pods"
    node = sets[1]["template"]["spec"]["containers"][0]
    assert node["resources"] == {"requests": {"cpu": "4"}} and node["image"] == "img:2"
    assert sets[0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


@pytest.mark.parametrize(("rt", "count"), [
    (runtime(replicated("node", "trainer"), num_nodes=2), 2), (runtime(replicated("node", "trainer")), 1),
    (runtime(replicated("node", "trainer", parallelism=4), policy=False), 4)])
def test_without_num_nodes_the_trainer_runs_the_runtimes_count(rt: dict[str, Any], count: int) -> None:
    assert tj.pod_sets(raw_job(), rt, tas=False)[0]["count"] == count


def test_a_job_without_an_ancestor_step_keeps_its_replicas_and_parallelism() -> None:
    rt = runtime(replicated("side", replicas=2, parallelism=3), replicated("node", "trainer"), num_nodes=1)
    assert [s["count"] for s in tj.pod_sets(raw_job(), rt, tas=False)] == [6, 1]


def _mpi_job(name: str, ancestor: str | None, cpu: str, parallelism: int | None = None) -> dict[str, Any]:
    """A replicated Job of an MPI runtime as the Trainer ships them (DeepSpeed's): a ``node`` container."""
    container = {"name": "node", "image": "rt:1", "resources": {"requests": {"cpu": cpu}},
                 "env": [{"name": "A", "value": "rt"}]}
    job_spec: dict[str, Any] = {"template": {"spec": {"containers": [container]}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    template: dict[str, Any] = {"spec": job_spec}
    if ancestor:
        template["metadata"] = {"labels": {tj.ANCESTOR_LABEL: ancestor}}
    return {"name": name, "template": template}


def mpi_runtime(as_node: bool | None, num_nodes: int = 1,
                node_parallelism: int | None = None) -> dict[str, Any]:
    """Workers in the unlabelled ``node`` Job, then the ``launcher`` Job labelled as the trainer step."""
    mpi: dict[str, Any] = {"numProcPerNode": 1}
    if as_node is not None:
        mpi["runLauncherAsNode"] = as_node
    return {"mlPolicy": {"numNodes": num_nodes, "mpi": mpi}, "template": {"spec": {"replicatedJobs": [
        _mpi_job("node", None, "1", node_parallelism), _mpi_job("launcher", "trainer", "500m")]}}}


TRAINER = {"image": "img:2", "command": ["mpirun"], "resourcesPerNode": {"requests": {"cpu": "4"}},
           "env": [{"name": "A", "value": "job"}, {"name": "B", "value": "b"}]}


@pytest.mark.parametrize(("as_node", "num_nodes", "counts"), [
    (True, 4, [("node", 3), ("launcher", 1)]), (True, 1, [("node", 1), ("launcher", 1)]),
    (False, 4, [("node", 4), ("launcher", 1)]), (None, 3, [("node", 3), ("launcher", 1)])])
def test_an_mpi_trainjobs_num_nodes_sizes_the_node_job_less_the_launcher_when_it_runs_as_one(
        as_node: bool | None, num_nodes: int, counts: list[tuple[str, int]]) -> None:
    sets = tj.pod_sets(raw_job({"numNodes": num_nodes}), mpi_runtime(as_node), tas=False)
    assert [(s["name"], s["count"]) for s in sets] == counts, \
        "the node Job: numNodes (less one, at least 1, with the launcher a node); the launcher: the runtime's"


def test_without_num_nodes_an_mpi_runtime_keeps_its_node_jobs_parallelism_and_launchers_num_nodes() -> None:
    sets = tj.pod_sets(raw_job(), mpi_runtime(True, num_nodes=2, node_parallelism=3), tas=False)
    assert [(s["name"], s["count"]) for s in sets] == [("node", 3), ("launcher", 2)]


def test_with_the_launcher_as_a_node_the_node_job_takes_the_trainjobs_resources_and_env_only() -> None:
    sets = tj.pod_sets(raw_job(TRAINER), mpi_runtime(True), tas=False)
    node, launcher = (s["template"]["spec"]["containers"][0] for s in sets)
    assert launcher["resources"] == node["resources"] == {"requests": {"cpu": "4"}}
    assert launcher["env"] == node["env"] == [{"name": "A", "value": "job"}, {"name": "B", "value": "b"}]
    assert (launcher["image"], launcher["command"]) == ("img:2", ["mpirun"])
    assert node["image"] == "rt:1" and "command" not in node, "image, command and args: the trainer step only"


def test_without_the_launcher_as_a_node_the_node_job_keeps_the_runtimes_container() -> None:
    sets = tj.pod_sets(raw_job(TRAINER), mpi_runtime(False), tas=False)
    node, launcher = (s["template"]["spec"]["containers"][0] for s in sets)
    assert node["resources"] == {"requests": {"cpu": "1"}} and node["env"] == [{"name": "A", "value": "rt"}]
    assert launcher["resources"] == {"requests": {"cpu": "4"}}


def test_every_job_runs_its_count_to_completion() -> None:
    side = replicated("side", parallelism=3)
    side["template"]["spec"]["completions"] = 1
    rt = runtime(side, replicated("node", "trainer"), num_nodes=1)
    assert [s["count"] for s in tj.pod_sets(raw_job(), rt, tas=False)] == [3, 1], \
        "the Trainer sets each Job's completions to its parallelism"


def test_pod_template_overrides_are_merged_into_the_jobs_they_target_in_order() -> None:
    overrides = [
        {"targetJobs": [{"name": "node"}], "metadata": {"labels": {"a": "1"}},
         "spec": {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "k1", "operator": "Exists"}],
                  "containers": [{"name": "node", "env": [{"name": "E", "value": "1"}]}]}},
        {"targetJobs": [{"name": "node"}, {"name": "dataset-initializer"}],
         "spec": {"nodeSelector": {"pool": "p"}, "tolerations": [{"key": "k2", "operator": "Exists"}]}}]
    sets = tj.pod_sets(raw_job(overrides=overrides), RUNTIME, tas=False)
    node = sets[1]["template"]
    assert node["metadata"]["labels"] == {"a": "1"}
    assert node["spec"]["nodeSelector"] == {"zone": "a", "pool": "p"}, "maps merge"
    assert node["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}], "a list without a key is replaced"
    assert node["spec"]["containers"] == [{"name": "node", "resources": {"requests": {"cpu": "2"}},
                                           "env": [{"name": "E", "value": "1"}]}], "containers merge by name"
    assert sets[0]["template"]["spec"]["nodeSelector"] == {"pool": "p"}


def test_a_topology_request_comes_from_an_override_under_tas() -> None:
    required = "kueue.x-k8s.io/podset-required-topology"
    overrides = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {required: "rack"}}}]
    sets = tj.pod_sets(raw_job({"numNodes": 2}, overrides), RUNTIME, tas=True)
    assert sets[1]["topologyRequest"]["required"] == "rack"
    assert sets[1]["topologyRequest"]["subGroupCount"] == 1


def test_the_workload_is_the_derived_jobsets_controlled_by_the_trainjob() -> None:
    body = tj.workload_for(ClusterState(), NO_KEYS, raw_job({"numNodes": 2}), RUNTIME, "wl")
    assert body["spec"]["queueName"] == "lq"
    assert [(p["name"], p["count"]) for p in body["spec"]["podSets"]] == [("dataset-initializer", 1), ("node", 2)]
    assert body["metadata"]["ownerReferences"] == [{
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "job", "uid": UID,
        "controller": True, "blockOwnerDeletion": True}]
    assert body["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == UID
    obs = msgspec.convert(body, o.Workload)
    assert tj.owner_of(obs) == ("job", UID)


# --- starting and stopping ------------------------------------------------------------------------------------


def _admitted(*names: str) -> SimpleNamespace:
    return SimpleNamespace(name="wl", queue_name="lq", pod_sets=[], labels={}, admission=o.Admission(
        cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(name=n, flavors={"cpu": "f"}, count=1)
                                                 for n in names]), check_states={})


USER = {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"zone": "a"}}}


def test_start_appends_one_override_per_pod_set_after_the_users_leaving_it_suspended() -> None:
    raw = raw_job(overrides=[USER])
    infos = [("dataset-initializer", podsetinfo.PodSetInfo(labels={PODSET: "dataset-initializer"})),
             ("node", podsetinfo.PodSetInfo(labels={PODSET: "node"}, node_selector={"pool": "x"},
                                            tolerations=[o.Toleration(key="t", operator="Exists")],
                                            annotations={"an": "v"}))]
    patch = tj.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"} and "suspend" not in patch["spec"]
    assert patch["spec"]["podTemplateOverrides"] == [
        USER,
        {"targetJobs": [{"name": "dataset-initializer"}], "metadata": {"labels": {PODSET: "dataset-initializer"}},
         "spec": {}},
        {"targetJobs": [{"name": "node"}], "metadata": {"labels": {PODSET: "node"}, "annotations": {"an": "v"}},
         "spec": {"nodeSelector": {"pool": "x"}, "tolerations": [{"key": "t", "operator": "Exists"}]}}]


def test_unsuspend_runs_the_trainjob_on_the_version_the_overrides_write_made() -> None:
    assert tj.unsuspend_patch({"metadata": {"resourceVersion": "9"}}) == {"metadata": {"resourceVersion": "9"},
                                                                          "spec": {"suspend": False}}


def test_start_drops_the_overrides_kueue_wrote_before() -> None:
    old = {"targetJobs": [{"name": "node"}], "metadata": {"labels": {PODSET: "node"}}, "spec": {}}
    patch = tj.start_patch(raw_job(overrides=[USER, old]), [("node", podsetinfo.PodSetInfo(labels={PODSET: "node"}))])
    assert patch["spec"]["podTemplateOverrides"] == [USER, old], "the old one gone, the new one appended"
    assert len(patch["spec"]["podTemplateOverrides"]) == 2


def test_start_infos_need_one_assignment_per_job() -> None:
    job = view(raw_job())
    infos = tj.start_infos(ClusterState(), _admitted("dataset-initializer", "node"), job, RUNTIME)
    assert [(n, i.labels[PODSET]) for n, i in infos] == [("dataset-initializer", "dataset-initializer"),
                                                        ("node", "node")]
    with pytest.raises(tj.BadPodSets, match="expecting 2 podset, got 1"):
        tj.start_infos(ClusterState(), _admitted("node"), job, RUNTIME)
    with pytest.raises(tj.BadPodSets):
        tj.start_infos(ClusterState(), _admitted("node", "other"), job, RUNTIME)


def test_stopping_suspends_then_restores_the_users_overrides() -> None:
    kueues = {"targetJobs": [{"name": "node"}], "metadata": {"labels": {PODSET: "node"}}}
    raw = raw_job(overrides=[USER, kueues], suspend=False)
    assert tj.suspend_patch(raw) == {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}}
    assert tj.restore_patch(raw)["spec"] == {"podTemplateOverrides": [USER]}
    assert tj.restore_patch(raw_job(overrides=[kueues]))["spec"] == {"podTemplateOverrides": None}
    assert tj.admission_written(view(raw)) and not tj.admission_written(view(raw_job(overrides=[USER])))


# --- status -----------------------------------------------------------------------------------------------------


def _cond(kind: str, status: str = "True", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "message": message}


def test_finished_from_the_complete_or_failed_condition_with_its_message() -> None:
    assert tj.finished(view(raw_job(), {"conditions": [_cond("Complete", message="done")]})) == ("Succeeded", "done")
    assert tj.finished(view(raw_job(), {"conditions": [_cond("Failed", message="oom")]})) == ("Failed", "oom")
    assert tj.finished(view(raw_job(), {"conditions": [_cond("Complete", "False")]})) is None
    assert tj.finished(view(raw_job())) is None


def test_active_pods_ready_and_reclaimable_pods_from_the_jobs_status() -> None:
    status = {"jobsStatus": [{"name": "dataset-initializer", "succeeded": 1}, {"name": "node", "ready": 1,
                                                                              "active": 2}]}
    job = view(raw_job({"numNodes": 2}), status)
    assert tj.is_active(job) and not tj.is_active(view(raw_job()))
    assert tj.pods_ready(job, RUNTIME), "one Job each: succeeded + ready reach the two replicas"
    assert not tj.pods_ready(view(raw_job(), {"jobsStatus": [{"name": "node", "ready": 1}]}), RUNTIME)
    assert not tj.pods_ready(job, None), "never without the runtime"
    assert tj.reclaimable_pods(job, RUNTIME) == (("dataset-initializer", 1),)
    assert tj.reclaimable_pods(view(raw_job()), RUNTIME) == ()
