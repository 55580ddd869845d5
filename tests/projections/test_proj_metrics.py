"""Kueue's metrics as a fold: small logs folded, exact samples checked (names, labels, values, buckets).

Counters and histograms come from the decisions in the log and the times they carry; gauges from the state.
Restoring a snapshot and folding the rest gives the same metrics as folding everything.
"""

from __future__ import annotations

import math
import random

import msgspec
import pytest
from fixtures.eventgen import (
    T0,
    admission,
    cohort,
    flavor,
    fold,
    interpret,
    local_queue,
    namespace,
    priority_class,
    random_ops,
    records,
    upsert,
    workload,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.schema import Record
from kueue_es.metrics import text as metrics_text
from kueue_es.scheduler import afs
from projections import snapshot
from projections.cluster import ClusterState
from projections.metrics import (
    ADMISSION_WAIT_BUCKETS,
    COHORT_WEIGHTED_SHARE,
    FAILED_CHECKS_MESSAGE,
    LOCAL_QUEUE_SPECS,
    WAIT_BUCKETS,
    batch_result,
    families,
    merged,
)
from projections.queue_status import cluster_queue_status, local_queue_status

NS = "ns"


class Log:
    """Events folded as they are appended, at consecutive offsets; decisions numbered by cycle."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.records: list[Record] = []
        self.cycle = 0

    def observe(self, *events: ev.AnyEvent) -> None:
        for e in events:
            r = Record(len(self.records), e)
            self.records.append(r)
            self.state.apply(r)

    def decide(self, time: int, *decisions: tuple[type, dict]) -> None:
        """One scheduler batch: ``(DecisionType, fields)`` pairs, all at ``time`` in one cycle."""
        self.cycle += 1
        self.observe(*(t(time=time, cycle=self.cycle, input=len(self.records) - 1, **kw) for t, kw in decisions))


def sample(state: ClusterState, name: str, /, **labels: str) -> float | None:
    """The value of one counter or gauge series (None when the series does not exist)."""
    for f in families(state):
        if f.spec.name == name:
            assert f.spec.kind != "histogram"
            want = tuple(labels[n] for n in f.spec.labels)
            for values, value in f.samples:
                if values == want:
                    return value
            return None
    raise AssertionError(f"no metric {name}")


def series(state: ClusterState, name: str) -> dict[tuple[str, ...], object]:
    for f in families(state):
        if f.spec.name == name:
            if f.spec.kind == "histogram":
                return {values: (counts, total) for values, counts, total in f.samples}
            return dict(f.samples)
    raise AssertionError(f"no metric {name}")


def histogram(state: ClusterState, name: str, /, **labels: str) -> tuple[dict[str, int], float]:
    """Cumulative count per bucket bound (``"+Inf"`` last) and the sum, in seconds."""
    for f in families(state):
        if f.spec.name == name:
            want = tuple(labels[n] for n in f.spec.labels)
            for values, counts, total in f.samples:
                if values == want:
                    bounds = [*(repr(b) for b in f.spec.buckets), "+Inf"]
                    return dict(zip(bounds, counts, strict=True)), total
    raise AssertionError(f"no {name} series {labels}")


def cluster_queue(name: str, cohort_name: str = "", cpu: str = "4", memory: str | None = None,
                  borrowing: str | None = None, lending: str | None = None, **spec: object) -> o.ClusterQueue:
    resources = [o.ResourceQuota(name="cpu", nominal_quota=cpu, borrowing_limit=borrowing)]
    covered = ["cpu"]
    if memory is not None:
        resources.append(o.ResourceQuota(name="memory", nominal_quota=memory, lending_limit=lending))
        covered.append("memory")
    return o.ClusterQueue(metadata=o.ObjectMeta(name=name), spec=o.ClusterQueueSpec(
        cohort_name=cohort_name, namespace_selector=o.LabelSelector(),
        resource_groups=[o.ResourceGroup(covered_resources=covered,
                                         flavors=[o.FlavorQuotas(name="f0", resources=resources)])],
        **spec))  # type: ignore[arg-type]


def cluster(log: Log) -> None:
    log.observe(*(upsert(x, T0) for x in (
        namespace(NS), flavor("f0"), priority_class("high", 100), cohort("co", parent="root"),
        cluster_queue("cq-a", "co", cpu="4", memory="8Gi", borrowing="2", lending="1Gi"),
        cluster_queue("cq-b", "co", cpu="2"),
        local_queue(NS, "lq-a", "cq-a"), local_queue(NS, "lq-b", "cq-b"),
        workload(NS, "w1", queue="lq-a", priority_class="high", created=T0),
        workload(NS, "w2", queue="lq-b", created=T0),
        workload(NS, "w3", queue="lq-b", created=T0),
    )))


def configure(log: Log, time: int, **stanzas: object) -> None:
    """Record a Kueue Configuration with ``stanzas`` (its top-level fields)."""
    log.observe(ev.ConfigRecorded(time=time, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **stanzas}))


RESOURCE_METRICS = {"enableClusterQueueResources": True}
"""Kueue's ``metrics`` stanza that turns the ClusterQueue resource gauges on."""


def reserve(key: str, cq: str, millis: int = 1000) -> tuple[type, dict]:
    return ev.QuotaReserved, {"key": key, "admission": admission(cq, "f0", millis)}


def admit(key: str) -> tuple[type, dict]:
    return ev.WorkloadAdmitted, {"key": key}


def no_fit(key: str) -> tuple[type, dict]:
    return ev.WorkloadPending, {"key": key, "reason": "WaitingForQuota", "message": "insufficient quota",
                                "requeue_reason": "NoFit"}


# --- counters and histograms ----------------------------------------------------------------------------------


def test_a_workload_reserved_admitted_preempted_readmitted_and_finished() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 3500, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    s = log.state
    assert sample(s, "kueue_quota_reserved_workloads_total", cluster_queue="cq-a", priority_class="high") == 1
    assert sample(s, "kueue_admitted_workloads_total", cluster_queue="cq-a", priority_class="high") == 1
    buckets, total = histogram(s, "kueue_quota_reserved_wait_time_seconds", cluster_queue="cq-a",
                               priority_class="high")
    assert (buckets["1.0"], buckets["2.5"], buckets["5.0"], buckets["10240.0"], buckets["+Inf"]) == (0, 0, 1, 1, 1)
    assert total == 3.5
    buckets, total = histogram(s, "kueue_admission_wait_time_seconds", cluster_queue="cq-a", priority_class="high")
    assert list(buckets) == [*map(repr, ADMISSION_WAIT_BUCKETS), "+Inf"] and buckets["40960.0"] == 1
    assert (buckets["2.5"], buckets["5.0"], total) == (0, 1, 3.5)
    assert series(s, "kueue_admission_checks_wait_time_seconds") == {}  # no admission checks

    log.decide(T0 + 20_000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InCohortReclamation",
                                                    "message": "preempted", "preemptor": "ns/w3"}))
    # a second preemption of a workload already evicted is no eviction
    log.decide(T0 + 20_500, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InClusterQueue",
                                                    "message": "preempted", "preemptor": "ns/w2"}))
    assert series(s, "kueue_evicted_workloads_total") == {("cq-a", "Preempted", "", "high"): 1}
    assert series(s, "kueue_preempted_workloads_total") == {("cq-b", "InCohortReclamation"): 1}

    # the job stops: quota released, Requeued=True (now the queued time), 17 s of execution accumulated
    log.decide(T0 + 21_000, (ev.WorkloadRequeued, {"key": "ns/w1", "status": True, "reason": "Preempted",
                                                   "release": True}))
    log.decide(T0 + 23_000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    assert sample(s, "kueue_quota_reserved_workloads_total", cluster_queue="cq-a", priority_class="high") == 2
    buckets, total = histogram(s, "kueue_quota_reserved_wait_time_seconds", cluster_queue="cq-a",
                               priority_class="high")
    assert (buckets["1.0"], buckets["2.5"], buckets["5.0"], total) == (0, 1, 2, 5.5)  # 3.5 s, then 2 s

    log.observe(ev.WorkloadFinished(time=T0 + 33_000, key="ns/w1"))
    assert sample(s, "kueue_finished_workloads_total", cluster_queue="cq-a", priority_class="high") == 1
    buckets, total = histogram(s, "kueue_execution_time_seconds", cluster_queue="cq-a", priority_class="high")
    assert total == 27.0  # 17 s before the preemption, 10 s after
    assert (buckets["20.0"], buckets["40.0"], buckets["+Inf"]) == (0, 1, 1)
    # the LocalQueue's twin observes the same total, under the LocalQueue the workload names
    buckets, total = histogram(s, "kueue_local_queue_execution_time_seconds", name="lq-a", namespace=NS,
                               priority_class="high")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]
    assert (buckets["20.0"], buckets["40.0"], buckets["+Inf"], total) == (0, 1, 1, 27.0)
    log.observe(ev.WorkloadFinished(time=T0 + 34_000, key="ns/w1"))  # finished already: not counted again
    assert series(s, "kueue_local_queue_execution_time_seconds")[("lq-a", NS, "high")][1] == 27.0
    assert sample(s, "kueue_finished_workloads_total", cluster_queue="cq-a", priority_class="high") == 1
    assert sample(s, "kueue_finished_workloads", cluster_queue="cq-a") == 1


def test_evictions_by_reason_and_underlying_cause() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), reserve("ns/w3", "cq-b"))
    log.decide(T0 + 2000, (ev.WorkloadDeactivated, {"key": "ns/w2", "reason": "DeactivatedDueToRequeuingLimitExceeded",
                                                    "message": "too many requeues"}),
               (ev.WorkloadEvicted, {"key": "ns/w3", "reason": "PodsReadyTimeout", "message": "timeout"}))
    log.decide(T0 + 2500, (ev.WorkloadEvicted, {"key": "ns/w3", "reason": "PodsReadyTimeout", "message": "again"}))
    assert series(log.state, "kueue_evicted_workloads_total") == {
        ("cq-b", "Deactivated", "RequeuingLimitExceeded", ""): 1,
        ("cq-b", "PodsReadyTimeout", "", ""): 1,
    }
    # an eviction of a workload holding no quota is none
    log.decide(T0 + 3000, (ev.WorkloadDeactivated, {"key": "ns/w1", "reason": "Deactivated", "message": "off"}))
    assert len(series(log.state, "kueue_evicted_workloads_total")) == 2


def evict(key: str, reason: str = "PodsReadyTimeout") -> tuple[type, dict]:
    return ev.WorkloadEvicted, {"key": key, "reason": reason, "message": "m"}


def release(key: str, reason: str = "PodsReadyTimeout") -> tuple[type, dict]:
    """The job stopped: the reservation is cleared and the workload is pending again."""
    return ev.WorkloadRequeued, {"key": key, "status": False, "reason": reason, "release": True}


def test_evicted_once_counts_a_workloads_first_eviction_per_reason_and_cause() -> None:
    log = Log()
    cluster(log)
    s = log.state
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, evict("ns/w2"))
    log.decide(T0 + 3000, release("ns/w2"))
    log.decide(T0 + 4000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 5000, evict("ns/w2"))  # the same reason again, after a requeue: not counted once more
    assert series(s, "kueue_evicted_workloads_total") == {("cq-b", "PodsReadyTimeout", "", ""): 2}
    assert series(s, "kueue_evicted_workloads_once_total") == {("cq-b", "PodsReadyTimeout", "", ""): 1}
    log.decide(T0 + 6000, release("ns/w2"))
    log.decide(T0 + 7000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 8000, (ev.WorkloadPreempted, {"key": "ns/w2", "reason": "InClusterQueue", "message": "p",
                                                  "preemptor": "ns/w3"}))  # another reason: counted
    log.decide(T0 + 9000, (ev.WorkloadRequeued, {"key": "ns/w2", "status": True, "reason": "Preempted",
                                                 "release": True}))
    log.decide(T0 + 10_000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    # Deactivated with two different underlying causes: each counted the first time
    log.decide(T0 + 11_000, (ev.WorkloadDeactivated, {"key": "ns/w2", "reason": "DeactivatedDueToRequeuingLimitExceeded",
                                                      "message": "m"}))
    assert series(s, "kueue_evicted_workloads_once_total") == {
        ("cq-b", "PodsReadyTimeout", "", ""): 1,
        ("cq-b", "Preempted", "", ""): 1,
        ("cq-b", "Deactivated", "RequeuingLimitExceeded", ""): 1,
    }
    # w3 is another workload: its first PodsReadyTimeout counts
    log.decide(T0 + 12_000, reserve("ns/w3", "cq-b"), admit("ns/w3"))
    log.decide(T0 + 13_000, evict("ns/w3"))
    assert sample(s, "kueue_evicted_workloads_once_total", cluster_queue="cq-b", reason="PodsReadyTimeout",
                  underlying_cause="", priority_class="") == 2
    assert series(s, "kueue_evicted_workloads_total")[("cq-b", "PodsReadyTimeout", "", "")] == 3


def test_a_new_workload_object_of_the_same_name_counts_its_evictions_once_again() -> None:
    log = Log()
    cluster(log)
    s = log.state
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, evict("ns/w2"))
    log.observe(ev.ObjectDeleted(time=T0 + 3000, kind="Workload", key="ns/w2"))
    assert "ns/w2" not in s.workloads  # its eviction record went with it
    log.observe(upsert(workload(NS, "w2", queue="lq-b", created=T0 + 4000), T0 + 4000))
    log.decide(T0 + 5000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 6000, evict("ns/w2"))
    assert series(s, "kueue_evicted_workloads_once_total") == {("cq-b", "PodsReadyTimeout", "", ""): 2}


def test_eviction_latency_from_the_eviction_to_the_release_of_the_quota() -> None:
    log = Log()
    cluster(log)
    s = log.state
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InCohortReclamation", "message": "p",
                                                  "preemptor": "ns/w3"}), evict("ns/w2"))
    assert series(s, "kueue_workload_eviction_latency_seconds") == {}  # evicted, quota still held
    log.observe(ev.JobStopped(time=T0 + 30_000, key="ns/w1"))
    log.decide(T0 + 32_500, (ev.WorkloadRequeued, {"key": "ns/w1", "status": True, "reason": "Preempted",
                                                   "release": True}))
    buckets, total = histogram(s, "kueue_workload_eviction_latency_seconds", cluster_queue="cq-a",
                               reason="Preempted")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]
    assert (buckets["20.0"], buckets["40.0"], buckets["+Inf"], total) == (0, 1, 1, 30.5)  # released - evicted
    # a Requeued change without release releases nothing: nothing observed
    log.decide(T0 + 40_000, (ev.WorkloadRequeued, {"key": "ns/w2", "status": False, "reason": "PodsReadyTimeout"}))
    assert set(series(s, "kueue_workload_eviction_latency_seconds")) == {("cq-a", "Preempted")}
    log.decide(T0 + 42_000, release("ns/w2"))
    assert series(s, "kueue_workload_eviction_latency_seconds")[("cq-b", "PodsReadyTimeout")] == (
        [0] * 5 + [1] * 10, 40.0)  # le=40 holds 40 s
    # a release of a workload not evicted is no eviction's end
    log.decide(T0 + 43_000, reserve("ns/w3", "cq-b"))
    log.decide(T0 + 44_000, (ev.WorkloadRequeued, {"key": "ns/w3", "status": True, "reason": "x", "release": True}))
    assert len(series(s, "kueue_workload_eviction_latency_seconds")) == 2
    # a deactivation releases at once, from its own eviction or from an earlier one; the condition's reason
    log.decide(T0 + 45_000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 46_000, (ev.WorkloadDeactivated, {"key": "ns/w2", "reason": "DeactivatedDueToRequeuingLimitExceeded",
                                                      "message": "m"}))
    assert series(s, "kueue_workload_eviction_latency_seconds")[("cq-b", "DeactivatedDueToRequeuingLimitExceeded")] \
        == ([1] * 15, 0.0)
    log.decide(T0 + 46_500, reserve("ns/w3", "cq-b"))
    log.decide(T0 + 47_000, evict("ns/w3", "AdmissionCheck"))
    log.decide(T0 + 50_000, (ev.WorkloadDeactivated, {"key": "ns/w3", "reason": "Deactivated", "message": "m"}))
    # deactivated while evicted: no second eviction, so Evicted keeps the first one's reason (Kueue #14309)
    assert series(s, "kueue_workload_eviction_latency_seconds")[("cq-b", "AdmissionCheck")] == (
        [0, 0, 1, *[1] * 12], 3.0)
    # an evicted workload that finishes instead is not pending again: nothing observed
    log.decide(T0 + 51_000, reserve("ns/w2", "cq-b"))
    log.decide(T0 + 52_000, evict("ns/w2"))
    log.observe(ev.WorkloadFinished(time=T0 + 53_000, key="ns/w2"))
    assert len(series(s, "kueue_workload_eviction_latency_seconds")) == 4


def test_eviction_metrics_after_a_snapshot_and_the_tail_equal_a_full_fold() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, evict("ns/w2"))
    log.decide(T0 + 5000, release("ns/w2"))
    log.decide(T0 + 6000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 7000, evict("ns/w2"))  # not counted once more, whatever the snapshot cut
    log.decide(T0 + 9000, release("ns/w2"))
    full = fold(log.records)
    assert series(full, "kueue_evicted_workloads_once_total") == {("cq-b", "PodsReadyTimeout", "", ""): 1}
    assert series(full, "kueue_workload_eviction_latency_seconds") == {("cq-b", "PodsReadyTimeout"): (
        [0, 1, 2, *[2] * 12], 5.0)}
    _restores_at_every_cut(log.records, full)


def test_a_workload_finished_without_quota_counts_under_no_cluster_queue() -> None:
    log = Log()
    cluster(log)
    log.observe(ev.WorkloadFinished(time=T0 + 5000, key="ns/w2", reason="Failed"))
    assert series(log.state, "kueue_finished_workloads_total") == {("", ""): 1}
    assert series(log.state, "kueue_execution_time_seconds") == {}  # it never ran
    assert sample(log.state, "kueue_finished_workloads", cluster_queue="cq-b") == 1


def test_admission_checks_wait_time() -> None:
    log = Log()
    cluster(log)
    log.observe(upsert(o.AdmissionCheck(metadata=o.ObjectMeta(name="prov"),
                                        spec=o.AdmissionCheckSpec(controller_name="example.com/prov")), T0),
                upsert(cluster_queue("cq-c", admission_checks_strategy=o.AdmissionChecksStrategy(
                    admission_checks=[o.AdmissionCheckStrategyRule(name="prov")])), T0),
                upsert(local_queue(NS, "lq-c", "cq-c"), T0),
                upsert(workload(NS, "w4", queue="lq-c", created=T0), T0))
    log.decide(T0 + 4000, reserve("ns/w4", "cq-c"))
    log.observe(ev.AdmissionCheckStateChanged(time=T0 + 9000, key="ns/w4", check="prov", state="Ready"))
    log.decide(T0 + 10_000, admit("ns/w4"))
    buckets, total = histogram(log.state, "kueue_admission_checks_wait_time_seconds", cluster_queue="cq-c",
                               priority_class="")
    assert total == 6.0 and (buckets["5.0"], buckets["10.0"]) == (0, 1)
    _, total = histogram(log.state, "kueue_admission_wait_time_seconds", cluster_queue="cq-c", priority_class="")
    assert total == 10.0


def test_admission_attempts_count_scheduling_cycles_by_result() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    assert series(log.state, "kueue_admission_attempts_total") == {("success",): 1}
    log.decide(T0 + 2000, no_fit("ns/w2"))
    assert series(log.state, "kueue_admission_attempts_total") == {("success",): 1, ("inadmissible",): 1}
    # a cycle that tried one head in vain and admitted another is a success, once
    log.decide(T0 + 3000, no_fit("ns/w3"), reserve("ns/w2", "cq-b"))
    assert series(log.state, "kueue_admission_attempts_total") == {("success",): 2, ("inadmissible",): 1}
    # the workload controller's decisions are no admission attempts
    log.decide(T0 + 4000, (ev.WorkloadPending, {"key": "ns/w3", "reason": "PendingEvaluation",
                                                "message": "Workload is pending evaluation in the scheduling queue"}),
               (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout", "message": "timeout"}))
    # nor is a head blockAdmission holds, while a head with failed checks is
    log.decide(T0 + 5000, (ev.WorkloadPending, {"key": "ns/w3", "reason": "WaitingForPodsReady",
                                                "message": "waiting for all admitted workloads to be in PodsReady "
                                                           "condition"}))
    assert series(log.state, "kueue_admission_attempts_total") == {("success",): 2, ("inadmissible",): 1}
    log.decide(T0 + 6000, (ev.WorkloadPending, {"key": "ns/w3", "reason": "PendingEvaluation",
                                                "message": FAILED_CHECKS_MESSAGE}))
    assert series(log.state, "kueue_admission_attempts_total") == {("success",): 2, ("inadmissible",): 2}


def test_batch_result_tells_scheduling_cycles_apart() -> None:
    def batch(*decisions: tuple[type, dict]) -> list[ev.Decision]:
        return [t(time=T0, cycle=1, input=0, **kw) for t, kw in decisions]

    assert batch_result(batch(no_fit("a"), reserve("b", "cq"))) == "success"
    assert batch_result(batch(no_fit("a"))) == "inadmissible"
    assert batch_result(batch((ev.WorkloadRequeued, {"key": "a", "status": True, "reason": "BackoffFinished"}))) == ""
    assert batch_result([]) == ""


def test_blockadmission_message_is_the_one_the_scheduler_writes() -> None:
    from kueue_es.scheduler import blockadmission

    assert blockadmission.MESSAGE == "waiting for all admitted workloads to be in PodsReady condition"


def test_decisions_the_fold_ignores_count_nothing() -> None:
    log = Log()
    cluster(log)
    log.observe(ev.WorkloadFinished(time=T0 + 1000, key="ns/w1"))
    log.decide(T0 + 2000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/nope", "cq-a"))
    assert series(log.state, "kueue_quota_reserved_workloads_total") == {}
    assert series(log.state, "kueue_admitted_workloads_total") == {}


def test_a_deleted_cluster_queue_takes_its_series_along() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), reserve("ns/w2", "cq-b"))
    log.decide(T0 + 2000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InCohortReclamation",
                                                  "message": "m", "preemptor": "ns/w3"}))
    log.observe(ev.ObjectDeleted(time=T0 + 3000, key="cq-b", kind="ClusterQueue"))
    s = log.state
    assert series(s, "kueue_quota_reserved_workloads_total") == {("cq-a", "high"): 1}
    assert series(s, "kueue_preempted_workloads_total") == {}
    assert series(s, "kueue_evicted_workloads_total") == {("cq-a", "Preempted", "", "high"): 1}
    assert set(series(s, "kueue_quota_reserved_wait_time_seconds")) == {("cq-a", "high")}
    assert series(s, "kueue_admission_attempts_total") == {("success",): 1, ("inadmissible",): 1}
    assert {k[0] for k in series(s, "kueue_pending_workloads")} == {"cq-a"}


def test_a_deleted_cluster_queue_takes_its_local_queues_active_gauges_along() -> None:
    """Kueue clears a LocalQueue's reserving/admitted active gauges with its ClusterQueue's cache entry (its e2e
    metrics test expects them gone); the LocalQueue's pending and status series stay, as its controller reports."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.observe(ev.ObjectDeleted(time=T0 + 2000, kind="Workload", key="ns/w2"))
    log.observe(ev.ObjectDeleted(time=T0 + 3000, key="cq-b", kind="ClusterQueue"))
    s = log.state
    assert series(s, "kueue_local_queue_reserving_active_workloads") == {("lq-a", "ns"): 0}
    assert series(s, "kueue_local_queue_admitted_active_workloads") == {("lq-a", "ns"): 0}
    assert {k[:2] for k in series(s, "kueue_local_queue_pending_workloads")} == {("lq-a", "ns"), ("lq-b", "ns")}
    assert {k[:2] for k in series(s, "kueue_local_queue_status")} == {("lq-a", "ns"), ("lq-b", "ns")}


# --- waitForPodsReady: ready wait times, pods ready until evicted ---------------------------------------------


def ready(log: Log, key: str, time: int, is_ready: bool = True) -> None:
    log.observe(ev.PodsReadyChanged(time=time, key=key, ready=is_ready,
                                    reason="" if is_ready else "WaitForRecovery"))


def test_ready_wait_times_from_the_queued_time_and_the_admission_to_pods_ready() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 3500, reserve("ns/w1", "cq-a"), admit("ns/w1"))  # Admitted since T0+3 s (whole seconds)
    ready(log, "ns/w1", T0 + 10_000)
    s = log.state
    buckets, total = histogram(s, "kueue_ready_wait_time_seconds", cluster_queue="cq-a", priority_class="high")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]
    assert (buckets["5.0"], buckets["10.0"], buckets["+Inf"], total) == (0, 1, 1, 10.0)  # from the creation
    buckets, total = histogram(s, "kueue_admitted_until_ready_wait_time_seconds", cluster_queue="cq-a",
                               priority_class="high")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]
    assert (buckets["5.0"], buckets["10.0"], buckets["+Inf"], total) == (0, 1, 1, 7.0)

    # True again is no transition; a recovery (WaitForRecovery, then Recovered) observes the recovery wait, from
    # the loss of readiness, and not the ready wait times again (Kueue v0.20)
    assert series(s, "kueue_workload_recovery_wait_time_seconds") == {}
    ready(log, "ns/w1", T0 + 12_000)
    ready(log, "ns/w1", T0 + 13_000, False)
    ready(log, "ns/w1", T0 + 15_000)
    assert series(s, "kueue_ready_wait_time_seconds")[("cq-a", "high")][1] == 10.0
    buckets, total = histogram(s, "kueue_admitted_until_ready_wait_time_seconds", cluster_queue="cq-a",
                               priority_class="high")
    assert (buckets["10.0"], buckets["20.0"], buckets["+Inf"], total) == (1, 1, 1, 7.0)
    buckets, total = histogram(s, "kueue_workload_recovery_wait_time_seconds", cluster_queue="cq-a",
                               priority_class="high")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]
    assert (buckets["1.0"], buckets["2.5"], buckets["+Inf"], total) == (0, 1, 1, 2.0)  # from T0+13 s to 15 s
    buckets, total = histogram(s, "kueue_local_queue_workload_recovery_wait_time_seconds", name="lq-a",
                               namespace=NS, priority_class="high")
    assert (buckets["1.0"], buckets["2.5"], buckets["+Inf"], total) == (0, 1, 1, 2.0)

    # preempted with its pods ready (since T0+15 s): 5 s from ready to evicted, under the eviction's labels
    log.decide(T0 + 20_000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InCohortReclamation",
                                                    "message": "preempted", "preemptor": "ns/w3"}))
    buckets, total = histogram(s, "kueue_pods_ready_to_evicted_time_seconds", cluster_queue="cq-a",
                               reason="Preempted", underlying_cause="")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]
    assert (buckets["2.5"], buckets["5.0"], buckets["+Inf"], total) == (0, 1, 1, 5.0)

    # requeued at T0+21 s: the next admission's ready wait runs from the Requeued condition
    ready(log, "ns/w1", T0 + 20_500, False)
    log.decide(T0 + 21_000, (ev.WorkloadRequeued, {"key": "ns/w1", "status": True, "reason": "Preempted",
                                                   "release": True}))
    log.decide(T0 + 23_500, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    ready(log, "ns/w1", T0 + 30_000)
    buckets, total = histogram(s, "kueue_ready_wait_time_seconds", cluster_queue="cq-a", priority_class="high")
    assert (buckets["5.0"], buckets["10.0"], buckets["20.0"], buckets["+Inf"], total) == (0, 2, 2, 2, 19.0)  # + 9 s
    _, total = histogram(s, "kueue_admitted_until_ready_wait_time_seconds", cluster_queue="cq-a",
                         priority_class="high")
    assert total == 14.0  # + 7 s from the new admission (T0+23 s)
    assert set(series(s, "kueue_ready_wait_time_seconds")) == {("cq-a", "high")}
    # the readiness lost before the eviction was no recovery: the new admission started afresh
    assert series(s, "kueue_workload_recovery_wait_time_seconds")[("cq-a", "high")][1] == 2.0


def test_pods_ready_to_evicted_only_for_workloads_evicted_with_their_pods_ready() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"), reserve("ns/w3", "cq-b"), admit("ns/w3"))
    ready(log, "ns/w3", T0 + 2000)
    ready(log, "ns/w3", T0 + 4000, False)  # a pod failed: no longer ready
    log.decide(T0 + 9000, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout", "message": "t"}),
               (ev.WorkloadEvicted, {"key": "ns/w3", "reason": "PodsReadyTimeout", "message": "t"}))
    s = log.state
    assert series(s, "kueue_evicted_workloads_total") == {("cq-b", "PodsReadyTimeout", "", ""): 2}
    assert series(s, "kueue_pods_ready_to_evicted_time_seconds") == {}
    # ready without admission (quota reserved, checks pending) is not Kueue's PodsReady=True: nothing observed
    log.decide(T0 + 10_000, reserve("ns/w1", "cq-a"))
    ready(log, "ns/w1", T0 + 11_000)
    assert series(s, "kueue_ready_wait_time_seconds") == {("cq-b", ""): ([0, *[1] * 14], 2.0)}  # w3's, at T0+2 s
    assert series(s, "kueue_admitted_until_ready_wait_time_seconds") == {("cq-b", ""): ([1] * 15, 1.0)}
    # deactivated with its pods ready: Kueue's reason and underlying cause
    ready(log, "ns/w1", T0 + 11_500, False)
    log.decide(T0 + 12_000, admit("ns/w1"))
    ready(log, "ns/w1", T0 + 13_000)
    assert series(s, "kueue_ready_wait_time_seconds")[("cq-a", "high")] == ([0, 0, 0, 0, 1, *[1] * 10], 13.0)
    log.decide(T0 + 100_000, (ev.WorkloadDeactivated, {"key": "ns/w1", "reason": "DeactivatedDueToRequeuingLimitExceeded",
                                                       "message": "m"}))
    buckets, total = histogram(s, "kueue_pods_ready_to_evicted_time_seconds", cluster_queue="cq-a",
                               reason="Deactivated", underlying_cause="RequeuingLimitExceeded")
    assert (buckets["80.0"], buckets["160.0"], total) == (0, 1, 87.0)


def test_nothing_about_pods_ready_is_observed_without_waitforpodsready() -> None:
    log = Log()
    cluster(log)
    log.observe(ev.ConfigRecorded(time=T0, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"DisableWaitForPodsReady": True}}))
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    ready(log, "ns/w1", T0 + 2000)
    ready(log, "ns/w1", T0 + 2200, False)
    ready(log, "ns/w1", T0 + 2400)
    log.decide(T0 + 3000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InCohortReclamation",
                                                  "message": "preempted", "preemptor": "ns/w3"}))
    s = log.state
    assert series(s, "kueue_evicted_workloads_total") == {("cq-a", "Preempted", "", "high"): 1}
    for name in ("kueue_ready_wait_time_seconds", "kueue_admitted_until_ready_wait_time_seconds",
                 "kueue_pods_ready_to_evicted_time_seconds", "kueue_workload_recovery_wait_time_seconds"):
        assert series(s, name) == {}, name
    # the configuration in force decides: with it on again, the next transition is observed
    log.observe(ev.ConfigRecorded(time=T0 + 4000, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "waitForPodsReady": {"timeout": "5m"}}))
    log.decide(T0 + 5000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    ready(log, "ns/w2", T0 + 6000)
    assert series(s, "kueue_ready_wait_time_seconds") == {("cq-b", ""): ([0, 0, 0, 1, *[1] * 11], 6.0)}


def test_pods_ready_metrics_after_a_snapshot_and_the_tail_equal_a_full_fold() -> None:
    log = Log()
    cluster(log)
    log.observe(ev.ConfigRecorded(time=T0, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "waitForPodsReady": {"timeout": "5m"}}))
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"))
    ready(log, "ns/w1", T0 + 4000)
    ready(log, "ns/w2", T0 + 5000)
    log.decide(T0 + 9000, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout", "message": "t"}))
    log.observe(ev.ConfigRecorded(time=T0 + 9500, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"DisableWaitForPodsReady": True}}))
    log.decide(T0 + 10_000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InClusterQueue",
                                                    "message": "preempted", "preemptor": "ns/w3"}))
    full = families(fold(log.records))
    assert series(log.state, "kueue_pods_ready_to_evicted_time_seconds") == {
        ("cq-b", "PodsReadyTimeout", ""): ([0, 0, 1, *[1] * 12], 4.0)}  # w1's, under DisableWaitForPodsReady: none
    for cut in range(len(log.records) + 1):
        assert families(_restored_then_rest(log.records, cut)) == full, f"snapshot at {cut}"


# --- gauges ----------------------------------------------------------------------------------------------------


def test_gauges_describe_the_state() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a", 1500), admit("ns/w1"), reserve("ns/w2", "cq-b"))
    log.decide(T0 + 2000, (ev.WorkloadPending, {"key": "ns/w3", "reason": "WaitingForQuota", "message": "m",
                                                "requeue_reason": "NoFit", "parked": True}))
    s = log.state
    assert series(s, "kueue_pending_workloads") == {("cq-a", "active"): 0, ("cq-a", "inadmissible"): 0,
                                                    ("cq-b", "active"): 0, ("cq-b", "inadmissible"): 1}
    assert series(s, "kueue_reserving_active_workloads") == {("cq-a",): 1, ("cq-b",): 1}
    assert series(s, "kueue_admitted_active_workloads") == {("cq-a",): 1, ("cq-b",): 0}
    assert series(s, "kueue_finished_workloads") == {("cq-a",): 0, ("cq-b",): 0}
    assert series(s, "kueue_cluster_queue_info") == {("cq-a", "co", "root", ""): 1, ("cq-b", "co", "root", ""): 1}
    assert series(s, "kueue_cohort_info") == {("co", "root", "root", ""): 1, ("root", "", "root", ""): 1}
    assert series(s, "kueue_cluster_queue_status") == {
        ("cq-a", "active"): 1, ("cq-a", "pending"): 0, ("cq-a", "terminating"): 0,
        ("cq-b", "active"): 1, ("cq-b", "pending"): 0, ("cq-b", "terminating"): 0}


def test_cluster_queue_resource_gauges_only_under_enable_cluster_queue_resources() -> None:
    """Kueue reports them only with ``metrics.enableClusterQueueResources: true`` in its configuration (off by
    default, and when no configuration is recorded)."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a", 1500), admit("ns/w1"), reserve("ns/w2", "cq-b"))
    resource_gauges = ("kueue_cluster_queue_resource_reservation", "kueue_cluster_queue_resource_usage",
                       "kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_borrowing_limit",
                       "kueue_cluster_queue_lending_limit")
    assert [series(log.state, name) for name in resource_gauges] == [{}] * 5
    configure(log, T0 + 2000, metrics={"enableClusterQueueResources": False, "bindAddress": ":8443"})
    assert [series(log.state, name) for name in resource_gauges] == [{}] * 5
    configure(log, T0 + 3000, metrics=RESOURCE_METRICS)
    s = log.state
    assert series(s, "kueue_cluster_queue_resource_reservation") == {
        ("co", "cq-a", "f0", "cpu"): 1.5, ("co", "cq-a", "f0", "memory"): 0.0, ("co", "cq-b", "f0", "cpu"): 1.0}
    assert series(s, "kueue_cluster_queue_resource_usage") == {
        ("co", "cq-a", "f0", "cpu"): 1.5, ("co", "cq-a", "f0", "memory"): 0.0, ("co", "cq-b", "f0", "cpu"): 0.0}
    assert series(s, "kueue_cluster_queue_nominal_quota") == {
        ("co", "cq-a", "f0", "cpu"): 4.0, ("co", "cq-a", "f0", "memory"): 8 * 2**30, ("co", "cq-b", "f0", "cpu"): 2.0}
    assert series(s, "kueue_cluster_queue_borrowing_limit") == {
        ("co", "cq-a", "f0", "cpu"): 2.0, ("co", "cq-a", "f0", "memory"): math.inf,
        ("co", "cq-b", "f0", "cpu"): math.inf}
    assert series(s, "kueue_cluster_queue_lending_limit") == {
        ("co", "cq-a", "f0", "cpu"): math.inf, ("co", "cq-a", "f0", "memory"): 2.0**30,
        ("co", "cq-b", "f0", "cpu"): math.inf}



def skipped(key: str) -> tuple[type, dict]:
    return ev.WorkloadPending, {"key": key, "reason": "WaitingForQuota", "message": "overlapping",
                                "requeue_reason": "FailedAfterNomination", "preemption_skipped": True}


def test_preemption_skips_are_those_of_the_last_cycle_that_skipped_a_workload_of_the_cluster_queue() -> None:
    """Kueue sets ``admission_cycle_preemption_skips`` at the end of each cycle for the ClusterQueues it skipped
    workloads of (counted in their cycle), and leaves the others' as they were; a deleted ClusterQueue's goes. It
    survives a snapshot (version 48)."""
    log = Log()
    cluster(log)
    assert series(log.state, "kueue_admission_cycle_preemption_skips") == {}
    log.decide(T0 + 1000, skipped("ns/w1"), skipped("ns/w2"), skipped("ns/w3"))
    assert series(log.state, "kueue_admission_cycle_preemption_skips") == {("cq-a",): 1, ("cq-b",): 2}
    log.decide(T0 + 2000, skipped("ns/w3"), no_fit("ns/w2"))
    log.decide(T0 + 3000, no_fit("ns/w1"))
    assert series(log.state, "kueue_admission_cycle_preemption_skips") == {("cq-a",): 1, ("cq-b",): 1}
    restored = _restored_then_rest(log.records, len(log.records) - 1)
    assert series(restored, "kueue_admission_cycle_preemption_skips") == {("cq-a",): 1, ("cq-b",): 1}
    log.observe(ev.ObjectDeleted(time=T0 + 4000, key="cq-b", kind="ClusterQueue"))
    assert series(log.state, "kueue_admission_cycle_preemption_skips") == {("cq-a",): 1}


def test_resource_pending_sums_what_the_pending_workloads_of_a_cluster_queue_request() -> None:
    """Kueue v0.18 (#10485, fixed in v0.20 by #13660): ``kueue_cluster_queue_resource_pending`` per ClusterQueue and
    resource, the requests (per-pod times count) of its pending workloads, active and inadmissible alike; every
    resource its spec names is reported, 0 when nothing asks for it, and one it does not name while asked for.
    Only with ``metrics.enableClusterQueueResources``."""
    log = Log()
    cluster(log)
    pod = o.PodSpec(containers=[o.Container(name="c", resources=o.ResourceRequirements(
        requests={"cpu": "500m", "example.com/gpu": "1"}))])
    w4 = workload(NS, "w4", queue="lq-b", created=T0, count=2)
    w4 = msgspec.structs.replace(w4, spec=msgspec.structs.replace(w4.spec, pod_sets=[
        o.PodSet(name="main", count=2, template=o.PodTemplateSpec(spec=pod))]))
    log.observe(upsert(w4, T0))
    assert series(log.state, "kueue_cluster_queue_resource_pending") == {}
    configure(log, T0 + 500, metrics=RESOURCE_METRICS)
    assert series(log.state, "kueue_cluster_queue_resource_pending") == {
        ("cq-a", "cpu"): 1.0, ("cq-a", "memory"): 0.0,
        ("cq-b", "cpu"): 3.0, ("cq-b", "example.com/gpu"): 2.0}
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), reserve("ns/w4", "cq-b"), no_fit("ns/w3"))
    assert series(log.state, "kueue_cluster_queue_resource_pending") == {
        ("cq-a", "cpu"): 0.0, ("cq-a", "memory"): 0.0, ("cq-b", "cpu"): 2.0}  # w2 active, w3 inadmissible


def test_quotas_and_limits_at_or_past_int64s_maximum_report_infinity() -> None:
    """Kueue v0.20 (#13585, #15026): a quota, limit, reservation or usage whose integer amount (milli for cpu)
    is at or past MaxInt64 reports +Inf, not a large finite number; one below it is reported as it is."""
    log = Log()
    log.observe(*(upsert(x, T0) for x in (
        namespace(NS), flavor("f0"),
        cluster_queue("cq-big", cpu="9223372036854775807", memory="100Ei", borrowing="9223372036854775807m",
                      lending="9223372036854775806"),
        cluster_queue("cq-edge", cpu="9223372036854775806m", memory="9223372036854775806"))))
    configure(log, T0 + 1000, metrics=RESOURCE_METRICS)
    s = log.state
    assert series(s, "kueue_cluster_queue_nominal_quota") == {
        ("", "cq-big", "f0", "cpu"): math.inf, ("", "cq-big", "f0", "memory"): math.inf,
        ("", "cq-edge", "f0", "cpu"): (2**63 - 2) / 1000, ("", "cq-edge", "f0", "memory"): float(2**63 - 2)}
    assert series(s, "kueue_cluster_queue_borrowing_limit")[("", "cq-big", "f0", "cpu")] == math.inf
    assert series(s, "kueue_cluster_queue_lending_limit")[("", "cq-big", "f0", "memory")] == float(2**63 - 2)

def test_cluster_queue_status_pending_and_terminating() -> None:
    log = Log()
    cluster(log)
    missing = cluster_queue("cq-x")
    missing = o.ClusterQueue(metadata=missing.metadata, spec=o.ClusterQueueSpec(resource_groups=[o.ResourceGroup(
        covered_resources=["cpu"], flavors=[o.FlavorQuotas(name="nope", resources=[o.ResourceQuota(name="cpu")])])]))
    going = cluster_queue("cq-b", "co")
    going = o.ClusterQueue(metadata=o.ObjectMeta(name="cq-b", deletion_timestamp="2024-05-01T08:00:05Z"),
                           spec=going.spec)
    log.observe(upsert(missing, T0 + 1000), upsert(going, T0 + 1000))
    status = series(log.state, "kueue_cluster_queue_status")
    assert [k[1] for k, v in status.items() if v == 1] == ["active", "terminating", "pending"]  # cq-a, cq-b, cq-x
    assert series(log.state, "kueue_cluster_queue_info")[("cq-x", "", "", "")] == 1


def test_pending_scheduling_hashes_count_the_shapes_of_pending_workloads() -> None:
    """Kueue's scheduling hashes are the equivalence classes the queue parks by (effective priority and pod-set
    shapes): w2 and w3 of cq-b share one; w4 asks for more cpu, w5 has a higher priority."""
    log = Log()
    cluster(log)
    log.observe(*(upsert(workload(NS, name, queue="lq-b", created=T0, **kw), T0) for name, kw in (
        ("w4", {"cpu": "2"}), ("w5", {"priority_class": "high"}))))
    assert series(log.state, "kueue_pending_scheduling_hashes") == {
        ("cq-a", "active"): 1, ("cq-a", "inadmissible"): 0, ("cq-b", "active"): 3, ("cq-b", "inadmissible"): 0}
    log.decide(T0 + 1000, (ev.WorkloadPending, {"key": "ns/w2", "reason": "WaitingForQuota", "message": "m",
                                                "requeue_reason": "NoFit", "parked": True}))
    assert series(log.state, "kueue_pending_workloads")[("cq-b", "inadmissible")] == 2  # w3 parked with w2
    assert series(log.state, "kueue_pending_scheduling_hashes") == {
        ("cq-a", "active"): 1, ("cq-a", "inadmissible"): 0, ("cq-b", "active"): 2, ("cq-b", "inadmissible"): 1}
    stopped = cluster_queue("cq-b", "co", cpu="2", stop_policy="Hold")  # inactive: every class inadmissible
    log.observe(upsert(stopped, T0 + 2000))
    assert series(log.state, "kueue_pending_scheduling_hashes")[("cq-b", "active")] == 0
    assert series(log.state, "kueue_pending_scheduling_hashes")[("cq-b", "inadmissible")] == 3
    gates_config(log, T0 + 3000, SchedulingEquivalenceHashing=False, SchedulingEquivalenceHashingIgnorePodSetName=False)
    assert series(log.state, "kueue_pending_scheduling_hashes") == {}  # reported only under the gate (v0.20)
    assert series(log.state, "kueue_pending_workloads")[("cq-b", "inadmissible")] == 4  # still reported


def test_unadmitted_workloads_by_admitted_reason_and_underlying_cause() -> None:
    """Kueue's unadmitted_workloads (KEP-10852): every workload neither admitted nor finished, by its Admitted
    reason (NoReservation while it shows none) and its QuotaReserved reason (PendingEvaluation while it shows
    none, empty while it holds quota); one whose LocalQueue is missing has no ClusterQueue to be counted in."""
    log = Log()
    cluster(log)
    log.observe(upsert(workload(NS, "lost", queue="nowhere", created=T0), T0))
    gates_config(log, T0, LocalQueueMetrics=True)
    assert series(log.state, "kueue_unadmitted_workloads") == {
        ("cq-a", "NoReservation", "PendingEvaluation"): 1, ("cq-b", "NoReservation", "PendingEvaluation"): 2}
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), no_fit("ns/w3"))
    assert series(log.state, "kueue_unadmitted_workloads") == {
        ("cq-b", "NoReservation", ""): 1,  # w2 holds quota, not admitted yet (no Admitted condition)
        ("cq-b", "NoReservation", "WaitingForQuota"): 1}
    assert series(log.state, "kueue_local_queue_unadmitted_workloads") == {
        ("lq-b", NS, "cq-b", "NoReservation", ""): 1, ("lq-b", NS, "cq-b", "NoReservation", "WaitingForQuota"): 1}
    log.decide(T0 + 2000, admit("ns/w2"))
    assert series(log.state, "kueue_unadmitted_workloads") == {("cq-b", "NoReservation", "WaitingForQuota"): 1}
    gates_config(log, T0 + 3000, LocalQueueMetrics=True, UnadmittedWorkloadsObservability=False)
    assert series(log.state, "kueue_unadmitted_workloads") == {}  # reported only under the gate
    assert series(log.state, "kueue_local_queue_unadmitted_workloads") == {}


def test_an_inactive_cluster_queue_counts_its_pending_workloads_as_inadmissible() -> None:
    """Kueue's queue manager reports every pending workload of a ClusterQueue that is not active as inadmissible,
    for the ClusterQueue and its LocalQueues alike."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, (ev.WorkloadPending, {"key": "ns/w2", "reason": "WaitingForQuota", "message": "m",
                                                "requeue_reason": "NoFit", "parked": False}))
    assert series(log.state, "kueue_pending_workloads")[("cq-b", "active")] == 2
    log.observe(upsert(cluster_queue("cq-b", "co", cpu="2", stop_policy="Hold"), T0 + 2000))
    assert series(log.state, "kueue_pending_workloads") == {("cq-a", "active"): 1, ("cq-a", "inadmissible"): 0,
                                                            ("cq-b", "active"): 0, ("cq-b", "inadmissible"): 2}
    assert series(log.state, "kueue_local_queue_pending_workloads")[("lq-b", "ns", "inadmissible")] == 2


# --- cohorts ----------------------------------------------------------------------------------------------------


def test_cohort_subtree_gauges() -> None:
    """Kueue's subtree quota: a cohort's own nominal quota plus what each child can lend (its subtree quota less
    what its lendingLimit keeps back: cq-a lends 1Gi of its 8Gi of memory), values above 0 only; the reservations
    and admitted workloads of the ClusterQueues below it."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a", 1500), admit("ns/w1"), reserve("ns/w2", "cq-b"))
    s = log.state
    assert series(s, "kueue_cohort_subtree_quota") == {
        ("co", "f0", "cpu"): 6.0, ("co", "f0", "memory"): 2.0**30,
        ("root", "f0", "cpu"): 6.0, ("root", "f0", "memory"): 2.0**30}
    assert series(s, "kueue_cohort_subtree_resource_reservations") == {("co", "f0", "cpu"): 2.5,
                                                                       ("root", "f0", "cpu"): 2.5}
    assert series(s, "kueue_cohort_subtree_admitted_active_workloads") == {("co",): 1, ("root",): 1}
    own = o.Cohort(metadata=o.ObjectMeta(name="root"), spec=o.CohortSpec(resource_groups=[o.ResourceGroup(
        covered_resources=["cpu"], flavors=[o.FlavorQuotas(name="f1", resources=[
            o.ResourceQuota(name="cpu", nominal_quota="10")])])]))
    log.observe(upsert(own, T0 + 2000), upsert(cohort("lone"), T0 + 2000))
    assert series(log.state, "kueue_cohort_subtree_quota")[("root", "f1", "cpu")] == 10.0
    assert ("lone",) not in series(log.state, "kueue_cohort_subtree_admitted_active_workloads")  # nothing below it
    log.observe(upsert(cohort("root", parent="co"), T0 + 3000))  # a cycle: Kueue reports none of its cohorts
    assert series(log.state, "kueue_cohort_subtree_quota") == {}
    assert series(log.state, "kueue_cohort_subtree_admitted_active_workloads") == {}


def test_a_cohort_with_no_cluster_queue_in_its_tree_reports_its_own_quota() -> None:
    """A Cohort object is a node of Kueue's hierarchy whether or not anything is below or above it: its subtree
    quota is its own nominal quota, and under Fair Sharing its weighted share (0) is reported — before a
    ClusterQueue joins it and after the ClusterQueue moves on (Kueue's
    test/integration/singlecluster/scheduler/fairsharing/metrics_test.go, "correctly handles cohort metrics when
    clusterQueue moves between cohorts")."""
    def own(name: str, cpu: str) -> o.Cohort:
        return o.Cohort(metadata=o.ObjectMeta(name=name), spec=o.CohortSpec(resource_groups=[o.ResourceGroup(
            covered_resources=["cpu"], flavors=[o.FlavorQuotas(name="f0", resources=[
                o.ResourceQuota(name="cpu", nominal_quota=cpu)])])]))

    log = Log()
    log.observe(*(upsert(x, T0) for x in (namespace(NS), flavor("f0"), own("ch1", "5"), own("ch2", "3"))))
    configure(log, T0, fairSharing={})
    assert series(log.state, "kueue_cohort_subtree_quota") == {("ch1", "f0", "cpu"): 5.0, ("ch2", "f0", "cpu"): 3.0}
    assert series(log.state, "kueue_cohort_weighted_share") == {("ch1",): 0.0, ("ch2",): 0.0}
    log.observe(upsert(cluster_queue("cq1", "ch1", cpu="1"), T0 + 1000))
    assert series(log.state, "kueue_cohort_subtree_quota") == {("ch1", "f0", "cpu"): 6.0, ("ch2", "f0", "cpu"): 3.0}
    log.observe(upsert(cluster_queue("cq1", "ch2", cpu="1"), T0 + 2000))
    assert series(log.state, "kueue_cohort_subtree_quota") == {("ch1", "f0", "cpu"): 5.0, ("ch2", "f0", "cpu"): 4.0}
    assert series(log.state, "kueue_cohort_weighted_share") == {("ch1",): 0.0, ("ch2",): 0.0}


def _cohort_admissions(log: Log) -> None:
    """w1 (high) admitted in cq-a, w2 and w3 in cq-b, all of cohort "co" under "root"; cq-x, of no cohort, admits
    w4."""
    cluster(log)
    log.observe(*(upsert(x, T0) for x in (cluster_queue("cq-x"), local_queue(NS, "lq-x", "cq-x"),
                                          workload(NS, "w4", queue="lq-x", created=T0))))
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"),
               reserve("ns/w4", "cq-x"), admit("ns/w4"))
    log.decide(T0 + 2000, reserve("ns/w3", "cq-b"))
    log.decide(T0 + 3000, admit("ns/w3"))


def test_cohort_subtree_admissions_count_in_every_cohort_up_to_the_root() -> None:
    log = Log()
    _cohort_admissions(log)
    full = fold(log.records)
    assert series(full, "kueue_cohort_subtree_admitted_workloads_total") == {
        ("co", ""): 2, ("co", "high"): 1, ("root", ""): 2, ("root", "high"): 1}
    _restores_at_every_cut(log.records, full)


def test_a_cohort_that_goes_takes_its_admissions_along() -> None:
    """Kueue clears a cohort's admissions when its Cohort object is deleted (even while ClusterQueues still name
    it) and when nothing names it any more; it counts from zero if it comes back."""
    log = Log()
    _cohort_admissions(log)
    log.observe(ev.ObjectDeleted(time=T0 + 4000, key="co", kind="Cohort"))  # "co" stays, implicit; "root" goes
    assert series(log.state, "kueue_cohort_subtree_admitted_workloads_total") == {}
    log.observe(upsert(cohort("co", parent="root"), T0 + 5000), upsert(workload(NS, "w5", queue="lq-a"), T0 + 5000))
    log.decide(T0 + 6000, reserve("ns/w5", "cq-a"), admit("ns/w5"))
    assert series(log.state, "kueue_cohort_subtree_admitted_workloads_total") == {("co", ""): 1, ("root", ""): 1}
    log.observe(upsert(cohort("co"), T0 + 7000))  # nothing names "root" any more
    assert series(log.state, "kueue_cohort_subtree_admitted_workloads_total") == {("co", ""): 1}
    _restores_at_every_cut(log.records, fold(log.records))


def test_a_snapshot_of_the_version_before_the_cohort_admissions_restores() -> None:
    """A version 9 snapshot carries no cohort admissions (its writer did not count them): they count from its
    offset on."""
    log = Log()
    _cohort_admissions(log)
    cut = len(log.records) - 1  # before w3's admission
    old = msgspec.structs.replace(snapshot.take(fold(log.records[:cut])), version=9)
    name = "kueue_cohort_subtree_admitted_workloads_total"
    old.metrics.counters = [(n, v) for n, v in old.metrics.counters if n != name]  # type: ignore[union-attr]
    restored = fold(log.records[cut:], snapshot.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(old),
                                                                                type=snapshot.Snapshot)))
    assert series(restored, name) == {("co", ""): 1, ("root", ""): 1}
    full = fold(log.records)
    assert [f for f in families(restored) if f.spec.name != name] == [f for f in families(full)
                                                                        if f.spec.name != name]


def test_the_info_gauges_name_the_dynamic_quota_orchestrator_in_force() -> None:
    """Kueue v0.20 (#15201): ``dynamic_quota_orchestrator`` on the info gauges is the name in
    ``status.effectiveQuotas.orchestratorRef`` while those effective quotas are in force (DynamicQuotaOrchestration
    on), empty otherwise: with the gate off, without effective quotas, for a cohort with no Cohort object."""
    log = Log()
    cluster(log)
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "DynamicQuotaOrchestrator"}
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "f0", "resources": [
        {"name": "cpu", "nominalQuota": "6"}]}]}]
    cq_a = msgspec.structs.replace(cluster_queue("cq-a", "co", cpu="4"), status={"effectiveQuotas": {
        "orchestratorRef": {**ref, "name": "dqo-a"}, "resourceGroups": groups}})
    co = msgspec.structs.replace(cohort("co", parent="root"), status={"effectiveQuotas": {
        "orchestratorRef": {**ref, "name": "dqo-co"}, "resourceGroups": []}})
    log.observe(upsert(cq_a, T0 + 100), upsert(co, T0 + 100))
    assert series(log.state, "kueue_cluster_queue_info") == {
        ("cq-a", "co", "root", ""): 1, ("cq-b", "co", "root", ""): 1}
    gates_config(log, T0 + 1000, DynamicQuotaOrchestration=True)
    assert series(log.state, "kueue_cluster_queue_info") == {
        ("cq-a", "co", "root", "dqo-a"): 1, ("cq-b", "co", "root", ""): 1}
    assert series(log.state, "kueue_cohort_info") == {("co", "root", "root", "dqo-co"): 1,
                                                      ("root", "", "root", ""): 1}


def test_the_info_gauges_follow_metrics_for_cohorts() -> None:
    log = Log()
    cluster(log)
    gates_config(log, T0 + 1000, MetricsForCohorts=False)
    assert series(log.state, "kueue_cluster_queue_info") == {}
    assert series(log.state, "kueue_cohort_info") == {}
    assert series(log.state, "kueue_cohort_subtree_quota"), "the subtree gauges are not the gate's"
    gates_config(log, T0 + 2000, MetricsForCohorts=True)
    assert len(series(log.state, "kueue_cohort_info")) == 2


# --- restart-proof --------------------------------------------------------------------------------------------


def _restored_then_rest(recs: list[Record], cut: int) -> ClusterState:
    return fold(recs[cut:], snapshot.decode(snapshot.encode(fold(recs[:cut]))))


def _restores_at_every_cut(recs: list[Record], full: ClusterState) -> None:
    """A snapshot taken after any record, restored, then the rest folded: the metrics and digest of ``full``."""
    for cut in range(len(recs) + 1):
        restored = _restored_then_rest(recs, cut)
        assert families(restored) == families(full), f"snapshot at {cut}"
        assert snapshot.digest(restored) == snapshot.digest(full), f"snapshot at {cut}"


@pytest.mark.parametrize("seed", [1, 7, 11])
def test_metrics_after_a_snapshot_and_the_tail_equal_a_full_fold(seed: int) -> None:
    recs = records(interpret(random_ops(random.Random(seed), 500)))
    full = families(fold(recs))
    assert any(f.samples for f in full if f.spec.kind == "counter")
    assert any(f.samples for f in full if f.spec.kind == "histogram")
    for cut in range(0, len(recs) + 1, 37):
        assert families(_restored_then_rest(recs, cut)) == full, f"snapshot at {cut} of {len(recs)}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), data=st.data())
def test_metrics_survive_a_snapshot_anywhere(seed: int, data: st.DataObject) -> None:
    recs = records(interpret(random_ops(random.Random(seed), 150)))
    cut = data.draw(st.integers(0, len(recs)), label="cut")
    assert families(_restored_then_rest(recs, cut)) == families(fold(recs))


def test_buckets_are_kueues() -> None:
    assert WAIT_BUCKETS == (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240)
    assert ADMISSION_WAIT_BUCKETS == (*WAIT_BUCKETS, 20480, 40960)


def test_the_fold_shows_the_metrics_every_workload_event_they_need() -> None:
    from projections.cluster import _ABOUT_WORKLOADS, _ALSO_ABOUT_WORKLOADS
    from projections.metrics import METERED, NEEDS_BEFORE

    assert NEEDS_BEFORE <= _ABOUT_WORKLOADS | _ALSO_ABOUT_WORKLOADS and NEEDS_BEFORE <= set(METERED)
    assert set(ev.DECISION_TYPES) <= set(METERED)


# --- Fair Sharing's weighted shares ---------------------------------------------------------------------------


def fair_tree(log: Log, fair_sharing: bool = True) -> None:
    """Cohort "root" (no quota) holds cq-r (8 cpu) and cohort "co" (weight 0.5), which holds cq-a (4 cpu, weight
    2), cq-b (2 cpu) and cq-z (2 cpu, weight 0). cq-a holds 6 cpu, cq-z 3, cq-r 7, cq-b nothing."""
    if fair_sharing:
        configure(log, T0, fairSharing={}, metrics=RESOURCE_METRICS)
    co = cohort("co", parent="root")
    co = o.Cohort(metadata=co.metadata, spec=o.CohortSpec(parent_name="root", fair_sharing=o.FairSharing(weight="500m")))
    log.observe(*(upsert(x, T0) for x in (
        namespace(NS), flavor("f0"), co,
        cluster_queue("cq-r", "root", cpu="8"),
        cluster_queue("cq-a", "co", cpu="4", fair_sharing=o.FairSharing(weight="2")),
        cluster_queue("cq-b", "co", cpu="2"),
        cluster_queue("cq-z", "co", cpu="2", fair_sharing=o.FairSharing(weight="0")),
        *(local_queue(NS, f"lq-{q}", f"cq-{q}") for q in "rabz"),
        *(workload(NS, f"w-{q}", queue=f"lq-{q}", created=T0) for q in "raz"),
    )))
    log.decide(T0 + 1000, reserve("ns/w-a", "cq-a", 6000), reserve("ns/w-z", "cq-z", 3000),
               reserve("ns/w-r", "cq-r", 7000))


def test_weighted_shares_are_kueues_dominant_resource_shares() -> None:
    """Kueue's formula: borrowed = usage - subtree quota (per resource, when positive); lendable = what the parent
    could lend of it (its potential availability; root "root": its subtree quota 8 + 4 + 2 + 2 = 16 cpu, for
    the children of "co" too, which has no guarantee); share = borrowed x 1000 / lendable / weight.
    cq-a: (6 - 4) x 1000 / 16 / 2 = 62.5. cq-b: uses nothing, 0. cq-z: borrows 1 with weight 0 -> +Inf, which
    Kueue reports as NaN for a ClusterQueue. cq-r: 7 of its 8, 0.
    co: (6 + 3 - 8) x 1000 / 16 / 0.5 = 125. root: no parent, 0."""
    log = Log()
    fair_tree(log)
    shares = series(log.state, "kueue_cluster_queue_weighted_share")
    assert set(shares) == {("cq-a", "co"), ("cq-b", "co"), ("cq-r", "root"), ("cq-z", "co")}
    assert shares[("cq-a", "co")] == 62.5
    assert shares[("cq-b", "co")] == 0.0
    assert shares[("cq-r", "root")] == 0.0
    assert math.isnan(shares[("cq-z", "co")])  # type: ignore[arg-type]
    assert series(log.state, "kueue_cohort_weighted_share") == {("co",): 125.0, ("root",): 0.0}


def test_a_cohort_of_weight_zero_that_borrows_reports_nan() -> None:
    """Kueue's cohort_controller_test.go TestUpdateCohortStatusIfChanged, "fair sharing enabled with zero
    weight borrowing cohort reports NaN metric and MaxInt64 status": a Cohort's infinite share is reported as
    NaN, as a ClusterQueue's is (its status saturates at MaxInt64: test_proj_queue_status)."""
    log = Log()
    fair_tree(log)
    log.observe(upsert(o.Cohort(metadata=cohort("co").metadata, spec=o.CohortSpec(
        parent_name="root", fair_sharing=o.FairSharing(weight="0"))), T0 + 2000))
    assert math.isnan(series(log.state, "kueue_cohort_weighted_share")[("co",)])  # type: ignore[arg-type]
    help_text = COHORT_WEIGHTED_SHARE.help
    assert "+Inf" not in help_text and "NaN when its weight is 0" in help_text


def test_no_weighted_shares_without_fair_sharing() -> None:
    """Kueue reports the weighted shares only with fairSharing in its configuration."""
    log = Log()
    fair_tree(log, fair_sharing=False)
    assert series(log.state, "kueue_cluster_queue_weighted_share") == {}
    assert series(log.state, "kueue_cohort_weighted_share") == {}
    log.observe(ev.ConfigRecorded(time=T0 + 2000, document={"fairSharing": {"preemptionStrategies": []},
                                                            "metrics": RESOURCE_METRICS}))
    assert series(log.state, "kueue_cluster_queue_weighted_share")[("cq-a", "co")] == 62.5
    log.observe(ev.ConfigRecorded(time=T0 + 3000, document={"kind": "Configuration"}))
    assert series(log.state, "kueue_cluster_queue_weighted_share") == {}


def test_the_cluster_queue_weighted_shares_need_the_resource_metrics_too() -> None:
    """Kueue reports a ClusterQueue's weighted share with its resource gauges (``enableClusterQueueResources``), a
    cohort's with fairSharing alone."""
    log = Log()
    fair_tree(log, fair_sharing=False)
    configure(log, T0 + 2000, fairSharing={})
    assert series(log.state, "kueue_cluster_queue_weighted_share") == {}
    assert series(log.state, "kueue_cohort_weighted_share") == {("co",): 125.0, ("root",): 0.0}


# --- LocalQueue metrics (the LocalQueueMetrics gate) ------------------------------------------------------------


def gates_config(log: Log, time: int, **gates: bool) -> None:
    log.observe(ev.ConfigRecorded(time=time, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}))


def local_families(state: ClusterState) -> list[str]:
    return [f.spec.name for f in families(state) if f.spec.name.startswith("kueue_local_queue_")]


def local_queue_scenario(log: Log) -> None:
    """w1 (lq-a, priority high) reserved, admitted, preempted, released; w2 (lq-b) reserved, admitted, finished; w3
    (lq-b) parked; a second LocalQueue of cq-b in another namespace with a workload reserved there."""
    cluster(log)
    log.observe(*(upsert(x, T0) for x in (
        namespace("other"), local_queue("other", "lq-b", "cq-b"),
        workload("other", "w4", queue="lq-b", created=T0))))
    log.decide(T0 + 3500, reserve("ns/w1", "cq-a", 1500), admit("ns/w1"), reserve("ns/w2", "cq-b"))
    log.decide(T0 + 4000, (ev.WorkloadPending, {"key": "ns/w3", "reason": "WaitingForQuota", "message": "m",
                                                "requeue_reason": "NoFit", "parked": True}))
    log.decide(T0 + 6000, admit("ns/w2"))
    log.decide(T0 + 7000, reserve("other/w4", "cq-b", 500))
    log.decide(T0 + 20_000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InClusterQueue",
                                                    "message": "preempted", "preemptor": "ns/w3"}))
    log.decide(T0 + 21_000, (ev.WorkloadRequeued, {"key": "ns/w1", "status": True, "reason": "Preempted",
                                                   "release": True}))
    log.observe(ev.WorkloadFinished(time=T0 + 30_000, key="ns/w2"))


def test_local_queue_metrics_are_off_with_their_gate_and_on_from_a_configuration_that_turns_it_on() -> None:
    log = Log()
    gates_config(log, T0, LocalQueueMetrics=False)
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    log.observe(ev.WorkloadFinished(time=T0 + 2000, key="ns/w1"))
    s = log.state
    assert local_families(s) == []
    assert "kueue_local_queue_" not in metrics_text([s])
    assert sample(s, "kueue_admitted_workloads_total", cluster_queue="cq-a", priority_class="high") == 1
    # AllAlpha leaves a beta gate alone; switching it off by name is what turns the families off
    gates_config(log, T0 + 3000, AllAlpha=True)
    assert len(local_families(s)) == len(LOCAL_QUEUE_SPECS)
    # counted from the configuration that turned them on: w1's admission and finish were before it
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {}
    assert series(s, "kueue_local_queue_execution_time_seconds") == {}
    assert series(s, "kueue_execution_time_seconds") == {("cq-a", "high"): ([1] * 15, 1.0)}
    log.decide(T0 + 5000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {("lq-b", "ns", ""): 1}
    assert series(s, "kueue_local_queue_finished_workloads") == {("lq-a", "ns"): 1, ("lq-b", "ns"): 0}


def test_local_queue_metrics_after_a_scenario() -> None:
    log = Log()
    local_queue_scenario(log)
    s = log.state
    assert local_families(s) == [spec.name for spec in LOCAL_QUEUE_SPECS]  # on by default (beta)
    lq_pc = {("lq-a", "ns", "high"): 1, ("lq-b", "ns", ""): 1, ("lq-b", "other", ""): 1}
    assert series(s, "kueue_local_queue_quota_reserved_workloads_total") == lq_pc
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {("lq-a", "ns", "high"): 1,
                                                                       ("lq-b", "ns", ""): 1}
    buckets, total = histogram(s, "kueue_local_queue_quota_reserved_wait_time_seconds", name="lq-b",
                               namespace="other", priority_class="")
    assert (buckets["5.0"], buckets["10.0"], total) == (0, 1, 7.0)
    buckets, total = histogram(s, "kueue_local_queue_admission_wait_time_seconds", name="lq-b", namespace="ns",
                               priority_class="")
    assert list(buckets) == [*map(repr, WAIT_BUCKETS), "+Inf"]  # Kueue's LocalQueue histogram: 14 buckets
    assert (buckets["5.0"], buckets["10.0"], total) == (0, 1, 6.0)
    # w2 has no checks, but was admitted after its reservation (the workload controller's admission, not the
    # scheduler's): Kueue observes the time since its reservation (Reconcile, SyncAdmittedCondition)
    assert series(s, "kueue_local_queue_admission_checks_wait_time_seconds") == {
        ("lq-b", "ns", ""): ([0, 1, *[1] * 13], 2.5)}
    assert series(s, "kueue_local_queue_evicted_workloads_total") == {("lq-a", "ns", "Preempted", "", "high"): 1}
    assert series(s, "kueue_local_queue_finished_workloads_total") == {("lq-b", "ns", ""): 1}
    assert series(s, "kueue_local_queue_execution_time_seconds") == {  # w2: admitted at T0+6 s, finished at 30 s
        ("lq-b", "ns", ""): ([0, 0, 0, 0, 0, 1, *[1] * 9], 24.0)}
    assert series(s, "kueue_local_queue_finished_workloads") == {
        ("lq-a", "ns"): 0, ("lq-b", "ns"): 1, ("lq-b", "other"): 0}
    assert series(s, "kueue_local_queue_pending_workloads") == {
        ("lq-a", "ns", "active"): 1, ("lq-a", "ns", "inadmissible"): 0,  # w1, requeued
        ("lq-b", "ns", "active"): 1, ("lq-b", "ns", "inadmissible"): 0,  # w3: w2's finish moved it back
        ("lq-b", "other", "active"): 0, ("lq-b", "other", "inadmissible"): 0}
    log.decide(T0 + 35_000, (ev.WorkloadPending, {"key": "ns/w3", "reason": "WaitingForQuota", "message": "m",
                                                  "requeue_reason": "NoFit", "parked": True}))
    assert sample(s, "kueue_local_queue_pending_workloads", name="lq-b", namespace="ns", status="inadmissible") == 1
    assert sample(s, "kueue_local_queue_pending_workloads", name="lq-b", namespace="ns", status="active") == 0
    assert series(s, "kueue_local_queue_reserving_active_workloads") == {
        ("lq-a", "ns"): 0, ("lq-b", "ns"): 0, ("lq-b", "other"): 1}
    assert series(s, "kueue_local_queue_admitted_active_workloads") == {
        ("lq-a", "ns"): 0, ("lq-b", "ns"): 0, ("lq-b", "other"): 0}
    assert series(s, "kueue_local_queue_resource_reservation") == {
        ("lq-a", "ns", "f0", "cpu"): 0.0, ("lq-a", "ns", "f0", "memory"): 0.0,
        ("lq-b", "ns", "f0", "cpu"): 0.0, ("lq-b", "other", "f0", "cpu"): 0.5}
    assert series(s, "kueue_local_queue_resource_usage") == {
        ("lq-a", "ns", "f0", "cpu"): 0.0, ("lq-a", "ns", "f0", "memory"): 0.0,
        ("lq-b", "ns", "f0", "cpu"): 0.0, ("lq-b", "other", "f0", "cpu"): 0.0}
    log.decide(T0 + 40_000, admit("other/w4"))
    assert sample(s, "kueue_local_queue_resource_usage", name="lq-b", namespace="other", flavor="f0",
                  resource="cpu") == 0.5
    assert sample(s, "kueue_local_queue_admitted_active_workloads", name="lq-b", namespace="other") == 1
    assert series(s, "kueue_local_queue_status") == {
        (n, ns, a): 1.0 if a == "True" else 0.0
        for n, ns in (("lq-a", "ns"), ("lq-b", "ns"), ("lq-b", "other")) for a in ("True", "False", "Unknown")}
    log.observe(upsert(local_queue(NS, "lq-a", "cq-a", stop_policy="Hold"), T0 + 41_000))
    assert sample(s, "kueue_local_queue_status", name="lq-a", namespace="ns", active="False") == 1
    assert sample(s, "kueue_local_queue_pending_workloads", name="lq-a", namespace="ns", status="active") == 0
    text = metrics_text([s])
    assert 'kueue_local_queue_admitted_workloads_total{name="lq-b",namespace="other",priority_class="",' \
           'replica_role="standalone"} 1.0' in text


def test_a_deleted_local_queue_takes_its_series_along() -> None:
    log = Log()
    local_queue_scenario(log)
    log.observe(ev.ObjectDeleted(time=T0 + 50_000, kind="LocalQueue", key="other/lq-b"))
    s = log.state
    for name in ("kueue_local_queue_quota_reserved_workloads_total", "kueue_local_queue_quota_reserved_wait_time_seconds",
                 "kueue_local_queue_pending_workloads", "kueue_local_queue_status"):
        assert not [k for k in series(s, name) if k[:2] == ("lq-b", "other")], name
    assert ("lq-b", "ns", "") in series(s, "kueue_local_queue_quota_reserved_workloads_total")


def test_local_queue_metrics_after_a_snapshot_and_the_tail_equal_a_full_fold() -> None:
    log = Log()
    local_queue_scenario(log)
    gates_config(log, T0 + 31_000, LocalQueueMetrics=False)
    log.decide(T0 + 32_000, reserve("ns/w1", "cq-a"))  # not counted under the LocalQueue: the gate is off
    gates_config(log, T0 + 33_000)
    full = fold(log.records)
    assert series(full, "kueue_local_queue_quota_reserved_workloads_total")[("lq-a", "ns", "high")] == 1
    _restores_at_every_cut(log.records, full)


def test_a_snapshot_of_the_version_before_the_local_queue_metrics_restores() -> None:
    log = Log()
    local_queue_scenario(log)
    cut = len(log.records) - 3
    before = fold(log.records[:cut])
    old = msgspec.structs.replace(snapshot.take(before), version=4)
    lq = "kueue_local_queue_quota_reserved_wait_time_seconds"
    old.metrics.histograms = [(n, v) for n, v in old.metrics.histograms if not n.startswith("kueue_local_queue_")]  # type: ignore[union-attr]
    restored = fold(log.records[cut:], snapshot.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(old),
                                                                                type=snapshot.Snapshot)))
    assert series(restored, lq) == {}  # counted from the snapshot's offset on: nothing reserved after it
    full = families(fold(log.records))
    assert [f for f in families(restored) if f.spec.name != lq and f.spec.name not in (
        "kueue_local_queue_quota_reserved_workloads_total", "kueue_local_queue_admission_wait_time_seconds",
        "kueue_local_queue_admitted_workloads_total",
        "kueue_local_queue_admission_checks_wait_time_seconds")] == [
        f for f in full if f.spec.name != lq and f.spec.name not in (
            "kueue_local_queue_quota_reserved_workloads_total", "kueue_local_queue_admission_wait_time_seconds",
            "kueue_local_queue_admitted_workloads_total",
            "kueue_local_queue_admission_checks_wait_time_seconds")]


# --- metrics.localQueueMetrics: its switch and its LocalQueue selector (Kueue v1beta2) ----------------------------


def labelled(lq: o.LocalQueue, **labels: str) -> o.LocalQueue:
    return msgspec.structs.replace(lq, metadata=msgspec.structs.replace(lq.metadata, labels=labels))


def lq_metrics_config(log: Log, time: int, stanza: dict) -> None:
    log.observe(ev.ConfigRecorded(time=time, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "metrics": {"localQueueMetrics": stanza}}))


def test_a_local_queue_metrics_stanza_that_does_not_enable_them_turns_them_off() -> None:
    """Kueue defaults only an absent stanza (to ``enable: true``): one that leaves ``enable`` out, or sets it
    false, turns the LocalQueue metrics off with their gate on."""
    for stanza in ({}, {"enable": False}, {"localQueueSelector": {"matchLabels": {"team": "ml"}}}):
        log = Log()
        lq_metrics_config(log, T0, stanza)
        local_queue_scenario(log)
        assert local_families(log.state) == [], stanza
    log = Log()
    lq_metrics_config(log, T0, {"enable": True})
    local_queue_scenario(log)
    assert len(local_families(log.state)) == len(LOCAL_QUEUE_SPECS)


def test_the_local_queue_selector_keeps_the_metrics_of_the_local_queues_it_selects() -> None:
    log = Log()
    lq_metrics_config(log, T0, {"enable": True, "localQueueSelector": {
        "matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]}})
    cluster(log)
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="ml"), T0),
                upsert(workload(NS, "w9", queue="lq-gone", created=T0), T0))
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), reserve("ns/w2", "cq-b"), reserve("ns/w9", "cq-b"))
    s = log.state
    assert series(s, "kueue_local_queue_quota_reserved_workloads_total") == {("lq-a", "ns", "high"): 1}
    assert series(s, "kueue_local_queue_reserving_active_workloads") == {("lq-a", "ns"): 1}
    assert sample(s, "kueue_quota_reserved_workloads_total", cluster_queue="cq-b", priority_class="") == 2
    # lq-b's labels come to match: its gauges show at once, its counters count from then on
    log.observe(upsert(labelled(local_queue(NS, "lq-b", "cq-b"), team="ml"), T0 + 2000))
    assert series(s, "kueue_local_queue_reserving_active_workloads") == {("lq-a", "ns"): 1, ("lq-b", "ns"): 1}
    log.decide(T0 + 3000, admit("ns/w2"))
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {("lq-b", "ns", ""): 1}
    assert series(s, "kueue_local_queue_quota_reserved_workloads_total") == {("lq-a", "ns", "high"): 1}
    # lq-a stops matching: none of its series is shown
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="web"), T0 + 4000))
    assert series(s, "kueue_local_queue_quota_reserved_workloads_total") == {}
    assert series(s, "kueue_local_queue_reserving_active_workloads") == {("lq-b", "ns"): 1}
    full = fold(log.records)
    assert families(full) == families(s)
    _restores_at_every_cut(log.records, full)


def test_the_selector_answer_follows_the_local_queue_and_the_configuration_between_questions() -> None:
    """The answer is remembered per LocalQueue (the fold asks at every workload event): a LocalQueue created
    after a workload named it, relabelled, deleted, and a later configuration are each answered anew."""
    log = Log()
    lq_metrics_config(log, T0, {"enable": True, "localQueueSelector": {"matchLabels": {"team": "ml"}}})
    s = log.state
    assert not s.local_queue_metrics_for(NS, "lq-a")  # no such LocalQueue: no labels to match
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="ml"), T0))
    assert s.local_queue_metrics_for(NS, "lq-a")
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="web"), T0 + 1000))
    assert not s.local_queue_metrics_for(NS, "lq-a")
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="ml"), T0 + 2000))
    assert s.local_queue_metrics_for(NS, "lq-a")
    log.observe(ev.ObjectDeleted(time=T0 + 3000, key="ns/lq-a", kind="LocalQueue"))
    assert not s.local_queue_metrics_for(NS, "lq-a")
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="web"), T0 + 4000))
    assert not s.local_queue_metrics_for(NS, "lq-a")
    lq_metrics_config(log, T0 + 5000, {"enable": True})  # no selector: every LocalQueue
    assert s.local_queue_metrics_for(NS, "lq-a") and s.local_queue_metrics_for(NS, "lq-none")
    lq_metrics_config(log, T0 + 6000, {"enable": False})
    assert not s.local_queue_metrics_for(NS, "lq-a")


def test_a_local_queue_that_stops_matching_the_selector_counts_from_zero_if_it_matches_again() -> None:
    """Kueue clears a LocalQueue's series on the update that makes it stop matching the selector (#12164); one
    that matches again later counts from zero, its histograms too. A LocalQueue still matching keeps its series."""
    log = Log()
    lq_metrics_config(log, T0, {"enable": True, "localQueueSelector": {"matchLabels": {"team": "ml"}}})
    cluster(log)
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="ml"), T0),
                upsert(labelled(local_queue(NS, "lq-b", "cq-b"), team="ml"), T0))
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), reserve("ns/w2", "cq-b"))
    wait = "kueue_local_queue_quota_reserved_wait_time_seconds"
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="web"), T0 + 2000),
                upsert(labelled(local_queue(NS, "lq-b", "cq-b"), team="ml", other="x"), T0 + 2000))
    log.observe(upsert(labelled(local_queue(NS, "lq-a", "cq-a"), team="ml"), T0 + 3000))
    s = log.state
    assert series(s, "kueue_local_queue_quota_reserved_workloads_total") == {("lq-b", "ns", ""): 1}
    assert set(series(s, wait)) == {("lq-b", "ns", "")}
    log.decide(T0 + 4000, admit("ns/w1"))
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {("lq-a", "ns", "high"): 1}
    full = fold(log.records)
    assert families(full) == families(s)
    _restores_at_every_cut(log.records, full)


def test_a_recorded_invalid_local_queue_selector_selects_every_local_queue() -> None:
    """A document recorded before kueue-es refused such a selector (as Kueue v0.20 does) reads as Kueue read it
    before: every LocalQueue."""
    log = Log()
    lq_metrics_config(log, T0, {"enable": True, "localQueueSelector": {
        "matchExpressions": [{"key": "team", "operator": "InvalidOp", "values": ["ml"]}]}})
    local_queue_scenario(log)
    assert set(series(log.state, "kueue_local_queue_quota_reserved_workloads_total")) == {
        ("lq-a", "ns", "high"), ("lq-b", "ns", ""), ("lq-b", "other", "")}


def test_the_shards_of_a_replica_merge_their_local_queue_series() -> None:
    on, off = Log(), Log()
    local_queue_scenario(on)
    gates_config(off, T0, LocalQueueMetrics=False)
    local_queue_scenario(off)
    both = {f.spec.name: f for f in merged([families(on.state), families(off.state)])}
    assert both["kueue_local_queue_quota_reserved_workloads_total"].samples == sorted(
        series(on.state, "kueue_local_queue_quota_reserved_workloads_total").items())
    twice = {f.spec.name: f.samples for f in merged([families(on.state), families(on.state)])}
    assert twice["kueue_local_queue_finished_workloads_total"] == [(("lq-b", "ns", ""), 2.0)]


# --- Admission Fair Sharing usage per LocalQueue ---------------------------------------------------------------


AFS = {"usageHalfLifeTime": "10m", "usageSamplingInterval": "10m", "resourceWeights": {"cpu": 2}}
USAGE_BASED = o.AdmissionScope(admission_mode="UsageBasedAdmissionFairSharing")


def afs_usage(state: ClusterState) -> dict[tuple[str, ...], object]:
    """``kueue_local_queue_admission_fair_sharing_usage`` as the service exposes it (its value is the
    scheduler's, passed in)."""
    for f in families(state, afs.usage_samples):
        if f.spec.name == "kueue_local_queue_admission_fair_sharing_usage":
            assert f.spec.labels == ("name", "namespace", "cluster_queue")
            return dict(f.samples)
    raise AssertionError("no kueue_local_queue_admission_fair_sharing_usage family")


def afs_cluster(log: Log, lq_weight: str = "2") -> None:
    """AFS configured (cpu weighted 2); cq-a admits on usage, lq-a (weight ``lq_weight``) feeds it; cq-b does
    not use AFS."""
    configure(log, T0, admissionFairSharing=AFS)
    cluster(log)
    log.observe(*(upsert(x, T0) for x in (
        cluster_queue("cq-a", "co", cpu="8", admission_scope=USAGE_BASED),
        o.LocalQueue(metadata=o.ObjectMeta(name="lq-a", namespace=NS), spec=o.LocalQueueSpec(
            cluster_queue="cq-a", fair_sharing=o.FairSharing(weight=lq_weight))))))


def test_afs_usage_is_the_weighted_decayed_consumption_over_the_local_queue_s_weight() -> None:
    """Kueue's formula (its LocalQueue controller test): Σ resource weight × (decayed consumed + pending penalty)
    ÷ the LocalQueue's weight. 4 cpu admitted: the entry penalty 4 × (1 − 0.5) = 2, so 2 × 2 ÷ 2 = 2; one
    half-life later consumed is 2 × 0.5 + 4 × 0.5 = 3 (so 3), then 3.5."""
    log = Log()
    afs_cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a", 4000), admit("ns/w1"))
    idle = {("lq-b", NS, "cq-b"): 0.0}  # Kueue samples the LocalQueues of a ClusterQueue without AFS too
    assert afs_usage(log.state) == {("lq-a", NS, "cq-a"): 2.0, **idle}
    log.observe(upsert(namespace("later"), T0 + 601_000))
    assert afs_usage(log.state) == {("lq-a", NS, "cq-a"): 3.0, **idle}
    log.observe(upsert(namespace("later-still"), T0 + 1_201_000))
    assert afs_usage(log.state) == {("lq-a", NS, "cq-a"): 3.5, **idle}
    assert 'kueue_local_queue_admission_fair_sharing_usage{cluster_queue="cq-a",name="lq-a",namespace="ns",' \
        'replica_role="standalone"} 3.5' in metrics_text([log.state])


def test_afs_usage_of_a_local_queue_whose_cluster_queue_does_not_order_by_it_decays_towards_its_admitted_usage(
) -> None:
    """Kueue's LocalQueue controller samples every LocalQueue while admissionFairSharing is configured (v0.20
    ``localqueue_controller.go``; its metric test uses a ClusterQueue without an admission mode): lq-b of cq-b
    (no admissionScope) has no entry penalty, so 4 cpu admitted show nothing at first; each half-life (one
    sampling interval, from lq-b's appearance) halves the distance to 4 cpu: 2, then 3 cpu (weight 2 → 4, 6)."""
    log = Log()
    afs_cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b", 4000), admit("ns/w2"))
    assert afs_usage(log.state)[("lq-b", NS, "cq-b")] == 0.0
    log.observe(upsert(namespace("later"), T0 + 600_000))
    assert afs_usage(log.state)[("lq-b", NS, "cq-b")] == 4.0
    log.observe(upsert(namespace("later-still"), T0 + 1_200_000))
    assert afs_usage(log.state)[("lq-b", NS, "cq-b")] == 6.0
    _restores_at_every_cut(log.records, log.state)


def test_afs_usage_is_infinite_for_a_weight_of_zero_and_absent_without_afs_or_an_active_queue() -> None:
    log = Log()
    afs_cluster(log, lq_weight="0")
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a", 4000), admit("ns/w1"))
    assert afs_usage(log.state) == {("lq-a", NS, "cq-a"): math.inf, ("lq-b", NS, "cq-b"): 0.0}
    log.observe(upsert(cluster_queue("cq-a", "co", cpu="8", admission_scope=USAGE_BASED,
                                     stop_policy="Hold"), T0 + 2000))
    assert afs_usage(log.state) == {("lq-b", NS, "cq-b"): 0.0}, "sampled only under an active ClusterQueue"
    configure(log, T0 + 3000)
    assert afs_usage(log.state) == {}, "no admissionFairSharing configured"
    configure(log, T0 + 4000, admissionFairSharing=AFS, featureGates={"LocalQueueMetrics": False})
    assert "kueue_local_queue_admission_fair_sharing_usage" not in metrics_text([log.state])


# --- workload creation latency ----------------------------------------------------------------------------------


def created_workload(time: int, kind: str, latency_ms: int | None, action: str = "CreatedWorkload") -> ev.JobActed:
    return ev.JobActed(time=time, key=f"{NS}/j", uid="u", kind=kind, action=action, workload=f"{NS}/w",
                       creation_latency_ms=latency_ms)


def test_workload_creation_latency_per_job_kind_under_its_gate() -> None:
    """Kueue's job reconcilers observe, right after creating a Workload, how long after the job it came (the
    connector measures it; a job past generation 1 carries none), while MetricForWorkloadCreationLatency is on."""
    log = Log()
    log.observe(created_workload(T0, "Job", 2000), created_workload(T0, "Job", 30_000),
                created_workload(T0, "JobSet", 0), created_workload(T0, "Job", None),
                created_workload(T0, "Job", 1000, action="Started"))
    assert histogram(log.state, "kueue_workload_creation_latency_seconds", job_kind="Job") == (
        {"0.005": 0, "0.01": 0, "0.025": 0, "0.05": 0, "0.1": 0, "0.25": 0, "0.5": 0, "1.0": 0, "2.5": 1,
         "5.0": 1, "10.0": 1, "+Inf": 2}, 32.0)
    assert histogram(log.state, "kueue_workload_creation_latency_seconds", job_kind="JobSet")[0]["0.005"] == 1
    gates_config(log, T0 + 1000, MetricForWorkloadCreationLatency=False)
    log.observe(created_workload(T0 + 2000, "LeaderWorkerSet", 1000))
    assert set(series(log.state, "kueue_workload_creation_latency_seconds")) == {("Job",), ("JobSet",)}
    gates_config(log, T0 + 3000, MetricForWorkloadCreationLatency=True)
    log.observe(created_workload(T0 + 4000, "LeaderWorkerSet", 1000))
    assert set(series(log.state, "kueue_workload_creation_latency_seconds")) == {
        ("Job",), ("JobSet",), ("LeaderWorkerSet",)}
    _restores_at_every_cut(log.records, log.state)


def test_under_dynamic_quota_orchestration_the_resource_gauges_show_the_effective_quotas() -> None:
    """Kueue reports a ClusterQueue's quotas and reservations, and its LocalQueues' reservations, over the quotas
    its cache compiled: under DynamicQuotaOrchestration, those of ``status.effectiveQuotas`` (here 6 cpu, no
    memory, instead of the spec's 4 cpu and 8Gi)."""
    log = Log()
    configure(log, T0, metrics=RESOURCE_METRICS, featureGates={"DynamicQuotaOrchestration": True})
    cluster(log)
    effective = cluster_queue("cq-a", "co", cpu="4", memory="8Gi", borrowing="2", lending="1Gi")
    effective = msgspec.structs.replace(effective, status={"effectiveQuotas": {"resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "f0", "resources": [{"name": "cpu", "nominalQuota": "6"}]}]}]}})
    log.observe(upsert(effective, T0 + 500))
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a", 1500), admit("ns/w1"))
    s = log.state
    assert {k: v for k, v in series(s, "kueue_cluster_queue_nominal_quota").items() if k[1] == "cq-a"} == {
        ("co", "cq-a", "f0", "cpu"): 6.0}
    assert {k: v for k, v in series(s, "kueue_cluster_queue_resource_reservation").items() if k[1] == "cq-a"} == {
        ("co", "cq-a", "f0", "cpu"): 1.5}
    assert {k: v for k, v in series(s, "kueue_local_queue_resource_reservation").items() if k[0] == "lq-a"} == {
        ("lq-a", "ns", "f0", "cpu"): 1.5}


def test_a_local_queue_moved_to_another_cluster_queue_takes_its_pending_accounting_along() -> None:
    """Kueue #13885: pointing lq-b at cq-a moves its pending workloads — w2 and w3, parked together in cq-b —
    out of cq-b's counts (none left there, parked or not) and onto cq-a's heap, where they count as active."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, (ev.WorkloadPending, {"key": "ns/w2", "reason": "WaitingForQuota", "message": "m",
                                                "requeue_reason": "NoFit", "parked": True}))
    pending = series(log.state, "kueue_pending_workloads")
    assert (pending[("cq-a", "active")], pending[("cq-b", "inadmissible")]) == (1, 2)
    log.observe(upsert(local_queue(NS, "lq-b", "cq-a"), T0 + 2000))
    assert series(log.state, "kueue_pending_workloads") == {
        ("cq-a", "active"): 3, ("cq-a", "inadmissible"): 0, ("cq-b", "active"): 0, ("cq-b", "inadmissible"): 0}
    assert sample(log.state, "kueue_local_queue_pending_workloads", name="lq-b", namespace=NS,
                  status="active") == 2
    assert cluster_queue_status(log.state, "cq-b", T0 + 2000)["pendingWorkloads"] == 0  # type: ignore[index]
    assert cluster_queue_status(log.state, "cq-a", T0 + 2000)["pendingWorkloads"] == 3  # type: ignore[index]
    assert local_queue_status(log.state, f"{NS}/lq-b", T0 + 2000)["pendingWorkloads"] == 2  # type: ignore[index]
