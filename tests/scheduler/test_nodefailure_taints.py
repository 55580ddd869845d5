"""Which taints make a node fail for a TAS workload (TASReplaceNodeOnNodeTaints): each pod set placed on the node
is judged on its own effective tolerations: its template's, its flavors' and the admission checks' podSetUpdates
(the shared reference's rule)."""

from __future__ import annotations

from types import SimpleNamespace

from events import objects as o
from kueue_es.scheduler.nodefailure import TEMPORARY, TOLERATED, UNTOLERATED, _taint_verdict, _tolerations

MAINTENANCE = o.Taint(key="example.com/maintenance", effect="NoExecute")


def _node(*taints: o.Taint) -> o.Node:
    return o.Node(metadata=o.ObjectMeta(name="n1"), spec=o.NodeSpec(taints=list(taints)))


NO_FLAVORS = SimpleNamespace(flavors={})
"""A state with no ResourceFlavors: only the templates' tolerations count."""


def _wl(**pod_sets: tuple[o.Toleration, ...]) -> SimpleNamespace:
    return SimpleNamespace(
        pod_sets=[SimpleNamespace(name=n, tolerations=t) for n, t in pod_sets.items()],
        admission=SimpleNamespace(pod_set_assignments=[SimpleNamespace(name=n, flavors={}) for n in pod_sets]),
        check_states={})


def test_a_taint_every_pod_set_on_the_node_tolerates_for_good_is_harmless() -> None:
    wl = _wl(a=(o.Toleration(key="example.com/maintenance", operator="Exists"),),
             b=(o.Toleration(operator="Exists", effect="NoExecute"),))
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(NO_FLAVORS, wl, ["a", "b"])) == TOLERATED


def test_prefer_no_schedule_is_never_looked_at() -> None:
    wl = _wl(a=())
    assert _taint_verdict(_node(o.Taint(key="k", effect="PreferNoSchedule")), _tolerations(NO_FLAVORS, wl, ["a"])) == TOLERATED


def test_one_pod_set_without_the_toleration_fails_the_node_though_another_has_it() -> None:
    """Kueue asks each pod set on its own: the tolerations are not pooled across the pod sets on the node."""
    wl = _wl(a=(o.Toleration(key="example.com/maintenance", operator="Exists"),), b=())
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(NO_FLAVORS, wl, ["a", "b"])) == UNTOLERATED
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(NO_FLAVORS, wl, ["a"])) == TOLERATED  # b is not on this node


def test_a_toleration_for_a_while_only_is_temporary_and_an_untolerated_taint_outweighs_it() -> None:
    """Kueue tells the two apart: with TASReplaceNodeOnPodTermination off, an untolerated taint fails the node at
    once, while one tolerated for a while still waits for the pods."""
    wl = _wl(a=(o.Toleration(key="example.com/maintenance", operator="Exists", toleration_seconds=300),))
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(NO_FLAVORS, wl, ["a"])) == TEMPORARY
    other = o.Taint(key="example.com/other", effect="NoSchedule")
    assert _taint_verdict(_node(MAINTENANCE, other), _tolerations(NO_FLAVORS, wl, ["a"])) == UNTOLERATED
    assert _taint_verdict(_node(other, MAINTENANCE), _tolerations(NO_FLAVORS, wl, ["a"])) == UNTOLERATED


def test_flavor_and_check_tolerations_count_for_their_pod_set_only() -> None:
    """The ResourceFlavor's tolerations and the checks' podSetUpdates are part of a pod set's effective
    tolerations; another pod set on the node does not borrow them."""
    tolerate = o.Toleration(key="example.com/maintenance", operator="Exists")
    state = SimpleNamespace(flavors={"tas": SimpleNamespace(spec=SimpleNamespace(tolerations=[tolerate]))})
    wl = _wl(a=(), b=())
    wl.admission = SimpleNamespace(pod_set_assignments=[SimpleNamespace(name="a", flavors={"cpu": "tas"}),
                                                        SimpleNamespace(name="b", flavors={})])
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(state, wl, ["a"])) == TOLERATED
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(state, wl, ["a", "b"])) == UNTOLERATED
    wl.check_states = {"prov": SimpleNamespace(pod_set_updates=[SimpleNamespace(name="b", tolerations=[tolerate])])}
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(state, wl, ["a", "b"])) == TOLERATED
