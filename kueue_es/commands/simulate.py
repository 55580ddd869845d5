"""``kueue-es simulate``: run a Kueue scheduler-performance scenario through the real pipeline.

SCENARIO is a file in the format of Kueue's performance generator (``generator.yaml``: cohorts, queuesSets,
workloadsSets, workloads, and for TAS topology/resourceFlavor), or the name of a bundled one: baseline,
large-scale, tas (Kueue's own scenarios) or demo. A simulated clock creates the workloads on schedule; the
scheduler's decisions go to the log; admitted workloads run for runtimeMs and finish, preempted ones stop and
start over when admitted again. The figures: time to admission per workload class, usage of nominal quota
per ClusterQueue class, simulated and real time, and the lower bound of the simulated time.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from kueue_es.commands._common import int_arg, load_kueue_config_document, path_arg, write_json
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig

DAY_MS = 86_400_000
"""The longest --jitter-ms and --stop-delay-ms: a simulated day (beyond the log's 64-bit times soon enough)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="run a Kueue scheduler-performance scenario on a simulated cluster and clock",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("scenario", type=path_arg, metavar="SCENARIO",
                   help="generator.yaml-format file, or a bundled scenario: baseline, large-scale, tas, demo")
    add_run_arguments(p)
    p.add_argument("--plot", type=path_arg, metavar="FILE",
                   help="write usage and pending workloads over time: FILE.html (self-contained) or FILE.png "
                   "(needs matplotlib)")
    p.add_argument("--realtime", action="store_true",
                   help="let the simulated clock follow real time, so the run can be watched live")
    p.add_argument("--jitter-ms", type=int_arg(0, "a delay", DAY_MS), default=0, metavar="MS",
                   help="delay each workload's creation by a random 0..MS ms drawn from --seed (default 0)")
    p.add_argument("--stop-delay-ms", type=int_arg(0, "a delay", DAY_MS), default=None, metavar="MS",
                   help="time a preempted job takes to stop, in ms (default 10)")
    p.add_argument("--config", type=path_arg, metavar="FILE", help="Kueue Configuration (config.kueue.x-k8s.io/v1beta2) for "
                   "the scheduler; pass the same file to 'replay --verify'")
    p.set_defaults(func=run)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", type=path_arg, metavar="PATH", default=None,
                   help="directory for the new log (must not exist or be empty; default: a fresh directory "
                   "under the current one)")
    p.add_argument("--seed", type=int_arg(0), default=0, metavar="N",
                   help="seed of the simulator's randomness (workload UIDs, --jitter-ms); same scenario and seed "
                   "give the same log byte for byte (default 0)")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text",
                   help="output format: text, json (default text)")


def run(args: argparse.Namespace) -> int:
    from kueue_es.simulator import config as scenario_config
    from kueue_es.simulator import plot as plotting
    from kueue_es.simulator.runner import fresh_log_dir

    scenario = scenario_config.load(args.scenario)
    sched_config, document = load_kueue_config_document(args.config) or (DEFAULT, None)
    if args.plot:
        plotting.check(args.plot)
    log_dir = fresh_log_dir(args.log, f"kueue-es-sim-{scenario.name}-seed{args.seed}")
    result = execute(scenario, log_dir, args, sched_config, realtime=args.realtime, jitter_ms=args.jitter_ms,
                     stop_delay_ms=args.stop_delay_ms, config_document=document, config_source=args.config or "")
    if args.plot:
        plotting.write(args.plot, result.summary, result.outcome.series, result.plan.class_nominal())
        result.summary["plot"] = args.plot
    print_result(result, args.output, out=sys.stdout, plot=args.plot)
    return 0


def execute(scenario: Any, log_dir: Any, args: argparse.Namespace, sched_config: SchedulerConfig, *,
            realtime: bool = False, jitter_ms: int = 0, stop_delay_ms: int | None = None,
            config_document: dict[str, Any] | None = None, config_source: str = "") -> Any:
    from kueue_es.simulator import runner
    from kueue_es.simulator.sim import STOP_DELAY_MS

    with Progress(sys.stdout, realtime=realtime) as progress:
        return runner.run(scenario, log_dir, seed=args.seed, jitter_ms=jitter_ms, realtime=realtime,
                          config=sched_config, config_document=config_document, config_source=config_source,
                          progress=progress,
                          stop_delay_ms=STOP_DELAY_MS if stop_delay_ms is None else stop_delay_ms)


def print_result(result: Any, fmt: str, out: TextIO, plot: str | None = None, heading: str = "") -> None:
    from kueue_es.simulator.report import display_path, render, render_next

    summary = result.summary
    log = display_path(result.log_path)
    summary["log"] = log
    if fmt == "json":
        write_json(summary, out)
        return
    if heading:
        out.write(heading)
    out.write(render(summary))
    if plot:
        out.write(f"\nPlot written to {plot}\n")
    workload, cq = audit_suggestion(result)
    out.write("\n" + render_next(log, workload, cq))


def audit_suggestion(result: Any) -> tuple[str | None, str | None]:
    """A workload worth auditing (the first preemptor, else the first workload) and its ClusterQueue."""
    pairs = result.outcome.preemptions
    if pairs:
        victims: dict[str, int] = {}
        for preemptor, _ in pairs:
            victims[preemptor] = victims.get(preemptor, 0) + 1
        preemptor = max(victims, key=lambda k: victims[k])  # the first of those with the most victims
        return preemptor, preemptor.split("/", 1)[0]
    if result.plan.arrivals:
        a = result.plan.arrivals[0]
        return a.key, a.queue
    return None, None


class Progress:
    """A transient progress bar on a terminal; with ``--realtime`` off a terminal, a status line per second."""

    def __init__(self, stream: TextIO, realtime: bool = False) -> None:
        self.stream = stream
        self.realtime = realtime
        self.tty = _isatty(stream)
        self._bar: Any = None
        self._task: Any = None
        self._last = 0.0

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("Simulating  t={task.fields[t]}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("workloads finished"), TimeElapsedColumn(),
                console=Console(file=self.stream), transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("sim", total=None, t="0.0s")
        return self

    def __call__(self, finished: int, total: int, sim_ms: int) -> None:
        now = time.perf_counter()
        if now - self._last < (0.1 if self.tty else 1.0):
            return
        self._last = now
        if self._bar is not None:
            self._bar.update(self._task, completed=finished, total=total, t=f"{sim_ms / 1000:.1f}s")
        elif self.realtime:
            sys.stderr.write(f"kueue-es simulate: t={sim_ms / 1000:.1f}s, {finished}/{total} workloads finished\n")
            sys.stderr.flush()

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
