"""A workload's eviction record: Kueue's ``status.schedulingStats.evictions``.

Each eviction Kueue makes adds one to the entry of its reason and underlying cause (of its reason alone for
``ConfigurablePreemption``, the entry taking the latest cause) in the same status write that sets Evicted=True,
appending the entry the first time that pair is counted: the list is in the order the pairs were
first met, and nothing resets it (a Workload object keeps its record across requeues, deactivations and
reactivations; a new object of the same name starts with none). The entry's count going from 0 to 1 is also what
``evicted_workloads_once_total`` counts.

Kept on :class:`~projections.workloads.WorkloadInfo` as ``evictions``: ``(reason, underlying cause, count)``
triples. The fold starts from what the Workload shows when it first sees it (a workload Kueue evicted before
kueue-es took over keeps its counts) and adds one per eviction it folds. Kueue's reason and cause of each eviction:

* a preemption: ``Preempted`` and no cause — but for a victim a PreemptionConfig's rules selected
  (ConfigurablePreemptions, KEP-13396): ``ConfigurablePreemption``, whose cause names its preemptor, the config,
  and the rules with their candidate selectors' indexes (:func:`configured_cause`). That reason keeps ONE entry:
  a later such preemption overwrites its cause with its own and adds one to its count (:data:`LATEST_CAUSE`);
* a deactivation: ``Deactivated``, the cause being what the Evicted reason adds after ``DeactivatedDueTo``
  (``AdmissionCheck``, ``RequeuingLimitExceeded``, ``MaximumExecutionTimeExceeded``; none for a user's);
* any other eviction: its own reason and cause (``PodsReadyTimeout`` with ``WaitForStart``/``WaitForRecovery``/
  ``WaitForScheduling``, ``AdmissionCheck`` — a MultiKueue worker's eviction too, ``NodeFailures``,
  ``ClusterQueueStopped``, ``LocalQueueStopped``, ConcurrentAdmission's reasons).
"""

from __future__ import annotations

from typing import Any

from events import objects as o
from events import schema as ev

Evictions = tuple[tuple[str, str, int], ...]
"""``(reason, underlying cause, count)`` per pair, in the order first counted."""


CONFIGURABLE_PREEMPTION = "ConfigurablePreemption"
"""The record's reason for a victim a PreemptionConfig's rules chose (Kueue v0.20's KEP and user guide)."""

LATEST_CAUSE = frozenset({CONFIGURABLE_PREEMPTION})
"""Reasons whose record is one entry per reason, showing the latest cause (KEP-13396: "new preemptions overwrite
the previous underlying cause but increase the eviction count"); any other reason's entries are per cause."""

CAUSE_MAX_LENGTH = 316
"""The most characters Kueue's CRD lets an ``underlyingCause`` hold."""


def configured_cause(preemptor: str, config: str, rules: tuple[tuple[str, tuple[int, ...]], ...]) -> str:
    """The underlying cause of a preemption a PreemptionConfig's rules chose (Kueue v0.20, KEP-13396):
    "Preempted by NS/NAME because of preemption config CONFIG rule RULE/0,1; RULE2/0" — each rule that selected
    the victim with its selectors' indexes, the rules by name (Kueue keeps them in a map), cut to the CRD's
    316 characters."""
    merged: dict[str, list[int]] = {}
    for name, indexes in rules:
        merged.setdefault(name, []).extend(indexes)
    listed = "; ".join(f"{name}/{','.join(map(str, merged[name]))}" for name in sorted(merged))
    return f"Preempted by {preemptor} because of preemption config {config} rule {listed}"[:CAUSE_MAX_LENGTH]


def reason_and_cause(e: Any) -> tuple[str, str]:
    """Kueue's (reason, underlying cause) of the eviction ``e`` (a WorkloadPreempted, WorkloadEvicted or
    WorkloadDeactivated decision) records in the Workload's status."""
    t = type(e)
    if t is ev.WorkloadPreempted:
        if e.preemption_config:
            return CONFIGURABLE_PREEMPTION, configured_cause(e.preemptor, e.preemption_config, e.selected_by)
        return "Preempted", ""
    if t is ev.WorkloadEvicted:
        return e.reason, e.underlying_cause
    return "Deactivated", e.reason.removeprefix("Deactivated").removeprefix("DueTo")


def metric_reason_and_cause(e: Any) -> tuple[str, str]:
    """The ``reason`` and ``underlying_cause`` labels of ``evicted_workloads_total`` (and its LocalQueue and
    ``once`` twins) for the eviction ``e``: the record's, but a PreemptionConfig's victim counts as any preemption
    (``Preempted``, no cause), so the labels stay bounded; ``preempted_workloads_total`` keeps its
    ``ConfigurablePreemption`` reason."""
    if type(e) is ev.WorkloadPreempted:
        return "Preempted", ""
    return reason_and_cause(e)


def _entry(evictions: Evictions, reason: str, cause: str) -> int:
    """The index of the entry an eviction for ``reason`` and ``cause`` counts in, -1 when it has none yet."""
    latest = reason in LATEST_CAUSE
    return next((i for i, (r, c, _) in enumerate(evictions) if r == reason and (latest or c == cause)), -1)


def counted(evictions: Evictions, reason: str, cause: str) -> Evictions:
    """``evictions`` with one more eviction for ``reason`` and ``cause`` (a new entry goes last; a
    :data:`LATEST_CAUSE` reason's entry takes ``cause`` in place)."""
    i = _entry(evictions, reason, cause)
    if i < 0:
        return (*evictions, (reason, cause, 1))
    return (*evictions[:i], (reason, cause, evictions[i][2] + 1), *evictions[i + 1:])


def count_of(evictions: Evictions, reason: str, cause: str) -> int:
    """How many evictions the entry ``reason`` and ``cause`` count in holds."""
    i = _entry(evictions, reason, cause)
    return evictions[i][2] if i >= 0 else 0


def shown(status: o.WorkloadStatus) -> Evictions:
    """The record a Workload's status shows (entries counting 0 are kept: Kueue leaves them as they are)."""
    stats = status.scheduling_stats
    if stats is None or not stats.evictions:
        return ()
    return tuple((e.reason, e.underlying_cause, e.count) for e in stats.evictions)


def from_pairs(pairs: Any) -> Evictions:
    """The record of a workload restored from a snapshot that kept only which pairs were counted (versions 4 to
    43: the metrics' ``evicted_once``): one eviction each, the least it had."""
    return tuple((reason, cause, 1) for reason, cause in pairs)


def as_status(evictions: Evictions) -> dict[str, Any]:
    """``status.schedulingStats`` as plain data, Kueue's field names (``underlyingCause`` written when empty)."""
    return {"evictions": [{"reason": r, "underlyingCause": c, "count": n} for r, c, n in evictions]}
