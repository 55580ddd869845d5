"""The status writer carries a late Retry check's delay (``RequeueAtRaised``) to the Workload: a patch that
moves ``status.requeueState.requeueAt`` and nothing else (the requeue count as the Workload shows it), as
Kueue's workload controller patches only that time (``SetRequeueState(..., false)``)."""

from __future__ import annotations

import pytest

from connectors.k8s.journal import LocalJournal
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
