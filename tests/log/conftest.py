"""Fixtures of the embedded log's tests."""

from __future__ import annotations

import pytest

from events import filelog


@pytest.fixture(params=["1 MiB windows", "64-byte windows"])
def windows(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case also with windows smaller than a frame (``pytestmark = pytest.mark.usefixtures("windows")``): frames
    then always straddle a window's end."""
    if request.param == "64-byte windows":
        monkeypatch.setattr(filelog, "READ_CHUNK", 64)
