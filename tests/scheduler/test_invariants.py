"""Properties of the scheduler over random states and any number of cycles.

* No ClusterQueue or cohort ever holds more than its quota, borrowing and lending limits allow:
  for every node U ≤ SQ + borrowingLimit, and at every root U ≤ SQ (which is where lending limits bite).
* The decisions are identical when the same state is scheduled twice, and in a fresh process with another
  PYTHONHASHSEED.
* Both hold with Fair Sharing on too (each strategy list), with ClusterQueue weights (0 included).
* With several flavors per ClusterQueue and any flavorFungibility, the flavor scan progress carried from one
  cycle to the next (FlavorFungibilityPreserveScanProgress) never keeps the scheduler from settling.
* With waitForPodsReady.blockAdmission (Fair Sharing on or off), a batch reserves quota for one workload at
  most, and for none while a workload holding quota has pods that are not ready; once every such workload's pods
  are ready, no queue head is left waiting for them, and the quota limits hold throughout.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.codec import encode_batch
from kueue_es.scheduler import DEFAULT, SchedulerConfig, decide
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.quota import build_quota_tree
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
POLICIES_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
POLICIES_RECLAIM = ("Never", "LowerPriority", "Any")


FLAVORS = ("f1", "f2", "f3")


def _cq(name, cohort, nominal, borrow, lend, within, reclaim, bwc, strategy, weight=None, more=(), fungibility=None):
    """``more``: the nominal quotas of further flavors (f2, f3), tried after f1."""
    flavors = []
    for flavor, quota in zip(FLAVORS, (nominal, *more), strict=False):
        res = {"name": "cpu", "nominalQuota": quota}
        if cohort and borrow is not None:
            res["borrowingLimit"] = borrow
        if cohort and lend is not None:
            res["lendingLimit"] = min(lend, quota)
        flavors.append({"name": flavor, "resources": [res]})
    spec = {
        "namespaceSelector": {}, "queueingStrategy": strategy,
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}],
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim,
                       **({"borrowWithinCohort": {"policy": "LowerPriority"}} if bwc and reclaim != "Never" else {})},
    }
    if cohort:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    if fungibility is not None:
        spec["flavorFungibility"] = {"whenCanBorrow": fungibility[0], "whenCanPreempt": fungibility[1]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


@st.composite
def scenarios(draw):
    n_cq = draw(st.integers(1, 4))
    cqs = []
    for i in range(n_cq):
        cqs.append(_cq(
            f"cq{i}", draw(st.sampled_from([None, "co-a", "co-b"])), draw(st.integers(0, 8)),
            draw(st.one_of(st.none(), st.integers(0, 6))), draw(st.one_of(st.none(), st.integers(0, 6))),
            draw(st.sampled_from(POLICIES_WITHIN)), draw(st.sampled_from(POLICIES_RECLAIM)), draw(st.booleans()),
            draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
            draw(st.sampled_from([None, None, 0, "0.5", 2])),
            draw(st.lists(st.integers(0, 6), max_size=2)),
            draw(st.one_of(st.none(), st.tuples(st.sampled_from(["MayStopSearch", "TryNextFlavor"]),
                                                st.sampled_from(["MayStopSearch", "TryNextFlavor"])))),
        ))
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f}} for f in FLAVORS),
        *cqs,
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": f"lq{i}", "namespace": "ns"},
           "spec": {"clusterQueue": f"cq{i}"}} for i in range(n_cq)),
    ]
    waves = []
    for wave in range(draw(st.integers(1, 3))):
        wls = []
        for j in range(draw(st.integers(1, 6))):
            pod_sets = [{"name": "main", "count": draw(st.integers(1, 4)),
                         "template": {"spec": {"containers": [{"name": "c", "resources": {
                             "requests": {"cpu": str(draw(st.integers(1, 3)))}}}]}}}]
            if draw(st.integers(0, 4)) == 0:  # now and then a second pod set, assigned after the first
                pod_sets.append({"name": "side", "count": 1, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"cpu": str(draw(st.integers(1, 3)))}}}]}}})
            wls.append({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": f"w{wave}-{j}", "namespace": "ns", "uid": f"u{wave}-{j}",
                             "creationTimestamp": f"2024-01-01T00:0{wave}:{j:02d}Z"},
                "spec": {"queueName": f"lq{draw(st.integers(0, n_cq - 1))}", "priority": draw(st.integers(0, 3)),
                         "podSets": pod_sets},
            })
        waves.append(wls)
    return objects, waves


FAIR = {
    "default": load_config({"fairSharing": {}}),
    "final-share": load_config({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}}),
    "initial-share": load_config({"fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}}),
}


def run(objects, waves, check=None, config: SchedulerConfig = DEFAULT) -> list[bytes]:
    """Import, then per wave: add workloads, settle; stop the jobs of evicted workloads; finish some."""
    import msgspec

    state = ClusterState()
    out: list[bytes] = []
    t = T0

    def apply(batch):
        for e in batch:
            state.apply(ev.Record(state.offset + 1, e))

    def settle():
        for _ in range(500):
            batch = decide(state, config, now=state.time)
            if not batch:
                return
            out.append(encode_batch(batch))
            apply(batch)
            if check is not None:
                check(state)
            stopped = [ev.JobStopped(time=state.time, key=k) for k in sorted(state.workloads)
                       if state.workloads[k].evicted and state.workloads[k].reserving
                       and not state.workloads[k].job_stopped]
            apply(stopped)
        raise AssertionError("the scheduler did not settle within 500 batches")

    apply([ev.ObjectUpserted(time=t, key=d["metadata"]["name"], obj=msgspec.convert(d, o.KueueObject))
           for d in objects])
    for i, wave in enumerate(waves):
        t += 60_000
        apply([ev.ObjectUpserted(time=t, key=f"ns/{d['metadata']['name']}", obj=msgspec.convert(d, o.KueueObject))
               for d in wave])
        settle()
        running = sorted(k for k, w in state.workloads.items() if w.phase == "Admitted" and not w.evicted)
        t += 1_000
        apply([ev.WorkloadFinished(time=t, key=k) for k in running[i % 2::2]])
        settle()
    return out


def check_quota(state: ClusterState) -> None:
    tree = build_quota_tree(state)
    for node in [*tree.cluster_queues.values(), *tree.cohorts.values()]:
        for fr in set(node.usage) | set(node.subtree):
            u, sq = node.usage.get(fr, 0), node.subtree.get(fr, 0)
            if node.parent is None:
                assert u <= sq, f"{node.name} uses {u} of {fr} but its tree only has {sq}"
            elif fr in node.borrowing_limit:
                assert u <= sq + node.borrowing_limit[fr], f"{node.name} borrows past its limit on {fr}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_quota_limits_hold_after_every_batch(scenario) -> None:
    objects, waves = scenario
    run(objects, waves, check_quota)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(sorted(FAIR)))
def test_quota_limits_hold_with_fair_sharing(scenario, strategies) -> None:
    objects, waves = scenario
    run(objects, waves, check_quota, FAIR[strategies])


@settings(max_examples=25, deadline=None)
@given(scenarios(), st.sampled_from(sorted(FAIR)))
def test_same_decisions_with_fair_sharing(scenario, strategies) -> None:
    objects, waves = scenario
    assert run(objects, waves, config=FAIR[strategies]) == run(objects, waves, config=FAIR[strategies])


@settings(max_examples=25, deadline=None)
@given(scenarios())
def test_same_state_same_decisions(scenario) -> None:
    objects, waves = scenario
    assert run(objects, waves) == run(objects, waves)


def _digest(objects, waves) -> str:
    return hashlib.sha256(b"".join(run(objects, waves))).hexdigest()


@settings(max_examples=6, deadline=None)
@given(scenarios())
def test_same_decisions_in_a_fresh_process_with_another_hash_seed(scenario) -> None:
    objects, waves = scenario
    here = _digest(objects, waves)
    code = (
        f"import json,sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
        "from test_invariants import _digest; o, w = json.load(sys.stdin); print(_digest(o, w))"
    )
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", code], input=json.dumps([objects, waves]),
                                capture_output=True, text=True, env=env, check=True)
        assert result.stdout.strip() == here


BLOCKING = {fair: load_config({"waitForPodsReady": {"blockAdmission": True},
                               **({"fairSharing": {}} if fair else {})}) for fair in (False, True)}
"""waitForPodsReady.blockAdmission, without and with Fair Sharing."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_block_admission_admits_one_workload_at_a_time(scenario, fair) -> None:
    import msgspec

    from kueue_es.scheduler import blockadmission
    from kueue_es.scheduler.cycle import heads

    objects, waves = scenario
    config = BLOCKING[fair]
    state = ClusterState()
    t = T0

    def apply(batch):
        for e in batch:
            state.apply(ev.Record(state.offset + 1, e))

    def settle():
        for _ in range(500):
            held = blockadmission.holds_admission(state)
            batch = decide(state, config, now=state.time)
            if not batch:
                return
            reserved = [d.key for d in batch if isinstance(d, ev.QuotaReserved)]
            assert len(reserved) <= 1, f"one batch reserved quota for {reserved}"
            assert not (held and reserved), f"{reserved} reserved while {blockadmission.not_ready(state)} not ready"
            apply(batch)
            check_quota(state)
            apply([ev.JobStopped(time=state.time, key=k) for k in sorted(state.workloads)
                   if state.workloads[k].evicted and state.workloads[k].reserving
                   and not state.workloads[k].job_stopped])
        raise AssertionError("the scheduler did not settle within 500 batches")

    def settle_until_all_ready():
        nonlocal t
        for _ in range(200):
            settle()
            waiting = blockadmission.not_ready(state)
            if not waiting:
                break
            t += 1_000
            apply([ev.PodsReadyChanged(time=t, key=k, ready=True) for k in waiting])
        else:
            raise AssertionError("pods kept turning not ready")
        left = [e.wl.key for e in heads(state, config, state.time)
                if (c := e.wl.condition("QuotaReserved")) is not None and c.reason == blockadmission.REASON]
        assert not left, f"heads still waiting for pods though every pod is ready: {left}"

    apply([ev.ObjectUpserted(time=t, key=d["metadata"]["name"], obj=msgspec.convert(d, o.KueueObject))
           for d in objects])
    for i, wave in enumerate(waves):
        t += 60_000
        apply([ev.ObjectUpserted(time=t, key=f"ns/{d['metadata']['name']}", obj=msgspec.convert(d, o.KueueObject))
               for d in wave])
        settle_until_all_ready()
        running = sorted(k for k, w in state.workloads.items() if w.phase == "Admitted" and not w.evicted)
        t += 1_000
        apply([ev.WorkloadFinished(time=t, key=k) for k in running[i % 2::2]])
        settle_until_all_ready()
