"""A workload's eviction record: Kueue's ``status.schedulingStats.evictions``.

Each eviction Kueue makes adds one to the entry of its reason and underlying cause in the same status write that
sets Evicted=True, appending the entry the first time that pair is counted: the list is in the order the pairs were
first met, and nothing resets it (a Workload object keeps its record across requeues, deactivations and
reactivations; a new object of the same name starts with none). The entry's count going from 0 to 1 is also what
``evicted_workloads_once_total`` counts, under the same pair as labels.

Kept on :class:`~projections.workloads.WorkloadInfo` as ``evictions``: ``(reason, underlying cause, count)``
triples. The fold starts from what the Workload shows when it first sees it (a workload Kueue evicted before
kueue-es took over keeps its counts) and adds one per eviction it folds. Kueue's reason and cause of each eviction:

* a preemption: ``Preempted`` and no cause — but for a victim a PreemptionConfig's rules selected
  (ConfigurablePreemptions; Kueue v0.20's preemptor, ``messageAndUnderlyingCause``): ``Preempted`` with the
  config's name as the cause, one entry per config like any pair (the rules that chose it are in its conditions'
  message, not here);
* a deactivation: ``Deactivated``, the cause being what the Evicted reason adds after ``DeactivatedDueTo``
  (``AdmissionCheck``, ``RequeuingLimitExceeded``, ``MaximumExecutionTimeExceeded``; none for a user's);
* any other eviction: its own reason and cause (``PodsReadyTimeout`` with ``WaitForStart``/``WaitForRecovery``/
  ``WaitForScheduling``, ``AdmissionCheck`` — a MultiKueue worker's eviction too, ``NodeFailures``,
  ``ClusterQueueStopped``, ``LocalQueueStopped``).

Not counted: a ConcurrentAdmission parent's eviction by the variant controller (``VariantEvicted``,
``ConcurrentAdmission``), which sets the Evicted condition alone (:func:`projections.variants.condition_only_eviction`).
"""

from __future__ import annotations

from typing import Any

from events import objects as o
from events import schema as ev

Evictions = tuple[tuple[str, str, int], ...]
"""``(reason, underlying cause, count)`` per pair, in the order first counted."""


def reason_and_cause(e: Any) -> tuple[str, str]:
    """Kueue's (reason, underlying cause) of the eviction ``e`` (a WorkloadPreempted, WorkloadEvicted or
    WorkloadDeactivated decision) records in the Workload's status, and the ``reason`` and ``underlying_cause``
    labels ``evicted_workloads_total`` and its LocalQueue and ``once`` twins count it under."""
    t = type(e)
    if t is ev.WorkloadPreempted:
        return "Preempted", e.preemption_config  # "" but for a PreemptionConfig's victim
    if t is ev.WorkloadEvicted:
        return e.reason, e.underlying_cause
    return "Deactivated", e.reason.removeprefix("Deactivated").removeprefix("DueTo")


def _entry(evictions: Evictions, reason: str, cause: str) -> int:
    """The index of the entry an eviction for ``reason`` and ``cause`` counts in, -1 when it has none yet."""
    return next((i for i, (r, c, _) in enumerate(evictions) if r == reason and c == cause), -1)


def counted(evictions: Evictions, reason: str, cause: str) -> Evictions:
    """``evictions`` with one more eviction for ``reason`` and ``cause`` (a new entry goes last)."""
    i = _entry(evictions, reason, cause)
    if i < 0:
        return (*evictions, (reason, cause, 1))
    return (*evictions[:i], (reason, cause, evictions[i][2] + 1), *evictions[i + 1:])


def uncounted(evictions: Evictions, reason: str, cause: str) -> Evictions:
    """``evictions`` with one eviction for ``reason`` and ``cause`` less, as if it had never been counted (an
    entry left counting none goes: a rejected eviction never made it)."""
    i = _entry(evictions, reason, cause)
    if i < 0:
        return evictions
    n = evictions[i][2] - 1
    return (*evictions[:i], *(((reason, cause, n),) if n > 0 else ()), *evictions[i + 1:])


def count_of(evictions: Evictions, reason: str, cause: str) -> int:
    """How many evictions the entry ``reason`` and ``cause`` counts."""
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


def from_configurable_entries(evictions: Evictions) -> Evictions:
    """The record of a workload restored from a snapshot older than version 46, whose PreemptionConfig victims
    counted in one ``ConfigurablePreemption`` entry with a long cause (KEP-13396's design): that entry as Kueue's
    preemptor records it, ``Preempted`` with the config's name (the word after "preemption config" in the cause;
    none when the cause names no config), merged into such an entry already there."""
    if not any(r == "ConfigurablePreemption" for r, _, _ in evictions):
        return evictions
    out: Evictions = ()
    for reason, cause, n in evictions:
        if reason == "ConfigurablePreemption":
            reason, cause = "Preempted", _config_named(cause)
        i = _entry(out, reason, cause)
        out = (*out, (reason, cause, n)) if i < 0 else (*out[:i], (reason, cause, out[i][2] + n), *out[i + 1:])
    return out


def _config_named(cause: str) -> str:
    """The PreemptionConfig an old ``ConfigurablePreemption`` cause names ("... because of preemption config CFG
    rule ..."), "" when it names none."""
    _, found, rest = cause.partition(" because of preemption config ")
    return rest.split(" ", 1)[0] if found else ""


def as_status(evictions: Evictions) -> dict[str, Any]:
    """``status.schedulingStats`` as plain data, Kueue's field names (``underlyingCause`` written when empty)."""
    return {"evictions": [{"reason": r, "underlyingCause": c, "count": n} for r, c, n in evictions]}
