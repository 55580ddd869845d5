"""The frame of a worker that carries out, key by key, decisions which are no status write: the mirror marks the
workloads that have one pending in a set of its own, the worker takes them (and those whose last attempt failed,
after a delay) and runs ``sync`` on each, one key at a time per key, ``concurrency`` keys at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from connectors.k8s.client import KubeClient
from connectors.k8s.journal import Journal
from connectors.k8s.workers import KeyedWorkers, Retries
from events import schema as ev


class MarkedKeysWorker:
    dirty = ""
    """The name of the mirror's set of keys this worker takes."""
    what = ""
    """What a failed attempt's log line calls the work."""
    log: Any = None
    stats_type: Any = None
    """The class of the worker's counters (``stats``, with an ``errors`` count)."""

    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0, concurrency: int = 4,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None) -> None:
        self.client = client
        self.journal = journal
        self.mirror = journal.mirror
        self.append = append or journal.append
        self.concurrency = concurrency
        self._retry = Retries(retry_s)
        self.stats = self.stats_type()
        self._reported: set[int] = set()
        """Decision offsets whose outcome was appended but not applied to the mirror yet."""

    async def run(self) -> None:
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _take(self) -> set[str]:
        keys = getattr(self.mirror, self.dirty) | self._retry.due()
        setattr(self.mirror, self.dirty, set())
        return keys

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what=self.what, stats=self.stats, log=self.log, workload=key)

    async def sync(self, key: str) -> None:
        raise NotImplementedError

    def unreported(self, key: str, tags: frozenset[str] | str) -> list[int]:
        """The offsets of ``key``'s pending decisions of ``tags`` whose outcome is not appended yet, in order."""
        pending = self.mirror.pending.get(key, {})
        self._reported &= {off for p in self.mirror.pending.values() for off in p}
        wanted = {tags} if isinstance(tags, str) else tags
        return sorted(off for off, tag in pending.items() if tag in wanted and off not in self._reported)
