"""Kueue's RayJob and RayCluster webhooks (``mrayjob``/``vrayjob``, ``mraycluster``/``vraycluster``) as its
``rayjob_webhook.go``, ``raycluster_webhook.go`` and ``common.go``: a queued one stored with ``spec.suspend: true``
(a RayJob's RayCluster left to it), the Ray rules in Kueue's words, the TAS annotations at Kueue's paths, the
registration; and the Pod webhook leaving a RayCluster's Pods to it."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import ray_webhook as rw
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
FRAMEWORKS = ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]
CONFIG = load_config({"integrations": {"frameworks": FRAMEWORKS}})
JOBS, CLUSTERS = rw.RayWebhooks.of(CONFIG, clusters=False), rw.RayWebhooks.of(CONFIG, clusters=True)
ALL = load_config({"integrations": {"frameworks": FRAMEWORKS}, "manageJobsWithoutQueueName": True})
ALL_JOBS, ALL_CLUSTERS = rw.RayWebhooks.of(ALL, clusters=False), rw.RayWebhooks.of(ALL, clusters=True)
TAS = load_config({"integrations": {"frameworks": FRAMEWORKS}, "featureGates": {"TopologyAwareScheduling": True}})


def _cluster_spec(groups: int = 1, *, names: tuple[str, ...] = (), annotations: dict | None = None,
                  replicas: int = 2, autoscaling: bool | None = None) -> dict:
    template: dict = {"spec": {"containers": [{"name": "ray", "image": "ray"}]}}
    worker = {**template, "metadata": {"annotations": annotations}} if annotations else template
    spec: dict = {"headGroupSpec": {"template": template},
                  "workerGroupSpecs": [{"groupName": (names[i] if i < len(names) else f"g{i}"), "replicas": replicas,
                                        "template": worker} for i in range(groups)]}
    if autoscaling is not None:
        spec["enableInTreeAutoscaling"] = autoscaling
    return spec


def _rayjob(labels: dict | None = None, *, shutdown: bool = True, selector: dict | None = None,
            cluster: dict | None | bool = True, annotations: dict | None = None, suspend: bool | None = None) -> dict:
    meta: dict = {"name": "job", "namespace": "team", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    spec: dict = {"shutdownAfterJobFinishes": shutdown}
    if cluster is True:
        spec["rayClusterSpec"] = _cluster_spec()
    elif isinstance(cluster, dict):
        spec["rayClusterSpec"] = cluster
    if selector:
        spec["clusterSelector"] = selector
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}


def _raycluster(labels: dict | None = None, owner: dict | None = None, **kw: Any) -> dict:
    meta: dict = {"name": "rc", "namespace": "team", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": _cluster_spec(**kw)}


def _mutate(obj: dict, settings: rw.RayWebhooks, path: str) -> list[dict]:
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return False

    reviews = rw.reviewers(settings, settings, namespace_labels, has_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[path](body))["response"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _refusal(new: dict, old: dict | None = None, settings: rw.RayWebhooks = JOBS, *,
             default_queue: bool = False) -> str | None:
    async def has_default_queue(name: str) -> bool:
        return default_queue

    reviews = rw.reviewers(settings, settings, None, has_default_queue)  # type: ignore[arg-type]
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    path = rw.RAYJOB_KIND.validating_path if new["kind"] == "RayJob" else rw.RAYCLUSTER_KIND.validating_path
    response = asyncio.run(reviews[path](msgspec.json.encode({"request": request})))["response"]
    return response["status"]["message"] if "status" in response else None


# --- defaulting -------------------------------------------------------------------------------------------------


def test_a_queued_rayjob_or_raycluster_created_running_is_suspended() -> None:
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert _mutate(_rayjob({Q: "lq"}), JOBS, rw.RAYJOB_KIND.mutating_path) == suspend
    assert _mutate(_rayjob({Q: "lq"}, suspend=False), JOBS, rw.RAYJOB_KIND.mutating_path) == [
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert _mutate(_rayjob({"app": "x"}), JOBS, rw.RAYJOB_KIND.mutating_path) == []
    assert _mutate(_raycluster({Q: "lq"}), CLUSTERS, rw.RAYCLUSTER_KIND.mutating_path) == suspend


def test_a_rayjobs_raycluster_is_left_to_the_rayjob_with_its_integration_on() -> None:
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": "u", "controller": True}
    assert _mutate(_raycluster({Q: "lq"}, owner), CLUSTERS, rw.RAYCLUSTER_KIND.mutating_path) == []
    assert _mutate(_raycluster(owner=owner), ALL_CLUSTERS, rw.RAYCLUSTER_KIND.mutating_path) == []
    only = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": ["ray.io/raycluster"]}}), clusters=True)
    assert _mutate(_raycluster({Q: "lq"}, owner), only, rw.RAYCLUSTER_KIND.mutating_path) != []


# --- validation -------------------------------------------------------------------------------------------------


def test_an_unmanaged_rayjob_is_not_checked_and_a_managed_one_must_delete_its_cluster() -> None:
    """Kueue's "invalid unmanaged" / "invalid managed - by queue" / "- by config" cases."""
    assert _refusal(_rayjob(shutdown=False)) is None
    want = "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster after " \
           "finishing"
    assert _refusal(_rayjob({Q: "lq"}, shutdown=False)) == want
    assert _refusal(_rayjob(shutdown=False), settings=ALL_JOBS) == want


def test_a_managed_rayjobs_cluster_selector_and_cluster_spec() -> None:
    """Both: refused (nothing else checked); the selector alone: not Kueue's, allowed; neither: required."""
    assert _refusal(_rayjob({Q: "lq"}, selector={"k1": "v1"}, shutdown=False)) == (
        'spec.clusterSelector: Invalid value: map[string]string{"k1":"v1"}: a kueue managed job should not use an '
        "existing cluster")
    assert _refusal(_rayjob({Q: "lq"}, selector={"k1": "v1"}, cluster=None, shutdown=False)) is None
    assert _refusal(_rayjob({Q: "lq"}, cluster=None)) == (
        "spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that don't use "
        "clusterSelector")


def test_autoscaling_only_for_an_elastic_job_at_most_seventeen_worker_groups_none_named_head() -> None:
    assert _refusal(_rayjob({Q: "lq"}, cluster=_cluster_spec(autoscaling=True))) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
        "autoscaling when workload slicing is enabled")
    elastic = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                             "featureGates": {"ElasticJobsViaWorkloadSlices": True}}), clusters=False)
    assert _refusal(_rayjob({Q: "lq"}, cluster=_cluster_spec(autoscaling=True),
                            annotations={"kueue.x-k8s.io/elastic-job": "true"}), settings=elastic) is None
    gate_off = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                              "featureGates": {"ElasticJobsViaWorkloadSlices": False}}),
                                 clusters=False)
    assert _refusal(_rayjob({Q: "lq"}, cluster=_cluster_spec(autoscaling=True),
                            annotations={"kueue.x-k8s.io/elastic-job": "true"}), settings=gate_off) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
        "autoscaling when workload slicing is enabled"), "Kueue v0.20's workloadslicing.Enabled: the annotation alone " \
        "is not elastic"
    assert _refusal(_rayjob({Q: "lq"}, cluster=_cluster_spec(17))) is None, "17 worker groups and the head: 18 pod sets"
    assert _refusal(_rayjob({Q: "lq"}, cluster=_cluster_spec(18))) == (
        "spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items"), "Kueue counts pod sets"
    assert _refusal(_raycluster({Q: "lq"}, groups=18), settings=CLUSTERS) == (
        "spec.workerGroupSpecs: Too many: 19: must have at most 18 items")
    assert _refusal(_raycluster({Q: "lq"}, names=("x", "head"), groups=2), settings=CLUSTERS) == (
        'spec.workerGroupSpecs[1].groupName: Forbidden: "head" is reserved for the head group')
    assert _refusal(_raycluster({Q: "lq"}, autoscaling=True), settings=CLUSTERS) == (
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use in-tree autoscaling "
        "only as an elastic job: enable the ElasticJobsViaWorkloadSlices feature gate and set the "
        '"kueue.x-k8s.io/elastic-job": "true" annotation')
    assert _refusal(_raycluster(autoscaling=True), settings=CLUSTERS) is None, "not Kueue's: not checked"


def test_a_running_rayjobs_queue_name_is_immutable() -> None:
    old = _rayjob({Q: "lq"}, suspend=False)
    assert _refusal(_rayjob({Q: "other"}, suspend=False), old) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable')
    assert _refusal(_rayjob({Q: "other"}, suspend=True), old) is None


def test_a_running_ray_object_may_not_drop_its_queue_name_under_validate_ray_and_spark_job_updates() -> None:
    """Kueue's ValidateRayAndSparkJobUpdates (beta, on): an update is checked when the old object named a queue, so
    one dropping its queue name while running (or, suspended, in a namespace with a default LocalQueue) is refused.
    Off, only an update whose new object is Kueue's is checked, and dropping the name leaves the pods unaccounted."""
    dropped = 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable'
    assert _refusal(_rayjob(suspend=False), _rayjob({Q: "lq"}, suspend=False)) == dropped
    assert _refusal(_rayjob(suspend=True), _rayjob({Q: "lq"}, suspend=True)) is None
    assert _refusal(_rayjob(suspend=True), _rayjob({Q: "lq"}, suspend=True), default_queue=True) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": queue-name must not be empty in namespace '
        "with default queue")
    running = _raycluster()
    running["spec"]["suspend"] = False
    queued = _raycluster({Q: "lq"})
    queued["spec"]["suspend"] = False
    assert _refusal(running, queued, CLUSTERS) == dropped
    off = load_config({"integrations": {"frameworks": FRAMEWORKS},
                       "featureGates": {"ValidateRayAndSparkJobUpdates": False}})
    assert _refusal(_rayjob(suspend=False), _rayjob({Q: "lq"}, suspend=False),
                    rw.RayWebhooks.of(off, clusters=False)) is None
    assert _refusal(running, queued, rw.RayWebhooks.of(off, clusters=True)) is None


def test_under_tas_each_groups_annotations_are_checked_at_kueues_paths() -> None:
    tas = rw.RayWebhooks.of(TAS, clusters=False)
    sliced = _cluster_spec(annotations={REQUIRED: "block", SLICE_REQUIRED: "rack", SLICE_SIZE: "3"})
    assert _refusal(_rayjob({Q: "lq"}, cluster=sliced), settings=tas) == (
        f'spec.rayClusterSpec.workerGroupSpecs[0].template.metadata.annotations[{SLICE_SIZE}]: Invalid value: "3": '
        "must not be greater than pod set count 2")
    off = msgspec.structs.replace(JOBS, feature_gates={"TopologyAwareScheduling": False})
    assert _refusal(_rayjob({Q: "lq"}, cluster=sliced), settings=off) is None, "TopologyAwareScheduling off"


# --- serving and registering ------------------------------------------------------------------------------------


def test_the_webhook_server_serves_the_ray_paths() -> None:
    assert set(rw.PATHS) <= set(FRAMEWORK_PATHS)
    assert rw.PATHS == ("/mutate-ray-io-v1-rayjob", "/validate-ray-io-v1-rayjob", "/mutate-ray-io-v1-raycluster",
                        "/validate-ray-io-v1-raycluster")


@pytest.mark.parametrize("on", [True, False])
def test_the_ray_webhooks_fail_closed_only_while_their_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mutating = mutating_configuration(ca, url="https://h", rayjobs=on, rayclusters=on)["webhooks"]
    validating = validating_configuration(ca, url="https://h", rayjobs=on, rayclusters=on)["webhooks"]
    for plural, singular in (("rayjobs", "rayjob"), ("rayclusters", "raycluster")):
        mhook = next(w for w in mutating if w["name"] == f"m{singular}.kb.io")
        vhook = next(w for w in validating if w["name"] == f"v{singular}.kb.io")
        for hook, path, operations in ((mhook, f"/mutate-ray-io-v1-{singular}", ["CREATE"]),
                                       (vhook, f"/validate-ray-io-v1-{singular}", ["CREATE", "UPDATE"])):
            assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
            assert hook["clientConfig"]["url"] == "https://h" + path
            assert hook["rules"] == [{"apiGroups": ["ray.io"], "apiVersions": ["v1"], "operations": operations,
                                      "resources": [plural], "scope": "Namespaced"}]


# --- elastic RayClusters (workload slices) ------------------------------------------------------------------------

ELASTIC_CLUSTERS = rw.RayWebhooks.of(CONFIG, clusters=True)
"""ElasticJobsViaWorkloadSlices is on by default (beta)."""
NOT_ELASTIC = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                             "featureGates": {"ElasticJobsViaWorkloadSlices": False}}), clusters=True)
ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
GATE = {"name": "kueue.x-k8s.io/elastic-job"}


def _elastic_cluster(labels: dict | None = None, **kw: Any) -> dict:
    cluster = _raycluster(labels, **kw)
    cluster["metadata"]["annotations"] = dict(ELASTIC)
    return cluster


def _gated(cluster: dict, *, head: bool = True, workers: tuple[int, ...] = ()) -> dict:
    spec = msgspec.json.decode(msgspec.json.encode(cluster["spec"]))
    templates = ([spec["headGroupSpec"]["template"]] if head else []) + [
        spec["workerGroupSpecs"][i]["template"] for i in workers]
    for template in templates:
        template["spec"]["schedulingGates"] = [GATE]
    return {**cluster, "spec": spec}


def test_an_elastic_rayclusters_head_and_worker_templates_get_the_elastic_job_gate() -> None:
    """Kueue's RayCluster ``Default``: under ElasticJobsViaWorkloadSlices a RayCluster annotated elastic gets the
    elastic-job scheduling gate on its head's and every worker group's template (once), queued or not."""
    path = rw.RAYCLUSTER_KIND.mutating_path
    suspend = {"op": "add", "path": "/spec/suspend", "value": True}
    assert _mutate(_elastic_cluster({Q: "lq"}, groups=2), ELASTIC_CLUSTERS, path) == [
        suspend,
        {"op": "add", "path": "/spec/headGroupSpec/template/spec/schedulingGates", "value": [GATE]},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/template/spec/schedulingGates", "value": [GATE]},
        {"op": "add", "path": "/spec/workerGroupSpecs/1/template/spec/schedulingGates", "value": [GATE]}]
    assert _mutate(_gated(_elastic_cluster(), workers=(0,)), ELASTIC_CLUSTERS, path) == [], "gated already"
    other = _elastic_cluster()
    other["spec"]["headGroupSpec"]["template"] = {"spec": {"schedulingGates": [{"name": "x"}]}}
    assert _mutate(other, ELASTIC_CLUSTERS, path) == [
        {"op": "add", "path": "/spec/headGroupSpec/template/spec/schedulingGates/-", "value": GATE},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/template/spec/schedulingGates", "value": [GATE]}]
    assert _mutate(_elastic_cluster({Q: "lq"}), NOT_ELASTIC, path) == [suspend], "the gate off: not elastic"
    assert _mutate(_raycluster({Q: "lq"}), ELASTIC_CLUSTERS, path) == [suspend], "not annotated: not elastic"


def test_a_queued_elastic_raycluster_must_carry_the_gate_and_may_autoscale() -> None:
    """Kueue's RayCluster validation: an elastic one (gate on, annotated) may use the in-tree autoscaler but each
    worker group's template, then the head's, must carry the elastic-job gate; the gate off, the annotation does
    not make it elastic."""
    bare = _elastic_cluster({Q: "lq"}, groups=2, autoscaling=True)
    bare["spec"]["workerGroupSpecs"][1]["template"] = {"spec": {"schedulingGates": [{"name": "x"}]}}
    assert _refusal(bare, settings=ELASTIC_CLUSTERS) == (
        "[spec.workerGroupSpecs[0].template.spec.schedulingGates: Invalid value: []v1.PodSchedulingGate(nil): "
        "an elastic job must have the ElasticJobSchedulingGate, "
        "spec.workerGroupSpecs[1].template.spec.schedulingGates: Invalid value: "
        '[]v1.PodSchedulingGate{v1.PodSchedulingGate{Name:"x"}}: an elastic job must have the '
        "ElasticJobSchedulingGate, "
        "spec.headGroupSpec.template.spec.schedulingGates: Invalid value: []v1.PodSchedulingGate(nil): an elastic "
        "job must have the ElasticJobSchedulingGate]")
    gated = _gated(_elastic_cluster({Q: "lq"}, groups=2, autoscaling=True), workers=(0, 1))
    assert _refusal(gated, settings=ELASTIC_CLUSTERS) is None
    assert _refusal(gated, _gated(_elastic_cluster({Q: "lq"}, groups=2), workers=(0, 1)),
                    settings=ELASTIC_CLUSTERS) is None, "an update: the same rules"
    assert _refusal(gated, settings=NOT_ELASTIC) == (
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use in-tree autoscaling "
        "only as an elastic job: enable the ElasticJobsViaWorkloadSlices feature gate and set the "
        '"kueue.x-k8s.io/elastic-job": "true" annotation')
    assert _refusal(_elastic_cluster(groups=1), settings=ELASTIC_CLUSTERS) is None, "not Kueue's: not checked"


def test_an_elastic_raycluster_handed_to_multikueue_may_not_autoscale() -> None:
    """Kueue #13244: the manager owns a MultiKueue elastic RayCluster's worker replicas on the worker (it forwards
    them, :mod:`connectors.k8s.multikueue_elastic`), so its in-tree autoscaler is refused; without it, or not handed
    to MultiKueue, it passes."""
    handed = _gated(_elastic_cluster({Q: "lq"}, groups=1, autoscaling=True), workers=(0,))
    handed["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert _refusal(handed, settings=ELASTIC_CLUSTERS) == (
        "spec.enableInTreeAutoscaling: Forbidden: in-tree autoscaling is not supported for a MultiKueue-managed "
        "elastic RayCluster")
    autoscaled = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                "featureGates": {"MultiKueueRayInTreeAutoscaling": True}}),
                                   clusters=True)
    assert _refusal(handed, settings=autoscaled) is None, "MultiKueueRayInTreeAutoscaling: the worker owns them"
    handed["spec"]["enableInTreeAutoscaling"] = False
    assert _refusal(handed, settings=ELASTIC_CLUSTERS) is None


def test_an_elastic_rayjob_handed_to_multikueue_autoscales_only_under_the_worker_autoscaling_gate() -> None:
    """Kueue #16260: with MultiKueueRayInTreeAutoscaling off, an elastic RayJob handed to MultiKueue may not use the
    in-tree autoscaler (nothing would carry the worker's resizes back); the gate on, the worker's autoscaler owns
    its worker groups and it passes. Not handed to MultiKueue it passes as before; not elastic
    (ElasticJobsViaWorkloadSlices off) its autoscaler is refused by the plain rule."""
    job = _rayjob({Q: "lq"}, annotations=dict(ELASTIC), cluster=_cluster_spec(autoscaling=True), suspend=True)
    job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert _refusal(job) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Forbidden: in-tree autoscaling is not supported for a "
        "MultiKueue-managed elastic RayJob")
    worker_autoscaling = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                        "featureGates": {"MultiKueueRayInTreeAutoscaling": True}}),
                                           clusters=False)
    assert _refusal(job, settings=worker_autoscaling) is None
    assert _refusal(job, job, settings=worker_autoscaling) is None, "an update: the same rules"
    not_elastic = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                 "featureGates": {"ElasticJobsViaWorkloadSlices": False}}),
                                    clusters=False)
    assert _refusal(job, settings=not_elastic) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
        "autoscaling when workload slicing is enabled")
    local = {**job, "spec": {**job["spec"], "managedBy": "ray.io/kuberay-operator"}}
    assert _refusal(local) is None, "not MultiKueue's"
    job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = False
    assert _refusal(job) is None


# --- a head with no container (Kueue #16067) --------------------------------------------------------------------


def _headless(obj: dict, at: tuple[str, ...]) -> dict:
    holder = obj
    for key in at:
        holder = holder[key]
    holder["headGroupSpec"]["template"]["spec"] = {"containers": []}
    return obj


def test_a_managed_ray_object_whose_head_has_no_container_is_refused() -> None:
    """Kueue #16067: the head pod set has no Ray container to count; kueue-es's words (the release note gives none),
    at the head template's containers, after the cluster rules; an unmanaged object passes."""
    job = _headless(_rayjob({Q: "lq"}, cluster=_cluster_spec()), ("spec", "rayClusterSpec"))
    assert _refusal(job) == ("spec.rayClusterSpec.headGroupSpec.template.spec.containers: Required value: "
                             "the head Pod template must have at least one container")
    cluster = _headless(_raycluster({Q: "lq"}), ("spec",))
    assert _refusal(cluster, settings=CLUSTERS) == ("spec.headGroupSpec.template.spec.containers: Required value: "
                                                    "the head Pod template must have at least one container")
    assert _refusal(_headless(_raycluster(), ("spec",)), settings=CLUSTERS) is None, "not Kueue's"
    del cluster["spec"]["headGroupSpec"]
    assert _refusal(cluster, settings=CLUSTERS) == ("spec.headGroupSpec.template.spec.containers: Required value: "
                                                    "the head Pod template must have at least one container")
    both = _headless(_raycluster({Q: "lq"}, names=("head",)), ("spec",))
    assert _refusal(both, settings=CLUSTERS) == (
        '[spec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group, '
        "spec.headGroupSpec.template.spec.containers: Required value: the head Pod template must have at least one "
        "container]")
    assert _refusal(_rayjob({Q: "lq"}), job) is None, "an update is checked on the new object"
    assert _refusal(job, _rayjob({Q: "lq"})) is not None
