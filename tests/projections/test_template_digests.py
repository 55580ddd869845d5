"""The fold carries the digests of Workload pod templates (:mod:`events.template_digest`), which
``IdenticalPodTemplates`` compares: kept in snapshots, taken from the first upsert that brings them to a workload a
log written before digests holds without them."""

from __future__ import annotations

from typing import Any

import msgspec

from events import objects as o
from events import schema as ev
from events.template_digest import stamped_from_document, template_digest
from projections import snapshot
from projections.cluster import ClusterState

T = {"spec": {"containers": [{"name": "c", "image": "img", "args": ["a"], "resources": {"requests": {"cpu": "1"}}}]}}
U = {"spec": {"containers": [{"name": "c", "image": "img", "args": ["b"], "resources": {"requests": {"cpu": "1"}}}]}}


def _doc(rv: str, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u", "resourceVersion": rv, "generation": 1,
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "a", "count": 1, "template": T},
                                                    {"name": "b", "count": 1, "template": U}]},
            "status": {"conditions": conditions or []}}


def _upsert(state: ClusterState, obj: o.KObject) -> None:
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=0, key=obj.key, uid="u", obj=obj)))  # type: ignore[arg-type]


def _digests(state: ClusterState) -> list[str | None]:
    return [t.digest for t in state.pod_templates["ns/w"]]


def test_a_workload_of_an_older_log_takes_its_digests_from_its_next_upsert() -> None:
    state = ClusterState()
    _upsert(state, msgspec.convert(_doc("1"), o.Workload))  # as written before digests
    assert _digests(state) == [None, None]
    # a status change, same generation, observed by a producer that stamps
    cond = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m",
            "lastTransitionTime": "2024-01-01T00:00:00Z"}
    doc = _doc("2", [cond])
    _upsert(state, stamped_from_document(msgspec.convert(doc, o.Workload), doc))
    assert _digests(state) == [template_digest(T), template_digest(U)]


def test_a_snapshot_keeps_the_digests_and_an_older_one_restores_without() -> None:
    state = ClusterState()
    doc = _doc("1")
    _upsert(state, stamped_from_document(msgspec.convert(doc, o.Workload), doc))
    assert snapshot.take(state).version >= 56
    restored = snapshot.decode(snapshot.encode(state))
    assert _digests(restored) == [template_digest(T), template_digest(U)]
    assert snapshot.digest(restored) == snapshot.digest(state)
    # a version 55 snapshot: the same layout without digests
    old = snapshot.take(state)
    old = msgspec.structs.replace(old, version=55, template_pool=[
        [msgspec.structs.replace(t, digest=None) for t in ts] for ts in old.template_pool])
    assert _digests(snapshot.restore(old)) == [None, None]
