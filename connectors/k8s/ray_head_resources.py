"""What Kueue counts on a Ray cluster's head pod set beyond the head template as written (Kueue v0.19's #11260,
#12405, #12454; kept in v0.20), as pure data.

KubeRay adds containers and a Job the head template does not show; Kueue adds their resources to the ``head`` pod
set it builds, so the quota held covers what runs. In order:

* **Redis cleanup** (:func:`fold_redis_cleanup`): with GCS fault tolerance on (:func:`gcs_fault_tolerant`: KubeRay's
  ``ray.io/ft-enabled`` annotation ``true``, any case, on the Ray object, or ``gcsFaultToleranceOptions`` written in
  the cluster spec), KubeRay runs a Redis cleanup Job when the cluster goes, requesting 200m CPU and 256Mi. Kueue
  folds those requests into the head's Ray container (its first) as the larger of each: a ``cpu`` or ``memory``
  request already at least that is kept. A head template with no container cannot take them: the pod sets are not
  built (:class:`~events.errors.InvalidInput`, Kueue's error), and so no Workload is made;
* **the autoscaler** (:func:`autoscaler_container`): with ``enableInTreeAutoscaling: true``, KubeRay runs the Ray
  autoscaler as a sidecar of the head pod; Kueue appends an ``autoscaler`` container with
  ``autoscalerOptions.resources`` when written, else KubeRay's 500m CPU and 512Mi (requests and limits);
* **a RayJob's sidecar submitter** (:func:`sidecar_submitter_container`): with ``submissionMode: SidecarMode``
  KubeRay runs the job submitter in the head pod, always with its default resources (requests 500m CPU and 200Mi,
  limits 1 CPU and 1Gi, ``submitterPodTemplate`` ignored); Kueue appends a ``ray-job-submitter`` container;
* **the History Server collector** (:func:`collector_container`, Kueue v0.20's #14670, KubeRay v1.7): with
  ``historyServerOptions.collectorOptions`` written in the cluster spec, KubeRay runs a ``ray-history-collector``
  sidecar in every Ray pod, head and workers; Kueue appends it to every pod set of the cluster (after the
  autoscaler on the head) with ``collectorOptions.resources`` when written, else KubeRay's requests 50m CPU and
  64Mi, limits 200m CPU and 256Mi (:func:`account_collector`). A RayJob's submitter pod set is not a Ray pod.

These containers are only counted: the Workload's pod set carries them, the Ray object's template is not changed,
and stopping gives the template back only what the admission had added (labels, annotations, node selector,
tolerations, gates).
"""

from __future__ import annotations

import copy
from typing import Any

from events.errors import InvalidInput
from events.quantity import parse_quantity

FT_ANNOTATION = "ray.io/ft-enabled"
"""KubeRay's annotation turning GCS fault tolerance on."""
REDIS_CLEANUP_REQUESTS = {"cpu": "200m", "memory": "256Mi"}
"""What KubeRay's Redis cleanup Job requests (and is limited to)."""
NO_RAY_CONTAINER = "cannot account for Redis cleanup resources: head pod template must include the Ray container"
"""Kueue's error when a fault-tolerant cluster's head template has no container to fold the cleanup into."""
AUTOSCALER = "autoscaler"
"""The name KubeRay gives the autoscaler sidecar."""
AUTOSCALER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
"""KubeRay's autoscaler sidecar resources when ``autoscalerOptions.resources`` is not written."""
SIDECAR_MODE = "SidecarMode"
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}
"""KubeRay's default submitter container resources (a ``K8sJobMode`` default submitter's, a ``SidecarMode`` one's)."""
COLLECTOR_CONTAINER = "ray-history-collector"
"""The name KubeRay gives the History Server collector sidecar."""
COLLECTOR_RESOURCES = {"limits": {"cpu": "200m", "memory": "256Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}}
"""KubeRay's collector sidecar resources when ``collectorOptions.resources`` is not written."""


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def gcs_fault_tolerant(cluster_spec: dict[str, Any], annotations: dict[str, Any]) -> bool:
    """KubeRay's ``IsGCSFaultToleranceEnabled`` for a raw cluster spec and its Ray object's ``annotations``."""
    flag = annotations.get(FT_ANNOTATION)
    return (isinstance(flag, str) and flag.lower() == "true") or cluster_spec.get("gcsFaultToleranceOptions") is not None


def autoscaling(cluster_spec: dict[str, Any]) -> bool:
    """``enableInTreeAutoscaling`` set and true."""
    return cluster_spec.get("enableInTreeAutoscaling") is True


def _larger(current: Any, floor: str) -> Any:
    """``current`` unless it parses below ``floor`` (an unparseable one is replaced)."""
    try:
        return current if parse_quantity(current) >= parse_quantity(floor) else floor
    except (TypeError, ValueError, ArithmeticError):
        return floor


def fold_redis_cleanup(template: dict[str, Any]) -> None:
    """Raise the first container's ``cpu`` and ``memory`` requests of raw pod ``template`` (changed in place) to
    at least the Redis cleanup Job's. Raises :class:`~events.errors.InvalidInput` when it has no container."""
    containers = _map(template.get("spec")).get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        raise InvalidInput(NO_RAY_CONTAINER)
    resources = containers[0].setdefault("resources", {})
    requests = resources.setdefault("requests", {})
    for name, floor in REDIS_CLEANUP_REQUESTS.items():
        requests[name] = _larger(requests[name], floor) if name in requests else floor


def autoscaler_container(cluster_spec: dict[str, Any]) -> dict[str, Any]:
    """The autoscaler sidecar Kueue counts: ``autoscalerOptions.resources`` as written, else KubeRay's."""
    written = _map(cluster_spec.get("autoscalerOptions")).get("resources")
    resources = copy.deepcopy(written) if isinstance(written, dict) else copy.deepcopy(AUTOSCALER_RESOURCES)
    return {"name": AUTOSCALER, "resources": resources}


def sidecar_submitter_container() -> dict[str, Any]:
    """The ``SidecarMode`` submitter Kueue counts on a RayJob's head."""
    return {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}


def collector_options(cluster_spec: dict[str, Any]) -> dict[str, Any] | None:
    """``historyServerOptions.collectorOptions`` of a raw cluster spec when written (a map), else None."""
    options = _map(cluster_spec.get("historyServerOptions")).get("collectorOptions")
    return options if isinstance(options, dict) else None


def collector_container(options: dict[str, Any]) -> dict[str, Any]:
    """The collector sidecar Kueue counts for ``collectorOptions``: its ``resources`` as written, else KubeRay's."""
    written = options.get("resources")
    resources = copy.deepcopy(written) if isinstance(written, dict) else copy.deepcopy(COLLECTOR_RESOURCES)
    return {"name": COLLECTOR_CONTAINER, "resources": resources}


def _append(template: dict[str, Any], container: dict[str, Any]) -> None:
    spec = template.setdefault("spec", {})
    containers = spec.get("containers")
    spec["containers"] = [*(containers if isinstance(containers, list) else []), container]


def account_head(template: dict[str, Any], cluster_spec: dict[str, Any], annotations: dict[str, Any]) -> None:
    """Add to the head pod set's raw ``template`` (a copy, changed in place) the Redis cleanup and the autoscaler
    of ``cluster_spec``, whose Ray object has ``annotations`` (module docstring). Raises
    :class:`~events.errors.InvalidInput` as :func:`fold_redis_cleanup` does."""
    if gcs_fault_tolerant(cluster_spec, annotations):
        fold_redis_cleanup(template)
    if autoscaling(cluster_spec):
        _append(template, autoscaler_container(cluster_spec))


def account_sidecar_submitter(template: dict[str, Any], submission_mode: Any) -> None:
    """Append the sidecar submitter to a RayJob's head pod set's raw ``template`` in ``SidecarMode``."""
    if submission_mode == SIDECAR_MODE:
        _append(template, sidecar_submitter_container())


def account_collector(templates: list[dict[str, Any]], cluster_spec: dict[str, Any]) -> None:
    """Append the History Server collector to each of the raw Ray pod ``templates`` (copies, changed in place)
    when ``cluster_spec`` writes ``collectorOptions``."""
    options = collector_options(cluster_spec)
    if options is None:
        return
    for template in templates:
        _append(template, collector_container(options))
