"""Kueue's MultiKueue metrics (v0.20): ``multikueue_cluster_status``, computed from the state at each scrape.

A manager ClusterQueue depends on the worker clusters of the MultiKueueConfig behind each of its MultiKueue checks;
the gauge reports, for each such pair, the worker's ``Active`` condition as the MultiKueue cluster controller
writes it (:func:`projections.admissionchecks.cluster_active`): 1 on its status, 0 on the other two, ``Unknown``
while nothing has been observed of the worker yet. A cluster the config names without a MultiKueueCluster object
is not reported (the check reports it missing), nor is anything while the ``MultiKueue`` gate is off.

``multikueue_workloads_evicted_total`` is folded with the other counters (:mod:`projections.metrics`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from projections.admissionchecks import MULTIKUEUE_CONTROLLER, cluster_active, multikueue_config_for

if TYPE_CHECKING:
    from projections.cluster import ClusterState

STATUSES = ("True", "False", "Unknown")


def cluster_status(state: ClusterState) -> list[tuple[tuple[str, str, str], float]]:
    """``((cluster_queue, cluster, active), value)`` samples of ``multikueue_cluster_status``, sorted."""
    world = state.multikueue
    if world is None:
        return []
    checks, out = state.admission_checks, []
    for name in sorted(state.cluster_queues):
        strategy = state.cluster_queues[name].spec.admission_checks_strategy
        if strategy is None:
            continue
        clusters: set[str] = set()
        for check in {rule.name for rule in strategy.admission_checks}:
            ac = checks.get(check)
            if ac is None or ac.spec.controller_name != MULTIKUEUE_CONTROLLER:
                continue
            config, _ = multikueue_config_for(ac, world.configs)
            if config is not None:
                clusters.update(c for c in config.spec.clusters if c in world.clusters)
        for cluster in sorted(clusters):
            active = (cluster_active(cluster, world) or ("Unknown",))[0]
            out += [((name, cluster, s), 1.0 if s == active else 0.0) for s in STATUSES]
    return out
