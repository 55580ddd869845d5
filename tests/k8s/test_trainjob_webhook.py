"""Kueue's TrainJob webhooks (``mtrainjob``/``vtrainjob``) as its ``trainjob_webhook.go``: a queued TrainJob stored
with ``spec.suspend: true`` and its queue name in ``spec.labels``, the generic job rules on create and update, the
registration failing closed only while the framework is on."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import trainjob_webhook as tw
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
ON = tw.TrainJobWebhooks.of(load_config({"integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]}}))
ALL = tw.TrainJobWebhooks.of(load_config({"integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]},
                                          "manageJobsWithoutQueueName": True}))
OFF = tw.TrainJobWebhooks.of(load_config({}))


def _trainjob(labels: dict | None = None, *, suspend: bool | None = None, spec_labels: dict | None = None) -> dict:
    spec: dict = {"runtimeRef": {"name": "torch"}}
    if suspend is not None:
        spec["suspend"] = suspend
    if spec_labels is not None:
        spec["labels"] = spec_labels
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "team", "labels": labels or {}}, "spec": spec}


def _mutate(obj: dict, settings: tw.TrainJobWebhooks = ON, default_queue: bool = False) -> list[dict] | None:
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    reviews = tw.reviewers(settings, namespace_labels, has_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[tw.KIND.mutating_path](body))["response"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _refusal(new: dict, old: dict | None = None, settings: tw.TrainJobWebhooks = ON,
             runtimes: dict[str, dict] | None = None) -> str | None:
    async def has_default_queue(name: str) -> bool:
        return False

    async def runtime_of(namespace: str, job: dict) -> dict | None:
        assert namespace == "team"
        return (runtimes or {}).get(job["spec"]["runtimeRef"]["name"])

    reviews = tw.reviewers(settings, None, has_default_queue, runtime_of=runtime_of)  # type: ignore[arg-type]
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    response = asyncio.run(reviews[tw.KIND.validating_path](msgspec.json.encode({"request": request})))["response"]
    return response["status"]["message"] if "status" in response else None


# --- defaulting -------------------------------------------------------------------------------------------------


def test_a_queued_trainjob_is_suspended_and_its_queue_name_written_in_its_spec_labels() -> None:
    assert _mutate(_trainjob({Q: "lq"})) == [{"op": "add", "path": "/spec/suspend", "value": True},
                                             {"op": "add", "path": "/spec/labels", "value": {Q: "lq"}}]
    assert _mutate(_trainjob({Q: "lq"}, suspend=True, spec_labels={"a": "b"})) == [
        {"op": "add", "path": "/spec/labels/kueue.x-k8s.io~1queue-name", "value": "lq"}]
    assert _mutate(_trainjob({Q: "lq"}, suspend=True, spec_labels={Q: "lq"})) == []


def test_a_trainjob_given_the_default_queue_carries_it_in_its_spec_labels_too() -> None:
    assert _mutate(_trainjob(), default_queue=True) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"},
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/labels", "value": {Q: "default"}}]


def test_an_unqueued_trainjob_is_left_alone_unless_managed_without_a_queue_name() -> None:
    assert _mutate(_trainjob()) == []
    assert _mutate(_trainjob(), ALL) == [{"op": "add", "path": "/spec/suspend", "value": True}], \
        "suspended, but no queue name to copy"
    assert _mutate(_trainjob({Q: "lq"}), OFF) == [], "the integration off"


# --- validation -------------------------------------------------------------------------------------------------


def test_the_generic_job_rules_refuse_a_bad_queue_name_and_a_running_ones_queue_change() -> None:
    there = {"torch": _runtime()}
    assert _refusal(_trainjob({Q: "lq"}), runtimes=there) is None
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in (_refusal(_trainjob({Q: "queue_name"}), runtimes=there)
                                                           or "")
    old = _trainjob({Q: "lq"}, suspend=False)
    assert _refusal(_trainjob({Q: "other"}, suspend=False), old, runtimes=there) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable')
    assert _refusal(_trainjob({Q: "other"}, suspend=True), old, runtimes=there) is None


TAS = tw.TrainJobWebhooks.of(load_config({"integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]},
                                          "featureGates": {"TopologyAwareScheduling": True}}))
NO_TAS = msgspec.structs.replace(TAS, feature_gates={"TopologyAwareScheduling": False})
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"


def _runtime(annotations: dict | None = None) -> dict:
    template: dict = {"spec": {"containers": [{"name": "node"}]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"mlPolicy": {"numNodes": 2}, "template": {"spec": {"replicatedJobs": [{
        "name": "node", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                     "spec": {"template": template}}}]}}}


def test_under_tas_the_derived_pod_sets_annotations_are_checked_at_kueues_path() -> None:
    """Kueue's "valid topology request in TrainingRuntime" / "invalid topology request in TrainJob" cases."""
    assert _refusal(_trainjob({Q: "lq"}), settings=TAS, runtimes={"torch": _runtime({REQUIRED: "cloud.com/block"})}) \
        is None
    job = _trainjob({Q: "lq"})
    job["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {
        REQUIRED: "cloud.com/block", PREFERRED: "cloud.com/rack"}}}]
    message = _refusal(job, settings=TAS, runtimes={"torch": _runtime()})
    assert message is not None and message.startswith("job[node].annotations: Invalid value: ")
    assert message.endswith('. Adjust either the "TrainJob.spec.podTemplateOverrides" or the "TrainingRuntime.Template" '
                            "annotations for the corresponding Job")
    sliced = _runtime({REQUIRED: "block", SLICE_REQUIRED: "rack", SLICE_SIZE: "3"})
    assert _refusal(_trainjob({Q: "lq"}), settings=TAS, runtimes={"torch": sliced}) == (
        f'job[node].annotations[{SLICE_SIZE}]: Invalid value: "3": must not be greater than pod set count 2'
        '. Adjust either the "TrainJob.spec.podTemplateOverrides" or the "TrainingRuntime.Template" annotations for '
        "the corresponding Job")
    assert _refusal(job, settings=NO_TAS, runtimes={"torch": _runtime()}) is None, "TopologyAwareScheduling off"


def test_under_tas_a_trainjob_whose_runtime_is_missing_is_refused_with_that_alone() -> None:
    assert _refusal(_trainjob({Q: "queue_name"}), settings=TAS) == "runtime 'torch' not found"
    assert _refusal(_trainjob({Q: "lq"}), settings=NO_TAS) is None


# --- serving and registering ------------------------------------------------------------------------------------


def test_the_webhook_server_serves_the_trainjob_paths() -> None:
    assert set(tw.PATHS) <= set(FRAMEWORK_PATHS)
    assert tw.PATHS == ("/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
                        "/validate-trainer-kubeflow-org-v1alpha1-trainjob")


@pytest.mark.parametrize("on", [True, False])
def test_the_trainjob_webhooks_fail_closed_only_while_their_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mhook = next(w for w in mutating_configuration(ca, url="https://h", trainjobs=on)["webhooks"]
                 if w["name"] == "mtrainjob.kb.io")
    vhook = next(w for w in validating_configuration(ca, url="https://h", trainjobs=on)["webhooks"]
                 if w["name"] == "vtrainjob.kb.io")
    for hook, path, operations in ((mhook, tw.KIND.mutating_path, ["CREATE"]),
                                   (vhook, tw.KIND.validating_path, ["CREATE", "UPDATE"])):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore")
        assert hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"] == [{"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"],
                                  "operations": operations, "resources": ["trainjobs"], "scope": "Namespaced"}]
