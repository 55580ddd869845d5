"""``ConcurrentAdmission``: the scheduler's rules between the variants of one parent Workload.

A variant is a Workload owned by another Workload (``kueue.x-k8s.io/v1beta2``); its flavor is the first its
allowed-flavors annotation names, and how favorable it is, that flavor's place in its ClusterQueue's first
resource group (the earlier, the more favorable). Its siblings are the admitted workloads of the same ClusterQueue
owned by the same parent. As Kueue's scheduler does under the gate:

* a variant with a more favorable sibling admitted is passed over (``PendingEvaluation``, "A more favorable
  variant is already admitted"), before its flavors are even looked at;
* a variant that fits while a less favorable sibling is admitted does not take the quota: it evicts that sibling
  (``FlavorMigration``) and waits for it to go (``WaitingForPreemptedWorkloads``), unless its own flavor comes
  after the policy's ``migration.constraints.lastAcceptableFlavorName`` (``PendingEvaluation``, "Target flavor is
  below LastAcceptableFlavorName").

Siblings are the variants of one parent by UID (the UID their owner references name; by name only where one is
not known, as for a variant restored from an older snapshot): the old variants of a parent made again under the
same name are not the new one's.
"""

from __future__ import annotations

from projections.clusterqueues import ClusterQueueInfo
from projections.variants import parent_name, siblings, variant_flavor
from projections.workloads import ADMITTED, WorkloadInfo

MORE_FAVORABLE_ADMITTED = "A more favorable variant is already admitted"
BELOW_LAST_ACCEPTABLE = "Target flavor is below LastAcceptableFlavorName"
FLAVOR_MIGRATION = "FlavorMigration"
"""The Evicted reason of a variant evicted for a more favorable sibling."""
PENDING_MIGRATION = "Pending the migration of 1 workload(s)"
UNKNOWN = "UNKNOWN"
"""What Kueue's messages say for a UID not known (a variant the fold made, not yet read back with its uid)."""


def flavor_order(info: ClusterQueueInfo) -> list[str]:
    """The flavors of the ClusterQueue's first resource group, most favorable first."""
    return [f.name for f in info.groups[0].flavors] if info.groups else []


def _index(wl: WorkloadInfo, order: list[str]) -> int | None:
    flavor = variant_flavor(wl)
    return order.index(flavor) if flavor in order else None


def _placed(wl: WorkloadInfo, info: ClusterQueueInfo) -> tuple[list[str], int] | None:
    """The ClusterQueue's flavor order and ``wl``'s place in it (None: its flavor is not there)."""
    order = flavor_order(info)
    own = _index(wl, order)
    return None if own is None else (order, own)


def admitted_sibling(wl: WorkloadInfo, info: ClusterQueueInfo, reserving: list[WorkloadInfo],
                     more_favorable: bool) -> WorkloadInfo | None:
    """An admitted sibling of variant ``wl`` among ``reserving`` (its ClusterQueue's workloads holding quota) whose
    flavor comes before ``wl``'s (``more_favorable``) or after it; None when there is none or ``wl`` is no
    variant with a flavor of the queue."""
    parent = parent_name(wl)
    placed = _placed(wl, info) if parent else None
    if placed is None:
        return None
    order, own = placed
    for other in reserving:
        if other.key == wl.key or other.phase != ADMITTED or not siblings(wl, other):
            continue
        idx = _index(other, order)
        if idx is not None and (idx < own if more_favorable else idx > own):
            return other
    return None


def migration_allowed(wl: WorkloadInfo, info: ClusterQueueInfo) -> bool:
    """Whether variant ``wl`` may take over from a less favorable sibling: its flavor is not after the policy's
    ``lastAcceptableFlavorName`` (no such constraint: always)."""
    policy = info.spec.concurrent_admission_policy
    constraints = policy.migration.constraints if policy is not None else None
    last = constraints.last_acceptable_flavor_name if constraints is not None else None
    if not last:
        return True
    placed = _placed(wl, info)
    if placed is None:
        return False
    order, own = placed
    return last in order and own <= order.index(last)


def migration_message(wl: WorkloadInfo) -> str:
    """The Evicted message of the sibling ``wl`` takes over from."""
    return (f"Evicted to accommodate a workload (UID: {wl.uid or UNKNOWN}) due to migration to more favorable "
            "resource flavor")
