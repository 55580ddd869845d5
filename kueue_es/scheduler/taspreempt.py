"""The topology half of the preemptor's fit check (Kueue's ``workloadFits`` with TAS requests).

While the victim search (:mod:`kueue_es.scheduler.preemption`, :mod:`kueue_es.scheduler.fairsharing`) takes
candidates off the quota tree, Kueue's snapshot drops their TAS usage too, and the preemptor fits only when its
quota fits *and* its TAS pod sets can be placed on what is then free. So a candidate whose removal frees quota but
no domain the preemptor could use is not enough, and the search goes on; filling back keeps a victim out of the
set only when both still fit without it. The victim search called by flavor assignment's preemption oracle has no
TAS requests, as in Kueue, and checks quota only.

:class:`TopologyFit` follows the candidates the search removes and restores on the cycle's TAS snapshots (always
undone by the search before it returns) and places the preemptor only when asked, i.e. once its quota fits; a
workload without TAS pod sets gets none, so the search costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kueue_es.scheduler.tas import place_workload
from kueue_es.scheduler.tasplace import previous, released, tas_requests, without_victims
from projections.topology import workload_tas_usage
from projections.workloads import WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext, Entry


class TopologyFit:
    """The preemptor's TAS pod sets, placed on the cycle's snapshots with the candidates removed so far gone."""

    __slots__ = ("_ctx", "_lifted", "_options", "_previous", "_removed", "_requests")

    def __init__(self, ctx: CycleContext, requests: list, lifted: list, previous_placements) -> None:
        self._ctx = ctx
        self._requests = requests
        self._lifted = lifted
        self._previous = previous_placements
        self._options = ctx.topology.options
        self._removed: dict[str, WorkloadInfo] = {}

    @classmethod
    def of(cls, ctx: CycleContext, e: Entry) -> TopologyFit | None:
        """The check for entry ``e``'s assignment, or None when it places no TAS pod set here (none, or all of
        them delayed for a ProvisioningRequest)."""
        a = e.assignment
        info = ctx.info_of(e)
        if a is None or not info.tas_levels:
            return None
        requests = [(flavor, req) for flavor, req, _ in tas_requests(e.wl, info, a)]
        if not requests:
            return None
        return cls(ctx, requests, released(ctx, e.replaced), previous(ctx, e.wl, e.replaced))

    def remove(self, wl: WorkloadInfo) -> None:
        """``wl`` is taken off (a candidate the search removes): its domains are free."""
        self._ctx.topology.snapshots.charge_usage(workload_tas_usage(wl), -1)
        self._removed[wl.key] = wl

    def restore(self, wl: WorkloadInfo) -> None:
        """``wl`` is back (added back, or the search is undone)."""
        self._ctx.topology.snapshots.charge_usage(workload_tas_usage(wl), 1)
        del self._removed[wl.key]

    def fits(self) -> bool:
        """Whether every TAS pod set of the preemptor can be placed now (the slice it replaces, under
        ElasticJobsViaWorkloadSlicesWithTAS, lifted; the removed candidates' host ports free under
        SchedulerLibraryIntegration, as Kueue's simulator preempts their pods with them)."""
        snaps = self._ctx.topology.snapshots
        snaps.charge_usage(self._lifted, -1)
        try:
            options = without_victims(self._options, [self._removed[k] for k in sorted(self._removed)])
            return place_workload(snaps, self._requests, options=options, previous=self._previous).ok
        finally:
            snaps.charge_usage(self._lifted, 1)
