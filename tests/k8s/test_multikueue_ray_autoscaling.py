"""Worker-driven Ray autoscaling under MultiKueue (:mod:`connectors.k8s.multikueue_ray_autoscaling`, Kueue v0.20's
``MultiKueueRayInTreeAutoscaling``): which manager objects the worker's autoscaler sizes, the worker counts read
(a RayCluster's copy, a RayJob's RayCluster on the worker), the annotations written on the manager's object, and the
manager's pod counts that follow them — and, gate off, none of it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connectors.k8s import multikueue_ray_autoscaling as mka
from kueue_es.scheduler.config import DEFAULT, load_config

ON = load_config({"featureGates": {"MultiKueueRayInTreeAutoscaling": True}})
ELASTIC_OFF = load_config({"featureGates": {"MultiKueueRayInTreeAutoscaling": True,
                                            "ElasticJobsViaWorkloadSlices": False}})
MK = "kueue.x-k8s.io/multikueue"


def _spec(workers: int, *, autoscaling: bool | None = True, hosts: int | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": "Workers", "replicas": workers, "template": {"spec": {}}}
    if hosts is not None:
        group["numOfHosts"] = hosts
    spec: dict[str, Any] = {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": [group]}
    if autoscaling is not None:
        spec["enableInTreeAutoscaling"] = autoscaling
    return spec


def _cluster(workers: int, *, elastic: bool = True, autoscaling: bool | None = True, suspend: bool = False,
             uid: str = "u1", generation: int = 3, hosts: int | None = None) -> dict[str, Any]:
    annotations = {"kueue.x-k8s.io/elastic-job": "true"} if elastic else {}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "ns", "uid": uid, "generation": generation,
                         "annotations": annotations},
            "spec": {**_spec(workers, autoscaling=autoscaling, hosts=hosts), "suspend": suspend, "managedBy": MK}}


def _job(workers: int, *, autoscaling: bool | None = True, suspend: bool = False, child: str = "") -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "ns", "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
            "spec": {"suspend": suspend, "managedBy": MK, "rayClusterSpec": _spec(workers, autoscaling=autoscaling)},
            "status": {"rayClusterName": child}}


def test_the_worker_owns_an_autoscaled_elastic_ray_objects_sizes_only_under_the_gate() -> None:
    assert mka.worker_owns_replicas(ON, mka.RAYCLUSTER, _cluster(2))
    assert mka.worker_owns_replicas(ON, mka.RAYJOB, _job(2))
    assert not mka.worker_owns_replicas(DEFAULT, mka.RAYCLUSTER, _cluster(2)), "gate off (its default)"
    assert not mka.worker_owns_replicas(DEFAULT, mka.RAYJOB, _job(2)), "gate off (its default)"
    assert not mka.worker_owns_replicas(ELASTIC_OFF, mka.RAYCLUSTER, _cluster(2)), "ElasticJobsViaWorkloadSlices off"
    assert not mka.worker_owns_replicas(ON, mka.RAYCLUSTER, _cluster(2, elastic=False)), "not annotated elastic"
    assert not mka.worker_owns_replicas(ON, mka.RAYCLUSTER, _cluster(2, autoscaling=False)), "no autoscaler"
    assert not mka.worker_owns_replicas(ON, mka.RAYJOB, _job(2, autoscaling=None)), "no autoscaler"
    assert not mka.worker_owns_replicas(ON, ("ray.io/v1", "RayService"), _cluster(2)), "RayService: not in v0.20"
    assert not mka.worker_owns_replicas(ON, ("batch/v1", "Job"), _cluster(2))


def test_the_worker_counts_are_a_rayclusters_copy_or_a_rayjobs_cluster_on_the_worker() -> None:
    assert mka.runtime_state(mka.RAYCLUSTER, _cluster(4, hosts=2, uid="abc", generation=7)) == (
        {"workers": 8}, "abc-7"), "replicas times numOfHosts, by pod set; the copy's uid-generation"
    assert mka.runtime_state(mka.RAYCLUSTER, _cluster(4, suspend=True)) is None, "a suspended copy: Kueue's counts"
    remote = _job(1, child="rj-raycluster-x")
    assert mka.child_name(mka.RAYJOB, remote) == "rj-raycluster-x"
    assert mka.child_name(mka.RAYCLUSTER, _cluster(1)) == ""
    assert mka.runtime_state(mka.RAYJOB, remote, _cluster(5, uid="child", generation=2)) == ({"workers": 5},
                                                                                              "child-2")
    assert mka.runtime_state(mka.RAYJOB, remote, None) is None, "the RayJob's cluster not there yet"
    assert mka.runtime_state(mka.RAYJOB, _job(1, suspend=True, child="c"), _cluster(5)) is None


def test_the_counts_are_written_on_the_managers_object_when_they_change() -> None:
    local = _cluster(2)
    patch = mka.reflect_patch(local, ({"workers": 5, "a": 1}, "u1-4"))
    assert patch == {"metadata": {"annotations": {
        "kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes": '[{"name":"a","count":1},{"name":"workers","count":5}]',
        "kueue.x-k8s.io/raycluster-generation": "u1-4"}}}, "sorted by name, compact; the spec untouched"
    local["metadata"]["annotations"].update(patch["metadata"]["annotations"])
    assert mka.reflect_patch(local, ({"a": 1, "workers": 5}, "u1-9")) is None, "the revision alone: nothing"
    assert mka.reflect_patch(local, ({"a": 1, "workers": 3}, "u1-10")) is not None, "a scale-down"


def test_the_managers_pod_counts_follow_the_annotation_under_the_gate_on_a_manager() -> None:
    counts = {"head": 1, "workers": 2}
    annotations = {mka.RUNTIME_SIZES_ANNOTATION: json.dumps([{"name": "workers", "count": 6},
                                                              {"name": "head", "count": 4},
                                                              {"name": "gone", "count": 9}])}
    assert mka.reflected_counts(True, MK, annotations, counts) == {"head": 4, "workers": 6}, \
        "every pod set named that the object has, head too (Kueue's applyRuntimeCountsAnnotation)"
    assert mka.reflected_counts(False, MK, annotations, counts) == counts, "gate off"
    assert mka.reflected_counts(True, None, annotations, counts) == counts, "not a manager's object"
    assert mka.reflected_counts(True, MK, {mka.RUNTIME_SIZES_ANNOTATION: "{oops"}, counts) == counts, "malformed"
    assert mka.reflected_counts(True, MK, {mka.RUNTIME_SIZES_ANNOTATION: '[{"name":"workers","count":"3"}]'},
                                counts) == counts, "malformed"
    assert counts == {"head": 1, "workers": 2}, "not changed in place"


class _ConflictingManager:
    """The manager's apiserver: its RayCluster as read, then changed before the counts' patch (409)."""

    def __init__(self) -> None:
        self.patches = 0

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return json.dumps(_cluster(2)).encode()

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        from connectors.k8s.errors import Conflict

        self.patches += 1
        raise Conflict(f'rayclusters.ray.io "{name}": the object has been modified', 409)


@pytest.mark.asyncio
async def test_the_counts_refused_on_a_conflict_are_reflected_again_on_the_next_pass() -> None:
    """The manager's RayCluster is not in the log, so nothing moves its workload when it changes: a Conflict on
    the counts' write is this pass's failure, retried (the workload kept moved on the worker)."""
    from types import SimpleNamespace

    from connectors.k8s.multikueue import MultiKueueConnector
    from connectors.k8s.multikueue_worker import Worker
    from connectors.k8s.resources import RAYCLUSTERS

    journal = SimpleNamespace(mirror=SimpleNamespace(state=SimpleNamespace()))
    manager = _ConflictingManager()
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    mk._config = lambda: ON  # type: ignore[method-assign]
    w = Worker("worker1", b"kubeconfig", client=SimpleNamespace(), connected=True)  # type: ignore[arg-type]
    wl = SimpleNamespace(elastic=True, namespace="ns", name="raycluster-rc", key="ns/raycluster-rc")
    synced = await mk._sync_elastic(w, wl, RAYCLUSTERS, "ns/rc", _cluster(5))  # type: ignore[arg-type]
    assert manager.patches == 1
    assert synced is False, "tried again on the next pass"
