"""The human summary of a simulation run, and the commands to explore its log next."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from kueue_es.commands._common import render_table


def display_path(path: str | Path) -> str:
    """A path as a user would type it: relative to the current directory when it is below it."""
    p = Path(path).absolute()
    try:
        rel = p.relative_to(Path.cwd())
    except ValueError:
        return str(p)
    return "./" + str(rel) if str(rel) != "." else "."


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}s"


def render(summary: dict[str, Any]) -> str:
    out: list[str] = []
    s = summary
    where = f" ({s['source']})" if s["source"] else ""
    out.append(f"Simulated scenario {s['scenario']}{where}, seed {s['seed']}: {s['cohorts']} cohort(s), "
               f"{s['clusterQueues']} ClusterQueue(s), {s['workloads']} workload(s)"
               + (f", {s['nodes']} node(s)" if s["nodes"] else "") + "\n\n")
    rows = []
    for name, c in s["workloadClasses"].items():
        rows.append([name, c["count"], c["admitted"], c["finished"], c["evictions"],
                     _s(c["avgTimeToAdmissionSeconds"]), _s(c["p50TimeToAdmissionSeconds"]),
                     _s(c["p95TimeToAdmissionSeconds"])])
    out.append(render_table(["workload class", "count", "admitted", "finished", "evictions",
                             "avg time to admission", "p50", "p95"], rows))
    out.append("\n")
    rows = [[name, c["count"], f"{c['nominalQuotaCpu']:g}", f"{c['avgUsagePercent']:.1f}%"]
            for name, c in s["clusterQueueClasses"].items()]
    out.append(render_table(["clusterqueue class", "count", "nominal cpu", "avg usage of nominal"], rows))
    out.append("\n")
    lb = s["lowerBound"]
    ratio = f"{s['wallOverLowerBound']:.2f}x" if s["wallOverLowerBound"] else "-"
    out.append(f"Simulated wall time   {s['simulatedWallSeconds']:.3f}s   lower bound {s['lowerBoundSeconds']:.3f}s "
               f"({ratio}; resources {lb['resourceSeconds']:.3f}s, arrivals {lb['arrivalSeconds']:.3f}s)\n")
    out.append(f"Real time             {s['realSeconds']:.3f}s\n")
    rate = f"{s['decisionsPerRealSecond']:,.0f}" if s["decisionsPerRealSecond"] else "-"
    out.append(f"Decisions             {s['decisions']:,} ({rate} per real second); {s['events']:,} events in the log\n")
    if s["notes"]:
        out.append("\nNotes:\n")
        for n in s["notes"]:
            out.append(f"  - {n}\n")
    return "".join(out)


def next_commands(log: str, audit_workload: str | None, audit_cq: str | None) -> list[tuple[str, str]]:
    """(command, what it shows) pairs for the log a run wrote."""
    q = shlex.quote(log)
    cmds = [(f"kueue-es replay --log {q}", "the final state: ClusterQueues and every workload")]
    if audit_workload:
        cmds.append((f"kueue-es audit --log {q} {shlex.quote(audit_workload)}",
                     "one workload's admission history, step by step with log offsets"))
    if audit_cq:
        cmds.append((f"kueue-es audit --log {q} --cluster-queue {shlex.quote(audit_cq)}",
                     "everything that happened in one ClusterQueue"))
    cmds.append((f"kueue-es replay --log {q} --verify",
                 "re-run the scheduler at every recorded decision and check it decides the same"))
    cmds.append((f"kueue-es log inspect --log {q}", "the log's segments and event counts"))
    return cmds


def render_next(log: str, audit_workload: str | None, audit_cq: str | None) -> str:
    cmds = next_commands(log, audit_workload, audit_cq)
    width = max(len(c) for c, _ in cmds)
    full = os.path.abspath(log)
    lines = [f"The event log is in {log}{f' ({full})' if full != log else ''}. Try next:\n"]
    for c, what in cmds:
        lines.append(f"  {c.ljust(width)}   # {what}\n")
    return "".join(lines)
