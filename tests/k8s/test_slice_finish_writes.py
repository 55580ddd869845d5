"""An elastic Job's old slice finished beside the new one, at the connector: the Job integration's pass
(:meth:`connectors.k8s.jobframework.JobReconciler._sliced`, deciding through
:func:`connectors.k8s.workload_slices.ensure`) and the status patch the writer would then write for each
slice (:func:`connectors.k8s.writer.status_patch`), on plain data: the Job integration over a mirror with a
recording client, no API server. Kueue's ``EnsureWorkloadSlices`` finishes the old slice ``OutOfSync`` when it
holds no quota (an evicted one once its quota is given back: the log's eviction, its stored Workload showing
``Evicted=True``; before that it is the Job's, Kueue #15661), or when the new one holds quota as its
replacement; the new slice, the Job's, is left as it is."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from test_workload_slices import _elastic_job, _phase, _setup, _slice, _slice_name

from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import _changed, desired_status, observed_status, status_patch
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED, PENDING

NEW = _slice_name(2)
OUT_OF_SYNC = ("Finished", "True", "OutOfSync", "The workload slice is out of sync with its parent job")


def _as_stored(mirror: Mirror, *names: str) -> None:
    """The stored Workloads show what the log holds for them (every write done): nothing left to write."""
    for name in names:
        key = f"ns/{name}"
        shown = msgspec.convert(desired_status(mirror.state.workloads[key]), o.WorkloadStatus)
        mirror.workloads[key] = msgspec.structs.replace(mirror.workloads[key], status=shown)


def _patch(mirror: Mirror, name: str) -> dict[str, Any]:
    """The ``status`` the writer would patch onto the slice now (empty: no write)."""
    key = f"ns/{name}"
    current = observed_status(mirror.workloads[key])
    desired = desired_status(mirror.state.workloads[key])
    return status_patch(current, desired, _changed(desired, current))


@pytest.mark.asyncio
@pytest.mark.parametrize(("old_phase", "evicted", "new_phase"), [
    (PENDING, False, PENDING),  # the old one holds no quota
    # evicted, in the log and as stored, its quota given back (holding it, it is the Job's first:
    # Kueue #15661)
    (PENDING, True, PENDING),
    (ADMITTED, False, ADMITTED),  # the new one holds quota as its replacement
])
async def test_the_old_slice_is_finished_and_the_new_one_left_as_it_is(old_phase: str, evicted: bool,
                                                                      new_phase: str) -> None:
    jobs, mirror, appended, client = _setup(_elastic_job(6, generation=2), _slice("a", 4),
                                            _slice(NEW, 6, replaces="ns/a", created="2026-01-01T00:00:09Z"))
    _phase(mirror, "a", old_phase, evicted=evicted)
    _phase(mirror, NEW, new_phase)
    # what an earlier pass synced of the Job's pods on the slice it runs on: nothing of it to sync again
    mirror.apply(ev.Record(mirror.offset + 1, ev.PodsReadyChanged(time=2, key=f"ns/{NEW}", uid=f"{NEW}-uid",
                                                                  ready=False, reason="WaitForStart")))
    _as_stored(mirror, "a", NEW)
    assert (_patch(mirror, "a"), _patch(mirror, NEW)) == ({}, {})
    new_before = mirror.workloads[f"ns/{NEW}"]

    await jobs.reconcile("ns/train")

    decided = [e for e in appended if getattr(e, "key", None) in ("ns/a", f"ns/{NEW}")]
    assert [(type(e).__name__, e.key, e.reason, e.message) for e in decided] == [  # type: ignore[union-attr]
        ("WorkloadFinished", "ns/a", *OUT_OF_SYNC[2:])]
    assert client.created == [] and [p for p in client.patches if p[0] == "Workload"] == [], (
        "the Job integration writes neither slice itself (no counts to set: the new one has the Job's)")
    for e in decided:
        mirror.apply(ev.Record(mirror.offset + 1, e))
    old = _patch(mirror, "a")
    assert set(old) == {"conditions"}, old
    finished = [(c["type"], c["status"], c["reason"], c["message"]) for c in old["conditions"]
                if c["type"] == "Finished"]
    assert finished == [OUT_OF_SYNC]
    assert _patch(mirror, NEW) == {}, "nothing to write for the new slice"
    assert mirror.workloads[f"ns/{NEW}"] is new_before
    assert mirror.state.workloads[f"ns/{NEW}"].phase == new_phase
