"""What Kueue's JobSet integration (``jobset.x-k8s.io/jobset``) decides about one JobSet, as pure data.

Kueue runs a JobSet through the same generic job reconciler as a batch/v1 Job; only these pieces are the JobSet's
(Kueue's ``pkg/controller/jobs/jobset``), and :mod:`connectors.k8s.jobset_integration` does the I/O around them:

* **its Workload** (:func:`workload_for`): named ``jobset-<name>-<hash>`` (:mod:`connectors.k8s.workload_names`,
  kind ``JobSet``, group ``jobset.x-k8s.io``), one pod set per replicated Job, in their order, named after it, of
  ``replicas × min(parallelism, completions)`` pods (a Job template's parallelism defaults to 1, its completions to
  its parallelism), its template the replicated Job's pod template as written; with the recorded Configuration's
  ``TopologyAwareScheduling`` on, a topology request from that template's TAS annotations, the completion index as
  the pods' rank and the ``jobset.sigs.k8s.io/job-index`` label as that of their Job among ``replicas``. The queue,
  priority (``kueue.x-k8s.io/priority-class``, else the first pod template naming a ``priorityClassName``), maximum
  execution time, copied labels and ``provreq.kueue.x-k8s.io/`` annotations are taken as for a Job;
* **starting it** (:func:`start_patch`): every replicated Job's pod template gets its pod set's
  :class:`~connectors.k8s.podsetinfo.PodSetInfo` merged in (the JobSet controller carries it to the child Jobs it
  makes), and ``spec.suspend: false``; one merge patch holding the whole ``replicatedJobs`` list (a merge patch
  replaces a list), conditioned on the JobSet's resourceVersion, so nothing written meanwhile is overwritten;
* **stopping it** (:func:`stop_patch`): ``spec.suspend: true`` and every pod template restored as its Workload
  recorded it (labels, annotations, node selector, tolerations, scheduling gates), in the same write — unlike a
  Job, a JobSet's templates may change while suspended pods are still going: the JobSet controller suspends its
  Jobs itself;
* **finished** (:func:`finished`): its ``Completed`` condition ``True`` → ``Succeeded``, ``Failed`` → ``Failed``,
  with the condition's message;
* **reclaimable pods** (:func:`reclaimable_pods`) and **pods ready** (:func:`pods_ready`), Kueue's counts from
  ``status.replicatedJobsStatus``.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, workload_body, workload_names
from connectors.k8s.copied_metadata import copied, workload_annotations
from connectors.k8s.jobs import COMPLETION_INDEX, topology_request
from connectors.k8s.resources import JOB_UID_LABEL, JOBSETS
from events import objects as o
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState
from projections.in_use import FINALIZER

KIND = "JobSet"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
"""The label the JobSet controller gives each pod: the index of its Job among its replicated Job's replicas."""


class ReplicatedJobStatus(o.View):
    name: str = ""
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0


class JobTemplate(o.View):
    metadata: o.TemplateMeta = o.TemplateMeta()
    spec: o.JobSpec = o.JobSpec()


class ReplicatedJob(o.View):
    name: str = ""
    replicas: int = 1
    template: JobTemplate = JobTemplate()


class JobSetSpec(o.View):
    suspend: bool = False
    replicated_jobs: list[ReplicatedJob] = []


class JobSetStatus(o.View):
    conditions: list[o.Condition] = []
    replicated_jobs_status: list[ReplicatedJobStatus] = []


class JobSet(o.NamespacedView):
    """What the integration reads of a JobSet; the Workload's templates are built from the JobSet as stored."""

    spec: JobSetSpec = JobSetSpec()
    status: JobSetStatus = JobSetStatus()


NAMES = workload_names.KindNames(JOBSETS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


# --- the Workload ---------------------------------------------------------------------------------------------


def pods_per_replica(job_spec: dict[str, Any]) -> int:
    """The pods one Job of a replicated Job runs at once: its parallelism (default 1), at most its completions."""
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if completions is not None else parallelism


def pod_sets(raw_jobset: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the JobSet as stored (``tas``: the recorded Configuration's
    ``TopologyAwareScheduling`` gate, without which Kueue builds no topology request)."""
    out: list[dict[str, Any]] = []
    for rj in (raw_jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (rj.get("template") or {}).get("spec") or {}
        template = copy.deepcopy(job_spec.get("template") or {})
        replicas = rj.get("replicas", 1)
        pod_set: dict[str, Any] = {"name": rj["name"], "count": replicas * pods_per_replica(job_spec),
                                   "template": template}
        if tas:
            request = topology_request((template.get("metadata") or {}).get("annotations") or {}, COMPLETION_INDEX)
            request.update(subGroupIndexLabel=JOB_INDEX_LABEL, subGroupCount=replicas)
            pod_set["topologyRequest"] = request
        out.append(pod_set)
    return out


def pod_priority_class(raw_jobset: dict[str, Any]) -> str | None:
    """The PriorityClass the JobSet's pods name: the first pod template, in replicated Job order, that names one."""
    for ps in pod_sets(raw_jobset, tas=False):
        name = ((ps["template"].get("spec") or {}).get("priorityClassName"))
        if name:
            return str(name)
    return None


def pods_priority_class(jobset: JobSet) -> str | None:
    """:func:`pod_priority_class` of the JobSet as the integration holds it."""
    return next((rj.template.spec.template.spec.priority_class_name for rj in jobset.spec.replicated_jobs
                 if rj.template.spec.template.spec.priority_class_name), None)


def job_pod_sets(jobset: JobSet) -> list[o.PodSet]:
    """The pod sets the JobSet makes now, as Kueue compares them with its Workload's: per replicated Job, in
    order, ``replicas × min(parallelism, completions)`` pods of its pod template (no minimum count)."""
    out: list[o.PodSet] = []
    for rj in jobset.spec.replicated_jobs:
        spec = rj.template.spec
        per_job = min(spec.parallelism, spec.completions) if spec.completions is not None else spec.parallelism
        out.append(o.PodSet(name=rj.name, count=rj.replicas * per_job, template=spec.template))
    return out


def workload_for(state: ClusterState, keys: KeysToCopy, raw_jobset: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_jobset`` (as stored) under ``name``, copying ``keys``. Raises
    :class:`~connectors.k8s.job_priority.WorkloadPriorityClassNotFound` or
    :class:`~connectors.k8s.job_priority.PriorityClassNotFound` for a class the log does not hold."""
    meta = raw_jobset["metadata"]
    return job_workload(state, keys, raw_jobset, name, pod_sets(raw_jobset, tas=state.tas_enabled),
                        pod_priority_class(raw_jobset), controller_ref(meta["name"], meta["uid"]))


def job_workload(state: ClusterState, keys: KeysToCopy, raw: dict[str, Any], name: str,
                 pod_sets: list[dict[str, Any]], pods_priority_class: str | None, owner: dict[str, Any]
                 ) -> dict[str, Any]:
    """The Workload of a job ``raw`` (as stored) that one Workload runs whole — the JobSet, MPIJob, training
    operator's jobs (:mod:`connectors.k8s.kubeflow`) and the kinds built on :func:`connectors.k8s.raycluster.workload`
    — given its ``pod_sets``, the priority class its pods name and its controller reference ``owner``: the queue,
    priority, maximum execution time, copied labels and ``provreq.kueue.x-k8s.io/`` annotations from its metadata,
    as Kueue's job framework builds one for any such kind; raises as :func:`workload_for`."""
    meta = raw["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    spec = workload_body.spec(state, labels, pod_sets, pods_priority_class)
    wl_annotations = workload_annotations(state, keys, annotations)
    wl_meta: dict[str, Any] = {
        "name": name, "namespace": meta["namespace"],
        "labels": {**copied(keys.labels, labels), JOB_UID_LABEL: meta["uid"]},
        "finalizers": [FINALIZER],
        "ownerReferences": [owner],
    }
    if wl_annotations:
        wl_meta["annotations"] = wl_annotations
    return workload_body.workload(wl_meta, spec)


# --- starting and stopping ------------------------------------------------------------------------------------


class BadPodSets(Exception):
    """The admission does not name a pod set for every replicated Job (Kueue's ``BadPodSetsInfoLenError``)."""


def start_infos(state: ClusterState, wl: Any, jobset: JobSet) -> list[podsetinfo.PodSetInfo]:
    """What starting each replicated Job adds to its pod template, in replicated Job order, from the Workload's
    admission (``wl``: its :class:`~projections.workloads.WorkloadInfo`). Raises :class:`BadPodSets` when a
    replicated Job has no pod set assignment, :class:`~connectors.k8s.podsetinfo.MergeConflict` for conflicting
    checks' updates."""
    by_name = {a.name: a for a in (wl.admission.pod_set_assignments if wl.admission is not None else ())}
    out: list[podsetinfo.PodSetInfo] = []
    for rj in jobset.spec.replicated_jobs:
        psa = by_name.get(rj.name)
        if psa is None:
            raise BadPodSets(f"expecting {len(jobset.spec.replicated_jobs)} podset, got {len(by_name)}")
        out.append(podsetinfo.start_info(state, wl, psa))
    return out


def start_patch(raw_jobset: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the JobSet: each replicated Job's pod template with its info merged in, and
    ``suspend: false``, conditioned on the resourceVersion read. Raises
    :class:`~connectors.k8s.podsetinfo.MergeConflict` (Kueue then fails the start for good)."""
    replicated = copy.deepcopy((raw_jobset.get("spec") or {}).get("replicatedJobs") or [])
    for rj, info in zip(replicated, infos, strict=True):
        template = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        view = msgspec.convert(template, o.PodTemplateSpec)
        write_template(template, podsetinfo.onto_template(view, info))
    return {"metadata": {"resourceVersion": raw_jobset["metadata"]["resourceVersion"]},
            "spec": {"suspend": False, "replicatedJobs": replicated}}


def stop_patch(raw_jobset: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the JobSet and gives each replicated Job's pod template back what its
    Workload's pod set of the same name recorded (``saved``; a replicated Job without one is left as it is),
    conditioned on the resourceVersion read."""
    by_name = {ps.name: ps for ps in saved}
    replicated = copy.deepcopy((raw_jobset.get("spec") or {}).get("replicatedJobs") or [])
    for rj in replicated:
        ps = by_name.get(rj.get("name", ""))
        if ps is None:
            continue
        template = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        write_template(template, recorded_info(ps))
    return {"metadata": {"resourceVersion": raw_jobset["metadata"]["resourceVersion"]},
            "spec": {"suspend": True, "replicatedJobs": replicated}}


def recorded_info(ps: o.PodSet) -> podsetinfo.PodSetInfo:
    """What a Workload's pod set recorded of its job's pod template: what stopping the job gives the template back."""
    t = ps.template
    return podsetinfo.PodSetInfo(labels=dict(t.metadata.labels), annotations=dict(t.metadata.annotations),
                                 node_selector=dict(t.spec.node_selector), tolerations=list(t.spec.tolerations),
                                 scheduling_gates=list(t.spec.scheduling_gates))


def write_template(template: dict[str, Any], info: podsetinfo.PodSetInfo) -> None:
    """Set the raw pod ``template``'s labels, annotations, node selector, tolerations and gates to exactly
    ``info``'s (an empty one removed). A ``metadata`` or ``spec`` map is made only to hold something: an
    empty one added would be a change of the job's spec that Kueue's ``podset.Merge``/``RestorePodSpec``
    never make (a template they leave equal is not written)."""
    for part, field, value in (("metadata", "labels", info.labels),
                               ("metadata", "annotations", info.annotations),
                               ("spec", "nodeSelector", info.node_selector),
                               ("spec", "tolerations", [msgspec.to_builtins(t) for t in info.tolerations]),
                               ("spec", "schedulingGates", info.scheduling_gates)):
        holder = template.get(part)
        if value:
            if not isinstance(holder, dict):
                holder = template[part] = {}
            holder[field] = value
        elif isinstance(holder, dict):
            holder.pop(field, None)


# --- what its status says ---------------------------------------------------------------------------------------


def finished(jobset: JobSet) -> tuple[str, str] | None:
    """``(reason, message)`` of a JobSet that completed (``Succeeded``) or failed (``Failed``); None: neither."""
    for kind, reason in (("Completed", "Succeeded"), ("Failed", "Failed")):
        for c in jobset.status.conditions:
            if c.type == kind and c.status == "True":
                return reason, c.message
    return None


def is_active(jobset: JobSet) -> bool:
    """Some replicated Job has active pods (Kueue's ``IsActive``)."""
    return any(s.active > 0 for s in jobset.status.replicated_jobs_status)


def pods_ready(jobset: JobSet) -> bool:
    """Every Job of every replicated Job ready or succeeded (Kueue counts Jobs here, not pods)."""
    replicas = sum(rj.replicas for rj in jobset.spec.replicated_jobs)
    return replicas == sum(s.ready + s.succeeded for s in jobset.status.replicated_jobs_status)


def reclaimable_pods(jobset: JobSet) -> tuple[tuple[str, int], ...]:
    """Kueue's reclaimable pods of a JobSet: for each replicated Job with succeeded Jobs (no more than its
    replicas), those Jobs' pods."""
    statuses = {s.name: s for s in jobset.status.replicated_jobs_status}
    out: list[tuple[str, int]] = []
    for rj in jobset.spec.replicated_jobs:
        status = statuses.get(rj.name)
        if status is not None and 0 < status.succeeded <= rj.replicas:
            out.append((rj.name, status.succeeded * pods_per_replica(msgspec.to_builtins(rj.template.spec))))
    return tuple(out)
