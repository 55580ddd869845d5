"""The Admission Fair Sharing history stays bounded without changing what it folds to (projections.afs_ledger).

* A LocalQueue's history past ``COMPACT_AT`` entries becomes one checkpoint of the fold's exact floats under the
  recorded configuration: the consumed usage, the status (consumedResources, lastUpdate), the usage gauge and the
  next sample are bit for bit those of the uncompacted history, over random logs with LocalQueues deleted and
  recreated, ClusterQueues changing admission mode, configurations changing mid-log and a snapshot at any point.
* Its size stays bounded however many workloads pass through a LocalQueue.
* The projection reads the half-life and interval off the recorded document as the scheduler does.
* Deleting a LocalQueue costs its own history: the others' and the scheduler's fold of them stay as they are.
* The next sample is not looked for again among every LocalQueue while nothing changed and it is not due.
"""

from __future__ import annotations

import msgspec
import pytest
from afshelp import KQ, MIN, T0, cluster_queue, configure, document, reserve
from afshelp import apply as _apply
from afshelp import local_queue as _local_queue
from afshelp import upsert as _upsert
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import afs
from kueue_es.scheduler.afs import AfsFold, fold, next_sample
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import in_force
from projections import afs_ledger, snapshot
from projections.afs_ledger import AFS_CHECKPOINT, key_of
from projections.cluster import ClusterState

PARAMS = [{"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"},
          {"usageHalfLifeTime": "3m", "usageSamplingInterval": "45s"},
          {"usageHalfLifeTime": "0s", "usageSamplingInterval": "2m"}]
UNBOUNDED = 10**9


def _document(params: int | None, anchor: bool = True) -> dict:
    return document(PARAMS[params] if params is not None else None, anchor)


def _configure(state: ClusterState, t: int, params: int | None, anchor: bool = True) -> None:
    configure(state, t, PARAMS[params] if params is not None else None, anchor)


def _cluster_queue(name: str, usage_based: bool) -> dict:
    return cluster_queue(name, usage_based, 1000)


def _reserve(state: ClusterState, name: str, lq: str, cq: str, cpu: int, t: int, admit: bool = True) -> None:
    reserve(state, name, lq, cq, f"{cpu}m", t, admit)


def _base(state: ClusterState, params: int | None = 0) -> None:
    """ns/a and ns/b of cq1 (ordering by Admission Fair Sharing), ns/c of cq2 (not), under ``PARAMS[params]``."""
    if params is not None:
        _configure(state, T0, params)
    _upsert(state, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, T0)
    _upsert(state, {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
    _upsert(state, _cluster_queue("cq1", True), T0)
    _upsert(state, _cluster_queue("cq2", False), T0)
    for name, cq in (("a", "cq1"), ("b", "cq1"), ("c", "cq2")):
        _upsert(state, _local_queue(name, cq), T0)


class _Recording(ClusterState):
    """A state that keeps the records it folded."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[ev.Record] = []

    def apply(self, record: ev.Record) -> None:  # type: ignore[override]
        self.records.append(record)
        super().apply(record)


class _CompactAt:
    """``afs_ledger.COMPACT_AT`` set for a block (hypothesis runs many examples in one test call)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __enter__(self) -> None:
        self.saved, afs_ledger.COMPACT_AT = afs_ledger.COMPACT_AT, self.n

    def __exit__(self, *exc: object) -> None:
        afs_ledger.COMPACT_AT = self.saved


# --- compacted folds to what uncompacted folds to -----------------------------------------------------------------

ops = st.lists(st.one_of(
    st.tuples(st.just("config"), st.sampled_from([None, 0, 1, 2]), st.booleans()),
    st.tuples(st.just("cycle"), st.sampled_from(["a", "b", "c"]), st.integers(1, 4000), st.integers(1, 8),
              st.sampled_from([1_000, 61_001, 5 * MIN])),
    st.tuples(st.just("cq"), st.sampled_from(["cq1", "cq2"]), st.booleans()),
    st.tuples(st.just("lq"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["cq1", "cq2"]),
              st.sampled_from([None, 1, 7])),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("reserve"), st.sampled_from(["a", "b", "c"]), st.integers(1, 4000), st.booleans()),
    st.tuples(st.just("admit"), st.integers(0, 60)),
    st.tuples(st.just("finish"), st.integers(0, 60)),
    st.tuples(st.just("wait"), st.integers(1, 20 * MIN)),
), min_size=1, max_size=40)


def _run(state: ClusterState, script, check=None) -> None:
    t, made = T0, []
    for step in script:
        t += 7_919
        match step:
            case ("config", params, anchor):
                _configure(state, t, params, anchor)
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
            case ("cycle", lq, cpu, n, hold):  # n workloads through their LocalQueue, one after the other
                known = state.local_queues.get(f"ns/{lq}")
                for _ in range(n):
                    name = f"w{len(made)}"
                    made.append(name)
                    _reserve(state, name, lq, known.spec.cluster_queue if known else "cq1", cpu, t)
                    t += hold
                    _apply(state, ev.WorkloadFinished(time=t, key=f"ns/{name}"))
            case ("wait", ms):
                t += ms
        if check is not None:
            check(state)


def _observed(state: ClusterState) -> list:
    """Everything the history shows, exactly (floats by repr, so -0.0 and the last bit count), under the recorded
    configuration: each LocalQueue's consumed usage and status at some times ahead, the gauge, the next sample."""
    config = in_force(state)
    if config is None or config.admission_fair_sharing is None:
        return []
    f = fold(state, config)
    out: list = [next_sample(state, config)]
    f.memos.clear()
    out.append(next_sample(state, config))  # the memo answers as a fresh look
    for lq in sorted(set(f.queues) | set(state.local_queues)):
        for ahead in (0, 1, 59_999, 60_000, 7 * MIN + 13, 3 * 60 * MIN):
            now = state.time + ahead
            out.append((lq, ahead, repr(sorted(f.consumed(lq, now).items())), repr(f.shown(lq, now)),
                        afs.local_queue_status(state, config, lq, now)))
    out.append(repr(afs.usage_samples(state)))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([None, 0, 1, 2]), ops, st.integers(1, 3), st.integers(0, 200))
@example(0, [("cycle", "c", 500, 1, 1_000)], 1, 0)  # a zero admitted usage kept: its samples show "cpu": "0"
@example(None, [("cycle", "a", 333, 8, 61_001), ("config", 1, True), ("cycle", "a", 7, 3, 1_000),
                ("config", None, False), ("cycle", "a", 5, 2, 5 * MIN), ("config", 2, True)], 2, 12)
def test_a_compacted_history_folds_bit_for_bit_as_the_uncompacted_one(params, script, compact_at, cut) -> None:
    """The same random log folded with the history compacted every ``compact_at`` entries and never (but at the
    changes of configuration, where each LocalQueue is checkpointed under the one replaced): after every step both
    show the same floats; a compacted state snapshotted at any point and folded on ends the same."""
    seen: dict[int, list] = {}
    with _CompactAt(UNBOUNDED):
        plain = _Recording()
        _base(plain, params)
        _run(plain, script, lambda s: seen.__setitem__(s.offset, _observed(s)))
        final = _observed(plain)
    with _CompactAt(compact_at):
        compact = ClusterState()
        for r in plain.records:
            compact.apply(r)
            if r.offset in seen:
                assert _observed(compact) == seen[r.offset], r.offset
        at = plain.records[min(cut, len(plain.records) - 1)].offset
        partial = ClusterState()
        for r in plain.records[:at + 1]:
            partial.apply(r)
        resumed = snapshot.decode(snapshot.encode(partial))
        assert _observed(resumed) == _observed(partial)
        for r in plain.records[at + 1:]:
            resumed.apply(r)
        assert _observed(resumed) == final
        assert snapshot.digest(resumed) == snapshot.digest(compact)


# --- bounded ------------------------------------------------------------------------------------------------------


def test_the_history_stays_bounded_however_many_workloads_pass_through_a_local_queue() -> None:
    """500 workloads admitted and finished one after the other in each of ns/a (ordering by it) and ns/c (sampled
    only): each LocalQueue's history never holds more than ``COMPACT_AT`` entries past its checkpoint, and the
    snapshot's history does not grow with them; the usage shown is the uncompacted history's."""
    def lifecycles(n: int) -> ClusterState:
        state = ClusterState()
        _base(state)
        script = [step for i in range(n) for step in (("cycle", "a", 1_000 + i, 1, 61_001),
                                                       ("cycle", "c", 2_000 + i, 1, 1_000))]
        _run(state, script, lambda s: longest.append(max(len(v) for v in s.afs_history.values())))
        return state

    longest: list[int] = []

    state = lifecycles(500)
    assert set(state.afs_dirty) <= set(state.afs_history), "at most one mark per LocalQueue"
    assert 1 < max(longest) <= afs_ledger.COMPACT_AT
    assert sum(len(v) for v in state.afs_history.values()) <= 3 * (afs_ledger.COMPACT_AT + 1)
    assert len(msgspec.msgpack.encode(snapshot.take(state).afs_queues)) < 3_000
    with _CompactAt(UNBOUNDED):
        plain = lifecycles(500)
    assert sum(len(v) for v in plain.afs_history.values()) > 2_000
    assert _observed(state) == _observed(plain)


@pytest.mark.parametrize("document", [
    _document(None),  # no admissionFairSharing stanza
    {**_document(0), "featureGates": {"AdmissionFairSharing": False}},  # the stanza, the gate off
])
def test_a_recorded_configuration_without_admission_fair_sharing_keeps_no_history(document: dict) -> None:
    """A ClusterQueue ordering by Admission Fair Sharing under a Configuration that does not turn it on: nothing
    samples, orders by or compacts the history then, so none is kept, however many workloads pass through."""
    state = ClusterState()
    _apply(state, ev.ConfigRecorded(time=T0, document=document, writer="test", id="config"))
    _base(state, params=None)
    _run(state, [("cycle", "a", 1_000 + i, 1, 61_001) for i in range(400)])
    assert state.afs_history == {}


@pytest.mark.parametrize(("params", "left"), [(0, {"ns/a", "ns/b", "ns/c"}), (None, set())])
def test_with_no_configuration_recorded_none_is_kept_until_one_turns_it_on(params: int | None, left: set) -> None:
    """With no Configuration recorded at all nothing reads the history (Kueue's defaults: Admission Fair Sharing
    off), so a ClusterQueue ordering by it keeps none either, however many workloads pass; the first Configuration
    recorded with it starts every LocalQueue afresh (bounded from then on), one without it keeps none still."""
    state = ClusterState()
    _base(state, params=None)
    sizes: list[int] = []
    script = [*(("cycle", "a", 1_000 + i, 1, 61_001) for i in range(40)), ("config", params, True),
              *(("cycle", "a", 5_000 + i, 1, 61_001) for i in range(40))]
    _run(state, script, lambda s: sizes.append(len(s.afs_history.get("ns/a", ()))))
    assert max(sizes[:40]) == 0
    assert set(state.afs_history) == left
    assert max(sizes) <= afs_ledger.COMPACT_AT


def test_the_projection_reads_the_half_life_and_interval_as_the_scheduler_does() -> None:
    """The history is compacted under what the scheduler folds it under: the same floats from the same document,
    for every way of writing a duration (fractions, several units, microseconds, zero meaning the default
    interval); none while Admission Fair Sharing is off."""
    durations = ["0s", "0", "10m", "1.5h", "90s", "1m30.5s", "250us", "0.3ms", "7ms", "1h0m0.000001s", "3.3333s"]
    for half in durations:
        for interval in durations:
            doc = _document(None) | {"admissionFairSharing": {"usageHalfLifeTime": half,
                                                               "usageSamplingInterval": interval}}
            config = load_config(doc)
            assert key_of(doc) == AfsFold(config.admission_fair_sharing).key(), (half, interval)
    assert key_of(_document(None)) is None
    off = _document(0) | {"featureGates": {"AdmissionFairSharing": False,
                                           "AdmissionFairSharingAnchorAtQuotaReservation": False}}
    assert load_config(off).admission_fair_sharing is None and key_of(off) is None
    assert key_of(_document(0) | {"admissionFairSharing": {}}) == (0.0, 300_000)


def test_the_scheduler_and_the_projection_read_them_through_one_function(monkeypatch) -> None:
    """One reading of the two durations (``afs_ledger.key_from``), not two kept alike: whatever it answers is what
    both the scheduler's fold and the projection's compaction fold under."""
    monkeypatch.setattr(afs_ledger, "key_from", lambda half, interval: (len(half) + 0.5, len(interval)))
    doc = _document(0)
    assert key_of(doc) == (3.5, 2)
    assert load_config(doc).admission_fair_sharing.key == (3.5, 2)  # type: ignore[union-attr]


def test_a_changed_half_life_checkpoints_every_local_queue_under_the_one_it_replaces() -> None:
    """Kueue takes a new configuration by restarting, its LocalQueues continuing from the usage they had: the
    history recorded under a 10-minute half-life is folded under it, what follows under the new 3 minutes."""
    state = ClusterState()
    _base(state, 0)
    _run(state, [("cycle", "a", 1_500, 2, 61_001)])
    before = fold(state, load_config(_document(0))).consumed("ns/a", state.time + 1)
    assert state.afs_history["ns/a"][0][1] != AFS_CHECKPOINT
    _configure(state, state.time + 1, 1)
    (entry,) = state.afs_history["ns/a"]
    assert entry[1] == AFS_CHECKPOINT and (entry[2].half_life, entry[2].interval) == (600_000.0, 60_000)
    assert fold(state, load_config(_document(1))).consumed("ns/a", state.time) == before
    _configure(state, state.time + 1, 1, anchor=False)  # the same half-life and interval: nothing to checkpoint
    assert state.afs_history["ns/a"] == [entry]


# --- cheap deletions and deadlines ---------------------------------------------------------------------------------


def test_deleting_a_local_queue_leaves_the_others_history_and_their_fold_as_they_are() -> None:
    """Kueue drops the deleted LocalQueue's ledger entry alone: so does the history (the others' lists are the same
    objects) and the scheduler's fold (the same fold, the same ledgers of the others, nothing refolded)."""
    state = ClusterState()
    _base(state, 0)
    _run(state, [("cycle", "a", 1_000, 3, 61_001), ("cycle", "b", 2_000, 3, 61_001)])
    config = load_config(_document(0))
    f = fold(state, config)
    lists, ledger = dict(state.afs_history), f.queues["ns/a"]
    _apply(state, ev.ObjectDeleted(time=state.time + 1, key="ns/b", kind="LocalQueue"))
    assert "ns/b" not in state.afs_history
    assert state.afs_history["ns/a"] is lists["ns/a"]
    assert fold(state, config) is f and f.queues["ns/a"] is ledger and "ns/b" not in f.queues


@pytest.mark.parametrize("ask_every", [1, 5, None])
def test_the_scheduler_reads_the_projection_s_ledger_and_each_entry_is_folded_once(monkeypatch, ask_every) -> None:
    """The history is folded once, by the projection's ledger, which its compaction checkpoints and the scheduler
    reads under the recorded configuration (no fold of the scheduler's own beside it): over 200 lifecycles, asked
    after every record, every fifth or only at the end, each entry is applied once and no checkpoint is refolded."""
    applied: list[int] = []
    appended: list[int] = []
    real_apply, real_add = afs_ledger.AfsLedger.apply, ClusterState._afs_add

    def counting_apply(self, time, lq, sign, usage):  # type: ignore[no-untyped-def]
        applied.append(sign)
        real_apply(self, time, lq, sign, usage)

    def counting_add(self, lq, sign, usage):  # type: ignore[no-untyped-def]
        appended.append(sign)
        real_add(self, lq, sign, usage)

    monkeypatch.setattr(afs_ledger.AfsLedger, "apply", counting_apply)
    monkeypatch.setattr(ClusterState, "_afs_add", counting_add)
    state = _Recording()
    _base(state)
    config = load_config(_document(0))
    script = [("cycle", "a" if i % 2 else "c", 1_000 + i, 1, 61_001) for i in range(200)]
    _run(state, script, (lambda s: fold(s, config) if len(s.records) % ask_every == 0 else None)
         if ask_every else None)
    f = fold(state, config)
    assert f is state.afs_ledger(config.admission_fair_sharing.key)  # type: ignore[union-attr]
    assert sorted(applied) == sorted(appended) and AFS_CHECKPOINT not in applied
    with _CompactAt(UNBOUNDED):
        plain = ClusterState()
        for record in state.records:
            plain.apply(record)
    assert _observed(state) == _observed(plain)


def test_the_next_sample_is_not_looked_for_again_while_nothing_changed_and_it_is_not_due(monkeypatch) -> None:
    """The scheduler asks at each batch: while no entry was folded in and the answer is still ahead, it stands (no
    LocalQueue's first sample after the log's time, nor whether it moves the shown usage, changed)."""
    state = ClusterState()
    _base(state, 0)
    _run(state, [("cycle", "a", 1_000, 1, 61_001), ("reserve", "b", 2_000, True)])
    config = load_config(_document(0))
    first = next_sample(state, config)
    looked: list[int] = []
    real = afs._next_due
    monkeypatch.setattr(afs, "_next_due", lambda f, q, after: looked.append(after) or real(f, q, after))
    assert first is not None and first > state.time
    _apply(state, ev.ObjectUpserted(time=first - 1, key="f2", obj=msgspec.convert(
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f2"}}, o.KueueObject)))
    assert next_sample(state, config) == first
    assert looked == []
    _apply(state, ev.ObjectUpserted(time=first, key="f3", obj=msgspec.convert(
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f3"}}, o.KueueObject)))
    again = next_sample(state, config)
    assert looked, "due: looked for again"
    fold(state, config).memos.clear()
    assert again == next_sample(state, config) > first


def test_the_local_queues_sampled_between_are_not_walked_again_before_the_first_sample_due(monkeypatch) -> None:
    """The status writer asks at each pass which LocalQueues had a sample since its last look: while no entry was
    folded in, a window ending before the earliest sample found last time is answered without walking them; one
    reaching it, or an entry folded in, walks them again (and answers as a fresh look)."""
    state = ClusterState()
    _base(state, 0)
    _run(state, [("cycle", "a", 1_000, 1, 61_001), ("reserve", "b", 2_000, True)])
    config = load_config(_document(0))
    now = state.time
    assert afs.sampled_between(state, config, now - 1, now) == []
    due = min(d for d in (afs._next_due(fold(state, config), q, now) for q in fold(state, config).queues.values())
              if d is not None)
    looked: list[int] = []
    real = afs._next_due
    monkeypatch.setattr(afs, "_next_due", lambda f, q, after: looked.append(after) or real(f, q, after))
    for t in range(now, due - 1, 7_000):
        assert afs.sampled_between(state, config, t, min(t + 7_000, due - 1)) == []
    assert looked == []
    got = afs.sampled_between(state, config, due - 1, due)
    assert looked and got
    fold(state, config).memos.clear()
    assert afs.sampled_between(state, config, due - 1, due) == got
    _reserve(state, "late", "a", "cq1", 500, now + 1)
    looked.clear()
    afs.sampled_between(state, config, due - 1, due - 1 + 1)
    assert looked, "an entry folded in: walked again"
