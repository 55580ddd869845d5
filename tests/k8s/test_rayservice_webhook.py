"""Kueue's RayService webhooks (``mrayservice``/``vrayservice``) as its ``rayservice_webhook.go`` (and the
``raycluster`` ``ValidateCreate`` it calls): a queued RayService stored with ``spec.rayClusterConfig.suspend: true``,
its cluster rules and TAS annotations in Kueue's words at ``spec.rayClusterSpec``, the queue name immutable while it
runs, the registration; and a RayService's RayCluster left to it."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import ray_webhook as rw
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS, ancestry_lookup
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
FRAMEWORKS = ["batch/job", "ray.io/rayservice", "ray.io/raycluster"]
SERVICES = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS}}))
ALL = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                               "manageJobsWithoutQueueName": True}))
CLUSTERS = rw.RayWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}}), clusters=True)


def _config(groups: int = 1, *, names: tuple[str, ...] = (), annotations: dict | None = None,
            autoscaling: bool | None = None, suspend: bool | None = None) -> dict:
    template: dict = {"spec": {"containers": [{"name": "ray", "image": "ray"}]}}
    worker = {**template, "metadata": {"annotations": annotations}} if annotations else template
    config: dict = {"headGroupSpec": {"template": template},
                    "workerGroupSpecs": [{"groupName": (names[i] if i < len(names) else f"g{i}"), "replicas": 2,
                                          "template": worker} for i in range(groups)]}
    if autoscaling is not None:
        config["enableInTreeAutoscaling"] = autoscaling
    if suspend is not None:
        config["suspend"] = suspend
    return config


def _service(labels: dict | None = None, upgrade: str | None = "None", **kw: Any) -> dict:
    spec: dict = {"serveConfigV2": "applications: []", "rayClusterConfig": _config(**kw)}
    if upgrade is not None:
        spec["upgradeStrategy"] = {"type": upgrade}
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "svc", "namespace": "team", "labels": labels or {}}, "spec": spec}


async def _namespace_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


async def _no_default_queue(name: str) -> bool:
    return False


def _mutate(obj: dict, settings: rw.RayWebhooks = SERVICES) -> list[dict]:
    reviews = rw.service_reviewers(settings, _namespace_labels, _no_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[rw.RAYSERVICE_KIND.mutating_path](body))["response"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


async def _a_default_queue(name: str) -> bool:
    return True


def _refusal(new: dict, old: dict | None = None, settings: rw.RayWebhooks = SERVICES,
             default_queue: bool = False) -> str | None:
    reviews = rw.service_reviewers(settings, _namespace_labels, _a_default_queue if default_queue else _no_default_queue)
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    body = msgspec.json.encode({"request": request})
    response = asyncio.run(reviews[rw.RAYSERVICE_KIND.validating_path](body))["response"]
    return response["status"]["message"] if "status" in response else None


# --- defaulting -------------------------------------------------------------------------------------------------


def test_a_queued_rayservice_created_running_is_suspended_at_its_cluster_config() -> None:
    suspend = [{"op": "add", "path": "/spec/rayClusterConfig/suspend", "value": True}]
    assert _mutate(_service({Q: "lq"})) == suspend
    assert _mutate(_service({Q: "lq"}, suspend=False)) == suspend
    assert _mutate(_service({Q: "lq"}, suspend=True)) == []
    assert _mutate(_service({"app": "x"})) == [], "not Kueue's"
    assert _mutate(_service(), ALL) == suspend, "manageJobsWithoutQueueName"


def test_a_rayservices_raycluster_is_left_to_the_rayservice_with_its_integration_on() -> None:
    owner = {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "svc", "uid": "u", "controller": True}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": "team", "labels": {Q: "lq"}, "ownerReferences": [owner]},
               "spec": _config()}
    reviews = rw.reviewers(CLUSTERS, CLUSTERS, _namespace_labels, _no_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                            "object": cluster}})
    response = asyncio.run(reviews[rw.RAYCLUSTER_KIND.mutating_path](body))["response"]
    assert "patch" not in response, "a queued RayService's cluster is not suspended apart"


class _Apiserver:
    """The one parent the Job webhook's walk reads: the RayService ``svc``, naming ``labels``."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        assert (resource.kind, name) == ("RayService", "svc")
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace, "uid": "u",
                                                 "labels": self.labels}})


@pytest.mark.parametrize(("service_labels", "held"), [({Q: "lq"}, False), ({}, True)])
def test_the_walk_reads_a_rayclusters_rayservice_from_the_apiserver(service_labels: dict, held: bool) -> None:
    """Kueue's ``WorkloadShouldBeSuspended``: the RayCluster's controller, a RayService, is read and is its managed
    ancestor when queued; one naming no queue makes no child, so the queued RayCluster is suspended itself."""
    config = load_config({"integrations": {"frameworks": FRAMEWORKS}})
    owner = {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "svc", "uid": "u", "controller": True}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": "team", "labels": {Q: "lq"}, "ownerReferences": [owner]},
               "spec": _config()}
    walk = ancestry_lookup(_Apiserver(service_labels), config)  # type: ignore[arg-type]
    reviews = rw.reviewers(CLUSTERS, CLUSTERS, _namespace_labels, _no_default_queue, None, walk)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                            "object": cluster}})
    response = asyncio.run(reviews[rw.RAYCLUSTER_KIND.mutating_path](body))["response"]
    assert response["allowed"] and ("patch" in response) is held


# --- validation -------------------------------------------------------------------------------------------------


def test_a_managed_rayservices_cluster_rules_in_kueues_words() -> None:
    assert _refusal(_service({Q: "lq"}, autoscaling=True)) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
        "autoscaling when workload slicing is enabled")
    assert _refusal(_service({Q: "lq"}, groups=17)) is None
    assert _refusal(_service({Q: "lq"}, groups=18)) == (
        "spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items")
    assert _refusal(_service({Q: "lq"}, groups=2, names=("x", "head"))) == (
        'spec.rayClusterSpec.workerGroupSpecs[1].groupName: Forbidden: "head" is reserved for the head group')
    assert _refusal(_service(groups=18), settings=ALL) is not None, "manageJobsWithoutQueueName: checked too"
    assert _refusal(_service(groups=18, autoscaling=True)) is None, "not Kueue's: not checked"
    assert _refusal(_service({Q: "lq"}, groups=7)) is None


@pytest.mark.parametrize("upgrade", [None, "NewCluster", "NewClusterWithIncrementalUpgrade"])
def test_a_managed_rayservice_upgrades_without_downtime_only_as_an_elastic_job(upgrade: str | None) -> None:
    """Kueue v0.20's RayServiceValidateUpgradeStrategy (beta, on; #16094): a zero-downtime upgrade (KubeRay's
    default when no strategy is given) is refused to a Kueue-managed RayService that is not elastic; ``None`` turns
    it off; an elastic one (ElasticJobsViaWorkloadSlices and the annotation) may; the gate off, all may."""
    refused = f"spec.upgradeStrategy.type: Forbidden: {rw.UPGRADE_STRATEGY}"
    assert _refusal(_service({Q: "lq"}, upgrade, suspend=True)) == refused
    assert _refusal(_service({Q: "lq"}, "None", suspend=True)) is None
    assert _refusal(_service({"app": "x"}, upgrade)) is None, "not Kueue's: not checked"
    assert _refusal(_service(None, upgrade), settings=ALL) == refused, "manageJobsWithoutQueueName"
    elastic = _service({Q: "lq"}, upgrade, groups=0, suspend=True)
    elastic["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    elastic["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["schedulingGates"] = [
        {"name": "kueue.x-k8s.io/elastic-job"}]
    assert _refusal(elastic) is None
    off = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                   "featureGates": {"ElasticJobsViaWorkloadSlices": False}}))
    assert _refusal(elastic, settings=off) == refused, "the annotation alone is not elastic"
    gate_off = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                        "featureGates": {"RayServiceValidateUpgradeStrategy": False}}))
    assert _refusal(_service({Q: "lq"}, upgrade, suspend=True), settings=gate_off) is None
    running = _service({Q: "lq"}, "None", suspend=False)
    assert _refusal(_service({Q: "lq"}, upgrade, suspend=False), running) == refused, "on update too"


def test_a_running_rayservices_queue_name_is_immutable() -> None:
    old = _service({Q: "lq"}, suspend=False)
    assert _refusal(_service({Q: "other"}, suspend=False), old) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable')
    assert _refusal(_service({Q: "other"}, suspend=True), old) is None, "suspended at its cluster config"


def test_a_running_rayservice_may_not_drop_its_queue_name_under_validate_ray_and_spark_job_updates() -> None:
    """Kueue's ValidateRayAndSparkJobUpdates (beta, on) covers RayServices: an update is checked when the old one
    named a queue, so one dropping it while running (or, suspended, in a namespace with a default LocalQueue) is
    refused. Off, only an update whose new RayService is Kueue's is checked."""
    dropped = 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable'
    assert _refusal(_service(suspend=False), _service({Q: "lq"}, suspend=False)) == dropped
    assert _refusal(_service(suspend=True), _service({Q: "lq"}, suspend=True)) is None
    assert _refusal(_service(suspend=True), _service({Q: "default"}, suspend=True), default_queue=True) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": queue-name must not be empty in namespace '
        "with default queue")
    unmanaged = {"kueue.x-k8s.io/prebuilt-workload-name": "wl1"}
    assert _refusal(_service({"kueue.x-k8s.io/prebuilt-workload-name": "wl2"}, suspend=False),
                    _service(unmanaged, suspend=False)) is None, "never Kueue's: not checked"
    off = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                   "featureGates": {"ValidateRayAndSparkJobUpdates": False}}))
    assert _refusal(_service(suspend=False), _service({Q: "lq"}, suspend=False), off) is None
    assert _refusal(_service(suspend=True), _service({Q: "default"}, suspend=True), off, default_queue=True) is None


def test_under_tas_each_groups_annotations_are_checked_at_kueues_paths() -> None:
    tas = msgspec.structs.replace(SERVICES, feature_gates={"TopologyAwareScheduling": True})
    sliced = {"kueue.x-k8s.io/podset-required-topology": "block", SLICE_REQUIRED: "rack", SLICE_SIZE: "3"}
    assert _refusal(_service({Q: "lq"}, annotations=sliced), settings=tas) == (
        f'spec.rayClusterSpec.workerGroupSpecs[0].template.metadata.annotations[{SLICE_SIZE}]: Invalid value: "3": '
        "must not be greater than pod set count 2")
    off = msgspec.structs.replace(SERVICES, feature_gates={"TopologyAwareScheduling": False})
    assert _refusal(_service({Q: "lq"}, annotations=sliced), settings=off) is None


# --- serving and registering ------------------------------------------------------------------------------------


def test_the_webhook_server_serves_the_rayservice_paths() -> None:
    assert rw.SERVICE_PATHS == ("/mutate-ray-io-v1-rayservice", "/validate-ray-io-v1-rayservice")
    assert set(rw.SERVICE_PATHS) <= set(FRAMEWORK_PATHS)


@pytest.mark.parametrize("on", [True, False])
def test_the_rayservice_webhooks_fail_closed_only_while_their_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mutating = mutating_configuration(ca, url="https://h", rayservices=on)["webhooks"]
    validating = validating_configuration(ca, url="https://h", rayservices=on)["webhooks"]
    mhook = next(w for w in mutating if w["name"] == "mrayservice.kb.io")
    vhook = next(w for w in validating if w["name"] == "vrayservice.kb.io")
    for hook, path, operations in ((mhook, "/mutate-ray-io-v1-rayservice", ["CREATE"]),
                                   (vhook, "/validate-ray-io-v1-rayservice", ["CREATE", "UPDATE"])):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"] == [{"apiGroups": ["ray.io"], "apiVersions": ["v1"], "operations": operations,
                                  "resources": ["rayservices"], "scope": "Namespaced"}]
    off = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": ["ray.io/raycluster"]}}))
    assert _mutate(_service({Q: "lq"}), off) == [] and _refusal(_service({Q: "lq"}, groups=18), settings=off) is None


def test_an_elastic_rayservices_cluster_config_templates_get_the_elastic_job_gate() -> None:
    """Kueue's RayService ``Default``: under ElasticJobsViaWorkloadSlices (on by default) a RayService annotated
    elastic gets the elastic-job scheduling gate on its cluster config's head and worker group templates."""
    gate = {"name": "kueue.x-k8s.io/elastic-job"}
    service = _service({Q: "lq"}, groups=2, suspend=True)
    service["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    base = "/spec/rayClusterConfig"
    assert _mutate(service) == [
        {"op": "add", "path": f"{base}/headGroupSpec/template/spec/schedulingGates", "value": [gate]},
        {"op": "add", "path": f"{base}/workerGroupSpecs/0/template/spec/schedulingGates", "value": [gate]},
        {"op": "add", "path": f"{base}/workerGroupSpecs/1/template/spec/schedulingGates", "value": [gate]}]
    off = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                   "featureGates": {"ElasticJobsViaWorkloadSlices": False}}))
    assert _mutate(service, off) == [], "the gate off: not elastic"


def test_an_elastic_rayservice_handed_to_multikueue_autoscales_only_under_the_worker_autoscaling_gate() -> None:
    """Kueue #16260, a RayService's half: the RayJob's rule at its cluster config (named ``spec.rayClusterSpec``)."""
    service = _service({Q: "lq"}, groups=1, suspend=True, autoscaling=True)
    service["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    service["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert _refusal(service) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Forbidden: in-tree autoscaling is not supported for a "
        "MultiKueue-managed elastic RayService")
    on = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                  "featureGates": {"MultiKueueRayInTreeAutoscaling": True}}))
    assert _refusal(service, settings=on) is None
    del service["spec"]["managedBy"]
    assert _refusal(service) is None, "not handed to MultiKueue"


def test_an_autoscaling_rayservice_is_elastic_only_under_the_gate() -> None:
    """Kueue v0.20's ``workloadslicing.Enabled``: the elastic-job annotation counts only with
    ElasticJobsViaWorkloadSlices on; off, an annotated RayService's autoscaler is refused as a plain one's."""
    service = _service({Q: "lq"}, autoscaling=True)
    service["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    assert _refusal(service) is None
    off = rw.RayWebhooks.for_services(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                   "featureGates": {"ElasticJobsViaWorkloadSlices": False}}))
    assert _refusal(service, settings=off) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should only use "
        "autoscaling when workload slicing is enabled")


def test_a_managed_rayservice_whose_head_has_no_container_is_refused() -> None:
    """Kueue #16067 at the RayService's cluster config (named ``spec.rayClusterSpec``); not Kueue's: passes."""
    service = _service({Q: "lq"})
    service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"] = {"spec": {}}
    assert _refusal(service) == ("spec.rayClusterSpec.headGroupSpec.template.spec.containers: Required value: "
                                 "the head Pod template must have at least one container")
    service["metadata"]["labels"] = {}
    assert _refusal(service) is None


def test_errors_come_in_kueues_order_cluster_rules_then_generic_then_tas_and_update_rules_first() -> None:
    """Kueue's ``rayservice_webhook.go``: on create, a managed RayService's cluster rules (at
    ``spec.rayClusterSpec``), then the generic job rules, then the TAS annotations; on update the generic update
    rules come before all of those, run on the new object."""
    tas = msgspec.structs.replace(SERVICES, feature_gates={"TopologyAwareScheduling": True})
    sliced = {"kueue.x-k8s.io/podset-required-topology": "block", SLICE_REQUIRED: "rack", SLICE_SIZE: "3"}
    bad_queue = "Bad_Queue"
    created = _refusal(_service({Q: bad_queue}, groups=18, annotations=sliced, suspend=True), settings=tas)
    assert created is not None
    cluster = created.index("spec.rayClusterSpec.workerGroupSpecs: Too many")
    queue = created.index(f"metadata.labels[{Q}]")
    slice_size = created.index(f"annotations[{SLICE_SIZE}]")
    assert cluster < queue < slice_size
    old = _service({Q: "lq"}, suspend=False)
    updated = _refusal(_service({Q: "other"}, groups=18, suspend=False), old)
    assert updated is not None
    assert updated.index('Invalid value: "other": field is immutable') < updated.index("workerGroupSpecs: Too many")
