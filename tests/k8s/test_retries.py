"""What a reconciler's failed attempt leads to (connectors.k8s.workers.Retries): retried after the delay, after ten
for a crash, or — a stale write, for the reconcilers that wait for the watch — not retried at all."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import structlog

from connectors.k8s.errors import Conflict, KubeError
from connectors.k8s.workers import Retries


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
