"""What compiling the fold's hot modules with mypyc buys: builds two scratch trees of a commit, one pure, one with
those modules compiled, and checks that both fold a log to the same state digest.

The copies are the same code, adjusted the same way for the compiler without changing what it does: the msgspec
Structs of ``projections/workloads.py`` and ``projections/metrics.py`` move to modules of their own that stay
interpreted (mypyc builds a class with another metaclass as a plain class and drops the class options
``array_like``, ``gc=False``, ``frozen``, which would change the snapshots), re-exported under their old names; the
annotations that say less than the code does get what it does (:data:`RETYPED`: compiled code checks a declared type
at run time); and the other lines mypy rejects get ``# type: ignore``. ``events/filelog.py`` stays
interpreted (mypyc does not compile async generators), and so do ``events/lazy.py`` and ``events/codec.py``, whose
work is msgspec's (and which define Structs). Measure the two trees with ``PYTHONPATH`` set to each, one process per
tree (a compiled module's ``.so`` is imported before its ``.py``):

    python benchmarks/replay.py --events 200000 --runs 1 --log /tmp/replay-200k.klog --keep --pending 1000
    python benchmarks/mypyc_fold.py /tmp/mc --log /tmp/replay-200k.klog
    PYTHONPATH=/tmp/mc/compiled valgrind --tool=callgrind python benchmarks/fold_by_type.py /tmp/replay-200k.klog --events 100000 --fold-only
    PYTHONPATH=/tmp/mc/compiled python benchmarks/replay.py --log /tmp/replay-200k.klog --keep --runs 3 --pending 1000

Needs mypy (which ships mypyc) and a C compiler; neither is a dependency of kueue-es.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMPILED = (
    "projections/cluster.py", "projections/workloads.py", "projections/metrics.py", "projections/queues.py",
    "projections/secondpass.py", "projections/deadlines.py", "projections/topology.py", "events/timefmt.py",
)
"""The modules compiled: those a profile of the replay's fold spends its time in (``events/filelog.py`` aside)."""

WORKLOAD_STRUCTS_HEAD = '''"""The projected workload structs, out of :mod:`projections.workloads` so that they stay interpreted."""

from __future__ import annotations

import msgspec

from events import objects as o
from events.schema import FlavorScan, WaitedPodSet
from events.timefmt import format_time

PENDING, RESERVED, ADMITTED, FINISHED = "Pending", "QuotaReserved", "Admitted", "Finished"


'''
PHASES = 'PENDING, RESERVED, ADMITTED, FINISHED = "Pending", "QuotaReserved", "Admitted", "Finished"\n'


def export(commit: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def split_structs(tree: Path) -> None:
    """Move the Structs (and the memos their methods use) out of the modules to be compiled."""
    path = tree / "projections/workloads.py"
    lines = path.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("class PodSetInfo("))
    end = next(i for i, line in enumerate(lines) if line.startswith("def owner_of("))
    memo_start = next(i for i, line in enumerate(lines) if line.startswith("_SHAPES: dict"))
    memo_end = next(i for i, line in enumerate(lines) if line.startswith("    return encoded")) + 1
    assert start < end < memo_start < memo_end
    (tree / "projections/workload_info.py").write_text(
        WORKLOAD_STRUCTS_HEAD + "".join(lines[start:end]) + "\n" + "".join(lines[memo_start:memo_end]))
    rest = "".join(lines[:start] + lines[end:memo_start] + lines[memo_end:])
    assert PHASES in rest
    path.write_text(rest.replace(PHASES, (
        "from projections.workload_info import (  # noqa: F401\n"
        "    _ENC, _NAMELESS, _SHAPES, ADMITTED, FINISHED, PENDING, RESERVED,\n"
        "    PodSetInfo, RemoteCopy, WorkloadInfo, _nameless, _nameless_one,\n)\n")))

    path = tree / "projections/metrics.py"
    text = path.read_text()
    start, end = text.index("class MetricsSnapshot("), text.index("_Seen = tuple[")
    (tree / "projections/metrics_snapshot.py").write_text(
        '"""MetricsSnapshot, out of :mod:`projections.metrics` so that it stays interpreted."""\n\n'
        "from __future__ import annotations\n\nimport msgspec\n\nObserved = list[int]\n\n\n" + text[start:end])
    path.write_text(text[:start] + "from projections.metrics_snapshot import MetricsSnapshot  # noqa: E402\n\n\n"
                    + text[end:])


RETYPED = {
    "projections/cluster.py": [(
        "    def _upsert_object(self, obj: o.KObject) -> None:\n        name = obj.metadata.name\n",
        "    def _upsert_object(self, obj: o.KObject) -> None:\n        name = obj.metadata.name\n"
        "        old: Any = None\n")],
    "projections/metrics.py": [
        ("        for name, series in snap.histograms:\n            if name in m.histograms:\n"
         "                m.histograms[name] = {tuple(k): list(v) for k, v in series}\n",
         "        for name, observed in snap.histograms:\n            if name in m.histograms:\n"
         "                m.histograms[name] = {tuple(k): list(v) for k, v in observed}\n"),
        ("    samples: list[tuple[tuple[str, ...], Any]]\n", "    samples: list[tuple[Any, ...]]\n")],
}
"""Where an annotation says less than the code does, which compiled code would check at run time and refuse: a
local variable given several types (``_upsert_object``'s ``old``, ``MetricsFold.restore``'s ``series``) and a
histogram's samples, which have three items, not two."""


def retype(tree: Path) -> int:
    """Apply :data:`RETYPED`, then ``# type: ignore`` what mypy still rejects; returns how many lines were marked."""
    for name, edits in RETYPED.items():
        path = tree / name
        text = path.read_text()
        for before, after in edits:
            assert text.count(before) == 1, (name, before)
            text = text.replace(before, after)
        path.write_text(text)
    marked = 0
    for _ in range(3):
        out = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                              *COMPILED], cwd=tree, capture_output=True, text=True)
        if out.returncode == 0:
            return marked
        where = sorted({(m[1], int(m[2])) for m in re.finditer(r"^(.+?):(\d+): error:", out.stdout, re.M)})
        for name, line in where:
            source = (tree / name).read_text().splitlines(keepends=True)
            text = re.sub(r"  # type: ignore(\[[^\]]*\])?", "", source[line - 1].rstrip("\n"))
            source[line - 1] = text + "  # type: ignore\n"
            (tree / name).write_text("".join(source))
            marked += 1
    raise SystemExit(f"mypy still rejects the tree:\n{out.stdout}")


def compile_tree(tree: Path) -> float:
    """Compile :data:`COMPILED` in place; returns the wall-clock seconds it took."""
    (tree / "pyproject.toml").unlink()  # mypyc's setuptools run would read the project's metadata
    t0 = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("mypyc")), "--follow-imports=silent",
                    "--ignore-missing-imports", *COMPILED], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


DIGEST = """
import sys
import projections.cluster
from events.filelog import FileLog
from projections.cluster import ClusterState
from projections.snapshot import digest
state = ClusterState()
for batch in FileLog.open(sys.argv[1], readonly=True).scan(lazy=sys.argv[2] == "lazy"):
    for record in batch:
        state.apply(record)
print(projections.cluster.__file__, digest(state))
"""


def digest(tree: Path, log: Path, mode: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", DIGEST, str(log), mode], env={**os.environ, "PYTHONPATH": str(tree)},
                         cwd=tree, check=True, capture_output=True, text=True)
    where, value = out.stdout.split()
    return where, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path, help="where to put the trees (DIR/pure, DIR/compiled); must not exist")
    p.add_argument("--commit", default="HEAD", help="the commit to build (default HEAD)")
    p.add_argument("--log", type=Path, help="a log to fold in both trees, comparing the state digests")
    args = p.parse_args()
    if args.dir.exists():
        raise SystemExit(f"{args.dir} exists")
    pure, compiled = args.dir / "pure", args.dir / "compiled"
    export(args.commit, pure)
    split_structs(pure)
    marked = retype(pure)
    shutil.copytree(pure, compiled)
    seconds = compile_tree(compiled)
    built = sorted(str(f.relative_to(compiled)) for f in compiled.rglob("*.so") if "build" not in f.parts)
    print(f"{len(COMPILED)} modules compiled in {seconds:.0f} s (wall clock), {marked} lines marked "
          f"'# type: ignore': {', '.join(built)}")
    if args.log:
        for mode in ("lazy", "full"):
            (where_p, p_digest), (where_c, c_digest) = digest(pure, args.log, mode), digest(compiled, args.log, mode)
            assert where_p.endswith(".py") and where_c.endswith(".so"), (where_p, where_c)
            print(f"digest ({mode} decoding): pure {p_digest[:16]}…, compiled {c_digest[:16]}…")
            if p_digest != c_digest:
                raise SystemExit("the compiled fold's state differs")


if __name__ == "__main__":
    main()
