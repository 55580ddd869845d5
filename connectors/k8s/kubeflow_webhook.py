"""Kueue's webhooks for the Kubeflow training operator's kubeflow.org/v1 jobs (PyTorchJob, TFJob, XGBoostJob,
PaddleJob, JAXJob): their ``kubeflow.org/<kind>`` integrations'.

Kueue serves one pair per kind from one implementation (``pkg/controller/jobs/kubeflow/jobs/*/*_webhook.go`` over
the generic job webhook): ``m<kind>.kb.io`` at ``/mutate-kubeflow-org-v1-<kind>`` (create only) defaults a job as
any job (:mod:`connectors.k8s.framework_webhook`): the ``default`` queue, the ``default`` WorkloadPriorityClass,
then ``spec.runPolicy.suspend: true`` when it names a queue or is managed without one — never when it has a
Kueue-managed ancestor (the Job webhook's walk). ``v<kind>.kb.io`` at ``/validate-kubeflow-org-v1-<kind>`` (create and update) refuses what
Kueue's generic job validation refuses, the job suspended when ``spec.runPolicy.suspend`` is; on update the update
rules (with the MPIJob's admission-gate rule: gates only removed), then the TAS rules below on the new job —
not the create rules: Kueue's ``BaseWebhook.ValidateUpdate`` runs ``ValidateJobOnUpdate`` and the kind's
``ValidateOnUpdate`` only, so a suspended job may take a queue name or ``max-exec-time-seconds`` its creation
would have been refused for (the JobSet and MPIJob webhooks refuse it). Under ``TopologyAwareScheduling`` each
replica type's pod template's
TAS annotations are checked at ``spec.<replicaSpecs>[<type>].template.metadata.annotations`` (Kueue's path; for the
replica types Kueue makes pod sets of), in the kind's replica order, a slice no larger than ``replicas``
(default 1).

Under the ``MultiKueue`` gate, a job whose queue (given or defaulted) is a LocalQueue whose ClusterQueue has a
MultiKueue check, and whose ``spec.runPolicy.managedBy`` is unset or the training operator's own
(``kubeflow.org/training-operator``), gets ``spec.runPolicy.managedBy: kueue.x-k8s.io/multikueue`` after the
suspension (Kueue's ``CanDefaultManagedBy`` of a Kubeflow job): MultiKueue runs it on a worker
(:mod:`connectors.k8s.multikueue`), whatever its ancestry.

Registered and failing as the MPIJob webhooks (:mod:`connectors.k8s.mpijob_webhook`): whatever the Configuration
says, answering every review unchanged while the kind's integration is off (``failurePolicy: Ignore``), ``Fail``
while it is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from connectors.k8s import child_jobs, framework_webhook, job_validation
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Reviewer
from connectors.k8s.kubeflow import KINDS, TrainingKind
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates

SUSPEND_AT = ("spec", "runPolicy", "suspend")
MANAGED_BY_AT = ("spec", "runPolicy", "managedBy")
TRAINING_OPERATOR = "kubeflow.org/training-operator"
"""The training operator's own ``spec.runPolicy.managedBy``: Kueue replaces it with MultiKueue's as it does none."""


class KubeflowWebhooks(FrameworkWebhooks, frozen=True):
    """What one kind's webhooks read of the Kueue Configuration."""

    @classmethod
    def of(cls, config: SchedulerConfig, kind: str) -> KubeflowWebhooks:
        return cls.reading(config, config.manages_kubeflow(kind))


# --- the validating webhook -------------------------------------------------------------------------------------


def _replica_specs(job: Mapping[str, Any], training: TrainingKind) -> dict[str, dict[str, Any]]:
    spec = job.get("spec")
    specs = spec.get(training.specs_field) if isinstance(spec, dict) else None
    if not isinstance(specs, dict):
        return {}
    return {t: specs[t] for t in training.replica_types if isinstance(specs.get(t), dict)}


def topology_errors(job: Mapping[str, Any], training: TrainingKind, feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``: each replica type's pod template's TAS annotations, in the kind's
    replica order (Kueue's ``KubeflowJob.ValidateOnCreate`` walks ``OrderedReplicaTypes``; a TFJob's Evaluator
    comes last)."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    errors: list[str] = []
    specs = _replica_specs(job, training)
    for replica_type in specs:  # in the kind's order (:func:`_replica_specs`)
        errors += job_validation.topology_errors(
            framework_webhook.replica_pod_annotations(specs[replica_type]), framework_webhook.replica_pod_count(specs[replica_type]),
            gate,
            path=f"spec.{training.specs_field}[{replica_type}].template.metadata.annotations")
    return errors


def _as_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """The job as the generic job rules read one: its metadata, suspended at ``spec.suspend``."""
    return job_validation.as_generic_job(job, framework_webhook.suspended(job, SUSPEND_AT))


def create_errors(training: TrainingKind, job: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                  gate_form: bool = True) -> list[str]:
    """What Kueue refuses in a job of ``training``'s kind being created, in its order. ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    return (job_validation.generic_create_errors(_as_job(job), feature_gates, gate_form=gate_form)
            + topology_errors(job, training, feature_gates))


def update_errors(training: TrainingKind, old: Mapping[str, Any], new: Mapping[str, Any],
                  feature_gates: Mapping[str, bool], default_queue: bool = False) -> list[str]:
    """What Kueue refuses in the update of ``old`` into ``new``: the update rules, then the TAS rules on
    ``new``. Kueue serves these kinds with its generic ``BaseWebhook``, whose ``ValidateUpdate`` adds only the
    kind's own ``ValidateOnUpdate`` (the TAS rules) to the update rules: the create rules (the queue name's
    and the maximum execution time's form) are not run again, as the JobSet and MPIJob webhooks run them.
    ``default_queue``: the namespace has a LocalQueue ``default``."""
    return (job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                 default_queue=default_queue)
            + topology_errors(new, training, feature_gates))


def webhook_kind(training: TrainingKind) -> framework_webhook.Kind:
    """The kind's webhooks: Kueue's paths and names (``/mutate-kubeflow-org-v1-pytorchjob``,
    ``mpytorchjob.kb.io``, ...)."""
    noun = training.KIND.lower()
    return framework_webhook.Kind(
        training.resource, f"/mutate-kubeflow-org-v1-{noun}", f"m{noun}.kb.io", f"/validate-kubeflow-org-v1-{noun}",
        f"v{noun}.kb.io", SUSPEND_AT, partial(create_errors, training), partial(update_errors, training),
        own_controller=TRAINING_OPERATOR, managed_by_at=MANAGED_BY_AT)


WEBHOOK_KINDS = {name: webhook_kind(training) for name, training in KINDS.items()}
"""Kind -> its webhooks."""
PATHS = tuple(p for k in WEBHOOK_KINDS.values() for p in (k.mutating_path, k.validating_path))


# --- serving and registering ------------------------------------------------------------------------------------


def reviewers(config: SchedulerConfig, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it, for every kind: both webhooks, or, the kind's integration off, reviews
    that allow every job as it is (``managed_ancestry``, ``multikueue``:
    :func:`connectors.k8s.framework_webhook.reviewers`)."""
    out: dict[str, Reviewer] = {}
    for name, kind in WEBHOOK_KINDS.items():
        out.update(framework_webhook.reviewers(kind, KubeflowWebhooks.of(config, name), namespace_labels,
                                               has_default_queue, has_default_priority_class, managed_ancestry,
                                               multikueue))
    return out


def registrations(client_config: Any, namespace_selector: dict[str, Any], config_kinds: frozenset[str], *,
                  mutating: bool) -> list[dict[str, Any]]:
    """Every kind's mutating or validating webhook entry, failing closed only for the kinds in ``config_kinds``
    (their integration on). ``client_config``: path -> the entry's clientConfig."""
    return [framework_webhook.registration(
        kind, client_config(kind.mutating_path if mutating else kind.validating_path), namespace_selector,
        on=name in config_kinds, mutating=mutating) for name, kind in WEBHOOK_KINDS.items()]
