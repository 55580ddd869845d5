"""What an eviction decision changed, kept until its outcome, so a rejected one can be taken back.

Kueue's eviction is one status write (``workload.Evict``): when the apiserver refuses it (a 422, a webhook's
403, a conflict re-read that invalidates it), nothing happened: the Workload stays admitted, its Job keeps
running, and a later cycle decides again. The fold applies an eviction the moment it is in the log
(Evicted=True, checks reset, requeue state, ...), so for each preemption or eviction still awaiting its
outcome it keeps the workload as it was before (:attr:`UnconfirmedEviction.before`) and as the decision left
it (:attr:`UnconfirmedEviction.after`). A ``DecisionRejected`` of that decision puts the workload back, but
only if nothing was folded on it since (it still equals ``after``): a later observed fact is never restored
over.

A deactivation is not kept: it sets ``spec.active=false`` and gives the quota back in the same step, and the
ClusterQueue may have admitted others on that quota before the outcome arrives. Kueue acts on the user's
``spec.active`` write anyway, so a refused deactivation's write is retried by the writer as before.
"""

from __future__ import annotations

import msgspec

from projections.workloads import WorkloadInfo

UNDO_LIMIT = 1024
"""How many evictions awaiting their outcome the fold keeps (the oldest go first), as the metrics do
(:data:`projections.metrics.UNCONFIRMED_LIMIT`): a log no connector carries out gets no outcomes."""

_FIELDS = WorkloadInfo.__struct_fields__


class UnconfirmedEviction(msgspec.Struct, array_like=True, gc=False):
    """One eviction decision whose outcome the connector has not reported yet."""

    decision: int
    """The decision's offset."""
    before: WorkloadInfo
    """The workload as it was before the decision (a copy: :class:`WorkloadInfo` changes in place)."""
    after: WorkloadInfo | None = None
    """As the decision's fold left it (None until that fold is through)."""
    backoff: int | None = None
    """``ClusterState.backoff`` of the workload before the decision (None: none)."""
    awaiting: bool = False
    """Whether it was in ``ClusterState.awaiting_release`` before the decision."""


def opened(decision: int, wl: WorkloadInfo, backoff: int | None, awaiting: bool) -> UnconfirmedEviction:
    """The record of an eviction about to be folded on ``wl``."""
    return UnconfirmedEviction(decision=decision, before=msgspec.structs.replace(wl), backoff=backoff,
                               awaiting=awaiting)


def closed(undo: UnconfirmedEviction, wl: WorkloadInfo) -> UnconfirmedEviction:
    """``undo`` with the workload as the decision's fold left it."""
    return msgspec.structs.replace(undo, after=msgspec.structs.replace(wl))


def remember(kept: dict[int, UnconfirmedEviction], undo: UnconfirmedEviction) -> None:
    """Keep ``undo`` until its outcome, dropping the oldest beyond :data:`UNDO_LIMIT`."""
    if len(kept) >= UNDO_LIMIT:
        del kept[next(iter(kept))]  # the oldest decision (kept in offset order)
    kept[undo.decision] = undo


def untouched(undo: UnconfirmedEviction, wl: WorkloadInfo | None) -> bool:
    """Whether ``wl`` is still exactly as the decision left it (same object, nothing folded on it since)."""
    return wl is not None and undo.after is not None and wl == undo.after


def put_back(undo: UnconfirmedEviction, wl: WorkloadInfo) -> None:
    """Give ``wl`` back every field the eviction changed, as it was before it (in place: indexes hold
    ``wl``)."""
    before, after = undo.before, undo.after
    assert after is not None
    for name in _FIELDS:
        value = getattr(before, name)
        if value != getattr(after, name):
            setattr(wl, name, value)
