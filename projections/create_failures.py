"""ProvisioningRequest creations the apiserver refused, as a workload keeps them in the fold.

Kueue's check controller, when creating a check's PodTemplate or ProvisioningRequest fails, shows the error on
the check (still Pending), records a Warning ``FailedCreate`` Event, and returns the error, so that
controller-runtime reconciles the workload again after its per-item backoff: 5 ms doubling up to 1000 s, until
a reconcile of the workload succeeds. kueue-es keeps, per check, the request whose creation failed last, how
many times in a row, its message, and when it may be decided again: 1 s doubling up to 1000 s (whole seconds,
as every backoff the scheduler reads, so that a refusal that persists costs about a dozen attempts an hour,
not one per turn of the loop). A creation of another name (a next attempt) is not held back, and its first
failure counts from one, as Kueue's backoff starts again once a reconcile got through. A new reservation keeps
the request's name, so the fold forgets the failures when the workload reserves again: Kueue reconciles the
updated Workload at once.
"""

from __future__ import annotations

from typing import NamedTuple

BASE_MS = 1_000
MAX_MS = 1_000_000
"""controller-runtime's default per-item backoff ceiling (1000 s); its 5 ms start is 1 s here."""


class FailedCreate(NamedTuple):
    check: str
    name: str
    """The request whose creation failed (a retry creates the same name again)."""
    failures: int
    """Failures of that name in a row."""
    retry_at: int
    """When (log time, ms) the controller may decide its creation again."""
    message: str
    """The check's message: ``Error creating ProvisioningRequest "<name>": <error>`` (or PodTemplate)."""


def backoff_ms(failures: int) -> int:
    """The wait after the ``failures``-th failure in a row: 1 s, 2 s, 4 s ... at most 1000 s (no jitter)."""
    return min(BASE_MS << min(failures - 1, 20), MAX_MS)


def recorded(failed: tuple[FailedCreate, ...], check: str, name: str, message: str, time: int
             ) -> tuple[FailedCreate, ...]:
    """``failed`` with one more failure of ``check``'s request ``name`` at ``time``, sorted by check."""
    old = next((f for f in failed if f.check == check), None)
    failures = old.failures + 1 if old is not None and old.name == name else 1
    new = FailedCreate(check, name, failures, time + backoff_ms(failures), message)
    return tuple(sorted((*(f for f in failed if f.check != check), new)))


def of_check(failed: tuple[FailedCreate, ...], check: str) -> FailedCreate | None:
    return next((f for f in failed if f.check == check), None)
