"""The SparkApplication integration's reconcile (:class:`connectors.k8s.spark_integration.SparkApplicationIntegration`)
over a mirror and a fake client: nothing done unless the framework is listed (which needs the alpha gate), a running
queued SparkApplication suspended then given its Workload, started with its admission, stopped with its roles
restored when not admitted, finished by its state; its Events recorded under the integration's controller name."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client

from connectors.k8s import job_events
from connectors.k8s import sparkapplication as spark
from connectors.k8s.mirror import Mirror
from connectors.k8s.spark_integration import SparkApplicationIntegration
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED

UID = "app-uid"
APP_WL = spark.workload_name("app", UID)
ON = {"integrations": {"frameworks": ["batch/job", "sparkoperator.k8s.io/sparkapplication"]},
      "featureGates": {"SparkApplicationIntegration": True}}


def raw_app(suspend: bool | None = True, state: str = "", **driver: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"mode": "cluster", "driver": {"coreRequest": "1", **driver},
                            "executor": {"coreRequest": "1", "instances": 2}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "app", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": spec, "status": {"applicationState": {"state": state}}}


def workload() -> o.Workload:
    return watched_jobs.owned_workload(APP_WL, ("sparkoperator.k8s.io/v1beta2", "SparkApplication", "app", UID),
                                       [o.PodSet(name="driver", count=1), o.PodSet(name="executor", count=2)])


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                ) -> tuple[SparkApplicationIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(SparkApplicationIntegration, raw, *objs, config=ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = integration(raw_app(suspend=False), config={
        "featureGates": {"SparkApplicationIntegration": True}})
    await integ.reconcile("ns/app")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
async def test_a_running_sparkapplication_without_a_workload_is_suspended_first() -> None:
    for suspend in (False, None):
        integ, client, appended = integration(raw_app(suspend=suspend))
        await integ.reconcile("ns/app")
        assert client.patches == [("SparkApplication", "app", {"metadata": {"resourceVersion": "5"},
                                                               "spec": {"suspend": True}})]
        assert [(e.kind, e.action) for e in appended] == [("SparkApplication", "Stopped")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_suspended_queued_sparkapplication_gets_its_workload() -> None:
    integ, client, appended = integration(raw_app())
    await integ.reconcile("ns/app")
    (body,) = client.created
    assert body["metadata"]["name"] == APP_WL and body["spec"]["queueName"] == "lq"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("driver", 1), ("executor", 2)]
    assert [(e.kind, e.action) for e in appended] == [("SparkApplication", "CreatedWorkload")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_running_sparkapplication_whose_workload_is_not_admitted_is_suspended_and_restored() -> None:
    integ, client, appended = integration(raw_app(suspend=False, nodeSelector={"p": "a"}), workload())
    await integ.reconcile("ns/app")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["spec"]["suspend"]) == ("SparkApplication", "app", True)
    assert patch["spec"]["driver"]["nodeSelector"] is None
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("SparkApplication", "Stopped")]


@pytest.mark.asyncio
async def test_a_completed_sparkapplication_finishes_its_workload() -> None:
    integ, _, appended = integration(raw_app(suspend=False, state="COMPLETED"), workload())
    integ.state.workloads[f"ns/{APP_WL}"].phase = ADMITTED
    await integ.reconcile("ns/app")
    assert [e.reason for e in appended if isinstance(e, ev.WorkloadFinished)] == ["Succeeded"]


def test_what_was_done_to_a_sparkapplication_is_recorded_as_an_event_on_it() -> None:
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/app", uid=UID, kind="SparkApplication",
                                          action="CreatedWorkload", workload=f"ns/{APP_WL}")))
    event = mirror.kube_events.ready[1]
    involved = event.before
    assert (involved.api_version, involved.kind, involved.name) == (  # type: ignore[union-attr]
        "sparkoperator.k8s.io/v1beta2", "SparkApplication", "app")
    (recorded,) = job_events.job_events(event.event, involved)  # type: ignore[arg-type]
    assert recorded.component == "sparkoperator.k8s.io/sparkapplication-kueue-controller"
