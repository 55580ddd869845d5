"""Input is read bounded (``events.bounded_input``): a document larger than the apiserver's default request body
limit, or an input larger than etcd's default storage quota, is refused as soon as it is read that far, naming the
file and the line the document starts on; inputs within the limits are read whole and unchanged."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from events import bounded_input
from events.bounded_input import MAX_DOCUMENT_BYTES, read_bounded
from events.errors import InvalidInput

DOC = b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n"
BIG = b"data: " + b"x" * MAX_DOCUMENT_BYTES + b"\n"


class _Endless(io.RawIOBase):
    """A device that never ends (as /dev/zero); counts what was read."""

    def __init__(self, unit: bytes) -> None:
        self.unit, self.given = unit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = len(b) - len(b) % len(self.unit)
        b[:n] = self.unit * (n // len(self.unit))
        self.given += n
        return n


def _file(tmp_path: Path, data: bytes) -> io.BufferedReader:
    path = tmp_path / "in.yaml"
    path.write_bytes(data)
    return open(path, "rb")  # noqa: SIM115 - closed by the test's end


def _refusal(stream: io.IOBase) -> str:
    with pytest.raises(InvalidInput) as refused:
        read_bounded(stream, "in.yaml")  # type: ignore[arg-type]
    return str(refused.value)


def test_an_endless_device_is_refused_once_a_document_passes_the_limit() -> None:
    zero = _Endless(b"\0")
    assert _refusal(zero) == (
        "in.yaml: line 1: a document larger than 3145728 bytes (3 MiB, the apiserver's default request body limit): "
        "no Kubernetes object is that large")
    assert zero.given <= MAX_DOCUMENT_BYTES + 2 * bounded_input.CHUNK


def test_an_endless_stream_of_small_documents_is_refused_past_the_total_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_input, "MAX_INPUT_BYTES", 8 * bounded_input.CHUNK)
    assert _refusal(_Endless(DOC)).startswith("in.yaml: larger than")
    monkeypatch.setattr(bounded_input, "MAX_INPUT_BYTES", len(DOC) * 10 - 1)
    assert _refusal(io.BytesIO(DOC * 10)).startswith("in.yaml: larger than")


@pytest.mark.parametrize("regular", [True, False])
def test_a_document_too_large_is_named_by_its_first_line_wherever_it_is(tmp_path: Path, regular: bool) -> None:
    data = DOC * 3 + BIG + DOC * 3
    with _file(tmp_path, data) if regular else io.BufferedReader(io.BytesIO(data)) as stream:  # type: ignore[arg-type]
        assert _refusal(stream).startswith("in.yaml: line 15: a document larger than 3145728 bytes")


@pytest.mark.parametrize("regular", [True, False])
def test_inputs_within_the_limits_are_read_whole(tmp_path: Path, regular: bool) -> None:
    near = b"data: " + b"x" * (MAX_DOCUMENT_BYTES - 100) + b"\n...\n"  # ends with a document end marker
    data = (DOC * 5000 + near) * 3 + b"---x: no marker\n" + DOC
    with _file(tmp_path, data) if regular else io.BufferedReader(io.BytesIO(data)) as stream:  # type: ignore[arg-type]
        assert read_bounded(stream, "in.yaml") == data  # type: ignore[arg-type]
