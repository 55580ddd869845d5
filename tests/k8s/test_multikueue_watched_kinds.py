"""Which kinds the MultiKueue connector watches on a worker: Kueue's MultiKueue controller watches there only the
kinds of the adapters it built — those of the frameworks ``integrations.frameworks`` enables — so a worker's
copies of any other kind are neither listed nor watched; when the Configuration enables another framework, the
worker's watches are opened again on the new set of kinds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fixtures.multikueue_states import START, WorkerApi, apply, owned_state

from connectors.k8s.client import RawList
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_worker import Worker
from events import schema as ev


class ListingWorker(WorkerApi):
    """A worker's apiserver that records the kinds listed; its watches open and stay open, showing nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []

    async def list(self, resource: Any, **_: Any) -> Any:
        self.listed.append(resource.kind)
        return RawList()

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if on_open is not None:
            on_open()
        await asyncio.Event().wait()
        yield  # pragma: no cover


def _frameworks(state: Any, *frameworks: str) -> None:
    apply(state, ev.ConfigRecorded(time=START, document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "integrations": {"frameworks": list(frameworks)}}, writer="test", id="-".join(frameworks)))


async def _listed_once(worker: ListingWorker, w: Worker) -> list[str]:
    for _ in range(100):
        await asyncio.sleep(0.005)
        if w.connected:
            break
    assert w.connected
    return sorted(worker.listed)


@pytest.mark.asyncio
async def test_a_worker_is_watched_for_the_enabled_frameworks_kinds_only_and_again_when_they_change(
        tmp_path: Path) -> None:
    state = owned_state(tmp_path, "batch/v1", "Job")
    _frameworks(state, "batch/job")
    worker = ListingWorker()
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(worker, journal, append=None)  # type: ignore[arg-type]
    w = mk.workers["worker1"] = Worker("worker1", b"kubeconfig", client=worker)  # type: ignore[arg-type]
    await mk._discover(mk._config())
    await mk._rewatch(w, "multikueue")
    try:
        assert await _listed_once(worker, w) == ["Job", "Workload"]
        assert set(w.owners) == {"Job"}

        worker.listed.clear()
        await mk._discover(mk._config())
        await asyncio.sleep(0.02)
        assert worker.listed == [] and w.connected, "the same kinds: the watches are left as they are"

        _frameworks(state, "batch/job", "pod", "statefulset")
        await mk._discover(mk._config())
        assert mk._all_moved, "every workload is looked at again"
        assert await _listed_once(worker, w) == ["Job", "Pod", "StatefulSet", "Workload"]
        assert set(w.owners) == {"Job", "Pod", "StatefulSet"}
    finally:
        await mk._stop_watches(w)
