"""Kueue's RayService integration, the pure part (:mod:`connectors.k8s.rayservice`): the Workload a RayService gets
from its cluster config, what starting and stopping write (at ``spec.rayClusterConfig``), that it never finishes,
active and ready by its ``Ready`` condition, and when it is skipped — cases from Kueue's
``rayservice_controller_test.go``."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from connectors.k8s import podsetinfo
from connectors.k8s import rayservice as rs
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections.cluster import ClusterState

UID = "svc-uid"
Q = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def template(container: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations} if annotations else {},
            "spec": {"containers": [{"name": container}], **spec}}


def group(name: str, replicas: int | None = None, hosts: int | None = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"groupName": name, "template": template(f"{name}_c", **kw), "minReplicas": 0,
                           "maxReplicas": 9}
    if replicas is not None:
        out["replicas"] = replicas
    if hosts is not None:
        out["numOfHosts"] = hosts
    return out


def raw_service(*groups: dict[str, Any], suspend: bool | None = True, head: dict[str, Any] | None = None,
                annotations: dict[str, str] | None = None, **config: Any) -> dict[str, Any]:
    cluster: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {}, "template": head or template("head_c")},
                               "workerGroupSpecs": list(groups), **config}
    if suspend is not None:
        cluster["suspend"] = suspend
    meta: dict[str, Any] = {"name": "svc", "namespace": "ns", "uid": UID, "resourceVersion": "5", "labels": {Q: "lq"}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta,
            "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": cluster}}


def view(raw: dict[str, Any]) -> rs.RayService:
    return msgspec.convert(raw, rs.RayService)


# --- configuration and names ------------------------------------------------------------------------------------


def test_rayservices_are_managed_only_when_the_frameworks_list_them() -> None:
    assert load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayservice"]}}).manages_rayservices
    assert not load_config({"integrations": {"frameworks": ["ray.io/raycluster"]}}).manages_rayservices
    assert not DEFAULT.manages_rayservices


def test_the_workload_name_hashes_kind_group_name_and_uid() -> None:
    """Kueue's ``GetWorkloadNameForRayService`` (the GVK ray.io/v1 RayService)."""
    digest = hashlib.sha1(f"RayService\nray.io\nsvc\n{UID}".encode()).hexdigest()[:5]
    assert rs.workload_name("svc", UID) == f"rayservice-svc-{digest}"


# --- pod sets (Kueue's TestPodSets) ----------------------------------------------------------------------------


def test_pod_sets_are_the_head_then_each_worker_group_of_the_cluster_config() -> None:
    """"no annotations": replicas default 1; group2 counts its 3."""
    sets = rs.pod_sets(raw_service(group("group1"), group("group2", 3)), tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("head", 1), ("group1", 1), ("group2", 3)]
    assert [ps["template"]["spec"]["containers"][0]["name"] for ps in sets] == ["head_c", "group1_c", "group2_c"]
    assert all("topologyRequest" not in ps for ps in sets)


def test_a_worker_group_on_several_hosts_counts_replicas_times_hosts() -> None:
    """"with NumOfHosts > 1": 2 replicas × 3 hosts."""
    sets = rs.pod_sets(raw_service(group("group1", 2, hosts=3)), tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("head", 1), ("group1", 6)]


def test_under_tas_each_pod_set_asks_for_its_templates_required_topology() -> None:
    """"with required topology annotation"."""
    block = {REQUIRED: "cloud.com/block"}
    sets = rs.pod_sets(raw_service(group("group1", annotations=block), head=template("head_c", block)), tas=True)
    assert [ps["topologyRequest"] for ps in sets] == [{"required": "cloud.com/block"}] * 2


def test_the_workload_is_owned_by_the_rayservice_queued_and_takes_its_pods_priority_class() -> None:
    body = rs.workload_for(ClusterState(), NO_KEYS, raw_service(group("group1", 2)), "wl")
    meta, spec = body["metadata"], body["spec"]
    assert meta["ownerReferences"] == [{"apiVersion": "ray.io/v1", "kind": "RayService", "name": "svc", "uid": UID,
                                        "controller": True, "blockOwnerDeletion": True}]
    assert spec["queueName"] == "lq" and [ps["name"] for ps in spec["podSets"]] == ["head", "group1"]
    with pytest.raises(Exception, match="low"):  # the class is not in the log
        rs.workload_for(ClusterState(), NO_KEYS, raw_service(group("g", priorityClassName="low")), "wl")
    assert rs.priority_class(view(raw_service(group("a"), group("b", priorityClassName="b")))) == "b"


# --- suspended, started, stopped --------------------------------------------------------------------------------


@pytest.mark.parametrize(("suspend", "suspended"), [(False, False), (True, True), (None, False)])
def test_suspended_is_the_cluster_configs_flag(suspend: bool | None, suspended: bool) -> None:
    """Kueue's TestIsSuspended: not suspended, suspended, suspend nil."""
    assert view(raw_service(group("g"), suspend=suspend)).spec.suspend is suspended


def _admitted(*names: str) -> SimpleNamespace:
    return SimpleNamespace(admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "on-demand"}, count=1) for n in names]), check_states={})


def test_start_merges_each_pod_sets_info_into_the_cluster_config_and_unsuspends_it() -> None:
    raw = raw_service(group("w", 2, nodeSelector={"zone": "a"}))
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "h"}, labels={"x": "1"}),
             podsetinfo.PodSetInfo(node_selector={"pool": "w"})]
    patch = rs.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"} and list(patch["spec"]) == ["rayClusterConfig"]
    config = patch["spec"]["rayClusterConfig"]
    assert config["suspend"] is False
    assert config["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": "h"}
    assert config["headGroupSpec"]["template"]["metadata"]["labels"] == {"x": "1"}
    (workers,) = config["workerGroupSpecs"]
    assert workers["template"]["spec"]["nodeSelector"] == {"zone": "a", "pool": "w"}
    assert workers["maxReplicas"] == 9, "the worker groups are written whole"


def test_start_fails_when_the_admission_lacks_a_pod_set() -> None:
    service = view(raw_service(group("w", 2)))
    with pytest.raises(rs.BadPodSets, match="expecting 1 podset, got 2"):  # Kueue's words
        rs.start_infos(ClusterState(), _admitted("head"), service)


def test_stop_suspends_the_cluster_config_and_restores_each_template() -> None:
    raw = raw_service(group("w", 2, nodeSelector={"pool": "w"}), suspend=False,
                      head=template("head_c", nodeSelector={"pool": "h", "zone": "a"}))
    saved = [o.PodSet(name="head", count=1, template=o.PodTemplateSpec(spec=o.PodSpec(node_selector={"zone": "a"}))),
             o.PodSet(name="w", count=2)]
    config = rs.stop_patch(raw, saved)["spec"]["rayClusterConfig"]
    assert config["suspend"] is True
    assert config["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": None}
    assert "nodeSelector" not in config["workerGroupSpecs"][0]["template"]["spec"]
    bare = rs.start_patch(raw_service(group("w")), [podsetinfo.PodSetInfo(), podsetinfo.PodSetInfo()])
    assert bare["spec"] == {"rayClusterConfig": {"suspend": False}}, "nothing to merge: only the flag"


# --- status -----------------------------------------------------------------------------------------------------


def _with_ready(status: str | None) -> rs.RayService:
    conditions = [] if status is None else [{"type": "Ready", "status": status, "reason": "r", "message": "",
                                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    return view({**raw_service(group("w")), "status": {"conditions": conditions}})


@pytest.mark.parametrize(("status", "ready"), [("True", True), ("False", False), (None, False)])
def test_active_and_pods_ready_follow_the_ready_condition(status: str | None, ready: bool) -> None:
    """Kueue's TestIsActive and TestPodsReady."""
    service = _with_ready(status)
    assert (rs.is_active(service), rs.pods_ready(service)) == (ready, ready)


def test_a_rayservice_never_finishes() -> None:
    assert rs.finished(_with_ready("True")) is None and rs.finished(_with_ready("False")) is None


# --- skipped (DeferRayServiceFinalizationForRedisCleanup) ------------------------------------------------------


def _deleting(raw: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return raw


def test_a_deleting_fault_tolerant_rayservice_is_skipped_only_under_the_gate() -> None:
    options = _deleting(raw_service(group("w"), gcsFaultToleranceOptions={"redisAddress": "redis:6379"}))
    annotated = _deleting(raw_service(group("w"), annotations={"ray.io/ft-enabled": "TRUE"}))
    for raw in (options, annotated):
        assert rs.skipped(view(raw), True)
        assert not rs.skipped(view(raw), False), "the gate off: let go as any deleted job"
    assert not rs.skipped(view(_deleting(raw_service(group("w")))), True), "no fault tolerance"
    assert not rs.skipped(view(_deleting(raw_service(group("w"), annotations={"ray.io/ft-enabled": "false"}))), True)
    assert not rs.skipped(view(raw_service(group("w"), gcsFaultToleranceOptions={})), True), "not being deleted"
