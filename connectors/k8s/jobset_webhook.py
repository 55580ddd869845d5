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
  ``manageJobsWithoutQueueName`` in a namespace the selector selects — never when its controller is of a kind
  Kueue runs (that parent is the one queued). A namespace that cannot be read refuses the JobSet, as Kueue's
  webhook fails.

Its validating webhook (``vjobset.kb.io`` at ``/validate-jobset-x-k8s-io-v1alpha2-jobset``, create and update)
refuses what Kueue's generic job validation refuses (:mod:`connectors.k8s.job_validation`, in Kueue's words): on
create, a queue name or prebuilt Workload name that is not a DNS-1123 subdomain and a ``max-exec-time-seconds``
that is not an integer above 0; on update, first the update rules — the queue name changed while the JobSet is not
suspended (or removed in a namespace with a LocalQueue ``default``), the prebuilt Workload's name changed while
running, the maximum execution time changed unless suspended before and after, a WorkloadPriorityClass added to a
running JobSet or removed — then the create rules on the new JobSet. Under ``TopologyAwareScheduling`` each
replicated Job's pod template's TAS annotations are checked as a Job's are
(:func:`connectors.k8s.job_validation.topology_errors`, at ``spec.replicatedJobs[i].template.metadata.annotations``,
Kueue's path), a slice no larger than that replicated Job's pod set (``replicas × min(parallelism, completions)``).
Kueue freezes nothing else of a JobSet: its replicated Jobs are the JobSet project's own webhook's to guard.

Both are registered whatever the Configuration says and, while the integration is off, answer every review
unchanged (:func:`connectors.k8s.pod_webhook.allowed_as_is`), ``failurePolicy: Ignore``; ``Fail`` while it is on
(:func:`connectors.k8s.pod_webhook.failure_policy`), as the Deployment and StatefulSet webhooks. Not done, unlike
Kueue: ``spec.managedBy`` defaulted for MultiKueue (kueue-es runs no MultiKueue), the ``admission-gated-by``
annotation's rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import msgspec

from connectors.k8s import job_selection, job_validation
from connectors.k8s.errors import KubeError
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.jobset import pods_per_replica
from connectors.k8s.json_patch import map_ops
from connectors.k8s.pod_webhook import (
    DEFAULT_QUEUE,
    HasDefaultQueue,
    LookupFailed,
    NamespaceLabels,
    allowed_as_is,
    failure_policy,
    patch_answer,
)
from connectors.k8s.resources import JOBSETS
from events import objects as o
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.clusterqueues import selector_matches

MUTATING_PATH = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
MUTATING_NAME = "mjobset.kb.io"
VALIDATING_PATH = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATING_NAME = "vjobset.kb.io"
PATHS = (MUTATING_PATH, VALIDATING_PATH)
DEFAULT_PRIORITY_CLASS = "default"

Reviewer = Callable[[bytes], Awaitable[dict[str, Any]]]
HasDefaultPriorityClass = Callable[[], Awaitable[bool]]


class JobSetWebhooks(msgspec.Struct, frozen=True):
    """What the JobSet webhooks read of the Kueue Configuration."""

    enabled: bool = False
    """The JobSet framework is on (``integrations.frameworks``)."""
    managed_namespaces: o.LabelSelector = o.LabelSelector()
    without_queue: bool = False
    """``manageJobsWithoutQueueName``."""
    pods_on: bool = False
    """The pod integration is on: a Pod controller is then a parent Kueue runs."""
    feature_gates: dict[str, bool] = {}

    @classmethod
    def of(cls, config: SchedulerConfig) -> JobSetWebhooks:
        return cls(config.manages_jobsets, config.managed_jobs_selector, config.manage_jobs_without_queue_name,
                   config.manages_pods, dict(config.feature_gates))


# --- the mutating webhook ---------------------------------------------------------------------------------------


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def default_patch(jobset: Mapping[str, Any], *, default_queue: bool, default_priority_class: bool,
                  suspend: bool) -> list[dict[str, Any]]:
    """The JSON patch of Kueue's defaulting of a JobSet being created, as decided (empty: nothing to change): the
    ``default`` queue and WorkloadPriorityClass labels, then ``spec.suspend: true`` unless it is already."""
    added: dict[str, str] = {}
    if default_queue:
        added[QUEUE_LABEL] = DEFAULT_QUEUE
    if default_priority_class:
        added[PRIORITY_LABEL] = DEFAULT_PRIORITY_CLASS
    ops = map_ops("/metadata/labels", (jobset.get("metadata") or {}).get("labels"), added)
    spec = jobset.get("spec")
    if suspend and not isinstance(spec, dict):
        ops.append({"op": "add", "path": "/spec", "value": {"suspend": True}})
    elif suspend and spec.get("suspend") is not True:
        ops.append({"op": "add", "path": "/spec/suspend", "value": True})
    return ops


async def defaults(jobset: dict[str, Any], namespace: str, settings: JobSetWebhooks,
                   namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
                   has_default_priority_class: HasDefaultPriorityClass | None) -> list[dict[str, Any]]:
    """Decide Kueue's defaulting of ``jobset`` (see the module docstring) with the lookups it needs, and patch it
    (:func:`default_patch`). Raises :class:`~connectors.k8s.pod_webhook.LookupFailed` when the namespace cannot be
    read."""
    labels = _labels(jobset)
    owner = job_selection.raw_controller(jobset.get("metadata") or {})
    kueue_parent = job_selection.kueue_owner(owner, settings.pods_on, jobsets_on=True)
    managed = partial(_namespace_managed, namespace, settings, namespace_labels)
    queued = bool(labels.get(QUEUE_LABEL))
    default_queue = (not queued and not kueue_parent and bool(namespace) and await has_default_queue(namespace)
                     and await managed())
    default_class = (has_default_priority_class is not None and not labels.get(PRIORITY_LABEL)
                     and await has_default_priority_class())
    suspend = not kueue_parent and (queued or default_queue or (settings.without_queue and await managed()))
    return default_patch(jobset, default_queue=default_queue, default_priority_class=default_class,
                         suspend=suspend)


async def _namespace_managed(namespace: str, settings: JobSetWebhooks, namespace_labels: NamespaceLabels) -> bool:
    try:
        labels = await namespace_labels(namespace)
    except KubeError as exc:
        raise LookupFailed(f"failed to get namespace: {exc}") from exc
    return selector_matches(settings.managed_namespaces, labels)


async def mutating_review(body: bytes, settings: JobSetWebhooks, namespace_labels: NamespaceLabels,
                          has_default_queue: HasDefaultQueue,
                          has_default_priority_class: HasDefaultPriorityClass | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a JobSet being created: allowed, with :func:`defaults`' patch; refused
    (500) when the namespace cannot be read. ``has_default_priority_class``: None while
    ``WorkloadPriorityClassDefaulting`` is off."""
    req = msgspec.json.decode(body).get("request") or {}
    obj = req.get("object")
    patch = None
    if settings.enabled and req.get("operation", "CREATE") == "CREATE" and isinstance(obj, dict) and obj:
        namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace", "")
        patch = partial(defaults, obj, namespace, settings, namespace_labels, has_default_queue,
                        has_default_priority_class)
    return await patch_answer(req, patch)


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
    """Under ``TopologyAwareScheduling``: each replicated Job's pod template's TAS annotations, in order."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    errors: list[str] = []
    for i, rj in enumerate(_replicated_jobs(jobset)):
        errors += job_validation.topology_errors(
            _pod_annotations(rj), _pod_set_count(rj), gate(gates.TAS_MULTI_LAYER_TOPOLOGY),
            path=f"spec.replicatedJobs[{i}].template.metadata.annotations")
    return errors


def create_errors(jobset: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """What Kueue refuses in a JobSet being created, in its order."""
    return job_validation.generic_create_errors(jobset) + topology_errors(jobset, feature_gates)


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                  default_queue: bool = False) -> list[str]:
    """What Kueue refuses in the update of JobSet ``old`` into ``new``, in its order: the update rules, then the
    create rules on ``new``. ``default_queue``: the namespace has a LocalQueue ``default``."""
    return (job_validation.generic_update_errors(old, new, feature_gates, default_queue=default_queue)
            + create_errors(new, feature_gates))


async def validating_review(body: bytes, feature_gates: Mapping[str, bool], has_default_queue: HasDefaultQueue
                            ) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a JobSet, the integration on: allowed, or refused (403) with Kueue's field
    errors."""
    return await job_validation.answer(
        body, has_default_queue, lambda new: create_errors(new, feature_gates),
        lambda old, new, default: update_errors(old, new, feature_gates, default_queue=default))


# --- serving and registering ------------------------------------------------------------------------------------


def reviewers(settings: JobSetWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              has_default_priority_class: HasDefaultPriorityClass | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every JobSet
    as it is."""
    if not settings.enabled:
        return {MUTATING_PATH: allowed_as_is, VALIDATING_PATH: allowed_as_is}

    async def mutate(body: bytes) -> dict[str, Any]:
        return await mutating_review(body, settings, namespace_labels, has_default_queue, has_default_priority_class)

    async def validate(body: bytes) -> dict[str, Any]:
        return await validating_review(body, settings.feature_gates, has_default_queue)

    return {MUTATING_PATH: mutate, VALIDATING_PATH: validate}


def registration(client_config: dict[str, Any], namespace_selector: dict[str, Any], *, on: bool, mutating: bool
                 ) -> dict[str, Any]:
    """The ``mjobset.kb.io`` (``mutating``: on create) or ``vjobset.kb.io`` (create and update) webhook entry,
    failing closed only while the JobSet framework is ``on``."""
    out: dict[str, Any] = {
        "name": MUTATING_NAME if mutating else VALIDATING_NAME, "clientConfig": client_config,
        "rules": [{"apiGroups": [JOBSETS.group], "apiVersions": [JOBSETS.version],
                   "operations": ["CREATE"] if mutating else ["CREATE", "UPDATE"], "resources": [JOBSETS.plural],
                   "scope": "Namespaced"}],
        "namespaceSelector": namespace_selector, "failurePolicy": failure_policy(on), "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 10}
    if mutating:
        out["reinvocationPolicy"] = "Never"
    return out
