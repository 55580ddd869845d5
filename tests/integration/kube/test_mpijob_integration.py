"""Kueue's MPIJob integration against the real apiserver, with ``kubeflow.org/mpijob`` among the frameworks.

The MPI operator is not installed: the kubeflow.org/v2beta1 API is served from the minimal CRD of
:func:`connectors.k8s.crds.mpijob_crd` and no MPI operator runs, so the test plays it (sets the ``Succeeded``
condition through the status subresource). Two MPIJobs each fill the ClusterQueue: the first gets its Workload
(``launcher`` and ``worker`` pod sets), is admitted and unsuspended (``spec.runPolicy.suspend``) with the flavor's
node labels in both replicas' pod templates; the second, created with no ``runPolicy.suspend``, is suspended, gets
its Workload and stays suspended while the first holds the quota; once the first succeeds its Workload finishes
with the condition's message, the quota goes back and the second starts.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, finished_condition, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.mpijob import workload_name
from connectors.k8s.recorder import EVENTS
from connectors.k8s.resources import MPIJOBS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
NOW = "2026-01-01T00:00:00Z"


def _mpijob(ns: str, name: str, *, suspend: bool | None) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}}
    return {"apiVersion": MPIJOBS.api_version, "kind": "MPIJob",
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"slotsPerWorker": 1, "runPolicy": {} if suspend is None else {"suspend": suspend},
                     "mpiReplicaSpecs": {"Launcher": replica(1), "Worker": replica(2)}}}


async def _mpijob_now(kc: Any, ns: str, name: str) -> dict[str, Any]:
    return msgspec.json.decode(await kc.get(MPIJOBS, name, ns))


def _pod_template(mpijob: dict[str, Any], replica_type: str) -> dict[str, Any]:
    return mpijob["spec"]["mpiReplicaSpecs"][replica_type]["template"]


@pytest.mark.asyncio
async def test_a_queued_mpijob_runs_only_while_its_workload_is_admitted(kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.mpijob_crd()])
        q = await queues(kc, "mpijob", {"cpu": 3}, flavor_labels={"pool": "a"})
        first = msgspec.json.decode(await kc.create(MPIJOBS, _mpijob(q.ns, "first", suspend=True), q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_first = workload_name("first", first["metadata"]["uid"])

            async def admitted(name: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, q.ns)
                    return wl if wl.get("status", {}).get("admission") else None
                return None

            wl = await eventually(lambda: admitted(wl_first), what="the first MPIJob's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("launcher", 1), ("worker", 2)]
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"

            async def started(name: str) -> dict[str, Any] | None:
                mpijob = await _mpijob_now(kc, q.ns, name)
                return mpijob if mpijob["spec"]["runPolicy"].get("suspend") is False else None

            mpi_first = await eventually(lambda: started("first"), what="the first MPIJob unsuspended")
            for replica_type in ("Launcher", "Worker"):
                template = _pod_template(mpi_first, replica_type)
                assert template["spec"]["nodeSelector"] == {"pool": "a"}, replica_type
                assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == replica_type.lower()

            # the second is created running (no runPolicy.suspend, no MPIJob webhook): suspended, queued, held back
            second = msgspec.json.decode(await kc.create(MPIJOBS, _mpijob(q.ns, "second", suspend=None), q.ns))
            wl_second = workload_name("second", second["metadata"]["uid"])

            async def pending() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", wl_second, q.ns)
                    mpijob = await _mpijob_now(kc, q.ns, "second")
                    suspended = mpijob["spec"]["runPolicy"].get("suspend") is True
                    return wl if suspended and "admission" not in wl.get("status", {}) else None
                return None

            await eventually(pending, what="the second MPIJob suspended, with a pending workload")
            assert await admitted(wl_second) is None
            assert "nodeSelector" not in _pod_template(await _mpijob_now(kc, q.ns, "second"), "Worker")["spec"]

            # play the MPI operator: the first succeeded
            done = {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
                    "message": f"MPIJob {q.ns}/first successfully completed.", "lastTransitionTime": NOW}
            await kc.patch(MPIJOBS, "first", {"status": {"conditions": [done]}}, q.ns, subresource="status")

            cond = await finished_condition(kc, wl_first, q.ns, "the first MPIJob's workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", f"MPIJob {q.ns}/first successfully completed.")
            mpi_second = await eventually(lambda: started("second"), what="the second MPIJob started in its turn")
            assert _pod_template(mpi_second, "Launcher")["spec"]["nodeSelector"] == {"pool": "a"}

            async def let_go() -> bool:
                wl = await get(kc, "Workload", wl_first, q.ns)
                return "kueue.x-k8s.io/resource-in-use" not in wl["metadata"].get("finalizers", [])

            await eventually(let_go, what="the finished workload's finalizer taken off")


async def _events_on(kc: Any, ns: str, name: str) -> list[tuple[str, str, str]]:
    """(reason, message, reporting component) of the Events on MPIJob ``ns/name``."""
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=MPIJob"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"], e.get("reportingComponent", "")) for e in msgspec.json.decode(raw)["items"]]


@pytest.mark.asyncio
async def test_an_mpijobs_workload_follows_its_workers_and_admission_gate(kube_apiserver, tmp_path) -> None:
    """An MPIJob created with an admission gate gets a gated Workload; its workers scaled while it is suspended
    and pending, the Workload is rewritten (``UpdatedWorkload`` on the MPIJob, from the MPIJob integration's
    recorder); its gate removed, the Workload's goes too and it is admitted and started (fails without the shared
    steps: the Workload keeps its old count and its gate, and is never admitted)."""
    config = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}})
    gate = "kueue.x-k8s.io/admission-gated-by"
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.mpijob_crd()])
        q = await queues(kc, "mpijob-sync", {"cpu": 3})
        doc = _mpijob(q.ns, "pi", suspend=True)
        doc["metadata"]["annotations"] = {gate: "example.com/budget"}
        mpi = msgspec.json.decode(await kc.create(MPIJOBS, doc, q.ns))
        name = workload_name("pi", mpi["metadata"]["uid"])
        async with kueue_es(kc, tmp_path / "log", config=config):

            async def workload(count: int, gated: bool) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, q.ns)
                    counts = [ps["count"] for ps in wl["spec"]["podSets"]]
                    has_gate = gate in (wl["metadata"].get("annotations") or {})
                    return wl if counts == [1, count] and has_gate == gated else None
                return None

            wl = await eventually(lambda: workload(2, True), what="the gated MPIJob's workload")
            assert "admission" not in wl.get("status", {})
            await kc.patch(MPIJOBS, "pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1}}}}, q.ns)
            await eventually(lambda: workload(1, True), what="the workload rewritten with one worker")
            await kc.patch(MPIJOBS, "pi", {"metadata": {"annotations": {gate: None}}}, q.ns)

            async def started() -> dict[str, Any] | None:
                now = await _mpijob_now(kc, q.ns, "pi")
                return now if now["spec"]["runPolicy"].get("suspend") is False else None

            await eventually(started, what="the MPIJob started once its gate is gone")
            assert await workload(1, False) is not None
            updated = ("UpdatedWorkload", f"Updated not matching Workload for suspended job: {q.ns}/{name}",
                       "kubeflow.org/mpijob-kueue-controller")

            async def recorded() -> bool:
                return updated in await _events_on(kc, q.ns, "pi")

            await eventually(recorded, what="UpdatedWorkload recorded on the MPIJob")
