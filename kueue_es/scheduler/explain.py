"""Why a workload is (not) admitted: Kueue's message, then the scheduler's reasoning in depth.

:func:`explain` reads a state, never changes it: it dry-runs the next admission attempt of the workload on the
cycle's copy-on-write overlay (as if the workload were its ClusterQueue's head now) with tracing on, and
reports, as plain data:

* ``kueue`` — the QuotaReserved=False reason and message Kueue shows (or the next attempt's, if none yet);
* ``queue`` — where the workload waits: its position in the ClusterQueue, parked as inadmissible until
  something changes, in backoff, or not queued at all (LocalQueue missing or stopped, workload inactive or
  gated by its ``kueue.x-k8s.io/admission-gated-by`` annotation, or on hold while its StatefulSet is at zero
  replicas); with
  Admission Fair Sharing, its LocalQueue's usage (what orders the queue);
* ``podsReady`` — when waitForPodsReady.blockAdmission holds an attempt that fits: the workloads holding quota
  whose pods are not ready yet, which it waits for;
* ``schedulerWaits`` — when blockAdmission holds another workload: the scheduler runs no attempt at all until
  those pods are ready, so the dry run below is what the attempt after that would find;
* ``maxExecution`` — for a workload with a ``maximumExecutionTimeSeconds``: the time it was admitted before, and
  while admitted the time left and when it runs out (it is then deactivated); for one Kueue deactivated, the
  ``deactivated`` summary says why (the Evicted condition's reason and message);
* ``attempt`` — the dry run's outcome, where its flavor scan starts (``scan``: resumed from the progress the
  previous attempt kept, or at the first flavors, and why), and per pod set and resource group the flavors tried
  in order and what each said;
* ``quota`` — per flavor-resource considered: the request and, from the ClusterQueue up the cohort tree, each
  node's quota, usage, free quota and limits, what is available to the workload, and which node binds;
* ``preemption`` — the policies; the workloads a preemption would evict and why each is allowed; or why none
  can be: each workload that is not a candidate, with the rule that excludes it, and what happens when every
  candidate goes.
"""

from __future__ import annotations

from typing import Any

from events.quantity import exact_quantity
from events.timefmt import format_time
from kueue_es.scheduler import afs, blockadmission, fairsharing
from kueue_es.scheduler.config import SchedulerConfig
from kueue_es.scheduler.cycle import CycleContext, Entry, nominate
from kueue_es.scheduler.flavors import Granular, Mode, resume_scan
from kueue_es.scheduler.preemption import Target, configured_message, policy_allows, uses_any
from kueue_es.scheduler.quota import QuotaNode
from projections import gates
from projections.cluster import ClusterState, max_execution_deadline
from projections.dra import unresolved_reason, workload_problem
from projections.workloads import (
    ADMISSION_GATED,
    ADMISSION_GATED_BY_ANNOTATION,
    ADMITTED,
    CONCURRENT_ADMISSION_PARENT_LABEL,
    FINISHED,
    ON_HOLD,
    PENDING,
    RESERVED,
    WorkloadInfo,
    is_parent,
    on_hold,
)

_REASON_WHY = {
    "InClusterQueue": "lower priority in the same ClusterQueue (withinClusterQueue: {within})",
    "InCohortReclamation": "its ClusterQueue {cq} borrows {frs} that the preemptor's queue may reclaim "
                           "(reclaimWithinCohort: {reclaim})",
    "InCohortReclaimWhileBorrowing": "its ClusterQueue {cq} borrows and its priority is below the preemptor's "
                                     "(borrowWithinCohort: {bwc})",
    "InCohortFairSharing": "its ClusterQueue {cq} borrows {frs} and Fair Sharing's strategy lets the preemptor "
                           "take it",
    "ConfigurablePreemption": "a rule of the PreemptionConfig the preemptor's ClusterQueue names selects it "
                              "(ConfigurablePreemptions)",
}


def explain(state: ClusterState, config: SchedulerConfig, key: str, now: int) -> dict[str, Any] | None:
    """The explanation of workload ``key`` (``namespace/name``), or None when there is no such workload."""
    wl = state.workloads.get(key)
    if wl is None:
        return None
    out: dict[str, Any] = {
        "workload": key,
        "uid": wl.uid,
        "localQueue": f"{wl.namespace}/{wl.queue_name}",
        "clusterQueue": wl.cluster_queue or state.target_cluster_queue(wl) or "",
        "priority": wl.priority,
        "state": wl.phase if wl.active or wl.phase != PENDING else "Inactive",
        "time": format_time(now),
        "offset": state.offset,
    }
    qr = wl.condition("QuotaReserved")
    if qr is not None and qr.status == "False":
        out["kueue"] = {"reason": qr.reason, "message": qr.message, "observed": True}
    if wl.max_execution_seconds is not None:
        out["maxExecution"] = _max_execution(wl, now)
    if wl.phase in (RESERVED, ADMITTED):
        out["summary"] = _holding(wl)
        if config.blocks_admission and wl.key in blockadmission.not_ready(state):
            out["summary"] += ("; its pods are not ready yet, so waitForPodsReady.blockAdmission admits no other "
                               "workload until they are (or it releases its quota)")
        return out
    if wl.phase == FINISHED:
        fin = wl.condition("Finished")
        out["summary"] = f"finished ({fin.reason}: {fin.message})" if fin is not None else "finished"
        return out
    queue, cq = _queue(state, config, wl, now)
    out["queue"] = queue
    if cq is None:
        out.setdefault("kueue", {"reason": queue["reason"], "message": queue["detail"], "observed": False})
        return out
    out["clusterQueue"] = cq
    held = blockadmission.held(state) if config.blocks_admission else None
    if held is not None and held != wl.key and blockadmission.holds_admission(state):
        waiting = blockadmission.not_ready(state)
        out["schedulerWaits"] = {"with": held, "waitingFor": waiting[:_LISTED], "count": len(waiting), "detail": (
            f"waitForPodsReady.blockAdmission holds {held}, and Kueue's scheduler waits with it until the pods of "
            f"{len(waiting)} workload(s) holding quota are ready; no attempt runs for any workload until then, and "
            f"{held} is admitted first")}
    with CycleContext(state, config, now, trace=True) as ctx:
        e = Entry(wl, cq)
        nominate(ctx, e)
        out["attempt"] = _attempt(e)
        if config.blocks_admission and out["attempt"]["outcome"] == "Fit":
            waiting = blockadmission.not_ready(state)
            if waiting:
                out["attempt"].update(reason=blockadmission.reason(config), message=blockadmission.MESSAGE)
                out["podsReady"] = _pods_ready(state, waiting)
        if e.assignment is not None:
            out["attempt"]["scan"] = _scan(ctx, wl, cq)
        if "kueue" not in out:
            out["kueue"] = {"reason": out["attempt"]["reason"], "message": out["attempt"]["message"],
                            "observed": False}
        if e.assignment is not None:
            out["quota"] = _quota(ctx, e)
            if e.assignment.mode == Mode.PREEMPT or e.targets:
                out["preemption"] = _preemption(ctx, e)
    return out


def _max_execution(wl: WorkloadInfo, now: int) -> dict[str, Any]:
    limit, used = wl.max_execution_seconds or 0, wl.accumulated_seconds
    out: dict[str, Any] = {"limitSeconds": limit, "accumulatedSeconds": used}
    runs_out = max_execution_deadline(wl) if wl.phase == ADMITTED else None
    before = f" ({used}s admitted before)" if used else ""
    if runs_out is None:
        out["detail"] = (f"{limit}s{before}; the clock runs while the workload is admitted"
                         if wl.phase != FINISHED else f"{limit}s{before}")
        return out
    left = max(0, runs_out - now)
    out.update(remainingSeconds=left / 1000, runsOutAt=format_time(runs_out))
    if wl.evicted:
        out["detail"] = f"{limit}s{before}: {_seconds(left)} left, but the workload is evicted"
    elif left:
        out["detail"] = (f"{limit}s{before}: {_seconds(left)} left; deactivated at {format_time(runs_out)} "
                         "(DeactivatedDueToMaximumExecutionTimeExceeded) unless it finishes or is evicted first")
    else:
        out["detail"] = f"{limit}s{before}: ran out at {format_time(runs_out)}; deactivated in the next pass"
    return out


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"


def _deactivated(wl: WorkloadInfo) -> str:
    """Why an inactive workload is: what Kueue said when it deactivated it, else its spec."""
    evicted = wl.condition("Evicted")
    if evicted is not None and evicted.status == "True" and evicted.reason.startswith("DeactivatedDueTo"):
        return f"deactivated by Kueue ({evicted.reason}): {evicted.message}"
    return "The workload is deactivated"


def _holding(wl: WorkloadInfo) -> str:
    flavors = sorted({f"{r}={f}" for psa in (wl.admission.pod_set_assignments if wl.admission else [])
                      for r, f in psa.flavors.items()})
    what = "admitted" if wl.phase == ADMITTED else "holding quota (admission checks pending)"
    text = f"{what} in ClusterQueue {wl.cluster_queue}" + (f" with {', '.join(flavors)}" if flavors else "")
    if wl.evicted:
        text += f"; evicted ({wl.evicted}), quota released once its job stops"
    return text


_LISTED = 20
"""How many of the workloads blockAdmission waits for ``explain`` names."""


def _pods_ready(state: ClusterState, waiting: list[str]) -> dict[str, Any]:
    shown = waiting[:_LISTED]
    named = ", ".join(f"{k} ({state.workloads[k].phase}, ClusterQueue {state.workloads[k].cluster_queue})"
                      for k in shown)
    more = f" and {len(waiting) - len(shown)} more" if len(waiting) > len(shown) else ""
    return {"blockAdmission": True, "waitingFor": shown, "count": len(waiting), "detail": (
        f"it fits, but waitForPodsReady.blockAdmission admits nothing while a workload holding quota has pods "
        f"that are not all ready: {len(waiting)} do ({named}{more}); the attempt after the last of them has its pods "
        "ready or no longer holds quota (finished, deleted, deactivated, or evicted and released) admits it first "
        "(if it still fits)")}


def _queue(state: ClusterState, config: SchedulerConfig, wl: WorkloadInfo,
           now: int) -> tuple[dict[str, Any], str | None]:
    lq_key = f"{wl.namespace}/{wl.queue_name}"
    lq = state.local_queues.get(lq_key)
    if not wl.active:
        return {"state": "notQueued", "reason": "Deactivated", "detail": _deactivated(wl)}, None
    if lq is None:
        return {"state": "notQueued", "reason": "Misconfigured", "detail": f"LocalQueue {lq_key} doesn't exist"}, None
    if lq.spec.stopped:
        return {"state": "notQueued", "reason": "Suspended",
                "detail": f"LocalQueue {lq_key} is stopped (stopPolicy {lq.spec.stop_policy})"}, None
    cq = lq.spec.cluster_queue
    if cq not in state.cluster_queues:
        return {"state": "notQueued", "reason": "Misconfigured", "detail": f"ClusterQueue {cq} doesn't exist"}, None
    inactive = state.inactive_reason(cq)
    q = state.queues.get(cq)
    info: dict[str, Any] = {"clusterQueue": cq}
    if inactive is not None:
        info.update(state="queued", reason="Suspended",
                    detail=f"ClusterQueue {cq} is inactive ({inactive}): it admits nothing until that changes")
    if q is None or wl.key not in q.shapes:
        info["state"] = "notQueued"  # whatever its ClusterQueue's state: it is in no queue
        problem = workload_problem(wl.pod_sets)
        if problem:
            info.setdefault("reason", unresolved_reason(config.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY)))
            info.setdefault("detail", f"its DRA claims are not charged ({problem}): not queued until that changes")
        if wl.admission_gate and config.gate(gates.ADMISSION_GATED_BY):
            info.setdefault("reason", ADMISSION_GATED)
            info.setdefault("detail", f"its admission is gated by {wl.admission_gate} (annotation "
                                      f"{ADMISSION_GATED_BY_ANNOTATION}): not queued until that is removed")
        if on_hold(wl):  # shown before a blocking queue, as Kueue's workload controller words it
            info["reason"] = ON_HOLD
            info["detail"] = ("on hold while its StatefulSet is scaled to zero: not queued until the set is scaled "
                              "up again")
        if is_parent(wl) and config.gate(gates.CONCURRENT_ADMISSION):
            info.setdefault("detail", f"a concurrent-admission parent (label {CONCURRENT_ADMISSION_PARENT_LABEL}): "
                                      "not queued itself, its variant Workloads are")
        info.setdefault("reason", "")
        info.setdefault("detail", "not in the ClusterQueue's queue")
        return info, (cq if inactive is None else None)
    if wl.key in q.inadmissible:
        info.setdefault("state", "parked")
        if wl.requeue_at is not None and wl.requeue_at > now:
            info.setdefault("detail", f"in backoff until {format_time(wl.requeue_at)} "
                                      f"(requeue count {wl.requeue_count})")
        else:
            rq = wl.condition("Requeued")
            parked_for = q.no_fit_reason(wl.key)
            if rq is not None and rq.status == "False":
                info.setdefault("detail", f"waiting to be requeued ({rq.reason}: {rq.message})")
            elif parked_for:
                info.setdefault("detail", f"parked with every workload of its scheduling shape after one of them "
                                          f"failed ({parked_for}): tried again when quota is freed or a queue, "
                                          "cohort or flavor changes")
            else:
                info.setdefault("detail", "parked as inadmissible: tried again when quota is freed or a queue, "
                                          "cohort or flavor changes")
    else:
        order = [sk[3] for sk in q.active]
        head = afs.queue_head(state, config, cq, now)
        info.setdefault("state", "active")
        info["position"] = order.index(wl.key) + 1
        info["of"] = len(order)
        info["head"] = head == wl.key
        info.setdefault("detail", "at the head of the queue: tried in the next cycle" if head == wl.key else
                                  f"behind {info['position'] - 1} workload(s) in the queue")
    info.setdefault("reason", "")
    info["parked"] = len(q.inadmissible)
    if afs.enabled_for(config, state, cq):
        info["localQueueUsage"] = afs.lq_usage(state, config, f"{wl.namespace}/{wl.queue_name}", cq, now)
    return info, (cq if inactive is None else None)


def _attempt(e: Entry) -> dict[str, Any]:
    a = e.assignment
    if e.status:
        return {"outcome": "NotNominated", "reason": e.status, "message": e.message}
    assert a is not None
    outcome = {Mode.FIT: "Fit", Mode.PREEMPT: "Preempt", Mode.NO_FIT: "NoFit"}.get(a.mode, "NoFit")
    if a.mode == Mode.PREEMPT and not e.targets:
        outcome = "PreemptNoCandidates"
    if a.mode == Mode.FIT:
        message = "fits: it would be admitted"
        if e.replaced is not None:
            message += f", replacing slice {e.replaced.key}"
        reason = ""
    elif a.mode == Mode.PREEMPT and e.targets:
        message = (a.message + ". " if a.message else "") + f"Pending the preemption of {len(e.targets)} workload(s)"
        reason = "WaitingForPreemptedWorkloads"
    else:
        message, reason = a.message, a.reason
    pod_sets = []
    for ps in a.pod_sets:
        pod_sets.append({
            "name": ps.name,
            "count": ps.count,
            "requests": {r: exact_quantity(r, v) for r, v in sorted(ps.requests.items())},  # exact past int64
            "flavors": dict(sorted(ps.flavors.items())),
            "mode": Granular.NAMES[ps.mode],
            "borrowingLevel": ps.borrow,
            "tried": {group: list(tried) for group, tried in ps.tried.items()},
            "reasons": sorted(ps.reasons),
        })
    return {"outcome": outcome, "reason": reason, "message": message, "borrowingLevel": a.borrow,
            "podSets": pod_sets}


def _scan(ctx: CycleContext, wl: WorkloadInfo, cq: str) -> dict[str, Any]:
    """Where the attempt's flavor scan starts, from the progress the workload keeps (FlavorFungibility's
    PreserveScanProgress): ``state`` resumed, stale, none or off (the ``FlavorFungibility`` gate); ``resumesAt``
    per pod set and resource the flavor the scan starts at."""
    state, scan = ctx.state, wl.scan
    if not ctx.fungibility:
        out: dict[str, Any] = {"state": "off", "detail": (
            "the FlavorFungibility gate is off: each resource group starts at its first flavor")}
        if scan is not None and scan.pending:
            out["detail"] += "; a failed attempt that got a flavor goes back to the queue's heap"
        return out
    if scan is None:
        return {"state": "none", "detail": "no progress kept: each resource group starts at its first flavor"}
    info = state.cq_info(cq)
    at: dict[str, dict[str, str]] = {}
    for ps, tried in zip(wl.pod_sets, scan.tried, strict=False):
        flavors = {}
        for r, i in tried:
            group = info.group_of.get(r) if info is not None else None
            if group is not None and group.flavors:
                flavors[r] = group.flavors[i + 1 if 0 <= i + 1 < len(group.flavors) else 0].name
        if flavors:
            at[ps.name] = flavors
    where = "; ".join(f"pod set {ps}: " + ", ".join(f"{r} at {f}" for r, f in fl.items()) for ps, fl in at.items())
    out = {"recordedInCycle": scan.cycle, "generation": scan.generation,
           "currentGeneration": state.allocatable_generation(cq), "untriedFlavors": scan.pending}
    if resume_scan(state, wl, cq, ctx.preserve_scan) is None:
        out.update(state="stale", detail=(
            f"the progress of cycle {scan.cycle} ({where}) is stale: ClusterQueue {cq}'s allocatable generation grew "
            f"from {scan.generation} to {out['currentGeneration']} since, so each resource group starts at its "
            "first flavor"))
        return out
    out.update(state="resumed", resumesAt=at, detail=(
        f"resumes where the attempt of cycle {scan.cycle} stopped: {where}"
        + ("; while flavors remain untried, a failed attempt goes back to the queue's heap" if scan.pending else
           " (all flavors were tried: a new pass)")))
    return out


def _node_label(n: QuotaNode) -> str:
    return f"ClusterQueue {n.name}" if n.is_cq else f"Cohort {n.name}"


def _binding(node: QuotaNode, fr: str) -> tuple[QuotaNode, str]:
    """Which node's term decides ``node.available(fr)``: a borrowing limit on the way up, or the root's quota."""
    n = node
    while n.parent is not None:
        g = n.guaranteed.get(fr, 0)
        u = n.usage.get(fr, 0)
        bl = n.borrowing_limit.get(fr)
        if bl is not None:
            cap = (n.subtree.get(fr, 0) - g) - max(0, u - g) + bl
            if cap < n.parent._avail(fr):
                return n, "borrowingLimit"
        n = n.parent
    return n, "quota"


def _quota(ctx: CycleContext, e: Entry) -> list[dict[str, Any]]:
    a = e.assignment
    assert a is not None
    node = ctx.tree.cluster_queues[e.cq]
    info = ctx.info(e.cq)
    wanted: dict[str, int] = {}
    for ps in a.pod_sets:
        for r, v in ps.requests.items():
            group = info.group_of.get(r)
            if group is None:
                continue
            chosen = ps.flavors.get(r)
            flavors = [chosen] if chosen else [s.name for s in group.flavors]
            for f in flavors:
                fr = f"{f}/{r}"
                wanted[fr] = wanted.get(fr, 0) + v
    out = []
    for fr in sorted(wanted):
        resource = fr.split("/", 1)[1]
        q = lambda v, r=resource: exact_quantity(r, v)  # noqa: E731
        request = a.usage.get(fr, wanted[fr])
        available = node.available(fr)
        potential = node.potential_available(fr)
        path = []
        for n in node.path():
            quota = n.subtree.get(fr, 0)
            used = n.usage.get(fr, 0)
            row: dict[str, Any] = {"node": _node_label(n), "quota": q(quota), "used": q(used),
                                   "free": q(max(0, quota - used))}
            if fr in n.borrowing_limit:
                row["borrowingLimit"] = q(n.borrowing_limit[fr])
            if fr in n.lending_limit:
                row["lendingLimit"] = q(n.lending_limit[fr])
            path.append(row)
        entry: dict[str, Any] = {"flavorResource": fr, "request": q(request), "available": q(available),
                                 "maximum": q(potential), "path": path}
        if request > potential:
            entry["short"] = q(request - available)
            entry["why"] = (f"the request exceeds the most {_node_label(node)} could ever get ({q(potential)}): "
                            "its quota plus what it may borrow")
        elif request > available:
            binding, kind = _binding(node, fr)
            entry["short"] = q(request - available)
            entry["why"] = (f"{_node_label(binding)}'s borrowing limit caps what it may take from its cohort"
                            if kind == "borrowingLimit" else
                            f"{_node_label(binding)} (the root of the tree) has only {q(max(0, available))} free for it")
        out.append(entry)
    return out


def _preemption(ctx: CycleContext, e: Entry) -> dict[str, Any]:
    state, wl = ctx.state, e.wl
    spec = state.cluster_queues[e.cq].spec
    p = spec.preemption
    bwc = p.borrow_within_cohort
    policies = {"withinClusterQueue": p.within_cluster_queue, "reclaimWithinCohort": p.reclaim_within_cohort,
                "borrowWithinCohort": (bwc.policy + (f" (maxPriorityThreshold {bwc.max_priority_threshold})"
                                                     if bwc.max_priority_threshold is not None else ""))
                if bwc is not None else "Never",
                "fairSharing": ctx.config.fair_sharing_enabled}
    a = e.assignment
    assert a is not None
    needed = a.needs_preemption_frs()
    out: dict[str, Any] = {"policies": policies, "contested": sorted(needed)}
    fmt = {"within": p.within_cluster_queue, "reclaim": p.reclaim_within_cohort,
           "bwc": policies["borrowWithinCohort"]}
    victims = e.targets
    if victims:
        out["targets"] = [_target(t, wl.key, needed, fmt) for t in victims]
        return out
    node = ctx.tree.cluster_queues[e.cq]
    rows, candidates = _candidates(ctx, wl, node, needed)
    out["targets"] = []
    out["considered"] = rows
    out["why"] = _no_targets_why(ctx, e, node, needed, candidates)
    return out


def _target(t: Target, preemptor: str, needed: dict[str, int], fmt: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "workload": t.workload.key, "clusterQueue": t.workload.cluster_queue, "priority": t.workload.priority,
        "reason": t.reason,
        "why": _REASON_WHY.get(t.reason, t.reason).format(cq=t.workload.cluster_queue,
                                                           frs=", ".join(sorted(needed)), **fmt),
    }
    if t.selection is not None:  # ConfigurablePreemptions: as its eviction record and conditions will say
        row["underlyingCause"] = t.selection.config
        row["message"] = configured_message(preemptor, *t.selection)
    return row


def _candidates(ctx: CycleContext, wl: WorkloadInfo, node: QuotaNode,
                needed: dict[str, int]) -> tuple[list[dict[str, Any]], list[WorkloadInfo]]:
    state = ctx.state
    p = state.cluster_queues[node.name].spec.preemption
    rows: list[dict[str, Any]] = []
    candidates: list[WorkloadInfo] = []
    _consider(ctx, wl, node.name, needed, p.within_cluster_queue, "withinClusterQueue", p.within_cluster_queue,
              rows, candidates)
    if node.parent is None:
        return rows, candidates
    others = [n for n in fairsharing._subtree_cluster_queues(node.root()) if n is not node]
    for cq in others:
        reserving = ctx.reserving_in(cq.name)
        if not reserving:
            continue
        borrowing = [fr for fr in sorted(needed) if cq.borrowing(fr)]
        if p.reclaim_within_cohort == "Never":
            rows.append({"clusterQueue": cq.name, "candidate": False, "why": "reclaimWithinCohort is Never"})
            continue
        if not borrowing:
            q = exact_quantity  # as the other rows (a ClusterQueue not borrowing holds no more than MaxInt64)
            used = ", ".join(f"{fr} {q(fr.split('/', 1)[1], cq.usage.get(fr, 0))} of "
                             f"{q(fr.split('/', 1)[1], cq.subtree.get(fr, 0))}" for fr in sorted(needed))
            rows.append({"clusterQueue": cq.name, "candidate": False,
                         "why": f"not borrowing what is contested ({used}): its workloads are not reclaimable"})
            continue
        _consider(ctx, wl, cq.name, needed, p.reclaim_within_cohort, "reclaimWithinCohort",
                  f"reclaimWithinCohort {p.reclaim_within_cohort}", rows, candidates)
    return rows, candidates


def _consider(ctx: CycleContext, wl: WorkloadInfo, cq: str, needed: dict[str, int], policy: str, field: str,
              label: str, rows: list[dict[str, Any]], candidates: list[WorkloadInfo]) -> None:
    """A row for each workload holding quota in ClusterQueue ``cq`` (the preemptor aside): whether the preemption
    policy ``policy`` (the ClusterQueue's ``field``, ``label`` in messages) makes it a candidate, and why not; the
    candidates are added to ``candidates``."""
    frs = ", ".join(sorted(needed))
    for w in ctx.reserving_in(cq):
        if w.key == wl.key:
            continue
        if not uses_any(w, needed):
            why = f"uses none of {frs}"
        elif policy == "Never":
            why = f"{field} is Never"
        elif not policy_allows(policy, wl, w, ctx.order):
            why = f"priority {w.priority} is not below {wl.priority} ({label})"
        else:
            why = ""
            candidates.append(w)
        rows.append({"workload": w.key, "clusterQueue": cq, "priority": w.priority,
                     "candidate": not why, "why": why or "candidate"})


def _no_targets_why(ctx: CycleContext, e: Entry, node: QuotaNode, needed: dict[str, int],
                    candidates: list[WorkloadInfo]) -> str:
    a = e.assignment
    assert a is not None
    if not candidates:
        return "no workload may be preempted for it"
    tree = ctx.tree
    for w in candidates:
        tree.charge(w.cluster_queue, w.usage, -1)
    try:
        fits = all(v <= node.available(fr) for fr, v in a.usage.items())
        within = all(node.usage.get(fr, 0) + v <= node.nominal.get(fr, 0) for fr, v in a.usage.items())
    finally:
        for w in candidates:
            tree.charge(w.cluster_queue, w.usage, 1)
    n = len(candidates)
    if not fits:
        return f"even with all {n} candidate(s) preempted it would not fit"
    if ctx.config.fair_sharing_enabled:
        mine = fairsharing.drs(ctx, node, a.usage)
        return (f"the {n} candidate(s) would make room, but Fair Sharing's preemption strategies refuse them: "
                f"the preemptor's share with the workload would be {mine.weighted:g}, not below the shares of the "
                "queues it would preempt from")
    if not within:
        return (f"the {n} candidate(s) would make room only if it borrowed, and reclaiming while borrowing needs "
                "borrowWithinCohort (and candidates below the preemptor's priority)")
    return f"the {n} candidate(s) would make room, but no order of them passes the classical preemption rules"
