"""``kueue_admission_cycle_preemption_skips`` from what the scheduler decides: the overlap scenarios run one cycle
through the real scheduler, and the metric is read off the state the decisions are folded into.

Kueue counts, per ClusterQueue and cycle, the workloads skipped after getting preemption targets: targets that
overlap victims an earlier workload of the cycle chose (with RecomputeAssignmentUponPreemptionTargetsOverlap, only
when recomputing does not help), or, preempting, no longer fitting."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from fixtures import fastyaml

from events import schema as ev
from events.manifests import load_text
from events.timefmt import parse_time
from kueue_es.scheduler import decide
from kueue_es.scheduler.config import load_config
from kueue_es.statefile import load_state
from kueue_es.verify import verify
from projections.cluster import ClusterState
from projections.metrics import families

SCENARIOS = Path(__file__).parent / "scenarios"
METRIC = "kueue_admission_cycle_preemption_skips"


def one_cycle(tmp_path: Path, scenario: str) -> tuple[ClusterState, list[ev.Decision]]:
    spec = fastyaml.safe_load((SCENARIOS / scenario).read_text())
    objects = tmp_path / "state.yaml"
    objects.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config = None
    if "config" in spec:  # the gate's default (on) otherwise
        config = tmp_path / "config.yaml"
        config.write_text(fastyaml.safe_dump(spec["config"]))
    loaded = load_state(str(objects), str(config) if config else None, parse_time("2024-01-01T00:01:00Z"))
    state = loaded.state
    batch = decide(state, loaded.config)
    for d in batch:
        state.apply(ev.Record(state.offset + 1, d))
    return state, batch


def skips(state: ClusterState) -> dict[tuple[str, ...], float]:
    return next(dict(f.samples) for f in families(state) if f.spec.name == METRIC)


@pytest.mark.parametrize(("scenario", "want"), [
    ("overlap-recompute-new-targets-gate-off.yaml", {("a",): 1.0}),
    ("overlap-recompute-deferred-fit-gate-off.yaml", {("a",): 1.0}),
    ("overlap-recompute-new-targets.yaml", {}),  # recomputed: new, disjoint targets
    ("overlap-recompute-deferred-fit.yaml", {}),  # recomputed: fits once the victims are gone
])
def test_an_overlap_counts_as_a_skip_unless_recomputing_resolves_it(tmp_path: Path, scenario: str,
                                                                     want: dict) -> None:
    state, batch = one_cycle(tmp_path, scenario)
    assert skips(state) == want
    skipped = [d.key for d in batch if isinstance(d, ev.WorkloadPending) and d.preemption_skipped]
    assert skipped == (["team/wa"] if want else [])


def test_replay_verify_takes_an_unmarked_skip_of_an_older_log_but_not_a_forged_mark(tmp_path: Path) -> None:
    """Logs written before the scheduler marked its preemption skips hold the same attempts without the mark: they
    still verify. A mark on an attempt the scheduler does not skip is a mismatch."""
    spec = fastyaml.safe_load((SCENARIOS / "overlap-recompute-new-targets-gate-off.yaml").read_text())
    t = parse_time("2024-01-01T00:01:00Z")
    log: list[ev.Event] = [ev.ConfigRecorded(time=t, writer="test", document=spec["config"])]
    log += [ev.ObjectUpserted(time=t, key=x.key, uid=x.metadata.uid, obj=x)
            for x in load_text(fastyaml.safe_dump_all(spec["objects"]), "objects").objects]
    state = ClusterState()
    for i, e in enumerate(log):
        state.apply(ev.Record(i, e))
    batch = decide(state, load_config(spec["config"]))
    assert [d.key for d in batch if isinstance(d, ev.WorkloadPending) and d.preemption_skipped] == ["team/wa"]

    def verified(decisions: list[ev.Decision]) -> bool:
        records = [ev.Record(i, e) for i, e in enumerate([*log, *decisions])]
        return verify(lambda: records).ok

    def marked(d: ev.Decision, mark: bool) -> ev.Decision:
        return msgspec.structs.replace(d, preemption_skipped=mark) if isinstance(d, ev.WorkloadPending) else d

    assert verified(batch)
    assert verified([marked(d, False) for d in batch])
    assert not verified([marked(d, True) for d in batch])



def test_a_skip_the_workload_already_shows_still_sets_the_gauge(tmp_path: Path) -> None:
    """Kueue sets the gauge at the end of every cycle that skips a workload, whatever the workload shows. A skip
    with nothing new to say is written all the same when the gauge shows another number (here 3, as an earlier
    cycle that skipped three would have left it), and not when it shows this cycle's: the scheduler settles."""
    state, _ = one_cycle(tmp_path, "overlap-recompute-new-targets-gate-off.yaml")
    config = load_state(str(tmp_path / "state.yaml"), str(tmp_path / "config.yaml"),
                        parse_time("2024-01-01T00:01:00Z")).config
    state.metrics.skips["a"] = (0, 3)
    batch = decide(state, config)
    assert [(d.key, d.preemption_skipped) for d in batch if isinstance(d, ev.WorkloadPending)] == [("team/wa", True)]
    for d in batch:
        state.apply(ev.Record(state.offset + 1, d))
    assert skips(state) == {("a",): 1.0}
    assert decide(state, config) == [], "the same skip, the gauge showing it: nothing to write"
