"""What ``kueue-es audit`` costs, on a log written by ``benchmarks/replay.py``.

Runs ``kueue-es audit -o json`` of one workload and of one ClusterQueue in fresh processes, ``--runs`` times, and
prints the CPU time of each (user + system, of the child, start-up included) with the median. With ``--tree``
(given more than once), the same audits run with each source tree first on the path (a checkout or ``git archive``
of another commit), alternating between trees run by run so the load falls on all alike, and their outputs are
compared: they must be byte-identical.

    python benchmarks/replay.py --events 200000 --runs 1 --log /tmp/replay-200k.klog --keep
    python benchmarks/audit.py /tmp/replay-200k.klog --runs 5
    python benchmarks/audit.py /tmp/replay-200k.klog --runs 5 --tree /tmp/before --tree .

The workload audited is, unless given, the first to reserve quota in the log, and the ClusterQueue its.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from events import schema as ev
from events.filelog import FileLog


def first_reservation(log_dir: Path) -> tuple[str, str]:
    """The key of the first workload to reserve quota in the log, and the ClusterQueue it reserved in."""
    log = FileLog.open(log_dir, readonly=True)
    try:
        for batch in log.scan():
            for r in batch:
                if isinstance(r.event, ev.QuotaReserved):
                    return r.event.key, r.event.admission.cluster_queue
    finally:
        log.close_sync()
    raise SystemExit(f"{log_dir}: no workload reserves quota")


def audit_cpu(tree: Path | None, log_dir: Path, *args: str) -> tuple[float, str]:
    """One ``kueue-es audit`` in a fresh process (``tree`` first on the path): its CPU-s and its output's digest."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree.resolve())  # run from there too: ``-m`` puts the working directory first
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-m", "kueue_es", "audit", "--log", str(log_dir.resolve()), *args,
                          "-o", "json"], capture_output=True, check=True, env=env, cwd=tree)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, hashlib.sha256(out.stdout).hexdigest()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", type=Path, help="a log written by benchmarks/replay.py --keep")
    p.add_argument("--workload", metavar="NS/NAME", help="the workload audited (default: the first to reserve)")
    p.add_argument("--cluster-queue", metavar="CQ", help="the ClusterQueue audited (default: that workload's)")
    p.add_argument("--runs", type=int, default=5, help="runs of each audit (default 5)")
    p.add_argument("--tree", type=Path, action="append", help="a source tree to run the audits from (repeatable)")
    args = p.parse_args()
    workload, cq = first_reservation(args.log)
    audits = {"workload": [args.workload or workload], "clusterQueue": ["--cluster-queue", args.cluster_queue or cq]}
    trees: list[Path | None] = list(args.tree) if args.tree else [None]
    cpu: dict[tuple[str, str], list[float]] = {}
    digests: dict[str, set[str]] = {name: set() for name in audits}
    for run in range(args.runs):
        for name, audit_args in audits.items():
            for tree in trees if run % 2 == 0 else trees[::-1]:
                took, digest = audit_cpu(tree, args.log, *audit_args)
                cpu.setdefault((name, str(tree or "installed")), []).append(took)
                digests[name].add(digest)
    print(f"log: {args.log}; audits: {' | '.join(' '.join(a) for a in audits.values())}; runs: {args.runs}")
    for (name, tree), times in cpu.items():
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:12} {tree}: median {statistics.median(times):.2f} CPU-s ({runs})")
    for name, found in digests.items():
        print(f"{name:12} outputs: {'identical' if len(found) == 1 else f'{len(found)} different'}")


if __name__ == "__main__":
    main()
