"""The status writer's retry after a conflict writes only what it set out to change: a field another controller
wrote meanwhile (an external MultiKueue dispatcher's nominations) is not overwritten from the log, which has not
observed it yet (Kueue's patches set only the fields their controller owns)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import Conflict
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]))


class DispatchedMeanwhile:
    """The apiserver: an external dispatcher nominated workers after the Workload the log holds, so the first
    status write conflicts and a re-read shows the nominations."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.fresh = msgspec.structs.replace(
            WL, metadata=msgspec.structs.replace(WL.metadata, resource_version="2"),
            status=o.WorkloadStatus(nominated_cluster_names=["worker1", "worker2"]))

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        if body["metadata"]["resourceVersion"] == "1":
            raise Conflict("the object has been modified", 409)
        return msgspec.json.encode({"metadata": {"resourceVersion": "3"}})

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.fresh)


@pytest.mark.asyncio
async def test_a_retried_status_write_keeps_the_nominations_written_meanwhile() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.WorkloadPending(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0, reason="Pending",
                                             message="no quota")])
    api = DispatchedMeanwhile()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    first, retried = api.patches
    assert first["metadata"]["resourceVersion"] == "1" and retried["metadata"]["resourceVersion"] == "2"
    assert "nominatedClusterNames" not in retried["status"], "the dispatcher's nominations are not cleared"
    assert [c["reason"] for c in retried["status"]["conditions"]] == ["Pending"]
    outcomes = [r.event for r in [r async for r in journal.log.read()] if isinstance(r.event, ev.DecisionApplied)]
    assert [e.decision for e in outcomes] == [1]


@pytest.mark.asyncio
async def test_the_next_write_before_the_watch_shows_them_keeps_the_nominations_too() -> None:
    """The retried write's result, which the writer stands on until the watch shows it, holds the dispatcher's
    nominations, which the log has not observed yet: a next decision written meanwhile does not clear them."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.WorkloadPending(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0, reason="Pending",
                                             message="no quota")])
    api = DispatchedMeanwhile()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    await journal.append([ev.WorkloadPending(time=3, key=WL.key, uid="wl-uid", cycle=2, input=0, reason="Pending",
                                             message="still no quota")])
    await writer.sync(WL.key)
    assert len(api.patches) == 3
    assert "nominatedClusterNames" not in api.patches[-1]["status"], "the dispatcher's nominations are not cleared"
    assert [c["message"] for c in api.patches[-1]["status"]["conditions"]] == ["still no quota"]
