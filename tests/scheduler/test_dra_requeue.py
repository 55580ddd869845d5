"""A pending workload whose DRA claims Kueue does not charge is marked, as Kueue's workload controller marks it,
QuotaReserved=False and Requeued=False ``DRAResourcesUnresolved`` (``Inadmissible`` with
UnadmittedWorkloadsObservability off; for a claim by name the Requeued message is Kueue's own); once the claims are
charged it is marked Requeued=True ``DRAResourcesResolved`` and queued again, rather than staying parked behind its
Requeued=False condition (the bug Kueue fixed by persisting that condition)."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.dra_views import claiming_workload
from fixtures.eventgen import cluster_queue, flavor, local_queue, namespace, upsert

from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.reconcile import reconcile
from projections.cluster import ClusterState

MAPPED = {"resources": {"deviceClassMappings": [{"name": "example.com/gpu", "deviceClassNames": ["gpu"]}]}}


def _config(observability: bool) -> object:
    return load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                        "featureGates": {"UnadmittedWorkloadsObservability": observability}, **MAPPED})


def _template() -> o.ResourceClaimTemplate:
    return msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}}, o.ResourceClaimTemplate)


def _state(workload: o.Workload, observability: bool) -> ClusterState:
    state = ClusterState()
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "featureGates": {"UnadmittedWorkloadsObservability": observability}, **MAPPED}
    events = [ev.ConfigRecorded(time=1, document=document), upsert(namespace("team"), 1),
              upsert(flavor("f0"), 1), upsert(cluster_queue("cq"), 1),
              upsert(local_queue("team", "lq0", "cq"), 1), upsert(workload, 2)]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def _settle(state: ClusterState, config: object, now: int) -> list[ev.Decision]:
    """The controller rules' decisions, applied, until they decide nothing more."""
    decided: list[ev.Decision] = []
    for cycle in range(1, 10):
        out = reconcile(state, config, now, cycle)
        if not out:
            break
        for d in out:
            state.apply(ev.Record(state.offset + 1, d))
        decided.extend(out)
    return decided


def _cond(state: ClusterState, kind: str) -> tuple[str, str, str] | None:
    c = state.workloads["team/w"].condition(kind)
    return None if c is None else (c.status, c.reason, c.message)


@pytest.mark.parametrize(("observability", "reason"), [(True, "DRAResourcesUnresolved"), (False, "Inadmissible")])
def test_a_refused_claim_is_marked_requeued_false_then_requeued_once_it_is_charged(observability: bool,
                                                                                   reason: str) -> None:
    config = _config(observability)
    state = _state(claiming_workload(), observability)
    missing = ('spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim spec for '
               'ResourceClaimTemplate t in podset main: resourceclaimtemplates.resource.k8s.io "t" not found')
    _settle(state, config, 10)
    assert _cond(state, "QuotaReserved") == ("False", reason, missing)
    assert _cond(state, "Requeued") == ("False", reason, missing)
    assert state.workloads["team/w"].cluster_queue == "", "held out of its queue"

    state.apply(ev.Record(state.offset + 1, upsert(_template(), 3)))
    decided = _settle(state, config, 20)
    # with UnadmittedWorkloadsObservability off Kueue's workload controller writes no PendingEvaluation: the
    # QuotaReserved=False stays until the scheduler tries the workload
    assert [(type(d).__name__, getattr(d, "reason", "")) for d in decided] == [
        ("WorkloadRequeued", "DRAResourcesResolved")] + ([("WorkloadPending", "PendingEvaluation")] if observability
                                                         else [])
    assert _cond(state, "Requeued") == ("True", "DRAResourcesResolved",
                                         "DRA resources were resolved after a previous inadmissible marking")
    q = state.queues["cq"]
    assert "team/w" in q.shapes and "team/w" not in q.inadmissible, "queued, not parked behind Requeued=False"


def test_a_claim_by_name_has_kueues_own_requeued_message() -> None:
    wl = claiming_workload()
    by_name = msgspec.convert({**msgspec.to_builtins(wl), "spec": {**msgspec.to_builtins(wl.spec), "podSets": [
        {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}], "resourceClaims": [
            {"name": "rc", "resourceClaimName": "shared"}]}}}]}}, o.Workload)
    state = _state(by_name, True)
    _settle(state, _config(True), 10)
    assert _cond(state, "QuotaReserved") == ("False", "DRAResourcesUnresolved",
                                             "KueueDRAIntegration feature does not support use of resource claims")
    assert _cond(state, "Requeued") == ("False", "DRAResourcesUnresolved", "DRA resource claims not supported")


def test_a_changed_problem_is_written_anew_and_an_unchanged_one_not_again() -> None:
    config = _config(True)
    state = _state(claiming_workload(), True)
    _settle(state, config, 10)
    assert _settle(state, config, 11) == []
    unmapped = msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "fpga"}}]}}}}, o.ResourceClaimTemplate)
    state.apply(ev.Record(state.offset + 1, upsert(unmapped, 3)))
    _settle(state, config, 20)
    message = 'spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName.deviceClassName: Not found: "fpga"'
    assert _cond(state, "Requeued") == ("False", "DRAResourcesUnresolved", message)


def test_a_deactivated_workload_keeps_its_requeued_condition_for_its_reactivation() -> None:
    wl = claiming_workload()
    inactive = msgspec.convert({**msgspec.to_builtins(wl), "spec": {**msgspec.to_builtins(wl.spec), "active": False}},
                               o.Workload)
    config = _config(True)
    state = _state(inactive, True)
    _settle(state, config, 10)
    assert _cond(state, "Requeued") is None or _cond(state, "Requeued")[1].startswith("Deactivated")
    state.apply(ev.Record(state.offset + 1, upsert(wl, 3)))  # reactivated, its template still missing
    _settle(state, config, 20)
    assert _cond(state, "Requeued")[:2] == ("False", "DRAResourcesUnresolved")
