"""``run --kube`` over per-replica embedded logs: a replica leads over its own log only if that log is the one the
Lease names (the log of the replica that led last); another is moved aside, never deleted, and a fresh one started.

The race (review L1): r1 admits w on its log; r2 leads with its own log and preempts w for w2; r1 leads again.
Folding its old log, r1 would hold both w and w2 reserving the only cpu, and its status writer would write w's
admission back at the resourceVersion its relist showed (a Workload's observed status is taken only when the log
first sees it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures import eventgen as g

from connectors.k8s.journal import LocalJournal
from connectors.k8s.writer import StatusWriter
from connectors.kafka.scheduler_service import ServiceOptions
from events import objects as o
from kueue_es import checkpoints
from kueue_es.kube_service import _EmbeddedLog
from kueue_es.log_lineage import IDENTITY_FILE
from kueue_es.log_lineage import identity as log_identity
from kueue_es.scheduler import DEFAULT, decide

T = 1_700_000_000_000
OPTS = ServiceOptions(checkpoints_kept=0)


def rv(w: o.Workload, version: str) -> o.Workload:
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, resource_version=version))


class Apiserver:
    """Takes the status writer's patches."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append((name, body))
        return msgspec.json.encode({"metadata": {"resourceVersion": "12"}})


class Reports:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, fields: dict[str, Any]) -> None:
        self.seen.append((kind, fields))


async def lead(path: Path, led_by: str | None, report: Any = None) -> tuple[_EmbeddedLog, LocalJournal]:
    backend = _EmbeddedLog(str(path), OPTS, report or Reports(), led_by=led_by)
    return backend, await backend.open()


async def r1_admits_w(path: Path) -> str:
    """r1's first leadership: the queues, w, and r1's admission of w; returns r1's log identity."""
    backend, j = await lead(path, led_by="")
    await j.append([g.upsert(g.namespace("ns"), T), g.upsert(g.flavor("f0"), T),
                    g.upsert(g.cluster_queue("cq", quotas={"f0": 1}), T), g.upsert(g.local_queue("ns", "lq", "cq"), T)])
    await j.append([g.upsert(rv(g.workload("ns", "w", queue="lq", priority=0, created=T), "1"), T)])
    assert await j.append(list(decide(j.mirror.state, DEFAULT)))
    assert j.mirror.state.workloads["ns/w"].reserving
    await backend.close()
    return backend.identity


async def relist_after_r2(j: LocalJournal) -> o.Workload:
    """What r1's relist appends after r2 preempted w for w2; returns w as the cluster shows it."""
    w = rv(g.workload("ns", "w", queue="lq", priority=0, created=T), "10")
    w_now = msgspec.structs.replace(w, status=o.WorkloadStatus(conditions=[
        o.Condition(type="QuotaReserved", status="False", reason="Pending", message="evicted",
                    last_transition_time="2023-11-14T22:14:00Z"),
        o.Condition(type="Evicted", status="True", reason="Preempted", message="preempted by w2",
                    last_transition_time="2023-11-14T22:14:00Z")]))
    w2 = g.shown_reserved(rv(g.workload("ns", "w2", queue="lq", priority=100, created=T + 5), "11"),
                          g.admission("cq", "f0", 1000), admitted=True)
    await j.append([g.upsert(g.namespace("ns"), T + 10), g.upsert(g.flavor("f0"), T + 10),
                    g.upsert(g.cluster_queue("cq", quotas={"f0": 1}), T + 10),
                    g.upsert(g.local_queue("ns", "lq", "cq"), T + 10), g.upsert(w_now, T + 10), g.upsert(w2, T + 10)])
    return w_now


@pytest.mark.asyncio
async def test_a_log_another_log_led_after_is_moved_aside_and_its_stale_admission_never_written(tmp_path) -> None:
    path = tmp_path / "log1"
    r1_log = await r1_admits_w(path)
    reports = Reports()
    backend, j = await lead(path, led_by="r2-log", report=reports)  # the Lease names r2's log: r2 led since
    try:
        folded = j.mirror.offset
        await relist_after_r2(j)
        state = j.mirror.state
        assert not state.workloads["ns/w"].reserving and state.workloads["ns/w2"].reserving
        api = Apiserver()
        await StatusWriter(api, j).sync("ns/w")
        assert not any((body.get("status") or {}).get("admission") for _, body in api.patches), \
            "r1 must not re-admit w over r2's eviction (w2 holds the only cpu)"
        assert folded == -1, "the stale log is not folded"
        assert backend.identity not in ("", r1_log)
    finally:
        await backend.close()
    [(kind, fields)] = [r for r in reports.seen if r[0] == "log_moved_aside"]
    aside = Path(fields["moved_to"])
    assert aside.parent == tmp_path and aside.name.startswith("log1.stale-") and aside.name.endswith(r1_log)
    assert fields["identity"] == r1_log and fields["lease_named"] == "r2-log"
    assert log_identity(aside) == r1_log and sorted(p.name for p in aside.glob("*.seg")), "kept, not deleted"


@pytest.mark.asyncio
async def test_the_log_the_lease_names_is_folded(tmp_path) -> None:
    path = tmp_path / "log1"
    r1_log = await r1_admits_w(path)
    backend, j = await lead(path, led_by=r1_log)
    try:
        assert backend.identity == r1_log and j.mirror.state.workloads["ns/w"].reserving
    finally:
        await backend.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log1"]


@pytest.mark.asyncio
@pytest.mark.parametrize("identity_file", [True, False])
async def test_a_lease_naming_no_log_folds_no_log_holding_history(tmp_path, identity_file: bool) -> None:
    """A Lease naming no log (deleted by an operator, or written by a version that named none) cannot say who led
    last: a log holding history is moved aside, with or without an identity of its own."""
    path = tmp_path / "log1"
    await r1_admits_w(path)
    if not identity_file:
        (path / IDENTITY_FILE).unlink()
    backend, j = await lead(path, led_by="")
    try:
        assert j.mirror.offset == -1
    finally:
        await backend.close()
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("log1.stale-")]) == 1


@pytest.mark.asyncio
async def test_without_leader_election_the_log_is_folded_as_it_is(tmp_path) -> None:
    path = tmp_path / "log1"
    await r1_admits_w(path)
    (path / IDENTITY_FILE).unlink()
    backend, j = await lead(path, led_by=None)
    try:
        assert j.mirror.state.workloads["ns/w"].reserving and backend.identity
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_an_empty_log_is_kept_whatever_the_lease_names(tmp_path) -> None:
    """First start: nothing to move aside; the log keeps its identity."""
    path = tmp_path / "log1"
    first, _ = await lead(path, led_by="")
    await first.close()
    again, _ = await lead(path, led_by="another")
    await again.close()
    assert again.identity == first.identity and sorted(p.name for p in tmp_path.iterdir()) == ["log1"]


@pytest.mark.asyncio
async def test_a_log_directory_that_cannot_be_renamed_moves_its_files_into_a_hidden_one(tmp_path, monkeypatch) -> None:
    """A volume mounted at the log's own directory cannot be renamed: the log's segments, checkpoints and
    identity go into a hidden directory inside it, and the fresh log starts beside them."""
    path = tmp_path / "log1"
    r1_log = await r1_admits_w(path)
    checkpoints.save(path, 1, b"not read here")
    real_rename = __import__("os").rename

    def rename(src: Any, dst: Any) -> None:
        if Path(src) == path:
            raise OSError(16, "Device or resource busy")
        real_rename(src, dst)

    monkeypatch.setattr("kueue_es.log_lineage.os.rename", rename)
    backend, j = await lead(path, led_by="r2-log")
    try:
        assert j.mirror.offset == -1 and backend.identity != r1_log
    finally:
        await backend.close()
    [aside] = [p for p in path.iterdir() if p.name.startswith(".stale-")]
    assert log_identity(aside) == r1_log and (aside / checkpoints.DIRECTORY).is_dir() and list(aside.glob("*.seg"))
    assert not checkpoints.listed(path)


def test_the_identity_is_a_file_beside_the_segments(tmp_path) -> None:
    async def go() -> str:
        backend, _ = await lead(tmp_path / "log", led_by=None)
        await backend.close()
        return backend.identity

    ident = asyncio.run(go())
    assert (tmp_path / "log" / IDENTITY_FILE).read_text().strip() == ident
