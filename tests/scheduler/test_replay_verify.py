"""``replay --verify`` re-runs the scheduler at every decision point: passes on honest logs, fails on tampered ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from events import objects as o
from events import schema as ev
from events.filelog import FileLog
from events.manifests import load_file
from kueue_es.scheduler import decide
from projections.cluster import ClusterState

SCENARIOS = Path(__file__).parent / "scenarios"


async def _write_log(path: Path, scenario: str, tamper=None, ticks: tuple[int, ...] = ()) -> int:
    """Import a scenario's objects, let the scheduler settle (again after each clock tick at ``ticks`` ms from the
    start), finish what was admitted, settle again."""
    from fixtures import fastyaml

    objects_yaml = path.parent / f"{path.name}.objects.yaml"
    objects_yaml.write_text(fastyaml.safe_dump_all(fastyaml.safe_load((SCENARIOS / scenario).read_text())["objects"]))
    objs = load_file(str(objects_yaml)).objects
    state = ClusterState()
    log = FileLog.open(path)
    t = 1_704_067_200_000
    decisions = 0

    async def append(batch):
        offsets = await log.append(batch)
        for off, e in zip(offsets, batch, strict=True):
            state.apply(ev.Record(off, e))

    async def settle():
        nonlocal decisions
        while batch := decide(state, now=state.time):
            decisions += len(batch)
            if tamper is not None:
                batch = tamper(batch)
            await append(batch)

    await append([ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj) for obj in objs])
    await settle()
    for tick in ticks:
        await append([ev.ClockTicked(time=t + tick)])
        await settle()
    admitted = sorted(k for k, w in state.workloads.items() if w.phase in ("QuotaReserved", "Admitted"))
    await append([ev.WorkloadFinished(time=t + 60_000, key=k, uid=state.workloads[k].uid) for k in admitted])
    await settle()
    await log.close()
    return decisions


def _verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kueue_es", "replay", "--log", str(path), "--verify"],
                          capture_output=True, text=True)


@pytest.mark.parametrize("scenario", ["reclaim-within-cohort.yaml", "best-effort-fifo-skips.yaml",
                                      "preempt-within-clusterqueue.yaml", "flavor-scan-resumes-after-skip.yaml",
                                      "flavor-scan-requeue-to-heap.yaml"])
def test_verify_passes_on_an_honest_log(tmp_path: Path, scenario: str) -> None:
    n = anyio.run(_write_log, tmp_path / "log", scenario)
    assert n > 0
    result = _verify(tmp_path / "log")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified:" in result.stdout


def test_verify_on_a_live_log_checks_what_was_there_when_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A scheduler appends while ``replay --verify`` runs: both passes stop at the end read when it started, so the
    second never meets a decision batch (a new cycle, from an input) the first did not see."""
    from kueue_es import cli
    from kueue_es.commands import _verify

    path = tmp_path / "log"
    anyio.run(_write_log, path, "best-effort-fifo-skips.yaml")
    reader = FileLog.open(path, readonly=True)
    decided = [[r.event for r in batch] for batch in reader.scan() if isinstance(batch[0].event, ev.Decision)]
    reader.close_sync()
    real = _verify.verify

    def appending_between_passes(read, override=None):
        calls = []

        def passes():
            calls.append(1)
            if len(calls) == 2:
                writer = FileLog.open(path, fsync="never")
                anyio.run(writer.append, decided[-1])  # a stand-in for the scheduler's next decision batch
                writer.close_sync()
            return read()

        return real(passes, override)

    monkeypatch.setattr(_verify, "verify", appending_between_passes)
    assert cli.main(["replay", "--log", str(path), "--verify"]) == 0
    assert "verified:" in capsys.readouterr().out


def test_verify_fails_loudly_on_a_tampered_decision(tmp_path: Path) -> None:
    def swap_flavor(batch):
        out = []
        for e in batch:
            if isinstance(e, ev.QuotaReserved):
                psa = e.admission.pod_set_assignments[0]
                forged = msgspec.structs.replace(psa, flavors={"cpu": "forged-flavor"})
                e = msgspec.structs.replace(e, admission=o.Admission(cluster_queue=e.admission.cluster_queue,
                                                                      pod_set_assignments=[forged]))
            out.append(e)
        return out

    anyio.run(_write_log, tmp_path / "log", "best-effort-fifo-skips.yaml", swap_flavor)
    result = _verify(tmp_path / "log")
    assert result.returncode == 1
    assert "MISMATCH" in result.stdout and "admission" in result.stdout


def _rewrite_usage(write):
    """A tamper that rewrites every QuotaReserved's resourceUsage strings with ``write(resource, value)``."""
    from events.quantity import to_int

    def rewrite(batch):
        out = []
        for e in batch:
            if isinstance(e, ev.QuotaReserved):
                psas = [msgspec.structs.replace(p, resource_usage={r: write(r, to_int(r, q))
                                                                   for r, q in p.resource_usage.items()})
                        for p in e.admission.pod_set_assignments]
                e = msgspec.structs.replace(e, admission=msgspec.structs.replace(e.admission,
                                                                                   pod_set_assignments=psas))
            out.append(e)
        return out
    return rewrite


def test_verify_compares_resource_usage_by_value(tmp_path: Path) -> None:
    """Logs written before resourceUsage took Kueue's formatter hold ``1000`` cores and ``1000000000`` bytes where
    the scheduler now writes ``1k`` and ``1G``: the same decision. A different value is still a mismatch."""
    from events.quantity import format_quantity

    anyio.run(_write_log, tmp_path / "old", "resource-usage-format.yaml", _rewrite_usage(format_quantity))
    result = _verify(tmp_path / "old")
    assert result.returncode == 0, result.stdout + result.stderr

    anyio.run(_write_log, tmp_path / "forged", "resource-usage-format.yaml",
              _rewrite_usage(lambda r, v: format_quantity(r, v + 1000)))
    result = _verify(tmp_path / "forged")
    assert result.returncode == 1
    assert "MISMATCH" in result.stdout and "resourceUsage" in result.stdout


def _rewrite_messages(old: str, new: str):
    """A tamper that replaces ``old`` with ``new`` in every pending decision's message."""
    def rewrite(batch):
        return [msgspec.structs.replace(e, message=e.message.replace(old, new))
                if isinstance(e, ev.WorkloadPending) else e for e in batch]
    return rewrite


def _pending_messages(path: Path) -> list[str]:
    log = FileLog.open(path, readonly=True)
    return [r.event.message for batch in log.scan() for r in batch if isinstance(r.event, ev.WorkloadPending)]


def test_verify_compares_amounts_in_messages_by_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs written before the quota messages took Kueue's formatter and wording say ``1000000000 more needed``
    and ``request > maximum capacity (1953125Ki > 1500000000)`` where the scheduler now says ``1G more needed``
    and ``previously considered podsets requests (0) + current podset request (1953125Ki) > maximum capacity
    (1500M)``: the same decisions. Another amount, in either format, or other words, is a mismatch."""
    from events.quantity import format_quantity
    from kueue_es.scheduler import flavors, quota_messages

    def older(resource: str, flavor: str, assumed: int, request: int, max_capacity: int,
              byte_valued: bool = False) -> str:
        if assumed:
            return quota_messages.over_capacity(resource, flavor, assumed, request, max_capacity)
        return (f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity "
                f"({format_quantity(resource, request)} > {format_quantity(resource, max_capacity)})")

    def write_old_log(name: str, tamper=None) -> None:
        with monkeypatch.context() as old_scheduler:
            old_scheduler.setattr(quota_messages, "exact_quantity",
                                  lambda resource, value, byte_valued=False: format_quantity(resource, value))
            old_scheduler.setattr(flavors, "over_capacity", older)
            anyio.run(_write_log, tmp_path / name, "quota-message-quantities.yaml", tamper)

    write_old_log("old")
    old = _pending_messages(tmp_path / "old")
    for said in ("1000000000 more needed", "1000 more needed", "request > maximum capacity (1953125Ki > 1500000000)",
                 "previously considered podsets requests (1000000000) + current podset request (1000000000)"):
        assert any(said in m for m in old), said
    result = _verify(tmp_path / "old")
    assert result.returncode == 0, result.stdout + result.stderr

    forgeries = {"old-amount": ("1000000000 more needed", "1000000001 more needed"),
                 "old-words": ("1000000000 more needed", "1000000000 more wanted"),
                 "old-capacity": ("(1953125Ki > 1500000000)", "(1953125Ki > 1500000001)")}
    for name, (was, forged) in forgeries.items():
        write_old_log(name, _rewrite_messages(was, forged))
    forgeries["new-amount"] = ("1G more needed", "2G more needed")
    anyio.run(_write_log, tmp_path / "new-amount", "quota-message-quantities.yaml",
              _rewrite_messages(*forgeries["new-amount"]))
    for name, (_, forged) in forgeries.items():
        assert any(forged in m for m in _pending_messages(tmp_path / name))
        result = _verify(tmp_path / name)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "MISMATCH" in result.stdout and "message" in result.stdout, result.stdout


def test_verify_fails_on_a_dropped_decision(tmp_path: Path) -> None:
    dropped = []

    def drop_preemption(batch):
        kept = [e for e in batch if not isinstance(e, ev.WorkloadPreempted)]
        dropped.extend(e for e in batch if isinstance(e, ev.WorkloadPreempted))
        return kept or batch

    anyio.run(_write_log, tmp_path / "log", "preempt-within-clusterqueue.yaml", drop_preemption)
    assert dropped
    result = _verify(tmp_path / "log")
    assert result.returncode == 1, result.stdout


def test_verify_recomputes_maximum_execution_time_deactivations(tmp_path: Path) -> None:
    """Deactivations woken by clock ticks alone (the maximum execution time) verify; a log that says another
    cause does not."""
    ticks = (9_000, 10_000, 30_000, 60_000)
    anyio.run(_write_log, tmp_path / "log", "max-execution-time.yaml", None, ticks)
    result = _verify(tmp_path / "log")
    assert result.returncode == 0, result.stdout + result.stderr
    forged = []

    def other_cause(batch):
        out = []
        for e in batch:
            if isinstance(e, ev.WorkloadDeactivated) and e.key == "team/job":
                e = msgspec.structs.replace(e, reason="DeactivatedDueToRequeuingLimitExceeded")
                forged.append(e)
            out.append(e)
        return out

    anyio.run(_write_log, tmp_path / "forged", "max-execution-time.yaml", other_cause, ticks)
    assert forged
    result = _verify(tmp_path / "forged")
    assert result.returncode == 1, result.stdout
    assert "MISMATCH" in result.stdout


def test_verify_fails_on_tampered_flavor_scan_progress(tmp_path: Path) -> None:
    """The scan progress a pending decision records is part of the decision: a log that says the scan got
    elsewhere than the scheduler says is caught (and what follows from it differs too)."""
    forged = []

    def move_scan(batch):
        out = []
        for e in batch:
            if isinstance(e, ev.WorkloadPending) and e.key == "team/w" and e.scan is not None and not forged:
                e = msgspec.structs.replace(e, scan=msgspec.structs.replace(e.scan, tried=((("cpu", -1),),)))
                forged.append(e)
            out.append(e)
        return out

    anyio.run(_write_log, tmp_path / "log", "flavor-scan-resumes-after-skip.yaml", move_scan)
    assert forged
    result = _verify(tmp_path / "log")
    assert result.returncode == 1, result.stdout
    assert "MISMATCH" in result.stdout and "scan" in result.stdout


def test_verify_with_block_admission_recorded(tmp_path: Path) -> None:
    """A log decided under waitForPodsReady.blockAdmission (recorded in it): held, then admitted after the
    PodsReady event, verifies; re-run under Kueue's defaults instead (``--config``), it does not."""
    from fixtures import fastyaml

    from kueue_es.scheduler.config import load_config

    spec = fastyaml.safe_load((SCENARIOS / "pods-ready-block-admission.yaml").read_text())
    document = spec["config"]
    config = load_config(document)
    objects_yaml = tmp_path / "objects.yaml"
    objects_yaml.write_text(fastyaml.safe_dump_all(spec["objects"]))
    objs = load_file(str(objects_yaml)).objects
    t = 1_704_067_200_000

    async def write() -> list[str]:
        state = ClusterState()
        log = FileLog.open(tmp_path / "log")
        reasons = []

        async def append(batch):
            offsets = await log.append(batch)
            for off, e in zip(offsets, batch, strict=True):
                state.apply(ev.Record(off, e))

        async def settle():
            while batch := decide(state, config, now=state.time):
                reasons.extend(e.reason for e in batch if isinstance(e, ev.WorkloadPending))
                await append(batch)

        await append([ev.ConfigRecorded(time=t, document=document, writer="test")])
        await append([ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj) for obj in objs])
        await settle()
        for i in range(1, 4):
            ready = [k for k, w in sorted(state.workloads.items()) if w.reserving and not w.pods_ready]
            await append([ev.PodsReadyChanged(time=t + i * 60_000, key=k, ready=True) for k in ready])
            await settle()
        assert all(w.phase == "Admitted" for w in state.workloads.values())
        await log.close()
        return reasons

    reasons = anyio.run(write)
    assert reasons.count("WaitingForPodsReady") == 2  # b, then c: each written once
    result = _verify(tmp_path / "log")
    assert result.returncode == 0, result.stdout + result.stderr
    defaults = tmp_path / "defaults.yaml"
    defaults.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
    result = subprocess.run([sys.executable, "-m", "kueue_es", "replay", "--log", str(tmp_path / "log"), "--verify",
                             "--config", str(defaults)], capture_output=True, text=True)
    assert result.returncode == 1 and "MISMATCH" in result.stdout, result.stdout + result.stderr
