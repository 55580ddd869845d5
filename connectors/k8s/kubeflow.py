"""What Kueue's Kubeflow training-operator integrations decide about one kubeflow.org/v1 training job (PyTorchJob,
TFJob, XGBoostJob, PaddleJob, JAXJob), as pure data.

Kueue writes these five once (``pkg/controller/jobs/kubeflow/kubeflowjob``) over what differs per kind: its
group/version/kind, the field holding its replica specs (``pytorchReplicaSpecs``, ``tfReplicaSpecs``, ...) and
the replica types it makes pod sets of, in order. Here too: a :class:`TrainingKind` holds those and offers the
names :class:`~connectors.k8s.watched_jobs.WatchedJobIntegration` reads of a kind's pure decisions, and
:data:`KINDS` has the five. The rules are the MPIJob's (:mod:`connectors.k8s.mpijob`; both keep a ``runPolicy``
and the same job status), so what reads no replica spec is shared with it:

* **its Workload** (:meth:`TrainingKind.workload_for`): named ``<kind>-<name>-<hash>``, a pod set per replica
  type the job has, in the kind's order whatever order the map is written in, named after it lowercased, of
  ``replicas`` pods (default 1), its template the replica's pod template as written; under
  ``TopologyAwareScheduling`` a topology request from the template's TAS annotations ranked by
  ``training.kubeflow.org/replica-index``. Priority class: ``runPolicy.schedulingPolicy.priorityClass``, else the
  first replica template (in the kind's order) naming one;
* **suspended** is ``spec.runPolicy.suspend``; **starting** merges each pod set's admission into its replica's
  template and writes ``runPolicy.suspend: false``; **stopping** writes ``true`` and restores the templates;
* **finished**: a ``Succeeded`` or ``Failed`` condition ``True``, with its message; **pods ready**: ``Running``
  ``True``; **active**: a replica status with active pods. Kueue counts no reclaimable pods for these kinds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import msgspec

from connectors.k8s import mpijob, podsetinfo, workload_names
from connectors.k8s.jobset import BadPodSets, job_workload, recorded_info, write_template
from connectors.k8s.mpijob import MPIJobStatus, ReplicaSpec, RunPolicy
from connectors.k8s.resources import KUBEFLOW_JOBS, Resource
from events import objects as o
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState

__all__ = ["KINDS", "BadPodSets", "TrainingKind"]


def _suspend(spec: Any) -> bool:
    """Kueue's ``IsSuspended``: ``runPolicy.suspend`` set and true."""
    return bool(spec.run_policy.suspend)


def _view(kind: str, specs_field: str) -> type:
    """The view of one kind's jobs: metadata, ``runPolicy``, the replica specs (read from ``specs_field``) and
    status."""
    view_type = type(o.View)
    spec = view_type(f"{kind}Spec", (o.View,), {
        "__annotations__": {"run_policy": RunPolicy, "replica_specs": dict[str, ReplicaSpec]},
        "run_policy": RunPolicy(), "replica_specs": msgspec.field(default_factory=dict, name=specs_field),
        "suspend": property(_suspend)})

    return view_type(kind, (o.NamespacedView,), {
        "__annotations__": {"spec": spec, "status": MPIJobStatus}, "spec": spec(), "status": MPIJobStatus()})


@dataclass(frozen=True)
class TrainingKind(workload_names.NamedByResource):
    """One training-operator kind and Kueue's decisions about its jobs (module docstring); its names (``workload_name``,
    ``controller_ref``, ``owner_of``) come from its :attr:`resource`."""

    KIND: str
    specs_field: str
    """Where the job keeps its replica specs (``pytorchReplicaSpecs``)."""
    replica_types: tuple[str, ...]
    """The replica types Kueue makes pod sets of, in its order."""
    ITEM: type = field(init=False)
    """What the integration reads of one job (a view)."""

    BadPodSets = BadPodSets

    def __post_init__(self) -> None:
        object.__setattr__(self, "ITEM", _view(self.KIND, self.specs_field))

    @property
    def resource(self) -> Resource:
        return KUBEFLOW_JOBS[self.KIND]

    # --- the Workload -------------------------------------------------------------------------------------------

    def ordered(self, specs: dict[str, Any]) -> list[str]:
        """The replica types of ``specs`` (raw or viewed) Kueue makes pod sets of, in its order."""
        return [t for t in self.replica_types if specs.get(t) is not None]

    def _raw_specs(self, raw: dict[str, Any]) -> dict[str, Any]:
        return (raw.get("spec") or {}).get(self.specs_field) or {}

    def pod_sets(self, raw: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
        """The Workload's pod sets for the job as stored (``tas``: the recorded ``TopologyAwareScheduling`` gate)."""
        specs = self._raw_specs(raw)
        return [mpijob.replica_pod_set(t, specs[t], tas=tas) for t in self.ordered(specs)]

    def job_pod_sets(self, job: Any) -> list[o.PodSet]:
        """The pod sets the job makes now, as Kueue compares them with its Workload's: per replica type, in the
        kind's order, ``replicas`` pods (default 1) of its pod template."""
        specs = job.spec.replica_specs
        return [o.PodSet(name=t.lower(), count=1 if specs[t].replicas is None else specs[t].replicas,
                         template=specs[t].template) for t in self.ordered(specs)]

    def priority_class(self, job: Any) -> str | None:
        """``runPolicy.schedulingPolicy.priorityClass``, else the first replica template in the kind's order naming
        a ``priorityClassName`` (None: none does)."""
        policy = job.spec.run_policy.scheduling_policy
        if policy is not None and policy.priority_class:
            return str(policy.priority_class)
        for replica_type in self.ordered(job.spec.replica_specs):
            name = job.spec.replica_specs[replica_type].template.spec.priority_class_name
            if name:
                return str(name)
        return None

    def workload_for(self, state: ClusterState, keys: KeysToCopy, raw: dict[str, Any], name: str
                     ) -> dict[str, Any]:
        """The Workload to create for ``raw`` (as stored) under ``name``; raises as
        :func:`connectors.k8s.mpijob.workload_for` does."""
        return job_workload(state, keys, raw, name, self.pod_sets(raw, tas=state.tas_enabled),
                            self.priority_class(msgspec.convert(raw, self.ITEM)),
                            self.controller_ref(raw["metadata"]["name"], raw["metadata"]["uid"]))

    # --- starting and stopping ----------------------------------------------------------------------------------

    def start_infos(self, state: ClusterState, wl: Any, job: Any) -> list[podsetinfo.PodSetInfo]:
        """What starting each replica adds to its template, in the kind's order. Raises :class:`BadPodSets` when a
        replica has no pod set assignment, :class:`~connectors.k8s.podsetinfo.MergeConflict` for conflicting
        checks' updates."""
        by_name = {a.name: a for a in (wl.admission.pod_set_assignments if wl.admission is not None else ())}
        types = self.ordered(job.spec.replica_specs)
        assignments = [by_name.get(t.lower()) for t in types]
        if None in assignments:
            raise BadPodSets(f"expecting {len(types)} podset, got {len(by_name)}")
        return [podsetinfo.start_info(state, wl, psa) for psa in assignments if psa is not None]

    def _templates(self, raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
        specs = self._raw_specs(raw)
        return {t: copy.deepcopy(specs[t].get("template") or {}) for t in self.ordered(specs)}

    def _patch(self, raw: dict[str, Any], suspend: bool, templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
                "spec": {"runPolicy": {"suspend": suspend},
                         self.specs_field: {t: {"template": template} for t, template in templates.items()}}}

    def start_patch(self, raw: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
        """The merge patch that starts the job (each template with its info merged in, ``runPolicy.suspend:
        false``), conditioned on the resourceVersion read. Raises :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
        templates = self._templates(raw)
        for template, info in zip(templates.values(), infos, strict=True):
            write_template(template, podsetinfo.onto_template(msgspec.convert(template, o.PodTemplateSpec), info))
        return self._patch(raw, False, templates)

    def stop_patch(self, raw: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
        """The merge patch that suspends the job and gives each replica's template back what its Workload's pod set
        of the same name recorded (``saved``), conditioned on the resourceVersion read."""
        by_name = {ps.name: ps for ps in saved}
        templates = {t: tpl for t, tpl in self._templates(raw).items() if t.lower() in by_name}
        for replica_type, template in templates.items():
            before = copy.deepcopy(template)
            write_template(template, recorded_info(by_name[replica_type.lower()]))
            mpijob.null_removed(before, template)
        return self._patch(raw, True, templates)

    # --- what its status says -----------------------------------------------------------------------------------

    def finished(self, job: Any) -> tuple[str, str] | None:
        """``(Succeeded|Failed, message)`` of a job that succeeded or failed; None: neither."""
        return mpijob.finished(job)

    def is_active(self, job: Any) -> bool:
        return mpijob.is_active(job)

    def pods_ready(self, job: Any) -> bool:
        """Its ``Running`` condition ``True``."""
        return mpijob.pods_ready(job)


PYTORCHJOB = TrainingKind("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker"))
TFJOB = TrainingKind("TFJob", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator"))
XGBOOSTJOB = TrainingKind("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker"))
PADDLEJOB = TrainingKind("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker"))
JAXJOB = TrainingKind("JAXJob", "jaxReplicaSpecs", ("Worker",))
KINDS = {k.KIND: k for k in (PYTORCHJOB, TFJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB)}
"""Kind -> its :class:`TrainingKind`."""
