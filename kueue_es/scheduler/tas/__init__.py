"""Topology-aware placement (Kueue's TAS): pure functions over a :class:`projections.topology.FlavorSnapshot`.

* :func:`place` — one pod set in one flavor's topology -> :class:`Placement` or :class:`NoPlacement`;
* :func:`place_workload` — every TAS pod set of a workload, with usage assumed between them;
* :func:`replace_node` — repair an assignment after one node became unhealthy (:func:`replace_in_workload`:
  every pod set of a workload on that node);
* :func:`net_domains` — what an admission newly charges.

Snapshots come from :func:`projections.topology.tas_snapshots` (one fork per call; charge a fork in a cycle
with :meth:`projections.topology.TASSnapshots.charge`). :class:`TASOptions` carries the feature gates placement
reads (balanced placement, slice layers), as the Configuration sets them.
"""

from kueue_es.scheduler.tas.place import place
from kueue_es.scheduler.tas.replace import Replacement, replace_in_workload, replace_node
from kueue_es.scheduler.tas.request import (
    DEFAULT_OPTIONS,
    NodePorts,
    NoPlacement,
    Placement,
    PodSetRequest,
    Result,
    TASOptions,
)
from kueue_es.scheduler.tas.usage import net_domains
from kueue_es.scheduler.tas.workload import WorkloadPlacement, place_workload

__all__ = [
    "DEFAULT_OPTIONS",
    "NoPlacement",
    "NodePorts",
    "Placement",
    "PodSetRequest",
    "Replacement",
    "Result",
    "TASOptions",
    "WorkloadPlacement",
    "net_domains",
    "place",
    "place_workload",
    "replace_in_workload",
    "replace_node",
]
