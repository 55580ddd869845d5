"""Place every TAS pod set of one workload (§2.8 rule 28).

Flavors run in name order and, within a flavor, pod sets in the order given (their index in the workload). Each
placed pod set's usage is assumed for the ones after it — across all flavors whose lowest level is the hostname,
which may share nodes, under TASHandleOverlappingFlavors (``options.overlapping_flavors``); per flavor otherwise.
The first failure stops the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kueue_es.scheduler.tas.nodes import go_quote
from kueue_es.scheduler.tas.place import place
from kueue_es.scheduler.tas.request import (
    DEFAULT_OPTIONS,
    AssumedUsage,
    NoPlacement,
    Placement,
    PodSetRequest,
    TASOptions,
    add_assumed,
)
from projections.topology import FlavorSnapshot


class WorkloadPlacement(msgspec.Struct, frozen=True):
    """Placements by pod-set name; on failure ``failed`` names the pod set and ``message`` says why (the pod
    sets placed before it are still listed)."""

    placements: dict[str, Placement]
    failed: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.failed is None


def place_workload(snapshots: Mapping[str, FlavorSnapshot], requests: Sequence[tuple[str, PodSetRequest]], *,
                   simulate_empty: bool = False, options: TASOptions = DEFAULT_OPTIONS) -> WorkloadPlacement:
    """``requests``: (TAS flavor, request) per pod set, in pod-set order. Pod sets with no pods are skipped."""
    by_flavor: dict[str, list[PodSetRequest]] = {}
    for flavor, req in requests:
        by_flavor.setdefault(flavor, []).append(req)
    shared: AssumedUsage = {}
    placements: dict[str, Placement] = {}
    for flavor in sorted(by_flavor):
        snap = snapshots.get(flavor)
        if snap is None:
            return WorkloadPlacement(placements, by_flavor[flavor][0].name,
                                     f"Flavor {go_quote(flavor)} information missing in TAS cache")
        assumed: AssumedUsage = shared if options.overlapping_flavors and snap.tree.hostname_lowest else {}
        for req in by_flavor[flavor]:
            if req.count <= 0:
                continue
            res = place(snap, req, assumed=assumed, simulate_empty=simulate_empty, options=options)
            if isinstance(res, NoPlacement):
                return WorkloadPlacement(placements, req.name, res.message)
            placements[req.name] = res
            add_assumed(assumed, res, req.per_pod())
    return WorkloadPlacement(placements)
