"""The layering and purity rules, checked by tools so they cannot silently erode.

* import-linter: ``events`` imports nothing of the project, ``projections`` only ``events``, the scheduler
  neither connectors nor the CLI/service, and only the service wiring and CLI reach ``connectors``;
* ruff's banned-API rule: no wall clock, randomness or uuid4 in ``events``, ``projections`` or the scheduler;
* the rest of ruff's rules (``pyproject.toml``) over the whole tree, so the code stays as the linter keeps it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is not installed (pip install -e '.[test]')"
    return found


def test_import_layers() -> None:
    result = subprocess.run([_tool("lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pure_core_reads_no_clock_and_draws_no_random() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "--select", "TID251", "--no-cache", "events", "projections", "kueue_es/scheduler"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_whole_tree_passes_ruff() -> None:
    result = subprocess.run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by basename (no packages here): two of one name stop the whole collection."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
