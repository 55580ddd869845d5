"""Every integration's Workload body is finished in one place (:mod:`connectors.k8s.workload_body`), as Kueue
finishes every job's pod sets where it builds them (``JobPodSets`` -> ``SanitizePodSets``, #7425): whatever kind
builds it, a container's env variable given twice is named once, at its first place with its last value.

Each case goes through the entry point an integration's create and rewrite call (a job kind's reconciler's
``workload_for``; the Pod, pod group and LeaderWorkerSet builders), so a builder of its own that skips the shared
step fails here; and every job kind the connector runs must have a case."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from runpolicyhelp import replica
from test_appwrapper import batch_job, raw_aw
from test_jobset import raw_jobset, replicated
from test_kubeflow import raw_job as raw_training_job
from test_lws import lws
from test_mpijob import raw_mpijob
from test_ray import group as ray_group
from test_ray import raw_cluster
from test_ray import raw_job as raw_rayjob
from test_rayservice import group as service_group
from test_rayservice import raw_service
from test_sparkapplication import raw_app
from test_trainjob import RUNTIME
from test_trainjob import raw_job as raw_trainjob

import connectors.k8s.connector  # noqa: F401  (every integration the connector runs, registered)
from connectors.k8s import kubeflow as kf
from connectors.k8s import leaderworkerset as lw
from connectors.k8s import pod_group, pod_sync
from connectors.k8s import trainjob as tj
from connectors.k8s.jobframework import JobReconciler
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from events.log import MemoryLog
from kueue_es.scheduler.config import NO_KEYS
from projections.cluster import ClusterState

DUPLICATED = [{"name": "A", "value": "1"}, {"name": "B", "value": "b"}, {"name": "A", "value": "2"}]
FOLDED = [{"name": "A", "value": "2"}, {"name": "B", "value": "b"}]
Q = "kueue.x-k8s.io/queue-name"


def duplicated_env(raw: Any) -> Any:
    """``raw`` with every container and init container of every pod template in it naming ``A`` twice."""
    out = copy.deepcopy(raw)
    for node in _dicts(out):
        for key in ("containers", "initContainers", "sidecars"):  # sidecars: a SparkApplication role's
            for container in node.get(key) if isinstance(node.get(key), list) else []:
                container["env"] = copy.deepcopy(DUPLICATED)
    return out


def _dicts(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in list(node.values()):
            yield from _dicts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _dicts(value)


def env_lists(body: dict[str, Any]) -> list[Any]:
    """Every container's env in the Workload's pod templates (containers and init containers) that has one (a
    SparkApplication's main containers are Kueue's making, with none)."""
    out = []
    for ps in body["spec"]["podSets"]:
        spec = ps["template"].get("spec") or {}
        out += [c["env"] for key in ("containers", "initContainers") for c in spec.get(key) or [] if "env" in c]
    return out


def _job() -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid", "resourceVersion": "5", "labels": {Q: "lq"}},
            "spec": {"parallelism": 2, "suspend": True, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"name": "i"}]}}}}


def _spark() -> dict[str, Any]:
    raw = raw_app()
    raw["spec"]["driver"]["sidecars"] = [{"name": "s", "image": "img"}]
    raw["spec"]["executor"]["initContainers"] = [{"name": "i", "image": "img"}]
    return raw


JOB_KINDS: dict[str, Callable[[], dict[str, Any]]] = {
    "Job": _job,
    "JobSet": lambda: raw_jobset(replicated("a", 1), replicated("b", 2)),
    "MPIJob": lambda: raw_mpijob({"Launcher": replica(1), "Worker": replica(2)}),
    **{kind: (lambda t=training: raw_training_job(t, {r: replica(1) for r in t.replica_types}))
       for kind, training in kf.KINDS.items()},
    "RayCluster": lambda: raw_cluster(ray_group("w")),
    "RayJob": lambda: raw_rayjob(ray_group("w")),
    "RayService": lambda: raw_service(service_group("g", 2)),
    "AppWrapper": lambda: raw_aw({"template": batch_job()}),
    "TrainJob": lambda: raw_trainjob({"numNodes": 2}),
    "SparkApplication": _spark,
}
"""A sample of every job kind the connector runs on Kueue's job framework, as stored."""


def _reconcilers() -> dict[str, type[JobReconciler[Any]]]:
    """The job kinds' reconcilers, by kind: every concrete one defined (the connector's module imports them all)."""
    out: dict[str, type[JobReconciler[Any]]] = {}
    todo = list(JobReconciler.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "RESOURCE" in vars(cls):
            out[cls.KIND] = cls
    return out


def _through_reconciler(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    reconciler: Any = _reconcilers()[kind](None, LocalJournal(MemoryLog(), Mirror()))  # type: ignore[arg-type]
    if kind == "TrainJob":  # its pod templates are its runtime's, read from the runtimes listed
        cluster, key = tj.runtime_wanted(msgspec.convert(raw, tj.TrainJob)) or (False, "")
        runtimes = reconciler.cluster_runtimes if cluster else reconciler.runtimes
        runtimes.known[key] = SimpleNamespace(spec=duplicated_env(RUNTIME))
    return reconciler.workload_for(raw, "wl")


def test_every_job_kind_the_connector_runs_has_a_case() -> None:
    """A new kind's reconciler must be added to :data:`JOB_KINDS`, so that its Workload body is checked too."""
    assert sorted(_reconcilers()) == sorted(JOB_KINDS)


@pytest.mark.parametrize("kind", sorted(JOB_KINDS))
def test_a_job_kinds_workload_names_each_env_variable_once_its_last_value_where_it_first_stood(kind: str) -> None:
    raw = duplicated_env(JOB_KINDS[kind]())
    envs = env_lists(_through_reconciler(kind, raw))
    assert envs and all(env == FOLDED for env in envs), envs


def _pod(name: str, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {Q: "lq"},
                         "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "initContainers": [{"name": "i"}]}}


def _grouped(name: str, **annotations: str) -> dict[str, Any]:
    pod = _pod(name, **{"kueue.x-k8s.io/pod-group-total-count": "2", **annotations})
    pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    return pod


STATEFULSET_POD = {"kueue.x-k8s.io/pod-group-serving": "true", "kueue.x-k8s.io/pod-suspending-parent": "statefulset"}
OTHER_BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "Pod": lambda: pod_sync.workload_for(ClusterState(), duplicated_env(_pod("p")), "wl"),
    "pod group": lambda: pod_group.workload_for(ClusterState(), duplicated_env([_grouped("a"), _grouped("b")])),
    "StatefulSet": lambda: pod_group.workload_for(ClusterState(), duplicated_env(
        [_grouped("s-0", **STATEFULSET_POD), _grouped("s-1", **STATEFULSET_POD)])),
    "LeaderWorkerSet": lambda: lw.workload_for(ClusterState(), NO_KEYS, duplicated_env(lws()), "wl", 0),
}
"""The integrations that are not a job kind's reconciler, through the builder each create and rewrite calls (a
Deployment's Pods are single Pods; a StatefulSet's, a pod group)."""


@pytest.mark.parametrize("what", sorted(OTHER_BUILDERS))
def test_a_pods_group_or_lws_workload_names_each_env_variable_once(what: str) -> None:
    envs = env_lists(OTHER_BUILDERS[what]())
    assert envs and all(env == FOLDED for env in envs), envs
