"""How much a checkpoint saves a replay, on a log written by ``benchmarks/replay.py``.

Checkpoints are written every ``--every`` events as ``kueue-es run`` writes them (the state at the end of a
frame, zlib-compressed; :mod:`kueue_es.checkpoints`), into a copy of the log. Then ``kueue-es replay --to X -o
json`` runs in a fresh process for a few points X of the log, once from its newest checkpoint at or before X and
once with ``--no-checkpoints``, alternating, and the CPU time of each (user + system, of the child) is printed
with the median of ``--runs``; the two outputs are compared too (they must be equal but for the ``checkpoint``
key). Also printed: a checkpoint's size, how long encoding one takes (what the forked child spends), and how long
``kueue-es run`` takes from its start to its "active" report (the restart: fold, then decide) with the checkpoints
and with them moved aside, alternating (wall time and the child's CPU time, read from /proc before it is killed).

With ``--kube``, the checkpoints hold the connector's mirror too, as ``kueue-es run --kube`` writes them, and what
is timed instead is what that process does before it goes on: build its mirror, restored from the newest
checkpoint and folded on, or folded from offset 0 (the ``_mirror_start`` of this script, in a fresh process, with
no apiserver: connecting comes after). The two mirrors are compared (state digest and connector part).

    python benchmarks/replay.py --events 200000 --runs 1 --log /tmp/replay-200k.klog --keep
    python benchmarks/checkpoints.py /tmp/replay-200k.klog
    python benchmarks/checkpoints.py /tmp/replay-200k.klog --kube
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from connectors.k8s import mirror_snapshot
from connectors.k8s.mirror import Mirror
from events.filelog import FileLog
from kueue_es import checkpoints
from projections import snapshot
from projections.cluster import ClusterState


def write_checkpoints(log_dir: Path, every: int, kube: bool = False) -> list[dict[str, float]]:
    """Fold the log once, checkpointing at the end of the first frame (a scanned batch) past every ``every``
    events; ``kube``: into a connector's mirror, which the checkpoints hold too."""
    mirror = Mirror() if kube else None
    state = mirror.state if mirror is not None else ClusterState()
    written = []
    next_at = every
    log = FileLog.open(log_dir, readonly=True)
    try:
        for batch in log.scan(lazy=mirror is None):
            if mirror is not None:
                mirror.apply_batch(batch)
            else:
                for r in batch:
                    state.apply(r)
            last = batch[-1].offset
            if last + 1 < next_at:
                continue
            frame = log.frame_checksum(last)
            assert frame is not None and frame[1] == last
            t0 = time.process_time()
            raw = snapshot.encode(state)
            connector = (lambda m=mirror: mirror_snapshot.encode(m)) if mirror is not None else None
            packed = checkpoints.pack(last, state.time, frame[0], raw, connector)
            took = time.process_time() - t0
            checkpoints.save(log_dir, last, packed)
            written.append({"offset": last, "bytes": len(packed), "rawBytes": len(raw), "encodeCpuS": took,
                            "workloads": len(state.workloads)})
            next_at += every
    finally:
        log.close_sync()
    return written


def replay_cpu(log_dir: Path, to: int, *flags: str) -> tuple[float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-m", "kueue_es", "replay", "--log", str(log_dir), "--to", str(to),
                          "-o", "json", *flags], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(out.stdout)


def _mirror_start(log_dir: Path, from_zero: bool) -> None:
    """What ``run --kube`` does before it connects: restore its mirror and fold the rest (or fold it all); prints
    the CPU time, the checkpoint's offset and the mirror's digests as JSON."""
    t0 = time.process_time()
    log = FileLog.open(log_dir, readonly=True)
    start = checkpoints.Start() if from_zero else checkpoints.restore(log, connector=mirror_snapshot.restore)
    mirror = start.connector or Mirror()
    for batch in log.scan(mirror.offset + 1):
        mirror.apply_batch(batch)
    cpu = time.process_time() - t0
    print(json.dumps({"cpuS": cpu, "checkpoint": start.connector.offset if start.connector else None,
                      "state": snapshot.digest(mirror.state),
                      "connector": hashlib.sha256(mirror_snapshot.encode(mirror)).hexdigest()}))


def mirror_start(log_dir: Path, *flags: str) -> tuple[float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, __file__, str(log_dir), "--mirror-start", *flags], capture_output=True,
                         text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(out.stdout)


def kube_starts(log_dir: Path, runs: int) -> dict[str, list[float]]:
    """The mirror's start with the checkpoints and from offset 0, alternating: the child's CPU-s, start-up
    included."""
    starts: dict[str, list[float]] = {"withCheckpoint": [], "fromZero": []}
    for _ in range(runs):
        cpu_w, out_w = mirror_start(log_dir)
        cpu_c, out_c = mirror_start(log_dir, "--from-zero")
        assert out_w["checkpoint"] is not None and out_c["checkpoint"] is None
        assert (out_w["state"], out_w["connector"]) == (out_c["state"], out_c["connector"]), "mirrors differ"
        starts["withCheckpoint"].append(cpu_w)
        starts["fromZero"].append(cpu_c)
    return starts


def restart(log_dir: Path) -> tuple[float, float, dict]:
    """Start ``kueue-es run`` over ``log_dir`` and kill it at its "active" report: (wall s, CPU s, the report)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_ES_")}
    env["KUEUE_ES_SCHEDULER_TICKS"] = "false"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "kueue_es", "run", "--log", str(log_dir)], stdout=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    wall = time.monotonic() - t0
    with open(f"/proc/{proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    proc.kill()
    proc.wait()
    return wall, cpu, json.loads(line)


def _print_checkpoints(written: list[dict[str, float]]) -> None:
    for c in written:
        print(f"checkpoint at {c['offset']:,}: {c['workloads']:,} workloads, {c['bytes']:,} bytes "
              f"({c['rawBytes']:,} before compression), encoded in {c['encodeCpuS'] * 1000:.0f} ms CPU")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", type=Path, help="a log directory (benchmarks/replay.py --log DIR --keep)")
    p.add_argument("--every", type=int, default=50_000, help="events between checkpoints (default 50,000)")
    p.add_argument("--runs", type=int, default=3, help="replays per point and mode (default 3)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--kube", action="store_true", help="time the start of run --kube's mirror instead")
    p.add_argument("--mirror-start", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--from-zero", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.mirror_start:
        _mirror_start(args.log, args.from_zero)
        return
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / "log"
        shutil.copytree(args.log, log_dir, ignore=shutil.ignore_patterns(checkpoints.DIRECTORY, "LOCK"))
        log = FileLog.open(log_dir, readonly=True)
        end = log._end  # noqa: SLF001
        log.close_sync()
        written = write_checkpoints(log_dir, args.every, kube=args.kube)
        if args.kube:
            kube = kube_starts(log_dir, args.runs)
            result = {"events": end, "checkpoints": written, "mirrorStarts": kube, "loadAverage": os.getloadavg()[0]}
            if args.json:
                print(json.dumps(result))
                return
            _print_checkpoints(written)
            for mode, runs in kube.items():
                print(f"run --kube's mirror {mode}: {statistics.median(runs):.2f} CPU-s (median of {args.runs}: "
                      f"{', '.join(f'{c:.2f}' for c in runs)})")
            print(f"load average {result['loadAverage']:.1f}")
            return
        # the end of the log, and half-way between two checkpoints (the most a replay folds after one)
        between = [c["offset"] + args.every // 2 for c in written if c["offset"] + args.every // 2 < end - 1]
        points = sorted({end - 1, *between[-1:]})
        rows = []
        for to in points:
            warm, cold = [], []
            for _ in range(args.runs):
                cpu_w, out_w = replay_cpu(log_dir, to)
                cpu_c, out_c = replay_cpu(log_dir, to, "--no-checkpoints")
                assert {k: v for k, v in out_w.items() if k != "checkpoint"} == out_c, f"outputs differ at --to {to}"
                warm.append(cpu_w)
                cold.append(cpu_c)
            rows.append({"to": to, "from": out_w["checkpoint"]["offset"],
                         "withCheckpointCpuS": statistics.median(warm), "fromZeroCpuS": statistics.median(cold),
                         "runs": {"withCheckpoint": warm, "fromZero": cold}})
        aside = Path(tmp) / "aside"
        starts: dict[str, list[tuple[float, float]]] = {"withCheckpoint": [], "fromZero": []}
        for _ in range(args.runs):
            wall, cpu, active = restart(log_dir)
            assert active["checkpoint"] is not None, active
            starts["withCheckpoint"].append((wall, cpu))
            (log_dir / checkpoints.DIRECTORY).rename(aside)
            wall, cpu, active = restart(log_dir)
            assert active["checkpoint"] is None, active
            starts["fromZero"].append((wall, cpu))
            shutil.rmtree(log_dir / checkpoints.DIRECTORY, ignore_errors=True)  # what the killed run may have begun
            aside.rename(log_dir / checkpoints.DIRECTORY)
    result = {"events": end, "checkpoints": written, "replays": rows, "runStarts": starts,
              "loadAverage": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result))
        return
    _print_checkpoints(written)
    for r in rows:
        print(f"replay --to {r['to']:,}: {r['withCheckpointCpuS']:.2f} CPU-s from the checkpoint at "
              f"{r['from']:,} vs {r['fromZeroCpuS']:.2f} CPU-s from offset 0 (medians of {args.runs}; "
              f"{r['fromZeroCpuS'] / r['withCheckpointCpuS']:.1f}x)")
    for mode, runs in starts.items():
        print(f"kueue-es run to 'active' {mode}: {statistics.median(w for w, _ in runs):.2f} s wall, "
              f"{statistics.median(c for _, c in runs):.2f} CPU-s (medians of {args.runs})")
    print(f"load average {result['loadAverage']:.1f}")


if __name__ == "__main__":
    main()
