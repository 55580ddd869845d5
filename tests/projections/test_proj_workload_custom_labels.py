"""Kueue's ``sourceKind: Workload`` custom metric labels (``CustomMetricLabels``): the gauges that count workloads
(``pending_workloads``, ``local_queue_pending_workloads``, ``admitted_active_workloads``) are split by the values
of the counted workloads (a label, or an annotation), a series per value set with workloads, the workload labels
after the queue's; values outside ``trackedValues``, or missing, are reported untracked."""

from __future__ import annotations

from typing import Any

import msgspec
from fixtures.eventgen import T0, fold, upsert, workload
from test_proj_custom_labels import labelled_cluster, labels_of, relabelled
from test_proj_metrics import Log, _restores_at_every_cut, admit, reserve, series

from events import schema as ev
from kueue_es.metrics import text as metrics_text
from projections import snapshot
from projections.custom_labels import UNTRACKED
from projections.metrics import families

LABELS: list[dict[str, Any]] = [
    {"name": "team"},
    {"name": "kind", "sourceKind": "Workload", "sourceLabelKey": "workload-kind", "trackedValues": ["k1", "k2"]},
    {"name": "env", "sourceKind": "LocalQueue", "sourceLabelKey": "example.com/env"},
    {"name": "tier", "sourceKind": "Workload", "sourceAnnotationKey": "example.com/tier", "trackedValues": ["gold"]},
]


def configure(log: Log, time: int, gate: bool = True, labels: list[dict[str, Any]] | None = None) -> None:
    log.observe(ev.ConfigRecorded(time=time, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"CustomMetricLabels": gate, "LocalQueueMetrics": True},
        "metrics": {"customLabels": LABELS if labels is None else labels}}))


def labelled_workloads(log: Log, time: int = T0 + 500) -> None:
    """w1 (lq-a, cq-a): kind k1, tier gold; w2 (lq-b, cq-b): k1, no tier; w3 (lq-b): k3, not tracked."""
    log.observe(
        upsert(relabelled(workload("ns", "w1", queue="lq-a", priority_class="high", created=T0),
                          {"workload-kind": "k1"}, {"example.com/tier": "gold", "other": "x"}), time),
        upsert(relabelled(workload("ns", "w2", queue="lq-b", created=T0), {"workload-kind": "k1"}), time),
        upsert(relabelled(workload("ns", "w3", queue="lq-b", created=T0), {"workload-kind": "k3"}), time))


def scenario() -> Log:
    log = Log()
    configure(log, T0)
    labelled_cluster(log)
    labelled_workloads(log)
    return log


def test_pending_workloads_are_split_by_the_workloads_values() -> None:
    s = scenario().state
    pending = next(f for f in families(s) if f.spec.name == "kueue_pending_workloads")
    assert pending.spec.labels == ("cluster_queue", "status", "custom_team", "custom_kind", "custom_tier")
    assert series(s, "kueue_pending_workloads") == {
        ("cq-a", "active", "ml", "k1", "gold"): 1,
        ("cq-b", "active", "infra", "k1", UNTRACKED): 1,
        ("cq-b", "active", "infra", UNTRACKED, UNTRACKED): 1}
    lq = next(f for f in families(s) if f.spec.name == "kueue_local_queue_pending_workloads")
    assert lq.spec.labels == ("name", "namespace", "status", "custom_env", "custom_kind", "custom_tier")
    assert series(s, "kueue_local_queue_pending_workloads") == {
        ("lq-a", "ns", "active", "prod", "k1", "gold"): 1,
        ("lq-b", "ns", "active", "", "k1", UNTRACKED): 1,
        ("lq-b", "ns", "active", "", UNTRACKED, UNTRACKED): 1}
    # the other gauges keep their queue's labels only
    assert series(s, "kueue_reserving_active_workloads") == {("cq-a", "ml"): 0, ("cq-b", "infra"): 0}


def test_admitted_active_workloads_are_split_and_follow_a_workloads_new_values() -> None:
    log = scenario()
    s = log.state
    log.decide(T0 + 2000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"))
    assert series(s, "kueue_admitted_active_workloads") == {
        ("cq-a", "ml", "k1", "gold"): 1, ("cq-b", "infra", "k1", UNTRACKED): 1}
    assert series(s, "kueue_pending_workloads") == {("cq-b", "active", "infra", UNTRACKED, UNTRACKED): 1}
    # w2 relabelled k2 and annotated gold, w3 k1: each counted under its new values, the old value sets gone
    log.observe(
        upsert(relabelled(workload("ns", "w2", queue="lq-b", created=T0), {"workload-kind": "k2"},
                          {"example.com/tier": "gold"}), T0 + 3000),
        upsert(relabelled(workload("ns", "w3", queue="lq-b", created=T0), {"workload-kind": "k1"}), T0 + 3000))
    assert series(s, "kueue_pending_workloads") == {("cq-b", "active", "infra", "k1", UNTRACKED): 1}
    assert series(s, "kueue_admitted_active_workloads") == {
        ("cq-a", "ml", "k1", "gold"): 1, ("cq-b", "infra", "k2", "gold"): 1}
    # the annotation dropped: untracked again
    log.observe(upsert(relabelled(workload("ns", "w2", queue="lq-b", created=T0), {"workload-kind": "k2"}),
                       T0 + 4000))
    assert series(s, "kueue_admitted_active_workloads")[("cq-b", "infra", "k2", UNTRACKED)] == 1
    log.observe(ev.WorkloadFinished(time=T0 + 5000, key="ns/w1"))
    assert series(s, "kueue_admitted_active_workloads") == {("cq-b", "infra", "k2", UNTRACKED): 1}
    _restores_at_every_cut(log.records, fold(log.records))


def test_the_exposition_text_carries_the_workload_labels() -> None:
    lines = {line for line in metrics_text([scenario().state]).splitlines() if "pending_workloads{" in line}
    assert lines == {
        'kueue_pending_workloads{cluster_queue="cq-a",custom_kind="k1",custom_team="ml",custom_tier="gold",'
        'replica_role="standalone",status="active"} 1.0',
        'kueue_pending_workloads{cluster_queue="cq-b",custom_kind="k1",custom_team="infra",'
        f'custom_tier="{UNTRACKED}",replica_role="standalone",status="active"}} 1.0',
        f'kueue_pending_workloads{{cluster_queue="cq-b",custom_kind="{UNTRACKED}",custom_team="infra",'
        f'custom_tier="{UNTRACKED}",replica_role="standalone",status="active"}} 1.0',
        'kueue_local_queue_pending_workloads{custom_env="prod",custom_kind="k1",custom_tier="gold",name="lq-a",'
        'namespace="ns",replica_role="standalone",status="active"} 1.0',
        f'kueue_local_queue_pending_workloads{{custom_env="",custom_kind="k1",custom_tier="{UNTRACKED}",'
        'name="lq-b",namespace="ns",replica_role="standalone",status="active"} 1.0',
        f'kueue_local_queue_pending_workloads{{custom_env="",custom_kind="{UNTRACKED}",custom_tier="{UNTRACKED}",'
        'name="lq-b",namespace="ns",replica_role="standalone",status="active"} 1.0'}


def test_an_inactive_cluster_queue_counts_its_workloads_inadmissible_by_their_values() -> None:
    log = scenario()
    s = log.state
    log.observe(upsert(relabelled(workload("ns", "w9", queue="lq-a", created=T0), {"workload-kind": "k2"}),
                       T0 + 600))
    cq_a = s.cluster_queues["cq-a"]
    stopped = msgspec.structs.replace(cq_a, spec=msgspec.structs.replace(cq_a.spec, stop_policy="Hold"))
    log.observe(upsert(stopped, T0 + 700))
    assert {k: v for k, v in series(s, "kueue_pending_workloads").items() if k[0] == "cq-a"} == {
        ("cq-a", "inadmissible", "ml", "k1", "gold"): 1, ("cq-a", "inadmissible", "ml", "k2", UNTRACKED): 1}
    _restores_at_every_cut(log.records, fold(log.records))


def test_the_gate_off_or_no_workload_entries_leave_the_gauges_whole() -> None:
    for gate, labels in ((False, None), (True, [e for e in LABELS if e.get("sourceKind") != "Workload"])):
        log = Log()
        configure(log, T0, gate=gate, labels=labels)
        labelled_cluster(log)
        labelled_workloads(log)
        s = log.state
        assert not any("custom_kind" in f.spec.labels for f in families(s))
        pending = series(s, "kueue_pending_workloads")
        assert {k[:2]: v for k, v in pending.items()} == {
            ("cq-a", "active"): 1, ("cq-a", "inadmissible"): 0, ("cq-b", "active"): 2, ("cq-b", "inadmissible"): 0}
        # no annotation kept: nothing per workload, and the snapshot is the same as without the entries
        assert all(wl.metric_annotations == () for wl in s.workloads.values())
    # the gate on: w1's "other" annotation is not kept, its tier is
    s = scenario().state
    assert s.workloads["ns/w1"].metric_annotations == (("example.com/tier", "gold"),)
    assert snapshot.digest(s) == snapshot.digest(fold(scenario().records))


def test_snapshots_at_every_cut_equal_a_full_fold() -> None:
    log = scenario()
    log.decide(T0 + 2000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    log.observe(upsert(relabelled(workload("ns", "w1", queue="lq-a", priority_class="high", created=T0),
                                  {"workload-kind": "k2"}, {"example.com/tier": "silver"}), T0 + 3000))
    assert series(log.state, "kueue_admitted_active_workloads") == {("cq-a", "ml", "k2", UNTRACKED): 1}
    _restores_at_every_cut(log.records, fold(log.records))


def test_local_queue_admitted_metrics_are_split_by_the_workloads_values() -> None:
    """Kueue v0.20 (#13635): ``local_queue_admitted_active_workloads`` counts the admitted workloads by their
    values, and ``local_queue_admitted_workloads_total`` / ``local_queue_admission_wait_time_seconds`` count each
    admission under the values the workload had when admitted; the admission checks' wait keeps the queue's."""
    log = scenario()
    s = log.state
    log.decide(T0 + 2000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"))
    assert labels_of(s, "kueue_local_queue_admitted_active_workloads") == (
        "name", "namespace", "custom_env", "custom_kind", "custom_tier")
    assert series(s, "kueue_local_queue_admitted_active_workloads") == {
        ("lq-a", "ns", "prod", "k1", "gold"): 1, ("lq-b", "ns", "", "k1", UNTRACKED): 1}
    assert labels_of(s, "kueue_local_queue_admitted_workloads_total") == (
        "name", "namespace", "priority_class", "custom_env", "custom_kind", "custom_tier")
    admitted = {("lq-a", "ns", "high", "prod", "k1", "gold"): 1, ("lq-b", "ns", "", "", "k1", UNTRACKED): 1}
    assert series(s, "kueue_local_queue_admitted_workloads_total") == admitted
    assert {k: v[0][-1] for k, v in series(s, "kueue_local_queue_admission_wait_time_seconds").items()} == admitted
    assert labels_of(s, "kueue_local_queue_admission_checks_wait_time_seconds")[3:] == ("custom_env",)
    # a later relabelling moves the gauge, not what was counted at admission
    log.observe(upsert(relabelled(workload("ns", "w2", queue="lq-b", created=T0), {"workload-kind": "k2"}),
                       T0 + 3000))
    assert series(s, "kueue_local_queue_admitted_active_workloads")[("lq-b", "ns", "", "k2", UNTRACKED)] == 1
    assert series(s, "kueue_local_queue_admitted_workloads_total") == admitted
    _restores_at_every_cut(log.records, fold(log.records))


def test_local_queue_admissions_counted_under_other_workload_entries_are_not_shown() -> None:
    """Counts folded before the Workload entries were configured (or under other ones) have no, or other, values:
    they are left out, as Kueue restarted by the new Configuration would count from zero."""
    log = Log()
    configure(log, T0, labels=[e for e in LABELS if e.get("sourceKind") != "Workload"])
    labelled_cluster(log)
    labelled_workloads(log)
    log.decide(T0 + 2000, reserve("ns/w1", "cq-a"), admit("ns/w1"))
    assert series(log.state, "kueue_local_queue_admitted_workloads_total") == {("lq-a", "ns", "high", "prod"): 1}
    configure(log, T0 + 2500)
    assert series(log.state, "kueue_local_queue_admitted_workloads_total") == {}
    log.decide(T0 + 3000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    assert series(log.state, "kueue_local_queue_admitted_workloads_total") == {
        ("lq-b", "ns", "", "", "k1", UNTRACKED): 1}
    assert "\nkueue_local_queue_admitted_workloads_total{" in metrics_text([log.state])
