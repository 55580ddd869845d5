"""Kueue's AppWrapper integration, the pure part (:mod:`connectors.k8s.appwrapper`): the Workload an AppWrapper
gets, what starting and stopping write, when it is finished, active and ready — cases from Kueue's
``appwrapper_controller_test.go`` and the AppWrapper utilities it calls."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from connectors.k8s import appwrapper as aw
from connectors.k8s import podsetinfo
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections.cluster import ClusterState

UID = "aw-uid"
Q = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def pod_template(cpu: str = "1", annotations: dict[str, str] | None = None, priority_class: str = ""
                 ) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"annotations": annotations} if annotations else {}, "spec": spec}


def batch_job(parallelism: int | None = 2, completions: int | None = None, **kw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": pod_template(**kw)}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"}, "spec": spec}


def pytorch_job(master: dict[str, str] | None = None, worker: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"}, "spec": {
        "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": pod_template(annotations=master)},
                                "Worker": {"replicas": 4, "template": pod_template("2", annotations=worker)}}}}


def raw_aw(*components: dict[str, Any], suspend: bool = True, status: dict[str, Any] | None = None,
           labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
        "metadata": {"name": "aw", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                     "labels": {Q: "lq"} if labels is None else labels},
        "spec": {"suspend": suspend, "components": list(components)}}
    if status is not None:
        out["status"] = status
    return out


def view(raw: dict[str, Any]) -> aw.AppWrapper:
    return msgspec.convert(raw, aw.AppWrapper)


def counts(raw: dict[str, Any], tas: bool = False) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in aw.pod_sets(raw, tas=tas)]


# --- configuration ----------------------------------------------------------------------------------------------


def test_appwrappers_are_managed_only_when_the_frameworks_list_them() -> None:
    assert load_config({"integrations": {"frameworks": ["workload.codeflare.dev/appwrapper"]}}).manages_appwrappers
    assert not load_config({"integrations": {"frameworks": ["batch/job"]}}).manages_appwrappers
    assert not DEFAULT.manages_appwrappers


def test_the_workload_name_hashes_kind_group_name_and_uid() -> None:
    digest = hashlib.sha1(f"AppWrapper\nworkload.codeflare.dev\naw\n{UID}".encode()).hexdigest()[:5]
    assert aw.workload_name("aw", UID) == f"appwrapper-aw-{digest}"


# --- pod sets ---------------------------------------------------------------------------------------------------


def test_pod_sets_are_inferred_per_component_and_named_by_their_place() -> None:
    """Kueue's "no annotations" case: a PyTorchJob's Master and Worker, then a Job of parallelism 2."""
    raw = raw_aw({"template": pytorch_job()}, {"template": batch_job()})
    assert counts(raw) == [("aw-0", 1), ("aw-1", 4), ("aw-2", 2)]
    first = aw.pod_sets(raw, tas=False)[1]["template"]
    assert first["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}}


def test_a_jobs_count_is_its_parallelism_lowered_to_its_completions() -> None:
    assert counts(raw_aw({"template": batch_job(parallelism=3, completions=2)})) == [("aw-0", 2)]
    assert counts(raw_aw({"template": batch_job(parallelism=None)})) == [("aw-0", 1)]


def test_declared_pod_sets_read_the_template_at_their_path() -> None:
    """The declared pod sets win over inference; replicas default to 1; a path reaching nothing is left out."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3, "template": pod_template()}}
    component = {"template": deployment, "podSets": [
        {"path": "template.spec.template", "replicas": 3}, {"path": "template.spec.missing"}]}
    other = {"template": {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"pods": [
        pod_template(), pod_template("4")]}}, "podSets": [{"path": "template.spec.pods[1]"}]}
    raw = raw_aw(component, other)
    assert counts(raw) == [("aw-0", 3), ("aw-1", 1)]
    assert aw.pod_sets(raw, tas=False)[1]["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "4"}


def test_the_settled_component_status_wins_over_the_spec() -> None:
    raw = raw_aw({"template": batch_job()}, status={"componentStatus": [
        {"name": "job", "kind": "Job", "apiVersion": "batch/v1",
         "podSets": [{"path": "template.spec.template", "replicas": 5}]}]})
    assert counts(raw) == [("aw-0", 5)]


def test_paths_are_walked_as_the_appwrapper_utilities_do() -> None:
    template = {"spec": {"list": [{"a": 1}]}}
    assert aw.value_at(template, "template.spec.list[0].a") == 1
    for path, message in (("spec.list", "first element"), ("template.spec.list[3]", "out of bounds"),
                          ("template.spec.nope", "missing field 'nope'"), ("template.spec.list[x]", "invalid index")):
        with pytest.raises(aw.BadPath, match=message):
            aw.value_at(template, path)


def test_a_replica_count_that_is_no_number_refuses_the_workload() -> None:
    job = pytorch_job()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "four"
    with pytest.raises(InvalidInput, match="non-int value four"):
        aw.workload_for(ClusterState(), NO_KEYS, raw_aw({"template": job}), "wl")
    assert aw.job_pod_sets(view(raw_aw({"template": job}))) is None, "nothing to compare its Workload with"
    assert [(ps.name, ps.count) for ps in aw.job_pod_sets(view(raw_aw({"template": job, "podSets": [  # type: ignore[union-attr]
        {"path": "template.spec.pytorchReplicaSpecs.Worker.template", "replicas": 4}]})))] == [("aw-0", 4)]


def test_under_tas_a_pod_set_asks_for_its_templates_topology_with_the_inferred_rank_label() -> None:
    """Kueue's "with required and preferred topology annotation" case, and a Job's completion index."""
    raw = raw_aw({"template": pytorch_job({REQUIRED: "cloud.com/rack"}, {PREFERRED: "cloud.com/block"})},
                 {"template": batch_job()})
    master, worker, job = (ps["topologyRequest"] for ps in aw.pod_sets(raw, tas=True))
    assert master == {"required": "cloud.com/rack", "podIndexLabel": "training.kubeflow.org/replica-index"}
    assert worker == {"preferred": "cloud.com/block", "podIndexLabel": "training.kubeflow.org/replica-index"}
    assert job == {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}
    assert "topologyRequest" not in aw.pod_sets(raw, tas=False)[0], "without TAS: no request"
    grouped = raw_aw({"template": batch_job(), "podSets": [{"path": "template.spec.template", "annotations": {
        aw.TAS_SUB_GROUP_INDEX_LABEL: "idx", aw.TAS_SUB_GROUP_COUNT: "3"}}]})
    assert aw.pod_sets(grouped, tas=True)[0]["topologyRequest"] == {"subGroupIndexLabel": "idx", "subGroupCount": 3}


def test_the_workload_is_owned_queued_and_takes_the_first_pod_priority_class() -> None:
    raw = raw_aw({"template": batch_job()})
    raw["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/a": "v", "other/b": "w"}
    body = aw.workload_for(ClusterState(), NO_KEYS, raw, "wl")
    assert body["spec"]["queueName"] == "lq"
    assert [ps["name"] for ps in body["spec"]["podSets"]] == ["aw-0"]
    assert body["metadata"]["ownerReferences"] == [{
        "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw", "uid": UID,
        "controller": True, "blockOwnerDeletion": True}]
    assert body["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/a": "v"}
    assert aw.priority_class(view(raw_aw({"template": batch_job()}), )) is None
    named = raw_aw({"template": batch_job()}, {"template": batch_job(priority_class="high")})
    assert aw.priority_class(view(named)) == "high"


# --- starting and stopping --------------------------------------------------------------------------------------


def _admitted(*names: str) -> SimpleNamespace:
    return SimpleNamespace(queue_name="lq", name="wl", check_states={}, labels={}, admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "f"}, count=1) for n in names]))


def test_start_writes_each_components_pod_set_infos_and_unsuspends() -> None:
    raw = raw_aw({"template": pytorch_job()}, {"template": {"apiVersion": "v1", "kind": "ConfigMap"}},
                 {"template": batch_job()})
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "m"}, labels={"x": "1"}),
             podsetinfo.PodSetInfo(node_selector={"pool": "w"}), podsetinfo.PodSetInfo(node_selector={"pool": "j"})]
    patch = aw.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"} and patch["spec"]["suspend"] is False
    first, config_map, job = patch["spec"]["components"]
    assert first["podSetInfos"] == [{"labels": {"x": "1"}, "nodeSelector": {"pool": "m"}},
                                    {"nodeSelector": {"pool": "w"}}]
    assert "podSetInfos" not in config_map, "a component without pod sets gets none"
    assert job["podSetInfos"] == [{"nodeSelector": {"pool": "j"}}]
    assert "nodeSelector" not in job["template"]["spec"]["template"]["spec"], "the templates are left as written"


def test_start_fails_when_the_infos_do_not_number_the_pod_sets() -> None:
    with pytest.raises(aw.BadPodSets, match="expecting 3 podsets, got 2"):
        aw.start_patch(raw_aw({"template": pytorch_job()}, {"template": batch_job()}),
                       [podsetinfo.PodSetInfo(), podsetinfo.PodSetInfo()])
    with pytest.raises(aw.BadPodSets, match="expecting 2 podsets, got 1"):  # awutils.SetPodSetInfos' words
        aw.start_infos(ClusterState(), _admitted("aw-0"), view(raw_aw({"template": pytorch_job()})))


def test_start_infos_follow_the_admission_of_each_named_pod_set() -> None:
    infos = aw.start_infos(ClusterState(), _admitted("aw-0", "aw-1"), view(raw_aw({"template": pytorch_job()})))
    assert [i.labels.get("kueue.x-k8s.io/podset") for i in infos] == ["aw-0", "aw-1"]


def test_stop_suspends_and_clears_every_components_pod_set_infos() -> None:
    raw = raw_aw({"template": batch_job(), "podSetInfos": [{"nodeSelector": {"pool": "j"}}]}, suspend=False)
    patch = aw.stop_patch(raw, [])
    assert patch["spec"]["suspend"] is True
    assert patch["spec"]["components"] == [{"template": batch_job()}]


# --- what its status says ---------------------------------------------------------------------------------------


def _status(phase: str = "", **conditions: str) -> aw.AppWrapper:
    return view(raw_aw({"template": batch_job()}, status={"phase": phase, "conditions": [
        {"type": t, "status": s, "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t, s in conditions.items()]}))


def test_it_finishes_on_success_and_on_failure_once_its_resources_are_gone() -> None:
    assert aw.finished(_status("Running")) is None
    assert aw.finished(_status("Succeeded")) == ("Succeeded", "AppWrapper finished successfully")
    assert aw.finished(_status("Failed", ResourcesDeployed="True")) is None, "still deleting its resources"
    assert aw.finished(_status("Failed", ResourcesDeployed="False")) == ("Failed", "AppWrapper failed")


def test_active_and_ready_follow_its_conditions() -> None:
    assert aw.is_active(_status("Running", QuotaReserved="True"))
    assert not aw.is_active(_status("Suspended", QuotaReserved="False"))
    assert aw.pods_ready(_status("Running", PodsReady="True"))
    assert not aw.pods_ready(_status("Running", PodsReady="False"))


def jobset(replicas: int = 2, parallelism: int = 3) -> dict[str, Any]:
    job_spec = {"parallelism": parallelism, "template": pod_template()}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"}, "spec": {
        "replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": job_spec}}]}}


def ray_cluster_spec(workers: int = 3) -> dict[str, Any]:
    return {"headGroupSpec": {"template": pod_template()},
            "workerGroupSpecs": [{"groupName": "g", "replicas": workers, "template": pod_template("2")}]}


def test_jobsets_and_ray_objects_get_the_pod_sets_the_appwrapper_utilities_infer() -> None:
    """A JobSet's replicated Jobs (replicas times pods per Job, with the JobSet's sub-group labels); a RayCluster's
    and a RayJob's head then worker groups — as the AppWrapper utilities infer them (``InferPodSets``)."""
    raw = raw_aw({"template": jobset()},
                 {"template": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": ray_cluster_spec()}},
                 {"template": {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {
                     "rayClusterSpec": ray_cluster_spec(workers=1)}}})
    assert counts(raw) == [("aw-0", 6), ("aw-1", 1), ("aw-2", 3), ("aw-3", 1), ("aw-4", 1)]
    request = aw.pod_sets(raw, tas=True)[0]["topologyRequest"]
    assert (request["podIndexLabel"], request["subGroupIndexLabel"], request["subGroupCount"]) == (
        "batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index", 2)


def test_the_pod_sets_do_not_change_when_the_appwrapper_controller_settles_them_in_its_status() -> None:
    """The AppWrapper controller caches the declared or inferred pod sets in ``status.componentStatus``; Kueue reads
    them from there once they are, and infers them alike before: a running AppWrapper's Workload stays in step."""
    components = ({"template": batch_job()}, {"template": jobset()})
    before = aw.job_pod_sets(view(raw_aw(*components)))
    settled = [{"podSets": [{"path": "template.spec.template", "replicas": 2}]},
               {"podSets": [{"path": "template.spec.replicatedJobs[0].template.spec.template", "replicas": 6}]}]
    after = aw.job_pod_sets(view(raw_aw(*components, status={"componentStatus": settled})))
    assert before is not None and [(ps.name, ps.count) for ps in before] == [("aw-0", 2), ("aw-1", 6)]
    assert before == after


@pytest.mark.parametrize("replicas", ["four", 1.5, True, [2]])
def test_a_declared_replica_count_that_is_no_integer_refuses_the_workload_naming_the_field(replicas: Any) -> None:
    """An AppWrapper stored without the AppWrapper project's schema: refused with the object and field named,
    never a crash of the reconcile (nor a count read from a fraction or a boolean)."""
    raw = raw_aw({"template": batch_job(), "podSets": [{"path": "template.spec.template", "replicas": replicas}]})
    with pytest.raises(InvalidInput, match=r"AppWrapper aw: spec\.components\[0\]\.podSets\[0\]\.replicas"):
        aw.workload_for(ClusterState(), NO_KEYS, raw, "wl")
    assert aw.job_pod_sets(view(raw)) is None


def test_a_component_that_is_no_object_is_refused_not_a_crash() -> None:
    settled = {"componentStatus": [{"podSets": [{"path": "template.spec.template"}]}]}
    for component in ("x", 1, None):
        raw = raw_aw(component, status=settled)  # type: ignore[arg-type]
        assert aw.pod_sets(raw, tas=False) == [], "no pod template there: left out, as Kueue's GetComponentPodSpecs"
        with pytest.raises(aw.BadPodSets, match="expecting 1 podsets, got 0"):
            aw.start_patch(raw, [])
        with pytest.raises(aw.BadPodSets, match=r"spec\.components\[0\]"):
            aw.start_patch(raw, [podsetinfo.PodSetInfo()])


def test_a_declared_pod_set_whose_spec_is_no_pod_spec_is_left_out_and_an_inferred_one_refuses() -> None:
    """As the AppWrapper utilities parse the spec at a path as a v1.PodSpec: a declared pod set there is left out
    (Kueue's GetComponentPodSpecs), an inferred one refuses the AppWrapper; neither crashes the comparison."""
    thing = {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"pods": [
        {"spec": {"containers": "not a list"}}, pod_template()]}}
    raw = raw_aw({"template": thing, "podSets": [{"path": "template.spec.pods[0]"}, {"path": "template.spec.pods[1]"}]})
    assert counts(raw) == [("aw-0", 1)]
    assert [ps.name for ps in aw.job_pod_sets(view(raw)) or []] == ["aw-0"]
    job = batch_job()
    job["spec"]["template"]["spec"]["containers"] = "not a list"
    with pytest.raises(InvalidInput, match=r"spec\.components\[0\]: template\.spec\.template does not refer to a "
                                           r"v1\.PodSpecTemplate: .*not parseable as a v1\.PodSpec"):
        aw.workload_for(ClusterState(), NO_KEYS, raw_aw({"template": job}), "wl")
    assert aw.job_pod_sets(view(raw_aw({"template": job}))) is None
