"""MultiKueue's incremental and external dispatchers: what the timeline scenarios (``scenarios/multikueue-
incremental*.yaml``) cannot show — a round's exact end, the Configuration's checks and the round a
snapshot keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.multikueue import ROUND_MS, Dispatcher, next_round
from kueue_es.statefile import load_state
from projections import snapshot
from projections.admissionchecks import INCREMENTAL_DISPATCHER

SCENARIOS = Path(__file__).parent / "scenarios"
START = 1_704_067_200_000
KEY = "default/job-a"
STEP_1 = Dispatcher(INCREMENTAL_DISPATCHER, 1, True)


def _state(tmp_path: Path, scenario: str = "multikueue-dispatch.yaml"):
    objects = yaml.safe_load((SCENARIOS / scenario).read_text())["objects"]
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    state = load_state(str(path), None, START).state
    _apply(state, *(ev.MultiKueueClusterObserved(time=START, key=w, connected=True) for w in ("worker1", "worker2")))
    return state


def _apply(state, *events) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _nominated_once(tmp_path: Path):
    """The dispatch scenario's workload holding quota, worker1 nominated at START (a round of one)."""
    state = _state(tmp_path)
    settle(state, DEFAULT, now=START)  # quota reserved, the all-at-once dispatcher nominates both workers
    _apply(state, ev.ClustersNominated(time=START, key=KEY, clusters=["worker1"], cycle=0, input=0))
    return state


def test_a_round_is_over_only_once_more_than_5_minutes_passed(tmp_path: Path) -> None:
    state = _nominated_once(tmp_path)
    wl = state.workloads[KEY]
    assert wl.nominated_at == START
    assert next_round(state, wl, "mk", STEP_1, START + ROUND_MS) is None
    assert next_round(state, wl, "mk", STEP_1, START + ROUND_MS + 1) == ["worker1", "worker2"]


def test_no_round_when_every_worker_is_nominated(tmp_path: Path) -> None:
    state = _nominated_once(tmp_path)
    _apply(state, ev.ClustersNominated(time=START + 1, key=KEY, clusters=["worker1", "worker2"], cycle=0, input=0))
    assert next_round(state, state.workloads[KEY], "mk", STEP_1, START + 10 * ROUND_MS) is None


def test_cleared_nominations_start_a_round_at_once(tmp_path: Path) -> None:
    """An eviction clears the nominations (and Kueue forgets the round of a workload without quota): the next
    round is not waited for."""
    state = _nominated_once(tmp_path)
    wl = state.workloads[KEY]
    wl.nominated = ()
    assert next_round(state, wl, "mk", STEP_1, START + 1) == ["worker1"]


def test_a_snapshot_keeps_the_round(tmp_path: Path) -> None:
    state = _nominated_once(tmp_path)
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.workloads[KEY].nominated_at == START
    assert snapshot.digest(restored) == snapshot.digest(state)


def _config(multikueue: dict):
    return load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                        "multiKueue": multikueue}, "cfg.yaml")


def test_the_configuration_names_the_incremental_dispatcher() -> None:
    assert _config({"dispatcherName": INCREMENTAL_DISPATCHER}).multi_kueue.dispatcher_name == INCREMENTAL_DISPATCHER
    step = _config({"dispatcherName": INCREMENTAL_DISPATCHER, "incrementalDispatcherConfig": {"stepSize": 1}})
    assert step.multi_kueue.incremental_dispatcher_config.step_size == 1


@pytest.mark.parametrize(("multikueue", "field"), [
    ({"incrementalDispatcherConfig": {"stepSize": 2}}, "multiKueue.incrementalDispatcherConfig"),
    ({"dispatcherName": INCREMENTAL_DISPATCHER, "incrementalDispatcherConfig": {"stepSize": 0}},
     "multiKueue.incrementalDispatcherConfig.stepSize"),
])
def test_incremental_dispatcher_config_is_checked(multikueue: dict, field: str) -> None:
    with pytest.raises(InvalidInput, match=f"field `{field}`"):
        _config(multikueue)
