"""What the mirror marks when a Configuration is recorded: every queue, for the status writer
(:mod:`connectors.k8s.queues`), and the terminating flavors, for the finalizer worker, as a gate it sets may change
a queue's status and which flavors the quotas in force use (no cluster needed)."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, cluster_queue, flavor, local_queue, namespace, upsert

from connectors.k8s.mirror import Mirror
from events import schema as ev
from events.timefmt import format_time
from projections.queue_status import cluster_queue_status

EFFECTIVE = {"effectiveQuotas": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
    {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": "3"}]}]}]}}


def _config(gates: dict[str, bool]) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=T0, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates})


def test_a_recorded_configuration_marks_every_queue_whose_status_it_may_change() -> None:
    """Under DynamicQuotaOrchestration a ClusterQueue's status lists its effective quotas' flavors: a
    Configuration turning the gate on changes what the writer is to write, so every queue is looked at again."""
    mirror = Mirror()
    cq = msgspec.structs.replace(cluster_queue("cq0", quotas={"f0": 2}), status=EFFECTIVE)
    for obj in (namespace("ns0"), flavor("f0"), flavor("f1"), cq, local_queue("ns0", "lq0", "cq0")):
        mirror.apply(ev.Record(mirror.offset + 1, upsert(obj, T0)))
    before = cluster_queue_status(mirror.state, "cq0", T0)
    mirror.dirty_queues = set()
    mirror.apply(ev.Record(mirror.offset + 1, _config({"DynamicQuotaOrchestration": True})))
    after = cluster_queue_status(mirror.state, "cq0", T0)
    assert before is not None and after is not None
    assert [f["name"] for f in before["flavorsReservation"]] != [f["name"] for f in after["flavorsReservation"]]
    assert "*" in mirror.dirty_queues


def test_a_recorded_configuration_marks_the_terminating_flavors_for_their_finalizer() -> None:
    """Under DynamicQuotaOrchestration a flavor only the effective quotas list is in use
    (:func:`projections.in_use.users`): turning the gate on or off may free a terminating one, or hold it."""
    mirror = Mirror()
    going = msgspec.structs.replace(flavor("f1"), metadata=msgspec.structs.replace(
        flavor("f1").metadata, deletion_timestamp=format_time(T0)))
    cq = msgspec.structs.replace(cluster_queue("cq0", quotas={"f0": 2}), status=EFFECTIVE)
    for obj in (flavor("f0"), going, cq):
        mirror.apply(ev.Record(mirror.offset + 1, upsert(obj, T0)))
    mirror.dirty_finalizers = set()
    mirror.apply(ev.Record(mirror.offset + 1, _config({"DynamicQuotaOrchestration": True})))
    assert mirror.dirty_finalizers == {"ResourceFlavor/f1"}


def test_a_workload_taking_quota_marks_the_cohort_objects_above_its_queue_under_fair_sharing() -> None:
    """Its ClusterQueue's usage moves the weighted share of every Cohort above it (``status.fairSharing``), so the
    writer looks at those Cohort objects again; with Fair Sharing off their status does not depend on it."""
    from fixtures.eventgen import cohort, workload

    from events import objects as o

    def run(fair: bool) -> set[str]:
        mirror = Mirror()
        events: list[ev.AnyEvent] = [ev.ConfigRecorded(time=T0, writer="test", document={"fairSharing": {}})] \
            if fair else []
        events += [upsert(obj, T0) for obj in (
            namespace("ns0"), flavor("f0"), cohort("root"), cohort("co", parent="root"),
            cluster_queue("cq0", cohort="co", quotas={"f0": 2}), local_queue("ns0", "lq0", "cq0"),
            workload("ns0", "w", queue="lq0"))]
        for e in events:
            mirror.apply(ev.Record(mirror.offset + 1, e))
        mirror.dirty_queues = set()
        admission = o.Admission(cluster_queue="cq0", pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "f0"}, count=1, resource_usage={"cpu": "1"})])
        mirror.apply(ev.Record(mirror.offset + 1, ev.QuotaReserved(
            key="ns0/w", admission=admission, time=T0 + 1000, cycle=1, input=0)))
        return mirror.dirty_queues

    assert {"Cohort/co", "Cohort/root", "ClusterQueue/cq0"} <= run(True)
    assert not {q for q in run(False) if q.startswith("Cohort/")}


def test_a_cluster_queue_quota_change_marks_every_queue_under_fair_sharing() -> None:
    """A ClusterQueue's quota moves what its cohort can lend, so the weighted share of every node in its tree."""
    def run(fair: bool) -> set[str]:
        mirror = Mirror()
        if fair:
            mirror.apply(ev.Record(mirror.offset + 1, ev.ConfigRecorded(time=T0, writer="t", document={
                "fairSharing": {}})))
        for obj in (flavor("f0"), cluster_queue("a", cohort="co", quotas={"f0": 2}),
                    cluster_queue("b", cohort="co", quotas={"f0": 2})):
            mirror.apply(ev.Record(mirror.offset + 1, upsert(obj, T0)))
        mirror.dirty_queues = set()
        mirror.apply(ev.Record(mirror.offset + 1, upsert(cluster_queue("a", cohort="co", quotas={"f0": 5}), T0)))
        return mirror.dirty_queues

    assert "*" in run(True)
    assert run(False) == {"ClusterQueue/a"}
