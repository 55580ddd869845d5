"""What keeps the resource-in-use finalizer on a queue object, from plain projected state."""

from __future__ import annotations

from fixtures.eventgen import (
    T0,
    admission,
    cluster_queue,
    flavor,
    fold,
    local_queue,
    meta,
    namespace,
    records,
    upsert,
)
from fixtures.eventgen import workload as wl

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.in_use import FINALIZER, finalizer_action, users

DELETED = format_time(T0)


def base() -> list[ev.AnyEvent]:
    tas = o.ResourceFlavor(metadata=meta("tas"), spec=o.ResourceFlavorSpec(node_labels={"a": "b"},
                                                                           topology_name="dc"))
    checked = o.ClusterQueue(metadata=meta("checked"), spec=o.ClusterQueueSpec(
        admission_checks_strategy=o.AdmissionChecksStrategy(admission_checks=[
            o.AdmissionCheckStrategyRule(name="prov")])))
    return [upsert(namespace("team"), T0), upsert(flavor("f0"), T0), upsert(tas, T0),
            upsert(cluster_queue("cq", quotas={"f0": 4}), T0), upsert(checked, T0),
            upsert(local_queue("team", "lq", "cq"), T0), upsert(wl("team", "w", queue="lq"), T0)]


def d(t: int) -> dict[str, int]:
    return {"time": T0 + t, "cycle": t, "input": 0}


def test_users_of_each_kind() -> None:
    state = fold(records([base()]))
    assert users(state, "ClusterQueue", "cq") == []
    assert users(state, "ResourceFlavor", "f0") == ["cq"]
    assert users(state, "ResourceFlavor", "spot") == []
    assert users(state, "AdmissionCheck", "prov") == ["checked"]
    assert users(state, "Topology", "dc") == ["tas"]
    state = fold(records([base() + [ev.QuotaReserved(key="team/w", admission=admission("cq", "f0", 1000), **d(1))]]))
    assert users(state, "ClusterQueue", "cq") == ["team/w"]
    state = fold(records([base() + [ev.QuotaReserved(key="team/w", admission=admission("cq", "f0", 1000), **d(1)),
                                    ev.WorkloadFinished(key="team/w", reason="Succeeded", message="", time=T0 + 2)]]))
    assert users(state, "ClusterQueue", "cq") == [], "a finished workload no longer reserves quota"


def test_finalizer_added_to_a_live_object_and_removed_only_when_unused() -> None:
    state = fold(records([base() + [ev.QuotaReserved(key="team/w", admission=admission("cq", "f0", 1000), **d(1))]]))
    live = o.ClusterQueue(metadata=meta("cq"))
    assert finalizer_action(state, "ClusterQueue", live) == "add"
    held = o.ClusterQueue(metadata=meta("cq", finalizers=[FINALIZER]))
    assert finalizer_action(state, "ClusterQueue", held) is None
    deleting = o.ClusterQueue(metadata=meta("cq", finalizers=["other", FINALIZER], deletion_timestamp=DELETED))
    assert finalizer_action(state, "ClusterQueue", deleting) is None, "a workload still reserves quota in it"
    unused = o.ClusterQueue(metadata=meta("checked", finalizers=[FINALIZER], deletion_timestamp=DELETED))
    assert finalizer_action(state, "ClusterQueue", unused) == "remove"
    gone_already = o.ClusterQueue(metadata=meta("checked", finalizers=["other"], deletion_timestamp=DELETED))
    assert finalizer_action(state, "ClusterQueue", gone_already) is None, "not ours to add while deleting"
    flavor_deleting = o.ResourceFlavor(metadata=meta("f0", finalizers=[FINALIZER], deletion_timestamp=DELETED))
    assert finalizer_action(state, "ResourceFlavor", flavor_deleting) is None


def test_under_dynamic_quota_orchestration_a_flavor_is_used_by_the_quotas_in_force() -> None:
    """Kueue asks its cache which ClusterQueues use a flavor, and the cache holds the quotas in force: under
    DynamicQuotaOrchestration a flavor only ``status.effectiveQuotas`` lists is in use, one only the spec lists
    is not."""
    effective = {"effectiveQuotas": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": "3"}]}]}]}}
    cq = cluster_queue("cq", quotas={"f0": 4})
    cq = o.ClusterQueue(metadata=cq.metadata, spec=cq.spec, status=effective)
    gate = ev.ConfigRecorded(time=T0, writer="t", document={"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                             "kind": "Configuration",
                                                             "featureGates": {"DynamicQuotaOrchestration": True}})
    state = fold(records([[*base(), upsert(flavor("f1"), T0), upsert(cq, T0)]]))
    assert (users(state, "ResourceFlavor", "f0"), users(state, "ResourceFlavor", "f1")) == (["cq"], [])
    state.apply(ev.Record(state.offset + 1, gate))
    assert (users(state, "ResourceFlavor", "f0"), users(state, "ResourceFlavor", "f1")) == ([], ["cq"])
