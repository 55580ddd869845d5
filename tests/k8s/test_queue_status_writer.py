"""The queue status writer (:mod:`connectors.k8s.queues`), against a recording client: a LocalQueue's
``status.fairSharing`` under Admission Fair Sharing, written again as the log's time passes its next sample, left
alone where Kueue writes none; a Cohort object's ``status.fairSharing`` under Fair Sharing; a terminating
ClusterQueue's status while its finalizer holds it."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from fixtures.eventgen import T0, cluster_queue, cohort, flavor, local_queue, namespace, upsert
from fixtures.jobs import RecordingClient

from connectors.k8s.json_patch import merge_patched
from connectors.k8s.mirror import Mirror
from connectors.k8s.queues import QueueStatusWriter
from events import objects as o
from events import schema as ev
from events.timefmt import format_time

MIN = 60_000


class _Journal:
    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror


def _config(**stanzas: Any) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=T0, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **stanzas})


AFS = {"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}


def _mirror(*first: ev.AnyEvent, lq_status: dict | None = None) -> Mirror:
    mirror = Mirror()
    lq = local_queue("ns0", "lq0", "cq0")
    if lq_status is not None:
        lq = o.LocalQueue(metadata=lq.metadata, spec=lq.spec, status=lq_status)
    cq = cluster_queue("cq0", cohort="co", quotas={"f0": 2})
    cq = msgspec.structs.replace(cq, spec=msgspec.structs.replace(
        cq.spec, admission_scope=o.AdmissionScope(admission_mode="UsageBasedAdmissionFairSharing")))
    for e in (*first, *(upsert(x, T0) for x in (namespace("ns0"), flavor("f0"), cohort("co"), cq, lq))):
        mirror.apply(ev.Record(mirror.offset + 1, e))
    return mirror


def _written(mirror: Mirror, key: str) -> dict[str, Any] | None:
    client = RecordingClient()
    asyncio.run(QueueStatusWriter(client, _Journal(mirror)).sync(key))  # type: ignore[arg-type]
    return client.patches[-1][2]["status"] if client.patches else None


def test_a_local_queue_gets_its_admission_fair_sharing_status() -> None:
    status = _written(_mirror(_config(**AFS)), "LocalQueue/ns0/lq0")
    assert status is not None and status["fairSharing"] == {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {}, "lastUpdate": format_time(T0)}}


def test_the_log_passing_a_sample_marks_the_local_queues_again() -> None:
    """Kueue's LocalQueue controller writes the status every ``usageSamplingInterval``: once the log's time is
    past the next sample, the writer looks at every LocalQueue again, and writes the new ``lastUpdate``."""
    mirror = _mirror(_config(**AFS))
    writer = QueueStatusWriter(RecordingClient(), _Journal(mirror))  # type: ignore[arg-type]

    async def take() -> set[str]:
        mirror.dirty_queues = set()
        writer._next = 0.0
        return writer._take()

    assert "LocalQueue/ns0/lq0" not in asyncio.run(take())  # nothing due yet: the next sample is at T0 + 1m
    mirror.apply(ev.Record(mirror.offset + 1, ev.ClockTicked(time=T0 + MIN + 1)))
    assert "LocalQueue/ns0/lq0" in asyncio.run(take())
    status = _written(mirror, "LocalQueue/ns0/lq0")
    assert status is not None
    assert status["fairSharing"]["admissionFairSharingStatus"]["lastUpdate"] == format_time(T0 + MIN)


def test_without_admission_fair_sharing_what_the_local_queue_shows_is_left_alone() -> None:
    shown = {"weightedShare": 0, "admissionFairSharingStatus": {"consumedResources": {"cpu": "1"},
                                                                "lastUpdate": "2024-01-01T00:00:00Z"}}
    status = _written(_mirror(lq_status={"fairSharing": shown}), "LocalQueue/ns0/lq0")
    assert status is not None and status["fairSharing"] == shown


def test_a_cohort_object_gets_its_weighted_share_under_fair_sharing_and_loses_it_without() -> None:
    assert _written(_mirror(_config(fairSharing={})), "Cohort/co") == {"fairSharing": {"weightedShare": 0}}
    mirror = _mirror()
    co = mirror.state.cohorts["co"]
    shows = o.Cohort(metadata=co.metadata, spec=co.spec, status={"fairSharing": {"weightedShare": 7}})
    mirror.apply(ev.Record(mirror.offset + 1, upsert(shows, T0)))
    assert _written(mirror, "Cohort/co") == {"fairSharing": None}


def _terminating(finalizers: list[str]) -> Mirror:
    """A ClusterQueue being deleted, holding ``finalizers``, whose status still shows it Ready with one pending
    workload (what was written before the deletion)."""
    mirror = _mirror()
    cq = mirror.state.cluster_queues["cq0"]
    shown = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                             "message": "Can admit new workloads", "lastTransitionTime": format_time(T0)}],
             "pendingWorkloads": 1}
    deleting = o.ClusterQueue(metadata=msgspec.structs.replace(
        cq.metadata, deletion_timestamp=format_time(T0 + MIN), finalizers=finalizers), spec=cq.spec, status=shown)
    mirror.apply(ev.Record(mirror.offset + 1, upsert(deleting, T0 + MIN)))
    return mirror


def test_a_terminating_cluster_queue_held_by_its_finalizer_keeps_its_status_accurate() -> None:
    """Kueue #13680 (v0.20, its test 'Should keep the status counters and Active condition accurate while
    terminating'): while the resource-in-use finalizer holds a deleted ClusterQueue, its controller keeps writing
    the status: Active=False ``Terminating`` and counts that follow the workloads."""
    status = _written(_terminating(["kueue.x-k8s.io/resource-in-use"]), "ClusterQueue/cq0")
    assert status is not None
    assert [(c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")]
    assert status["pendingWorkloads"] == 0


def test_a_terminating_cluster_queue_whose_finalizer_is_gone_is_left_alone() -> None:
    """Once the finalizer is off the object is about to go: Kueue's controller returns before writing."""
    assert _written(_terminating([]), "ClusterQueue/cq0") is None


def test_a_key_the_desired_fair_sharing_drops_is_removed_by_the_merge_patch() -> None:
    """A LocalQueue taken over under Admission Fair Sharing whose shown ``consumedResources`` holds a
    resource at 0: its seed leaves that one out (nothing above 0 to carry), so the status the writer wants
    lacks it. A merge patch merges nested maps, so the key must be nulled, else it stays on the apiserver and
    the shown and wanted statuses differ at every pass."""
    shown = {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "1", "example.com/gpu": "0"}, "lastUpdate": format_time(T0)}}
    mirror = _mirror(_config(**AFS), lq_status={"fairSharing": shown})
    status = _written(mirror, "LocalQueue/ns0/lq0")
    assert status is not None
    after = merge_patched({"fairSharing": shown}, status)["fairSharing"]["admissionFairSharingStatus"]
    assert after["consumedResources"] == {"cpu": "1"}
