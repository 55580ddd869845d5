"""What the micro-benchmarks share: their two arguments and how a call is timed (median of ``rounds`` rounds of the
best of 3 × ``number`` calls, in µs per call), so their figures in BENCHMARKS.md are measured alike."""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable
from typing import Any


def argument_parser(doc: str | None) -> argparse.ArgumentParser:
    """The parser of a micro-benchmark described by ``doc`` (its first line), with ``--number`` and ``--rounds``."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    p.add_argument("--number", type=int, default=2000, help="calls per timing (default 2,000)")
    p.add_argument("--rounds", type=int, default=5, help="rounds, each the best of 3 timings (default 5)")
    return p


def median_us(fn: Callable[[], Any], number: int, rounds: int) -> float:
    """µs per call of ``fn``: the median over ``rounds`` of the best of 3 timings of ``number`` calls."""
    return statistics.median(min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6 for _ in range(rounds))
