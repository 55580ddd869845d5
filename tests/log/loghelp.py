"""What the embedded log's tests share: the first segment's name, batches of clock ticks, a count of bytes read."""

from __future__ import annotations

import os

import pytest

from events import schema as ev

SEG0 = "00000000000000000000.seg"


def ticks(start: int, n: int, *, pad: int = 0) -> list[ev.AnyEvent]:
    return [ev.ClockTicked(time=1000 + start + i, id=f"{start + i}" + "x" * pad) for i in range(n)]


def count_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes read from segments, one entry per read (every byte read is checked)."""
    read: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, position: int) -> bytes:
        data = real(fd, n, position)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting)
    return read
