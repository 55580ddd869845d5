"""Kueue's webhooks for JobSets (``jobset.x-k8s.io/v1alpha2``): its ``jobset.x-k8s.io/jobset`` integration's.

Without them a JobSet created unsuspended starts making Jobs and pods until the integration
(:mod:`connectors.k8s.jobset_integration`) suspends it after the fact. Kueue's mutating webhook (``mjobset.kb.io`` at
``/mutate-jobset-x-k8s-io-v1alpha2-jobset``, on create only: unsuspending an admitted JobSet is an update) defaults a
JobSet as its job webhooks default any job (``pkg/controller/jobs/jobset/jobset_webhook.go``, ``Default``, and
``pkg/controller/jobframework/defaults.go``), in this order:

* naming no queue, its controller of no kind Kueue runs (:func:`connectors.k8s.job_selection.kueue_owner`), in a
  namespace with a LocalQueue ``default`` that ``managedJobsNamespaceSelector`` selects: given
  ``kueue.x-k8s.io/queue-name: default`` (Kueue's LocalQueue defaulting);
* under ``WorkloadPriorityClassDefaulting``, naming no WorkloadPriorityClass while one named ``default`` exists:
  given ``kueue.x-k8s.io/priority-class: default``, as a Job is;
* ``spec.suspend: true`` when it names a queue (given or defaulted) or, naming none, under
  ``manageJobsWithoutQueueName`` in a namespace the selector selects — never when it has a Kueue-managed ancestor
  (the Job webhook's walk, :func:`connectors.k8s.framework_webhook.managed_above`: that ancestor is the one
  queued). A namespace that cannot be read, or a walk that fails, refuses the JobSet, as Kueue's webhook fails.

Its validating webhook (``vjobset.kb.io`` at ``/validate-jobset-x-k8s-io-v1alpha2-jobset``, create and update)
refuses what Kueue's generic job validation refuses (:mod:`connectors.k8s.job_validation`, in Kueue's words): on
create, a queue name or prebuilt Workload name that is not a DNS-1123 subdomain and a ``max-exec-time-seconds``
that is not an integer above 0, and under ``AdmissionGatedBy`` an ill-formed ``kueue.x-k8s.io/admission-gated-by``
(:func:`connectors.k8s.job_validation.gate_create`); on update, first the update rules — the queue name changed while the JobSet is not
suspended (or removed in a namespace with a LocalQueue ``default``), the prebuilt Workload's name changed while
running, the maximum execution time changed unless suspended before and after, a WorkloadPriorityClass added to a
running JobSet or removed, and under ``AdmissionGatedBy`` a ``kueue.x-k8s.io/admission-gated-by`` gate added (gates
are only removed: :func:`connectors.k8s.job_validation.gate_update`, as for a Job) — then the create rules on the
new JobSet. Under ``TopologyAwareScheduling`` each
replicated Job's pod template's TAS annotations are checked as a Job's are
(:func:`connectors.k8s.job_validation.topology_errors`, at the pod template's
``spec.replicatedJobs[i].template.spec.template.metadata.annotations``, Kueue's path since #7189 / #7191), a
slice no larger than that replicated Job's pod set (``replicas × min(parallelism, completions)``), then the
pod-set groups across the replicated Jobs (:mod:`connectors.k8s.tas_group_validation`, #7061 / #7263).
Kueue freezes nothing else of a JobSet: its replicated Jobs are the JobSet project's own webhook's to guard.

Both are registered whatever the Configuration says and, while the integration is off, answer every review
unchanged (:func:`connectors.k8s.pod_webhook.allowed_as_is`), ``failurePolicy: Ignore``; ``Fail`` while it is on
(:func:`connectors.k8s.pod_webhook.failure_policy`), as the Deployment and StatefulSet webhooks. The defaulting,
serving and registering are :mod:`connectors.k8s.framework_webhook`'s, shared with the MPIJob webhooks.

Under the ``MultiKueue`` gate, a JobSet whose queue (given or defaulted) is a LocalQueue whose ClusterQueue has a
MultiKueue check, and whose ``spec.managedBy`` is unset or the JobSet controller's own
(``jobset.sigs.k8s.io/jobset-controller``), gets ``spec.managedBy: kueue.x-k8s.io/multikueue`` after the
suspension: MultiKueue runs it on a worker (:mod:`connectors.k8s.multikueue`); unlike a Job's, whatever its
ancestry. The LocalQueue, its ClusterQueue and their checks are read from the apiserver
(:func:`connectors.k8s.webhook.multikueue_lookup`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from connectors.k8s import child_jobs, framework_webhook, job_validation, tas_group_validation
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Reviewer
from connectors.k8s.jobset import pods_per_replica
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels
from connectors.k8s.resources import JOBSETS
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates

MUTATING_PATH = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
MUTATING_NAME = "mjobset.kb.io"
VALIDATING_PATH = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATING_NAME = "vjobset.kb.io"
PATHS = (MUTATING_PATH, VALIDATING_PATH)


class JobSetWebhooks(FrameworkWebhooks, frozen=True):
    """What the JobSet webhooks read of the Kueue Configuration."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> JobSetWebhooks:
        return cls.reading(config, config.manages_jobsets)


# --- the validating webhook -------------------------------------------------------------------------------------


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = jobset.get("spec")
    jobs = spec.get("replicatedJobs") if isinstance(spec, dict) else None
    return [rj for rj in jobs if isinstance(rj, dict)] if isinstance(jobs, list) else []


def _job_spec(rj: Mapping[str, Any]) -> dict[str, Any]:
    template = rj.get("template")
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def _pod_annotations(rj: Mapping[str, Any]) -> dict[str, str]:
    template = _job_spec(rj).get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _pod_set_count(rj: Mapping[str, Any]) -> int | None:
    """The pods of the replicated Job's pod set (None when its counts are not numbers: no bound then, as Kueue
    skips the bound when it cannot build the pod sets)."""
    replicas, spec = rj.get("replicas", 1), _job_spec(rj)
    if not isinstance(replicas, int) or not all(isinstance(spec.get(k, 1), int)
                                                for k in ("parallelism", "completions")):
        return None
    return replicas * pods_per_replica(spec)


def topology_errors(jobset: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``: each replicated Job's pod template's TAS annotations, in order, then
    its pod-set groups (:mod:`connectors.k8s.tas_group_validation`)."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    errors: list[str] = []
    members = [tas_group_validation.Member(_pod_set_count(rj), _pod_annotations(rj),
                                           f"spec.replicatedJobs[{i}].template.spec.template"
                                           ".metadata.annotations")
               for i, rj in enumerate(_replicated_jobs(jobset))]
    for member in members:
        errors += job_validation.topology_errors(member.annotations, member.count, gate, path=member.path)
    return errors + tas_group_validation.errors(members, gate)


def create_errors(jobset: Mapping[str, Any], feature_gates: Mapping[str, bool], *, gate_form: bool = True
                  ) -> list[str]:
    """What Kueue refuses in a JobSet being created, in its order. ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    return (job_validation.generic_create_errors(jobset, feature_gates, gate_form=gate_form)
            + topology_errors(jobset, feature_gates))


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                  default_queue: bool = False) -> list[str]:
    """What Kueue refuses in the update of JobSet ``old`` into ``new``, in its order: the update rules, then the
    create rules on ``new``. ``default_queue``: the namespace has a LocalQueue ``default``."""
    return (job_validation.generic_update_errors(old, new, feature_gates, default_queue=default_queue)
            + create_errors(new, feature_gates, gate_form=False))


JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
"""The JobSet controller's own ``spec.managedBy``: Kueue replaces it with MultiKueue's as it does none."""
KIND = framework_webhook.Kind(JOBSETS, MUTATING_PATH, MUTATING_NAME, VALIDATING_PATH, VALIDATING_NAME,
                              ("spec", "suspend"), create_errors, update_errors, own_controller=JOBSET_CONTROLLER)


def reviewers(settings: FrameworkWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every JobSet
    as it is (``managed_ancestry``, ``multikueue``: :func:`connectors.k8s.framework_webhook.reviewers`)."""
    return framework_webhook.reviewers(KIND, settings, namespace_labels, has_default_queue,
                                       has_default_priority_class, managed_ancestry, multikueue)
