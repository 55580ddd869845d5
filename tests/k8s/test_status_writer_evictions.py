"""The status writer writes a workload's eviction record (``status.schedulingStats.evictions``) in the patch that
evicts it, as Kueue's eviction writes both at once: the counts the Workload showed when first seen, plus one."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

T = "2026-01-01T00:00:00Z"
ADMITTED = o.WorkloadStatus(
    admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "2"}, count=2)]),
    conditions=[o.Condition(type=t, status="True", reason=t, message=t, last_transition_time=T)
                for t in ("QuotaReserved", "Admitted")],
    scheduling_stats=o.SchedulingStats(evictions=[
        o.SchedulingStatsEviction(reason="Preempted", underlying_cause="", count=1)]))
WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]), status=ADMITTED)


class Apiserver:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        return msgspec.json.encode({"metadata": {"resourceVersion": str(len(self.patches) + 1)}})


async def evicted_status(decision: ev.Decision) -> dict[str, Any]:
    """The status the writer patches onto ``WL`` (its record showing one preemption) once ``decision`` evicts it."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL)])
    api = Apiserver()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    assert api.patches == [], "the record it shows is the projection's: nothing to write"
    await journal.append([decision])
    await writer.sync(WL.key)
    (body,) = api.patches
    return body["status"]


@pytest.mark.asyncio
async def test_the_eviction_patch_carries_the_eviction_record() -> None:
    status = await evicted_status(ev.WorkloadEvicted(time=5, key=WL.key, uid="wl-uid", cycle=1, input=0,
                                                     reason="PodsReadyTimeout", underlying_cause="WaitForStart",
                                                     message="Exceeded the PodsReady timeout ns/wl"))
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Evicted"] == "PodsReadyTimeout"
    assert status["schedulingStats"] == {"evictions": [
        {"reason": "Preempted", "underlyingCause": "", "count": 1},
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]}
    # what it wrote reads back as Kueue's type (the cause written even when empty, as Kueue's CRD requires)
    shown = msgspec.convert(status["schedulingStats"], o.SchedulingStats)
    assert [(e.reason, e.underlying_cause, e.count) for e in shown.evictions] == [
        ("Preempted", "", 1), ("PodsReadyTimeout", "WaitForStart", 1)]


@pytest.mark.asyncio
async def test_a_configured_preemption_writes_its_preemption_config_as_the_underlying_cause() -> None:
    """ConfigurablePreemptions (Kueue v0.20): the victim's record gains a ``Preempted`` entry whose cause is the
    PreemptionConfig's name, apart from the plain preemption it showed; the Evicted condition keeps the reason
    ``Preempted``."""
    status = await evicted_status(ev.WorkloadPreempted(
        time=5, key=WL.key, uid="wl-uid", cycle=1, input=0, reason="ConfigurablePreemption", message="m",
        preemptor="ns/hero", preemption_config="defrag", selected_by=(("tier", (0, 1)), ("priority", (0,)))))
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Evicted"] == "Preempted"
    assert status["schedulingStats"] == {"evictions": [
        {"reason": "Preempted", "underlyingCause": "", "count": 1},
        {"reason": "Preempted", "underlyingCause": "defrag", "count": 1}]}
