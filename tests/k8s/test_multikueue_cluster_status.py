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

from connectors.k8s.errors import Forbidden
from events import schema as ev


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
    mk = _connector(state, {})
    manager = RefusingManager(state, set())
    mk.client = manager  # type: ignore[assignment]
    await mk._write_cluster_status()
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
    mk = _connector(state, {})
    manager = RefusingManager(state, set())
    mk.client = manager  # type: ignore[assignment]
    await mk._write_cluster_status()
    assert manager.written == ["worker2"]
