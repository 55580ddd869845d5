"""The summary of the flavors a reservation considered, for its QuotaReserved Event (Kueue v0.15's #7646,
in the form v0.16's #8024 gave it): "; Flavors considered: <summary>" follows the Event's message when
it is not empty.

Per pod set, in the workload's order, ``<pod set>: `` and its attempts joined by ", "; pod sets joined
by " | ". An attempt is ``<flavor>(<mode>[;borrow=N][;reason;...])``: ``<mode>`` is ``NoFit`` or ``Fit``,
or, for a flavor whose quota could be had by preempting, ``preemptionMode=Preempt|Reclaim|NoCandidates``
(victims in the ClusterQueue, victims elsewhere in the cohort only, none found). A flavor that fit
without borrowing says nothing, and a pod set with nothing to say is left out: a reservation that took
its first flavor without borrowing has no summary. The members of a pod-set group share the group's
attempts, each listing them.

As in Kueue, a pod set's attempts over its resource groups are kept once per flavor (the worst mode,
the least preemption possibility, the highest borrowing level, every reason once) and listed in flavor
name order, not in the order tried; reasons are sorted. Only what
:func:`kueue_es.scheduler.flavors.assign_flavors` tried counts: a flavor left out by the nomination of a
recomputed assignment, or by ConcurrentAdmission's allowed flavors, is not an attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kueue_es.scheduler.flavors import Granular, Mode

if TYPE_CHECKING:
    from kueue_es.scheduler.flavors import Assignment, Attempt

_POSSIBILITY = {Granular.NO_CANDIDATES: "NoCandidates", Granular.PREEMPT: "Preempt",
                Granular.RECLAIM: "Reclaim"}
"""Granular modes that found preemption possible (with victims or not) -> Kueue's PreemptionPossibility."""


EVENT_BYTES = 1024
"""What an Event's message holds (Kueue's ``TruncateEventMessage``): the summary follows the Event's own
words, so no more of it than this is ever shown, and no more is kept on the decision."""


def considered_flavors(a: Assignment) -> str:
    """The summary of ``a``'s attempts, or "" when no pod set has one; at most :data:`EVENT_BYTES` bytes of it
    (cut at a character)."""
    parts = []
    for ps in a.pod_sets:
        if ps.attempts:
            said = _pod_set(ps.attempts)
            if said:
                parts.append(f"{ps.name}: {said}")
    summary = " | ".join(parts)
    if len(summary) <= EVENT_BYTES // 4:  # no character is more than 4 bytes
        return summary
    return summary.encode()[:EVENT_BYTES].decode(errors="ignore")


def _pod_set(attempts: list[Attempt]) -> str:
    merged: dict[str, tuple[int, int | None, int, frozenset[str]]] = {}
    for flavor, granular, borrow, reasons in attempts:
        mode = Granular.MODE[granular]
        possible = granular if granular in _POSSIBILITY else None
        seen = merged.get(flavor)
        if seen is not None:
            mode = min(mode, seen[0])
            if seen[1] is not None and (possible is None or seen[1] < possible):
                possible = seen[1]
            borrow = max(borrow, seen[2])
            reasons = seen[3].union(reasons)
        merged[flavor] = (mode, possible, borrow, frozenset(reasons))
    out = []
    for flavor in sorted(merged):
        mode, possible, borrow, reasons = merged[flavor]
        if mode == Mode.FIT and borrow == 0:
            continue
        said = f"preemptionMode={_POSSIBILITY[possible]}" if possible is not None else Mode.NAMES[mode]
        if borrow > 0:
            said += f";borrow={borrow}"
        if reasons:
            said += ";" + ";".join(sorted(reasons))
        out.append(f"{flavor}({said})")
    return ", ".join(out)
