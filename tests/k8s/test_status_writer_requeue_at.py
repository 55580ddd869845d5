"""The status writer carries a late Retry check's delay (``RequeueAtRaised``) to the Workload: a patch that
moves ``status.requeueState.requeueAt`` and nothing else (the requeue count as the Workload shows it), as
Kueue's workload controller patches only that time (``SetRequeueState(..., false)``)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s.journal import LocalJournal
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.timefmt import parse_time
from tests.k8s.test_status_writer_evictions import Apiserver

T = "2024-01-01T00:00:13Z"
CHECKS = [o.AdmissionCheckState(name="approval", state="Retry", last_transition_time="2024-01-01T00:00:12Z",
                                message="later", requeue_after_seconds=60)]
EVICTED = o.WorkloadStatus(
    conditions=[
        o.Condition(type="QuotaReserved", status="False", reason="PendingEvaluation", message="m",
                    last_transition_time=T),
        o.Condition(type="Evicted", status="True", reason="AdmissionCheck", message="m",
                    last_transition_time=T),
        o.Condition(type="Requeued", status="False", reason="AdmissionCheck", message="m",
                    last_transition_time=T)],
    admission_checks=CHECKS,
    requeue_state=o.RequeueState(count=2, requeue_at="2024-01-01T00:00:40Z"))
WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]), status=EVICTED)


@pytest.mark.asyncio
async def test_a_raised_requeue_at_is_patched_alone_with_the_count_kept() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=parse_time(T), key=WL.key, uid="wl-uid", obj=WL)])
    api = Apiserver()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    assert api.patches == [], "what it shows is the projection's: nothing to write"
    await journal.append([ev.RequeueAtRaised(time=parse_time(T), key=WL.key, uid="wl-uid", cycle=1, input=0,
                                             requeue_at=parse_time("2024-01-01T00:01:12Z"))])
    await writer.sync(WL.key)
    (body,) = api.patches
    assert body["status"] == {"requeueState": {"count": 2, "requeueAt": "2024-01-01T00:01:12Z"}}


@pytest.mark.asyncio
async def test_a_requeue_at_that_goes_is_patched_to_null_the_count_kept() -> None:
    """A requeueAt the log drops while the count stays (BackoffFinished of a workload evicted twice) goes out
    as ``requeueAt: null``: a merge patch merges nested maps key by key (RFC 7386), so ``{"count": 2}`` alone
    would leave the old time on the apiserver, where Kueue's write removes it."""
    ended = o.WorkloadStatus(conditions=[
        o.Condition(type="QuotaReserved", status="False", reason="PendingEvaluation", message="m",
                    last_transition_time=T),
        o.Condition(type="Evicted", status="True", reason="PodsReadyTimeout", message="m",
                    last_transition_time=T),
        o.Condition(type="Requeued", status="False", reason="PodsReadyTimeout", message="m",
                    last_transition_time=T)],
        requeue_state=o.RequeueState(count=2, requeue_at="2024-01-01T00:00:40Z"))
    wl = msgspec.structs.replace(WL, status=ended)
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=parse_time(T), key=wl.key, uid="wl-uid", obj=wl)])
    api = Apiserver()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(wl.key)
    assert api.patches == []
    ended_at = parse_time("2024-01-01T00:00:41Z")
    await journal.append([ev.WorkloadRequeued(time=ended_at, key=wl.key, uid="wl-uid", cycle=1, input=0,
                                              status=True, reason="BackoffFinished",
                                              message="The workload backoff was finished")])
    await writer.sync(wl.key)
    (body,) = api.patches
    assert body["status"]["requeueState"] == {"count": 2, "requeueAt": None}
    shown = merge_patched(msgspec.to_builtins(ended), body["status"])
    assert shown["requeueState"] == {"count": 2}, "what the apiserver holds after the patch"


@pytest.mark.asyncio
async def test_a_cleared_requeue_at_of_a_workload_never_evicted_takes_the_requeue_state_away() -> None:
    """``RequeueAtCleared`` with no requeue counted: nothing of ``requeueState`` is left, so it goes whole."""
    waiting = o.WorkloadStatus(conditions=[
        o.Condition(type="QuotaReserved", status="False", reason="Pending", message="m",
                    last_transition_time=T)],
        admission_checks=CHECKS, requeue_state=o.RequeueState(count=0, requeue_at="2024-01-01T00:01:12Z"))
    wl = msgspec.structs.replace(WL, status=waiting)
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=parse_time(T), key=wl.key, uid="wl-uid", obj=wl)])
    api = Apiserver()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(wl.key)
    assert api.patches == []
    passed = parse_time("2024-01-01T00:01:12Z")
    await journal.append([ev.RequeueAtCleared(time=passed, key=wl.key, uid="wl-uid", cycle=1, input=0)])
    await writer.sync(wl.key)
    (body,) = api.patches
    assert body["status"] == {"requeueState": None}
