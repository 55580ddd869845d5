"""The status writer writes only the condition types kueue-es owns: a condition of another type, which another
controller or a user set on the Workload after kueue-es first saw it, is kept as the apiserver shows it — by the
first write and by one retried after a conflict (Kueue applies only its own condition types, the conditions being a
list keyed by type)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import Conflict
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from projections.workloads import KUEUE_CONDITIONS, WAITING_FOR_REPLACEMENT_PODS

WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]))
AUDITED = o.Condition(type="example.com/Audited", status="True", reason="Audited", message="by the auditor",
                      last_transition_time="2026-01-01T00:00:00Z")


def _at(rv: str, *conditions: o.Condition) -> o.Workload:
    return msgspec.structs.replace(WL, metadata=msgspec.structs.replace(WL.metadata, resource_version=rv),
                                   status=o.WorkloadStatus(conditions=list(conditions)))


class Apiserver:
    """Takes every status patch; with ``fresh``, the first one (on resourceVersion 1) conflicts and a re-read shows
    ``fresh`` (written by someone else meanwhile)."""

    def __init__(self, fresh: o.Workload | None = None) -> None:
        self.patches: list[dict[str, Any]] = []
        self.fresh = fresh

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        if self.fresh is not None and body["metadata"]["resourceVersion"] == "1":
            raise Conflict("the object has been modified", 409)
        return msgspec.json.encode({"metadata": {"resourceVersion": "9"}})

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.fresh)


def _pending() -> ev.WorkloadPending:
    return ev.WorkloadPending(time=5, key=WL.key, uid="wl-uid", cycle=1, input=0, reason="Pending",
                              message="no quota")


def _types(body: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in body["status"]["conditions"]}


@pytest.mark.asyncio
async def test_a_condition_added_after_kueue_es_first_saw_the_workload_is_kept() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.ObjectUpserted(time=2, key=WL.key, uid="wl-uid", obj=_at("2", AUDITED)),
                          _pending()])
    api = Apiserver()
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    (body,) = api.patches
    assert _types(body) == {"example.com/Audited": "True", "QuotaReserved": "False", "Admitted": "False"}
    assert body["status"]["conditions"][0] == msgspec.to_builtins(AUDITED), "kept as it is, where it is"


@pytest.mark.asyncio
async def test_a_foreign_condition_is_written_as_the_apiserver_shows_it_not_as_first_seen() -> None:
    """The projection took the conditions the Workload showed when first seen: a foreign one changed or removed by
    its owner since is not written back from there."""
    seen = o.Condition(type="example.com/Audited", status="False", reason="Waiting",
                       last_transition_time="2025-12-01T00:00:00Z")
    gone = o.Condition(type="example.com/Gone", status="True", reason="Old")
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=_at("1", seen, gone)),
                          ev.ObjectUpserted(time=2, key=WL.key, uid="wl-uid", obj=_at("2", AUDITED)),
                          _pending()])
    api = Apiserver()
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    (body,) = api.patches
    assert _types(body) == {"example.com/Audited": "True", "QuotaReserved": "False", "Admitted": "False"}


@pytest.mark.asyncio
async def test_a_write_retried_after_a_conflict_keeps_the_condition_added_meanwhile() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL), _pending()])
    api = Apiserver(fresh=_at("2", AUDITED))
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    first, retried = api.patches
    assert first["metadata"]["resourceVersion"] == "1" and retried["metadata"]["resourceVersion"] == "2"
    assert _types(first) == {"QuotaReserved": "False", "Admitted": "False"}
    assert _types(retried) == {"example.com/Audited": "True", "QuotaReserved": "False", "Admitted": "False"}
    outcomes = [r.event for r in [r async for r in journal.log.read()] if isinstance(r.event, ev.DecisionApplied)]
    assert [e.decision for e in outcomes] == [1]
    # our own write stands for the Workload until the watch shows it: nothing left to write
    await writer.sync(WL.key)
    assert len(api.patches) == 2


@pytest.mark.asyncio
async def test_a_foreign_condition_alone_is_nothing_to_write() -> None:
    """A condition someone else added to a Workload whose status kueue-es already wrote is theirs: no write."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL), _pending()])
    api = Apiserver()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    (body,) = api.patches
    written = msgspec.convert(body["status"], o.WorkloadStatus, from_attributes=True)
    shown = msgspec.structs.replace(written, conditions=[*written.conditions, AUDITED])
    await journal.append([ev.ObjectUpserted(time=6, key=WL.key, uid="wl-uid", obj=msgspec.structs.replace(
        WL, metadata=msgspec.structs.replace(WL.metadata, resource_version="10"), status=shown))])
    await writer.sync(WL.key)
    assert len(api.patches) == 1


def test_every_condition_type_the_fold_sets_is_one_kueue_es_writes() -> None:
    """A type the fold sets but the writer took for another's would be written from the apiserver, not the log."""
    root = Path(__file__).resolve().parents[2]
    set_types = {m for p in sorted((root / "projections").glob("*.py"))
                 for m in re.findall(r'set_condition\(\s*"([^"]+)"', p.read_text())}
    assert set_types and set_types | {WAITING_FOR_REPLACEMENT_PODS} <= KUEUE_CONDITIONS


TARGET = o.Condition(type="DeactivationTarget", status="True", reason="EvictedOnManagerCluster",
                     message="Evicted on manager: preempted", last_transition_time="2026-01-01T00:00:00Z")


@pytest.mark.asyncio
async def test_a_deactivated_workload_s_write_removes_the_deactivation_target_it_acted_on() -> None:
    """Another controller (a MultiKueue manager) set DeactivationTarget on the Workload; once kueue-es deactivated
    it, its status write shows the eviction and no DeactivationTarget, as Kueue's controller removes it."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.ObjectUpserted(time=2, key=WL.key, uid="wl-uid", obj=_at("2", TARGET)),
                          ev.WorkloadDeactivated(time=5, key=WL.key, uid="wl-uid", cycle=1, input=1,
                                                 reason="DeactivatedDueToEvictedOnManagerCluster",
                                                 message="The workload is deactivated due to Evicted on manager: "
                                                         "preempted")])
    api = Apiserver()
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    body = [p for p in api.patches if "status" in p][-1]
    types = _types(body)
    assert "DeactivationTarget" not in types and types["Evicted"] == "True"


@pytest.mark.asyncio
async def test_an_active_workload_s_write_keeps_the_deactivation_target_shown() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid="wl-uid", obj=WL),
                          ev.ObjectUpserted(time=2, key=WL.key, uid="wl-uid", obj=_at("2", TARGET)), _pending()])
    api = Apiserver()
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    (body,) = api.patches
    assert _types(body)["DeactivationTarget"] == "True"
