"""Reading a file of YAML documents people give (``kueue-es import -f``, a STATE.yaml, a configuration), bounded:
an endless or huge input (``/dev/zero``, a runaway pipe) is refused once it is clearly no set of Kubernetes
objects, instead of being read until memory runs out.

Two limits, both Kubernetes' own: a document may be at most :data:`MAX_DOCUMENT_BYTES`, the apiserver's default
limit on a request body (its ``MaxRequestBodyBytes``, 3 MiB: a larger object could not be created), and the whole
input at most :data:`MAX_INPUT_BYTES`, etcd's default storage quota (``--quota-backend-bytes``, 2 GiB: more than a
cluster with the defaults can store). A normal input is read whole in large chunks; document boundaries are only
looked for once a stretch without one grows past the document limit.
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

from events.errors import InvalidInput

MAX_DOCUMENT_BYTES = 3 * 1024 * 1024
MAX_INPUT_BYTES = 2 * 1024 * 1024 * 1024
CHUNK = 1024 * 1024


def read_bounded(stream: BinaryIO, source: str) -> bytes:
    """All of ``stream``; refused (naming ``source`` and the line where the document over the limit starts) when a
    document or the whole is larger than Kubernetes would take. A regular file is read whole, as fast as reading
    it plainly, once its size is known to be within the limit; anything else (a device, a pipe) in chunks, each
    looked at as it comes, so an endless one is refused as soon as it passes a limit."""
    if _regular_size(stream) is not None:
        _check_total(_regular_size(stream) or 0, source)
        data = stream.read()
        _check_total(len(data), source)
        _check_documents(data, 0, source)
        return data
    buf = bytearray()
    start = 0  # where the last document begins, as far as looked
    while chunk := stream.read(CHUNK):
        buf += chunk
        _check_total(len(buf), source)
        start = _check_documents(buf, start, source)
    return bytes(buf)


def _regular_size(stream: BinaryIO) -> int | None:
    try:
        st = os.fstat(stream.fileno())
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _check_total(size: int, source: str) -> None:
    if size > MAX_INPUT_BYTES:
        raise InvalidInput(f"{source}: larger than {MAX_INPUT_BYTES} bytes (2 GiB, etcd's default storage quota): "
                           "more than a cluster could hold; split it")


def _check_documents(buf: bytes | bytearray, start: int, source: str) -> int:
    """Refuse a document of ``buf`` from ``start`` on larger than the limit (the last may still grow); where the
    last one that may still grow begins."""
    while len(buf) - start > MAX_DOCUMENT_BYTES:
        after = _last_document_start(buf, start, start + MAX_DOCUMENT_BYTES)
        if after <= start:
            line = buf.count(b"\n", 0, start) + 1
            raise InvalidInput(f"{source}: line {line}: a document larger than {MAX_DOCUMENT_BYTES} bytes (3 MiB, "
                               "the apiserver's default request body limit): no Kubernetes object is that large")
        start = after
    return start


def _last_document_start(buf: bytes | bytearray, lo: int, hi: int) -> int:
    """The start of the last document that begins after ``lo`` and at most at ``hi`` (the line after a ``---`` or
    ``...`` marker line); -1 if none does. (``rfind``, at C speed, where a regular expression would yield every
    marker of a file of small documents to Python.)"""
    best = -1
    for token in (b"\n---", b"\n..."):  # the rarer one only after the other's last
        end = hi + len(token) - 1
        while True:
            i = buf.rfind(token, max(lo, best), end)
            if i < 0:
                break
            follows = buf[i + len(token): i + len(token) + 1]
            if not follows or follows in b" \t\r\n":
                best = max(best, i + 1)
                break
            end = i + len(token) - 1
    return best
