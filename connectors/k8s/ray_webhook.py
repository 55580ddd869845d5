"""Kueue's webhooks for RayJobs, RayClusters and RayServices (``ray.io/v1``): its ``ray.io/rayjob``,
``ray.io/raycluster`` and ``ray.io/rayservice`` integrations'.

Each kind's mutating webhook (``mrayjob.kb.io`` at ``/mutate-ray-io-v1-rayjob``, ``mraycluster.kb.io`` at
``/mutate-ray-io-v1-raycluster``, on create) defaults it as any job (Kueue's ``rayjob_webhook.go`` and
``raycluster_webhook.go`` ``Default``; :mod:`connectors.k8s.framework_webhook`): the ``default`` queue, the
``default`` WorkloadPriorityClass, then ``spec.suspend: true`` when it names a queue or is managed without one — never
when it has a Kueue-managed ancestor (the Job webhook's walk: a queued RayJob's RayCluster, with the RayJob
integration on).

Each validating webhook (``vrayjob.kb.io``, ``vraycluster.kb.io``, create and update) refuses, in Kueue's words and
order, when the object is Kueue's (a queue name, or ``manageJobsWithoutQueueName``):

* a RayJob with both a ``clusterSelector`` and a ``rayClusterSpec`` ("a kueue managed job should not use an existing
  cluster", nothing else checked), with neither ("rayClusterSpec is required for Kueue-managed jobs that don't use
  clusterSelector"); one with a ``clusterSelector`` alone is not Kueue's and passes as it is; one that does not
  ``shutdownAfterJobFinishes`` ("a kueue managed job should delete the cluster after finishing");
* in the cluster spec (Kueue's ``common.go`` ``ValidateCreate``): ``enableInTreeAutoscaling`` unless the object is
  elastic (annotated ``kueue.x-k8s.io/elastic-job: "true"`` with ``ElasticJobsViaWorkloadSlices`` on: the annotation
  alone is not, Kueue v0.20's ``workloadslicing.Enabled``), and an elastic one's when it is handed to MultiKueue (``spec.managedBy:
  kueue.x-k8s.io/multikueue``) while ``MultiKueueRayInTreeAutoscaling`` is off (Kueue #16260: "in-tree autoscaling
  is not supported for a MultiKueue-managed elastic RayJob", or RayService; the words are the RayCluster rule's,
  the release note gives none), more than 17 worker groups (18 pod sets with the head), a worker group named
  ``head``, a head template with no container (Kueue #16067, :func:`head_container_errors`: "the head Pod
  template must have at least one container", kueue-es's words) at
  ``<cluster spec>.headGroupSpec.template.spec.containers``;

a RayCluster's own autoscaling rule (:func:`raycluster_create_errors`): an elastic one may autoscale, but each
worker group's template, then the head's, must carry the ``kueue.x-k8s.io/elastic-job`` scheduling gate, which its
mutating webhook gives an elastic RayCluster's templates (:func:`raycluster_defaults`, queued or not); a non-elastic
one's autoscaler is refused in the RayCluster's words, and so is an elastic one's handed to MultiKueue
(``spec.managedBy: kueue.x-k8s.io/multikueue``; Kueue's #13244: the manager owns an elastic RayCluster's worker
replicas on the worker, :mod:`connectors.k8s.multikueue_elastic`), "in-tree autoscaling is not supported for a
MultiKueue-managed elastic RayCluster" (unless ``MultiKueueRayInTreeAutoscaling`` is on);

then the generic job rules (suspended at ``spec.suspend``) and, under ``TopologyAwareScheduling``, each template's
TAS annotations (head, then each worker group, a slice no larger than its pod set) with, between the head's
and the worker groups', the pod-set groups across them (:mod:`connectors.k8s.tas_group_validation`,
#7061 / #7263). On update, the update rules first, then the create rules on the new object; under
``ValidateRayAndSparkJobUpdates`` an update is checked also when only the old object named a queue, so a
running one cannot drop its queue name (nor a suspended one, in a namespace with a ``default`` LocalQueue; a
RayService's too). Registered and failing as the JobSet and MPIJob webhooks: answering every review unchanged
while the integration is off (``failurePolicy: Ignore``), ``Fail`` while it is on.

Under the ``MultiKueue`` gate, a RayJob, RayCluster or RayService whose queue (given or defaulted) is a LocalQueue
whose ClusterQueue has a MultiKueue check, and whose ``spec.managedBy`` is unset or KubeRay's own
(``ray.io/kuberay-operator``), gets ``spec.managedBy: kueue.x-k8s.io/multikueue``, whatever its ancestry: MultiKueue
runs it on a worker (:mod:`connectors.k8s.multikueue`).

A RayService's webhooks (``mrayservice.kb.io``, ``vrayservice.kb.io``; Kueue's ``rayservice_webhook.go``) are the
RayCluster's applied to its ``spec.rayClusterConfig``: suspended there, its cluster rules and TAS annotations
checked and named at ``spec.rayClusterSpec`` (the Go field's name, as Kueue's messages give it), the cluster
rules first, then the generic job rules, then the TAS annotations, an update's own rules before all of them; an elastic
RayService's cluster config templates are given the elastic-job scheduling gate (:func:`rayservice_defaults`).
Under ``RayServiceValidateUpgradeStrategy`` (beta, on; Kueue v0.20's #16094) a Kueue-managed RayService that is not
elastic (the ``ElasticJobsViaWorkloadSlices`` gate and the ``kueue.x-k8s.io/elastic-job: "true"`` annotation) is
refused unless ``spec.upgradeStrategy.type`` is ``None`` (:func:`upgrade_strategy_errors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from connectors.k8s import child_jobs, framework_webhook, job_validation, tas_group_validation
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Kind, Reviewer
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels
from connectors.k8s.raycluster import HEAD, worker_count
from connectors.k8s.resources import RAYCLUSTERS, RAYJOBS, RAYSERVICES, Resource
from connectors.k8s.workload_slices import ELASTIC_JOB_ANNOTATION, ELASTIC_JOB_GATE, gate_template_ops
from events.object_rules import MAX_POD_SETS
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.admissionchecks import MULTIKUEUE_CONTROLLER as MULTIKUEUE_MANAGER

SUSPEND_AT = ("spec", "suspend")
SERVICE_SUSPEND_AT = ("spec", "rayClusterConfig", "suspend")
SERVICE_PATH = "spec.rayClusterSpec"
"""Where Kueue's messages place a RayService's cluster config (its Go field's name)."""
EXISTING_CLUSTER = "a kueue managed job should not use an existing cluster"
CLUSTER_SPEC_REQUIRED = "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"
SHUTDOWN = "a kueue managed job should delete the cluster after finishing"
AUTOSCALING = "a kueue managed job should only use autoscaling when workload slicing is enabled"
CLUSTER_AUTOSCALING = ("a kueue-managed RayCluster can use in-tree autoscaling only as an elastic job: enable the "
                       f'ElasticJobsViaWorkloadSlices feature gate and set the "{ELASTIC_JOB_ANNOTATION}": "true" '
                       "annotation")
"""A RayCluster's own words for the autoscaling rule (Kueue's #13996, in v0.18 on; a RayJob's and a RayService's are
:data:`AUTOSCALING`)."""
ELASTIC_GATE_MISSING = "an elastic job must have the ElasticJobSchedulingGate"
HEAD_CONTAINERS = "the head Pod template must have at least one container"
"""Why a Kueue-run Ray object whose head template has no container is refused (Kueue #16067; kueue-es's words: the
release note states the rule, not the message)."""
MULTIKUEUE_AUTOSCALING = "in-tree autoscaling is not supported for a MultiKueue-managed elastic RayCluster"
"""Why an elastic RayCluster handed to MultiKueue may not autoscale (the manager owns its worker replicas), unless
MultiKueueRayInTreeAutoscaling is on (the worker's autoscaler owns them, :mod:`connectors.k8s.multikueue_ray_autoscaling`)."""


def multikueue_autoscaling(kind: str) -> str:
    """Why an elastic RayJob or RayService handed to MultiKueue may not autoscale while
    MultiKueueRayInTreeAutoscaling is off (Kueue #16260; :data:`MULTIKUEUE_AUTOSCALING`'s words for the kind: the
    release note states the rule, not the message)."""
    return MULTIKUEUE_AUTOSCALING.removesuffix("RayCluster") + kind
NO_UPGRADE = "None"
"""The ``spec.upgradeStrategy.type`` that turns a RayService's zero-downtime upgrades off (KubeRay's others,
``NewCluster`` and ``NewClusterWithIncrementalUpgrade``, and none given, upgrade with a second cluster)."""
UPGRADE_STRATEGY = ("a kueue managed service may use a zero-downtime upgrade only as an elastic job (the "
                    "ElasticJobsViaWorkloadSlices feature gate on and the kueue.x-k8s.io/elastic-job annotation "
                    '"true"); set spec.upgradeStrategy.type to None to turn zero-downtime upgrades off')
"""Why Kueue (``RayServiceValidateUpgradeStrategy``) refuses a non-elastic RayService's zero-downtime upgrade: the
second cluster KubeRay starts would run outside the quota its Workload holds (kueue-es's words: the v0.20 release
notes state the rule, not the message)."""
KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
"""KubeRay's own ``spec.managedBy``: Kueue replaces it on a Ray object with MultiKueue's as it does none."""


class RayWebhooks(FrameworkWebhooks, frozen=True):
    """What the Ray webhooks read of the Kueue Configuration (``enabled``: the kind's integration)."""

    @classmethod
    def of(cls, config: SchedulerConfig, *, clusters: bool) -> RayWebhooks:
        """The RayJob webhooks' settings (``clusters``: the RayCluster webhooks')."""
        return cls.reading(config, config.manages_rayclusters if clusters else config.manages_rayjobs)

    @classmethod
    def for_services(cls, config: SchedulerConfig) -> RayWebhooks:
        """The RayService webhooks' settings."""
        return cls.reading(config, config.manages_rayservices)


# --- the validating webhook -------------------------------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _go_map(value: Mapping[str, Any]) -> str:
    """A ``map[string]string`` as Go prints one in a field error."""
    return "map[string]string{" + ",".join(f'"{k}":"{v}"' for k, v in sorted(value.items())) + "}"


def _managed(obj: Mapping[str, Any], without_queue: bool) -> bool:
    return without_queue or bool(_map(_map(obj.get("metadata")).get("labels")).get(QUEUE_LABEL))


def _elastic(obj: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> bool:
    """Kueue's ``workloadslicing.Enabled``: the gate on and the object annotated elastic."""
    return (gates.enabled(feature_gates, gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
            and _map(_map(obj.get("metadata")).get("annotations")).get(ELASTIC_JOB_ANNOTATION) == "true")


def _worker_groups(cluster_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    groups = cluster_spec.get("workerGroupSpecs")
    return [g if isinstance(g, dict) else {} for g in groups] if isinstance(groups, list) else []


def _handed_to_multikueue(obj: Mapping[str, Any]) -> bool:
    return _map(obj.get("spec")).get("managedBy") == MULTIKUEUE_MANAGER


def _multikueue_autoscaling_refused(obj: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> bool:
    """An elastic object handed to MultiKueue may autoscale only under ``MultiKueueRayInTreeAutoscaling`` (the
    worker's autoscaler then owns its worker replicas); its cluster spec's flag is the caller's to read."""
    return (_elastic(obj, feature_gates) and _handed_to_multikueue(obj)
            and not gates.enabled(feature_gates, gates.MULTIKUEUE_RAY_IN_TREE_AUTOSCALING))


def head_container_errors(cluster_spec: Mapping[str, Any], path: str) -> list[str]:
    """A head template with no container is refused (Kueue #16067: the head pod set it builds has nowhere to count
    the Ray container's resources, the Redis cleanup's or a default submitter's image)."""
    template = _map(_map(cluster_spec.get("headGroupSpec")).get("template"))
    if _map(template.get("spec")).get("containers"):
        return []
    return [job_validation.required(f"{path}.headGroupSpec.template.spec.containers", HEAD_CONTAINERS)]


def cluster_spec_errors(obj: Mapping[str, Any], cluster_spec: Mapping[str, Any], path: str,
                        feature_gates: Mapping[str, bool], *, autoscaling: bool = True) -> list[str]:
    """Kueue's rules for a Kueue-run cluster spec at ``path``: autoscaling only for an elastic object (the
    ``kueue.x-k8s.io/elastic-job: "true"`` annotation under ``ElasticJobsViaWorkloadSlices``: Kueue v0.20's
    ``workloadslicing.Enabled``), and not for an elastic one handed to MultiKueue while
    ``MultiKueueRayInTreeAutoscaling`` is off (Kueue #16260; unless ``autoscaling`` is False: the RayCluster's own
    rules, :func:`raycluster_create_errors`), the worker groups' number and names, a head template with a
    container (:func:`head_container_errors`)."""
    errors: list[str] = []
    if autoscaling and cluster_spec.get("enableInTreeAutoscaling") is True:
        if not _elastic(obj, feature_gates):
            errors.append(job_validation.invalid(f"{path}.enableInTreeAutoscaling", True, AUTOSCALING))
        elif _multikueue_autoscaling_refused(obj, feature_gates):
            errors.append(job_validation.forbidden(f"{path}.enableInTreeAutoscaling",
                                                   multikueue_autoscaling(str(obj.get("kind", "")))))
    groups = _worker_groups(cluster_spec)
    # the head's pod set and one per worker group within Kueue's jobframework.MaxPodSets (18 since v0.19, #12819):
    # at most 17 worker groups, the error counting pod sets (v0.20's raycluster.ValidateCreate)
    if len(groups) + 1 > MAX_POD_SETS:
        errors.append(f"{path}.workerGroupSpecs: Too many: {len(groups) + 1}: must have at most {MAX_POD_SETS} items")
    errors += [job_validation.forbidden(f"{path}.workerGroupSpecs[{i}].groupName", f'"{HEAD}" is reserved for the '
                                        "head group") for i, g in enumerate(groups) if g.get("groupName") == HEAD]
    return errors + head_container_errors(cluster_spec, path)


def _annotations(template: Any) -> dict[str, str]:
    return _map(_map(_map(template).get("metadata")).get("annotations"))


def topology_errors(cluster_spec: Mapping[str, Any], path: str, feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``TopologyAwareScheduling``: the head's template's TAS annotations, the pod-set groups across the
    head and the worker groups (:mod:`connectors.k8s.tas_group_validation`), then each worker group's
    template's TAS annotations (Kueue's ``ValidateTopologyRequest`` order)."""
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    head = _map(cluster_spec.get("headGroupSpec")).get("template")
    at = f"{path}.headGroupSpec.template.metadata.annotations"
    members = [tas_group_validation.Member(1, _annotations(head), at)]
    for i, group in enumerate(_worker_groups(cluster_spec)):
        count = worker_count(group) if isinstance(group.get("replicas", 1), int | None) else None
        members.append(tas_group_validation.Member(count, _annotations(group.get("template")),
                                                   f"{path}.workerGroupSpecs[{i}].template"
                                                   ".metadata.annotations"))
    errors = job_validation.topology_errors(members[0].annotations, 1, gate, path=members[0].path)
    errors += tas_group_validation.errors(members, gate)
    for member in members[1:]:
        errors += job_validation.topology_errors(member.annotations, member.count, gate, path=member.path)
    return errors


def _as_job(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as the generic job rules read a job: its metadata, suspended at ``spec.suspend``."""
    return job_validation.as_generic_job(obj, framework_webhook.suspended(obj, SUSPEND_AT))


def rayjob_create_errors(job: Mapping[str, Any], feature_gates: Mapping[str, bool], without_queue: bool = False, *,
                         gate_form: bool = True) -> list[str]:
    """What Kueue refuses in a RayJob being created, in its order (module docstring). ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    errors: list[str] = []
    spec = _map(job.get("spec"))
    cluster_spec = spec.get("rayClusterSpec")
    if _managed(job, without_queue):
        selector = _map(spec.get("clusterSelector"))
        if selector and isinstance(cluster_spec, dict):
            return [f"spec.clusterSelector: Invalid value: {_go_map(selector)}: {EXISTING_CLUSTER}"]
        if selector:
            return []
        if not isinstance(cluster_spec, dict):
            return [f"spec.rayClusterSpec: Required value: {CLUSTER_SPEC_REQUIRED}"]
        if spec.get("shutdownAfterJobFinishes") is not True:
            errors.append(job_validation.invalid("spec.shutdownAfterJobFinishes", False, SHUTDOWN))
        errors += cluster_spec_errors(job, cluster_spec, "spec.rayClusterSpec", feature_gates)
    errors += job_validation.generic_create_errors(_as_job(job), feature_gates, gate_form=gate_form)
    if isinstance(cluster_spec, dict):
        errors += topology_errors(cluster_spec, "spec.rayClusterSpec", feature_gates)
    return errors


def _go_gates(gates_value: Any) -> str:
    """A template's ``schedulingGates`` as Go prints the ``[]PodSchedulingGate`` in a field error (``%#v``)."""
    if gates_value is None:
        return "[]v1.PodSchedulingGate(nil)"
    items = gates_value if isinstance(gates_value, list) else []
    shown = ", ".join(f"v1.PodSchedulingGate{{Name:{job_validation.shown(str(_map(g).get('name', '')))}}}"
                      for g in items)
    return f"[]v1.PodSchedulingGate{{{shown}}}"


def _template_gates(template: Any) -> Any:
    return _map(_map(template).get("spec")).get("schedulingGates")


def elastic_gate_errors(cluster_spec: Mapping[str, Any]) -> list[str]:
    """An elastic RayCluster's templates each carry the elastic-job scheduling gate (the mutating webhook gives it
    them): each worker group's, then the head's."""
    gate = {"name": ELASTIC_JOB_GATE}
    where = [(f"spec.workerGroupSpecs[{i}].template.spec.schedulingGates", g.get("template"))
             for i, g in enumerate(_worker_groups(cluster_spec))]
    where.append(("spec.headGroupSpec.template.spec.schedulingGates", _map(cluster_spec.get("headGroupSpec")).get(
        "template")))
    errors: list[str] = []
    for path, template in where:
        present = _template_gates(template)
        if not (isinstance(present, list) and gate in present):
            errors.append(f"{path}: Invalid value: {_go_gates(present)}: {ELASTIC_GATE_MISSING}")
    return errors


def raycluster_create_errors(cluster: Mapping[str, Any], feature_gates: Mapping[str, bool],
                             without_queue: bool = False, *, gate_form: bool = True) -> list[str]:
    """What Kueue refuses in a RayCluster being created, in its order (module docstring). ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    spec = _map(cluster.get("spec"))
    errors: list[str] = []
    if _managed(cluster, without_queue):
        if _elastic(cluster, feature_gates):
            errors += elastic_gate_errors(spec)
            if spec.get("enableInTreeAutoscaling") is True and _multikueue_autoscaling_refused(cluster, feature_gates):
                errors.append(job_validation.forbidden("spec.enableInTreeAutoscaling", MULTIKUEUE_AUTOSCALING))
        elif spec.get("enableInTreeAutoscaling") is True:
            errors.append(job_validation.invalid("spec.enableInTreeAutoscaling", True, CLUSTER_AUTOSCALING))
        errors += cluster_spec_errors(cluster, spec, "spec", feature_gates, autoscaling=False)
    return (errors + job_validation.generic_create_errors(_as_job(cluster), feature_gates, gate_form=gate_form)
            + topology_errors(spec, "spec", feature_gates))


def _gate_cluster_spec(cluster_spec: Mapping[str, Any], pointer: str) -> list[dict[str, Any]]:
    """The elastic-job scheduling gate on the head's and each worker group's template of the cluster spec at JSON
    pointer ``pointer``."""
    ops = gate_template_ops(_map(cluster_spec.get("headGroupSpec")).get("template"), f"{pointer}/headGroupSpec/template")
    for i, group in enumerate(_worker_groups(cluster_spec)):
        ops += gate_template_ops(group.get("template"), f"{pointer}/workerGroupSpecs/{i}/template")
    return ops


def raycluster_defaults(cluster: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[dict[str, Any]]:
    """An elastic RayCluster's head and worker group templates get the elastic-job scheduling gate (unless there),
    whether Kueue manages it or not: its pods wait for the slice that counts them."""
    return _gate_cluster_spec(_map(cluster.get("spec")), "/spec") if _elastic(cluster, feature_gates) else []


def rayservice_defaults(service: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[dict[str, Any]]:
    """An elastic RayService's cluster config templates get the elastic-job scheduling gate, as a RayCluster's
    (Kueue's RayService ``Default``); the RayCluster KubeRay makes from it, and its pods, carry it."""
    if not _elastic(service, feature_gates):
        return []
    config = _map(_map(service.get("spec")).get("rayClusterConfig"))
    return _gate_cluster_spec(config, "/spec/rayClusterConfig") if config else []


def _service_as_job(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A RayService as the generic job rules read a job: suspended at its cluster config's flag."""
    return job_validation.as_generic_job(obj, framework_webhook.suspended(obj, SERVICE_SUSPEND_AT))


def upgrade_strategy_errors(service: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``RayServiceValidateUpgradeStrategy``: a RayService that is not elastic must turn zero-downtime upgrades
    off (``spec.upgradeStrategy.type: None``); unset, KubeRay upgrades it with a second cluster."""
    if not gates.enabled(feature_gates, gates.RAY_SERVICE_VALIDATE_UPGRADE_STRATEGY) or _elastic(service,
                                                                                                  feature_gates):
        return []
    kind = _map(_map(service.get("spec")).get("upgradeStrategy")).get("type")
    return [] if kind == NO_UPGRADE else [job_validation.forbidden("spec.upgradeStrategy.type", UPGRADE_STRATEGY)]


def rayservice_create_errors(service: Mapping[str, Any], feature_gates: Mapping[str, bool],
                             without_queue: bool = False, *, gate_form: bool = True) -> list[str]:
    """What Kueue refuses in a RayService being created: a Kueue-managed one's cluster rules and upgrade strategy,
    then the generic job rules and the TAS annotations (module docstring). ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    config = _map(_map(service.get("spec")).get("rayClusterConfig"))
    errors = (cluster_spec_errors(service, config, SERVICE_PATH, feature_gates)
              + upgrade_strategy_errors(service, feature_gates) if _managed(service, without_queue) else [])
    return (errors + job_validation.generic_create_errors(_service_as_job(service), feature_gates, gate_form=gate_form)
            + topology_errors(config, SERVICE_PATH, feature_gates))


def _checked_on_update(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                       without_queue: bool) -> bool:
    """Kueue checks an update of a Ray object that is Kueue's, or under ``ValidateRayAndSparkJobUpdates`` was."""
    return _managed(new, without_queue) or (gates.enabled(feature_gates, gates.VALIDATE_RAY_AND_SPARK_JOB_UPDATES)
                                            and _managed(old, False))


def _service_update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                           default_queue: bool = False, without_queue: bool = False) -> list[str]:
    """As :func:`_update_errors` (``ValidateRayAndSparkJobUpdates`` included), the RayService suspended at its
    cluster config."""
    if not _checked_on_update(old, new, feature_gates, without_queue):
        return []
    return (job_validation.generic_update_errors(_service_as_job(old), _service_as_job(new), feature_gates,
                                                 default_queue=default_queue)
            + rayservice_create_errors(new, feature_gates, without_queue, gate_form=False))


def _update_errors(create: Any, old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                   default_queue: bool = False, without_queue: bool = False) -> list[str]:
    """Kueue checks an update only of an object that is Kueue's (or, under ``ValidateRayAndSparkJobUpdates``, was
    before it: a queue name dropped from a running object would leave its pods running outside any quota): the
    update rules, then the create rules on ``new``."""
    if not _checked_on_update(old, new, feature_gates, without_queue):
        return []
    return (job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                 default_queue=default_queue)
            + create(new, feature_gates, without_queue, gate_form=False))


def _kind(resource: Resource, create: Any, without_queue: bool, kind_defaults: Any = None) -> Kind:
    singular = resource.kind.lower()
    return Kind(resource, f"/mutate-ray-io-v1-{singular}", f"m{singular}.kb.io", f"/validate-ray-io-v1-{singular}",
                f"v{singular}.kb.io", SUSPEND_AT, lambda new, fg: create(new, fg, without_queue),
                lambda old, new, fg, default: _update_errors(create, old, new, fg, default, without_queue),
                kind_defaults=kind_defaults, own_controller=KUBERAY_CONTROLLER)


def rayjob_kind(without_queue: bool = False) -> Kind:
    """The RayJob's :class:`~connectors.k8s.framework_webhook.Kind` (``without_queue``: ``manageJobsWithoutQueueName``,
    under which every RayJob is checked)."""
    return _kind(RAYJOBS, rayjob_create_errors, without_queue)


def raycluster_kind(without_queue: bool = False) -> Kind:
    """The RayCluster's :class:`~connectors.k8s.framework_webhook.Kind` (see :func:`rayjob_kind`)."""
    return _kind(RAYCLUSTERS, raycluster_create_errors, without_queue, raycluster_defaults)


def rayservice_kind(without_queue: bool = False) -> Kind:
    """The RayService's :class:`~connectors.k8s.framework_webhook.Kind` (see :func:`rayjob_kind`)."""
    return Kind(RAYSERVICES, "/mutate-ray-io-v1-rayservice", "mrayservice.kb.io", "/validate-ray-io-v1-rayservice",
                "vrayservice.kb.io", SERVICE_SUSPEND_AT,
                lambda new, fg: rayservice_create_errors(new, fg, without_queue),
                lambda old, new, fg, default: _service_update_errors(old, new, fg, default, without_queue),
                kind_defaults=rayservice_defaults, own_controller=KUBERAY_CONTROLLER)


RAYJOB_KIND, RAYCLUSTER_KIND = rayjob_kind(), raycluster_kind()
RAYSERVICE_KIND = rayservice_kind()
"""What registering the webhooks reads (paths, names, resource)."""
PATHS = (RAYJOB_KIND.mutating_path, RAYJOB_KIND.validating_path, RAYCLUSTER_KIND.mutating_path,
         RAYCLUSTER_KIND.validating_path)
SERVICE_PATHS = (RAYSERVICE_KIND.mutating_path, RAYSERVICE_KIND.validating_path)


# --- serving ----------------------------------------------------------------------------------------------------


def reviewers(jobs: RayWebhooks, clusters: RayWebhooks, namespace_labels: NamespaceLabels,
              has_default_queue: HasDefaultQueue, has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it, for both kinds: each kind's pair, or, its integration off, reviews that
    allow every object as it is (``managed_ancestry``, ``multikueue``:
    :func:`connectors.k8s.framework_webhook.reviewers`)."""
    return {**framework_webhook.reviewers(rayjob_kind(jobs.without_queue), jobs, namespace_labels, has_default_queue,
                                          has_default_priority_class, managed_ancestry, multikueue),
            **framework_webhook.reviewers(raycluster_kind(clusters.without_queue), clusters, namespace_labels,
                                          has_default_queue, has_default_priority_class, managed_ancestry,
                                          multikueue)}


def service_reviewers(services: RayWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
                      has_default_priority_class: HasDefaultPriorityClass | None = None,
                      managed_ancestry: child_jobs.ManagedAncestry | None = None,
                      multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it for RayServices (see :func:`reviewers`)."""
    return framework_webhook.reviewers(rayservice_kind(services.without_queue), services, namespace_labels,
                                       has_default_queue, has_default_priority_class, managed_ancestry, multikueue)
