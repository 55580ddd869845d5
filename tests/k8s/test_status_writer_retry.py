"""The status writer's retry after a conflict writes only what it set out to change: a field another controller
wrote meanwhile (an external MultiKueue dispatcher's nominations) is not overwritten from the log, which has not
observed it yet (Kueue's patches set only the fields their controller owns)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import Conflict, Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from tests.k8s.test_status_writer_foreign import Apiserver

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


async def _pending() -> LocalJournal:
    """A journal whose log holds ``WL``, pending for want of quota."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.WorkloadPending(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0, reason="Pending",
                                             message="no quota")])
    return journal


@pytest.mark.asyncio
async def test_a_retried_status_write_keeps_the_nominations_written_meanwhile() -> None:
    journal = await _pending()
    api = DispatchedMeanwhile()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    first, retried = api.patches
    assert first["metadata"]["resourceVersion"] == "1" and retried["metadata"]["resourceVersion"] == "2"
    assert "nominatedClusterNames" not in retried["status"], "the dispatcher's nominations are not cleared"
    assert [c["reason"] for c in retried["status"]["conditions"]] == ["Pending", "NoReservation"]
    outcomes = [r.event for r in [r async for r in journal.log.read()] if isinstance(r.event, ev.DecisionApplied)]
    assert [e.decision for e in outcomes] == [1]


@pytest.mark.asyncio
async def test_the_next_write_before_the_watch_shows_them_keeps_the_nominations_too() -> None:
    """The retried write's result, which the writer stands on until the watch shows it, holds the dispatcher's
    nominations, which the log has not observed yet: a next decision written meanwhile does not clear them."""
    journal = await _pending()
    api = DispatchedMeanwhile()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    await journal.append([ev.WorkloadPending(time=3, key=WL.key, uid="wl-uid", cycle=2, input=0, reason="Pending",
                                             message="still no quota")])
    await writer.sync(WL.key)
    assert len(api.patches) == 3
    assert "nominatedClusterNames" not in api.patches[-1]["status"], "the dispatcher's nominations are not cleared"
    assert [c["message"] for c in api.patches[-1]["status"]["conditions"]] == ["still no quota", "The workload has no reservation"]


def _rewritten(*pod_sets: o.PodSet) -> o.Workload:
    """WL as a job integration rewrote it in place (resourceVersion 2) after the log last saw it."""
    return msgspec.structs.replace(WL, metadata=msgspec.structs.replace(WL.metadata, resource_version="2"),
                                   spec=msgspec.structs.replace(WL.spec, pod_sets=list(pod_sets)))


async def _reserve_against(fresh: o.Workload, *, observed: bool = False
                           ) -> tuple[list[dict[str, Any]], list[ev.AnyEvent]]:
    """Write a quota reservation of WL's 2 pods whose first write conflicts with ``fresh`` (or, ``observed``, after
    the watch brought ``fresh`` to the log): the patches sent and the decision's outcome."""
    journal = LocalJournal(MemoryLog(), Mirror())
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "2"}, count=2)])
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.QuotaReserved(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0, admission=admission)])
    if observed:
        await journal.append([ev.ObjectUpserted(time=3, key=WL.key, uid="wl-uid", obj=fresh)])
    api = Apiserver(None if observed else fresh)
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    outcomes = [r.event for r in [r async for r in journal.log.read()]
                if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]
    return api.patches, outcomes


@pytest.mark.asyncio
async def test_a_retry_writes_no_admission_onto_pod_sets_rewritten_meanwhile() -> None:
    """A pod group's (a Job's) Workload rewritten with other pod sets while it held no quota: the reservation, of
    the old ones, is not written onto it (Kueue's pinned write would conflict and its scheduler forget the assumed
    workload); the rewrite reaches the log and the scheduler decides again."""
    for fresh in (_rewritten(o.PodSet(count=3)), _rewritten(o.PodSet(name="workers", count=2)),
                  _rewritten(o.PodSet(count=2), o.PodSet(name="driver"))):
        patches, outcomes = await _reserve_against(fresh)
        assert len(patches) == 1, f"not written again onto {fresh.spec.pod_sets}"
        assert [(type(e).__name__, e.reason, e.message) for e in outcomes] == [  # type: ignore[union-attr]
            ("DecisionRejected", "SpecChanged", "spec.podSets changed")]
    # the contrast: a rewrite of what the admission does not depend on (a template label) leaves it standing
    labelled = o.PodSet(count=2, template=o.PodTemplateSpec(metadata=o.TemplateMeta(labels={"team": "a"})))
    patches, outcomes = await _reserve_against(_rewritten(labelled))
    assert [p["metadata"]["resourceVersion"] for p in patches] == ["1", "2"]
    assert patches[1]["status"]["admission"]["podSetAssignments"][0]["name"] == "main"
    assert [type(e).__name__ for e in outcomes] == ["DecisionApplied"]


@pytest.mark.asyncio
async def test_a_rewrite_the_log_holds_before_the_write_gets_no_admission_either() -> None:
    """The rewrite reached the log first: the fold forgets the reservation the rewritten Workload does not show
    (projections/cluster.py), so the one write made carries no admission of the old pod sets."""
    patches, _ = await _reserve_against(_rewritten(o.PodSet(count=3)), observed=True)
    assert all("admission" not in p["status"] for p in patches), patches


@pytest.mark.asyncio
async def test_a_retry_about_a_reservation_the_workload_shows_holds_through_a_scale_down() -> None:
    """Kueue's webhook lets the pod sets of a Workload holding quota change only as an elastic Job scales down
    in place, and the fold keeps a reservation the rewritten Workload shows: an eviction of it, whose first write
    conflicts with that scale-down, is written again (Kueue's eviction patch goes through), not rejected — else
    the log would hold an eviction the apiserver never got, waiting for a release that never comes."""
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "2"}, count=2)])
    reserved = msgspec.structs.replace(WL, status=o.WorkloadStatus(admission=admission, conditions=[
        o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved"),
        o.Condition(type="Admitted", status="True", reason="Admitted")]))
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=reserved),
                          ev.WorkloadEvicted(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0,
                                             reason="PodsReadyTimeout", message="not ready in time")])
    scaled = msgspec.structs.replace(_rewritten(o.PodSet(count=1)), status=reserved.status)
    api = Apiserver(scaled)
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    outcomes = [type(r.event).__name__ for r in [r async for r in journal.log.read()]
                if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]
    assert [p["metadata"]["resourceVersion"] for p in api.patches] == ["1", "2"]
    assert outcomes == ["DecisionApplied"]


class TimesOutOnce:
    """The apiserver: the first status write times out (the Workload unchanged), the second is written and
    resolves ``written``."""

    def __init__(self) -> None:
        self.patches = 0
        self.written: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches += 1
        await asyncio.sleep(0)  # the request goes out: the writer's loop goes to sleep before it fails
        if self.patches == 1:
            raise Unavailable("PATCH .../workloads/wl/status: timed out")
        if not self.written.done():
            self.written.set_result(None)
        return msgspec.json.encode({"metadata": {"resourceVersion": "2"}})


@pytest.mark.asyncio
async def test_a_failed_status_write_is_retried_while_the_log_is_quiet() -> None:
    """The scheduler's decision was the last append: the write's retry alone brings the status to the cluster."""
    journal = await _pending()
    api = TimesOutOnce()
    writer = StatusWriter(api, journal, retry_s=0.01)  # type: ignore[arg-type]
    task = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(5):  # a guard only: the retry is due after 10 ms
            await api.written
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert (api.patches, writer.stats.errors) == (2, 1)
