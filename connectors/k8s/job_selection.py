"""Which Jobs and Pods without a queue name are Kueue's: its ``manageJobsWithoutQueueName`` (default false).

Kueue manages an object that names a queue (``kueue.x-k8s.io/queue-name``). With ``manageJobsWithoutQueueName``
on it also manages one that names none, in a namespace its ``managedJobsNamespaceSelector`` selects
(``jobframework/defaults.go`` ``WorkloadShouldBeSuspended``, ``reconciler.go``), unless the object's controller
is of a kind one of its enabled integrations runs (``IsOwnerManagedByKueue``): that parent is the one Kueue
queues, its children follow it. kueue-es runs batch/v1 Jobs when the Job integration is on (``batch/job``, the
default), v1 Pods when the pod integration is on,
JobSets when the JobSet integration is on and MPIJobs (any ``kubeflow.org`` version, as Kueue's ``isMPIJob``)
when the MPIJob integration is on, the training operator's kubeflow.org/v1 jobs (PyTorchJob, TFJob, ...) whose
integration is on, ray.io/v1 RayJobs, RayClusters and RayServices when theirs are, LeaderWorkerSets whose
integration is on, workload.codeflare.dev/v1beta2 AppWrappers and trainer.kubeflow.org/v1alpha1 TrainJobs when theirs
is, so those are the parents that count here (a JobSet's Jobs, an MPIJob's launcher Job, a PyTorchJob's Pods, a
RayJob's RayCluster and submitter Job, a RayCluster's Pods, a RayService's RayClusters, a LeaderWorkerSet's
StatefulSets, what an AppWrapper wraps, a TrainJob's JobSet are left to it), and so are the kinds
``integrations.externalFrameworks`` lists, which an external controller runs for Kueue (it makes their
Workloads); under the option any such parent is managed, queue name or not
(``FindAncestorJobManagedByKueue``).

Such a Job is suspended at creation (by the mutating webhook, else by the Job integration after the fact) and
given a Workload with no ``queueName``: no LocalQueue holds it, so it stays pending (``QuotaReserved=False``
``Misconfigured`` "LocalQueue  doesn't exist", counted in no queue) until the Job, still suspended, names a queue
and the Workload moves there (:func:`connectors.k8s.job_sync.queue_to_set`).

Pure: decisions from the object's labels and owner references, the namespace's labels and the Configuration.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.resources import (
    APPWRAPPERS,
    BY_KIND,
    JOBSETS,
    KUBEFLOW_JOBS,
    LEADER_WORKER_SETS,
    MPIJOBS,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    SPARK_APPLICATIONS,
    TRAINJOBS,
    Resource,
)
from events import objects as o
from kueue_es.scheduler.config import (
    APPWRAPPER_FRAMEWORK,
    FRAMEWORK_KINDS,
    JOB_FRAMEWORK,
    JOBSET_FRAMEWORK,
    KUBEFLOW_FRAMEWORKS,
    LWS_FRAMEWORK,
    MPIJOB_FRAMEWORK,
    POD_FRAMEWORK,
    RAYCLUSTER_FRAMEWORK,
    RAYJOB_FRAMEWORK,
    RAYSERVICE_FRAMEWORK,
    SPARK_FRAMEWORK,
    TRAINJOB_FRAMEWORK,
    SchedulerConfig,
)
from projections.clusterqueues import selector_matches

JOB_OWNER = ("batch/v1", "Job")
POD_OWNER = ("v1", "Pod")
JOBSET_OWNER = (JOBSETS.api_version, JOBSETS.kind)
RAYJOB_OWNER = (RAYJOBS.api_version, RAYJOBS.kind)
RAYCLUSTER_OWNER = (RAYCLUSTERS.api_version, RAYCLUSTERS.kind)
LWS_OWNER = (LEADER_WORKER_SETS.api_version, LEADER_WORKER_SETS.kind)
APPWRAPPER_OWNER = (APPWRAPPERS.api_version, APPWRAPPERS.kind)
TRAINJOB_OWNER = (TRAINJOBS.api_version, TRAINJOBS.kind)
RAYSERVICE_OWNER = (RAYSERVICES.api_version, RAYSERVICES.kind)
SPARK_OWNER = (SPARK_APPLICATIONS.api_version, SPARK_APPLICATIONS.kind)


OWNER_FRAMEWORKS: Mapping[tuple[str, str], str] = {
    JOB_OWNER: JOB_FRAMEWORK, POD_OWNER: POD_FRAMEWORK, JOBSET_OWNER: JOBSET_FRAMEWORK,
    RAYJOB_OWNER: RAYJOB_FRAMEWORK, RAYCLUSTER_OWNER: RAYCLUSTER_FRAMEWORK, LWS_OWNER: LWS_FRAMEWORK,
    APPWRAPPER_OWNER: APPWRAPPER_FRAMEWORK, TRAINJOB_OWNER: TRAINJOB_FRAMEWORK, RAYSERVICE_OWNER: RAYSERVICE_FRAMEWORK,
    SPARK_OWNER: SPARK_FRAMEWORK,
    **{(KUBEFLOW_JOBS[kind].api_version, kind): name for kind, name in KUBEFLOW_FRAMEWORKS.items()}}
"""Controller ``(apiVersion, kind)`` -> the name of the integration that runs it, as ``integrations.frameworks``
lists it (an MPIJob of any ``kubeflow.org`` version aside: :func:`framework_of`)."""


OWNER_RESOURCES: Mapping[str, Resource] = {
    "Job": BY_KIND["Job"], "Pod": BY_KIND["Pod"], JOBSETS.kind: JOBSETS, MPIJOBS.kind: MPIJOBS,
    **KUBEFLOW_JOBS,
    RAYJOBS.kind: RAYJOBS, RAYCLUSTERS.kind: RAYCLUSTERS, LEADER_WORKER_SETS.kind: LEADER_WORKER_SETS,
    APPWRAPPERS.kind: APPWRAPPERS, TRAINJOBS.kind: TRAINJOBS, RAYSERVICES.kind: RAYSERVICES,
    SPARK_APPLICATIONS.kind: SPARK_APPLICATIONS}
"""Kind of an object an integration runs -> where it is read, or deleted, on the apiserver."""


def owner_resource(ref: o.OwnerReference) -> Resource | None:
    """Where the object ``ref`` names is read or deleted, for a kind an integration runs (None: another
    kind)."""
    return OWNER_RESOURCES.get(ref.kind)


def framework_of(owner: tuple[str, str] | None) -> str | None:
    """The framework that runs a controller ``(apiVersion, kind)`` (:data:`OWNER_FRAMEWORKS`; ``kubeflow.org/mpijob``
    for an MPIJob of any version, as Kueue's ``isMPIJob``), None for a kind no integration runs."""
    if owner is None:
        return None
    return MPIJOB_FRAMEWORK if is_mpijob(owner) else OWNER_FRAMEWORKS.get(owner)


INTERIM_OWNERS = frozenset({("apps/v1", "ReplicaSet")})
"""Kinds Kueue's ancestor walk knows without an integration of their own: a ReplicaSet, between a Deployment
and its Pods (Kueue's ``isKnownOwner``; its RBAC grants reading them)."""
KNOWN_OWNERS = frozenset(FRAMEWORK_KINDS.values()) | INTERIM_OWNERS


def known_owner(owner: tuple[str, str] | None, external: Collection[tuple[str, str]] = ()) -> bool:
    """Kueue's ``isKnownOwner``: whether the ancestor walk reads a controller of ``(apiVersion, kind)`` and
    goes on above it — the kind of any integration Kueue registers, on or off (an MPIJob of any version, as
    :func:`framework_of`), one of the ``external`` kinds (``integrations.externalFrameworks``:
    ``SchedulerConfig.external_job_kinds``), or an interim owner (:data:`INTERIM_OWNERS`). Another kind (a
    CronJob, a kind of an operator Kueue has no integration for) ends the walk unread."""
    if owner is None:
        return False
    return owner in KNOWN_OWNERS or owner in external or framework_of(owner) is not None


def kueue_owner(owner: tuple[str, str] | None, frameworks: Collection[str],
                external: Collection[tuple[str, str]] = ()) -> bool:
    """Whether the controller ``(apiVersion, kind)`` is of a kind Kueue's enabled integrations run: one whose
    framework (:func:`framework_of`) is among ``frameworks`` (the Configuration's enabled ones, listed or turned on
    by one listed: ``SchedulerConfig.enabled_frameworks``) — a
    batch/v1 Job only while ``batch/job`` is, as Kueue's ``IsOwnerManagedByKueue`` asks its enabled integrations
    alone — or one of the ``external`` kinds an external controller runs for Kueue
    (``SchedulerConfig.external_job_kinds``: exactly that apiVersion and kind). Kueue leaves the child to that
    parent."""
    if owner is not None and owner in external:
        return True
    framework = framework_of(owner)
    return framework is not None and framework in frameworks


def runs_parent(owner: tuple[str, str] | None, config: SchedulerConfig) -> bool:
    """:func:`kueue_owner` under the integrations the Configuration ``config`` turns on, and its external
    kinds."""
    return kueue_owner(owner, config.enabled_frameworks, config.external_job_kinds)


def is_mpijob(owner: tuple[str, str]) -> bool:
    """Kueue's ``isMPIJob``: kind ``MPIJob`` and an apiVersion in the ``kubeflow.org`` group."""
    api_version, kind = owner
    return kind == MPIJOBS.kind and api_version.startswith(f"{MPIJOBS.group}/")


def controller(refs: Iterable[o.OwnerReference]) -> tuple[str, str] | None:
    """``(apiVersion, kind)`` of the controller among ``refs``, if any."""
    return next(((r.api_version, r.kind) for r in refs if r.controller), None)


def raw_controller(meta: Mapping[str, object]) -> tuple[str, str] | None:
    """:func:`controller` of an object's raw ``metadata`` (as an admission review carries it)."""
    refs = meta.get("ownerReferences") or []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
    return None


def manages_unqueued(owner: tuple[str, str] | None, config: SchedulerConfig) -> bool:
    """Whether an object that names no queue is Kueue's, its namespace aside (that is :func:`namespace_managed`):
    only under ``manageJobsWithoutQueueName``, and not for the child of a Kueue-run parent."""
    return config.manage_jobs_without_queue_name and not runs_parent(owner, config)


def namespace_managed(namespace_labels: Mapping[str, str] | None, config: SchedulerConfig) -> bool:
    """Whether ``managedJobsNamespaceSelector`` selects the namespace (None: not known, so not managed)."""
    return namespace_labels is not None and selector_matches(config.managed_jobs_selector, dict(namespace_labels))


def is_managed(labels: Mapping[str, str], owner: tuple[str, str] | None, namespace_labels: Mapping[str, str] | None,
               config: SchedulerConfig) -> bool:
    """Whether a Job (or Pod) with ``labels`` and controller ``owner``, in a namespace labelled
    ``namespace_labels``, is Kueue's to queue: it names a queue, or :func:`manages_unqueued` says so; either way
    in a namespace the selector selects."""
    if not namespace_managed(namespace_labels, config):
        return False
    return bool(labels.get(QUEUE_LABEL)) or manages_unqueued(owner, config)
