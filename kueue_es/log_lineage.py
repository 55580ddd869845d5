"""The embedded log's lineage under leader election: its identity, which the leader names in the Lease, and a stale
log moved aside (never deleted) when another replica's log led since (:class:`kueue_es.kube_service._EmbeddedLog`).
I/O only: names and directories for operators, which no fold sees."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

from events.filelog import SEGMENT_SUFFIX
from kueue_es import checkpoints

IDENTITY_FILE = ".kueue-es-log-id"
"""Beside the embedded log's segments: the log's identity (a random hex id), which the leader names in the Lease."""


def identity(directory: Path) -> str:
    """The identity of the log in ``directory`` ("": none yet, e.g. written by a version that named none)."""
    try:
        return (directory / IDENTITY_FILE).read_text().strip()
    except FileNotFoundError:
        return ""


def new_identity(directory: Path) -> str:
    """Give the log in ``directory`` (whose writer lock is held) a new identity, durably."""
    ident = uuid.uuid4().hex  # noqa: TID251 - names the log itself, which no fold sees
    tmp = directory / (IDENTITY_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(ident + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / IDENTITY_FILE)
    _fsync_dir(directory)
    return ident


def move_aside(directory: Path, own: str) -> Path:
    """Rename the log in ``directory`` (writer lock held; ``own``: its identity) to a sibling named by the time and
    that identity; where the directory cannot be renamed (a mount point), its segments, checkpoints and identity go
    into a hidden directory of that name inside it instead. Returns where the log went."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")  # noqa: TID251 - a directory name for the operator
    name = f"stale-{stamp}-{own or 'unnamed-' + uuid.uuid4().hex[:8]}"  # noqa: TID251 - likewise
    aside = directory.with_name(f"{directory.name}.{name}")
    try:
        os.rename(directory, aside)
        _fsync_dir(aside.parent)
    except OSError:
        aside = directory / f".{name}"
        aside.mkdir()
        for p in sorted(directory.iterdir()):
            if p.suffix == SEGMENT_SUFFIX or p.name in (checkpoints.DIRECTORY, IDENTITY_FILE):
                p.rename(aside / p.name)
        _fsync_dir(directory)
    return aside


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
