"""How ``scripts/bootstrap.sh`` installs kueue-es: editable, quietly."""

from __future__ import annotations

import tomllib

from clihelp import REPO


def test_the_editable_install_takes_the_plain_pth_path() -> None:
    """setuptools installs a project editable with a plain ``.pth`` file only when ``package-dir`` maps the root
    package to one directory holding every package as itself; otherwise it installs an import finder and warns
    "Editable installation" on every fresh ``scripts/demo.sh``. Ours: the packages side by side at the root."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = tool.get("package-dir", {})
    assert set(package_dir) == {""}, package_dir
    root = REPO / package_dir[""]
    tops = [pattern.rstrip("*") for pattern in tool["packages"]["find"]["include"]]
    assert sorted(tops) == ["connectors", "events", "kueue_es", "projections"]
    assert all((root / top / "__init__.py").is_file() for top in tops)
