"""Kueue's custom metric labels (``metrics.customLabels`` under the ``CustomMetricLabels`` gate, alpha, off): the
metrics keyed by a ClusterQueue, LocalQueue or Cohort carry the labels of that kind, with the values of that
object; an update that changes an object's values clears its series, as Kueue's does; the Configuration's entries
are checked whatever the gate."""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
import msgspec
import pytest
from fixtures.eventgen import T0, cohort, fold, local_queue, upsert
from test_proj_metrics import Log, _restores_at_every_cut, admit, cluster, cluster_queue, reserve, series

from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.metrics import registry, start_server
from kueue_es.metrics import text as metrics_text
from kueue_es.scheduler.config import load_config
from projections.custom_labels import UNTRACKED
from projections.metrics import SPLIT_BY_WORKLOAD, families, merged

LABELS: list[dict[str, Any]] = [
    {"name": "team"},  # a ClusterQueue's label "team"
    {"name": "cost", "sourceAnnotationKey": "billing/cost", "trackedValues": ["c1", "c2"]},
    {"name": "env", "sourceKind": "LocalQueue", "sourceLabelKey": "example.com/env"},
    {"name": "org", "sourceKind": "Cohort"},
    {"name": "kind", "sourceKind": "Workload", "trackedValues": ["batch"]},  # splits the workload-counting gauges
]


def configure(log: Log, time: int, gate: bool | None = True, labels: list[dict[str, Any]] | None = None) -> None:
    gates = {} if gate is None else {"CustomMetricLabels": gate}
    log.observe(ev.ConfigRecorded(time=time, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates,
        "metrics": {"customLabels": LABELS if labels is None else labels}}))


def relabelled(obj: o.KObject, labels: dict[str, str] | None = None,
               annotations: dict[str, str] | None = None) -> o.KObject:
    meta = msgspec.structs.replace(obj.metadata, labels=labels or {}, annotations=annotations or {})
    return msgspec.structs.replace(obj, metadata=meta)


def labelled_cluster(log: Log, time: int = T0) -> None:
    """The metrics tests' cluster (cq-a and cq-b in cohort "co" under the implicit "root"; lq-a, lq-b; w1 (high)
    to w3), its objects labelled: cq-b's cost is not a tracked value, lq-b and "root" have no labels."""
    cluster(log)
    log.observe(*(upsert(x, time) for x in (
        relabelled(cluster_queue("cq-a", "co", cpu="4", memory="8Gi"), {"team": "ml"}, {"billing/cost": "c1"}),
        relabelled(cluster_queue("cq-b", "co", cpu="2"), {"team": "infra"}, {"billing/cost": "zzz"}),
        relabelled(local_queue("ns", "lq-a", "cq-a"), {"example.com/env": "prod"}),
        relabelled(cohort("co", parent="root"), {"org": "acme"}))))


def admissions(log: Log) -> None:
    """w1 admitted in cq-a, w2 in cq-b; w1 preempted by w3 (of cq-b); w3 finished without quota."""
    log.decide(T0 + 2000, reserve("ns/w1", "cq-a"), admit("ns/w1"), reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 3000, (ev.WorkloadPreempted, {"key": "ns/w1", "reason": "InCohortReclamation",
                                                  "message": "preempted", "preemptor": "ns/w3"}))
    log.observe(ev.WorkloadFinished(time=T0 + 4000, key="ns/w3"))


def labels_of(state: Any, name: str) -> tuple[str, ...]:
    return next(f.spec.labels for f in families(state) if f.spec.name == name)


def test_the_metrics_carry_the_labels_of_the_object_they_are_keyed_by() -> None:
    log = Log()
    configure(log, T0)
    labelled_cluster(log)
    admissions(log)
    s = log.state
    assert labels_of(s, "kueue_quota_reserved_workloads_total") == (
        "cluster_queue", "priority_class", "custom_team", "custom_cost")
    assert series(s, "kueue_quota_reserved_workloads_total") == {
        ("cq-a", "high", "ml", "c1"): 1, ("cq-b", "", "infra", UNTRACKED): 1}
    assert set(series(s, "kueue_admission_wait_time_seconds")) == {
        ("cq-a", "high", "ml", "c1"), ("cq-b", "", "infra", UNTRACKED)}
    # the preempting ClusterQueue's values; a workload that finished without quota: no ClusterQueue, values ""
    assert series(s, "kueue_preempted_workloads_total") == {("cq-b", "InCohortReclamation", "infra", UNTRACKED): 1}
    assert series(s, "kueue_finished_workloads_total") == {("", "", "", ""): 1}
    assert series(s, "kueue_pending_scheduling_hashes")[("cq-a", "active", "ml", "c1")] == 0
    assert series(s, "kueue_cluster_queue_status")[("cq-b", "active", "infra", UNTRACKED)] == 1
    # LocalQueue metrics: the LocalQueue kind's labels (its admissions also the admitted workload's, Kueue v0.20)
    assert labels_of(s, "kueue_local_queue_admitted_workloads_total") == (
        "name", "namespace", "priority_class", "custom_env", "custom_kind")
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {
        ("lq-a", "ns", "high", "prod", UNTRACKED): 1, ("lq-b", "ns", "", "", UNTRACKED): 1}
    assert labels_of(s, "kueue_local_queue_quota_reserved_workloads_total")[3:] == ("custom_env",)
    # Cohort metrics: the Cohort kind's; "root" has no Cohort object
    assert series(s, "kueue_cohort_subtree_admitted_workloads_total") == {
        ("co", "", "acme"): 1, ("co", "high", "acme"): 1, ("root", "", ""): 1, ("root", "high", ""): 1}
    assert set(series(s, "kueue_cohort_info")) == {("co", "root", "root", "", "acme"), ("root", "", "root", "", "")}
    # keyed by no object; and the Workload kind only on the gauges that count workloads
    assert labels_of(s, "kueue_admission_attempts_total") == ("result",)
    assert {f.spec.name for f in families(s) if "custom_kind" in f.spec.labels} == set(SPLIT_BY_WORKLOAD)
    _restores_at_every_cut(log.records, fold(log.records))


def test_the_gate_off_leaves_the_labels_out() -> None:
    for gate in (None, False):
        log = Log()
        configure(log, T0, gate=gate)
        labelled_cluster(log)
        admissions(log)
        s = log.state
        assert not any(label.startswith("custom_") for f in families(s) for label in f.spec.labels)
        assert series(s, "kueue_quota_reserved_workloads_total") == {("cq-a", "high"): 1, ("cq-b", ""): 1}
        assert "custom_" not in metrics_text([s])
        configure(log, T0 + 5000)  # a configuration turning it on: the counts carry on, labelled
        assert series(s, "kueue_quota_reserved_workloads_total") == {
            ("cq-a", "high", "ml", "c1"): 1, ("cq-b", "", "infra", UNTRACKED): 1}
        assert "custom_team=" in metrics_text([s])
    # the gate on with no entries: nothing either
    log = Log()
    configure(log, T0, labels=[])
    labelled_cluster(log)
    assert not any(label.startswith("custom_") for f in families(log.state) for label in f.spec.labels)


def test_a_change_of_an_objects_values_clears_its_series() -> None:
    log = Log()
    configure(log, T0)
    labelled_cluster(log)
    admissions(log)
    s = log.state
    # a label no entry reads: nothing changes
    log.observe(upsert(relabelled(cluster_queue("cq-b", "co", cpu="2"), {"team": "infra", "x": "y"},
                                  {"billing/cost": "zzz"}), T0 + 5000))
    assert series(s, "kueue_preempted_workloads_total") == {("cq-b", "InCohortReclamation", "infra", UNTRACKED): 1}
    # another untracked value is the same value
    log.observe(upsert(relabelled(cluster_queue("cq-b", "co", cpu="2"), {"team": "infra"},
                                  {"billing/cost": "other"}), T0 + 5500))
    assert ("cq-b", "", "infra", UNTRACKED) in series(s, "kueue_quota_reserved_workloads_total")
    log.observe(upsert(relabelled(cluster_queue("cq-a", "co", cpu="4", memory="8Gi"), {"team": "research"},
                                  {"billing/cost": "c1"}), T0 + 6000))
    assert series(s, "kueue_quota_reserved_workloads_total") == {("cq-b", "", "infra", UNTRACKED): 1}
    assert set(series(s, "kueue_evicted_workloads_total")) == set()  # cq-a's eviction went with it
    assert series(s, "kueue_preempted_workloads_total") == {("cq-b", "InCohortReclamation", "infra", UNTRACKED): 1}
    assert ("cq-a", "active", "research", "c1") in series(s, "kueue_pending_scheduling_hashes")  # gauges: as they are
    log.decide(T0 + 6500, (ev.WorkloadRequeued, {"key": "ns/w1", "status": True, "reason": "Preempted",
                                                 "release": True}))
    log.decide(T0 + 7000, reserve("ns/w1", "cq-a"))
    assert series(s, "kueue_quota_reserved_workloads_total")[("cq-a", "high", "research", "c1")] == 1
    # a LocalQueue's and a Cohort's
    log.observe(upsert(relabelled(local_queue("ns", "lq-a", "cq-a"), {"example.com/env": "dev"}), T0 + 8000))
    assert series(s, "kueue_local_queue_admitted_workloads_total") == {("lq-b", "ns", "", "", UNTRACKED): 1}
    log.observe(upsert(relabelled(cohort("co", parent="root"), {"org": "other"}), T0 + 9000))
    assert series(s, "kueue_cohort_subtree_admitted_workloads_total") == {
        ("root", "", ""): 1, ("root", "high", ""): 1}
    _restores_at_every_cut(log.records, fold(log.records))


def test_without_the_gate_a_change_of_labels_clears_nothing() -> None:
    log = Log()
    configure(log, T0, gate=False)
    labelled_cluster(log)
    admissions(log)
    log.observe(upsert(relabelled(cluster_queue("cq-a", "co", cpu="4", memory="8Gi"), {"team": "research"}),
                       T0 + 6000))
    assert series(log.state, "kueue_quota_reserved_workloads_total") == {("cq-a", "high"): 1, ("cq-b", ""): 1}
    configure(log, T0 + 7000)  # on: the values it finds are the ones now; a change of them clears
    assert series(log.state, "kueue_quota_reserved_workloads_total") == {
        ("cq-a", "high", "research", UNTRACKED): 1, ("cq-b", "", "infra", UNTRACKED): 1}  # no cost: untracked ""
    log.observe(upsert(relabelled(cluster_queue("cq-a", "co", cpu="4", memory="8Gi"), {"team": "ml"}), T0 + 8000))
    assert series(log.state, "kueue_quota_reserved_workloads_total") == {("cq-b", "", "infra", UNTRACKED): 1}


def test_the_exposition_carries_the_labels() -> None:
    log = Log()
    configure(log, T0)
    labelled_cluster(log)
    admissions(log)
    text = metrics_text([log.state])  # labels in name order, as the Prometheus clients write them
    assert ('kueue_quota_reserved_workloads_total{cluster_queue="cq-a",custom_cost="c1",custom_team="ml",'
            'priority_class="high",replica_role="standalone"} 1.0') in text
    assert ('kueue_local_queue_admitted_workloads_total{custom_env="prod",custom_kind="' + UNTRACKED +
            '",name="lq-a",namespace="ns",priority_class="high",replica_role="standalone"} 1.0') in text
    assert ('kueue_admission_wait_time_seconds_bucket{cluster_queue="cq-b",custom_cost="' + UNTRACKED +
            '",custom_team="infra",le="2.5",priority_class="",replica_role="standalone"} 1.0') in text
    assert 'kueue_admission_attempts_total{replica_role="standalone",result="success"} 1.0' in text
    twice = {f.spec.name: f for f in merged([families(log.state), families(log.state)])}
    assert twice["kueue_quota_reserved_workloads_total"].samples == [
        (("cq-a", "high", "ml", "c1"), 2.0), (("cq-b", "", "infra", UNTRACKED), 2.0)]
    assert twice["kueue_quota_reserved_workloads_total"].spec.labels[-2:] == ("custom_team", "custom_cost")


async def scrape(log: Log) -> str:
    """``/metrics`` as a replica that decides serves it over HTTP."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reg = registry(lambda: [log.state], lambda: "leader", process=False, attempts=None)
    runner = await start_server(reg, "127.0.0.1", port)
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as resp:
            return await resp.text()
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_the_served_metrics_carry_the_labels_while_the_gate_is_on() -> None:
    log = Log()
    configure(log, T0)
    labelled_cluster(log)
    admissions(log)
    served = await scrape(log)
    assert ('kueue_cohort_subtree_admitted_workloads_total{cohort="co",custom_org="acme",priority_class="high",'
            'replica_role="leader"} 1.0') in served
    assert ('kueue_preempted_workloads_total{custom_cost="' + UNTRACKED + '",custom_team="infra",'
            'preempting_cluster_queue="cq-b",reason="InCohortReclamation",replica_role="leader"} 1.0') in served
    configure(log, T0 + 5000, gate=False)
    served = await scrape(log)
    assert "custom_" not in served
    assert ('kueue_preempted_workloads_total{preempting_cluster_queue="cq-b",reason="InCohortReclamation",'
            'replica_role="leader"} 1.0') in served


# --- the Configuration's checks (Kueue's, whatever the gate) -----------------------------------------------


def load(*entries: dict[str, Any]) -> Any:
    return load_config({"metrics": {"customLabels": list(entries)}}, "cfg.yaml")


def test_valid_entries_load() -> None:
    cfg = load(*LABELS, {"name": "a_b", "sourceLabelKey": "example.com/a-b"})
    assert [e.name for e in cfg.metrics.custom_labels] == ["team", "cost", "env", "org", "kind", "a_b"]


KEY_NAME_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                 "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(("entries", "field", "message"), [
    ([{"name": "9lives"}], "metrics.customLabels[0].name",
     'Invalid value: "9lives": must match ^[a-zA-Z][a-zA-Z0-9_]*$'),
    ([{"name": "team-a"}], "metrics.customLabels[0].name", 'Invalid value: "team-a": must match'),
    ([{"name": ""}], "metrics.customLabels[0].name", 'Invalid value: "": must match'),
    ([{"name": "a"}, {"name": "a", "sourceLabelKey": "b"}], "metrics.customLabels[1].name",
     'Duplicate value: "a"'),
    ([{"name": "a", "sourceLabelKey": "x", "sourceAnnotationKey": "y"}], "metrics.customLabels[0]",
     "sourceLabelKey and sourceAnnotationKey are mutually exclusive"),
    ([{"name": "a", "sourceLabelKey": "Example.com/x"}], "metrics.customLabels[0].sourceLabelKey",
     'Invalid value: "Example.com/x": prefix part a lowercase RFC 1123 subdomain must consist of'),
    ([{"name": "a", "sourceAnnotationKey": "a/b/c"}], "metrics.customLabels[0].sourceAnnotationKey",
     'Invalid value: "a/b/c": a valid label key must consist of'),
    ([{"name": "a", "sourceLabelKey": "x/-y"}], "metrics.customLabels[0].sourceLabelKey",
     f'Invalid value: "x/-y": {KEY_NAME_RULE}'),
    ([{"name": "a" * 64}], "metrics.customLabels[0].name",
     f'Invalid value: "{"a" * 64}": name part must be no more than 63 characters'),
    ([{"name": "a", "sourceKind": "Workload"}], "metrics.customLabels[0].trackedValues",
     "Invalid value: []string(nil): must not be empty when sourceKind is 'Workload'"),
    ([{"name": "a", "sourceKind": "Workload", "trackedValues": []}], "metrics.customLabels[0].trackedValues",
     "Invalid value: []string{}: must not be empty when sourceKind is 'Workload'"),
    ([{"name": "a", "sourceKind": "Workload", "trackedValues": [str(i) for i in range(13)]}],
     "metrics.customLabels[0].trackedValues",
     'Invalid value: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}: must not be '
     "greater than 12 when sourceKind is 'Workload'"),
    ([{"name": "a", "trackedValues": [str(i) for i in range(17)]}], "metrics.customLabels[0].trackedValues",
     "Too many: 17: must have at most 16 items"),
    ([{"name": "a", "trackedValues": ["x", "x"]}], "metrics.customLabels[0].trackedValues",
     'Invalid value: []string{"x", "x"}: must not contain duplicates'),
    ([{"name": "a", "sourceKind": "Node"}], "metrics.customLabels", "unknown source kind: Node"),
    ([{"name": f"l{i}"} for i in range(7)], "metrics.customLabels",
     "too many custom labels for source kind ClusterQueue: found 7, expected <= 6"),
    ([{"name": f"l{i}", "sourceKind": "Workload", "trackedValues": ["x"]} for i in range(3)],
     "metrics.customLabels", "too many custom labels for source kind Workload: found 3, expected <= 2"),
    ([{"name": f"l{i}{k}", "sourceKind": k} for i in range(7) for k in ("ClusterQueue", "Cohort", "LocalQueue")],
     "metrics.customLabels", "Too many: 21: must have at most 20 items"),
    ([{"name": "a", "trackedValues": "x"}], "metrics.customLabels[0].trackedValues",
     "Expected `array`, got `str`"),
])
def test_faulty_entries_are_refused_naming_the_field(entries: list[dict[str, Any]], field: str,
                                                     message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load(*entries)
    assert f"field `{field}`: {message}" in str(err.value)
    assert str(err.value).startswith("cfg.yaml: ")
    # with the gate on as with it off (its default): Kueue checks them at start-up either way
    with pytest.raises(InvalidInput):
        load_config({"featureGates": {"CustomMetricLabels": True}, "metrics": {"customLabels": entries}})


def test_the_recorded_document_of_custom_labels_without_tracked_values_is_unchanged() -> None:
    """A configuration decoded from a file whose entries give no trackedValues records the document it always did
    (``trackedValues: []``): a scheduler replica or the simulator recording an unchanged configuration must find
    it equal to the one in the log, or it records it anew and requeues what was parked."""
    from kueue_es.scheduler.config_record import document_of, fingerprint

    config = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                          "metrics": {"customLabels": [{"name": "team"}]}})
    document = document_of(config)
    assert document["metrics"]["customLabels"][0]["trackedValues"] == []
    assert load_config(document) == config
    assert fingerprint(document) == fingerprint(document_of(load_config(document)))
