"""Kueue's own metric tests as the oracle: ``pkg/metrics/metrics_test.go``, ``localqueue_test.go`` and
``custom_labels_test.go`` (kubernetes-sigs/kueue, the newest stored versions: v1beta2, ``replica_role`` and
custom labels on every metric), translated into what a Prometheus user sees of kueue-es.

Kueue's tests call the reporting and clearing functions directly (``ReportClusterQueueQuotas`` then
``ClearClusterQueueResourceQuotas``, ...). Here the same outcome is reached the way a cluster reaches it: the
event that makes Kueue's controllers call them (a ClusterQueue dropping a flavor, a deletion, an eviction) is
folded, and the series exposed afterwards are checked. Each test names the Kueue test case it follows.
"""

from __future__ import annotations

import math
import re

import pytest
from fixtures.eventgen import T0, admission, cohort, flavor, local_queue, namespace, upsert, workload
from test_proj_metrics import (
    NS,
    RESOURCE_METRICS,
    Log,
    admit,
    cluster,
    configure,
    histogram,
    release,
    reserve,
    sample,
    series,
)

from events import objects as o
from events import schema as ev
from kueue_es import metrics as served
from projections import custom_labels, local_queue_metrics

GO_BOUNDS_14 = ["1", "2.5", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120", "10240"]
"""``generateExponentialBuckets(14)`` as Kueue's Go client writes the ``le`` label
(TestGenerateExponentialBuckets: ``{1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240}``)."""


def multi_flavor_cq(name: str, flavors: dict[str, tuple[str, ...]],
                    cohort_name: str = "co") -> o.ClusterQueue:
    """A ClusterQueue of one resource group: each flavor with a nominal quota of 4 for each of its
    resources."""
    covered = sorted({r for rs in flavors.values() for r in rs})
    fqs = [o.FlavorQuotas(name=f, resources=[o.ResourceQuota(name=r, nominal_quota="4") for r in rs])
           for f, rs in flavors.items()]
    return o.ClusterQueue(metadata=o.ObjectMeta(name=name), spec=o.ClusterQueueSpec(
        cohort_name=cohort_name, namespace_selector=o.LabelSelector(),
        resource_groups=[o.ResourceGroup(covered_resources=covered, flavors=fqs)]))


RESOURCE_GAUGES = ("kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_borrowing_limit",
                   "kueue_cluster_queue_lending_limit", "kueue_cluster_queue_resource_reservation",
                   "kueue_cluster_queue_resource_usage")


def two_flavors(log: Log) -> None:
    """ClusterQueue "queue" with flavors f0 and f1, each with cpu and memory; w1 reserves f0's cpu."""
    log.observe(*(upsert(x, T0) for x in (
        namespace(NS), flavor("f0"), flavor("f1"),
        multi_flavor_cq("queue", {"f0": ("cpu", "memory"), "f1": ("cpu", "memory")}),
        local_queue(NS, "lq", "queue"), workload(NS, "w1", queue="lq", created=T0))))
    configure(log, T0, metrics=RESOURCE_METRICS)
    log.decide(T0 + 1000, reserve("ns/w1", "queue"), admit("ns/w1"))


def test_report_and_cleanup_cluster_queue_metrics() -> None:
    """TestReportAndCleanupClusterQueueMetrics: a series per flavor and resource for the quotas, limits,
    reservations and usage; all of them go with the ClusterQueue (``ClearClusterQueueResourceMetrics``)."""
    log = Log()
    two_flavors(log)
    for name in RESOURCE_GAUGES:
        assert {k[2:] for k in series(log.state, name)} == {
            ("f0", "cpu"), ("f0", "memory"), ("f1", "cpu"), ("f1", "memory")}, name
    log.observe(ev.ObjectDeleted(time=T0 + 2000, kind="ClusterQueue", key="queue"))
    for name in RESOURCE_GAUGES:
        assert series(log.state, name) == {}, name


def test_report_and_cleanup_cluster_queue_quotas_and_usage() -> None:
    """TestReportAndCleanupClusterQueueQuotas and TestReportAndCleanupClusterQueueUsage: dropping flavor2
    removes its series only ("drop flavor2": 4 -> 2), then dropping res2 of the other flavor removes that one
    ("drop res2": 2 -> 1); the reservation of the resource that stays keeps its value."""
    log = Log()
    two_flavors(log)
    log.observe(upsert(multi_flavor_cq("queue", {"f0": ("cpu", "memory")}), T0 + 2000))
    for name in RESOURCE_GAUGES:
        assert {k[2:] for k in series(log.state, name)} == {("f0", "cpu"), ("f0", "memory")}, name
    log.observe(upsert(multi_flavor_cq("queue", {"f0": ("cpu",)}), T0 + 3000))
    for name in RESOURCE_GAUGES:
        assert {k[2:] for k in series(log.state, name)} == {("f0", "cpu")}, name
    assert sample(log.state, "kueue_cluster_queue_resource_reservation", cohort="co", cluster_queue="queue",
                  flavor="f0", resource="cpu") == 1.0


def test_report_and_cleanup_cluster_queue_pending_resources() -> None:
    """TestReportAndCleanupClusterQueuePendingResources: ``cluster_queue_resource_pending`` per ClusterQueue
    and resource (no flavor label), cleared with the ClusterQueue (``ClearClusterQueueMetrics`` clears it
    too)."""
    log = Log()
    two_flavors(log)
    log.observe(upsert(workload(NS, "w2", queue="lq", cpu="4", created=T0), T0 + 1500))
    assert series(log.state, "kueue_cluster_queue_resource_pending") == {("queue", "cpu"): 4.0,
                                                                         ("queue", "memory"): 0.0}
    log.observe(ev.ObjectDeleted(time=T0 + 2000, kind="ClusterQueue", key="queue"))
    assert series(log.state, "kueue_cluster_queue_resource_pending") == {}


def test_clear_cache_metrics_on_deletion() -> None:
    """TestClearCacheMetricsOnlyClearsCacheScopedGauges, as the ClusterQueue's deletion uses it: the status
    (all three series), reserving and admitted active gauges, and pending workloads, go with it; another
    ClusterQueue's stay."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.observe(ev.ObjectDeleted(time=T0 + 2000, kind="Workload", key="ns/w2"))
    log.observe(ev.ObjectDeleted(time=T0 + 3000, kind="ClusterQueue", key="cq-b"))
    for name in ("kueue_cluster_queue_status", "kueue_reserving_active_workloads",
                 "kueue_admitted_active_workloads", "kueue_pending_workloads", "kueue_finished_workloads"):
        assert {k[0] for k in series(log.state, name)} == {"cq-a"}, name
    assert len(series(log.state, "kueue_cluster_queue_status")) == 3  # CQStatuses: one series per status


def test_report_and_cleanup_workload_eviction_latency() -> None:
    """TestReportAndCleanupWorkloadEvictionLatency: ``ClearClusterQueueMetrics`` removes the eviction latency
    histogram's series of the deleted ClusterQueue ("expected fewer histogram metrics after clear")."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000,
               (ev.WorkloadEvicted, {"key": "ns/w1", "reason": "PodsReadyTimeout", "message": "m"}),
               (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout", "message": "m"}))
    log.decide(T0 + 3000, release("ns/w1"), release("ns/w2"))
    assert set(series(log.state, "kueue_workload_eviction_latency_seconds")) == {
        ("cq-a", "PodsReadyTimeout"), ("cq-b", "PodsReadyTimeout")}
    log.observe(ev.ObjectDeleted(time=T0 + 4000, kind="Workload", key="ns/w2"))
    log.observe(ev.ObjectDeleted(time=T0 + 5000, kind="ClusterQueue", key="cq-b"))
    assert set(series(log.state, "kueue_workload_eviction_latency_seconds")) == {("cq-a", "PodsReadyTimeout")}


PREEMPTION_REASONS = ("InClusterQueue", "InCohortReclamation", "InCohortFairSharing",
                      "InCohortReclaimWhileBorrowing")


def test_report_and_cleanup_cluster_queue_preempted_number() -> None:
    """TestReportAndCleanupClusterQueuePreemptedNumber: one series per reason under the preempting
    ClusterQueue (4 in all, 1 each), all cleared with it, whatever ClusterQueue the victims were in."""
    log = Log()
    cluster(log)
    victims = [workload(NS, f"v{i}", queue="lq-a", created=T0) for i in range(4)]
    log.observe(*(upsert(v, T0) for v in victims))
    log.decide(T0 + 1000, *(reserve(f"ns/v{i}", "cq-a") for i in range(4)))
    log.decide(T0 + 2000, *((ev.WorkloadPreempted, {"key": f"ns/v{i}", "reason": reason, "message": "m",
                                                     "preemptor": "ns/w2"})
                            for i, reason in enumerate(PREEMPTION_REASONS)))
    assert series(log.state, "kueue_preempted_workloads_total") == {("cq-b", r): 1
                                                                    for r in PREEMPTION_REASONS}
    log.observe(ev.ObjectDeleted(time=T0 + 3000, kind="ClusterQueue", key="cq-b"))
    assert series(log.state, "kueue_preempted_workloads_total") == {}
    assert series(log.state, "kueue_evicted_workloads_total") == {("cq-a", "Preempted", "", ""): 4}


def test_report_and_cleanup_local_queue_counters() -> None:
    """TestReportAndCleanupLocalQueueEvictedNumber, TestReportAndCleanupLocalQueueQuotaReservedNumber,
    TestLocalQueueQuotaReservedWaitTimeHasPriorityLabel and
    TestReportLocalQueueAdmissionChecksWaitTimeHasPriorityLabel: the LocalQueue's counters and wait times
    carry ``priority_class`` (``evicted`` its reason and underlying cause too), and all go with the LocalQueue
    (``ClearLocalQueueMetrics``)."""
    log = Log()
    cluster(log)
    log.observe(upsert(o.AdmissionCheck(metadata=o.ObjectMeta(name="prov"),
                                        spec=o.AdmissionCheckSpec(controller_name="example.com/prov")), T0),
                upsert(o.ClusterQueue(metadata=o.ObjectMeta(name="cq-c"), spec=o.ClusterQueueSpec(
                    namespace_selector=o.LabelSelector(),
                    admission_checks_strategy=o.AdmissionChecksStrategy(
                        admission_checks=[o.AdmissionCheckStrategyRule(name="prov")]),
                    resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[o.FlavorQuotas(
                        name="f0", resources=[o.ResourceQuota(name="cpu", nominal_quota="4")])])])), T0),
                upsert(local_queue(NS, "lq-c", "cq-c"), T0),
                upsert(workload(NS, "w4", queue="lq-c", priority_class="high", created=T0), T0))
    log.decide(T0 + 1000, reserve("ns/w4", "cq-c"))
    log.observe(ev.AdmissionCheckStateChanged(time=T0 + 1500, key="ns/w4", check="prov", state="Ready"))
    log.decide(T0 + 2000, admit("ns/w4"))
    log.decide(T0 + 3000, (ev.WorkloadEvicted, {"key": "ns/w4", "reason": "PodsReadyTimeout", "message": "m",
                                                "underlying_cause": "WaitForStart"}))
    s = log.state
    assert series(s, "kueue_local_queue_quota_reserved_workloads_total") == {("lq-c", NS, "high"): 1}
    assert set(series(s, "kueue_local_queue_quota_reserved_wait_time_seconds")) == {("lq-c", NS, "high")}
    assert set(series(s, "kueue_local_queue_admission_checks_wait_time_seconds")) == {("lq-c", NS, "high")}
    assert series(s, "kueue_local_queue_evicted_workloads_total") == {
        ("lq-c", NS, "PodsReadyTimeout", "WaitForStart", "high"): 1}
    log.observe(ev.ObjectDeleted(time=T0 + 4000, kind="LocalQueue", key=f"{NS}/lq-c"))
    for name in ("kueue_local_queue_quota_reserved_workloads_total",
                 "kueue_local_queue_quota_reserved_wait_time_seconds",
                 "kueue_local_queue_admission_checks_wait_time_seconds",
                 "kueue_local_queue_evicted_workloads_total", "kueue_local_queue_admitted_workloads_total",
                 "kueue_local_queue_admission_wait_time_seconds"):
        assert not [k for k in series(s, name) if k[:2] == ("lq-c", NS)], name


def test_generate_exponential_buckets_as_exposed() -> None:
    """TestGenerateExponentialBuckets: 14 buckets from 1 s (1, then 2.5 doubling to 10240), written as Go
    writes them; Kueue's ClusterQueue admission wait time has 16 (``generateExponentialBuckets(16)``), the
    LocalQueue's 14."""
    log = Log()
    cluster(log)
    log.decide(T0 + 3500, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    text = served.text([log.state])

    def bounds(metric: str) -> list[str]:
        return re.findall(rf'^{metric}_bucket{{(?:[^}}]*,)?le="([^"]+)"', text, re.MULTILINE)

    assert bounds("kueue_quota_reserved_wait_time_seconds") == [*GO_BOUNDS_14, "+Inf"]
    assert bounds("kueue_admission_wait_time_seconds") == [*GO_BOUNDS_14, "20480", "40960", "+Inf"]
    assert bounds("kueue_local_queue_admission_wait_time_seconds") == [*GO_BOUNDS_14, "+Inf"]
    buckets, total = histogram(log.state, "kueue_quota_reserved_wait_time_seconds", cluster_queue="cq-a",
                               priority_class="high")
    assert (buckets["2.5"], buckets["5.0"], total) == (0, 1, 3.5)


def test_metrics_with_replica_role_label() -> None:
    """TestMetricsWithReplicaRoleLabel: without leader election every metric is labelled
    ``replica_role="standalone"`` (the quotas, evicted, preempted, the LocalQueue's evicted); a leader's
    series are ``leader`` (TestMetricsWithDifferentRoles)."""
    log = Log()
    cluster(log)
    configure(log, T0, metrics=RESOURCE_METRICS)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    log.decide(T0 + 2000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InClusterQueue", "message": "m",
                                                  "preemptor": "ns/w2"}))
    text = served.text([log.state])
    for metric in ("kueue_cluster_queue_nominal_quota", "kueue_evicted_workloads_total",
                   "kueue_preempted_workloads_total", "kueue_local_queue_evicted_workloads_total"):
        lines = [line for line in text.splitlines() if line.startswith(metric + "{")]
        assert lines and all('replica_role="standalone"' in line for line in lines), metric
    leader = served.text([log.state], role=served.LEADER)
    assert 'kueue_evicted_workloads_total{cluster_queue="cq-a",priority_class="high",reason="Preempted",' \
           'replica_role="leader",underlying_cause=""} 1.0' in leader.splitlines()


def test_git_version_metric() -> None:
    """TestGitVersionMetric: ``kueue_build_info`` is 1 under the six build labels (no ``replica_role``)."""
    info = list(served.BuildInfo().collect())
    assert [m.name for m in info] == ["kueue_build_info"]
    (only,) = info[0].samples
    assert set(only.labels) == {"git_version", "git_commit", "build_date", "go_version", "compiler",
                                "platform"}
    assert only.value == 1.0


def test_cohort_metrics_cleared_per_cohort() -> None:
    """TestCohortMetrics: clearing one cohort's series (its Cohort object deleted, nothing else naming it)
    leaves another cohort's subtree quota and reservations as they were."""
    log = Log()
    log.observe(*(upsert(x, T0) for x in (
        namespace(NS), flavor("f0"), cohort("cohort"), cohort("cohort_two"),
        multi_flavor_cq("cq1", {"f0": ("cpu",)}, "cohort"),
        multi_flavor_cq("cq2", {"f0": ("cpu",)}, "cohort_two"),
        local_queue(NS, "lq1", "cq1"), local_queue(NS, "lq2", "cq2"),
        workload(NS, "w1", queue="lq1", created=T0), workload(NS, "w2", queue="lq2", created=T0))))
    log.decide(T0 + 1000, reserve("ns/w1", "cq1"), reserve("ns/w2", "cq2", 3000))
    assert series(log.state, "kueue_cohort_subtree_resource_reservations") == {
        ("cohort", "f0", "cpu"): 1.0, ("cohort_two", "f0", "cpu"): 3.0}
    log.observe(upsert(multi_flavor_cq("cq1", {"f0": ("cpu",)}, ""), T0 + 2000))
    log.observe(ev.ObjectDeleted(time=T0 + 3000, kind="Cohort", key="cohort"))
    assert series(log.state, "kueue_cohort_subtree_quota") == {("cohort_two", "f0", "cpu"): 4.0}
    assert series(log.state, "kueue_cohort_subtree_resource_reservations") == {
        ("cohort_two", "f0", "cpu"): 3.0}


def _lq(labels: dict[str, str]) -> o.LocalQueue:
    return o.LocalQueue(metadata=o.ObjectMeta(name="lq", namespace=NS, labels=labels),
                        spec=o.LocalQueueSpec(cluster_queue="cq"))


@pytest.mark.parametrize(("stanza", "lq_labels", "want"), [
    pytest.param({"enable": False, "localQueueSelector": {"matchLabels": {"env": "prod"}}}, {"env": "prod"},
                 False, id="should not expose metrics; disabled"),
    pytest.param({"enable": True}, {"env": "prod"}, True,
                 id="should expose metrics; enabled with no selector"),
    pytest.param({"enable": True, "localQueueSelector": {"matchLabels": {"env": "prod"}}}, {"env": "prod"},
                 True, id="should expose metrics; enabled with matching selector"),
    pytest.param({"enable": True, "localQueueSelector": {"matchLabels": {"env": "prod"}}}, {"env": "dev"},
                 False, id="should not expose metrics; enabled with selector that does not match"),
])
def test_should_expose_local_queue_metrics(stanza: dict, lq_labels: dict[str, str], want: bool) -> None:
    """localqueue_test.go, TestShouldExposeLocalQueueMetrics (the gate on): enabled and the selector
    matching."""
    setting = local_queue_metrics.of_document({"metrics": {"localQueueMetrics": stanza}})
    assert (setting.enable and local_queue_metrics.selects(setting, _lq(lq_labels))) is want


@pytest.mark.parametrize(("entries", "labels", "annotations", "want"), [
    pytest.param([], {"team": "infra"}, {}, None, id="no entries configured"),
    pytest.param([{"name": "team"}], {"team": "infra"}, {}, ("infra",),
                 id="name only (defaults to label key)"),
    pytest.param([{"name": "team", "sourceLabelKey": "org/team"}], {"org/team": "platform"}, {},
                 ("platform",), id="sourceLabelKey"),
    pytest.param([{"name": "cost_center", "sourceAnnotationKey": "billing/cost-center"}], {},
                 {"billing/cost-center": "cc-123"}, ("cc-123",), id="sourceAnnotationKey"),
    pytest.param([{"name": "team"}], {"other": "value"}, {}, ("",), id="missing key returns empty string"),
    pytest.param([{"name": "team"}, {"name": "env", "sourceLabelKey": "environment"},
                  {"name": "cost", "sourceAnnotationKey": "billing/cost"}],
                 {"team": "ml", "environment": "prod"}, {"billing/cost": "high"}, ("ml", "prod", "high"),
                 id="multiple entries"),
])
def test_extract_values(entries: list[dict], labels: dict[str, str], annotations: dict[str, str],
                        want: tuple[str, ...] | None) -> None:
    """custom_labels_test.go, TestExtractValues: a ClusterQueue's values, in the configured order."""
    found = custom_labels.of_document({"metrics": {"customLabels": entries}})
    if want is None:
        assert found is None
        return
    assert found is not None
    meta = o.ObjectMeta(name="cq1", labels=labels, annotations=annotations)
    assert found.values(custom_labels.CLUSTER_QUEUE, meta) == want
    assert found.names(custom_labels.CLUSTER_QUEUE) == tuple(f"custom_{e['name']}" for e in entries)


def test_weighted_share_nan_for_weight_zero_while_borrowing() -> None:
    """cache/clusterqueue.go, reportWeightedShare: an infinite share (weight 0, borrowing) is reported NaN."""
    log = Log()
    log.observe(*(upsert(x, T0) for x in (
        namespace(NS), flavor("f0"),
        o.ClusterQueue(metadata=o.ObjectMeta(name="cq0"), spec=o.ClusterQueueSpec(
            cohort_name="co", namespace_selector=o.LabelSelector(), fair_sharing=o.FairSharing(weight="0"),
            resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[o.FlavorQuotas(
                name="f0", resources=[o.ResourceQuota(name="cpu", nominal_quota="1")])])])),
        multi_flavor_cq("lender", {"f0": ("cpu",)}),
        local_queue(NS, "lq0", "cq0"), workload(NS, "w1", queue="lq0", cpu="3", created=T0))))
    configure(log, T0, metrics=RESOURCE_METRICS, fairSharing={})
    log.observe(ev.QuotaReserved(time=T0 + 1000, cycle=1, input=len(log.records) - 1, key="ns/w1",
                                 admission=admission("cq0", "f0", 3000)))
    assert math.isnan(sample(log.state, "kueue_cluster_queue_weighted_share", cluster_queue="cq0",
                             cohort="co"))



def test_admission_checks_wait_time_of_a_workload_whose_checks_were_removed() -> None:
    """core/workload_controller.go, Reconcile: a workload holding quota that its controller admits (Admitted
    set by ``SyncAdmittedCondition``, not by the scheduler's admission) has
    ``admission_checks_wait_time_seconds`` observed from its QuotaReserved transition, whatever checks it
    lists then — e.g. none, once its ClusterQueue stopped listing the check it waited for (only the
    scheduler's one-step admission observes it only for a workload with checks:
    ``recordWorkloadAdmissionEvents``, ``len(AdmissionChecks) > 0``)."""
    log = Log()
    cluster(log)
    rules = o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name="prov")])

    def cq_c(strategy: o.AdmissionChecksStrategy | None) -> o.ClusterQueue:
        return o.ClusterQueue(metadata=o.ObjectMeta(name="cq-c"), spec=o.ClusterQueueSpec(
            namespace_selector=o.LabelSelector(), admission_checks_strategy=strategy,
            resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[o.FlavorQuotas(
                name="f0", resources=[o.ResourceQuota(name="cpu", nominal_quota="4")])])]))

    log.observe(upsert(o.AdmissionCheck(metadata=o.ObjectMeta(name="prov"),
                                        spec=o.AdmissionCheckSpec(controller_name="example.com/prov")), T0),
                upsert(cq_c(rules), T0), upsert(local_queue(NS, "lq-c", "cq-c"), T0),
                upsert(workload(NS, "w4", queue="lq-c", created=T0), T0))
    log.decide(T0 + 4000, reserve("ns/w4", "cq-c"))
    log.observe(upsert(cq_c(None), T0 + 8000))  # the check is no longer listed: nothing left to wait for
    assert log.state.workloads["ns/w4"].check_states == {}
    log.decide(T0 + 10_000, admit("ns/w4"))
    _, total = histogram(log.state, "kueue_admission_checks_wait_time_seconds", cluster_queue="cq-c",
                         priority_class="")
    assert total == 6.0
    _, total = histogram(log.state, "kueue_local_queue_admission_checks_wait_time_seconds", name="lq-c",
                         namespace=NS, priority_class="")
    assert total == 6.0


def test_admission_checks_wait_time_of_a_second_pass_admission_is_zero() -> None:
    """scheduler/scheduler.go, recordWorkloadAdmissionEvents: the scheduler's admission — a delayed topology
    request placed by the second pass once its checks are Ready included — observes
    ``admission_checks_wait_time_seconds`` as 0 for a workload with checks
    (``ReportAdmissionChecksWaitTime(..., 0, ...)``), however long it held its quota;
    ``admission_wait_time_seconds`` runs from its queued time."""
    log = Log()
    cluster(log)
    rules = o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name="prov")])
    log.observe(upsert(o.AdmissionCheck(metadata=o.ObjectMeta(name="prov"),
                                        spec=o.AdmissionCheckSpec(controller_name="example.com/prov")), T0),
                upsert(o.ClusterQueue(metadata=o.ObjectMeta(name="cq-c"), spec=o.ClusterQueueSpec(
                    namespace_selector=o.LabelSelector(), admission_checks_strategy=rules,
                    resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[o.FlavorQuotas(
                        name="f0", resources=[o.ResourceQuota(name="cpu", nominal_quota="4")])])])), T0),
                upsert(local_queue(NS, "lq-c", "cq-c"), T0),
                upsert(workload(NS, "w4", queue="lq-c", created=T0), T0))
    delayed = o.Admission(cluster_queue="cq-c", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "1000m"}, count=1,
        delayed_topology_request="Pending")])
    log.decide(T0 + 4000, (ev.QuotaReserved, {"key": "ns/w4", "admission": delayed}))
    log.observe(ev.AdmissionCheckStateChanged(time=T0 + 9000, key="ns/w4", check="prov", state="Ready"))
    placed = o.TopologyAssignment(levels=["kubernetes.io/hostname"], slices=[])
    log.decide(T0 + 10_000, (ev.TopologyAssigned, {"key": "ns/w4", "pod_set": "main", "assignment": placed}),
               admit("ns/w4"))
    assert log.state.workloads["ns/w4"].phase == "Admitted"
    buckets, total = histogram(log.state, "kueue_admission_checks_wait_time_seconds", cluster_queue="cq-c",
                               priority_class="")
    assert (buckets["1.0"], total) == (1, 0.0)
    _, total = histogram(log.state, "kueue_local_queue_admission_checks_wait_time_seconds", name="lq-c",
                         namespace=NS, priority_class="")
    assert total == 0.0
    _, total = histogram(log.state, "kueue_admission_wait_time_seconds", cluster_queue="cq-c",
                         priority_class="")
    assert total == 10.0


def test_evicted_help_names_the_pods_ready_timeout_causes() -> None:
    """metrics.go, EvictedWorkloadsOnceTotal's help: a PodsReadyTimeout eviction's underlying cause is
    WaitForStart or WaitForRecovery (``admittedNotReadyWorkload`` passes it to ``workload.Evict``, which
    reports it on evicted_workloads_total and its twins too); the help of the series that carry it says so."""
    from projections.metrics import EVICTED, EVICTED_ONCE, LQ_EVICTED, PODS_READY_TO_EVICTED

    for spec in (EVICTED, EVICTED_ONCE, LQ_EVICTED, PODS_READY_TO_EVICTED):
        help_text = spec.help + (EVICTED.help if "evicted_workloads_total" in spec.help else "")
        assert "WaitForStart" in help_text and "WaitForRecovery" in help_text, spec.name
