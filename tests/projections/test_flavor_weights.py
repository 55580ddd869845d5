"""ResourceFlavor ``spec.resourceWeights`` (Kueue's KEP-8902, flavor-aware DRS): Fair Sharing's dominant
resource share weighs each (flavor, resource)'s borrowed amount and what the parent could lend of it by the
flavor's weight for that resource (1 when not given), as Kueue's ``dominantResourceShare`` and
``calculateWeightedLendable`` (``pkg/cache/scheduler/fair_sharing.go``) do; the ClusterQueue and Cohort status
and the weighted-share gauges read the same shares."""

from __future__ import annotations

import math

import msgspec
from fixtures.eventgen import (
    T0,
    fold,
    local_queue,
    meta,
    namespace,
    records,
    shown_reserved,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from events.manifests import check_foldable
from projections import fair_share, snapshot
from projections.cluster import ClusterState
from projections.metrics import families
from projections.queue_status import cluster_queue_status, weighted_share

FAIR = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {},
        "metrics": {"enableClusterQueueResources": True}}


def _flavor(name: str, weights: dict[str, o.Quantity] | None = None) -> o.ResourceFlavor:
    return o.ResourceFlavor(metadata=meta(name), spec=o.ResourceFlavorSpec(resource_weights=weights or {}))


def _cq(name: str, quotas: dict[str, int]) -> o.ClusterQueue:
    """A ClusterQueue of cohort ``all`` covering cpu with ``quotas`` (flavor -> cores), in that order."""
    group = o.ResourceGroup(covered_resources=["cpu"], flavors=[
        o.FlavorQuotas(name=f, resources=[o.ResourceQuota(name="cpu", nominal_quota=q)])
        for f, q in quotas.items()])
    return o.ClusterQueue(metadata=meta(name), spec=o.ClusterQueueSpec(
        resource_groups=[group], cohort_name="all", namespace_selector=o.LabelSelector()))


def _holding(name: str, cq: str, flavor: str, cores: int) -> o.Workload:
    wl = workload("team", name, queue=f"lq-{cq}", cpu=str(cores), created=T0)
    return shown_reserved(wl, o.Admission(cluster_queue=cq, pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": flavor}, resource_usage={"cpu": str(cores)}, count=1)]), admitted=True)


def _state(spot: dict[str, o.Quantity] | None) -> ClusterState:
    """Cohort ``all``: spot 2 + 2 + 4 and reserved 2 + 2 + 4 cpu over a, b, c; a holds 5 spot (borrows 3), b 4
    reserved (borrows 2). ``spot``: the spot flavor's resourceWeights."""
    objs: list[o.KObject] = [namespace("team"), _flavor("reserved"), _flavor("spot", spot),
                             _cq("a", {"spot": 2, "reserved": 2}), _cq("b", {"spot": 2, "reserved": 2}),
                             _cq("c", {"spot": 4, "reserved": 4}),
                             *(local_queue("team", f"lq-{q}", q) for q in "abc"),
                             _holding("a-running", "a", "spot", 5), _holding("b-running", "b", "reserved", 4)]
    return fold(records([[ev.ConfigRecorded(time=T0, document=FAIR), *(upsert(x, T0) for x in objs)]]))


def _share(state: ClusterState, cq: str, extra: dict[str, int] | None = None) -> fair_share.DRS:
    return fair_share.dominant_share(state.quota.cluster_queues[cq], extra,
                                     weights=fair_share.flavor_weights(state.flavors))


def test_without_weights_the_shares_are_the_unweighted_ones() -> None:
    """a: 3 x 1000 / 16; b: 2 x 1000 / 16 — and with the head of each counted, as a cycle orders them."""
    state = _state(None)
    assert fair_share.flavor_weights(state.flavors) == {}
    assert (_share(state, "a").ratio, _share(state, "b").ratio) == (3000 / 16, 2000 / 16)
    a, b = _share(state, "a", {"spot/cpu": 3000}), _share(state, "b", {"spot/cpu": 3000})
    assert (a.ratio, a.dominant, b.ratio) == (6000 / 16, "cpu", 3000 / 16)


def test_a_flavor_s_weight_scales_its_borrowing_and_what_the_parent_could_lend_of_it() -> None:
    """Spot cpu weighs 0.25: lendable cpu is 8 x 0.25 + 8 = 10. a borrows 3 spot: 0.75 x 1000 / 10 = 75; b
    borrows 2 reserved: 200. With the heads: a 6 spot (150), b 1 spot and 2 reserved (225): the order
    flips."""
    state = _state({"cpu": "250m"})
    assert fair_share.flavor_weights(state.flavors) == {"spot/cpu": 0.25}
    assert (_share(state, "a").ratio, _share(state, "b").ratio) == (75.0, 200.0)
    a, b = _share(state, "a", {"spot/cpu": 3000}), _share(state, "b", {"spot/cpu": 3000})
    assert (a.ratio, b.ratio) == (150.0, 225.0)
    assert fair_share.compare(a, b) < 0


def test_one_weight_for_every_flavor_of_a_resource_cancels_out() -> None:
    """The KEP's guideline: the same multiplier on every flavor of a resource leaves its ratio as it was."""
    state = _state({"cpu": "4"})
    state.apply(ev.Record(state.offset + 1, upsert(_flavor("reserved", {"cpu": 4}), T0)))
    assert _share(state, "a").ratio == 3000 / 16
    assert _share(state, "b").ratio == 2000 / 16


def test_a_weight_for_another_resource_or_not_above_zero_weighs_one() -> None:
    """Kueue's ComputeFlavorResourceWeights keeps only weights above 0 (a stored 0 or negative one weighs 1),
    and a weight only weighs its own resource. One that is no quantity (Kueue's CRD would not store it,
    kueue-es's generated one has no quantity pattern) is not refused by the watch either: the flavor folds and
    the weight weighs 1."""
    weights: dict[str, o.Quantity] = {"memory": "8", "nvidia.com/gpu": "0", "example.com/x": "-2",
                                      "example.com/y": "heavy"}
    check_foldable(_flavor("spot", weights), "ResourceFlavor spot")
    state = _state(weights)
    assert fair_share.flavor_weights(state.flavors) == {"spot/memory": 8.0}
    assert _share(state, "a").ratio == 3000 / 16


def test_the_status_and_the_gauges_read_the_weighted_shares() -> None:
    """ClusterQueue a's ``status.fairSharing.weightedShare`` (rounded up) and the gauges: 75 weighted, 187.5
    unweighted (188 in the status)."""
    for spot, share in ((None, 3000 / 16), ({"cpu": "0.25"}, 75.0)):
        state = _state(spot)
        assert weighted_share(state, "ClusterQueue", "a") == math.ceil(share)
        assert cluster_queue_status(state, "a", T0)["fairSharing"] == {"weightedShare": math.ceil(share)}
        out = {f.spec.name: dict(f.samples) for f in families(state)}
        assert out["kueue_cluster_queue_weighted_share"][("a", "all")] == share
        assert out["kueue_cohort_weighted_share"][("all",)] == 0.0


def test_the_weights_survive_a_snapshot_and_a_change_of_them_moves_the_shares() -> None:
    state = _state({"cpu": "0.25"})
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.flavors["spot"].spec.resource_weights == {"cpu": "0.25"}
    assert snapshot.digest(restored) == snapshot.digest(state)
    assert _share(restored, "a").ratio == 75.0
    state.apply(ev.Record(state.offset + 1, upsert(_flavor("spot"), T0 + 1000)))
    assert _share(state, "a").ratio == 3000 / 16


def test_the_view_keeps_the_field_on_the_wire() -> None:
    wire = {"resourceWeights": {"nvidia.com/gpu": "8", "cpu": 1}}
    spec = msgspec.json.decode(msgspec.json.encode(wire), type=o.ResourceFlavorSpec)
    assert spec.resource_weights == {"nvidia.com/gpu": "8", "cpu": 1}
    assert msgspec.json.decode(msgspec.json.encode(spec)) == wire


def test_the_statuses_read_the_weights_once_per_change_of_the_specs(monkeypatch) -> None:
    """Every queue's status reads the same weights: parsed once until a spec changes."""
    state = _state({"cpu": "0.25"})
    shares = [math.ceil(_share(state, q).weighted) for q in "abc"]
    assert shares[0] == 75
    parsed = []
    real = fair_share.flavor_weights
    monkeypatch.setattr(fair_share, "flavor_weights", lambda flavors: parsed.append(1) or real(flavors))
    assert [weighted_share(state, "ClusterQueue", q) for q in "abc"] == shares
    assert weighted_share(state, "Cohort", "all") == 0
    assert len(parsed) == 1
    state.apply(ev.Record(state.offset + 1, upsert(_flavor("spot"), T0 + 1000)))
    assert weighted_share(state, "ClusterQueue", "a") == math.ceil(3000 / 16)
    assert len(parsed) == 2
