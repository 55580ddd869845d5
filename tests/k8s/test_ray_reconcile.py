"""The Ray integrations' reconcile (:mod:`connectors.k8s.ray_integration`) over a mirror and a fake client: off unless
the framework is listed, a running queued RayJob suspended then given its Workload, one naming an existing cluster
left alone, a finished RayJob's Workload finished, a running RayCluster whose Workload is not admitted suspended
with its templates restored, a queued RayJob's RayCluster given no Workload and held while the RayJob's is missing or
not admitted, the connector reading a submitter Job's and a RayCluster's RayJob from the RayJob integration (no
cluster needed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client

from connectors.k8s import child_jobs, podsetinfo
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from connectors.k8s.mirror import Mirror
from connectors.k8s.ray_integration import RayClusterIntegration, RayJobIntegration
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from projections.workloads import ADMITTED

UID = "ray-uid"
JOB_WL = rj.workload_name("job", UID)
CLUSTER_WL = rc.workload_name("rc", UID)
JOB_ON = {"integrations": {"frameworks": ["batch/job", "ray.io/rayjob"]}}
BOTH_ON = {"integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]}}
HOLDING = {**BOTH_ON, "featureGates": {"SkipChildJobSuspension": False}}
"""Kueue v0.20's SkipChildJobSuspension off: a child RayCluster is held for its RayJob's Workload."""
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "ray:2", "resources": {"requests": {"cpu": "1"}}}]}}


def cluster_spec() -> dict[str, Any]:
    return {"headGroupSpec": {"template": TEMPLATE},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "template": TEMPLATE}]}


def raw_job(suspend: bool = True, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": suspend, "shutdownAfterJobFinishes": True, "submissionMode": "K8sJobMode",
                     "rayClusterSpec": cluster_spec(), **spec},
            "status": status or {"jobDeploymentStatus": "Suspended" if suspend else "Running"}}


def raw_cluster(suspend: bool | None = True, labels: dict[str, str] | None = None,
                owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rc", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                            "labels": {"kueue.x-k8s.io/queue-name": "lq"} if labels is None else labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    spec = cluster_spec()
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def workload(name: str, kind: str, owner: str, pod_sets: list[str], uid: str = UID) -> o.Workload:
    return watched_jobs.owned_workload(name, ("ray.io/v1", kind, owner, uid), [o.PodSet(name=n, count=1)
                                                                               for n in pod_sets])


def job_integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                    ) -> tuple[RayJobIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(RayJobIntegration, raw, *objs, config=JOB_ON if config is None else config)


def cluster_integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                        ) -> tuple[RayClusterIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(RayClusterIntegration, raw, *objs, config=BOTH_ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = job_integration(raw_job(suspend=False), config={})
    await integ.reconcile("ns/job")
    cinteg, cclient, cappended = cluster_integration(raw_cluster(suspend=False), config=JOB_ON)
    await cinteg.reconcile("ns/rc")
    assert (client.created, client.patches, appended, cclient.patches, cappended) == ([], [], [], [], [])


@pytest.mark.asyncio
async def test_a_running_rayjob_without_a_workload_is_suspended_first() -> None:
    integ, client, appended = job_integration(raw_job(suspend=False))
    await integ.reconcile("ns/job")
    assert client.patches == [("RayJob", "job", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert [(e.kind, e.action) for e in appended] == [("RayJob", "Stopped")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_suspended_queued_rayjob_gets_its_workload_once_not_active() -> None:
    integ, client, appended = job_integration(raw_job(status={"jobDeploymentStatus": "Initializing"}))
    await integ.reconcile("ns/job")
    assert client.created == [], "Kueue waits while the deployment is active"
    integ, client, appended = job_integration(raw_job())
    await integ.reconcile("ns/job")
    (body,) = client.created
    assert body["metadata"]["name"] == JOB_WL and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [
        ("head", 1), ("workers", 2), ("submitter", 1)]
    assert [(e.kind, e.action) for e in appended] == [("RayJob", "CreatedWorkload")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_rayjob_naming_an_existing_cluster_is_left_alone() -> None:
    integ, client, appended = job_integration(raw_job(suspend=False, clusterSelector={"ray.io/cluster": "c"}))
    await integ.reconcile("ns/job")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
@pytest.mark.parametrize(("status", "reason"), [("SUCCEEDED", "Succeeded"), ("FAILED", "Failed")])
async def test_a_finished_rayjob_finishes_its_workload_with_its_message(status: str, reason: str) -> None:
    deployment = "Complete" if status == "SUCCEEDED" else "Failed"
    raw = raw_job(suspend=False, status={"jobDeploymentStatus": deployment, "jobStatus": status, "message": "m"})
    integ, _, appended = job_integration(raw, workload(JOB_WL, "RayJob", "job", ["head", "workers", "submitter"]))
    await integ.reconcile("ns/job")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished)
    assert (finished.key, finished.reason, finished.message) == (f"ns/{JOB_WL}", reason, "m")


@pytest.mark.asyncio
async def test_a_running_raycluster_whose_workload_is_not_admitted_is_suspended_and_restored() -> None:
    raw = raw_cluster(suspend=False)
    raw["spec"]["headGroupSpec"]["template"] = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"p": "a"}}}
    integ, client, appended = cluster_integration(raw, workload(CLUSTER_WL, "RayCluster", "rc", ["head", "workers"]))
    await integ.reconcile("ns/rc")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["suspend"]) == ("RayCluster", "rc", True)
    assert patch["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] is None
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("RayCluster", "Stopped")]


# --- a Workload the object no longer matches (Kueue's EquivalentToWorkload) ---------------------------------------


def built(integ: Any, raw: dict[str, Any], name: str) -> o.Workload:
    """The Workload the integration makes for ``raw``, as the apiserver would store it (``ns``, resourceVersion 3)."""
    body = integ.workload_for(raw, name)
    body["metadata"].update(namespace="ns", uid="wl-uid", resourceVersion="3")
    return msgspec.convert(body, o.Workload)


def admitted(integ: Any, key: str, *pod_sets: str) -> None:
    """The log's view of Workload ``key``: admitted, each of ``pod_sets`` on flavor ``spot``."""
    wl = integ.state.workloads[key]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "spot"}) for n in pod_sets])
    wl.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    wl.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)


def with_workers(raw: dict[str, Any], replicas: int) -> dict[str, Any]:
    spec = raw["spec"].get("rayClusterSpec", raw["spec"])
    spec["workerGroupSpecs"][0]["replicas"] = replicas
    return raw


@pytest.mark.asyncio
async def test_a_running_raycluster_scaled_past_its_admitted_workload_is_stopped_then_given_a_new_one() -> None:
    """Kueue's ``raycluster_controller_test.go`` "checking the job gets suspended when parallelism changes and the
    added node selectors are removed": stopped with its templates restored, then its Workload deleted
    (``DeletedWorkload``) once it is, to be made anew with the new count."""
    integ, _, _ = cluster_integration(None)
    wl = built(integ, raw_cluster(), CLUSTER_WL)
    running = with_workers(raw_cluster(suspend=False), 3)
    running["spec"]["workerGroupSpecs"][0]["template"] = {**TEMPLATE, "spec": {**TEMPLATE["spec"],
                                                                                "nodeSelector": {"i": "spot"}}}
    integ, client, appended = cluster_integration(running, wl)
    admitted(integ, f"ns/{CLUSTER_WL}", "head", "workers")
    await integ.reconcile("ns/rc")
    (kind, _, patch), = client.patches
    assert (kind, patch["spec"]["suspend"]) == ("RayCluster", True)
    assert "nodeSelector" not in patch["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("RayCluster", "Stopped", "No matching Workload; restoring pod templates according to existent Workload")]
    integ, client, appended = cluster_integration(with_workers(raw_cluster(suspend=True), 3), wl)
    admitted(integ, f"ns/{CLUSTER_WL}", "head", "workers")
    await integ.reconcile("ns/rc")
    assert client.deleted == [("Workload", CLUSTER_WL)]
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("RayCluster", "DeletedWorkload")]


@pytest.mark.asyncio
async def test_a_suspended_rayjob_scaled_has_its_pending_workload_rewritten() -> None:
    """Kueue's ``rayjob_controller_test.go`` "checking the workload is updated with new count"."""
    integ, _, _ = job_integration(None)
    wl = built(integ, raw_job(), JOB_WL)
    integ, client, appended = job_integration(with_workers(raw_job(), 3), wl)
    await integ.reconcile("ns/job")
    (kind, _, patch), = client.patches
    assert kind == "Workload"
    assert [(ps["name"], ps["count"]) for ps in patch["spec"]["podSets"]] == [("head", 1), ("workers", 3),
                                                                             ("submitter", 1)]
    assert [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("RayJob", "UpdatedWorkload", f"Updated not matching Workload for suspended job: ns/{JOB_WL}")]


@pytest.mark.asyncio
async def test_a_second_workload_the_raycluster_does_not_match_is_deleted() -> None:
    """Kueue's "checking a second non-matching workload is deleted": the one that matches is kept."""
    integ, _, _ = cluster_integration(None)
    first = built(integ, raw_cluster(), CLUSTER_WL)
    first = msgspec.structs.replace(first, metadata=msgspec.structs.replace(
        first.metadata, creation_timestamp="2026-01-01T00:00:05Z"))
    second = built(integ, with_workers(raw_cluster(), 3), "raycluster-second-workload-1a2b3")
    second = msgspec.structs.replace(second, metadata=msgspec.structs.replace(
        second.metadata, uid="wl-2", creation_timestamp="2026-01-01T00:00:00Z"))
    integ, client, appended = cluster_integration(raw_cluster(), first, second)
    await integ.reconcile("ns/rc")
    assert client.deleted == [("Workload", "raycluster-second-workload-1a2b3")]
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("RayCluster", "DeletedWorkload")]


@pytest.mark.asyncio
async def test_a_running_rayjob_on_the_workload_made_for_it_is_left_running() -> None:
    """No false mismatch: a RayJob with what its head's pod set counts besides the template (GCS fault tolerance,
    the History Server collector) and the default submitter its start wrote, on the Workload made for it."""
    raw = raw_job()
    raw["metadata"]["annotations"] = {"ray.io/ft-enabled": "true"}
    raw["spec"]["rayClusterSpec"]["historyServerOptions"] = {"collectorOptions": {}}
    integ, _, _ = job_integration(None)
    wl = built(integ, raw, JOB_WL)
    started = rj.start_patch(raw, [podsetinfo.PodSetInfo(node_selector={"i": "spot"})] * 3)["spec"]
    running = raw_job(suspend=False, status={"jobDeploymentStatus": "Running"})
    running["metadata"]["annotations"] = raw["metadata"]["annotations"]
    running["spec"]["rayClusterSpec"]["historyServerOptions"] = {"collectorOptions": {}}
    running["spec"]["submitterPodTemplate"] = started["submitterPodTemplate"]
    integ, client, appended = job_integration(running, wl)
    admitted(integ, f"ns/{JOB_WL}", "head", "workers", "submitter")
    await integ.reconcile("ns/job")
    assert (client.patches, client.deleted) == ([], [])
    assert [e for e in appended if isinstance(e, ev.JobActed)] == []


RAYJOB_OWNER = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": "job-uid", "controller": True}


def listed_rayjob(labels: dict[str, str] | None = None) -> rj.RayJob:
    """The RayJob ``ns/job`` (uid ``job-uid``) as the RayJob integration lists it, queued unless ``labels``."""
    raw = raw_job()
    raw["metadata"]["uid"] = "job-uid"
    if labels is not None:
        raw["metadata"]["labels"] = labels
    rayjob: rj.RayJob = msgspec.convert(raw, rj.RayJob)
    return rayjob


def child_integration(raw: dict[str, Any], *objs: o.KObject, rayjob: rj.RayJob | None,
                      config: dict[str, Any] | None = None) -> tuple[RayClusterIntegration, Client, list[ev.AnyEvent]]:
    """:func:`cluster_integration` reading RayCluster parents from the RayJobs listed (``rayjob``), as the connector
    wires it."""
    integ, client, appended = cluster_integration(raw, *objs, config=config)
    integ.parents.hold("RayJob", {} if rayjob is None else {rayjob.key: rayjob})
    return integ, client, appended


@pytest.mark.asyncio
async def test_a_queued_rayjobs_raycluster_gets_no_workload_and_is_held_while_the_rayjob_is_not_admitted() -> None:
    """KubeRay labels the cluster as the RayJob: it still gets no Workload of its own; the RayJob's Workload
    pending, the running cluster is suspended (Kueue's child job rule); admitted, it is left running."""
    parent = workload(JOB_WL, "RayJob", "job", ["head", "workers"], uid="job-uid")
    integ, client, appended = child_integration(raw_cluster(suspend=False, owner=RAYJOB_OWNER), parent,
                                                rayjob=listed_rayjob(), config=HOLDING)
    await integ.reconcile("ns/rc")
    assert client.created == []
    assert client.patches == [("RayCluster", "rc", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert [(e.kind, e.action) for e in appended] == [("RayCluster", "Suspended")]  # type: ignore[attr-defined]
    integ, client, appended = child_integration(raw_cluster(suspend=True, owner=RAYJOB_OWNER), parent,
                                                rayjob=listed_rayjob(), config=HOLDING)
    await integ.reconcile("ns/rc")
    assert (client.created, client.patches) == ([], [])
    integ, client, appended = child_integration(raw_cluster(suspend=False, owner=RAYJOB_OWNER), parent,
                                                rayjob=listed_rayjob(), config=HOLDING)
    integ.state.workloads[f"ns/{JOB_WL}"].phase = ADMITTED
    await integ.reconcile("ns/rc")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
async def test_a_queued_rayjobs_raycluster_is_its_child_before_the_rayjob_has_a_workload() -> None:
    """Kueue finds the managed ancestor by its queue-name label, not by its Workload: a cluster KubeRay makes
    before the RayJob's Workload exists is held, and gets none of its own."""
    integ, client, appended = child_integration(raw_cluster(suspend=True, owner=RAYJOB_OWNER), rayjob=listed_rayjob(), config=HOLDING)
    await integ.reconcile("ns/rc")
    assert (client.created, client.patches, appended) == ([], [], [])
    integ, client, appended = child_integration(raw_cluster(suspend=False, owner=RAYJOB_OWNER), rayjob=listed_rayjob(), config=HOLDING)
    await integ.reconcile("ns/rc")
    assert client.created == []
    assert [(e.kind, e.action) for e in appended] == [("RayCluster", "Suspended")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_raycluster_under_an_unqueued_rayjob_or_with_the_rayjob_integration_off_is_its_own() -> None:
    """The RayJob naming no queue is no managed ancestor, even with a Workload (its own, say, from when it named
    one); nor is a RayJob with its integration off."""
    parent = workload(JOB_WL, "RayJob", "job", ["head"], uid="job-uid")
    integ, client, _ = child_integration(raw_cluster(owner=RAYJOB_OWNER), parent, rayjob=listed_rayjob(labels={}))
    await integ.reconcile("ns/rc")
    assert [b["metadata"]["name"] for b in client.created] == [CLUSTER_WL], "the RayJob names no queue"
    only_clusters = {"integrations": {"frameworks": ["batch/job", "ray.io/raycluster"]}}
    integ, client, _ = child_integration(raw_cluster(owner=RAYJOB_OWNER), parent, rayjob=listed_rayjob(),
                                         config=only_clusters)
    await integ.reconcile("ns/rc")
    assert [b["metadata"]["name"] for b in client.created] == [CLUSTER_WL]


@pytest.mark.asyncio
async def test_a_raycluster_whose_rayjob_is_not_listed_yet_waits() -> None:
    integ, client, appended = child_integration(raw_cluster(owner=RAYJOB_OWNER), rayjob=None)
    await integ.reconcile("ns/rc")
    assert (client.created, client.patches, appended) == ([], [], [])


def test_the_connector_reads_a_jobs_and_a_rayclusters_rayjob_parent_from_the_rayjob_integration() -> None:
    """A RayJob's submitter Job (K8sJobMode) and its RayCluster have the RayJob as controller: the Job and
    RayCluster integrations find it among the RayJobs the RayJob integration lists, a queued one their ancestor."""
    connector = watched_jobs.connector(BOTH_ON)
    rayjob = listed_rayjob()
    connector.rayjobs.known[rayjob.key] = rayjob  # type: ignore[union-attr]
    owner = [o.OwnerReference(api_version="ray.io/v1", kind="RayJob", name="job", uid="job-uid", controller=True)]
    submitter = o.Job(metadata=o.ObjectMeta(name="job-submitter", namespace="ns", uid="s", owner_references=owner))
    config = load_config(BOTH_ON)
    parents = connector.jobs.parents  # type: ignore[union-attr]
    assert connector.rayclusters.parents is parents  # type: ignore[union-attr]  # one registry for all kinds
    cluster = msgspec.convert(raw_cluster(owner=RAYJOB_OWNER), rc.RayCluster)
    for child in (submitter, cluster):
        found = child_jobs.managed_ancestor(child.metadata, parents.parent_of(config, {}), False)
        assert found == rayjob.metadata


def test_what_was_done_to_a_rayjob_is_recorded_as_an_event_on_the_rayjob() -> None:
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/job", uid=UID, kind="RayJob", action="CreatedWorkload",
                                          workload=f"ns/{JOB_WL}")))
    involved = mirror.kube_events.ready[1].before
    assert (involved.api_version, involved.kind, involved.name) == ("ray.io/v1", "RayJob", "job")  # type: ignore[union-attr]


RUNTIME_SIZES = "kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes"
GENERATION = "kueue.x-k8s.io/raycluster-generation"
WORKER_AUTOSCALING = {**BOTH_ON, "featureGates": {"MultiKueueRayInTreeAutoscaling": True}}


def _reflected(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` handed to MultiKueue, the worker's counts reflected on it (KEP-13243)."""
    raw["metadata"]["annotations"] = {RUNTIME_SIZES: '[{"name":"workers","count":4}]', GENERATION: "w-7", "keep": "x"}
    spec = raw["spec"]["rayClusterSpec"] if raw["kind"] == "RayJob" else raw["spec"]
    raw["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    spec["enableInTreeAutoscaling"] = True
    return raw


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
async def test_stopping_a_manager_object_drops_its_reflected_counts_under_the_gate(kind: str) -> None:
    """KEP-13243: the manager suspending an object whose worker's counts are reflected on it removes the counts'
    annotation in the same write (its next admission reserves the spec's counts); the revision and other
    annotations stay. Gate off (alpha, default): the patch is as before."""
    for config, want in ((WORKER_AUTOSCALING, {"annotations": {RUNTIME_SIZES: None}, "resourceVersion": "5"}),
                         (BOTH_ON, {"resourceVersion": "5"})):
        if kind == "RayCluster":
            integ, client, _ = cluster_integration(_reflected(raw_cluster(suspend=False)),
                                                   workload(CLUSTER_WL, kind, "rc", ["head", "workers"]), config=config)
            key = "ns/rc"
        else:
            raw = _reflected(raw_job(suspend=False, status={"jobDeploymentStatus": "Running"}))
            integ, client, _ = watched_jobs.integration(
                RayJobIntegration, raw, workload(JOB_WL, kind, "job", ["head", "workers", "submitter"]), config=config)
            key = "ns/job"
        await integ.reconcile(key)
        (_, _, patch), = client.patches
        assert patch["metadata"] == want, config
        suspended = patch["spec"]["suspend"]
        assert suspended is True
