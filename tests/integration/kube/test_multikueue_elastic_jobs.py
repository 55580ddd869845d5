"""Elastic jobs on a MultiKueue manager, across two real apiservers (the manager, and a worker started for the
MultiKueue tests), a kueue-es on each, under ``ElasticJobsViaWorkloadSlices``.

An elastic RayCluster (``ray.io/raycluster``):
Its first slice is dispatched and admitted on the worker, which runs the RayCluster's copy on the copied slice.
Scaled up on the manager, the RayCluster gets a new slice there, admitted in the old one's place and dispatched to
the worker the old one runs on; once the worker admits it, the copy on the worker — the same object, never deleted
— gets the manager's worker replicas and names the new slice (Kueue's Ray adapter's ``ElasticReplicaSync``).
Scaled down, the admitted slice is lowered in place on the manager; its copy on the worker is lowered with it
(Kueue's workload controller updates an elastic copy scaled down) and the RayCluster's copy resized.

An elastic batch/v1 Job likewise: its copy on the worker, the same object, takes the manager's ``parallelism`` and
names the new slice (Kueue's batch/v1 adapter's elastic sync).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import test_multikueue as mk
from kubehelp import eventually, job
from test_multikueue import worker_apiserver  # noqa: F401 - the worker apiserver fixture

from connectors.k8s.multikueue_identifiers import workload_name_of
from connectors.k8s.resources import BY_KIND, RAYCLUSTERS

pytestmark = pytest.mark.kube
SLICE_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"


def _elastic_cluster(ns: str, name: str) -> dict[str, Any]:
    """An elastic RayCluster handed to MultiKueue: a head and one worker of 1 cpu, suspended."""
    obj = mk._handed(RAYCLUSTERS, ns, name, {"suspend": True, **mk._ray_cluster()})
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    return obj


async def _slices(kc, ns: str, owner: str, kind: str = "RayCluster") -> list[dict[str, Any]]:
    """The manager's Workloads of the ``kind`` ``owner``, oldest first."""
    out = [msgspec.json.decode(raw) for raw in (await kc.list(BY_KIND["Workload"], namespace=ns)).items]
    mine = [w for w in out if any(r.get("kind") == kind and r.get("name") == owner
                                  for r in w["metadata"].get("ownerReferences") or [])]
    return sorted(mine, key=lambda w: (w["metadata"]["creationTimestamp"], SLICE_FOR in (w["metadata"].get(
        "annotations") or {})))


def _workers(obj: dict[str, Any]) -> tuple[int, int, int]:
    group = obj["spec"]["workerGroupSpecs"][0]
    return group.get("replicas"), group.get("minReplicas"), group.get("maxReplicas")


@pytest.mark.asyncio
async def test_an_elastic_rayclusters_scale_up_and_down_reach_its_copy_on_the_worker(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    """Up: a new slice, admitted on the worker, the same copy resized and pointed at it. Down: the admitted slice
    lowered in place on the manager, its copy on the worker with it, and the RayCluster's copy resized."""
    async with mk._ray_clusters(kube_apiserver, worker_apiserver, tmp_path, "ray.io/raycluster") as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        await kc.create(RAYCLUSTERS, _elastic_cluster(ns, "mk-elastic"), ns)

        async def one_slice() -> dict[str, Any] | None:
            found = await _slices(kc, ns, "mk-elastic")
            return found[0] if len(found) == 1 else None

        first = (await eventually(one_slice, timeout=60, what="the RayCluster's first slice"))["metadata"]["name"]
        await mk._admitted_on_worker(c, first, "the first slice to be admitted on the worker")

        async def copy_on(wl_name: str) -> dict[str, Any] | None:
            remote = await mk._remote(wc, RAYCLUSTERS, "mk-elastic", ns)
            return remote if remote is not None and workload_name_of(remote) == wl_name else None

        before = await eventually(lambda: copy_on(first), timeout=60, what="the copy on the worker")
        assert _workers(before) == (1, 0, 1)

        # --- scaled up on the manager: a new slice, run on the same copy ----------------------------------------
        manager = msgspec.json.decode(await kc.get(RAYCLUSTERS, "mk-elastic", ns))
        group = manager["spec"]["workerGroupSpecs"][0]
        group.update(replicas=2, minReplicas=2, maxReplicas=2)
        await kc.patch(RAYCLUSTERS, "mk-elastic", {"spec": {"workerGroupSpecs": [group]}}, ns)

        async def new_slice() -> dict[str, Any] | None:
            found = [w for w in await _slices(kc, ns, "mk-elastic") if w["metadata"]["name"] != first]
            return found[0] if found else None

        scaled = await eventually(new_slice, timeout=60, what="the scale-up's new slice")
        name = scaled["metadata"]["name"]
        assert scaled["metadata"]["annotations"][SLICE_FOR] == f"{ns}/{first}"
        await mk._admitted_on_worker(c, name, "the new slice to be admitted on the worker")

        after = await eventually(lambda: copy_on(name), timeout=60, what="the copy to run on the new slice")
        assert after["metadata"]["uid"] == before["metadata"]["uid"], "the same copy, resized in place"
        assert _workers(after) == (2, 2, 2)
        old = msgspec.json.decode(await kc.get(BY_KIND["Workload"], first, ns))
        finished = next(x for x in old["status"]["conditions"] if x["type"] == "Finished")
        assert (finished["status"], finished["reason"]) == ("True", "WorkloadSliceReplaced")

        # --- scaled down on the manager: the admitted slice lowered in place, and the copy with it ---------------
        group.update(replicas=1, minReplicas=1, maxReplicas=1)
        await kc.patch(RAYCLUSTERS, "mk-elastic", {"spec": {"workerGroupSpecs": [group]}}, ns)

        async def resized(want: int) -> dict[str, Any] | None:
            remote = await mk._remote(wc, RAYCLUSTERS, "mk-elastic", ns)
            return remote if remote is not None and _workers(remote)[0] == want else None

        down = await eventually(lambda: resized(1), timeout=60, what="the copy scaled down")
        assert workload_name_of(down) == name and down["metadata"]["uid"] == before["metadata"]["uid"]

        async def copy_lowered() -> dict[str, Any] | None:
            raw = msgspec.json.decode(await wc.get(BY_KIND["Workload"], name, ns))
            return raw if [p["count"] for p in raw["spec"]["podSets"]] == [1, 1] else None

        on_worker = await eventually(copy_lowered, timeout=60, what="the slice's copy lowered on the worker")
        assert any(x["type"] == "Admitted" and x["status"] == "True" for x in on_worker["status"]["conditions"])
        manager_wl = msgspec.json.decode(await kc.get(BY_KIND["Workload"], name, ns))
        assert [p["count"] for p in manager_wl["spec"]["podSets"]] == [1, 1], "the same slice, lowered in place"


@pytest.mark.asyncio
async def test_an_elastic_jobs_scale_up_reaches_its_copy_on_the_worker(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    """The copy of an elastic Job, the same object, takes the manager's parallelism and names the new slice once the
    worker admits it."""
    async with mk._clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job"], []) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        manager_job = job(ns, "mk-elastic-job", "user-queue", cpu="500m")
        manager_job["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
        manager_job["spec"].update(completions=4, managedBy="kueue.x-k8s.io/multikueue",
                                   completionMode="Indexed")
        await kc.create(BY_KIND["Job"], manager_job, ns)

        async def one_slice() -> dict[str, Any] | None:
            found = await _slices(kc, ns, "mk-elastic-job", "Job")
            return found[0] if len(found) == 1 else None

        first = (await eventually(one_slice, timeout=60, what="the Job's first slice"))["metadata"]["name"]
        await mk._admitted_on_worker(c, first, "the first slice to be admitted on the worker")

        async def copy_on(wl_name: str) -> dict[str, Any] | None:
            remote = await mk._remote(wc, BY_KIND["Job"], "mk-elastic-job", ns)
            return remote if remote is not None and workload_name_of(remote) == wl_name else None

        before = await eventually(lambda: copy_on(first), timeout=60, what="the Job's copy on the worker")
        assert before["spec"]["parallelism"] == 1

        await kc.patch(BY_KIND["Job"], "mk-elastic-job", {"spec": {"parallelism": 2}}, ns)

        async def new_slice() -> dict[str, Any] | None:
            found = [w for w in await _slices(kc, ns, "mk-elastic-job", "Job") if w["metadata"]["name"] != first]
            return found[0] if found else None

        name = (await eventually(new_slice, timeout=60, what="the scale-up's new slice"))["metadata"]["name"]
        await mk._admitted_on_worker(c, name, "the new slice to be admitted on the worker")
        after = await eventually(lambda: copy_on(name), timeout=60, what="the Job's copy to run on the new slice")
        assert after["metadata"]["uid"] == before["metadata"]["uid"], "the same copy, resized in place"
        assert after["spec"]["parallelism"] == 2
