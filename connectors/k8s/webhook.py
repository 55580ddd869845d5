"""The mutating admission webhook for batch/v1 Jobs, served over TLS, as Kueue's job webhook defaults them.

On **create** (Kueue's webhook is registered for creation only: unsuspending an admitted Job is an update):

* no ``kueue.x-k8s.io/queue-name`` label and the namespace has a LocalQueue named ``default`` → the label is set
  to ``default`` (Kueue's LocalQueue defaulting);
* no ``kueue.x-k8s.io/priority-class`` label and a WorkloadPriorityClass named ``default`` exists → the label is
  set to ``default``, whatever the pod template's ``priorityClassName`` (Kueue's WorkloadPriorityClass
  defaulting, under its ``WorkloadPriorityClassDefaulting`` gate, beta and on by default; like Kueue, for every
  Job created, with a queue name or not, in a namespace ``managedJobsNamespaceSelector`` selects: Kueue v0.20's
  #15851);
* a queue name and ``spec.suspend`` not true → ``spec.suspend: true``, so no pod starts before admission — unless
  the Job has a Kueue-managed ancestor (Kueue's ``WorkloadShouldBeSuspended``: the walk up its controllers of
  :func:`connectors.k8s.child_jobs.managed_ancestor`, the parents read by :func:`ancestry_lookup` from what
  the connector beside it holds, else from the apiserver (:class:`HeldParents`); a parent it follows that is not there, cyclic ownership or too deep a chain refuses
  the Job, as Kueue's webhook fails): that ancestor's Workload is the one queued. Without the lookup (tests), a
  controller of a kind Kueue runs stands for it. The default queue is left to a Job whose own controller is of such
  a kind, as in Kueue;
* no queue name, under the Kueue Configuration's ``manageJobsWithoutQueueName``, no controller of a kind an
  enabled integration runs (a Job with ``batch/job`` on; a Pod with the pod integration on; ...) and a namespace its ``managedJobsNamespaceSelector`` selects
  (read from the apiserver; one that cannot be read refuses the Job, as Kueue's webhook fails) → suspended too
  (:mod:`connectors.k8s.job_selection`);
* a queue whose ClusterQueue has a MultiKueue check (controller ``kueue.x-k8s.io/multikueue``), under the
  ``MultiKueue`` gate, and no ``spec.managedBy`` (or the built-in ``kubernetes.io/job-controller``) →
  ``spec.managedBy: kueue.x-k8s.io/multikueue``: on a manager the
  Job runs on a worker, its status mirrored back (:mod:`connectors.k8s.multikueue`); the LocalQueue, its
  ClusterQueue and their checks are read from the apiserver (:func:`multikueue_lookup`; a missing queue sets
  nothing, a missing check is passed over);
  whatever the Job's ancestry, as Kueue's ``ApplyDefaultForManagedBy`` (a child Job too, though not suspended);
* ``kueue.x-k8s.io/elastic-job: "true"`` under ``ElasticJobsViaWorkloadSlices`` → the pod template gets the
  ``kueue.x-k8s.io/elastic-job`` scheduling gate (:mod:`connectors.k8s.workload_slices`: the Job integration
  lifts it from the pods of an admitted slice).

It refuses nothing: what Kueue refuses in a Job (a ``kueue.x-k8s.io/max-exec-time-seconds`` that is not an
integer above 0, say, or a running Job's queue name changed) its validating Job webhook refuses, served here too
(:mod:`connectors.k8s.job_validation`, ``/validate-batch-v1-job``) and registered with the validating webhooks.

The answer is an ``admission.k8s.io/v1`` AdmissionReview with a JSON patch; a Job that needs nothing is allowed
unchanged. :func:`configuration` builds the MutatingWebhookConfiguration (``failurePolicy: Fail``, Kueue's
namespace exclusions) that points the apiserver at it — by URL, or at a Service in-cluster — with the CA that
signed the serving certificate as its ``caBundle``; :func:`register` creates or updates it. The same server
answers the CRDs' ConversionReviews (:mod:`connectors.k8s.conversion`) and Kueue's validating webhooks for its own
kinds (:mod:`connectors.k8s.validating`) and for Jobs, all registered with the same CA. The same configuration
registers Kueue's Pod webhook (:mod:`connectors.k8s.pod_webhook`), which changes nothing while the Kueue
Configuration leaves the pod integration off, and Kueue's Deployment webhook
(:mod:`connectors.k8s.deployment_webhook`) and StatefulSet webhook (:mod:`connectors.k8s.statefulset_webhook`),
which change nothing while their ``deployment`` and ``statefulset`` integrations are off, and Kueue's JobSet webhooks
(:mod:`connectors.k8s.jobset_webhook`), MPIJob webhooks (:mod:`connectors.k8s.mpijob_webhook`) and RayJob and
RayCluster webhooks (:mod:`connectors.k8s.ray_webhook`), which change and refuse nothing while their integrations are
off.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import structlog
from aiohttp import web

from connectors.k8s import (
    appwrapper_webhook,
    child_jobs,
    conversion,
    crds,
    deployment_webhook,
    framework_webhook,
    https,
    job_selection,
    job_validation,
    jobset_webhook,
    kubeflow_webhook,
    lws_webhook,
    mpijob_webhook,
    parent_reads,
    pod_validation,
    pod_webhook,
    ray_webhook,
    spark_executor_webhook,
    spark_webhook,
    statefulset_webhook,
    trainjob_webhook,
    validating,
    workload_slices,
)
from connectors.k8s.certs import CertBundle, ca_bundle, self_signed
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, KubeError, NotFound
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.json_patch import map_ops
from connectors.k8s.pods_ready_validation import PodsReadyRule
from connectors.k8s.resources import BY_KIND, Resource
from connectors.k8s.settings import KubeSettings
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, DEPLOYMENT_FRAMEWORK, STATEFULSET_FRAMEWORK, SchedulerConfig
from kueue_es.scheduler.tls_options import TLSSettings
from projections import gates

log = structlog.get_logger("kueue_es.k8s.webhook")

PATH = "/mutate-batch-v1-job"
PARENT_PATHS = (deployment_webhook.MUTATING_PATH, deployment_webhook.VALIDATING_PATH,
                statefulset_webhook.MUTATING_PATH, statefulset_webhook.VALIDATING_PATH)
"""The paths of the webhooks for the parents of Pods Kueue holds (Deployments, StatefulSets)."""
FRAMEWORK_PATHS = (*PARENT_PATHS, *jobset_webhook.PATHS, *mpijob_webhook.PATHS, *kubeflow_webhook.PATHS,
                   *ray_webhook.PATHS, *lws_webhook.PATHS, *appwrapper_webhook.PATHS, *trainjob_webhook.PATHS,
                   *ray_webhook.SERVICE_PATHS, *spark_webhook.PATHS, spark_executor_webhook.PATH)
"""The paths of the webhooks of the frameworks answered by a review given to :class:`WebhookServer` (its
``parents``): the parents', the JobSet, MPIJob, training operator, Ray, LeaderWorkerSet, AppWrapper and TrainJob ones
(:mod:`connectors.k8s.jobset_webhook`, :mod:`connectors.k8s.mpijob_webhook`, :mod:`connectors.k8s.kubeflow_webhook`,
:mod:`connectors.k8s.ray_webhook`, :mod:`connectors.k8s.lws_webhook`, :mod:`connectors.k8s.appwrapper_webhook`,
:mod:`connectors.k8s.trainjob_webhook`), the SparkApplication executor Pods' (:mod:`connectors.k8s.spark_executor_webhook`)."""
DEFAULT_QUEUE = "default"
CONFIGURATION_NAME = "kueue-es-mutating-webhook-configuration"
WEBHOOK_NAME = "mjob.kb.io"
MUTATING_CONFIGS = Resource("MutatingWebhookConfiguration", "admissionregistration.k8s.io", "v1",
                            "mutatingwebhookconfigurations", False)
_CONFIGS = {r.kind: r for r in (MUTATING_CONFIGS, validating.VALIDATING_CONFIGS)}
SECRETS = Resource("Secret", "", "v1", "secrets", True)

DEFAULT_PRIORITY_CLASS = "default"

HasDefaultQueue = Callable[[str], Awaitable[bool]]
HasDefaultPriorityClass = Callable[[], Awaitable[bool]]
ParentRuns = Callable[[tuple[str, str] | None], bool]
"""Whether a controller ``(apiVersion, kind)`` is of a kind Kueue's enabled integrations run."""
ManagedAncestry = child_jobs.ManagedAncestry
MultiKueueLookup = Callable[[str, str], Awaitable[bool]]
"""Whether LocalQueue ``namespace/name``'s ClusterQueue has a MultiKueue check."""
MULTIKUEUE_MANAGER = "kueue.x-k8s.io/multikueue"
JOB_CONTROLLER = "kubernetes.io/job-controller"
"""The built-in Job controller's ``managedBy``: a Job naming it is handed to MultiKueue as one naming none."""
NamespaceManaged = Callable[[str], Awaitable[bool]]
"""Whether ``managedJobsNamespaceSelector`` selects a namespace; raises :class:`KubeError` when it cannot be read."""
SuspendsUnqueued = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Whether a Job being created (namespace, raw Job) that names no queue is suspended all the same
(``manageJobsWithoutQueueName``); raises :class:`KubeError` when the namespace cannot be read."""


def job_patch(job: dict[str, Any], has_default_queue: bool, has_default_priority_class: bool = False, *,
              suspend_unqueued: bool = False, child: bool = False, elastic_jobs: bool = False,
              multikueue: bool = False) -> list[dict[str, Any]]:
    """The JSON patch Kueue's defaulting makes to a Job being created (empty: nothing to change).
    ``suspend_unqueued``: a Job left without a queue name is Kueue's all the same (``manageJobsWithoutQueueName``);
    ``child``: its controller is of a kind Kueue runs, so it is not suspended, whatever queue it names;
    ``elastic_jobs``: the ``ElasticJobsViaWorkloadSlices`` gate (an elastic Job's pods are gated); ``multikueue``:
    its queue's ClusterQueue has a MultiKueue check (the Job is handed to MultiKueue unless it names a manager,
    a ``child`` too)."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    added: dict[str, str] = {}
    queue = labels.get(QUEUE_LABEL, "")
    if not queue and has_default_queue:
        queue = added[QUEUE_LABEL] = DEFAULT_QUEUE
    if not labels.get(PRIORITY_LABEL) and has_default_priority_class:
        added[PRIORITY_LABEL] = DEFAULT_PRIORITY_CLASS
    ops = map_ops("/metadata/labels", meta.get("labels"), added)
    if (queue or suspend_unqueued) and not child and (job.get("spec") or {}).get("suspend") is not True:
        ops.append({"op": "add", "path": "/spec/suspend", "value": True})
    if multikueue and (job.get("spec") or {}).get("managedBy") in (None, JOB_CONTROLLER):
        ops.append({"op": "add", "path": "/spec/managedBy", "value": MULTIKUEUE_MANAGER})
    if elastic_jobs and (meta.get("annotations") or {}).get(workload_slices.ELASTIC_JOB_ANNOTATION) == "true":
        ops += elastic_gate_ops(job)
    return ops


def elastic_gate_ops(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``kueue.x-k8s.io/elastic-job`` scheduling gate added to an elastic Job's pod template (unless there),
    so that no pod of it is scheduled before the slice counting it is admitted (Kueue's
    ``applyWorkloadSliceSchedulingGate``; the Job integration lifts it)."""
    return workload_slices.gate_template_ops((job.get("spec") or {}).get("template") or {}, "/spec/template")


def kueue_parents(frameworks: frozenset[str] = frozenset(DEFAULT.frameworks),
                  external: frozenset[tuple[str, str]] = frozenset()) -> ParentRuns:
    """Whether a Job's controller is of a kind Kueue's enabled integrations, ``frameworks`` (by default Kueue's
    default, ``batch/job`` alone), run, or one of the ``external`` kinds an external controller runs for it
    (:func:`connectors.k8s.job_selection.kueue_owner`)."""
    return partial(job_selection.kueue_owner, frameworks=frameworks, external=external)


async def review(body: bytes, has_default_queue: HasDefaultQueue,
                 has_default_priority_class: HasDefaultPriorityClass | None = None,
                 suspends_unqueued: SuspendsUnqueued | None = None,
                 parent_runs: ParentRuns | None = None, *, elastic_jobs: bool = False,
                 managed_ancestry: ManagedAncestry | None = None,
                 multikueue: MultiKueueLookup | None = None,
                 namespace_managed: NamespaceManaged | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) for a Job (``elastic_jobs``: the ``ElasticJobsViaWorkloadSlices`` gate). ``has_default_priority_class``: None when the
    ``WorkloadPriorityClassDefaulting`` gate is off; ``suspends_unqueued``: None unless the Kueue Configuration
    turns ``manageJobsWithoutQueueName`` on (a failed namespace lookup refuses the Job, in Kueue's words).
    ``parent_runs``: whether the Job's controller is of a kind Kueue runs (by default a batch/v1 Job): such a child
    is given no queue, no default WorkloadPriorityClass (Kueue's ``IsOwnerManagedByKueueForObject`` in both
    defaultings) and not suspended (reference §7.1 item 2: that parent is the one queued; a JobSet's Jobs, say).
    ``managed_ancestry``: whether the Job has a Kueue-managed ancestor, which alone keeps it from being suspended
    (None: ``parent_runs`` decides that too). ``multikueue``: :func:`multikueue_lookup`, None while the
    ``MultiKueue`` gate is off. ``namespace_managed``: :func:`namespace_managed_lookup`; a Job in a namespace it
    leaves out is given no queue name, not suspended, not gated nor handed to MultiKueue (Kueue's #13375)."""
    req = msgspec.json.decode(body).get("request") or {}
    response: dict[str, Any] = {"uid": req.get("uid", ""), "allowed": True}
    job = req.get("object") or {}
    if req.get("operation", "CREATE") == "CREATE" and job:
        meta = job.get("metadata") or {}
        namespace = req.get("namespace") or meta.get("namespace", "")
        labels = meta.get("labels") or {}
        child = (parent_runs or kueue_parents())(job_selection.raw_controller(meta))
        if managed_ancestry is not None:
            try:
                managed_above = await managed_ancestry(namespace, job)
            except (child_jobs.AncestryError, KubeError) as exc:
                return _refused(response, exc)
        else:
            managed_above = child
        if namespace and namespace_managed is not None:
            try:
                excluded = not await namespace_managed(namespace)
            except KubeError as exc:
                return _namespace_unread(response, exc)
            if excluded:  # left as it is, its priority class too (Kueue's #13375, #15851)
                return _patched(response, [])
        default = not child and not labels.get(QUEUE_LABEL) and bool(namespace) and await has_default_queue(namespace)
        default_class = (has_default_priority_class is not None and not child and not labels.get(PRIORITY_LABEL)
                         and await has_default_priority_class())
        unqueued = False
        if suspends_unqueued is not None and not labels.get(QUEUE_LABEL) and not default:
            try:
                unqueued = await suspends_unqueued(namespace, job)
            except KubeError as exc:
                return _namespace_unread(response, exc)
        queue = labels.get(QUEUE_LABEL) or (DEFAULT_QUEUE if default else "")
        # whatever its ancestry, as Kueue's ApplyDefaultForManagedBy (the ancestry decides the suspension alone)
        handed = bool(multikueue is not None and queue and namespace and await multikueue(namespace, queue))
        return _patched(response, job_patch(job, default, default_class, suspend_unqueued=unqueued,
                                            child=managed_above, elastic_jobs=elastic_jobs, multikueue=handed))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _patched(response: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The review allowing the Job with the JSON patch ``ops`` (none: as it is)."""
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(msgspec.json.encode(ops)).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _namespace_unread(response: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """The review refusing a Job whose namespace could not be read, in Kueue's words."""
    response.update(allowed=False, status={"code": 500, "reason": "InternalError",
                                           "message": f"failed to get namespace: {exc}"})
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _refused(response: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """The review refusing a Job whose ancestors could not be walked (:func:`connectors.k8s.child_jobs.refusal_status`)."""
    response.update(allowed=False, status=child_jobs.refusal_status(exc))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class HeldParents:
    """What this kueue-es process already holds of the parents a webhook's walk reads: once the connector runs beside the
    webhook server (this replica leads), its parents registry (:class:`connectors.k8s.child_jobs.Parents`: the JobSets,
    MPIJobs, training jobs, RayJobs, RayClusters, LeaderWorkerSets, AppWrappers, TrainJobs and RayServices the
    integrations' informers list, the managed Pods) and the log's Jobs. Kueue's webhooks read parents from the manager's
    informer cache, never from the apiserver: an admission request has the apiserver's timeout to answer in, and one GET
    per parent inside it is what the cache spares. Where nothing is held — a standby (it runs no connector), an informer
    not listed yet, a parent made an instant ago that its watch has not brought, a held copy of another uid (deleted and
    made again) — the parent is read from the apiserver instead. Kueue's cache answers such a miss "not found" and its
    webhook then refuses the object (``ErrWorkloadOwnerNotFound``) for the client to retry; kueue-es reads the
    apiserver, which can only know better, so an object Kueue would refuse and then take on retry is taken at once, as
    decided on the parent's stored state."""

    def __init__(self) -> None:
        self._parents: child_jobs.Parents | None = None
        self._jobs: Callable[[], Mapping[str, o.Job]] = dict
        self.hits = 0
        """Parents answered from memory (the rest were read from the apiserver)."""

    def attach(self, parents: child_jobs.Parents, jobs: Callable[[], Mapping[str, o.Job]]) -> None:
        """Read from ``parents`` and the Jobs ``jobs`` gives (the mirror's, as they are at each read)."""
        self._parents, self._jobs = parents, jobs

    def detach(self) -> None:
        self._parents, self._jobs = None, dict

    def meta(self, namespace: str, ref: o.OwnerReference) -> o.ObjectMeta | None:
        """The held metadata of the parent ``ref`` names; None when not held (the caller reads the apiserver)."""
        if self._parents is None:
            return None
        found = self._parents.held_meta(ref.kind, namespace, ref.name, self._jobs())
        if found is None or (ref.uid and found.uid and found.uid != ref.uid):
            return None
        self.hits += 1
        return found


def ancestry_lookup(client: KubeClient, config: SchedulerConfig, held: HeldParents | None = None) -> ManagedAncestry:
    """Kueue's walk for an object being created or updated
    (:func:`connectors.k8s.child_jobs.managed_ancestor`, under the integrations ``config`` turns on and its
    ``manageJobsWithoutQueueName``): each parent of a kind Kueue knows, its integration on or off, or of one
    of its external kinds (``integrations.externalFrameworks``, found through discovery), is read — from
    what ``held`` holds (:class:`HeldParents`), else from the apiserver — at most one past
    :data:`~connectors.k8s.child_jobs.CHAIN_LIMIT`, so the walk can tell a chain too long. Where they are read
    from changes nothing the walk decides on the same parents."""

    external = config.external_job_kinds
    discovered: parent_reads.Found = {}

    async def read(namespace: str, ref: o.OwnerReference) -> o.ObjectMeta | None:
        # nothing holds an external kind (its kind's name may be a held kind's)
        held_kind = held is not None and (ref.api_version, ref.kind) not in external
        cached = held.meta(namespace, ref) if held is not None and held_kind else None
        if cached is not None:
            return cached
        return await parent_reads.read_parent_meta(client, namespace, ref, external, discovered)

    def parent_of(reads: child_jobs.Reads) -> child_jobs.ParentOf:
        def lookup(namespace: str, ref: o.OwnerReference) -> child_jobs.Parent | None:
            owner = (ref.api_version, ref.kind)
            if not job_selection.known_owner(owner, external):
                return None
            return child_jobs.read_parent(reads, namespace, ref, job_selection.runs_parent(owner, config))
        return lookup

    async def has_managed_ancestor(namespace: str, job: dict[str, Any]) -> bool:
        meta = msgspec.convert(job.get("metadata") or {}, o.ObjectMeta, strict=False)
        meta = msgspec.structs.replace(meta, namespace=namespace)
        found = await child_jobs.walk_reading(meta, parent_of, read, config.manage_jobs_without_queue_name)
        return found is not None

    return has_managed_ancestor


def default_queue_lookup(client: KubeClient) -> HasDefaultQueue:
    """Whether the namespace has a LocalQueue ``default`` — asked of the apiserver (standbys serve too)."""

    async def has_default_queue(namespace: str) -> bool:
        try:
            await client.get(BY_KIND["LocalQueue"], DEFAULT_QUEUE, namespace)
        except NotFound:
            return False
        return True

    return has_default_queue


def multikueue_lookup(client: KubeClient) -> MultiKueueLookup:
    """Whether a LocalQueue's ClusterQueue has a MultiKueue check, asked of the apiserver (the LocalQueue, its
    ClusterQueue, its checks). A missing or unreadable LocalQueue or ClusterQueue answers no, and the Job is
    left as it is; a check that is missing or cannot be read is passed over, as Kueue's cache simply does not
    hold one not created yet, so a MultiKueue check listed after it still answers yes."""

    async def has_multikueue_check(namespace: str, queue: str) -> bool:
        try:
            lq = msgspec.json.decode(await client.get(BY_KIND["LocalQueue"], queue, namespace))
            cq_name = (lq.get("spec") or {}).get("clusterQueue") or ""
            if not cq_name:
                return False
            cq = msgspec.json.decode(await client.get(BY_KIND["ClusterQueue"], cq_name))
        except KubeError as exc:
            log.info("no MultiKueue check found for a Job's queue", namespace=namespace, queue=queue, error=str(exc))
            return False
        strategy = (cq.get("spec") or {}).get("admissionChecksStrategy") or {}
        for rule in strategy.get("admissionChecks") or []:
            try:
                ac = msgspec.json.decode(await client.get(BY_KIND["AdmissionCheck"], rule.get("name", "")))
            except KubeError as exc:
                log.info("an admission check of a Job's queue passed over", namespace=namespace, queue=queue,
                         check=rule.get("name", ""), error=str(exc))
                continue
            if (ac.get("spec") or {}).get("controllerName") == MULTIKUEUE_MANAGER:
                return True
        return False

    return has_multikueue_check


def unqueued_lookup(client: KubeClient, config: SchedulerConfig) -> SuspendsUnqueued | None:
    """Kueue's rule for a Job naming no queue (:mod:`connectors.k8s.job_selection`), its namespace's labels asked
    of the apiserver — only when the owner does not already decide it; None while ``manageJobsWithoutQueueName``
    is off."""
    if not config.manage_jobs_without_queue_name:
        return None
    namespace_labels = pod_webhook.namespace_lookup(client)

    async def suspends_unqueued(namespace: str, job: dict[str, Any]) -> bool:
        if not job_selection.manages_unqueued(job_selection.raw_controller(job.get("metadata") or {}), config):
            return False
        return job_selection.namespace_managed(await namespace_labels(namespace), config)

    return suspends_unqueued


def namespace_managed_lookup(client: KubeClient, config: SchedulerConfig) -> NamespaceManaged:
    """Whether ``config``'s ``managedJobsNamespaceSelector`` selects a namespace, its labels asked of the
    apiserver (:func:`connectors.k8s.job_selection.namespace_managed`)."""
    namespace_labels = pod_webhook.namespace_lookup(client)

    async def namespace_managed(namespace: str) -> bool:
        return job_selection.namespace_managed(await namespace_labels(namespace), config)

    return namespace_managed


def default_priority_class_lookup(client: KubeClient) -> HasDefaultPriorityClass:
    """Whether a WorkloadPriorityClass ``default`` exists — asked of the apiserver, as Kueue's webhook asks. As
    there, a failed lookup labels nothing (and is logged) rather than failing the Job's creation."""

    async def has_default_priority_class() -> bool:
        try:
            await client.get(BY_KIND["WorkloadPriorityClass"], DEFAULT_PRIORITY_CLASS)
        except NotFound:
            return False
        except KubeError as exc:
            log.warning("cannot look up the default WorkloadPriorityClass", error=str(exc))
            return False
        return True

    return has_default_priority_class


MAX_REVIEW_BYTES = 7 * 1024 * 1024
"""The largest review body taken, as Kueue's webhook server (controller-runtime's limit): an object and its old
object, each up to the apiserver's 3 MiB request limit, and the review around them. (aiohttp's default, 1 MiB,
would answer 413 to a review of a large object Kueue takes, and the apiserver, failing closed, refuse it.)"""


class WebhookServer:
    """HTTPS on ``address:port`` with the given certificate: the Job webhook at :data:`PATH`, the CRD conversion
    webhook at :data:`connectors.k8s.conversion.PATH`, the validating webhooks at
    :data:`connectors.k8s.validating.PATHS` and :data:`connectors.k8s.job_validation.PATH` (the last three under
    the Kueue Configuration's ``feature_gates``)."""

    def __init__(self, has_default_queue: HasDefaultQueue,
                 has_default_priority_class: HasDefaultPriorityClass | None = None,
                 feature_gates: Mapping[str, bool] | None = None,
                 pods: pod_webhook.Reviewer = pod_webhook.allowed_as_is, jobs: bool = True,
                 suspends_unqueued: SuspendsUnqueued | None = None,
                 pod_validations: pod_webhook.Reviewer = pod_webhook.allowed_as_is,
                 parents: Mapping[str, pod_webhook.Reviewer] | None = None,
                 parent_runs: ParentRuns | None = None, managed_ancestry: ManagedAncestry | None = None,
                 held_parents: HeldParents | None = None, multikueue: MultiKueueLookup | None = None,
                 namespace_managed: NamespaceManaged | None = None,
                 pods_ready: PodsReadyRule | None = None) -> None:
        self.has_default_queue = has_default_queue
        self.pods_ready = pods_ready
        """The Job webhook's ``kueue.x-k8s.io/wait-for-pods-ready`` checks (None: ``WorkloadLevelWaitForPodsReady``
        off; :mod:`connectors.k8s.pods_ready_validation`)."""
        self.namespace_managed = namespace_managed
        """Whether ``managedJobsNamespaceSelector`` selects a Job's namespace (:func:`namespace_managed_lookup`;
        None: every namespace)."""
        self.held_parents = held_parents or HeldParents()
        """What the walks read parents from before the apiserver: the leader attaches its connector's registry."""
        self.multikueue = multikueue
        """Whether a Job's queue is a MultiKueue one (:func:`multikueue_lookup`; None: the gate is off)."""
        self.managed_ancestry = managed_ancestry
        """Whether a Job has a Kueue-managed ancestor (:func:`ancestry_lookup`; None: ``parent_runs`` says)."""
        self.parent_runs = parent_runs or kueue_parents()
        """Whether a Job's controller is of a kind Kueue runs: the Job webhook leaves such a child as it is."""
        self.jobs = jobs
        """The Job integration is on (``batch/job`` among the Configuration's frameworks): off, the Job webhooks
        allow every Job as it is."""
        self.suspends_unqueued = suspends_unqueued
        """Kueue's ``manageJobsWithoutQueueName`` rule (None: off)."""
        self.pods = pods
        """Answers the Pod webhook's reviews (:mod:`connectors.k8s.pod_webhook`)."""
        self.pod_validations = pod_validations
        """Answers the validating Pod webhook's reviews (:mod:`connectors.k8s.pod_validation`; the pod integration
        off, every Pod is allowed)."""
        self.parents = dict(parents or {})
        """Path -> the review of the Deployment, StatefulSet, JobSet or MPIJob webhooks there
        (:mod:`connectors.k8s.deployment_webhook`, :mod:`connectors.k8s.statefulset_webhook`,
        :mod:`connectors.k8s.jobset_webhook`, :mod:`connectors.k8s.mpijob_webhook`); a path not given allows every object as it is, as with the integration
        off."""
        self.has_default_priority_class = has_default_priority_class
        self.feature_gates = dict(feature_gates or {})
        self.reviews = 0
        self.patched = 0
        self.conversions = 0
        self.conversions_refused = 0
        self.validations = 0
        self.validations_refused = 0
        self._runner: web.AppRunner | None = None
        self.ca_pem = b""
        """The CA its certificate is signed with (what the apiserver is told to trust)."""
        self.registration: Callable[[KubeClient], Awaitable[None]] | None = None
        """With ``webhook_register``: registers this server's webhooks, trusting :attr:`ca_pem`, through the
        client given (:func:`serve`)."""

    async def start(self, address: str, port: int, certfile: str, keyfile: str,
                    tls: TLSSettings | None = None) -> None:
        """Serve on ``address:port`` with ``tls`` (the Configuration's ``tls`` stanza, :attr:`SchedulerConfig.server_tls`;
        None: the library's defaults)."""
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
        app.router.add_post(PATH, self._handle)
        app.router.add_post(pod_webhook.PATH, self._pod)
        app.router.add_post(conversion.PATH, self._convert)
        for path, kind in validating.PATHS.items():
            app.router.add_post(path, partial(self._validate, kind))
        app.router.add_post(job_validation.PATH, partial(self._validate, "Job"))
        app.router.add_post(pod_validation.PATH, partial(self._validate, "Pod"))
        for path in FRAMEWORK_PATHS:
            app.router.add_post(path, partial(self._parent, path))
        self._runner = await https.serve(app, address, port, https.server_tls(certfile, keyfile, options=tls))
        log.info("webhook serving", address=address, port=port,
                 paths=[PATH, pod_webhook.PATH, conversion.PATH, *validating.PATHS, job_validation.PATH,
                        pod_validation.PATH, *FRAMEWORK_PATHS])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        return await self._mutate(request, self._review_job if self.jobs else pod_webhook.allowed_as_is)

    async def _pod(self, request: web.Request) -> web.Response:
        return await self._mutate(request, self.pods)

    async def _parent(self, path: str, request: web.Request) -> web.Response:
        return await self._mutate(request, self.parents.get(path, pod_webhook.allowed_as_is))

    async def _review_job(self, body: bytes) -> dict[str, Any]:
        return await review(body, self.has_default_queue, self.has_default_priority_class, self.suspends_unqueued,
                            self.parent_runs,
                            elastic_jobs=gates.enabled(self.feature_gates, gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES),
                            managed_ancestry=self.managed_ancestry, multikueue=self.multikueue,
                            namespace_managed=self.namespace_managed)

    async def _mutate(self, request: web.Request, reviewer: pod_webhook.Reviewer) -> web.Response:
        """A mutating review (a Job's or a Pod's), answered by ``reviewer``."""
        try:
            out = await reviewer(await request.read())
        except (msgspec.DecodeError, AttributeError, TypeError) as exc:
            return web.json_response({"error": f"not an AdmissionReview: {exc}"}, status=400)
        self.reviews += 1
        if "patch" in out["response"]:
            self.patched += 1
        return _closing(web.json_response(out))

    async def _validate(self, kind: str, request: web.Request) -> web.Response:
        """A validating review of a ``kind`` object: a Job's or a Pod's (:mod:`connectors.k8s.job_validation`,
        :mod:`connectors.k8s.pod_validation`, which may ask the apiserver for the namespace's default LocalQueue),
        or one of the Kueue kinds'."""
        try:
            body = await request.read()
            if kind == "Pod":
                out = await self.pod_validations(body)
            elif kind != "Job":
                out = validating.review(body, kind, self.feature_gates)
            elif self.jobs:
                out = await job_validation.review(body, self.feature_gates, self.has_default_queue,
                                                  pods_ready=self.pods_ready)
            else:
                out = await pod_webhook.allowed_as_is(body)
        except (msgspec.DecodeError, AttributeError, TypeError) as exc:
            return web.json_response({"error": f"not an AdmissionReview: {exc}"}, status=400)
        self.validations += 1
        if not out["response"]["allowed"]:
            self.validations_refused += 1
        return _closing(web.json_response(out))

    async def _convert(self, request: web.Request) -> web.Response:
        try:
            out = conversion.review(await request.read(), self.feature_gates)
        except msgspec.DecodeError as exc:
            return web.json_response({"error": f"not a ConversionReview: {exc}"}, status=400)
        self.conversions += 1
        if out["response"]["result"]["status"] != "Success":
            self.conversions_refused += 1
        return _closing(web.json_response(out))


def _closing(resp: web.Response) -> web.Response:
    """One TLS connection per review: an idle kept-alive one would still be in its TLS shutdown when the server
    stops, and its socket would outlive it (a handshake per review is cheap next to that)."""
    resp.force_close()
    return resp


def configuration(ca_pem: bytes, *, url: str = "", service: tuple[str, str, int] | None = None,
                  name: str = CONFIGURATION_NAME, namespace_selector: dict[str, Any] | None = None,
                  excluded_namespaces: tuple[str, ...] = ("kube-system", "kueue-system"), pods: bool = False,
                  deployments: bool = False, statefulsets: bool = False, jobsets: bool = False,
                  mpijobs: bool = False, kubeflow: frozenset[str] = frozenset(), rayjobs: bool = False,
                  rayclusters: bool = False, leaderworkersets: bool = False, appwrappers: bool = False,
                  trainjobs: bool = False, rayservices: bool = False,
                  sparkapplications: bool = False) -> dict[str, Any]:
    """The MutatingWebhookConfiguration for :data:`PATH`, the Pod webhook's path and the Deployment, StatefulSet,
    JobSet and MPIJob webhooks': at ``url``, or at ``service`` (name, namespace, port), trusting ``ca_pem`` (none: as
    ``kueue-es manifests`` installs it, its CA set by the first replica that serves). ``pods``, ``deployments``,
    ``statefulsets``, ``jobsets``, ``mpijobs``: whether those integrations are on (each webhook then fails
    closed); ``kubeflow``: the training operator's kinds whose integration is on
    (:mod:`connectors.k8s.kubeflow_webhook`); ``sparkapplications``: the SparkApplication one
    (:mod:`connectors.k8s.spark_webhook`, and its executor Pods' :mod:`connectors.k8s.spark_executor_webhook`); ``rayjobs``, ``rayclusters``, ``rayservices``: the Ray integrations
    (:mod:`connectors.k8s.ray_webhook`); ``leaderworkersets`` whether the LeaderWorkerSet one is
    (:mod:`connectors.k8s.lws_webhook`); ``appwrappers`` whether the AppWrapper one is
    (:mod:`connectors.k8s.appwrapper_webhook`); ``trainjobs`` the TrainJob one (:mod:`connectors.k8s.trainjob_webhook`)."""
    if not url and service is None:
        raise ValueError("the webhook needs a url or a service")

    def client_config(path: str) -> dict[str, Any]:
        out: dict[str, Any] = ca_bundle(ca_pem)
        if url:
            out["url"] = url.rstrip("/") + path
        else:
            assert service is not None
            out["service"] = {"name": service[0], "namespace": service[1], "port": service[2], "path": path}
        return out
    selector = namespace_selector if namespace_selector is not None else {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded_namespaces)}]}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": WEBHOOK_NAME, "clientConfig": client_config(PATH),
            "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["jobs"], "scope": "Namespaced"}],
            "namespaceSelector": selector, "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 10, "reinvocationPolicy": "Never",
        }, pod_webhook.registration(client_config(pod_webhook.PATH), selector, pods=pods),
            deployment_webhook.registration(deployment_webhook.MUTATING_NAME,
                                            client_config(deployment_webhook.MUTATING_PATH), selector,
                                            "deployments", on=deployments, mutating=True),
            deployment_webhook.registration(statefulset_webhook.MUTATING_NAME,
                                            client_config(statefulset_webhook.MUTATING_PATH), selector,
                                            "statefulsets", on=statefulsets, mutating=True),
            *(framework_webhook.registration(kind, client_config(kind.mutating_path), selector, on=on, mutating=True)
              for kind, on in ((jobset_webhook.KIND, jobsets), (mpijob_webhook.KIND, mpijobs),
                               (ray_webhook.RAYJOB_KIND, rayjobs), (ray_webhook.RAYCLUSTER_KIND, rayclusters),
                               (appwrapper_webhook.KIND, appwrappers), (ray_webhook.RAYSERVICE_KIND, rayservices),
                               (spark_webhook.KIND, sparkapplications))),
            *kubeflow_webhook.registrations(client_config, selector, kubeflow, mutating=True),
            lws_webhook.registration(client_config(lws_webhook.MUTATING_PATH), selector, on=leaderworkersets,
                                     mutating=True),
            framework_webhook.registration(trainjob_webhook.KIND, client_config(trainjob_webhook.KIND.mutating_path),
                                           selector, on=trainjobs, mutating=True),
            spark_executor_webhook.registration(client_config(spark_executor_webhook.PATH), selector,
                                                on=sparkapplications)],
    }


async def register(client: KubeClient, doc: dict[str, Any]) -> None:
    """Create the Mutating- or ValidatingWebhookConfiguration ``doc``, or replace the one of that name."""
    name, configs = doc["metadata"]["name"], _CONFIGS[doc["kind"]]
    try:
        await client.create(configs, doc)
    except AlreadyExists:
        current = msgspec.json.decode(await client.get(configs, name))
        body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        await client.replace(configs, name, body)
    log.info("webhook registered", configuration=name)


async def certificate(client: KubeClient, k: KubeSettings) -> CertBundle:
    """The serving certificate: from ``webhook_cert_dir``, else from (or first into) the Secret
    ``webhook_secret``, else a new self-signed one for ``webhook_hosts`` (default: the Service's names)."""
    if k.webhook_cert_dir and (Path(k.webhook_cert_dir) / "tls.crt").exists():
        return CertBundle.read(k.webhook_cert_dir)
    hosts = [h.strip() for h in k.webhook_hosts.split(",") if h.strip()] or [
        f"{k.webhook_service}.{k.lease_namespace}.svc", f"{k.webhook_service}.{k.lease_namespace}.svc.cluster.local"]
    bundle = self_signed(hosts)
    if not k.webhook_secret:
        return bundle
    data = {"ca.crt": bundle.ca_pem, "tls.crt": bundle.cert_pem, "tls.key": bundle.key_pem}
    try:
        await client.create(SECRETS, {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": k.webhook_secret, "namespace": k.lease_namespace},
            "data": {name: base64.b64encode(v).decode() for name, v in data.items()}}, k.lease_namespace)
        return bundle
    except AlreadyExists:  # another replica made it first: serve the same certificate
        got = msgspec.json.decode(await client.get(SECRETS, k.webhook_secret, k.lease_namespace))["data"]
        return CertBundle(*(base64.b64decode(got[n]) for n in ("ca.crt", "tls.crt", "tls.key")))


def conversion_stanza(k: KubeSettings, ca_pem: bytes = b"") -> dict[str, Any]:
    """The CRDs' ``spec.conversion`` for this webhook (at ``webhook_url``, else at the Service)."""
    return crds.webhook_conversion(ca_pem, url=k.webhook_url,
                                   service=None if k.webhook_url else (k.webhook_service, k.lease_namespace, 443))


async def serve(client: KubeClient, k: KubeSettings, bundle: CertBundle | None = None, *,
                feature_gates: Mapping[str, bool] | None = None,
                pods: pod_webhook.PodDefaulting | None = None,
                config: SchedulerConfig | None = None, register_now: bool = True) -> WebhookServer:
    """Start the webhook as ``k`` says (with ``bundle``, else :func:`certificate`); when ``webhook_register``,
    register the Job webhook and the validating webhooks and point the CRDs' conversion at it, all trusting its
    CA: at once, or (``register_now`` False) when :attr:`WebhookServer.registration` is called, as ``run --kube``'s
    leader does once it may act. Stop it when done. ``feature_gates``: the Kueue Configuration's
    (``WorkloadPriorityClassDefaulting``, the gated validations). ``pods``: what the Pod webhook reads of it (None, or the pod integration off: it changes
    nothing). ``config``: the Kueue Configuration, for ``manageJobsWithoutQueueName`` and whether it manages
    batch/v1 Jobs (off: the Job webhooks change and refuse nothing); None: Kueue's defaults."""
    bundle = bundle or await certificate(client, k)
    _, cert, key = bundle.write(tempfile.mkdtemp(prefix="kueue-es-webhook-"))
    defaulting = gates.enabled(feature_gates or {}, gates.WORKLOAD_PRIORITY_CLASS_DEFAULTING)
    queues = default_queue_lookup(client)
    pods_on = pods is not None and pods.enabled

    config_in_force = config if config is not None else DEFAULT
    pods_ready = PodsReadyRule.of(config_in_force)
    pod_validations = (pod_validation.reviewer(feature_gates or {}, queues, pods_ready=pods_ready,
                                               frameworks=config_in_force.enabled_frameworks,
                                               external=config_in_force.external_job_kinds) if pods_on
                       else pod_webhook.allowed_as_is)
    deployments = deployment_webhook.ParentDefaulting.of(config_in_force, DEPLOYMENT_FRAMEWORK)
    statefulsets = deployment_webhook.ParentDefaulting.of(config_in_force, STATEFULSET_FRAMEWORK)
    jobsets = jobset_webhook.JobSetWebhooks.of(config_in_force)
    mpijobs = mpijob_webhook.MPIJobWebhooks.of(config_in_force)
    rayjobs = ray_webhook.RayWebhooks.of(config_in_force, clusters=False)
    rayclusters = ray_webhook.RayWebhooks.of(config_in_force, clusters=True)
    rayservices = ray_webhook.RayWebhooks.for_services(config_in_force)
    sparkapplications = spark_webhook.SparkApplicationWebhooks.of(config_in_force)
    leaderworkersets = lws_webhook.LeaderWorkerSetWebhooks.of(config_in_force)
    appwrappers = appwrapper_webhook.AppWrapperWebhooks.of(config_in_force)
    trainjobs = trainjob_webhook.TrainJobWebhooks.of(config_in_force)
    namespace_labels = pod_webhook.namespace_lookup(client)
    priority_classes = default_priority_class_lookup(client) if defaulting else None
    held = HeldParents()
    ancestry = ancestry_lookup(client, config_in_force, held)
    multikueue = multikueue_lookup(client) if config_in_force.gate(gates.MULTIKUEUE) else None
    pod_reviews = (pod_webhook.reviewer(client, pods, queues, ancestry, priority_classes) if pods is not None and pods_on
                   else pod_webhook.allowed_as_is)
    parents = {**deployment_webhook.reviewers(deployments, namespace_labels, queues, ancestry),
               **statefulset_webhook.reviewers(statefulsets, namespace_labels, queues, ancestry),
               **jobset_webhook.reviewers(jobsets, namespace_labels, queues, priority_classes, ancestry, multikueue),
               **mpijob_webhook.reviewers(mpijobs, namespace_labels, queues, priority_classes, ancestry, multikueue),
               **kubeflow_webhook.reviewers(config_in_force, namespace_labels, queues, priority_classes, ancestry,
                                            multikueue),
               **ray_webhook.reviewers(rayjobs, rayclusters, namespace_labels, queues, priority_classes, ancestry,
                                       multikueue),
               **ray_webhook.service_reviewers(rayservices, namespace_labels, queues, priority_classes, ancestry,
                                               multikueue),
               **spark_webhook.reviewers(sparkapplications, namespace_labels, queues, priority_classes, ancestry),
               **spark_executor_webhook.reviewers(sparkapplications.enabled, client),
               **lws_webhook.reviewers(leaderworkersets, namespace_labels, queues, ancestry),
               **appwrapper_webhook.reviewers(appwrappers, namespace_labels, queues, priority_classes, ancestry,
                                              multikueue),
               **trainjob_webhook.reviewers(trainjobs, namespace_labels, queues, priority_classes, ancestry,
                                            trainjob_webhook.runtime_lookup(client), multikueue)}
    server = WebhookServer(queues, priority_classes,
                           feature_gates, pod_reviews, config.manages_jobs if config is not None else True,
                           unqueued_lookup(client, config) if config is not None else None, pod_validations, parents,
                           kueue_parents(frozenset(config_in_force.enabled_frameworks),
                                         config_in_force.external_job_kinds), ancestry, held, multikueue,
                           namespace_managed_lookup(client, config_in_force), pods_ready)
    await server.start(k.webhook_address, k.webhook_port, str(cert), str(key), config_in_force.server_tls)
    server.ca_pem = bundle.ca_pem
    if not k.webhook_register:
        return server

    async def registration(api: KubeClient) -> None:
        service = None if k.webhook_url else (k.webhook_service, k.lease_namespace, 443)
        await register(api, configuration(bundle.ca_pem, url=k.webhook_url, service=service,
                                          excluded_namespaces=("kube-system", k.lease_namespace), pods=pods_on,
                                          deployments=deployments.enabled, statefulsets=statefulsets.enabled,
                                          jobsets=jobsets.enabled, mpijobs=mpijobs.enabled,
                                          kubeflow=config_in_force.kubeflow_kinds, rayjobs=rayjobs.enabled,
                                          rayclusters=rayclusters.enabled, leaderworkersets=leaderworkersets.enabled,
                                          appwrappers=appwrappers.enabled, trainjobs=trainjobs.enabled,
                                          rayservices=rayservices.enabled,
                                          sparkapplications=sparkapplications.enabled))
        await register(api, validating.configuration(bundle.ca_pem, url=k.webhook_url, service=service,
                                                     excluded_namespaces=("kube-system", k.lease_namespace),
                                                     pods=pods_on, deployments=deployments.enabled,
                                                     statefulsets=statefulsets.enabled, jobsets=jobsets.enabled,
                                                     mpijobs=mpijobs.enabled,
                                                     kubeflow=config_in_force.kubeflow_kinds,
                                                     rayjobs=rayjobs.enabled, rayclusters=rayclusters.enabled,
                                                     leaderworkersets=leaderworkersets.enabled,
                                                     appwrappers=appwrappers.enabled, trainjobs=trainjobs.enabled,
                                                     rayservices=rayservices.enabled,
                                                     sparkapplications=sparkapplications.enabled))
        await conversion.register(api, conversion_stanza(k, bundle.ca_pem))

    server.registration = registration
    if register_now:
        await registration(client)
    return server

