"""Scenario files: Kueue's generator format, the bundled scenarios, and errors that name the key path."""

from __future__ import annotations

import random

import pytest
from simhelp import SMALL, SMALL_TAS, small

from events import objects as o
from events.errors import InvalidInput
from kueue_es.cli import main
from kueue_es.simulator import config
from kueue_es.simulator.model import CLASS_LABEL, RUNTIME_LABEL, build_plan, workload_object


def test_bundled_kueue_scenarios_parse_with_kueue_shapes() -> None:
    base = config.load("baseline")
    assert base.source == "bundled" and base.name == "baseline"
    (cset,) = base.cohorts
    assert (cset.class_name, cset.count) == ("cohort", 5)
    (qs,) = cset.queues_sets
    assert (qs.count, qs.nominal_quota, qs.borrowing_limit) == (6, "20", "100")
    assert (qs.reclaim_within_cohort, qs.within_cluster_queue) == ("Any", "LowerPriority")
    assert [(w.count, w.creation_interval_ms, w.workloads[0].class_name) for w in qs.workloads_sets] == [
        (350, 100, "small"), (100, 500, "medium"), (50, 1200, "large")]
    plan = build_plan(base, random.Random(0))
    assert len(plan.arrivals) == 15_000 and len(plan.cq_class) == 30

    large = build_plan(config.load("large-scale"), random.Random(0))
    assert len(large.cq_class) == 1000 and len(large.arrivals) == 50_000

    tas = config.load("tas")
    assert tas.topology is not None and [lv.count for lv in tas.topology.levels] == [1, 10, 64]
    assert tas.flavor.topology_name == "default-topology"
    tpl = tas.cohorts[0].queues_sets[0].workloads_sets[2].workloads[0]
    assert (tpl.class_name, tpl.tas_constraint, tpl.slice_size, tpl.pod_count, tpl.request_milli) == (
        "small-balanced-rack", "balanced", 1, 2, 500)


def test_bundled_files_credit_kueue() -> None:
    for name in ("baseline", "large-scale", "tas"):
        head = config.bundled_path(name).read_text().splitlines()[:2]
        assert "kubernetes-sigs/kueue" in head[0] and "Apache License, Version 2.0" in head[1]


def test_plan_follows_kueue_generator_names_and_schedule() -> None:
    plan = build_plan(small(), random.Random(0))
    assert sorted(plan.cq_class) == ["cq-0-0-cohort-0", "cq-0-0-cohort-1", "cq-0-1-cohort-0", "cq-0-1-cohort-1"]
    first = [a for a in plan.arrivals if a.namespace == "cq-0-0-cohort-0"]
    smalls = [a for a in first if a.template.class_name == "small"]
    bigs = [a for a in first if a.template.class_name == "big"]
    assert [a.at for a in smalls] == [100 * i for i in range(12)]
    assert [a.at for a in bigs] == [200, 600, 1000]
    assert smalls[3].name == "small-0-3-0" and bigs[0].name == "big-1-0-0"
    wl = workload_object(bigs[0])
    assert wl.spec.queue_name == "cq-0-0-cohort-0" and wl.spec.priority == 100
    assert wl.metadata.labels == {CLASS_LABEL: "big", RUNTIME_LABEL: "500"}
    (ps,) = wl.spec.pod_sets
    assert ps.count == 1 and ps.template.spec.containers[0].resources.requests == {"cpu": "3500m"}
    kinds = [type(x).__name__ for x in plan.objects]
    assert kinds.count("ClusterQueue") == 4 and kinds.count("LocalQueue") == 4 and kinds.count("Namespace") == 4
    cq = next(x for x in plan.objects if isinstance(x, o.ClusterQueue))
    assert cq.spec.cohort_name == "cohort-0" and cq.spec.namespace_selector == o.LabelSelector()
    assert cq.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit == "4"
    # cpu·ms (12·1000m·300 + 3·3500m·500 per CQ, 4 CQs) over 16 cpu, rounded up; last big at 1000 ms runs 500
    assert plan.lower_bound() == (2213, 2213, 1500)


def test_tas_plan_has_topology_nodes_and_requests() -> None:
    plan = build_plan(small(SMALL_TAS), random.Random(0))
    topo = next(x for x in plan.objects if isinstance(x, o.Topology))
    assert [lv.node_label for lv in topo.spec.levels] == ["example.com/block", "example.com/rack",
                                                          "kubernetes.io/hostname"]
    nodes = [x for x in plan.objects if isinstance(x, o.Node)]
    assert len(nodes) == 6 and plan.node_cpu == 48_000
    n = nodes[4]
    assert n.metadata.name == "node-b0-r1-n1"
    assert n.metadata.labels["example.com/rack"] == "rack-1"
    assert n.metadata.labels["kubernetes.io/hostname"] == "node-b0-r1-n1"
    assert n.metadata.labels["tas-node-group"] == "tas"
    rf = next(x for x in plan.objects if isinstance(x, o.ResourceFlavor))
    assert rf.spec.topology_name == "topo" and rf.spec.node_labels == {"tas-node-group": "tas"}
    req = workload_object(next(a for a in plan.arrivals if a.template.class_name == "req"))
    assert req.spec.pod_sets[0].topology_request == o.PodSetTopologyRequest(required="example.com/rack")
    bal = workload_object(next(a for a in plan.arrivals if a.template.class_name == "bal"))
    assert bal.spec.pod_sets[0].topology_request == o.PodSetTopologyRequest(
        pod_set_slice_required_topology="example.com/rack", pod_set_slice_size=2)
    assert plan.tas


def test_nested_cohort_children_create_cohort_objects() -> None:
    text = """
cohorts:
- className: org
  count: 1
  children:
  - className: team
    count: 2
    queuesSets:
    - {className: cq, count: 1, nominalQuota: 2, workloadsSets: [{count: 1, workloads: [{className: w, request: 1}]}]}
"""
    plan = build_plan(small(text), random.Random(0))
    cohorts = [x for x in plan.objects if isinstance(x, o.Cohort)]
    assert [(c.metadata.name, c.spec.parent_name) for c in cohorts] == [("org-0-team-0", "org-0"),
                                                                          ("org-0-team-1", "org-0")]
    assert sorted(plan.cq_class) == ["cq-0-0-org-0-team-0", "cq-0-0-org-0-team-1"]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("cohort: []", "`cohort`: unknown key"),
        ("cohorts: [{className: c, count: 1, queueSets: []}]", "`cohorts[0].queueSets`: unknown key"),
        ("cohorts: [{className: c, queuesSets: [{className: q, nominalQuota: 1, borrowLimit: 2}]}]",
         "`cohorts[0].queuesSets[0].borrowLimit`: unknown key"),
        ("cohorts: [{className: c, queuesSets: [{className: q, nominalQuota: 1, workloadsSets: "
         "[{count: 1, workloads: [{className: w, request: 1, runtime: 5}]}]}]}]",
         "`cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].runtime`: unknown key"),
        ("topology: {name: t, levels: [{name: a, nodeLabel: x, size: 1}, {name: b, nodeLabel: y}]}\ncohorts: []",
         "`topology.levels[0].size`: unknown key"),
    ],
)
def test_unknown_keys_name_their_path(text: str, path: str) -> None:
    with pytest.raises(InvalidInput, match=path.replace("[", r"\[").replace("]", r"\]")):
        small(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cohorts: []", "at least one cohort set"),
        ("{}", "`cohorts`: required key is missing"),
        ("cohorts: [{className: c, queuesSets: [{className: q}]}]", "nominalQuota`: required key is missing"),
        ("cohorts: [{className: c, count: many}]", "`cohorts[0].count`: expected an integer"),
        ("cohorts: [{className: c, count: '²'}]", "`cohorts[0].count`: expected an integer"),  # a digit int() refuses
        ("cohorts: [{className: c, count: -1}]", "must be >= 0"),
        ("cohorts: [{className: c, queuesSets: [{className: q, nominalQuota: lots}]}]", "not a quantity"),
        ("cohorts: [{className: c, queuesSets: [{className: q, nominalQuota: 1, reclaimWithinCohort: Sometimes}]}]",
         "expected one of Never, LowerPriority, Any"),
        ("dra: {devicesPerNode: 8}\ncohorts: [{className: c}]", "DRA scenarios are not supported"),
        ("cohorts: [{className: c, queuesSets: [{className: q, nominalQuota: 1, deviceNominalQuota: 2}]}]",
         "DRA scenarios are not supported"),
        ("cohorts: [{className: c, queuesSets: [{className: q, nominalQuota: 1, workloadsSets: "
         "[{workloads: [{className: w, request: 1, tasConstraint: required}]}]}]}]", "needs `tasLevel`"),
        ("topology: {name: t, levels: [{name: a, nodeLabel: x}]}\ncohorts: [{className: c}]", "at least 2 levels"),
        ("cohorts: [\n", "malformed YAML"),
    ],
)
def test_invalid_scenarios_are_explained(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[")):
        small(text)


def test_cli_exits_2_naming_the_key_path(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.replace("      borrowingLimit: 4\n", "      borrowingLimit: 4\n      lendingLimt: 1\n"))
    assert main(["simulate", str(bad), "--log", str(tmp_path / "log")]) == 2
    err = capsys.readouterr().err
    assert "`cohorts[0].queuesSets[0].lendingLimt`: unknown key" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "log").exists()


def test_cli_missing_scenario_exits_2(tmp_path, capsys) -> None:
    assert main(["simulate", str(tmp_path / "nope.yaml")]) == 2
    assert "no such scenario file" in capsys.readouterr().err
