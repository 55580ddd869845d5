"""The engine: couples an event log, the cluster-state projection and the scheduler.

It does I/O only — append to the log, fold what was appended into the state — and leaves every decision to the
pure scheduler (:func:`kueue_es.scheduler.decide`). The simulator drives it today, the service will tomorrow:

* :func:`observe` appends observed facts (objects, finished jobs, ticks) as one batch and applies them;
* :func:`settle` asks the scheduler for decisions, appends each answer as one batch, applies it, and asks again
  until the scheduler has nothing more to say.

The state must be the fold of exactly the log's records (``state.offset == end_offset - 1``): the engine
applies what it appends, at the offsets the log assigned, so the two never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from events.errors import KueueEsError
from events.log import EventLog
from events.schema import AnyEvent, Record
from kueue_es.scheduler import DEFAULT, SchedulerConfig, decide
from projections.cluster import ClusterState

RecordsCallback = Callable[[list[Record]], None]

MAX_BATCHES = 1_000_000
"""Decision batches one :func:`settle` may append before it gives up (the scheduler never went quiet)."""


class SchedulerLivelock(KueueEsError):
    """The scheduler kept deciding without reaching a fixed point."""


async def append_and_apply(log: EventLog, state: ClusterState, events: Sequence[AnyEvent]) -> list[Record]:
    """Append ``events`` as one batch and fold the stored records into ``state``; returns the records."""
    if not events:
        return []
    offsets = await log.append(events)
    records = [Record(off, e) for off, e in zip(offsets, events, strict=True)]
    apply = state.apply
    for r in records:
        apply(r)
    return records


async def observe(log: EventLog, state: ClusterState, events: Sequence[AnyEvent],
                  on_records: RecordsCallback | None = None) -> list[Record]:
    """Append observed facts as one batch and apply them (the watcher's half of the loop)."""
    records = await append_and_apply(log, state, events)
    if on_records is not None and records:
        on_records(records)
    return records


async def settle(log: EventLog, state: ClusterState, config: SchedulerConfig = DEFAULT, now: int | None = None,
                 *, on_records: RecordsCallback | None = None, max_batches: int = MAX_BATCHES) -> int:
    """decide → append one batch → apply → repeat until the scheduler returns nothing.

    Returns the number of decisions appended. ``on_records`` sees every appended batch after it is applied.
    """
    total = 0
    for _ in range(max_batches):
        batch = decide(state, config, now)
        if not batch:
            return total
        records = await append_and_apply(log, state, batch)
        total += len(records)
        if on_records is not None:
            on_records(records)
    raise SchedulerLivelock(
        f"the scheduler did not settle after {max_batches} decision batches (last offset {state.offset}); "
        "this is a scheduler bug — please report it with the log"
    )
