"""``constraints.txt`` pins what the project's own set-up installs (``scripts/bootstrap.sh``, hence CI and the demo;
the Docker image), so a dependency's new release cannot turn a run red between two commits. pyproject.toml keeps
lower bounds; these tests keep the two in step: every package pyproject.toml names, for running, testing,
plotting or building, is pinned to one version its bound accepts."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for n, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt line {n}: {line!r} is not NAME==VERSION"
        key = canonicalize_name(name)
        assert key not in pins, f"constraints.txt line {n}: {name} pinned twice"
        pins[key] = Version(version)
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = list(project["project"]["dependencies"])
    for extra in ("test", "plot"):
        declared += project["project"]["optional-dependencies"][extra]
    declared += project["build-system"]["requires"]
    return [Requirement(r) for r in declared]


@pytest.mark.parametrize("requirement", _declared(), ids=str)
def test_every_declared_package_is_pinned_within_its_bound(requirement: Requirement) -> None:
    pins = _pins()
    name = canonicalize_name(requirement.name)
    assert name in pins, f"{requirement.name} is in pyproject.toml but not in constraints.txt: run scripts/lock.sh"
    assert requirement.specifier.contains(pins[name], prereleases=True), (
        f"constraints.txt pins {requirement.name}=={pins[name]}, outside pyproject.toml's {requirement}")


def test_bootstrap_installs_with_the_constraints() -> None:
    script = (ROOT / "scripts" / "bootstrap.sh").read_text()
    install = next(line for line in script.splitlines() if "pip install" in line and "-e" in line)
    assert "-c constraints.txt" in install and "--build-constraint constraints.txt" in install
    assert "constraints.txt -nt" in script, "a changed constraints.txt must trigger a reinstall"


def test_the_image_installs_with_the_constraints() -> None:
    """The Docker image pins pip first (``--build-constraint`` is new in pip 25.3), then builds kueue-es as
    bootstrap.sh does."""
    lines = (ROOT / "docker" / "Dockerfile").read_text().splitlines()
    steps = [line for line in lines if "pip install" in line]
    copies = [n for n, line in enumerate(lines) if line.startswith("COPY ") and "constraints.txt" in line.split()]
    assert copies and copies[0] < lines.index(steps[0]), "constraints.txt is copied into the build stage first"
    assert "-c constraints.txt pip" in steps[0]
    assert "-c constraints.txt --build-constraint constraints.txt ." in steps[1]
