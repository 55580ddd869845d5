"""What Kueue's AppWrapper integration (``workload.codeflare.dev/appwrapper``) decides about one
workload.codeflare.dev/v1beta2 AppWrapper, as pure data.

An AppWrapper wraps other objects (its ``spec.components``, each a raw ``template`` — a batch/v1 Job, a PyTorchJob,
...) that its own controller creates once it runs; Kueue queues the AppWrapper alone (Kueue's
``pkg/controller/jobs/appwrapper``, with the AppWrapper project's ``pkg/utils`` that it calls).
:mod:`connectors.k8s.appwrapper_integration` does the I/O around these pieces:

* **a component's pod sets** (:func:`component_pod_sets`): all from ``status.componentStatus[].podSets`` once the
  status has one entry per component (what the AppWrapper controller settled on); else a component's declared
  ``podSets``, else those inferred from its template's kind (a batch/v1 Job: ``parallelism``, lowered to
  ``completions``, default 1, at ``template.spec.template``; a kubeflow.org/v1 PyTorchJob's ``Master`` then
  ``Worker``; a jobset.x-k8s.io/v1alpha2 JobSet's replicated Jobs, each its ``replicas`` times its Job's pods; a
  ray.io/v1 RayCluster's or RayJob's head then worker groups; a v1 Pod; an apps/v1 Deployment or StatefulSet;
  nothing for other kinds) — as the AppWrapper controller settles them, so its status changes none;
* **the Workload's pod sets** (:func:`pod_sets`): each of those whose ``path`` (``template`` then ``.field`` and
  ``[index]`` steps) reaches a map with a ``spec`` map, in component order, named ``<AppWrapper name>-<i>`` by its
  place among them and counting ``replicas`` (default 1); its template is the labels and annotations and the spec
  found there; one whose path reaches nothing is left out, as Kueue's ``GetComponentPodSpecs`` does. Under
  ``TopologyAwareScheduling``, a topology request from that template's TAS annotations, its rank, sub-group label
  and sub-group count from the pod set's ``workload.codeflare.dev.appwrapper/tas-*`` annotations;
* **its Workload** (:func:`workload_for`): ``appwrapper-<name>-<hash>``, those pod sets, the priority class of the
  first template that names one, queue, maximum execution time, copied labels and ``provreq.kueue.x-k8s.io/``
  annotations, as for any job; the shared reconciler compares it with the pod sets the AppWrapper makes now
  (:func:`job_pod_sets`) and rewrites or replaces it as for any job;
* **suspended** is ``spec.suspend``; **starting** writes each pod set's
  :class:`~connectors.k8s.podsetinfo.PodSetInfo` into its component's ``podSetInfos`` (the AppWrapper controller
  applies them to the objects it creates; the templates are left as written) and sets ``suspend: false`` — the
  infos must number the component pod sets, else it cannot start; **stopping** sets ``suspend: true`` and clears
  every component's ``podSetInfos``; each one merge patch (the components, a list, written whole) conditioned on
  the resourceVersion read;
* **finished** (Kueue's ``Finished``): phase ``Succeeded`` ("AppWrapper finished successfully"); phase ``Failed``
  ("AppWrapper failed") once its ``ResourcesDeployed`` condition is no longer true — while it is, the wrapped
  objects are still being deleted and it is not finished yet; **active**: its ``QuotaReserved`` condition is true;
  **pods ready**: its ``PodsReady`` condition is true.

Kueue counts no reclaimable pods for an AppWrapper. Not modelled: the
defaults Kueue's pod-set templates get from the AppWrapper utilities (restart policy, DNS policy, ...). MultiKueue
runs an AppWrapper on a worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, workload_names
from connectors.k8s.jobset import BadPodSets
from connectors.k8s.raycluster import first_priority_class, infos_for, merge_diff, workload
from connectors.k8s.resources import APPWRAPPERS
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState
from projections.workloads import topology_request_from_annotations

__all__ = ["BadPodSets"]

KIND = "AppWrapper"
SUCCEEDED, FAILED = "Succeeded", "Failed"
QUOTA_RESERVED, RESOURCES_DEPLOYED, PODS_READY = "QuotaReserved", "ResourcesDeployed", "PodsReady"
TAS_POD_INDEX_LABEL = "workload.codeflare.dev.appwrapper/tas-pod-index-label"
TAS_SUB_GROUP_INDEX_LABEL = "workload.codeflare.dev.appwrapper/tas-sub-group-index-label"
TAS_SUB_GROUP_COUNT = "workload.codeflare.dev.appwrapper/tas-sub-group-count"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"


class AppWrapperSpec(o.View):
    suspend: bool | None = None
    components: list[dict[str, Any]] = []
    """As written: the pod sets are read from the raw templates (:func:`pod_sets`)."""


class AppWrapperStatus(o.View):
    phase: str = ""
    conditions: list[o.Condition] = []
    component_status: list[dict[str, Any]] = []


class AppWrapper(o.NamespacedView):
    """What the integration reads of an AppWrapper."""

    spec: AppWrapperSpec = AppWrapperSpec()
    status: AppWrapperStatus = AppWrapperStatus()


NAMES = workload_names.KindNames(APPWRAPPERS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


# --- paths into a component's template ------------------------------------------------------------------------------


class BadPath(Exception):
    """A pod set's path reaches nothing in its component's template."""


def value_at(template: Any, path: str) -> Any:
    """What ``path`` (``template``, then ``.field`` and ``[index]`` steps) reaches in a component's raw
    ``template``. Raises :class:`BadPath` naming where it went wrong."""
    if not path.startswith("template"):
        raise BadPath("first element of the path must be 'template'")
    done, rest, cursor = "template", path[len("template"):], template
    while rest:
        if rest.startswith("["):
            end = rest.find("]")
            index = rest[1:end] if end > 0 else ""
            if not (index.isascii() and index.lstrip("-").isdigit()) or not isinstance(cursor, list):
                raise BadPath(f"at path position '{done}' invalid index '{rest}'")
            if not 0 <= int(index) < len(cursor):
                raise BadPath(f"at path position '{done}' out of bounds index '{index}'")
            cursor, done, rest = cursor[int(index)], done + rest[:end + 1], rest[end + 1:]
        elif rest.startswith("."):
            rest = rest[1:]
            ends = [i for i in (rest.find("."), rest.find("[")) if i > 0]
            key = rest[:min(ends)] if ends else rest
            if not isinstance(cursor, dict) or key not in cursor:
                raise BadPath(f"at path position '{done}.' missing field '{key}'")
            cursor, done, rest = cursor[key], f"{done}.{key}", rest[len(key):]
        else:
            raise BadPath(f"at path position '{done}' invalid path element '{rest}'")
    return cursor


def pod_template_at(template: Any, path: str) -> dict[str, Any]:
    """The pod template at ``path``: the labels and annotations (string values) and the spec found there. Raises
    :class:`BadPath` when it is no map with a ``spec`` map that reads as a pod spec."""
    found = value_at(template, path)
    spec = found.get("spec") if isinstance(found, dict) else None
    if not isinstance(spec, dict):
        raise BadPath(f"content at {path} does not contain a spec")
    meta = found.get("metadata") if isinstance(found.get("metadata"), dict) else {}
    out_meta = {field: {k: v for k, v in meta[field].items() if isinstance(v, str)}
                for field in ("labels", "annotations") if isinstance(meta.get(field), dict)}
    out = {"metadata": out_meta, "spec": copy.deepcopy(spec)}
    try:
        msgspec.convert(out, o.PodTemplateSpec)
    except msgspec.ValidationError as exc:
        raise BadPath(f"content at {path}.spec not parseable as a v1.PodSpec: {exc}") from exc
    return out


# --- a component's pod sets -----------------------------------------------------------------------------------------


def _count(template: Any, path: str, *, strict: bool = True) -> int | None:
    """The number at ``path`` (None: not there, or null). A value that is not a number raises :class:`BadPath`
    when ``strict``, else counts as not there (a Job's ``parallelism`` and ``completions``)."""
    try:
        value = value_at(template, path)
    except BadPath:
        return None
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if strict:
        raise BadPath(f"at path position '{path}' non-int value {value}")
    return None


def _job_pod_sets(template: Any) -> list[dict[str, Any]]:
    replicas = 1
    parallelism = _count(template, "template.spec.parallelism", strict=False)
    completions = _count(template, "template.spec.completions", strict=False)
    if parallelism is not None:
        replicas = parallelism
    if completions is not None and completions < replicas:
        replicas = completions
    return [{"replicas": replicas, "path": "template.spec.template",
             "annotations": {TAS_POD_INDEX_LABEL: JOB_COMPLETION_INDEX}}]


def _pytorchjob_pod_sets(template: Any) -> list[dict[str, Any]]:
    out = []
    for replica_type in ("Master", "Worker"):
        prefix = f"template.spec.pytorchReplicaSpecs.{replica_type}"
        try:
            value_at(template, f"{prefix}.template")
        except BadPath:
            continue
        replicas = _count(template, f"{prefix}.replicas")
        out.append({"replicas": 1 if replicas is None else replicas, "path": f"{prefix}.template",
                    "annotations": {TAS_POD_INDEX_LABEL: REPLICA_INDEX_LABEL}})
    return out


def _replicated_pod_sets(template: Any) -> list[dict[str, Any]]:
    try:
        value_at(template, "template.spec.template")
    except BadPath:
        return []
    replicas = _count(template, "template.spec.replicas")
    return [{"replicas": 1 if replicas is None else replicas, "path": "template.spec.template"}]


def _jobset_pod_sets(template: Any) -> list[dict[str, Any]]:
    """Each replicated Job with a template: its replicas times the pods one of its Jobs runs (parallelism lowered to
    completions), ranked by completion index within a Job, the Jobs being the sub-groups."""
    try:
        jobs = value_at(template, "template.spec.replicatedJobs")
    except BadPath:
        return []
    out = []
    for i in range(len(jobs) if isinstance(jobs, list) else 0):
        prefix = f"template.spec.replicatedJobs[{i}]."
        try:
            value_at(template, f"{prefix}template")
        except BadPath:
            continue
        pods = _job_pod_sets(value_at(template, f"{prefix}template"))[0]["replicas"]  # its Job template's
        replicas = _count(template, f"{prefix}replicas", strict=False)
        replicas = 1 if replicas is None else replicas
        out.append({"replicas": replicas * pods, "path": f"{prefix}template.spec.template", "annotations": {
            TAS_POD_INDEX_LABEL: JOB_COMPLETION_INDEX, TAS_SUB_GROUP_INDEX_LABEL: JOBSET_JOB_INDEX,
            TAS_SUB_GROUP_COUNT: str(replicas)}})
    return out


def _ray_pod_sets(cluster_spec: str) -> Any:
    """A Ray cluster's pod sets under ``cluster_spec``: its head (one), then each worker group with a template."""

    def infer(template: Any) -> list[dict[str, Any]]:
        out = [{"replicas": 1, "path": f"{cluster_spec}headGroupSpec.template"}]
        try:
            groups = value_at(template, f"{cluster_spec}workerGroupSpecs")
        except BadPath:
            return out
        for i in range(len(groups) if isinstance(groups, list) else 0):
            prefix = f"{cluster_spec}workerGroupSpecs[{i}]."
            try:
                value_at(template, f"{prefix}template")
            except BadPath:
                continue
            replicas = _count(template, f"{prefix}replicas")
            out.append({"replicas": 1 if replicas is None else replicas, "path": f"{prefix}template"})
        return out

    return infer


INFERRED = {("batch/v1", "Job"): _job_pod_sets, ("kubeflow.org/v1", "PyTorchJob"): _pytorchjob_pod_sets,
            ("jobset.x-k8s.io/v1alpha2", "JobSet"): _jobset_pod_sets,
            ("ray.io/v1", "RayCluster"): _ray_pod_sets("template.spec."),
            ("ray.io/v1", "RayJob"): _ray_pod_sets("template.spec.rayClusterSpec."),
            ("v1", "Pod"): lambda _: [{"replicas": 1, "path": "template"}],
            ("apps/v1", "Deployment"): _replicated_pod_sets, ("apps/v1", "StatefulSet"): _replicated_pod_sets}
"""Template ``(apiVersion, kind)`` -> the pod sets the AppWrapper utilities infer for it."""


def inferred_pod_sets(template: Any) -> list[dict[str, Any]]:
    """The pod sets inferred for a component's raw ``template`` of a known kind (none for another). Raises
    :class:`BadPath` for a replica count that is not a number or a pod set without a pod template."""
    if not isinstance(template, dict):
        return []
    infer = INFERRED.get((str(template.get("apiVersion", "")), str(template.get("kind", ""))))
    found = infer(template) if infer is not None else []
    for ps in found:
        try:
            pod_template_at(template, ps["path"])
        except BadPath as exc:
            raise BadPath(f"{ps['path']} does not refer to a v1.PodSpecTemplate: {exc}") from exc
    return found


def _pod_set_list(value: Any) -> list[dict[str, Any]]:
    return [ps for ps in value if isinstance(ps, dict)] if isinstance(value, list) else []


def component_pod_sets(spec: dict[str, Any], status: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each component's pod sets (module docstring), from the raw ``spec`` and ``status``. Raises
    :class:`BadPath` as :func:`inferred_pod_sets`, or for a replica count that is no integer, naming the field."""
    components = [c if isinstance(c, dict) else {} for c in spec.get("components") or []]
    settled = status.get("componentStatus") or []
    if isinstance(settled, list) and len(settled) == len(components):
        found = [_pod_set_list(s.get("podSets") if isinstance(s, dict) else None) for s in settled]
        return _counted(found, "status.componentStatus")
    found = []
    for i, c in enumerate(components):
        try:
            found.append(_pod_set_list(c.get("podSets")) or inferred_pod_sets(c.get("template")))
        except BadPath as exc:
            raise BadPath(f"spec.components[{i}]: {exc}") from exc
    return _counted(found, "spec.components")


def _counted(found: list[list[dict[str, Any]]], where: str) -> list[list[dict[str, Any]]]:
    """``found``, once every pod set's ``replicas`` is absent or an integer (the AppWrapper API's int32)."""
    for i, pod_sets_of in enumerate(found):
        for j, ps in enumerate(pod_sets_of):
            value = ps.get("replicas")
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise BadPath(f"{where}[{i}].podSets[{j}].replicas: not an integer: {value!r}")
    return found


# --- the Workload ---------------------------------------------------------------------------------------------------


def replicas(ps: dict[str, Any]) -> int:
    """A pod set's ``replicas``, default 1."""
    value = ps.get("replicas")
    return 1 if value is None else int(value)


def _topology_request(template: dict[str, Any], ps: dict[str, Any]) -> dict[str, Any]:
    annotations = ps.get("annotations") if isinstance(ps.get("annotations"), dict) else {}
    request = topology_request_from_annotations(template["metadata"].get("annotations") or {})
    request = request or o.PodSetTopologyRequest()
    count = annotations.get(TAS_SUB_GROUP_COUNT)
    request = msgspec.structs.replace(
        request, pod_index_label=annotations.get(TAS_POD_INDEX_LABEL),
        sub_group_index_label=annotations.get(TAS_SUB_GROUP_INDEX_LABEL),
        sub_group_count=int(count) if isinstance(count, str) and count.isdigit() else None)
    return msgspec.to_builtins(request)


def _raw(aw: AppWrapper | dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if isinstance(aw, AppWrapper):
        aw = msgspec.to_builtins(aw)
    return aw["metadata"]["name"], aw.get("spec") or {}, aw.get("status") or {}


def templated_pod_sets(aw: AppWrapper | dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(pod set, its pod template)`` of every component pod set whose path reaches a pod template, in order."""
    _, spec, status = _raw(aw)
    out = []
    for component, found in zip(spec.get("components") or [], component_pod_sets(spec, status), strict=False):
        template = component.get("template") if isinstance(component, dict) else None
        for ps in found:
            try:
                out.append((ps, pod_template_at(template, str(ps.get("path", "")))))
            except BadPath:
                continue  # as Kueue's GetComponentPodSpecs: left out
    return out


def pod_set_names(aw: AppWrapper | dict[str, Any]) -> list[str]:
    """The Workload's pod-set names, in order: ``<name>-<i>``."""
    name = _raw(aw)[0]
    return [f"{name}-{i}" for i in range(len(templated_pod_sets(aw)))]


def pod_sets(raw_aw: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the AppWrapper as stored (module docstring). Raises
    :class:`~events.errors.InvalidInput` when a component's pod sets cannot be inferred."""
    try:
        found = templated_pod_sets(raw_aw)
    except BadPath as exc:
        raise InvalidInput(f"AppWrapper {raw_aw['metadata']['name']}: {exc}") from exc
    out = []
    for (ps, template), name in zip(found, pod_set_names(raw_aw), strict=True):
        pod_set: dict[str, Any] = {"name": name, "count": replicas(ps), "template": template}
        if tas:
            pod_set["topologyRequest"] = _topology_request(template, ps)
        out.append(pod_set)
    return out


def workload_for(state: ClusterState, keys: KeysToCopy, raw_aw: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_aw`` (as stored) under ``name``, copying ``keys``. Raises
    :class:`~events.errors.InvalidInput` for pod sets that cannot be inferred,
    :class:`~connectors.k8s.job_priority.WorkloadPriorityClassNotFound` or
    :class:`~connectors.k8s.job_priority.PriorityClassNotFound` for a class the log does not hold."""
    meta = raw_aw["metadata"]
    return workload(state, keys, raw_aw, name, pod_sets(raw_aw, tas=state.tas_enabled),
                    controller_ref(meta["name"], meta["uid"]))


def job_pod_sets(aw: AppWrapper) -> list[o.PodSet] | None:
    """The pod sets the AppWrapper makes now, as Kueue compares them with its Workload's (``EquivalentToWorkload``):
    :func:`pod_sets`' names, counts and templates. None while they cannot be inferred: its Workload is then left as
    it is (Kueue's reconcile fails on them)."""
    try:
        found = templated_pod_sets(aw)
    except BadPath:
        return None
    return [o.PodSet(name=name, count=replicas(ps), template=msgspec.convert(template, o.PodTemplateSpec))
            for (ps, template), name in zip(found, pod_set_names(aw), strict=True)]


def priority_class(aw: AppWrapper) -> str | None:
    """The PriorityClass the AppWrapper's pods name: the first pod template's that names one."""
    try:
        return first_priority_class([{"template": t} for _, t in templated_pod_sets(aw)])
    except BadPath:
        return None


# --- starting and stopping ------------------------------------------------------------------------------------------


def start_infos(state: ClusterState, wl: Any, aw: AppWrapper) -> list[podsetinfo.PodSetInfo]:
    """What starting the AppWrapper gives each pod set, in order, from the Workload's admission (raises as
    :func:`connectors.k8s.raycluster.infos_for`, in the AppWrapper utilities' ``SetPodSetInfos`` words)."""
    try:
        names = pod_set_names(aw)
    except BadPath as exc:
        raise BadPodSets(str(exc)) from exc
    return infos_for(state, wl, names,
                     mismatch=lambda expected, given: f"expecting {expected} podsets, got {given}")


def info_dict(info: podsetinfo.PodSetInfo) -> dict[str, Any]:
    """A component's ``podSetInfos`` entry for ``info``: its non-empty fields."""
    out = {"annotations": info.annotations, "labels": info.labels, "nodeSelector": info.node_selector,
           "tolerations": [msgspec.to_builtins(t) for t in info.tolerations], "schedulingGates": info.scheduling_gates}
    return {k: v for k, v in out.items() if v}


def with_infos(spec: dict[str, Any], status: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """A copy of raw ``spec`` with ``infos`` written over its components' ``podSetInfos``, one per component pod
    set in order (a component's list made anew when its length differs). Raises :class:`BadPodSets` when
    ``infos`` do not number the component pod sets (Kueue's "expecting N podsets, got M")."""
    try:
        found = component_pod_sets(spec, status)
    except BadPath as exc:
        raise BadPodSets(str(exc)) from exc
    total = sum(len(f) for f in found)
    if total != len(infos):
        raise BadPodSets(f"expecting {total} podsets, got {len(infos)}")
    spec = copy.deepcopy(spec)
    given = iter(infos)
    for i, (component, pod_sets_of) in enumerate(zip(spec.get("components") or [], found, strict=False)):
        if not isinstance(component, dict):
            raise BadPodSets(f"spec.components[{i}]: not an object, cannot hold podSetInfos")
        if not pod_sets_of:
            component.pop("podSetInfos", None)
            continue
        component["podSetInfos"] = [info_dict(next(given)) for _ in pod_sets_of]
    return spec


def _patch(raw_aw: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": raw_aw["metadata"]["resourceVersion"]},
            "spec": merge_diff(raw_aw.get("spec") or {}, spec)}


def start_patch(raw_aw: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the AppWrapper: the components' ``podSetInfos``, ``suspend: false``."""
    spec = with_infos(raw_aw.get("spec") or {}, raw_aw.get("status") or {}, infos)
    spec["suspend"] = False
    return _patch(raw_aw, spec)


def stop_patch(raw_aw: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the AppWrapper with every component's ``podSetInfos`` cleared (Kueue's
    ``ClearPodSetInfos``; the templates were never changed, so ``saved`` is not needed)."""
    spec = copy.deepcopy(raw_aw.get("spec") or {})
    for component in spec.get("components") or []:
        if isinstance(component, dict):
            component.pop("podSetInfos", None)
    spec["suspend"] = True
    return _patch(raw_aw, spec)


# --- what its status says -------------------------------------------------------------------------------------------


def _condition_true(aw: AppWrapper, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in aw.status.conditions)


def finished(aw: AppWrapper) -> tuple[str, str] | None:
    """``(reason, message)`` once it succeeded, or failed with its wrapped objects deleted (module docstring)."""
    if aw.status.phase == SUCCEEDED:
        return SUCCEEDED, "AppWrapper finished successfully"
    if aw.status.phase == FAILED and not _condition_true(aw, RESOURCES_DEPLOYED):
        return FAILED, "AppWrapper failed"
    return None


def is_active(aw: AppWrapper) -> bool:
    """Kueue's ``IsActive``: its ``QuotaReserved`` condition is true."""
    return _condition_true(aw, QUOTA_RESERVED)


def pods_ready(aw: AppWrapper) -> bool:
    """Kueue's ``PodsReady``: its ``PodsReady`` condition is true."""
    return _condition_true(aw, PODS_READY)
