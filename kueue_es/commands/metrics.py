"""``kueue-es metrics``: Kueue's Prometheus metrics at a point of the log, in the text exposition format.

Counters and histograms are folded from the log, so they are what ``/metrics`` of ``kueue-es run`` showed at
that point (``--to OFFSET``, or ``--at TIME``: the events up to that time), however often the scheduler was
restarted; gauges are computed from the state there. ``replica_role`` is ``standalone``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kueue_es.commands._common import (
    add_checkpoints_argument,
    add_log_argument,
    add_point_arguments,
    state_at,
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "metrics",
        help="print Kueue's Prometheus metrics at a point of the log",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_log_argument(p)
    add_point_arguments(p)
    add_checkpoints_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueue_es import metrics  # prometheus_client: only when asked

    state = state_at(args)
    sys.stdout.write(metrics.text([state]))
    return 0
