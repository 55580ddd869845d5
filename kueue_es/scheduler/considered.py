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

from events.message_limits import truncate_message
from kueue_es.scheduler.flavors import Granular, Mode

if TYPE_CHECKING:
    from kueue_es.scheduler.flavors import Assignment, Attempt

_POSSIBILITY = {Granular.NO_CANDIDATES: "NoCandidates", Granular.PREEMPT: "Preempt",
                Granular.RECLAIM: "Reclaim"}
"""Granular modes that found preemption possible (with victims or not) -> Kueue's PreemptionPossibility."""


def considered_flavors(a: Assignment) -> str:
    """The summary of ``a``'s attempts, or "" when no pod set has one; cut as an Event's message is.

    Kueue cuts no summary, only the QuotaReserved Event it ends in (``TruncateEventMessage``), where it
    follows the Event's own words: no byte of it past the first 1024 is ever shown, so the decision keeps no
    more (up to 256 flavors with their reasons, over up to 18 pod sets, would otherwise put hundreds of KiB on
    one decision), cut by the same :func:`~events.message_limits.truncate_message`, which leaves the Event's
    bytes as they are."""
    parts = []
    for ps in a.pod_sets:
        if ps.attempts:
            said = _pod_set(ps.attempts)
            if said:
                parts.append(f"{ps.name}: {said}")
    return truncate_message(" | ".join(parts))


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
