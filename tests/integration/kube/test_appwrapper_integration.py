"""Kueue's AppWrapper integration against the real apiserver, with ``workload.codeflare.dev/appwrapper`` among the
frameworks.

The AppWrapper project is not installed: workload.codeflare.dev/v1beta2 is served from the minimal CRD of
:func:`connectors.k8s.crds.appwrapper_crd` and no AppWrapper controller runs, so the test plays it (creates the
wrapped Job under the AppWrapper's controller reference, writes its phase through the status subresource). A queued
AppWrapper wrapping a batch/v1 Job gets its Workload (Kueue's name, one pod set ``<name>-0`` of the Job's
parallelism), is admitted and unsuspended with the flavor's node labels in the component's ``podSetInfos`` (the pod
set at the component's path); the wrapped Job, though it names the queue, is the AppWrapper's child — left running,
no Workload of its own; the AppWrapper's ``Succeeded`` phase finishes its Workload with Kueue's message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kubehelp import admitted_workload, connect, eventually, finished_condition, get, kueue_es, queues

from connectors.k8s import appwrapper as aw
from connectors.k8s import crds
from connectors.k8s.resources import APPWRAPPERS, BY_KIND, JOBSETS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"


def _job(ns: str, *, suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wrapped", "namespace": ns,
                                                                 "labels": {Q: "user-queue"}},
            "spec": {"suspend": suspend, "parallelism": 2, "completions": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "10"],
                                "resources": {"requests": {"cpu": "1"}}}]}}}}


def _appwrapper(ns: str) -> dict[str, Any]:
    return {"apiVersion": APPWRAPPERS.api_version, "kind": "AppWrapper",
            "metadata": {"name": "aw", "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"suspend": True, "components": [{
                "podSets": [{"replicas": 2, "path": "template.spec.template"}],
                "template": _job(ns, suspend=False)}]}}


@pytest.mark.asyncio
async def test_a_queued_appwrapper_runs_only_while_its_workload_is_admitted_and_its_job_is_its_child(
        kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.appwrapper_crd()])
        q = await queues(kc, "aw", {"cpu": 4, "memory": "1Gi"}, flavor_labels={"pool": "a"})
        wrapper = msgspec.json.decode(await kc.create(APPWRAPPERS, _appwrapper(q.ns), q.ns))
        uid = wrapper["metadata"]["uid"]
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_name = aw.workload_name("aw", uid)

            wl = await admitted_workload(kc, wl_name, q.ns, "the AppWrapper's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("aw-0", 2)]
            assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {
                "requests": {"cpu": "1"}}
            assert (wl["metadata"]["ownerReferences"][0]["kind"], wl["metadata"]["ownerReferences"][0]["uid"]) == (
                "AppWrapper", uid)

            async def started() -> dict[str, Any] | None:
                obj = msgspec.json.decode(await kc.get(APPWRAPPERS, "aw", q.ns))
                return obj if obj["spec"].get("suspend") is False else None

            started_aw = await eventually(started, what="the AppWrapper unsuspended")
            (component,) = started_aw["spec"]["components"]
            (info,) = component["podSetInfos"]
            assert info["nodeSelector"] == {"pool": "a"}, "the admission, for the pod set at the component's path"
            assert info["labels"]["kueue.x-k8s.io/podset"] == "aw-0"
            assert "nodeSelector" not in component["template"]["spec"]["template"]["spec"], "the template as written"

            # play the AppWrapper controller: the wrapped Job, under the AppWrapper's controller reference
            job = _job(q.ns, suspend=False)
            job["metadata"]["ownerReferences"] = [{"apiVersion": APPWRAPPERS.api_version, "kind": "AppWrapper",
                                                   "name": "aw", "uid": uid, "controller": True}]
            job_uid = msgspec.json.decode(await kc.create(BY_KIND["Job"], job, q.ns))["metadata"]["uid"]
            await asyncio.sleep(3)  # the Job integration has seen it: a Job of its own would be suspended by now
            assert not (await get(kc, "Job", "wrapped", q.ns))["spec"].get("suspend"), "left running"
            workloads = [msgspec.json.decode(raw) for raw in (await kc.list(BY_KIND["Workload"])).items]
            owners = {ref["uid"] for w in workloads if w["metadata"]["namespace"] == q.ns
                      for ref in w["metadata"].get("ownerReferences", [])}
            assert owners == {uid}, "the wrapped Job is not queued apart"
            assert job_uid not in owners

            # play the AppWrapper controller: the AppWrapper succeeded
            await kc.patch(APPWRAPPERS, "aw", {"status": {"phase": "Succeeded"}}, q.ns, subresource="status")

            cond = await finished_condition(kc, wl_name, q.ns, "the AppWrapper's workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", "AppWrapper finished successfully")


@pytest.mark.asyncio
async def test_a_job_of_an_appwrappers_jobset_is_its_child_with_the_jobset_integration_off(
        kube_apiserver, tmp_path) -> None:
    """Kueue's #4824: ``manageJobsWithoutQueueName`` on, the JobSet integration off, an AppWrapper wrapping a
    JobSet. The walk up from the JobSet's Job reads the JobSet from the apiserver (nothing lists JobSets then)
    and goes on to the AppWrapper: the Job, naming no queue, is the AppWrapper's child, left running with no
    Workload of its own. Before, it was taken for top-level: suspended and queued apart, in no queue."""
    config = load_config({"manageJobsWithoutQueueName": True,
                          "integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.appwrapper_crd(), crds.jobset_crd()])
        q = await queues(kc, "aw-js", {"cpu": 4, "memory": "1Gi"})
        wrapper = msgspec.json.decode(await kc.create(APPWRAPPERS, _appwrapper(q.ns), q.ns))
        uid = wrapper["metadata"]["uid"]
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_name = aw.workload_name("aw", uid)
            await admitted_workload(kc, wl_name, q.ns, "the AppWrapper's workload admitted")
            # play the AppWrapper and JobSet controllers: a JobSet under the AppWrapper, its Job under it
            jobset = {"apiVersion": JOBSETS.api_version, "kind": "JobSet", "metadata": {
                "name": "js", "namespace": q.ns, "ownerReferences": [{
                    "apiVersion": APPWRAPPERS.api_version, "kind": "AppWrapper", "name": "aw", "uid": uid,
                    "controller": True}]},
                "spec": {"replicatedJobs": [{"name": "w", "template": {}}]}}
            js_uid = msgspec.json.decode(await kc.create(JOBSETS, jobset, q.ns))["metadata"]["uid"]
            job = _job(q.ns, suspend=False)
            job["metadata"].update(name="js-w-0", labels={}, ownerReferences=[{
                "apiVersion": JOBSETS.api_version, "kind": "JobSet", "name": "js", "uid": js_uid,
                "controller": True}])
            job_uid = msgspec.json.decode(await kc.create(BY_KIND["Job"], job, q.ns))["metadata"]["uid"]
            await asyncio.sleep(3)  # seen by the Job integration: a top-level Job would be suspended by now
            assert not (await get(kc, "Job", "js-w-0", q.ns))["spec"].get("suspend"), "left running"
            workloads = [msgspec.json.decode(raw) for raw in (await kc.list(BY_KIND["Workload"])).items]
            owners = {ref["uid"] for w in workloads if w["metadata"]["namespace"] == q.ns
                      for ref in w["metadata"].get("ownerReferences", [])}
            assert owners == {uid} and job_uid not in owners, "the Job is not queued apart"
