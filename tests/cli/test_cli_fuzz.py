"""The read-only commands under random flags and values: an answer (exit 0), or one line on stderr with exit code
1 (not found, a damaged log) or 2 (misuse, bad input); never a traceback; the log is left byte for byte as it
was, and so is a manifest ``--save-snapshot`` is pointed at. The commands run in-process (``kueue_es.cli.main``) over a small log holding the cluster fixture and
one scheduling cycle's decisions."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from clihelp import FIXTURES, append, fold, kueue_es
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_es.cli import main
from kueue_es.scheduler import decide

CLUSTER = FIXTURES / "cluster.yaml"

_offsets = st.one_of(st.integers(-3, 40).map(str), st.sampled_from(["", "abc", "1e3", "99999999999999999999"]))
_times = st.sampled_from(["2024-05-01T00:00:00Z", "2024-05-01T00:00:00.5+02:00", "2030-01-01T00:00:00Z",
                          "1970-01-01T00:00:00Z", "yesterday", "", "2024-13-45T99:99:99Z"])
_names = st.sampled_from(["cq-a", "cq-b", "nope", "", "team-a/lq-a", "team-a/infer-2", "team-a/", "/", "a/b/c"])
_outputs = st.sampled_from(["summary", "yaml", "json", "table", "csv", "text", "xml", ""])
_counts = st.one_of(st.integers(-2, 3000).map(str), st.just("many"))


def _flags(tmp: Path, log: Path) -> dict[str, st.SearchStrategy[list[str]]]:
    files = st.sampled_from([str(CLUSTER), str(tmp / "missing.yaml"), str(log), str(FIXTURES)])
    targets = st.sampled_from([str(tmp / "state.snap"), str(tmp / "objects.yaml"), str(log), str(tmp / "no" / "x")])
    """Where --save-snapshot may write: a new file, a manifest it must not overwrite, a directory, nowhere."""

    def flag(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
        return values.map(lambda v: [name, v])

    def switch(name: str) -> st.SearchStrategy[list[str]]:
        return st.just([name])

    common = [flag("--to", _offsets), flag("--at", _times), flag("-o", _outputs), switch("--no-checkpoints")]
    return {
        "replay": st.lists(st.one_of(*common, switch("--quarantine"), switch("--verify"), flag("--config", files),
                                     flag("--snapshot", files), flag("--save-snapshot", targets)), max_size=4),
        "audit": st.lists(st.one_of(flag("--cluster-queue", _names), flag("-n", _names), flag("--since", _times),
                                    flag("--until", _times), flag("-o", _outputs), switch("--quarantine"),
                                    _names.map(lambda n: [n])), max_size=4),
        "explain": st.lists(st.one_of(*common, flag("--now", _times), flag("--config", files), flag("-f", files),
                                      _names.map(lambda n: [n])), max_size=4),
        "metrics": st.lists(st.one_of(*common[:2], common[3]), max_size=3),
        "pending": st.lists(st.one_of(*common, flag("--cluster-queue", _names), flag("--local-queue", _names),
                                      flag("--offset", _counts), flag("--limit", _counts), flag("--config", files),
                                      flag("--api-version", st.sampled_from(["v1beta2", "v1beta1", "v1"]))),
                            max_size=5),
        "log inspect": st.lists(flag("-o", _outputs), max_size=1),
    }


@pytest.fixture(scope="module")
def decided_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster fixture imported, then one scheduling cycle's decisions appended (as ``kueue-es run`` would)."""
    log = tmp_path_factory.mktemp("fuzz") / "log"
    assert kueue_es("import", "-f", CLUSTER, "--log", log).code == 0
    decisions = decide(fold(log))
    assert decisions, "the fixture has a workload to admit"
    append(log, decisions)
    return log


def _snapshot(log: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.iterdir()) if p.is_file() and p.suffix == ".seg"}


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def test_the_commands_answer_or_refuse_in_one_line_and_leave_the_log_alone(decided_log: Path,
                                                                          tmp_path_factory: pytest.TempPathFactory
                                                                          ) -> None:
    tmp = tmp_path_factory.mktemp("fuzz-out")
    manifest = tmp / "objects.yaml"
    manifest.write_bytes(CLUSTER.read_bytes())
    flags = _flags(tmp, decided_log)
    before = _snapshot(decided_log)

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(sorted(flags)).flatmap(lambda c: st.tuples(st.just(c), flags[c])))
    def check(case: tuple[str, list[list[str]]]) -> None:
        command, parts = case
        argv = [*command.split(), "--log", str(decided_log), *(a for part in parts for a in part)]
        code, err = _run(argv)
        assert code in (0, 1, 2), (argv, code, err)
        assert "Traceback" not in err, (argv, err)
        lines = err.strip().splitlines()
        assert all(line.startswith("kueue-es: warning: ") for line in lines[:-1]), (argv, err)
        if code != 0:  # warnings on the way, then the one line that says why
            assert lines and lines[-1].startswith("kueue-es") and " error: " in lines[-1], (argv, err)
        assert _snapshot(decided_log) == before, argv
        assert manifest.read_bytes() == CLUSTER.read_bytes(), argv

    check()
