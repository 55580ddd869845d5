"""The pod-set group a job's Workload carries (``topologyRequest.podSetGroupName``): Kueue's topology request
builder (``pkg/controller/jobframework/tas.go``) keeps a template's ``kueue.x-k8s.io/podset-group-name``
beside a required or preferred level, for every job kind, so a JobSet's, an MPIJob's or a Ray cluster's
grouped pod sets are placed together as a LeaderWorkerSet's are."""

from __future__ import annotations

from typing import Any

from connectors.k8s import jobset, mpijob, raycluster

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"


def _pod(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "c", "image": "img"}]}}


def _groups(pod_sets: list[dict[str, Any]]) -> dict[str, str | None]:
    return {ps["name"]: ps["topologyRequest"].get("podSetGroupName") for ps in pod_sets}


def test_a_jobsets_grouped_replicated_jobs_carry_their_group() -> None:
    js = {"spec": {"replicatedJobs": [
        {"name": "launcher", "replicas": 1,
         "template": {"spec": {"template": _pod({REQUIRED: "rack", GROUP: "g"})}}},
        {"name": "workers", "replicas": 4,
         "template": {"spec": {"template": _pod({REQUIRED: "rack", GROUP: "g"})}}},
        {"name": "other", "replicas": 1, "template": {"spec": {"template": _pod({REQUIRED: "rack"})}}}]}}
    assert _groups(jobset.pod_sets(js, tas=True)) == {"launcher": "g", "workers": "g", "other": None}


def test_an_mpijobs_launcher_and_worker_carry_their_group_beside_a_level_only() -> None:
    job = {"spec": {"mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": _pod({PREFERRED: "rack", GROUP: "g"})},
        "Worker": {"replicas": 3, "template": _pod({PREFERRED: "rack", GROUP: "g"})}}}}
    assert _groups(mpijob.pod_sets(job, tas=True)) == {"launcher": "g", "worker": "g"}
    bare = {"spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": _pod({GROUP: "g"})}}}}
    assert _groups(mpijob.pod_sets(bare, tas=True)) == {"launcher": None}, (
        "no level: no group (Kueue's builder)")


def test_a_ray_clusters_head_and_worker_group_carry_their_group() -> None:
    cluster = {"spec": {"headGroupSpec": {"template": _pod({REQUIRED: "rack", GROUP: "g"})},
                        "workerGroupSpecs": [{"groupName": "w", "replicas": 2,
                                              "template": _pod({REQUIRED: "rack", GROUP: "g"})}]}}
    assert _groups(raycluster.pod_sets(cluster, tas=True)) == {"head": "g", "w": "g"}
