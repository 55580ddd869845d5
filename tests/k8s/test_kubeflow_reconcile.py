"""The Kubeflow training-job integrations' reconcile (:mod:`connectors.k8s.kubeflow_integration`) over a mirror and a
fake client: one adapter per kind, off unless that kind's framework is listed, a running queued PyTorchJob suspended
at ``spec.runPolicy.suspend`` then given its Workload, a TFJob's Workload in Kueue's replica order, a finished job's
Workload finished with the condition's message, a running job whose Workload is not admitted suspended with its
templates restored, the Workloads of one gone finished and deleted (no cluster needed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.jobs import show_finished
from fixtures.watched_jobs import Client

from connectors.k8s import kubeflow as kf
from connectors.k8s.kubeflow_integration import INTEGRATIONS, KubeflowJobIntegration
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev

UID = "pt-uid"
PYTORCH = kf.KINDS["PyTorchJob"]
NAME = PYTORCH.workload_name("pt", UID)
ON = {"integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob"]}}
TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
POD_TEMPLATE = msgspec.convert(TEMPLATE, o.PodTemplateSpec)
"""The replicas' pod template (so the Workload below matches the job)."""


def raw_job(kind: str = "PyTorchJob", suspend: bool | None = True, conditions: list[dict[str, str]] | None = None,
            specs: dict[str, Any] | None = None) -> dict[str, Any]:
    training = kf.KINDS[kind]
    specs = specs or {"Master": {"replicas": 1, "template": TEMPLATE}, "Worker": {"replicas": 2, "template": TEMPLATE}}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": "pt", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"runPolicy": {} if suspend is None else {"suspend": suspend}, training.specs_field: specs},
            "status": {"conditions": conditions or []}}


def workload() -> o.Workload:
    return watched_jobs.owned_workload(NAME, ("kubeflow.org/v1", "PyTorchJob", "pt", UID), [
        o.PodSet(name="master", count=1, template=POD_TEMPLATE),
        o.PodSet(name="worker", count=2, template=POD_TEMPLATE)])


def integration(raw: dict[str, Any] | None, *objs: o.KObject, kind: str = "PyTorchJob",
                config: dict[str, Any] | None = None) -> tuple[KubeflowJobIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(INTEGRATIONS[kind], raw, *objs, config=ON if config is None else config)


def test_one_integration_per_kind_over_its_resource() -> None:
    assert sorted(INTEGRATIONS) == ["JAXJob", "PaddleJob", "PyTorchJob", "TFJob", "XGBoostJob"]
    for kind, cls in INTEGRATIONS.items():
        assert issubclass(cls, KubeflowJobIntegration)
        assert (cls.KIND, cls.RESOURCE.api_version, cls.RESOURCE.plural) == (kind, "kubeflow.org/v1",
                                                                             f"{kind.lower()}s")


@pytest.mark.asyncio
@pytest.mark.parametrize("config", [{}, {"integrations": {"frameworks": ["batch/job", "kubeflow.org/tfjob"]}}])
async def test_nothing_is_done_while_the_kinds_framework_is_not_listed(config: dict[str, Any]) -> None:
    integ, client, appended = integration(raw_job(suspend=False), config=config)
    await integ.reconcile("ns/pt")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
@pytest.mark.parametrize("suspend", [False, None])
async def test_a_running_pytorchjob_without_a_workload_is_suspended_in_its_run_policy_first(
        suspend: bool | None) -> None:
    integ, client, appended = integration(raw_job(suspend=suspend))
    await integ.reconcile("ns/pt")
    assert client.patches == [("PyTorchJob", "pt", {"metadata": {"resourceVersion": "5"},
                                                    "spec": {"runPolicy": {"suspend": True}}})]
    assert [(e.kind, e.action) for e in appended] == [("PyTorchJob", "Stopped")]  # type: ignore[attr-defined]
    assert client.created == []


@pytest.mark.asyncio
async def test_a_suspended_queued_pytorchjob_gets_its_workload() -> None:
    integ, client, appended = integration(raw_job())
    await integ.reconcile("ns/pt")
    (body,) = client.created
    assert body["metadata"]["name"] == NAME and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    assert [(e.kind, e.action, e.workload) for e in appended] == [  # type: ignore[attr-defined]
        ("PyTorchJob", "CreatedWorkload", f"ns/{NAME}")]


@pytest.mark.asyncio
async def test_a_tfjobs_workload_has_its_replica_types_in_kueues_order() -> None:
    specs = {"Worker": {"replicas": 3, "template": TEMPLATE}, "PS": {"replicas": 2, "template": TEMPLATE},
             "Chief": {"template": TEMPLATE}}
    integ, client, _ = integration(raw_job("TFJob", specs=specs), kind="TFJob")
    await integ.reconcile("ns/pt")
    (body,) = client.created
    assert body["metadata"]["name"] == kf.KINDS["TFJob"].workload_name("pt", UID)
    assert body["metadata"]["ownerReferences"][0]["kind"] == "TFJob"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("chief", 1), ("ps", 2), ("worker", 3)]


@pytest.mark.asyncio
@pytest.mark.parametrize("reason", ["Succeeded", "Failed"])
async def test_a_finished_pytorchjob_finishes_its_workload_with_the_conditions_message(reason: str) -> None:
    raw = raw_job(suspend=False, conditions=[{"type": reason, "status": "True", "message": "PyTorchJob pt done"}])
    integ, _, appended = integration(raw, workload())
    await integ.reconcile("ns/pt")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished)
    assert (finished.key, finished.reason, finished.message) == (f"ns/{NAME}", reason, "PyTorchJob pt done")


@pytest.mark.asyncio
@pytest.mark.parametrize("reason", ["Succeeded", "Failed"])
async def test_a_finished_condition_without_a_message_finishes_the_workload_without_one(reason: str) -> None:
    """Kueue's reconciler writes the job's ``Finished()`` message as it is (a kubeflow job's: its condition's), so
    an empty one stays empty."""
    raw = raw_job(suspend=False, conditions=[{"type": reason, "status": "True"}])
    integ, _, appended = integration(raw, workload())
    await integ.reconcile("ns/pt")
    (finished,) = appended
    assert isinstance(finished, ev.WorkloadFinished)
    assert (finished.reason, finished.message) == (reason, "")


@pytest.mark.asyncio
async def test_the_workload_of_a_pytorchjob_gone_is_finished_let_go_and_deleted() -> None:
    integ, client, appended = integration(None, workload())
    await integ.reconcile("ns/pt")
    assert [(type(e).__name__, e.reason) for e in appended] == [  # type: ignore[attr-defined]
        ("WorkloadFinished", "OwnerNotFound")]
    assert (client.patches, client.deleted) == ([], []), "finished first: nothing written to the Workload yet"
    show_finished(integ.mirror, appended)
    await integ.reconcile("ns/pt")
    assert [(kind, body["metadata"]["finalizers"], body["metadata"]["resourceVersion"])
            for kind, _, body in client.patches] == [("Workload", None, "4")]
    assert client.deleted == [("Workload", NAME)], "let go on the version showing it finished"


@pytest.mark.asyncio
async def test_a_running_pytorchjob_whose_workload_is_not_admitted_is_suspended_and_its_templates_restored() -> None:
    raw = raw_job(suspend=False)
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = {**TEMPLATE, "spec": {
        **TEMPLATE["spec"], "nodeSelector": {"pool": "a"}}}
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/pt")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["runPolicy"]) == ("PyTorchJob", "pt", {"suspend": True})
    assert patch["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] is None
    assert [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("PyTorchJob", "Stopped", "Not admitted by cluster queue")]


def test_what_was_done_to_a_pytorchjob_is_recorded_as_an_event_on_it() -> None:
    """The ``JobActed`` of kind PyTorchJob names kubeflow.org/v1 as the Event's involved object's API."""
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/pt", uid=UID, kind="PyTorchJob",
                                          action="CreatedWorkload", workload=f"ns/{NAME}")))
    involved = mirror.kube_events.ready[1].before
    assert (involved.api_version, involved.kind, involved.name) == (  # type: ignore[union-attr]
        "kubeflow.org/v1", "PyTorchJob", "pt")


@pytest.mark.asyncio
async def test_a_suspended_pytorchjob_with_more_workers_has_its_workload_rewritten() -> None:
    """The shared reconciler's step (Kueue's EquivalentToWorkload/updateWorkloadToMatchJob) for the training kinds
    too: they give it the pod sets they make now."""
    raw = raw_job()
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/pt")
    (kind, name, patch), = client.patches
    assert (kind, name) == ("Workload", NAME)
    assert [(ps["name"], ps["count"]) for ps in patch["spec"]["podSets"]] == [("master", 1), ("worker", 3)]
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("PyTorchJob", "UpdatedWorkload")]


@pytest.mark.asyncio
@pytest.mark.parametrize("value", ["0", "abc", "-5", str(2**31)])
async def test_a_suspended_pytorchjob_updated_to_a_max_exec_time_kueue_reads_as_none_has_it_removed(
        value: str) -> None:
    """Kueue's generic update webhook lets a suspended training job change ``max-exec-time-seconds`` to a
    value its create rules refuse; its job framework builds the Workload reading such a value as none
    (``MaximumExecutionTimeSecondsForObject``: ParseInt 32-bit, an error or a value not above 0 is nil), so
    the Workload is rewritten without one and the job is not left stuck on it."""
    raw = raw_job()
    raw["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = value
    obs = workload()
    spec = msgspec.structs.replace(obs.spec, maximum_execution_time_seconds=60)
    obs = msgspec.structs.replace(obs, spec=spec)
    integ, client, appended = integration(raw, obs)
    await integ.reconcile("ns/pt")
    (kind, name, patch), = client.patches
    assert (kind, name) == ("Workload", NAME) and patch["spec"]["maximumExecutionTimeSeconds"] is None
    assert integ.stats.invalid == []
    acted = [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)]
    assert acted == [("PyTorchJob", "UpdatedWorkload")]


@pytest.mark.asyncio
async def test_a_suspended_pytorchjob_with_a_max_exec_time_kueue_reads_as_none_gets_a_workload_without_it(
        ) -> None:
    raw = raw_job()
    raw["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "0"
    integ, client, _ = integration(raw)
    await integ.reconcile("ns/pt")
    (body,) = client.created
    assert body["metadata"]["name"] == NAME and "maximumExecutionTimeSeconds" not in body["spec"]
