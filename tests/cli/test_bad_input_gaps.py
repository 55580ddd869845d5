"""Bad input the CLI once mishandled: an endless file read forever, a Kueue Configuration's unknown fields taken
in silence. Each is refused with exit code 2 and one line naming the file and the field, appending nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import FIXTURES, kueue_es, log_size, one_line_error

CLUSTER = FIXTURES / "cluster.yaml"
TOO_LARGE = ("a document larger than 3145728 bytes (3 MiB, the apiserver's default request body limit): no "
             "Kubernetes object is that large")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    assert kueue_es("import", "-f", CLUSTER, "--log", path).code == 0
    return path


def test_an_endless_input_is_refused_not_read_forever(log: Path, tmp_path: Path) -> None:
    before = log_size(log)
    r = kueue_es("import", "-f", CLUSTER, "-f", "/dev/zero", "--log", log)
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: /dev/zero: line 1: {TOO_LARGE}"
    r = kueue_es("import", "-f", "-", "--log", log, stdin="kind: x\n---\n" + "a" * (4 << 20))
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: <stdin>: line 2: {TOO_LARGE}"
    assert log_size(log) == before
    r = kueue_es("import", "-f", "/dev/zero", "--log", tmp_path / "new-log")
    assert r.code == 2 and not (tmp_path / "new-log").exists()
    r = kueue_es("schedule", "-f", CLUSTER, "--config", "/dev/zero")
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: /dev/zero: line 1: {TOO_LARGE}"
