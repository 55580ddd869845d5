"""What Kueue's webhooks for a job framework's custom resource share (JobSets, MPIJobs): the defaulting of one being
created, the answer to a review, the serving while the framework is off, the registration.

Each framework module (:mod:`connectors.k8s.jobset_webhook`, :mod:`connectors.k8s.mpijob_webhook`) says what is its
own in a :class:`Kind` — where the resource keeps its suspend flag, its webhooks' paths and names, and what its
validating webhook refuses — and this module does the rest as Kueue's generic job defaulting does
(``pkg/controller/jobframework/defaults.go``): the ``default`` queue and the ``default`` WorkloadPriorityClass,
unless its controller is of a kind Kueue runs; then suspended when queued or managed without a queue name — never
when it has a Kueue-managed ancestor (``WorkloadShouldBeSuspended``: the walk up its controllers the Job webhook
does too, :func:`connectors.k8s.webhook.ancestry_lookup`; a controller of a kind Kueue runs whose ancestors name no
queue, ``manageJobsWithoutQueueName`` off, makes no child). A walk that fails refuses the object, as the Job webhook
does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Self

import msgspec

from connectors.k8s import child_jobs, job_selection, job_validation, pods_ready_validation
from connectors.k8s.errors import KubeError
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
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
from connectors.k8s.resources import Resource
from events import objects as o
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.clusterqueues import selector_matches

DEFAULT_PRIORITY_CLASS = "default"

Reviewer = Callable[[bytes], Awaitable[dict[str, Any]]]
HasDefaultPriorityClass = Callable[[], Awaitable[bool]]
HasMultiKueueCheck = Callable[[str, str], Awaitable[bool]]
"""Whether LocalQueue ``namespace/name``'s ClusterQueue has a MultiKueue check
(:func:`connectors.k8s.webhook.multikueue_lookup`)."""
MULTIKUEUE_MANAGER = "kueue.x-k8s.io/multikueue"
CreateErrors = Callable[[Mapping[str, Any], Mapping[str, bool]], list[str]]
UpdateErrors = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, bool], bool], list[str]]


class Kind(msgspec.Struct, frozen=True):
    """One framework's resource as its webhooks see it."""

    resource: Resource
    mutating_path: str
    mutating_name: str
    validating_path: str
    validating_name: str
    suspend_at: tuple[str, ...]
    """The keys down to the resource's suspend flag (``spec.suspend``, ``spec.runPolicy.suspend``)."""
    create_errors: CreateErrors
    update_errors: UpdateErrors
    """Given the old and new object, the gates and whether the namespace has a LocalQueue ``default``."""
    kind_defaults: Callable[[Mapping[str, Any], Mapping[str, bool]], list[dict[str, Any]]] | None = None
    """The kind's own defaulting after the common one, given the object and the gates (a JSON patch)."""
    own_controller: str | None = None
    """A kind MultiKueue runs on workers: the ``spec.managedBy`` its own controller goes by, which a queue behind a
    MultiKueue check replaces with MultiKueue's as no managedBy does (None: no MultiKueue adapter)."""
    managed_by_at: tuple[str, ...] = ("spec", "managedBy")
    """The keys down to the kind's managedBy (``spec.runPolicy.managedBy`` for the Kubeflow kinds)."""


class FrameworkWebhooks(msgspec.Struct, frozen=True):
    """What a framework's webhooks read of the Kueue Configuration."""

    enabled: bool = False
    """The framework is on (``integrations.frameworks``)."""
    managed_namespaces: o.LabelSelector = o.LabelSelector()
    without_queue: bool = False
    """``manageJobsWithoutQueueName``."""
    frameworks: frozenset[str] = frozenset()
    """The Configuration's enabled frameworks (``enabled_frameworks``): a controller one of them runs is a parent
    Kueue runs (:func:`connectors.k8s.job_selection.kueue_owner`)."""
    feature_gates: dict[str, bool] = {}
    pods_ready_max: int | None = None
    """Under ``WorkloadLevelWaitForPodsReady``: ``maxTimeoutOnWorkload`` in seconds, for the checks of the
    ``kueue.x-k8s.io/wait-for-pods-ready`` annotation (:mod:`connectors.k8s.pods_ready_validation`; None: off)."""
    external_kinds: frozenset[tuple[str, str]] = frozenset()
    """``SchedulerConfig.external_job_kinds``: a controller of one is a parent Kueue manages too."""

    @classmethod
    def reading(cls, config: SchedulerConfig, enabled: bool) -> Self:
        """The settings under ``config``, the kind's own integration ``enabled`` or not."""
        rule = pods_ready_validation.PodsReadyRule.of(config)
        return cls(enabled, config.managed_jobs_selector, config.manage_jobs_without_queue_name,
                   frozenset(config.enabled_frameworks), dict(config.feature_gates),
                   rule.max_seconds if rule is not None else None, config.external_job_kinds)

    @property
    def pods_ready(self) -> pods_ready_validation.PodsReadyRule | None:
        return pods_ready_validation.PodsReadyRule(self.pods_ready_max) if self.pods_ready_max is not None else None


def replica_pod_annotations(replica_spec: Mapping[str, Any]) -> dict[str, str]:
    """The annotations of a replica spec's pod template (MPIJob, training jobs), ``{}`` for any missing part."""
    template = replica_spec.get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def replica_pod_count(replica_spec: Mapping[str, Any]) -> int | None:
    """A replica spec's ``replicas`` (default 1); None when it is not a number."""
    replicas = replica_spec.get("replicas", 1)
    return 1 if replicas is None else replicas if isinstance(replicas, int) else None


# --- the mutating webhook ---------------------------------------------------------------------------------------


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def value_at(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value down ``keys`` (None where a map on the way is missing)."""
    value: Any = obj
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def suspended(obj: Mapping[str, Any], suspend_at: tuple[str, ...]) -> bool:
    """Whether the flag at ``suspend_at`` is ``true``."""
    return value_at(obj, suspend_at) is True


def set_op(obj: Mapping[str, Any], at: tuple[str, ...], wanted: Any) -> dict[str, Any]:
    """The JSON patch operation setting the value at ``at`` to ``wanted``, adding the maps missing on the way."""
    node: Any = obj
    for depth, key in enumerate(at[:-1]):
        child = node.get(key)
        if not isinstance(child, dict):
            value: Any = wanted
            for inner in reversed(at[depth + 1:]):
                value = {inner: value}
            return {"op": "add", "path": "/" + "/".join(at[:depth + 1]), "value": value}
        node = child
    return {"op": "add", "path": "/" + "/".join(at), "value": wanted}


def suspend_op(obj: Mapping[str, Any], suspend_at: tuple[str, ...]) -> dict[str, Any] | None:
    """The JSON patch operation setting the flag at ``suspend_at`` to ``true`` (adding the maps missing on the
    way), or None when it is already."""
    return None if suspended(obj, suspend_at) else set_op(obj, suspend_at, True)


def default_patch(obj: Mapping[str, Any], suspend_at: tuple[str, ...], *, default_queue: bool,
                  default_priority_class: bool, suspend: bool) -> list[dict[str, Any]]:
    """The JSON patch of Kueue's defaulting of an object being created, as decided (empty: nothing to change): the
    ``default`` queue and WorkloadPriorityClass labels, then suspended unless it is already."""
    added: dict[str, str] = {}
    if default_queue:
        added[QUEUE_LABEL] = DEFAULT_QUEUE
    if default_priority_class:
        added[PRIORITY_LABEL] = DEFAULT_PRIORITY_CLASS
    ops = map_ops("/metadata/labels", (obj.get("metadata") or {}).get("labels"), added)
    op = suspend_op(obj, suspend_at) if suspend else None
    return [*ops, op] if op else ops


def deleting_skips_walk(obj: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> bool:
    """Kueue's ``SkipAncestorCheckForDeletedWorkloads`` (beta, on): an object already being deleted (a
    ``metadata.deletionTimestamp``) is neither walked nor suspended by a defaulting webhook, so the update that
    takes a finalizer off a child whose owner is gone (the garbage collector's, in a namespace's teardown) is not
    refused for that missing owner, leaving the child Terminating for good. Off, the walk is done and fails as
    before. No creation carries a deletion timestamp: only the webhooks that default on update meet one."""
    meta = obj.get("metadata")
    deleting = isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))
    return deleting and gates.enabled(feature_gates, gates.SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS)


async def managed_above(obj: dict[str, Any], namespace: str, kueue_parent: bool,
                        managed_ancestry: child_jobs.ManagedAncestry | None,
                        feature_gates: Mapping[str, bool] | None = None) -> bool:
    """Whether ``obj`` is kept from being suspended by its ancestry (Kueue's ``WorkloadShouldBeSuspended``): it
    has a Kueue-managed ancestor, which the walk ``managed_ancestry`` finds, or, without one (tests),
    ``kueue_parent`` (its controller is of a kind Kueue runs) stands for; or it is being deleted and not walked
    at all under ``feature_gates`` (:func:`deleting_skips_walk`). Raises
    :class:`~connectors.k8s.pod_webhook.LookupFailed` with the walk's refusal
    (:func:`connectors.k8s.child_jobs.refusal_status`) when it fails."""
    if deleting_skips_walk(obj, feature_gates or {}):
        return True
    if managed_ancestry is None:
        return kueue_parent
    try:
        return await managed_ancestry(namespace, obj)
    except (child_jobs.AncestryError, KubeError) as exc:
        status = child_jobs.refusal_status(exc)
        raise LookupFailed(status["message"], status) from exc


async def defaults(obj: dict[str, Any], namespace: str, kind: Kind, settings: FrameworkWebhooks,
                   namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
                   has_default_priority_class: HasDefaultPriorityClass | None,
                   managed_ancestry: child_jobs.ManagedAncestry | None = None,
                   multikueue: HasMultiKueueCheck | None = None) -> list[dict[str, Any]]:
    """Decide Kueue's defaulting of ``obj`` (see the module docstring) with the lookups it needs, and patch it
    (:func:`default_patch`). Neither the default queue nor the default WorkloadPriorityClass is given to an object
    whose controller is of a kind Kueue runs (Kueue's ``IsOwnerManagedByKueueForObject``); suspending is left to one
    with no Kueue-managed ancestor (:func:`managed_above`), as in Kueue. Raises
    :class:`~connectors.k8s.pod_webhook.LookupFailed` when the namespace cannot be read or the walk fails."""
    labels = _labels(obj)
    owner = job_selection.raw_controller(obj.get("metadata") or {})
    kueue_parent = job_selection.kueue_owner(owner, settings.frameworks, settings.external_kinds)
    child = await managed_above(obj, namespace, kueue_parent, managed_ancestry, settings.feature_gates)
    managed = partial(_namespace_managed, namespace, settings, namespace_labels)
    queued = bool(labels.get(QUEUE_LABEL))
    default_queue = (not queued and not kueue_parent and bool(namespace) and await has_default_queue(namespace)
                     and await managed())
    # neither in a namespace managedJobsNamespaceSelector leaves out (Kueue's #15851)
    default_class = (has_default_priority_class is not None and not kueue_parent and not labels.get(PRIORITY_LABEL)
                     and await has_default_priority_class() and await managed())
    # in a namespace managedJobsNamespaceSelector leaves out, not suspended whatever its queue (Kueue's #13375)
    suspend = not child and (queued or default_queue or settings.without_queue) and await managed()
    ops = default_patch(obj, kind.suspend_at, default_queue=default_queue, default_priority_class=default_class,
                        suspend=suspend)
    queue = labels.get(QUEUE_LABEL) or (DEFAULT_QUEUE if default_queue else "")
    if multikueue is not None and queue and await _handed_to_multikueue(obj, namespace, queue, kind, multikueue):
        # set on the object as suspended, the suspension having perhaps added the map it goes in
        suspended_obj = _suspended_copy(obj, kind.suspend_at) if suspend else obj
        ops.append(set_op(suspended_obj, kind.managed_by_at, MULTIKUEUE_MANAGER))
    return ops + kind.kind_defaults(obj, settings.feature_gates) if kind.kind_defaults is not None else ops


def _suspended_copy(obj: Mapping[str, Any], suspend_at: tuple[str, ...]) -> dict[str, Any]:
    """``obj`` as the suspension leaves it: its suspend flag set, the maps on the way added (the rest shared)."""
    out = dict(obj)
    node = out
    for key in suspend_at[:-1]:
        child = node.get(key)
        node[key] = dict(child) if isinstance(child, dict) else {}
        node = node[key]
    node[suspend_at[-1]] = True
    return out


async def _handed_to_multikueue(obj: Mapping[str, Any], namespace: str, queue: str, kind: Kind,
                                multikueue: HasMultiKueueCheck) -> bool:
    """Kueue's managedBy defaulting of a kind MultiKueue runs: its queue's ClusterQueue has a MultiKueue check and
    it names no manager but its own controller (whatever its ancestry, as a Job)."""
    if kind.own_controller is None or not namespace:
        return False
    managed_by = value_at(obj, kind.managed_by_at)
    return managed_by in (None, kind.own_controller) and await multikueue(namespace, queue)


async def _namespace_managed(namespace: str, settings: FrameworkWebhooks, namespace_labels: NamespaceLabels
                             ) -> bool:
    try:
        labels = await namespace_labels(namespace)
    except KubeError as exc:
        raise LookupFailed(f"failed to get namespace: {exc}") from exc
    return selector_matches(settings.managed_namespaces, labels)


async def mutating_review(body: bytes, kind: Kind, settings: FrameworkWebhooks, namespace_labels: NamespaceLabels,
                          has_default_queue: HasDefaultQueue,
                          has_default_priority_class: HasDefaultPriorityClass | None = None,
                          managed_ancestry: child_jobs.ManagedAncestry | None = None,
                          multikueue: HasMultiKueueCheck | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of an object being created: allowed, with :func:`defaults`' patch; refused
    when the namespace cannot be read (500) or its ancestors cannot be walked. ``has_default_priority_class``: None
    while ``WorkloadPriorityClassDefaulting`` is off."""
    req = msgspec.json.decode(body).get("request") or {}
    obj = req.get("object")
    patch = None
    if settings.enabled and req.get("operation", "CREATE") == "CREATE" and isinstance(obj, dict) and obj:
        namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace", "")
        patch = partial(defaults, obj, namespace, kind, settings, namespace_labels, has_default_queue,
                        has_default_priority_class, managed_ancestry, multikueue)
    return await patch_answer(req, patch)


# --- the validating webhook -------------------------------------------------------------------------------------


async def validating_review(body: bytes, kind: Kind, feature_gates: Mapping[str, bool],
                            has_default_queue: HasDefaultQueue, *,
                            pods_ready: pods_ready_validation.PodsReadyRule | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of an object, the framework on: allowed, or refused (403) with Kueue's field
    errors, the kind's then, under ``WorkloadLevelWaitForPodsReady`` (``pods_ready``), its
    ``kueue.x-k8s.io/wait-for-pods-ready`` annotation's (a change allowed only while it stays suspended)."""
    def update(old: Mapping[str, Any], new: Mapping[str, Any], default: bool) -> list[str]:
        return kind.update_errors(old, new, feature_gates, default) + pods_ready_validation.update_errors(
            old, new, pods_ready, old_suspended=suspended(old, kind.suspend_at),
            new_suspended=suspended(new, kind.suspend_at))

    return await job_validation.answer(
        body, has_default_queue,
        lambda new: kind.create_errors(new, feature_gates) + pods_ready_validation.create_errors(new, pods_ready),
        update)


# --- serving and registering ------------------------------------------------------------------------------------


def reviewers(kind: Kind, settings: FrameworkWebhooks, namespace_labels: NamespaceLabels,
              has_default_queue: HasDefaultQueue, has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              multikueue: HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the framework off, reviews that allow every object as
    it is. ``managed_ancestry``: the walk up an object's controllers (:func:`connectors.k8s.webhook.ancestry_lookup`;
    None: its controller's kind decides); ``multikueue``: whether a queue is behind a MultiKueue check (None while
    the ``MultiKueue`` gate is off)."""
    if not settings.enabled:
        return {kind.mutating_path: allowed_as_is, kind.validating_path: allowed_as_is}

    async def mutate(body: bytes) -> dict[str, Any]:
        return await mutating_review(body, kind, settings, namespace_labels, has_default_queue,
                                     has_default_priority_class, managed_ancestry, multikueue)

    async def validate(body: bytes) -> dict[str, Any]:
        return await validating_review(body, kind, settings.feature_gates, has_default_queue,
                                       pods_ready=settings.pods_ready)

    return {kind.mutating_path: mutate, kind.validating_path: validate}


def registration(kind: Kind, client_config: dict[str, Any], namespace_selector: dict[str, Any], *, on: bool,
                 mutating: bool) -> dict[str, Any]:
    """The mutating (on create) or validating (create and update) webhook entry, failing closed only while the
    framework is ``on``."""
    resource = kind.resource
    out: dict[str, Any] = {
        "name": kind.mutating_name if mutating else kind.validating_name, "clientConfig": client_config,
        "rules": [{"apiGroups": [resource.group], "apiVersions": [resource.version],
                   "operations": ["CREATE"] if mutating else ["CREATE", "UPDATE"], "resources": [resource.plural],
                   "scope": "Namespaced"}],
        "namespaceSelector": namespace_selector, "failurePolicy": failure_policy(on), "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 10}
    if mutating:
        out["reinvocationPolicy"] = "Never"
    return out
