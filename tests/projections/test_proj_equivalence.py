"""Scheduling equivalence in the queues: what makes two workloads equivalent under the recorded configuration
(``SchedulingEquivalenceHashingIgnorePodSetName``), whether a failure parks the failing workload's equivalent ones
with it (``SchedulingEquivalenceHashing``), and the reason a parked shape keeps, through snapshots too."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, adjusted_workload, prelude, records, upsert, workload

from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState

DOC = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
NAMED = {**DOC, "featureGates": {"SchedulingEquivalenceHashingIgnorePodSetName": False}}
NO_HASHING = {**DOC, "featureGates": {"SchedulingEquivalenceHashing": False,
                                      "SchedulingEquivalenceHashingIgnorePodSetName": False}}


class Log:
    """A state fed the prelude, then one event at a time."""

    def __init__(self, *events: ev.AnyEvent) -> None:
        self.state = ClusterState()
        for r in records([[*prelude(T0), *events]]):
            self.state.apply(r)

    def apply(self, e: ev.AnyEvent) -> None:
        self.state.apply(ev.Record(self.state.offset + 1, e))

    def no_fit(self, key: str, reason: str = "WaitingForQuota") -> None:
        self.apply(ev.WorkloadPending(time=T0, key=key, reason=reason, message="does not fit", requeue_reason="NoFit",
                                      parked=True, cycle=1, input=self.state.offset))


def _two_pod_set_names() -> Log:
    """Two workloads asking for the same under pod sets named differently, queued in cq0."""
    return Log(*(upsert(adjusted_workload("ns0", name, uid=f"uid-{name}", queue="lq0", runtime=None, limit="1",
                                          created=T0 + i, pod_set=pod_set), T0)
                 for i, (name, pod_set) in enumerate((("a", "launcher"), ("b", "worker")))))


def test_shapes_leave_pod_set_names_out_unless_the_gate_is_off() -> None:
    log = _two_pod_set_names()
    shapes = log.state.queues["cq0"].shapes
    assert shapes["ns0/a"] == shapes["ns0/b"], "names ignored by default"
    log.apply(ev.ConfigRecorded(time=T0, document=NAMED))  # the first one recorded: nothing is flushed
    assert shapes is not log.state.queues["cq0"].shapes
    shapes = log.state.queues["cq0"].shapes
    assert shapes["ns0/a"] != shapes["ns0/b"], "queued workloads take their shapes anew"
    log.apply(ev.ConfigRecorded(time=T0, document=DOC))
    shapes = log.state.queues["cq0"].shapes
    assert shapes["ns0/a"] == shapes["ns0/b"]


def test_a_no_fit_parks_the_equivalent_workloads_and_remembers_why() -> None:
    log = _two_pod_set_names()
    log.no_fit("ns0/a")
    q = log.state.queues["cq0"]
    assert sorted(q.inadmissible) == ["ns0/a", "ns0/b"] and not q.entries
    assert q.parked_shapes == {q.shapes["ns0/a"]: "WaitingForQuota"}
    assert q.no_fit_reason("ns0/b") == "WaitingForQuota"
    assert {"ns0/a", "ns0/b"} <= set(log.state.touched), "the workload controller looks at both again"
    log.apply(upsert(workload("ns0", "c", queue="lq0", cpu="100"), T0))
    assert "ns0/c" in q.entries and q.no_fit_reason("ns0/c") is None, "another shape waits in the heap"
    log.apply(ev.ObjectDeleted(time=T0, key="ns0/c", kind="Workload"))  # a flush
    assert not q.parked_shapes and q.no_fit_reason("ns0/b") is None


def test_a_failure_parks_only_the_failing_workload_with_hashing_off() -> None:
    log = _two_pod_set_names()
    log.apply(ev.ConfigRecorded(time=T0, document=NO_HASHING))
    log.no_fit("ns0/a")
    q = log.state.queues["cq0"]
    assert list(q.inadmissible) == ["ns0/a"] and list(q.entries) == ["ns0/b"] and not q.parked_shapes


def test_with_names_in_the_shape_a_differently_named_pod_set_is_not_parked() -> None:
    log = _two_pod_set_names()
    log.apply(ev.ConfigRecorded(time=T0, document=NAMED))
    log.no_fit("ns0/a")
    q = log.state.queues["cq0"]
    assert list(q.inadmissible) == ["ns0/a"] and list(q.entries) == ["ns0/b"]


def test_parked_reasons_survive_a_snapshot_and_an_older_one_has_none() -> None:
    log = _two_pod_set_names()
    log.no_fit("ns0/a", reason="ExceedsMaxQuota")
    restored = snapshot.decode(snapshot.encode(log.state))
    assert restored.queues["cq0"].no_fit_reason("ns0/b") == "ExceedsMaxQuota"
    assert snapshot.digest(restored) == snapshot.digest(log.state)
    old = msgspec.msgpack.decode(snapshot.encode(log.state))  # plain lists, bytes kept
    old[0] = 5
    queues = snapshot.Snapshot.__struct_fields__.index("queues")
    for q in old[queues]:
        del q[snapshot.QueueSnapshot.__struct_fields__.index("parked_reasons"):]
    older = snapshot.decode(msgspec.msgpack.encode(old)).queues["cq0"]
    assert older.parked_shapes == {older.shapes["ns0/b"]: ""} and older.no_fit_reason("ns0/b") == ""


CONCURRENT = {**DOC, "featureGates": {"ConcurrentAdmission": True}}
ALLOWED = "kueue.x-k8s.io/workload-allowed-resource-flavors"


def _variants() -> Log:
    """Two workloads asking for the same, queued in cq0, allowed different flavors (as two variants are)."""
    return Log(*(upsert(workload("ns0", name, uid=f"uid-{name}", queue="lq0", created=T0 + i,
                                 annotations={ALLOWED: allowed}), T0)
                 for i, (name, allowed) in enumerate((("a", "f0"), ("b", "f1")))))


def test_under_concurrent_admission_workloads_allowed_other_flavors_are_not_equivalent() -> None:
    """Kueue puts the allowed-flavors annotation in the scheduling hash while ConcurrentAdmission is on: a
    variant that found no room on its flavor does not park one that may use another."""
    log = _variants()
    q = log.state.queues["cq0"]
    assert q.shapes["ns0/a"] == q.shapes["ns0/b"], "the gate off: the annotation is not read"
    log.apply(ev.ConfigRecorded(time=T0, document=CONCURRENT))
    q = log.state.queues["cq0"]
    assert q.shapes["ns0/a"] != q.shapes["ns0/b"], "queued workloads take their shapes anew"
    log.no_fit("ns0/a")
    assert list(q.inadmissible) == ["ns0/a"] and list(q.entries) == ["ns0/b"]
    restored = snapshot.decode(snapshot.encode(log.state))
    assert restored.queues["cq0"].shapes == q.shapes
    log.apply(ev.ConfigRecorded(time=T0, document=DOC))
    q = log.state.queues["cq0"]
    assert q.shapes["ns0/a"] == q.shapes["ns0/b"]
