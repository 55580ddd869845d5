"""What Kueue's MPIJob integration (``kubeflow.org/mpijob``) decides about one kubeflow.org/v2beta1 MPIJob, as pure data.

Kueue runs an MPIJob through the same generic job reconciler as a batch/v1 Job; only these pieces are the MPIJob's
(Kueue's ``pkg/controller/jobs/mpijob``), and :mod:`connectors.k8s.mpijob_integration` does the I/O around them:

* **its Workload** (:func:`workload_for`): named ``mpijob-<name>-<hash>`` (:mod:`connectors.k8s.workload_names`,
  kind ``MPIJob``, group ``kubeflow.org``), a pod set per replica type the MPIJob has — ``launcher`` then
  ``worker``, whatever order the map is written in — of ``replicas`` pods (default 1), its template the replica's
  pod template as written; with the recorded Configuration's ``TopologyAwareScheduling`` on, a topology request
  from that template's TAS annotations with the MPI operator's ``training.kubeflow.org/replica-index`` label as
  the pods' rank. The priority class is ``runPolicy.schedulingPolicy.priorityClass``, else the Launcher's pod
  template's, else the Worker's (a WorkloadPriorityClass label first, as for any job); the queue, maximum
  execution time, copied labels and ``provreq.kueue.x-k8s.io/`` annotations are taken as for a JobSet;
* **suspended** is ``spec.runPolicy.suspend`` (absent: running);
* **starting it** (:func:`start_patch`): each replica's pod template gets its pod set's
  :class:`~connectors.k8s.podsetinfo.PodSetInfo` merged in, and ``runPolicy.suspend: false``; one merge patch
  (the replica specs are a map, so only the templates written are touched), conditioned on the resourceVersion;
* **stopping it** (:func:`stop_patch`): ``runPolicy.suspend: true`` and each pod template restored as its
  Workload's pod set of the same name recorded it, in the same write;
* **finished** (:func:`finished`): a ``Succeeded`` condition ``True`` → ``Succeeded``, ``Failed`` → ``Failed``,
  with the condition's message;
* **pods ready** (:func:`pods_ready`): its ``Running`` condition ``True``; **active**: a replica status with
  active pods. Kueue counts no reclaimable pods for an MPIJob.

``runLauncherAsWorker`` changes none of this in Kueue's reconciler: only its webhook reads it, giving the Worker
template a pod-index offset under TAS (:func:`connectors.k8s.mpijob_webhook.worker_offset_ops`), which the Worker
pod set's template, and so its pods, carry to the topology ungater (:mod:`connectors.k8s.ungating`).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, workload_names
from connectors.k8s.jobs import topology_request
from connectors.k8s.jobset import BadPodSets, job_workload, recorded_info, write_template
from connectors.k8s.resources import MPIJOBS
from events import objects as o
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState

KIND = "MPIJob"
LAUNCHER, WORKER = "Launcher", "Worker"
REPLICA_TYPES = (LAUNCHER, WORKER)
"""The replica types Kueue makes pod sets of, in its order."""
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
"""The label the MPI operator gives each pod: its index among its replica type's pods (the TAS rank)."""


class ReplicaStatus(o.View):
    active: int = 0
    succeeded: int = 0
    failed: int = 0


class ReplicaSpec(o.View):
    replicas: int | None = None
    template: o.PodTemplateSpec = o.PodTemplateSpec()


class SchedulingPolicy(o.View):
    priority_class: str = ""


class RunPolicy(o.View):
    suspend: bool | None = None
    scheduling_policy: SchedulingPolicy | None = None


class MPIJobSpec(o.View):
    run_policy: RunPolicy = RunPolicy()
    mpi_replica_specs: dict[str, ReplicaSpec] = {}
    run_launcher_as_worker: bool | None = None

    @property
    def suspend(self) -> bool:
        """Kueue's ``IsSuspended``: ``runPolicy.suspend`` set and true."""
        return bool(self.run_policy.suspend)


class MPIJobStatus(o.View):
    conditions: list[o.Condition] = []
    replica_statuses: dict[str, ReplicaStatus] = {}


class MPIJob(o.NamespacedView):
    """What the integration reads of an MPIJob; the Workload's templates are built from the MPIJob as stored."""

    spec: MPIJobSpec = MPIJobSpec()
    status: MPIJobStatus = MPIJobStatus()


NAMES = workload_names.KindNames(MPIJOBS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


# --- the Workload ---------------------------------------------------------------------------------------------


def replica_types(specs: dict[str, Any]) -> list[str]:
    """The replica types of ``specs`` (a raw or viewed ``mpiReplicaSpecs``) Kueue makes pod sets of, in its order."""
    return [t for t in REPLICA_TYPES if t in specs]


def _raw_specs(raw_mpijob: dict[str, Any]) -> dict[str, Any]:
    return (raw_mpijob.get("spec") or {}).get("mpiReplicaSpecs") or {}


def pod_sets(raw_mpijob: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the MPIJob as stored (``tas``: the recorded Configuration's
    ``TopologyAwareScheduling`` gate, without which Kueue builds no topology request)."""
    specs = _raw_specs(raw_mpijob)
    return [replica_pod_set(replica_type, specs[replica_type] or {}, tas=tas) for replica_type in replica_types(specs)]


def replica_pod_set(replica_type: str, spec: dict[str, Any], *, tas: bool) -> dict[str, Any]:
    """The pod set of one replica spec (as stored) of a kubeflow.org job (an MPIJob's, a training job's): named
    after its type lowercased, of ``replicas`` pods (default 1), its template as written, and under ``tas`` a
    topology request from the template's TAS annotations ranked by the replica index."""
    template = copy.deepcopy(spec.get("template") or {})
    replicas = spec.get("replicas")
    pod_set: dict[str, Any] = {"name": replica_type.lower(), "count": 1 if replicas is None else replicas,
                               "template": template}
    if tas:
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        pod_set["topologyRequest"] = topology_request(annotations, REPLICA_INDEX_LABEL)
    return pod_set


def priority_class(job: MPIJob) -> str | None:
    """Kueue's ``PriorityClass`` of an MPIJob: ``runPolicy.schedulingPolicy.priorityClass``, else the Launcher's
    pod template's ``priorityClassName``, else the Worker's (None: none names one)."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        return policy.priority_class
    for replica_type in REPLICA_TYPES:
        spec = job.spec.mpi_replica_specs.get(replica_type)
        if spec is not None and spec.template.spec.priority_class_name:
            return spec.template.spec.priority_class_name
    return None


def job_pod_sets(job: MPIJob) -> list[o.PodSet]:
    """The pod sets the MPIJob makes now, as Kueue compares them with its Workload's: per replica type, in
    Kueue's order, ``replicas`` pods (default 1) of its pod template (no minimum count)."""
    specs = job.spec.mpi_replica_specs
    return [o.PodSet(name=t.lower(), count=1 if specs[t].replicas is None else specs[t].replicas,
                     template=specs[t].template) for t in replica_types(specs)]


def workload_for(state: ClusterState, keys: KeysToCopy, raw_mpijob: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_mpijob`` (as stored) under ``name``, copying ``keys``. Raises
    :class:`~connectors.k8s.job_priority.WorkloadPriorityClassNotFound` or
    :class:`~connectors.k8s.job_priority.PriorityClassNotFound` for a class the log does not hold."""
    meta = raw_mpijob["metadata"]
    return job_workload(state, keys, raw_mpijob, name, pod_sets(raw_mpijob, tas=state.tas_enabled),
                        priority_class(msgspec.convert(raw_mpijob, MPIJob)), controller_ref(meta["name"], meta["uid"]))


# --- starting and stopping ------------------------------------------------------------------------------------


def start_infos(state: ClusterState, wl: Any, job: MPIJob) -> list[podsetinfo.PodSetInfo]:
    """What starting each replica adds to its pod template, in Kueue's replica order, from the Workload's admission
    (``wl``: its :class:`~projections.workloads.WorkloadInfo`). Raises :class:`BadPodSets` when a replica has no
    pod set assignment (Kueue's ``BadPodSetsInfoLenError``), :class:`~connectors.k8s.podsetinfo.MergeConflict`
    for conflicting checks' updates."""
    by_name = {a.name: a for a in (wl.admission.pod_set_assignments if wl.admission is not None else ())}
    types = replica_types(job.spec.mpi_replica_specs)
    assignments = [by_name.get(t.lower()) for t in types]
    if None in assignments:
        raise BadPodSets(f"expecting {len(types)} podset, got {len(by_name)}")
    return [podsetinfo.start_info(state, wl, psa) for psa in assignments if psa is not None]


def _templates(raw_mpijob: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Replica type -> a copy of its raw pod template, for the replica types Kueue makes pod sets of."""
    specs = _raw_specs(raw_mpijob)
    return {t: copy.deepcopy((specs[t] or {}).get("template") or {}) for t in replica_types(specs)}


def _patch(raw_mpijob: dict[str, Any], suspend: bool, templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": raw_mpijob["metadata"]["resourceVersion"]},
            "spec": {"runPolicy": {"suspend": suspend},
                     "mpiReplicaSpecs": {t: {"template": template} for t, template in templates.items()}}}


def start_patch(raw_mpijob: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the MPIJob: each replica's pod template with its info merged in, and
    ``runPolicy.suspend: false``, conditioned on the resourceVersion read. Raises
    :class:`~connectors.k8s.podsetinfo.MergeConflict` (Kueue then fails the start for good)."""
    templates = _templates(raw_mpijob)
    for template, info in zip(templates.values(), infos, strict=True):
        view = msgspec.convert(template, o.PodTemplateSpec)
        write_template(template, podsetinfo.onto_template(view, info))
    return _patch(raw_mpijob, False, templates)


def stop_patch(raw_mpijob: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the MPIJob and gives each replica's pod template back what its Workload's pod
    set of the same name recorded (``saved``; a replica without one is left as it is), conditioned on the
    resourceVersion read. A merge patch sets a map's keys one by one: a key the template no longer has is
    written ``null``."""
    by_name = {ps.name: ps for ps in saved}
    templates = {t: template for t, template in _templates(raw_mpijob).items() if t.lower() in by_name}
    for replica_type, template in templates.items():
        before = copy.deepcopy(template)
        write_template(template, recorded_info(by_name[replica_type.lower()]))
        null_removed(before, template)
    return _patch(raw_mpijob, True, templates)


def null_removed(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Mark with ``null`` what ``after`` (a raw pod template about to be merge-patched) dropped of ``before``'s
    labels, annotations, node selector, tolerations and scheduling gates. A part (``metadata``, ``spec``) is
    added to ``after`` only to hold such a ``null``: a merge patch's empty map would create it, a spec
    change."""
    for part, fields in (("metadata", ("labels", "annotations")),
                         ("spec", ("nodeSelector", "tolerations", "schedulingGates"))):
        old = before.get(part) or {}
        for field in fields:
            if field not in old:
                continue
            new = after.setdefault(part, {})
            if field not in new:
                new[field] = None
            elif isinstance(new[field], dict):
                new[field] = {**{k: None for k in old[field] if k not in new[field]}, **new[field]}


# --- what its status says ---------------------------------------------------------------------------------------


def finished(job: MPIJob) -> tuple[str, str] | None:
    """``(reason, message)`` of an MPIJob that succeeded (``Succeeded``) or failed (``Failed``); None: neither. The
    first such condition ``True`` counts, as Kueue reads them."""
    for c in job.status.conditions:
        if c.type in ("Succeeded", "Failed") and c.status == "True":
            return c.type, c.message
    return None


def is_active(job: MPIJob) -> bool:
    """Some replica has active pods (Kueue's ``IsActive``)."""
    return any(s.active != 0 for s in job.status.replica_statuses.values())


def pods_ready(job: MPIJob) -> bool:
    """Kueue's ``PodsReady`` of an MPIJob: its ``Running`` condition ``True``."""
    return any(c.type == "Running" and c.status == "True" for c in job.status.conditions)
