"""Kueue's webhooks for apps/v1 Deployments: its ``deployment`` integration, which runs on the pod one.

Kueue gives a Deployment no Workload of its own: each of its pods is a single Pod the pod integration holds
(:mod:`connectors.k8s.pods_integration`), one Workload per pod. The Deployment's part is its pod template, which
Kueue's mutating webhook (``mdeployment.kb.io`` at ``/mutate-apps-v1-deployment``, on create and update) marks
when it holds the Deployment (``pkg/controller/jobs/deployment/deployment_webhook.go``):

* a Deployment naming no queue, in a namespace ``managedJobsNamespaceSelector`` selects (read from the apiserver)
  that has a LocalQueue ``default``, is given ``kueue.x-k8s.io/queue-name: default`` (Kueue's LocalQueue
  defaulting), unless its controller is of a kind Kueue runs;
* Kueue holds it when it names a queue, or, under ``manageJobsWithoutQueueName``, when its namespace is one the
  selector selects — not when it has a Kueue-managed ancestor (Kueue's ``WorkloadShouldBeSuspended``: the walk
  up its controllers the other webhooks do, :func:`connectors.k8s.webhook.ancestry_lookup`; a StatefulSet a
  queued LeaderWorkerSet made, say; Kueue queues that ancestor), and a walk that fails refuses it;
* held, its pod template gets ``kueue.x-k8s.io/managed: "true"``, the Deployment's queue name and
  WorkloadPriorityClass (``kueue.x-k8s.io/priority-class``) as labels, and the annotation
  ``kueue.x-k8s.io/pod-suspending-parent: deployment``, from which the Pod webhook gates every pod the
  ReplicaSets make (:func:`connectors.k8s.pod_webhook.suspended_by_parent`).

Its validating webhook (``vdeployment.kb.io`` at ``/validate-apps-v1-deployment``, create and update) refuses, in
Kueue's words, a queue name that is not a DNS-1123 subdomain, a changed or removed WorkloadPriorityClass label,
and a queue name changed while a replica is ready (``status.readyReplicas`` of the stored Deployment above 0) or
removed, and under ``AdmissionGatedBy`` (Kueue's #9792) an ill-formed ``kueue.x-k8s.io/admission-gated-by`` on
create and on update, and a gate added on update (:func:`connectors.k8s.job_validation.gate_create` and
``gate_update``, as for every job Kueue manages). Kueue's message for the queue name shows the old value (it
passes the two names the other way round).

While the integration is off both answer every review unchanged (:func:`connectors.k8s.pod_webhook.allowed_as_is`)
and are registered with ``failurePolicy: Ignore``, ``Fail`` while it is on, as the Pod webhooks
(:func:`connectors.k8s.pod_webhook.failure_policy`). Kueue's ``deployment`` reconciler does nothing here (a no-op
one for the owner index); not done, unlike newer Kueue: pausing a Deployment (its ``DeploymentParentSuspension``
gate, not in the gate table kueue-es follows).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import msgspec

from connectors.k8s import child_jobs, framework_webhook, job_selection, job_validation
from connectors.k8s.errors import KubeError
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.json_patch import map_ops
from connectors.k8s.pod_webhook import (
    DEFAULT_QUEUE,
    MANAGED,
    MANAGED_LABEL,
    SUSPENDING_PARENT,
    HasDefaultQueue,
    LookupFailed,
    NamespaceLabels,
    allowed_as_is,
    failure_policy,
    patch_answer,
)
from events import objects as o
from kueue_es.scheduler.config import DEPLOYMENT_FRAMEWORK, SchedulerConfig
from projections import gates
from projections.clusterqueues import selector_matches

MUTATING_PATH = "/mutate-apps-v1-deployment"
MUTATING_NAME = "mdeployment.kb.io"
VALIDATING_PATH = "/validate-apps-v1-deployment"
VALIDATING_NAME = "vdeployment.kb.io"

Reviewer = Callable[[bytes], Awaitable[dict[str, Any]]]


class ParentDefaulting(msgspec.Struct, frozen=True):
    """What a parent's (Deployment's, StatefulSet's) mutating webhook reads of the Kueue Configuration."""

    enabled: bool = False
    """Its framework is on (``integrations.frameworks``)."""
    managed_namespaces: o.LabelSelector = o.LabelSelector()
    without_queue: bool = False
    """``manageJobsWithoutQueueName``."""
    short_names: bool = False
    """Kueue's ``ShortWorkloadNames`` gate: the names it gives Workloads (a StatefulSet's group) stay within 63."""
    frameworks: frozenset[str] = frozenset()
    """The Configuration's enabled frameworks (``enabled_frameworks``): a parent a controller one of them runs is
    that controller's (a StatefulSet a LeaderWorkerSet controls, say:
    :func:`connectors.k8s.job_selection.kueue_owner`)."""
    feature_gates: dict[str, bool] = {}
    """The Configuration's gates (``SkipAncestorCheckForDeletedWorkloads``)."""
    external_kinds: frozenset[tuple[str, str]] = frozenset()
    """``SchedulerConfig.external_job_kinds``: a controller of one is a parent Kueue manages too."""

    @classmethod
    def of(cls, config: SchedulerConfig, framework: str) -> ParentDefaulting:
        return cls(framework in config.frameworks, config.managed_jobs_selector, config.manage_jobs_without_queue_name,
                   config.gate(gates.SHORT_WORKLOAD_NAMES), frozenset(config.enabled_frameworks),
                   dict(config.feature_gates), config.external_job_kinds)


def _meta(obj: Mapping[str, Any], field: str) -> dict[str, Any]:
    meta = obj.get("metadata")
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


TemplateMarks = Callable[[Mapping[str, Any], str], tuple[dict[str, str], dict[str, str]]]
"""A framework's own template labels and annotations for a held parent with that queue name (the StatefulSet's
pod group)."""


def template_patch(obj: Mapping[str, Any], queue: str, framework: str, marks: TemplateMarks | None = None
                   ) -> list[dict[str, Any]]:
    """The JSON patch that marks the pod template (``spec.template``) of a parent Kueue holds: the managed label,
    the parent's queue name (when it has one) and WorkloadPriorityClass as labels, the annotation naming
    ``framework`` as the parent that suspends its pods, and what ``marks`` adds."""
    template = (obj.get("spec") or {}).get("template") or {}
    meta = template.get("metadata")
    labels: dict[str, str] = {MANAGED_LABEL: MANAGED}
    if queue:
        labels[QUEUE_LABEL] = queue
    priority = _meta(obj, "labels").get(PRIORITY_LABEL, "")
    if priority:
        labels[PRIORITY_LABEL] = priority
    annotations = {SUSPENDING_PARENT: framework}
    if marks is not None:
        more_labels, more_annotations = marks(obj, queue)
        labels.update(more_labels)
        annotations.update(more_annotations)
    if not isinstance(meta, dict):
        return [{"op": "add", "path": "/spec/template/metadata", "value": {"labels": labels,
                                                                           "annotations": annotations}}]
    return (map_ops("/spec/template/metadata/labels", meta.get("labels"), labels)
            + map_ops("/spec/template/metadata/annotations", meta.get("annotations"), annotations))


async def parent_patch(obj: dict[str, Any], namespace: str, defaulting: ParentDefaulting, framework: str,
                       namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
                       marks: TemplateMarks | None = None,
                       managed_ancestry: child_jobs.ManagedAncestry | None = None) -> list[dict[str, Any]]:
    """The JSON patch Kueue's webhook makes to a parent (see the module docstring): the default queue name, then,
    when Kueue holds it, its template's marks (:func:`template_patch`). Whether it holds it is Kueue's
    ``WorkloadShouldBeSuspended``: not when the walk ``managed_ancestry`` finds a Kueue-managed ancestor
    (:func:`connectors.k8s.framework_webhook.managed_above`; without one, a controller of a kind Kueue runs stands
    for it)."""
    labels = _meta(obj, "labels")
    queue = labels.get(QUEUE_LABEL, "")
    kueue_parent = job_selection.kueue_owner(job_selection.raw_controller(obj.get("metadata") or {}),
                                             defaulting.frameworks, defaulting.external_kinds)
    ops: list[dict[str, Any]] = []
    if not queue and not kueue_parent and await has_default_queue(namespace) and await _managed(namespace,
                                                                                                 defaulting,
                                                                                                 namespace_labels):
        queue = DEFAULT_QUEUE
        ops += map_ops("/metadata/labels", (obj.get("metadata") or {}).get("labels"), {QUEUE_LABEL: queue})
    if await framework_webhook.managed_above(obj, namespace, kueue_parent, managed_ancestry,
                                             defaulting.feature_gates):
        return ops
    if (queue or defaulting.without_queue) and await _managed(namespace, defaulting, namespace_labels):
        ops += template_patch(obj, queue, framework, marks)  # not in a namespace left out (Kueue's #13375)
    return ops


async def _managed(namespace: str, defaulting: ParentDefaulting, namespace_labels: NamespaceLabels) -> bool:
    try:
        labels = await namespace_labels(namespace)
    except KubeError as exc:
        raise LookupFailed(f"failed to get namespace: {exc}") from exc
    return selector_matches(defaulting.managed_namespaces, labels)


async def mutating_review(body: bytes, defaulting: ParentDefaulting, framework: str,
                          namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
                          marks: TemplateMarks | None = None,
                          managed_ancestry: child_jobs.ManagedAncestry | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a parent being created or updated: allowed, with :func:`parent_patch`;
    refused when a lookup fails."""
    req = msgspec.json.decode(body).get("request") or {}
    obj = req.get("object")
    patch = None
    if defaulting.enabled and req.get("operation") in ("CREATE", "UPDATE") and isinstance(obj, dict) and obj:
        namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace", "")
        patch = partial(parent_patch, obj, namespace, defaulting, framework, namespace_labels, has_default_queue,
                        marks, managed_ancestry)
    return await patch_answer(req, patch)


_QUEUE_PATH = f"metadata.labels[{QUEUE_LABEL}]"


def create_errors(deployment: Mapping[str, Any], feature_gates: Mapping[str, bool] | None = None) -> list[str]:
    """What Kueue refuses in a Deployment being created: a queue name that is not a DNS-1123 subdomain, and under
    ``AdmissionGatedBy`` an ill-formed admission gate (:func:`connectors.k8s.job_validation.gate_create`)."""
    return (job_validation.name_label_errors(_meta(deployment, "labels"), QUEUE_LABEL)
            + job_validation.gate_create(deployment, feature_gates or {}))


def ready_replicas(obj: Mapping[str, Any]) -> int:
    status = obj.get("status")
    value = status.get("readyReplicas") if isinstance(status, dict) else None
    return value if isinstance(value, int) else 0


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool] | None = None
                  ) -> list[str]:
    """What Kueue refuses in the update of Deployment ``old`` into ``new``, in its order: the new queue name's form,
    a WorkloadPriorityClass label removed, or added while a replica of ``old`` is ready (it may change, and be
    set while none is: Kueue's #5148 fix, the rule of its other serving sets,
    :func:`connectors.k8s.job_validation.priority_class_update`), the queue name changed while a replica of
    ``old`` is ready, or removed, and under ``AdmissionGatedBy`` an admission gate added or ill formed
    (:func:`connectors.k8s.job_validation.gate_update`; its place among the others is a guess)."""
    errors = job_validation.name_label_errors(_meta(new, "labels"), QUEUE_LABEL)
    old_labels, new_labels = _meta(old, "labels"), _meta(new, "labels")
    errors += job_validation.priority_class_update(old, new, suspended=ready_replicas(old) == 0)
    old_queue, new_queue = old_labels.get(QUEUE_LABEL, ""), new_labels.get(QUEUE_LABEL, "")
    if (ready_replicas(old) > 0 or not new_queue) and new_queue != old_queue:
        errors.append(job_validation.invalid(_QUEUE_PATH, old_queue, job_validation.IMMUTABLE))
    return errors + job_validation.gate_update(old, new, feature_gates or {})


CreateErrors = Callable[[Mapping[str, Any]], list[str]]
UpdateErrors = Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]]


async def validating_review(body: bytes, create: CreateErrors | None = None, update: UpdateErrors | None = None
                            ) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a Deployment (or, with its rules ``create`` and ``update``, another
    parent), the integration on: allowed, or refused (403) with Kueue's field errors. (A parent's rules ask
    nothing of a default LocalQueue, unlike a Job's.)"""
    create, update = create or create_errors, update or update_errors
    return await job_validation.answer(body, _no_default_queue, create, lambda old, new, _default: update(old, new))


async def _no_default_queue(namespace: str) -> bool:
    return False


def reviewers(defaulting: ParentDefaulting, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              managed_ancestry: child_jobs.ManagedAncestry | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every
    Deployment as it is. ``managed_ancestry``: the walk up a Deployment's controllers
    (:func:`connectors.k8s.webhook.ancestry_lookup`)."""
    if not defaulting.enabled:
        return {MUTATING_PATH: allowed_as_is, VALIDATING_PATH: allowed_as_is}

    async def mutate(body: bytes) -> dict[str, Any]:
        return await mutating_review(body, defaulting, DEPLOYMENT_FRAMEWORK, namespace_labels, has_default_queue,
                                     managed_ancestry=managed_ancestry)

    async def validate(body: bytes) -> dict[str, Any]:
        return await validating_review(body, partial(create_errors, feature_gates=defaulting.feature_gates),
                                       partial(update_errors, feature_gates=defaulting.feature_gates))

    return {MUTATING_PATH: mutate, VALIDATING_PATH: validate}


def apps_rule(resource: str) -> dict[str, Any]:
    return {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": [resource], "scope": "Namespaced"}


def registration(name: str, client_config: dict[str, Any], namespace_selector: dict[str, Any], resource: str, *,
                 on: bool, mutating: bool) -> dict[str, Any]:
    """One webhook entry for apps/v1 ``resource`` on create and update (Kueue's ``deployments`` and
    ``statefulsets`` webhooks), failing closed only while its framework is ``on``
    (:func:`connectors.k8s.pod_webhook.failure_policy`)."""
    out = {"name": name, "clientConfig": client_config, "rules": [apps_rule(resource)],
           "namespaceSelector": namespace_selector, "failurePolicy": failure_policy(on), "sideEffects": "None",
           "admissionReviewVersions": ["v1"], "timeoutSeconds": 10}
    if mutating:
        out["reinvocationPolicy"] = "Never"
    return out
