"""Kueue's TAS node controller tests (``pkg/controller/tas/node_controller_test.go``,
TestNodeFailureReconciler, formerly ``node_failure_controller_test.go``) as an oracle: one node looked at
(``n1``) under one admitted workload, the workload's ``status.unhealthyNodes`` after the look (or its
eviction) and the pinned pods the controller fails are Kueue's. The look is kueue-es's
:func:`~kueue_es.scheduler.nodefailure.node_failure_decisions` and
:func:`~kueue_es.scheduler.nodefailure.pods_to_fail` on a state folded from the objects; Kueue's defaults
(TASReplaceNodeOnPodTermination and TASReplaceNodeOnNodeTaints on) unless a case says otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.tasbuild import T0, admitted_workload_obj, node_obj, upsert

from events import schema as ev
from events.timefmt import format_time
from kueue_es.scheduler.nodefailure import node_failure_decisions, pinned_to, pods_to_fail
from projections.cluster import ClusterState

NOW = T0 + 3_600_000
HOST = "kubernetes.io/hostname"
NO_EXECUTE = {"key": "foo", "effect": "NoExecute"}
NO_SCHEDULE = {"key": "foo", "effect": "NoSchedule"}
FOR_A_WHILE = {"key": "foo", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
FOR_GOOD = {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}


def _node(name: str = "n1", *, ready: bool = True, since: int = NOW,
          taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj = node_obj({"name": name, "labels": {"hostname": name}, "ready": ready, "taints": taints})
    obj["status"]["conditions"][0]["lastTransitionTime"] = format_time(since)
    return obj


def _pod(name: str, *, node: str = "n1", phase: str = "Running", deleting: bool = False, pinned: str = "",
         gated: bool = False) -> dict[str, Any]:
    """A pod of the workload bound to ``node`` (``""``: unbound), or pinned by the ungater to ``pinned``."""
    meta: dict[str, Any] = {"name": name, "namespace": "test-ns", "uid": f"uid-{name}",
                            "labels": {"kueue.x-k8s.io/podset": "main"},
                            "annotations": {"kueue.x-k8s.io/workload": "w",
                                            "kueue.x-k8s.io/podset-unconstrained-topology": "true"}}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "nodeSelector": {HOST: pinned} if pinned else {},
                     "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}] if gated else [],
                     "containers": [{"name": "c"}]},
            "status": {"phase": phase}}


def _workload(domains: list[list[Any]] | None = None, *, tolerations: list[dict[str, Any]] | None = None,
              unhealthy: tuple[str, ...] = (), levels: tuple[str, ...] = ("hostname",)) -> dict[str, Any]:
    obj = admitted_workload_obj({"name": "w", "requests": {"cpu": 1}, "domains": domains or [["n1", 1]]},
                                list(levels))
    obj["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted",
                                        "lastTransitionTime": format_time(T0)})
    if tolerations:
        obj["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = tolerations
    if unhealthy:
        obj["status"]["unhealthyNodes"] = [{"name": n} for n in unhealthy]
    return obj


def _pending_workload() -> dict[str, Any]:
    """The workload before any admission (no ``status.admission``, no condition)."""
    obj = _workload()
    obj["status"] = {}
    return obj


EARLIER = NOW - 30_000
OFF = {"on_pod_termination": False}
CASES: list[tuple[str, list[dict[str, Any]], dict[str, bool], Any, list[str]]] = [
    # (Kueue's case, objects, gates, unhealthyNodes after the look or the eviction message, pods failed)
    ("Node Found and Healthy - not marked as unavailable", [_node(), _workload(), _pod("p")], {}, [], []),
    ("Node becomes healthy, it is removed from the list of nodes to replace",
     [_node(), _workload(unhealthy=("n1",)), _pod("p")], {}, [], []),
    ("Node Found and Unhealthy (NotReady), delay not passed - not marked as unavailable",
     [_node(ready=False), _workload(), _pod("p")], OFF, [], []),
    ("Node Found and Unhealthy (NotReady), delay passed - marked as unavailable",
     [_node(ready=False, since=EARLIER), _workload(), _pod("p")], OFF, ["n1"], []),
    ("Node NotReady, pod terminating, marked as unavailable",
     [_node(ready=False, since=EARLIER), _workload(), _pod("p", deleting=True)], {}, ["n1"], []),
    ("Node NotReady, pod failed, marked as unavailable",
     [_node(ready=False), _workload(), _pod("p", phase="Failed")], {}, ["n1"], []),
    ("Node NotReady, pod failed, ReplaceNodeOnPodTermination feature gate off, requeued",
     [_node(ready=False), _workload(), _pod("p", phase="Failed")], OFF, [], []),
    ("Node NotReady, pod running, not marked as unavailable, requeued",
     [_node(ready=False), _workload(), _pod("p")], {}, [], []),
    ("Node NotReady, 2 succeeded pods, 1 running pod -> waits",
     [_node(ready=False), _workload([["n1", 2]]), _pod("s1", phase="Succeeded"),
      _pod("s2", phase="Succeeded"), _pod("r2")], {}, [], []),
    ("Node NotReady, 2 succeeded pods, 1 pending pod, 1 failed pod -> waits",
     [_node(ready=False), _workload([["n1", 2]]), _pod("s1", phase="Succeeded"),
      _pod("s2", phase="Succeeded"), _pod("p2", phase="Pending"), _pod("f2", phase="Failed")], {}, [], []),
    ("Node Deleted - marked as unavailable", [_workload(), _pod("p")], {}, ["n1"], []),
    ("Node Deleted, late pod exists for reassigned workload -> UnhealthyNodes not polluted",
     [_node("n2"), _workload([["n2", 1]]), _pod("late-pod", node="", phase="Pending", pinned="n1")], {}, [],
     []),
    ("Two Nodes Unhealthy (NotReady), delay passed - workload evicted",
     [_node(ready=False, since=EARLIER), _node("n2", ready=False, since=EARLIER),
      _workload([["n1", 1], ["n2", 1]]), _pod("pod1"), _pod("pod2", node="n2")], OFF,
     "Workload eviction triggered due to multiple TAS assigned node failures, including: n1, n2", []),
    ("Node has untolerated NoExecute taint -> Unhealthy",
     [_node(taints=[NO_EXECUTE]), _workload(), _pod("p")], OFF, ["n1"], []),
    ("Node has NoExecute taint with TolerationSeconds -> Healthy (wait for eviction)",
     [_node(taints=[NO_EXECUTE]), _workload(tolerations=[FOR_A_WHILE]), _pod("p")], {}, [], []),
    ("Node has NoExecute taint with TolerationSeconds, pod terminating -> Unhealthy",
     [_node(taints=[NO_EXECUTE]), _workload(tolerations=[FOR_A_WHILE]), _pod("p", deleting=True)], {},
     ["n1"], []),
    ("Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, pod running -> Healthy (wait)",
     [_node(taints=[NO_EXECUTE]), _workload(), _pod("p")], {}, [], []),
    ("Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, pod terminating -> Unhealthy",
     [_node(taints=[NO_EXECUTE]), _workload(), _pod("p", deleting=True)], {}, ["n1"], []),
    ("Node has untolerated NoExecute taint, ReplaceNodeOnPodTermination on, no pods -> Unhealthy (immediate)",
     [_node(taints=[NO_EXECUTE]), _workload()], {}, ["n1"], []),
    ("Node has NoExecute taint with TolerationSeconds, ReplaceNodeOnPodTermination off -> Healthy (wait)",
     [_node(taints=[NO_EXECUTE]), _workload(tolerations=[FOR_A_WHILE]), _pod("p")], OFF, [], []),
    ("Node has NoExecute taint with TolerationSeconds, ReplaceNodeOnPodTermination off, pod terminating",
     [_node(taints=[NO_EXECUTE]), _workload(tolerations=[FOR_A_WHILE]), _pod("p", deleting=True)], OFF,
     ["n1"], []),
    ("Node has NoSchedule taint, ReplaceNodeOnPodTermination on, pod running -> Healthy",
     [_node(taints=[NO_SCHEDULE]), _workload(), _pod("p")], {}, [], []),
    ("Node has NoSchedule taint, ReplaceNodeOnPodTermination off, pod running -> Unhealthy",
     [_node(taints=[NO_SCHEDULE]), _workload(), _pod("p")], OFF, ["n1"], []),
    ("Node has NoSchedule taint, tolerated -> Healthy",
     [_node(taints=[NO_SCHEDULE]), _workload(tolerations=[FOR_GOOD]), _pod("p")], {}, [], []),
    ("Node NotReady, pod pending (assigned via nodeSelector) -> Unhealthy",
     [_node(ready=False), _workload(), _pod("pending", node="", phase="Pending", pinned="n1")], {}, ["n1"],
     ["test-ns/pending"]),
    ("Node NotReady, pod pending (gated by TopologySchedulingGate) -> Unhealthy (immediate)",
     [_node(ready=False), _workload(), _pod("gated", node="", phase="Pending", gated=True)], {}, ["n1"], []),
    ("Node has untolerated NoExecute taint, pod pending (assigned via nodeSelector) -> Unhealthy",
     [_node(taints=[NO_EXECUTE]), _workload(), _pod("pending", node="", phase="Pending", pinned="n1")], {},
     ["n1"], ["test-ns/pending"]),
    ("Node NotReady, pod pending, no hostname topology level -> Healthy (ignore)",
     [_node(ready=False), _workload([["r1", 1]], levels=("rack",))], {}, [], []),
    ("Node has NoSchedule taint, multiple pending pods, only matching one patched",
     [_node(taints=[NO_SCHEDULE]), _node("n2"), _workload([["n1", 1], ["n2", 1]]),
      _pod("pending-1", node="", phase="Pending", pinned="n1"), _pod("pending-2", node="", phase="Pending",
                                                                     pinned="n2")],
     {}, ["n1"], ["test-ns/pending-1"]),
    ("Node has untolerated NoSchedule taint, workload has no pods at all -> Unhealthy",
     [_node(taints=[NO_SCHEDULE]), _workload()], {}, ["n1"], []),
    ("Workload without admission (nil Admission status) - handled safely",
     [_node(), _pending_workload(), _pod("stray-pod-on-node", node="", phase="Pending", pinned="n1")], {}, [],
     ["test-ns/stray-pod-on-node"]),
    ("Node has untolerated NoSchedule taint, pod is Gated -> Healthy (listed all the same)",
     [_node(taints=[NO_SCHEDULE]), _workload(), _pod("gated", node="", phase="Pending", gated=True)], {},
     ["n1"], []),
    ("Node NotReady, workload missing TAS assignment but has late pod -> Workload marked Healthy, "
     "pod patched",
     [_node(ready=False), _node("n2"), _workload([["n2", 1]]),
      _pod("stray", node="", phase="Pending", pinned="n1")], {}, [], ["test-ns/stray"]),
]


def _state(objs: list[dict[str, Any]]) -> ClusterState:
    state = ClusterState()
    for i, obj in enumerate(objs):
        state.apply(ev.Record(i, upsert(obj)))
    return state


@pytest.mark.parametrize(("case", "objs", "gates", "expected", "failed"), CASES,
                         ids=[c[0][:70] for c in CASES])
def test_kueues_node_controller_case(case: str, objs: list[dict[str, Any]], gates: dict[str, bool],
                                     expected: Any, failed: list[str]) -> None:
    state = _state(objs)
    decisions: list[ev.Decision] = []
    for look in range(2):  # Kueue looks at each node in turn: a second failed node is its second look
        wl = state.workloads["test-ns/w"]
        found = [] if wl.evicted else node_failure_decisions(
            state, wl, {"time": NOW, "cycle": look, "input": 0}, NOW, **gates)
        for d in found:
            state.apply(ev.Record(len(objs) + len(decisions), d))
            decisions.append(d)
    evicted = [d for d in decisions if isinstance(d, ev.WorkloadEvicted)]
    if isinstance(expected, str):
        assert [(d.reason, d.message) for d in evicted] == [("NodeFailures", expected)], case
    else:
        assert not evicted and list(state.workloads["test-ns/w"].unhealthy_nodes) == expected, case
    pods = [p for p in state.pods.values() if pinned_to(p) == "n1"]
    assert [p.key for p in pods_to_fail(state, "n1", pods, NOW, **gates)] == failed, case
