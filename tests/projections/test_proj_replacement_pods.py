"""A pod group's ``WaitingForReplacementPods`` (``ReplacementPodsChanged``, from the pod integration): the condition
Kueue writes on its Workload, and that a Workload waiting for replacement Pods is not queued (Kueue's
``IsAdmissible``). Folded from the log, so a replay shows the same."""

from __future__ import annotations

from fixtures.eventgen import T0, cluster_queue, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.codec import decode_event, encode_event
from projections.cluster import ClusterState
from projections.workloads import replacement_pods_condition, status_of


def _fold(*events: ev.AnyEvent, state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for e in events:
        state.apply(ev.Record(state.offset + 1, decode_event(encode_event(e), state.offset + 1)))
    return state


def _cluster() -> ClusterState:
    return _fold(upsert(namespace("ns0"), T0), upsert(cluster_queue("cq0", quotas={"f0": 4}), T0),
                 upsert(local_queue("ns0", "lq0", "cq0"), T0), upsert(workload("ns0", "g", uid="u0"), T0))


def _queued(state: ClusterState) -> bool:
    q = state.queues.get("cq0")
    return q is not None and ("ns0/g" in q.entries or "ns0/g" in q.inadmissible)


def _condition(state: ClusterState) -> tuple[str, str, str] | None:
    c = state.workloads["ns0/g"].condition("WaitingForReplacementPods")
    return None if c is None else (c.status, c.reason, c.message)


def test_a_group_waiting_for_replacement_pods_leaves_its_queue_until_they_are_there() -> None:
    state = _cluster()
    assert _queued(state)
    _fold(ev.ReplacementPodsChanged(time=T0 + 1, key="ns0/g", uid="u0", waiting=True), state=state)
    assert _condition(state) == ("True", "PodsFailed", "Some Failed pods need replacement")
    assert not _queued(state), "Kueue admits no Workload whose WaitingForReplacementPods is True"
    written = [c for c in status_of(state.workloads["ns0/g"])["conditions"] if c["type"] == "WaitingForReplacementPods"]
    assert written and written[0]["status"] == "True"
    _fold(ev.ReplacementPodsChanged(time=T0 + 2, key="ns0/g", uid="u0"), state=state)
    assert _condition(state) == ("False", "PodsReady", "No pods need replacement") and _queued(state)
    _fold(ev.ReplacementPodsChanged(time=T0 + 3, key="ns0/g", uid="other", waiting=True), state=state)
    assert _condition(state)[0] == "False", "said of another Workload of that name"


def test_the_condition_follows_kueues_rule() -> None:
    state = _cluster()
    wl = state.workloads["ns0/g"]
    assert replacement_pods_condition(wl, False) is None, "not shown and not needed"
    wl.conditions = (o.Condition(type="Evicted", status="True", reason="PodsReadyTimeout", message="timed out"),)
    assert replacement_pods_condition(wl, True) == ("True", "PodsReadyTimeout", "timed out")
    wl.conditions = (o.Condition(type="WaitingForReplacementPods", status="True", reason="Preempted", message="m"),)
    assert replacement_pods_condition(wl, True) == ("True", "Preempted", "m"), "kept once the eviction is over"
    assert replacement_pods_condition(wl, False) == ("False", "PodsReady", "No pods need replacement")
