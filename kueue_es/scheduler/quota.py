"""Quota over the cohort tree: the projection keeps it (:mod:`projections.quota`), a cycle borrows it.

Re-exported here for the scheduler's modules; :func:`build_quota_tree` builds a fresh tree from a state (the
property tests compare it with the projection's incrementally maintained one).
"""

from __future__ import annotations

from projections.cluster import ClusterState
from projections.quota import UNLIMITED, QuotaNode, QuotaTree, fair_weight
from projections.quota import build_quota_tree as _build

__all__ = ["UNLIMITED", "QuotaNode", "QuotaTree", "build_quota_tree", "fair_weight"]


def build_quota_tree(state: ClusterState) -> QuotaTree:
    """A fresh tree from the state's specs and usage (not the projection's own)."""
    return _build(state.cluster_queues, state.cohorts, state.forest, state.usage)
