"""Snapshots written by an older kueue-es are read by today's: golden bytes, not snapshots rebuilt in today's layout.

The files under ``golden/`` are version-48 snapshots written by commit 8fe9cab6 (before the Admission Fair Sharing
history went per LocalQueue) of the logs :mod:`tests.fixtures.old_snapshots` builds; that module says how to write
them again. Each test decodes one with today's code, folds the rest of its log and compares with the full fold.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler import afs
from kueue_es.scheduler.config_record import in_force
from projections import snapshot
from projections.cluster import ClusterState
from tests.fixtures.old_snapshots import LOGS

GOLDEN = Path(__file__).parent / "golden"


def _folded(records: list[ev.Record], state: ClusterState | None = None) -> ClusterState:
    """``state`` (a restored snapshot; none: an empty state) with the records after it folded in."""
    if state is None:
        state = ClusterState()
        todo = records
    else:
        todo = [rec for rec in records if rec.offset > state.offset]
    for rec in todo:
        state.apply(rec)
    return state


def _afs_observed(state: ClusterState) -> list:
    """What Admission Fair Sharing makes of the history: each LocalQueue's consumed usage (exact floats) and
    status, now and later. The history itself is compacted where each state's own past put its checkpoints."""
    config = in_force(state)
    if config is None or config.admission_fair_sharing is None:
        return []
    folded = afs.fold(state, config)
    return [(lq, ahead, repr(sorted(folded.consumed(lq, state.time + ahead).items())),
             afs.local_queue_status(state, config, lq, state.time + ahead))
            for lq in ("ns/a", "ns/b") for ahead in (0, 60_000, 600_000)]


def _digest(state: ClusterState) -> str:
    """The state's digest but for the AFS history's compaction points (compared by :func:`_afs_observed`) and
    the marks of where parked workloads were last sent back (``flushes``), which a version-48 snapshot does
    not hold: they only tell a failed attempt decided before the snapshot and folded after it not to park."""
    taken = msgspec.structs.replace(snapshot.take(state), afs_queues=[], flushes=[])
    return hashlib.sha256(msgspec.msgpack.encode(taken, order="sorted")).hexdigest()


def _golden(name: str) -> bytes:
    data = (GOLDEN / name).read_bytes()
    assert msgspec.msgpack.decode(data)[0] == 48, "the golden files are version-48 snapshots"
    return data


@pytest.mark.parametrize("name", ["v48-afs.snap", "v48-plain.snap"])
def test_a_version_48_snapshot_restores_and_folds_on_to_the_full_fold(name: str) -> None:
    records, cut = LOGS[name]()
    restored = snapshot.decode(_golden(name))
    assert restored.offset == cut
    resumed, full = _folded(records, restored), _folded(records)
    assert _digest(resumed) == _digest(full)
    assert _afs_observed(resumed) == _afs_observed(full)


def test_a_version_48_snapshot_keeps_its_admission_fair_sharing_history() -> None:
    records, cut = LOGS["v48-afs.snap"]()
    restored = snapshot.decode(_golden("v48-afs.snap"))
    assert sorted(restored.afs_history) == ["ns/a", "ns/b"]
    at_cut = _folded(records[:cut])
    assert _digest(restored) == _digest(at_cut)
    assert _afs_observed(restored) == _afs_observed(at_cut)


def test_a_version_48_snapshot_with_history_older_than_its_configuration_is_refused_for_a_full_fold() -> None:
    """Its entries before the change of half-life were folded by its writer under the new one; today each is folded
    under the configuration it was recorded under, which the snapshot cannot tell: the caller passes it over."""
    with pytest.raises(InvalidInput, match="Admission Fair Sharing history recorded before its Configuration"):
        snapshot.decode(_golden("v48-afs-changed.snap"))
