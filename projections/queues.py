"""Pending workloads per ClusterQueue, as Kueue's queue manager keeps them.

Each ClusterQueue has an *active* ordered set (the heap: priority first, then queue-order time, then UID — a
total order, so the head never depends on insertion history) and an *inadmissible* set of parked workloads
that wait for something to change (a flush). Under SchedulingEquivalenceHashing, equivalent workloads — equal
priority and pod-set shape (:meth:`WorkloadInfo.shape`) — are parked together when one of them fails for want of
room, and new arrivals of a parked shape are parked on sight until the next flush; the queue remembers the
QuotaReserved reason that failure got, which the workload controller shows on the workloads parked with it.

For the visibility API, which lists every pending workload (active and parked) in queue order and numbers
them within their LocalQueues, a queue can also index its sort keys as one sorted list and per LocalQueue, so
that a page deep in a large queue is found by bisection instead of by a pass over everything before it. The
index is built by the first reader (:meth:`ClusterQueueQueue.indexed`) and kept from then on: a replay, which
never asks, does not pay for three sorted lists per queued workload.
"""

from __future__ import annotations

from collections.abc import Container
from operator import itemgetter

from sortedcontainers import SortedList

SortKey = tuple[int, int, str, str]
"""(-priority, queue-order time, uid, key): smaller is better."""
_KEY = itemgetter(3)


class ClusterQueueQueue:
    __slots__ = ("active", "by_local_queue", "entries", "inadmissible", "local_queue_of", "name", "parked_in",
                 "parked_shapes", "pending", "preemptor", "shapes", "sticky")

    def __init__(self, name: str = "", parked_in: set[str] | None = None) -> None:
        self.active: SortedList = SortedList()
        self.entries: dict[str, SortKey] = {}
        """key -> sort key, for workloads in ``active``."""
        self.shapes: dict[str, object] = {}
        """key -> equivalence shape, for workloads in ``active`` or ``inadmissible``."""
        self.inadmissible: dict[str, SortKey] = {}
        self.parked_shapes: dict[object, str] = {}
        """Shapes parked since the last flush -> the QuotaReserved reason of the failure that parked them (Kueue's
        ``hashToBulkMoveReason``; empty when not known: restored from an older snapshot)."""
        self.sticky: str | None = None
        """BestEffortFIFO's sticky preemptor: the workload last requeued while waiting for its preemptions."""
        self.preemptor: str | None = None
        """Kueue's preemptor workload, in either queueing strategy: the one last requeued while waiting for its
        preemptions (under BestEffortFIFO, the sticky one). ``PrioritizePreemptorWorkloads`` puts it first in a
        cycle (:mod:`kueue_es.scheduler.cycle`)."""
        self.name = name
        self.parked_in = parked_in
        """A set shared by the queues of one state: this queue puts its ``name`` there whenever it parks a
        workload or a shape, so the state finds the queues to flush without looking at every queue. Whoever
        flushes takes the name out once nothing is parked."""
        self.pending: SortedList | None = None
        """Sort keys of every workload here, active and parked (None until :meth:`indexed` is first called)."""
        self.local_queue_of: dict[str, tuple[str, str]] = {}
        """key -> (namespace, LocalQueue name) of every workload here."""
        self.by_local_queue: dict[str, dict[str, SortedList]] = {}
        """LocalQueue name -> namespace -> sort keys of its workloads here: one sorted list per LocalQueue
        (namespace and name, as Kueue numbers a workload's position in its LocalQueue since v0.20)."""

    def _note_parked(self) -> None:
        if self.parked_in is not None:
            self.parked_in.add(self.name)

    def __len__(self) -> int:
        return len(self.entries) + len(self.inadmissible)

    def push(self, key: str, sort_key: SortKey, shape: object, *, parked: bool = False,
             local_queue: tuple[str, str] = ("", ""), moved_in: bool = False) -> None:
        """Queue ``key``; ``local_queue`` is its (namespace, LocalQueue name). ``moved_in``: its LocalQueue was just
        moved here from another ClusterQueue, which Kueue treats as a fresh arrival on the active heap whatever
        shapes this queue has parked. A workload pushed again stays the sticky head and the preemptor if it
        was: Kueue's ``PushOrUpdate`` updates it in place and forgets neither (its removal or a requeue
        does)."""
        self.remove(key, forget=False)
        self.shapes[key] = shape
        self._index(key, sort_key, local_queue)
        if parked or (not moved_in and shape in self.parked_shapes):
            self.inadmissible[key] = sort_key
            self._note_parked()
        else:
            self.entries[key] = sort_key
            self.active.add(sort_key)

    def remove(self, key: str, *, forget: bool = True) -> None:
        """``key`` leaves this queue. ``forget``: as in Kueue's ``delete``, it is no longer the sticky head
        nor the preemptor; without, it is taken out to be pushed again at once (an update in place, which
        keeps both)."""
        sk = self.entries.pop(key, None)
        if sk is not None:
            self.active.remove(sk)
        parked = self.inadmissible.pop(key, None)
        if sk is not None or parked is not None:
            self._unindex(key, sk if sk is not None else parked)
        self.shapes.pop(key, None)
        if forget:
            if self.sticky == key:
                self.sticky = None
            if self.preemptor == key:
                self.preemptor = None

    def park(self, key: str, *, bulk: bool, reason: str = "") -> list[str]:
        """Move ``key`` to the inadmissible set; with ``bulk``, park its shape for ``reason`` (the QuotaReserved
        reason its failure got) and every active workload of that shape with it. Returns the workloads whose
        parking changed: ``key`` and, with ``bulk``, every parked workload of the shape (moved now or before)."""
        sk = self.entries.pop(key, None)
        if sk is not None:
            self.active.remove(sk)
            self.inadmissible[key] = sk
        if self.sticky == key:
            self.sticky = None
        if self.preemptor == key:
            self.preemptor = None
        self._note_parked()
        if not bulk or key not in self.shapes:
            return [key]
        shape = self.shapes[key]
        self.parked_shapes[shape] = reason
        same = [k for k, s in self.shapes.items() if s == shape]
        for other in same:
            osk = self.entries.pop(other, None)
            if osk is not None:
                self.active.remove(osk)
                self.inadmissible[other] = osk
        return same

    def no_fit_reason(self, key: str) -> str | None:
        """The reason ``key``'s shape was parked for, while ``key`` is parked and its shape is (Kueue's
        ``GetNoFitReason``); None otherwise."""
        if key not in self.inadmissible:
            return None
        return self.parked_shapes.get(self.shapes[key])

    def flush(self, eligible) -> list[str]:
        """Move parked workloads for which ``eligible(key)`` holds back to the active set."""
        self.parked_shapes.clear()
        moved = [k for k in sorted(self.inadmissible) if eligible(k)]
        for k in moved:
            sk = self.inadmissible.pop(k)
            self.entries[k] = sk
        if moved:
            self.active.update(self.entries[k] for k in moved)
        return moved

    def rekey(self, sort_key) -> None:
        """Give every workload here the key ``sort_key(key)`` says (the queue order changed), each where it
        waits."""
        self.entries = {k: sort_key(k) for k in self.entries}
        self.inadmissible = {k: sort_key(k) for k in self.inadmissible}
        self.active = SortedList(self.entries.values())
        if self.pending is not None:
            self.pending = None
            self.indexed()

    def _index(self, key: str, sort_key: SortKey, local_queue: tuple[str, str]) -> None:
        self.local_queue_of[key] = local_queue
        if self.pending is None:
            return
        self.pending.add(sort_key)
        ns, name = local_queue
        self.by_local_queue.setdefault(name, {}).setdefault(ns, SortedList()).add(sort_key)

    def _unindex(self, key: str, sort_key: SortKey) -> None:
        ns, name = self.local_queue_of.pop(key)
        if self.pending is None:
            return
        self.pending.remove(sort_key)
        by_ns = self.by_local_queue[name]
        keys = by_ns[ns]
        keys.remove(sort_key)
        if not keys:
            del by_ns[ns]
            if not by_ns:
                del self.by_local_queue[name]

    def indexed(self) -> ClusterQueueQueue:
        """This queue with its visibility index (``pending``, ``by_local_queue``) built, from ``entries``,
        ``inadmissible`` and ``local_queue_of``; once built, it is kept up to date."""
        if self.pending is not None:
            return self
        everything = {**self.entries, **self.inadmissible}
        self.pending = SortedList(everything.values())
        grouped: dict[str, dict[str, list[SortKey]]] = {}
        for k, (ns, name) in self.local_queue_of.items():
            grouped.setdefault(name, {}).setdefault(ns, []).append(everything[k])
        self.by_local_queue = {name: {ns: SortedList(sks) for ns, sks in by_ns.items()}
                               for name, by_ns in grouped.items()}
        return self

    def sticky_key(self) -> SortKey | None:
        """The sort key of the sticky preemptor, when it is still here (it leads the visibility order)."""
        s = self.sticky
        if s is None:
            return None
        sk = self.entries.get(s)
        return sk if sk is not None else self.inadmissible.get(s)

    def head(self, taken: Container[str] = ()) -> str | None:
        """The workload tried next: the sticky preemptor while it is active, else the first by sort key (priority,
        queue-order time, UID); none of ``taken`` (a cycle's heads and refills so far)."""
        sticky = self.sticky
        if sticky is not None and sticky in self.entries and sticky not in taken:
            return sticky
        for sk in self.active:
            if sk[3] not in taken:
                return sk[3]
        return None

    def ordered(self) -> list[str]:
        """Every pending workload — active and parked alike — in Kueue's queue order: the sticky preemptor
        first, then by sort key (priority, queue-order time, UID). That is the order Kueue's visibility API
        lists a ClusterQueue in when Admission Fair Sharing is off (with it, LocalQueue usage comes first:
        :mod:`kueue_es.scheduler.visibility`)."""
        merged = list(self.active)  # already in order
        if self.inadmissible:
            merged += sorted(self.inadmissible.values())
            merged.sort()  # two sorted runs: one linear merge
        keys = list(map(_KEY, merged))
        sticky = self.sticky
        if sticky is not None and (sticky in self.entries or sticky in self.inadmissible):
            keys.remove(sticky)
            keys.insert(0, sticky)
        return keys
