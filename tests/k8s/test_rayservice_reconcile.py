"""The RayService integration's reconcile (:class:`connectors.k8s.ray_integration.RayServiceIntegration`) over a mirror
and a fake client: off unless ``ray.io/rayservice`` is listed, a running queued RayService suspended at
``spec.rayClusterConfig`` then given its Workload, one whose Workload is not admitted stopped with its templates
restored, Kueue's ``Skip`` of a deleting fault-tolerant RayService under DeferRayServiceFinalizationForRedisCleanup,
a queued RayService's RayCluster its child, and the connector's wiring (no cluster needed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client

from connectors.k8s import child_jobs, job_events
from connectors.k8s import raycluster as rc
from connectors.k8s import rayservice as rs
from connectors.k8s.mirror import Mirror
from connectors.k8s.ray_integration import RayClusterIntegration, RayServiceIntegration
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from projections.workloads import ADMITTED

UID = "svc-uid"
SERVICE_WL = rs.workload_name("svc", UID)
ON = {"integrations": {"frameworks": ["batch/job", "ray.io/rayservice", "ray.io/raycluster"]}}
HOLDING = {**ON, "featureGates": {"SkipChildJobSuspension": False}}
"""Kueue v0.20's SkipChildJobSuspension off: a child RayCluster is held for its RayService's Workload."""
TEMPLATE = {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "ray:2",
                                                     "resources": {"requests": {"cpu": "1"}}}]}}
FT = {"redisAddress": "redis:6379"}


def cluster_config(suspend: bool | None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"headGroupSpec": {"template": TEMPLATE},
                              "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "template": TEMPLATE}],
                              **extra}
    if suspend is not None:
        config["suspend"] = suspend
    return config


def raw_service(suspend: bool | None = True, ready: bool = False, deleting: bool = False,
                **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "svc", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                            "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conditions = [{"type": "Ready", "status": "True", "reason": "r", "message": "",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}] if ready else []
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta,
            "spec": {"rayClusterConfig": cluster_config(suspend, **extra)}, "status": {"conditions": conditions}}


def workload(owner_uid: str = UID) -> o.Workload:
    return watched_jobs.owned_workload(SERVICE_WL, ("ray.io/v1", "RayService", "svc", owner_uid),
                                       [o.PodSet(name="head", count=1), o.PodSet(name="workers", count=2)])


def integration(raw: dict[str, Any] | None, *objs: o.KObject, config: dict[str, Any] | None = None
                ) -> tuple[RayServiceIntegration, Client, list[ev.AnyEvent]]:
    return watched_jobs.integration(RayServiceIntegration, raw, *objs, config=ON if config is None else config)


@pytest.mark.asyncio
async def test_nothing_is_done_while_the_framework_is_not_listed() -> None:
    integ, client, appended = integration(raw_service(suspend=False),
                                          config={"integrations": {"frameworks": ["ray.io/raycluster"]}})
    await integ.reconcile("ns/svc")
    assert (client.created, client.patches, appended) == ([], [], [])


@pytest.mark.asyncio
async def test_a_running_rayservice_without_a_workload_is_suspended_at_its_cluster_config_first() -> None:
    for suspend in (False, None):  # none written: running, as KubeRay reads it
        integ, client, appended = integration(raw_service(suspend=suspend))
        await integ.reconcile("ns/svc")
        assert client.patches == [("RayService", "svc", {"metadata": {"resourceVersion": "5"},
                                                         "spec": {"rayClusterConfig": {"suspend": True}}})]
        assert [(e.kind, e.action) for e in appended] == [("RayService", "Stopped")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_suspended_queued_rayservice_gets_its_workload_once_not_ready() -> None:
    integ, client, _ = integration(raw_service(ready=True))
    await integ.reconcile("ns/svc")
    assert client.created == [], "Kueue waits while the service is active"
    integ, client, appended = integration(raw_service())
    await integ.reconcile("ns/svc")
    (body,) = client.created
    assert body["metadata"]["name"] == SERVICE_WL and body["spec"]["queueName"] == "lq"
    assert body["metadata"]["ownerReferences"][0]["kind"] == "RayService"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("head", 1), ("workers", 2)]
    assert [(e.kind, e.action) for e in appended] == [("RayService", "CreatedWorkload")]  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_running_rayservice_whose_workload_is_not_admitted_is_suspended_and_restored() -> None:
    raw = raw_service(suspend=False)
    raw["spec"]["rayClusterConfig"]["headGroupSpec"]["template"] = {
        **TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"p": "a"}}}
    integ, client, appended = integration(raw, workload())
    await integ.reconcile("ns/svc")
    (kind, name, patch), = client.patches
    config = patch["spec"]["rayClusterConfig"]
    assert (kind, name, config["suspend"]) == ("RayService", "svc", True)
    assert config["headGroupSpec"]["template"]["spec"]["nodeSelector"] is None
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("RayService", "Stopped")]


@pytest.mark.asyncio
async def test_a_suspended_rayservice_with_more_workers_has_its_pending_workload_rewritten() -> None:
    """Kueue's EquivalentToWorkload for a RayService: its cluster config's pod sets, the fault-tolerant head's
    Redis cleanup counted as at creation; a worker group scaled rewrites the Workload in place."""
    integ, _, _ = integration(None)
    body = integ.workload_for(raw_service(gcsFaultToleranceOptions=FT), SERVICE_WL)
    body["metadata"].update(namespace="ns", uid="wl-uid", resourceVersion="3")
    wl = msgspec.convert(body, o.Workload)
    integ, client, appended = integration(raw_service(gcsFaultToleranceOptions=FT), wl)
    await integ.reconcile("ns/svc")
    assert (client.patches, [e for e in appended if isinstance(e, ev.JobActed)]) == ([], []), "it matches"
    scaled = raw_service(gcsFaultToleranceOptions=FT)
    scaled["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 4
    integ, client, appended = integration(scaled, wl)
    await integ.reconcile("ns/svc")
    (kind, _, patch), = client.patches
    assert kind == "Workload" and [ps["count"] for ps in patch["spec"]["podSets"]] == [1, 4]
    assert [(e.kind, e.action) for e in appended if isinstance(e, ev.JobActed)] == [("RayService", "UpdatedWorkload")]


@pytest.mark.asyncio
async def test_a_running_rayservice_is_never_finished() -> None:
    integ, _, appended = integration(raw_service(suspend=False, ready=True), workload())
    integ.state.workloads[f"ns/{SERVICE_WL}"].phase = ADMITTED
    await integ.reconcile("ns/svc")
    assert not any(isinstance(e, ev.WorkloadFinished) for e in appended)


def _gate(on: bool) -> dict[str, Any]:
    return {**ON, "featureGates": {"DeferRayServiceFinalizationForRedisCleanup": on}}


@pytest.mark.asyncio
async def test_a_deleting_fault_tolerant_rayservice_keeps_its_workload_under_the_gate() -> None:
    """DeferRayServiceFinalizationForRedisCleanup (on by default): Kueue's ``Skip`` leaves a deleting RayService
    with GCS fault tolerance alone, its Workload admitted while KubeRay's Redis cleanup Job runs; off, the Workload
    waits as any deleting job's does (Kueue's #12849: no orphan before the owner is gone)."""
    raw = raw_service(suspend=False, deleting=True, gcsFaultToleranceOptions=FT)
    for config in (ON, _gate(True)):
        integ, client, appended = integration(raw, workload(), config=config)
        await integ.reconcile("ns/svc")
        assert (client.patches, client.deleted, appended) == ([], [], [])
    integ, client, appended = integration(raw, workload(), config=_gate(False))
    await integ.reconcile("ns/svc")
    assert (client.patches, client.deleted, appended) == ([], [], []), "not finished while being deleted"
    without_ft = raw_service(suspend=False, deleting=True)
    integ, client, appended = integration(without_ft, workload())
    await integ.reconcile("ns/svc")
    assert (client.patches, client.deleted, appended) == ([], [], [])


# --- its RayClusters --------------------------------------------------------------------------------------------

SERVICE_OWNER = {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "svc", "uid": UID, "controller": True}


def raw_cluster(suspend: bool) -> dict[str, Any]:
    """The RayCluster KubeRay makes for the RayService: its config, the service as its controller."""
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "svc-raycluster-x", "namespace": "ns", "uid": "rc-uid", "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "ownerReferences": [SERVICE_OWNER]},
            "spec": cluster_config(suspend)}


def listed_service() -> rs.RayService:
    service: rs.RayService = msgspec.convert(raw_service(), rs.RayService)
    return service


def cluster_integration(raw: dict[str, Any], *objs: o.KObject, config: dict[str, Any] | None = None
                        ) -> tuple[RayClusterIntegration, Client, list[ev.AnyEvent]]:
    integ, client, appended = watched_jobs.integration(RayClusterIntegration, raw, *objs,
                                                       config=ON if config is None else config)
    service = listed_service()
    integ.parents.hold("RayService", {service.key: service})
    return integ, client, appended


@pytest.mark.asyncio
async def test_a_queued_rayservices_raycluster_gets_no_workload_and_is_held_while_the_service_is_not_admitted() -> None:
    integ, client, appended = cluster_integration(raw_cluster(suspend=False), workload(), config=HOLDING)
    await integ.reconcile("ns/svc-raycluster-x")
    assert client.created == []
    assert client.patches == [("RayCluster", "svc-raycluster-x",
                               {"metadata": {"resourceVersion": "5"}, "spec": {"suspend": True}})]
    assert [(e.kind, e.action) for e in appended] == [("RayCluster", "Suspended")]  # type: ignore[attr-defined]
    integ, client, appended = cluster_integration(raw_cluster(suspend=False), workload(), config=HOLDING)
    integ.state.workloads[f"ns/{SERVICE_WL}"].phase = ADMITTED
    await integ.reconcile("ns/svc-raycluster-x")
    assert (client.created, client.patches, appended) == ([], [], []), "admitted: left running, queued apart never"


def test_the_connector_reads_a_rayclusters_rayservice_parent_from_the_rayservice_integration() -> None:
    connector = watched_jobs.connector(ON)
    service = listed_service()
    connector.rayservices.known[service.key] = service  # type: ignore[union-attr]
    parents = connector.jobs.parents  # type: ignore[union-attr]
    assert connector.rayservices.parents is parents  # type: ignore[union-attr]
    cluster = msgspec.convert(raw_cluster(suspend=True), rc.RayCluster)
    found = child_jobs.managed_ancestor(cluster.metadata, parents.parent_of(load_config(ON), {}), False)
    assert found == service.metadata


@pytest.mark.asyncio
async def test_the_webhooks_walk_answers_a_rayservice_parent_from_what_the_leaders_connector_holds() -> None:
    """A RayCluster under a queued RayService the RayService integration lists: the webhook's walk (HeldParents
    attached to the connector's parents registry, as a leader's) finds it without a GET to the apiserver."""
    connector = watched_jobs.connector(ON)
    service = listed_service()
    connector.rayservices.known[service.key] = service  # type: ignore[union-attr]
    assert await watched_jobs.walk_over_held(connector, ON, raw_cluster(suspend=True)) == (True, [], 1)


def test_what_was_done_to_a_rayservice_is_recorded_as_an_event_on_the_rayservice() -> None:
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/svc", uid=UID, kind="RayService", action="CreatedWorkload",
                                          workload=f"ns/{SERVICE_WL}")))
    event = mirror.kube_events.ready[1]
    involved = event.before
    assert (involved.api_version, involved.kind, involved.name) == ("ray.io/v1", "RayService", "svc")  # type: ignore[union-attr]
    (recorded,) = job_events.job_events(event.event, involved)  # type: ignore[arg-type]
    assert recorded.component == "ray.io/rayservice-kueue-controller"
