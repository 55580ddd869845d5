"""``ClusterState.nodes_seen``: whether the log ever showed a Node, so the node failure rules apply once Nodes are
watched, even after every Node is deleted (Kueue's node controller reacts to deletions); kept by a snapshot, and
read from an older one as whether it holds a Node."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import delete, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState


def _node(name: str) -> o.Node:
    return msgspec.convert({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                            "status": {"allocatable": {"cpu": "2"},
                                       "conditions": [{"type": "Ready", "status": "True"}]}}, o.Node)


def _fold(*events: ev.Event) -> ClusterState:
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def test_a_log_without_nodes_has_seen_none() -> None:
    assert _fold().nodes_seen is False


def test_a_deleted_last_node_was_seen_and_a_snapshot_keeps_it() -> None:
    state = _fold(upsert(_node("n1"), 1), delete("Node", "n1", 2))
    assert state.nodes == {} and state.nodes_seen is True
    assert snapshot.restore(snapshot.take(state)).nodes_seen is True


def test_an_older_snapshot_restores_it_from_its_nodes() -> None:
    with_node = msgspec.structs.replace(snapshot.take(_fold(upsert(_node("n1"), 1))), version=39, nodes_seen=False)
    assert snapshot.restore(with_node).nodes_seen is True
    gone = msgspec.structs.replace(snapshot.take(_fold(upsert(_node("n1"), 1), delete("Node", "n1", 2))),
                                   version=39, nodes_seen=False)
    assert snapshot.restore(gone).nodes_seen is False
