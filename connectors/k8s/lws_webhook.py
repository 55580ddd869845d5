"""Kueue's webhooks for LeaderWorkerSets (``leaderworkerset.x-k8s.io/v1``): its
``leaderworkerset.x-k8s.io/leaderworkerset`` integration's (``pkg/controller/jobs/leaderworkerset/
leaderworkerset_webhook.go``).

A LeaderWorkerSet has no suspend flag: Kueue holds it through its pods. Its mutating webhook
(``mleaderworkerset.kb.io`` at ``/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset``, on create and update)
gives one the ``default`` queue when its namespace has a LocalQueue ``default`` (and is managed), then, when it
names a queue or is managed without one, marks its pod templates (the leader's, when it has one, and the
workers'): the set's queue name (replacing the template's, Kueue's #4932),
``kueue.x-k8s.io/pod-suspending-parent: leaderworkerset`` — so the Pod webhook gates its pods — and
``kueue.x-k8s.io/pod-group-serving: "true"``, plus the WorkloadPriorityClass label the set names
(:func:`connectors.k8s.leaderworkerset.default_marks`).

Its validating webhook (``vleaderworkerset.kb.io`` at ``/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset``,
create and update) refuses a queue name that is not a DNS-1123 subdomain (either startup policy goes, ``LeaderReady``
as Kueue since #4023) and a ``spec.replicas`` below 0 or above 1,000,000 (#12715) — on update too, the new set
checked as a created one, as Kueue's ``ValidateUpdate`` does —, on create under
``ElasticJobsViaWorkloadSlices`` a set annotated ``kueue.x-k8s.io/elastic-job: "true"`` (it runs on no
workload slices), and on update a queue name changed while a group is ready, or removed (#4932: while none is,
the set may change queue, its pending group Workloads following it) and, for a set that named a queue, a leader template
added or removed, a pod spec changed but for its images, and (under ``LWSImmutableGroupSize``) a changed
``leaderWorkerTemplate.size`` (:mod:`connectors.k8s.leaderworkerset`).

Both are registered as the JobSet and MPIJob webhooks are (:mod:`connectors.k8s.framework_webhook`): whatever the
Configuration says, answering every review unchanged while the integration is off (``failurePolicy: Ignore``),
``Fail`` while it is on. Not done, unlike Kueue: its webhook for the StatefulSets a LeaderWorkerSet makes
(``leaderworkerset_statefulset_webhook.go``). Kueue's LeaderWorkerSet webhook does not default the
WorkloadPriorityClass (``WorkloadPriorityClassDefaulting``), as its job webhooks do, so it is not done here.
Under ``TopologyAwareScheduling`` it checks, on create and update, each pod template's TAS annotations as any
job's (:func:`topology_errors`; Kueue v0.20, with the ``pod-index-offset`` rules of its #14485), then the
pod-set group of the leader and the workers as its job webhooks do
(:mod:`connectors.k8s.tas_group_validation`; #7061 names LeaderWorkerSet, and Kueue's
``leaderworkerset_webhook_test.go`` expects "can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
for a group named on one template only).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import msgspec

from connectors.k8s import child_jobs, framework_webhook, job_selection, job_validation, tas_group_validation
from connectors.k8s import leaderworkerset as lw
from connectors.k8s.errors import KubeError
from connectors.k8s.framework_webhook import FrameworkWebhooks, Reviewer
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.json_patch import escape, map_ops
from connectors.k8s.pod_webhook import (
    DEFAULT_QUEUE,
    HasDefaultQueue,
    LookupFailed,
    NamespaceLabels,
    allowed_as_is,
    patch_answer,
)
from connectors.k8s.resources import LEADER_WORKER_SETS
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.clusterqueues import selector_matches

MUTATING_PATH = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
MUTATING_NAME = "mleaderworkerset.kb.io"
VALIDATING_PATH = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
VALIDATING_NAME = "vleaderworkerset.kb.io"
PATHS = (MUTATING_PATH, VALIDATING_PATH)
TEMPLATES = "/spec/leaderWorkerTemplate"


class LeaderWorkerSetWebhooks(FrameworkWebhooks, frozen=True):
    """What the LeaderWorkerSet webhooks read of the Kueue Configuration."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> LeaderWorkerSetWebhooks:
        return cls.reading(config, config.manages_leaderworkersets)


# --- the mutating webhook ---------------------------------------------------------------------------------------


def marks_patch(lws: Mapping[str, Any], *, default_queue: bool, hold: bool, tas: bool = False
                ) -> list[dict[str, Any]]:
    """The JSON patch of Kueue's defaulting, as decided: the ``default`` queue label, then (``hold``) the marks of
    each pod template (:func:`connectors.k8s.leaderworkerset.default_marks`; ``tas``: the
    ``TopologyAwareScheduling`` gate). On UPDATE too: a held set whose templates lack a mark (one held before
    the queue label was written there) gets it at its first update, a template change the LeaderWorkerSet
    controller rolls all its groups for, once (docs/kubernetes.md, LeaderWorkerSets)."""
    meta = lws.get("metadata") or {}
    ops = map_ops("/metadata/labels", meta.get("labels"), {QUEUE_LABEL: DEFAULT_QUEUE}) if default_queue else []
    if not hold:
        return ops
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    defaulted = dict(lws)
    if default_queue:
        defaulted["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}), QUEUE_LABEL: DEFAULT_QUEUE}}
    for field, labels, notes in lw.default_marks(defaulted, tas=tas):
        template = lwt.get(field) if isinstance(lwt.get(field), dict) else {}
        path = f"{TEMPLATES}/{escape(field)}"
        if not isinstance(lwt.get(field), dict):
            ops.append({"op": "add", "path": path, "value": {}})
        tmeta = template.get("metadata")
        if not isinstance(tmeta, dict):
            value = {"annotations": notes, **({"labels": labels} if labels else {})}
            ops.append({"op": "add", "path": f"{path}/metadata", "value": value})
            continue
        ops += map_ops(f"{path}/metadata/labels", tmeta.get("labels"), labels) if labels else []
        ops += map_ops(f"{path}/metadata/annotations", tmeta.get("annotations"), notes)
    return ops


async def defaults(lws: dict[str, Any], namespace: str, settings: FrameworkWebhooks,
                   namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
                   managed_ancestry: child_jobs.ManagedAncestry | None = None) -> list[dict[str, Any]]:
    """Decide Kueue's defaulting of ``lws`` with the lookups it needs (module docstring): held unless it has a
    Kueue-managed ancestor (:func:`connectors.k8s.framework_webhook.managed_above`). Raises
    :class:`~connectors.k8s.pod_webhook.LookupFailed` when the namespace cannot be read or the walk fails."""
    meta = lws.get("metadata") or {}
    queued = bool((meta.get("labels") or {}).get(QUEUE_LABEL))
    kueue_parent = job_selection.kueue_owner(job_selection.raw_controller(meta), settings.frameworks,
                                             settings.external_kinds)
    child = await framework_webhook.managed_above(lws, namespace, kueue_parent, managed_ancestry,
                                                  settings.feature_gates)

    async def managed() -> bool:
        try:
            labels = await namespace_labels(namespace)
        except KubeError as exc:
            raise LookupFailed(f"failed to get namespace: {exc}") from exc
        return selector_matches(settings.managed_namespaces, labels)

    default_queue = (not queued and not kueue_parent and bool(namespace) and await has_default_queue(namespace)
                     and await managed())
    hold = not child and (queued or default_queue or (settings.without_queue and await managed()))
    return marks_patch(lws, default_queue=default_queue, hold=hold,
                       tas=gates.enabled(settings.feature_gates, gates.TOPOLOGY_AWARE_SCHEDULING))


async def mutating_review(body: bytes, settings: FrameworkWebhooks, namespace_labels: NamespaceLabels,
                          has_default_queue: HasDefaultQueue,
                          managed_ancestry: child_jobs.ManagedAncestry | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a LeaderWorkerSet being created or updated: allowed, with
    :func:`defaults`' patch; refused when the namespace cannot be read (500) or its ancestors cannot be walked."""
    req = msgspec.json.decode(body).get("request") or {}
    obj = req.get("object")
    patch = None
    if settings.enabled and isinstance(obj, dict) and obj:
        namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace", "")

        async def patch() -> list[dict[str, Any]]:
            return await defaults(obj, namespace, settings, namespace_labels, has_default_queue, managed_ancestry)
    return await patch_answer(req, patch)


# --- the validating webhook -------------------------------------------------------------------------------------


def topology_errors(lws: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``: the TAS annotations of the leader's pod template (a pod set of 1), then
    the workers' (the rest of the group, or all of it without a leader), as of any job's pod set
    (:func:`connectors.k8s.job_validation.topology_errors`, a slice no larger than the pod set's count), then
    their pod-set group (:mod:`connectors.k8s.tas_group_validation`)."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    spec = lws.get("spec")
    lwt = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    members = []
    for pod_set in lw.pod_sets(dict(lws), tas=False):
        template = "leaderTemplate" if pod_set["name"] == lw.LEADER else "workerTemplate"
        annotations = framework_webhook.replica_pod_annotations({"template": lwt.get(template)}
                                                               if isinstance(lwt, dict) else {})
        members.append(tas_group_validation.Member(
            pod_set["count"], annotations, f"spec.leaderWorkerTemplate.{template}.metadata.annotations"))
    errors: list[str] = []
    for member in members:
        errors += job_validation.topology_errors(member.annotations, member.count, gate, path=member.path)
    return errors + tas_group_validation.errors(members, gate)


def create_errors(lws: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """What Kueue refuses in a LeaderWorkerSet being created, in its order: the queue name's form, then (v0.20) the
    pod templates' TAS annotations, and under ``AdmissionGatedBy`` an ill-formed admission gate
    (:func:`connectors.k8s.job_validation.gate_create`; where Kueue puts it among the others is a guess)."""
    return (lw.create_errors(dict(lws)) + topology_errors(lws, feature_gates)
            + _elastic_errors(lws, feature_gates) + job_validation.gate_create(lws, feature_gates))


def _elastic_errors(lws: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """A LeaderWorkerSet does not run on workload slices: under ``ElasticJobsViaWorkloadSlices`` one annotated
    ``kueue.x-k8s.io/elastic-job: "true"`` is refused (Kueue's ``leaderworkerset_webhook_test.go`` "elastic
    job annotation is rejected"; its place among the other errors is a guess). On create only: whether Kueue
    checks it on update too is unconfirmed, and refusing every later update of a set stored before would be
    worse."""
    return job_validation.elastic_unsupported(lws, lw.GVK, feature_gates)


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                  default_queue: bool = False) -> list[str]:
    """What Kueue refuses in an update: the new set checked as a created one (its ``ValidateUpdate`` starts
    with its ``validateCreate`` of the new object: the queue name's form, ``spec.replicas``, the pod
    templates' TAS annotations), then the update rules (:func:`connectors.k8s.leaderworkerset.update_errors`),
    then under ``AdmissionGatedBy`` an admission gate added or ill formed
    (:func:`connectors.k8s.job_validation.gate_update`)."""
    return lw.create_errors(dict(new)) + topology_errors(new, feature_gates) + lw.update_errors(
        dict(old), dict(new), immutable_size=gates.enabled(feature_gates, gates.LWS_IMMUTABLE_GROUP_SIZE)
    ) + job_validation.gate_update(old, new, feature_gates)


KIND = framework_webhook.Kind(LEADER_WORKER_SETS, MUTATING_PATH, MUTATING_NAME, VALIDATING_PATH, VALIDATING_NAME,
                              (), create_errors, update_errors)


# --- serving and registering ------------------------------------------------------------------------------------


def reviewers(settings: FrameworkWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              managed_ancestry: child_jobs.ManagedAncestry | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every
    LeaderWorkerSet as it is (``managed_ancestry``: :func:`connectors.k8s.framework_webhook.reviewers`)."""
    if not settings.enabled:
        return {MUTATING_PATH: allowed_as_is, VALIDATING_PATH: allowed_as_is}

    async def mutate(body: bytes) -> dict[str, Any]:
        return await mutating_review(body, settings, namespace_labels, has_default_queue, managed_ancestry)

    async def validate(body: bytes) -> dict[str, Any]:
        return await framework_webhook.validating_review(body, KIND, settings.feature_gates, has_default_queue,
                                                         pods_ready=settings.pods_ready)

    return {MUTATING_PATH: mutate, VALIDATING_PATH: validate}


def registration(client_config: dict[str, Any], namespace_selector: dict[str, Any], *, on: bool,
                 mutating: bool) -> dict[str, Any]:
    """The webhook entry as :func:`connectors.k8s.framework_webhook.registration` makes it, the mutating one on
    update too (Kueue defaults a LeaderWorkerSet being updated as well)."""
    out = framework_webhook.registration(KIND, client_config, namespace_selector, on=on, mutating=mutating)
    out["rules"][0]["operations"] = ["CREATE", "UPDATE"]
    return out
