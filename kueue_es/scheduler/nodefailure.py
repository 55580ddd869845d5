"""Node failure under admitted TAS workloads (Kueue's TAS node controller), as rules over the projection.

A node named by a workload's hostname-level placement fails at once when it is gone or has no Ready condition.
Under TASReplaceNodeOnPodTermination (beta, on), a node that is not Ready, or that carries a NoSchedule/NoExecute
taint the workload does not tolerate for good (only under TASReplaceNodeOnNodeTaints), fails for that workload
only once none of the workload's pods is still progressing on it. With that gate off, Kueue does not look at the
pods: a node that is not Ready is left alone until it has been so for 30 s (:mod:`projections.node_ready`), then
fails whatever runs on it, and an untolerated taint fails it at once (a taint tolerated for a while only still
waits for the pods). The deprecated TASReplaceNodeDueToNotReadyOverFixedTime adds that 30 s rule to the pods rule:
a node not Ready fails once no pod of the workload progresses on it or once it has been not Ready for 30 s,
whichever comes first (the shared reference's §4.3; Kueue's controller sets no timer for it while
TASReplaceNodeOnPodTermination is on and applies it at its next look at the node, which kueue-es does not follow:
the 30 s end wakes the rules as it does with that gate off).
The first failed node goes to ``status.unhealthyNodes`` and is replaced in place by a second pass; a second,
different failure evicts the workload (NodeFailures) — beyond the threshold a workload sets under
TASReplaceMultipleFailedNodes (:mod:`kueue_es.scheduler.multinode`); a node that recovers leaves the list. Under
SkipReassignmentForPodOwnedWorkloads the second pass keeps the placement of a workload owned by a single Pod and
only clears the list; the controller lists such a kept node again once it looks at the node anew
(``WorkloadInfo.kept_nodes``), not at every pass, as Kueue acts on node and pod events, not on Workload updates.

The controller also fails pods stuck on a node they can no longer reach (:func:`pods_to_fail`): a TAS pod of a
workload (neither finished nor evicted) that the ungater pinned to a host by ``nodeSelector[kubernetes.io/hostname]``
but that is not bound yet (no ``spec.nodeName``, ``Pending``, no topology gate) is set ``Failed`` with the condition
``TerminatedByKueue`` (reason ``UnschedulableOnAssignedNode``) and the Event ``PodTerminatedByKueue`` when that host's
node is not Ready (TASReplaceNodeOnPodTermination on), carries a NoSchedule/NoExecute taint the workload does not
tolerate (that gate on) or tolerates only for a while, or is not in the workload's placement at all (a stray pod left
from an earlier placement, whatever the node's state). Its job then makes a new, gated pod the ungater places anew.
Nothing is failed on a node that is gone or has no Ready condition, nor, with that gate off, on a node not Ready
for less than 30 s (Kueue's ``node_failure_controller.go``, ``getPodsToTerminate``/``markPodsFailed``). The write
is :mod:`connectors.k8s.pinned_pods`'s.
"""

from __future__ import annotations

from events import objects as o
from events import schema as ev
from events.tas_assignment import decode
from kueue_es.scheduler.flavors import toleration_matches
from projections.cluster import ClusterState
from projections.node_ready import not_ready_wait_ends, ready_condition
from projections.secondpass import HOSTNAME
from projections.topology import TAS_POD_ANNOTATIONS
from projections.workloads import ADMITTED, FINISHED, TOPOLOGY_GATE, WORKLOAD_ANNOTATION, WorkloadInfo

_TERMINAL = ("Succeeded", "Failed")

TERMINATED_BY_KUEUE = "TerminatedByKueue"
UNSCHEDULABLE_ON_ASSIGNED_NODE = "UnschedulableOnAssignedNode"
TERMINATED_MESSAGE = "Pod terminated by Kueue NodeController due to node taint"
"""Kueue's words for every pod it fails this way, whatever the node's fault (NotReady and stray pods too)."""
TERMINATED_EVENT = "PodTerminatedByKueue"

FAILED, HEALTHY, WAITING = "failed", "healthy", "waiting"
"""What a node is for a workload placed on it: failed, healthy, or left alone for now (the controller does not
act on the node yet: whether the workload lists it stays as it is)."""

UNTOLERATED, TEMPORARY, TOLERATED = "untolerated", "temporary", "tolerated"
"""How a pod set placed on a node takes its NoSchedule/NoExecute taints (:func:`_taint_verdict`)."""


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


def _tolerations(state: ClusterState, wl: WorkloadInfo, pod_sets: list[str]) -> list[tuple[o.Toleration, ...]]:
    """The effective tolerations of each of ``pod_sets``: its template's, its flavors' and those the admission
    checks' ``podSetUpdates`` add, every one naming the pod set (the shared reference's rule; the Kueue
    versions read, ``checkTaintTolerations`` in ``pkg/controller/tas/node_controller.go``, read the template's
    alone, so no Kueue reading of a check's updates here says whether its first or all count)."""
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
    """UNTOLERATED when some pod set does not tolerate one of the NoSchedule/NoExecute taints; otherwise TEMPORARY
    when some pod set tolerates one only for a while (``tolerationSeconds``); otherwise (no such taint, or every
    pod set tolerates each for good) TOLERATED. Each pod set is judged on its own tolerations."""
    found = TOLERATED
    for taint in node.spec.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        for own in tolerations:
            matching = [t for t in own if toleration_matches(t, taint)]
            if not matching:
                return UNTOLERATED
            if all(t.toleration_seconds is not None for t in matching):
                found = TEMPORARY
    return found


def node_by_hostname(state: ClusterState, hostname: str) -> o.Node | None:
    """The Node a hostname-level placement names: the one whose ``kubernetes.io/hostname`` label is
    ``hostname`` (Kueue v0.20, #15575: the label may differ from the object's name), else the node so named that
    carries no such label. The label-to-name map is memoised per nodes generation."""
    named = state.nodes.get(hostname)
    if named is not None and named.metadata.labels.get(HOSTNAME, hostname) == hostname:
        return named  # the usual case: the label is the name
    memo = state.derived.get("tas-hostnames")
    generation = state.tas.nodes_generation
    if memo is None or memo[0] != generation:
        by_label: dict[str, str] = {}
        for name in sorted(state.nodes):
            value = state.nodes[name].metadata.labels.get(HOSTNAME)
            if value is not None:
                by_label.setdefault(value, name)
        memo = state.derived["tas-hostnames"] = (generation, by_label)
    found = memo[1].get(hostname)
    return state.nodes.get(found) if found is not None else None


def _progressing(state: ClusterState, wl: WorkloadInfo, node: str) -> bool:
    """Some pod of ``wl`` bound to ``node`` (a Node's name) is neither terminal nor being deleted."""
    pods = state.pods
    for key in state.pods_of.get(wl.key, ()):
        pod = pods[key]
        if pod.spec.node_name == node and pod.status.phase not in _TERMINAL and not pod.metadata.deletion_timestamp:
            return True
    return False


def verdict(state: ClusterState, wl: WorkloadInfo, node: str, pod_sets: list[str], now: int, *,
            taints: bool = True, on_pod_termination: bool = True, fixed_time: bool = False) -> str:
    """What ``node`` is for ``wl`` (whose ``pod_sets`` are placed on it) at ``now``: FAILED, HEALTHY or WAITING.
    ``taints`` is Kueue's TASReplaceNodeOnNodeTaints gate (off, a Ready node is healthy whatever its taints),
    ``on_pod_termination`` its TASReplaceNodeOnPodTermination gate and ``fixed_time`` its
    TASReplaceNodeDueToNotReadyOverFixedTime gate (see the module docstring)."""
    obj = node_by_hostname(state, node)
    if obj is None:
        return FAILED
    node = obj.metadata.name  # its pods name it so
    ready = ready_condition(obj)
    if ready is None:
        return FAILED
    if ready.status != "True":
        ends = not_ready_wait_ends(obj)
        waited = ends is None or ends <= now
        if on_pod_termination:
            return FAILED if fixed_time and waited else _once_no_pod_progresses(state, wl, node)
        return FAILED if waited else WAITING
    if not taints:
        return HEALTHY
    taken = _taint_verdict(obj, _tolerations(state, wl, pod_sets))
    if taken == TOLERATED:
        return HEALTHY
    if taken == UNTOLERATED and not on_pod_termination:
        return FAILED
    return _once_no_pod_progresses(state, wl, node)


def _once_no_pod_progresses(state: ClusterState, wl: WorkloadInfo, node: str) -> str:
    return HEALTHY if _progressing(state, wl, node) else FAILED


def node_failure_decisions(state: ClusterState, wl: WorkloadInfo, base: dict, now: int, *, taints: bool = True,
                           on_pod_termination: bool = True, fixed_time: bool = False,
                           kept: tuple[str, ...] = (), threshold: int | None = None) -> list[ev.Decision]:
    """What the node controller does for one admitted workload at ``now`` (nothing when all its nodes are
    healthy); the gates as for :func:`verdict`. ``kept``: failed nodes the workload's placement was kept on, which
    the controller has not looked at since (not listed again). ``threshold``: how many failed nodes it may keep
    listed under TASReplaceMultipleFailedNodes (:mod:`kueue_es.scheduler.multinode`; None: one)."""
    nodes = assigned_nodes(state, wl)
    if not nodes:
        return []
    verdicts = {n: verdict(state, wl, n, nodes[n], now, taints=taints, on_pod_termination=on_pod_termination,
                           fixed_time=fixed_time) for n in sorted(nodes)}
    failed = [n for n, v in verdicts.items() if v == FAILED and n not in kept]
    listed = list(wl.unhealthy_nodes)
    kept = [n for n in listed if verdicts.get(n) in (FAILED, WAITING)]
    new = [n for n in failed if n not in listed]
    if threshold is not None:
        for n in new:
            if len(kept) >= threshold:
                return [_multiple_failures(wl, kept + [n], base)]
            kept = kept + [n]
        new = []
    if kept and new:
        return [_multiple_failures(wl, kept + new, base)]
    if not kept and new:
        kept = new[:1]
    if kept != listed:
        return [ev.UnhealthyNodesChanged(key=wl.key, uid=wl.uid, nodes=kept, **base)]
    return []


def _multiple_failures(wl: WorkloadInfo, nodes: list[str], base: dict) -> ev.WorkloadEvicted:
    return ev.WorkloadEvicted(key=wl.key, uid=wl.uid, reason="NodeFailures",
                              message=f"Workload eviction triggered due to multiple TAS assigned node failures, "
                                      f"including: {', '.join(nodes)}", **base)


def next_wait_end(state: ClusterState) -> int | None:
    """When the first wait on a node that is not Ready ends, among the nodes an admitted workload (not evicted)
    is placed on and does not list yet: the time at which, with TASReplaceNodeOnPodTermination off or
    TASReplaceNodeDueToNotReadyOverFixedTime on, the rules act without any new event."""
    if not len(state.node_waits):
        return None
    waited_on: set[str] = set()
    for keys in state.reserving.values():
        for key in keys:
            wl = state.workloads[key]
            if wl.phase == ADMITTED and not wl.evicted:
                waited_on.update(n for n in assigned_nodes(state, wl) if n not in wl.unhealthy_nodes)
    for ends, name in state.node_waits.ordered():
        if name in waited_on:
            return ends
    return None


def pinned_to(pod: o.Pod) -> str | None:
    """The host a TAS pod of a workload waits for unbound (see :func:`pods_to_fail`), else None: only such pods
    can be failed, whatever their node."""
    m, spec = pod.metadata, pod.spec
    host = spec.node_selector.get(HOSTNAME)
    if not host or spec.node_name or pod.status.phase != "Pending" or WORKLOAD_ANNOTATION not in m.annotations:
        return None
    if not any(a in m.annotations for a in TAS_POD_ANNOTATIONS):
        return None
    if any(g.get("name") == TOPOLOGY_GATE for g in spec.scheduling_gates):
        return None
    return host


def pods_to_fail(state: ClusterState, host: str, pods: list[o.Pod], now: int, *, taints: bool = True,
                 on_pod_termination: bool = True) -> list[o.Pod]:
    """Which of ``pods`` (pinned to ``host``: :func:`pinned_to`) the node controller fails at ``now``, in key
    order (see the module docstring; the gates as for :func:`verdict`)."""
    node = node_by_hostname(state, host)
    ready = ready_condition(node) if node is not None else None
    if node is None or ready is None:
        return []
    if ready.status != "True" and not on_pod_termination:
        ends = not_ready_wait_ends(node)
        if ends is not None and now < ends:
            return []  # Kueue's controller waits out the 30 s before it looks at anything
    by_workload: dict[str, list[o.Pod]] = {}
    for pod in pods:
        if pinned_to(pod) == host:
            key = f"{pod.metadata.namespace}/{pod.metadata.annotations[WORKLOAD_ANNOTATION]}"
            by_workload.setdefault(key, []).append(pod)
    out: list[o.Pod] = []
    for key in sorted(by_workload):
        wl = state.workloads.get(key)
        if wl is None or wl.phase == FINISHED or wl.evicted:
            continue
        if _fails_pinned(state, wl, host, node, ready.status == "True", taints=taints,
                         on_pod_termination=on_pod_termination):
            out.extend(sorted(by_workload[key], key=lambda p: p.key))
    return out


def _fails_pinned(state: ClusterState, wl: WorkloadInfo, host: str, node: o.Node, ready: bool, *, taints: bool,
                  on_pod_termination: bool) -> bool:
    """Whether the controller looks at ``wl``'s pods on ``node`` (and so fails those pinned there): always for a
    host outside its placement; for a host in it, where it waits for the pods to end (Kueue's checkPodsOnNode)."""
    pod_sets = assigned_nodes(state, wl).get(host)
    if not pod_sets:
        return True  # a stray pod: its node is healthy for the workload, the pod goes anyway
    if not ready:
        return on_pod_termination
    if not taints:
        return False
    taken = _taint_verdict(node, _tolerations(state, wl, pod_sets))
    if taken == TOLERATED:
        return False
    return taken == TEMPORARY or on_pod_termination
