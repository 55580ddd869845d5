"""Kueue's ``pkg/controller/jobs/sparkapplication/sparkapplication_webhook_test.go`` (newest stored version,
v1beta2 API, ``ValidateRayAndSparkJobUpdates``; read at commit 03c85afb) as an oracle for kueue-es's
SparkApplication webhook rules (:func:`connectors.k8s.spark_webhook.create_errors` /
:func:`~connectors.k8s.spark_webhook.update_errors`, and the mutating review for TestDefault): each case names
Kueue's. Kueue's ``MakeSparkApplication`` is a cluster-mode application with one executor; its cases use
``Suspend(false)`` unless they say otherwise."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import spark_webhook as sw
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
DYNAMIC = {"enabled": True, "minExecutors": 1, "initialExecutors": 2, "maxExecutors": 3}
IMMUTABLE = "field is immutable"


def app(queue: str | None = None, *, suspend: bool = False, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, executor_annotations: dict[str, str] | None = None,
        dynamic: dict[str, Any] | None = None) -> dict[str, Any]:
    """Kueue's ``MakeSparkApplication("test-sparkapp", "test")`` with the wrapper's settings."""
    meta_labels = dict(labels or {})
    if queue is not None:
        meta_labels[Q] = queue
    executor: dict[str, Any] = {"instances": 1, "coreRequest": "100m", "memory": "512m"}
    if executor_annotations:
        executor["annotations"] = executor_annotations
    spec: dict[str, Any] = {"mode": "cluster", "type": "Scala", "suspend": suspend,
                            "driver": {"coreRequest": "100m", "memory": "512m"}, "executor": executor}
    if dynamic is not None:
        spec["dynamicAllocation"] = dynamic
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "test-sparkapp", "namespace": "test", "labels": meta_labels,
                         "annotations": annotations or {}}, "spec": spec}


# --- TestValidateCreate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("new", "gates", "expected"), [
    pytest.param(app("local-queue"), {}, [], id="base"),
    pytest.param(app("local-queue", dynamic=DYNAMIC), {},
                 ["spec.dynamicAllocation.enabled: Invalid value: true: a kueue managed job can use "
                  "dynamicAllocation only when the ElasticJobsViaWorkloadSlices feature gate is on and the "
                  "job is an elastic job"],
                 id="dynamicAllocation without elastic job feature"),
    pytest.param(app("local-queue", annotations={ELASTIC: "true"}, dynamic=DYNAMIC),
                 {"ElasticJobsViaWorkloadSlices": True},
                 [f"metadata.annotations[{ELASTIC}]: Forbidden: elastic job is not supported for "
                  '"sparkoperator.k8s.io/v1beta2, Kind=SparkApplication"'],
                 id="dynamicAllocation with elastic job feature"),
    pytest.param(app("local-queue", annotations={ELASTIC: "true"}), {"ElasticJobsViaWorkloadSlices": True},
                 [f"metadata.annotations[{ELASTIC}]: Forbidden: elastic job is not supported for "
                  '"sparkoperator.k8s.io/v1beta2, Kind=SparkApplication"'],
                 id="(kueue-es) the annotation alone, without dynamic allocation"),
    pytest.param(app("local-queue", annotations={ELASTIC: "true"}), {"ElasticJobsViaWorkloadSlices": False},
                 [], id="(kueue-es) the annotation with the elastic gate off is not looked at"),
    pytest.param(app("local-queue", executor_annotations={REQUIRED: "cloud.com/block"}),
                 {"TopologyAwareScheduling": True}, [], id="base with TAS"),
    pytest.param(app("local-queue",
                     executor_annotations={REQUIRED: "cloud.com/block", PREFERRED: "cloud.com/block"}),
                 {"TopologyAwareScheduling": True},
                 ['spec.executor.annotations: Invalid value: must not contain more than one topology '
                  f'annotation: ["{REQUIRED}", "{PREFERRED}", '
                  '"kueue.x-k8s.io/podset-unconstrained-topology"]'],
                 id="invalid TAS configuration"),
])
def test_validate_create(new: dict, gates: dict, expected: list[str]) -> None:
    assert sw.create_errors(new, gates) == expected


# --- TestValidateUpdate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "default_queue", "gates", "expected"), [
    pytest.param(app("local-queue"), app("local-queue", labels={"test-label": "test-value"}), False, {}, [],
                 id="queue name unchanged while unsuspended"),
    pytest.param(app("local-queue"), app("local-queue-2"), False, {},
                 [f'metadata.labels[{Q}]: Invalid value: "local-queue-2": {IMMUTABLE}'],
                 id="queue name should not change while unsuspended"),
    pytest.param(app("local-queue", suspend=True), app("local-queue-2", suspend=True), False, {}, [],
                 id="queue name can change while suspended"),
    pytest.param(app("local-queue"), app(), False, {"ValidateRayAndSparkJobUpdates": True},
                 [f'metadata.labels[{Q}]: Invalid value: "": {IMMUTABLE}'],
                 id="queue name removal is rejected when the job is unsuspended and "
                    "ValidateRayAndSparkJobUpdates is enabled"),
    pytest.param(app("local-queue"), app(), False, {"ValidateRayAndSparkJobUpdates": False}, [],
                 id="queue name removal is allowed when the job is unsuspended and "
                    "ValidateRayAndSparkJobUpdates is disabled"),
    pytest.param(app("default", suspend=True), app(suspend=True), True,
                 {"ValidateRayAndSparkJobUpdates": True},
                 [f'metadata.labels[{Q}]: Invalid value: "": queue-name must not be empty in namespace with '
                  "default queue"],
                 id="queue name removal is rejected when the job is suspended in a namespace with a default "
                    "queue and ValidateRayAndSparkJobUpdates is enabled"),
    pytest.param(app("default", suspend=True), app(suspend=True), True,
                 {"ValidateRayAndSparkJobUpdates": False},
                 [], id="queue name removal is allowed when the job is suspended in a namespace with a "
                        "default queue and ValidateRayAndSparkJobUpdates is disabled"),
    pytest.param(app("local-queue", suspend=True), app(suspend=True), False,
                 {"ValidateRayAndSparkJobUpdates": True},
                 [], id="queue name removal is allowed when the job is suspended in a namespace without a "
                        "default queue and ValidateRayAndSparkJobUpdates is enabled"),
    pytest.param(app(labels={PREBUILT: "wl1"}), app(labels={PREBUILT: "wl2"}), False,
                 {"ValidateRayAndSparkJobUpdates": True}, [],
                 id="prebuilt workload name change is not validated when the job is unmanaged and "
                    "ValidateRayAndSparkJobUpdates is enabled"),
])
def test_validate_update(old: dict, new: dict, default_queue: bool, gates: dict, expected: list[str]) -> None:
    assert sw.update_errors(old, new, gates, default_queue) == expected


# --- TestDefault --------------------------------------------------------------------------------------------

SUSPEND = {"op": "add", "path": "/spec/suspend", "value": True}
DEFAULT_QUEUE = {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"}


def _defaults(obj: dict, config: dict, default_queue: bool) -> list[dict]:
    """The JSON patch kueue-es's mutating SparkApplication webhook answers a create with."""
    settings = sw.SparkApplicationWebhooks.of(load_config({
        "integrations": {"frameworks": ["batch/job", "sparkoperator.k8s.io/sparkapplication"]},
        "featureGates": {"SparkApplicationIntegration": True}, **config}))

    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default(name: str) -> bool:
        return default_queue

    review = sw.reviewers(settings, namespace_labels, has_default)[sw.KIND.mutating_path]
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE",
                                            "namespace": obj["metadata"]["namespace"], "object": obj}})
    response = asyncio.run(review(body))["response"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _in(namespace: str, queue: str | None = None) -> dict:
    obj = app(queue)
    obj["metadata"]["namespace"] = namespace
    return obj


@pytest.mark.parametrize(("obj", "config", "default_queue", "expected"), [
    pytest.param(_in("ns-unmanaged"), {"managedJobsNamespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "ns"}}}, False, [],
        id="should not suspend a SparkApplication in unmanaged namespace"),
    pytest.param(_in("ns", "local-queue"), {}, False, [SUSPEND], id="should suspend a SparkApplication"),
    pytest.param(_in("ns"), {}, False, [],
                 id="should not suspend a SparkApplication without a queue label if "
                    "manageJobsWithoutQueueName is not enabled"),
    pytest.param(_in("ns"), {"manageJobsWithoutQueueName": True}, False, [SUSPEND],
                 id="should suspend a SparkApplication without a queue label if manageJobsWithoutQueueName "
                    "is enabled"),
    pytest.param(_in("ns"), {}, True, [DEFAULT_QUEUE, SUSPEND],
                 id="should set the default local queue if enabled and the user didn't specify any"),
    pytest.param(_in("ns"), {}, False, [], id="should not set the default local queue if doesn't exists"),
])
def test_default(obj: dict, config: dict, default_queue: bool, expected: list[dict]) -> None:
    assert _defaults(obj, config, default_queue) == expected
