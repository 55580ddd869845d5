"""Write Workload status from the log to the cluster; record each decision's outcome in the log.

Level-triggered: for every workload the mirror marks dirty, the **desired** status is what the projection says
(:func:`projections.workloads.status_of` — admission, conditions, requeueState, admissionChecks, unhealthyNodes,
resourceRequests, reclaimablePods, accumulatedPastExecutionTimeSeconds, schedulingStats, and MultiKueue's clusterName
and nominatedClusterNames) and the **current** one is what the
apiserver last showed (the observed Workload, or our own last write if that is newer). When they differ, one JSON
merge patch of the ``status`` subresource sets the fields that differ (``null`` clears one), conditioned on the
observed ``uid`` and ``resourceVersion`` (optimistic concurrency). Of the conditions only Kueue's types come from
the log (``KUEUE_CONDITIONS``); a condition of any other type, which another controller or a user set, is written
back as the Workload written over shows it, since the patch replaces the whole list:

* success → ``DecisionApplied`` for every decision of the workload up to the log offset the status was computed
  at; equal already (a restart after the write, a replayed decision) → the same, without writing: idempotent;
* 409 Conflict (someone else wrote) → re-read the Workload and re-check that the decision still holds: same uid,
  not finished unless we finish it, still active and in the same queue as when it was decided, and with the
  same pod sets unless it shows its quota reservation (names, counts, what they charge: a Workload rewritten in
  place while it held no quota must not get an admission naming its old pod sets). If it holds,
  write again on the fresh resourceVersion — only the fields the first write set out to change, so that a field
  another controller wrote meanwhile which this write did not mean to change (an external MultiKueue dispatcher's
  ``nominatedClusterNames``) is not overwritten from the log, as Kueue's patches set only the fields they own
  (nor by a next write made before the watch shows the Workload, and so the log has observed that field);
  if not → ``DecisionRejected`` (the change that invalidated it reaches
  the log through the watch and the scheduler decides again);
* 404, or a different uid (the workload was deleted or recreated) → ``DecisionRejected``;
* 422 Invalid, or a 403 of a denying admission webhook (Kueue's Workload webhook answers 403 for its own rules,
  kueue-es's 422 for its CRD's): the status itself is refused and writing it again cannot help →
  ``DecisionRejected`` in the apiserver's words (or for what a re-read shows invalidated the decisions meanwhile),
  not written again until the watch shows a newer Workload or the log decides more for it.
  An authorization 403 is no word on the status: the write is tried again later.

MultiKueue's ``clusterName`` goes only over a Workload that shows the worker among its ``nominatedClusterNames``,
the one order Kueue's Workload webhook lets it be set in (Kueue #7278): a writer behind the log (the nomination and
the assignment both decided before it wrote either, a restart between them) first writes the nominations alone,
the worker added to those shown, as Kueue's dispatcher would have, then the rest on the new resourceVersion.

A workload the log deactivated while the apiserver still shows it active (Kueue's own deactivations: a
rejected admission check, the requeuing limit, the maximum execution time) first gets ``spec.active: false``, in
a merge patch of the Workload conditioned on the same uid and resourceVersion, as Kueue's workload controller
sets it before it evicts; the status write follows on the new resourceVersion. A conflict there waits for the
watch to bring the newer Workload. (The projection keeps such a workload inactive while the Workload it is shown
is of the generation it deactivated: see ``ClusterState._on_workload_upserted``.)

A workload the log labels a ConcurrentAdmission parent is not written while that label's write is pending
(:mod:`connectors.k8s.variants` writes it; its outcome marks the workload for this writer again): Kueue's workload
controller labels the parent before its variant controller gives it a variant's admission, so no reader sees the
parent admitted without its label.

A rejected workload is not written again until the watch shows a newer version of it. The projection does not
undo a rejected decision by itself: the observed facts that made it fail (deletion, deactivation, a new queue,
new pod sets — the fold forgets a reservation the rewritten Workload does not show) are what the scheduler
reacts to. A rejected eviction's counts (its metrics, its entry in ``schedulingStats.evictions``) are taken
back, as Kueue counts an eviction once its status write succeeds; and a rejected preemption or eviction of a
workload nothing was folded on since is taken back whole (:mod:`projections.eviction_undo`): Kueue's eviction
is that one write, so when it fails nothing happened. The job connectors stop a Job for an eviction only once
the watch shows the Workload evicted (:func:`connectors.k8s.jobframework.eviction_unshown`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient, resource_version_of
from connectors.k8s.errors import Conflict, Forbidden, Invalid, KubeError, NotFound
from connectors.k8s.journal import Journal
from connectors.k8s.json_patch import merge_patch_to
from connectors.k8s.mirror import FAMILY_TAGS
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from events import schema as ev
from events.template_digest import stamped_from_json
from projections.admissionchecks import runs_controller
from projections.workloads import (
    DEACTIVATION_TARGET,
    FINISHED,
    KUEUE_CONDITIONS,
    WorkloadInfo,
    has_quota_reservation,
    status_of,
)

log = structlog.get_logger("kueue_es.k8s.writer")
WORKLOADS = BY_KIND["Workload"]
STATUS_FIELDS = ("admission", "conditions", "requeueState", "admissionChecks", "unhealthyNodes", "resourceRequests",
                 "reclaimablePods", "accumulatedPastExecutionTimeSeconds", "clusterName", "nominatedClusterNames",
                 "preemptionGates", "schedulingStats")
"""The status fields kueue-es writes. ``resourceRequests`` goes out with the QuotaReserved=False of a failed
admission attempt and is cleared (``null``) by the write that sets the admission, as in Kueue's two writes;
``reclaimablePods`` is what the job integration counted (``ReclaimablePodsChanged``), as Kueue's job reconciler
writes it; ``preemptionGates`` as the Workload shows them, all closed by an eviction (Kueue's); ``schedulingStats``
(its ``evictions`` record) goes out with the Evicted=True it counts, in the same patch, as Kueue writes them."""
NOT_STATUS = frozenset({"RetentionExpired", "ProvisioningRequestCreated", "ProvisioningRequestDeleted",
                        *FAMILY_TAGS})
"""Decisions not carried out by a status write: deleting objects (connectors/k8s/retention.py), creating and
deleting ProvisioningRequests (connectors/k8s/provreqs.py), ConcurrentAdmission's labels, variants and their
``spec.active`` (connectors/k8s/variants.py)."""


def desired_status(wl: WorkloadInfo, byte_valued: frozenset[str] = frozenset()) -> dict[str, Any]:
    s = status_of(wl, byte_valued)
    return {k: s[k] for k in STATUS_FIELDS if k in s}


def observed_status(w: o.Workload) -> dict[str, Any]:
    s = msgspec.to_builtins(w.status)
    return {k: s[k] for k in STATUS_FIELDS if s.get(k)}


def _with_foreign(desired: dict[str, Any], current: dict[str, Any], active: bool = True) -> dict[str, Any]:
    """``desired`` with the conditions of types kueue-es does not own (another controller's, a user's) as
    ``current`` shows them, where it shows them: the projection holds such conditions only as they were when it
    first saw the Workload, and a merge patch replaces the whole list. Kueue's types are set in place, a new one
    appended; one the projection does not hold is left as it is, but for the DeactivationTarget of an inactive
    workload (not ``active``), which Kueue's controller removes with the deactivation."""
    ours = {c["type"]: c for c in desired.get("conditions", ()) if c["type"] in KUEUE_CONDITIONS}
    shown = current.get("conditions", ())
    if not active and DEACTIVATION_TARGET not in ours:
        shown = [c for c in shown if c["type"] != DEACTIVATION_TARGET]
    conditions = [ours.pop(c["type"], c) for c in shown]
    conditions += ours.values()
    out = {k: v for k, v in desired.items() if k != "conditions"}
    if conditions:
        out["conditions"] = conditions
    return {k: out[k] for k in STATUS_FIELDS if k in out}


def _with_their_checks(desired: dict[str, Any], current: dict[str, Any], theirs: Callable[[dict[str, Any]], bool]
                       ) -> dict[str, Any]:
    """``desired`` with the states of the checks ``theirs`` says are their controllers' (their controller is not
    kueue-es, and the log's word for them is already on the Workload) as ``current`` shows them: set after that
    word, so its controller's later one, which the fold takes from the watch, which may not have shown it yet.
    The list itself (which checks, their order) and the retry counts are the log's, as in Kueue."""
    checks = desired.get("admissionChecks")
    shown = {c["name"]: c for c in current.get("admissionChecks", ())}
    if not checks or not shown:
        return desired
    kept = []
    for ours in checks:
        state = shown.get(ours["name"])
        if state is not None and state != ours and theirs(ours):
            state = {k: v for k, v in state.items() if k != "retryCount"}
            if "retryCount" in ours:
                state["retryCount"] = ours["retryCount"]
            ours = state
        kept.append(ours)
    return {**desired, "admissionChecks": kept}


def _checks_at(rv: int, desired: dict[str, Any], status: dict[str, Any]) -> int:
    """``rv``, the resourceVersion of ``status``, when it shows the check states of ``desired``; else -1."""
    return rv if status.get("admissionChecks") == desired.get("admissionChecks") else -1


def _changed(desired: dict[str, Any], current: dict[str, Any]) -> set[str]:
    """The status fields a write of ``desired`` over ``current`` sets (``null`` clearing one)."""
    return {k for k in STATUS_FIELDS if desired.get(k) != current.get(k)}


def status_patch(current: dict[str, Any], desired: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """The ``status`` of the merge patch that writes ``fields`` of ``desired`` over ``current``: a field that
    goes is ``null``, and so is a key that goes from a map kept
    (:func:`connectors.k8s.json_patch.merge_patch_to`)."""
    return {k: merge_patch_to(current.get(k), desired.get(k)) for k in STATUS_FIELDS if k in fields}


def _merged(current: dict[str, Any], desired: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """The status after ``fields`` of ``desired`` were written over ``current``."""
    out = {k: v for k, v in current.items() if k not in fields}
    out.update((k, desired[k]) for k in fields if k in desired)
    return {k: out[k] for k in STATUS_FIELDS if k in out}


def _nomination_first(desired: dict[str, Any], current: dict[str, Any], changing: set[str]) -> list[str] | None:
    """The nominations to write before the ``clusterName`` of ``desired``: those ``current`` shows, with the
    worker added. Kueue's Workload webhook lets clusterName be set only to a worker the old object nominates
    (Kueue #7278), which Kueue always meets (its dispatcher's nominations are stored before any copy exists) but a
    writer behind the log may not (the nomination and the assignment both decided before it wrote either). None
    when no nomination needs writing first."""
    cluster = desired.get("clusterName")
    shown = current.get("nominatedClusterNames") or []
    if "clusterName" not in changing or not cluster or current.get("clusterName") or cluster in shown:
        return None
    return [*shown, cluster]


def _refusal(exc: KubeError) -> bool:
    """Whether the apiserver refused the status written, which writing it again cannot change: a 422, or a 403 of
    a denying admission webhook (Kueue's Workload webhook answers 403 for its own rules, kueue-es's 422 for its
    CRD's) or admission policy. An authorization 403 refuses kueue-es the write, whatever it writes: tried again
    (a permission granted lets it through)."""
    if isinstance(exc, Invalid):
        return True
    return isinstance(exc, Forbidden) and ("denied the request" in str(exc) or "denied request" in str(exc))


_rv = o.resource_version_order


@dataclass
class WriterStats:
    writes: int = 0
    deactivations: int = 0
    """``spec.active: false`` writes (Kueue's own deactivations)."""
    conflicts: int = 0
    applied: int = 0
    rejected: int = 0
    errors: int = 0
    rejections: list[tuple[str, str]] = field(default_factory=list)


class StatusWriter:
    def __init__(self, client: KubeClient, journal: Journal, *, attempts: int = 3, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16) -> None:
        self.client = client
        self.journal = journal
        self.append = append or journal.append
        self.concurrency = concurrency
        self.mirror = journal.mirror
        self.attempts = attempts
        self.retry_s = retry_s
        self.stats = WriterStats()
        self._written: dict[str, tuple[int, dict[str, Any]]] = {}
        """Key -> (resourceVersion, status) of our last successful write, until the watch shows it."""
        self._left_alone: dict[str, set[str]] = {}
        """Key -> the status fields another controller wrote that a retried write left as it found them (what
        ``_written`` holds of them is theirs, which the log has not observed yet): not written either until the
        watch shows the Workload."""
        self._deactivated: dict[str, int] = {}
        """Key -> resourceVersion of our ``spec.active: false`` write, until the watch shows it."""
        self._blocked: dict[str, tuple[int, int]] = {}
        """Key -> (resourceVersion the watch must reach, last decision rejected) before the workload is
        written again after a reject: a decision made after that one (an eviction decided again once its
        refusal's backoff ends) lifts the block, as Kueue's reconcile retries the write."""
        self._reported: set[int] = set()
        """Decision offsets whose outcome was appended but not applied to the mirror yet."""
        self._retry = Retries(self.retry_s)

    async def run(self) -> None:
        """Write every dirty workload, up to ``concurrency`` at a time (one write at a time per workload)."""
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _take(self) -> set[str]:
        keys = self.mirror.dirty_workloads | self._retry.due()
        self.mirror.dirty_workloads = set()
        return keys

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what="status write", stats=self.stats, log=log, workload=key)

    async def sync(self, key: str) -> None:
        """Bring one workload's status in the cluster to what the log says (see the module docstring)."""
        self._reported &= {off for p in self.mirror.pending.values() for off in p}
        decided = self.mirror.pending.get(key, {})
        if "VariantCreated" in decided.values() and key not in self.mirror.workloads:
            return  # a variant still to be created: its status is written once the watch shows it
        if "ParentLabelled" in decided.values():
            return  # Kueue labels a parent before anything shows it admitted: written once the label's outcome is in
        pending = {off: tag for off, tag in decided.items() if tag not in NOT_STATUS}
        obs = self.mirror.workloads.get(key)
        wl = self.mirror.state.workloads.get(key)
        if obs is None or wl is None:
            if pending and self.mirror.seen("Workload", key) is None:
                await self._outcome(key, "", pending, reject=("NotFound", "the Workload no longer exists"))
            self._written.pop(key, None)
            self._left_alone.pop(key, None)
            self._blocked.pop(key, None)
            self._deactivated.pop(key, None)
            return
        if wl.uid != obs.metadata.uid:
            return  # the log has not caught up with a recreation yet
        obs_rv = _rv(obs.metadata.resource_version)
        blocked = self._blocked.get(key)
        if blocked is not None:
            if obs_rv < blocked[0] and not any(off > blocked[1] for off in pending):
                return
            del self._blocked[key]
        upto = self.mirror.offset
        ours = desired_status(wl, self.mirror.state.byte_valued())
        base_rv, current = obs_rv, observed_status(obs)
        written = self._written.get(key)
        if written is not None:
            if written[0] > obs_rv:
                base_rv, current = written
            else:
                del self._written[key]
                self._left_alone.pop(key, None)
        deactivated = self._deactivated.get(key)
        if deactivated is not None and deactivated <= obs_rv:
            del self._deactivated[key]
            deactivated = None
        if not wl.active and obs.spec.active and deactivated is None:
            base_rv = await self._deactivate(key, wl, obs, base_rv, pending)
            if not base_rv:
                return
            self._deactivated[key] = base_rv
            self._written[key] = (base_rv, current)
        desired = self._kept(key, wl, ours, current)
        changing = _changed(desired, current) - self._left_alone.get(key, set())
        if not changing:
            await self._outcome(key, wl.uid, pending, upto=upto, rv=_checks_at(base_rv, desired, current))
            return
        rv = str(base_rv) if base_rv >= 0 else obs.metadata.resource_version
        nominations = _nomination_first(desired, current, changing)
        if nominations is not None:
            first = await self._nominate(key, wl, obs, rv, current, nominations, pending, upto)
            if first is None:
                return
            rv, current = first
            desired = self._kept(key, wl, ours, current)
            changing = _changed(desired, current) - self._left_alone.get(key, set())
        fields = changing
        for _ in range(self.attempts):
            try:
                new_rv = await self._patch(obs, rv, desired, fields, current)
            except (Invalid, Forbidden) as exc:
                if not _refusal(exc):
                    raise  # not allowed to write (authorization): tried again later, the decisions pending
                await self._refused(key, wl, obs, exc, pending, upto)
                return
            except Conflict:
                fresh = await self._reread(obs)
                why = self._invalidated(fresh, obs, wl)
                if why is not None:
                    if fresh is not None:
                        self._blocked[key] = (_rv(fresh.metadata.resource_version), upto)
                    await self._outcome(key, wl.uid, pending, upto=upto, reject=why)
                    return
                assert fresh is not None
                self.stats.conflicts += 1
                rv, current = fresh.metadata.resource_version, observed_status(fresh)
                desired = self._kept(key, wl, ours, current)  # what someone else wrote meanwhile of theirs kept
                # only what this write set out to change: a field someone else wrote meanwhile that it leaves as
                # it found it (an external dispatcher's nominations) is theirs, not overwritten from the log
                fields = changing & _changed(desired, current)
                self._left_alone[key] = _changed(desired, current) - changing
                if not fields:
                    self._written[key] = (_rv(rv), current)
                    await self._outcome(key, wl.uid, pending, upto=upto, rv=_checks_at(_rv(rv), desired, current))
                    return
                continue
            except NotFound:
                await self._outcome(key, wl.uid, pending, upto=upto,
                                    reject=("NotFound", "the Workload no longer exists"))
                return
            self.stats.writes += 1
            merged = _merged(current, desired, fields)
            self._written[key] = (_rv(new_rv), merged)
            await self._outcome(key, wl.uid, pending, upto=upto, rv=_checks_at(_rv(new_rv), desired, merged))
            return
        log.info("status write kept conflicting, will retry", workload=key)
        self._retry.later(key)

    def _kept(self, key: str, wl: WorkloadInfo, ours: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
        """The status to write: the log's, less what is another controller's as ``current`` shows it. A check's
        state shown counts as its controller's once the log's own state of it is on the Workload: the watch showed
        it, or a write was reported (:attr:`WorkloadInfo.unshown_checks`), or this writer's last write carried it."""
        state = self.mirror.state
        multikueue = state.multikueue
        written = self._written.get(key)
        wrote = {c["name"]: c for c in written[1].get("admissionChecks", ())} if written is not None else {}
        unwritten = {n for n, _, rv in wl.unshown_checks if rv < 0}

        def theirs(check: dict[str, Any]) -> bool:
            name = check["name"]
            return (not runs_controller(state.admission_checks.get(name), multikueue)
                    and (name not in unwritten or wrote.get(name) == check))

        return _with_their_checks(_with_foreign(ours, current, wl.active), current, theirs)

    async def _patch(self, obs: o.Workload, rv: str, desired: dict[str, Any], fields: set[str],
                     current: dict[str, Any] | None = None) -> str:
        """Merge-patch ``fields`` of ``desired`` over the status (``current``: what it shows), a nested key
        that goes (``requeueState.requeueAt`` once the backoff ends, the count kept) written as ``null``."""
        status = status_patch(current or {}, desired, fields)
        body = {"metadata": {"uid": obs.metadata.uid, "resourceVersion": rv}, "status": status}
        out = await self.client.patch(WORKLOADS, obs.metadata.name, body, obs.metadata.namespace,
                                      subresource="status")
        return resource_version_of(out)

    async def _nominate(self, key: str, wl: WorkloadInfo, obs: o.Workload, rv: str, current: dict[str, Any],
                        nominations: list[str], pending: dict[int, str], upto: int) -> tuple[str, dict[str, Any]] | None:
        """Write ``nominations`` alone over ``current`` at resourceVersion ``rv``, as Kueue's dispatcher writes
        them before any copy exists: the resourceVersion and status written, or None when not written (a
        conflict: tried again later, by then on the newer Workload the watch brings; gone or refused: its
        decisions rejected)."""
        status = {"nominatedClusterNames": nominations}
        try:
            new_rv = await self._patch(obs, rv, status, set(status))
        except Conflict:
            self.stats.conflicts += 1
            self._retry.later(key)
            return None
        except NotFound:
            await self._outcome(key, wl.uid, pending, upto=upto, reject=("NotFound", "the Workload no longer exists"))
            return None
        except (Invalid, Forbidden) as exc:
            if not _refusal(exc):
                raise
            await self._refused(key, wl, obs, exc, pending, upto)
            return None
        self.stats.writes += 1
        written = _merged(current, status, set(status))
        self._written[key] = (_rv(new_rv), written)
        log.info("nominated before the cluster name", workload=key, clusters=nominations)
        return new_rv, written

    async def _refused(self, key: str, wl: WorkloadInfo, obs: o.Workload, exc: KubeError, pending: dict[int, str],
                       upto: int) -> None:
        """The apiserver refused the status itself (:func:`_refusal`): writing it again cannot help. The decisions
        are rejected — for what invalidated them if the Workload changed meanwhile, else in the apiserver's
        words — and the workload is not written again until the watch shows a Workload newer than the refusal
        or the log decides something more for it."""
        fresh = await self._reread(obs)
        why = self._invalidated(fresh, obs, wl)
        refused = why is None
        if why is None:
            log.error("status refused by the apiserver", workload=key, error=str(exc))
            why = (type(exc).__name__, str(exc))
        if fresh is not None:
            self._blocked[key] = (_rv(fresh.metadata.resource_version) + (1 if refused else 0), upto)
        await self._outcome(key, wl.uid, pending, upto=upto, reject=why)

    async def _deactivate(self, key: str, wl: WorkloadInfo, obs: o.Workload, rv: int, pending: dict[int, str]
                          ) -> int:
        """Set ``spec.active: false`` on the Workload at resourceVersion ``rv``: its new resourceVersion, or 0 when
        it was not written (a conflict: tried again later, by then on the newer Workload the watch brings; gone:
        its decisions rejected)."""
        body = {"metadata": {"uid": obs.metadata.uid,
                             "resourceVersion": str(rv) if rv >= 0 else obs.metadata.resource_version},
                "spec": {"active": False}}
        try:
            out = await self.client.patch(WORKLOADS, obs.metadata.name, body, obs.metadata.namespace)
        except Conflict:
            self.stats.conflicts += 1
            self._retry.later(key)
            return 0
        except NotFound:
            await self._outcome(key, wl.uid, pending, upto=self.mirror.offset,
                                reject=("NotFound", "the Workload no longer exists"))
            return 0
        self.stats.deactivations += 1
        log.info("workload deactivated", workload=key)
        return _rv(resource_version_of(out))

    async def _reread(self, obs: o.Workload) -> o.Workload | None:
        try:
            raw = await self.client.get(WORKLOADS, obs.metadata.name, obs.metadata.namespace)
        except NotFound:
            return None
        return stamped_from_json(msgspec.json.decode(raw, type=o.Workload), raw)  # as the watch decodes it

    def _invalidated(self, fresh: o.Workload | None, obs: o.Workload, wl: WorkloadInfo) -> tuple[str, str] | None:
        """Why the decisions about ``wl`` no longer hold for the Workload as it is now, or None if they do."""
        if fresh is None:
            return ("NotFound", "the Workload no longer exists")
        if fresh.metadata.uid != obs.metadata.uid:
            return ("UIDChanged", f"the Workload was recreated (uid {fresh.metadata.uid})")
        if fresh.metadata.deletion_timestamp and wl.phase != FINISHED:
            return ("Deleting", "the Workload is being deleted")
        finished = any(c.type == "Finished" and c.status == "True" for c in fresh.status.conditions)
        if finished and wl.phase != FINISHED:
            return ("Finished", "the Workload finished")
        if fresh.spec.active != wl.active:
            return ("SpecChanged", f"spec.active is now {str(fresh.spec.active).lower()}")
        if fresh.spec.queue_name != wl.queue_name:
            return ("SpecChanged", f"spec.queueName is now {fresh.spec.queue_name!r}")
        if fresh.spec.pod_sets != obs.spec.pod_sets and not has_quota_reservation(fresh.status):
            # rewritten in place (a pod group's, a Job's Workload updated while it held no quota): an admission
            # names pod sets and charges their requests, so it holds only if the fold takes the same pod sets
            # from the new spec as from the one it was decided on (same names, counts, requests, placement). A
            # Workload showing its reservation keeps it with the pod sets Kueue's webhook let change (an elastic
            # Job scaled down), as the fold does: what is decided about it holds.
            state = self.mirror.state
            if state.pod_sets_now(fresh) != state.pod_sets_now(obs):
                return ("SpecChanged", "spec.podSets changed")
        return None

    async def _outcome(self, key: str, uid: str, pending: dict[int, str], *, upto: int | None = None,
                       reject: tuple[str, str] | None = None, rv: int = -1) -> None:
        """Report the ``pending`` decisions up to ``upto`` applied, or rejected for ``reject``. ``rv``: the
        resourceVersion at which the Workload shows the log's check states as of ``upto`` (-1: unknown, or it does
        not), which the fold orders the check states Workloads show by (:attr:`WorkloadInfo.unshown_checks`)."""
        offsets = sorted(off for off in pending if (upto is None or off <= upto) and off not in self._reported)
        if not offsets:
            return
        t = int(time.time() * 1000)
        events: list[ev.AnyEvent]
        if reject is None:
            version = str(rv) if rv >= 0 else ""
            events = [ev.DecisionApplied(time=t, key=key, uid=uid, resource_version=version, decision=off,
                                         id=f"applied-{off}") for off in offsets]
            self.stats.applied += len(events)
        else:
            reason, message = reject
            events = [ev.DecisionRejected(time=t, key=key, uid=uid, decision=off, reason=reason, message=message,
                                          id=f"rejected-{off}") for off in offsets]
            self.stats.rejected += len(events)
            self.stats.rejections.append((key, reason))
            log.info("decisions rejected", workload=key, reason=reason, message=message, decisions=offsets)
        self._reported.update(offsets)
        await self.append(events)
