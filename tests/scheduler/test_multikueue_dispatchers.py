"""MultiKueue's incremental and external dispatchers: what the timeline scenarios (``scenarios/multikueue-
incremental*.yaml``, ``multikueue-external.yaml``) cannot show — a round's exact end, the Configuration's checks,
nominations observed only under an external dispatcher, and the round a snapshot keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import fastyaml
from fixtures.multikueue_states import other_check_state, shown_nominating

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.multikueue import ROUND_MS, Dispatcher, next_round
from kueue_es.statefile import load_state
from projections import snapshot
from projections.admissionchecks import ALL_AT_ONCE_DISPATCHER, INCREMENTAL_DISPATCHER

SCENARIOS = Path(__file__).parent / "scenarios"
START = 1_704_067_200_000
KEY = "default/job-a"
STEP_1 = Dispatcher(INCREMENTAL_DISPATCHER, 1, True)


def _state(tmp_path: Path, scenario: str = "multikueue-dispatch.yaml"):
    objects = fastyaml.safe_load((SCENARIOS / scenario).read_text())["objects"]
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
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


def test_nominations_on_the_workload_are_taken_only_from_an_external_dispatcher(tmp_path: Path) -> None:
    state = _state(tmp_path)
    settle(state, DEFAULT, now=START)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    # Kueue's own dispatcher in force: the log's nominations stay
    _apply(state, shown_nominating(state, ["worker2"], START + 1))
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "multiKueue": {"dispatcherName": "example.com/dispatcher"}}
    _apply(state, ev.ConfigRecorded(time=START + 2, document=document, writer="test", id="external"))
    _apply(state, shown_nominating(state, ["worker2"], START + 3))
    assert state.workloads[KEY].nominated == ("worker2",)
    assert state.workloads[KEY].nominated_at == START + 3


def test_observed_nominations_of_a_workload_without_quota_are_not_taken(tmp_path: Path) -> None:
    state = _state(tmp_path)
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "multiKueue": {"dispatcherName": "example.com/dispatcher"}}
    _apply(state, ev.ConfigRecorded(time=START, document=document, writer="test", id="external"),
           shown_nominating(state, ["worker2"], START + 1))
    assert state.workloads[KEY].nominated == ()


def _config(multikueue: dict):
    return load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                        "multiKueue": multikueue}, "cfg.yaml")


def test_the_configuration_names_any_dispatcher() -> None:
    assert _config({"dispatcherName": INCREMENTAL_DISPATCHER}).multi_kueue.dispatcher_name == INCREMENTAL_DISPATCHER
    assert _config({"dispatcherName": "example.com/d"}).multi_kueue.dispatcher_name == "example.com/d"
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


# --- another admission check not Ready (Kueue #9866) -------------------------------------------------------


def test_the_incremental_dispatcher_runs_its_rounds_while_another_check_is_pending(tmp_path: Path) -> None:
    """Kueue's incremental dispatcher is a controller of its own, which looks only at the MultiKueue check,
    the quota and ``clusterName``: its rounds start at the quota reservation; only the copies wait for the
    other checks (``tests/k8s/test_multikueue_copies_wait.py``)."""
    state, _ = other_check_state(tmp_path, INCREMENTAL_DISPATCHER)
    wl = state.workloads[KEY]
    assert wl.check_states["other"].state == "Pending"
    assert (wl.nominated, wl.nominated_at) == (("worker1", "worker2"), START)


def test_the_all_at_once_dispatcher_nominates_only_once_every_other_check_is_ready(tmp_path: Path) -> None:
    """Kueue's all-at-once nominations are made after its guard (``nominateAndSynchronizeWorkers``)."""
    state, config = other_check_state(tmp_path, ALL_AT_ONCE_DISPATCHER)
    assert state.workloads[KEY].nominated == ()
    _apply(state, ev.AdmissionCheckStateChanged(time=START + 1, key=KEY, check="other", state="Ready"))
    settle(state, config, now=START + 1)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")


def test_an_external_dispatchers_nominations_are_taken_while_another_check_is_pending(tmp_path: Path) -> None:
    """They are the Workload's status, which Kueue stores whatever the checks; only the copies wait."""
    state, _ = other_check_state(tmp_path, "example.com/dispatcher")
    _apply(state, shown_nominating(state, ["worker2"], START + 1))
    assert state.workloads[KEY].nominated == ("worker2",)
