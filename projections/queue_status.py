"""ClusterQueue and LocalQueue ``status`` as Kueue's queue controllers write it, computed from the projection.

Pure: the state and the status the apiserver last showed go in, the status to write comes out (wire form,
camelCase, quantities in Kueue's canonical format). The connector writes it when it differs.

* ClusterQueue: the ``Active`` condition (``Ready``, or the first of Kueue's reasons — ``Stopped``,
  ``FlavorNotFound``, ``AdmissionCheckNotFound``, ``TopologyNotFound`` — with a message naming all of them),
  ``pendingWorkloads`` (queued, active or parked), ``reservingWorkloads``, ``admittedWorkloads``,
  ``flavorsReservation`` (every reserving workload) and ``flavorsUsage`` (admitted ones): one entry per flavor of
  the quotas in force, group by group, its covered resources by name, each with ``total`` and ``borrowed`` (above
  the nominal quota, only in a cohort; "0" otherwise). The quotas in force are the spec's, or under
  DynamicQuotaOrchestration its ``status.effectiveQuotas`` (:mod:`projections.effective_quotas`): Kueue lists what
  its cache compiled, the quotas it schedules with.
* ClusterQueue, under MultiKueueManagerQuotaAutomation: its ``MultiKueueManagerQuotaAutomation`` condition
  (:mod:`projections.manager_quota`), set on a MultiKueue manager's, removed from any other.
* ClusterQueue and Cohort, while Fair Sharing is on (a ``fairSharing`` stanza in the Configuration):
  ``fairSharing.weightedShare``, the node's weighted dominant resource share (:mod:`projections.fair_share`) as
  Kueue's int64 field carries it: rounded up, an infinite share (weight 0, borrowing) saturating at MaxInt64.
  With Fair Sharing off the field is left out, so the writer removes it, as Kueue sets it to nil. Only a Cohort
  *object* has a status; its only field here is ``fairSharing``.
* LocalQueue: ``Active`` (``Ready``, ``Stopped``, ``ClusterQueueDoesNotExist``, ``ClusterQueueIsInactive``),
  ``pendingWorkloads`` (0 while stopped), ``reservingWorkloads`` and ``admittedWorkloads`` in its
  ClusterQueue, ``flavorsReservation`` and ``flavorsUsage`` over that ClusterQueue's flavors (nothing while the
  ClusterQueue does not exist).

Conditions keep their ``lastTransitionTime`` while their status holds and take ``now`` (a time from the log)
when it flips, like ``meta.SetStatusCondition``; conditions of other types are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from events import objects as o
from events.quantity import canonical_quantity, to_int
from events.timefmt import format_time
from projections import effective_quotas, fair_share, manager_quota
from projections.cluster import ClusterState
from projections.clusterqueues import active_condition
from projections.workloads import ADMITTED, WorkloadInfo

LQ_FIELDS = ("conditions", "pendingWorkloads", "reservingWorkloads", "admittedWorkloads", "flavorsReservation",
             "flavorsUsage")
CQ_FIELDS = (*LQ_FIELDS, "fairSharing")
COHORT_FIELDS = ("fairSharing",)
MAX_INT64 = 2**63 - 1


def cluster_queue_status(state: ClusterState, name: str, now: int,
                         shown: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The status Kueue would write on ClusterQueue ``name`` (None when the log has no such ClusterQueue), its
    conditions merged into those of ``shown`` (the status the apiserver shows; default: the one in the log)."""
    cq = state.cluster_queues.get(name)
    if cq is None:
        return None
    info = state.cq_info(name)
    assert info is not None
    status, reason, message = active_condition(info.inactive_reasons)
    reserving = [state.workloads[k] for k in state.reserving.get(name, {}) if k in state.workloads]
    admitted = [wl for wl in reserving if wl.phase == ADMITTED]
    quotas = in_force(state, cq)
    nominal = _nominal(quotas) if cq.spec.cohort_name else None
    queue = state.queues.get(name)
    conditions = set_condition(_conditions(cq.status if shown is None else shown), {
        "type": "Active", "status": status, "reason": reason, "message": message,
        "observedGeneration": cq.metadata.generation}, now)
    out = {
        "conditions": _quota_automation(state, cq, conditions, now),
        "pendingWorkloads": len(queue) if queue is not None else 0,
        "reservingWorkloads": len(reserving),
        "admittedWorkloads": len(admitted),
        "flavorsReservation": _flavor_usage(quotas, state.usage.get(name, {}), nominal, state.byte_valued()),
        "flavorsUsage": _flavor_usage(quotas, _sum_usage(admitted), nominal, state.byte_valued()),
    }
    if fair_sharing_on(state):
        out["fairSharing"] = {"weightedShare": weighted_share(state, "ClusterQueue", name)}
    return out


def cohort_status(state: ClusterState, name: str) -> dict[str, Any] | None:
    """The status Kueue's Cohort controller would write on Cohort object ``name`` (None when the log has none):
    its ``fairSharing`` while Fair Sharing is on, nothing otherwise."""
    if name not in state.cohorts:
        return None
    if not fair_sharing_on(state):
        return {}
    return {"fairSharing": {"weightedShare": weighted_share(state, "Cohort", name)}}


def fair_sharing_on(state: ClusterState) -> bool:
    return fair_share.enabled(state.config.document if state.config is not None else None)


def weighted_share(state: ClusterState, kind: str, name: str) -> int:
    """A node's weighted share as Kueue's int64 status field holds it: rounded up, +inf saturating at MaxInt64,
    0 for a node outside the quota tree (a cyclic cohort tree, which Kueue does not compute either)."""
    tree = state.quota
    node = (tree.cluster_queues if kind == "ClusterQueue" else tree.cohorts).get(name)
    if node is None:
        return 0
    share = fair_share.dominant_share(node, weights=fair_share.state_flavor_weights(state)).weighted
    if math.isnan(share) or share <= 0:
        return 0
    if share >= MAX_INT64:
        return MAX_INT64
    return math.ceil(share)


def local_queue_status(state: ClusterState, key: str, now: int,
                       shown: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The status Kueue would write on LocalQueue ``key`` (``namespace/name``; None when the log has none);
    ``shown`` as for :func:`cluster_queue_status`."""
    lq = state.local_queues.get(key)
    if lq is None:
        return None
    cq_name = lq.spec.cluster_queue
    cq = state.cluster_queues.get(cq_name)
    stopped = lq.spec.stopped
    active = state.local_queue_active(key)
    members = [state.workloads[k] for k in state.lq_members.get(key, {}) if k in state.workloads]
    queue = state.queues.get(cq_name)
    pending = 0 if stopped or queue is None else sum(1 for wl in members if wl.key in queue.shapes)
    out: dict[str, Any] = {
        "conditions": set_condition(_conditions(lq.status if shown is None else shown), {
            "type": "Active", "status": active[0], "reason": active[1], "message": active[2],
            "observedGeneration": lq.metadata.generation}, now),
        "pendingWorkloads": pending,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
    }
    if cq is not None:
        reserving = [wl for wl in members if wl.reserving and wl.cluster_queue == cq_name]
        admitted = [wl for wl in reserving if wl.phase == ADMITTED]
        out["reservingWorkloads"], out["admittedWorkloads"] = len(reserving), len(admitted)
        quotas = in_force(state, cq)
        out["flavorsReservation"] = _flavor_usage(quotas, _sum_usage(reserving), None, state.byte_valued(),
                                                  borrowed=False)
        out["flavorsUsage"] = _flavor_usage(quotas, _sum_usage(admitted), None, state.byte_valued(), borrowed=False)
    return out


def _quota_automation(state: ClusterState, cq: o.ClusterQueue, conditions: list[dict[str, Any]], now: int
                      ) -> list[dict[str, Any]]:
    """``conditions`` with MultiKueueManagerQuotaAutomation's condition set or removed, while its controller runs
    (:mod:`projections.manager_quota`)."""
    if not manager_quota.enabled(state):
        return conditions
    result = manager_quota.outcome(cq, manager_quota.world_of(state))
    if result is None:
        return conditions
    if result.condition is None:
        return [c for c in conditions if c.get("type") != manager_quota.CONDITION]
    status, reason, message = result.condition
    if any(c.get("type") == manager_quota.CONDITION and (c.get("status"), c.get("reason"), c.get("message")) ==
           result.condition for c in conditions):
        return conditions  # Kueue leaves it as it is (its observedGeneration too) while these hold
    return set_condition(conditions, {"type": manager_quota.CONDITION, "status": status, "reason": reason,
                                      "message": message, "observedGeneration": cq.metadata.generation}, now)


def in_force(state: ClusterState, cq: o.ClusterQueue) -> o.ClusterQueueSpec:
    """``cq``'s spec with the resource groups in force: its effective quotas' under DynamicQuotaOrchestration."""
    return effective_quotas.in_force(cq, state.dynamic_quotas).spec


def set_condition(conditions: Iterable[Mapping[str, Any]], cond: Mapping[str, Any], now: int) -> list[dict[str, Any]]:
    """``conditions`` with ``cond`` set: its ``lastTransitionTime`` kept while the status holds, else ``now``."""
    out: list[dict[str, Any]] = []
    placed = False
    for c in conditions:
        if c.get("type") != cond["type"]:
            out.append(dict(c))
            continue
        ltt = c.get("lastTransitionTime") if c.get("status") == cond["status"] else None
        out.append({**cond, "lastTransitionTime": ltt or format_time(now)})
        placed = True
    if not placed:
        out.append({**cond, "lastTransitionTime": format_time(now)})
    return out


def _conditions(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    conds = status.get("conditions")
    return [c for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []


def _sum_usage(workloads: Iterable[WorkloadInfo]) -> dict[str, int]:
    total: dict[str, int] = {}
    for wl in workloads:
        for fr, v in wl.usage.items():
            total[fr] = total.get(fr, 0) + v
    return total


def _nominal(spec: o.ClusterQueueSpec) -> dict[str, int]:
    return {f"{fq.name}/{rq.name}": to_int(rq.name, rq.nominal_quota)
            for rg in spec.resource_groups for fq in rg.flavors for rq in fq.resources}


def _flavor_usage(spec: o.ClusterQueueSpec, usage: Mapping[str, int], nominal: Mapping[str, int] | None,
                  byte_valued: frozenset[str], *, borrowed: bool = True) -> list[dict[str, Any]]:
    """Kueue's per-flavor usage list: group by group, flavor by flavor, covered resources by name, the
    ``byte_valued`` ones (:meth:`ClusterState.byte_valued`) in binary units. ``nominal`` is given for a
    ClusterQueue in a cohort (``borrowed`` is then what exceeds it)."""
    out = []
    for rg in spec.resource_groups:
        for fq in rg.flavors:
            resources = []
            for r in sorted(set(rg.covered_resources)):
                fr = f"{fq.name}/{r}"
                used = usage.get(fr, 0)
                entry: dict[str, Any] = {"name": r, "total": canonical_quantity(r, used, r in byte_valued)}
                if borrowed:
                    over = used - nominal.get(fr, 0) if nominal is not None else 0
                    entry["borrowed"] = canonical_quantity(r, max(0, over), r in byte_valued)
                resources.append(entry)
            out.append({"name": fq.name, "resources": resources})
    return out
