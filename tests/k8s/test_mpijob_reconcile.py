"""The MPIJob integration's reconcile (:mod:`connectors.k8s.mpijob_integration`) over a mirror and a fake client:
off unless the framework is listed, a running queued MPIJob suspended at ``spec.runPolicy.suspend`` then given its
Workload, a finished MPIJob's Workload finished, PodsReady from its ``Running`` condition, a running MPIJob whose
Workload is not admitted suspended with its templates restored, and the Workloads of one gone finished, let go and
deleted (no cluster needed)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.jobs import show_finished
from fixtures.watched_jobs import Client

from connectors.k8s import mpijob as mj
from connectors.k8s.mirror import Mirror
from connectors.k8s.mpijob_integration import MPIJobIntegration
from events import objects as o
from events import schema as ev

UID = "mpi-uid"
NAME = mj.workload_name("pi", UID)
ON = {"integrations": {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}}


RAW_TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
TEMPLATE = msgspec.convert(RAW_TEMPLATE, o.PodTemplateSpec)
"""The pod template of both replica types (so the Workload below matches the MPIJob)."""


def raw_mpijob(suspend: bool | None = True, conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    template = copy.deepcopy(RAW_TEMPLATE)
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"runPolicy": {} if suspend is None else {"suspend": suspend}, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 2, "template": template}}},
            "status": {"conditions": conditions or []}}


def workload(finalizers: tuple[str, ...] = ("kueue.x-k8s.io/resource-in-use",)) -> o.Workload:
    return watched_jobs.owned_workload(NAME, ("kubeflow.org/v2beta1", "MPIJob", "pi", UID), [
        o.PodSet(name="launcher", count=1, template=TEMPLATE), o.PodSet(name="worker", count=2, template=TEMPLATE)],
        finalizers=finalizers)


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                ) -> tuple[MPIJobIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(MPIJobIntegration, raw, *objs, config=ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = integration(raw_mpijob(suspend=False), config={})
    await integ.reconcile("ns/pi")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
@pytest.mark.parametrize("suspend", [False, None])
async def test_a_running_mpijob_without_a_workload_is_suspended_in_its_run_policy_first(suspend: bool | None) -> None:
    integ, client, appended = integration(raw_mpijob(suspend=suspend))
    await integ.reconcile("ns/pi")
    assert client.patches == [("MPIJob", "pi", {"metadata": {"resourceVersion": "5"},
                                                "spec": {"runPolicy": {"suspend": True}}})]
    assert [(e.kind, e.action) for e in appended] == [("MPIJob", "Stopped")]  # type: ignore[attr-defined]
    assert client.created == []


@pytest.mark.asyncio
async def test_a_suspended_queued_mpijob_gets_its_workload() -> None:
    integ, client, appended = integration(raw_mpijob())
    await integ.reconcile("ns/pi")
    (body,) = client.created
    assert body["metadata"]["name"] == NAME and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("launcher", 1), ("worker", 2)]
    assert [(e.kind, e.action, e.workload) for e in appended] == [("MPIJob", "CreatedWorkload", f"ns/{NAME}")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "reason"), [("Succeeded", "Succeeded"), ("Failed", "Failed")])
async def test_a_finished_mpijob_finishes_its_workload_with_the_conditions_message(kind: str, reason: str) -> None:
    raw = raw_mpijob(suspend=False, conditions=[{"type": kind, "status": "True", "message": "MPIJob ns/pi done"}])
    integ, _, appended = integration(raw, workload())
    await integ.reconcile("ns/pi")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished)
    assert (finished.key, finished.reason, finished.message) == (f"ns/{NAME}", reason, "MPIJob ns/pi done")


@pytest.mark.asyncio
async def test_the_workload_of_an_mpijob_gone_is_finished_let_go_and_deleted() -> None:
    integ, client, appended = integration(None, workload())
    await integ.reconcile("ns/pi")
    assert [(type(e).__name__, e.reason) for e in appended] == [("WorkloadFinished", "OwnerNotFound")]  # type: ignore[attr-defined]
    assert (client.patches, client.deleted) == ([], []), "finished first: nothing written to the Workload yet"
    show_finished(integ.mirror, appended)
    await integ.reconcile("ns/pi")
    assert [(kind, body["metadata"]["finalizers"], body["metadata"]["resourceVersion"])
            for kind, _, body in client.patches] == [("Workload", None, "4")]
    assert client.deleted == [("Workload", NAME)], "let go on the version showing it finished"


@pytest.mark.asyncio
async def test_a_running_mpijob_whose_workload_is_not_admitted_is_suspended_and_its_templates_restored() -> None:
    raw = raw_mpijob(suspend=False)
    raw["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {"pool": "a"}
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/pi")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["runPolicy"], patch["metadata"]) == ("MPIJob", "pi", {"suspend": True},
                                                                           {"resourceVersion": "5"})
    assert patch["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] is None, \
        "restored as the Workload recorded it"
    assert [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("MPIJob", "Stopped", "Not admitted by cluster queue")]


def test_what_was_done_to_an_mpijob_is_recorded_as_an_event_on_the_mpijob() -> None:
    """The ``JobActed`` of kind MPIJob names the MPIJob's API as the Event's involved object."""
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/pi", uid=UID, kind="MPIJob", action="CreatedWorkload",
                                          workload=f"ns/{NAME}")))
    involved = mirror.kube_events.ready[1].before
    assert (involved.api_version, involved.kind, involved.namespace, involved.name, involved.uid) == (  # type: ignore[union-attr]
        "kubeflow.org/v2beta1", "MPIJob", "ns", "pi", UID)
