"""Keys indexed by a time, so that "which are due by T" costs the number that are due, not the number kept.

The projection keeps one :class:`DueIndex` per clock the controller rules run on (requeue backoffs, second
passes, waitForPodsReady, maximum execution times, retention, and the wait on nodes that are not Ready). What an
index holds is derived from the workloads and nodes (never part of a snapshot); the projection re-derives a
workload's entries after every event about it, a node's after every change of it.
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedList


class DueIndex:
    """``key -> time``, and the entries ordered by (time, key) once someone asks for an order: a clock nobody
    reads (retention while no retention policy is configured) costs a dict entry per key, not a sorted insert."""

    __slots__ = ("at", "_order")

    def __init__(self) -> None:
        self.at: dict[str, int] = {}
        """key -> time (read only: change it through :meth:`set`)."""
        self._order: SortedList | None = None

    def set(self, key: str, at: int | None) -> None:
        """Index ``key`` at ``at``; None takes it out."""
        old = self.at.get(key)
        if old == at:
            return
        order = self._order
        if old is not None:
            if order is not None:
                order.remove((old, key))
            if at is None:
                del self.at[key]
                return
        self.at[key] = at  # type: ignore[assignment]
        if order is not None:
            order.add((at, key))

    def _ordered(self) -> SortedList:
        order = self._order
        if order is None:
            order = self._order = SortedList((at, key) for key, at in self.at.items())
        return order

    def due(self, until: int) -> list[str]:
        """Keys indexed at or before ``until``, earliest first."""
        if not self.at:
            return []
        order = self._ordered()
        return [k for _, k in order.islice(0, order.bisect_left((until + 1,)))]  # (t,) sorts before every (t, k)

    def ordered(self) -> Iterator[tuple[int, str]]:
        """Every (time, key), earliest first."""
        return iter(self._ordered()) if self.at else iter(())

    def first(self) -> int | None:
        return self._ordered()[0][0] if self.at else None

    def get(self, key: str) -> int | None:
        return self.at.get(key)

    def __len__(self) -> int:
        return len(self.at)

    def __contains__(self, key: object) -> bool:
        return key in self.at
