"""The MultiKueueClusters' Active condition as the connector writes it: one cluster's refused write holds back
neither the others nor the copies (Kueue's cluster and workload reconcilers run apart), and a cluster deleted and
made again under its name gets its condition anew, once the connector has reached it (not taken as connected
before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from test_multikueue_connector import START, RecordingManager, WorkerClient, _appending, _connector, _state

from connectors.k8s.checkstatus import desired_active
from connectors.k8s.errors import Forbidden
from connectors.k8s.multikueue_observe import desired_cluster_active
from events import objects as o
from events import schema as ev
from projections.admissionchecks import check_active


class RefusingManager(RecordingManager):
    """The manager's apiserver refusing the status writes of the MultiKueueClusters named in ``refused``."""

    def __init__(self, state: Any, refused: set[str]) -> None:
        super().__init__(state)
        self.refused = refused
        self.written: list[str] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        if resource.kind == "MultiKueueCluster" and name in self.refused:
            raise Forbidden(f'multikueueclusters.kueue.x-k8s.io "{name}" is forbidden', 403)
        if resource.kind == "MultiKueueCluster":
            self.written.append(name)
        return await super().patch(resource, name, body, namespace, subresource)


async def _nothing(*_a: Any, **_k: Any) -> None:
    return None


async def _statuses_written(state: Any) -> tuple[Any, RefusingManager]:
    """A connector with no worker reached and a manager refusing nothing, after one pass of its cluster statuses."""
    mk = _connector(state, {})
    manager = RefusingManager(state, set())
    mk.client = manager  # type: ignore[assignment]
    await mk._write_cluster_status()
    return mk, manager


@pytest.mark.asyncio
async def test_one_refused_cluster_status_write_holds_back_neither_the_others_nor_the_copies(tmp_path: Path) -> None:
    state = _state(tmp_path)
    w1, w2 = WorkerClient(), WorkerClient()
    mk = _connector(state, {"worker1": w1, "worker2": w2})
    _appending(mk)
    manager = RefusingManager(state, {"worker2"})
    mk.client = manager  # type: ignore[assignment]
    mk._discover = _nothing  # type: ignore[method-assign]
    mk._sync_workers = _nothing  # type: ignore[method-assign]
    await mk.sync()
    assert w1.created == ["Workload:default/job-a"] and w2.created == ["Workload:default/job-a"]
    assert manager.written == ["worker1"] and mk.stats.errors == 1
    manager.refused.clear()
    await mk.sync()
    assert manager.written == ["worker1", "worker2"], "tried again on the next pass"


@pytest.mark.asyncio
async def test_a_cluster_made_again_under_its_name_gets_its_active_condition(tmp_path: Path) -> None:
    state = _state(tmp_path)
    mk, manager = await _statuses_written(state)
    assert sorted(manager.written) == ["worker1", "worker2"]
    cluster = state.multikueue_clusters["worker1"]
    state.apply(ev.Record(state.offset + 1, ev.ObjectDeleted(time=START, kind="MultiKueueCluster", key="worker1")))
    await mk._write_cluster_status()
    fresh = msgspec.structs.replace(cluster, metadata=msgspec.structs.replace(cluster.metadata, uid="new-uid"),
                                    status=msgspec.structs.replace(cluster.status, conditions=[]))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key="worker1", obj=fresh)))
    manager.written.clear()
    await mk._write_cluster_status()
    assert manager.written == [], "not reached yet: lost since its deletion, no condition written of that"
    state.apply(ev.Record(state.offset + 1, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True)))
    await mk._write_cluster_status()
    assert manager.written == ["worker1"]
    assert manager.patches[-1]["status"]["conditions"][-1]["type"] == "Active"


@pytest.mark.asyncio
async def test_a_cluster_lost_then_made_again_gets_no_active_condition_of_what_was_seen_before(tmp_path: Path) -> None:
    """A worker lost (ClientConnectionFailed), its MultiKueueCluster deleted and made again: until the connector has
    tried the new one, nothing of the old connection is written on it; the lost time runs on from the first loss."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.MultiKueueClusterObserved(
        time=START + 1000, key="worker1", connected=False, reason="ClientConnectionFailed", message="refused")))
    cluster = state.multikueue_clusters["worker1"]
    state.apply(ev.Record(state.offset + 1, ev.ObjectDeleted(time=START + 2000, kind="MultiKueueCluster",
                                                             key="worker1")))
    fresh = msgspec.structs.replace(cluster, metadata=msgspec.structs.replace(cluster.metadata, uid="new-uid"),
                                    status=msgspec.structs.replace(cluster.status, conditions=[]))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START + 3000, key="worker1", obj=fresh)))
    assert (state.cluster_links["worker1"].connected, state.cluster_links["worker1"].since) == (False, START + 1000)
    mk, manager = await _statuses_written(state)
    assert manager.written == ["worker2"]


def _at_generation(obj: Any, generation: int, shown: list[Any]) -> Any:
    """``obj`` (a MultiKueueCluster or AdmissionCheck) at ``generation`` (its spec edited), showing ``shown``."""
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, generation=generation),
                                   status=msgspec.structs.replace(obj.status, conditions=shown))


ACTIVE_AT_1 = o.Condition(type="Active", status="True", reason="Active", message="Connected",
                          last_transition_time="2024-01-01T00:00:00Z", observed_generation=1)


def test_a_clusters_active_condition_takes_the_generation_a_spec_edit_brings() -> None:
    """Kueue #15962 (release-0.18/0.19 #15986/#15989): a MultiKueueCluster whose spec was edited and whose
    connection stays as it was gets its ``Active`` condition written anew at its new generation (its
    lastTransitionTime kept); shown at its generation already, nothing is written."""
    cluster = o.MultiKueueCluster(metadata=o.ObjectMeta(name="worker1", uid="u", generation=1))
    want = ("True", "Active", "Connected")
    t = 1_767_225_600_000
    assert desired_cluster_active(_at_generation(cluster, 1, [ACTIVE_AT_1]), want, t) is None
    (cond,) = desired_cluster_active(_at_generation(cluster, 2, [ACTIVE_AT_1]), want, t) or []
    assert cond == {**msgspec.to_builtins(ACTIVE_AT_1), "observedGeneration": 2}


def test_a_multikueue_checks_active_condition_takes_the_generation_a_spec_edit_brings(tmp_path: Path) -> None:
    """Kueue #14838: a MultiKueue AdmissionCheck edited (its parameters naming another, equally active config)
    gets its ``Active`` condition written at its new generation, status, reason and message unchanged."""
    state = _state(tmp_path)
    ac = state.admission_checks["mk"]
    shown = o.Condition(type="Active", status="False", reason="SomeActiveClusters",
                        message="Inactive clusters: [worker1]", last_transition_time="2024-01-01T00:00:00Z",
                        observed_generation=1)
    state.apply(ev.Record(state.offset + 1, ev.MultiKueueClusterObserved(
        time=START, key="worker1", connected=False, reason="ClientConnectionFailed", message="refused")))
    active, reason, message = check_active(ac, {}, state.multikueue)
    shown = msgspec.structs.replace(shown, status="True" if active else "False", reason=reason, message=message)
    assert desired_active(_at_generation(ac, 1, [shown]), {}, START, state.multikueue) is None
    (cond,) = desired_active(_at_generation(ac, 3, [shown]), {}, START, state.multikueue) or []
    assert cond == {**msgspec.to_builtins(shown), "observedGeneration": 3}


@pytest.mark.asyncio
async def test_a_cluster_edited_gets_its_active_condition_written_at_its_new_generation(tmp_path: Path) -> None:
    state = _state(tmp_path)
    mk, manager = await _statuses_written(state)
    cluster = state.multikueue_clusters["worker1"]
    (written,) = [p["status"]["conditions"][-1] for p in manager.patches][:1]
    shown = msgspec.convert(written, o.Condition)
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key="worker1", obj=_at_generation(
        cluster, cluster.metadata.generation, [shown]))))
    manager.written.clear()
    await mk._write_cluster_status()
    assert manager.written == [], "shown as it should be"
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=START, key="worker1", obj=_at_generation(
        cluster, cluster.metadata.generation + 1, [shown]))))
    await mk._write_cluster_status()
    assert manager.written == ["worker1"]
    assert manager.patches[-1]["status"]["conditions"][-1]["observedGeneration"] == cluster.metadata.generation + 1
