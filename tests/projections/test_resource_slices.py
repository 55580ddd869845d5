"""ResourceSlices (projections.resource_slices): observed into the log, folded into pools as Kueue groups them
(newest generation, complete pools only), and what a request's matched devices cost under a counter or capacity
source, with the numbers of Kueue's DRA KEP and its pkg/dra capacity tests."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.manifests import cluster_role
from connectors.k8s.resources import BY_KIND, WATCHED
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.manifests import load_text
from projections.resource_slices import ResourceSlices, capacity_charge, counter_charge

T0 = 1_700_000_000_000


def _slice(name: str, pool: str = "node1-gpu0", generation: int = 1, count: int = 1, driver: str = "gpu.example.com",
           devices: list[dict] | None = None, **spec: Any) -> o.ResourceSlice:
    return msgspec.convert({"kind": "ResourceSlice", "metadata": {"name": name, "uid": f"u-{name}"},
                            "spec": {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                                "resourceSliceCount": count},
                                     "devices": devices or [], **spec}}, o.ResourceSlice)


def _mig(name: str, profile: str, memory: str) -> dict:
    return {"name": name, "attributes": {"gpu.example.com/profile": {"string": profile}},
            "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": {"memory": {"value": memory}}}]}


def _devices(*ds: dict) -> list[o.Device]:
    return [msgspec.convert(d, o.Device) for d in ds]


def _fold(*slices: o.ResourceSlice) -> ResourceSlices:
    folded = ResourceSlices()
    for rs in slices:
        folded.apply(ev.ObjectUpserted(time=T0, obj=rs))
    return folded


def test_a_resource_slice_is_read_from_a_manifest_with_what_kueue_reads() -> None:
    m = load_text("""
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node1-gpu0-devices}
spec:
  driver: gpu.example.com
  pool: {name: node1-gpu0, generation: 1, resourceSliceCount: 2}
  nodeName: node1
  devices:
  - name: gpu-0-mig-1g.10gb-0
    attributes:
      gpu.example.com/profile: {string: 1g.10gb}
      gpu.example.com/index: {int: 0}
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters: {memory: {value: 9856Mi}}
  - name: nic-0
    allowMultipleAllocations: true
    capacity:
      bandwidth: {value: 10G, requestPolicy: {default: 1G, validRange: {min: 1G, step: 1G}}}
""")
    (rs,) = m.objects
    assert isinstance(rs, o.ResourceSlice)
    assert (rs.spec.driver, rs.spec.pool.resource_slice_count, rs.spec.node_name) == ("gpu.example.com", 2, "node1")
    mig, nic = rs.spec.devices
    assert mig.attributes["gpu.example.com/index"].int_value == 0
    assert mig.consumes_counters[0].counters["memory"].value == "9856Mi"
    assert nic.allow_multiple_allocations is True
    policy = nic.capacity["bandwidth"].request_policy
    assert policy is not None and policy.valid_range is not None and policy.valid_range.step == "1G"
    assert msgspec.json.decode(msgspec.json.encode(rs), type=o.KueueObject) == rs  # as the log holds it


def test_a_resource_slice_whose_quantities_do_not_parse_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"spec\.devices\[0\]\.consumesCounters\[0\]\.counters\.memory\.value"):
        load_text("""
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  devices: [{name: a, consumesCounters: [{counterSet: c, counters: {memory: {value: lots}}}]}]
""")


def test_resource_slices_are_watched_and_may_be_read() -> None:
    r = BY_KIND["ResourceSlice"]
    assert (r.group, r.version, r.plural, r.namespaced, r.optional) == ("resource.k8s.io", "v1", "resourceslices",
                                                                        False, True)
    assert "ResourceSlice" in WATCHED
    rules = cluster_role()["rules"]
    assert any(rule["apiGroups"] == ["resource.k8s.io"] and "resourceslices" in rule["resources"]
               and set(rule["verbs"]) == {"get", "list", "watch"} for rule in rules)
    assert not any("resourceslices" in rule["resources"] and "create" in rule["verbs"] for rule in rules)


def test_a_pool_counts_its_newest_generation_once_complete() -> None:
    counters = _slice("a-counters", count=2, sharedCounters=[{"name": "gpu-0-counter-set",
                                                              "counters": {"memory": {"value": "80Gi"}}}])
    devices = _slice("b-devices", count=2, devices=[_mig("gpu-0-mig-1g.10gb-0", "1g.10gb", "9856Mi")])
    folded = _fold(devices)
    (pool,) = folded.pools("gpu.example.com")
    assert not pool.complete and folded.devices("gpu.example.com") == ()  # one of its two slices
    assert folded.apply(ev.ObjectUpserted(time=T0, obj=counters))
    (pool,) = folded.pools("gpu.example.com")
    assert pool.complete and [s.metadata.name for s in pool.slices] == ["a-counters", "b-devices"]
    assert [d.name for d in folded.devices("gpu.example.com")] == ["gpu-0-mig-1g.10gb-0"]
    newer = _slice("c-devices", generation=2, devices=[_mig("gpu-0-mig-7g.80gb-0", "7g.80gb", "80Gi")])
    folded.apply(ev.ObjectUpserted(time=T0, obj=newer))
    (pool,) = folded.pools("gpu.example.com")
    assert (pool.generation, [s.metadata.name for s in pool.slices]) == (2, ["c-devices"])  # the older go
    assert [d.name for d in folded.devices("gpu.example.com")] == ["gpu-0-mig-7g.80gb-0"]
    assert folded.devices("other.example.com") == ()
    assert folded.apply(ev.ObjectDeleted(time=T0, kind="ResourceSlice", key="c-devices"))
    assert [d.name for d in folded.devices("gpu.example.com")] == ["gpu-0-mig-1g.10gb-0"]
    assert not folded.apply(ev.ObjectDeleted(time=T0, kind="ResourceSlice", key="c-devices"))
    assert not folded.apply(ev.ObjectDeleted(time=T0, kind="DeviceClass", key="a-counters"))


def test_pools_and_devices_come_in_name_order_and_an_unchanged_slice_changes_nothing() -> None:
    b = _slice("s-b", pool="pool-b", devices=[{"name": "b0"}])
    a = _slice("s-a", pool="pool-a", devices=[{"name": "a0"}, {"name": "a1"}])
    folded = _fold(b, a)
    assert [p.name for p in folded.pools("gpu.example.com")] == ["pool-a", "pool-b"]
    assert [d.name for d in folded.devices("gpu.example.com")] == ["a0", "a1", "b0"]
    resent = msgspec.structs.replace(a, metadata=msgspec.structs.replace(a.metadata, resource_version="9"))
    assert not folded.apply(ev.ObjectUpserted(time=T0, obj=resent))


def test_a_counter_source_charges_the_largest_consumption_among_matched_devices() -> None:
    """The KEP's MIG example: a 1g.10gb request costs 9856Mi of gpu.memory, a 7g.80gb one 80Gi; a selector matching
    both profiles costs the larger; count multiplies it."""
    small, large = _mig("m0", "1g.10gb", "9856Mi"), _mig("m1", "7g.80gb", "80Gi")
    assert counter_charge(_devices(small), "memory", 1) == 9856 * 2**20
    assert counter_charge(_devices(large), "memory", 1) == 80 * 2**30
    assert counter_charge(_devices(small, large), "memory", 1) == 80 * 2**30
    assert counter_charge(_devices(small), "memory", 3) == 3 * 9856 * 2**20
    assert counter_charge(_devices(small), "multiprocessors", 1) is None  # not published: inadmissible
    assert counter_charge(_devices({"name": "whole-gpu"}), "memory", 1) is None
    negative = {"name": "n", "consumesCounters": [{"counterSet": "c", "counters": {"memory": {"value": "-1"}}}]}
    assert counter_charge(_devices(negative), "memory", 2) == 0  # a driver's negative value: 0
    huge = {"name": "h", "consumesCounters": [{"counterSet": "c", "counters": {"memory": {"value": "8Ei"}}}]}
    assert counter_charge(_devices(huge), "memory", 4) == 2**63 - 1  # saturates


def _cap(value: str, **policy: Any) -> dict:
    return {"name": "gpu", "capacity": {"memory": {"value": value, **({"requestPolicy": policy} if policy else {})}}}


GI = 2**30


@pytest.mark.parametrize(("devices", "requested", "count", "charge"), [
    ([_cap("80Gi")], "20Gi", 1, 20 * GI),  # the claim's own request
    ([_cap("80Gi", default="40Gi")], None, 1, 40 * GI),  # else the device's default
    ([_cap("80Gi", default="40Gi"), _cap("100Gi", default="10Gi")], None, 1, 40 * GI),  # the largest
    ([_cap("80Gi")], None, 1, 80 * GI),  # else the whole capacity
    ([_cap("80Gi")], "20Gi", 2, 40 * GI),
    ([_cap("80Gi", validValues=["10Gi", "20Gi", "40Gi"])], "15Gi", 1, 20 * GI),  # up to the next valid value
    ([_cap("80Gi", validValues=["10Gi", "20Gi", "40Gi"])], "5Gi", 1, 10 * GI),
    ([_cap("80Gi", validValues=["10Gi", "20Gi", "40Gi"])], "20Gi", 1, 20 * GI),
    ([_cap("80Gi", validRange={"min": "1Gi", "max": "80Gi", "step": "1Gi"})], "15500Mi", 1, 16 * GI),
    ([_cap("80Gi", validRange={"min": "1Gi", "max": "80Gi", "step": "1Gi"})], "500Mi", 1, 1 * GI),
    ([_cap("80Gi", validRange={"min": "1Gi", "max": "80Gi"})], "15500Mi", 1, 15500 * 2**20),  # no step
    ([_cap("80Gi", validRange={"max": "80Gi", "step": "1Gi"})], "15500Mi", 1, 15500 * 2**20),  # no min: no steps
    ([_cap("80Gi", validRange={"min": "10Gi", "max": "80Gi", "step": "20Gi"})], "25Gi", 1, 30 * GI),
    ([_cap("80Gi", validRange={"min": "10Gi", "max": "80Gi", "step": "20Gi"})], "30Gi", 1, 30 * GI),
    ([_cap("80Gi", validValues=["10Gi"]), _cap("80Gi")], "50Gi", 1, 50 * GI),  # one device takes it
])
def test_a_capacity_source_charges_the_request_rounded_to_the_device_policy(
        devices: list[dict], requested: str | None, count: int, charge: int) -> None:
    assert capacity_charge(_devices(*devices), "memory", requested, count).value == charge


def test_a_capacity_source_no_matched_device_can_take_is_refused_with_kueues_reason() -> None:
    none_has_it = capacity_charge(_devices({"name": "gpu"}), "memory", None, 1)
    assert none_has_it == (None, 'matched devices have no capacity dimension "memory"')
    refused = capacity_charge(_devices(_cap("80Gi", validValues=["10Gi", "20Gi"]),
                                       _cap("80Gi", validValues=["10Gi", "30Gi"]), {"name": "other"}),
                              "memory", "50Gi", 1)
    assert refused == (None, "capacity request cannot be satisfied by any matched device's RequestPolicy for "
                             'dimension "memory"')
    over = capacity_charge(_devices(_cap("80Gi", validRange={"min": "1Gi", "max": "80Gi", "step": "1Gi"})),
                           "memory", "81Gi", 1)
    assert over.value is None
