"""The audit trail brings the cluster-state fold in only where it may judge a record (``AuditTrail.needs_state``):
its timelines are those of a trail with the fold beside it from offset 0, on logs that need the fold (checks
whose controllers kueue-es does not run, Workloads rewritten before their reservation was written) and on logs
that do not, where the fold never comes in at all."""

from __future__ import annotations

import random

import msgspec
import pytest
from fixtures import eventgen as g
from hypothesis import given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.admissionchecks import MULTIKUEUE_CONTROLLER, PROVISIONING_CONTROLLER
from projections.audit import AuditTrail, Step
from projections.cluster import ClusterState

S = 1000
KEY = "team/job"


def full_trail(recs: list[ev.Record], keys: list[str] | None = None) -> AuditTrail:
    return AuditTrail(keys=keys, state=ClusterState()).apply_all(recs)


def lazy_trail(recs: list[ev.Record], keys: list[str] | None = None, every: int = 0) -> AuditTrail:
    """As ``kueue-es audit`` folds: the fold brought in at the first record the trail says needs it, restored from
    the checkpoint before it (one every ``every`` records, through a snapshot's encoding; none with 0)."""
    trail = AuditTrail(keys=keys)
    for r in recs:
        if trail.needs_state(r):
            at = r.offset // every * every if every else 0
            state = snapshot.decode(snapshot.encode(g.fold(recs[:at]))) if at else ClusterState()
            trail.state = g.fold(recs[at:r.offset], state)
        trail.apply(r)
    return trail


def seeded(seed: int) -> list[list[ev.AnyEvent]]:
    """80 operations of every kind, the external checks' drawn five times as often (else few logs hold one)."""
    rng = random.Random(seed)
    pool = (*g.OPS, *("ext_check", "ext_state") * 4)
    return g.interpret([g.Op(rng.choice(pool), rng.randrange(64), rng.randrange(64), rng.randrange(64))
                      for _ in range(80)])


def steps(trail: AuditTrail, key: str | None) -> bytes:
    return msgspec.msgpack.encode(trail.steps() if key is None else trail.timeline(key))


def agree(recs: list[ev.Record], key: str | None, every: int) -> AuditTrail:
    keys = None if key is None else [key]
    lazy = lazy_trail(recs, keys, every)
    assert steps(lazy, key) == steps(full_trail(recs, keys), key)
    return lazy


def at_generation(w: o.Workload, generation: int, rv: int, status: o.WorkloadStatus | None = None) -> o.Workload:
    m = msgspec.structs.replace(w.metadata, generation=generation, resource_version=str(rv))
    return msgspec.structs.replace(w, metadata=m, status=status if status is not None else w.status)


def cluster(controller: str) -> list[ev.AnyEvent]:
    check = o.AdmissionCheck(metadata=g.meta("check"), spec=o.AdmissionCheckSpec(controller_name=controller))
    return [g.upsert(g.flavor("f0"), g.T0), g.upsert(check, g.T0), g.upsert(g.cluster_queue("cq", quotas={"f0": 4},
                                                                              checks=["check"]), g.T0),
            g.upsert(g.local_queue("team", "lq", "cq"), g.T0)]


def reserve(cycle: int, t: int) -> ev.QuotaReserved:
    return ev.QuotaReserved(key=KEY, admission=g.admission("cq", "f0", 1000), time=g.T0 + t * S, cycle=cycle, input=0)


def observed(trail: AuditTrail) -> list[tuple[str, str]]:
    return [(s.step, s.reason) for s in trail.timeline(KEY) if s.observed]


@pytest.mark.parametrize("controller, gates", [
    ("example.com/external", {}),
    (MULTIKUEUE_CONTROLLER, {"MultiKueue": False}),  # kueue-es runs MultiKueue checks only under the gate
])
def test_a_state_its_controller_set_at_an_unchanged_generation_brings_the_fold_in(controller: str,
                                                                                     gates: dict) -> None:
    job = at_generation(g.workload("team", "job", queue="lq"), 1, 1)
    config = ev.ConfigRecorded(time=g.T0, document={"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                  "kind": "Configuration", "featureGates": gates})
    head = [config, *cluster(controller), g.upsert(job, g.T0), reserve(1, 1)]                        # 5, 6
    listed = g.fold(g.records([head])).workloads[KEY].check_states["check"]
    ready = msgspec.structs.replace(listed, state="Ready", message="capacity found")
    shown = [g.upsert(at_generation(job, 1, rv, o.WorkloadStatus(admission_checks=[s])), g.T0 + rv * S)
             for rv, s in ((2, listed), (3, ready))]                                              # 7, 8
    recs = g.records([head, shown])
    trail = lazy_trail(recs)
    assert observed(trail) == [("AdmissionCheck", "check=Ready")]
    assert steps(trail, None) == steps(full_trail(recs), None)
    assert trail.state is not None and trail.state.checks_taken[0] == 8


def test_a_rewrite_at_a_new_generation_not_showing_the_reservation_brings_the_fold_in() -> None:
    job = at_generation(g.workload("team", "job", queue="lq"), 1, 1)
    rewritten = at_generation(g.workload("team", "job", queue="lq", cpu="2"), 2, 3)
    recs = g.records([[*cluster("example.com/external"), g.upsert(job, g.T0)], [reserve(1, 1)],
                    [g.upsert(rewritten, g.T0 + 2 * S)]])                                            # 4, 5, 6
    trail = lazy_trail(recs)
    assert observed(trail) == [("Requeued", "SpecChanged")]
    assert steps(trail, None) == steps(full_trail(recs), None)


def test_a_state_shown_of_a_provisioning_check_whose_admissioncheck_is_gone_brings_the_fold_in() -> None:
    """Without its AdmissionCheck, kueue-es does not run a check listed still: the fold takes its state as shown."""
    job = at_generation(g.workload("team", "job", queue="lq"), 1, 1)
    head = [*cluster(PROVISIONING_CONTROLLER), g.upsert(job, g.T0), reserve(1, 1)]
    listed = g.fold(g.records([head])).workloads[KEY].check_states["check"]
    ready = msgspec.structs.replace(listed, state="Ready", message="provisioned elsewhere")
    echo = at_generation(job, 1, 2, o.WorkloadStatus(admission_checks=[listed]))  # the log's word, shown back
    recs = g.records([head, [g.upsert(echo, g.T0 + 2 * S)], [g.delete("AdmissionCheck", "check", g.T0 + 2 * S)],
                    [g.upsert(at_generation(job, 1, 3, o.WorkloadStatus(admission_checks=[ready])), g.T0 + 3 * S)]])
    trail = lazy_trail(recs)
    assert observed(trail) == [("AdmissionCheck", "check=Ready")]
    assert steps(trail, None) == steps(full_trail(recs), None)


def test_a_workload_made_again_under_its_name_and_rewritten_at_its_first_generation_brings_the_fold_in() -> None:
    """The first Workload of the name was at generation 2; the second, first seen holding a reservation at 1, is
    rewritten at 2 as well without it: the fold holds 1 and reads the pod sets anew."""
    first = at_generation(g.workload("team", "job", queue="lq", uid="a"), 2, 1)
    again = g.shown_reserved(at_generation(g.workload("team", "job", queue="lq", uid="b"), 1, 3),
                           g.admission("cq", "f0", 1000))
    rewritten = at_generation(g.workload("team", "job", queue="lq", uid="b", cpu="2"), 2, 4)
    recs = g.records([[*cluster("example.com/external"), g.upsert(first, g.T0)], [g.delete("Workload", KEY, g.T0 + S)],
                    [g.upsert(again, g.T0 + S)], [g.upsert(rewritten, g.T0 + 3 * S)]])
    trail = lazy_trail(recs)
    assert observed(trail) == [("QuotaReserved", "QuotaReserved"), ("Requeued", "SpecChanged")]
    assert steps(trail, None) == steps(full_trail(recs), None)


def test_a_log_of_provisioning_checks_and_status_echoes_never_needs_the_fold() -> None:
    """Kueue-es's own checks' states and the watch's echoes of its writes at one generation: nothing the fold
    would judge, so it is never folded."""
    job = at_generation(g.workload("team", "job", queue="lq"), 1, 1)
    head = [*cluster(PROVISIONING_CONTROLLER), g.upsert(job, g.T0), reserve(1, 1)]
    listed = g.fold(g.records([head])).workloads[KEY].check_states["check"]
    reserved = g.shown_reserved(job, g.admission("cq", "f0", 1000))
    echo = at_generation(reserved, 1, 2, msgspec.structs.replace(reserved.status, admission_checks=[listed]))
    evicted = at_generation(job, 1, 3, o.WorkloadStatus(admission_checks=[listed]))  # released: no reservation
    recs = g.records([head, [g.upsert(echo, g.T0 + 2 * S)],
                    [ev.WorkloadEvicted(key=KEY, reason="AdmissionCheck", message="retry", time=g.T0 + 3 * S, cycle=2,
                                        input=0),
                     ev.WorkloadRequeued(key=KEY, status=True, reason="AdmissionCheck", release=True,
                                         time=g.T0 + 3 * S, cycle=2, input=0)],
                    [g.upsert(evicted, g.T0 + 4 * S)], [g.delete("Workload", KEY, g.T0 + 5 * S)]])
    trail = lazy_trail(recs)
    assert trail.state is None
    assert steps(trail, None) == steps(full_trail(recs), None)
    assert [s.step for s in trail.timeline(KEY)][-3:] == ["Evicted", "Requeued", "Deleted"]


def test_the_trail_agrees_with_the_fold_beside_it_on_seeded_logs() -> None:
    """Logs drawn from every operation, Workloads with and without generations, each workload's timeline and
    everyone's, the fold restored from a checkpoint or folded from the start."""
    for seed in range(40):
        batches = seeded(seed)
        for recs in (g.records(batches), g.records(g.with_generations(batches))):
            keys = sorted({r.event.key for r in recs if isinstance(r.event, ev.ObjectUpserted)
                           and isinstance(r.event.obj, o.Workload)})
            for key in [None, *keys]:
                agree(recs, key, every=seed % 3 * 13)


@settings(max_examples=60, deadline=None)
@given(ops=g.op_lists(), generations=st.booleans(), pick=st.integers(min_value=-1, max_value=20),
       every=st.integers(min_value=0, max_value=40))
def test_the_trail_agrees_with_the_fold_beside_it(ops: list[g.Op], generations: bool, pick: int, every: int) -> None:
    batches = g.interpret(ops)
    recs = g.records(g.with_generations(batches) if generations else batches)
    keys = sorted({r.event.key for r in recs if isinstance(r.event, ev.ObjectUpserted)
                   and isinstance(r.event.obj, o.Workload)})
    key = keys[pick % len(keys)] if keys and pick >= 0 else None
    agree(recs, key, every)


def test_the_seeded_logs_hold_what_the_fold_judges() -> None:
    """The seeded logs above hold check states the fold takes and reservations it forgets (else they could not
    tell a trail that misses them): kept true here."""
    taken: list[Step] = []
    for seed in range(40):
        taken += [s for s in full_trail(g.records(g.with_generations(seeded(seed)))).steps() if s.observed]
    assert {s.reason.partition("=")[0] for s in taken if s.step == "AdmissionCheck"} == set(g.EXTERNAL_CHECKS)
    assert any(s.reason == "SpecChanged" for s in taken)
