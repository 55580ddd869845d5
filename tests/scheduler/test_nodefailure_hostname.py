"""Kueue v0.20 (#15575): node replacement when a Node's kubernetes.io/hostname label differs from its name. The
placement names nodes by the label; the node controller finds the Node carrying it, judges it by its own
readiness, and looks for the workload's pods under the Node's name."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fixtures.tasbuild import T0, node_obj, pod_obj, upsert

from events import schema as ev
from kueue_es.scheduler.nodefailure import FAILED, HEALTHY, node_by_hostname, verdict
from projections.cluster import ClusterState
from projections.workloads import WORKLOAD_ANNOTATION


def _state(ready: bool, pod_phase: str | None = None) -> ClusterState:
    events: list[ev.Event] = [upsert(node_obj({"name": "node-a", "labels": {"hostname": "host-a"}, "ready": ready}))]
    if pod_phase is not None:
        events.append(upsert(pod_obj({"name": "p0", "node": "node-a", "phase": pod_phase,
                                      "annotations": {WORKLOAD_ANNOTATION: "w"}})))
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def _wl() -> Any:
    return SimpleNamespace(key="test-ns/w", namespace="test-ns", name="w", pod_sets=[], check_states={},
                           admission=SimpleNamespace(pod_set_assignments=[]))


def test_a_ready_node_named_apart_from_its_hostname_is_healthy() -> None:
    state = _state(ready=True)
    assert node_by_hostname(state, "host-a") is state.nodes["node-a"]
    assert verdict(state, _wl(), "host-a", ["main"], T0) == HEALTHY


def test_a_not_ready_node_waits_for_the_workloads_pods_bound_to_it_by_name() -> None:
    state = _state(ready=False, pod_phase="Running")
    assert verdict(state, _wl(), "host-a", ["main"], T0) == HEALTHY, "a pod still runs on node-a"
    state = _state(ready=False, pod_phase="Failed")
    assert verdict(state, _wl(), "host-a", ["main"], T0) == FAILED


def test_a_node_whose_label_names_another_host_is_not_taken_for_it() -> None:
    state = _state(ready=True)
    assert node_by_hostname(state, "node-a") is None
    assert verdict(state, _wl(), "node-a", ["main"], T0) == FAILED
