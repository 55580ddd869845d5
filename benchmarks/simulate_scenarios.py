"""Benchmark: Kueue's scheduler-performance scenarios (baseline, large-scale, tas) through the simulator.

Each scenario runs ``--runs`` times (same seed, so the simulated figures are identical run to run and the
script checks that); the real time is the median. Logs go to a temporary directory, written exactly as
``kueue-es simulate`` writes them. Usage::

    .venv/bin/python benchmarks/simulate_scenarios.py [--runs 3] [--scenarios baseline,large-scale,tas]
                                                      [--seed 0] [--stop-delay-ms 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from kueue_es.simulator import config, runner
from kueue_es.simulator.sim import STOP_DELAY_MS

SIM_KEYS = ("simulatedWallSeconds", "lowerBoundSeconds", "decisions", "events", "workloadClasses",
            "clusterQueueClasses")


def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "python": platform.python_version(),
            "platform": platform.platform()}


def bench(name: str, runs: int, seed: int, stop_delay_ms: int) -> dict:
    scenario = config.load(name)
    reals: list[float] = []
    first = None
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix=f"kueue-es-bench-{name}-") as tmp:
            result = runner.run(scenario, Path(tmp) / "log", seed=seed, stop_delay_ms=stop_delay_ms)
        s = result.summary
        sim = {k: s[k] for k in SIM_KEYS}
        if first is None:
            first = s
        elif sim != {k: first[k] for k in SIM_KEYS}:
            raise SystemExit(f"{name}: run {i + 1} simulated differently from run 1 (non-determinism)")
        reals.append(s["realSeconds"])
        print(f"  {name} run {i + 1}/{runs}: {s['realSeconds']:.1f}s real", file=sys.stderr, flush=True)
    assert first is not None
    out = dict(first)
    out["realSecondsRuns"] = reals
    out["realSeconds"] = round(statistics.median(reals), 2)
    out["decisionsPerRealSecond"] = round(out["decisions"] / out["realSeconds"], 0)
    return out


def render(results: dict[str, dict], info: dict[str, str], args: argparse.Namespace) -> str:
    lines = [f"Machine: {info['nproc']} CPUs ({info['cpu']}), Python {info['python']}, {info['platform']}",
             f"Seed {args.seed}, stop delay {args.stop_delay_ms} ms, median of {args.runs} run(s) for real time", ""]
    lines.append("| scenario | workloads | CQs | simulated wall | lower bound | ratio | CQ usage (avg of nominal) "
                 "| decisions | real seconds (median; runs) | decisions / real s |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, s in results.items():
        usage = ", ".join(f"{c} {v['avgUsagePercent']:.1f}%" for c, v in s["clusterQueueClasses"].items())
        runs = ", ".join(f"{r:.1f}" for r in s["realSecondsRuns"])
        lines.append(
            f"| {name} | {s['workloads']:,} | {s['clusterQueues']:,} | {s['simulatedWallSeconds']:.2f} s "
            f"| {s['lowerBoundSeconds']:.2f} s | {s['wallOverLowerBound']:.3f}x | {usage} | {s['decisions']:,} "
            f"| {s['realSeconds']:.1f} s ({runs}) | {s['decisionsPerRealSecond']:,.0f} |")
    for name, s in results.items():
        lb = s["lowerBound"]
        lines += ["", f"{name}: time to admission per workload class (lower bound of the simulated wall time: "
                  f"{s['lowerBoundSeconds']:.2f} s = max(resources {lb['resourceSeconds']:.2f} s, "
                  f"arrivals {lb['arrivalSeconds']:.2f} s))", "",
                  "| class | count | admitted | evictions | avg | p50 | p95 | max |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for cls, c in s["workloadClasses"].items():
            lines.append(f"| {cls} | {c['count']:,} | {c['admitted']:,} | {c['evictions']:,} "
                         f"| {c['avgTimeToAdmissionSeconds']:.3f} s | {c['p50TimeToAdmissionSeconds']:.3f} s "
                         f"| {c['p95TimeToAdmissionSeconds']:.3f} s | {c['maxTimeToAdmissionSeconds']:.3f} s |")
        for n in s["notes"]:
            lines.append(f"\nNote: {n}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scenarios", default="baseline,large-scale,tas")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop-delay-ms", type=int, default=STOP_DELAY_MS)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON instead of Markdown")
    args = ap.parse_args()
    info = machine()
    results = {name: bench(name, args.runs, args.seed, args.stop_delay_ms) for name in args.scenarios.split(",")}
    if args.json:
        print(json.dumps({"machine": info, "seed": args.seed, "stopDelayMs": args.stop_delay_ms, "runs": args.runs,
                          "results": results}, indent=2))
    else:
        print(render(results, info, args), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
