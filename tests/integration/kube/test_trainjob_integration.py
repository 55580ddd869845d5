"""Kueue's TrainJob integration against the real apiserver, with ``trainer.kubeflow.org/trainjob`` among the
frameworks.

Kubeflow Trainer is not installed: its trainer.kubeflow.org/v1alpha1 API is served from the minimal CRDs of
:func:`connectors.k8s.crds.trainjob_crd` and :func:`connectors.k8s.crds.training_runtime_crd` and no controller runs,
so the test plays it (writes the TrainJob's conditions through the status subresource). A queued TrainJob naming a
ClusterTrainingRuntime gets its Workload (Kueue's name; the runtime's initializer and trainer Jobs as pod sets, the
trainer's ``numNodes`` pods with ``resourcesPerNode``), is admitted and unsuspended with the admission written as
``podTemplateOverrides`` (the flavor's node labels, the pod set label) after the user's; a queued TrainJob whose
runtime is missing gets no Workload until the runtime is created, and, still suspended and waiting for quota, has
its Workload rewritten in place when its ``numNodes`` changes; once the first TrainJob is ``Complete`` its Workload
finishes with its message, and the second is admitted in its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, finished_condition, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s import trainjob as tj
from connectors.k8s.resources import CLUSTER_TRAINING_RUNTIMES, TRAINJOBS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"
PODSET = "kueue.x-k8s.io/podset"


def _job(name: str, ancestor: str, cpu: str) -> dict[str, Any]:
    return {"name": name, "template": {
        "metadata": {"labels": {tj.ANCESTOR_LABEL: ancestor}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": name, "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}}}]}}}}}


def _runtime(name: str) -> dict[str, Any]:
    return {"apiVersion": CLUSTER_TRAINING_RUNTIMES.api_version, "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name},
            "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [
                _job("dataset-initializer", "dataset-initializer", "500m"), _job("node", "trainer", "500m")]}}}}


def _trainjob(ns: str, name: str, runtime: str) -> dict[str, Any]:
    return {"apiVersion": TRAINJOBS.api_version, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"suspend": True, "runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime"},
                     "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1"}}},
                     "podTemplateOverrides": [{"targetJobs": [{"name": "node"}],
                                               "spec": {"nodeSelector": {"disk": "ssd"}}}]}}


@pytest.mark.asyncio
async def test_a_queued_trainjob_runs_only_while_its_workload_is_admitted(kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset",
                                                          "trainer.kubeflow.org/trainjob"]}})
    sfx = secrets.token_hex(3)
    runtime, missing = f"torch-{sfx}", f"later-{sfx}"
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.trainjob_crd(), crds.training_runtime_crd(),
                                     crds.training_runtime_crd(cluster=True)])
        q = await queues(kc, "trainjob", {"cpu": 4, "memory": "1Gi"}, flavor_labels={"pool": "a"})
        await kc.create(CLUSTER_TRAINING_RUNTIMES, _runtime(runtime))
        job = msgspec.json.decode(await kc.create(TRAINJOBS, _trainjob(q.ns, "job", runtime), q.ns))
        later = msgspec.json.decode(await kc.create(TRAINJOBS, _trainjob(q.ns, "later", missing), q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_job = tj.workload_name("job", job["metadata"]["uid"])
            wl_later = tj.workload_name("later", later["metadata"]["uid"])

            async def workload(name: str, admitted: bool | None = None) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, q.ns)
                    if admitted is None or bool(wl.get("status", {}).get("admission")) is admitted:
                        return wl
                return None

            wl = await eventually(lambda: workload(wl_job, admitted=True), what="the TrainJob's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("dataset-initializer", 1),
                                                                                  ("node", 2)]
            node = wl["spec"]["podSets"][1]["template"]["spec"]
            assert node["containers"][0]["resources"]["requests"] == {"cpu": "1"}, "resourcesPerNode"
            assert node["nodeSelector"] == {"disk": "ssd"}, "the user's override"
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"

            async def started() -> dict[str, Any] | None:
                obj = msgspec.json.decode(await kc.get(TRAINJOBS, "job", q.ns))
                return obj if obj["spec"].get("suspend") is False else None

            train_job = await eventually(started, what="the TrainJob unsuspended")
            user, *kueues = train_job["spec"]["podTemplateOverrides"]
            assert user == {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"disk": "ssd"}}}
            assert [(o["targetJobs"], o["metadata"]["labels"][PODSET], o["spec"]["nodeSelector"]) for o in kueues] == [
                ([{"name": "dataset-initializer"}], "dataset-initializer", {"pool": "a"}),
                ([{"name": "node"}], "node", {"pool": "a"})]

            # the TrainJob naming a runtime not there yet: no Workload, until the runtime comes
            await asyncio.sleep(1.0)
            assert await workload(wl_later) is None, "no runtime, no Workload"
            await kc.create(CLUSTER_TRAINING_RUNTIMES, _runtime(missing))
            wl = await eventually(lambda: workload(wl_later), what="the later TrainJob's workload, once its runtime is")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("dataset-initializer", 1),
                                                                                  ("node", 2)]
            assert not wl.get("status", {}).get("admission"), "it waits for the quota the first one holds"

            # the suspended TrainJob asks for more nodes: its Workload, holding no quota, is rewritten in place
            await kc.patch(TRAINJOBS, "later", {"spec": {"trainer": {"numNodes": 3}}}, q.ns)

            async def rewritten() -> dict[str, Any] | None:
                found = await workload(wl_later)
                return found if found is not None and found["spec"]["podSets"][1]["count"] == 3 else None

            updated = await eventually(rewritten, what="the later TrainJob's workload rewritten with 3 nodes")
            assert updated["metadata"]["uid"] == wl["metadata"]["uid"], "rewritten, not made anew"
            assert not updated.get("status", {}).get("admission"), "3.5 CPUs still wait for the first one's quota"

            # play the Trainer: the first TrainJob completed
            await kc.patch(TRAINJOBS, "job", {"status": {"conditions": [{
                "type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "TrainJob is completed",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, q.ns, subresource="status")

            cond = await finished_condition(kc, wl_job, q.ns, "the TrainJob's workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", "TrainJob is completed")
            await eventually(lambda: workload(wl_later, admitted=True), what="the later one admitted in its turn")
