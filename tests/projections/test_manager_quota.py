"""MultiKueueManagerQuotaAutomation: the quota a MultiKueue manager's ClusterQueue takes from its workers and the
condition it shows (Kueue's ``TestCQReconcile``, pkg/controller/admissionchecks/multikueue)."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, fold, local_queue, meta, records, upsert

from events import objects as o
from events import schema as ev
from projections import manager_quota as mq
from projections import snapshot
from projections.queue_status import cluster_queue_status

ON = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
      "featureGates": {"MultiKueueManagerQuotaAutomation": True}}
AUTOMATED_MSG = "ClusterQueue quota is automatically managed based on MultiKueue workers."


def groups(*flavors: dict[str, str]) -> list[o.ResourceGroup]:
    """One resource group per call argument would be ``groups(a)+groups(b)``; here: one group, these flavors."""
    covered = sorted({r for f in flavors for r in f})
    return [o.ResourceGroup(covered_resources=covered, flavors=[
        o.FlavorQuotas(name=f"f{i}", resources=[o.ResourceQuota(name=r, nominal_quota=q) for r, q in f.items()])
        for i, f in enumerate(flavors)])]


def manager_cq(rgs: list[o.ResourceGroup], *, checks: tuple[str, ...] = ("ac1",), status: dict | None = None
               ) -> o.ClusterQueue:
    strategy = o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name=c) for c in checks]) \
        if checks else None
    return o.ClusterQueue(metadata=meta("cq1", generation=2), spec=o.ClusterQueueSpec(
        resource_groups=rgs, namespace_selector=o.LabelSelector(), admission_checks_strategy=strategy),
        status=status or {})


def check(config: str = "config1", controller: str = "kueue.x-k8s.io/multikueue") -> o.AdmissionCheck:
    return o.AdmissionCheck(metadata=meta("ac1"), spec=o.AdmissionCheckSpec(
        controller_name=controller, parameters=o.AdmissionCheckParameters(
            api_group="kueue.x-k8s.io", kind="MultiKueueConfig", name=config)))


def config(*clusters: str, mode: str | None = "Automated") -> o.MultiKueueConfig:
    return o.MultiKueueConfig(metadata=meta("config1"),
                              spec=o.MultiKueueConfigSpec(clusters=list(clusters), quota_management=mode))


def worker(name: str, lqs: dict[str, str], cqs: dict[str, list[o.ResourceGroup]], *, connected: bool = True
           ) -> list[ev.AnyEvent]:
    return [ev.MultiKueueClusterObserved(time=T0, key=name, connected=connected),
            ev.WorkerQueuesObserved(time=T0, key=name, local_queues=lqs, cluster_queues=cqs)]


def state_of(cq: o.ClusterQueue, *events: ev.AnyEvent, lqs=("lq1",), document: dict | None = ON,
             objects: tuple[o.KObject, ...] = (check(), config("worker1", "worker2"))):
    base: list[ev.AnyEvent] = [ev.ConfigRecorded(time=T0, document=document, writer="test")] if document else []
    base += [upsert(obj, T0) for obj in (cq, *objects, *(local_queue("ns", lq, "cq1") for lq in lqs))]
    return fold(records([base + list(events)]))


def outcome(state) -> mq.Outcome | None:
    return mq.outcome(state.cluster_queues["cq1"], mq.world_of(state))


def quotas(result: mq.Outcome | None) -> dict[str, str]:
    assert result is not None and result.resources is not None
    return {rq.name: rq.nominal_quota for rq in result.resources}


def test_multiple_resources_are_summed_over_the_workers():
    state = state_of(manager_cq(groups({"cpu": "0", "memory": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10", "memory": "20Gi"})}),
                     *worker("worker2", {"ns/lq1": "w2-cq1"}, {"w2-cq1": groups({"cpu": "5", "memory": "10Gi"})}))
    result = outcome(state)
    assert result.condition == ("True", "QuotaAutomated", AUTOMATED_MSG)
    assert quotas(result) == {"cpu": "15", "memory": "30Gi"}


def test_unrelated_cluster_queues_and_workers_not_connected_are_ignored():
    state = state_of(manager_cq(groups({"cpu": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"}),
                                                                "w1-cq-unrelated": groups({"cpu": "100"})}),
                     *worker("worker2", {"ns/lq1": "w2-cq1"}, {"w2-cq1": groups({"cpu": "500"})}, connected=False))
    assert quotas(outcome(state)) == {"cpu": "10"}


def test_a_worker_cluster_queue_reached_by_several_local_queues_counts_once():
    state = state_of(manager_cq(groups({"cpu": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1", "ns/lq2": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"})}),
                     *worker("worker2", {"ns/lq1": "w2-cq1", "ns/lq2": "w2-cq2"},
                             {"w2-cq1": groups({"cpu": "5"}), "w2-cq2": groups({"cpu": "8"})}),
                     lqs=("lq1", "lq2"))
    assert quotas(outcome(state)) == {"cpu": "23"}


def test_every_group_and_flavor_of_a_worker_cluster_queue_is_summed():
    state = state_of(manager_cq(groups({"cpu": "0", "gpu": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1"},
                             {"w1-cq1": groups({"cpu": "10"}) + groups({"gpu": "1"})}),
                     *worker("worker2", {"ns/lq1": "w2-cq1"},
                             {"w2-cq1": groups({"cpu": "5", "gpu": "2"}, {"cpu": "4", "gpu": "1"})}))
    assert quotas(outcome(state)) == {"cpu": "19", "gpu": "4"}


def test_a_covered_resource_no_worker_has_gets_zero_in_the_covered_order():
    cq = manager_cq([o.ResourceGroup(covered_resources=["memory", "cpu", "gpu"], flavors=[o.FlavorQuotas(
        name="default", resources=[o.ResourceQuota(name=r, nominal_quota="0", borrowing_limit="1")
                                   for r in ("memory", "cpu", "gpu")])])])
    state = state_of(cq, *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10", "memory": "20Gi"})}),
                     *worker("worker2", {"ns/lq1": "w2-cq1"}, {"w2-cq1": groups({"cpu": "500m"})}))
    result = outcome(state)
    assert [(rq.name, rq.nominal_quota, rq.borrowing_limit) for rq in result.resources] == [
        ("memory", "20Gi", None), ("cpu", "10500m", None), ("gpu", "0", None)]
    spec = mq.automated_spec(state.cluster_queues["cq1"], result)
    assert spec is not None and spec.resource_groups[0].flavors[0].resources == result.resources
    assert spec.resource_groups[0].flavors[0].name == "default"


def test_quotas_already_written_in_another_spelling_are_left_alone():
    cq = manager_cq([o.ResourceGroup(covered_resources=["cpu"], flavors=[o.FlavorQuotas(
        name="default", resources=[o.ResourceQuota(name="cpu", nominal_quota="10000m")])])])
    state = state_of(cq, *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"})}))
    assert mq.automated_spec(state.cluster_queues["cq1"], outcome(state)) is None


@pytest.mark.parametrize("mode", [None, "Manual"])
def test_not_requested(mode):
    state = state_of(manager_cq(groups({"cpu": "100"})), *worker("worker1", {"ns/lq1": "w"}, {"w": groups({"cpu": "1"})}),
                     objects=(check(), config("worker1", mode=mode)))
    result = outcome(state)
    assert result == mq.Outcome(("False", "NotRequested", "MultiKueue manager quota automation has not been requested."))
    assert mq.automated_spec(state.cluster_queues["cq1"], result) is None


def test_unsupported_for_other_than_one_flavor():
    state = state_of(manager_cq(groups({"cpu": "0"}) + groups({"gpu": "0"})))
    assert outcome(state) == mq.Outcome(("False", "UnsupportedConfiguration", "Quota automation requires that the "
                                                                              "manager-side ClusterQueue has exactly one ResourceFlavor"))
    state = state_of(manager_cq(groups({"cpu": "0"}, {"cpu": "0"})))
    assert outcome(state).condition[1] == "UnsupportedConfiguration"


def test_unsupported_when_covered_resources_miss_a_worker_resource():
    state = state_of(manager_cq(groups({"cpu": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"memory": "10Gi", "gpu": "2"})}))
    assert outcome(state) == mq.Outcome(("False", "UnsupportedConfiguration", "manager-side coveredResources is "
                                                                              "missing resources configured on workers: [gpu memory]"))


def test_not_a_manager_cluster_queue_loses_the_condition():
    shown = {"conditions": [{"type": mq.CONDITION, "status": "True", "reason": "QuotaAutomated",
                             "message": AUTOMATED_MSG, "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    state = state_of(manager_cq(groups({"cpu": "100"}), checks=(), status=shown))
    assert outcome(state) == mq.Outcome(None)
    status = cluster_queue_status(state, "cq1", T0)
    assert [c["type"] for c in status["conditions"]] == ["Active"]
    other = state_of(manager_cq(groups({"cpu": "100"}), status=shown), objects=(check(controller="example.com/x"),))
    assert outcome(other) == mq.Outcome(None)


def test_config_not_found():
    state = state_of(manager_cq(groups({"cpu": "100"})), objects=(check("config-not-found"),))
    assert outcome(state) == mq.Outcome(("False", "UnsupportedConfiguration",
                                         "The referenced MultiKueueConfig was not found."))


def test_a_check_naming_no_multikueue_config_changes_nothing():
    ac = msgspec.structs.replace(check(), spec=o.AdmissionCheckSpec(
        controller_name="kueue.x-k8s.io/multikueue",
        parameters=o.AdmissionCheckParameters(api_group="kueue.x-k8s.io", kind="Other", name="config1")))
    assert outcome(state_of(manager_cq(groups({"cpu": "100"})), objects=(ac, config("worker1")))) is None


def test_the_condition_is_in_the_cluster_queue_status_only_under_the_gate():
    events = worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"})})
    state = state_of(manager_cq(groups({"cpu": "0"})), *events)
    cond = next(c for c in cluster_queue_status(state, "cq1", T0)["conditions"] if c["type"] == mq.CONDITION)
    assert (cond["status"], cond["reason"], cond["message"], cond["observedGeneration"]) == (
        "True", "QuotaAutomated", AUTOMATED_MSG, 2)
    off = state_of(manager_cq(groups({"cpu": "0"})), *events, document=None)
    assert [c["type"] for c in cluster_queue_status(off, "cq1", T0)["conditions"]] == ["Active"]
    mk_off = state_of(manager_cq(groups({"cpu": "0"})), *events,
                      document={**ON, "featureGates": {"MultiKueueManagerQuotaAutomation": True, "MultiKueue": False}})
    assert not mq.enabled(mk_off)


def test_the_workers_queues_survive_a_snapshot():
    state = state_of(manager_cq(groups({"cpu": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"})}))
    restored = snapshot.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(snapshot.take(state)),
                                                       type=snapshot.Snapshot))
    assert restored.worker_queues == state.worker_queues
    assert quotas(outcome(restored)) == {"cpu": "10"}


def test_nothing_changes_while_a_connected_worker_was_not_listed_yet():
    connected_only = ev.MultiKueueClusterObserved(time=T0, key="worker2", connected=True)
    state = state_of(manager_cq(groups({"cpu": "0"})),
                     *worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"})}), connected_only)
    assert outcome(state) is None
    state.apply(ev.Record(state.offset + 1, ev.WorkerQueuesObserved(time=T0, key="worker2")))
    assert quotas(outcome(state)) == {"cpu": "10"}


def test_a_condition_that_still_holds_is_left_as_it_is():
    shown = {"conditions": [{"type": mq.CONDITION, "status": "True", "reason": "QuotaAutomated",
                             "message": AUTOMATED_MSG, "observedGeneration": 1,
                             "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    events = worker("worker1", {"ns/lq1": "w1-cq1"}, {"w1-cq1": groups({"cpu": "10"})})
    state = state_of(manager_cq(groups({"cpu": "0"}), status=shown), *events, objects=(check(), config("worker1")))
    cond = next(c for c in cluster_queue_status(state, "cq1", T0)["conditions"] if c["type"] == mq.CONDITION)
    assert cond == shown["conditions"][0]
    state = state_of(manager_cq(groups({"cpu": "0"}), status=shown), *events,
                     objects=(check(), config("worker1", mode="Manual")))
    cond = next(c for c in cluster_queue_status(state, "cq1", T0)["conditions"] if c["type"] == mq.CONDITION)
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("False", "NotRequested", 2)
