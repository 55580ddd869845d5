"""Several failed nodes under one TAS workload (Kueue's ``TASReplaceMultipleFailedNodes``, alpha, off; v0.20).

Without the gate a workload keeps one failed node in ``status.unhealthyNodes`` while it is replaced, and a second,
different failure evicts it (NodeFailures). With the gate on, a workload whose
``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold`` annotation allows N (1 to 8) failed nodes keeps up to N
listed: a further failure is listed as long as fewer than N are, and evicts it only beyond that. The second pass
replaces the listed nodes one at a time, the first listed first, each pass taking the next (a node that cannot be
replaced yet holds the ones after it). While no more than N are listed, a node without replacement does not evict
the workload under TASFailedNodeReplacementFailFast: the pass fails and is retried after the second-pass backoff,
as with that gate off; and the other listed nodes' domains, gone from the topology, do not make the assignment
stale for the one being replaced. A Job's annotation is copied to its Workload under the gate. Without the
annotation (or with the gate off) nothing changes.
"""

from __future__ import annotations

from projections.workloads import WorkloadInfo


def threshold(wl: WorkloadInfo, enabled: bool) -> int | None:
    """The failed nodes ``wl`` may keep listed under the gate (``enabled``), or None: one, as without it."""
    return wl.unhealthy_threshold if enabled else None


def within_threshold(wl: WorkloadInfo, enabled: bool) -> bool:
    """Whether a node without replacement leaves ``wl`` admitted rather than evicting it under fail-fast: the
    gate is on, the workload sets a threshold, and it lists no more failed nodes than that."""
    limit = threshold(wl, enabled)
    return limit is not None and len(wl.unhealthy_nodes) <= limit


def listed_beside(wl: WorkloadInfo, enabled: bool) -> frozenset[str]:
    """The listed failed nodes other than the one being replaced, whose domains may be gone from the topology
    without making the assignment stale (only under the gate, where more than one can be listed)."""
    return frozenset(wl.unhealthy_nodes[1:]) if enabled else frozenset()
