"""Kueue's resource-in-use finalizer on ResourceFlavors and Topologies, case by case, against kueue-es's own
rule (:func:`projections.in_use.finalizer_action`) and what the mirror marks for the finalizer worker
(:mod:`connectors.k8s.finalizers`), with no cluster.

Kueue's tables: ``pkg/controller/core/resourceflavor_controller_test.go`` (``TestResourceFlavorReconcile``,
``TestResourceFlavorPredicates``, ``TestNotifyClusterQueueUpdate``, ``TestCqHandlerGeneric``) and
``pkg/controller/tas/topology_controller_test.go`` (``TestTopologyReconcilerFinalizerRemovalOnDeletion``).
Kueue's reconcilers react to events and requeue; the mirror marks the objects whose answer may have changed
and the worker asks the rule, so a case here is "the object is marked" plus "the rule's answer".
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.eventgen import T0, cluster_queue, delete, flavor, upsert

from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.in_use import FINALIZER, finalizer_action

DELETING = format_time(T0)


def _meta(obj: Any, *, finalizers: tuple[str, ...] = (FINALIZER,), deleting: bool = False) -> Any:
    meta = msgspec.structs.replace(obj.metadata, finalizers=list(finalizers),
                                   deletion_timestamp=DELETING if deleting else None)
    return msgspec.structs.replace(obj, metadata=meta)


def _rf(name: str, *, topology: str = "", **meta: Any) -> o.ResourceFlavor:
    rf = flavor(name)
    if topology:
        rf = msgspec.structs.replace(rf, spec=msgspec.structs.replace(rf.spec, topology_name=topology))
    return _meta(rf, **meta)


def _topology(name: str, **meta: Any) -> o.Topology:
    obj = msgspec.convert({"metadata": {"name": name},
                           "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
                          o.Topology)
    return _meta(obj, **meta)


def _mirror(*objs: o.KObject) -> Mirror:
    mirror = Mirror()
    for obj in objs:
        mirror.apply(ev.Record(mirror.offset + 1, upsert(obj, T0)))
    return mirror


def _apply(mirror: Mirror, event: ev.AnyEvent) -> set[str]:
    """What ``event`` marks for the finalizer worker."""
    mirror.dirty_finalizers = set()
    mirror.apply(ev.Record(mirror.offset + 1, event))
    return set(mirror.dirty_finalizers)


# --- TestResourceFlavorReconcile ----------------------------------------------------------------------------

RF_RECONCILE = [
    # (Kueue's case, the flavor, ClusterQueues using it, the action)
    ("adds finalizer when missing", dict(finalizers=()), (), "add"),
    ("no-op when finalizer already present", {}, (), None),
    ("removes finalizer when deleted and not in use", dict(deleting=True), (), "remove"),
    ("keeps finalizer when deleted but still in use", dict(deleting=True), ("cq-using-flavor",), None),
]


@pytest.mark.parametrize(("flavor_meta", "users", "want"), [c[1:] for c in RF_RECONCILE],
                         ids=[c[0] for c in RF_RECONCILE])
def test_resource_flavor_reconcile(flavor_meta: dict[str, Any], users: tuple[str, ...],
                                   want: str | None) -> None:
    rf = _rf("flavor", **flavor_meta)
    mirror = _mirror(rf, *(cluster_queue(cq, quotas={"flavor": 10}) for cq in users))
    assert finalizer_action(mirror.state, "ResourceFlavor", rf) == want


# --- TestTopologyReconcilerFinalizerRemovalOnDeletion -------------------------------------------------------

TOPOLOGY_RECONCILE = [
    ("topology still referenced in the TAS cache is requeued", True, None),
    ("topology with no referencing flavors gets the finalizer removed", False, "remove"),
]


@pytest.mark.parametrize(("flavor_in_cache", "want"), [c[1:] for c in TOPOLOGY_RECONCILE],
                         ids=[c[0] for c in TOPOLOGY_RECONCILE])
def test_topology_reconcile_on_deletion(flavor_in_cache: bool, want: str | None) -> None:
    t1 = _topology("t1", deleting=True)
    mirror = _mirror(t1, *([_rf("rf", topology="t1")] if flavor_in_cache else []))
    assert finalizer_action(mirror.state, "Topology", t1) == want


def test_topology_without_the_finalizer_gets_it_and_a_terminating_one_does_not() -> None:
    """Kueue's topology Reconcile adds the finalizer only outside deletion (the ``else if`` around
    ``AddFinalizer`` in ``topologyReconciler.Reconcile``)."""
    live, going = _topology("t1", finalizers=()), _topology("t1", finalizers=(), deleting=True)
    assert finalizer_action(_mirror(live).state, "Topology", live) == "add"
    assert finalizer_action(_mirror(going).state, "Topology", going) is None


def test_a_deleted_flavor_marks_the_terminating_topology_it_named() -> None:
    """Kueue's topology controller requeues the Topology a deleted ResourceFlavor named
    (``resourceFlavorHandler`` ``Delete``); the mirror marks terminating Topologies, whose answer then turns
    to ``remove``."""
    t1 = _topology("t1", deleting=True)
    mirror = _mirror(t1, _rf("rf", topology="t1"))
    assert _apply(mirror, delete("ResourceFlavor", "rf", T0)) == {"Topology/t1"}
    assert finalizer_action(mirror.state, "Topology", t1) == "remove"


# --- TestResourceFlavorPredicates: an update setting the deletion timestamp is reconciled -------------------


def test_a_flavor_getting_its_deletion_timestamp_is_marked() -> None:
    """Kueue's case "update with deletion timestamp returns true": the update reaches the reconciler, which
    removes the finalizer of an unused flavor."""
    mirror = _mirror(_rf("flavor"))
    going = _rf("flavor", deleting=True)
    assert "ResourceFlavor/flavor" in _apply(mirror, upsert(going, T0))
    assert finalizer_action(mirror.state, "ResourceFlavor", going) == "remove"


# --- TestNotifyClusterQueueUpdate and TestCqHandlerGeneric --------------------------------------------------

CQ_CHANGES = [
    # (Kueue's case, the ClusterQueue's flavors after the change (None: deleted), flavors still "in use" by
    #  other-cq, terminating flavors whose finalizer the change lets go)
    ("delete event (newCQ nil) sends old CQ to channel", None, (), {"flavor-a", "flavor-b"}),
    ("update with removed flavor sends", ("flavor-a",), (), {"flavor-b"}),
    ("update with replaced flavor sends", ("flavor-b",), (), {"flavor-a"}),
    ("does not enqueue flavors still used by another CQ", None, ("flavor-a", "flavor-b"), set()),
    ("enqueues only orphaned flavors when CQ has multiple", None, ("flavor-b",), {"flavor-a"}),
]


@pytest.mark.parametrize(("after", "shared", "freed"), [c[1:] for c in CQ_CHANGES],
                         ids=[c[0] for c in CQ_CHANGES])
def test_a_cluster_queue_change_frees_only_its_orphaned_terminating_flavors(
        after: tuple[str, ...] | None, shared: tuple[str, ...], freed: set[str]) -> None:
    flavors = {"flavor-a": _rf("flavor-a", deleting=True), "flavor-b": _rf("flavor-b", deleting=True)}
    cq = cluster_queue("cq", quotas={"flavor-a": 10, "flavor-b": 10})
    others = [cluster_queue("other-cq", quotas=dict.fromkeys(shared, 10))] if shared else []
    mirror = _mirror(*flavors.values(), cq, *others)
    event = (delete("ClusterQueue", "cq", T0) if after is None
             else upsert(cluster_queue("cq", quotas=dict.fromkeys(after, 10)), T0))
    marked = _apply(mirror, event)
    assert {"ResourceFlavor/flavor-a", "ResourceFlavor/flavor-b"} <= marked
    got = {name for name, rf in flavors.items()
           if finalizer_action(mirror.state, "ResourceFlavor", rf) == "remove"}
    assert got == freed


# --- the Topology controller runs only under TopologyAwareScheduling ----------------------------------------


def _config(tas: bool) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=T0, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"TopologyAwareScheduling": tas}})


def test_with_topology_aware_scheduling_off_no_topology_finalizer_is_added_or_removed() -> None:
    """Kueue sets up its TAS controllers, the Topology one among them, only when the
    ``TopologyAwareScheduling`` gate is on (``cmd/kueue/main.go``: ``if
    features.Enabled(features.TopologyAwareScheduling) { tas.SetupControllers ... }``): with it off nothing
    adds the finalizer to a Topology, nor takes it off one being deleted."""
    live, unused = _topology("t1", finalizers=()), _topology("t2", deleting=True)
    mirror = _mirror(live, unused)
    assert (finalizer_action(mirror.state, "Topology", live),
            finalizer_action(mirror.state, "Topology", unused)) == ("add", "remove")
    marked = _apply(mirror, _config(tas=False))
    assert (finalizer_action(mirror.state, "Topology", live),
            finalizer_action(mirror.state, "Topology", unused)) == (None, None)
    assert {"Topology/t1", "Topology/t2"} <= marked
    assert {"Topology/t1", "Topology/t2"} <= _apply(mirror, _config(tas=True)), "on again, both are looked at"
    assert finalizer_action(mirror.state, "Topology", live) == "add"
