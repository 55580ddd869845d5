"""A ClusterQueue's visibility order read a page at a time from its sorted index, Admission Fair Sharing or not.

The visibility API lists a ClusterQueue's pending workloads by their LocalQueue's usage first when Admission Fair
Sharing orders the queue, then in the queue's own order: the sticky preemptor, then by sort key (priority,
queue-order time, UID). Grouping the LocalQueues by usage, the whole order is the groups one after the other, lower
usage first, each group its LocalQueues' workloads merged in the queue's own order. Each LocalQueue's workloads
are already a sorted list in the queue's visibility index (:meth:`projections.queues.ClusterQueueQueue.indexed`),
so a page and a workload's positions are read from those lists, the whole order never being sorted:

- a group of one LocalQueue, or of all of them (always so without Admission Fair Sharing, where every LocalQueue
  counts alike), is read by bisection: a page deep in it costs what the first page does;
- a group of several LocalQueues of equal usage, not all, is merged from its start to the page;
- a workload's position is the size of the groups before its own plus, per LocalQueue of its group, how many of
  that LocalQueue's workloads sort before it (bisection); its position in its own LocalQueue (how Kueue numbers
  the entries on the ClusterQueue endpoint) is counted the same way, over that LocalQueue alone.

:func:`kueue_es.scheduler.visibility.straightforward` is the definition the pages are checked against.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Iterator
from itertools import chain, islice

from sortedcontainers import SortedList

from projections.queues import ClusterQueueQueue, SortKey

LocalQueueId = tuple[str, str]
"""(namespace, name)."""


def window(keys: SortedList, head: SortKey | None, offset: int, limit: int) -> list[SortKey]:
    """Positions ``offset``..``offset+limit`` of the sequence ``head`` (when given; it is in ``keys``) then
    ``keys`` without it."""
    out: list[SortKey] = []
    if limit <= 0:
        return out
    if head is not None and offset == 0:
        out.append(head)
    start = max(offset - (head is not None), 0)
    if head is not None and keys.bisect_left(head) < start:
        start += 1  # the head, listed first, is behind the window in ``keys``
    for sk in keys.islice(start, start + limit + 1):
        if len(out) >= limit:
            break
        if sk != head:
            out.append(sk)
    return out


class VisibilityOrder:
    """The visibility order of one indexed queue under one usage of its LocalQueues (None: all alike)."""

    __slots__ = ("group_of", "groups", "q", "starts", "sticky", "sticky_lq")

    def __init__(self, q: ClusterQueueQueue, usage: Callable[[LocalQueueId], float] | None = None) -> None:
        q = q.indexed()
        self.q = q
        self.sticky = q.sticky_key()
        self.sticky_lq: LocalQueueId | None = q.local_queue_of[self.sticky[3]] if self.sticky is not None else None
        lqs = sorted((ns, name) for name, by_ns in q.by_local_queue.items() for ns in by_ns)
        if usage is None:
            ranked = [(0.0, lq) for lq in lqs]
        else:
            ranked = sorted(((usage(lq), lq) for lq in lqs), key=lambda pair: pair[0])  # stable: ties by name
        self.groups: list[list[LocalQueueId]] = []
        self.starts: list[int] = []
        self.group_of: dict[LocalQueueId, int] = {}
        size = 0
        last: float | None = None
        for value, lq in ranked:
            if not self.groups or value != last:
                self.groups.append([])
                self.starts.append(size)
                last = value
            self.groups[-1].append(lq)
            self.group_of[lq] = len(self.groups) - 1
            size += len(self._keys(lq))

    def _keys(self, lq: LocalQueueId) -> SortedList:
        ns, name = lq
        return self.q.by_local_queue[name][ns]

    def _whole(self, g: int) -> bool:
        """Whether group ``g`` is every LocalQueue of the queue (its sequence is the queue's ``pending``)."""
        return len(self.groups[g]) == len(self.group_of)

    def _head(self, g: int) -> SortKey | None:
        """The sticky preemptor when its LocalQueue is in group ``g`` (it leads the group)."""
        return self.sticky if self.sticky_lq is not None and self.group_of[self.sticky_lq] == g else None

    def _group_window(self, g: int, start: int, count: int) -> list[SortKey]:
        head = self._head(g)
        lqs = self.groups[g]
        if len(lqs) == 1 or self._whole(g):
            keys = self._keys(lqs[0]) if len(lqs) == 1 else self.q.pending
            assert keys is not None
            return window(keys, head, start, count)
        merged: Iterator[SortKey] = (sk for sk in heapq.merge(*(self._keys(lq) for lq in lqs)) if sk != head)
        sequence = merged if head is None else chain((head,), merged)
        return list(islice(sequence, start, start + count))

    def page(self, offset: int, limit: int) -> list[SortKey]:
        """The sort keys at positions ``offset``..``offset+limit`` of the whole order."""
        out: list[SortKey] = []
        g = max(bisect_right(self.starts, offset) - 1, 0)
        while g < len(self.groups) and len(out) < limit:
            start = max(offset + len(out) - self.starts[g], 0)
            out += self._group_window(g, start, limit - len(out))
            g += 1
        return out

    def position(self, sk: SortKey) -> int:
        """``sk``'s index in the whole order."""
        g = self.group_of[self.q.local_queue_of[sk[3]]]
        if sk == self.sticky:
            return self.starts[g]
        if self._whole(g):
            before = self.q.pending.bisect_left(sk)  # type: ignore[union-attr]
        else:
            before = sum(self._keys(lq).bisect_left(sk) for lq in self.groups[g])
        head = self._head(g)
        return self.starts[g] + before + (head is not None and head > sk)

    def before_in_local_queue(self, sk: SortKey) -> int:
        """How many workloads of ``sk``'s own LocalQueue (namespace and name) are listed before it."""
        if sk == self.sticky:
            return 0
        lq = self.q.local_queue_of[sk[3]]
        return self._keys(lq).bisect_left(sk) + (self.sticky_lq == lq and self.sticky > sk)
