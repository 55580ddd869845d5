"""Kubernetes' list-then-watch loop, shared by everything the connector keeps in step with the apiserver (the
watcher's kinds, the managed Pods, the StatefulSets' revisions): each brings its own list and watch, this brings
the order and the recovery — a relist after 410 Gone, a capped exponential backoff after any other failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from connectors.k8s.errors import Gone, KubeError

BACKOFF_CAP_S = 30.0


def retry_delay(backoff_s: float, failures: int) -> float:
    """Seconds to wait after the ``failures``-th failure in a row: doubling from ``backoff_s``, at most 30 s."""
    return min(backoff_s * 2 ** min(failures - 1, 5), BACKOFF_CAP_S)


async def list_then_watch(relist: Callable[[], Awaitable[str | None]], watch: Callable[[str], Awaitable[str]], *,
                          log: Any, what: str, backoff_s: float, on_gone: Callable[[], None],
                          resume_from: str | None = None, absent_retry_s: float = 1.0,
                          absent: Callable[[], Awaitable[None]] | None = None) -> None:
    """Until cancelled: list (``relist`` returns the list's resourceVersion, None when there is nothing to list —
    the kind not served, say: listed again after ``absent()``, by default a sleep of ``absent_retry_s``), then
    watch from there (``watch`` returns where it stopped, to resume from); ``resume_from`` watches first without
    listing. ``what`` names it in the warnings ``log`` gets."""
    rv = resume_from
    failures = 0
    while True:
        try:
            if rv is None:
                rv = await relist()
                if rv is None:
                    await (absent() if absent is not None else asyncio.sleep(absent_retry_s))
                    continue
            rv = await watch(rv)
            failures = 0
        except Gone:
            on_gone()
            rv = None
        except KubeError as exc:
            failures += 1
            delay = retry_delay(backoff_s, failures)
            log.warning(f"{what} watch failed, retrying", error=str(exc), retry_in_s=delay)
            await asyncio.sleep(delay)
