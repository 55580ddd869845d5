"""ConfigurablePreemptions' PreemptionConfigs in the fold: kept by name as upserted, gone when deleted, carried by a
snapshot (version 40) and absent from an older one (which held none)."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import delete, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState


def _config(name: str, trigger: str = "Always") -> o.PreemptionConfig:
    return msgspec.convert({"metadata": {"name": name}, "spec": {"rules": [
        {"name": "r", "activationPolicy": {"trigger": trigger}, "candidateSelectors": [{"scope": "WithinClusterQueue"}]},
    ]}}, o.PreemptionConfig)


def _fold(*events: ev.Event) -> ClusterState:
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def test_the_fold_keeps_each_preemption_config_by_name_until_deleted() -> None:
    state = _fold(upsert(_config("a"), 1), upsert(_config("b"), 2), upsert(_config("a", "InsufficientQuota"), 3))
    assert sorted(state.preemption_configs) == ["a", "b"]
    assert state.preemption_configs["a"].spec.rules[0].activation_policy.trigger == "InsufficientQuota"
    state.apply(ev.Record(3, delete("PreemptionConfig", "a", 4)))
    assert sorted(state.preemption_configs) == ["b"]


def test_a_snapshot_carries_the_preemption_configs() -> None:
    state = _fold(upsert(_config("a"), 1))
    taken = snapshot.take(state)
    assert taken.version == snapshot.SNAPSHOT_VERSION >= 43
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.preemption_configs == state.preemption_configs
    old = msgspec.structs.replace(taken, version=42, objects=[
        obj for obj in taken.objects if not isinstance(obj, o.PreemptionConfig)])
    assert snapshot.restore(old).preemption_configs == {}
