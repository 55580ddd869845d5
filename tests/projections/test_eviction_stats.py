"""``status.schedulingStats.evictions``: the fold keeps each workload's eviction record (Kueue's reason and
underlying cause of every eviction path, counted in the order first met), starts from what the Workload shows, and
``evicted_workloads_once_total`` reads the same record (restarts and snapshots included)."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, upsert, workload

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.workloads import status_of
from tests.projections.test_proj_metrics import NS, Log, admit, cluster, release, reserve, sample, series

ONCE = "kueue_evicted_workloads_once_total"


def readmitted(log: Log, at: int, key: str = "ns/w2") -> None:
    log.decide(at, release(key))
    log.decide(at + 100, reserve(key, "cq-b"), admit(key))


@pytest.mark.parametrize(("decision", "entry"), [
    ((ev.WorkloadPreempted, {"reason": "InCohortReclamation", "preemptor": "ns/w1"}), ("Preempted", "")),
    ((ev.WorkloadPreempted, {"reason": "ConfigurablePreemption", "preemptor": "ns/w1", "preemption_config": "defrag",
                             "selected_by": (("lower-tier", (0, 1)), ("hero", (0,)))}),
     ("Preempted", "defrag")),
    ((ev.WorkloadEvicted, {"reason": "PodsReadyTimeout", "underlying_cause": "WaitForStart"}),
     ("PodsReadyTimeout", "WaitForStart")),
    ((ev.WorkloadEvicted, {"reason": "PodsReadyTimeout", "underlying_cause": "WaitForRecovery"}),
     ("PodsReadyTimeout", "WaitForRecovery")),
    ((ev.WorkloadEvicted, {"reason": "AdmissionCheck"}), ("AdmissionCheck", "")),
    ((ev.WorkloadEvicted, {"reason": "NodeFailures"}), ("NodeFailures", "")),
    ((ev.WorkloadEvicted, {"reason": "ClusterQueueStopped"}), ("ClusterQueueStopped", "")),
    ((ev.WorkloadEvicted, {"reason": "LocalQueueStopped"}), ("LocalQueueStopped", "")),
    ((ev.WorkloadDeactivated, {"reason": "Deactivated"}), ("Deactivated", "")),
    ((ev.WorkloadDeactivated, {"reason": "DeactivatedDueToAdmissionCheck"}), ("Deactivated", "AdmissionCheck")),
    ((ev.WorkloadDeactivated, {"reason": "DeactivatedDueToRequeuingLimitExceeded"}),
     ("Deactivated", "RequeuingLimitExceeded")),
    ((ev.WorkloadDeactivated, {"reason": "DeactivatedDueToMaximumExecutionTimeExceeded"}),
     ("Deactivated", "MaximumExecutionTimeExceeded")),
])
def test_each_eviction_path_counts_under_kueues_reason_and_cause(decision: tuple[type, dict],
                                                                 entry: tuple[str, str]) -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    kind, fields = decision
    log.decide(T0 + 2000, (kind, {"key": "ns/w2", "message": "m", **fields}))
    wl = log.state.workloads["ns/w2"]
    assert wl.evictions == ((*entry, 1),)
    assert status_of(wl)["schedulingStats"] == {
        "evictions": [{"reason": entry[0], "underlyingCause": entry[1], "count": 1}]}
    assert series(log.state, ONCE) == {("cq-b", *entry, ""): 1}  # the metrics' labels are the record's


def configured(log: Log, at: int, preemptor: str, rule: str, config: str = "defrag") -> None:
    log.decide(at, (ev.WorkloadPreempted, {
        "key": "ns/w2", "reason": "ConfigurablePreemption", "message": "m", "preemptor": preemptor,
        "preemption_config": config, "selected_by": ((rule, (1,)),)}))


def test_configured_preemptions_count_per_preemption_config() -> None:
    """Kueue v0.20 evicts a PreemptionConfig's victim with the reason ``Preempted`` and the config's name as the
    underlying cause, counted as any pair: a later preemption by the same config (another preemptor, other rules)
    adds one to that entry in place, one by another config gets an entry of its own, and a classical preemption
    keeps its ``Preempted`` entry with no cause."""
    log = Log()
    cluster(log)
    wl = log.state.workloads
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    configured(log, T0 + 2000, "ns/w1", "tier")
    readmitted(log, T0 + 3000)
    log.decide(T0 + 4000, (ev.WorkloadPreempted, {"key": "ns/w2", "reason": "InClusterQueue", "message": "m",
                                                  "preemptor": "ns/w1"}))
    readmitted(log, T0 + 5000)
    configured(log, T0 + 6000, "ns/hero", "lower-tier")
    readmitted(log, T0 + 7000)
    configured(log, T0 + 8000, "ns/hero", "tier", config="hero")
    assert wl["ns/w2"].evictions == (("Preempted", "defrag", 2), ("Preempted", "", 1), ("Preempted", "hero", 1))
    assert status_of(wl["ns/w2"])["schedulingStats"]["evictions"][0] == {
        "reason": "Preempted", "underlyingCause": "defrag", "count": 2}


def test_a_configured_preemption_is_labelled_with_its_record_entry_in_the_eviction_metrics() -> None:
    """Kueue v0.20 reports a PreemptionConfig's victim under its record's pair: ``evicted_workloads_total`` (and the
    LocalQueue one) with reason ``Preempted`` and the config's name as ``underlying_cause``; the ``once`` counter
    when that pair's entry goes from 0 to 1, so a workload preempted once classically and once by a config counts
    once under each cause; ``preempted_workloads_total`` keeps the ``ConfigurablePreemption`` reason."""
    log = Log()
    cluster(log)
    s = log.state
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    configured(log, T0 + 2000, "ns/w1", "tier")
    readmitted(log, T0 + 3000)
    configured(log, T0 + 4000, "ns/hero", "other")
    readmitted(log, T0 + 5000)
    log.decide(T0 + 6000, (ev.WorkloadPreempted, {"key": "ns/w2", "reason": "InClusterQueue", "message": "m",
                                                  "preemptor": "ns/w1"}))
    assert series(s, "kueue_evicted_workloads_total") == {("cq-b", "Preempted", "defrag", ""): 2,
                                                          ("cq-b", "Preempted", "", ""): 1}
    assert series(s, "kueue_local_queue_evicted_workloads_total") == {
        ("lq-b", NS, "Preempted", "defrag", ""): 2, ("lq-b", NS, "Preempted", "", ""): 1}
    assert series(s, ONCE) == {("cq-b", "Preempted", "defrag", ""): 1, ("cq-b", "Preempted", "", ""): 1}
    assert {k[1] for k in series(s, "kueue_preempted_workloads_total")} == {"ConfigurablePreemption", "InClusterQueue"}


def test_a_configured_preemption_from_a_log_without_its_config_counts_as_a_plain_preemption() -> None:
    """A ``ConfigurablePreemption`` victim whose decision names no PreemptionConfig (a log from before it was
    recorded) counts as Kueue's preemptor counts a target without its rules' data: ``Preempted``, no cause."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, (ev.WorkloadPreempted, {"key": "ns/w2", "reason": "ConfigurablePreemption",
                                                  "message": "m", "preemptor": "ns/w1"}))
    assert log.state.workloads["ns/w2"].evictions == (("Preempted", "", 1),)
    assert series(log.state, ONCE) == {("cq-b", "Preempted", "", ""): 1}


def test_entries_keep_the_order_first_counted_and_count_in_place() -> None:
    log = Log()
    cluster(log)
    s = log.state
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout", "message": "m",
                                                "underlying_cause": "WaitForStart"}))
    log.decide(T0 + 2500, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "AdmissionCheck", "message": "m"}))
    assert s.workloads["ns/w2"].evictions == (("PodsReadyTimeout", "WaitForStart", 1),)  # evicted already: none
    readmitted(log, T0 + 3000)
    log.decide(T0 + 4000, (ev.WorkloadPreempted, {"key": "ns/w2", "reason": "InClusterQueue", "message": "p",
                                                  "preemptor": "ns/w3"}))
    readmitted(log, T0 + 5000)
    log.decide(T0 + 6000, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout", "message": "m",
                                                "underlying_cause": "WaitForStart"}))
    assert s.workloads["ns/w2"].evictions == (("PodsReadyTimeout", "WaitForStart", 2), ("Preempted", "", 1))
    assert series(s, ONCE) == {("cq-b", "PodsReadyTimeout", "WaitForStart", ""): 1, ("cq-b", "Preempted", "", ""): 1}
    # a pending workload's deactivation is an eviction too (Kueue's Evict): its entry, but no metric
    log.decide(T0 + 7000, (ev.WorkloadDeactivated, {"key": "ns/w1", "reason": "Deactivated", "message": "off"}))
    assert s.workloads["ns/w1"].evictions == (("Deactivated", "", 1),)
    assert status_of(s.workloads["ns/w1"])["schedulingStats"] == {
        "evictions": [{"reason": "Deactivated", "underlyingCause": "", "count": 1}]}
    assert series(s, ONCE) == {("cq-b", "PodsReadyTimeout", "WaitForStart", ""): 1, ("cq-b", "Preempted", "", ""): 1}
    # shown Evicted already (the eviction written), a second deactivation decision counts nothing more
    log.decide(T0 + 8000, (ev.WorkloadDeactivated, {"key": "ns/w1", "reason": "Deactivated", "message": "off"}))
    assert s.workloads["ns/w1"].evictions == (("Deactivated", "", 1),)


def shown_workload(name: str, *entries: tuple[str, str, int]) -> o.Workload:
    w = workload(NS, name, queue="lq-b", created=T0)
    stats = o.SchedulingStats(evictions=[o.SchedulingStatsEviction(reason=r, underlying_cause=c, count=n)
                                         for r, c, n in entries])
    return msgspec.structs.replace(w, status=o.WorkloadStatus(scheduling_stats=stats))


def test_a_workload_keeps_the_counts_its_status_shows_and_they_are_not_counted_once_again() -> None:
    log = Log()
    cluster(log)
    s = log.state
    log.observe(upsert(shown_workload("w9", ("Preempted", "", 2), ("PodsReadyTimeout", "WaitForStart", 1)), T0))
    log.decide(T0 + 1000, reserve("ns/w9", "cq-b"), admit("ns/w9"))
    log.decide(T0 + 2000, (ev.WorkloadEvicted, {"key": "ns/w9", "reason": "PodsReadyTimeout", "message": "m",
                                                "underlying_cause": "WaitForStart"}))
    assert s.workloads["ns/w9"].evictions == (("Preempted", "", 2), ("PodsReadyTimeout", "WaitForStart", 2))
    assert sample(s, "kueue_evicted_workloads_total", cluster_queue="cq-b", reason="PodsReadyTimeout",
                  underlying_cause="WaitForStart", priority_class="") == 1
    assert series(s, ONCE) == {}  # Kueue counted it the first time, before kueue-es saw it
    # its status shows the whole record, as a later upsert (the writer's echo) leaves it
    log.observe(upsert(shown_workload("w9", ("Preempted", "", 2), ("PodsReadyTimeout", "WaitForStart", 2)), T0 + 3000))
    assert status_of(s.workloads["ns/w9"])["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 2},
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 2}]


def test_snapshots_keep_the_record_and_an_older_one_restores_the_pairs_it_counted() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "NodeFailures", "message": "m"}))
    readmitted(log, T0 + 3000)
    log.decide(T0 + 4000, (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "NodeFailures", "message": "m"}))
    restored = snapshot.decode(snapshot.encode(log.state))
    assert restored.workloads["ns/w2"].evictions == (("NodeFailures", "", 2),)
    assert snapshot.digest(restored) == snapshot.digest(log.state)
    # a version-43 snapshot kept the pairs in the metrics, not the counts
    taken = snapshot.take(log.state)
    old_wl = msgspec.structs.replace(taken.workloads[1], evictions=())
    assert old_wl.key == "ns/w2"
    old = msgspec.structs.replace(
        taken, version=43, workloads=[taken.workloads[0], old_wl, *taken.workloads[2:]],
        metrics=msgspec.structs.replace(taken.metrics, evicted_once=[("ns/w2", [("NodeFailures", "")])]))
    assert snapshot.restore(old).workloads["ns/w2"].evictions == (("NodeFailures", "", 1),)


def test_an_older_snapshots_configurable_preemption_entry_restores_as_kueues_preempted_entry() -> None:
    """Before version 46 a PreemptionConfig's victim counted in one ``ConfigurablePreemption`` entry with a long
    cause; restored, it is the (Preempted, config) entry Kueue's preemptor keeps, merged with one already there,
    so the next preemption by that config counts in it."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    taken = snapshot.take(log.state)
    old_wl = msgspec.structs.replace(taken.workloads[1], evictions=(
        ("Preempted", "", 1),
        ("ConfigurablePreemption", "Preempted by ns/w1 because of preemption config defrag rule r/0", 2),
        ("Preempted", "defrag", 1),
        ("ConfigurablePreemption", "truncated befo", 1)))
    assert old_wl.key == "ns/w2"
    old = msgspec.structs.replace(taken, version=45, workloads=[taken.workloads[0], old_wl, *taken.workloads[2:]])
    assert snapshot.restore(old).workloads["ns/w2"].evictions == (
        ("Preempted", "", 2), ("Preempted", "defrag", 3))
    current = msgspec.structs.replace(old, version=snapshot.SNAPSHOT_VERSION)
    assert snapshot.restore(current).workloads["ns/w2"].evictions == old_wl.evictions
