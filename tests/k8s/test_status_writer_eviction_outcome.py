"""An eviction whose status write the apiserver refuses is not counted: the writer's ``DecisionRejected``
takes it back out of the eviction metrics and the Workload's ``schedulingStats.evictions`` in the connector's
own fold, as Kueue counts an eviction only once its status write succeeds (#6360). One written stays
counted."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import from_response
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import schema as ev
from events.log import MemoryLog
from projections.metrics import families
from tests.k8s.test_status_writer_cluster_name import ADMISSION, DENIED, WL, Apiserver

EVICT = {"reason": "PodsReadyTimeout", "underlying_cause": "WaitForStart", "message": "timed out"}


class RefusesEvictions(Apiserver):
    """A webhook stricter than Kueue's (another admission policy): no Workload may show Evicted=True."""

    refuse = True

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "",
                    subresource: str = "") -> bytes:
        if self.refuse and any(c["type"] == "Evicted" and c["status"] == "True"
               for c in body["status"].get("conditions") or ()):
            self.patches.append(copy.deepcopy(body))
            status = {"code": 403, "reason": "Forbidden", "message": DENIED + "no evictions here"}
            raise from_response(403, msgspec.json.encode(status), f"PATCH .../workloads/{name}/status")
        return await super().patch(resource, name, body, namespace, subresource)


def evicted_total(journal: LocalJournal) -> dict[tuple[str, ...], float]:
    (f,) = [f for f in families(journal.mirror.state) if f.spec.name == "kueue_evicted_workloads_total"]
    return dict(f.samples)


async def _evicted_after_admission(api: Apiserver) -> tuple[LocalJournal, StatusWriter]:
    """The Workload admitted and that written, then evicted in the log: the eviction not written yet."""
    journal = LocalJournal(MemoryLog(), Mirror())
    base = {"key": WL.key, "uid": "wl-uid", "input": 0}
    await journal.append([ev.ObjectUpserted(time=1, obj=WL, key=WL.key, uid="wl-uid"),
                          ev.QuotaReserved(time=2, cycle=1, admission=ADMISSION, **base),
                          ev.WorkloadAdmitted(time=2, cycle=1, **base)])
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    assert api.status["admission"]["clusterQueue"] == "cq"
    await journal.append([ev.WorkloadEvicted(time=3, cycle=2, **base, **EVICT)])
    # counted when decided
    assert evicted_total(journal) == {("cq", "PodsReadyTimeout", "WaitForStart", ""): 1}
    return journal, writer


@pytest.mark.asyncio
async def test_an_eviction_the_apiserver_refuses_is_taken_back() -> None:
    api = RefusesEvictions(WL)
    journal, writer = await _evicted_after_admission(api)
    await writer.sync(WL.key)
    assert writer.stats.rejections == [(WL.key, "Forbidden")]
    assert evicted_total(journal) == {}
    assert journal.mirror.state.workloads[WL.key].evictions == ()
    assert "schedulingStats" not in api.status


@pytest.mark.asyncio
async def test_an_eviction_written_stays_counted() -> None:
    api = Apiserver(WL)
    journal, writer = await _evicted_after_admission(api)
    await writer.sync(WL.key)
    assert writer.stats.rejected == 0
    assert evicted_total(journal) == {("cq", "PodsReadyTimeout", "WaitForStart", ""): 1}
    assert api.status["schedulingStats"]["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]


@pytest.mark.asyncio
async def test_an_eviction_the_apiserver_refuses_leaves_the_workload_admitted() -> None:
    """Kueue changes nothing when the eviction's write fails: the connector's fold puts the workload back as
    it was, and the writer has nothing more to write for it."""
    api = RefusesEvictions(WL)
    journal, writer = await _evicted_after_admission(api)
    await writer.sync(WL.key)
    wl = journal.mirror.state.workloads[WL.key]
    assert wl.phase == "Admitted" and not wl.evicted
    assert wl.condition("Evicted") is None
    assert list(journal.mirror.state.refused_evictions) == [WL.key]
    patches = len(api.patches)
    await writer.sync(WL.key)
    assert len(api.patches) == patches, "nothing left to write"


@pytest.mark.asyncio
async def test_an_eviction_decided_again_after_a_refusal_is_written_before_the_watch_shows_it_anew() -> None:
    """The writer holds a refused workload until the watch shows it anew, but not a decision made after the
    refusal (the eviction decided again once its backoff ends): that one is tried, and gets an outcome."""
    api = RefusesEvictions(WL)
    journal, writer = await _evicted_after_admission(api)
    await writer.sync(WL.key)
    refused = len(api.patches)
    base = {"key": WL.key, "uid": "wl-uid", "input": 0}
    offsets = await journal.append([ev.WorkloadEvicted(time=1003, cycle=3, **base, **EVICT)])
    await writer.sync(WL.key)
    assert len(api.patches) == refused + 1, "the new decision was not tried"
    assert writer.stats.rejections == [(WL.key, "Forbidden"), (WL.key, "Forbidden")]
    assert journal.mirror.pending.get(WL.key, {}).keys().isdisjoint(offsets)  # it has its outcome
    api.refuse = False
    offsets = await journal.append([ev.WorkloadEvicted(time=3003, cycle=4, **base, **EVICT)])
    await writer.sync(WL.key)
    assert any(c["type"] == "Evicted" and c["status"] == "True" for c in api.status["conditions"])
    assert journal.mirror.state.workloads[WL.key].evicted == "PodsReadyTimeout"
