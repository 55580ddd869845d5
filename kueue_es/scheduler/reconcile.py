"""What Kueue's workload controller does on its own, driven by time and facts in the log.

* an evicted workload whose job has stopped gives its quota back and is requeued (Requeued condition: True after
  a preemption or node failures, otherwise False; always False, under SkipReassignmentForPodOwnedWorkloads, for a
  workload owned by a single Pod: it goes with its pod, whose owner makes a new one);
* a requeue backoff that has run out sets Requeued=True/BackoffFinished (of an active workload only); a passed
  ``requeueAt`` of an active workload waiting pending with no such Requeued=False (one a late Retry raised) is
  cleared alone (:class:`events.schema.RequeueAtCleared`, the newest Kueue; the count kept);
* an inactive workload loses its ``status.requeueState`` (:class:`events.schema.RequeueStateCleared`; Kueue
  #2219, #7734): one not evicted yet with its deactivation's eviction, one that shows Evicted=True already (a
  backoff it waits out, an eviction whose job still runs) alone, not evicted again. Reactivated, it owes no
  backoff (PodsReadyTimeout or AdmissionCheck with none left: Requeued=True BackoffFinished at once) and its
  requeuing limit counts from zero;
* an admitted workload whose pods are not ready within waitForPodsReady's timeout is evicted with backoff;
* admission checks: all listed checks Ready admits; a Retry check evicts (reason AdmissionCheck), first raising
  ``requeueState.requeueAt`` to the latest lastTransitionTime + requeueAfterSeconds of the Retry checks; a
  Rejected check deactivates (Evicted DeactivatedDueToAdmissionCheck), also a workload already being evicted
  (Kueue v0.20, #14309: its first eviction's condition stays), where a Retry is not evicted again. A Retry
  check that reports after the eviction, or while the workload waits pending, raises ``requeueAt`` all the
  same (:func:`late_retries`, KEP-3258; the count left alone): not requeued before it. Kueue passes the
  rejection through a DeactivationTarget condition and ``spec.active=false`` before it evicts, because those are
  separate API writes; here the intent and its outcome are one decision, with Kueue's final reason and message.
  The checks' verdicts come before the queues' stop policies, as in Kueue's controller;
* the ProvisioningRequest check controller (:mod:`kueue_es.scheduler.provisioning`) for the workloads holding
  quota, and the clean-up of the requests of finished ones and (CleanupProvisioningRequestsOnEviction) evicted ones;
* under the MultiKueue gate, the MultiKueue check controller of a manager (:mod:`kueue_es.scheduler.multikueue`):
  nominations, the worker that runs the workload, Retry on a remote eviction or a lost worker (its clock: the
  ``workerLostTimeout`` after the worker was observed unreachable), the local finish when the remote one finishes;
  and, for a pending workload too, its check Rejected when MultiKueue cannot run its owner (which keeps it from
  reserving: the scheduler skips a workload with a Rejected check, and Kueue's workload controller deactivates
  only one holding quota);
* a failed node under a TAS placement is listed for replacement, or evicts the workload (NodeFailures); with
  TASReplaceNodeOnPodTermination off, a node that is not Ready fails once it has been so for 30 s;
* an admitted workload whose ``maximumExecutionTimeSeconds`` has run out — the time it was admitted before
  (``accumulatedPastExecutionTimeSeconds``) plus the time since its Admitted condition turned True — is
  deactivated (Evicted and Requeued DeactivatedDueToMaximumExecutionTimeExceeded, quota released): Kueue sets a
  DeactivationTarget, clears the accumulated time, then sets ``spec.active=false`` and evicts, three writes that
  are one decision here; the fold adds the last run back as the quota goes, as Kueue does once the job stopped.
  An evicted workload still holding quota is left to its eviction;
* a deactivated workload holding quota is evicted and its quota released at once (the cache stops counting it);
* HoldAndDrain evicts what a stopped LocalQueue or ClusterQueue admitted (LocalQueueStopped, ClusterQueueStopped);
  a workload holding quota but not admitted yet gives it back when its LocalQueue, then its ClusterQueue, is
  stopped (any stopPolicy but None), missing or being deleted (:func:`reserved_queue_blocker`, Kueue's
  ``UnsetQuotaReservationWithCondition``: no eviction, no Requeued condition);
* a workload parked by Requeued=False is requeued when its cause goes away: reactivation (Reactivated), its
  ClusterQueue or LocalQueue restarted (ClusterQueueRestarted, LocalQueueRestarted);
* a pending workload shows what blocks its queue (QuotaReserved=False: Deactivated, LocalQueue or ClusterQueue
  missing — Misconfigured — or stopped/inactive — Suspended) or keeps it from being admissible (Misconfigured:
  its namespace, or its pod templates' resources, :mod:`kueue_es.scheduler.admissibility`; then, under the
  AdmissionGatedBy gate, its ``kueue.x-k8s.io/admission-gated-by`` annotation: AdmissionGated "Admission is
  gated by: <value>", which the fold keeps out of its queue), and PendingEvaluation once that is gone (or in
  place of the legacy reason Pending, which a Kueue or kueue-es without UnadmittedWorkloadsObservability
  wrote: none of the scheduler's reasons, so Kueue's granular resolver does not keep it) — for a cleared
  admission gate, with Kueue's "AdmissionGatedBy cleared, waiting for quota reservation", written
  before any other blocker as Kueue's controller does — unless it is parked with an equivalent workload that
  failed for want of room (SchedulingEquivalenceHashing), which it then shows: that workload's reason, with
  Kueue's "Bypassed scheduling evaluation" message. Kueue's controller says so only of a workload whose
  QuotaReserved reason is empty, PendingEvaluation, Pending, Deactivated or Suspended (not of one that has none
  yet: that waits for UnadmittedWorkloadsExplicitStatus, off), and only with UnadmittedWorkloadsObservability on.
  With that gate off Kueue's controller keeps to its legacy condition: a missing or stopped queue (or uncharged DRA
  claims) as Inadmissible with the same message, for a deactivated workload too, nothing else but AdmissionGated,
  and the cleared gate's
  PendingEvaluation as Pending (:func:`_legacy_blocker`);
* under MultiKueueOrchestratedPreemption, a Workload's ``status.preemptionGates`` list exactly its spec's gates, one
  not listed yet added ``Closed`` (:mod:`kueue_es.scheduler.gate_states`), before any other rule of the pass;
* objectRetentionPolicies: a finished workload is deleted ``afterFinished`` after Finished turned True, the Job
  of one Kueue deactivated ``afterDeactivatedByKueue`` after Evicted turned True (RetentionExpired; the
  connector deletes).

A pass does not look at every workload: a rule that found nothing to do for a workload finds nothing again
until the workload changes, something the rule reads about it changes, time reaches one of its clocks, or the
configuration changes (the first pass under a new one looks at every workload). The
projection keeps the workloads touched since the last pass (``ClusterState.touched``, or ``touched_all``) and
indexes the clocks by time (requeue backoffs, waitForPodsReady, maximum execution times, retention, the
backoff of a refused ProvisioningRequest creation; and the
wait on nodes that are not Ready, whose end counts as a change of the node), so a pass
costs what changed and what is due, and decides exactly what a pass over every workload decides (``full=True``,
which the property tests compare it with). What a rule does with the configuration is read off those clocks at
each pass (waitForPodsReady's timeout, the retention periods), so what the touched set says holds for any
configuration. A clock holds only workloads its rule acts on once it runs out, so a deadline that has passed is
never one the scheduler would be woken for in vain.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from events import objects as o
from events import schema as ev
from events.timefmt import parse_time
from kueue_es.scheduler import (
    afs,
    gate_states,
    multikueue,
    multinode,
    pods_ready_timeouts,
    provisioning,
    variant_gates,
    variants,
)
from kueue_es.scheduler.admissibility import MISCONFIGURED, inadmissible
from kueue_es.scheduler.config import DEFAULT_STEP_SIZE, SchedulerConfig, parse_duration
from kueue_es.scheduler.nodefailure import next_wait_end, node_failure_decisions
from projections import gates
from projections.admissionchecks import MULTIKUEUE_CONTROLLER
from projections.cluster import MAX_EXECUTION_EXCEEDED, ClusterState, max_execution_deadline
from projections.dra import INADMISSIBLE as DRA_INADMISSIBLE
from projections.dra import RESOLVED as DRA_RESOLVED
from projections.dra import RESOLVED_MESSAGE as DRA_RESOLVED_MESSAGE
from projections.dra import UNRESOLVED as DRA_UNRESOLVED
from projections.dra import requeued_message, unresolved_reason, workload_problem
from projections.secondpass import delayed_pod_sets
from projections.variants import charges_nothing
from projections.workloads import (
    ADMISSION_GATE_CLEARED,
    ADMISSION_GATED,
    ADMISSION_GATED_PREFIX,
    ADMITTED,
    BACKOFF_REASONS,
    BYPASSED,
    DEACTIVATION_TARGET,
    FINISHED,
    LEGACY_INADMISSIBLE,
    LEGACY_PENDING,
    PENDING,
    PENDING_EVALUATION,
    QUEUE_BLOCKERS,
    RESERVED,
    WorkloadInfo,
    on_hold,
    unadmitted_reason,
)

REQUEUE_TRUE_REASONS = frozenset({"Preempted", "NodeFailures"})
SHOWS_BYPASS = frozenset({"", "PendingEvaluation", "Pending", "Deactivated", "Suspended"})
"""QuotaReserved reasons the workload controller replaces with an equivalent workload's failure: what it wrote
itself for a workload waiting in its queue, or for one whose block is gone (Kueue's
``shouldCheckEquivalenceHash``). Not the scheduler's own reasons, whose messages say more, nor Misconfigured."""
MAX_EXECUTION_MESSAGE = "The workload is deactivated due to exceeding the maximum execution time"
"""Evicted and Requeued's message when the maximum execution time ran out: Kueue's deactivation message with
its DeactivationTarget's ("exceeding the maximum execution time")."""


def backoff_ms(config: SchedulerConfig, count: int) -> int:
    """waitForPodsReady backoff for the ``count``-th requeue: base·2^(count−1), capped (Kueue's jitter is left out)."""
    rs = config.pods_ready.requeuing_strategy
    seconds = min(rs.backoff_base_seconds * 2 ** max(0, count - 1), rs.backoff_max_seconds)
    return seconds * 1000


def retention_deadline(config: SchedulerConfig, wl: WorkloadInfo) -> tuple[int, str, str] | None:
    """When ``wl``'s retention runs out under ``config``: (time ms, what to delete, why), or None (kept)."""
    after_finished, after_deactivated = config.workload_retention
    if wl.phase == FINISHED:
        c = wl.condition("Finished")
        if after_finished is None or c is None or not c.last_transition_time:
            return None
        return (parse_time(c.last_transition_time) + after_finished, "Workload",
                "Deleted finished workload due to elapsed retention")
    c = wl.condition("Evicted")
    if after_deactivated is None or c is None or not c.last_transition_time:
        return None
    return (parse_time(c.last_transition_time) + after_deactivated, "Job",
            "Deleted job: deactivation retention period expired")


def gate_timeout(config: SchedulerConfig) -> int | None:
    """MultiKueueOrchestratedPreemption's single-cluster preemption timeout in ms (None: the gate is off)."""
    if not config.gate(gates.MULTIKUEUE_ORCHESTRATED_PREEMPTION):
        return None
    return parse_duration(config.multi_kueue.single_cluster_preemption_timeout)


def dispatcher_of(config: SchedulerConfig) -> multikueue.Dispatcher:
    """The MultiKueue dispatcher the configuration names, with its step (``stepSize`` read only under
    MultiKueueIncrementalDispatcherConfig) and order (MultiKueueIncrementalDispatcherRespectConfigOrder)."""
    mk = config.multi_kueue
    incremental = mk.incremental_dispatcher_config
    step = DEFAULT_STEP_SIZE
    if (config.gate(gates.MULTIKUEUE_INCREMENTAL_DISPATCHER_CONFIG) and incremental is not None
            and incremental.step_size is not None):
        step = incremental.step_size
    return multikueue.Dispatcher(mk.dispatcher_name, step,
                                 config.gate(gates.MULTIKUEUE_INCREMENTAL_DISPATCHER_RESPECT_CONFIG_ORDER))


def reconcile(state: ClusterState, config: SchedulerConfig, now: int, cycle: int, *,
              full: bool = False, evict_deactivated_pending: bool = True) -> list[ev.Decision]:
    """The controller rules' decisions now. ``full`` looks at every workload and leaves the record of what
    earlier passes looked at alone; otherwise the touched workloads and the clocks that ran out are looked at,
    and the touched ones nothing was decided for are forgotten (:meth:`ClusterState.looked_at`).
    ``evict_deactivated_pending=False``: the rules as kueue-es had them before it evicted a deactivated pending
    workload (for ``replay --verify`` of logs written then)."""
    base = {"time": now, "cycle": cycle, "input": state.offset}
    out: list[ev.Decision] = []
    wls = state.workloads
    replaces_nodes = config.gate(gates.TAS_FAILED_NODE_REPLACEMENT)  # Kueue runs no node controller without it
    node_taints = config.gate(gates.TAS_REPLACE_NODE_ON_NODE_TAINTS)
    on_pod_termination = config.gate(gates.TAS_REPLACE_NODE_ON_POD_TERMINATION)
    fixed_time = config.gate(gates.TAS_REPLACE_NODE_DUE_TO_NOT_READY_OVER_FIXED_TIME)
    skip_reassignment = config.gate(gates.SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS)
    multiple_failed = config.gate(gates.TAS_REPLACE_MULTIPLE_FAILED_NODES)
    everything = full or state.touched_all or _node_wait_ended(state, now) or _new_configuration(state, config)
    touched = None if everything else state.touched
    runs_multikueue = config.gate(gates.MULTIKUEUE)
    worker_lost_ms = parse_duration(config.multi_kueue.worker_lost_timeout)
    dispatcher = dispatcher_of(config)
    adapters = multikueue.adapters_in_force(config)
    gate_timeout_ms = gate_timeout(config)
    if touched is not None and runs_multikueue:
        woken = [key for t, key in multikueue.lost_deadlines(state, worker_lost_ms) if t <= now]
        woken += [key for t, key in multikueue.round_deadlines(state, dispatcher) if t <= now]
        if gate_timeout_ms is not None:
            woken += [key for t, key in multikueue.gate_deadlines(state, gate_timeout_ms) if t <= now]
        woken += multikueue.group_touched(state, touched)  # a group's others look again when one moves
        if woken:
            touched = {**touched, **dict.fromkeys(woken)}
    if config.gate(gates.MULTIKUEUE_ORCHESTRATED_PREEMPTION):  # first, as Kueue's workload controller syncs them
        out.extend(gate_states.sync_decisions(state, touched, base))
    raised = late_retries(state, touched, now, base)
    out.extend(raised)
    # the workload controller's own rules (the backoff, holding and pending ones) look at these at the next
    # pass; the job reconciler's release, the ProvisioningRequest controller and the rest act on them now
    later = {d.key for d in raised}
    for key in sorted(state.awaiting_release):
        wl = wls[key]
        evicted = wl.condition("Evicted")
        reason = wl.evicted or "Evicted"
        requeued = reason in REQUEUE_TRUE_REASONS and not (skip_reassignment and wl.pod_owned)
        out.append(ev.WorkloadRequeued(
            key=key, uid=wl.uid, status=requeued, reason=reason,
            message=evicted.message if evicted is not None else "", release=True, **base))
    out.extend(provisioning.cleanup(state, base, touched,
                                    on_eviction=config.gate(gates.CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION)))
    for key in sorted(state.backoff) if everything else sorted(state.backoff_due.due(now)):
        wl = wls.get(key)
        if (wl is None or wl.requeue_at is None or wl.requeue_at > now or wl.reserving or not wl.active
                or key in later):
            continue  # (an inactive one's backoff is cleared instead: :func:`_keeps_requeue_state`)
        out.append(_requeue_at_passed(wl, base))
    holding_keys = None if touched is None else _holding_keys(state, config, now, touched)
    holding = state.reserving if holding_keys is None else _holding(state, holding_keys)
    parents = _admitted_parents(state, state.variants_of if holding_keys is None else holding_keys)
    observability = config.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY)
    for cq in sorted(holding.keys() | parents.keys()):
        cq_obj = state.cluster_queues.get(cq)
        drain = cq_obj is not None and cq_obj.spec.stop_policy == "HoldAndDrain"
        for key in sorted([*holding.get(cq, ()), *parents.get(cq, ())]):
            if key in later:
                continue
            wl = wls[key]
            if wl.evicted:
                if wl.active and _targeted(wl):  # already being evicted: Kueue deactivates it all the same
                    out.append(_deactivation(wl, base))
                elif wl.active and _rejected(wl):  # Kueue v0.20 (#14309): a rejection still deactivates
                    out.append(_rejection(wl, base))
                elif _keeps_requeue_state(wl):  # deactivated during its eviction: not evicted again
                    out.append(ev.RequeueStateCleared(key=key, uid=wl.uid, **base))
                elif wl.phase == RESERVED and key not in state.awaiting_release:
                    out.extend(_unset_evicted(state, wl, observability, base))
                continue
            if not wl.active or _targeted(wl):  # (Kueue's controller deactivates a target before anything else)
                out.append(_deactivation(wl, base))
                continue
            if wl.check_states or key in state.requests_of:
                checked = provisioning.reconcile_workload(state, wl, base)
                if checked:  # one controller at a time acts on a workload; the rest waits for the next pass
                    out.extend(checked)
                    continue
            if runs_multikueue and wl.check_states:
                dispatched = multikueue.reconcile_workload(state, wl, base, now, worker_lost_ms, dispatcher,
                                                          adapters, gate_timeout_ms)
                if dispatched:
                    out.extend(dispatched)
                    continue
            # Kueue's order: the checks' verdicts first, then the queues' stop policies (reconcileCheckBasedEviction
            # before reconcileOn{Local,Cluster}QueueActiveState)
            states = wl.check_states
            if _rejected(wl):
                out.append(_rejection(wl, base))
                continue
            retry = [s for s in states.values() if s.state == "Retry"]
            if retry:
                out.append(ev.WorkloadEvicted(
                    key=key, uid=wl.uid, reason="AdmissionCheck",
                    message=f"Evicted due to {checks_message(retry, 'Retry')}",
                    requeue_at=retry_requeue_at(wl, retry, now), requeue_count=wl.requeue_count, **base))
                continue
            if wl.phase == RESERVED:
                ready = wl.admission is not None and not delayed_pod_sets(wl.admission)
                if ready and all(s.state == "Ready" for s in states.values()):
                    out.append(ev.WorkloadAdmitted(key=key, uid=wl.uid, message="The workload is admitted", **base))
                    continue
                unset = reserved_queue_blocker(state, wl, observability)
                if unset is not None:
                    out.append(ev.QuotaReservationUnset(key=key, uid=wl.uid, reason=unset[0], message=unset[1],
                                                        **base))
                    continue
                if ready:
                    continue
            lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
            if lq is not None and lq.spec.stop_policy == "HoldAndDrain" and wl.phase == ADMITTED:
                out.append(ev.WorkloadEvicted(key=key, uid=wl.uid, reason="LocalQueueStopped",
                                              message="The LocalQueue is stopped", **base))
                continue
            if drain and wl.phase == ADMITTED:
                out.append(ev.WorkloadEvicted(key=key, uid=wl.uid, reason="ClusterQueueStopped",
                                              message="The ClusterQueue is stopped", **base))
                continue
            if state.nodes_seen and wl.phase == ADMITTED and replaces_nodes and key not in parents.get(cq, ()):
                kept = wl.kept_nodes if skip_reassignment and wl.pod_owned else ()
                failures = node_failure_decisions(state, wl, base, now, taints=node_taints,
                                                  on_pod_termination=on_pod_termination,
                                                  fixed_time=fixed_time, kept=kept,
                                                  threshold=multinode.threshold(wl, multiple_failed))
                if failures:
                    out.extend(failures)
                    continue
            timed = pods_ready_timeouts.deadline(config, wl)
            if timed is not None and now >= timed[0]:
                count = wl.requeue_count + 1
                limit = config.pods_ready.requeuing_strategy.backoff_limit_count
                if limit is not None and count > limit:
                    out.append(ev.WorkloadDeactivated(
                        key=key, uid=wl.uid, reason="DeactivatedDueToRequeuingLimitExceeded",
                        message="The workload is deactivated due to exceeding the maximum number of re-queuing retries",
                        **base))
                else:
                    out.append(ev.WorkloadEvicted(
                        key=key, uid=wl.uid, reason="PodsReadyTimeout", underlying_cause=timed[1],
                        message=f"Exceeded the PodsReady timeout {key}", requeue_count=count,
                        requeue_at=now + backoff_ms(config, count), **base))
                continue
            runs_out = max_execution_deadline(wl) if wl.phase == ADMITTED else None
            if runs_out is not None and now >= runs_out:
                out.append(ev.WorkloadDeactivated(key=key, uid=wl.uid, reason=MAX_EXECUTION_EXCEEDED,
                                                  message=MAX_EXECUTION_MESSAGE, **base))
    if runs_multikueue:
        for key in _pending_multikueue(state, touched):
            out.extend(multikueue.reject_unmanaged(state, wls[key], base, adapters))
    if config.gate(gates.CONCURRENT_ADMISSION):
        if touched is not None:  # a parent whose next variant's gate may open now is looked at again
            woken = [key for t, key in variant_gates.deadlines(state) if t <= now]
            if woken:
                touched = {**touched, **dict.fromkeys(woken)}
        out.extend(variants.reconcile_families(state, base, touched,
                                               short_names=config.gate(gates.SHORT_WORKLOAD_NAMES)))
    bypass = config.gate(gates.SCHEDULING_EQUIVALENCE_HASHING) and config.gate(
        gates.UNADMITTED_WORKLOADS_OBSERVABILITY)
    _pending_workloads(state, out, base, touched, gated_by=config.gate(gates.ADMISSION_GATED_BY), bypass=bypass,
                       explicit=config.gate(gates.UNADMITTED_WORKLOADS_EXPLICIT_STATUS),
                       observability=config.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY),
                       evict_deactivated=evict_deactivated_pending, later=later)
    if config.object_retention_policies is not None:
        for key in sorted(state.retained) if everything else _retention_due(state, config, now):
            wl = wls[key]
            due = retention_deadline(config, wl)
            if due is not None and due[0] <= now:
                out.append(ev.RetentionExpired(key=key, uid=wl.uid, target=due[1], message=due[2], **base))
    if not full:
        state.looked_at({d.key for d in out}, everything)
        state.derived[_JUDGED_UNDER] = config
    return out


_JUDGED_UNDER = "reconcile-config"


def _new_configuration(state: ClusterState, config: SchedulerConfig) -> bool:
    """The last incremental pass ran under another configuration (or none ran since the state was built): what
    it left untouched was judged by other rules — a node-failure gate, say — so this pass looks at everything."""
    last = state.derived.get(_JUDGED_UNDER)
    return last is not config and last != config


def _node_wait_ended(state: ClusterState, now: int) -> bool:
    """Some node's wait ends by ``now`` though the log's time has not reached it (a pass asked about a later
    time than the log's): the fold has not marked that change yet, so the pass looks at every workload."""
    ends = state.node_waits.first()
    return ends is not None and ends <= now


def _holding_keys(state: ClusterState, config: SchedulerConfig, now: int, touched: dict[str, None]
                  ) -> Iterable[str]:
    """The workloads a pass looks at for the rules of those holding quota: the touched ones, and those whose
    waitForPodsReady timeout or maximum execution time has run out."""
    keys: Iterable[str] = touched
    timed_out = pods_ready_timeouts.due(state, config, now)
    if timed_out:
        keys = {*keys, *timed_out}
    if len(state.max_execution_clock):
        keys = {*keys, *state.max_execution_clock.due(now)}
    return keys


def _holding(state: ClusterState, keys: Iterable[str]) -> dict[str, list[str]]:
    """ClusterQueue -> the workloads among ``keys`` holding its quota."""
    out: dict[str, list[str]] = {}
    wls, reserving = state.workloads, state.reserving
    for key in keys:
        wl = wls.get(key)
        if wl is not None and wl.reserving and key in reserving.get(wl.cluster_queue, ()):
            out.setdefault(wl.cluster_queue, []).append(key)
    return out


def _admitted_parents(state: ClusterState, keys: Iterable[str]) -> dict[str, list[str]]:
    """ClusterQueue -> the ``ConcurrentAdmission`` parents among ``keys`` shown admitted through a variant. They
    charge nothing, so they are no ClusterQueue's holders, but Kueue's workload controller keys its rules for a
    workload holding quota on the reservation the parent shows: it deactivates and evicts it, evicts it when its
    queue is drained, on its waitForPodsReady timeout and its maximum execution time (only the admission checks'
    rules, and the node failures of a topology the variant holds, skip a parent)."""
    out: dict[str, list[str]] = {}
    wls = state.workloads
    for key in keys:
        wl = wls.get(key)
        if wl is not None and wl.phase == ADMITTED and charges_nothing(wl):
            out.setdefault(wl.cluster_queue, []).append(key)
    return out


def _pending_multikueue(state: ClusterState, touched: dict[str, None] | None) -> list[str]:
    """The pending workloads with checks a pass shows the MultiKueue controller (the touched ones, or all), sorted;
    none unless some AdmissionCheck is MultiKueue's."""
    if not any(ac.spec.controller_name == MULTIKUEUE_CONTROLLER for ac in state.admission_checks.values()):
        return []
    wls = state.workloads
    keys = wls if touched is None else touched
    return sorted(k for k in keys if (wl := wls.get(k)) is not None and wl.phase == PENDING and wl.check_states)


def _retention_due(state: ClusterState, config: SchedulerConfig, now: int) -> list[str]:
    """The retained workloads whose retention has run out, in key order."""
    after_finished, after_deactivated = config.workload_retention
    keys = []
    if after_finished is not None:
        keys.extend(state.finished_clock.due(now - after_finished))
    if after_deactivated is not None:
        keys.extend(state.deactivated_clock.due(now - after_deactivated))
    return sorted(keys)


def _rejected(wl: WorkloadInfo) -> list[o.AdmissionCheckState]:
    return [s for s in wl.check_states.values() if s.state == "Rejected"] if wl.check_states else []


def _targeted(wl: WorkloadInfo) -> bool:
    """The Workload shows DeactivationTarget=True (the fold holds it only while the workload is active)."""
    c = wl.condition(DEACTIVATION_TARGET) if wl.conditions else None
    return c is not None and c.status == "True"


def _deactivation(wl: WorkloadInfo, base: dict) -> ev.WorkloadDeactivated:
    """Kueue's workload controller deactivating ``wl`` (its spec.active turned false, or a DeactivationTarget it
    acts on first by turning it false): the eviction's reason is ``Deactivated``, with ``DueTo`` and the target's
    reason appended while one is shown, and its message says the target's message after "due to"."""
    target = wl.condition(DEACTIVATION_TARGET) if wl.conditions else None
    if target is None:
        return ev.WorkloadDeactivated(key=wl.key, uid=wl.uid, reason="Deactivated",
                                      message="The workload is deactivated", **base)
    return ev.WorkloadDeactivated(key=wl.key, uid=wl.uid, reason=f"DeactivatedDueTo{target.reason}",
                                  message=f"The workload is deactivated due to {target.message}", **base)


def _rejection(wl: WorkloadInfo, base: dict) -> ev.WorkloadDeactivated:
    """A Rejected check deactivates the workload (DeactivatedDueToAdmissionCheck)."""
    message = f"The workload is deactivated due to {checks_message(_rejected(wl), 'Rejected')}"
    return ev.WorkloadDeactivated(key=wl.key, uid=wl.uid, reason="DeactivatedDueToAdmissionCheck", message=message,
                                  **base)


def _unset_evicted(state: ClusterState, wl: WorkloadInfo, observability: bool, base: dict) -> list[ev.Decision]:
    """A workload being evicted before it was admitted, its pods not gone yet, whose queue stops or goes: Kueue's
    workload controller skips no evicted workload on its way to the queues' states, and takes the quota back from
    one that is not admitted as from any other (:func:`reserved_queue_blocker`). Its Evicted condition stays, and no
    Requeued condition is written: the job reconciler writes one only with the release it no longer has to make.
    One whose Job already stopped is released by that (this pass's ``WorkloadRequeued``), as the job reconciler
    would first."""
    unset = reserved_queue_blocker(state, wl, observability)
    if unset is None:
        return []
    return [ev.QuotaReservationUnset(key=wl.key, uid=wl.uid, reason=unset[0], message=unset[1], **base)]


def reserved_queue_blocker(state: ClusterState, wl: WorkloadInfo, observability: bool) -> tuple[str, str] | None:
    """Why the workload controller takes back the quota of a workload that holds it but is not admitted (Kueue's
    ``reconcileOnLocalQueueActiveState`` then ``reconcileOnClusterQueueActiveState``): its LocalQueue, then that
    queue's ClusterQueue, missing or being deleted (Misconfigured, "... is terminating or missing") or with any
    stopPolicy but None (Suspended, "... is stopped"); both Inadmissible with UnadmittedWorkloadsObservability
    off. None: its queues take it."""
    lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if lq is None or lq.metadata.deletion_timestamp:
        return (_granular("Misconfigured", observability),
                f"LocalQueue {wl.queue_name} is terminating or missing")
    if lq.spec.stopped:
        return _granular("Suspended", observability), f"LocalQueue {wl.queue_name} is stopped"
    name = lq.spec.cluster_queue
    cq = state.cluster_queues.get(name)
    if cq is None or cq.metadata.deletion_timestamp:
        return _granular("Misconfigured", observability), f"ClusterQueue {name} is terminating or missing"
    if cq.spec.stopped:
        return _granular("Suspended", observability), f"ClusterQueue {name} is stopped"
    return None


def _requeue_at_passed(wl: WorkloadInfo, base: dict) -> ev.Decision:
    """What the workload controller does once the ``requeueAt`` of an active workload that holds no quota has
    passed: it clears that time (the newest Kueue's "Pending workload requeued after backoff", the count left
    alone) and, at its next reconcile, turns a Requeued=False for a backoff (PodsReadyTimeout, AdmissionCheck)
    True BackoffFinished, one decision here that clears the time too; with no such condition (a requeueAt
    raised by a late Retry on a workload never evicted, or one whose Requeued another rule set meanwhile) it
    writes no condition."""
    requeued = wl.condition("Requeued")
    if requeued is not None and requeued.status == "False" and requeued.reason in BACKOFF_REASONS:
        return ev.WorkloadRequeued(key=wl.key, uid=wl.uid, status=True, reason="BackoffFinished",
                                   message="The workload backoff was finished", **base)
    return ev.RequeueAtCleared(key=wl.key, uid=wl.uid, **base)


def _granular(reason: str, observability: bool) -> str:
    return reason if observability else LEGACY_INADMISSIBLE


def checks_message(checks: list[o.AdmissionCheckState], state: str) -> str:
    """Kueue's wording: ``AdmissionCheck[s] in <state> state: "name" (message); ...``, sorted by name."""
    parts = [f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"' for c in sorted(checks, key=lambda c: c.name)]
    noun = "AdmissionChecks" if len(parts) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def late_retries(state: ClusterState, touched: dict[str, None] | None, now: int, base: dict
                 ) -> list[ev.RequeueAtRaised]:
    """A Retry check that set its delay after the eviction (KEP-3258 lets a check report then), or while the
    workload waits pending, still holds the workload back: Kueue's workload controller, before its other
    rules, raises ``requeueState.requeueAt`` of any unfinished workload to :func:`retry_requeue_at` of its
    Retry checks (``NeedsRequeueAtUpdate``), the requeue count left alone, and looks at the rest at its next
    reconcile (its own rules only: the other controllers', a release, a ProvisioningRequest cleanup, still act
    in this pass). Not of one holding quota and not evicted (its eviction, decided below, writes that time),
    nor of an inactive one (the deactivation clears its requeue state). Looks at the ``touched`` workloads
    (None: every one with checks)."""
    wls = state.workloads
    keys = sorted(k for k, w in wls.items() if w.check_states) if touched is None else sorted(touched)
    out = []
    for key in keys:
        wl = wls.get(key)
        if (wl is None or not wl.check_states or not wl.active or wl.phase == FINISHED
                or (wl.reserving and not wl.evicted)):
            continue
        retry = [s for s in wl.check_states.values() if s.state == "Retry"]
        at = retry_requeue_at(wl, retry, now) if retry else None
        if at is not None:
            out.append(ev.RequeueAtRaised(key=key, uid=wl.uid, requeue_at=at, **base))
    return out


def retry_requeue_at(wl: WorkloadInfo, retry: list[o.AdmissionCheckState], now: int) -> int | None:
    """The latest lastTransitionTime + requeueAfterSeconds of the Retry checks (ms), when that is later than
    both now and the current requeueAt; None leaves the requeue state alone (retry at once)."""
    latest = None
    for c in retry:
        if c.requeue_after_seconds is not None and c.last_transition_time:
            t = parse_time(c.last_transition_time) + c.requeue_after_seconds * 1000
            latest = t if latest is None else max(latest, t)
    if latest is None or latest <= now or (wl.requeue_at is not None and latest <= wl.requeue_at):
        return None
    return latest


def queue_blocker(state: ClusterState, wl: WorkloadInfo, gated_by: bool) -> tuple[str, str]:
    """What keeps a pending workload out of scheduling, as Kueue's workload controller words it under
    UnadmittedWorkloadsObservability ("" if nothing; :func:`_legacy_blocker` without it): DRA claims it does not
    charge (:mod:`projections.dra`), its activity, its queues (:func:`_queue_problem`), its admissibility (the
    scheduler's words for it, so the two agree), then its admission gate while ``gated_by`` (the AdmissionGatedBy
    gate) is on."""
    problem = workload_problem(wl.pod_sets)
    if problem:  # Kueue's controller looks at a pending workload's claims first, and stops there
        return DRA_UNRESOLVED, problem
    if not wl.active:
        return "Deactivated", "The workload is deactivated"
    problem_of_queue = _queue_problem(state, wl)
    if problem_of_queue[0]:
        return problem_of_queue
    info = state.cq_info(state.local_queues[f"{wl.namespace}/{wl.queue_name}"].spec.cluster_queue)
    assert info is not None
    blocked = inadmissible(state, wl, info)
    if blocked is not None:
        return MISCONFIGURED, blocked[0]
    if gated_by and wl.admission_gate:
        return ADMISSION_GATED, ADMISSION_GATED_PREFIX + wl.admission_gate
    return "", ""


def _queue_problem(state: ClusterState, wl: WorkloadInfo) -> tuple[str, str]:
    """What keeps ``wl``'s queues from taking it (Kueue's ``getQueueBlocker``: its LocalQueue or ClusterQueue missing
    or stopped), as the workload controller words it ("" if nothing)."""
    lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if lq is None:
        return "Misconfigured", f"LocalQueue {wl.queue_name} doesn't exist"
    if lq.spec.stopped:
        return "Suspended", f"LocalQueue {wl.queue_name} is inactive"
    cq = lq.spec.cluster_queue
    if cq not in state.cluster_queues:
        return "Misconfigured", f"ClusterQueue {cq} doesn't exist"
    info = state.cq_info(cq)
    if info is None or info.inactive is not None:
        return "Suspended", f"ClusterQueue {cq} is inactive"
    return "", ""


def _pending_workloads(state: ClusterState, out: list[ev.Decision], base: dict,
                       touched: dict[str, None] | None, *, gated_by: bool, bypass: bool, explicit: bool,
                       observability: bool = False, evict_deactivated: bool = True,
                       later: Collection[str] = ()) -> None:
    """Requeue workloads whose Requeued=False cause is gone; keep the queue-blocker condition current, and with
    ``bypass`` the equivalent failure a parked workload waits on. Looks at the flagged workloads, those in
    blocked queues and, with ``bypass``, those parked with a parked shape (only the ``touched`` ones, when
    given). ``gated_by``: the AdmissionGatedBy gate. ``explicit``: the UnadmittedWorkloadsExplicitStatus gate,
    under which a pending workload that shows no QuotaReserved condition yet gets one (PendingEvaluation, or the
    equivalent failure it is parked with), as Kueue's controller stamps it at the workload's first reconcile.
    ``later``: workloads this pass already decided for (:func:`late_retries`), left to the next one."""
    blocked_lqs, inactive_cqs = _blocked_queues(state)
    wls = state.workloads
    if touched is None:
        keys = set(state.flagged)
        for lq_key in blocked_lqs:
            keys.update(state.lq_members.get(lq_key, ()))
        for cq in inactive_cqs:
            q = state.queues.get(cq)
            if q is not None:
                keys.update(q.shapes)
        if bypass:
            keys.update(_parked_with_shape(state, explicit))
        if explicit:
            keys.update(k for k, w in wls.items() if _unstamped(w))
        if observability:
            keys.update(k for k, w in wls.items() if _shows_legacy_pending(w))
    else:
        blocked = set(blocked_lqs)
        inactive = [q.shapes for q in (state.queues.get(cq) for cq in inactive_cqs) if q is not None]
        keys = set()
        for key in touched:
            wl = wls.get(key)
            if wl is not None and (key in state.flagged or f"{wl.namespace}/{wl.queue_name}" in blocked
                                   or any(key in shapes for shapes in inactive)
                                   or (bypass and _bypassed_for(state, wl, explicit) is not None)
                                   or (explicit and _unstamped(wl))
                                   or (observability and _shows_legacy_pending(wl))):
                keys.add(key)
    for key in sorted(keys):
        wl = wls.get(key)
        if wl is None or wl.phase != PENDING or key in later:
            continue
        if wl.active and _targeted(wl) and evict_deactivated:  # deactivated first, whatever it shows
            out.append(_deactivation(wl, base))
            continue
        if not wl.active and not workload_problem(wl.pod_sets):
            # Kueue's controller evicts it first (its DRA step comes before), the blocker at its next
            # reconcile; one evicted already only loses its requeue state first
            if evict_deactivated and not _shows_evicted(wl):
                out.append(_deactivation(wl, base))
                continue
            if _shows_evicted(wl) and _keeps_requeue_state(wl):
                out.append(ev.RequeueStateCleared(key=key, uid=wl.uid, **base))
                continue
        if on_hold(wl) and wl.active:
            # held by its StatefulSet (Kueue #12233): what it shows is the set's until the hold is cleared; but, as
            # Kueue v0.20's granular resolver words deactivation before the hold, a deactivated one shows Deactivated
            # (no longer on hold: reactivated at zero, its set puts it on hold again)
            continue
        rq = wl.condition("Requeued")
        if wl.active and rq is not None and rq.status == "False":
            restarted = _restarted(state, wl, rq.reason)
            if restarted is not None:
                out.append(ev.WorkloadRequeued(key=key, uid=wl.uid, status=True, reason=restarted[0],
                                               message=restarted[1], **base))
                continue
        current = wl.condition("QuotaReserved")
        if gated_by and not wl.admission_gate and current is not None and current.reason == ADMISSION_GATED:
            out.append(ev.WorkloadPending(key=key, uid=wl.uid, reason=unadmitted_reason("PendingEvaluation",
                                                                                        observability),
                                          message=ADMISSION_GATE_CLEARED, **base))
            continue
        reason, message = queue_blocker(state, wl, gated_by)
        if wl.active and reason == DRA_UNRESOLVED:  # a DRA problem: Requeued=False as well
            # (not over a deactivated workload's Requeued=False Deactivated, which its reactivation looks for)
            wanted = ("False", unresolved_reason(observability), requeued_message(message))
            if rq is None or (rq.status, rq.reason, rq.message) != wanted:
                out.append(ev.WorkloadRequeued(key=key, uid=wl.uid, status=False, reason=wanted[1],
                                               message=wanted[2], **base))
        if not observability:
            reason, message = _legacy_blocker(state, wl, reason, message, gated_by)
        parked_for = _bypassed_for(state, wl, explicit) if bypass and not reason else None
        if parked_for:
            reason, message = parked_for, BYPASSED
        elif not reason and explicit and current is None:
            reason, message = "PendingEvaluation", PENDING_EVALUATION
        if reason:
            if current is None or (current.status, current.reason, current.message) != ("False", reason, message):
                out.append(ev.WorkloadPending(key=key, uid=wl.uid, reason=reason, message=message, **base))
        elif observability and current is not None and current.status == "False" and (
                current.reason in QUEUE_BLOCKERS or current.reason in (ADMISSION_GATED, LEGACY_PENDING)):
            out.append(ev.WorkloadPending(key=key, uid=wl.uid, reason="PendingEvaluation", message=PENDING_EVALUATION,
                                          **base))


def _shows_evicted(wl: WorkloadInfo) -> bool:
    c = wl.condition("Evicted")
    return c is not None and c.status == "True"


def _keeps_requeue_state(wl: WorkloadInfo) -> bool:
    """An inactive workload still showing a ``status.requeueState``, which Kueue's workload controller
    clears."""
    return not wl.active and (wl.requeue_count > 0 or wl.requeue_at is not None)


def _legacy_blocker(state: ClusterState, wl: WorkloadInfo, reason: str, message: str,
                    gated_by: bool) -> tuple[str, str]:
    """What the workload controller writes for :func:`queue_blocker`'s ``reason`` with UnadmittedWorkloadsObservability
    off (Kueue v0.20's ``resolveLegacyUnadmittedQuotaReservedCondition``): a missing or stopped LocalQueue or
    ClusterQueue as ``Inadmissible`` with its message, a DRA problem the same (its ``KueueDRAIntegration`` reconcile);
    nothing for a not admissible workload (the scheduler words it, ``Pending``) or once the block is gone; the
    admission gate is the AdmissionGatedBy gate's, written either way. The legacy path asks only the queues, not
    whether the workload is active: a deactivated workload in a blocked queue shows ``Inadmissible`` too (Kueue's
    controller reaches it once the deactivation's eviction is written), one in a usable queue nothing. Under
    ``gated_by``, Kueue's controller writes AdmissionGated before it asks the legacy resolver, so a gated workload
    the resolver says nothing of (deactivated, or not admissible, in a usable queue) shows AdmissionGated; in a
    blocked queue the resolver's Inadmissible is the last word (Kueue's controller writes the two in turn)."""
    if reason == DRA_UNRESOLVED:
        return DRA_INADMISSIBLE, message
    if reason in ("Misconfigured", "Suspended", "Deactivated"):
        queue_reason, queue_message = _queue_problem(state, wl)
        if queue_reason:
            return DRA_INADMISSIBLE, queue_message
        if gated_by and wl.admission_gate:
            return ADMISSION_GATED, ADMISSION_GATED_PREFIX + wl.admission_gate
    return (reason, message) if reason == ADMISSION_GATED else ("", "")


def _shows_legacy_pending(wl: WorkloadInfo) -> bool:
    """A pending workload showing QuotaReserved=False with the legacy reason ``Pending`` (written by a Kueue
    or a kueue-es without UnadmittedWorkloadsObservability): none of the scheduler's reasons Kueue's granular
    resolver keeps (its ``schedulerSetReasons``), so under the gate the controller rewrites it
    (PendingEvaluation, or an equivalent workload's failure) at its next look, whether or not the scheduler
    tries the workload."""
    if wl.phase != PENDING:
        return False
    c = wl.condition("QuotaReserved")
    return c is not None and c.status == "False" and c.reason == LEGACY_PENDING


def _unstamped(wl: WorkloadInfo) -> bool:
    """A pending workload showing no QuotaReserved condition yet: what UnadmittedWorkloadsExplicitStatus stamps."""
    return wl.phase == PENDING and wl.condition("QuotaReserved") is None


def _bypassed_for(state: ClusterState, wl: WorkloadInfo, explicit: bool) -> str | None:
    """The reason an equivalent workload's failure got, when ``wl`` waits parked with that workload's shape and
    shows a QuotaReserved reason the workload controller replaces with it (:data:`SHOWS_BYPASS`); else None."""
    current = wl.condition("QuotaReserved")
    if wl.phase != PENDING or (current is None and not explicit) or (
            current is not None and current.reason not in SHOWS_BYPASS):
        return None
    q = state.queues.get(wl.cluster_queue)
    return (q.no_fit_reason(wl.key) or None) if q is not None else None


def _parked_with_shape(state: ClusterState, explicit: bool) -> list[str]:
    """Every workload parked with a parked shape that :func:`_bypassed_for` has a reason for."""
    out = []
    wls = state.workloads
    for cq in sorted(state.parked_queues):
        q = state.queues.get(cq)
        if q is None or not q.parked_shapes:
            continue
        out.extend(key for key in q.inadmissible if _bypassed_for(state, wls[key], explicit) is not None)
    return out


def _blocked_queues(state: ClusterState) -> tuple[list[str], list[str]]:
    """LocalQueues that are missing, stopped or point at a missing ClusterQueue, and inactive ClusterQueues.
    Memoised per spec generation (LocalQueue changes included) and number of LocalQueue names in use."""
    memo_key = (state.spec_generation, len(state.lq_members), len(state.queues))
    found = state.derived.get("blocked-queues")
    if found is not None and found[0] == memo_key:
        return found[1]
    lqs = []
    for lq_key in sorted(state.lq_members):
        lq = state.local_queues.get(lq_key)
        if lq is None or lq.spec.stopped or lq.spec.cluster_queue not in state.cluster_queues:
            lqs.append(lq_key)
    cqs = [cq for cq in sorted(state.queues) if state.inactive_reason(cq) is not None]
    state.derived["blocked-queues"] = (memo_key, (lqs, cqs))
    return lqs, cqs


def _restarted(state: ClusterState, wl: WorkloadInfo, reason: str) -> tuple[str, str] | None:
    if reason.startswith("Deactivated"):
        return "Reactivated", "The workload was reactivated"
    if reason in (DRA_INADMISSIBLE, DRA_UNRESOLVED) and not workload_problem(wl.pod_sets):
        return DRA_RESOLVED, DRA_RESOLVED_MESSAGE  # its claims are charged now: queued again
    if reason in BACKOFF_REASONS and wl.key not in state.backoff:
        # no backoff (left): a Retry without requeueAfterSeconds, or one cleared while the workload was
        # inactive
        return "BackoffFinished", "The workload backoff was finished"
    lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if reason == "LocalQueueStopped" and lq is not None and not lq.spec.stopped:
        return "LocalQueueRestarted", "The LocalQueue was restarted after being stopped"
    if reason == "ClusterQueueStopped" and lq is not None:
        cq = state.cluster_queues.get(lq.spec.cluster_queue)
        if cq is not None and not cq.spec.stopped:
            return "ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped"
    return None


def next_deadline(state: ClusterState, config: SchedulerConfig, *, afs_samples: bool = True) -> int | None:
    """The earliest time at which :func:`reconcile` or a second pass would act without any new event (for
    clock ticks), read off the projection's clocks; with ``afs_samples``, also the next Admission Fair Sharing
    sample that moves a LocalQueue's shown usage (Kueue re-samples every ``usageSamplingInterval``: its status
    moves, and so may the order of the queues it heads). The simulator, which writes no status, asks for them
    only while a workload waits."""
    times = []
    wls = state.workloads
    for t, key in state.backoff_due.ordered():
        wl = wls.get(key)
        # an inactive one's backoff does not end by itself
        if wl is not None and not wl.reserving and wl.active:
            times.append(t)
            break
    second = state.second_pass_due.first()
    if second is not None:
        times.append(second)
    waiting = pods_ready_timeouts.next_due(state, config)
    if waiting is not None:
        times.append(waiting)
    limit = state.max_execution_clock.first()
    if limit is not None:
        times.append(limit)
    retry = state.create_retries.first()  # a refused ProvisioningRequest creation decided again
    if retry is not None:
        times.append(retry)
    if state.refused_evictions:  # a rejected eviction decided again (one past due waits for a cycle)
        retries = [r.retry_at for r in state.refused_evictions.values() if r.retry_at > state.time]
        if retries:
            times.append(min(retries))
    if config.gate(gates.MULTIKUEUE) and state.cluster_links:
        lost = multikueue.lost_deadlines(state, parse_duration(config.multi_kueue.worker_lost_timeout))
        if lost:
            times.append(lost[0][0])
    if config.gate(gates.MULTIKUEUE):
        rounds = multikueue.round_deadlines(state, dispatcher_of(config))
        if rounds:
            times.append(rounds[0][0])
        gate_timeout_ms = gate_timeout(config)
        opening = multikueue.gate_deadlines(state, gate_timeout_ms) if gate_timeout_ms is not None else []
        if opening:
            times.append(opening[0][0])
    if config.gate(gates.CONCURRENT_ADMISSION):
        opening = variant_gates.deadlines(state)
        if opening:
            times.append(opening[0][0])
    waits_on_nodes = (not config.gate(gates.TAS_REPLACE_NODE_ON_POD_TERMINATION)
                      or config.gate(gates.TAS_REPLACE_NODE_DUE_TO_NOT_READY_OVER_FIXED_TIME))
    if waits_on_nodes and config.gate(gates.TAS_FAILED_NODE_REPLACEMENT):
        wait = next_wait_end(state)
        if wait is not None:
            times.append(wait)
    sample = afs.next_sample(state, config) if afs_samples else None
    if sample is not None:
        times.append(sample)
    if config.object_retention_policies is not None:
        after_finished, after_deactivated = config.workload_retention
        for clock, after in ((state.finished_clock, after_finished), (state.deactivated_clock, after_deactivated)):
            first = clock.first()
            if first is not None and after is not None:
                times.append(first + after)
    return min(times) if times else None
