"""``ConcurrentAdmission``: which variant of a parent may preempt, one at a time (Kueue's variant controller).

Every variant is made with the ``kueue.x-k8s.io/concurrent-admission`` preemption gate closed; a variant whose
scheduling would preempt while it is closed preempts nothing and waits with ``BlockedOnPreemptionGates`` True
(:mod:`kueue_es.scheduler.cycle`). Among the variants that may still be admitted (active, unfinished, holding no
quota), in the order of their flavors in the ClusterQueue's resource group, the first one so blocked whose gate is
not open has it opened (``VariantPreemptionGateOpened``, the decision's log time as the gate's
``lastTransitionTime``) — the most favourable flavor first, however long the others have waited — unless another
of them had its gate opened less than 5 minutes (:data:`PREEMPTION_TIMEOUT_MS`, fixed in Kueue) before: then none
is opened until that much log time has passed since (a deadline the scheduler wakes at, :func:`deadlines`).

A parent that lists preemption gates of its own (a MultiKueue worker's copy) shows whether a variant is blocked:
``BlockedOnPreemptionGates`` True as the variant blocked longest has it (its reason and ``lastTransitionTime``,
"Variant Workload "<namespace>/<name>" is blocked on preemption gates"), False (``VariantsNotPreemptionGated``,
"No Variant Workload is blocked on preemption gates") once none is (``ParentPreemptionSignal``, :func:`signal`).

Time is the log's: the decision's ``time`` and the ``lastTransitionTime`` the variants show, never a clock.
"""

from __future__ import annotations

from events import schema as ev
from events.timefmt import parse_time
from projections.cluster import ClusterState
from projections.preemption_gates import (
    BLOCKED_ON_PREEMPTION_GATES,
    CONCURRENT_ADMISSION_GATE,
    opened_at,
)
from projections.variants import variants_of
from projections.workloads import FINISHED, WorkloadInfo, is_parent

PREEMPTION_TIMEOUT_MS = 5 * 60 * 1000
"""How long after opening one variant's gate Kueue's controller waits before it opens another's."""


def _admissible(variants: list[WorkloadInfo], active: dict[str, bool]) -> list[WorkloadInfo]:
    return [v for v in variants if active.get(v.key, v.active) and v.phase != FINISHED and not v.reserving]


def _opened_at(wl: WorkloadInfo) -> int | None:
    return opened_at(wl.gate_states, CONCURRENT_ADMISSION_GATE)


def _blocked(wl: WorkloadInfo) -> bool:
    c = wl.condition(BLOCKED_ON_PREEMPTION_GATES)
    return c is not None and c.status == "True"


def next_gate(variants: list[WorkloadInfo], now: int | None, active: dict[str, bool] | None = None
              ) -> tuple[WorkloadInfo | None, int | None]:
    """(the variant whose gate opens now, or None; when to look again, or None) among ``variants`` (in flavor
    order; ``active``: their ``spec.active`` as decided in this pass; ``now`` None: only when a blocked variant may
    have its gate opened, however far that is from now)."""
    admissible = _admissible(variants, active or {})
    candidate = next((v for v in admissible if _opened_at(v) is None and _blocked(v)), None)
    if candidate is None:
        return None, None
    opened = [t for t in map(_opened_at, admissible) if t is not None]
    if opened and (now is None or now - max(opened) < PREEMPTION_TIMEOUT_MS):
        return None, max(opened) + PREEMPTION_TIMEOUT_MS
    return candidate, None


NOT_GATED = "VariantsNotPreemptionGated"
NOT_GATED_MESSAGE = "No Variant Workload is blocked on preemption gates"


def _since(wl: WorkloadInfo) -> int:
    c = wl.condition(BLOCKED_ON_PREEMPTION_GATES)
    return parse_time(c.last_transition_time) if c is not None and c.last_transition_time else 0


def signal(parent: WorkloadInfo, variants: list[WorkloadInfo], active: dict[str, bool], base: dict
           ) -> list[ev.Decision]:
    """The parent's ``BlockedOnPreemptionGates`` when it differs from what its variants say (none, or one), for a
    parent that lists preemption gates (as the fold knows them: one closed, or any shown in its status)."""
    if not (parent.preemption_gated or parent.gate_states):
        return []
    current = parent.condition(BLOCKED_ON_PREEMPTION_GATES)
    blocked = [v for v in _admissible(variants, active) if _blocked(v)]
    if not blocked:
        if current is None or current.status != "True":
            return []
        return [ev.ParentPreemptionSignal(key=parent.key, uid=parent.uid, status=False, reason=NOT_GATED,
                                          message=NOT_GATED_MESSAGE, **base)]
    oldest = min(blocked, key=_since)  # the first in flavor order among equally old ones
    cond = oldest.condition(BLOCKED_ON_PREEMPTION_GATES)
    assert cond is not None
    message = f'Variant Workload "{oldest.key}" is blocked on preemption gates'
    if current is not None and (current.status, current.reason, current.message) == ("True", cond.reason, message):
        return []
    return [ev.ParentPreemptionSignal(key=parent.key, uid=parent.uid, status=True, reason=cond.reason,
                                      message=message, since=cond.last_transition_time, **base)]


def open_gate(variants: list[WorkloadInfo], active: dict[str, bool], base: dict) -> list[ev.Decision]:
    """The gate the controller opens now among a parent's ``variants`` (none, or one)."""
    chosen, _ = next_gate(variants, base["time"], active)
    if chosen is None:
        return []
    return [ev.VariantPreemptionGateOpened(key=chosen.key, uid=chosen.uid, gate=CONCURRENT_ADMISSION_GATE, **base)]


def deadlines(state: ClusterState) -> list[tuple[int, str]]:
    """(when the controller may open another variant's gate, parent key) of every parent whose blocked variants
    wait for the timeout since a gate was opened, in time order: the parents of the fold's variant index only."""
    out = []
    wls = state.workloads
    for key in state.variants_of:
        parent = wls.get(key)
        if parent is None or not is_parent(parent) or parent.phase == FINISHED:
            continue
        _, at = next_gate(variants_of(state, parent), None)
        if at is not None:
            out.append((at, key))
    return sorted(out)
