"""What an eviction decision changed, kept until its outcome, so a rejected one can be taken back.

Kueue's eviction is one status write (``workload.Evict``): when the apiserver refuses it (a 422, a webhook's
403, a conflict re-read that invalidates it), nothing happened: the Workload stays admitted, its Job keeps
running, and a later cycle decides again. The fold applies an eviction the moment it is in the log
(Evicted=True, checks reset, requeue state, ...), so for each preemption or eviction still awaiting its
outcome it keeps the workload as it was before (:attr:`UnconfirmedEviction.before`) and as the decision left
it (:attr:`UnconfirmedEviction.after`). A ``DecisionRejected`` of that decision puts the workload back, but
only if its ``WorkloadInfo`` is still exactly ``after`` (no event about it changed a field since: a later
observed fact is never restored over), and nothing was decided on its behalf since that acts in the cluster
without changing it (the deletion of its ProvisioningRequests on eviction: :func:`forget`). Events only "also
about" a workload that change none of its fields and act on nothing else (a ``WorkloadPending`` status
message) do not keep it.

A rejected eviction taken back is not decided again before its :class:`Refusal` expires (or the workload's
next event), so a refusal that lifts (a webhook back up, a policy removed) is followed by the eviction without
anything else happening to the victim, while one that persists costs a write now and then, not one per turn of
the loop. How long it waits is Kueue's: a preemption is the scheduler's, and Kueue requeues a preemptor whose
preemption failed straight onto the heap (``RequeueReasonPreemptionFailed``, Kueue #7665), so it is retried at
the next scheduling cycle, which a loop that admits nothing runs after a backoff of 1 ms doubling to 100 ms
(Kueue's ``pkg/util/wait``; to 10 s here, :data:`SCHEDULER_BACKOFF_MS`, as each retry is kept in the log); any
other eviction is the workload controller's, whose failed reconcile is requeued after controller-runtime's
per-item backoff (5 ms doubling to 1000 s there; 1 s doubling to 1000 s here, as
:func:`projections.create_failures.backoff_ms`). That per-item count is forgotten only once a reconcile
succeeds, so an event of the workload retries at once but keeps the count (:func:`lifted`).

A deactivation is not kept: it sets ``spec.active=false`` and gives the quota back in the same step, and the
ClusterQueue may have admitted others on that quota before the outcome arrives. Kueue acts on the user's
``spec.active`` write anyway, so a refused deactivation's write is retried by the writer as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import msgspec

from projections.create_failures import backoff_ms
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
    refusals: int = 0
    """Rejections in a row of the workload's evictions before this one (its :class:`Refusal` it lifted)."""
    preemption: bool = False
    """Whether it is a preemption (the scheduler's, retried at its next cycle) rather than an eviction by the
    workload controller."""


class Refusal(msgspec.Struct, array_like=True, gc=False, frozen=True):
    """A workload's rejected eviction taken back: none is decided again before ``retry_at`` or its next
    event."""

    decision: int
    """The offset of the eviction rejected last."""
    refusals: int
    """Its evictions rejected in a row (the backoff grows with them)."""
    retry_at: int
    """When (log time, ms) an eviction of it may be decided again: :func:`retry_after` the rejection; lowered
    to the time of the workload's next event (:func:`lifted`)."""


SCHEDULER_BACKOFF_MS = (1, 10_000)
"""The first and the longest wait before a refused preemption is decided again (ms). The first is Kueue's: its
scheduling loop waits 1 ms, doubling, between cycles that admit nothing, and a failed preemption's preemptor,
requeued onto the heap, is tried again then. Kueue stops doubling at 100 ms; kueue-es goes on to 10 s, because
each retry appends four records to the log: a preemption refused for hours would grow it by some 40 records a
second at 100 ms, 0.4 at 10 s."""


def retry_after(refusals: int, preemption: bool) -> int:
    """How long (ms) after its ``refusals``-th rejection in a row an eviction waits before it is decided
    again: a preemption the scheduling loop's backoff (1 ms doubling to 10 s, :data:`SCHEDULER_BACKOFF_MS`),
    any other eviction the workload controller's per-item backoff
    (:func:`projections.create_failures.backoff_ms`: 1 s doubling to 1000 s)."""
    if preemption:
        first, longest = SCHEDULER_BACKOFF_MS
        return min(first << min(refusals - 1, 16), longest)
    return backoff_ms(refusals)


def refused(undo: UnconfirmedEviction, time: int) -> Refusal:
    """The refusal a rejection of ``undo`` at ``time`` leaves."""
    refusals = undo.refusals + 1
    return Refusal(undo.decision, refusals, time + retry_after(refusals, undo.preemption))


def lifted(refusal: Refusal, wl: WorkloadInfo | None, time: int) -> Refusal | None:
    """``refusal`` after an event of its workload at log time ``time`` that decided no eviction of it: Kueue's
    event requeues the workload at once, and controller-runtime forgets its failures only once a reconcile
    succeeds. So one still waiting is lifted now with its count kept (an eviction decided next backs off
    longer when refused again); one whose retry came and went with no eviction decided (that reconcile had
    nothing to evict: it succeeded), or whose workload holds no quota any more, is forgotten (None)."""
    if wl is None or not wl.reserving or refusal.retry_at <= time:
        return None
    return msgspec.structs.replace(refusal, retry_at=time)


def opened(decision: int, wl: WorkloadInfo, backoff: int | None, awaiting: bool,
           preemption: bool = False) -> UnconfirmedEviction:
    """The record of an eviction (``preemption``: a preemption) about to be folded on ``wl``."""
    return UnconfirmedEviction(decision=decision, before=msgspec.structs.replace(wl), backoff=backoff,
                               awaiting=awaiting, preemption=preemption)


def closed(undo: UnconfirmedEviction, wl: WorkloadInfo) -> UnconfirmedEviction:
    """``undo`` with the workload as the decision's fold left it."""
    return msgspec.structs.replace(undo, after=msgspec.structs.replace(wl))


class KeptEvictions(Mapping[int, UnconfirmedEviction]):
    """The evictions awaiting their outcome, by decision offset in offset order (the oldest first), indexed by
    workload too: the job connectors ask :meth:`awaits_outcome` for every workload they sync, and a deletion
    of ProvisioningRequests forgets a workload's (:meth:`forget`), so neither scans what is kept. The index is
    derived: a snapshot stores the records alone, and restoring them rebuilds it."""

    __slots__ = ("_by_decision", "_by_key")

    def __init__(self, undos: Iterable[UnconfirmedEviction] = ()) -> None:
        self._by_decision: dict[int, UnconfirmedEviction] = {}
        self._by_key: dict[str, list[int]] = {}
        """Workload key -> the offsets of its evictions kept (ascending; rarely more than one)."""
        for undo in undos:
            self.remember(undo)

    def __getitem__(self, decision: int) -> UnconfirmedEviction:
        return self._by_decision[decision]

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_decision)

    def __len__(self) -> int:
        return len(self._by_decision)

    def __repr__(self) -> str:
        return f"KeptEvictions({list(self._by_decision.values())!r})"

    def remember(self, undo: UnconfirmedEviction) -> None:
        """Keep ``undo`` until its outcome, dropping the oldest beyond :data:`UNDO_LIMIT` (decisions come in
        offset order)."""
        if len(self._by_decision) >= UNDO_LIMIT:
            self.pop(next(iter(self._by_decision)))  # the oldest decision
        self._by_decision[undo.decision] = undo
        self._by_key.setdefault(undo.before.key, []).append(undo.decision)

    def pop(self, decision: int) -> UnconfirmedEviction | None:
        """The eviction decided at ``decision``, no longer kept (None: none is)."""
        undo = self._by_decision.pop(decision, None)
        if undo is not None:
            key = undo.before.key
            decisions = self._by_key[key]
            decisions.remove(decision)
            if not decisions:
                del self._by_key[key]
        return undo

    def forget(self, key: str) -> None:
        """Take back no eviction of workload ``key`` still awaiting its outcome: something was done in the
        cluster on its behalf since (its ProvisioningRequests deleted), which its rejection cannot undo."""
        for decision in self._by_key.pop(key, ()):
            del self._by_decision[decision]

    def awaits_outcome(self, key: str) -> bool:
        """Whether an eviction of workload ``key`` awaits its outcome, so may still be taken back: what the
        connectors wait out before acting on it. Once rejected and not taken back (something was folded on the
        workload since, or done for it in the cluster), none is kept: no write will show it, and they act on
        the log's view, as before."""
        return key in self._by_key


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
