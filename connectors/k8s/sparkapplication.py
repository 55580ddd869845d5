"""What Kueue's SparkApplication integration (``sparkoperator.k8s.io/sparkapplication``) decides about one
sparkoperator.k8s.io/v1beta2 SparkApplication, as pure data.

A SparkApplication describes its driver and executors as Spark pod specs (``spec.driver``, ``spec.executor``: cores,
memory, GPU, node selector, ...) that the Spark operator turns into pods; Kueue queues the application as a whole
(Kueue's ``pkg/controller/jobs/sparkapplication``). :mod:`connectors.k8s.spark_integration` does the I/O around these
pieces:

* **its pod sets** (:func:`pod_sets`): ``driver`` (count 1), then ``executor`` (``spec.executor.instances``, absent:
  0), each a pod template built as the operator builds the pod, resource fields only: one container
  (``spark-kubernetes-driver`` / ``spark-kubernetes-executor``) requesting the CPU and memory Spark requests for
  the role (:mod:`connectors.k8s.spark_resources`: cores, memory and its overhead; Kueue v0.20; a memory size that
  is not Java's refuses the application, which gets no Workload), limited to ``coreLimit``, ``memoryLimit`` (a
  Java size, ``512m`` read as ``512Mi``) and the ``gpu`` (name, quantity), the
  init containers and sidecars added, the role's priority class, node selector, affinity and tolerations, and the
  labels and annotations of the role's ``template`` with the role's own over them. Under ``TopologyAwareScheduling``
  each carries the topology request of its TAS annotations;
* **its Workload** (:func:`workload_for`): ``sparkapplication-<name>-<hash>``, those pod sets, the rest as for any job;
* **suspended** is ``spec.suspend``; **starting** merges each role's admission into the role's ``labels``,
  ``annotations``, ``tolerations``, ``template.spec.schedulingGates`` and node selector (the application's
  ``spec.nodeSelector`` when it has one, else the role's) and sets ``suspend: false``; **stopping** sets
  ``suspend: true`` and gives those fields back what the Workload's pod sets recorded, and ``executor.instances``
  the executor pod set's count (none when 0: the CRD's minimum is 1); one merge patch each, conditioned on the
  resourceVersion read;
* **finished** (Kueue's ``Finished``): ``status.applicationState.state`` ``COMPLETED`` (succeeded), ``FAILED`` or
  ``SUBMISSION_FAILED`` (failed), with the state's ``errorMessage``; **active**: state ``RUNNING``; **pods ready**:
  state ``RUNNING`` and, when executors are asked for, at least ``spec.executor.instances`` of
  ``status.executorState`` ``RUNNING`` or ``COMPLETED``.

Kueue counts no reclaimable pods for it. Its executor Pods get a reference to it from
:mod:`connectors.k8s.spark_executor_webhook`. Not modelled: volumes and mounts in the pod sets (no quota reads them),
elastic SparkApplications (dynamic allocation under ``ElasticJobsViaWorkloadSlices``), MultiKueue's ``managedBy``.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, spark_resources, workload_names
from connectors.k8s.jobset import BadPodSets, recorded_info, write_template
from connectors.k8s.raycluster import first_priority_class, infos_for, merge_diff, workload
from connectors.k8s.resources import SPARK_APPLICATIONS
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState
from projections.workloads import topology_request_from_annotations

__all__ = ["BadPodSets"]

KIND = "SparkApplication"
DRIVER, EXECUTOR = "driver", "executor"
ROLES = (DRIVER, EXECUTOR)
"""The pod sets, in Kueue's order; each also names the spec field the role is described in."""
CONTAINER = {DRIVER: "spark-kubernetes-driver", EXECUTOR: "spark-kubernetes-executor"}
RUNNING, COMPLETED, FAILED, SUBMISSION_FAILED = "RUNNING", "COMPLETED", "FAILED", "SUBMISSION_FAILED"
JAVA_UNITS = {"k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti", "p": "Pi"}


class SparkSpec(o.View):
    suspend: bool | None = None
    driver: dict[str, Any] = {}
    executor: dict[str, Any] = {}
    """The roles as written: the pod sets are built from them (:func:`role_template`)."""
    type: str | None = None
    spark_conf: dict[str, Any] = {}
    memory_overhead_factor: str | None = None
    """What else sizes the roles' Pods (:mod:`connectors.k8s.spark_resources`)."""


class ApplicationState(o.View):
    state: str = ""
    error_message: str = ""


class SparkStatus(o.View):
    application_state: ApplicationState = ApplicationState()
    executor_state: dict[str, str] = {}


class SparkApplication(o.NamespacedView):
    """What the integration reads of a SparkApplication; the pod sets are built from it as stored."""

    spec: SparkSpec = SparkSpec()
    status: SparkStatus = SparkStatus()


NAMES = workload_names.KindNames(SPARK_APPLICATIONS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


# --- the pod sets ---------------------------------------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def k8s_memory(java: str) -> str:
    """A Java memory size (``512m``, ``2g``) as a Kubernetes quantity (``512Mi``, ``2Gi``), as the operator reads
    ``memory`` and ``memoryLimit``; a bare number stays bytes."""
    text = java.strip().lower()
    if text.endswith("b") and text[-2:-1] in JAVA_UNITS:
        text = text[:-1]
    unit = JAVA_UNITS.get(text[-1:])
    return f"{text[:-1]}{unit}" if unit else text


def _resources(spec: dict[str, Any], role_name: str) -> dict[str, Any]:
    role = _map(spec.get(role_name))
    requests: dict[str, Any] = {"cpu": spark_resources.cpu_request(spec, role_name),
                                "memory": spark_resources.memory_request(spec, role_name)}
    limits: dict[str, Any] = {}
    if isinstance(role.get("coreLimit"), str):
        limits["cpu"] = role["coreLimit"]
    if isinstance(role.get("memoryLimit"), str):
        limits["memory"] = k8s_memory(role["memoryLimit"])
    gpu = _map(role.get("gpu"))
    if gpu.get("name") and isinstance(gpu.get("quantity"), int) and gpu["quantity"] > 0:
        limits[gpu["name"]] = str(gpu["quantity"])
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def _same(a: Any, b: Any) -> bool:
    """The operator adds a container only when none has its name and image."""
    return isinstance(a, dict) and isinstance(b, dict) and (a.get("name"), a.get("image")) == (
        b.get("name"), b.get("image"))


def role_template(raw_app: dict[str, Any], role_name: str) -> dict[str, Any]:
    """The pod template of role ``role_name`` (module docstring): what Kueue builds of the operator's pod."""
    role = _map(_map(raw_app.get("spec")).get(role_name))
    container: dict[str, Any] = {"name": CONTAINER[role_name],
                                 "resources": _resources(_map(raw_app.get("spec")), role_name)}
    containers = [container]
    for sidecar in _list(role.get("sidecars")):
        if not any(_same(sidecar, c) for c in containers):
            containers.append(copy.deepcopy(sidecar))
    spec: dict[str, Any] = {"containers": containers}
    inits: list[Any] = []
    for init in _list(role.get("initContainers")):
        if not any(_same(init, c) for c in inits):
            inits.append(copy.deepcopy(init))
    for field, value in (("initContainers", inits), ("priorityClassName", role.get("priorityClassName")),
                         ("nodeSelector", dict(_map(role.get("nodeSelector")))),
                         ("affinity", copy.deepcopy(role.get("affinity"))),
                         ("tolerations", copy.deepcopy(_list(role.get("tolerations"))))):
        if value:
            spec[field] = value
    base = _map(_map(role.get("template")).get("metadata"))
    labels = {**_map(base.get("labels")), **_map(role.get("labels"))}
    annotations = {**_map(base.get("annotations")), **_map(role.get("annotations"))}
    meta = {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v}
    return {"metadata": meta, "spec": spec}


def executor_count(raw_app: dict[str, Any]) -> int:
    """The executor pod set's count: ``spec.executor.instances``, absent 0."""
    value = _map(_map(raw_app.get("spec")).get(EXECUTOR)).get("instances")
    return value if isinstance(value, int) else 0


def pod_sets(raw_app: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the SparkApplication as stored (``tas``: the recorded Configuration's
    ``TopologyAwareScheduling`` gate)."""
    out = []
    for name, count in ((DRIVER, 1), (EXECUTOR, executor_count(raw_app))):
        template = role_template(raw_app, name)
        pod_set: dict[str, Any] = {"name": name, "count": count, "template": template}
        if tas:
            request = topology_request_from_annotations(template["metadata"].get("annotations") or {})
            if request is not None:
                pod_set["topologyRequest"] = msgspec.to_builtins(request)
        out.append(pod_set)
    return out


def _raw(app: SparkApplication | dict[str, Any]) -> dict[str, Any]:
    return msgspec.to_builtins(app) if isinstance(app, SparkApplication) else app


def workload_for(state: ClusterState, keys: KeysToCopy, raw_app: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_app`` (as stored) under ``name``, copying ``keys``; raises as
    :func:`connectors.k8s.raycluster.workload_for` does."""
    meta = raw_app["metadata"]
    return workload(state, keys, raw_app, name, pod_sets(raw_app, tas=state.tas_enabled),
                    controller_ref(meta["name"], meta["uid"]))


def job_pod_sets(app: SparkApplication) -> list[o.PodSet] | None:
    """The pod sets the SparkApplication makes now (names, counts, templates), which its Workload is compared with
    (None: it makes none, its Spark sizes being refused)."""
    try:
        built = pod_sets(_raw(app), tas=False)
    except InvalidInput:
        return None
    return [o.PodSet(name=ps["name"], count=ps["count"], template=msgspec.convert(ps["template"], o.PodTemplateSpec))
            for ps in built]


def priority_class(app: SparkApplication) -> str | None:
    """The PriorityClass the SparkApplication's pods name: the driver's, else the executors'."""
    return first_priority_class(pod_sets(_raw(app), tas=False))


# --- starting and stopping ------------------------------------------------------------------------------------


def start_infos(state: ClusterState, wl: Any, app: SparkApplication) -> list[podsetinfo.PodSetInfo]:
    """What starting gives the driver and the executors, from the Workload's admission. Raises :class:`BadPodSets`
    when the admission lacks one (its message as kueue-es has always worded it: the pod sets, then the
    assignments)."""
    return infos_for(state, wl, list(ROLES),
                     mismatch=lambda expected, given: f"expecting {expected} podset, got {given}")


def _node_selector_holder(spec: dict[str, Any], role: dict[str, Any]) -> dict[str, Any]:
    """Where a role's node selector is written: the application's ``spec`` when it has one (the operator refuses
    both), else the role."""
    return spec if spec.get("nodeSelector") is not None else role


def _role_info(spec: dict[str, Any], role: dict[str, Any]) -> podsetinfo.PodSetInfo:
    template = _map(role.get("template"))
    return podsetinfo.PodSetInfo(
        annotations=dict(_map(role.get("annotations"))), labels=dict(_map(role.get("labels"))),
        node_selector=dict(_map(_node_selector_holder(spec, role).get("nodeSelector"))),
        tolerations=msgspec.convert(_list(role.get("tolerations")), list[o.Toleration]),
        scheduling_gates=list(_list(_map(template.get("spec")).get("schedulingGates"))))


def _write_role(spec: dict[str, Any], role: dict[str, Any], role_name: str, info: podsetinfo.PodSetInfo) -> None:
    """Set the role's fields (and the node selector where it lives) to exactly ``info``'s."""
    template = role.setdefault("template", {"spec": {"containers": [{"name": CONTAINER[role_name]}]}})
    holder = {"metadata": {}, "spec": {}}
    write_template(holder, info)
    for field in ("labels", "annotations"):
        _set(role, field, holder["metadata"].get(field))
    _set(role, "tolerations", holder["spec"].get("tolerations"))
    _set(_node_selector_holder(spec, role), "nodeSelector", holder["spec"].get("nodeSelector"))
    _set(template.setdefault("spec", {}), "schedulingGates", holder["spec"].get("schedulingGates"))


def _set(into: dict[str, Any], field: str, value: Any) -> None:
    if value:
        into[field] = value
    else:
        into.pop(field, None)


def _patch(raw_app: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": raw_app["metadata"]["resourceVersion"]},
            "spec": merge_diff(raw_app.get("spec") or {}, spec)}


def start_patch(raw_app: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the SparkApplication: each role's fields with its admission merged in,
    ``suspend: false``. Raises :class:`BadPodSets` unless there are two infos, and
    :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
    if len(infos) != len(ROLES):
        raise BadPodSets(f"expecting {len(ROLES)} podsets, got {len(infos)}")
    spec = copy.deepcopy(raw_app.get("spec") or {})
    for role_name, info in zip(ROLES, infos, strict=True):
        role = spec.setdefault(role_name, {})
        _write_role(spec, role, role_name, podsetinfo.merge(_role_info(spec, role), info))
    spec["suspend"] = False
    return _patch(raw_app, spec)


def stop_patch(raw_app: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the SparkApplication with each role given back what its Workload's pod set
    recorded (Kueue's ``RestorePodSetsInfo``; nothing given back without both pod sets) and the executors their
    recorded count, a count of 0 as no ``instances`` (the CRD's minimum is 1, so 0 would fail the whole patch and
    leave the application running: Kueue's fix, kubernetes-sigs/kueue#15610, newer than v0.20, followed as a bug
    fix)."""
    spec = copy.deepcopy(raw_app.get("spec") or {})
    by_name = {ps.name: ps for ps in saved}
    if all(name in by_name for name in ROLES):
        for role_name in ROLES:
            role = spec.setdefault(role_name, {})
            _write_role(spec, role, role_name, recorded_info(by_name[role_name]))
        count = by_name[EXECUTOR].count
        if count:
            spec[EXECUTOR]["instances"] = count
        else:  # the operator's CRD wants at least 1: none asked for is no field (Kueue #15610)
            spec[EXECUTOR].pop("instances", None)
    spec["suspend"] = True
    return _patch(raw_app, spec)


# --- what its status says ---------------------------------------------------------------------------------------


def finished(app: SparkApplication) -> tuple[str, str] | None:
    """``(reason, message)`` once the application completed (``Succeeded``) or failed (``Failed``), with its state's
    error message; None while neither."""
    state = app.status.application_state
    if state.state == COMPLETED:
        return "Succeeded", state.error_message
    if state.state in (FAILED, SUBMISSION_FAILED):
        return "Failed", state.error_message
    return None


def is_active(app: SparkApplication) -> bool:
    """Kueue's ``IsActive``: the application state is ``RUNNING``."""
    return app.status.application_state.state == RUNNING


def pods_ready(app: SparkApplication) -> bool:
    """Kueue's ``PodsReady``: ``RUNNING`` with every executor asked for running or completed (the state turns
    ``RUNNING`` with the driver, even while executors cannot be scheduled)."""
    if not is_active(app):
        return False
    wanted = executor_count(_raw(app))
    ready = sum(1 for s in app.status.executor_state.values() if s in (RUNNING, COMPLETED))
    return ready >= wanted
