"""ResourceClaims in the log: only the devices they hold (``status.allocation``), which KueueDRADeviceFeasibility's
device check counts as taken (:mod:`kueue_es.scheduler.tas.devices`)."""

from __future__ import annotations

from typing import Any

import msgspec

from connectors.k8s import trim
from connectors.k8s.manifests import cluster_role
from connectors.k8s.resources import BY_KIND, WATCHED
from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState


def _claim(allocated: bool, **meta: Any) -> o.ResourceClaim:
    status: dict[str, Any] = {}
    if allocated:
        status = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"},
            {"request": "dbg", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1", "adminAccess": True},
            {"request": "share", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-2", "shareID": "abc"}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
    return msgspec.convert({"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns", "uid": "u-c", **meta},
                            "spec": {"devices": {"requests": [{"name": "gpu"}]}}, "status": status}, o.ResourceClaim)


def test_resource_claims_are_watched_and_may_be_read_only() -> None:
    r = BY_KIND["ResourceClaim"]
    assert (r.group, r.version, r.plural, r.namespaced, r.optional) == ("resource.k8s.io", "v1", "resourceclaims",
                                                                        True, True)
    assert "ResourceClaim" in WATCHED
    rules = cluster_role()["rules"]
    assert any("resourceclaims" in rule["resources"] and set(rule["verbs"]) == {"get", "list", "watch"}
               for rule in rules)
    assert not any("resourceclaims" in rule["resources"] and "update" in rule["verbs"] for rule in rules)


def test_a_claim_holds_its_results_but_admin_access_ones_and_shares_its_shared_ones() -> None:
    assert _claim(True).held() == (("gpu.example.com", "n1", "gpu-0", False), ("gpu.example.com", "n1", "gpu-2", True))
    assert _claim(False).held() == ()


def test_the_log_keeps_only_allocated_claims_and_only_their_allocation() -> None:
    assert trim.view(_claim(False)) is None
    kept = trim.view(_claim(True, labels={"a": "b"}, annotations={"x": "y"}))
    assert isinstance(kept, o.ResourceClaim)
    assert kept.metadata.labels == {} and kept.metadata.annotations == {}
    assert kept.held() == _claim(True).held()
    assert "ResourceClaim" in trim.DEDUPLICATED


def test_the_fold_keeps_claims_and_a_snapshot_restores_them() -> None:
    state = ClusterState()
    state.apply(ev.Record(0, ev.ObjectUpserted(time=1, key="ns/c", obj=_claim(True))))
    assert list(state.resource_claims) == ["ns/c"]
    restored = snapshot.restore(snapshot.take(state))
    assert restored.resource_claims == state.resource_claims
    state.apply(ev.Record(1, ev.ObjectDeleted(time=2, kind="ResourceClaim", key="ns/c")))
    assert state.resource_claims == {}


def _rule(**selector: str) -> o.DeviceTaintRule:
    return msgspec.convert({"kind": "DeviceTaintRule", "metadata": {"name": "r", "uid": "u-r"},
                            "spec": {"deviceSelector": selector,
                                     "taint": {"key": "k", "value": "v", "effect": "NoExecute"}}}, o.DeviceTaintRule)


def test_device_taint_rules_are_watched_kept_and_select_by_driver_pool_and_device() -> None:
    r = BY_KIND["DeviceTaintRule"]
    assert (r.group, r.version, r.plural, r.namespaced, r.optional) == ("resource.k8s.io", "v1", "devicetaintrules",
                                                                        False, True)
    assert any("devicetaintrules" in rule["resources"] and set(rule["verbs"]) == {"get", "list", "watch"}
               for rule in cluster_role()["rules"])
    assert _rule().selects("d", "p", "x")
    assert _rule(driver="d", pool="p").selects("d", "p", "x") and not _rule(driver="d", pool="p").selects("d", "q", "x")
    assert not _rule(device="y").selects("d", "p", "x")
    state = ClusterState()
    state.apply(ev.Record(0, ev.ObjectUpserted(time=1, key="r", obj=_rule(driver="d"))))
    assert snapshot.restore(snapshot.take(state)).device_taint_rules == state.device_taint_rules == {"r": _rule(driver="d")}
    state.apply(ev.Record(1, ev.ObjectDeleted(time=2, kind="DeviceTaintRule", key="r")))
    assert state.device_taint_rules == {}
