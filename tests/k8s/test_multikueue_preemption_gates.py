"""MultiKueueOrchestratedPreemption in the MultiKueue connector: the copies it makes are gated, the gate the log
opened is written onto the copy's status (its other gates kept), and what it reads of a copy (its
``BlockedOnPreemptionGates`` condition, its gates) — but not the echo of a copy the write has not reached yet."""

from __future__ import annotations

from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import workload_copy
from connectors.k8s.multikueue_worker import gate_patch, remote_conditions, remote_gates
from events import objects as o
from projections.preemption_gates import opened_on
from projections.workloads import RemoteCopy

GATE = "kueue.x-k8s.io/multikueue"
MANAGER_WL = {"metadata": {"name": "w", "namespace": "ns"},
              "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]}}
T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z"


def test_a_copy_is_made_gated_only_under_the_gate() -> None:
    assert "preemptionGates" not in workload_copy(MANAGER_WL, "o")["spec"]
    assert workload_copy(MANAGER_WL, "o", gated=True)["spec"]["preemptionGates"] == [{"name": GATE}]
    assert "preemptionGates" not in MANAGER_WL["spec"], "the manager's is left as it is"


def test_a_gated_copy_carries_none_of_the_manager_workloads_own_gates() -> None:
    """Kueue #12587 (in v0.18 and later; its scheduler_test.go "Should treat manager-level and worker-level
    preemption gates independently"): the gates of the manager's Workload are the manager's; a copy made under
    the gate lists the MultiKueue gate alone, so a gate no one opens on the worker does not keep the copy from
    preempting there for good. Gate off, the copy keeps the spec as it is, gates included, as Kueue's does."""
    own = {**MANAGER_WL, "spec": {**MANAGER_WL["spec"], "preemptionGates": [{"name": "dummy-gate"}, {"name": GATE}]}}
    assert workload_copy(own, "o", gated=True)["spec"]["preemptionGates"] == [{"name": GATE}]
    assert workload_copy(own, "o")["spec"]["preemptionGates"] == [{"name": "dummy-gate"}, {"name": GATE}]
    assert own["spec"]["preemptionGates"] == [{"name": "dummy-gate"}, {"name": GATE}], "the manager's is left as it is"


def test_the_opened_gate_is_written_with_the_copys_other_gates_kept() -> None:
    opened = o.PreemptionGateState(name=GATE, position="Open", last_transition_time=T1)
    assert gate_patch({"status": {}}, opened) == {
        "status": {"preemptionGates": [{"name": GATE, "position": "Open", "lastTransitionTime": T1}]}}
    raw = {"status": {"preemptionGates": [{"name": "example.com/g", "position": "Closed", "lastTransitionTime": T0},
                                          {"name": GATE, "position": "Closed", "lastTransitionTime": T0}]}}
    assert gate_patch(raw, opened) == {"status": {"preemptionGates": [
        {"name": "example.com/g", "position": "Closed", "lastTransitionTime": T0},
        {"name": GATE, "position": "Open", "lastTransitionTime": T1}]}}
    shown = {"status": {"preemptionGates": [{"name": GATE, "position": "Open", "lastTransitionTime": T1}]}}
    assert gate_patch(shown, opened) is None, "shown so already: nothing to write"


def test_the_blocked_condition_and_the_gates_of_a_copy_are_read() -> None:
    raw = {"status": {"conditions": [
        {"type": "BlockedOnPreemptionGates", "status": "True", "reason": "PreemptionGated",
         "message": "Workload requires preemption, but it's gated", "lastTransitionTime": T0},
        {"type": "Other", "status": "True", "reason": "X"}],
        "preemptionGates": [{"name": GATE, "position": "Closed", "lastTransitionTime": T0}]}}
    assert [c.type for c in remote_conditions(raw)] == ["BlockedOnPreemptionGates"]
    assert remote_gates(raw) == [o.PreemptionGateState(name=GATE, position="Closed", last_transition_time=T0)]


def test_a_copy_not_yet_showing_the_gate_the_log_opened_is_no_news() -> None:
    closed = [o.PreemptionGateState(name=GATE, position="Closed", last_transition_time=T0)]
    known = opened_on(RemoteCopy(preemption_gates=tuple(closed)), GATE, T1)
    assert known.preemption_gates == (o.PreemptionGateState(name=GATE, position="Open", last_transition_time=T1),)
    assert MultiKueueConnector._opening(known, closed)
    assert MultiKueueConnector._opening(known, [])
    assert not MultiKueueConnector._opening(known, list(known.preemption_gates))
    assert not MultiKueueConnector._opening(RemoteCopy(preemption_gates=tuple(closed)), [])
