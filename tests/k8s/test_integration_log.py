"""What a job integration appends once (:mod:`connectors.k8s.integration_log`): a fact about a Workload is not
appended again while the log has not applied it, and what the log applied is not kept."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
from fixtures.jobs import namespace

from connectors.k8s.integration_log import IntegrationLog
from connectors.k8s.mirror import Mirror
from events import schema as ev
from projections.workloads import PENDING, WorkloadInfo


class _Stats:
    finished = 0
    errors = 0


def _workload(name: str) -> WorkloadInfo:
    return WorkloadInfo(key=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue_name="lq", created=0,
                        priority=0, priority_class="", pod_sets=(), phase=PENDING)


@pytest.mark.asyncio
async def test_a_fact_is_appended_once_until_applied_and_then_not_kept() -> None:
    mirror = Mirror()
    appended: list[Any] = []

    async def append(events: Any) -> list[int]:
        appended.extend(events)
        return [len(appended)] * len(events)

    log = IntegrationLog(append, mirror, _Stats(), kind="Pod", log=structlog.get_logger("test"))
    a, b = _workload("a"), _workload("b")
    assert await log.append_once(a, ev.JobStopped(time=1, key=a.key, uid=a.uid))
    assert not await log.append_once(a, ev.JobStopped(time=1, key=a.key, uid=a.uid)), "not applied yet"
    ns = namespace()
    mirror.apply(ev.Record(1, ev.ObjectUpserted(time=1, key=ns.key, uid=ns.metadata.uid, obj=ns)))  # a's applied
    assert await log.append_once(b, ev.JobStopped(time=1, key=b.key, uid=b.uid))
    assert list(log._appended) == [("ns/b", "JobStopped")], "a's, applied, is not kept"
