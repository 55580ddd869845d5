"""Kueue's SparkApplication webhooks (``msparkapplication``/``vsparkapplication``) as its
``sparkapplication_webhook.go``: a queued SparkApplication stored suspended, a Kueue-managed one refused in client
mode or with dynamic allocation unless elastic, the TAS annotations at the roles' paths, the queue name immutable
while it runs (under ``ValidateRayAndSparkJobUpdates`` also when dropped), the registration; its driver Pod left to
it by the Pod webhook — cases from ``sparkapplication_webhook_test.go``."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import pod_webhook
from connectors.k8s import spark_webhook as sw
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
FRAMEWORKS = ["batch/job", "sparkoperator.k8s.io/sparkapplication"]
GATE = {"SparkApplicationIntegration": True}
APPS = sw.SparkApplicationWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}, "featureGates": GATE}))
ALL = sw.SparkApplicationWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}, "featureGates": GATE,
                                                  "manageJobsWithoutQueueName": True}))
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def _app(labels: dict | None = None, *, mode: str | None = "cluster", dynamic: bool | None = None,
         suspend: bool | None = None, annotations: dict | None = None, executor: dict | None = None) -> dict:
    spec: dict[str, Any] = {"driver": {"cores": 1}, "executor": executor or {"instances": 2}}
    if mode is not None:
        spec["mode"] = mode
    if dynamic is not None:
        spec["dynamicAllocation"] = {"enabled": dynamic}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "app", "namespace": "team", "labels": labels or {},
                         "annotations": annotations or {}}, "spec": spec}


async def _namespace_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


async def _no_default_queue(name: str) -> bool:
    return False


async def _a_default_queue(name: str) -> bool:
    return True


def _mutate(obj: dict, settings: sw.SparkApplicationWebhooks = APPS) -> list[dict]:
    reviews = sw.reviewers(settings, _namespace_labels, _no_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[sw.KIND.mutating_path](body))["response"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _refusal(new: dict, old: dict | None = None, settings: sw.SparkApplicationWebhooks = APPS,
             default_queue: bool = False) -> str | None:
    reviews = sw.reviewers(settings, _namespace_labels, _a_default_queue if default_queue else _no_default_queue)
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    response = asyncio.run(reviews[sw.KIND.validating_path](msgspec.json.encode({"request": request})))["response"]
    return response["status"]["message"] if "status" in response else None


# --- defaulting -------------------------------------------------------------------------------------------------


def test_a_queued_sparkapplication_created_running_is_suspended() -> None:
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert _mutate(_app({Q: "lq"})) == suspend
    assert _mutate(_app({Q: "lq"}, suspend=True)) == []
    assert _mutate(_app()) == [], "not Kueue's"
    assert _mutate(_app(), ALL) == suspend, "manageJobsWithoutQueueName"


# --- validation -------------------------------------------------------------------------------------------------


def test_a_managed_sparkapplication_runs_in_cluster_mode_only() -> None:
    assert _refusal(_app({Q: "lq"}, mode="client")) == (
        'spec.mode: Invalid value: "client": only Cluster mode is supported for a kueue managed job')
    assert _refusal(_app({Q: "lq"}, mode=None)) == (
        'spec.mode: Invalid value: "": only Cluster mode is supported for a kueue managed job')
    assert _refusal(_app({Q: "lq"})) is None
    assert _refusal(_app(mode="client")) is None, "not Kueue's: not checked"
    assert _refusal(_app(mode="client"), settings=ALL) is not None, "manageJobsWithoutQueueName: checked"


def test_dynamic_allocation_is_refused_unless_the_job_is_elastic() -> None:
    refused = ("spec.dynamicAllocation.enabled: Invalid value: true: a kueue managed job can use dynamicAllocation "
               "only when the ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic job")
    assert _refusal(_app({Q: "lq"}, dynamic=True)) == refused
    assert _refusal(_app({Q: "lq"}, dynamic=False)) is None
    elastic = {"kueue.x-k8s.io/elastic-job": "true"}
    slices = msgspec.structs.replace(APPS, feature_gates={**GATE, "ElasticJobsViaWorkloadSlices": True})
    assert _refusal(_app({Q: "lq"}, dynamic=True, annotations=elastic), settings=slices) == (
        'metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: elastic job is not supported for '
        '"sparkoperator.k8s.io/v1beta2, Kind=SparkApplication"'), (
        "elastic, its dynamic allocation is not refused; but no SparkApplication may be elastic")
    no_slices = msgspec.structs.replace(APPS, feature_gates={**GATE, "ElasticJobsViaWorkloadSlices": False})
    assert _refusal(_app({Q: "lq"}, dynamic=True, annotations=elastic), settings=no_slices) == refused, (
        "the gate off: not elastic")
    assert _refusal(_app({Q: "lq"}, dynamic=True), settings=slices) == refused, "not annotated: not elastic"


def test_a_running_sparkapplications_queue_name_is_immutable() -> None:
    old = _app({Q: "lq"}, suspend=False)
    assert _refusal(_app({Q: "other"}, suspend=False), old) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable')
    assert _refusal(_app({Q: "other"}, suspend=True), old) is None


def test_a_running_sparkapplication_may_not_drop_its_queue_name_under_validate_ray_and_spark_job_updates() -> None:
    """Kueue's ``ShouldValidateRayOrSparkJobOnUpdate``: the old object naming a queue is enough under the gate (on by
    default); off, only an update whose new object is Kueue's is checked."""
    dropped = 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable'
    assert _refusal(_app(suspend=False), _app({Q: "lq"}, suspend=False)) == dropped
    assert _refusal(_app(suspend=True), _app({Q: "default"}, suspend=True), default_queue=True) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": queue-name must not be empty in namespace '
        "with default queue")
    off = msgspec.structs.replace(APPS, feature_gates={**GATE, "ValidateRayAndSparkJobUpdates": False})
    assert _refusal(_app(suspend=False), _app({Q: "lq"}, suspend=False), off) is None
    assert _refusal(_app(mode="client", suspend=True), _app({Q: "lq"}, suspend=True)) is None, (
        "the create rules need the new object Kueue's")


def test_under_tas_the_roles_annotations_are_checked_at_kueues_paths() -> None:
    tas = msgspec.structs.replace(APPS, feature_gates={**GATE, "TopologyAwareScheduling": True})
    both = {"instances": 2, "annotations": {REQUIRED: "block", PREFERRED: "rack"}}
    message = _refusal(_app({Q: "lq"}, executor=both), settings=tas)
    assert message is not None and message.startswith("spec.executor.annotations: Invalid value:")
    off = msgspec.structs.replace(APPS, feature_gates={**GATE, "TopologyAwareScheduling": False})
    assert _refusal(_app({Q: "lq"}, executor=both), settings=off) is None, "the gate off"


# --- serving, registering, its Pods -----------------------------------------------------------------------------


def test_the_webhook_server_serves_the_sparkapplication_paths() -> None:
    assert sw.PATHS == ("/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication",
                        "/validate-sparkoperator-k8s-io-v1beta2-sparkapplication")
    assert set(sw.PATHS) <= set(FRAMEWORK_PATHS)


@pytest.mark.parametrize("on", [True, False])
def test_the_sparkapplication_webhooks_fail_closed_only_while_their_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mutating = mutating_configuration(ca, url="https://h", sparkapplications=on)["webhooks"]
    validating = validating_configuration(ca, url="https://h", sparkapplications=on)["webhooks"]
    mhook = next(w for w in mutating if w["name"] == "msparkapplication.kb.io")
    vhook = next(w for w in validating if w["name"] == "vsparkapplication.kb.io")
    for hook, path, operations in ((mhook, sw.PATHS[0], ["CREATE"]), (vhook, sw.PATHS[1], ["CREATE", "UPDATE"])):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"] == [{"apiGroups": ["sparkoperator.k8s.io"], "apiVersions": ["v1beta2"],
                                  "operations": operations, "resources": ["sparkapplications"],
                                  "scope": "Namespaced"}]
    off = sw.SparkApplicationWebhooks.of(load_config({"featureGates": GATE}))
    assert _mutate(_app({Q: "lq"}), off) == [] and _refusal(_app({Q: "lq"}, mode="client"), settings=off) is None


def test_a_sparkapplications_driver_pod_is_left_to_it() -> None:
    """The driver Pod the operator makes under the SparkApplication is the application's, with its integration on."""
    assert "sparkoperator.k8s.io/sparkapplication" in pod_webhook.POD_PARENTS
