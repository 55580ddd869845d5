"""Admission Fair Sharing is a function of the log and the configuration, whenever the scheduler looks.

* Folding the history at arbitrary points (the scheduler reading usages between events) gives bit-identical
  consumed usage to folding it once at the end.
* The facts survive a snapshot: a restored state decides exactly what the live one decides.
* Known values: n samples of a constant admitted usage move consumed along the half-life curve, and an
  admission adds its entry penalty.
"""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from kueue_es.scheduler import decide
from kueue_es.scheduler.afs import AfsFold, fold, lq_usage, queue_head, sampled_between
from kueue_es.scheduler.afs import local_queue_status as afs_status
from kueue_es.scheduler.config import AdmissionFairSharingConfig, load_config
from kueue_es.scheduler.config_record import document_of
from projections import snapshot
from projections.cluster import AFS_SEED_SCALE, ClusterState

T0 = 1_704_067_200_000
KQ = "kueue.x-k8s.io/v1beta2"
CONFIG = load_config({"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m",
                                               "resourceWeights": {"cpu": 2}}})


def _configured() -> ClusterState:
    """A state with :data:`CONFIG` recorded in force, as every scheduler loop records its own before it decides
    (with none recorded no history is kept)."""
    state = ClusterState()
    state.apply(ev.Record(0, ev.ConfigRecorded(time=T0, document=document_of(CONFIG), writer="test", id="config")))
    return state

histories = st.lists(
    st.tuples(st.integers(0, 900_000), st.sampled_from(["ns/a", "ns/b", "ns/c"]), st.sampled_from([1, -1]),
              st.integers(1, 4000), st.booleans()),
    min_size=1, max_size=40,
)


def _history(draws):
    t, out, held = T0, [], {}
    for dt, lq, sign, cpu, read in draws:
        t += dt
        if sign < 0:
            if not held.get(lq):
                continue
            cpu = held[lq].pop()
        else:
            held.setdefault(lq, []).append(cpu)
        out.append(((t, lq, sign, (("cpu", cpu),)), read))
    return out


@settings(max_examples=200, deadline=None)
@given(histories, st.sampled_from(["0s", "90s", "10m", "7h"]))
def test_fold_does_not_depend_on_when_it_is_read(draws, half_life) -> None:
    afs = AdmissionFairSharingConfig(usage_half_life_time=half_life, usage_sampling_interval="1m")
    hist = _history(draws)
    once, stepwise = AfsFold(afs), AfsFold(afs)
    for entry, read in hist:
        stepwise.apply(*entry)
        if read:
            for lq in ("ns/a", "ns/b", "ns/c"):
                stepwise.consumed(lq, entry[0] + 45_000)
    for entry, _ in hist:
        once.apply(*entry)
    end = hist[-1][0][0] + 3_600_000 if hist else T0
    for lq in ("ns/a", "ns/b", "ns/c"):
        assert once.consumed(lq, end) == stepwise.consumed(lq, end)


def test_a_zero_sampling_interval_is_kueues_default_of_five_minutes() -> None:
    for given_ in ("0s", "0", "-0", "+0s", "0.0h"):
        assert AfsFold(AdmissionFairSharingConfig(usage_sampling_interval=given_)).interval == 300_000
    assert AfsFold(AdmissionFairSharingConfig(usage_sampling_interval="1m")).interval == 60_000


def test_known_values() -> None:
    afs = AdmissionFairSharingConfig(usage_half_life_time="10m", usage_sampling_interval="1m")
    f = AfsFold(afs)
    f.apply(T0, "ns/a", 1, (("cpu", 2000),))
    penalty = 2 * (1 - 0.5 ** (1 / 10))
    assert f.consumed("ns/a", T0) == {"cpu": penalty}
    # 30 samples at 2 cpu: 2 + (penalty - 2) * 0.5^3
    assert abs(f.consumed("ns/a", T0 + 30 * 60_000)["cpu"] - (2 + (penalty - 2) / 8)) < 1e-12
    # not sampled yet: a reading between samples sees the last one
    assert f.consumed("ns/a", T0 + 30 * 60_000 + 59_999) == f.consumed("ns/a", T0 + 30 * 60_000)
    f.apply(T0 + 10 * 60_000, "ns/a", -1, (("cpu", 2000),))
    after = f.consumed("ns/a", T0 + 20 * 60_000)["cpu"]
    at_release = f.consumed("ns/a", T0 + 10 * 60_000)["cpu"]
    assert abs(after - at_release / 2) < 1e-12  # nothing admitted: halves every half-life


def _objects(draw_lqs):
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
            {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}},
            {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
                "namespaceSelector": {}, "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}}]
    for lq, weight in draw_lqs:
        spec: dict = {"clusterQueue": "cq"}
        if weight is not None:
            spec["fairSharing"] = {"weight": weight}
        objs.append({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": "ns"}, "spec": spec})
    return objs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.integers(1, 3),
                          st.integers(1, 20)), min_size=1, max_size=15),
       st.sampled_from([None, 2, "0.5"]))
def test_restored_state_decides_the_same(waves, weight) -> None:
    state = _configured()

    def apply(events):
        for e in events:
            state.apply(ev.Record(state.offset + 1, e))

    for d in _objects([("a", None), ("b", weight), ("c", None)]):
        obj = msgspec.convert(d, o.KueueObject)
        apply([ev.ObjectUpserted(time=T0, key=obj.key, obj=obj)])
    t = T0
    for i, (lq, prio, cpu, minutes) in enumerate(waves):
        t += minutes * 60_000
        w = {"apiVersion": KQ, "kind": "Workload",
             "metadata": {"name": f"w{i}", "namespace": "ns", "uid": f"u{i}", "creationTimestamp": "2024-01-01T00:00:00Z"},
             "spec": {"queueName": lq, "priority": prio, "podSets": [{"name": "main", "count": 1, "template": {
                 "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]}}
        obj = msgspec.convert(w, o.KueueObject)
        apply([ev.ObjectUpserted(time=t, key=obj.key, obj=obj)])
        running = sorted(k for k, x in state.workloads.items() if x.phase == "Admitted" and not x.evicted)
        apply([ev.WorkloadFinished(time=t, key=k) for k in running[: i % 3]])
        apply([ev.PodsReadyChanged(time=t, key=k, ready=True) for k in running[i % 3:]])
        apply([ev.JobStopped(time=t, key=k) for k, x in sorted(state.workloads.items()) if x.evicted and x.reserving])
        for _ in range(30):
            cold = snapshot.decode(snapshot.encode(state))
            assert cold.afs_history == state.afs_history
            batch = decide(state, CONFIG, now=t)
            assert msgspec.json.encode(batch) == msgspec.json.encode(decide(cold, CONFIG, now=t))
            if not batch:
                break
            apply(batch)
    f = fold(state, CONFIG)
    for lq in ("ns/a", "ns/b", "ns/c"):
        assert lq_usage(state, CONFIG, lq, "cq", t, f) >= 0


# --- the LocalQueue's status.fairSharing, and its warm start from it ----------------------------------------------

MIN = 60_000


def _lq_state(status: dict | None = None, scope: bool = True) -> ClusterState:
    """ClusterQueue "cq" (4 cpu, UsageBasedAdmissionFairSharing unless ``scope`` is False) and LocalQueue ns/a,
    first seen at T0 carrying ``status``, under :data:`CONFIG` recorded."""
    state = _configured()
    for d in _objects([("a", None)]):
        if d["kind"] == "LocalQueue" and status is not None:
            d["status"] = status
        if d["kind"] == "ClusterQueue" and not scope:
            del d["spec"]["admissionScope"]
        obj = msgspec.convert(d, o.KueueObject)
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0, key=obj.key, obj=obj)))
    return state


def _admit(state: ClusterState, name: str, cpu: str, t: int) -> None:
    w = msgspec.convert({"apiVersion": KQ, "kind": "Workload", "metadata": {
        "name": name, "namespace": "ns", "uid": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"queueName": "a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}, o.KueueObject)
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "f1"}, count=1, resource_usage={"cpu": cpu})])
    for e in (ev.ObjectUpserted(time=t, key=w.key, obj=w),
              ev.QuotaReserved(time=t, key=w.key, admission=admission, cycle=1, input=0),
              ev.WorkloadAdmitted(time=t, key=w.key, cycle=1, input=0)):
        state.apply(ev.Record(state.offset + 1, e))


def _shown(state: ClusterState, now: int) -> tuple[dict, str]:
    s = afs_status(state, CONFIG, "ns/a", now)
    assert s is not None and s["weightedShare"] == 0
    return s["admissionFairSharingStatus"]["consumedResources"], s["admissionFairSharingStatus"]["lastUpdate"]


def test_a_new_local_queue_shows_nothing_consumed_sampled_every_interval_from_when_it_appeared() -> None:
    """Kueue's LocalQueue controller writes ``{weightedShare: 0, admissionFairSharingStatus: {consumedResources,
    lastUpdate}}`` at its first reconcile and again every ``usageSamplingInterval``."""
    state = _lq_state()
    assert _shown(state, T0) == ({}, format_time(T0))
    assert _shown(state, T0 + 150_000) == ({}, format_time(T0 + 2 * MIN))


def test_an_admission_settles_into_the_status_then_samples_decay_it_towards_the_admitted_usage() -> None:
    """2 cpu admitted at T0+90s: its entry penalty 2·(1 − 0.5^(1/10)) at once; 30 samples later (half-life 10m)
    2 + (penalty − 2)/8 — cpu in cores, decimal SI rounded down to nano-units."""
    state = _lq_state()
    t = T0 + 90_000
    _admit(state, "w", "2", t)
    penalty = 2 * (1 - 0.5 ** (1 / 10))
    consumed, last = _shown(state, t + 59_999)
    assert (consumed, last) == ({"cpu": f"{int(penalty * 1e9)}n"}, format_time(t))
    consumed, last = _shown(state, t + 30 * MIN + 1)
    assert last == format_time(t + 30 * MIN)
    assert abs(int(consumed["cpu"].rstrip("n")) / 1e9 - (2 + (penalty - 2) / 8)) < 1e-8


def test_written_for_active_local_queues_only() -> None:
    """Kueue samples every active LocalQueue, none while it is stopped or its ClusterQueue inactive, and nothing
    without Admission Fair Sharing (whatever the ClusterQueue's admission mode: see test_afs_tracking)."""
    assert afs_status(_lq_state(scope=False), CONFIG, "ns/a", T0) is not None
    assert afs_status(_lq_state(), load_config({}), "ns/a", T0) is None
    state = _lq_state()
    lq = state.local_queues["ns/a"]
    stopped = msgspec.structs.replace(lq, spec=msgspec.structs.replace(lq.spec, stop_policy="Hold"))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0 + MIN, key=lq.key, obj=stopped)))
    assert afs_status(state, CONFIG, "ns/a", T0 + MIN) is None


def test_a_local_queue_first_seen_with_persisted_consumed_usage_starts_from_it() -> None:
    """Kueue v0.20 (#12891) seeds a LocalQueue's consumed usage from its persisted status when it first meets it
    (a restart, a takeover): 4 cpu, nothing admitted, halve every half-life (10m), and order the queue by it."""
    state = _lq_state({"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "4"}, "lastUpdate": "2023-01-01T00:00:00Z"}}})
    assert _shown(state, T0) == ({"cpu": "4"}, format_time(T0))
    assert _shown(state, T0 + 10 * MIN) == ({"cpu": "2"}, format_time(T0 + 10 * MIN))
    assert lq_usage(state, CONFIG, "ns/a", "cq", T0 + 10 * MIN) == 2 * 2  # cpu weighs 2
    # seen again (our own status write coming back): no second seed
    lq = state.local_queues["ns/a"]
    again = msgspec.structs.replace(lq, status={"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "100"}, "lastUpdate": "2024-01-01T00:00:00Z"}}})
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0 + 11 * MIN, key=lq.key, obj=again)))
    assert _shown(state, T0 + 20 * MIN) == ({"cpu": "1"}, format_time(T0 + 20 * MIN))


def test_a_large_persisted_usage_seeds_a_state_that_still_snapshots_and_folds() -> None:
    """A takeover from a Kueue whose LocalQueue consumed 64Gi of memory (over 2**64 nano-units, more than a
    snapshot's msgpack holds) and an absurd 1e400 cpu: the state still snapshots and restores to the same digest,
    the memory usage shows as persisted, and the absurd value is held to int64 rather than crashing the fold."""
    state = _lq_state({"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"memory": "64Gi", "cpu": "1e400"}, "lastUpdate": "2023-01-01T00:00:00Z"}}})
    restored = snapshot.restore(snapshot.take(state))
    assert snapshot.digest(restored) == snapshot.digest(state)
    shown, _ = _shown(state, T0)
    assert shown["memory"] == str(64 * 2**30)
    assert lq_usage(state, CONFIG, "ns/a", "cq", T0) > 0


def test_the_local_queues_sampled_between_two_times() -> None:
    """What the status writer asks as the log's time moves: a LocalQueue's samples fall every interval from its
    first appearance (or last update), so one is due in (T0+30s, T0+60s] and none in (T0+60s, T0+90s]."""
    state = _lq_state()
    assert sampled_between(state, CONFIG, T0 + 30_000, T0 + MIN) == ["ns/a"]
    assert sampled_between(state, CONFIG, T0 + MIN, T0 + 90_000) == []
    assert sampled_between(state, CONFIG, T0 + MIN, T0 + 3 * MIN) == ["ns/a"]
    assert sampled_between(state, load_config({}), T0, T0 + 3 * MIN) == []


def test_restored_from_a_snapshot_older_than_the_seeds_every_local_queue_is_seeded_from_its_status() -> None:
    """A version-45 snapshot holds no seeds: restored, each LocalQueue starts from the status it shows, as Kueue
    does at a restart; a current snapshot is taken as it is."""
    state = _lq_state({"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "3"}, "lastUpdate": "2023-01-01T00:00:00Z"}}})
    snap = snapshot.take(state)
    assert snapshot.restore(snap).afs_history == state.afs_history
    old = msgspec.structs.replace(snap, version=45, afs_queues=[], afs_history=[
        (t, lq, sign, list(u)) for t, lq, sign, u in state.afs_entries() if sign != 0])
    restored = snapshot.restore(old)
    seeded = [(lq, sign, list(u)) for _, lq, sign, u in restored.afs_entries()]
    assert seeded == [("ns/a", 0, [("cpu", 3 * AFS_SEED_SCALE)])]
    assert _shown(restored, T0) == ({"cpu": "3"}, format_time(T0))


# --- the order: LocalQueue usage before priority (Kueue v0.20's #16241 regression area) ---------------------------


def _queue(state: ClusterState, name: str, lq: str, priority: int, t: int) -> None:
    w = msgspec.convert({"apiVersion": KQ, "kind": "Workload", "metadata": {
        "name": name, "namespace": "ns", "uid": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"queueName": lq, "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}, o.KueueObject)
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=t, key=w.key, obj=w)))


def test_the_less_used_local_queue_goes_first_whatever_the_priorities_and_when_the_scope_was_set() -> None:
    """Kueue v0.20 fixed workloads taken in priority order under Admission Fair Sharing (#16241; its root cause is
    not in the store). Here the head is chosen afresh from the ClusterQueue's spec and the usages each time it is
    asked for: a high-priority workload of the busier LocalQueue waits behind a low-priority one of the idle
    LocalQueue, also when the ClusterQueue gains its admissionScope after both were queued."""
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m",
                                         "resourceWeights": {"cpu": 2}}}
    for scope_later in (False, True):
        state = ClusterState()  # the recorded Configuration turns Admission Fair Sharing on: every LocalQueue sampled
        state.apply(ev.Record(1, ev.ConfigRecorded(time=T0, document=document, writer="test", id="afs")))
        for d in _objects([("a", None)]):
            if d["kind"] == "ClusterQueue" and scope_later:
                del d["spec"]["admissionScope"]
            obj = msgspec.convert(d, o.KueueObject)
            state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0, key=obj.key, obj=obj)))
        lq_b = msgspec.convert({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "b", "namespace": "ns"},
                                "spec": {"clusterQueue": "cq"}}, o.KueueObject)
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0, key=lq_b.key, obj=lq_b)))
        _admit(state, "busy", "2", T0 + MIN)
        _queue(state, "hi", "a", 100, T0 + 5 * MIN)
        _queue(state, "lo", "b", 0, T0 + 5 * MIN)
        if scope_later:
            assert queue_head(state, CONFIG, "cq", T0 + 6 * MIN) == "ns/hi"  # no scope: priority
            cq = next(d for d in _objects([]) if d["kind"] == "ClusterQueue")
            obj = msgspec.convert(cq, o.KueueObject)
            state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0 + 6 * MIN, key=obj.key, obj=obj)))
        assert queue_head(state, CONFIG, "cq", T0 + 6 * MIN) == "ns/lo"
