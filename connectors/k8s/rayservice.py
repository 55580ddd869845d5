"""What Kueue's RayService integration (``ray.io/rayservice``) decides about one ray.io/v1 RayService, as pure data.

A RayService is a long-running Ray Serve deployment: KubeRay makes (and, on an upgrade, remakes) a RayCluster from
its ``spec.rayClusterConfig``. Kueue runs it through its generic job reconciler (``pkg/controller/jobs/rayservice``),
its pieces being those of a RayCluster (:mod:`connectors.k8s.raycluster`) applied to that cluster config;
:mod:`connectors.k8s.ray_integration` does the I/O around them:

* **its Workload** (:func:`workload_for`): ``rayservice-<name>-<hash>``, the pod sets of ``spec.rayClusterConfig``
  (``head``, then each worker group, as a RayCluster's), and the rest as for any job;
* **suspended** is ``spec.rayClusterConfig.suspend`` (absent: running); **starting** merges each pod set's
  admission into the head's and each worker group's template and sets that flag ``false``; **stopping** sets it
  ``true`` with the templates restored; one merge patch each, conditioned on the resourceVersion read. Kueue's
  newest RayService integration and its MultiKueue adapter still read and write only that field: a top-level
  ``spec.suspend`` exists only in a proof of concept (Kueue issue 11102, on a KubeRay change not merged), so it is
  neither read nor written here;
* a RayService **never finishes** (a service has no end; Kueue's ``Finished`` says "Running", not finished);
  **active** and **pods ready**: its ``Ready`` condition is ``True``;
* **skipped** (:func:`skipped`, Kueue's ``Skip``) under ``DeferRayServiceFinalizationForRedisCleanup``: a RayService
  being deleted whose cluster has GCS fault tolerance (``gcsFaultToleranceOptions`` written, or the
  ``ray.io/ft-enabled: "true"`` annotation) is left alone, so its Workload stays admitted until it is gone and
  KubeRay's Redis cleanup Job (a child, through its RayCluster) can run; the gate off, its Workload likewise
  waits for the RayService to be gone, as any deleting job's does (Kueue's #12849).

The RayClusters KubeRay makes for a queued RayService are controlled by it: they are its children, with no Workload
of their own (:meth:`JobReconciler._as_child <connectors.k8s.jobframework.JobReconciler._as_child>`). Kueue counts
no reclaimable pods for it. Not modelled, as for RayClusters: the worker counts read from the live RayCluster under
``ElasticJobsViaWorkloadSlices`` with in-tree autoscaling, the history-server collector sidecar counted into the
head pod set (the autoscaler and a fault-tolerant cluster's Redis cleanup are counted, as a RayCluster's:
:mod:`connectors.k8s.ray_head_resources`). MultiKueue runs a RayService on a worker
(:mod:`connectors.k8s.multikueue`, its copy suspended here at ``spec.rayClusterConfig.suspend``).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, workload_names
from connectors.k8s import raycluster as rc
from connectors.k8s.jobset import BadPodSets
from connectors.k8s.raycluster import merge_diff
from connectors.k8s.resources import RAYSERVICES
from events import objects as o
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState

__all__ = ["BadPodSets"]

KIND = "RayService"
CLUSTER_CONFIG = "rayClusterConfig"
"""Where a RayService keeps its cluster spec (KubeRay's JSON name for it)."""
READY = "Ready"
"""KubeRay's RayService condition Kueue reads for active and pods ready."""
FT_ANNOTATION = "ray.io/ft-enabled"
"""KubeRay's annotation turning GCS fault tolerance on."""


class ServiceClusterSpec(rc.RayClusterSpec):
    """A RayService's cluster config: a RayCluster's spec (its GCS fault-tolerance options among what it reads)."""


class RayServiceSpec(o.View):
    ray_cluster_config: ServiceClusterSpec = ServiceClusterSpec()

    @property
    def suspend(self) -> bool:
        """Kueue's ``IsSuspended``: the cluster config's ``suspend`` set and true."""
        return bool(self.ray_cluster_config.suspend)


class ActiveServiceStatus(o.View):
    ray_cluster_name: str = ""


class RayServiceStatus(o.View):
    conditions: list[o.Condition] = []
    active_service_status: ActiveServiceStatus = ActiveServiceStatus()


class RayService(o.NamespacedView):
    """What the integration reads of a RayService; the Workload's templates are built from it as stored."""

    spec: RayServiceSpec = RayServiceSpec()
    status: RayServiceStatus = RayServiceStatus()


NAMES = workload_names.KindNames(RAYSERVICES)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


def gcs_fault_tolerant(service: RayService) -> bool:
    """KubeRay's ``IsGCSFaultToleranceEnabled``: the ``ray.io/ft-enabled`` annotation ``true`` (any case), or
    ``gcsFaultToleranceOptions`` written."""
    flag = service.metadata.annotations.get(FT_ANNOTATION, "")
    return flag.lower() == "true" or service.spec.ray_cluster_config.gcs_fault_tolerance_options is not None


def skipped(service: RayService, defer_for_redis_cleanup: bool) -> bool:
    """Kueue's ``Skip``: under ``DeferRayServiceFinalizationForRedisCleanup`` (``defer_for_redis_cleanup``), a
    RayService being deleted with GCS fault tolerance is not reconciled at all (module docstring)."""
    return defer_for_redis_cleanup and bool(service.metadata.deletion_timestamp) and gcs_fault_tolerant(service)


# --- the Workload ---------------------------------------------------------------------------------------------


def _cluster_config(raw_service: dict[str, Any]) -> dict[str, Any]:
    config = (raw_service.get("spec") or {}).get(CLUSTER_CONFIG)
    return config if isinstance(config, dict) else {}


def pod_sets(raw_service: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the RayService as stored: its cluster config's, as a RayCluster's (``tas``: the
    recorded Configuration's ``TopologyAwareScheduling`` gate)."""
    return rc.cluster_pod_sets(_cluster_config(raw_service), tas=tas, annotations=rc.annotations_of(raw_service))


def job_pod_sets(service: RayService) -> list[o.PodSet] | None:
    """The pod sets the RayService makes now, as its Workload was built
    (:func:`connectors.k8s.raycluster.as_pod_sets`)."""
    return rc.as_pod_sets(lambda: pod_sets(msgspec.to_builtins(service), tas=False))


def workload_for(state: ClusterState, keys: KeysToCopy, raw_service: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_service`` (as stored) under ``name``, copying ``keys``; raises as
    :func:`connectors.k8s.raycluster.workload_for` does."""
    meta = raw_service["metadata"]
    return rc.workload(state, keys, raw_service, name, pod_sets(raw_service, tas=state.tas_enabled),
                       controller_ref(meta["name"], meta["uid"]))


def priority_class(service: RayService) -> str | None:
    """The PriorityClass the RayService's pods name: the head's, else the first worker group's that names one."""
    spec = service.spec.ray_cluster_config
    templates = [spec.head_group_spec.template, *(g.template for g in spec.worker_group_specs)]
    return next((t.spec.priority_class_name for t in templates if t.spec.priority_class_name), None)


# --- starting and stopping ------------------------------------------------------------------------------------


def start_infos(state: ClusterState, wl: Any, service: RayService, slice_name: str | None = None
                ) -> list[podsetinfo.PodSetInfo]:
    """What starting adds to each template, head first (``slice_name``: an elastic slice's chain, which the pods
    carry). Raises :class:`BadPodSets` when the admission lacks one (Kueue's ``BadPodSetsInfoLenError``),
    :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
    return rc.infos_for(state, wl, rc.pod_set_names(service.spec.ray_cluster_config), slice_name)


def counts(service: RayService, live: rc.RayCluster | None) -> dict[str, int] | None:
    """An elastic RayService's pod counts: its cluster config's as ``live``, its active RayCluster, has them under
    the autoscaler (:func:`connectors.k8s.raycluster.autoscaled_counts`)."""
    return rc.autoscaled_counts(service.spec.ray_cluster_config, live)


def cluster_name(service: RayService) -> str:
    """The RayCluster the RayService serves from (``status.activeServiceStatus.rayClusterName``; empty: none)."""
    return service.status.active_service_status.ray_cluster_name


def _patch(raw_service: dict[str, Any], cluster_config: dict[str, Any]) -> dict[str, Any]:
    before = {CLUSTER_CONFIG: _cluster_config(raw_service)}
    return {"metadata": {"resourceVersion": raw_service["metadata"]["resourceVersion"]},
            "spec": merge_diff(before, {CLUSTER_CONFIG: cluster_config})}


def start_patch(raw_service: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the RayService: its cluster config's templates with their infos merged in, its
    ``suspend: false``. Raises :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
    config = rc.start_templates(_cluster_config(raw_service), infos)
    config["suspend"] = False
    return _patch(raw_service, config)


def stop_patch(raw_service: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the RayService's cluster with its templates restored from ``saved``."""
    config = rc.restored_templates(copy.deepcopy(_cluster_config(raw_service)), saved)
    config["suspend"] = True
    return _patch(raw_service, config)


# --- what its status says ---------------------------------------------------------------------------------------


def _ready(service: RayService) -> bool:
    return any(c.type == READY and c.status == "True" for c in service.status.conditions)


def finished(service: RayService) -> tuple[str, str] | None:
    """Never: a RayService runs until deleted."""
    return None


def is_active(service: RayService) -> bool:
    """Kueue's ``IsActive``: the ``Ready`` condition is ``True``."""
    return _ready(service)


def pods_ready(service: RayService) -> bool:
    """Kueue's ``PodsReady``: the ``Ready`` condition is ``True``."""
    return _ready(service)
