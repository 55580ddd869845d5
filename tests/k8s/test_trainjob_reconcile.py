"""The TrainJob integration's reconcile (:mod:`connectors.k8s.trainjob_integration`) over a mirror and a fake client:
off unless the framework is listed, a running queued TrainJob suspended then given its Workload once its runtime is
there (and marked again when the runtime comes), the admission written as overrides at start, a stop that suspends
then restores the overrides once no Job is active, a finished TrainJob's Workload finished, its JobSet a child held
while the TrainJob's Workload is not admitted, the connector reading a JobSet's TrainJob parent, a Workload the
TrainJob no longer matches rewritten (a prebuilt one finished out of sync), one with the counts kueue-es gave
an MPI TrainJob before session 46 made anew (no cluster needed)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client, actions

from connectors.k8s import child_jobs
from connectors.k8s import jobset as js
from connectors.k8s import trainjob as tj
from connectors.k8s.jobset_integration import JobSetIntegration
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.trainjob_integration import TrainJobIntegration
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from projections.workloads import ADMITTED

UID = "tj-uid"
WL = tj.workload_name("job", UID)
ON = {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]}}
HOLDING = {**ON, "featureGates": {"SkipChildJobSuspension": False}}
"""Kueue v0.20's SkipChildJobSuspension off: a child JobSet is held for its TrainJob's Workload."""
PODSET = "kueue.x-k8s.io/podset"
RUNTIME_SPEC = {"mlPolicy": {"numNodes": 2}, "template": {"spec": {"replicatedJobs": [{
    "name": "node", "template": {"metadata": {"labels": {tj.ANCESTOR_LABEL: "trainer"}}, "spec": {"template": {
        "spec": {"containers": [{"name": "node", "resources": {"requests": {"cpu": "1"}}}]}}}}}]}}}
KUEUES = {"targetJobs": [{"name": "node"}], "metadata": {"labels": {PODSET: "node"}}}
NODE_TEMPLATE = msgspec.convert({"spec": {"containers": [{"name": "node", "resources": {"requests": {"cpu": "1"}}}]}},
                                o.PodTemplateSpec)
"""The runtime's trainer pod template: the Workload's pod set matches the TrainJob's JobSet."""


def raw_job(suspend: bool = True, overrides: list[dict[str, Any]] | None = None,
            status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"suspend": suspend, "runtimeRef": {"name": "torch", "kind": "ClusterTrainingRuntime"}}
    if overrides is not None:
        spec["podTemplateOverrides"] = overrides
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": spec, "status": status or {}}


def workload(uid: str = UID) -> o.Workload:
    return watched_jobs.owned_workload(WL, ("trainer.kubeflow.org/v1alpha1", "TrainJob", "job", uid),
                                       [o.PodSet(name="node", count=2, template=NODE_TEMPLATE)])


def runtime(name: str = "torch") -> tj.Runtime:
    return msgspec.convert({"metadata": {"name": name, "uid": "rt"}, "spec": RUNTIME_SPEC}, tj.Runtime)


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None,
                with_runtime: bool = True) -> tuple[TrainJobIntegration, Client, list[ev.AnyEvent]]:
    integ, client, appended = watched_jobs.integration(TrainJobIntegration, raw, *objs,
                                                       config=ON if config is None else config)
    if with_runtime:
        integ.cluster_runtimes.known[runtime().key] = runtime()
    return integ, client, appended


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = integration(raw_job(suspend=False), config={})
    await integ.reconcile("ns/job")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
async def test_a_running_trainjob_without_a_workload_is_suspended_first() -> None:
    integ, client, appended = integration(raw_job(suspend=False), with_runtime=False)
    await integ.reconcile("ns/job")
    assert client.patches == [("TrainJob", "job", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert actions(appended) == [("TrainJob", "Stopped")]


@pytest.mark.asyncio
async def test_a_trainjob_waits_for_its_runtime_then_gets_its_workload() -> None:
    integ, client, appended = integration(raw_job(), with_runtime=False)
    await integ.reconcile("ns/job")
    assert (client.created, appended) == ([], []), "no runtime, no pod sets: no Workload yet"
    integ.dirty.clear()
    integ.cluster_runtimes.known[runtime().key] = runtime()
    integ._runtimes_changed({runtime().key, "/other"})
    assert integ.dirty == {"ns/job"}, "the runtime's arrival marks the TrainJob naming it"
    await integ.reconcile("ns/job")
    (body,) = client.created
    assert body["metadata"]["name"] == WL and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("node", 2)]
    assert actions(appended) == [("TrainJob", "CreatedWorkload")]


@pytest.mark.asyncio
async def test_a_namespaced_runtime_is_read_from_the_trainjobs_namespace() -> None:
    raw = raw_job()
    raw["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    integ, client, _ = integration(raw, with_runtime=False)
    integ.cluster_runtimes.known[runtime().key] = runtime()
    await integ.reconcile("ns/job")
    assert client.created == [], "a ClusterTrainingRuntime of that name is not it"
    namespaced = msgspec.convert({"metadata": {"name": "torch", "namespace": "ns"}, "spec": RUNTIME_SPEC}, tj.Runtime)
    integ.runtimes.known[namespaced.key] = namespaced
    await integ.reconcile("ns/job")
    assert [b["metadata"]["name"] for b in client.created] == [WL]


def refused_by_the_trainer(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The Trainer's validating webhook: ``podTemplateOverrides`` may change only on an update whose new TrainJob is
    suspended (its JobSet plugin's ``checkPodTemplateOverridesImmutability``)."""
    changed = old["spec"].get("podTemplateOverrides") != new["spec"].get("podTemplateOverrides")
    return changed and new["spec"].get("suspend") is not True


@pytest.mark.asyncio
async def test_start_writes_the_overrides_while_suspended_then_unsuspends() -> None:
    """Kueue's ``RunWithPodSetsInfo`` updates the overrides while the TrainJob is still suspended, and the reconciler
    unsuspends it after: one write doing both is refused by the Trainer, and the TrainJob would never start."""
    raw = raw_job()
    integ, client, appended = integration(raw, workload())
    wl = SimpleNamespace(key=f"ns/{WL}", name=WL, queue_name="lq", pod_sets=[], check_states={}, labels={},
                         phase=ADMITTED, evicted="", active=True, admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
                             o.PodSetAssignment(name="node", flavors={"cpu": "f"}, count=2)]))
    await integ._start(integ.known["ns/job"], wl, workload())  # type: ignore[arg-type]
    stored = raw
    for kind, name, patch in client.patches:
        assert (kind, name) == ("TrainJob", "job")
        written = merge_patched(stored, {"spec": patch["spec"]})
        assert not refused_by_the_trainer(stored, written), f"the Trainer refuses {patch}"
        stored = written
    assert [patch["metadata"] for _, _, patch in client.patches] == [{"resourceVersion": "5"}, {"resourceVersion": "9"}]
    assert stored["spec"]["suspend"] is False
    (override,) = stored["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}] and override["metadata"]["labels"][PODSET] == "node"
    assert actions(appended) == [("TrainJob", "Started")]


@pytest.mark.asyncio
@pytest.mark.parametrize(("eviction", "reason"), watched_jobs.EVICTIONS)
async def test_a_trainjob_evicted_while_its_start_reads_it_is_neither_started_nor_failed_and_starts_once_readmitted(
        eviction: type[ev.WorkloadDeactivated | ev.WorkloadPreempted], reason: str) -> None:
    """TrainJob's own start (two writes) reads the TrainJob first too: as every watched kind's (AppWrapper's
    test)."""
    integ, client, appended = integration(raw_job(), workload())
    await watched_jobs.start_overtaken_by(eviction, reason, integ, client, appended, "ns/job", workload(), "node")
    assert [(kind, name, patch["spec"].get("suspend")) for kind, name, patch in client.patches] == [
        ("TrainJob", "job", None), ("TrainJob", "job", False)], "the overrides while suspended, then unsuspended"
    assert actions(appended) == [("TrainJob", "Started")]


@pytest.mark.asyncio
async def test_an_admitted_trainjob_left_suspended_with_kueues_overrides_has_them_removed_first() -> None:
    """Its unsuspend (the start's second write) failed: Kueue's overrides go first (no Job is active), and the
    suspended TrainJob without them is then started anew, as any admitted suspended one."""
    integ, client, _ = integration(raw_job(overrides=[KUEUES]), workload())
    integ.state.workloads[f"ns/{WL}"].phase = ADMITTED
    await integ.reconcile("ns/job")
    assert client.patches == [("TrainJob", "job", {"metadata": {"resourceVersion": "5"},
                                                   "spec": {"podTemplateOverrides": None}})]
    assert not integ.restoring(msgspec.convert(raw_job(), tj.TrainJob)), "restored: the next pass starts it"


@pytest.mark.asyncio
async def test_a_running_trainjob_not_admitted_is_suspended_then_restored_once_no_job_is_active() -> None:
    integ, client, appended = integration(raw_job(suspend=False, overrides=[KUEUES]), workload())
    await integ.reconcile("ns/job")
    assert client.patches == [("TrainJob", "job", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert actions(appended) == [("TrainJob", "Stopped")]
    active = raw_job(overrides=[KUEUES], status={"jobsStatus": [{"name": "node", "active": 1}]})
    integ, client, appended = integration(active, workload())
    await integ.reconcile("ns/job")
    assert (client.patches, actions(appended)) == ([], []), "the overrides stay while a Job is active"
    integ, client, appended = integration(raw_job(overrides=[KUEUES]), workload())
    await integ.reconcile("ns/job")
    assert client.patches == [("TrainJob", "job", {"metadata": {"resourceVersion": "5"},
                                                   "spec": {"podTemplateOverrides": None}})]


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "reason"), [("Complete", "Succeeded"), ("Failed", "Failed")])
async def test_a_finished_trainjob_finishes_its_workload_with_its_message(kind: str, reason: str) -> None:
    raw = raw_job(suspend=False, status={"conditions": [{"type": kind, "status": "True", "message": "m"}]})
    integ, _, appended = integration(raw, workload())
    await integ.reconcile("ns/job")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished)
    assert (finished.key, finished.reason, finished.message) == (f"ns/{WL}", reason, "m")


TRAINJOB_OWNER = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "job",
                  "uid": "job-uid", "controller": True}


def listed_trainjob() -> tj.TrainJob:
    raw = raw_job()
    raw["metadata"]["uid"] = "job-uid"
    job: tj.TrainJob = msgspec.convert(raw, tj.TrainJob)
    return job


def raw_jobset(suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "job", "namespace": "ns", "uid": "js-uid", "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "ownerReferences": [TRAINJOB_OWNER]},
            "spec": {"suspend": suspend, "replicatedJobs": RUNTIME_SPEC["template"]["spec"]["replicatedJobs"]}}


@pytest.mark.asyncio
async def test_a_queued_trainjobs_jobset_gets_no_workload_and_is_held_while_the_trainjob_is_not_admitted() -> None:
    parent = workload(uid="job-uid")
    integ, client, appended = watched_jobs.integration(JobSetIntegration, raw_jobset(suspend=False), parent, config=HOLDING)
    integ.parents.hold("TrainJob", {"ns/job": listed_trainjob()})
    await integ.reconcile("ns/job")
    assert client.created == []
    assert client.patches == [("JobSet", "job", {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}})]
    assert actions(appended) == [("JobSet", "Suspended")]
    integ, client, appended = watched_jobs.integration(JobSetIntegration, raw_jobset(suspend=False), parent, config=HOLDING)
    integ.parents.hold("TrainJob", {"ns/job": listed_trainjob()})
    integ.state.workloads[f"ns/{WL}"].phase = ADMITTED
    await integ.reconcile("ns/job")
    assert (client.created, client.patches, appended) == ([], [], [])


def test_the_connector_reads_a_jobsets_trainjob_parent_from_the_trainjob_integration() -> None:
    connector = watched_jobs.connector(ON)
    job = listed_trainjob()
    connector.trainjobs.known[job.key] = job  # type: ignore[union-attr]
    parents = connector.jobs.parents  # type: ignore[union-attr]
    assert connector.trainjobs.parents is parents and connector.jobsets.parents is parents  # type: ignore[union-attr]
    jobset = msgspec.convert(raw_jobset(suspend=True), js.JobSet)
    found = child_jobs.managed_ancestor(jobset.metadata, parents.parent_of(load_config(ON), {}), False)
    assert found == job.metadata


@pytest.mark.asyncio
async def test_the_webhooks_walk_answers_a_trainjob_parent_from_what_the_leaders_connector_holds() -> None:
    """A JobSet under a queued TrainJob the TrainJob integration lists: the webhook's walk (HeldParents attached to
    the connector's parents registry, as a leader's) finds it without a GET to the apiserver."""
    connector = watched_jobs.connector(ON)
    job = listed_trainjob()
    connector.trainjobs.known[job.key] = job  # type: ignore[union-attr]
    assert await watched_jobs.walk_over_held(connector, ON, raw_jobset(suspend=True)) == (True, [], 1)



@pytest.mark.asyncio
async def test_a_trainjob_matching_its_workload_leaves_it_alone() -> None:
    integ, client, appended = integration(raw_job(), workload())
    await integ.reconcile("ns/job")
    assert (client.patches, client.deleted, actions(appended)) == ([], [], [])


@pytest.mark.asyncio
@pytest.mark.parametrize(("trainer", "overrides", "count", "cpu"), [
    ({"numNodes": 3}, None, 3, "1"),
    ({"resourcesPerNode": {"requests": {"cpu": "2"}}}, None, 2, "2"),
    (None, [{"targetJobs": [{"name": "node"}], "spec": {"containers": [
        {"name": "node", "resources": {"requests": {"cpu": "4"}}}]}}], 2, "4"),
], ids=["numNodes", "resourcesPerNode", "podTemplateOverride"])
async def test_a_suspended_trainjob_that_changed_has_its_workload_rewritten(
        trainer: dict[str, Any] | None, overrides: list[dict[str, Any]] | None, count: int, cpu: str) -> None:
    """Kueue's EquivalentToWorkload/updateWorkloadToMatchJob for a TrainJob: its pod sets are its JobSet's, so a
    changed numNodes, trainer resources or override on a suspended TrainJob whose Workload holds no quota rewrites
    the Workload's pod sets (``UpdatedWorkload``)."""
    raw = raw_job(overrides=overrides)
    if trainer is not None:
        raw["spec"]["trainer"] = trainer
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/job")
    ((kind, name, patch),) = client.patches
    assert (kind, name) == ("Workload", WL)
    ((pod_set),) = patch["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("node", count)
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": cpu}
    assert [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("TrainJob", "UpdatedWorkload", f"Updated not matching Workload for suspended job: ns/{WL}")]


@pytest.mark.asyncio
async def test_a_changed_runtime_rewrites_the_workload_and_a_missing_one_compares_nothing() -> None:
    """The runtime is part of what the TrainJob makes: its change (which marks the TrainJob) puts the Workload out of
    step; without the runtime the pod sets are not known and the Workload is left as it is."""
    integ, client, _ = integration(raw_job(), workload())
    bigger = msgspec.convert({"metadata": {"name": "torch", "uid": "rt"},
                              "spec": {**RUNTIME_SPEC, "mlPolicy": {"numNodes": 4}}}, tj.Runtime)
    integ.cluster_runtimes.known[bigger.key] = bigger
    await integ.reconcile("ns/job")
    ((kind, _, patch),) = client.patches
    assert (kind, patch["spec"]["podSets"][0]["count"]) == ("Workload", 4)
    integ, client, appended = integration(raw_job(), workload(), with_runtime=False)
    await integ.reconcile("ns/job")
    assert (client.patches, client.deleted, actions(appended)) == ([], [], [])


@pytest.mark.asyncio
async def test_a_prebuilt_workload_the_trainjob_no_longer_matches_is_finished_out_of_sync() -> None:
    """A TrainJob naming a prebuilt Workload it controls runs on it while they match; once its pod sets differ
    (here numNodes 3 against the Workload's 2) the Workload is finished ``OutOfSync``."""
    raw = raw_job()
    raw["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = WL
    raw["spec"]["trainer"] = {"numNodes": 3}
    integ, _, appended = integration(raw, workload())
    await integ.reconcile("ns/job")
    assert [(type(e).__name__, getattr(e, "reason", "")) for e in appended] == [("WorkloadFinished", "OutOfSync")]


MPI_SPEC = {"mlPolicy": {"numNodes": 1, "mpi": {"runLauncherAsNode": True}}, "template": {"spec": {
    "replicatedJobs": [{"name": name, "template": {**labels, "spec": {"template": {"spec": {"containers": [
        {"name": "node", "resources": {"requests": {"cpu": cpu}}}]}}}}} for name, labels, cpu in [
        ("node", {}, "1"), ("launcher", {"metadata": {"labels": {tj.ANCESTOR_LABEL: "trainer"}}}, "500m")]]}}}
"""DeepSpeed's shape: workers in the unlabelled ``node`` Job; the launcher, one of the nodes, the trainer
step."""


def _old_counts_workload() -> o.Workload:
    """The Workload kueue-es made before session 46 for an MPI TrainJob of ``numNodes: 4`` on
    :data:`MPI_SPEC`: the count on the launcher (``node`` 1, ``launcher`` 4) where the Trainer gives
    ``node`` 3, ``launcher`` 1."""
    sets = [o.PodSet(name=name, count=count, template=msgspec.convert({"spec": {"containers": [
        {"name": "node", "resources": {"requests": {"cpu": cpu}}}]}}, o.PodTemplateSpec))
        for name, count, cpu in [("node", 1, "1"), ("launcher", 4, "500m")]]
    return watched_jobs.owned_workload(WL, ("trainer.kubeflow.org/v1alpha1", "TrainJob", "job", UID), sets)


def _mpi_integration(suspend: bool) -> tuple[TrainJobIntegration, Client, list[ev.AnyEvent]]:
    raw = raw_job(suspend=suspend)
    raw["spec"]["trainer"] = {"numNodes": 4}
    integ, client, appended = integration(raw, _old_counts_workload(), with_runtime=False)
    mpi = msgspec.convert({"metadata": {"name": "torch", "uid": "rt"}, "spec": MPI_SPEC}, tj.Runtime)
    integ.cluster_runtimes.known[mpi.key] = mpi
    return integ, client, appended


def _admit(integ: TrainJobIntegration) -> None:
    wl = integ.state.workloads[f"ns/{WL}"]
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=name, flavors={"cpu": "default"}, count=count)
        for name, count in [("node", 1), ("launcher", 4)]])


@pytest.mark.asyncio
async def test_an_mpi_trainjobs_workload_with_the_old_counts_is_made_anew_after_the_upgrade() -> None:
    """docs/kubernetes.md's upgrade note: a Workload made with the counts kueue-es gave before session 46
    no longer matches the TrainJob. Running on it, the TrainJob is suspended first; then the Workload, still
    holding quota, is deleted (a new one follows); a pending one is rewritten in place."""
    integ, client, appended = _mpi_integration(suspend=False)
    _admit(integ)
    await integ.reconcile("ns/job")
    assert client.patches == [("TrainJob", "job", {"metadata": {"resourceVersion": "5"},
                                                   "spec": {"suspend": True}})]
    assert [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("Stopped", "No matching Workload; restoring pod templates according to existent Workload")]
    integ, client, appended = _mpi_integration(suspend=True)
    _admit(integ)
    await integ.reconcile("ns/job")
    unfinalized = [(kind, patch["metadata"]["finalizers"]) for kind, _, patch in client.patches]
    assert unfinalized == [("Workload", None)], "its finalizer first"
    assert (client.deleted, actions(appended)) == ([("Workload", WL)], [("TrainJob", "DeletedWorkload")])
    integ, client, appended = _mpi_integration(suspend=True)
    await integ.reconcile("ns/job")
    ((kind, _, patch),) = client.patches
    assert (kind, [(ps["name"], ps["count"]) for ps in patch["spec"]["podSets"]]) == (
        "Workload", [("node", 3), ("launcher", 1)])
    assert actions(appended) == [("TrainJob", "UpdatedWorkload")]
