"""What a reconciler's failed attempt leads to (connectors.k8s.workers.Retries): retried after the delay, after ten
for a crash, or — a stale write, for the reconcilers that wait for the watch — not retried at all; and the worker
loop (KeyedWorkers) takes the retry in when it is due, though nothing else wakes it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
import structlog

from connectors.k8s.errors import Conflict, KubeError, Unavailable
from connectors.k8s.journal import Signal
from connectors.k8s.workers import KeyedWorkers, Retries


@dataclass
class _Stats:
    errors: int = 0
    conflicts: int = 0


def _failing(exc: Exception):
    async def handle(key: str) -> None:
        raise exc
    return handle


async def _attempt(exc: Exception, **kw: object) -> tuple[Retries, _Stats]:
    retries, stats = Retries(5.0), _Stats()
    await retries.attempt(_failing(exc), "k", what="test", stats=stats, log=structlog.get_logger(), **kw)
    return retries, stats


@pytest.mark.asyncio
@pytest.mark.parametrize("conflict_waits", [False, True])
async def test_an_api_error_is_retried_after_the_delay(conflict_waits: bool) -> None:
    retries, stats = await _attempt(KubeError("boom", 500), conflict_waits=conflict_waits)
    assert (stats.errors, stats.conflicts, retries.timeout()) == (1, 0, 5.0)


@pytest.mark.asyncio
async def test_a_conflict_is_an_api_error_unless_the_reconciler_waits_for_the_watch() -> None:
    retries, stats = await _attempt(Conflict("stale", 409))
    assert (stats.errors, stats.conflicts, retries.timeout()) == (1, 0, 5.0)
    retries, stats = await _attempt(Conflict("stale", 409), conflict_waits=True)
    assert (stats.errors, stats.conflicts, retries.timeout()) == (0, 1, None)


@pytest.mark.asyncio
async def test_a_crash_is_retried_too() -> None:
    retries, stats = await _attempt(ValueError("bug"))
    assert (stats.errors, retries.timeout()) == (1, 5.0)


# --- the worker loop takes a retry in while nothing else happens ------------------------------------------------

async def _handled_twice(fail: Callable[[Retries, str], Awaitable[None]]) -> list[str]:
    """Run the worker loop over one dirty key whose first handling fails through ``fail``, with no other wake-up
    (a quiet log): the keys handled until the second call, which resolves a future the test waits on."""
    retries, stats = Retries(0.01), _Stats()
    calls: list[str] = []
    second: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handle(key: str) -> None:
        calls.append(key)
        await asyncio.sleep(0)  # the request goes out: the worker loop goes to sleep before it fails
        if len(calls) == 1:
            await fail(retries, key)
        elif not second.done():
            second.set_result(None)

    async def guarded(key: str) -> None:
        await retries.attempt(handle, key, what="test", stats=stats, log=structlog.get_logger())

    dirty = {"ns/wl"}

    def take() -> set[str]:
        keys = dirty | retries.due()
        dirty.clear()
        return keys

    task = asyncio.create_task(KeyedWorkers(guarded, 4).run(take, Signal(), retries.timeout))
    try:
        async with asyncio.timeout(5):  # a guard only: the retry is due after 10 ms (100 ms for a crash)
            await second
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return calls


async def _unavailable(retries: Retries, key: str) -> None:
    raise Unavailable("PATCH ...: timed out")


async def _crash(retries: Retries, key: str) -> None:
    raise ValueError("bug")


async def _later(retries: Retries, key: str) -> None:
    retries.later(key)  # a handler's own retry (the status writer's "kept conflicting")


@pytest.mark.asyncio
@pytest.mark.parametrize("fail", [_unavailable, _later], ids=["api-error", "handler-own-retry"])
async def test_a_retry_scheduled_after_the_loop_went_to_sleep_wakes_it(
        fail: Callable[[Retries, str], Awaitable[None]]) -> None:
    """The loop computed its sleep (forever: no retry pending) before the task failed: the retry the task
    scheduled still wakes it, without anything else appended to the log."""
    assert await _handled_twice(fail) == ["ns/wl", "ns/wl"]


@pytest.mark.asyncio
async def test_a_crash_retried_later_wakes_the_loop_too() -> None:
    """A crash is retried after ten delays (100 ms here): the loop wakes for it as well."""
    assert await _handled_twice(_crash) == ["ns/wl", "ns/wl"]
