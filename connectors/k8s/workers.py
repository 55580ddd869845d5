"""Dirty keys handled concurrently: at most ``limit`` at a time, never two at once for one key.

A key that becomes dirty again while it is being handled is handled again right after, so the last change
is never missed and one object's writes never race each other. A handling that ends with a retry pending wakes
the loop, which computed its sleep before that retry was scheduled: a failed write is retried when it is due,
not when something unrelated next happens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from connectors.k8s.errors import Conflict, KubeError, NotFound
from connectors.k8s.journal import Signal


class Retries:
    """Keys to handle again after a delay on the event loop's clock, handed back by :meth:`due`."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._at: dict[str, float] = {}

    def later(self, key: str, factor: float = 1.0) -> None:
        self._at[key] = asyncio.get_running_loop().time() + factor * self.delay_s

    def due(self) -> set[str]:
        now = asyncio.get_running_loop().time()
        keys = {k for k, t in self._at.items() if t <= now}
        for k in keys:
            del self._at[k]
        return keys

    async def attempt(self, handle: Callable[[str], Awaitable[None]], key: str, *, what: str, stats: Any,
                      log: Any, conflict_waits: bool = False, **fields: Any) -> None:
        """Run ``handle(key)``; an API error retries it after the delay, a crash after ten (one key never
        stops the others). ``stats.errors`` counts both. ``conflict_waits``: a write refused for a stale
        resourceVersion is not retried but counted in ``stats.conflicts`` — the watch brings the newer object,
        which makes the key dirty again."""
        try:
            await handle(key)
        except KubeError as exc:
            if conflict_waits and isinstance(exc, Conflict):
                stats.conflicts += 1
                return
            stats.errors += 1
            log.warning(f"{what} failed, will retry", error=str(exc), **fields)
            self.later(key)
        except Exception:
            stats.errors += 1
            log.exception(f"{what} crashed, will retry", **fields)
            self.later(key, 10)

    async def written(self, write: Awaitable[Any], key: str, stats: Any) -> bool:
        """Await a conditional ``write`` for ``key``: True once written; a Conflict (the object changed in what the
        log may not keep) is counted in ``stats.conflicts`` and ``key`` looked at again after the delay, on its live
        object; a NotFound (gone meanwhile) drops it."""
        try:
            await write
        except Conflict:
            stats.conflicts += 1
            self.later(key)
            return False
        except NotFound:
            return False
        return True

    def timeout(self) -> float | None:
        """How long the worker loop may sleep: until the next retry could be due, or forever."""
        return self.delay_s if self._at else None


def take_due(due: dict[str, int], now_ms: int) -> set[str]:
    """The keys of ``due`` (key -> a wall-clock time in ms: a grace period or a wait read against the objects' own
    timestamps) whose time has come, taken out of it."""
    keys = {k for k, at in due.items() if at <= now_ms}
    for k in keys:
        del due[k]
    return keys


def wake_after(due: dict[str, int], retries: Retries, now_ms: int, cap_s: float = 1.0) -> float:
    """How long a loop of :func:`take_due` keys may sleep: until the next of ``due`` ends or the next retry is
    due, at most ``cap_s`` (a feature gate it checks may turn on meanwhile)."""
    waits = [cap_s]
    if due:
        waits.append(max(0.0, (min(due.values()) - now_ms) / 1000))
    retry = retries.timeout()
    if retry is not None:
        waits.append(retry)
    return min(waits)


class KeyedWorkers:
    def __init__(self, handle: Callable[[str], Awaitable[None]], limit: int = 16) -> None:
        self.handle = handle
        self.limit = limit
        self._sem = asyncio.Semaphore(limit)
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._redo: set[str] = set()

    @property
    def idle(self) -> bool:
        return not self._busy and not self._redo

    async def run(self, take: Callable[[], Iterable[str]], signal: Signal,
                  timeout: Callable[[], float | None]) -> None:
        """Forever: handle what ``take()`` says is dirty, then wait for ``signal`` (or ``timeout()``)."""
        async with asyncio.TaskGroup() as tg:
            while True:
                keys = set(take()) | self._redo
                self._redo.clear()
                for key in sorted(keys):
                    if key in self._busy:
                        self._again.add(key)
                        continue
                    await self._sem.acquire()
                    self._busy.add(key)
                    tg.create_task(self._one(key, signal, timeout))
                await signal.wait(timeout())

    async def _one(self, key: str, signal: Signal, timeout: Callable[[], float | None]) -> None:
        try:
            await self.handle(key)
        finally:
            self._sem.release()
            self._busy.discard(key)
            if key in self._again:
                self._again.discard(key)
                self._redo.add(key)
                signal.set()
            elif timeout() is not None:
                # the loop may sleep with no timeout, computed before this key's retry (if any) was scheduled
                signal.set()
