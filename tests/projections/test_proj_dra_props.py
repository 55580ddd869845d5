"""Property: DRA claims are charged the same whatever the order of templates, claims and configurations, and a
snapshot taken anywhere resumes to the same state (ResourceClaimTemplates and claiming workloads included)."""

from __future__ import annotations

import random

import pytest
from fixtures.eventgen import Op, fold, interpret, records
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections import snapshot
from projections.cluster import ClusterState, is_flagged
from projections.dra import workload_problem
from projections.workloads import PENDING, readjusted

DRA_OPS = ("claim_template", "claim_template", "claim_template_delete", "wl_claims", "wl_claims", "wl", "config_dra",
           "reserve", "admit", "evict", "requeue", "pending", "finish", "deactivate", "wl_delete", "tick", "cycle_end")


def _dra_ops(max_size: int = 60) -> st.SearchStrategy[list[Op]]:
    small = st.integers(min_value=0, max_value=63)
    return st.lists(st.builds(Op, st.sampled_from(DRA_OPS), small, small, small), max_size=max_size)


def _consistent(state: ClusterState) -> None:
    """Pending workloads are charged for their claims as the templates and configuration in force say, those Kueue
    refuses are in no queue, and the flags are what the workloads show."""
    queued = {k for q in state.queues.values() for k in (*q.entries, *q.inadmissible)}
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        assert (key in state.flagged) == is_flagged(wl), key
        if wl.phase != PENDING:
            continue
        tpl = state.pod_templates[key]
        now = readjusted(wl.spec_sets, tpl, state.limit_summary(wl.namespace), state.runtime_classes,
                         state.request_rules, state.dra_view(wl.namespace) if any(
                             t.spec.resource_claims for t in tpl) else None)
        assert now == wl.spec_sets, f"{key}: charged as {wl.spec_sets}, the templates in force say {now}"
        if workload_problem(wl.pod_sets):
            assert key not in queued, f"{key}: refused DRA claims yet queued"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_dra_ops(), data=st.data())
def test_claims_are_charged_identically_after_a_restore(ops, data) -> None:
    recs = records(interpret(ops))
    full = fold(recs)
    _consistent(full)
    cut = data.draw(st.integers(0, len(recs)), label="cut")
    part = fold(recs[:cut])
    restored = snapshot.decode(snapshot.encode(part))
    assert snapshot.digest(restored) == snapshot.digest(part)
    resumed = fold(recs[cut:], restored)
    _consistent(resumed)
    assert {k: w.pod_sets for k, w in resumed.workloads.items()} == {k: w.pod_sets for k, w in full.workloads.items()}
    assert snapshot.digest(resumed) == snapshot.digest(full)


@pytest.mark.parametrize("seed", range(3))
def test_long_sequences_of_claim_changes_snapshot_anywhere(seed: int) -> None:
    rng = random.Random(seed)
    ops = [Op(rng.choice(DRA_OPS), rng.randrange(64), rng.randrange(64), rng.randrange(64)) for _ in range(300)]
    recs = records(interpret(ops))
    full = fold(recs)
    _consistent(full)
    assert any(w.pod_sets and w.pod_sets[0].dra_requests for w in full.workloads.values()) or any(
        workload_problem(w.pod_sets) for w in full.workloads.values())
    expected = snapshot.digest(full)
    for cut in range(0, len(recs), 20):
        resumed = fold(recs[cut:], snapshot.decode(snapshot.encode(fold(recs[:cut]))))
        assert snapshot.digest(resumed) == expected, f"snapshot at {cut} diverged"
