"""Which LocalQueues Admission Fair Sharing tracks, and when the scheduler wakes for its samples.

* Kueue's LocalQueue controller samples every active LocalQueue while the Configuration has
  ``admissionFairSharing`` (v0.20 ``pkg/controller/core/localqueue_controller.go``), whatever its ClusterQueue's
  admission mode: one whose ClusterQueue does not order by it decays towards its admitted usage, with no entry
  penalty, and shows it in its status.
* The history is kept only for the LocalQueues that need it, dropped for a deleted one (Kueue drops its ledger
  entry), and the admitted usage it folds is always what the counted workloads hold, however the configuration,
  ClusterQueues and LocalQueues change; a snapshot restores it as a full fold has it.
* The scheduler's next deadline includes the next sample that moves a LocalQueue's shown usage, and none once
  the samples cannot move it any more.
"""

from __future__ import annotations

import msgspec
import pytest
from afshelp import KQ, MIN, T0, cluster_queue, configure, document, reserve
from afshelp import apply as _apply
from afshelp import local_queue as _local_queue
from afshelp import upsert as _upsert
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.quantity import parse_quantity
from events.timefmt import format_time
from kueue_es.scheduler.afs import AfsFold, fold, lq_usage, next_sample
from kueue_es.scheduler.afs import local_queue_status as afs_status
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.reconcile import next_deadline
from projections import snapshot
from projections.afs_ledger import AfsCheckpoint
from projections.cluster import AFS_SEED_SCALE, ClusterState

AFS = {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}
CONFIG = load_config({"admissionFairSharing": AFS})


def _document(afs: bool = True, anchor: bool = True) -> dict:
    return document(AFS if afs else None, anchor)


def _configure(state: ClusterState, t: int, afs: bool = True, anchor: bool = True) -> None:
    configure(state, t, AFS if afs else None, anchor)


def _cluster_queue(name: str, usage_based: bool) -> dict:
    return cluster_queue(name, usage_based, 100)


def _state(usage_based: bool = False, afs: bool = True) -> ClusterState:
    """ns/a of ClusterQueue cq (ordering by Admission Fair Sharing only if ``usage_based``), first seen at T0,
    under a recorded Configuration with ``admissionFairSharing`` when ``afs``."""
    state = ClusterState()
    if afs:
        _configure(state, T0)
    _upsert(state, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, T0)
    _upsert(state, {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
    _upsert(state, _cluster_queue("cq", usage_based), T0)
    _upsert(state, _local_queue("a", "cq"), T0)
    return state


def _reserve(state: ClusterState, name: str, lq: str, cq: str, cpu: int, t: int, admit: bool = True) -> None:
    reserve(state, name, lq, cq, str(cpu), t, admit)


def _cpu(consumed: dict) -> float:
    return float(parse_quantity(consumed["cpu"]))


def _shown(state: ClusterState, now: int) -> tuple[dict, str] | None:
    s = afs_status(state, CONFIG, "ns/a", now)
    if s is None:
        return None
    return s["admissionFairSharingStatus"]["consumedResources"], s["admissionFairSharingStatus"]["lastUpdate"]


# --- LocalQueues of a ClusterQueue that does not order by Admission Fair Sharing ----------------------------------


def test_a_local_queue_whose_cluster_queue_does_not_order_by_it_shows_its_usage_decaying_towards_the_admitted() -> None:
    """2 cpu admitted at T0+90s in cq (no admissionScope): no entry penalty, so nothing consumed until the next
    sample of ns/a's grid (every minute from T0) at T0+2m, which takes 2·(1 − 0.5^(1/10)); 30 samples later the
    distance to 2 cpu is an eighth of what it was."""
    state = _state()
    assert _shown(state, T0) == ({}, format_time(T0))
    t = T0 + 90_000
    _reserve(state, "w", "a", "cq", 2, t)
    assert _shown(state, t + 29_999) == ({}, format_time(T0 + MIN))
    alpha = 1 - 0.5 ** (1 / 10)
    assert _shown(state, T0 + 2 * MIN) == ({"cpu": f"{int(2 * alpha * 1e9)}n"}, format_time(T0 + 2 * MIN))
    consumed, last = _shown(state, T0 + 32 * MIN)  # type: ignore[misc]
    assert last == format_time(T0 + 32 * MIN)
    assert abs(_cpu(consumed) - (2 - 2 * (1 - alpha) / 8)) < 1e-8
    assert lq_usage(state, CONFIG, "ns/a", "cq", T0 + 2 * MIN) == 2 * alpha, "no pending entry penalty either"


def test_under_the_reservation_anchor_such_a_local_queue_still_counts_only_admitted_workloads() -> None:
    """Kueue moves the anchor only for ClusterQueues that order by usage (its
    ``TestLocalQueueReconcileSamplesAnchoredUsage``): a workload holding quota in cq without admission counts for
    nothing there, and enters at its admission."""
    state = _state()
    _reserve(state, "w", "a", "cq", 4, T0 + MIN, admit=False)
    assert _shown(state, T0 + 10 * MIN) == ({}, format_time(T0 + 10 * MIN))
    _apply(state, ev.WorkloadAdmitted(time=T0 + 10 * MIN, key="ns/w", cycle=1, input=0))
    consumed, _ = _shown(state, T0 + 20 * MIN)  # type: ignore[misc]
    assert abs(_cpu(consumed) - 2) < 1e-8  # one half-life towards 4 cpu


def test_without_admission_fair_sharing_configured_such_a_local_queue_has_no_history() -> None:
    """Nothing samples it then (and nothing orders by it): no seed, no usage, no status."""
    state = _state(afs=False)
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    assert state.afs_entries() == []
    assert _shown(state, T0 + 2 * MIN) is None


# --- the history kept ------------------------------------------------------------------------------------------


def test_a_deleted_local_queue_s_history_is_dropped_and_a_recreated_one_starts_from_its_status() -> None:
    """Kueue's LocalQueue controller drops the ledger entry of a deleted LocalQueue; recreated, it is seeded from
    the status it carries. The scheduler's memoised fold follows (it folded the dropped entries)."""
    state = _state(usage_based=True)
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    fold(state, CONFIG)
    _apply(state, ev.ObjectDeleted(time=T0 + 2 * MIN, key="ns/a", kind="LocalQueue"))
    assert state.afs_entries() == []
    _apply(state, ev.WorkloadFinished(time=T0 + 3 * MIN, key="ns/w"))
    assert state.afs_entries() == [], "a workload of a deleted LocalQueue leaves nothing behind"
    _upsert(state, _local_queue("a", "cq", consumed_cpu=3), T0 + 4 * MIN)
    assert [(lq, sign, list(u)) for _, lq, sign, u in state.afs_entries()] == [("ns/a", 0, [("cpu", 3 * AFS_SEED_SCALE)])]
    assert _shown(state, T0 + 4 * MIN) == ({"cpu": "3"}, format_time(T0 + 4 * MIN))


def test_turning_admission_fair_sharing_off_drops_the_history_it_alone_needed_and_on_again_restarts_it() -> None:
    """As on Kueue's restart with the changed Configuration: off, a LocalQueue of a ClusterQueue that does not
    order by it needs no history; on again, it starts from its persisted status and counts what it holds."""
    state = _state()
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    _configure(state, T0 + 2 * MIN, afs=False)
    assert state.afs_entries() == []
    lq = msgspec.convert(_local_queue("a", "cq", consumed_cpu=1), o.KueueObject)
    _apply(state, ev.ObjectUpserted(time=T0 + 3 * MIN, key=lq.key, obj=lq))  # its status, as we last wrote it
    _configure(state, T0 + 4 * MIN)
    assert [(t, lq, sign) for t, lq, sign, _ in state.afs_entries()] == [(T0 + 4 * MIN, "ns/a", 0), (T0 + 4 * MIN, "ns/a", 2)]
    assert _shown(state, T0 + 4 * MIN) == ({"cpu": "1"}, format_time(T0 + 4 * MIN))
    consumed, _ = _shown(state, T0 + 14 * MIN)  # type: ignore[misc]
    assert abs(_cpu(consumed) - 1.5) < 1e-8  # one half-life from 1 towards 2


def test_a_cluster_queue_ordering_by_it_keeps_no_history_while_the_configuration_has_it_off() -> None:
    """Its admission mode alone does not make Kueue sample or order by it: off, the history goes (nothing could
    compact it); on again, the LocalQueue starts from its persisted status and counts what it holds, as on
    Kueue's restart; off and on once more, the same."""
    state = _state(usage_based=True)
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    assert state.afs_entries()
    _configure(state, T0 + 2 * MIN, afs=False)
    assert state.afs_entries() == []
    _reserve(state, "w2", "a", "cq", 3, T0 + 3 * MIN)
    assert state.afs_entries() == [], "nothing recorded while it is off"
    lq = msgspec.convert(_local_queue("a", "cq", consumed_cpu=1), o.KueueObject)
    _apply(state, ev.ObjectUpserted(time=T0 + 3 * MIN, key=lq.key, obj=lq))  # its status, as we last wrote it
    for at in (T0 + 4 * MIN, T0 + 6 * MIN):
        _configure(state, at)
        assert [(t, lq, sign, list(u)) for t, lq, sign, u in state.afs_entries()] == [
            (at, "ns/a", 0, [("cpu", AFS_SEED_SCALE)]), (at, "ns/a", 2, [("cpu", 2000)]),
            (at, "ns/a", 2, [("cpu", 3000)])]
        assert _shown(state, at) == ({"cpu": "1"}, format_time(at))
        _configure(state, at + MIN, afs=False)
        assert state.afs_entries() == []


def test_history_a_snapshot_kept_under_a_configuration_without_it_is_dropped_on_restore() -> None:
    """Snapshots written before session 32's rule (version 49 on main, 47-48 before) kept the history of a ClusterQueue
    ordering by it under a recorded Configuration with it off: restored, that history goes
    (:meth:`ClusterState.untrack_afs`), as a full fold keeps none."""
    state = _state(usage_based=True, afs=False)
    _configure(state, T0, afs=False)
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    assert state.afs_entries() == []
    snap = snapshot.take(state)
    kept = [("ns/a", None, [(T0, 0, []), (T0 + MIN, 1, [("cpu", 2000)])])]
    restored = snapshot.restore(msgspec.structs.replace(snap, afs_queues=kept))
    assert restored.afs_history == state.afs_history
    assert snapshot.digest(restored) == snapshot.digest(state)


def test_history_a_snapshot_kept_with_no_configuration_recorded_is_dropped_on_restore() -> None:
    """Snapshots written before version 50 kept the history of a ClusterQueue ordering by it while no Configuration
    was recorded: restored, it goes, as a full fold keeps none; the first Configuration turning it on then starts
    the LocalQueues as the full fold does."""
    state = _state(usage_based=True, afs=False)
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    snap = msgspec.structs.replace(snapshot.take(state), version=49,
                                   afs_queues=[("ns/a", None, [(T0, 0, []), (T0 + MIN, 1, [("cpu", 2000)])])])
    restored = snapshot.restore(snap)
    assert restored.afs_history == state.afs_history == {}
    for s in (state, restored):
        _configure(s, T0 + 2 * MIN)
    assert restored.afs_entries() == state.afs_entries() != []
    assert snapshot.digest(restored) == snapshot.digest(state)


def test_a_version_49_snapshot_with_history_older_than_its_configuration_is_refused() -> None:
    """Its writer may have kept that history while no Configuration was recorded (and folded it under the first
    one), where version 50 starts every LocalQueue afresh under the first: the snapshot cannot say, so it is
    refused (its reader folds the log instead). History of the configuration's own time, or later, restores."""
    state = _state(usage_based=True, afs=False)
    _configure(state, T0 + MIN)
    _reserve(state, "w", "a", "cq", 2, T0 + 2 * MIN)
    snap = snapshot.take(state)
    assert snap.afs_queues[0][2][0][0] == T0 + MIN  # seeded at the Configuration
    assert snapshot.restore(msgspec.structs.replace(snap, version=49)).afs_history == state.afs_history
    older = [("ns/a", None, [(T0, 0, []), (T0 + 2 * MIN, 1, [("cpu", 2000)])])]
    with pytest.raises(InvalidInput, match="history recorded before its Configuration"):
        snapshot.restore(msgspec.structs.replace(snap, version=49, afs_queues=older))
    checkpointed = [("ns/a", AfsCheckpoint(T0 + 2 * MIN, 600_000.0, 60_000, (), (("cpu", 2.0),), T0 + 2 * MIN, T0),
                     [])]
    with pytest.raises(InvalidInput, match="history recorded before its Configuration"):
        snapshot.restore(msgspec.structs.replace(snap, version=49, afs_queues=checkpointed))
    assert snapshot.restore(msgspec.structs.replace(snap, afs_queues=older)).afs_history["ns/a"][0][0] == T0


def test_restored_from_a_version_46_snapshot_the_history_is_kept_only_where_needed() -> None:
    """A version-46 snapshot held a seed for every LocalQueue ever seen, and no admitted usage where the ClusterQueue
    does not order by Admission Fair Sharing: restored, a gone LocalQueue's entries go, and one of such a
    ClusterQueue starts at the restore from its status, counting what it holds."""
    state = _state()
    _reserve(state, "w", "a", "cq", 2, T0 + MIN)
    snap = snapshot.take(state)
    assert snapshot.restore(snap).afs_history == state.afs_history
    old = msgspec.structs.replace(snap, version=46, afs_queues=[], afs_history=[
        (T0, "ns/a", 0, []), (T0, "ns/gone", 0, [("cpu", 5000)])])
    restored = snapshot.restore(old)
    assert [(t, lq, sign, list(u)) for t, lq, sign, u in restored.afs_entries()] == [
        (state.time, "ns/a", 0, []), (state.time, "ns/a", 2, [("cpu", 2000)])]


def _observed_admitted(name: str, cpu: int) -> dict:
    """A Workload first seen already admitted in cq (a takeover, or a restart reading the cluster)."""
    t = format_time(T0)
    usage = {"cpu": str(cpu)}
    return {"apiVersion": KQ, "kind": "Workload", "metadata": {
        "name": name, "namespace": "ns", "uid": name, "creationTimestamp": t},
        "spec": {"queueName": "a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": usage}}]}}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "f1"}, "count": 1, "resourceUsage": usage}]},
            "conditions": [{"type": t_, "status": "True", "reason": t_, "message": "", "lastTransitionTime": t}
                           for t_ in ("QuotaReserved", "Admitted")]}}


def test_a_workload_seen_already_admitted_enters_without_an_entry_penalty_whichever_is_seen_first() -> None:
    """Kueue pushes an entry penalty only when its scheduler admits a workload; one it finds admitted (a restart
    rebuilding its cache) only adds its usage. So the order in which the LocalQueue and the Workload are first
    seen changes nothing: 4 cpu, three half-lives later, is 3.5 consumed either way."""
    shown = []
    for lq_first in (True, False):
        state = ClusterState()
        _configure(state, T0)
        _upsert(state, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, T0)
        _upsert(state, {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
        _upsert(state, _cluster_queue("cq", usage_based=True), T0)
        objects = [_local_queue("a", "cq"), _observed_admitted("w", 4)]
        for d in objects if lq_first else objects[::-1]:
            _upsert(state, d, T0)
        assert [sign for _, _, sign, _ in state.afs_entries()] == [0, 2]
        consumed, _ = _shown(state, T0 + 30 * MIN)  # type: ignore[misc]
        shown.append(_cpu(consumed))
    assert abs(shown[0] - 3.5) < 1e-8 and abs(shown[1] - 3.5) < 1e-8


def test_a_local_queue_first_seen_with_admitted_usage_shows_it_at_weight_zero() -> None:
    """Kueue's localqueue_controller_test.go TestLocalQueueReconcile, "local queue with uninitialized cache
    and no prior status seeds empty usage": a LocalQueue without a persisted consumed usage whose workload is
    already admitted (4 cpu) is first sampled with that usage at weight zero, so its status lists ``cpu: "0"``
    (not an empty map, as for one with nothing admitted), whichever of the two is seen first and whether or
    not its ClusterQueue orders by usage; the next sample moves it as before."""
    for usage_based in (False, True):
        for lq_first in (True, False):
            state = ClusterState()
            _configure(state, T0)
            _upsert(state, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, T0)
            _upsert(state, {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
            _upsert(state, _cluster_queue("cq", usage_based=usage_based), T0)
            objects = [_local_queue("a", "cq"), _observed_admitted("w", 4)]
            for d in objects if lq_first else objects[::-1]:
                _upsert(state, d, T0)
            assert _shown(state, T0) == ({"cpu": "0"}, format_time(T0))
            consumed, _ = _shown(state, T0 + MIN)  # type: ignore[misc]
            assert abs(_cpu(consumed) - 4 * (1 - 0.5 ** (1 / 10))) < 1e-8


# --- what a LocalQueue's appearance costs ------------------------------------------------------------------------


def _counting(monkeypatch) -> list[str]:
    """Records each workload :meth:`ClusterState._afs_counted` is asked about (a slotted state: patched on the class)."""
    asked: list[str] = []
    counted = ClusterState._afs_counted

    def spy(self: ClusterState, wl) -> bool:
        asked.append(wl.key)
        return counted(self, wl)

    monkeypatch.setattr(ClusterState, "_afs_counted", spy)
    return asked


def test_a_new_local_queue_looks_at_no_workload_where_admission_fair_sharing_is_off(monkeypatch) -> None:
    """Nothing of its ClusterQueue can enter a history that is not kept: onboarding a namespace into a busy
    ClusterQueue must not walk the workloads holding its quota."""
    state = _state(afs=False)
    for i in range(5):
        _reserve(state, f"w{i}", "a", "cq", 1, T0 + MIN)
    asked = _counting(monkeypatch)
    _upsert(state, _local_queue("b", "cq"), T0 + 2 * MIN)
    assert asked == []
    assert state.afs_entries() == []


def test_a_new_local_queue_looks_only_at_its_own_workloads_where_admission_fair_sharing_is_on(monkeypatch) -> None:
    """Only its own workloads could start being counted (none could be while it was missing); the others of the
    ClusterQueue are as they were. Its one admitted workload enters its usage with no entry penalty to settle."""
    state = _state(usage_based=True)
    for i in range(5):
        _reserve(state, f"w{i}", "a", "cq", 1, T0 + MIN)
    _reserve(state, "mine", "b", "cq", 3, T0 + MIN)  # admitted before its LocalQueue is seen
    asked = _counting(monkeypatch)
    _upsert(state, _local_queue("b", "cq"), T0 + 2 * MIN)
    assert asked == ["ns/mine"]
    assert [(sign, list(u)) for _, sign, u in state.afs_history["ns/b"]] == [(0, []), (2, [("cpu", 3000)])]


def test_with_no_configuration_recorded_none_is_kept_and_the_first_one_starts_every_local_queue() -> None:
    """With no Configuration recorded whatever reads the log reads Kueue's defaults, Admission Fair Sharing off
    (every scheduler loop records its own before it decides): so no history is kept, not even for a ClusterQueue
    ordering by it, however many workloads pass. The first Configuration turning it on starts every LocalQueue as
    Kueue's start does: seeded from its status at that point, counting what it holds (no entry penalty for what is
    already admitted), then what it admits."""
    state = _state(usage_based=True, afs=False)
    _upsert(state, _local_queue("b", "cq", consumed_cpu=3), T0)
    for i in range(40):
        _reserve(state, f"old{i}", "a", "cq", 1, T0 + i)
        _apply(state, ev.WorkloadFinished(time=T0 + i, key=f"ns/old{i}"))
    _reserve(state, "w1", "a", "cq", 1, T0 + MIN)
    assert state.afs_history == {}
    _configure(state, T0 + 2 * MIN)
    _reserve(state, "w2", "a", "cq", 2, T0 + 3 * MIN)
    assert [(t, lq, sign, list(u)) for t, lq, sign, u in state.afs_entries()] == [
        (T0 + 2 * MIN, "ns/a", 0, []), (T0 + 2 * MIN, "ns/a", 2, [("cpu", 1000)]),
        (T0 + 3 * MIN, "ns/a", 1, [("cpu", 2000)]), (T0 + 2 * MIN, "ns/b", 0, [("cpu", 3000)])]


# --- the admitted usage folded is what the counted workloads hold, whatever changes -------------------------------

ops = st.lists(st.one_of(
    st.tuples(st.just("config"), st.booleans(), st.booleans()),
    st.tuples(st.just("cq"), st.sampled_from(["cq1", "cq2"]), st.booleans()),
    st.tuples(st.just("lq"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["cq1", "cq2"]),
              st.sampled_from([None, 1, 7])),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("reserve"), st.sampled_from(["a", "b", "c"]), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("admit"), st.integers(0, 30)),
    st.tuples(st.just("finish"), st.integers(0, 30)),
), min_size=1, max_size=30)


def _run(state: ClusterState, script, t: int) -> list[int]:
    """Applies ``script``; returns the log offsets after each step."""
    cuts, made = [], []
    for step in script:
        t += MIN
        match step:
            case ("config", on, anchor):
                _configure(state, t, on, anchor)
            case ("cq", name, usage_based):
                _upsert(state, _cluster_queue(name, usage_based), t)
            case ("lq", name, cq, consumed):
                _upsert(state, _local_queue(name, cq, consumed), t)
            case ("delete", name):
                _apply(state, ev.ObjectDeleted(time=t, key=f"ns/{name}", kind="LocalQueue"))
            case ("reserve", lq, cpu, admit):
                known = state.local_queues.get(f"ns/{lq}")
                name = f"w{len(made)}"
                made.append(name)
                _reserve(state, name, lq, known.spec.cluster_queue if known else "cq1", cpu, t, admit)
            case ("admit", i) if made:
                wl = state.workloads.get(f"ns/{made[i % len(made)]}")
                if wl is not None and wl.phase == "QuotaReserved":
                    _apply(state, ev.WorkloadAdmitted(time=t, key=wl.key, cycle=1, input=0))
            case ("finish", i) if made:
                wl = state.workloads.get(f"ns/{made[i % len(made)]}")
                if wl is not None and wl.reserving:
                    _apply(state, ev.WorkloadFinished(time=t, key=wl.key))
        _check_admitted(state)
        cuts.append(state.offset)
    return cuts


def _check_admitted(state: ClusterState) -> None:
    f = AfsFold(CONFIG.admission_fair_sharing)  # type: ignore[arg-type]
    for entry in state.afs_entries():
        f.apply(*entry)
    configured = state.config is not None and "admissionFairSharing" in state.config.document

    def orders(cq: str) -> bool:
        obj = state.cluster_queues.get(cq)
        scope = obj.spec.admission_scope if obj is not None else None
        return scope is not None and scope.admission_mode == "UsageBasedAdmissionFairSharing"

    def tracks(cq: str) -> bool:  # only while a recorded Configuration turns it on, whatever the mode
        return configured

    held: dict[str, float] = {}
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        lq = f"{wl.namespace}/{wl.queue_name}"
        obj = state.local_queues.get(lq)
        if obj is None or obj.spec.cluster_queue != wl.cluster_queue:
            continue  # Kueue reads a LocalQueue's usage off the ClusterQueue holding its workloads' quota
        anchored = wl.phase == "Admitted" or (wl.phase == "QuotaReserved" and orders(wl.cluster_queue)
                                               and state.afs_anchor_at_reservation)
        if anchored and tracks(wl.cluster_queue):
            held[lq] = held.get(lq, 0.0) + sum(v for fr, v in wl.usage.items()) / 1000
    tracked = {k for k, lq in state.local_queues.items() if tracks(lq.spec.cluster_queue)}
    assert {e[1] for e in state.afs_entries()} <= tracked, "history only for LocalQueues that need it"
    for lq in sorted(tracked):
        q = f.queues.get(lq)
        admitted = q.admitted.get("cpu", 0.0) if q is not None else 0.0
        assert abs(admitted - held.get(lq, 0.0)) < 1e-9, lq


class _Recording(ClusterState):
    """A state that keeps the records it folded."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[ev.Record] = []

    def apply(self, record: ev.Record) -> None:  # type: ignore[override]
        self.records.append(record)
        super().apply(record)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.integers(0, 29))
def test_the_history_folds_to_what_the_counted_workloads_hold_and_restores_as_folded(script, cut) -> None:
    """Random changes of the configuration (Admission Fair Sharing, the reservation anchor), of ClusterQueues'
    admission modes and of LocalQueues (created, moved, deleted, recreated with a status) among reservations,
    admissions and finishes: after each, the admitted usage the history folds to per LocalQueue is what its
    counted workloads hold, and only LocalQueues that need it have history; a snapshot taken at any point and
    folded on from there ends as the full fold."""
    state = _Recording()
    _upsert(state, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, T0)
    _upsert(state, {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
    cuts = _run(state, script, T0)
    at = cuts[min(cut, len(cuts) - 1)]
    partial = ClusterState()
    for r in state.records:
        if r.offset <= at:
            partial.apply(r)
    resumed = snapshot.decode(snapshot.encode(partial))
    assert resumed.afs_history == partial.afs_history
    for r in state.records:
        if r.offset > at:
            resumed.apply(r)
    assert resumed.afs_history == state.afs_history
    assert snapshot.digest(resumed) == snapshot.digest(state)


# --- waking for samples ----------------------------------------------------------------------------------------


def test_the_next_deadline_is_the_next_sample_while_one_moves_the_shown_usage() -> None:
    """2 cpu admitted at T0+90s: samples move ns/a's usage towards 2 cpu every minute from its grid, so the
    scheduler wakes at each; a new LocalQueue with nothing admitted, or one whose usage shows what it converges
    to, wakes nothing."""
    state = _state()
    assert next_deadline(state, CONFIG) is None, "nothing to decay: no wake"
    _reserve(state, "w", "a", "cq", 2, T0 + 90_000)
    assert next_deadline(state, CONFIG) == T0 + 2 * MIN  # before its waitForPodsReady timeout (T0+31.5m)
    _apply(state, ev.ClockTicked(time=T0 + 2 * MIN, id="tick"))
    assert next_deadline(state, CONFIG) == T0 + 3 * MIN
    _apply(state, ev.ClockTicked(time=T0 + 3000 * MIN, id="tick-late"))  # 300 half-lives: 2 cpu exactly
    assert _shown(state, T0 + 3000 * MIN)[0] == {"cpu": "2"}  # type: ignore[index]
    assert next_sample(state, CONFIG) is None
    assert next_sample(state, load_config({})) is None, "no Admission Fair Sharing: no samples"


def test_under_a_half_life_of_zero_one_sample_empties_the_usage_and_then_nothing_wakes() -> None:
    config = load_config({"admissionFairSharing": {"usageHalfLifeTime": "0s", "usageSamplingInterval": "1m"}})
    state = ClusterState()
    _configure(state, T0)
    _upsert(state, {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
    _upsert(state, _cluster_queue("cq", False), T0)
    _upsert(state, _local_queue("a", "cq", consumed_cpu=3), T0)
    assert next_deadline(state, config) == T0 + MIN
    _apply(state, ev.ClockTicked(time=T0 + MIN, id="tick"))
    assert next_deadline(state, config) is None
