"""How TASReplaceNodeDueToNotReadyOverFixedTime (deprecated, off) combines with TASReplaceNodeOnPodTermination for a
node that is not Ready (the shared reference's §4.3-4; Kueue's ``pkg/controller/tas/node_controller.go``): on, the
node fails once no pod of the workload progresses there or once it has been not Ready for 30 s, whichever comes
first; with pod termination off the 30 s wait alone decides, whether the fixed-time gate is on or not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from events import objects as o
from events.timefmt import format_time
from kueue_es.scheduler.nodefailure import FAILED, HEALTHY, WAITING, verdict
from projections.workloads import WORKLOAD_ANNOTATION

SINCE = 1_704_067_200_000
WL = SimpleNamespace(namespace="team", name="w", key="team/w")


def _state(*, pod_runs: bool) -> SimpleNamespace:
    node = o.Node(metadata=o.ObjectMeta(name="n1"), status=o.NodeStatus(conditions=[
        o.Condition(type="Ready", status="False", last_transition_time=format_time(SINCE))]))
    pods = {}
    if pod_runs:
        pods["team/w-0"] = o.Pod(metadata=o.ObjectMeta(name="w-0", namespace="team",
                                                       annotations={WORKLOAD_ANNOTATION: "w"}),
                                 spec=o.PodSpec(node_name="n1"), status=o.PodStatus(phase="Running"))
    return SimpleNamespace(nodes={"n1": node}, pods=pods, pods_of={"team/w": dict.fromkeys(pods)} if pods else {})


@pytest.mark.parametrize(("on_pod_termination", "fixed_time", "pod_runs", "after_ms", "expected"), [
    # both on: the pods rule still acts before 30 s, the 30 s rule after it whatever the pods do
    (True, True, True, 29_999, HEALTHY),
    (True, True, True, 30_000, FAILED),
    (True, True, False, 1, FAILED),
    # fixed time off (the default): only the pods count
    (True, False, True, 60_000, HEALTHY),
    (True, False, False, 1, FAILED),
    # pod termination off: the 30 s wait alone, with or without the fixed-time gate
    (False, True, False, 29_999, WAITING),
    (False, False, False, 29_999, WAITING),
    (False, True, True, 30_000, FAILED),
    (False, False, True, 30_000, FAILED),
])
def test_a_not_ready_node_under_both_gates(on_pod_termination: bool, fixed_time: bool, pod_runs: bool,
                                           after_ms: int, expected: str) -> None:
    got = verdict(_state(pod_runs=pod_runs), WL, "n1", ["main"], SINCE + after_ms,
                  on_pod_termination=on_pod_termination, fixed_time=fixed_time)
    assert got == expected
