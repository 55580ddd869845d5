"""Worker-driven Ray autoscaling under MultiKueue (``MultiKueueRayInTreeAutoscaling``, alpha), across two real
apiservers (the manager, and a worker started for the MultiKueue tests), a kueue-es on each.

An elastic RayCluster with ``enableInTreeAutoscaling`` handed to MultiKueue runs its copy on the worker; the test
plays the Ray autoscaler there, raising the copy's worker replicas. The manager records the worker's count on its
RayCluster as annotations (its spec untouched), its pod counts follow, so a new slice is made, admitted on the
worker in the old one's place, and the copy — the same object, never resized by the manager — names it. Gate off,
the manager owns the sizes: the copy is put back to the manager's and nothing is recorded."""

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
from connectors.k8s.resources import RAYCLUSTERS

pytestmark = pytest.mark.kube
SIZES = "kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes"
REVISION = "kueue.x-k8s.io/raycluster-generation"


def _autoscaled_cluster(ns: str, name: str) -> dict[str, Any]:
    """An elastic RayCluster with the in-tree autoscaler, handed to MultiKueue: a head and one worker of 1 cpu."""
    obj = mk._handed(RAYCLUSTERS, ns, name, {"suspend": True, "enableInTreeAutoscaling": True, **mk._ray_cluster()})
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
