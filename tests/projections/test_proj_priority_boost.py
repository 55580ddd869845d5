"""PriorityBoost (alpha, off) in the fold: a workload's ``kueue.x-k8s.io/priority-boost`` annotation is added to its
priority under the gate, read as Kueue reads it (Go's ``strconv.ParseInt(value, 10, 32)``; a value it cannot read
counts as no boost), kept whatever the gate so that a Configuration turning the gate on or off re-prioritises the
workloads, and a change of it takes a parked workload back to its queue's heap under the gate — any change of the
text, as Kueue compares the annotation's text (``pkg/cache/queue``), even one that leaves the boost as it was. The
scenarios ``priority-boost-*`` show the scheduling side; here, what a scenario (one configuration) cannot."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import (
    T0,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    priority_class,
    upsert,
    workload,
)

from events import objects as o
from events import priority_boost
from events import schema as ev
from events.errors import InvalidInput
from events.manifests import Checks, validate_object
from kueue_es.statefile import load_state
from projections import snapshot
from projections.cluster import ClusterState

ANNOTATION = "kueue.x-k8s.io/priority-boost"


@pytest.mark.parametrize(("value", "want"), [
    ("", 0), ("0", 0), ("20", 20), ("-5", -5), ("+7", 7), ("007", 7), ("-0", 0),
    ("2147483647", 2**31 - 1), ("-2147483648", -(2**31)),
    ("2147483648", None), ("-2147483649", None), (" 5", None), ("5 ", None), ("5\n", None), ("1_000", None),
    ("0x10", None), ("1.5", None), ("1e3", None), ("+", None), ("--1", None), ("abc", None), ("\u0661", None),
])
def test_the_annotation_is_read_as_kueue_reads_an_int32(value: str, want: int | None) -> None:
    assert priority_boost.parse(value) == want
    assert priority_boost.boost_of(value) == (0 if want is None else want)
    assert (priority_boost.error(value) is None) == (want is not None and value != ""), "empty: read as 0, refused"


def boosted(name: str, boost: str | None, *, priority: int = 0, priority_class: str = "", created: int = T0,
            rv: str = "1") -> o.Workload:
    w = workload("team", name, queue="lq", priority=priority, priority_class=priority_class, created=created)
    annotations = {ANNOTATION: boost} if boost is not None else {}
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, annotations=annotations,
                                                                       resource_version=rv))


def config(**gates: bool) -> ev.ConfigRecorded:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    return ev.ConfigRecorded(time=T0, document=doc, writer="test", id=f"c-{sorted(gates.items())}")


class Fold:
    def __init__(self, *workloads: o.Workload, quota: int = 0, **gates: bool) -> None:
        self.state = ClusterState()
        self.apply(config(**gates), upsert(namespace("team"), T0), upsert(flavor("f0"), T0),
                   upsert(priority_class("high", 100), T0),
                   upsert(cluster_queue("cq", quotas={"f0": quota}), T0), upsert(local_queue("team", "lq", "cq"), T0),
                   *(upsert(w, T0) for w in workloads))

    def apply(self, *events: ev.Event) -> None:
        for e in events:
            self.state.apply(ev.Record(self.state.offset + 1, e))

    def priorities(self) -> dict[str, tuple[int, int]]:
        """Workload name -> (effective priority, boost)."""
        return {wl.name: (wl.priority, wl.boost) for wl in self.state.workloads.values()}

    def order(self) -> list[str]:
        return [k.split("/")[1] for k in self.state.queues["cq"].ordered()]

    def parked(self, name: str) -> bool:
        return f"team/{name}" in self.state.queues["cq"].inadmissible

    def park(self, name: str) -> None:
        self.state.queues["cq"].park(f"team/{name}", bulk=False)


WORKLOADS = (boosted("plain", None, priority=10), boosted("up", "20", priority=1, created=T0 + 1000),
             boosted("down", "-15", priority=10, created=T0 + 2000), boosted("bad", "x9", priority=5, created=T0 + 3000))


def test_gate_on_the_boost_is_added_and_orders_the_queue_a_value_kueue_cannot_read_is_no_boost() -> None:
    f = Fold(*WORKLOADS, PriorityBoost=True)
    assert f.priorities() == {"plain": (10, 0), "up": (21, 20), "down": (-5, -15), "bad": (5, 0)}
    assert f.order() == ["up", "plain", "bad", "down"]
    assert f.state.workloads["team/bad"].boost_annotation == "x9", "kept as written, whatever it says"


def test_gate_off_the_annotation_changes_nothing_but_is_kept() -> None:
    f = Fold(*WORKLOADS)
    assert f.priorities() == {"plain": (10, 0), "up": (1, 0), "down": (10, 0), "bad": (5, 0)}
    assert f.order() == ["plain", "down", "bad", "up"]
    assert f.state.workloads["team/up"].boost_annotation == "20"


def test_a_configuration_turning_the_gate_on_or_off_reprioritises_every_workload() -> None:
    f = Fold(*WORKLOADS)
    f.apply(config(PriorityBoost=True))
    assert f.priorities() == Fold(*WORKLOADS, PriorityBoost=True).priorities()
    assert f.order() == ["up", "plain", "bad", "down"]
    restored = snapshot.decode(snapshot.encode(f.state))
    assert snapshot.digest(restored) == snapshot.digest(f.state)
    assert (restored.workloads["team/up"].boost, restored.workloads["team/up"].boost_annotation) == (20, "20")
    f.apply(config(PriorityBoost=False))
    assert f.priorities() == Fold(*WORKLOADS).priorities()
    assert f.order() == ["plain", "down", "bad", "up"]


def test_a_workload_holding_quota_takes_the_boost_too() -> None:
    """Preemption compares the effective priorities of the workloads holding quota."""
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "1"}, count=1)])
    w = boosted("running", "7", priority=1)
    f = Fold(quota=1)
    f.apply(upsert(w, T0), ev.QuotaReserved(time=T0, key="team/running", admission=admission, cycle=1, input=0))
    assert f.priorities() == {"running": (1, 0)}
    f.apply(config(PriorityBoost=True))
    assert f.priorities() == {"running": (8, 7)}
    f.apply(upsert(boosted("running", "-2", priority=1, rv="2"), T0))
    assert f.priorities() == {"running": (-1, -2)}


def test_a_class_value_change_keeps_the_boost() -> None:
    f = Fold(boosted("classy", "5", priority_class="high"), PriorityBoost=True)
    assert f.priorities() == {"classy": (105, 5)}
    f.apply(upsert(priority_class("high", 300), T0))
    assert f.priorities() == {"classy": (305, 5)}
    assert f.state.workloads["team/classy"].base_priority == 300


@pytest.mark.parametrize(("before", "after"), [(None, "0"), ("5", "05"), ("3", "x"), ("3", None), ("3", "4")])
def test_under_the_gate_any_change_of_the_annotation_takes_a_parked_workload_back(before, after) -> None:
    f = Fold(boosted("w", before), PriorityBoost=True, SchedulingEquivalenceHashing=False,
             SchedulingEquivalenceHashingIgnorePodSetName=False)
    f.park("w")
    f.apply(upsert(boosted("w", before, rv="2"), T0))
    assert f.parked("w"), "an update that leaves the annotation as it was keeps it parked"
    f.apply(upsert(boosted("w", after, rv="3"), T0))
    assert not f.parked("w")


def test_without_the_gate_a_changed_annotation_leaves_a_parked_workload_parked() -> None:
    f = Fold(boosted("w", None), SchedulingEquivalenceHashing=False, SchedulingEquivalenceHashingIgnorePodSetName=False)
    f.park("w")
    f.apply(upsert(boosted("w", "9", rv="2"), T0))
    assert f.parked("w") and f.state.workloads["team/w"].boost_annotation == "9"


def test_the_webhook_check_refuses_what_kueue_cannot_read_under_the_gate_only() -> None:
    bad = boosted("w", "ten")
    with pytest.raises(InvalidInput, match=r"Workload team/w: field `metadata.annotations\[kueue.x-k8s.io/"
                                           r'priority-boost\]`: Invalid value: "ten": must be a valid signed '
                                           r"integer$"):
        validate_object(bad, "Workload team/w", checks=Checks(priority_boost=True))
    validate_object(bad, "Workload team/w")
    validate_object(boosted("w", "-10"), "Workload team/w", checks=Checks(priority_boost=True))


STATE = """
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: w
  namespace: team
  annotations: {kueue.x-k8s.io/priority-boost: '99999999999'}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c}]}}}
"""


@pytest.mark.parametrize("gate", [True, False])
def test_a_state_file_is_checked_under_the_gate_of_its_configuration(tmp_path, gate: bool) -> None:
    path = tmp_path / "state.yaml"
    path.write_text(STATE + f"""---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {{PriorityBoost: {str(gate).lower()}}}
""")
    if gate:
        with pytest.raises(InvalidInput, match=r"state.yaml: Workload team/w: field `metadata.annotations\["):
            load_state(str(path))
    else:
        assert load_state(str(path)).state.workloads["team/w"].boost == 0
