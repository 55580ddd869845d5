"""Admission Fair Sharing's per-LocalQueue ledger: the fold of :attr:`ClusterState.afs_history
<projections.cluster.ClusterState.afs_history>` under one half-life and sampling interval, and its checkpoints.

The arithmetic is :mod:`kueue_es.scheduler.afs`'s (its module docstring says what it models); it lives here, below
the scheduler, because the projection compacts the history with it: a LocalQueue's history would otherwise grow by
about two entries per workload it admits, for as long as the cluster runs.

Compaction. Once a LocalQueue's list holds more than :data:`COMPACT_AT` entries, the projection folds it under the
Admission Fair Sharing configuration recorded in force (:func:`key_of`) and replaces it with one
:data:`AFS_CHECKPOINT` entry holding the fold's exact float state (consumed, admitted, last update, anchor). Folding
the checkpoint then the entries after it gives the same floats, bit for bit, as folding the raw entries under that
configuration: the checkpoint is that fold's state, restored as it was. It happens when an entry is appended (a
point of the log), so two replays, or a replay and a restore from a snapshot of it, compact alike. The projection
keeps that fold (:meth:`ClusterState.afs_ledger <projections.cluster.ClusterState.afs_ledger>`, derived: rebuilt
from the history when it is not there), taking in each LocalQueue's new entries when it compacts it or a reader
asks; the scheduler reads it wherever it folds under the recorded configuration, so the entries are folded once.

Which configuration. Everything that shows the usage folds under the configuration recorded in force: the LocalQueue
status and the usage gauge read it back from the log, and every scheduler loop records its configuration before it
decides (:func:`kueue_es.scheduler.config_record.pending`), as does the simulator; ``explain``/``pending``/``replay
--verify`` load it from the log unless told ``--config``. The exceptions: such an override, a caller folding a
state under a configuration it never recorded, and a recorded change of the half-life or interval. To stay bounded
the history cannot keep what each past entry would give under every configuration, so the rule is: an entry is
folded under the Admission Fair Sharing configuration in force when it was recorded (there is none without one:
no history is kept while no Configuration turning it on is recorded); a change of that configuration first
checkpoints every LocalQueue under the one it replaces. Kueue does alike, as it takes a new configuration by restarting and its LocalQueues then continue from the
consumed usage they had (v0.20's warm start from their status), not from their history refolded. A fold under
another configuration (an override) folds the raw entries under it and takes the checkpoints as they are.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from events.quantity import MILLI_RESOURCES
from projections import config_version, gates, go_duration

AFS_SETTLE, AFS_RELEASE, AFS_SEED, AFS_ADD, AFS_CHECKPOINT = 1, -1, 0, 2, 3
"""The signs of :attr:`ClusterState.afs_history` entries: a workload reached its LocalQueue's accounting anchor in a
ClusterQueue that orders by Admission Fair Sharing (its usage enters the admitted usage and its entry penalty
settles), left it (its usage leaves), the LocalQueue's seed, or a workload's usage entered without a settlement
(admitted in a ClusterQueue that does not order by it, which Kueue samples all the same, or counted from a restart:
when its LocalQueue appears or the tracking starts); or a checkpoint (:class:`AfsCheckpoint`, always first)."""

AFS_SEED_SCALE = 1_000
"""A LocalQueue's Admission Fair Sharing seed (:meth:`ClusterState.seed_afs`) is kept in thousandths of each
resource's unit: fine beside the floats the usage decays in, and a large memory usage still fits an int64."""

COMPACT_AT = 16
"""A LocalQueue's history holds at most this many entries past its checkpoint: more, and it is compacted."""

class AfsCheckpoint(msgspec.Struct, frozen=True, array_like=True):
    """A LocalQueue's ledger as folded up to ``time`` under (``half_life``, ``interval``): its exact floats."""

    time: int
    half_life: float
    interval: int
    consumed: tuple[tuple[str, float], ...]
    admitted: tuple[tuple[str, float], ...]
    last: int | None
    anchor: int | None


DEFAULT_HALF_LIFE, DEFAULT_INTERVAL = "0s", "5m"
"""``usageHalfLifeTime`` and ``usageSamplingInterval`` where the stanza leaves them out."""


@lru_cache(maxsize=64)
def key_from(half_life: str, interval: str) -> tuple[float, int]:
    """The (half-life in ms, unrounded: it only divides elapsed times, and a sub-millisecond one is not zero, which
    resets; sampling interval in ms, rounded up, zero being Kueue's default of 5 minutes) a ledger folds under, from
    the two Go durations: the one reading of them, the scheduler's (``AdmissionFairSharingConfig.key``) and the
    projection's (:func:`key_of`). :class:`~projections.go_duration.DurationError` for one Go refuses."""
    half_ns, interval_ns = go_duration.parse_ns(half_life), go_duration.parse_ns(interval)
    return half_ns / 1e6, -(-interval_ns // 1_000_000) or 300_000


def key_of(document: dict[str, Any] | None) -> tuple[float, int] | None:
    """:func:`key_from` of a recorded Configuration document with Admission Fair Sharing on (stanza and gate); None
    where it is off or does not read (nothing is compacted then)."""
    hub = config_version.as_hub(document)
    if not hub:
        return None
    stanza = hub.get("admissionFairSharing")
    if not isinstance(stanza, dict) or not gates.enabled(gates.of_document(document), gates.ADMISSION_FAIR_SHARING):
        return None
    half = stanza.get("usageHalfLifeTime", DEFAULT_HALF_LIFE)
    interval = stanza.get("usageSamplingInterval", DEFAULT_INTERVAL)
    if not isinstance(half, str) or not isinstance(interval, str):
        return None
    try:
        key = key_from(half, interval)
    except go_duration.DurationError:
        return None
    if key[0] < 0 or key[1] < 0:
        return None
    return key


def amount(resource: str, value: int) -> float:
    """Kueue's approximate float of a quantity: cpu in cores, everything else in its units."""
    return value / 1000.0 if resource in MILLI_RESOURCES else float(value)


class LedgerQueue:
    __slots__ = ("admitted", "anchor", "consumed", "last")

    def __init__(self) -> None:
        self.consumed: dict[str, float] = {}
        self.admitted: dict[str, float] = {}
        self.last: int | None = None
        """When consumed was last updated (sampled, seeded or settled)."""
        self.anchor: int | None = None
        """When the LocalQueue was first seen: its samples before any update fall at steps from here."""


class AfsLedger:
    """The consumed usage of LocalQueues, folded from their history under one half-life and sampling interval."""

    def __init__(self, half_life: float, interval: int) -> None:
        self.half_life = half_life
        """In ms, unrounded: it only divides elapsed times (a sub-millisecond half-life is not zero, which resets)."""
        self.interval = interval
        self.penalty_alpha = self.alpha(self.interval)
        self.queues: dict[str, LedgerQueue] = {}
        self.lists: dict[str, list] = {}
        """LocalQueue -> the history list folded in (``ClusterState.afs_history``'s: a LocalQueue dropped and seen
        again, or compacted, has a new one, folded afresh)."""
        self.folded: dict[str, int] = {}
        """LocalQueue -> how many entries of its list are folded in."""
        self.memos: dict[str, Any] = {}
        """A reader's answers over every LocalQueue (the scheduler's next sample), valid until one's ledger moves."""

    def changed(self) -> None:
        """Some LocalQueue's ledger moved: the readers' memos go."""
        if self.memos:
            self.memos.clear()

    def extend(self, lq: str, entries: list | None) -> None:
        """Take in what changed in LocalQueue ``lq``'s history: its new entries, or all of a new list, or forget it."""
        if entries is None:
            self.queues.pop(lq, None)
            self.lists.pop(lq, None)
            self.folded.pop(lq, None)
            self.changed()
            return
        start = self.folded.get(lq, 0)
        if self.lists.get(lq) is not entries:
            self.queues.pop(lq, None)
            self.lists[lq] = entries
            start = 0
        for i in range(start, len(entries)):
            time, sign, usage = entries[i]
            self.apply(time, lq, sign, usage)
        if len(entries) != start:
            self.changed()
        self.folded[lq] = len(entries)

    def alpha(self, elapsed: int) -> float:
        if self.half_life <= 0:
            return 0.0
        return 1.0 - 0.5 ** (max(0, elapsed) / self.half_life)

    def key(self) -> tuple:
        return (self.half_life, self.interval)

    def _samples(self, q: LedgerQueue, now: int) -> tuple[dict[str, float], int | None]:
        """Consumed after the samples due by ``now`` (without recording them) and the time of the last one."""
        if q.last is None:
            return q.consumed, None
        n = (now - q.last) // self.interval
        if n <= 0:
            return q.consumed, q.last
        if self.half_life <= 0:
            return {}, q.last + n * self.interval
        # n samples with the admitted usage unchanged: c ← u + (c − u)·q^n, q = 0.5^(interval / half-life)
        factor = 0.5 ** (n * self.interval / self.half_life)
        out = {}
        for r in sorted(set(q.consumed) | set(q.admitted)):
            u = q.admitted.get(r, 0.0)
            out[r] = u + (q.consumed.get(r, 0.0) - u) * factor
        return out, q.last + n * self.interval

    def _advance(self, q: LedgerQueue, now: int, settles: bool) -> None:
        if q.last is None:
            # nothing sampled yet but an empty usage: a settlement starts the clock; a change of the admitted usage
            # alone (no settlement) leaves the samples at their steps from the LocalQueue's appearance
            q.last = now if settles or q.anchor is None else q.anchor + (now - q.anchor) // self.interval * self.interval
            return
        q.consumed, q.last = self._samples(q, now)  # type: ignore[assignment]

    def apply(self, time: int, lq: str, sign: int, usage: Any) -> None:
        if sign == AFS_CHECKPOINT:
            self.restore(lq, usage)
            return
        q = self.queues.get(lq)
        if q is None:
            q = self.queues[lq] = LedgerQueue()
        if sign == AFS_SEED:  # first seen: consumed restarts from the persisted status (its seed), none for a new one
            q.anchor = time
            q.consumed = {r: v / AFS_SEED_SCALE for r, v in usage}
            q.last = time if usage else None
            return
        self._advance(q, time, sign == AFS_SETTLE)
        step = -1 if sign == AFS_RELEASE else 1
        for r, v in usage:
            q.admitted[r] = q.admitted.get(r, 0.0) + step * amount(r, v)
        if sign != AFS_SETTLE:
            if sign == AFS_ADD and time == q.anchor and self.half_life > 0:
                # counted where the LocalQueue is first seen: its first sample takes the usage it finds
                # admitted at weight zero, so each of its resources is listed (at 0 unless seeded), as Kueue's
                # status lists it
                for r, _ in usage:
                    q.consumed.setdefault(r, 0.0)
            return
        # settle: decay towards the admitted usage over the time since the last update, then add the penalty
        assert q.last is not None
        a = self.alpha(time - q.last)
        consumed = {}
        for r in sorted(set(q.consumed) | set(q.admitted)):
            consumed[r] = q.consumed.get(r, 0.0) * (1 - a) + q.admitted.get(r, 0.0) * a
        for r, v in usage:
            consumed[r] = consumed.get(r, 0.0) + amount(r, v) * self.penalty_alpha
        q.consumed, q.last = consumed, time

    def consumed(self, lq: str, now: int) -> dict[str, float]:
        q = self.queues.get(lq)
        return self._samples(q, now)[0] if q is not None else {}

    def shown(self, lq: str, now: int) -> tuple[dict[str, float], int] | None:
        """Consumed as of its last update by ``now`` and that update's time: what the LocalQueue's status shows
        (None for a LocalQueue never seen)."""
        q = self.queues.get(lq)
        if q is None:
            return None
        if q.last is None:
            if q.anchor is None or now < q.anchor:
                return None
            return dict(q.consumed), q.anchor + (now - q.anchor) // self.interval * self.interval
        consumed, last = self._samples(q, now)
        return consumed, last if last is not None else q.last

    def restore(self, lq: str, cp: AfsCheckpoint) -> None:
        """LocalQueue ``lq``'s ledger as checkpointed (its dicts in their order, so that nothing differs)."""
        q = self.queues[lq] = LedgerQueue()
        q.consumed, q.admitted = dict(cp.consumed), dict(cp.admitted)
        q.last, q.anchor = cp.last, cp.anchor

    def checkpoint(self, lq: str, time: int) -> AfsCheckpoint:
        q = self.queues.get(lq) or LedgerQueue()
        return AfsCheckpoint(time, self.half_life, self.interval, tuple(q.consumed.items()),
                             tuple(q.admitted.items()), q.last, q.anchor)

    def compact(self, lq: str, entries: list) -> list:
        """LocalQueue ``lq``'s entries as one checkpoint of this ledger's fold of them (a new list, which the ledger
        takes as folded): the entries not folded in yet are first."""
        self.extend(lq, entries)
        cp = self.checkpoint(lq, entries[-1][0])
        out = [(cp.time, AFS_CHECKPOINT, cp)]
        self.lists[lq], self.folded[lq] = out, 1
        return out
