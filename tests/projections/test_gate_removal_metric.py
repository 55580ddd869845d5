"""Kueue's ``kueue_pod_scheduling_gate_removal_seconds``: folded from the connectors' record of each Pod whose
scheduling gate their patch removed (``SchedulingGateRemoved``), timed from the Workload's Admitted transition
as the fold knows it, clamped at 0, under the gate, the admitting ClusterQueue and whether the Pod is a
group's."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, upsert
from test_proj_metrics import (
    Log,
    _restores_at_every_cut,
    admit,
    cluster,
    cluster_queue,
    histogram,
    reserve,
    series,
)

from events import objects as o
from events import schema as ev
from events.codec import decode_event, encode_event, from_json, to_json
from kueue_es.metrics import text as metrics_text
from projections.metrics import DEFAULT_BUCKETS, families

NAME = "kueue_pod_scheduling_gate_removal_seconds"
ADMISSION, TOPOLOGY, ELASTIC = ("kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology",
                                "kueue.x-k8s.io/elastic-job")


def removed(time: int, gate: str, workload: str = "ns/w1", *, group: bool = False, pod: str = "ns/p",
            workload_uid: str = "") -> ev.SchedulingGateRemoved:
    return ev.SchedulingGateRemoved(time=time, key=pod, uid="u-p", gate=gate, workload=workload,
                                    workload_uid=workload_uid, is_group=group)


def admitted_w1(log: Log, at: int = T0 + 3000) -> None:
    """w1 admitted in cq-a at ``at`` (its Admitted condition's lastTransitionTime, whole seconds)."""
    cluster(log)
    log.decide(at, reserve("ns/w1", "cq-a"), admit("ns/w1"))


def test_the_latency_from_the_admitted_transition_per_gate_and_group() -> None:
    log = Log()
    admitted_w1(log)
    log.observe(removed(T0 + 3000 + 1500, ADMISSION), removed(T0 + 3000 + 7000, ADMISSION, pod="ns/q"),
                removed(T0 + 3000 + 40, TOPOLOGY, group=True), removed(T0 + 3000 + 200, ELASTIC))
    buckets, total = histogram(log.state, NAME, name=ADMISSION, cluster_queue="cq-a", is_group="false")
    assert list(buckets) == [*map(repr, DEFAULT_BUCKETS), "+Inf"]
    assert (buckets["1.0"], buckets["2.5"], buckets["5.0"], buckets["10.0"], buckets["+Inf"], total) == (
        0, 1, 1, 2, 2, 8.5)
    buckets, total = histogram(log.state, NAME, name=TOPOLOGY, cluster_queue="cq-a", is_group="true")
    assert (buckets["0.025"], buckets["0.05"], total) == (0, 1, 0.04)
    assert set(series(log.state, NAME)) == {
        (ADMISSION, "cq-a", "false"), (TOPOLOGY, "cq-a", "true"), (ELASTIC, "cq-a", "false")}
    _restores_at_every_cut(log.records, log.state)


def test_a_removal_before_the_admitted_transition_is_observed_as_zero() -> None:
    """The connector's clock behind the transition Kueue's manager wrote (a skew, a failover): clamped at 0,
    as Kueue's #14474 does."""
    log = Log()
    admitted_w1(log)
    log.observe(removed(T0 + 3000 - 2500, ADMISSION))
    buckets, total = histogram(log.state, NAME, name=ADMISSION, cluster_queue="cq-a", is_group="false")
    assert (buckets["0.005"], total) == (1, 0.0)


def test_nothing_is_observed_for_a_workload_not_admitted_or_not_the_one_named() -> None:
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w1", "cq-a"))  # quota reserved, not admitted
    log.observe(removed(T0 + 2000, ADMISSION), removed(T0 + 2000, ADMISSION, workload="ns/nope"))
    log.decide(T0 + 3000, admit("ns/w1"))
    log.observe(removed(T0 + 4000, ADMISSION, workload_uid="another-uid"))
    assert series(log.state, NAME) == {}
    log.observe(removed(T0 + 4000, ADMISSION, workload_uid=log.state.workloads["ns/w1"].uid))
    assert set(series(log.state, NAME)) == {(ADMISSION, "cq-a", "false")}


def test_the_series_outlive_their_cluster_queue_and_carry_its_custom_labels() -> None:
    """No stored Kueue source clears this histogram with a ClusterQueue's metrics; its custom labels follow
    the metric's own (``name``, ``cluster_queue``, ``is_group``), as on every metric keyed by a
    ClusterQueue."""
    log = Log()
    admitted_w1(log)
    log.observe(ev.ConfigRecorded(time=T0 + 3100, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"CustomMetricLabels": True}, "metrics": {"customLabels": [{"name": "team"}]}}))
    labelled = cluster_queue("cq-a", "co", cpu="4", memory="8Gi", borrowing="2", lending="1Gi")
    labelled = msgspec.structs.replace(labelled, metadata=o.ObjectMeta(name="cq-a", labels={"team": "ml"}))
    log.observe(upsert(labelled, T0 + 3200), removed(T0 + 4000, ADMISSION))
    family = next(f for f in families(log.state) if f.spec.name == NAME)
    assert family.spec.labels == ("name", "cluster_queue", "is_group", "custom_team")
    assert [s[0] for s in family.samples] == [(ADMISSION, "cq-a", "false", "ml")]
    log.observe(ev.ObjectDeleted(time=T0 + 5000, key="cq-a", kind="ClusterQueue"))
    assert set(series(log.state, NAME)) == {(ADMISSION, "cq-a", "false", "")}
    _restores_at_every_cut(log.records, log.state)


def test_exposed_with_the_client_default_buckets_and_replica_role() -> None:
    log = Log()
    admitted_w1(log)
    log.observe(removed(T0 + 4000, ELASTIC))
    text = metrics_text([log.state])
    assert "# TYPE kueue_pod_scheduling_gate_removal_seconds histogram" in text
    assert ('kueue_pod_scheduling_gate_removal_seconds_bucket{cluster_queue="cq-a",is_group="false",le="0.5",'
            'name="kueue.x-k8s.io/elastic-job",replica_role="standalone"} 0.0') in text
    assert ('kueue_pod_scheduling_gate_removal_seconds_bucket{cluster_queue="cq-a",is_group="false",le="1",'
            'name="kueue.x-k8s.io/elastic-job",replica_role="standalone"} 1.0') in text


def test_the_record_round_trips_through_both_codecs_and_defaults_its_fields() -> None:
    e = removed(T0, TOPOLOGY, group=True, workload_uid="u-w")
    assert decode_event(encode_event(e), 0) == e
    assert from_json(to_json(e)) == e
    assert b'"isGroup":true' in to_json(e) and b'"workloadUid":"u-w"' in to_json(e)
    bare = from_json(b'{"type":"SchedulingGateRemoved","time":5}')
    assert bare == ev.SchedulingGateRemoved(time=5)
    assert (bare.gate, bare.workload, bare.workload_uid, bare.is_group) == ("", "", "", False)
