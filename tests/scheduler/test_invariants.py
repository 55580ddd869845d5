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

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.codec import decode_batch, encode_batch
from kueue_es.scheduler import DEFAULT, SchedulerConfig, decide
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.flavors import resume_scan
from kueue_es.scheduler.quota import build_quota_tree
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
POLICIES_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
POLICIES_RECLAIM = ("Never", "LowerPriority", "Any")


FLAVORS = ("f1", "f2", "f3")


def _upserted(t: int, doc: dict) -> ev.ObjectUpserted:
    obj = msgspec.convert(doc, o.KueueObject)
    return ev.ObjectUpserted(time=t, key=obj.key, obj=obj)


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
    "default": load_config({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}),
    "final-share": load_config({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}}),
    "initial-share": load_config({"fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}}),
}


def picture(state: ClusterState) -> tuple:
    """What the next decision reads of the workloads and queues. Time stands still while a wave settles, and
    ``decide`` is a function of the state and the time: a settle that comes back to a picture it showed
    before has entered a loop, and would go round it for ever."""
    workloads = tuple((k, w.phase, w.evicted, w.job_stopped, w.requeue_count, w.requeue_at, _scan(state, w),
                       tuple((c.type, c.status, c.reason, c.message) for c in w.conditions))
                      for k, w in sorted(state.workloads.items()))
    queues = tuple((name, tuple(q.entries), tuple(sorted(q.inadmissible)), q.sticky, q.preemptor)
                   for name, q in sorted(state.queues.items()))
    return workloads, queues


def _scan(state: ClusterState, w) -> tuple | None:
    """A workload's saved flavor scan as its next attempt sees it: the flavors tried, and whether it is still
    fresh. Not its counters (allocatable generation, cycle), which grow at every change, so a loop that keeps
    saving a scan would never show the same picture twice."""
    if w.scan is None:
        return None
    lq = state.local_queues.get(f"{w.namespace}/{w.queue_name}")
    cq = lq.spec.cluster_queue if lq is not None else ""
    return w.scan.tried, w.scan.attempts, resume_scan(state, w, cq) is not None


def run(objects, waves, check=None, config: SchedulerConfig = DEFAULT) -> list[bytes]:
    """Import, then per wave: add workloads, settle; stop the jobs of evicted workloads; finish some.

    Kueue's own rules can go round a loop: under ``reclaimWithinCohort: Any`` a workload reclaims its quota
    from a borrowing queue, an older one of its queue preempts it to borrow what was freed, and the borrowing
    queue's head is admitted first again (the simulator's THRASH case; ``test_reclaim_any_ping_pong_is_a_loop``).
    A wave that enters a loop ends there, once every state of the loop has been checked; a scheduler that
    neither settles nor loops within 500 batches fails the run."""
    state = ClusterState()
    out: list[bytes] = []
    t = T0

    def apply(batch):
        for e in batch:
            state.apply(ev.Record(state.offset + 1, e))

    def settle():
        seen = {picture(state)}
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
            now = picture(state)
            if now in seen:
                return
            seen.add(now)
        raise AssertionError("the scheduler did not settle within 500 batches")

    apply([_upserted(t, d)
           for d in objects])
    for i, wave in enumerate(waves):
        t += 60_000
        apply([_upserted(t, d)
               for d in wave])
        settle()
        running = sorted(k for k, w in state.workloads.items() if w.phase == "Admitted" and not w.evicted)
        t += 1_000
        apply([ev.WorkloadFinished(time=t, key=k) for k in running[i % 2::2]])
        settle()
    return out


def check_quota(state: ClusterState) -> None:
    """The limits hold for the workloads not being preempted. A workload preempted in a cycle holds its quota until
    its job stops, but Kueue's cycle checks every later entry with the cycle's victims already gone (its
    ``fits``), so a workload that fits only thanks to them is admitted at once (``test_a_fit_after_a_preemption``)."""
    tree = build_quota_tree(state)
    for w in state.workloads.values():
        if w.evicted and w.reserving:
            tree.charge(w.cluster_queue, w.usage, -1)
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


def _workload(name, queue, *pod_sets):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                         "creationTimestamp": f"2024-01-01T00:00:0{name[-1]}Z"},
            "spec": {"queueName": queue, "priority": 0, "podSets": [
                {"name": ps, "count": count, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}
                for ps, count, cpu in pod_sets]}}


def test_reclaim_any_ping_pong_is_a_loop() -> None:
    """Found by the property above. cq0 (2 cpu, reclaims from any borrower, preempts newer equal priorities)
    and cq1 (4 cpu) share a cohort; cq1's w3 needs 6 and borrows 2. cq0's w1 (2 cpu) reclaims them; then
    cq0's older w0 (5 cpu) preempts w1 to borrow the 3 that w3's eviction left free; Fair Sharing then admits
    w3 first (its queue's share after admission is the lower one), and w1 reclaims again. Every step follows a
    rule of Kueue's (reclaim needs no borrowing, in-queue preemption may borrow, the fair-sharing order), so
    the run ends its wave on the loop rather than failing, and the quota holds at every state of it."""
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f}} for f in FLAVORS),
        _cq("cq0", "co-a", 2, None, None, "LowerOrNewerEqualPriority", "Any", False, "BestEffortFIFO"),
        _cq("cq1", "co-a", 4, None, None, "Never", "Never", False, "BestEffortFIFO"),
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": f"lq{i}", "namespace": "ns"},
           "spec": {"clusterQueue": f"cq{i}"}} for i in range(2)),
    ]
    wave = [_workload("w0", "lq0", ("main", 2, 2), ("side", 1, 1)), _workload("w1", "lq0", ("main", 1, 2)),
            _workload("w2", "lq0", ("main", 1, 1)), _workload("w3", "lq1", ("main", 2, 3))]
    batches = [decode_batch(b, 0) for b in run(objects, [wave], check_quota, FAIR["default"])]
    preemptions = [(r.event.key, r.event.preemptor, r.event.reason) for b in batches for r in b
                   if isinstance(r.event, ev.WorkloadPreempted)]
    assert preemptions[:2] == [("ns/w3", "ns/w1", "InCohortReclamation"), ("ns/w1", "ns/w0", "InClusterQueue")]
    assert preemptions[2:4] == preemptions[:2]  # round again: the same two preemptions, in the same order


def test_a_fit_after_a_preemption_takes_the_victims_quota_in_the_same_cycle() -> None:
    """Found by the fair-sharing property above. co-b has 11 cpu: cq0 2, cq1 2, cq2 7; cq1's w1-0 borrows 7 of them
    (9 cpu), cq0 holds 1. Next wave, cq2's w2-2 takes the last free cpu, cq0's w2-1 (2 cpu) reclaims by preempting
    w1-0 under Fair Sharing, and cq1's w2-0 (1 cpu), nominated while a cpu was free, is then checked with w1-0 gone,
    as Kueue's ``fits`` removes every victim of the cycle first: it is admitted in the same batch, so the cohort
    holds 12 cpu until w1-0's job stops."""
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f}} for f in FLAVORS),
        _cq("cq0", "co-b", 2, None, None, "Never", "LowerPriority", False, "BestEffortFIFO"),
        _cq("cq1", "co-b", 2, None, None, "Never", "Never", False, "BestEffortFIFO"),
        _cq("cq2", "co-b", 7, None, None, "Never", "Never", False, "BestEffortFIFO"),
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": f"lq{i}", "namespace": "ns"},
           "spec": {"clusterQueue": f"cq{i}"}} for i in range(3)),
    ]

    def wl(name, queue, priority, *pod_sets):
        doc = _workload(name, queue, *pod_sets)
        doc["spec"]["priority"] = priority
        doc["metadata"]["creationTimestamp"] = f"2024-01-01T00:0{name[1]}:0{name[-1]}Z"  # w<wave>-<j>
        return doc

    waves = [[wl("w0-0", "lq0", 0, ("main", 1, 1))],
             [wl("w1-0", "lq1", 0, ("main", 3, 3)), wl("w1-1", "lq0", 0, ("main", 1, 1)),
              wl("w1-2", "lq0", 0, ("main", 1, 1))],
             [wl("w2-0", "lq1", 0, ("main", 1, 1)), wl("w2-1", "lq0", 1, ("main", 1, 1), ("side", 1, 1)),
              wl("w2-2", "lq2", 0, ("main", 1, 1))]]
    batches = [[r.event for r in decode_batch(b, 0)] for b in run(objects, waves, check_quota, FAIR["default"])]
    same = next(b for b in batches if any(isinstance(e, ev.WorkloadPreempted) for e in b))
    assert [(type(e).__name__, e.key) for e in same] == [
        ("QuotaReserved", "ns/w2-2"), ("WorkloadAdmitted", "ns/w2-2"),
        ("WorkloadPreempted", "ns/w1-0"), ("WorkloadPending", "ns/w2-1"),
        ("QuotaReserved", "ns/w2-0"), ("WorkloadAdmitted", "ns/w2-0")]


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
                               **({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}} if fair else {})}) for fair in (False, True)}
"""waitForPodsReady.blockAdmission, without and with Fair Sharing."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_block_admission_admits_one_workload_at_a_time(scenario, fair) -> None:
    from kueue_es.scheduler import blockadmission
    from kueue_es.scheduler.cycle import heads

    objects, waves = scenario
    config = BLOCKING[fair]
    state = ClusterState()
    t = T0

    def apply(batch):
        for e in batch:
            state.apply(ev.Record(state.offset + 1, e))

    def settle(seen: set) -> bool:
        """Decide until nothing is left to decide (True), or until a picture of this wave comes back (False):
        Kueue's fair sharing can go round a loop too, as ``run`` explains (a preemptor judged fair with a workload
        of its own queue counted out, which is then given back, preempts a borrower that the next cycle admits
        first again, here also across the pods of each becoming ready); every state of the loop has been checked
        by then."""
        for _ in range(500):
            held = blockadmission.holds_admission(state)
            batch = decide(state, config, now=state.time)
            if not batch:
                return True
            reserved = [d.key for d in batch if isinstance(d, ev.QuotaReserved)]
            assert len(reserved) <= 1, f"one batch reserved quota for {reserved}"
            assert not (held and reserved), f"{reserved} reserved while {blockadmission.not_ready(state)} not ready"
            apply(batch)
            check_quota(state)
            apply([ev.JobStopped(time=state.time, key=k) for k in sorted(state.workloads)
                   if state.workloads[k].evicted and state.workloads[k].reserving
                   and not state.workloads[k].job_stopped])
            now = picture(state)
            if now in seen:
                return False
            seen.add(now)
        raise AssertionError("the scheduler did not settle within 500 batches")

    def settle_until_all_ready():
        nonlocal t
        seen = {picture(state)}
        for _ in range(200):
            if not settle(seen):
                return  # a loop: the wave ends there
            waiting = blockadmission.not_ready(state)
            if not waiting:
                break
            t += 1_000
            apply([ev.PodsReadyChanged(time=t, key=k, ready=True) for k in waiting])
            now = picture(state)
            if now in seen:
                return
            seen.add(now)
        else:
            raise AssertionError("pods kept turning not ready")
        left = [e.wl.key for e in heads(state, config, state.time)
                if (c := e.wl.condition("QuotaReserved")) is not None and c.reason == blockadmission.REASON]
        assert not left, f"heads still waiting for pods though every pod is ready: {left}"

    apply([_upserted(t, d)
           for d in objects])
    for i, wave in enumerate(waves):
        t += 60_000
        apply([_upserted(t, d)
               for d in wave])
        settle_until_all_ready()
        running = sorted(k for k, w in state.workloads.items() if w.phase == "Admitted" and not w.evicted)
        t += 1_000
        apply([ev.WorkloadFinished(time=t, key=k) for k in running[i % 2::2]])
        settle_until_all_ready()
