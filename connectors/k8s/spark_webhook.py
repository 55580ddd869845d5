"""Kueue's webhooks for SparkApplications (sparkoperator.k8s.io/v1beta2): its alpha
``sparkoperator.k8s.io/sparkapplication`` integration's (``sparkapplication_webhook.go``).

``msparkapplication.kb.io`` at ``/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication`` (create only) defaults a
SparkApplication as any job (:mod:`connectors.k8s.framework_webhook`): the ``default`` queue, the ``default``
WorkloadPriorityClass, then ``spec.suspend: true`` when it is Kueue's. ``vsparkapplication.kb.io`` at
``/validate-sparkoperator-k8s-io-v1beta2-sparkapplication`` (create and update) refuses, in a Kueue-managed one (a
queue name, or ``manageJobsWithoutQueueName``), a ``spec.mode`` other than ``cluster`` and dynamic allocation
(``spec.dynamicAllocation.enabled``) unless it is an elastic job (``ElasticJobsViaWorkloadSlices`` and
``kueue.x-k8s.io/elastic-job: "true"``); then the generic create rules and, under ``TopologyAwareScheduling``, the
driver's and executors' TAS annotations (at ``spec.driver.annotations``, ``spec.executor.annotations``). An update is
checked when the new object is Kueue's or, under ``ValidateRayAndSparkJobUpdates``, the old one named a queue: the
generic update rules, then the create rules on the new object. Under ``TopologyAwareScheduling``, an application
whose roles Spark could not size (a memory size that is not Java's, such as ``512Mi``) is refused with only that
error, as Kueue's webhook fails building its pod sets.

Registered and failing as the other frameworks' webhooks: reviews answered unchanged while the integration is off
(``failurePolicy: Ignore``). Not done, unlike Kueue: ``spec.managedBy`` defaulted for MultiKueue.

A SparkApplication does not run on workload slices: under ``ElasticJobsViaWorkloadSlices`` one annotated
``kueue.x-k8s.io/elastic-job: "true"`` is refused, on create and update, whatever its queue (Kueue's generic
``ValidateElasticJobAnnotation``, whose GVK allowlist leaves the kind out;
``sparkapplication_webhook_test.go`` "dynamicAllocation with elastic job feature": that Forbidden alone, the
application being elastic so its dynamic allocation is not refused; after the generic rules, an order
unconfirmed).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from connectors.k8s import child_jobs, framework_webhook, job_validation
from connectors.k8s import sparkapplication as spark
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Kind, Reviewer
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels
from connectors.k8s.resources import SPARK_APPLICATIONS
from connectors.k8s.workload_slices import ELASTIC_JOB_ANNOTATION
from events.errors import InvalidInput
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates

SUSPEND_AT = ("spec", "suspend")
GVK = f"{SPARK_APPLICATIONS.api_version}, Kind={SPARK_APPLICATIONS.kind}"
"""The kind as Go prints a GroupVersionKind (in the elastic-job refusal)."""
CLUSTER_MODE = "cluster"
ONLY_CLUSTER_MODE = "only Cluster mode is supported for a kueue managed job"
NO_DYNAMIC_ALLOCATION = ("a kueue managed job can use dynamicAllocation only when the ElasticJobsViaWorkloadSlices "
                         "feature gate is on and the job is an elastic job")


class SparkApplicationWebhooks(FrameworkWebhooks, frozen=True):
    """What the SparkApplication webhooks read of the Kueue Configuration."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> SparkApplicationWebhooks:
        return cls.reading(config, config.manages_sparkapplications)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _managed(obj: Mapping[str, Any], without_queue: bool) -> bool:
    return without_queue or bool(_map(_map(obj.get("metadata")).get("labels")).get(QUEUE_LABEL))


def _elastic(obj: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> bool:
    return (gates.enabled(feature_gates, gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
            and _map(_map(obj.get("metadata")).get("annotations")).get(ELASTIC_JOB_ANNOTATION) == "true")


def _as_job(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The SparkApplication as the generic job rules read a job: its metadata, suspended at ``spec.suspend``."""
    return job_validation.as_generic_job(obj, framework_webhook.suspended(obj, SUSPEND_AT))


def spark_errors(app: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """What Kueue refuses in a Kueue-managed SparkApplication's spec: a mode other than ``cluster``, dynamic
    allocation in one that is not elastic."""
    spec = _map(app.get("spec"))
    errors = []
    mode = spec.get("mode", "")
    if mode != CLUSTER_MODE:
        errors.append(job_validation.invalid("spec.mode", mode, ONLY_CLUSTER_MODE))
    if _map(spec.get("dynamicAllocation")).get("enabled") is True and not _elastic(app, feature_gates):
        errors.append(job_validation.invalid("spec.dynamicAllocation.enabled", True, NO_DYNAMIC_ALLOCATION))
    return errors


def topology_errors(app: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``: the driver's, then the executors' pod-set TAS annotations."""
    if not gates.enabled(feature_gates, gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    gate = partial(gates.enabled, feature_gates)
    raw = dict(app)
    errors = []
    for role, count in ((spark.DRIVER, 1), (spark.EXECUTOR, spark.executor_count(raw))):
        annotations = spark.role_template(raw, role)["metadata"].get("annotations") or {}
        errors += job_validation.topology_errors(annotations, count, gate, path=f"spec.{role}.annotations")
    return errors


def pod_sets_error(app: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> str:
    """Under ``TopologyAwareScheduling`` Kueue builds the pod sets to check their TAS annotations: a role Spark
    could not size (:mod:`connectors.k8s.spark_resources`) fails that, and the review says only why."""
    if not gates.enabled(feature_gates, gates.TOPOLOGY_AWARE_SCHEDULING):
        return ""
    try:
        spark.pod_sets(dict(app), tas=False)
    except InvalidInput as exc:
        return str(exc)
    return ""


def create_errors(app: Mapping[str, Any], feature_gates: Mapping[str, bool], without_queue: bool = False, *,
                  gate_form: bool = True) -> list[str]:
    """What Kueue refuses in a SparkApplication being created, in its order (module docstring). ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    failed = pod_sets_error(app, feature_gates)
    if failed:
        return [failed]
    errors = spark_errors(app, feature_gates) if _managed(app, without_queue) else []
    return (errors + job_validation.generic_create_errors(_as_job(app), feature_gates, gate_form=gate_form)
            + job_validation.elastic_unsupported(app, GVK, feature_gates)
            + topology_errors(app, feature_gates))


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                  default_queue: bool = False, without_queue: bool = False) -> list[str]:
    """Kueue's ``ShouldValidateRayOrSparkJobOnUpdate``: an update is checked when ``new`` is Kueue's or, under
    ``ValidateRayAndSparkJobUpdates``, ``old`` named a queue (a running one may not drop it); then the update rules
    and the create rules on ``new``."""
    checked = _managed(new, without_queue) or (
        gates.enabled(feature_gates, gates.VALIDATE_RAY_AND_SPARK_JOB_UPDATES) and _managed(old, False))
    if not checked:
        return []
    return (job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                 default_queue=default_queue)
            + create_errors(new, feature_gates, without_queue, gate_form=False))


def kind(without_queue: bool = False) -> Kind:
    """The SparkApplication's :class:`~connectors.k8s.framework_webhook.Kind` (``without_queue``:
    ``manageJobsWithoutQueueName``, under which every SparkApplication is checked)."""
    return Kind(SPARK_APPLICATIONS, "/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication",
                "msparkapplication.kb.io", "/validate-sparkoperator-k8s-io-v1beta2-sparkapplication",
                "vsparkapplication.kb.io", SUSPEND_AT, lambda new, fg: create_errors(new, fg, without_queue),
                lambda old, new, fg, default: update_errors(old, new, fg, default, without_queue))


KIND = kind()
"""What registering the webhooks reads (paths, names, resource)."""
PATHS = (KIND.mutating_path, KIND.validating_path)


def reviewers(settings: SparkApplicationWebhooks, namespace_labels: NamespaceLabels,
              has_default_queue: HasDefaultQueue, has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every
    SparkApplication as it is (``managed_ancestry``: :func:`connectors.k8s.framework_webhook.reviewers`)."""
    return framework_webhook.reviewers(kind(settings.without_queue), settings, namespace_labels, has_default_queue,
                                       has_default_priority_class, managed_ancestry)
