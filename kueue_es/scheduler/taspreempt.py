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

from kueue_es.scheduler.tas import PodSetRequest, place_workload
from kueue_es.scheduler.tasplace import previous, released, tas_requests, without_victims
from projections.topology import workload_tas_usage
from projections.workloads import WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext, Entry


class TopologyFit:
    """The preemptor's TAS pod sets, placed on the cycle's snapshots with the candidates removed so far gone."""

    __slots__ = ("_ctx", "_lifted", "_options", "_previous", "_removed", "requests")

    def __init__(self, ctx: CycleContext, requests: list, lifted: list, previous_placements) -> None:
        self._ctx = ctx
        self.requests: list[tuple[str, PodSetRequest]] = requests
        """(TAS flavor, request) of each pod set to place."""
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
            return place_workload(snaps, self.requests, options=options, previous=self._previous).ok
        finally:
            snaps.charge_usage(self._lifted, 1)


MAX_DOMAIN_RETRIES = 8
"""Kueue bounds the domain-scoped retries of fair preemption, so a topology with many domains cannot make one cycle
try them all."""


class DomainOrder:
    """Fair preemption's topology term (Kueue's TAS domain ranks): the victim order of Fair Sharing knows no topology,
    so victims would come from all over and a preemptor needing a whole domain might never fit though clearing one
    domain would do. Each leaf domain (per TAS flavor the preemptor needs) is scored by how much of the preemptor's
    largest single pod the candidates in it could free — per resource the freed share capped at 1, averaged over its
    resources — best first, then the one with fewer candidates, then by flavor and domain id. ``ranks``: candidate key
    -> the rank of the best domain it occupies (those outside every such domain after all); ``viable``: the keys of the
    candidates in each domain that alone could free the whole pod, best first, at most :data:`MAX_DOMAIN_RETRIES`."""

    __slots__ = ("ranks", "viable")

    def __init__(self, fit: TopologyFit, candidates: list[WorkloadInfo]) -> None:
        need: dict[str, dict[str, int]] = {}
        for flavor, req in fit.requests:
            largest = need.setdefault(flavor, {})
            for r, v in req.requests:
                largest[r] = max(largest.get(r, 0), v)
        freed: dict[tuple[str, str], dict[str, int]] = {}
        members: dict[tuple[str, str], list[WorkloadInfo]] = {}
        occupies: dict[str, list[tuple[str, str]]] = {}
        for c in candidates:
            for flavor, did, amounts in workload_tas_usage(c):
                if flavor not in need:
                    continue
                dk = (flavor, did)
                got = freed.setdefault(dk, {})
                for r, v in amounts:
                    got[r] = got.get(r, 0) + v
                members.setdefault(dk, []).append(c)
                occupies.setdefault(c.key, []).append(dk)

        def coverage(dk: tuple[str, str]) -> float:
            want = need[dk[0]]
            if not want:
                return 0.0
            total = sum(min(freed[dk].get(r, 0) / v, 1.0) for r, v in want.items() if v > 0)
            return total / len(want)

        score = {dk: coverage(dk) for dk in freed}
        domains = sorted(freed, key=lambda dk: (-score[dk], len(members[dk]), dk[0], dk[1]))
        rank = {dk: i for i, dk in enumerate(domains)}
        self.ranks = {c.key: min((rank[dk] for dk in occupies.get(c.key, ())), default=len(domains))
                      for c in candidates}
        self.viable: list[frozenset[str]] = []
        for dk in domains:
            if len(self.viable) == MAX_DOMAIN_RETRIES or score[dk] < 1:
                break
            self.viable.append(frozenset(c.key for c in members[dk]))

    @classmethod
    def of(cls, fit: TopologyFit | None, candidates: list[WorkloadInfo]) -> DomainOrder | None:
        """None without TAS pod sets to place (no topology term)."""
        return None if fit is None else cls(fit, candidates)
