"""DynamicQuotaOrchestration: a ClusterQueue's or Cohort's ``status.effectiveQuotas`` stands for its spec's
resource groups while the gate is on (:mod:`projections.effective_quotas`), and the fold follows a Configuration
turning the gate on or off as it follows a spec change: the quotas are compiled anew and parked workloads go back
to their queues."""

from __future__ import annotations

from pathlib import Path

import msgspec
from fixtures import fastyaml
from fixtures.eventgen import cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from kueue_es.commands.replay import summarize
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.statefile import LoadedState, load_state
from projections import effective_quotas
from projections.cluster import ClusterState

SCENARIO = Path(__file__).resolve().parents[1] / "scheduler" / "scenarios" / "dynamic-quota-effective.yaml"
CPU = "default/cpu"
M = 1000
"""Quota in millicores, as the tree counts cpu."""


def _loaded(tmp_path: Path, gate: bool) -> LoadedState:
    spec = fastyaml.safe_load(SCENARIO.read_text())
    state = tmp_path / "state.yaml"
    state.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config = tmp_path / "config.yaml"
    config.write_text(fastyaml.safe_dump({**spec["config"], "featureGates": {"DynamicQuotaOrchestration": gate}}))
    return load_state(str(state), str(config))


def _cycle(loaded: LoadedState) -> None:
    """One scheduling cycle, its decisions folded (as ``kueue-es schedule`` runs one)."""
    state = loaded.state
    for e in run_cycle(state, loaded.config, loaded.now, state.last_cycle + 1):
        state.apply(ev.Record(state.offset + 1, e))


def _document(gate: bool) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"DynamicQuotaOrchestration": gate}}


def test_the_quotas_in_force_are_the_effective_ones_only_under_the_gate(tmp_path: Path) -> None:
    on, off = _loaded(tmp_path, True).state, _loaded(tmp_path, False).state
    assert on.quota.cluster_queues["a"].nominal[CPU] == 6 * M and on.quota.cohorts["pool"].nominal[CPU] == 3 * M
    assert off.quota.cluster_queues["a"].nominal[CPU] == 2 * M and off.quota.cohorts["pool"].nominal[CPU] == 0
    assert on.quota.cluster_queues["b"].nominal[CPU] == off.quota.cluster_queues["b"].nominal[CPU] == 1 * M


def test_a_configuration_turning_the_gate_on_compiles_the_quotas_anew_and_requeues(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, False)
    state = loaded.state
    assert state.quota.cluster_queues["a"].nominal[CPU] == 2 * M
    _cycle(loaded)
    assert "team/wa" in state.queue("a").inadmissible, "parked for want of quota"
    state.apply(ev.Record(state.offset + 1, ev.ConfigRecorded(time=state.time, document=_document(True))))
    assert state.quota.cluster_queues["a"].nominal[CPU] == 6 * M
    assert state.cq_info("a").groups[0].flavors[0].name == "default"
    assert "team/wa" not in state.queue("a").inadmissible, "back in its queue's heap"
    state.apply(ev.Record(state.offset + 1, ev.ConfigRecorded(time=state.time, document=_document(False))))
    assert state.quota.cluster_queues["a"].nominal[CPU] == 2 * M


def test_an_empty_override_is_an_override_and_a_malformed_one_is_ignored() -> None:
    spec = o.ClusterQueueSpec(resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[])])
    cq = o.ClusterQueue(metadata=o.ObjectMeta(name="a"), spec=spec,
                        status={"effectiveQuotas": {"orchestratorRef": {"name": "x"}, "resourceGroups": []}})
    assert effective_quotas.in_force(cq, True).spec.resource_groups == []
    assert effective_quotas.in_force(cq, False) is cq
    bad = o.ClusterQueue(metadata=o.ObjectMeta(name="a"), spec=spec,
                         status={"effectiveQuotas": {"resourceGroups": [{"flavors": "none"}]}})
    assert effective_quotas.in_force(bad, True) is bad


def test_an_override_whose_quantities_do_not_parse_is_ignored_not_a_crash() -> None:
    """kueue-es's own CRDs keep a ClusterQueue's and Cohort's status as free-form, so the apiserver accepts any
    ``effectiveQuotas``: one whose quota is no quantity leaves the spec's quotas in force (the fold and the
    scheduler must not fail on it)."""
    groups = [o.ResourceGroup(covered_resources=["cpu"], flavors=[
        o.FlavorQuotas(name="default", resources=[o.ResourceQuota(name="cpu", nominal_quota=2)])])]
    for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        quota = {"name": "cpu", "nominalQuota": "1", field: "lots"}
        status = {"effectiveQuotas": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [quota]}]}]}}
        cq = o.ClusterQueue(metadata=o.ObjectMeta(name="a"), spec=o.ClusterQueueSpec(resource_groups=groups),
                            status=status)
        cohort = o.Cohort(metadata=o.ObjectMeta(name="pool"), spec=o.CohortSpec(resource_groups=groups), status=status)
        state = ClusterState()
        for i, e in enumerate([ev.ConfigRecorded(time=1, document=_document(True)),
                               upsert(cohort, 1),
                               upsert(msgspec.structs.replace(
                                   cq, spec=msgspec.structs.replace(cq.spec, cohort_name="pool")), 1)]):
            state.apply(ev.Record(i, e))
        assert state.quota.cluster_queues["a"].nominal[CPU] == 2 * M and state.quota.cohorts["pool"].nominal[CPU] == 2 * M
        assert effective_quotas.effective_groups(status) is None, field
        assert effective_quotas.in_force(cq, True) is cq and effective_quotas.in_force(cohort, True) is cohort


def test_the_replay_summary_shows_the_nominal_quota_in_force(tmp_path: Path) -> None:
    """``kueue-es replay``'s summary of a ClusterQueue's usage gives the nominal quota it admits with: the effective
    one under the gate (6), the spec's without it (2)."""
    on, off = summarize(_loaded(tmp_path, True).state, []), summarize(_loaded(tmp_path, False).state, [])
    nominal = {gate: {q["name"]: q["usage"][0]["nominal"] for q in s["clusterQueues"]}["a"]
               for gate, s in ((True, on), (False, off))}
    assert nominal == {True: "6", False: "2"}


def _checked_queue(effective: list[str]) -> o.ClusterQueue:
    """ClusterQueue ``q`` with flavors ``a`` and ``b`` in its spec, ``effective`` in its ``status.effectiveQuotas``,
    and a check ``chk`` on flavor ``a`` only."""
    cq = cluster_queue("q", quotas={"a": 4, "b": 4})
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                                                        for f in effective]}]
    strategy = o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name="chk", on_flavors=["a"])])
    return msgspec.structs.replace(cq, spec=msgspec.structs.replace(cq.spec, admission_checks_strategy=strategy),
                                   status={"effectiveQuotas": {"resourceGroups": groups}})


def _pending_checks(gate: bool, *later: ev.Event) -> list[str]:
    """The checks listed on a pending Workload of ``q`` (effective flavor ``a`` only) under the gate (or not), after
    ``later`` events."""
    state = ClusterState()
    check = o.AdmissionCheck(metadata=o.ObjectMeta(name="chk"), spec=o.AdmissionCheckSpec(controller_name="x/y"))
    events = [ev.ConfigRecorded(time=1, document=_document(gate)), upsert(namespace("team"), 1),
              upsert(flavor("a"), 1), upsert(flavor("b"), 1), upsert(check, 1), upsert(_checked_queue(["a"]), 1),
              upsert(local_queue("team", "lq0", "q"), 1), upsert(workload("team", "w"), 1), *later]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return list(state.workloads["team/w"].check_states)


def test_a_pending_workload_lists_the_checks_that_cover_the_flavors_in_force() -> None:
    """Before flavors are assigned a workload lists only the checks covering all of its queue's flavors: under the
    gate those are the effective ones (``a`` alone, so the check on ``a`` is listed), as Kueue's workload controller
    reads the queue's resource groups through its effective-groups helper; off, the spec's (``a`` and ``b``)."""
    assert _pending_checks(True) == ["chk"]
    assert _pending_checks(False) == []


def test_the_checks_are_listed_anew_when_the_flavors_in_force_change() -> None:
    """A status write changing the effective flavors, or a Configuration turning the gate on or off, re-lists the
    checks of the queue's pending workloads, as a spec change does."""
    both = upsert(_checked_queue(["a", "b"]), 2)
    assert _pending_checks(True, both) == []
    assert _pending_checks(True, both, upsert(_checked_queue(["a"]), 3)) == ["chk"]
    assert _pending_checks(False, ev.ConfigRecorded(time=2, document=_document(True))) == ["chk"]
    assert _pending_checks(True, ev.ConfigRecorded(time=2, document=_document(False))) == []
