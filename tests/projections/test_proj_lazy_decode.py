"""Lazily decoded Workload upserts fold to exactly the state full decoding gives.

Replay decodes a Workload upsert's spec and status only when the fold reads them (``events.lazy``). The same
log must give the same state, digest and derived indexes either way — also for workloads first seen with a
status (admitted before kueue-es started), through snapshots, mixed with fully decoded events (a service
folds the log lazily, then applies what it appends), and whatever the process's hash seed. A part decoded late that is invalid stops the fold with
an error naming the offset, as an undecodable event does.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import msgspec
import pytest
from fixtures.eventgen import T0, admission, fold, interpret, op_lists, random_ops, upsert, workload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.codec import decode_batch, encode_batch
from events.errors import UndecodableRecord
from events.lazy import LazyObjectUpserted, LazyWorkload
from events.timefmt import format_time
from projections import snapshot, workloads
from projections.cluster import ClusterState
from tests.projections.test_proj_snapshot_props import derived

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decoded(batches: list[list[ev.AnyEvent]], *, lazy: bool) -> list[ev.Record]:
    """The records a log of these batches gives back, decoded lazily or not."""
    out: list[ev.Record] = []
    for batch in batches:
        out += decode_batch(encode_batch(batch), len(out), lazy=lazy)
    return out


def cond(type_: str, status: str, reason: str, t: int) -> o.Condition:
    return o.Condition(type=type_, status=status, reason=reason, message=f"{type_} {reason}",
                       last_transition_time=format_time(t))


def observed_workloads(t: int) -> list[ev.AnyEvent]:
    """Workloads first seen with a status: admitted, reserved with checks, evicted and backing off, finished."""
    adm = admission("cq0", "f0", 1000)
    running = workload("ns0", "seen-admitted", cpu="1")
    running = msgspec.structs.replace(running, status=o.WorkloadStatus(
        admission=adm, conditions=[cond("QuotaReserved", "True", "QuotaReserved", t - 5000),
                                   cond("Admitted", "True", "Admitted", t - 4000),
                                   cond("PodsReady", "True", "Started", t - 3000)],
        accumulated_past_execution_time_seconds=7))
    checks = workload("ns0", "seen-checks", cpu="1")
    checks = msgspec.structs.replace(checks, status=o.WorkloadStatus(
        admission=adm, conditions=[cond("QuotaReserved", "True", "QuotaReserved", t - 2000)],
        admission_checks=[o.AdmissionCheckState(name="prov", state="Pending", last_transition_time=format_time(t))]))
    backoff = workload("ns1", "seen-backoff", cpu="2", priority=5)
    backoff = msgspec.structs.replace(backoff, status=o.WorkloadStatus(
        conditions=[cond("Evicted", "True", "PodsReadyTimeout", t - 1000),
                    cond("Requeued", "False", "PodsReadyTimeout", t - 1000)],
        requeue_state=o.RequeueState(count=2, requeue_at=format_time(t + 60_000))))
    done = workload("ns1", "seen-finished", cpu="1")
    done = msgspec.structs.replace(done, status=o.WorkloadStatus(conditions=[cond("Finished", "True", "Succeeded", t)]))
    return [upsert(w, t) for w in (running, checks, backoff, done)]


def assert_same(a: ClusterState, b: ClusterState) -> None:
    assert snapshot.digest(a) == snapshot.digest(b)
    assert derived(a) == derived(b)
    assert a.flagged == b.flagged and a.backoff == b.backoff and a.afs_history == b.afs_history


@SETTINGS
@given(ops=op_lists(), observed=st.booleans(), data=st.data())
def test_lazy_fold_equals_full_fold(ops, observed, data) -> None:
    batches = interpret(ops)
    if observed:
        batches.insert(1, observed_workloads(T0 + 500))
    full = fold(decoded(batches, lazy=False))
    lazy_recs = decoded(batches, lazy=True)
    assert_same(fold(lazy_recs), full)
    # a snapshot of a lazy fold, restored, then folded on lazily, ends where the full fold does
    cut = data.draw(st.integers(0, len(lazy_recs)), label="cut")
    part = snapshot.decode(snapshot.encode(fold(lazy_recs[:cut])))
    assert_same(fold(lazy_recs[cut:], part), full)


def test_lazy_then_full_events_mix() -> None:
    """A service folds the log lazily, then applies the events it appends (never decoded)."""
    batches = interpret(random_ops(random.Random(11), 300))
    batches.insert(1, observed_workloads(T0 + 500))
    half = len(batches) // 2
    full = fold(decoded(batches, lazy=False))
    mixed = fold(decoded(batches[:half], lazy=True))
    offset = mixed.offset + 1
    for batch in batches[half:]:
        for e in batch:
            mixed.apply(ev.Record(offset, e))
            offset += 1
    assert_same(mixed, full)


def test_lazy_upsert_reads_as_the_full_one() -> None:
    events = observed_workloads(T0) + [upsert(workload("ns0", "plain"), T0)]
    payload = encode_batch(events)
    lazy = [r.event for r in decode_batch(payload, 0, lazy=True)]
    assert all(isinstance(e, LazyObjectUpserted) and isinstance(e.obj, LazyWorkload) for e in lazy)
    assert [e.full() for e in lazy] == [r.event for r in decode_batch(payload, 0)]
    assert encode_batch(lazy) == payload  # the undecoded parts are the original bytes
    for e, original in zip(lazy, events, strict=True):
        assert e.obj.key == original.obj.key
        assert e.obj.spec == original.obj.spec and e.obj.status == original.obj.status
    # equal spec bytes decode to one shared spec
    again = decode_batch(payload, 0, lazy=True)[0].event
    assert again.obj.spec is lazy[0].obj.spec


def test_other_kinds_decode_as_usual() -> None:
    lq = upsert(o.LocalQueue(metadata=o.ObjectMeta(name="lq0", namespace="ns0"),
                             spec=o.LocalQueueSpec(cluster_queue="cq0")), T0)
    (r,) = decode_batch(encode_batch([lq]), 0, lazy=True)
    assert isinstance(r.event, LazyObjectUpserted) and r.event.obj == lq.obj
    (r,) = decode_batch(encode_batch([ev.WorkloadAdmitted(time=T0, key="ns0/a", cycle=1, input=0)]), 0, lazy=True)
    assert type(r.event) is ev.WorkloadAdmitted


def _raw_upsert(status: object = None, spec: object = None) -> dict[str, object]:
    obj: dict[str, object] = {"kind": "Workload", "metadata": {"name": "bad", "namespace": "ns0", "uid": "u"}}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return {"type": "ObjectUpserted", "time": T0, "key": "ns0/bad", "obj": obj}


@pytest.mark.parametrize("part", ["spec", "status"])
def test_an_invalid_part_read_late_stops_the_fold_at_its_offset(part) -> None:
    bad = {"spec": _raw_upsert(spec={"podSets": "not a list"}),
           "status": _raw_upsert(status={"conditions": [{"type": 1}]})}[part]
    good = msgspec.to_builtins(upsert(workload("ns0", "fine"), T0))
    payload = msgspec.msgpack.encode([good, bad])
    with pytest.raises(UndecodableRecord) as full_error:
        decode_batch(payload, 40)
    assert full_error.value.offset == 41
    records = decode_batch(payload, 40, lazy=True)  # left undecoded: the frame itself is well formed
    state = ClusterState()
    state.apply(records[0])
    with pytest.raises(UndecodableRecord) as lazy_error:
        state.apply(records[1])
    assert lazy_error.value.offset == 41
    assert str(full_error.value) == str(lazy_error.value)
    assert "ns0/bad" not in state.workloads


_CHILD = """
import sys
import msgspec
from events.codec import decode_batch
from projections import snapshot
from projections.cluster import ClusterState
state = ClusterState()
offset = 0
for frame in msgspec.msgpack.decode(open(sys.argv[1], "rb").read()):
    for r in decode_batch(frame, offset, lazy=True):
        state.apply(r)
        offset += 1
print(snapshot.digest(state))
"""


def test_lazy_fold_digest_is_the_same_under_different_hash_seeds(tmp_path) -> None:
    batches = [observed_workloads(T0 + 1)]
    for seed in range(3):
        batches += interpret(random_ops(random.Random(200 + seed), 300))
    expected = snapshot.digest(fold(decoded(batches, lazy=False)))
    path = tmp_path / "frames.bin"
    path.write_bytes(msgspec.msgpack.encode([encode_batch(b) for b in batches]))
    outputs = set()
    for seed in ("0", "7", "random"):
        res = subprocess.run([sys.executable, "-c", _CHILD, str(path)], env={**os.environ, "PYTHONHASHSEED": seed},
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        outputs.add(res.stdout.strip())
    assert outputs == {expected}


def test_workloads_of_one_spec_encoding_take_its_templates() -> None:
    """A lazily decoded spec is one object for every upsert of the same encoding; the templates the fold keeps for
    each workload first seen with it are that spec's, and a workload of another spec keeps its own. A guard of the
    templates' sharing (interning shared equal ones before the per-spec memo too); the memo's hazard, a spec taking
    the templates of another that had its id, is the next test's."""
    same = [workload("ns0", f"w{i}", cpu="1") for i in range(2)]
    other = workload("ns0", "w2", cpu="2")
    state = fold(decoded([[upsert(w, T0) for w in (*same, other)]], lazy=True))
    for w in (*same, other):
        assert state.pod_templates[w.key] == tuple(ps.template for ps in w.spec.pod_sets)
    assert state.pod_templates["ns0/w0"] is state.pod_templates["ns0/w1"]
    assert state.pod_templates["ns0/w2"] != state.pod_templates["ns0/w0"]


def test_a_spec_given_the_id_another_had_takes_its_own_templates(monkeypatch) -> None:
    """The fold's memos of lazily decoded specs are keyed by the spec's id (``shared_spec_templates`` and the pod
    set memos beside it). Each holds its spec, so the id is not reused while the entry lives, and checks that a hit
    is that very object: a spec with an id another one had never takes that one's templates. Here every object
    shares one id, as a freed spec's reused id would."""
    for memo in ("_SHARED_SPEC_TEMPLATES", "_NAMELESS", "_DRA_KEYS", "_BY_SPEC_OBJECT"):
        monkeypatch.setattr(workloads, memo, {})
    monkeypatch.setattr(workloads, "id", lambda obj: 7, raising=False)
    ws = [workload("ns0", "w0", cpu="1"), workload("ns0", "w1", cpu="2"), workload("ns0", "w2", cpu="1")]
    state = fold(decoded([[upsert(w, T0) for w in ws]], lazy=True))
    for w in ws:
        assert state.pod_templates[w.key] == tuple(ps.template for ps in w.spec.pod_sets), w.key
    assert snapshot.digest(state) == snapshot.digest(fold(decoded([[upsert(w, T0) for w in ws]], lazy=False)))


def test_lazy_specs_with_one_checksum_stay_apart(monkeypatch) -> None:
    """The spec memo is keyed by a checksum of the bytes: two specs that share it are still told apart."""
    monkeypatch.setattr("events.lazy.crc32", lambda data: 7)  # every spec collides
    small, large = workload("ns0", "a", cpu="1"), workload("ns0", "b", cpu="3")
    payload = encode_batch([upsert(small, T0), upsert(large, T0), upsert(small, T0)])
    first, second, third = (r.event.obj for r in decode_batch(payload, 0, lazy=True))
    assert first.spec == small.spec and second.spec == large.spec and third.spec == small.spec


def test_a_deactivation_target_is_seen_in_a_lazily_decoded_status() -> None:
    """A Workload shown with DeactivationTarget=True (a MultiKueue manager asking a worker to stop its copy) is held
    by the fold whether its upsert was decoded fully (a service applying what it appends) or lazily (a restart or a
    replay reading the log): the lazy path looks for the condition in the status's msgpack bytes before decoding."""
    from fixtures.eventgen import prelude
    w = workload("ns0", "copy", cpu="1")
    target = msgspec.structs.replace(w, status=o.WorkloadStatus(conditions=[
        cond("DeactivationTarget", "True", "EvictedOnManagerCluster", T0 + 200)]))
    batches = [prelude(T0), [upsert(w, T0 + 100)], [upsert(target, T0 + 200)]]
    full = fold(decoded(batches, lazy=False))
    lazy = fold(decoded(batches, lazy=True))
    assert full.workloads[w.key].condition("DeactivationTarget") is not None
    assert lazy.workloads[w.key].condition("DeactivationTarget") is not None, "the lazy fold missed the condition"
    assert_same(lazy, full)
