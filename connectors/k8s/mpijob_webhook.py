"""Kueue's webhooks for MPIJobs (``kubeflow.org/v2beta1``): its ``kubeflow.org/mpijob`` integration's.

Without them an MPIJob created running starts its launcher and workers until the integration
(:mod:`connectors.k8s.mpijob_integration`) suspends it after the fact. Kueue's mutating webhook (``mmpijob.kb.io`` at
``/mutate-kubeflow-org-v2beta1-mpijob``, on create only) defaults an MPIJob as any job
(``pkg/controller/jobs/mpijob/mpijob_webhook.go``, ``Default``; :mod:`connectors.k8s.framework_webhook`): the
``default`` queue, the ``default`` WorkloadPriorityClass, then ``spec.runPolicy.suspend: true`` when it names a queue
or is managed without one — never when it has a Kueue-managed ancestor (the Job webhook's walk).

Its validating webhook (``vmpijob.kb.io`` at ``/validate-kubeflow-org-v2beta1-mpijob``, create and update) refuses
what Kueue's generic job validation refuses (:mod:`connectors.k8s.job_validation`), an MPIJob being suspended when
``spec.runPolicy.suspend`` is; on update the update rules first (with the JobSet's admission-gate rule: gates only
removed), then the create rules on the new MPIJob. Under
``TopologyAwareScheduling`` each replica type's pod template's TAS annotations are checked as a Job's are, at
``spec.mpiReplicaSpecs[<type>].template.metadata.annotations`` (Kueue's path), in the order of those paths (Kueue
sorts them), a slice no larger than the replica type's ``replicas`` (default 1), and so are the pod-set groups
across the Launcher and the Worker (:mod:`connectors.k8s.tas_group_validation`, #7061 / #7263).

Under ``TopologyAwareScheduling`` the mutating webhook also gives an MPIJob that runs its launcher as a worker
(``spec.runLauncherAsWorker: true``, with a Launcher and a Worker) the Worker template annotation
``kueue.x-k8s.io/pod-index-offset: "1"`` (:func:`worker_offset_ops`), unless the Launcher's template is in a pod-set
group (``kueue.x-k8s.io/podset-group-name``: the group ranks the two together). The launcher is rank 0, so the
Worker pod set's pods, which the Workload's pod set template and so the pods carry it, rank from 1: the topology
ungater takes the offset off their index (:mod:`connectors.k8s.ungating`).

Under the ``MultiKueue`` gate, an MPIJob whose queue (given or defaulted) is a LocalQueue whose ClusterQueue has a
MultiKueue check, and whose ``spec.runPolicy.managedBy`` is unset or the MPI operator's own
(``kubeflow.org/mpi-operator``), gets ``spec.runPolicy.managedBy: kueue.x-k8s.io/multikueue`` after the suspension:
MultiKueue runs it on a worker (:mod:`connectors.k8s.multikueue`), whatever its ancestry.

Registered and failing as the JobSet webhooks (:mod:`connectors.k8s.jobset_webhook`): whatever the Configuration
says, answering every review unchanged while the integration is off (``failurePolicy: Ignore``), ``Fail`` while it is
on. On update under ``TopologyAwareScheduling`` the Worker template of an MPIJob that runs its launcher as a worker
must carry the offset this defaulting would give it (:func:`offset_update_errors`, Kueue v0.20's #14485: not
removed, changed or added); its create rules, a non-negative integer never beside a ``podset-group-name``, are
every template's TAS rules (:mod:`connectors.k8s.job_validation`). A create's and an update's errors are sorted by
field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from connectors.k8s import child_jobs, framework_webhook, job_validation, tas_group_validation
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Reviewer
from connectors.k8s.json_patch import map_ops
from connectors.k8s.mpijob import replica_types
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels
from connectors.k8s.resources import MPIJOBS
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates

MUTATING_PATH = "/mutate-kubeflow-org-v2beta1-mpijob"
MUTATING_NAME = "mmpijob.kb.io"
VALIDATING_PATH = "/validate-kubeflow-org-v2beta1-mpijob"
VALIDATING_NAME = "vmpijob.kb.io"
PATHS = (MUTATING_PATH, VALIDATING_PATH)
SUSPEND_AT = ("spec", "runPolicy", "suspend")


class MPIJobWebhooks(FrameworkWebhooks, frozen=True):
    """What the MPIJob webhooks read of the Kueue Configuration."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> MPIJobWebhooks:
        return cls.reading(config, config.manages_mpijobs)


# --- the validating webhook -------------------------------------------------------------------------------------


def _replica_specs(mpijob: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    spec = mpijob.get("spec")
    specs = spec.get("mpiReplicaSpecs") if isinstance(spec, dict) else None
    if not isinstance(specs, dict):
        return {}
    return {str(t): rs for t, rs in specs.items() if isinstance(rs, dict)}


def topology_errors(mpijob: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``: each replica type's pod template's TAS annotations, by replica type,
    then the pod-set groups of its pod sets (Launcher, Worker: :mod:`connectors.k8s.tas_group_validation`)."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    errors: list[str] = []
    specs = _replica_specs(mpijob)
    for replica_type in sorted(specs):
        replica_spec = specs[replica_type]
        errors += job_validation.topology_errors(
            framework_webhook.replica_pod_annotations(replica_spec), framework_webhook.replica_pod_count(replica_spec), gate,
            path=f"spec.mpiReplicaSpecs[{replica_type}].template.metadata.annotations")
    members = [tas_group_validation.Member(framework_webhook.replica_pod_count(specs[t]),
                                           framework_webhook.replica_pod_annotations(specs[t]),
                                           f"spec.mpiReplicaSpecs[{t}].template.metadata.annotations")
               for t in replica_types(specs)]
    return errors + tas_group_validation.errors(members, gate)


def _as_job(mpijob: Mapping[str, Any]) -> dict[str, Any]:
    """The MPIJob as the generic job rules read a job: its metadata, suspended at ``spec.suspend``."""
    return job_validation.as_generic_job(mpijob, framework_webhook.suspended(mpijob, SUSPEND_AT))


def create_errors(mpijob: Mapping[str, Any], feature_gates: Mapping[str, bool], *, gate_form: bool = True
                  ) -> list[str]:
    """What Kueue refuses in an MPIJob being created, sorted by field path as Kueue sorts them. ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    return sorted(job_validation.generic_create_errors(_as_job(mpijob), feature_gates, gate_form=gate_form)
                  + topology_errors(mpijob, feature_gates), key=_field)


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                  default_queue: bool = False) -> list[str]:
    """What Kueue refuses in the update of MPIJob ``old`` into ``new``: the update rules, the create rules on
    ``new`` and the Worker's offset rule, sorted by field path as Kueue sorts them. ``default_queue``: the namespace
    has a LocalQueue ``default``."""
    errors = (job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                   default_queue=default_queue)
              + create_errors(new, feature_gates, gate_form=False)
              + offset_update_errors(new, feature_gates))
    return sorted(errors, key=_field)


def _field(error: str) -> str:
    """The field path a field error names (what Kueue sorts an update's errors by)."""
    return error.split(": ", 1)[0]


POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
"""On a pod template (and so its pods): what the topology ungater subtracts from a pod's index to rank it."""
WORKER_OFFSET_AT = f"spec.mpiReplicaSpecs[Worker].template.metadata.annotations[{POD_INDEX_OFFSET}]"


def expected_worker_offset(mpijob: Mapping[str, Any]) -> str | None:
    """The Worker template's offset the defaulting gives an MPIJob that runs its launcher as a worker (with a
    Launcher and a Worker): ``"1"``, or none (``""``) when the Launcher's template is in a pod-set group (the group
    ranks the two); None for any other MPIJob (the offset is not the defaulting's)."""
    spec = mpijob.get("spec")
    if not isinstance(spec, dict) or spec.get("runLauncherAsWorker") is not True:
        return None
    specs = _replica_specs(mpijob)
    launcher, worker = specs.get("Launcher"), specs.get("Worker")
    if launcher is None or worker is None:
        return None
    return "" if job_validation.GROUP_NAME in framework_webhook.replica_pod_annotations(launcher) else "1"


def _worker_offset(mpijob: Mapping[str, Any]) -> str:
    worker = _replica_specs(mpijob).get("Worker")
    return str(framework_webhook.replica_pod_annotations(worker).get(POD_INDEX_OFFSET, "")) if worker else ""


def offset_update_errors(new: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling`` (Kueue v0.20's #14485): the updated MPIJob's Worker template carries the
    offset the defaulting would give it (:func:`expected_worker_offset`; an absent one reads as empty), since the
    mutating webhook, which sets it, answers creations only and the ungater ranks the Worker's pods by it."""
    if not gates.enabled(feature_gates, gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    expected = expected_worker_offset(new)
    got = _worker_offset(new)
    if expected is None or got == expected:
        return []
    return [job_validation.invalid(WORKER_OFFSET_AT, got,
                                   f'must be "{expected}", the value the defaulting webhook would set')]


def worker_offset_ops(mpijob: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[dict[str, Any]]:
    """Kueue's defaulting of the Worker's pod-index offset (module docstring), as a JSON patch."""
    if not gates.enabled(feature_gates, gates.TOPOLOGY_AWARE_SCHEDULING) or not expected_worker_offset(mpijob):
        return []
    at = "/spec/mpiReplicaSpecs/Worker/template"
    template = _replica_specs(mpijob)["Worker"].get("template")
    if not isinstance(template, dict):
        return [{"op": "add", "path": at, "value": {"metadata": {"annotations": {POD_INDEX_OFFSET: "1"}}}}]
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        return [{"op": "add", "path": f"{at}/metadata", "value": {"annotations": {POD_INDEX_OFFSET: "1"}}}]
    present = meta.get("annotations")
    return map_ops(f"{at}/metadata/annotations", present if isinstance(present, dict) else None,
                   {POD_INDEX_OFFSET: "1"})


MPI_OPERATOR = "kubeflow.org/mpi-operator"
"""The MPI operator's own ``spec.runPolicy.managedBy``: Kueue replaces it with MultiKueue's as it does none."""
KIND = framework_webhook.Kind(MPIJOBS, MUTATING_PATH, MUTATING_NAME, VALIDATING_PATH, VALIDATING_NAME, SUSPEND_AT,
                              create_errors, update_errors, worker_offset_ops, own_controller=MPI_OPERATOR,
                              managed_by_at=("spec", "runPolicy", "managedBy"))


# --- serving and registering ------------------------------------------------------------------------------------


def reviewers(settings: FrameworkWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every MPIJob
    as it is (``managed_ancestry``, ``multikueue``: :func:`connectors.k8s.framework_webhook.reviewers`)."""
    return framework_webhook.reviewers(KIND, settings, namespace_labels, has_default_queue,
                                       has_default_priority_class, managed_ancestry, multikueue)
