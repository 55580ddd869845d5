"""Kueue's TAS node controller failing the pods pinned to a host they cannot run on (Kueue's
node_failure_controller_test.go, TestNodeFailureReconciler's ``wantPatchedPods`` cases): an ungated, unbound,
Pending TAS pod pinned by ``nodeSelector[kubernetes.io/hostname]`` to a node that is not Ready or carries a taint
its workload does not tolerate, or to a node outside its workload's placement, is set Failed with the condition
TerminatedByKueue/UnschedulableOnAssignedNode and the Event PodTerminatedByKueue (no cluster needed)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from fixtures.tasbuild import admitted_workload_obj, node_obj, upsert

from connectors.k8s import pinned_pods
from connectors.k8s.errors import AlreadyExists, Conflict, NotFound
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.pinned_pods import PinnedPods
from events import schema as ev
from events.log import MemoryLog
from events.timefmt import format_time
from kueue_es.scheduler import nodefailure as nf

HOST = "kubernetes.io/hostname"
NS = "test-ns"
NOW = 1_767_225_600_000
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class _Apiserver:
    """The pods as the apiserver holds them: a GET, a status PATCH conditioned on uid and resourceVersion (409
    otherwise), and Events created (409 AlreadyExists for a name taken)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {p["metadata"]["name"]: copy.deepcopy(p) for p in pods}
        self.patched: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.conflicts = 0
        """How many PATCHes to refuse with a 409 first (another client's write racing ours)."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if name not in self.pods:
            raise NotFound(f'pods "{name}" not found', 404, "NotFound")
        return msgspec.json.encode(self.pods[name])

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        assert subresource == "status"
        live = self.pods[name]
        if self.conflicts or body["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"]:
            self.conflicts = max(0, self.conflicts - 1)
            raise Conflict("the object has been modified", 409, "Conflict")
        live["status"].update(body["status"])
        live["metadata"]["resourceVersion"] = str(int(live["metadata"]["resourceVersion"]) + 1)
        self.patched[name] = body
        return msgspec.json.encode(live)

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        name = body["metadata"]["name"]
        if name in self.events:
            raise AlreadyExists(f'events "{name}" already exists', 409, "AlreadyExists")
        self.events[name] = body
        return msgspec.json.encode(body)


def _pod(name: str, host: str = "n1", *, workload: str = "wl", gated: bool = False, node: str = "",
         phase: str = "Pending") -> dict[str, Any]:
    """A pod of a TAS workload, as its Job starts it and the ungater pins it (``host``)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "5",
                         "annotations": {"kueue.x-k8s.io/workload": workload,
                                         "kueue.x-k8s.io/podset-unconstrained-topology": "true"},
                         "labels": {"kueue.x-k8s.io/podset": "main"}},
            "spec": {"nodeSelector": {HOST: host}, "nodeName": node,
                     "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}] if gated else [],
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "False",
                                                       "reason": "Unschedulable"}]}}


def _node(name: str, *, ready: bool = True, taints: list[dict[str, Any]] | None = None,
          since: int | None = None) -> dict[str, Any]:
    obj = node_obj({"name": name, "labels": {"hostname": name}, "ready": ready, "taints": taints})
    if since is not None:
        obj["status"]["conditions"][0]["lastTransitionTime"] = format_time(since)
    return obj


def _workload(name: str = "wl", hosts: tuple[str, ...] = ("n1",), **status: Any) -> dict[str, Any]:
    obj = admitted_workload_obj({"name": name, "requests": {"cpu": 1}, "domains": [[h, 1] for h in hosts]},
                                ["hostname"])
    obj["status"]["conditions"].extend(status.get("conditions", []))
    return obj


def _config(**gates: bool) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates})


async def _controller(objs: list[dict[str, Any]], pods: list[dict[str, Any]], *, live: list[dict[str, Any]] | None
                      = None, config: ev.ConfigRecorded | None = None) -> tuple[_Apiserver, PinnedPods]:
    """The log holding ``objs`` and ``pods`` (``live``: the pods as the apiserver holds them, if they moved on since);
    the controller looks at every host once."""
    journal = LocalJournal(MemoryLog(), Mirror())
    api = _Apiserver(live if live is not None else pods)
    controller = PinnedPods(api, journal, instance="test", retry_s=0)  # type: ignore[arg-type]
    await journal.append([*([config] if config else []), *(upsert(x) for x in [*objs, *pods])])
    await _look(controller)
    return api, controller


async def _look(controller: PinnedPods) -> None:
    for host in sorted(controller._take()):
        await controller._retry.attempt(controller.sync, host, what="test", stats=controller.stats,
                                        log=pinned_pods.log)


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pinned_pods, "_now_ms", lambda: NOW)


def _failed_by_kueue(api: _Apiserver, name: str) -> bool:
    status = api.pods[name]["status"]
    conds = [c for c in status["conditions"] if c["type"] == "TerminatedByKueue"]
    return status["phase"] == "Failed" and conds == [{
        "type": "TerminatedByKueue", "status": "True", "reason": "UnschedulableOnAssignedNode",
        "message": "Pod terminated by Kueue NodeController due to node taint",
        "lastTransitionTime": format_time(NOW)}]


# --- the pods Kueue fails ------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_pod_pinned_to_a_node_gone_not_ready_is_failed_with_kueues_condition_and_event() -> None:
    """"Node NotReady, pod pending (assigned via nodeSelector)": the pod can never be bound there; its Job makes a
    new one, which the ungater places on the replacement."""
    api, controller = await _controller([_node("n1", ready=False), _workload()], [_pod("p")])
    assert _failed_by_kueue(api, "p")
    assert api.pods["p"]["status"]["conditions"][0]["type"] == "PodScheduled", "the pod's other conditions stay"
    assert api.patched["p"]["metadata"] == {"uid": "uid-p", "resourceVersion": "5"}
    (event,) = api.events.values()
    assert {k: event[k] for k in ("type", "reason", "message", "reportingComponent")} == {
        "type": "Normal", "reason": "PodTerminatedByKueue",
        "message": "Pod terminated by Kueue NodeController due to node taint",
        "reportingComponent": "tas-resource-flavor-controller"}
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": "p",
                                       "uid": "uid-p"}
    assert controller.stats.failed == 1


@pytest.mark.asyncio
async def test_a_pod_pinned_to_a_cordoned_node_is_failed() -> None:
    """"Node has NoSchedule taint, pod is Pending and on node": a cordon's taint is one the workload does not
    tolerate; "multiple pending pods, only matching one patched": the pod pinned to the other node stays."""
    api, _ = await _controller([_node("n1", taints=[CORDON]), _node("n2"), _workload(hosts=("n1", "n2"))],
                               [_pod("p1", "n1"), _pod("p2", "n2")])
    assert _failed_by_kueue(api, "p1")
    assert api.pods["p2"]["status"]["phase"] == "Pending" and "p2" not in api.patched


@pytest.mark.asyncio
async def test_a_stray_pod_pinned_outside_its_workloads_placement_is_failed_whatever_the_node() -> None:
    """"Node NotReady, workload missing TAS assignment but has late pod" and "Stray pending pod on unassigned node":
    the workload was placed elsewhere since; the late pod goes, on a Ready node too, and on a node of no placement
    ("Workload without admission")."""
    api, _ = await _controller([_node("n1"), _node("old"), _workload(hosts=("n1",))], [_pod("late", "old")])
    assert _failed_by_kueue(api, "late")
    pending = _workload("wl")
    del pending["status"]["admission"]
    pending["status"]["conditions"] = []
    api, _ = await _controller([_node("n1"), pending], [_pod("stray", "n1")])
    assert _failed_by_kueue(api, "stray")


@pytest.mark.asyncio
async def test_a_second_look_records_no_second_event() -> None:
    """The Event is named from the pod's uid: one found there (an earlier try) counts as done."""
    api, controller = await _controller([_node("n1", ready=False), _workload()], [_pod("p")])
    body = next(iter(api.events.values()))
    await controller._record(controller.state.pods[f"{NS}/p"], NOW)
    assert list(api.events.values()) == [body] and controller.stats.events == 1


@pytest.mark.asyncio
async def test_a_write_that_meets_a_conflict_is_tried_again_on_the_pod_read_anew() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    api = _Apiserver([_pod("p")])
    api.conflicts = 1
    controller = PinnedPods(api, journal, retry_s=0)  # type: ignore[arg-type]
    await journal.append([upsert(_node("n1", ready=False)), upsert(_workload()), upsert(_pod("p"))])
    await _look(controller)
    assert "p" not in api.patched and controller.stats.conflicts == 1
    await _look(controller)
    assert _failed_by_kueue(api, "p")


# --- the pods Kueue leaves alone -----------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("case", "pod"), [
    ("bound to the node", _pod("p", node="n1")),
    ("still gated", _pod("p", gated=True)),
    ("running", _pod("p", phase="Running")),
    ("not TAS's", {**_pod("p"), "metadata": {**_pod("p")["metadata"],
                                             "annotations": {"kueue.x-k8s.io/workload": "wl"}}}),
])
async def test_only_unbound_ungated_pending_tas_pods_are_failed(case: str, pod: dict[str, Any]) -> None:
    api, controller = await _controller([_node("n1", ready=False), _workload()], [pod])
    assert not api.patched, case
    state = controller.state
    assert nf.pods_to_fail(state, "n1", list(state.pods.values()), NOW) == [], "the choice itself, not the live read"


@pytest.mark.asyncio
@pytest.mark.parametrize("condition", ["Finished", "Evicted"])
async def test_the_pods_of_a_finished_or_evicted_workload_are_left_alone(condition: str) -> None:
    wl = _workload(conditions=[{"type": condition, "status": "True", "reason": condition,
                                "lastTransitionTime": "2024-01-01T00:00:00Z"}])
    api, _ = await _controller([_node("n1", ready=False), wl], [_pod("p")])
    assert not api.patched


@pytest.mark.asyncio
async def test_a_ready_node_whose_taints_the_workload_tolerates_fails_nothing() -> None:
    tolerant = _workload()
    tolerant["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    api, _ = await _controller([_node("n1", taints=[CORDON]), tolerant], [_pod("p")])
    assert not api.patched
    api, _ = await _controller([_node("n1"), _workload()], [_pod("p")])
    assert not api.patched, "a healthy node of the placement: the pod waits for the scheduler"


@pytest.mark.asyncio
async def test_a_node_gone_fails_no_pod() -> None:
    """Kueue marks a deleted node unhealthy without looking at the pods pinned to it."""
    api, _ = await _controller([_workload()], [_pod("p")])
    assert not api.patched


@pytest.mark.asyncio
async def test_with_pod_termination_off_the_pods_wait_out_the_30_s_a_node_is_not_ready() -> None:
    """TASReplaceNodeOnPodTermination off: Kueue's controller looks at nothing before the 30 s are over, then fails
    the stray pods only (a node of the placement is failed without looking at the pods)."""
    config = _config(TASReplaceNodeOnPodTermination=False)
    node = _node("n1", ready=False, since=NOW - 10_000)
    api, controller = await _controller([node, _workload(hosts=("n2",)), _node("n2")], [_pod("late")], config=config)
    assert not api.patched and controller._due == {"n1": NOW + 20_000}
    node = _node("n1", ready=False, since=NOW - 30_000)
    api, _ = await _controller([node, _workload(hosts=("n2",)), _node("n2")], [_pod("late")], config=config)
    assert _failed_by_kueue(api, "late")
    api, _ = await _controller([node, _workload()], [_pod("p")], config=config)
    assert not api.patched


@pytest.mark.asyncio
async def test_nothing_is_failed_without_kueues_node_controller() -> None:
    """Kueue runs the controller only under TopologyAwareScheduling and TASFailedNodeReplacement."""
    for gate in ("TopologyAwareScheduling", "TASFailedNodeReplacement"):
        api, _ = await _controller([_node("n1", ready=False), _workload()], [_pod("p")], config=_config(**{gate: False}))
        assert not api.patched, gate


@pytest.mark.asyncio
async def test_a_pod_bound_since_the_logs_view_is_not_failed() -> None:
    """The log may lag: the scheduler bound the pod meanwhile, so it is left to run (or fail) on its node."""
    bound = _pod("p", node="n1")
    bound["status"]["phase"] = "Running"
    api, _ = await _controller([_node("n1", ready=False), _workload()], [_pod("p")], live=[bound])
    assert not api.patched
