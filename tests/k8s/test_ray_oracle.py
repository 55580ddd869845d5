"""Kueue's own Ray and AppWrapper unit tests as the oracle (session 47): cases of Kueue's
``pkg/controller/jobs/raycluster/common_test.go`` (``TestBuildPodSets``, ``TestUpdatePodSets``,
``TestUpdateRayClusterSpecToRunWithPodSetsInfo``, ``TestRestorePodSetsInfo``,
``TestValidateCreateRayClusterSpec``), ``raycluster_controller_test.go``, ``raycluster_webhook_test.go``,
``rayjob_controller_test.go``
(``TestNodeSelectors``, ``Test_RayJobFinished``), ``rayservice_controller.go`` and
``appwrapper_controller_test.go`` / ``appwrapper_webhook_test.go``, each id naming Kueue's case, run against
kueue-es's own functions for the rule."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s import appwrapper as aw
from connectors.k8s import podsetinfo
from connectors.k8s import ray_webhook as rw
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from connectors.k8s import rayservice as rs
from events import objects as o
from events.errors import InvalidInput

Q = "kueue.x-k8s.io/queue-name"
ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
ELASTIC_GATE = {"ElasticJobsViaWorkloadSlices": True}


def _template(container: str, **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": container}], **spec}}


def _group(name: str, replicas: int | None = None, hosts: int = 0, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"groupName": name, "template": _template(name, **spec)}
    if replicas is not None:
        out["replicas"] = replicas
    if hosts:
        out["numOfHosts"] = hosts
    return out


def _spec(*groups: dict[str, Any], head: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"headGroupSpec": {"template": head or _template("head")}, "workerGroupSpecs": list(groups),
            **extra}


def _raw_cluster(spec: dict[str, Any], annotations: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "raycluster", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                            "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def _raw_job(spec: dict[str, Any], mode: str = "K8sJobMode", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                         "labels": {Q: "lq"}},
            "spec": {"submissionMode": mode, "shutdownAfterJobFinishes": True, "rayClusterSpec": spec,
                     **extra}}


def _counts(sets: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in sets]


# --- common_test.go TestBuildPodSets ------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "want"), [
    pytest.param(_spec(_group("workers", 3)), [("head", 1), ("workers", 3)],
                 id="TestBuildPodSets/basic spec with head and single worker group"),
    pytest.param(_spec(_group("group1", 2), _group("group2", 5)), [("head", 1), ("group1", 2), ("group2", 5)],
                 id="TestBuildPodSets/spec with multiple worker groups"),
    pytest.param(_spec(_group("workers")), [("head", 1), ("workers", 1)],
                 id="TestBuildPodSets/spec with worker group without replicas specified"),
    pytest.param(_spec(_group("workers", 3, hosts=2)), [("head", 1), ("workers", 6)],
                 id="TestBuildPodSets/spec with NumOfHosts > 1"),
])
def test_build_pod_sets_counts(spec: dict[str, Any], want: list[tuple[str, int]]) -> None:
    sets = rc.cluster_pod_sets(spec, tas=False, annotations={})
    assert _counts(sets) == want
    assert [ps["template"] for ps in sets[1:]] == [g["template"] for g in spec["workerGroupSpecs"]]


def _head_requests(spec: dict[str, Any], annotations: dict[str, str]) -> list[dict[str, Any]]:
    return rc.cluster_pod_sets(spec, tas=False, annotations=annotations)[0]["template"]["spec"]["containers"]


def test_build_pod_sets_gcs_fault_tolerance_folds_the_redis_cleanup_into_the_head_keeping_the_larger(
) -> None:
    """``TestBuildPodSets/spec with gcs fault tolerance``: head requests ``cpu: 1`` stay 1 (larger than the
    cleanup's 200m), ``memory: 256Mi`` added; labels kept; the worker group unchanged."""
    head = {"metadata": {"labels": {"ray.io/cluster": "raycluster"}},
            "spec": {"containers": [{"name": "head", "image": "rayproject/ray:2.0.0",
                                     "resources": {"requests": {"cpu": "1"}}}]}}
    spec = _spec(_group("workers", 1), head=head, gcsFaultToleranceOptions={"redisAddress": "redis:6379"})
    sets = rc.cluster_pod_sets(spec, tas=False, annotations={})
    assert sets[0]["template"]["metadata"] == {"labels": {"ray.io/cluster": "raycluster"}}
    assert sets[0]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "256Mi"}}
    assert sets[1]["template"] == spec["workerGroupSpecs"][0]["template"]
    assert spec["headGroupSpec"]["template"] == head, "the Ray object is left as written"


def test_build_pod_sets_gcs_fault_tolerance_annotation_requests_the_cleanup_on_a_bare_head() -> None:
    """``TestBuildPodSets/spec with gcs fault tolerance annotation``: ``ray.io/ft-enabled: "true"`` on the
    object, no worker group: only the head, requesting 200m and 256Mi."""
    head = {"spec": {"containers": [{"name": "head", "image": "rayproject/ray:2.0.0"}]}}
    sets = rc.cluster_pod_sets({"headGroupSpec": {"template": head}}, tas=False,
                               annotations={"ray.io/ft-enabled": "true"})
    assert _counts(sets) == [("head", 1)]
    assert sets[0]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "200m", "memory": "256Mi"}}


def test_build_pod_sets_gcs_fault_tolerance_and_missing_head_container_is_an_error() -> None:
    """``TestBuildPodSets/spec with gcs fault tolerance and missing head container``: ``wantErr``."""
    spec = {"gcsFaultToleranceOptions": {"redisAddress": "redis:6379"}, "headGroupSpec": {"template": {}}}
    with pytest.raises(InvalidInput, match="head pod template must include the Ray container"):
        rc.cluster_pod_sets(spec, tas=False, annotations={})


@pytest.mark.parametrize(("options", "want"), [
    pytest.param(None, {"requests": {"cpu": "500m", "memory": "512Mi"},
                        "limits": {"cpu": "500m", "memory": "512Mi"}},
                 id="TestBuildPodSets/autoscaler sidecar added to head podSet with default resources when "
                    "in-tree autoscaling is enabled"),
    pytest.param({"resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
                 {"requests": {"cpu": "250m", "memory": "256Mi"}},
                 id="TestBuildPodSets/autoscaler sidecar uses AutoscalerOptions.Resources override when set"),
])
def test_build_pod_sets_autoscaler_sidecar(options: dict[str, Any] | None, want: dict[str, Any]) -> None:
    extra: dict[str, Any] = {"enableInTreeAutoscaling": True}
    if options is not None:
        extra["autoscalerOptions"] = options
    containers = _head_requests(_spec(_group("workers", 1), **extra), {})
    assert containers == [{"name": "head"}, {"name": "autoscaler", "resources": want}]


# --- common_test.go TestUpdatePodSets (the live RayCluster's worker counts) ---------------------------------


def _live(*groups: dict[str, Any]) -> rc.RayCluster:
    return msgspec.convert(_raw_cluster(_spec(*groups)), rc.RayCluster)


def _own(autoscaling: bool | None = True) -> rc.RayClusterSpec:
    extra = {} if autoscaling is None else {"enableInTreeAutoscaling": autoscaling}
    return msgspec.convert(_spec(_group("workers-group-0", 3), **extra), rc.RayClusterSpec)


@pytest.mark.parametrize(("own", "live", "want"), [
    pytest.param(_own(False), _live(_group("workers-group-0", 5)), {"head": 1, "workers-group-0": 3},
                 id="TestUpdatePodSets/autoscaling disabled - no update"),
    pytest.param(_own(), None, {"head": 1, "workers-group-0": 3},
                 id="TestUpdatePodSets/empty rayClusterName - no update"),
    pytest.param(_own(), _live(_group("workers-group-0", 5)), {"head": 1, "workers-group-0": 5},
                 id="TestUpdatePodSets/successful update from RayCluster"),
    pytest.param(_own(), _live(_group("workers-group-0", 4, hosts=2)), {"head": 1, "workers-group-0": 8},
                 id="TestUpdatePodSets/successful update with NumOfHosts"),
    pytest.param(_own(), _live(_group("workers-group-0")), {"head": 1, "workers-group-0": 3},
                 id="UpdatePodSets: a live worker group without replicas leaves the count"),
    pytest.param(_own(), _live(_group("different-group-name", 5)), None,
                 id="TestUpdatePodSets/podset name mismatch"),
])
def test_update_pod_sets_from_the_live_cluster(own: rc.RayClusterSpec, live: rc.RayCluster | None,
                                               want: dict[str, int] | None) -> None:
    assert rc.autoscaled_counts(own, live) == want


# --- common_test.go TestUpdateRayClusterSpecToRunWithPodSetsInfo --------------------------------------------


TOL1 = o.Toleration(key="key1", operator="Equal", value="value1", effect="NoSchedule")
TOL2 = o.Toleration(key="key2", operator="Equal", value="value2", effect="NoExecute")


@pytest.mark.parametrize(("groups", "infos", "want_head", "want_workers"), [
    pytest.param(
        ["workers"], [podsetinfo.PodSetInfo(node_selector={"node-type": "head"}),
                      podsetinfo.PodSetInfo(node_selector={"node-type": "worker"})],
        {"spec": {"containers": [{"name": "head"}], "nodeSelector": {"node-type": "head"}}},
        [{"spec": {"containers": [{"name": "workers"}], "nodeSelector": {"node-type": "worker"}}}],
        id="TestUpdateRayClusterSpecToRunWithPodSetsInfo/basic update with node selector"),
    pytest.param(
        ["workers"], [podsetinfo.PodSetInfo(labels={"head-label": "value1"}, tolerations=[TOL1]),
                      podsetinfo.PodSetInfo(labels={"worker-label": "value2"}, tolerations=[TOL2])],
        {"metadata": {"labels": {"head-label": "value1"}},
         "spec": {"containers": [{"name": "head"}], "tolerations": [msgspec.to_builtins(TOL1)]}},
        [{"metadata": {"labels": {"worker-label": "value2"}},
          "spec": {"containers": [{"name": "workers"}], "tolerations": [msgspec.to_builtins(TOL2)]}}],
        id="TestUpdateRayClusterSpecToRunWithPodSetsInfo/update with tolerations and labels"),
    pytest.param(
        ["workers1", "workers2"], [podsetinfo.PodSetInfo(node_selector={"node-type": n})
                                   for n in ("head", "worker1", "worker2")],
        {"spec": {"containers": [{"name": "head"}], "nodeSelector": {"node-type": "head"}}},
        [{"spec": {"containers": [{"name": n}], "nodeSelector": {"node-type": t}}}
         for n, t in (("workers1", "worker1"), ("workers2", "worker2"))],
        id="TestUpdateRayClusterSpecToRunWithPodSetsInfo/update multiple worker groups"),
])
def test_run_with_pod_sets_info(groups: list[str], infos: list[podsetinfo.PodSetInfo],
                                want_head: dict[str, Any], want_workers: list[dict[str, Any]]) -> None:
    raw = _raw_cluster(_spec(*(_group(g) for g in groups), suspend=True))
    before = copy.deepcopy(raw)
    spec = rc.start_templates(raw["spec"], infos)
    assert spec["headGroupSpec"]["template"] == want_head
    assert [g["template"] for g in spec["workerGroupSpecs"]] == want_workers
    assert raw == before, "the object read is not changed"
    assert rc.start_patch(raw, infos)["spec"]["suspend"] is False


# --- common_test.go TestRestorePodSetsInfo, and the count check of RestorePodSetsInfo -----------------------


def _saved(*names_and_selectors: tuple[str, dict[str, str]]) -> list[o.PodSet]:
    return [o.PodSet(name=n, count=1, template=o.PodTemplateSpec(spec=o.PodSpec(node_selector=sel)))
            for n, sel in names_and_selectors]


def test_restore_with_different_node_selector() -> None:
    """``TestRestorePodSetsInfo/restore with different node selector``: each template's node selector set back
    to the recorded (empty) one."""
    raw = _raw_cluster(_spec(_group("workers", nodeSelector={"node-type": "worker"}),
                             head=_template("head", nodeSelector={"node-type": "head"}), suspend=False))
    spec = rc.restored_templates(raw["spec"], _saved(("head", {}), ("workers", {})))
    assert spec["headGroupSpec"]["template"] == {"spec": {"containers": [{"name": "head"}]}}
    assert spec["workerGroupSpecs"][0]["template"]["spec"] == {"containers": [{"name": "workers"}]}


def test_no_changes_when_no_restoration_needed() -> None:
    """``TestRestorePodSetsInfo/no changes when no restoration needed``: the stop patch only suspends."""
    raw = _raw_cluster(_spec(_group("workers"), suspend=False))
    assert rc.stop_patch(raw, _saved(("head", {}), ("workers", {})))["spec"] == {"suspend": True}


def test_raycluster_restore_is_skipped_when_the_pod_set_count_differs() -> None:
    """Kueue's ``raycluster.RestorePodSetsInfo`` (common.go): "Skipping pod set info restore because the pod
    set count does not match the admitted workload" — with a worker group added since admission, no template
    is given back anything; the object is only suspended."""
    raw = _raw_cluster(_spec(_group("workers", nodeSelector={"pool": "w"}), _group("extra"),
                             head=_template("head", nodeSelector={"pool": "h"}), suspend=False))
    assert rc.stop_patch(raw, _saved(("head", {}), ("workers", {})))["spec"] == {"suspend": True}


def test_raycluster_restore_is_by_position_head_first() -> None:
    """Kueue's ``raycluster.RestorePodSetsInfo`` gives the head ``podSetsInfo[0]`` and worker group ``i``
    ``podSetsInfo[i+1]``, by position (the infos come from the Workload's pod sets in order), not by name."""
    raw = _raw_cluster(_spec(_group("renamed", nodeSelector={"pool": "w"}),
                             head=_template("head", nodeSelector={"pool": "h"}), suspend=False))
    spec = rc.stop_patch(raw, _saved(("head", {"zone": "a"}), ("workers", {"zone": "b"})))["spec"]
    assert spec["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": None, "zone": "a"}
    assert spec["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {"zone": "b"}


def test_rayjob_restore_is_skipped_when_the_pod_set_count_differs() -> None:
    """Kueue's ``RayJob.RestorePodSetsInfo``: the expected count is the cluster's pod sets plus the submitter
    in ``K8sJobMode``; another count restores nothing, the submitter's template neither."""
    submitter = _template("s", nodeSelector={"pool": "s"})
    raw = _raw_job(_spec(_group("workers", nodeSelector={"pool": "w"}), head=_template("head", nodeSelector={
        "pool": "h"})), submitterPodTemplate=submitter, suspend=False)
    assert rj.stop_patch(raw, _saved(("head", {}), ("workers", {})))["spec"] == {"suspend": True}
    full = rj.stop_patch(raw, _saved(("head", {}), ("workers", {}), ("submitter", {})))["spec"]
    assert full["submitterPodTemplate"]["spec"] == {"nodeSelector": None}
    assert full["rayClusterSpec"]["headGroupSpec"]["template"]["spec"] == {"nodeSelector": None}


def test_rayservice_restore_is_skipped_when_the_pod_set_count_differs() -> None:
    """Kueue's ``RayService.RestorePodSetsInfo``: a count other than the worker groups plus the head restores
    nothing."""
    raw = {"apiVersion": "ray.io/v1", "kind": "RayService",
           "metadata": {"name": "svc", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
           "spec": {"rayClusterConfig": _spec(_group("workers", nodeSelector={"pool": "w"}), _group("extra"),
                                              suspend=False)}}
    assert rs.stop_patch(raw, _saved(("head", {}), ("workers", {})))["spec"] == {
        "rayClusterConfig": {"suspend": True}}


# --- rayjob_controller_test.go TestNodeSelectors ------------------------------------------------------------


def test_rayjob_node_selectors_valid_configuration_run_then_restore() -> None:
    """``TestNodeSelectors/valid configuration`` (HTTPMode-free builder: no submitter): run adds the head's
    new key, keeps the worker groups' own; restore gives back exactly the recorded selectors."""
    spec = _spec({"groupName": "", "template": {"spec": {"nodeSelector": {"key-wg1": "value-wg1"}}}},
                 {"groupName": "", "template": {"spec": {"nodeSelector": {"key-wg2": "value-wg2"}}}},
                 head={"spec": {"nodeSelector": {}}})
    raw = _raw_job(spec, mode="HTTPMode")
    infos = [podsetinfo.PodSetInfo(node_selector={"newKey": "newValue"}),
             podsetinfo.PodSetInfo(node_selector={"key-wg1": "value-wg1"}), podsetinfo.PodSetInfo()]
    started = rj.start_patch(raw, infos)["spec"]["rayClusterSpec"]
    assert started["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"newKey": "newValue"}
    assert "workerGroupSpecs" not in started, "the worker groups' selectors already hold what the infos add"


def test_rayjob_node_selectors_invalid_run_info_conflicts() -> None:
    """``TestNodeSelectors/invalid runInfo``: a worker selector key with another value cannot be merged
    (``ErrInvalidPodsetInfo`` in the test's version; a conflict either way), and nothing is written."""
    spec = _spec({"groupName": "", "template": {"spec": {"nodeSelector": {"key-wg1": "value-wg1"}}}},
                 head={"spec": {"nodeSelector": {}}})
    raw = _raw_job(spec, mode="HTTPMode")
    before = copy.deepcopy(raw)
    with pytest.raises(podsetinfo.MergeConflict):
        rj.start_patch(raw, [podsetinfo.PodSetInfo(node_selector={"newKey": "newValue"}),
                             podsetinfo.PodSetInfo(node_selector={"key-wg1": "updated-value-wg1"})])
    assert raw == before


# --- rayjob_controller_test.go Test_RayJobFinished ----------------------------------------------------------


@pytest.mark.parametrize(("job_status", "deployment", "want"), [
    pytest.param("RUNNING", "Running", None,
                 id="Test_RayJobFinished/jobStatus=Running, jobDeploymentStatus=Running"),
    pytest.param("SUCCEEDED", "Complete", "Succeeded",
                 id="Test_RayJobFinished/jobStatus=Succeeded, jobDeploymentStatus=Complete"),
    pytest.param("FAILED", "Complete", "Failed",
                 id="Test_RayJobFinished/jobStatus=Failed, jobDeploymentStatus=Complete"),
    pytest.param("FAILED", "Failed", "Failed",
                 id="Test_RayJobFinished/jobStatus=Failed, jobDeploymentStatus=Failed"),
    pytest.param("RUNNING", "Failed", "Failed",
                 id="Test_RayJobFinished/jobStatus=Running, jobDeploymentStatus=Failed (when "
                    "activeDeadlineSeconds is exceeded)"),
])
def test_rayjob_finished(job_status: str, deployment: str, want: str | None) -> None:
    raw = {**_raw_job(_spec()), "status": {"jobStatus": job_status, "jobDeploymentStatus": deployment}}
    got = rj.finished(msgspec.convert(raw, rj.RayJob))
    assert (got[0] if got else None) == want


def test_a_rayservice_is_never_finished_whatever_its_status() -> None:
    """Kueue's ``RayService.Finished``: "Running", not successful, never finished."""
    raw = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "svc", "namespace": "ns"},
           "spec": {"rayClusterConfig": _spec()},
           "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Failed"}]}}
    assert rs.finished(msgspec.convert(raw, rs.RayService)) is None


# --- common_test.go TestValidateCreateRayClusterSpec, through the RayJob webhook's create rules -------------


def _webhook_job(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    raw = _raw_job(spec)
    if annotations:
        raw["metadata"]["annotations"] = annotations
    return raw


def _many(n: int, first: str | None = None) -> list[dict[str, Any]]:
    groups = [_group(f"workers{i + 1}") for i in range(n)]
    if first is not None:
        groups[0] = _group(first)
    return groups


AUTOSCALING = ("spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should "
               "only use autoscaling when workload slicing is enabled")
TOO_MANY = "spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items"
HEAD_NAME = ('spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head '
             'group')


@pytest.mark.parametrize(("spec", "annotations", "want"), [
    pytest.param(_spec(_group("workers")), None, [], id="TestValidateCreateRayClusterSpec/valid spec"),
    pytest.param(_spec(_group("workers"), enableInTreeAutoscaling=True), None, [AUTOSCALING],
                 id="TestValidateCreateRayClusterSpec/autoscaling enabled without workload slicing"),
    pytest.param(_spec(_group("workers"), enableInTreeAutoscaling=True), ELASTIC, [],
                 id="TestValidateCreateRayClusterSpec/autoscaling enabled with workload slicing"),
    pytest.param(_spec(*_many(18)), None, [TOO_MANY],
                 id="TestValidateCreateRayClusterSpec/too many worker groups"),
    pytest.param(_spec(_group("head")), None, [HEAD_NAME],
                 id="TestValidateCreateRayClusterSpec/worker group named 'head'"),
    pytest.param(_spec(*_many(18, first="head"), enableInTreeAutoscaling=True), None,
                 [AUTOSCALING, TOO_MANY, HEAD_NAME], id="TestValidateCreateRayClusterSpec/multiple errors"),
])
def test_validate_create_ray_cluster_spec(spec: dict[str, Any], annotations: dict[str, str] | None,
                                          want: list[str]) -> None:
    assert rw.rayjob_create_errors(_webhook_job(spec, annotations), ELASTIC_GATE) == want


# --- raycluster_webhook_test.go TestValidateCreate (TAS) ----------------------------------------------------

TAS = {"TopologyAwareScheduling": True}
REQ, PREF = "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQ, SLICE_SIZE = "kueue.x-k8s.io/podset-slice-required-topology", "kueue.x-k8s.io/podset-slice-size"
GROUP = "kueue.x-k8s.io/podset-group-name"
MORE_THAN_ONE = ('must not contain more than one topology annotation: '
                 '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
                 '"kueue.x-k8s.io/podset-unconstrained-topology"]')
HEAD_AT = "spec.headGroupSpec.template.metadata.annotations"


def _annotated(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "c"}]}}


def _wg(name: str, annotations: dict[str, str] | None = None, replicas: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"groupName": name,
                           "template": _annotated(annotations) if annotations else _template(name)}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def _queued_cluster(head: dict[str, str] | None, *groups: dict[str, Any]) -> dict[str, Any]:
    return _raw_cluster({"headGroupSpec": {"template": _annotated(head) if head else _template("head")},
                         "workerGroupSpecs": list(groups)}, labels={Q: "queue"})


@pytest.mark.parametrize(("cluster", "want"), [
    pytest.param(_queued_cluster({REQ: "cloud.com/block"}, _wg("wg1", {REQ: "cloud.com/block"}),
                                 _wg("wg2", {PREF: "cloud.com/block"}), _wg("wg3")), [],
                 id="raycluster_webhook TestValidateCreate/valid topology request"),
    pytest.param(_queued_cluster({PREF: "cloud.com/block", REQ: "cloud.com/block"},
                                 _wg("wg1", {PREF: "cloud.com/block", REQ: "cloud.com/block"})),
                 [f"{HEAD_AT}: Invalid value: {MORE_THAN_ONE}",
                  f"spec.workerGroupSpecs[0].template.metadata.annotations: Invalid value: {MORE_THAN_ONE}"],
                 id="raycluster_webhook TestValidateCreate/invalid topology request"),
    pytest.param(_queued_cluster({REQ: "cloud.com/block", SLICE_REQ: "cloud.com/block", SLICE_SIZE: "2"},
                                 _wg("wg1", {REQ: "cloud.com/block", SLICE_REQ: "cloud.com/block",
                                             SLICE_SIZE: "10"}, 5),
                                 _wg("wg2", {REQ: "cloud.com/block", SLICE_REQ: "cloud.com/block",
                                             SLICE_SIZE: "20"}, 10)),
                 [f'{HEAD_AT}[{SLICE_SIZE}]: Invalid value: "2": must not be greater than pod set count 1',
                  f"spec.workerGroupSpecs[0].template.metadata.annotations[{SLICE_SIZE}]: "
                  "Invalid value: \"10\": must not be greater than pod set count 5",
                  f"spec.workerGroupSpecs[1].template.metadata.annotations[{SLICE_SIZE}]: "
                  "Invalid value: \"20\": must not be greater than pod set count 10"],
                 id="raycluster_webhook TestValidateCreate/invalid slice topology request - slice size "
                    "larger than number of podsets"),
    pytest.param(_queued_cluster({GROUP: "1podset", REQ: "b"},
                                 *(_wg(f"wg{i}", {GROUP: "3podsets", REQ: "b"}, r)
                                   for i, r in ((1, 5), (2, 10), (3, 10)))),
                 [f'{HEAD_AT}[{GROUP}]: Invalid value: "1podset": can only define groups of exactly 2 pod '
                  "sets, got: 1 pod set(s)",
                  *(f"spec.workerGroupSpecs[{i}].template.metadata.annotations[{GROUP}]: Invalid value: "
                    '"3podsets": can only define groups of exactly 2 pod sets, got: 3 pod set(s)'
                    for i in range(3))],
                 id="raycluster_webhook TestValidateCreate/invalid PodSet grouping request - groups of size "
                    "other than 2 (each member with a required level: the newest Kueue keeps a group name "
                    "only then)"),
    pytest.param(_queued_cluster(None, _wg("wg1", {GROUP: "groupname", REQ: "b"}, 5),
                                 _wg("wg2", {GROUP: "groupname", REQ: "b"}, 10)),
                 [f"spec.workerGroupSpecs[{i}].template.metadata.annotations[{GROUP}]: "
                  "Invalid value: \"groupname\": can only define groups where at least one pod set has only "
                  "1 replica, got: 5 replica(s) and 10 replica(s) in the group" for i in range(2)],
                 id="raycluster_webhook TestValidateCreate/invalid PodSet grouping request - no leader in "
                    "group"),
    pytest.param(_queued_cluster({GROUP: "groupname", REQ: "cloud.com/block"},
                                 _wg("wg1", {GROUP: "groupname", REQ: "cloud.com/rack"}, 5)),
                 [f"{HEAD_AT}: Invalid value: must specify '{REQ}' or '{PREF}' topology consistent with "
                  "'spec.workerGroupSpecs[0].template.metadata.annotations' in group 'groupname'",
                  "spec.workerGroupSpecs[0].template.metadata.annotations: Invalid value: must specify "
                  f"'{REQ}' or '{PREF}' topology consistent with '{HEAD_AT}' in group 'groupname'"],
                 id="raycluster_webhook TestValidateCreate/invalid PodSet grouping request - required "
                    "topology does not match (the newest tas_validation.go "
                    "ValidatePodSetGroupingTopology words)"),
])
def test_raycluster_webhook_topology(cluster: dict[str, Any], want: list[str]) -> None:
    assert rw.raycluster_create_errors(cluster, TAS) == want


# --- appwrapper_controller_test.go / appwrapper_webhook_test.go ---------------------------------------------


def _aw(*components: dict[str, Any], phase: str = "", conditions: list[dict[str, Any]] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "aw", "namespace": "ns", "uid": "u", "resourceVersion": "1"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "metadata": meta,
            "spec": {"components": [{"template": c} for c in components]},
            "status": {"phase": phase, "conditions": conditions or []}}


def _pytorch(annotations: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    def replica(kind: str, count: int) -> dict[str, Any]:
        template: dict[str, Any] = {"spec": {"containers": [{"name": "pytorch", "image": "p"}]}}
        if annotations and kind in annotations:
            template["metadata"] = {"annotations": annotations[kind]}
        return {"replicas": count, "template": template}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pytorchjob"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica("Master", 1), "Worker": replica("Worker", 4)}}}


BATCH_JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
             "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def test_appwrapper_pod_sets_no_annotations() -> None:
    """``appwrapper_controller_test.go TestPodSets/no annotations``: a PyTorchJob's Master (1) and Worker (4),
    then a Job of parallelism 2, named ``aw-<i>``."""
    assert _counts(aw.pod_sets(_aw(_pytorch(), BATCH_JOB), tas=False)) == [("aw-0", 1), ("aw-1", 4),
                                                                           ("aw-2", 2)]


def test_appwrapper_pod_sets_with_required_and_preferred_topology_annotation() -> None:
    """``TestPodSets/with required and preferred topology annotation``: under TAS each pod set asks for its
    template's topology with the PyTorchJob's replica-index label."""
    sets = aw.pod_sets(_aw(_pytorch({"Master": {REQ: "cloud.com/rack"},
                                     "Worker": {PREF: "cloud.com/block"}})),
                       tas=True)
    assert [ps["topologyRequest"] for ps in sets] == [
        {"required": "cloud.com/rack", "podIndexLabel": "training.kubeflow.org/replica-index"},
        {"preferred": "cloud.com/block", "podIndexLabel": "training.kubeflow.org/replica-index"}]


@pytest.mark.parametrize(("phase", "conditions", "want"), [
    pytest.param("Succeeded", [], ("Succeeded", "AppWrapper finished successfully"),
                 id="AppWrapper.Finished: Succeeded"),
    pytest.param("Failed", [{"type": "ResourcesDeployed", "status": "True"}], None,
                 id="AppWrapper.Finished: Failed, still deleting resources"),
    pytest.param("Failed", [{"type": "ResourcesDeployed", "status": "False"}],
                 ("Failed", "AppWrapper failed"), id="AppWrapper.Finished: Failed"),
    pytest.param("Running", [], None, id="AppWrapper.Finished: Running"),
])
def test_appwrapper_finished(phase: str, conditions: list[dict[str, Any]],
                             want: tuple[str, str] | None) -> None:
    view = msgspec.convert(_aw(BATCH_JOB, phase=phase, conditions=conditions), aw.AppWrapper)
    assert aw.finished(view) == want


# --- pkg/podset BadPodSetsInfoLenError, as the Ray integrations' RunWithPodSetsInfo report it ---------------


def test_ray_pod_sets_the_admission_does_not_number_are_reported_in_kueues_words() -> None:
    """Kueue's ``RunWithPodSetsInfo`` (RayCluster, RayJob, RayService) returns
    ``podset.BadPodSetsInfoLenError(expectedLen, len(podSetsInfo))``, whose text is ``"expecting %d podset,
    got %d"`` over ``got, want`` (pkg/podset/podset.go): a RayCluster of head and one worker group (2
    expected) given 1 assignment says "expecting 1 podset, got 2"."""
    from types import SimpleNamespace

    from projections.cluster import ClusterState

    wl = SimpleNamespace(admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="head", flavors={}, count=1)]), check_states={})
    cluster = msgspec.convert(_raw_cluster(_spec(_group("workers"))), rc.RayCluster)
    with pytest.raises(rc.BadPodSets) as raised:
        rc.start_infos(ClusterState(), wl, cluster)
    assert str(raised.value) == "expecting 1 podset, got 2"


# --- rayjob_webhook_test.go TestValidateCreate / TestValidateUpdate -----------------------------------------

SHUTDOWN = ("spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the "
            "cluster after finishing")


def _webhook_rayjob(labels: dict[str, str], shutdown: bool = True, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job", "namespace": "ns",
                                                                       "labels": labels},
            "spec": {"shutdownAfterJobFinishes": shutdown, **spec}}


@pytest.mark.parametrize(("job", "without_queue", "want"), [
    pytest.param(_webhook_rayjob({}, False, rayClusterSpec=_spec()), False, [],
                 id="rayjob_webhook TestValidateCreate/invalid unmanaged"),
    pytest.param(_webhook_rayjob({}, False, rayClusterSpec=_spec()), True, [SHUTDOWN],
                 id="rayjob_webhook TestValidateCreate/invalid managed - by config"),
    pytest.param(_webhook_rayjob({Q: "queue"}, False, rayClusterSpec=_spec()), False, [SHUTDOWN],
                 id="rayjob_webhook TestValidateCreate/invalid managed - by queue"),
    pytest.param(_webhook_rayjob({Q: "queue"}, rayClusterSpec=_spec(), clusterSelector={"k1": "v1"}), False,
                 ['spec.clusterSelector: Invalid value: map[string]string{"k1":"v1"}: a kueue managed job '
                  "should not use an existing cluster"],
                 id="rayjob_webhook TestValidateCreate/invalid managed - has cluster selector (and a cluster "
                    "spec)"),
    pytest.param(_webhook_rayjob({Q: "queue"}, False, clusterSelector={"k1": "v1"}), False, [],
                 id="rayjob_webhook (#7219): a cluster selector alone is not Kueue's: nothing else checked"),
    pytest.param(_webhook_rayjob({Q: "queue"}), False,
                 ["spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs "
                  "that don't use clusterSelector"],
                 id="rayjob_webhook: neither a cluster selector nor a cluster spec"),
])
def test_rayjob_webhook_create(job: dict[str, Any], without_queue: bool, want: list[str]) -> None:
    assert rw.rayjob_create_errors(job, {}, without_queue) == want


def test_rayjob_webhook_update_invalid_new_managed_by_config() -> None:
    """``rayjob_webhook_test.go TestValidateUpdate/invalid new managed - by config``: under
    ``manageJobsWithoutQueueName`` an update's new object is held to the create rules."""
    old = _webhook_rayjob({}, True, rayClusterSpec=_spec())
    new = _webhook_rayjob({}, False, rayClusterSpec=_spec())
    kind = rw.rayjob_kind(without_queue=True)
    assert kind.update_errors(old, new, {}, False) == [SHUTDOWN]
    assert rw.rayjob_kind().update_errors(old, new, {}, False) == [], "TestValidateUpdate/invalid unmanaged"
