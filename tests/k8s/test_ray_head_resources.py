"""What Kueue counts on a Ray head pod set beyond its template (:mod:`connectors.k8s.ray_head_resources`): the
autoscaler sidecar, a fault-tolerant cluster's Redis cleanup Job, a ``SidecarMode`` RayJob's submitter — for a
RayCluster, a RayJob and a RayService, the Ray object itself left as written; and a RayCluster whose head cannot
take the cleanup gets no Workload (shapes from Kueue's ``common_test.go`` and ``rayjob_controller_test.go``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fixtures import watched_jobs

from connectors.k8s import ray_head_resources as hr
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from connectors.k8s import rayservice as rs
from connectors.k8s.ray_integration import RayClusterIntegration
from events.errors import InvalidInput

FT = "ray.io/ft-enabled"
BOTH_ON = {"integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]}}


def head(requests: dict[str, str] | None = None, containers: bool = True) -> dict[str, Any]:
    if not containers:
        return {"template": {"spec": {"containers": []}}}
    ray = {"name": "ray-head", "image": "ray:2", "resources": {"requests": requests or {"cpu": "1"}}}
    return {"template": {"spec": {"containers": [ray, {"name": "log", "image": "busybox"}]}}}


def cluster_spec(**extra: Any) -> dict[str, Any]:
    worker = {"groupName": "w", "replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "ray:2"}]}}}
    return {"headGroupSpec": extra.pop("head_group", head()), "workerGroupSpecs": [worker], **extra}


def meta(kind: str, annotations: dict[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": kind.lower(), "namespace": "ns", "uid": "u", "resourceVersion": "1",
                           "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if annotations:
        out["annotations"] = annotations
    return out


def raw_cluster(annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("RayCluster", annotations),
            "spec": cluster_spec(**extra)}


def raw_job(annotations: dict[str, str] | None = None, mode: str = "K8sJobMode", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta("RayJob", annotations),
            "spec": {"submissionMode": mode, "shutdownAfterJobFinishes": True, "rayClusterSpec": cluster_spec(**extra)}}


def raw_service(annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta("RayService", annotations),
            "spec": {"rayClusterConfig": cluster_spec(**extra)}}


def head_containers(pod_sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert pod_sets[0]["name"] == "head"
    return list(pod_sets[0]["template"]["spec"]["containers"])


def names(pod_sets: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in head_containers(pod_sets)]


# --- the autoscaler ---------------------------------------------------------------------------------------------


def test_an_autoscaling_clusters_head_counts_kuberays_default_autoscaler_sidecar() -> None:
    raw = raw_cluster(enableInTreeAutoscaling=True)
    written = copy.deepcopy(raw)
    sets = rc.pod_sets(raw, tas=False)
    assert names(sets) == ["ray-head", "log", "autoscaler"]
    assert head_containers(sets)[-1]["resources"] == {"requests": {"cpu": "500m", "memory": "512Mi"},
                                                       "limits": {"cpu": "500m", "memory": "512Mi"}}
    assert [ps["template"] for ps in sets[1:]] == [raw["spec"]["workerGroupSpecs"][0]["template"]], "workers as written"
    assert raw == written, "the RayCluster itself is not changed"


def test_the_autoscaler_options_resources_replace_the_defaults_as_written() -> None:
    options = {"resources": {"requests": {"cpu": "2"}}, "idleTimeoutSeconds": 60}
    sets = rc.pod_sets(raw_cluster(enableInTreeAutoscaling=True, autoscalerOptions=options), tas=False)
    assert head_containers(sets)[-1] == {"name": "autoscaler", "resources": {"requests": {"cpu": "2"}}}


@pytest.mark.parametrize("flag", [None, False])
def test_no_autoscaler_is_counted_without_in_tree_autoscaling(flag: bool | None) -> None:
    extra = {} if flag is None else {"enableInTreeAutoscaling": flag}
    raw = raw_cluster(autoscalerOptions={"resources": {"requests": {"cpu": "2"}}}, **extra)
    assert head_containers(rc.pod_sets(raw, tas=False)) == raw["spec"]["headGroupSpec"]["template"]["spec"]["containers"]


# --- the Redis cleanup ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("annotations", "extra"), [
    ({FT: "true"}, {}), ({FT: "True"}, {}), (None, {"gcsFaultToleranceOptions": {"redisAddress": "redis:6379"}})])
def test_a_fault_tolerant_clusters_head_ray_container_requests_at_least_the_redis_cleanup(
        annotations: dict[str, str] | None, extra: dict[str, Any]) -> None:
    sets = rc.pod_sets(raw_cluster(annotations, **extra), tas=False)
    ray, log = head_containers(sets)
    assert ray["resources"]["requests"] == {"cpu": "1", "memory": "256Mi"}, "the larger of each, the Ray container's"
    assert "resources" not in log, "only the first container takes it"


def test_a_smaller_request_is_raised_to_the_cleanups_and_a_larger_one_kept() -> None:
    raw = raw_cluster({FT: "true"}, head_group=head({"cpu": "100m", "memory": "1Gi"}))
    assert head_containers(rc.pod_sets(raw, tas=False))[0]["resources"]["requests"] == {"cpu": "200m",
                                                                                         "memory": "1Gi"}


@pytest.mark.parametrize("flag", ["false", ""])
def test_no_cleanup_is_counted_without_fault_tolerance(flag: str) -> None:
    raw = raw_cluster({FT: flag})
    assert head_containers(rc.pod_sets(raw, tas=False))[0]["resources"]["requests"] == {"cpu": "1"}


def test_cleanup_then_autoscaler_on_one_head() -> None:
    sets = rc.pod_sets(raw_cluster({FT: "true"}, enableInTreeAutoscaling=True), tas=False)
    assert names(sets) == ["ray-head", "log", "autoscaler"]
    assert head_containers(sets)[0]["resources"]["requests"] == {"cpu": "1", "memory": "256Mi"}


def test_a_fault_tolerant_head_without_a_container_builds_no_pod_sets_in_kueues_words() -> None:
    raw = raw_cluster({FT: "true"}, head_group=head(containers=False))
    with pytest.raises(InvalidInput, match="^" + hr.NO_RAY_CONTAINER + "$"):
        rc.pod_sets(raw, tas=False)
    assert names(rc.pod_sets(raw_cluster(head_group=head(containers=False)), tas=False)) == [], "no cleanup: built"


@pytest.mark.asyncio
async def test_a_raycluster_whose_head_cannot_take_the_cleanup_gets_no_workload() -> None:
    raw = raw_cluster({FT: "true"}, head_group=head(containers=False))
    raw["spec"]["suspend"] = True
    integ, client, appended = watched_jobs.integration(RayClusterIntegration, raw, config=BOTH_ON)
    await integ.reconcile("ns/raycluster")
    assert (client.created, appended) == ([], [])
    assert integ.stats.invalid == ["ns/raycluster"]


# --- RayJob and RayService --------------------------------------------------------------------------------------


def test_a_rayjob_counts_its_own_annotations_fault_tolerance_and_its_clusters_autoscaler() -> None:
    sets = rj.pod_sets(raw_job({FT: "true"}, enableInTreeAutoscaling=True), tas=False)
    assert [ps["name"] for ps in sets] == ["head", "w", "submitter"]
    assert names(sets) == ["ray-head", "log", "autoscaler"]
    assert head_containers(sets)[0]["resources"]["requests"]["memory"] == "256Mi"
    assert sets[2]["template"]["spec"]["containers"][0]["image"] == "ray:2", "the default submitter's image as before"


def test_a_sidecar_mode_rayjob_counts_kuberays_default_submitter_on_its_head() -> None:
    sets = rj.pod_sets(raw_job(mode="SidecarMode", enableInTreeAutoscaling=True,
                               submitterPodTemplate={"spec": {"containers": [{"name": "x"}]}}), tas=False)
    assert [ps["name"] for ps in sets] == ["head", "w"], "no submitter pod set"
    assert names(sets) == ["ray-head", "log", "autoscaler", "ray-job-submitter"]
    assert head_containers(sets)[-1]["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                                       "requests": {"cpu": "500m", "memory": "200Mi"}}


@pytest.mark.parametrize("mode", ["K8sJobMode", "HTTPMode"])
def test_other_modes_put_no_submitter_on_the_head(mode: str) -> None:
    assert names(rj.pod_sets(raw_job(mode=mode), tas=False)) == ["ray-head", "log"]


def test_a_rayservice_counts_its_cluster_configs_autoscaler_and_its_fault_tolerance() -> None:
    raw = raw_service({FT: "TRUE"}, enableInTreeAutoscaling=True)
    written = copy.deepcopy(raw)
    sets = rs.pod_sets(raw, tas=False)
    assert names(sets) == ["ray-head", "log", "autoscaler"]
    assert head_containers(sets)[0]["resources"]["requests"] == {"cpu": "1", "memory": "256Mi"}
    assert raw == written
    plain = rs.pod_sets(raw_service(), tas=False)
    assert head_containers(plain) == raw["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"]


# --- the History Server collector (Kueue v0.20's #14670) ----------------------------------------------------------

COLLECTOR_DEFAULT = {"limits": {"cpu": "200m", "memory": "256Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}}


def all_containers(pod_sets: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {ps["name"]: [c["name"] for c in ps["template"]["spec"]["containers"]] for ps in pod_sets}


def test_collector_options_put_kuberays_default_collector_on_every_ray_pod_set() -> None:
    raw = raw_cluster(enableInTreeAutoscaling=True,
                      historyServerOptions={"collectorOptions": {"image": "collector:v1.7.0"}})
    written = copy.deepcopy(raw)
    sets = rc.pod_sets(raw, tas=False)
    assert all_containers(sets) == {"head": ["ray-head", "log", "autoscaler", "ray-history-collector"],
                                    "w": ["w", "ray-history-collector"]}
    for ps in sets:
        assert ps["template"]["spec"]["containers"][-1] == {"name": "ray-history-collector",
                                                             "resources": COLLECTOR_DEFAULT}
    assert raw == written, "the RayCluster itself is not changed"


def test_the_collector_options_resources_replace_the_defaults_as_written() -> None:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}}
    raw = raw_cluster(historyServerOptions={"collectorOptions": {"resources": resources}})
    assert [ps["template"]["spec"]["containers"][-1]["resources"] for ps in rc.pod_sets(raw, tas=False)] == [
        resources, resources]


@pytest.mark.parametrize("options", [None, {}, {"collectorOptions": None}])
def test_no_collector_without_collector_options(options: dict[str, Any] | None) -> None:
    extra = {} if options is None else {"historyServerOptions": options}
    assert all_containers(rc.pod_sets(raw_cluster(**extra), tas=False)) == {"head": ["ray-head", "log"], "w": ["w"]}


def test_a_rayjob_and_a_rayservice_count_the_collector_on_their_ray_pods_not_on_the_submitter() -> None:
    hs = {"collectorOptions": {}}
    job = rj.pod_sets(raw_job(historyServerOptions=hs), tas=False)
    assert all_containers(job) == {"head": ["ray-head", "log", "ray-history-collector"],
                                   "w": ["w", "ray-history-collector"], "submitter": ["ray-job-submitter"]}
    sidecar = rj.pod_sets(raw_job(mode="SidecarMode", historyServerOptions=hs), tas=False)
    assert names(sidecar) == ["ray-head", "log", "ray-history-collector", "ray-job-submitter"]
    service = rs.pod_sets(raw_service(historyServerOptions=hs), tas=False)
    assert all_containers(service) == {"head": ["ray-head", "log", "ray-history-collector"],
                                       "w": ["w", "ray-history-collector"]}
