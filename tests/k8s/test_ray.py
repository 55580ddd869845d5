"""Kueue's Ray integrations, the pure part (:mod:`connectors.k8s.raycluster`, :mod:`connectors.k8s.rayjob`): the
Workload a RayJob or RayCluster gets, what starting and stopping write, when it is finished, active and ready —
shapes from Kueue's ``rayjob_controller_test.go``, ``raycluster_controller_test.go`` and ``common_test.go``."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from connectors.k8s import job_selection, podsetinfo
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections.cluster import ClusterState

UID = "ray-uid"
Q = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def template(image: str = "ray:2", annotations: dict[str, str] | None = None, priority_class: str = "",
             node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "1"}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"annotations": annotations} if annotations else {}, "spec": spec}


def group(name: str, replicas: int | None = 1, hosts: int | None = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"groupName": name, "template": template(**kw), "minReplicas": 0, "maxReplicas": 9}
    if replicas is not None:
        out["replicas"] = replicas
    if hosts is not None:
        out["numOfHosts"] = hosts
    return out


def cluster_spec(*groups: dict[str, Any], head: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": head or template()},
            "workerGroupSpecs": list(groups)}


def raw_cluster(*groups: dict[str, Any], suspend: bool | None = True, **kw: Any) -> dict[str, Any]:
    spec = cluster_spec(*groups, **kw)
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "ns", "uid": UID, "resourceVersion": "5", "labels": {Q: "lq"}},
            "spec": spec}


def raw_job(*groups: dict[str, Any], mode: str = "K8sJobMode", submitter: dict[str, Any] | None = None,
            suspend: bool = True, **kw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"suspend": suspend, "shutdownAfterJobFinishes": True, "entrypoint": "python x.py",
                            "rayClusterSpec": cluster_spec(*groups, **kw)}
    if mode:
        spec["submissionMode"] = mode
    if submitter is not None:
        spec["submitterPodTemplate"] = submitter
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": "ns", "uid": UID, "resourceVersion": "5", "labels": {Q: "lq"}},
            "spec": spec}


def job_view(raw: dict[str, Any]) -> rj.RayJob:
    return msgspec.convert(raw, rj.RayJob)


def cluster_view(raw: dict[str, Any]) -> rc.RayCluster:
    return msgspec.convert(raw, rc.RayCluster)


# --- configuration --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("frameworks", "jobs", "clusters"), [
    ([], False, False), (["batch/job", "ray.io/rayjob"], True, False),
    (["batch/job", "ray.io/raycluster"], False, True), (["ray.io/rayjob", "ray.io/raycluster"], True, True)])
def test_ray_kinds_are_managed_only_when_the_frameworks_list_them(frameworks: list[str], jobs: bool,
                                                                  clusters: bool) -> None:
    config = load_config({"integrations": {"frameworks": frameworks}})
    assert (config.manages_rayjobs, config.manages_rayclusters) == (jobs, clusters)
    assert not DEFAULT.manages_rayjobs and not DEFAULT.manages_rayclusters


@pytest.mark.parametrize(("frameworks", "child_managed"), [(["batch/job"], True),
                                                           (["batch/job", "ray.io/rayjob"], False)])
def test_under_manage_jobs_without_queue_name_a_rayjobs_submitter_job_is_left_to_it(
        frameworks: list[str], child_managed: bool) -> None:
    config = load_config({"manageJobsWithoutQueueName": True, "integrations": {"frameworks": frameworks}})
    ns = {"kubernetes.io/metadata.name": "ns"}
    assert job_selection.is_managed({}, ("ray.io/v1", "RayJob"), ns, config) is child_managed
    on = load_config({"manageJobsWithoutQueueName": True,
                      "integrations": {"frameworks": ["batch/job", "ray.io/raycluster"]}})
    assert not job_selection.is_managed({}, ("ray.io/v1", "RayCluster"), ns, on), "a RayCluster's pods' parent"
    assert job_selection.is_managed({}, ("ray.io/v1", "RayCluster"), ns, config)


# --- the Workload ---------------------------------------------------------------------------------------------


def test_the_workload_names_hash_kind_group_name_and_uid() -> None:
    for kind, name, fn in (("RayJob", "job", rj.workload_name), ("RayCluster", "rc", rc.workload_name)):
        digest = hashlib.sha1(f"{kind}\nray.io\n{name}\n{UID}".encode()).hexdigest()[:5]
        assert fn(name, UID) == f"{kind.lower()}-{name}-{digest}"


def test_a_head_then_each_worker_group_counting_replicas_times_hosts() -> None:
    """Kueue's ``BuildPodSets``: head 1; replicas default 1; numOfHosts multiplies when above 1; min/max replicas
    not read; the group name lower-cased."""
    raw = raw_cluster(group("Small", 3), group("multi", 2, hosts=4), group("one", 2, hosts=1), group("dflt", None))
    sets = rc.pod_sets(raw, tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("head", 1), ("small", 3), ("multi", 8), ("one", 2),
                                                          ("dflt", 1)]
    assert sets[0]["template"] == raw["spec"]["headGroupSpec"]["template"]
    assert all("topologyRequest" not in ps for ps in sets)


def test_under_tas_each_pod_set_asks_for_its_templates_topology_without_a_rank_label() -> None:
    raw = raw_cluster(group("w", 2, annotations={REQUIRED: "cloud.com/block"}))
    sets = rc.pod_sets(raw, tas=True)
    assert [ps["topologyRequest"] for ps in sets] == [{}, {"required": "cloud.com/block"}]


def test_a_rayjob_in_k8s_job_mode_has_a_last_submitter_pod_set() -> None:
    """Kueue's submitter pod set: the RayJob's submitter template, else KubeRay's default one with the head's
    image; none in HTTPMode (nor when no mode is written: Kueue reads the field as it is)."""
    sets = rj.pod_sets(raw_job(group("w", 2), head=template("ray:2.9")), tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("head", 1), ("w", 2), ("submitter", 1)]
    container = sets[2]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("ray-job-submitter", "ray:2.9")
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert sets[2]["template"]["spec"]["restartPolicy"] == "Never"
    own = template("submit:1")
    assert rj.pod_sets(raw_job(group("w"), submitter=own), tas=False)[2]["template"] == own
    for mode in ("HTTPMode", ""):
        assert [ps["name"] for ps in rj.pod_sets(raw_job(group("w"), mode=mode), tas=False)] == ["head", "w"]


def test_the_workload_is_owned_queued_finalized_and_takes_the_first_pod_priority_class() -> None:
    raw = raw_job(group("w", 2, priority_class="low"))
    with pytest.raises(Exception, match="low"):
        rj.workload_for(ClusterState(), NO_KEYS, raw, "wl")  # the class is not in the log
    raw = raw_job(group("w", 2))
    body = rj.workload_for(ClusterState(), NO_KEYS, raw, "wl")
    meta, spec = body["metadata"], body["spec"]
    assert meta["ownerReferences"] == [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": UID,
                                        "controller": True, "blockOwnerDeletion": True}]
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"] and spec["queueName"] == "lq"
    assert rj.priority_class(job_view(raw_job(group("w", priority_class="w"), head=template(priority_class="h")))) \
        == "h"
    assert rc.priority_class(cluster_view(raw_cluster(group("a"), group("b", priority_class="b")))) == "b"
    cluster_body = rc.workload_for(ClusterState(), NO_KEYS, raw_cluster(group("w")), "wl")
    assert cluster_body["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"


def test_a_rayjob_naming_an_existing_cluster_is_skipped() -> None:
    raw = raw_job(group("w"))
    assert not rj.skipped(job_view(raw))
    raw["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert rj.skipped(job_view(raw))


# --- starting and stopping ------------------------------------------------------------------------------------


def _admitted(*names: str) -> SimpleNamespace:
    return SimpleNamespace(admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "on-demand"}, count=1) for n in names]), check_states={})


def test_start_merges_each_pod_sets_info_into_its_template_and_unsuspends() -> None:
    raw = raw_job(group("w", 2, node_selector={"zone": "a"}), submitter=template("s"))
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "h"}, labels={"x": "1"}),
             podsetinfo.PodSetInfo(node_selector={"pool": "w"}), podsetinfo.PodSetInfo(node_selector={"pool": "s"})]
    patch = rj.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"} and patch["spec"]["suspend"] is False
    cluster = patch["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": "h"}
    assert cluster["headGroupSpec"]["template"]["metadata"]["labels"] == {"x": "1"}
    workers = cluster["workerGroupSpecs"]
    assert workers[0]["template"]["spec"]["nodeSelector"] == {"zone": "a", "pool": "w"}
    assert workers[0]["groupName"] == "w" and workers[0]["maxReplicas"] == 9, "the list is written whole"
    assert patch["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {"pool": "s"}
    assert "entrypoint" not in patch["spec"], "what did not change is not written"


def test_start_fails_when_the_admission_lacks_a_pod_set() -> None:
    job = job_view(raw_job(group("w", 2)))
    with pytest.raises(rj.BadPodSets, match="expecting 2 podset, got 3"):
        rj.start_infos(ClusterState(), _admitted("head", "w"), job)
    with pytest.raises(rc.BadPodSets, match="expecting 1 podset, got 2"):
        rc.start_infos(ClusterState(), _admitted("head"), cluster_view(raw_cluster(group("w"))))


def test_start_writes_the_default_submitter_template_with_its_admission() -> None:
    """Kueue #12644 (``rayjob_controller_test.go``, "Should persist admission constraints on default submitter pod
    template"): in ``K8sJobMode`` with no ``submitterPodTemplate``, starting writes KubeRay's default one with the
    submitter pod set's admission merged in, else KubeRay's submitter Job would run wherever it lands; stopping
    then restores it as any written template."""
    raw = raw_job(group("w", 2), head=template("ray:2.9"))
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "h"}), podsetinfo.PodSetInfo(node_selector={"pool": "w"}),
             podsetinfo.PodSetInfo(node_selector={"pool": "s"}, tolerations=[o.Toleration(key="k", operator="Exists")])]
    submitter = rj.start_patch(raw, infos)["spec"]["submitterPodTemplate"]
    assert submitter["spec"]["nodeSelector"] == {"pool": "s"}
    assert submitter["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert submitter["spec"]["containers"] == rj.default_submitter_template(raw["spec"]["rayClusterSpec"])["spec"][
        "containers"], "KubeRay's default submitter, the head's image"
    http = raw_job(group("w", 2), mode="HTTPMode")
    assert "submitterPodTemplate" not in rj.start_patch(http, infos[:2])["spec"], "no submitter Job: none written"


def test_stop_suspends_and_restores_each_template_as_its_workload_recorded_it() -> None:
    raw = raw_cluster(group("w", 2, node_selector={"pool": "w"}), suspend=False,
                      head=template(node_selector={"pool": "h", "zone": "a"}))
    saved = [o.PodSet(name="head", count=1, template=o.PodTemplateSpec(spec=o.PodSpec(node_selector={"zone": "a"}))),
             o.PodSet(name="w", count=2)]
    patch = rc.stop_patch(raw, saved)
    assert patch["spec"]["suspend"] is True
    assert patch["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": None}
    assert "nodeSelector" not in patch["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    started = rc.start_patch(raw_cluster(group("w")), [podsetinfo.PodSetInfo(), podsetinfo.PodSetInfo()])
    assert started["spec"] == {"suspend": False}, "nothing to merge: only the flag"


def test_merge_diff_nulls_what_is_gone_and_writes_lists_whole() -> None:
    before = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "same"}
    after = {"a": {"b": 1}, "l": [1], "k": "same", "n": {}}
    assert rc.merge_diff(before, after) == {"a": {"c": None}, "l": [1], "n": {}}


# --- what its status says ---------------------------------------------------------------------------------------


def _job_status(**status: Any) -> rj.RayJob:
    return job_view({**raw_job(group("w")), "status": status})


def test_a_rayjob_finishes_when_its_deployment_completes_or_fails() -> None:
    """Kueue's ``Finished``: deployment ``Complete``/``Failed``; success is the job status ``SUCCEEDED``."""
    assert rj.finished(_job_status(jobDeploymentStatus="Running", jobStatus="RUNNING")) is None
    assert rj.finished(_job_status(jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", message="ok")) == (
        "Succeeded", "ok")
    assert rj.finished(_job_status(jobDeploymentStatus="Failed", jobStatus="FAILED", message="boom")) == (
        "Failed", "boom")
    assert rj.finished(_job_status(jobDeploymentStatus="Complete", jobStatus="STOPPED")) == ("Failed", "")


def test_a_rayjob_kuberay_rejects_before_making_its_cluster_is_finished() -> None:
    """Kueue v0.20 (#13415): ``ValidationFailed`` with no ``rayClusterName`` is finished (failed), so its Workload
    gives its quota back; with a cluster already made, KubeRay's status is not final and it is not."""
    assert rj.finished(_job_status(jobDeploymentStatus="ValidationFailed", message="bad spec")) == (
        "Failed", "bad spec")
    assert rj.finished(_job_status(jobDeploymentStatus="ValidationFailed", rayClusterName="rc-1")) is None


def test_active_and_ready() -> None:
    # KubeRay's JobDeploymentStatusNew is the empty status: a RayJob it never reconciled (one handed to MultiKueue
    # on a manager) is not active, so it gets its Workload
    for status, active in (("Suspended", False), ("", False), ("Initializing", True), ("Running", True)):
        assert rj.is_active(_job_status(jobDeploymentStatus=status)) is active
    assert rj.pods_ready(_job_status(rayClusterStatus={"state": "ready"}))
    assert not rj.pods_ready(_job_status(rayClusterStatus={"state": "suspended"}))
    ready = cluster_view({**raw_cluster(group("w")), "status": {"state": "ready"}})
    assert rc.is_active(ready) and rc.pods_ready(ready) and rc.finished(ready) is None
    failed = cluster_view({**raw_cluster(group("w")), "status": {"state": "failed", "reason": "x"}})
    assert not rc.is_active(failed) and rc.finished(failed) is None, "a RayCluster never finishes"
