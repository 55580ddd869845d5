"""Kueue's SchedulerLibraryIntegration (alpha, off): the node filter of TAS run by the kube-scheduler's plugins.

Under the gate, Kueue no longer matches a pod set against each node itself: for a flavor whose lowest level is the
hostname it asks the scheduler library which of the nodes a pod of the set could be scheduled on, with a filter
profile of NodeUnschedulable, TaintToleration, NodeAffinity and NodePorts, over every bound, non-terminal pod it has
seen. Resources are still Kueue's own count (NodeResourcesFit is not in the profile, nor InterPodAffinity, the volume
plugins or DRA's), so what changes, as kueue-es models it:

* NodePorts: a node where a bound pod holds a host port one of the set's pods wants (same protocol and port, a
  host IP equal or ``0.0.0.0`` on either side, :mod:`projections.host_ports`) is excluded; so is one where a
  workload holding quota has pods assigned by a hostname-level topology assignment, which stand in for its pods
  whether they exist or not (Kueue's virtual pods, :mod:`projections.assumed_ports`). When Kueue asks
  whether the set would fit with every workload gone (a Preempt nomination's check, a preemptor without targets),
  pods owned by a workload hold nothing, pods owned by none still do; when it simulates preempting targets, the
  targets' pods hold nothing;
* the not-fit message: the nodes the library refuses are counted as ``schedulerLibraryNoFit: N`` instead of by
  taint, nodeSelector or affinity (resources and topology domains are counted as before);
* cordoned and not-Ready nodes: Kueue's node cache keeps them under the gate, and a topology whose lowest level is
  the hostname takes them as leaves (their capacity counts, and so do they in "Total nodes"). NodeUnschedulable
  refuses a cordoned node unless the set tolerates ``node.kubernetes.io/unschedulable:NoSchedule``; no filter
  looks at readiness, so a not-Ready node is refused only by its taints (the node controller's
  ``node.kubernetes.io/not-ready`` or ``unreachable`` ones, usually there). Other topologies drop both kinds,
  as without the gate (:func:`projections.topology.tas_snapshots`);
* taints, the node selector (the pod set's with the Ready checks' updates, tolerations with the flavor's) and
  required node affinity decide as they do without the gate, by the same Kubernetes rules.

Not modelled, as an edge case: the other pods of the same set on one node hold no ports (the library checks one pod
per node, so two pods of a set wanting one host port may be placed on one node, under Kueue as here).
"""

from __future__ import annotations

from collections.abc import Mapping

from events import objects as o
from kueue_es.scheduler.tas.nodes import Exclusion, tolerates
from kueue_es.scheduler.tas.request import NodePorts, PodSetRequest
from projections.host_ports import conflict, held_on
from projections.topology import FlavorSnapshot

LIBRARY: Exclusion = ("library", "")
CORDONED = o.Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
"""What the NodeUnschedulable filter lets a pod tolerate to run on a cordoned node."""


def library_excluded(snap: FlavorSnapshot, req: PodSetRequest, excluded: Mapping[int, Exclusion], ports: NodePorts,
                     simulate_empty: bool) -> dict[int, Exclusion]:
    """Leaf index -> ``LIBRARY`` for every node the library's filters refuse: those ``excluded`` (Kueue's own node
    filter, whose rules the plugins share) and those whose host ports conflict with the set's. Empty unless the
    lowest level is the hostname, as without the gate."""
    tree = snap.tree
    out = dict.fromkeys(excluded, LIBRARY)
    if not tree.hostname_lowest:
        return out
    if tree.has_cordoned:
        tolerations = req.tolerations + snap.tolerations
        for i, node in enumerate(tree.leaf_node):
            if node.spec.unschedulable and i not in out and not any(tolerates(t, CORDONED) for t in tolerations):
                out[i] = LIBRARY
    if not req.host_ports:
        return out
    for node in sorted(ports.holders):
        i = tree.node_leaf.get(node)
        if i is None or i in out:
            continue
        held = held_on(ports.holders, node, simulate_empty=simulate_empty, released=ports.released)
        if held and conflict(req.host_ports, held):
            out[i] = LIBRARY
    return out
