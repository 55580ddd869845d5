"""The AppWrapper integration's reconcile (:mod:`connectors.k8s.appwrapper_integration`) over a mirror and a fake
client: off unless the framework is listed, a running queued AppWrapper suspended then given its Workload, an
admitted one started with its components' podSetInfos, a not admitted one suspended with them cleared, a finished
one's Workload finished; what it wraps (a batch/v1 Job, a Pod) is its child, not queued apart (no cluster needed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client, actions

from connectors.k8s import appwrapper as aw
from connectors.k8s import child_jobs, job_selection, pod_webhook
from connectors.k8s.appwrapper_integration import AppWrapperIntegration
from connectors.k8s.job_events import CONTROLLER_OF
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from projections.workloads import ADMITTED

UID = "aw-uid"
WL = aw.workload_name("aw", UID)
ON = {"integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]}}
POD = {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
       "spec": {"parallelism": 2, "template": POD}}


def raw_aw(suspend: bool = True, status: dict[str, Any] | None = None, **component: Any) -> dict[str, Any]:
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": "aw", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": suspend, "components": [{"template": JOB, **component}]},
            "status": status or {"phase": "Suspended" if suspend else "Running"}}


def workload(uid: str = UID) -> o.Workload:
    return watched_jobs.owned_workload(WL, ("workload.codeflare.dev/v1beta2", "AppWrapper", "aw", uid), [
        o.PodSet(name="aw-0", count=2, template=msgspec.convert(POD, o.PodTemplateSpec))])


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                ) -> tuple[AppWrapperIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(AppWrapperIntegration, raw, *objs, config=ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = integration(raw_aw(suspend=False), config={"integrations": {"frameworks": ["batch/job"]}})
    await integ.reconcile("ns/aw")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
async def test_a_running_appwrapper_without_a_workload_is_suspended_then_given_one() -> None:
    integ, client, appended = integration(raw_aw(suspend=False))
    await integ.reconcile("ns/aw")
    assert client.patches == [("AppWrapper", "aw", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert actions(appended) == [("AppWrapper", "Stopped")]
    integ, client, appended = integration(raw_aw())
    await integ.reconcile("ns/aw")
    (body,) = client.created
    assert body["metadata"]["name"] == WL and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("aw-0", 2)]
    assert actions(appended) == [("AppWrapper", "CreatedWorkload")]


@pytest.mark.asyncio
async def test_no_workload_for_an_unqueued_or_a_completed_appwrapper() -> None:
    """Kueue's "workload isn't created due to manageJobsWithoutQueueName=false" and "workload shouldn't be
    recreated for completed job" cases; with manageJobsWithoutQueueName an unqueued one gets its Workload."""
    unqueued = raw_aw()
    unqueued["metadata"]["labels"] = {}
    integ, client, appended = integration(unqueued)
    await integ.reconcile("ns/aw")
    assert (client.created, client.patches, appended) == ([], [], [])
    integ, client, appended = integration(raw_aw(suspend=False, status={"phase": "Succeeded"}))
    await integ.reconcile("ns/aw")
    assert (client.created, client.patches) == ([], [])
    integ, client, _ = integration(unqueued, config={**ON, "manageJobsWithoutQueueName": True})
    await integ.reconcile("ns/aw")
    (body,) = client.created
    assert "queueName" not in body["spec"]


@pytest.mark.asyncio
async def test_an_admitted_appwrapper_is_started_with_its_components_pod_set_infos() -> None:
    integ, client, appended = integration(raw_aw(), workload())
    wl = integ.state.workloads[f"ns/{WL}"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="aw-0", flavors={"cpu": "default"}, count=2)])
    await integ._start(integ.known["ns/aw"], wl, workload())  # the step once the apiserver shows the admission
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["suspend"]) == ("AppWrapper", "aw", False)
    (component,) = patch["spec"]["components"]
    (info,) = component["podSetInfos"]
    assert info["labels"]["kueue.x-k8s.io/podset"] == "aw-0"
    assert component["template"] == JOB, "the wrapped template is left as written"
    assert ("AppWrapper", "Started") in actions(appended)


@pytest.mark.asyncio
@pytest.mark.parametrize(("eviction", "reason"), watched_jobs.EVICTIONS)
async def test_a_kind_evicted_while_its_start_reads_it_is_neither_started_nor_failed_and_starts_once_readmitted(
        eviction: type[ev.WorkloadDeactivated | ev.WorkloadPreempted], reason: str) -> None:
    """Every watched kind reads the object before its start (JobSet, MPIJob, the Ray kinds, AppWrapper, ...): an
    eviction the fold applies meanwhile is not started on, nor finished ``FailedToStart`` for want of an admission;
    the start is forgotten, so once admitted again the same version of the object is started."""
    integ, client, appended = integration(raw_aw(), workload())
    await watched_jobs.start_overtaken_by(eviction, reason, integ, client, appended, "ns/aw", workload(), "aw-0")
    assert [(kind, name, patch["spec"]["suspend"]) for kind, name, patch in client.patches] == [
        ("AppWrapper", "aw", False)]
    assert actions(appended) == [("AppWrapper", "Started")]


@pytest.mark.asyncio
async def test_a_running_appwrapper_whose_workload_is_not_admitted_is_suspended_with_its_infos_cleared() -> None:
    raw = raw_aw(suspend=False, podSetInfos=[{"nodeSelector": {"pool": "a"}}])
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/aw")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["suspend"]) == ("AppWrapper", "aw", True)
    assert patch["spec"]["components"] == [{"template": JOB}]
    assert actions(appended) == [("AppWrapper", "Stopped")]


@pytest.mark.asyncio
@pytest.mark.parametrize(("phase", "reason", "message"), [("Succeeded", "Succeeded", "AppWrapper finished successfully"),
                                                          ("Failed", "Failed", "AppWrapper failed")])
async def test_a_finished_appwrapper_finishes_its_workload(phase: str, reason: str, message: str) -> None:
    integ, _, appended = integration(raw_aw(suspend=False, status={"phase": phase}), workload())
    await integ.reconcile("ns/aw")
    (finished,) = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert (finished.key, finished.reason, finished.message) == (f"ns/{WL}", reason, message)


@pytest.mark.asyncio
async def test_a_suspended_appwrapper_with_more_replicas_has_its_workload_rewritten() -> None:
    """The shared reconciler's step (Kueue's EquivalentToWorkload/updateWorkloadToMatchJob) for AppWrappers too:
    the pod sets it makes now; one that still matches is left alone."""
    integ, client, appended = integration(raw_aw(), workload())
    await integ.reconcile("ns/aw")
    assert (client.patches, client.created) == ([], []), "it matches its Workload"
    integ, client, appended = integration(raw_aw(podSets=[{"path": "template.spec.template", "replicas": 3}]),
                                          workload())
    await integ.reconcile("ns/aw")
    (kind, name, patch), = client.patches
    assert (kind, name) == ("Workload", WL)
    assert [(ps["name"], ps["count"]) for ps in patch["spec"]["podSets"]] == [("aw-0", 3)]
    assert actions(appended) == [("AppWrapper", "UpdatedWorkload")]


@pytest.mark.asyncio
async def test_a_suspended_appwrapper_updated_to_a_max_exec_time_kueue_reads_as_none_has_it_removed() -> None:
    """AppWrapper's update is checked by the generic update rules only, so a suspended one may change
    ``max-exec-time-seconds`` to ``"0"``; Kueue's job framework reads that as no maximum execution time."""
    raw = raw_aw()
    raw["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "0"
    obs = workload()
    spec = msgspec.structs.replace(obs.spec, maximum_execution_time_seconds=60)
    obs = msgspec.structs.replace(obs, spec=spec)
    integ, client, appended = integration(raw, obs)
    await integ.reconcile("ns/aw")
    (kind, name, patch), = client.patches
    assert (kind, name) == ("Workload", WL) and patch["spec"]["maximumExecutionTimeSeconds"] is None
    assert actions(appended) == [("AppWrapper", "UpdatedWorkload")]


# --- what it wraps ------------------------------------------------------------------------------------------------


AW_OWNER = [o.OwnerReference(api_version="workload.codeflare.dev/v1beta2", kind="AppWrapper", name="aw", uid=UID,
                             controller=True)]


def test_the_connector_finds_a_wrapped_job_under_its_queued_appwrapper() -> None:
    """The AppWrapper controller makes the wrapped Job under its controller reference: the Job integration finds
    the queued AppWrapper among those the AppWrapper integration lists, its ancestor (so no Workload of its own)."""
    connector = watched_jobs.connector(ON)
    listed = msgspec.convert(raw_aw(), aw.AppWrapper)
    connector.appwrappers.known[listed.key] = listed  # type: ignore[union-attr]
    wrapped = o.Job(metadata=o.ObjectMeta(name="job", namespace="ns", uid="j", owner_references=AW_OWNER))
    parents = connector.jobs.parents  # type: ignore[union-attr]
    assert connector.appwrappers.parents is parents  # type: ignore[union-attr]  # one registry for all kinds
    found = child_jobs.managed_ancestor(wrapped.metadata, parents.parent_of(load_config(ON), {}), False)
    assert found == listed.metadata
    off = load_config({"integrations": {"frameworks": ["batch/job"]}})
    assert child_jobs.managed_ancestor(wrapped.metadata, parents.parent_of(off, {}), False) is None


def test_an_appwrapper_is_a_parent_kueue_runs_only_with_its_integration_on() -> None:
    owner = ("workload.codeflare.dev/v1beta2", "AppWrapper")
    assert job_selection.kueue_owner(owner, load_config(ON).frameworks)
    assert not job_selection.kueue_owner(owner, load_config({}).frameworks)
    unqueued = load_config({**ON, "manageJobsWithoutQueueName": True})
    assert not job_selection.manages_unqueued(owner, unqueued), "its wrapped objects are not queued apart"
    assert CONTROLLER_OF["AppWrapper"] == "workload.codeflare.dev/appwrapper-kueue-controller"


@pytest.mark.asyncio
async def test_the_pod_webhook_leaves_a_pod_an_appwrapper_wraps_to_it() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {
        "kueue.x-k8s.io/queue-name": "lq"}, "ownerReferences": [{
            "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw", "uid": UID,
            "controller": True}]}, "spec": POD["spec"]}
    body = msgspec.json.encode({"request": {"uid": "r", "operation": "CREATE", "namespace": "ns", "object": pod}})

    async def labels(namespace: str) -> dict[str, str]:
        return {}

    async def no(*_: Any) -> bool:
        return False

    async def review(frameworks: list[str]) -> dict[str, Any]:
        defaulting = pod_webhook.PodDefaulting.of(load_config({"integrations": {"frameworks": frameworks}}))
        return (await pod_webhook.review(body, defaulting, labels, no, no))["response"]

    assert "patch" not in await review(["pod", "workload.codeflare.dev/appwrapper"]), "its AppWrapper's to run"
    assert "patch" in await review(["pod"]), "the AppWrapper integration off: the Pod is Kueue's, queued apart"
