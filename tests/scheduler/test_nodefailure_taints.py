"""Which taints make a node fail for a TAS workload (TASReplaceNodeOnNodeTaints): Kueue's node controller judges
each pod set placed on the node by the tolerations of its template in the Workload's spec, and nothing else."""

from __future__ import annotations

from types import SimpleNamespace

from events import objects as o
from kueue_es.scheduler.nodefailure import _taint_verdict, _tolerations

MAINTENANCE = o.Taint(key="example.com/maintenance", effect="NoExecute")


def _node(*taints: o.Taint) -> o.Node:
    return o.Node(metadata=o.ObjectMeta(name="n1"), spec=o.NodeSpec(taints=list(taints)))


def _wl(**pod_sets: tuple[o.Toleration, ...]) -> SimpleNamespace:
    return SimpleNamespace(pod_sets=[SimpleNamespace(name=n, tolerations=t) for n, t in pod_sets.items()])


def test_a_taint_every_pod_set_on_the_node_tolerates_for_good_is_harmless() -> None:
    wl = _wl(a=(o.Toleration(key="example.com/maintenance", operator="Exists"),),
             b=(o.Toleration(operator="Exists", effect="NoExecute"),))
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(wl, ["a", "b"])) == "ok"


def test_prefer_no_schedule_is_never_looked_at() -> None:
    wl = _wl(a=())
    assert _taint_verdict(_node(o.Taint(key="k", effect="PreferNoSchedule")), _tolerations(wl, ["a"])) == "ok"


def test_one_pod_set_without_the_toleration_fails_the_node_though_another_has_it() -> None:
    """Kueue asks each pod set on its own: the tolerations are not pooled across the pod sets on the node."""
    wl = _wl(a=(o.Toleration(key="example.com/maintenance", operator="Exists"),), b=())
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(wl, ["a", "b"])) == "drain"
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(wl, ["a"])) == "ok"  # b is not on this node


def test_a_toleration_for_a_while_only_drains() -> None:
    wl = _wl(a=(o.Toleration(key="example.com/maintenance", operator="Exists", toleration_seconds=300),))
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(wl, ["a"])) == "drain"


def test_only_the_templates_tolerations_count() -> None:
    """The ResourceFlavor's tolerations and the checks' podSetUpdates reach the pods, not the Workload's spec, and
    Kueue's node controller reads the spec."""
    wl = _wl(a=())
    wl.admission = SimpleNamespace(pod_set_assignments=[SimpleNamespace(name="a", flavors={"cpu": "tas"})])
    wl.check_states = {"prov": SimpleNamespace(pod_set_updates=[SimpleNamespace(
        name="a", tolerations=[o.Toleration(key="example.com/maintenance", operator="Exists")])])}
    assert _tolerations(wl, ["a"]) == [()]
    assert _taint_verdict(_node(MAINTENANCE), _tolerations(wl, ["a"])) == "drain"
