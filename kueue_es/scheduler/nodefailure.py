"""Node failure under admitted TAS workloads (Kueue's TAS node controller), as rules over the projection.

A node named by a workload's hostname-level placement fails at once when it is gone or has no Ready condition.
When it is NotReady, or carries a NoSchedule/NoExecute taint the workload does not tolerate for good (only under
TASReplaceNodeOnNodeTaints), it fails for that workload only once none of the workload's pods is still progressing
on it (TASReplaceNodeOnPodTermination).
The first failed node goes to ``status.unhealthyNodes`` and is replaced in place by a second pass; a second,
different failure evicts the workload (NodeFailures); a node that recovers leaves the list.
"""

from __future__ import annotations

from events import objects as o
from events import schema as ev
from events.tas_assignment import decode
from kueue_es.scheduler.flavors import toleration_matches
from projections.cluster import ClusterState
from projections.secondpass import HOSTNAME
from projections.workloads import WORKLOAD_ANNOTATION, WorkloadInfo

_TERMINAL = ("Succeeded", "Failed")


def assigned_nodes(state: ClusterState, wl: WorkloadInfo) -> dict[str, list[str]]:
    """Hostname -> the pod sets placed on it, for a workload whose placement is at hostname level. Memoised
    on the (immutable) admission object."""
    adm = wl.admission
    if adm is None:
        return {}
    memo = state.derived.setdefault("tas-nodes", {})
    found = memo.get(wl.key)
    if found is not None and found[0] is adm:
        return found[1]
    nodes: dict[str, list[str]] = {}
    for p in adm.pod_set_assignments:
        ta = p.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != HOSTNAME:
            continue
        for d in decode(ta):
            nodes.setdefault(d.values[-1], []).append(p.name)
    memo[wl.key] = (adm, nodes)
    return nodes


def _ready(node: o.Node) -> str | None:
    for c in node.status.conditions:
        if c.type == "Ready":
            return c.status
    return None


def _tolerations(state: ClusterState, wl: WorkloadInfo, pod_sets: list[str]) -> list[tuple[o.Toleration, ...]]:
    """The effective tolerations of each of ``pod_sets``: its template's, its flavors' and those the admission
    checks' ``podSetUpdates`` add (the shared reference's rule; some Kueue versions read the template's alone)."""
    adm = wl.admission
    assert adm is not None
    flavors = {psa.name: sorted(set(psa.flavors.values())) for psa in adm.pod_set_assignments}
    out: list[tuple[o.Toleration, ...]] = []
    for ps in wl.pod_sets:
        if ps.name not in pod_sets:
            continue
        own = list(ps.tolerations)
        for flavor in flavors.get(ps.name, ()):
            rf = state.flavors.get(flavor)
            if rf is not None:
                own.extend(rf.spec.tolerations)
        for cs in wl.check_states.values():
            for upd in cs.pod_set_updates:
                if upd.name == ps.name:
                    own.extend(upd.tolerations)
        out.append(tuple(own))
    return out


def _taint_verdict(node: o.Node, tolerations: list[tuple[o.Toleration, ...]]) -> str:
    """"ok" (no NoSchedule/NoExecute taint, or every pod set tolerates each for good), "drain" (some pod set does
    not tolerate one, or only for a while: ``tolerationSeconds``). Each pod set is judged on its own tolerations."""
    for taint in node.spec.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        for own in tolerations:
            if not any(t.toleration_seconds is None and toleration_matches(t, taint) for t in own):
                return "drain"
    return "ok"


def _progressing(state: ClusterState, wl: WorkloadInfo, node: str) -> bool:
    """Some pod of ``wl`` bound to ``node`` is neither terminal nor being deleted."""
    for pod in state.pods.values():
        if (pod.spec.node_name == node and pod.metadata.namespace == wl.namespace
                and pod.metadata.annotations.get(WORKLOAD_ANNOTATION) == wl.name
                and pod.status.phase not in _TERMINAL and not pod.metadata.deletion_timestamp):
            return True
    return False


def unhealthy(state: ClusterState, wl: WorkloadInfo, node: str, pod_sets: list[str], *, taints: bool = True) -> bool:
    """Whether ``node`` has failed for ``wl`` (whose ``pod_sets`` are placed on it). ``taints`` is Kueue's
    TASReplaceNodeOnNodeTaints gate: off, a node's taints are not looked at, so a Ready node is healthy."""
    obj = state.nodes.get(node)
    if obj is None:
        return True
    ready = _ready(obj)
    if ready is None:
        return True
    if ready != "True":
        return not _progressing(state, wl, node)
    if taints and _taint_verdict(obj, _tolerations(state, wl, pod_sets)) == "drain":
        return not _progressing(state, wl, node)
    return False


def node_failure_decisions(state: ClusterState, wl: WorkloadInfo, base: dict, *,
                           taints: bool = True) -> list[ev.Decision]:
    """What the node controller does for one admitted workload now (nothing when all its nodes are healthy);
    ``taints`` as for :func:`unhealthy`."""
    nodes = assigned_nodes(state, wl)
    if not nodes:
        return []
    failed = [n for n in sorted(nodes) if unhealthy(state, wl, n, nodes[n], taints=taints)]
    listed = list(wl.unhealthy_nodes)
    kept = [n for n in listed if n in failed]
    new = [n for n in failed if n not in listed]
    if kept and new:
        names = ", ".join(kept + new)
        return [ev.WorkloadEvicted(key=wl.key, uid=wl.uid, reason="NodeFailures",
                                   message=f"Workload eviction triggered due to multiple TAS assigned node failures, "
                                           f"including: {names}", **base)]
    if not kept and new:
        kept = new[:1]
    if kept != listed:
        return [ev.UnhealthyNodesChanged(key=wl.key, uid=wl.uid, nodes=kept, **base)]
    return []
