"""What the embedded log's tests share: the first segment's name and batches of clock ticks."""

from __future__ import annotations

from events import schema as ev

SEG0 = "00000000000000000000.seg"


def ticks(start: int, n: int, *, pad: int = 0) -> list[ev.AnyEvent]:
    return [ev.ClockTicked(time=1000 + start + i, id=f"{start + i}" + "x" * pad) for i in range(n)]
