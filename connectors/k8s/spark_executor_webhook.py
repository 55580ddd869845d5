"""Kueue's webhook for the executor Pods of a SparkApplication (``mpod.sparkapplication.kb.io`` at
``/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication-executor-pod``, Pods on creation;
``sparkapplication_executorpod_webhook.go``).

The Spark operator makes the driver Pod, controlled by the SparkApplication, and the driver makes the executor Pods,
controlled by the driver Pod: nothing on an executor names the application. Such a Pod is left to the application,
not queued as a plain Pod: the Pod webhook's walk up its controllers (:func:`connectors.k8s.webhook.ancestry_lookup`)
goes executor → driver Pod → SparkApplication and finds the queued application, whose Workload admitted the
executors (its ``executor`` pod set). This webhook adds what lets the application be found from an executor
directly: an executor Pod (labelled ``sparkoperator.k8s.io/launched-by-spark-operator: "true"`` and
``spark-role: executor``) of a SparkApplication naming a queue gets a non-controller ownerReference to it
(``controller`` and ``blockOwnerDeletion`` false), once. The application is found through the executor's controller,
which must be a v1 Pod (the driver), and the driver's ``sparkoperator.k8s.io/app-name`` label; an executor whose
driver or application cannot be found that way is refused, as Kueue's defaulting fails (403). A Pod that is no
executor, or one of an application naming no queue, is allowed as it is.

Registered and failing as the SparkApplication integration's other webhooks: answered unchanged while the
integration is off (``failurePolicy: Ignore``); ``reinvocationPolicy: IfNeeded``, as Kueue registers it. The driver
and the application are read from the apiserver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import msgspec

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import KubeError
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.pod_webhook import (
    LookupFailed,
    allowed_as_is,
    controller_of,
    failure_policy,
    patch_answer,
)
from connectors.k8s.resources import BY_KIND, SPARK_APPLICATIONS

PATH = "/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication-executor-pod"
WEBHOOK_NAME = "mpod.sparkapplication.kb.io"
LAUNCHED_BY_LABEL = "sparkoperator.k8s.io/launched-by-spark-operator"
ROLE_LABEL = "spark-role"
EXECUTOR_ROLE = "executor"
APP_NAME_LABEL = "sparkoperator.k8s.io/app-name"

Read = Callable[[str, str], Awaitable[dict[str, Any]]]
"""An object (namespace, name) as the apiserver stores it; raises :class:`~connectors.k8s.errors.KubeError`."""
Reviewer = Callable[[bytes], Awaitable[dict[str, Any]]]


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def is_executor(pod: dict[str, Any]) -> bool:
    """An executor Pod the Spark operator launched (its two labels)."""
    labels = _labels(pod)
    return labels.get(LAUNCHED_BY_LABEL) == "true" and labels.get(ROLE_LABEL) == EXECUTOR_ROLE


def owner_reference(app: dict[str, Any]) -> dict[str, Any]:
    """The reference an executor gets to its SparkApplication: neither its controller nor blocking its deletion."""
    meta = app.get("metadata") or {}
    return {"apiVersion": SPARK_APPLICATIONS.api_version, "kind": SPARK_APPLICATIONS.kind, "name": meta.get("name", ""),
            "uid": meta.get("uid", ""), "controller": False, "blockOwnerDeletion": False}


def owner_patch(pod: dict[str, Any], app: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch adding :func:`owner_reference` to ``pod`` (empty: it has that very reference already)."""
    ref = owner_reference(app)
    refs = (pod.get("metadata") or {}).get("ownerReferences")
    if refs is None:
        return [{"op": "add", "path": "/metadata/ownerReferences", "value": [ref]}]
    if ref in refs:
        return []
    return [{"op": "add", "path": "/metadata/ownerReferences/-", "value": ref}]


def _refused(message: str) -> LookupFailed:
    return LookupFailed(message, {"code": 403, "reason": "Forbidden", "message": message})


def _named(pod: dict[str, Any], namespace: str) -> str:
    """``namespace/name`` of a Pod being created (its ``generateName`` and ``*`` when it has no name yet)."""
    meta = pod.get("metadata") or {}
    return f"{namespace}/{meta.get('name') or str(meta.get('generateName') or '') + '*'}"


async def application_of(pod: dict[str, Any], namespace: str, read_pod: Read, read_app: Read) -> dict[str, Any]:
    """The SparkApplication an executor Pod runs for: through its controller, the driver Pod, and the driver's
    ``sparkoperator.k8s.io/app-name``. Raises :class:`~connectors.k8s.pod_webhook.LookupFailed` when that fails,
    naming the executor and the field the lookup went through."""
    executor = f"executor Pod {_named(pod, namespace)}"
    ref = controller_of(pod)
    if ref is None:
        raise _refused(f"{executor}: the owner reference is missing (metadata.ownerReferences names no controller)")
    if (ref.get("apiVersion"), ref.get("kind")) != ("v1", "Pod"):
        raise _refused(f"{executor}: the owner reference is not a Pod (metadata.ownerReferences: controller "
                       f"{ref.get('apiVersion')} {ref.get('kind')} {ref.get('name')})")
    driver_name = f"{namespace}/{ref.get('name', '')}"
    try:
        driver = await read_pod(namespace, str(ref.get("name", "")))
    except KubeError as exc:
        raise _refused(f"{executor}: failed to get driver Pod {driver_name} (metadata.ownerReferences): {exc}") from exc
    app_name = _labels(driver).get(APP_NAME_LABEL)
    field = f"metadata.labels[{APP_NAME_LABEL}]"
    if not app_name:
        raise _refused(f"{executor}: the SparkApplication name label is missing in driver Pod {driver_name} ({field})")
    try:
        return await read_app(namespace, str(app_name))
    except KubeError as exc:
        raise _refused(f"{executor}: failed to get SparkApplication {namespace}/{app_name} (driver Pod "
                       f"{driver_name}'s {field}): {exc}") from exc


async def _defaults(pod: dict[str, Any], namespace: str, read_pod: Read, read_app: Read) -> list[dict[str, Any]]:
    if not is_executor(pod):
        return []
    app = await application_of(pod, namespace, read_pod, read_app)
    if not _labels(app).get(QUEUE_LABEL):
        return []  # not Kueue's
    return owner_patch(pod, app)


async def review(body: bytes, read_pod: Read, read_app: Read) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) for a Pod being created (module docstring)."""
    req = msgspec.json.decode(body).get("request") or {}
    pod = req.get("object") or {}
    patch = None
    if req.get("operation", "CREATE") == "CREATE" and isinstance(pod, dict) and pod:
        namespace = req.get("namespace") or (pod.get("metadata") or {}).get("namespace", "")
        patch = partial(_defaults, pod, namespace, read_pod, read_app)
    return await patch_answer(req, patch)


def reviewers(enabled: bool, client: KubeClient) -> dict[str, Reviewer]:
    """Path -> the review answering it: with the SparkApplication integration ``enabled``, :func:`review` reading
    from the apiserver; off, every Pod allowed as it is."""
    if not enabled:
        return {PATH: allowed_as_is}

    def reader(resource: Any) -> Read:
        async def read(namespace: str, name: str) -> dict[str, Any]:
            raw = msgspec.json.decode(await client.get(resource, name, namespace))
            return raw if isinstance(raw, dict) else {}
        return read

    read_pod, read_app = reader(BY_KIND["Pod"]), reader(SPARK_APPLICATIONS)

    async def answer(body: bytes) -> dict[str, Any]:
        return await review(body, read_pod, read_app)

    return {PATH: answer}


def registration(client_config: dict[str, Any], namespace_selector: dict[str, Any], *, on: bool) -> dict[str, Any]:
    """The ``mpod.sparkapplication.kb.io`` entry of the MutatingWebhookConfiguration: Pods on creation, failing
    closed only while the SparkApplication integration is ``on``."""
    return {
        "name": WEBHOOK_NAME, "clientConfig": client_config,
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                   "scope": "Namespaced"}],
        "namespaceSelector": namespace_selector, "failurePolicy": failure_policy(on), "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 10, "reinvocationPolicy": "IfNeeded",
    }
