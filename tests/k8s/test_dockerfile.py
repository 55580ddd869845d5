"""docker/Dockerfile: non-root, nothing written to the image at run time, no registry host baked in."""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "docker" / "Dockerfile"


def test_runs_as_non_root_with_a_read_only_root_filesystem() -> None:
    text = DOCKERFILE.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert "PYTHONDONTWRITEBYTECODE=1" in text and "compileall" in text
    assert 'ENTRYPOINT ["kueue-es"]' in text
    for image in re.findall(r"^ARG PYTHON_IMAGE=(\S+)", text, re.M):
        assert "/" not in image.split(":")[0], "no registry host in image names"
