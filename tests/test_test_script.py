"""``scripts/test.sh`` runs the unit tests (over pytest-xdist workers) and then the integration tests, both always,
and fails if either fails or collects nothing (pytest's exit code 5). Checked against a stand-in pytest that
records its arguments and exits with the code a test asks for."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test.sh"

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../../calls"
case " $* " in *" --ignore=tests/integration "*) exit "$UNIT_RC";; *) exit "$INTEG_RC";; esac
"""


def _run(tmp_path: Path, unit: int, integ: int, *args: str) -> tuple[int, list[str]]:
    (tmp_path / "scripts").mkdir(exist_ok=True)
    (tmp_path / ".venv" / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy(SCRIPT, tmp_path / "scripts" / "test.sh")
    (tmp_path / "scripts" / "bootstrap.sh").write_text("#!/usr/bin/env bash\n")
    (tmp_path / ".venv" / "bin" / "python").write_text(FAKE_PYTHON)
    for f in (tmp_path / "scripts" / "bootstrap.sh", tmp_path / ".venv" / "bin" / "python"):
        f.chmod(0o755)
    (tmp_path / "calls").unlink(missing_ok=True)
    env = dict(os.environ, UNIT_RC=str(unit), INTEG_RC=str(integ))
    proc = subprocess.run(["bash", str(tmp_path / "scripts" / "test.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=60)
    return proc.returncode, (tmp_path / "calls").read_text().splitlines()


@pytest.mark.parametrize(("unit", "integ", "rc"), [(0, 0, 0), (1, 0, 1), (0, 1, 1), (5, 0, 1), (0, 5, 1),
                                                   (1, 5, 1), (5, 5, 1)])
def test_both_runs_happen_and_either_failing_fails(tmp_path: Path, unit: int, integ: int, rc: int) -> None:
    code, calls = _run(tmp_path, unit, integ, "-q", "--durations=25")
    assert code == rc
    assert len(calls) == 2
    assert "-n auto --ignore=tests/integration -q --durations=25" in calls[0]
    assert calls[1].endswith("tests/integration -q --durations=25")


def test_an_interrupted_unit_run_stops_there(tmp_path: Path) -> None:
    code, calls = _run(tmp_path, 2, 0)
    assert code == 2 and len(calls) == 1


@pytest.mark.parametrize("choice", [["tests/scheduler"], ["-m", "kube"], ["-k", "tas"]])
def test_arguments_choosing_tests_give_one_plain_run(tmp_path: Path, choice: list[str]) -> None:
    code, calls = _run(tmp_path, 0, 0, "-q", *choice)
    assert code == 0 and len(calls) == 1
    assert "-n" not in calls[0].split() and calls[0].endswith(" ".join(["-q", *choice]))
