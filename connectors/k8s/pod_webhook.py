"""The mutating admission webhook for plain Pods (Kueue's ``mpod.kb.io`` at ``/mutate--v1-pod``, on creation).

Kueue registers it whatever its Configuration says and, while its ``pod`` integration is off (the default: it is
not among ``integrations.frameworks`` unless listed), answers every review without a change; so does kueue-es.
With it on, a Pod being created is Kueue's to hold back when:

* its namespace is one the Configuration's ``managedJobsNamespaceSelector`` selects (the Namespace is read from
  the apiserver, as Kueue reads it; one that cannot be read refuses the Pod, as Kueue's webhook fails);
* it has no Kueue-managed ancestor: Kueue's walk up its controllers (``FindAncestorJobManagedByKueue``,
  :func:`connectors.k8s.webhook.ancestry_lookup`: a queued Job, or a Job naming no queue under a queued JobSet,
  say; that ancestor's Workload admits its pods; a walk that fails refuses the Pod, as the other webhooks do) — under ``manageJobsWithoutQueueName`` not of any kind an enabled integration
  runs (a Job with ``batch/job`` on, a Pod, a JobSet, a RayJob, ...), each being Kueue's then, queue name or not,
  as Kueue's ancestor walk takes it (:func:`connectors.k8s.job_selection.kueue_owner`); with the MPIJob integration on,
  not an MPIJob, queue name or not (its workers' Pods: that MPIJob's Workload admits them); nor, with a training
  operator kind's integration on, a job of that kind (a PyTorchJob's Pods); nor, with the RayCluster integration
  on, a RayCluster (its head's and workers' Pods); nor, with the AppWrapper integration on, an AppWrapper (a Pod
  it wraps);
* it names a queue (``kueue.x-k8s.io/queue-name``), or its namespace has a LocalQueue ``default``, whose name it
  is then given (Kueue's LocalQueue defaulting), or ``manageJobsWithoutQueueName`` is on (its Workload then
  waits in no queue until the Pod names one — which, the queue name being fixed for a Pod, is never).

Such a Pod gets Kueue's label ``kueue.x-k8s.io/managed: "true"``, when it names no WorkloadPriorityClass and one
named ``default`` exists the label ``kueue.x-k8s.io/priority-class: default`` (under Kueue's
``WorkloadPriorityClassDefaulting`` gate, beta, on; the lookup the Job webhooks use), its finalizer ``kueue.x-k8s.io/managed`` (so the
pod integration sees how it ended before it is gone: :mod:`connectors.k8s.pods_integration`) and the scheduling
gate ``kueue.x-k8s.io/admission``, which keeps it off every node until its Workload is admitted. Everything else
is allowed unchanged. Every Pod made Kueue's, in a pod group or not, also gets its role
(``kueue.x-k8s.io/role-hash``, :func:`connectors.k8s.pod_roles.role_hash`, unless it names one), as Kueue's
``Default`` records it on each Pod it gates (a single Pod's Workload names its pod set ``main`` all the same).
While Kueue's TopologyAwareScheduling
gate is on, every Pod made Kueue's also gets the gate ``kueue.x-k8s.io/topology`` (Kueue's pod-based integrations
gate at creation: a Pod cannot gain a gate later) and, when it names its index label
(``kueue.x-k8s.io/pod-group-pod-index-label``) and carries that label with a value, the label
``kueue.x-k8s.io/pod-group-pod-index`` with that value, its rank for the ungater (none for a label absent or
empty, as Kueue since #15867: an empty index would keep its group from ever getting a Workload). Like
Kueue's, this webhook refuses
nothing but a Pod whose lookups fail: what Kueue refuses in a Pod (a malformed pod group, say) its validating Pod
webhook refuses, served here too (:mod:`connectors.k8s.pod_validation`, ``vpod.kb.io``).

A Pod annotated ``kueue.x-k8s.io/pod-suspending-parent`` (which the Deployment, StatefulSet and LeaderWorkerSet
webhooks put in the pod templates of the parents Kueue holds: :mod:`connectors.k8s.deployment_webhook`,
:mod:`connectors.k8s.statefulset_webhook`, :mod:`connectors.k8s.lws_webhook`) is held as its parent decided, with no
namespace, owner or queue check: it gets the gates and its role, not the managed label or a queue
name, which its template carries already (as in Kueue, a Pod that carries the annotation without them is gated all
the same), nor the finalizer: its parent's controller replaces it, and the finalizer only held a pod it deleted
(and so a StatefulSet's same-named replacement) until Kueue let it go. Kueue stopped adding it there in #8530
(``SkipFinalizersForPodsSuspendedByParent``: Beta in v0.16, also in v0.14/v0.15 patch releases, GA in v0.18, removed
by v0.20, whose gate table lacks it); pods that still carry one (made before) lose it as before, once ended or
being deleted.
A Pod without that annotation whose controller is a ReplicaSet is, with the ``deployment`` integration on, looked
through it as Kueue's walk passes over a ReplicaSet: the ReplicaSet and then the Deployment controlling it are read
(either unreadable refuses the Pod), and a Deployment naming a queue (any, under ``manageJobsWithoutQueueName``)
holds its Pods: they are left as made. Not done, unlike Kueue: the walk on above that Deployment, the ReplicaSet
read with the ``deployment`` integration off, and the walk through a StatefulSet to a LeaderWorkerSet for a Pod
without the annotation.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import msgspec
import structlog

from connectors.k8s import child_jobs, job_selection
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import KubeError, NotFound
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.json_patch import map_ops
from connectors.k8s.pod_roles import (
    GROUP_LABEL,
    POD_INDEX_LABEL,
    POD_INDEX_LABEL_ANNOTATION,
    role_annotation_patch,
)
from connectors.k8s.podsetinfo import TOPOLOGY_GATE
from connectors.k8s.resources import BY_KIND, DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS
from connectors.k8s.workload_names import owner_workload_name
from events import objects as o
from kueue_es.scheduler.config import (
    APPWRAPPER_FRAMEWORK,
    DEPLOYMENT_FRAMEWORK,
    KUBEFLOW_FRAMEWORKS,
    MPIJOB_FRAMEWORK,
    RAYCLUSTER_FRAMEWORK,
    SPARK_FRAMEWORK,
    SchedulerConfig,
)
from projections import gates
from projections.clusterqueues import selector_matches
from projections.workloads import MANAGED_LABEL

log = structlog.get_logger("kueue_es.k8s.pod_webhook")

PATH = "/mutate--v1-pod"
WEBHOOK_NAME = "mpod.kb.io"
MANAGED = "true"
FINALIZER = MANAGED_LABEL
"""Kueue's pod finalizer has the managed label's name."""
ADMISSION_GATE = "kueue.x-k8s.io/admission"
DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY_CLASS = "default"
"""The WorkloadPriorityClass a Pod made Kueue's is labelled with when it names none and one of this name exists."""
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
"""On a Pod (from its parent's template): the framework (``deployment``, ``statefulset``) that holds it."""

NamespaceLabels = Callable[[str], Awaitable[dict[str, str]]]
"""The labels of a namespace, read from the apiserver."""
HasDefaultQueue = Callable[[str], Awaitable[bool]]
HasDefaultClass = Callable[[], Awaitable[bool]]
"""Whether a WorkloadPriorityClass ``default`` exists (the Job webhooks' lookup,
:func:`connectors.k8s.webhook.default_priority_class_lookup`)."""
ManagedAncestry = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Whether the Pod (namespace, raw Pod) has a Kueue-managed ancestor: Kueue's walk up its controllers
(:func:`connectors.k8s.webhook.ancestry_lookup`), which raises
:class:`~connectors.k8s.child_jobs.AncestryError` or :class:`~connectors.k8s.errors.KubeError` when it fails."""
LegacyGroup = Callable[[str, str], Awaitable[bool]]
"""Whether the Workload of the group :data:`UNNAMED_STATEFULSET_GROUP` in a namespace is a StatefulSet's
(namespace, set name): one of its owners a Pod of that set (``<name>-<ordinal>``), so made before its pods were
given a group of their own (:func:`legacy_group_lookup`); raises :class:`~connectors.k8s.errors.KubeError` when it
cannot be read."""
DeploymentOf = Callable[[str, str], Awaitable[dict[str, Any] | None]]
"""The metadata of the Deployment controlling a ReplicaSet (namespace, ReplicaSet name), None when no Deployment
controls it; raises :class:`~connectors.k8s.errors.KubeError` when either cannot be read."""
REPLICA_SET_OWNER = (f"{REPLICA_SETS.group}/{REPLICA_SETS.version}", REPLICA_SETS.kind)


class PodDefaulting(msgspec.Struct, frozen=True):
    """What the webhook reads of the Kueue Configuration: whether the pod integration is on, and which namespaces
    it manages."""

    enabled: bool = False
    managed_namespaces: o.LabelSelector = o.LabelSelector()
    without_queue: bool = False
    """``manageJobsWithoutQueueName``: a Pod naming no queue is Kueue's too, and so is any parent of a kind an
    enabled integration runs."""
    tas: bool = False
    """Kueue's ``TopologyAwareScheduling`` gate: a Pod made Kueue's is also held for topology placement."""
    frameworks: frozenset[str] = frozenset()
    """The Configuration's enabled frameworks (``enabled_frameworks``): a Pod that an MPIJob, a training operator's
    job, a RayCluster or an AppWrapper controls (:data:`POD_PARENTS`) is that parent's when its integration is
    listed."""
    short_names: bool = False
    """Kueue's ``ShortWorkloadNames`` gate, for the group name :func:`statefulset_group_patch` gives."""
    external_kinds: frozenset[tuple[str, str]] = frozenset()
    """``SchedulerConfig.external_job_kinds``: a controller of one is a parent Kueue manages too."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> PodDefaulting:
        return cls(config.manages_pods, config.managed_jobs_selector, config.manage_jobs_without_queue_name,
                   config.gate(gates.TOPOLOGY_AWARE_SCHEDULING), frozenset(config.enabled_frameworks),
                   config.gate(gates.SHORT_WORKLOAD_NAMES), config.external_job_kinds)


POD_PARENTS = frozenset({MPIJOB_FRAMEWORK, *KUBEFLOW_FRAMEWORKS.values(), RAYCLUSTER_FRAMEWORK, APPWRAPPER_FRAMEWORK,
                         SPARK_FRAMEWORK})
"""The frameworks whose controllers make their Pods themselves (an MPIJob's workers, a PyTorchJob's replicas, a
RayCluster's head and workers, the Pod an AppWrapper wraps, a SparkApplication's driver): such a Pod is left to its
parent, queue name or not."""


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The Pod's controller ownerReference, if any."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)


def suspended_by_parent(pod: dict[str, Any]) -> bool:
    """The Pod carries ``kueue.x-k8s.io/pod-suspending-parent`` (any value, as Kueue reads the key alone)."""
    return SUSPENDING_PARENT in ((pod.get("metadata") or {}).get("annotations") or {})


UNNAMED_STATEFULSET_GROUP = owner_workload_name(STATEFUL_SETS.kind, STATEFUL_SETS.group, "", "")
"""The group name the StatefulSet webhook hashes for a set created with ``generateName``, which has no name yet
when its template is marked: ``statefulset--d7705``, the same for every such set (kubernetes-sigs/kueue#8687)."""


def unnamed_group_statefulset(pod: dict[str, Any]) -> tuple[str, str] | None:
    """``(name, uid)`` of the StatefulSet controlling a pod whose template names the group
    :data:`UNNAMED_STATEFULSET_GROUP` (the set was created with ``generateName``); None for any other pod."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(SUSPENDING_PARENT) != "statefulset" \
            or (meta.get("labels") or {}).get(GROUP_LABEL) != UNNAMED_STATEFULSET_GROUP:
        return None
    ref = controller_of(pod) or {}
    if (ref.get("apiVersion"), ref.get("kind")) != (STATEFUL_SETS.api_version, STATEFUL_SETS.kind) \
            or not ref.get("name") or not ref.get("uid"):
        return None
    return str(ref["name"]), str(ref["uid"])


def statefulset_group_patch(pod: dict[str, Any], short: bool = False) -> list[dict[str, Any]]:
    """The JSON patch that gives a pod of a StatefulSet created with ``generateName``
    (:func:`unnamed_group_statefulset`) a group of its own: the name Kueue gives the set's Workload, from the set's
    name and uid in the pod's controller reference (Kueue's fix, #9091, cherry-picked to release-0.15 and 0.16 and
    so in v0.20, names every set's Workload so; a named set's group stays the one its template names, as Kueue's
    legacy name). ``short``: ``ShortWorkloadNames``. Empty for any other pod."""
    owner = unnamed_group_statefulset(pod)
    if owner is None:
        return []
    name = owner_workload_name(STATEFUL_SETS.kind, STATEFUL_SETS.group, *owner, short=short)
    return map_ops("/metadata/labels", (pod.get("metadata") or {}).get("labels"), {GROUP_LABEL: name})


def pod_patch(pod: dict[str, Any], *, default_queue: bool, without_queue: bool = False,
              tas: bool = False, by_parent: bool = False, default_class: bool = False) -> list[dict[str, Any]]:
    """The JSON patch that makes a Pod Kueue's (empty: not Kueue's): with a queue name, or ``default_queue`` (its
    namespace has a LocalQueue ``default``, whose name it gets), or none under ``without_queue``
    (``manageJobsWithoutQueueName``), the managed label, the finalizer and the admission gate, each once; under
    ``tas`` (Kueue's TopologyAwareScheduling gate) also the topology gate, which its start lifts unless placed by
    topology (then the ungater does), and, when ``kueue.x-k8s.io/pod-group-pod-index-label`` names a label the
    Pod gives a value, that value as its ``kueue.x-k8s.io/pod-group-pod-index`` (:func:`_group_index`).
    ``by_parent``: the Pod is held because its parent's template says so (:func:`suspended_by_parent`): queue name
    or not, and without the managed label, which is the template's to carry, nor the finalizer, as in Kueue.
    ``default_class``: a WorkloadPriorityClass ``default`` exists, which a Pod made Kueue's (not ``by_parent``)
    naming none is labelled with (Kueue's ``ApplyDefaultWorkloadPriorityClass``, under
    ``WorkloadPriorityClassDefaulting``). The namespace and owner checks are the caller's."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    added: dict[str, str] = {}
    if not by_parent:
        if not labels.get(QUEUE_LABEL):
            if not default_queue and not without_queue:
                return []
            if default_queue:
                added[QUEUE_LABEL] = DEFAULT_QUEUE
        if default_class and not labels.get(PRIORITY_LABEL):
            added[PRIORITY_LABEL] = DEFAULT_PRIORITY_CLASS
        if labels.get(MANAGED_LABEL) != MANAGED:
            added[MANAGED_LABEL] = MANAGED
    index = _group_index(meta) if tas else ""
    if index and labels.get(POD_INDEX_LABEL) != index:
        added[POD_INDEX_LABEL] = index
    ops = map_ops("/metadata/labels", meta.get("labels"), added)
    finalizers = meta.get("finalizers")
    if by_parent:
        pass  # no finalizer on a pod its parent's controller replaces (module docstring)
    elif finalizers is None:
        ops.append({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})
    elif FINALIZER not in finalizers:
        ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER})
    return ops + _gate_ops((pod.get("spec") or {}).get("schedulingGates"),
                           [ADMISSION_GATE, TOPOLOGY_GATE] if tas else [ADMISSION_GATE])


def _group_index(meta: dict[str, Any]) -> str:
    """The Pod's index in its group: the value of the label ``kueue.x-k8s.io/pod-group-pod-index-label``
    names, "" when it names none, or a label the Pod lacks or leaves empty. Kueue's webhook skips such a Pod's
    index (#15867): an empty ``kueue.x-k8s.io/pod-group-pod-index`` is no whole number, and a group whose
    first Pod carries one never gets a Workload (:func:`connectors.k8s.pod_group.index_complaint`)."""
    named = (meta.get("annotations") or {}).get(POD_INDEX_LABEL_ANNOTATION)
    return str((meta.get("labels") or {}).get(named) or "") if named else ""


def _gate_ops(present: list[Any] | None, wanted: list[str]) -> list[dict[str, Any]]:
    """The JSON patch that adds each of the ``wanted`` scheduling gates the Pod lacks, in that order."""
    names = {g.get("name") for g in present or [] if isinstance(g, dict)}
    missing = [{"name": name} for name in wanted if name not in names]
    if not missing:
        return []
    if present is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": missing}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate} for gate in missing]


async def review(body: bytes, defaulting: PodDefaulting, namespace_labels: NamespaceLabels,
                 has_default_queue: HasDefaultQueue, managed_ancestry: ManagedAncestry,
                 deployment_of: DeploymentOf | None = None,
                 has_default_priority_class: HasDefaultClass | None = None,
                 legacy_group: LegacyGroup | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) for a Pod (see the module docstring). A lookup that fails refuses the Pod
    with Kueue's words for it (the webhook's ``failurePolicy`` is Fail while the integration is on).
    ``deployment_of``: how a ReplicaSet's Deployment is read (None: a ReplicaSet's Pod is not looked through).
    ``has_default_priority_class``: None while ``WorkloadPriorityClassDefaulting`` is off, as for the Job webhooks.
    ``legacy_group``: how a generateName StatefulSet's unnamed group is found its pods' (None: not asked)."""
    req = msgspec.json.decode(body).get("request") or {}
    pod = req.get("object") or {}
    patch = None
    if defaulting.enabled and req.get("operation", "CREATE") == "CREATE" and isinstance(pod, dict) and pod:
        namespace = req.get("namespace") or (pod.get("metadata") or {}).get("namespace", "")
        patch = partial(_defaults, pod, namespace, defaulting, namespace_labels, has_default_queue, managed_ancestry,
                        deployment_of, has_default_priority_class, legacy_group)
    return await patch_answer(req, patch)


async def patch_answer(req: dict[str, Any], patch: Callable[[], Awaitable[list[dict[str, Any]]]] | None
                       ) -> dict[str, Any]:
    """The AdmissionReview (v1) answering a mutating webhook's request ``req``: allowed, with the JSON patch
    ``patch`` makes (None: nothing to change), or refused (500) with the message of the :class:`LookupFailed` it
    raises."""
    response: dict[str, Any] = {"uid": req.get("uid", ""), "allowed": True}
    ops: list[dict[str, Any]] = []
    if patch is not None:
        try:
            ops = await patch()
        except LookupFailed as exc:
            response.update(allowed=False, status=exc.status or {"code": 500, "reason": "InternalError",
                                                                 "message": str(exc)})
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(msgspec.json.encode(ops)).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class LookupFailed(Exception):
    """A lookup a mutating webhook needs failed: the object is refused (the webhook fails closed, as Kueue's),
    with ``status`` when given, else as an internal error (500)."""

    def __init__(self, message: str, status: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status


async def _defaults(pod: dict[str, Any], namespace: str, defaulting: PodDefaulting, namespace_labels: NamespaceLabels,
                    has_default_queue: HasDefaultQueue, managed_ancestry: ManagedAncestry,
                    deployment_of: DeploymentOf | None = None,
                    has_default_priority_class: HasDefaultClass | None = None,
                    legacy_group: LegacyGroup | None = None) -> list[dict[str, Any]]:
    """In Kueue's order: the parent's word, the namespace, the owner, then the queue name and the default
    WorkloadPriorityClass (asked for only for a Pod made Kueue's that names no class). The role's operation
    comes first in the patch (each operation adds to a field of its own, so their order changes nothing)."""
    if suspended_by_parent(pod):
        return (role_annotation_patch(pod)
                + await _statefulset_group_ops(pod, namespace, defaulting, legacy_group)
                + pod_patch(pod, default_queue=False, tas=defaulting.tas, by_parent=True))
    try:
        labels = await namespace_labels(namespace)
    except KubeError as exc:
        raise LookupFailed(f"failed to get namespace: {exc}") from exc
    if not selector_matches(defaulting.managed_namespaces, labels):
        return []
    controller = job_selection.raw_controller(pod.get("metadata") or {})
    if job_selection.framework_of(controller) in defaulting.frameworks & POD_PARENTS:
        return []  # as Kueue, a Pod whose owner an enabled integration runs, queue or not: its Workload admits it
    if controller == REPLICA_SET_OWNER and deployment_of is not None and await _held_deployment(
            pod, namespace, defaulting, deployment_of):
        return []
    kueue_parent = job_selection.kueue_owner(controller, defaulting.frameworks, defaulting.external_kinds)
    if defaulting.without_queue:  # every parent of a kind an enabled integration runs is Kueue's then: none read
        if kueue_parent:
            return []
    elif kueue_parent:
        try:  # Kueue's walk, all the way up: a Job naming no queue under a queued JobSet leaves its Pods too
            if await managed_ancestry(namespace, pod):
                return []
        except (child_jobs.AncestryError, KubeError) as exc:
            status = child_jobs.refusal_status(exc)
            raise LookupFailed(status["message"], status) from exc
    queue = ((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    default = not queue and await has_default_queue(namespace)
    if not (queue or default or defaulting.without_queue):
        return []  # not Kueue's: left as made
    default_class = (has_default_priority_class is not None
                     and not ((pod.get("metadata") or {}).get("labels") or {}).get(PRIORITY_LABEL)
                     and await has_default_priority_class())
    ops = pod_patch(pod, default_queue=default, without_queue=defaulting.without_queue, tas=defaulting.tas,
                    default_class=default_class)
    return role_annotation_patch(pod) + ops


async def _statefulset_group_ops(pod: dict[str, Any], namespace: str, defaulting: PodDefaulting,
                                 legacy_group: LegacyGroup | None) -> list[dict[str, Any]]:
    """:func:`statefulset_group_patch`, unless the set's pods already run as the unnamed group (its Workload theirs:
    made before this), which they then stay in, as Kueue's reconciler keeps a set on its legacy-named Workload: a
    pod the controller remakes does not leave its siblings. A Workload that cannot be read refuses the Pod."""
    owner = unnamed_group_statefulset(pod)
    if owner is None:
        return []
    if legacy_group is not None:
        try:
            if await legacy_group(namespace, owner[0]):
                return []
        except KubeError as exc:
            raise LookupFailed(f"failed to get workload {UNNAMED_STATEFULSET_GROUP}: {exc}") from exc
    return statefulset_group_patch(pod, defaulting.short_names)


async def _held_deployment(pod: dict[str, Any], namespace: str, defaulting: PodDefaulting,
                           deployment_of: DeploymentOf) -> bool:
    """Whether the Pod's ReplicaSet is controlled by a Deployment Kueue holds: Kueue's walk passes over a
    ReplicaSet (an interim owner it knows without an integration) to its controller, which, with the
    ``deployment`` integration on, is Kueue's when it names a queue or under ``manageJobsWithoutQueueName``. Its
    Pods are then the Deployment's, left as made. A ReplicaSet or Deployment that cannot be read refuses the Pod,
    as Kueue's walk fails."""
    if DEPLOYMENT_FRAMEWORK not in defaulting.frameworks:
        return False
    replica_set = (controller_of(pod) or {}).get("name", "")
    try:
        deployment = await deployment_of(namespace, replica_set)
    except KubeError as exc:
        status = child_jobs.refusal_status(exc)
        raise LookupFailed(status["message"], status) from exc
    if deployment is None:
        return False
    return defaulting.without_queue or bool((deployment.get("labels") or {}).get(QUEUE_LABEL))


def deployment_lookup(client: KubeClient) -> DeploymentOf:
    """A ReplicaSet's controlling Deployment, read from the apiserver: the ReplicaSet, then the Deployment its
    controller reference names (none: not a Deployment's)."""

    async def deployment_of(namespace: str, replica_set: str) -> dict[str, Any] | None:
        raw = msgspec.json.decode(await client.get(REPLICA_SETS, replica_set, namespace))
        owner = job_selection.raw_controller((raw.get("metadata") or {}) if isinstance(raw, dict) else {})
        if owner != (f"{DEPLOYMENTS.group}/{DEPLOYMENTS.version}", DEPLOYMENTS.kind):
            return None
        ref = controller_of(raw) or {}
        deployment = msgspec.json.decode(await client.get(DEPLOYMENTS, str(ref.get("name", "")), namespace))
        return dict((deployment.get("metadata") or {}) if isinstance(deployment, dict) else {})

    return deployment_of


def legacy_group_lookup(client: KubeClient) -> LegacyGroup:
    """:data:`LegacyGroup`, asked of the apiserver: the Workload :data:`UNNAMED_STATEFULSET_GROUP`, and whether a Pod
    named ``<set>-<ordinal>`` owns it."""

    async def legacy_group(namespace: str, statefulset: str) -> bool:
        try:
            raw = msgspec.json.decode(await client.get(BY_KIND["Workload"], UNNAMED_STATEFULSET_GROUP, namespace))
        except NotFound:
            return False
        refs = ((raw.get("metadata") or {}) if isinstance(raw, dict) else {}).get("ownerReferences") or []
        return any(isinstance(r, dict) and r.get("kind") == "Pod" and _pod_of(str(r.get("name", "")), statefulset)
                   for r in refs)

    return legacy_group


def _pod_of(pod_name: str, statefulset: str) -> bool:
    """Whether ``pod_name`` is the name a StatefulSet ``statefulset`` gives its pods: ``<set>-<ordinal>``."""
    prefix, _, ordinal = pod_name.rpartition("-")
    return prefix == statefulset and ordinal.isdigit()


def namespace_lookup(client: KubeClient) -> NamespaceLabels:
    """A Namespace's labels, asked of the apiserver (every replica serves the webhook, standbys too)."""

    async def namespace_labels(name: str) -> dict[str, str]:
        raw = msgspec.json.decode(await client.get(BY_KIND["Namespace"], name))
        return dict((raw.get("metadata") or {}).get("labels") or {})

    return namespace_labels


def failure_policy(pods: bool) -> str:
    """How the apiserver takes a Pod webhook it cannot reach, as Kueue's manifests register ``mpod``/``vpod``:
    ``Fail`` while the pod integration is on, ``Ignore`` while it is off, when there is nothing to enforce and a
    webhook down must not stop every Pod in the cluster."""
    return "Fail" if pods else "Ignore"


def registration(client_config: dict[str, Any], namespace_selector: dict[str, Any], *, pods: bool = False
                 ) -> dict[str, Any]:
    """The ``mpod.kb.io`` entry of the MutatingWebhookConfiguration: Pods, on creation, in the namespaces
    ``namespace_selector`` selects (as Kueue's manifests: all but kube-system and its own); ``pods``: whether the
    pod integration is on (:func:`failure_policy`)."""
    return {
        "name": WEBHOOK_NAME, "clientConfig": client_config,
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                   "scope": "Namespaced"}],
        "namespaceSelector": namespace_selector, "failurePolicy": failure_policy(pods), "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 10, "reinvocationPolicy": "Never",
    }




Reviewer = Callable[[bytes], Awaitable[dict[str, Any]]]


def reviewer(client: KubeClient, defaulting: PodDefaulting, has_default_queue: HasDefaultQueue,
             managed_ancestry: ManagedAncestry, has_default_priority_class: HasDefaultClass | None = None) -> Reviewer:
    """:func:`review` with the namespace asked of the apiserver and the ancestors walked by ``managed_ancestry``."""
    namespace_labels = namespace_lookup(client)
    deployment_of = deployment_lookup(client)
    legacy_group = legacy_group_lookup(client)

    async def answer(body: bytes) -> dict[str, Any]:
        return await review(body, defaulting, namespace_labels, has_default_queue, managed_ancestry, deployment_of,
                            has_default_priority_class, legacy_group)

    return answer


async def allowed_as_is(body: bytes) -> dict[str, Any]:
    """The answer of a webhook whose integration is off (this one's, or the Job webhooks'): every object allowed
    as it is, as Kueue's no-op webhooks for the frameworks it does not manage answer."""
    req = msgspec.json.decode(body).get("request") or {}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": req.get("uid", ""), "allowed": True}}
