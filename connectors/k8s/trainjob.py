"""What Kueue's Kubeflow Trainer integration (``trainer.kubeflow.org/trainjob``) decides about one
trainer.kubeflow.org/v1alpha1 TrainJob, as pure data.

A TrainJob names a runtime (``spec.runtimeRef``: a namespaced ``TrainingRuntime`` or, by default, a
``ClusterTrainingRuntime``) whose ``spec.template`` is a JobSet template; the Trainer makes the TrainJob's JobSet from
it. Kueue (``pkg/controller/jobs/trainjob``) queues the TrainJob on the pod sets of that JobSet, which it derives as
the Trainer does (:func:`jobset_spec`), and :mod:`connectors.k8s.trainjob_integration` does the I/O around these
pieces:

* **the derived JobSet** (:func:`jobset_spec`): the runtime's replicated Jobs, each Job running a count of
  pods (its parallelism and its completions): the template's parallelism (default 1), for the one labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` (the trainer step) the runtime's
  ``mlPolicy.numNodes`` (default 1) when it has an ``mlPolicy``; the TrainJob's ``spec.trainer.numNodes``
  then replaces the trainer step's count, except under an MPI policy (``mlPolicy.mpi``), where it sizes the
  Job named ``node`` instead — less one, at least 1, with ``mpi.runLauncherAsNode`` (the launcher, the
  trainer step of the Trainer's MPI runtimes, is then one of the nodes) — and the trainer step keeps its
  count; the trainer step's ``node`` container takes the TrainJob's image, command, args,
  ``resourcesPerNode`` and env, and with the launcher as a node the ``node`` Job's ``node`` container its
  ``resourcesPerNode`` and env as well; the trainer step and the initializers (``dataset-initializer``,
  ``model-initializer``) run one Job; then each ``spec.podTemplateOverrides`` entry, in order, is merged
  into the pod templates of the Jobs it targets (metadata labels and annotations, the pod spec as a
  strategic merge: maps merged, containers, volumes, gates and pull secrets by name, other lists replaced);
* **its Workload** (:func:`workload_for`): ``trainjob-<name>-<hash>``, the pod sets of that JobSet as Kueue's JobSet
  integration makes them (:func:`connectors.k8s.jobset.pod_sets`), the TrainJob as its controller; the pod sets it
  makes now (:func:`job_pod_sets`) are what that Workload is compared with, so one the TrainJob no longer matches
  is rewritten or made anew;
* **suspended** is ``spec.suspend``; **starting** is two writes, as in Kueue (its ``RunWithPodSetsInfo`` updates
  the TrainJob, then the reconciler unsuspends it): first (:func:`start_patch`) the still suspended TrainJob's
  overrides — those Kueue wrote before (labelled ``kueue.x-k8s.io/podset``) dropped, one appended per admitted pod
  set (its Job; the admission's labels, annotations, node selector, tolerations and scheduling gates) after the
  user's —, then (:func:`unsuspend_patch`) ``suspend: false``; **stopping** first suspends
  (:func:`suspend_patch`), then, once no Job is active, drops Kueue's overrides (:func:`restore_patch`) — the
  Trainer's webhook lets the overrides change only on an update that leaves the TrainJob suspended;
* **finished** (:func:`finished`): its ``Complete`` condition ``True`` → ``Succeeded``, ``Failed`` → ``Failed``,
  with the condition's message; **active**: a Job of ``status.jobsStatus`` with active pods; **pods ready**: ready
  and succeeded Jobs reach the derived JobSet's replicas; **reclaimable pods**: the JobSet's count over
  ``status.jobsStatus``.

Not modelled: the other ML policies' own pod-count rules beyond ``numNodes``, the Trainer's initializer
settings and its MPI plugin's volumes and env (they change no request), ``spec.runtimePatches`` (newer Kueue
writes its admission there).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import jobset, podsetinfo, workload_names
from connectors.k8s.jobset import BadPodSets
from connectors.k8s.podsetinfo import PODSET_LABEL
from connectors.k8s.resources import TRAINJOBS
from events import objects as o
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState

__all__ = ["BadPodSets"]

KIND = "TrainJob"
TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME = "TrainingRuntime", "ClusterTrainingRuntime"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
INITIALIZERS = ("dataset-initializer", "model-initializer")
NODE = "node"
COMPLETE, FAILED = "Complete", "Failed"
MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name", "schedulingGates": "name",
              "imagePullSecrets": "name", "env": "name", "volumeMounts": "mountPath", "ports": "containerPort"}
"""The lists of a pod spec a strategic merge patch merges item by item (by this key); any other is replaced."""


class RuntimeRef(o.View):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class TrainJobSpec(o.View):
    suspend: bool = False
    runtime_ref: RuntimeRef = RuntimeRef()
    trainer: dict[str, Any] | None = None
    pod_template_overrides: list[dict[str, Any]] = []


class JobStatus(o.View):
    name: str = ""
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0


class TrainJobStatus(o.View):
    conditions: list[o.Condition] = []
    jobs_status: list[JobStatus] = []


class TrainJob(o.NamespacedView):
    """What the integration reads of a TrainJob; the Workload is built from it as stored."""

    spec: TrainJobSpec = TrainJobSpec()
    status: TrainJobStatus = TrainJobStatus()


class Runtime(o.View):
    """A TrainingRuntime or ClusterTrainingRuntime (its spec as written: ``template``, ``mlPolicy``)."""

    metadata: o.ObjectMeta
    spec: dict[str, Any] = {}

    @property
    def key(self) -> str:
        return runtime_key(self.metadata.namespace, self.metadata.name)


def runtime_key(namespace: str, name: str) -> str:
    """How the integration keys a runtime: ``<namespace>/<name>``, a ClusterTrainingRuntime ``/<name>``."""
    return f"{namespace}/{name}"


def runtime_named(ref: RuntimeRef, namespace: str) -> tuple[bool, str, str] | None:
    """``(cluster, namespace, name)`` of the runtime ``ref`` names from a TrainJob in ``namespace`` (a
    ClusterTrainingRuntime unless its kind says ``TrainingRuntime``), None for a kind the Trainer has no runtime of
    (Kueue: "unsupported runtime")."""
    kind = ref.kind or CLUSTER_TRAINING_RUNTIME
    if ref.api_group not in ("", TRAINJOBS.group) or kind not in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME):
        return None
    cluster = kind == CLUSTER_TRAINING_RUNTIME
    return cluster, "" if cluster else namespace, ref.name


def runtime_wanted(job: TrainJob) -> tuple[bool, str] | None:
    """``(cluster, key)`` of the runtime the TrainJob names (:func:`runtime_named`)."""
    named = runtime_named(job.spec.runtime_ref, job.metadata.namespace)
    return (named[0], runtime_key(named[1], named[2])) if named is not None else None


NAMES = workload_names.KindNames(TRAINJOBS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


# --- the derived JobSet ----------------------------------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mpi(runtime_spec: dict[str, Any]) -> dict[str, Any] | None:
    """The runtime's MPI policy (``mlPolicy.mpi``); None under another policy or none."""
    mpi = _map(runtime_spec.get("mlPolicy")).get("mpi")
    return mpi if isinstance(mpi, dict) else None


def _launcher_as_node(runtime_spec: dict[str, Any]) -> bool:
    """Whether the runtime's MPI policy runs the launcher as one of the nodes (``runLauncherAsNode``)."""
    return _map(_mpi(runtime_spec)).get("runLauncherAsNode") is True


def _job_count(runtime_spec: dict[str, Any], name: Any, ancestor: Any, job_spec: dict[str, Any],
               trainer: dict[str, Any]) -> int:
    """The pods one Job of the replicated Job ``name`` runs, as the Trainer counts them (module docstring):
    the template's parallelism, the trainer step's the policy's ``numNodes``; the TrainJob's ``numNodes`` then
    sizes the trainer step, or under an MPI policy the ``node`` Job, less the launcher when it runs as a
    node."""
    parallelism = job_spec.get("parallelism")
    count = parallelism if isinstance(parallelism, int) else 1
    policy = runtime_spec.get("mlPolicy")
    if ancestor == TRAINER and isinstance(policy, dict):
        nodes = policy.get("numNodes")
        count = nodes if isinstance(nodes, int) else 1
    num_nodes = trainer.get("numNodes")
    if not isinstance(num_nodes, int):
        return count
    if _mpi(runtime_spec) is None:
        return num_nodes if ancestor == TRAINER else count
    if name != NODE:
        return count
    return max(num_nodes - 1, 1) if _launcher_as_node(runtime_spec) else num_nodes


def _node_containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in _list(pod_spec.get("containers")) if isinstance(c, dict) and c.get("name") == NODE]


def _apply_program(pod_spec: dict[str, Any], trainer: dict[str, Any]) -> None:
    """The TrainJob's image, command and args onto the trainer step's ``node`` container."""
    for container in _node_containers(pod_spec):
        for field in ("image", "command", "args"):
            if trainer.get(field) is not None:
                container[field] = copy.deepcopy(trainer[field])


def _apply_node(pod_spec: dict[str, Any], trainer: dict[str, Any]) -> None:
    """The TrainJob's ``resourcesPerNode`` and env onto a ``node`` container: the trainer step's, and with the
    launcher as a node the ``node`` Job's too."""
    for container in _node_containers(pod_spec):
        resources = _map(trainer.get("resourcesPerNode"))
        if resources.get("limits") is not None or resources.get("requests") is not None:
            container["resources"] = {k: copy.deepcopy(v) for k, v in resources.items()
                                      if k in ("limits", "requests") and v is not None}
        if _list(trainer.get("env")):
            container["env"] = _merge_list(_list(container.get("env")), trainer["env"], "name")


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    """``current`` with ``patch``'s items merged in by ``key`` (new ones appended)."""
    out = copy.deepcopy(current)
    for item in patch:
        at = next((i for i, c in enumerate(out) if isinstance(c, dict) and isinstance(item, dict)
                   and c.get(key) == item.get(key)), None)
        if at is None:
            out.append(copy.deepcopy(item))
        else:
            out[at] = strategic_merge(out[at], item)
    return out


def strategic_merge(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` merged into ``current`` as a strategic merge patch of a pod spec merges it (:data:`MERGE_KEYS`);
    a null value removes the field."""
    out = copy.deepcopy(current)
    for field, value in patch.items():
        if value is None:
            out.pop(field, None)
        elif isinstance(value, dict) and isinstance(out.get(field), dict):
            out[field] = strategic_merge(out[field], value)
        elif isinstance(value, list) and field in MERGE_KEYS:
            out[field] = _merge_list(_list(out.get(field)), value, MERGE_KEYS[field])
        else:
            out[field] = copy.deepcopy(value)
    return out


def _apply_override(template: dict[str, Any], override: dict[str, Any]) -> None:
    """One ``podTemplateOverrides`` entry onto a pod template."""
    meta = _map(override.get("metadata"))
    for field in ("labels", "annotations"):
        if isinstance(meta.get(field), dict):
            tmeta = template.setdefault("metadata", {})
            tmeta[field] = {**_map(tmeta.get(field)), **meta[field]}
    if isinstance(override.get("spec"), dict):
        template["spec"] = strategic_merge(_map(template.get("spec")), override["spec"])


def jobset_spec(runtime_spec: dict[str, Any], trainer: dict[str, Any] | None,
                overrides: list[dict[str, Any]]) -> dict[str, Any]:
    """The spec of the JobSet the Trainer makes for a TrainJob with ``trainer`` (``spec.trainer``) and
    ``overrides`` (``spec.podTemplateOverrides``) from a runtime's spec (module docstring)."""
    trainer = trainer or {}
    template_spec = _map(_map(runtime_spec.get("template")).get("spec"))
    replicated = copy.deepcopy(_list(template_spec.get("replicatedJobs")))
    as_node = _launcher_as_node(runtime_spec)
    for rj in replicated:
        if not isinstance(rj, dict):
            continue
        job_template = rj.setdefault("template", {})
        ancestor = _map(_map(job_template.get("metadata")).get("labels")).get(ANCESTOR_LABEL)
        job_spec = job_template.setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = _job_count(runtime_spec, rj.get("name"), ancestor,
                                                                       job_spec, trainer)
        if ancestor == TRAINER or ancestor in INITIALIZERS:
            rj["replicas"] = 1
        if ancestor == TRAINER or (as_node and rj.get("name") == NODE):
            pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
            if ancestor == TRAINER:
                _apply_program(pod_spec, trainer)
            _apply_node(pod_spec, trainer)
    for override in overrides:
        targets = {_map(t).get("name") for t in _list(_map(override).get("targetJobs"))}
        for rj in replicated:
            if isinstance(rj, dict) and rj.get("name") in targets:
                _apply_override(rj["template"]["spec"].setdefault("template", {}), override)
    return {**{k: copy.deepcopy(v) for k, v in template_spec.items() if k != "replicatedJobs"},
            "replicatedJobs": replicated}


def derived_jobset(job: TrainJob, runtime_spec: dict[str, Any]) -> jobset.JobSet:
    """The TrainJob's JobSet (:func:`jobset_spec`) as the JobSet integration reads one, the TrainJob's Jobs'
    statuses as its own."""
    spec = jobset_spec(runtime_spec, job.spec.trainer, job.spec.pod_template_overrides)
    status = {"replicatedJobsStatus": [msgspec.to_builtins(s) for s in job.status.jobs_status]}
    return msgspec.convert({"metadata": msgspec.to_builtins(job.metadata), "spec": spec, "status": status},
                           jobset.JobSet)


def _as_jobset(raw_job: dict[str, Any], runtime_spec: dict[str, Any]) -> dict[str, Any]:
    spec = _map(raw_job.get("spec"))
    return {"metadata": raw_job["metadata"],
            "spec": jobset_spec(runtime_spec, spec.get("trainer"), _list(spec.get("podTemplateOverrides")))}


def pod_sets(raw_job: dict[str, Any], runtime_spec: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the TrainJob as stored: its JobSet's, as Kueue's JobSet integration makes them."""
    return jobset.pod_sets(_as_jobset(raw_job, runtime_spec), tas=tas)


def job_pod_sets(job: TrainJob, runtime_spec: dict[str, Any]) -> list[o.PodSet]:
    """The pod sets the TrainJob makes now on its runtime's spec, which its Workload is compared with (Kueue's
    ``PodSets`` of a TrainJob: its JobSet's): a changed ``numNodes``, trainer resources, override or runtime makes
    them differ."""
    return jobset.job_pod_sets(derived_jobset(job, runtime_spec))


def workload_for(state: ClusterState, keys: KeysToCopy, raw_job: dict[str, Any], runtime_spec: dict[str, Any],
                 name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_job`` (as stored) on its runtime's spec under ``name``, copying ``keys``:
    the derived JobSet's Workload (queue, priority, maximum execution time, copied metadata as for a JobSet), the
    TrainJob its controller. Raises as :func:`connectors.k8s.jobset.workload_for` does."""
    body = jobset.workload_for(state, keys, _as_jobset(raw_job, runtime_spec), name)
    meta = raw_job["metadata"]
    body["metadata"]["ownerReferences"] = [controller_ref(meta["name"], meta["uid"])]
    return body


def priority_class(job: TrainJob, runtime_spec: dict[str, Any]) -> str | None:
    """The PriorityClass the TrainJob's pods name: the first of its JobSet's pod templates naming one."""
    return jobset.pods_priority_class(derived_jobset(job, runtime_spec))


# --- starting and stopping ------------------------------------------------------------------------------------


def is_kueues(override: Any) -> bool:
    """Whether a ``podTemplateOverrides`` entry is one Kueue wrote (labelled ``kueue.x-k8s.io/podset``)."""
    return bool(_map(_map(_map(override).get("metadata")).get("labels")).get(PODSET_LABEL))


def admission_written(job: TrainJob) -> bool:
    """Whether the TrainJob still carries overrides Kueue wrote at its start."""
    return any(is_kueues(ov) for ov in job.spec.pod_template_overrides)


def start_infos(state: ClusterState, wl: Any, job: TrainJob, runtime_spec: dict[str, Any]
                ) -> list[tuple[str, podsetinfo.PodSetInfo]]:
    """``(pod set, what starting adds to its Job's pods)`` per admitted pod set, in admission order. Raises
    :class:`BadPodSets` unless the admission has one per Job of the derived JobSet,
    :class:`~connectors.k8s.podsetinfo.MergeConflict` for conflicting checks' updates."""
    assignments = list(wl.admission.pod_set_assignments) if wl.admission is not None else []
    jobs = {rj.name for rj in derived_jobset(job, runtime_spec).spec.replicated_jobs}
    if len(assignments) != len(jobs) or any(a.name not in jobs for a in assignments):
        raise BadPodSets(f"expecting {len(jobs)} podset, got {len(assignments)}")
    return [(a.name, podsetinfo.start_info(state, wl, a)) for a in assignments]


def _override(name: str, info: podsetinfo.PodSetInfo) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for field, value in (("nodeSelector", info.node_selector),
                         ("tolerations", [msgspec.to_builtins(t) for t in info.tolerations]),
                         ("schedulingGates", info.scheduling_gates)):
        if value:
            spec[field] = value
    meta = {field: value for field, value in (("labels", info.labels), ("annotations", info.annotations)) if value}
    return {"targetJobs": [{"name": name}], "metadata": meta, "spec": spec}


def _users(raw_job: dict[str, Any]) -> list[Any]:
    return [ov for ov in _list(_map(raw_job.get("spec")).get("podTemplateOverrides")) if not is_kueues(ov)]


def _patch(raw_job: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": raw_job["metadata"]["resourceVersion"]}, "spec": spec}


def start_patch(raw_job: dict[str, Any], infos: list[tuple[str, podsetinfo.PodSetInfo]]) -> dict[str, Any]:
    """The merge patch that gives the suspended TrainJob its admission, leaving it suspended (the Trainer refuses
    new overrides on a TrainJob the same write unsuspends): the user's overrides, then one of Kueue's per pod set,
    conditioned on the resourceVersion read. :func:`unsuspend_patch` follows it."""
    overrides = copy.deepcopy(_users(raw_job)) + [_override(name, info) for name, info in infos]
    return _patch(raw_job, {"podTemplateOverrides": overrides})


def unsuspend_patch(raw_job: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that runs the TrainJob once :func:`start_patch` is written (``raw_job``: as that write left
    it), conditioned on that resourceVersion."""
    return _patch(raw_job, {"suspend": False})


def suspend_patch(raw_job: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that suspends the TrainJob (its overrides kept until no Job is active)."""
    return _patch(raw_job, {"suspend": True})


def restore_patch(raw_job: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that gives a suspended TrainJob back the overrides it had before Kueue's: those before the
    first one Kueue wrote."""
    overrides = _list(_map(raw_job.get("spec")).get("podTemplateOverrides"))
    first = next((i for i, ov in enumerate(overrides) if is_kueues(ov)), len(overrides))
    return _patch(raw_job, {"podTemplateOverrides": copy.deepcopy(overrides[:first]) or None})


# --- what its status says ---------------------------------------------------------------------------------------


def finished(job: TrainJob) -> tuple[str, str] | None:
    """``(reason, message)`` of a TrainJob that completed (``Succeeded``) or failed (``Failed``); None: neither."""
    for kind, reason in ((COMPLETE, "Succeeded"), (FAILED, "Failed")):
        for c in job.status.conditions:
            if c.type == kind and c.status == "True":
                return reason, c.message
    return None


def is_active(job: TrainJob) -> bool:
    """Some Job of the TrainJob has active pods (Kueue's ``IsActive``)."""
    return any(s.active > 0 for s in job.status.jobs_status)


def pods_ready(job: TrainJob, runtime_spec: dict[str, Any] | None) -> bool:
    """Kueue's ``PodsReady``: the ready and succeeded Jobs reach the derived JobSet's replicas (never without the
    runtime)."""
    if runtime_spec is None:
        return False
    replicas = sum(rj.replicas for rj in derived_jobset(job, runtime_spec).spec.replicated_jobs)
    return replicas == sum(s.ready + s.succeeded for s in job.status.jobs_status)


def reclaimable_pods(job: TrainJob, runtime_spec: dict[str, Any] | None) -> tuple[tuple[str, int], ...]:
    """Kueue's reclaimable pods of a TrainJob: its JobSet's count (:func:`connectors.k8s.jobset.reclaimable_pods`)
    over ``status.jobsStatus``; none without the runtime."""
    if runtime_spec is None or not job.status.jobs_status:
        return ()
    return jobset.reclaimable_pods(derived_jobset(job, runtime_spec))
