"""TASLeaderPodSetFeasibility (Kueue v0.20, beta, on): the nodes a pod-set group's leader may take.

A group's leader and workers are placed in one run governed by the workers' request (:mod:`.group`). Where the
leaves of the run are nodes (the hostname is the lowest level, or each node is checked on its own under
TASNodeFeasibilityForAllLevels), Kueue v0.20 asks the leader's own node filters which nodes suit it: its
tolerations with the flavor's against a node's taints, its nodeSelector and its required node affinity (under
SchedulerLibraryIntegration, the library's filters for its own template). The leader is then placed only on a
node they allow, whether or not the workers' filters allow it: a node the workers refuse can still take the
leader (it holds no worker), and one they accept but the leader's filters refuse takes workers only.

Off, the leader is held to the workers' filters, as before v0.20: it may land on a node its own template cannot
run on (its pod then stays Pending while the workload holds quota). Leaves that span several nodes (the gate
TASNodeFeasibilityForAllLevels off, a lowest level other than the hostname) filter no node, for either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from kueue_es.scheduler.tas.devices import device_excluded
from kueue_es.scheduler.tas.library import library_excluded
from kueue_es.scheduler.tas.nodes import Exclusion, excluded_leaves
from kueue_es.scheduler.tas.pernode import NodeView, node_view
from kueue_es.scheduler.tas.request import PodSetRequest, TASOptions
from projections.topology import FlavorSnapshot


class LeaderFilter(NamedTuple):
    """Why the leader's own filters refuse each leaf (``leaves``, by leaf index, where leaves are nodes) and each
    node under a declared leaf (``nodes``, by node index; None without a per-node view)."""

    leaves: Mapping[int, Exclusion]
    nodes: Mapping[int, Exclusion] | None


def leader_filter(snap: FlavorSnapshot, leader: PodSetRequest, leader_per_pod: tuple[tuple[str, int], ...], *,
                  assumed: Mapping[str, Mapping[str, int]] | None, simulate_empty: bool, options: TASOptions,
                  workers_nodes: NodeView | None) -> LeaderFilter | None:
    """The leader's own filter, or None with the gate off (the leader then follows the workers')."""
    if not options.leader_feasibility:
        return None
    leaves = excluded_leaves(snap, leader)
    if options.library is not None:
        leaves = library_excluded(snap, leader, leaves, options.library, simulate_empty)
    leaves = device_excluded(snap, leader, leaves, options.devices)
    view = node_view(snap, leader, leader_per_pod, assumed, options.devices) if workers_nodes is not None else None
    return LeaderFilter(leaves, view.why if view is not None else None)
