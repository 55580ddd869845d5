"""ConcurrentAdmission when the recorded Configuration turns the gate on or off under a parent Workload (a scenario
runs under one configuration): the fold takes it out of its queue or puts it back. A snapshot keeps a workload's
allowed flavors."""

from __future__ import annotations

from pathlib import Path

import msgspec
from fixtures import fastyaml

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
SCENARIO = Path(__file__).parent / "scenarios" / "concurrent-admission-parent.yaml"


def _record(state: ClusterState, *events: ev.Event) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _config(on: bool, now: int) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=now, document={"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                 "kind": "Configuration", "featureGates": {"ConcurrentAdmission": on}},
                             writer="test", id=f"c-{on}-{now}")


def _state(gate_on: bool) -> ClusterState:
    """The parent scenario's objects (a labelled parent, its variant allowed spot), folded under the gate."""
    state = ClusterState()
    _record(state, _config(gate_on, T0))
    for d in fastyaml.safe_load(SCENARIO.read_text())["objects"]:
        x = msgspec.convert(d, o.KueueObject)
        _record(state, ev.ObjectUpserted(time=T0, key=x.key, uid=x.metadata.uid, obj=x))
    return state


def _queued(state: ClusterState, key: str = "team/job") -> bool:
    q = state.queues.get("cq")
    return q is not None and key in q.shapes


def test_turning_the_gate_on_takes_a_parent_out_of_its_queue_and_off_puts_it_back() -> None:
    state = _state(gate_on=False)
    assert _queued(state), "gate off: the label is not looked at"
    _record(state, _config(True, T0 + 1000))
    assert not _queued(state) and _queued(state, "team/job-variant-spot")
    _record(state, _config(False, T0 + 2000))
    assert _queued(state)


def test_a_snapshot_keeps_the_allowed_flavors() -> None:
    state = _state(gate_on=True)
    assert state.workloads["team/job-variant-spot"].allowed_flavors == ("spot",)
    assert state.workloads["team/job"].allowed_flavors is None
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.workloads["team/job-variant-spot"].allowed_flavors == ("spot",)
    assert snapshot.digest(restored) == snapshot.digest(state)
    assert not _queued(restored)
