"""What Kueue's RayJob integration (``ray.io/rayjob``) decides about one ray.io/v1 RayJob, as pure data.

Kueue runs a RayJob through its generic job reconciler; these are the RayJob's own pieces (Kueue's
``pkg/controller/jobs/rayjob``), over the cluster spec pieces it shares with RayClusters
(:mod:`connectors.k8s.raycluster`); :mod:`connectors.k8s.ray_integration` does the I/O around them:

* **skipped**: a RayJob with a ``clusterSelector`` runs on a cluster that exists already: Kueue leaves it alone
  (:func:`skipped`, its ``Skip``);
* **its Workload** (:func:`workload_for`): ``rayjob-<name>-<hash>``, the pod sets of ``spec.rayClusterSpec``
  (``head``, then each worker group) and, when ``submissionMode`` is ``K8sJobMode`` (KubeRay's default, which its
  CRD writes), a last ``submitter`` pod set of one pod: ``spec.submitterPodTemplate``, or KubeRay's default
  submitter template (one ``ray-job-submitter`` container with the head's image, requesting 500m CPU and 200Mi,
  limited to 1 CPU and 1Gi, ``restartPolicy: Never``);
* **suspended** is ``spec.suspend``; **starting** merges the admission into the head's and each worker group's
  template and, in ``K8sJobMode``, the submitter's (KubeRay's default one written when the RayJob has none, as
  Kueue since #12644) and sets ``suspend: false``; **stopping** sets ``suspend: true``
  with the templates restored; one merge patch each, conditioned on the resourceVersion read;
* **finished** (:func:`finished`): ``status.jobDeploymentStatus`` ``Complete`` or ``Failed``, or ``ValidationFailed``
  while ``status.rayClusterName`` is empty (KubeRay refused the spec before making a cluster: left unfinished, its
  Workload would keep its quota for ever — Kueue v0.20) — ``Succeeded`` when ``status.jobStatus`` is
  ``SUCCEEDED``, else ``Failed`` — with ``status.message``;
* **active**: a ``jobDeploymentStatus`` other than ``Suspended`` and KubeRay's ``New``, which is the empty status
  (none yet is not active, as in Kueue: a RayJob KubeRay leaves alone — one handed to MultiKueue — never gets
  one); **pods ready**: ``status.rayClusterStatus.state`` is ``ready``.

The RayCluster KubeRay makes for a queued RayJob is controlled by it: with the RayCluster integration on it gets no
Workload of its own (:mod:`connectors.k8s.ray_integration`), as the submitter Job gets none
(:mod:`connectors.k8s.child_jobs`). An elastic RayJob's workload slices follow :func:`counts`: with its autoscaler on,
its worker groups counted by the RayCluster it runs on (:func:`cluster_name`). In ``SidecarMode`` the submitter
container KubeRay runs in the head pod is counted on the ``head`` pod set
(:func:`connectors.k8s.ray_head_resources.account_sidecar_submitter`).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from connectors.k8s import podsetinfo, ray_head_resources, workload_names
from connectors.k8s import raycluster as rc
from connectors.k8s.jobset import BadPodSets, recorded_info, write_template
from connectors.k8s.raycluster import merge_diff
from connectors.k8s.resources import RAYJOBS
from events import objects as o
from kueue_es.scheduler.config import KeysToCopy
from projections.cluster import ClusterState

__all__ = ["BadPodSets"]

KIND = "RayJob"
SUBMITTER = "submitter"
K8S_JOB_MODE = "K8sJobMode"
"""The submission mode in which KubeRay runs the submitter as a Job of its own: Kueue then counts its pod."""
COMPLETE, FAILED, SUSPENDED, VALIDATION_FAILED = "Complete", "Failed", "Suspended", "ValidationFailed"
"""KubeRay's job deployment statuses Kueue reads."""
NEW = ""
"""KubeRay's ``JobDeploymentStatusNew``: the empty deployment status of a RayJob it has not reconciled yet."""
SUCCEEDED = "SUCCEEDED"


class RayClusterStatus(o.View):
    state: str = ""


class RayJobStatus(o.View):
    job_deployment_status: str = ""
    job_status: str = ""
    message: str = ""
    ray_cluster_name: str = ""
    ray_cluster_status: RayClusterStatus = RayClusterStatus()


class RayJobSpec(o.View):
    suspend: bool = False
    shutdown_after_job_finishes: bool = False
    cluster_selector: dict[str, str] = {}
    submission_mode: str = ""
    submitter_pod_template: o.PodTemplateSpec | None = None
    ray_cluster_spec: rc.RayClusterSpec | None = None
    managed_by: str | None = None


class RayJob(o.NamespacedView):
    """What the integration reads of a RayJob; the Workload's templates are built from it as stored."""

    spec: RayJobSpec = RayJobSpec()
    status: RayJobStatus = RayJobStatus()


NAMES = workload_names.KindNames(RAYJOBS)
workload_name, controller_ref, owner_of = NAMES.workload_name, NAMES.controller_ref, NAMES.owner_of


def skipped(job: RayJob) -> bool:
    """Kueue's ``Skip``: the RayJob names an existing cluster (``clusterSelector``), so it is not Kueue's."""
    return bool(job.spec.cluster_selector)


# --- the Workload ---------------------------------------------------------------------------------------------


def _spec(raw_job: dict[str, Any]) -> dict[str, Any]:
    return raw_job.get("spec") or {}


def _submits_by_job(spec: dict[str, Any]) -> bool:
    return spec.get("submissionMode") == K8S_JOB_MODE


def default_submitter_template(cluster_spec: dict[str, Any]) -> dict[str, Any]:
    """KubeRay's submitter pod template when the RayJob writes none (module docstring)."""
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = head.get("containers") or [{}]
    return {"spec": {"containers": [{
        "name": "ray-job-submitter", "image": containers[0].get("image", ""),
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}],
        "restartPolicy": "Never"}}


def pod_sets(raw_job: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The Workload's pod sets for the RayJob as stored (``tas``: the recorded Configuration's
    ``TopologyAwareScheduling`` gate)."""
    spec = _spec(raw_job)
    cluster_spec = spec.get("rayClusterSpec") or {}
    out = rc.cluster_pod_sets(cluster_spec, tas=tas, annotations=rc.annotations_of(raw_job))
    ray_head_resources.account_sidecar_submitter(out[0]["template"], spec.get("submissionMode"))
    if _submits_by_job(spec):
        template = spec.get("submitterPodTemplate") or default_submitter_template(cluster_spec)
        out.append(rc.pod_set(SUBMITTER, 1, template, tas=tas))
    return out


def job_pod_sets(job: RayJob) -> list[o.PodSet] | None:
    """The pod sets the RayJob makes now, as its Workload was built
    (:func:`connectors.k8s.raycluster.as_pod_sets`)."""
    return rc.as_pod_sets(lambda: pod_sets(msgspec.to_builtins(job), tas=False))


def workload_for(state: ClusterState, keys: KeysToCopy, raw_job: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload to create for ``raw_job`` (as stored) under ``name``, copying ``keys``; raises as
    :func:`connectors.k8s.raycluster.workload_for` does."""
    meta = raw_job["metadata"]
    return rc.workload(state, keys, raw_job, name, pod_sets(raw_job, tas=state.tas_enabled),
                       controller_ref(meta["name"], meta["uid"]))


def priority_class(job: RayJob) -> str | None:
    """The PriorityClass the RayJob's pods name: the first of head, worker groups and submitter that names one."""
    spec = job.spec.ray_cluster_spec or rc.RayClusterSpec()
    templates = [spec.head_group_spec.template, *(g.template for g in spec.worker_group_specs)]
    if job.spec.submission_mode == K8S_JOB_MODE and job.spec.submitter_pod_template is not None:
        templates.append(job.spec.submitter_pod_template)
    return next((t.spec.priority_class_name for t in templates if t.spec.priority_class_name), None)


# --- starting and stopping ------------------------------------------------------------------------------------


def start_infos(state: ClusterState, wl: Any, job: RayJob, slice_name: str | None = None
                ) -> list[podsetinfo.PodSetInfo]:
    """What starting adds to each template: head, worker groups, then the submitter's in ``K8sJobMode``
    (``slice_name``: an elastic slice's chain, which the pods carry). Raises :class:`BadPodSets`,
    :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
    names = rc.pod_set_names(job.spec.ray_cluster_spec or rc.RayClusterSpec())
    if job.spec.submission_mode == K8S_JOB_MODE:
        names.append(SUBMITTER)
    return rc.infos_for(state, wl, names, slice_name)


# --- an elastic RayJob ------------------------------------------------------------------------------------------


def counts(job: RayJob, live: rc.RayCluster | None) -> dict[str, int] | None:
    """The RayJob's pod counts by pod set, as its workload slices are compared with it: its cluster spec's as
    ``live``, the RayCluster it runs on, has them under the autoscaler
    (:func:`connectors.k8s.raycluster.autoscaled_counts`), and the submitter's one in ``K8sJobMode``."""
    out = rc.autoscaled_counts(job.spec.ray_cluster_spec or rc.RayClusterSpec(), live)
    if out is not None and job.spec.submission_mode == K8S_JOB_MODE:
        out[SUBMITTER] = 1
    return out


def cluster_name(job: RayJob) -> str:
    """The RayCluster KubeRay made for the RayJob (``status.rayClusterName``; empty: none yet)."""
    return job.status.ray_cluster_name


def _patch(raw_job: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": raw_job["metadata"]["resourceVersion"]},
            "spec": merge_diff(_spec(raw_job), spec)}


def start_patch(raw_job: dict[str, Any], infos: list[podsetinfo.PodSetInfo]) -> dict[str, Any]:
    """The merge patch that starts the RayJob: its cluster's templates and, in ``K8sJobMode``, its submitter's
    with their infos merged in, ``suspend: false``. A RayJob that writes no submitter template is given KubeRay's
    default one (:func:`default_submitter_template`) with the admission in it, as Kueue does since #12644: KubeRay
    would otherwise run the submitter Job without the admission's node selector and tolerations. Raises
    :class:`~connectors.k8s.podsetinfo.MergeConflict`."""
    spec = copy.deepcopy(_spec(raw_job))
    cluster_spec = spec.get("rayClusterSpec") or {}
    n_cluster = 1 + len(cluster_spec.get("workerGroupSpecs") or [])
    submitter = spec.get("submitterPodTemplate")
    if _submits_by_job(spec) and len(infos) > n_cluster:
        if not isinstance(submitter, dict):
            submitter = spec["submitterPodTemplate"] = default_submitter_template(cluster_spec)
        view = msgspec.convert(submitter, o.PodTemplateSpec)
        write_template(submitter, podsetinfo.onto_template(view, infos[n_cluster]))
    spec["rayClusterSpec"] = rc.start_templates(cluster_spec, infos[:n_cluster])
    spec["suspend"] = False
    return _patch(raw_job, spec)


def stop_patch(raw_job: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
    """The merge patch that suspends the RayJob with its templates restored from ``saved`` by position, the
    cluster's first, then, in ``K8sJobMode``, the submitter's from the last; pod sets numbering otherwise
    restore nothing (Kueue's ``RestorePodSetsInfo``, :func:`connectors.k8s.raycluster.restored_templates`)."""
    spec = copy.deepcopy(_spec(raw_job))
    cluster_spec = spec.get("rayClusterSpec") or {}
    n_cluster = rc.cluster_pod_set_count(cluster_spec)
    if len(saved) == n_cluster + (1 if _submits_by_job(spec) else 0):
        spec["rayClusterSpec"] = rc.restored_templates(cluster_spec, saved[:n_cluster])
        submitter = spec.get("submitterPodTemplate")
        if _submits_by_job(spec) and isinstance(submitter, dict):
            write_template(submitter, recorded_info(saved[-1]))
    spec["suspend"] = True
    return _patch(raw_job, spec)


# --- what its status says ---------------------------------------------------------------------------------------


def finished(job: RayJob) -> tuple[str, str] | None:
    """``(reason, message)`` once its deployment is ``Complete``, ``Failed``, or ``ValidationFailed`` with no
    cluster made (module docstring); None before."""
    deployment = job.status.job_deployment_status
    rejected = deployment == VALIDATION_FAILED and not job.status.ray_cluster_name
    if deployment not in (COMPLETE, FAILED) and not rejected:
        return None
    return ("Succeeded" if job.status.job_status == SUCCEEDED else "Failed"), job.status.message


def is_active(job: RayJob) -> bool:
    """Kueue's ``IsActive``: a deployment status other than ``Suspended`` and ``New``."""
    return job.status.job_deployment_status not in (SUSPENDED, NEW)


def pods_ready(job: RayJob) -> bool:
    """Kueue's ``PodsReady``: its cluster's state is ``ready``."""
    return job.status.ray_cluster_status.state == rc.READY
