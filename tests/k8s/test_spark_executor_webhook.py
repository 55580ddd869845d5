"""Kueue's webhook for a SparkApplication's executor Pods (``mpod.sparkapplication.kb.io``,
``sparkapplication_executorpod_webhook.go``): an executor Pod — controlled by the driver Pod, not by the application —
of a queued SparkApplication gets a non-controller ownerReference to it, found through the driver's
``sparkoperator.k8s.io/app-name``; other Pods and the executors of an application naming no queue are left as they
are; an executor whose driver or application cannot be found is refused; the registration."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import spark_executor_webhook as sew
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import NotFound
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration

Q = "kueue.x-k8s.io/queue-name"
EXECUTOR = {"sparkoperator.k8s.io/launched-by-spark-operator": "true", "spark-role": "executor",
            "sparkoperator.k8s.io/app-name": "pi"}
DRIVER_REF = {"apiVersion": "v1", "kind": "Pod", "name": "pi-driver", "uid": "d-uid", "controller": True,
              "blockOwnerDeletion": True}
APP_REF = {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": "pi", "uid": "app-uid",
           "controller": False, "blockOwnerDeletion": False}


def _pod(labels: dict[str, str], *refs: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pi-exec-1", "namespace": "team", "labels": labels}
    if refs:
        meta["ownerReferences"] = list(refs)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "e"}]}}


def _review(pod: dict[str, Any], *, app_labels: dict[str, str] | None = None, driver_labels: dict | None = None,
            missing: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[str]]:
    """The review of creating ``pod``, its driver ``pi-driver`` labelled ``driver_labels`` (default: the
    application's name) and SparkApplication ``pi`` labelled ``app_labels`` (default: a queue); ``missing``: the
    kinds not found. Also what was read."""
    reads: list[str] = []

    async def read_pod(namespace: str, name: str) -> dict[str, Any]:
        reads.append(f"Pod {namespace}/{name}")
        if "Pod" in missing:
            raise NotFound(f"pods \"{name}\" not found", 404, "NotFound")
        labels = {"spark-role": "driver", "sparkoperator.k8s.io/app-name": "pi"} if driver_labels is None \
            else driver_labels
        return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}

    async def read_app(namespace: str, name: str) -> dict[str, Any]:
        reads.append(f"SparkApplication {namespace}/{name}")
        if "SparkApplication" in missing:
            raise NotFound(f"sparkapplications \"{name}\" not found", 404, "NotFound")
        return {"metadata": {"name": name, "namespace": namespace, "uid": "app-uid",
                             "labels": {Q: "lq"} if app_labels is None else app_labels}}

    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": pod}})
    return asyncio.run(sew.review(body, read_pod, read_app))["response"], reads


def _ops(response: dict[str, Any]) -> list[dict[str, Any]]:
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def test_an_executor_of_a_queued_sparkapplication_gets_a_reference_to_it_through_its_driver() -> None:
    response, reads = _review(_pod(EXECUTOR, DRIVER_REF))
    assert response["allowed"] and _ops(response) == [
        {"op": "add", "path": "/metadata/ownerReferences/-", "value": APP_REF}]
    assert reads == ["Pod team/pi-driver", "SparkApplication team/pi"], "the app named by the driver's label"


def test_an_executor_that_has_the_reference_already_is_left_as_it_is() -> None:
    response, _ = _review(_pod(EXECUTOR, DRIVER_REF, APP_REF))
    assert response == {"uid": "u", "allowed": True}


def test_an_executor_of_an_application_naming_no_queue_is_left_as_it_is() -> None:
    response, reads = _review(_pod(EXECUTOR, DRIVER_REF), app_labels={})
    assert response == {"uid": "u", "allowed": True} and len(reads) == 2


@pytest.mark.parametrize("labels", [
    {"sparkoperator.k8s.io/launched-by-spark-operator": "true", "spark-role": "driver"},
    {"spark-role": "executor"},
    {Q: "lq"},
], ids=["driver", "not-launched-by-the-operator", "plain"])
def test_a_pod_that_is_no_executor_the_operator_launched_is_not_looked_at(labels: dict[str, str]) -> None:
    response, reads = _review(_pod(labels, DRIVER_REF))
    assert (response, reads) == ({"uid": "u", "allowed": True}, [])


EXEC = "executor Pod team/pi-exec-1"
LABEL = "metadata.labels[sparkoperator.k8s.io/app-name]"


@pytest.mark.parametrize(("pod", "kwargs", "message"), [
    (_pod(EXECUTOR), {}, f"{EXEC}: the owner reference is missing (metadata.ownerReferences names no controller)"),
    (_pod(EXECUTOR, {**DRIVER_REF, "apiVersion": "apps/v1", "kind": "ReplicaSet"}), {},
     f"{EXEC}: the owner reference is not a Pod (metadata.ownerReferences: controller apps/v1 ReplicaSet pi-driver)"),
    (_pod(EXECUTOR, DRIVER_REF), {"missing": ("Pod",)},
     f"{EXEC}: failed to get driver Pod team/pi-driver (metadata.ownerReferences): pods \"pi-driver\" not found"),
    (_pod(EXECUTOR, DRIVER_REF), {"driver_labels": {"spark-role": "driver"}},
     f"{EXEC}: the SparkApplication name label is missing in driver Pod team/pi-driver ({LABEL})"),
    (_pod(EXECUTOR, DRIVER_REF), {"missing": ("SparkApplication",)},
     f"{EXEC}: failed to get SparkApplication team/pi (driver Pod team/pi-driver's {LABEL}): "
     "sparkapplications \"pi\" not found"),
], ids=["no-controller", "controller-not-a-pod", "driver-missing", "driver-unlabelled", "application-missing"])
def test_an_executor_whose_application_cannot_be_found_is_refused(pod: dict, kwargs: dict, message: str) -> None:
    response, _ = _review(pod, **kwargs)
    assert response["allowed"] is False
    assert response["status"] == {"code": 403, "reason": "Forbidden", "message": message}


@pytest.mark.parametrize("on", [True, False])
def test_the_executor_pod_webhook_is_registered_failing_closed_only_while_the_integration_is_on(on: bool) -> None:
    hooks = mutating_configuration(self_signed(["127.0.0.1"]).ca_pem, url="https://h",
                                   sparkapplications=on)["webhooks"]
    hook = next(w for w in hooks if w["name"] == "mpod.sparkapplication.kb.io")
    assert hook["clientConfig"]["url"] == "https://h/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication-executor-pod"
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert (hook["failurePolicy"], hook["reinvocationPolicy"]) == ("Fail" if on else "Ignore", "IfNeeded")
    assert sew.PATH in FRAMEWORK_PATHS


def test_off_every_pod_is_allowed_as_it_is_without_a_read() -> None:
    class NoClient:
        async def get(self, *_: Any, **__: Any) -> bytes:
            raise AssertionError("read")

    review = sew.reviewers(False, NoClient())[sew.PATH]  # type: ignore[arg-type]
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "object": _pod(EXECUTOR, DRIVER_REF)}})
    assert asyncio.run(review(body))["response"] == {"uid": "u", "allowed": True}
