"""Worker-driven Ray autoscaling under MultiKueue (``MultiKueueRayInTreeAutoscaling``, alpha), across two real
apiservers (the manager, and a worker started for the MultiKueue tests), a kueue-es on each.

An elastic RayCluster with ``enableInTreeAutoscaling`` handed to MultiKueue runs its copy on the worker; the test
plays the Ray autoscaler there, raising the copy's worker replicas. The manager records the worker's count on its
RayCluster as annotations (its spec untouched), its pod counts follow, so a new slice is made, admitted on the
worker in the old one's place, and the copy — the same object, never resized by the manager — names it. Gate off,
the manager owns the sizes: the copy is put back to the manager's and nothing is recorded. An elastic RayJob's
counts are read from the RayCluster KubeRay made for its copy on the worker (the test plays KubeRay). The new
slice's name is hashed over ``<generation>_<recorded revision>`` (Kueue's ``GetWorkloadNameExtraPart``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
import test_multikueue as mk
from kubehelp import eventually
from test_multikueue import worker_apiserver  # noqa: F401 - the worker apiserver fixture
from test_multikueue_elastic_jobs import SLICE_FOR, _slices

from connectors.k8s.multikueue_identifiers import workload_name_of
from connectors.k8s.resources import RAYCLUSTERS, RAYJOBS
from connectors.k8s.workload_slices import slice_name

pytestmark = pytest.mark.kube
SIZES = "kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes"
REVISION = "kueue.x-k8s.io/raycluster-generation"


NO_SIDECAR_RESOURCES = {"resources": {}}
"""The autoscaler sidecar, counted on the head pod set, asks for nothing here: the quotas count the Ray pods alone."""


def _autoscaled_cluster(ns: str, name: str) -> dict[str, Any]:
    """An elastic RayCluster with the in-tree autoscaler, handed to MultiKueue: a head and one worker of 1 cpu."""
    obj = mk._handed(RAYCLUSTERS, ns, name, {"suspend": True, "enableInTreeAutoscaling": True, **mk._ray_cluster(),
                                            "autoscalerOptions": NO_SIDECAR_RESOURCES})
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    obj["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 3
    return obj


async def _first_copy(c, name: str) -> tuple[str, dict[str, Any]]:
    """The RayCluster's first slice, admitted on the worker, and the copy there running on it."""
    async def one_slice() -> dict[str, Any] | None:
        found = await _slices(c.kc, c.ns, name)
        return found[0] if len(found) == 1 else None

    first = (await eventually(one_slice, timeout=60, what="the RayCluster's first slice"))["metadata"]["name"]
    await mk._admitted_on_worker(c, first, "the first slice to be admitted on the worker")

    async def copy_on() -> dict[str, Any] | None:
        remote = await mk._remote(c.wc, RAYCLUSTERS, name, c.ns)
        return remote if remote is not None and workload_name_of(remote) == first else None

    return first, await eventually(copy_on, timeout=60, what="the copy on the worker")


async def _autoscale(c, name: str, remote: dict[str, Any], replicas: int) -> None:
    """The Ray autoscaler on the worker sets the copy's worker replicas."""
    group = dict(remote["spec"]["workerGroupSpecs"][0], replicas=replicas)
    await c.wc.patch(RAYCLUSTERS, name, {"spec": {"workerGroupSpecs": [group]}}, c.ns)


@pytest.mark.asyncio
async def test_the_workers_autoscaler_resizes_and_the_manager_follows(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    async with mk._ray_clusters(kube_apiserver, worker_apiserver, tmp_path, "ray.io/raycluster",
                                {"MultiKueueRayInTreeAutoscaling": True}) as c:
        await c.kc.create(RAYCLUSTERS, _autoscaled_cluster(c.ns, "mk-autoscaled"), c.ns)
        first, before = await _first_copy(c, "mk-autoscaled")
        assert before["spec"]["enableInTreeAutoscaling"] is True, "the copy keeps the autoscaler"

        await _autoscale(c, "mk-autoscaled", before, 2)

        async def recorded(want: int) -> dict[str, Any] | None:
            manager = msgspec.json.decode(await c.kc.get(RAYCLUSTERS, "mk-autoscaled", c.ns))
            sizes = (manager["metadata"].get("annotations") or {}).get(SIZES)
            return manager if sizes and json.loads(sizes) == [{"name": "workers", "count": want}] else None

        manager = await eventually(lambda: recorded(2), timeout=60, what="the worker's count on the manager")
        assert manager["spec"]["workerGroupSpecs"][0]["replicas"] == 1, "the manager's spec untouched"
        assert manager["metadata"]["annotations"][REVISION].startswith(before["metadata"]["uid"] + "-")

        async def new_slice() -> dict[str, Any] | None:
            found = [w for w in await _slices(c.kc, c.ns, "mk-autoscaled") if w["metadata"]["name"] != first]
            return found[0] if found else None

        scaled = await eventually(new_slice, timeout=60, what="the scale-up's new slice")
        name = scaled["metadata"]["name"]
        meta = manager["metadata"]
        assert name == slice_name("RayCluster", "ray.io", "mk-autoscaled", meta["uid"],
                                  f"{meta['generation']}_{meta['annotations'][REVISION]}")
        assert scaled["metadata"]["annotations"][SLICE_FOR] == f"{c.ns}/{first}"
        assert [p["count"] for p in scaled["spec"]["podSets"]] == [1, 2]
        await mk._admitted_on_worker(c, name, "the new slice to be admitted on the worker")

        async def renamed() -> dict[str, Any] | None:
            remote = await mk._remote(c.wc, RAYCLUSTERS, "mk-autoscaled", c.ns)
            return remote if remote is not None and workload_name_of(remote) == name else None

        after = await eventually(renamed, timeout=60, what="the copy to name the new slice")
        assert after["metadata"]["uid"] == before["metadata"]["uid"], "the same copy"
        assert after["spec"]["workerGroupSpecs"][0]["replicas"] == 2, "the autoscaler's, not the manager's 1"


@pytest.mark.asyncio
async def test_gate_off_the_manager_owns_the_sizes(kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811
    async with mk._ray_clusters(kube_apiserver, worker_apiserver, tmp_path, "ray.io/raycluster") as c:
        await c.kc.create(RAYCLUSTERS, _autoscaled_cluster(c.ns, "mk-manager-sized"), c.ns)
        _, before = await _first_copy(c, "mk-manager-sized")
        await _autoscale(c, "mk-manager-sized", before, 2)

        async def put_back() -> dict[str, Any] | None:
            remote = await mk._remote(c.wc, RAYCLUSTERS, "mk-manager-sized", c.ns)
            return remote if remote is not None and remote["metadata"]["generation"] > before["metadata"][
                "generation"] + 1 and remote["spec"]["workerGroupSpecs"][0]["replicas"] == 1 else None

        await eventually(put_back, timeout=60, what="the copy put back to the manager's size")
        manager = msgspec.json.decode(await c.kc.get(RAYCLUSTERS, "mk-manager-sized", c.ns))
        assert SIZES not in (manager["metadata"].get("annotations") or {})
        assert len(await _slices(c.kc, c.ns, "mk-manager-sized")) == 1


@pytest.mark.asyncio
async def test_a_rayjobs_counts_are_read_from_its_cluster_on_the_worker(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    async with mk._ray_clusters(kube_apiserver, worker_apiserver, tmp_path, "ray.io/rayjob",
                                {"MultiKueueRayInTreeAutoscaling": True}) as c:
        handed = mk._rayjob(c.ns, "mk-autoscaled-job")
        handed["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
        handed["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
        handed["spec"]["rayClusterSpec"]["autoscalerOptions"] = NO_SIDECAR_RESOURCES
        await c.kc.create(RAYJOBS, handed, c.ns)

        async def one_slice() -> dict[str, Any] | None:
            found = await _slices(c.kc, c.ns, "mk-autoscaled-job", "RayJob")
            return found[0] if len(found) == 1 else None

        first = (await eventually(one_slice, timeout=60, what="the RayJob's first slice"))["metadata"]["name"]
        await mk._admitted_on_worker(c, first, "the first slice to be admitted on the worker")

        async def copy_on(wl_name: str) -> dict[str, Any] | None:
            remote = await mk._remote(c.wc, RAYJOBS, "mk-autoscaled-job", c.ns)
            return remote if remote is not None and workload_name_of(remote) == wl_name else None

        remote = await eventually(lambda: copy_on(first), timeout=60, what="the RayJob's copy on the worker")

        # --- KubeRay on the worker makes the copy's RayCluster; the autoscaler grows it --------------------------
        cluster_spec = dict(remote["spec"]["rayClusterSpec"])
        child = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                 "metadata": {"name": "mk-autoscaled-job-raycluster-x", "namespace": c.ns, "ownerReferences": [
                     {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "mk-autoscaled-job",
                      "uid": remote["metadata"]["uid"], "controller": True}]},
                 "spec": cluster_spec}
        child = msgspec.json.decode(await c.wc.create(RAYCLUSTERS, child, c.ns))
        await c.wc.patch(RAYJOBS, "mk-autoscaled-job", {"status": {"rayClusterName": child["metadata"]["name"]}},
                         c.ns, subresource="status")
        await _autoscale(c, child["metadata"]["name"], child, 2)
        # KubeRay mirrors the cluster's status on the RayJob's (what the manager's pass is woken by)
        await c.wc.patch(RAYJOBS, "mk-autoscaled-job", {"status": {"rayClusterStatus": {
            "desiredWorkerReplicas": 2}}}, c.ns, subresource="status")

        async def recorded() -> dict[str, Any] | None:
            manager = msgspec.json.decode(await c.kc.get(RAYJOBS, "mk-autoscaled-job", c.ns))
            sizes = (manager["metadata"].get("annotations") or {}).get(SIZES)
            return manager if sizes and json.loads(sizes) == [{"name": "workers", "count": 2}] else None

        manager = await eventually(recorded, timeout=60, what="the worker cluster's count on the manager's RayJob")
        assert manager["metadata"]["annotations"][REVISION].startswith(child["metadata"]["uid"] + "-")
        assert manager["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 1, "its spec untouched"

        async def new_slice() -> dict[str, Any] | None:
            found = [w for w in await _slices(c.kc, c.ns, "mk-autoscaled-job", "RayJob")
                     if w["metadata"]["name"] != first]
            return found[0] if found else None

        scaled = await eventually(new_slice, timeout=60, what="the scale-up's new slice")
        assert [p["count"] for p in scaled["spec"]["podSets"]] == [1, 2]
        meta = manager["metadata"]
        assert scaled["metadata"]["name"] == slice_name(
            "RayJob", "ray.io", "mk-autoscaled-job", meta["uid"],
            f"{meta['generation']}_{meta['annotations'][REVISION]}")
        await mk._admitted_on_worker(c, scaled["metadata"]["name"], "the new slice to be admitted on the worker")
        await eventually(lambda: copy_on(scaled["metadata"]["name"]), timeout=60,
                         what="the RayJob's copy to name the new slice")
