"""Preemption from the second pass: room for a failed node's replacement (while TASFailedNodeReplacementFailFast
is off), or for a delayed topology request's placement.

When the second pass finds no replacement for a workload's unhealthy node, Kueue's flavor assignment marks the
pod set that failed as needing preemption (its flavors' mode becomes Preempt; the check on an empty topology that
would turn it into NoFit is skipped for a workload replacing a node). With FailFast on the workload is then
evicted; with it off, the scheduler goes on as for any entry in Preempt mode: it asks its preemptor for victims
and, when there are some, preempts them (Kueue's Preempted condition and event, the preemptor's reason) and
waits; the next second pass places the replacement on what they freed.

The victim search is the ordinary one (:mod:`kueue_es.scheduler.preemption`, or :mod:`~.fairsharing` under Fair
Sharing): candidates allowed by the ClusterQueue's preemption policies that hold quota of the failed pod set's
flavor-resources. Its fit check is Kueue's too: the workload's whole request must fit the quota left (its own
reserved usage still counted, as Kueue's snapshot keeps it), and the replacement must be found with the candidates
taken off so far gone (:class:`ReplacementFit`). No victims, and the second pass just fails, as before.

A delayed topology request (a ProvisioningRequest's two-phase admission) goes the same way when its placement
does not fit once the checks are Ready: Kueue's second pass is an ordinary entry of the cycle, whose TAS failure
turns the mode to Preempt, so the lower-priority workloads its policies allow are preempted, the pass fails and the
next one places it (:func:`preempt_for_delayed`). Its quota is already reserved, so its request is counted once:
its own reservation is off the tree while the search runs (Kueue's "preempts under a pods quota",
scheduler_tas_test.go).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import schema as ev
from kueue_es.scheduler.multinode import listed_beside
from kueue_es.scheduler.preemption import preemption_message
from kueue_es.scheduler.tas import Placement, PodSetRequest, replace_in_workload
from kueue_es.scheduler.tasplace import without_victims
from kueue_es.scheduler.taspreempt import TopologyFit
from projections.gates import TAS_REPLACE_MULTIPLE_FAILED_NODES
from projections.workloads import WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext
    from kueue_es.scheduler.preemption import Target


class ReplacementFit(TopologyFit):
    """The topology half of the fit check for a replacement: ``node``'s pods of each pod set moved elsewhere in
    its required domain, with the candidates removed so far gone."""

    __slots__ = ("_listed", "_node", "_replacing")

    def __init__(self, ctx: CycleContext, replacing: list[tuple[str, PodSetRequest, Placement]], node: str,
                 listed: frozenset[str] = frozenset()) -> None:
        super().__init__(ctx, [(flavor, req) for flavor, req, _ in replacing], [], None)
        self._replacing = replacing
        self._node = node
        self._listed = listed

    def fits(self) -> bool:
        options = without_victims(self._options, [self._removed[k] for k in sorted(self._removed)])
        found = replace_in_workload(self._ctx.topology.snapshots, self._replacing, self._node, options=options,
                                    listed=self._listed)
        return not isinstance(found, tuple)


def replacement_targets(ctx: CycleContext, wl: WorkloadInfo, replacing: list[tuple[str, PodSetRequest, Placement]],
                        node: str, pod_set: str) -> list[Target]:
    """Victims whose removal lets ``wl`` replace ``node`` (``pod_set`` the pod set that found no replacement), or
    none."""
    adm = wl.admission
    qnode = ctx.tree.cluster_queues.get(wl.cluster_queue)
    if adm is None or qnode is None or not replacing:
        return []
    psa = next((p for p in adm.pod_set_assignments if p.name == pod_set), None)
    if psa is None:
        return []
    needed = {fr: wl.usage.get(fr, 0) for fr in sorted(f"{f}/{r}" for r, f in psa.flavors.items())}
    listed = listed_beside(wl, ctx.config.gate(TAS_REPLACE_MULTIPLE_FAILED_NODES))
    return ctx.find_targets(ctx, wl, qnode, dict(wl.usage), needed, ReplacementFit(ctx, replacing, node, listed))


def preempt_for_replacement(ctx: CycleContext, wl: WorkloadInfo,
                            replacing: list[tuple[str, PodSetRequest, Placement]], node: str, pod_set: str,
                            message: str, base: dict) -> list[ev.Decision] | None:
    """The preemptions that make room for the replacement, then the failed pass (its message saying so); None
    when there are no victims, or when one is another workload's of this cycle (Kueue skips overlapping
    targets)."""

    return _issue(ctx, wl, replacement_targets(ctx, wl, replacing, node, pod_set), pod_set, message, base)


def delayed_targets(ctx: CycleContext, wl: WorkloadInfo, wanted: list[tuple[str, PodSetRequest]],
                    frs: list[str]) -> list[Target]:
    """Victims whose removal lets ``wl``'s delayed pod sets (``wanted``: TAS flavor and request each, holding
    quota of the flavor-resources ``frs``) be placed, or none. ``wl``'s reservation is taken off the tree for the
    search, whose request it is: counted once."""
    qnode = ctx.tree.cluster_queues.get(wl.cluster_queue)
    if qnode is None or not wanted:
        return []
    needed = {fr: wl.usage.get(fr, 0) for fr in sorted(set(frs))}
    ctx.tree.charge(wl.cluster_queue, wl.usage, -1)
    try:
        return ctx.find_targets(ctx, wl, qnode, dict(wl.usage), needed, TopologyFit(ctx, list(wanted), [], None))
    finally:
        ctx.tree.charge(wl.cluster_queue, wl.usage, 1)


def preempt_for_delayed(ctx: CycleContext, wl: WorkloadInfo, wanted: list[tuple[str, PodSetRequest]],
                        frs: list[str], pod_set: str, message: str, base: dict) -> list[ev.Decision] | None:
    """The preemptions that make room for ``wl``'s delayed topology requests, then the failed pass; None as
    :func:`preempt_for_replacement`."""
    return _issue(ctx, wl, delayed_targets(ctx, wl, wanted, frs), pod_set, message, base)


def _issue(ctx: CycleContext, wl: WorkloadInfo, targets: list[Target], pod_set: str, message: str,
           base: dict) -> list[ev.Decision] | None:
    """The victims' preemptions, then the failed pass. The victims stay charged on the cycle's tree: they hold their
    quota until their pods stop, and ``wl`` already holds its own (where a head's preemption puts its usage in the
    victims' place), so no later entry of the cycle is admitted on it; ``ctx.removed`` keeps another entry from
    choosing them again."""
    if not targets or any(t.workload.key in ctx.removed for t in targets):
        return None
    out: list[ev.Decision] = []
    for t in targets:
        victim = t.workload
        ctx.removed.add(victim.key)
        if victim.evicted:
            continue
        out.append(ev.WorkloadPreempted(key=victim.key, uid=victim.uid, reason=t.reason, preemptor=wl.key,
                                        message=preemption_message(ctx.state, wl, victim, t.reason), **base))
    out.append(ev.SecondPassFailed(key=wl.key, uid=wl.uid,
                                   message=f"couldn't assign flavors to pod set {pod_set}: {message}. Pending the "
                                           f"preemption of {len(targets)} workload(s)", **base))
    return out
