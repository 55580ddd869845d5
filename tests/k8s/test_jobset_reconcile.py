"""The JobSet integration's reconcile (:mod:`connectors.k8s.jobset_integration`) over a mirror and a fake client:
off unless the framework is listed, a queued JobSet suspended then given its Workload, a finished JobSet's
Workload finished, and the Workloads of a JobSet gone finished, let go and deleted (no cluster needed)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.jobs import show_finished
from fixtures.watched_jobs import Client

from connectors.k8s import jobset as js
from connectors.k8s.jobset_integration import JobSetIntegration
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev

UID = "js-uid"
NAME = js.workload_name("train", UID)
ON = {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}}


RAW_TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
TEMPLATE = msgspec.convert(RAW_TEMPLATE, o.PodTemplateSpec)
"""The pod template of every replicated Job (so the Workload below matches the JobSet)."""


def raw_jobset(suspend: bool = True, conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    template = copy.deepcopy(RAW_TEMPLATE)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": suspend, "replicatedJobs": [
                {"name": "leader", "replicas": 1, "template": {"spec": {"template": template}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": template}}}]},
            "status": {"conditions": conditions or []}}


def workload(finalizers: tuple[str, ...] = ("kueue.x-k8s.io/resource-in-use",)) -> o.Workload:
    return watched_jobs.owned_workload(NAME, ("jobset.x-k8s.io/v1alpha2", "JobSet", "train", UID), [
        o.PodSet(name="leader", count=1, template=TEMPLATE), o.PodSet(name="workers", count=4, template=TEMPLATE)],
        finalizers=finalizers)


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                ) -> tuple[JobSetIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(JobSetIntegration, raw, *objs, config=ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = integration(raw_jobset(suspend=False), config={})
    await integ.reconcile("ns/train")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
async def test_a_running_jobset_without_a_workload_is_suspended_first() -> None:
    integ, client, appended = integration(raw_jobset(suspend=False))
    await integ.reconcile("ns/train")
    assert client.patches == [("JobSet", "train", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert [(e.kind, e.action, e.message) for e in appended] == [("JobSet", "Stopped", "Missing Workload; unable to restore pod templates")]  # type: ignore[attr-defined]
    assert client.created == []


@pytest.mark.asyncio
async def test_a_suspended_queued_jobset_gets_its_workload() -> None:
    integ, client, appended = integration(raw_jobset())
    await integ.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == NAME and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("leader", 1), ("workers", 4)]
    assert [(e.kind, e.action, e.workload) for e in appended] == [("JobSet", "CreatedWorkload", f"ns/{NAME}")]  # type: ignore[attr-defined]
    await integ.reconcile("ns/train")
    assert len(client.created) == 1, "not created twice from the same version"


@pytest.mark.asyncio
async def test_a_completed_jobset_finishes_its_workload() -> None:
    raw = raw_jobset(suspend=False, conditions=[{"type": "Completed", "status": "True",
                                                 "message": "jobset completed successfully"}])
    integ, _, appended = integration(raw, workload())
    await integ.reconcile("ns/train")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished)
    assert (finished.key, finished.reason, finished.message) == (f"ns/{NAME}", "Succeeded",
                                                                 "jobset completed successfully")


@pytest.mark.asyncio
async def test_the_workload_of_a_jobset_gone_is_finished_let_go_and_deleted() -> None:
    integ, client, appended = integration(None, workload())
    await integ.reconcile("ns/train")
    assert [(type(e).__name__, e.reason) for e in appended] == [("WorkloadFinished", "OwnerNotFound")]  # type: ignore[attr-defined]
    assert (client.patches, client.deleted) == ([], []), "finished first: nothing written to the Workload yet"
    show_finished(integ.mirror, appended)
    await integ.reconcile("ns/train")
    assert [(kind, body["metadata"]["finalizers"], body["metadata"]["resourceVersion"])
            for kind, _, body in client.patches] == [("Workload", None, "4")]
    assert client.deleted == [("Workload", NAME)], "let go on the version showing it finished"


@pytest.mark.asyncio
async def test_a_running_jobset_whose_workload_is_not_admitted_is_suspended_and_its_templates_restored() -> None:
    raw = raw_jobset(suspend=False)
    raw["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "a"}
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/train")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["suspend"], patch["metadata"]) == ("JobSet", "train", True,
                                                                         {"resourceVersion": "5"})
    assert "nodeSelector" not in patch["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"], \
        "restored as the Workload recorded it"
    assert [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("JobSet", "Stopped", "Not admitted by cluster queue")]


def test_what_was_done_to_a_jobset_is_recorded_as_an_event_on_the_jobset() -> None:
    """The ``JobActed`` of kind JobSet names the JobSet's API as the Event's involved object."""
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/train", uid=UID, kind="JobSet", action="CreatedWorkload",
                                          workload=f"ns/{NAME}")))
    involved = mirror.kube_events.ready[1].before
    assert (involved.api_version, involved.kind, involved.namespace, involved.name, involved.uid) == (  # type: ignore[union-attr]
        "jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "train", UID)


class _Held:
    """An object as another integration's informer holds it (what the ancestry walk reads: its metadata)."""

    def __init__(self, metadata: o.ObjectMeta) -> None:
        self.metadata = metadata


@pytest.mark.asyncio
@pytest.mark.parametrize(("admitted", "suspended"), [(False, True), (True, False)])
async def test_a_jobset_under_a_queued_mpijob_is_that_mpijobs_child(admitted: bool, suspended: bool) -> None:
    """Kueue's reconciler is generic: a JobSet whose controller is a queued MPIJob (both integrations on) gets no
    Workload of its own, whatever queue it names, and is held suspended while the MPIJob's Workload is not admitted
    (Normal ``Suspended``)."""
    from projections.workloads import ADMITTED
    raw = raw_jobset(suspend=False)
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi",
                                           "uid": "uid-pi", "controller": True}]
    wl = workload()
    mpi_wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name="mpijob-pi-00000", uid="wl-pi", owner_references=[o.OwnerReference(
            api_version="kubeflow.org/v2beta1", kind="MPIJob", name="pi", uid="uid-pi", controller=True)]))
    frameworks = ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]
    integ, client, appended = integration(raw, mpi_wl, config={"integrations": {"frameworks": frameworks},
                                                          "featureGates": {"SkipChildJobSuspension": False}})
    integ.parents.hold("MPIJob", {"ns/pi": _Held(o.ObjectMeta(name="pi", namespace="ns", uid="uid-pi",
                                                              labels={"kueue.x-k8s.io/queue-name": "lq"}))})
    if admitted:
        integ.state.workloads["ns/mpijob-pi-00000"].phase = ADMITTED
    await integ.reconcile("ns/train")
    assert client.created == [], "no Workload of its own"
    assert client.patches == ([("JobSet", "train", {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
                              if suspended else [])
    assert [(e.kind, e.action, e.message) for e in appended] == (  # type: ignore[attr-defined]
        [("JobSet", "Suspended", "Kueue managed child job suspended")] if suspended else [])


@pytest.mark.asyncio
@pytest.mark.parametrize(("selected", "waits"), [(True, True), (False, False)])
async def test_a_jobset_in_a_namespace_the_selector_leaves_out_does_not_wait_for_its_controller(
        selected: bool, waits: bool) -> None:
    """Kueue's reconciler (ManagedJobsNamespaceSelectorAlwaysRespected, locked on) leaves a job in a namespace
    ``managedJobsNamespaceSelector`` does not select before it walks up to its controllers: a JobSet under an
    MPIJob not listed yet waits for it (its reconcile is retried) only in a selected namespace."""
    raw = raw_jobset(suspend=False)
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi",
                                           "uid": "uid-pi", "controller": True}]
    frameworks = ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]
    selector = {} if selected else {"managedJobsNamespaceSelector": {"matchLabels": {"kueue-managed": "true"}}}
    integ, client, appended = integration(raw, config={"integrations": {"frameworks": frameworks}, **selector})
    integ.parents.hold("MPIJob", {})  # listed, and not there (yet)
    await integ.reconcile("ns/train")
    assert (client.created, client.patches, appended) == ([], [], [])
    assert ("ns/train" in integ._retry._at) is waits
