"""Kueue's ValidateAdmissibility: whether a pending workload may be tried in its ClusterQueue at all.

In order: its namespace exists, the ClusterQueue's ``namespaceSelector`` selects it, and its pod templates as
Kueue adjusts them are admissible — requests within limits, then within the namespace's LimitRanges
(:mod:`projections.pod_adjustment`). Any failure makes the workload Misconfigured. The scheduler checks it when
it nominates a workload, and the workload-controller rules when they keep a pending workload's QuotaReserved
condition current; both read it here, so they say the same thing and neither undoes what the other wrote.
"""

from __future__ import annotations

from projections.cluster import ClusterState
from projections.clusterqueues import ClusterQueueInfo
from projections.pod_adjustment import admissibility
from projections.workloads import WorkloadInfo

MISCONFIGURED = "Misconfigured"


def inadmissible(state: ClusterState, wl: WorkloadInfo, info: ClusterQueueInfo) -> tuple[str, str] | None:
    """Why ``wl`` cannot be tried in the ClusterQueue ``info``: (message, requeue reason), or None. The
    QuotaReserved=False reason is always :data:`MISCONFIGURED`; a namespace problem requeues as
    ``NamespaceMismatch`` (parked under either queueing strategy), the others with no particular reason."""
    labels = state.namespaces.get(wl.namespace)
    if labels is None:
        return f"Namespace {wl.namespace} doesn't exist", "NamespaceMismatch"
    if not info.namespace_matches(wl.namespace, labels):
        return "Workload namespace doesn't match ClusterQueue selector", "NamespaceMismatch"
    for ps in wl.pod_sets:
        if ps.invalid_resources or ps.outside_limit_ranges:
            return admissibility(wl.pod_sets), ""
    return None
