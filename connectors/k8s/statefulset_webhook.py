"""Kueue's webhooks for apps/v1 StatefulSets: its ``statefulset`` integration, which runs on the pod one.

A StatefulSet Kueue holds runs as one serving pod group (:mod:`connectors.k8s.pod_group`): its mutating webhook
(``mstatefulset.kb.io`` at ``/mutate-apps-v1-statefulset``, on create and update) marks the pod template as the
Deployment's does (:mod:`connectors.k8s.deployment_webhook`: the same queue defaulting and holding rules, the
managed label, queue name, WorkloadPriorityClass and ``kueue.x-k8s.io/pod-suspending-parent: statefulset``) and,
when the StatefulSet names a queue, makes its pods one group, as Kueue's webhook did before its StatefulSet
reconciler took the group over (``pkg/controller/jobs/statefulset/statefulset_webhook.go``):

* ``kueue.x-k8s.io/pod-group-name``: the Workload name Kueue gives the StatefulSet, ``statefulset-<name>-<hash>``
  (the hash over the kind, the group ``apps``, the name and no uid, which a new object lacks; one created with
  ``generateName`` has no name either, and the Pod webhook renames its pods' group from their controller reference:
  :func:`connectors.k8s.pod_webhook.statefulset_group_patch`);
* ``kueue.x-k8s.io/pod-group-total-count``: its ``spec.replicas`` (1 when unset);
* ``kueue.x-k8s.io/pod-group-fast-admission`` and ``kueue.x-k8s.io/pod-group-serving``: ``"true"`` (the group is
  admitted as soon as its first pod exists, and, serving, never finishes however its pods end);
* ``kueue.x-k8s.io/pod-group-pod-index-label``: ``apps.kubernetes.io/pod-index``, each pod's rank for TAS.

Its validating webhook (``vstatefulset.kb.io`` at ``/validate-apps-v1-statefulset``, create and update) refuses a queue
name that is not a DNS-1123 subdomain, under ``TopologyAwareScheduling`` ill-formed TAS annotations on the pod template
(Kueue v0.20, :func:`topology_errors`) and, on update, a changed queue name (of the StatefulSet or its template) while a
replica is ready, or one removed (while none is ready, a StatefulSet sent to a missing queue may be sent to another:
Kueue's #9830 fix then puts the new name on its pods, which the pod integration does here,
:func:`connectors.k8s.pod_group.queue_relabel`), a changed ``kueue.x-k8s.io/pod-group-name`` label, a
``kueue.x-k8s.io/priority-class`` label removed, or added while a replica is ready (as every job kind's, a StatefulSet
with no ready replica counting as suspended) and, for a StatefulSet naming a queue, its pod template's spec changed in
what admission looks at (requests, ports, placement: :func:`connectors.k8s.job_validation.pod_group_spec_errors`;
images, env and the rest may roll) and any resize but to zero or from zero (a group's total is fixed), from zero only
once the scale-down is over (``status.replicas`` 0: ``scaling down is still in progress``); one naming none resizes
freely (Kueue's fix, kubernetes-sigs/kueue#3996). As the Deployment webhooks, both allow everything unchanged while the
integration is off and are registered fail-closed only while it is on.

The pods get no Kueue finalizer (the Pod webhook skips it for pods their parent holds, as Kueue since #8530).
Kueue's first StatefulSet reconciler, which went with this webhook, is modelled in the pod integration: the pods
that still carry one (made before) lose it once ended or deleted before reaching a node
(:func:`connectors.k8s.pod_group.released_by_statefulset`); in a rolling update, the older revision's pods are
ungated (and lose it) once the group's Workload is admitted (Kueue v0.19.7 #16401, v0.20.0 #16329; before, they
ran on no quota), and once the StatefulSet is gone every pod is
(:func:`connectors.k8s.pod_group.let_go_by_statefulset`, from the StatefulSet's status revisions that
:mod:`connectors.k8s.statefulsets` watches). The new revision's pods, when a template change that got past the
validating webhook (registered fail-open by ``kueue-es manifests``) gives them another role, are left gated by the group (:func:`connectors.k8s.pod_group.of_its_roles`), as Kueue's pod reconciler does,
until none of the group's pods has the Workload's role: then the Workload is deleted as no longer matching and
the group gets a new one from its pods. Not done, unlike Kueue since #9091 (cherry-picked to release-0.15 and 0.16, so
in v0.20): its later StatefulSet reconciler, which
makes the group's Workload itself (prebuilt, named with the StatefulSet's uid) and labels the pods from a pod
reconciler. Its hold of the Workload while the set is scaled to zero (#12233), and the resize when it is scaled up
again (#15279), are the pod integration's (:func:`connectors.k8s.pod_group.hold_step`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from connectors.k8s import deployment_webhook as parents
from connectors.k8s import job_validation
from connectors.k8s.child_jobs import ManagedAncestry
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.pod_roles import GROUP_LABEL, POD_INDEX_LABEL_ANNOTATION, TOTAL_COUNT_ANNOTATION
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels, allowed_as_is
from connectors.k8s.workload_names import owner_workload_name
from kueue_es.scheduler.config import STATEFULSET_FRAMEWORK
from projections import gates

MUTATING_PATH = "/mutate-apps-v1-statefulset"
MUTATING_NAME = "mstatefulset.kb.io"
VALIDATING_PATH = "/validate-apps-v1-statefulset"
VALIDATING_NAME = "vstatefulset.kb.io"
FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING = "kueue.x-k8s.io/pod-group-serving"
POD_INDEX = "apps.kubernetes.io/pod-index"
"""The label the StatefulSet controller gives each pod: its ordinal."""


def workload_name(name: str, uid: str = "", short: bool = False) -> str:
    """Kueue's Workload name for a StatefulSet (``statefulset-<name>-<hash>``), its pod group's name; the webhook
    knows no uid yet, so it hashes none. ``short``: the ``ShortWorkloadNames`` gate (a prefix of 57, not 247)."""
    return owner_workload_name("StatefulSet", "apps", name, uid, short=short)


def replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) else 1


def group_marks(obj: Mapping[str, Any], queue: str, short: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """The template labels and annotations that make a queued StatefulSet's pods one serving group (none without a
    queue name, as in Kueue). ``short``: the ``ShortWorkloadNames`` gate (:func:`workload_name`)."""
    if not queue:
        return {}, {}
    name = str((obj.get("metadata") or {}).get("name", ""))
    return ({GROUP_LABEL: workload_name(name, short=short)},
            {TOTAL_COUNT_ANNOTATION: str(replicas(obj)), FAST_ADMISSION: "true", SERVING: "true",
             POD_INDEX_LABEL_ANNOTATION: POD_INDEX})


def _labels(obj: Mapping[str, Any], part: str = "labels") -> dict[str, str]:
    """The object's labels (or its metadata's ``part``), ``{}`` for any missing part."""
    meta = obj.get("metadata")
    labels = meta.get(part) if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _template_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    template = (obj.get("spec") or {}).get("template") or {}
    return _labels(template) if isinstance(template, dict) else {}


def _pod_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    template = (obj.get("spec") or {}).get("template")
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def _status_replicas(obj: Mapping[str, Any]) -> int:
    status = obj.get("status")
    value = status.get("replicas") if isinstance(status, dict) else None
    return value if isinstance(value, int) else 0


def topology_errors(sts: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``, the TAS annotations of the pod template (Kueue v0.20: #15857 on create,
    #16039 on update), as any job's (:func:`connectors.k8s.job_validation.topology_errors`), the pod set being the
    set's replicas. A set scaled to zero has no pods to place: its slices are then held to no count, or scaling a
    TAS StatefulSet to zero would be refused."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    template = (sts.get("spec") or {}).get("template")
    count = replicas(sts)
    return job_validation.topology_errors(_labels(template, "annotations") if isinstance(template, dict) else {},
                                          count or None, gate)


def create_errors(sts: Mapping[str, Any], feature_gates: Mapping[str, bool] | None = None) -> list[str]:
    """What Kueue refuses in a StatefulSet being created: a queue name that is not a DNS-1123 subdomain, the pod
    template's TAS annotations (:func:`topology_errors`), and under ``AdmissionGatedBy`` an ill-formed admission
    gate (:func:`connectors.k8s.job_validation.gate_create`, as Kueue v0.20's StatefulSet webhook)."""
    return (job_validation.name_label_errors(_labels(sts), QUEUE_LABEL) + topology_errors(sts, feature_gates or {})
            + job_validation.gate_create(sts, feature_gates or {}))


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool] | None = None
                  ) -> list[str]:
    """What Kueue refuses in the update of StatefulSet ``old`` into ``new``, in its order (values shown as Kueue
    shows them: the old queue name, the new template queue name and group name): a changed queue name while a
    replica of ``old`` is ready, or one removed (while none is, the name may change or be set, the template's with
    it: Kueue's e2e "should allow to change queue name if ReadyReplicas=0", its pods then relabelled by the pod
    integration, :func:`connectors.k8s.pod_group.queue_relabel`), a WorkloadPriorityClass label
    removed or added while a replica is ready (:func:`connectors.k8s.job_validation.priority_class_update`), and
    under ``AdmissionGatedBy`` an
    admission gate added or ill formed (:func:`connectors.k8s.job_validation.gate_update`, as Kueue v0.20's
    StatefulSet webhook); first, the new pod template's TAS annotations, as at creation (:func:`topology_errors`)."""
    errors = topology_errors(new, feature_gates or {})
    old_queue, new_queue = _labels(old).get(QUEUE_LABEL, ""), _labels(new).get(QUEUE_LABEL, "")
    renamable = job_validation.no_ready_replica(old) and bool(new_queue)
    if old_queue != new_queue and not renamable:
        errors.append(job_validation.invalid(f"metadata.labels[{QUEUE_LABEL}]", old_queue, job_validation.IMMUTABLE))
    old_template, new_template = _template_labels(old).get(QUEUE_LABEL, ""), _template_labels(new).get(QUEUE_LABEL, "")
    if old_template != new_template and not renamable:
        errors.append(job_validation.invalid(f"spec.template.metadata.labels[{QUEUE_LABEL}]", new_template,
                                             job_validation.IMMUTABLE))
    old_group, new_group = _labels(old).get(GROUP_LABEL, ""), _labels(new).get(GROUP_LABEL, "")
    if old_group != new_group:
        errors.append(job_validation.invalid(f"metadata.labels[{GROUP_LABEL}]", new_group, job_validation.IMMUTABLE))
    errors += job_validation.priority_class_update(old, new, suspended=job_validation.no_ready_replica(old))
    if old_queue or new_queue:
        errors += _resize_errors(old, new)
        errors += job_validation.pod_group_spec_errors(_pod_spec(old), _pod_spec(new), "spec.template.spec")
    return errors + job_validation.gate_update(old, new, feature_gates or {})


def _resize_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A queued StatefulSet's resize but to or from zero (its group's total is fixed), and one from zero before the
    scale-down is over. Only for a StatefulSet naming a queue: one Kueue does not hold resizes freely, as Kueue
    fixed it (kubernetes-sigs/kueue#3996)."""
    errors = []
    old_count, new_count = replicas(old), replicas(new)
    if old_count != 0 and new_count != 0 and old_count != new_count:
        errors.append(job_validation.invalid("spec.replicas", new_count, job_validation.IMMUTABLE))
    if old_count == 0 and new_count > 0 and _status_replicas(new) > 0:
        errors.append(job_validation.forbidden("spec.replicas", "scaling down is still in progress"))
    return errors


def reviewers(defaulting: parents.ParentDefaulting, namespace_labels: NamespaceLabels,
              has_default_queue: HasDefaultQueue, managed_ancestry: ManagedAncestry | None = None
              ) -> dict[str, parents.Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every
    StatefulSet as it is. ``managed_ancestry``: the walk up a StatefulSet's controllers (a LeaderWorkerSet's
    StatefulSets: :func:`connectors.k8s.webhook.ancestry_lookup`)."""
    if not defaulting.enabled:
        return {MUTATING_PATH: allowed_as_is, VALIDATING_PATH: allowed_as_is}

    async def mutate(body: bytes) -> dict[str, Any]:
        return await parents.mutating_review(body, defaulting, STATEFULSET_FRAMEWORK, namespace_labels,
                                             has_default_queue, partial(group_marks, short=defaulting.short_names),
                                             managed_ancestry)

    async def validate(body: bytes) -> dict[str, Any]:
        return await parents.validating_review(body, partial(create_errors, feature_gates=defaulting.feature_gates),
                                               partial(update_errors, feature_gates=defaulting.feature_gates))

    return {MUTATING_PATH: mutate, VALIDATING_PATH: validate}
