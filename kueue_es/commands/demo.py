"""``kueue-es demo``: the whole pipeline on a small built-in scenario, with no cluster and no Kafka.

Two cohorts of three ClusterQueues receive 300 workloads of three priority classes; batch work borrows across
each cohort and urgent jobs preempt it. The simulated cluster, the embedded log, the projections and the
scheduler all run in this process in a few seconds; the summary ends with the commands to explore the log
it wrote (``./kueue-es-demo-log`` unless ``--log`` says otherwise).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from events.errors import InvalidInput, LogLocked
from events.filelog import take_writer_lock

DEMO_LOG = "kueue-es-demo-log"


def register(subparsers: Any) -> None:
    from kueue_es.commands.simulate import add_run_arguments

    p = subparsers.add_parser(
        "demo",
        help="run a small built-in scenario through the whole pipeline (no cluster, no Kafka)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_run_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kueue_es.commands.simulate import execute, print_result
    from kueue_es.scheduler.config import DEFAULT
    from kueue_es.simulator import config as scenario_config
    from kueue_es.simulator.runner import fresh_log_dir

    scenario = scenario_config.load("demo")
    replaced = False
    if args.log is None:
        target = Path(DEMO_LOG)
        replaced = _clear_previous_demo(target)
        log_dir = fresh_log_dir(str(target), DEMO_LOG)
    else:
        log_dir = fresh_log_dir(args.log, DEMO_LOG)
    result = execute(scenario, log_dir, args, DEFAULT)
    heading = ("kueue-es demo: a built-in scenario (two cohorts, six ClusterQueues, 300 workloads) through the "
               "whole pipeline — simulated cluster -> event log -> projections -> scheduler -> decisions in the "
               "log — with no cluster and no Kafka.\n"
               + ("(The previous demo log in ./kueue-es-demo-log was replaced.)\n" if replaced else "") + "\n")
    print_result(result, args.output, out=sys.stdout, heading=heading)
    return 0


def _clear_previous_demo(target: Path) -> bool:
    """Remove ``target`` if it is a log an earlier simulation wrote; refuse to touch anything else."""
    if not target.exists():
        return False
    if not target.is_dir():
        raise InvalidInput(f"./{target}: a file is in the way of the demo log (move it, or pass --log PATH)")
    names = [p.name for p in target.iterdir()]
    if not names:
        return False
    if not all(n == "LOCK" or n.endswith(".seg") for n in names):
        raise InvalidInput(f"./{target} exists and is not a log written by the demo; move it, or pass --log PATH")
    try:  # held from the check until the log is gone: a writer appending to it (kueue-es run --log) would lose events
        lock = take_writer_lock(target)
    except LogLocked as exc:
        raise InvalidInput(f"{exc}: the demo replaces its previous log only when nothing writes to it; stop "
                           "the writer, or pass --log PATH") from None
    try:
        if not _written_by_simulator(target):
            raise InvalidInput(f"./{target} exists and is not a log written by the demo; move it, or pass --log PATH")
        # Renamed away at once (still locked), removed at leisure: no writer can open a half-deleted log.
        doomed = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
        target.replace(doomed)
    finally:
        os.close(lock)
    try:
        shutil.rmtree(doomed)
    except OSError as exc:  # the new log can be written all the same
        print(f"kueue-es: warning: could not remove the replaced demo log, renamed to {doomed}: {exc}", file=sys.stderr)
    return True


def _written_by_simulator(target: Path) -> bool:
    from events.filelog import FileLog

    try:
        log = FileLog.open(target, readonly=True)
    except Exception:  # noqa: BLE001 - anything unreadable is not ours to delete
        return False
    try:
        for batch in log.scan(0):
            return batch[0].event.id.startswith("sim-setup-")
        return False
    except Exception:  # noqa: BLE001
        return False
    finally:
        log.close_sync()
