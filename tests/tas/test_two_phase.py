"""Two-phase admission over the log: restarts between the passes, and the restart races Kueue had.

The cluster is the one of ``tests/scheduler/scenarios/tas-provisioning-two-phase.yaml``: a TAS-only ClusterQueue
whose flavor is covered by a ProvisioningRequest check, and one workload asking for a rack. Each test drives it
through the embedded file log with the engine (observe → settle), as ``kueue-es run`` does.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest
from fixtures import fastyaml

from events import objects as o
from events import schema as ev
from events.codec import encode_event
from events.filelog import FileLog
from events.manifests import load_text
from events.tas_assignment import decode
from events.timefmt import format_time, parse_time
from kueue_es import engine
from projections import snapshot
from projections.cluster import ClusterState

SCENARIO = Path(__file__).parents[1] / "scheduler" / "scenarios" / "tas-provisioning-two-phase.yaml"
T0 = parse_time("2024-01-01T00:00:00Z")
KEY, REQUEST = "team/w", "team/w-prov-1"


def objects() -> list[o.KObject]:
    spec = fastyaml.safe_load(SCENARIO.read_text())
    return load_text(fastyaml.safe_dump_all(spec["objects"]), SCENARIO.name).objects


def upserts(objs: list[o.KObject], t: int) -> list[ev.AnyEvent]:
    return [ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj) for obj in objs]


def provisioned(state: ClusterState, t: int) -> ev.ObjectUpserted:
    """The ProvisioningRequest kueue-es created, as the watch brings it back once it is Provisioned."""
    req = state.provisioning_requests[REQUEST]
    cond = o.Condition(type="Provisioned", status="True", reason="Provisioned", message="Provisioned",
                       last_transition_time=format_time(t))
    obj = msgspec.structs.replace(req, metadata=msgspec.structs.replace(req.metadata, uid="uid-pr"),
                                  status=o.ProvisioningRequestStatus(conditions=[cond]))
    return ev.ObjectUpserted(time=t, key=REQUEST, uid="uid-pr", obj=obj)


async def first_pass(path: Path) -> None:
    """Objects at 0 s (quota reserved, topology delayed), the request Provisioned at 10 s (check Ready)."""
    log = FileLog.open(path, fsync="never")
    try:
        state = ClusterState()
        await engine.observe(log, state, upserts(objects(), T0))
        await engine.settle(log, state, now=T0)
        await engine.observe(log, state, [provisioned(state, T0 + 10_000)])
        await engine.settle(log, state, now=T0 + 10_000)
        wl = state.workloads[KEY]
        assert wl.admission is not None and wl.admission.pod_set_assignments[0].delayed_topology_request == "Pending"
        assert wl.check_states["prov"].state == "Ready" and wl.phase == "QuotaReserved"
    finally:
        await log.close()


SECOND_PASS = textwrap.dedent("""
    import asyncio, sys
    from events import schema as ev
    from events.filelog import FileLog
    from kueue_es import engine
    from projections.cluster import ClusterState

    async def main(path, t):
        log = FileLog.open(path, fsync="never")
        try:
            state = ClusterState()
            async for r in log.read():
                state.apply(r)
            await engine.observe(log, state, [ev.ClockTicked(time=t)])
            await engine.settle(log, state, now=t)
        finally:
            await log.close()

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


async def second_pass_here(path: Path, t: int) -> None:
    log = FileLog.open(path, fsync="never")
    try:
        state = await fold(log)
        await engine.observe(log, state, [ev.ClockTicked(time=t)])
        await engine.settle(log, state, now=t)
    finally:
        await log.close()


async def fold(log) -> ClusterState:
    state = ClusterState()
    async for r in log.read():
        state.apply(r)
    return state


async def read_all(path: Path) -> tuple[list[ev.Record], ClusterState]:
    log = FileLog.open(path, readonly=True)
    try:
        records = [r async for r in log.read()]
    finally:
        await log.close()
    state = ClusterState()
    for r in records:
        state.apply(r)
    return records, state


def placement(state: ClusterState) -> list[tuple[tuple[str, ...], int]]:
    adm = state.workloads[KEY].admission
    assert adm is not None
    ta = adm.pod_set_assignments[0].topology_assignment
    assert ta is not None, "no topology assigned"
    return [(tuple(d.values), d.count) for d in decode(ta)]


def test_restart_between_the_passes_gives_the_same_placement_as_an_uninterrupted_run(tmp_path: Path) -> None:
    here, restarted = tmp_path / "uninterrupted", tmp_path / "restarted"
    t = T0 + 11_000
    asyncio.run(first_pass(here))
    asyncio.run(second_pass_here(here, t))
    asyncio.run(first_pass(restarted))
    # a new process: its state is nothing but the replay of the log
    subprocess.run([sys.executable, "-c", SECOND_PASS, str(restarted), str(t)], check=True, cwd=Path.cwd())

    a, state_a = asyncio.run(read_all(here))
    b, state_b = asyncio.run(read_all(restarted))
    assert [encode_event(r.event) for r in a] == [encode_event(r.event) for r in b]
    assert snapshot.digest(state_a) == snapshot.digest(state_b)
    assert placement(state_b) == [(("n3",), 2), (("n4",), 1)]
    wl = state_b.workloads[KEY]
    assert wl.phase == "Admitted" and wl.admission.pod_set_assignments[0].delayed_topology_request == "Ready"
    assert [type(r.event).__name__ for r in b if isinstance(r.event, ev.Decision)][-2:] == [
        "TopologyAssigned", "WorkloadAdmitted"]


@pytest.mark.parametrize("ending", ["finished", "deactivated"])
def test_a_finished_or_evicted_workload_with_ready_checks_is_never_placed(tmp_path: Path, ending: str) -> None:
    """Kueue's v0.12 race: a workload that finished or was evicted while its second pass was queued got placed
    anyway. Here the second-pass need is folded from the log, and such a workload has none."""
    path = tmp_path / "log"
    asyncio.run(first_pass(path))

    async def end_then_wait() -> ClusterState:
        log = FileLog.open(path, fsync="never")
        try:
            state = await fold(log)
            assert KEY in state.second_pass  # due at 11 s
            t = T0 + 10_500
            if ending == "finished":
                await engine.observe(log, state, [ev.WorkloadFinished(time=t, key=KEY, uid="uid-w")])
            else:
                wl = next(obj for obj in objects() if isinstance(obj, o.Workload))
                inactive = msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, active=False))
                await engine.observe(log, state, upserts([inactive], t))
            await engine.settle(log, state, now=t)
            for s in (12, 20, 60):  # well past every backoff
                await engine.observe(log, state, [ev.ClockTicked(time=T0 + s * 1000)])
                await engine.settle(log, state, now=T0 + s * 1000)
            return state
        finally:
            await log.close()

    state = asyncio.run(end_then_wait())
    records, replayed = asyncio.run(read_all(path))
    assert not any(isinstance(r.event, (ev.TopologyAssigned, ev.WorkloadAdmitted)) for r in records)
    wl = replayed.workloads[KEY]
    assert wl.second_pass is None and KEY not in replayed.second_pass and KEY not in state.second_pass
    if ending == "deactivated":
        assert wl.evicted == "Deactivated" and wl.admission is None
        # the check state is reset by the eviction, so a later reactivation starts the checks over
        assert wl.check_states["prov"].state == "Pending"
    else:
        assert wl.phase == "Finished"


def test_a_cluster_queue_missing_before_the_second_pass_takes_the_reservation_back(tmp_path: Path) -> None:
    """The ClusterQueue is gone when the second pass comes due: the workload, reserved but not admitted, gives its
    quota back first (Kueue v0.20's workload controller, reconcileOnClusterQueueActiveState: QuotaReserved=False
    Misconfigured "ClusterQueue cq is terminating or missing", then the pending workload's blocker), so no second
    pass is tried without its ClusterQueue, nothing is placed, and the workload is reserved and placed again once
    the ClusterQueue is back."""
    path = tmp_path / "log"
    asyncio.run(first_pass(path))
    cq = next(obj for obj in objects() if isinstance(obj, o.ClusterQueue))

    async def run() -> list[ev.Record]:
        log = FileLog.open(path, fsync="never")
        try:
            state = await fold(log)
            await engine.observe(log, state, [ev.ObjectDeleted(time=T0 + 10_500, key="cq", kind="ClusterQueue")])
            await engine.settle(log, state, now=T0 + 10_500)
            await engine.observe(log, state, [ev.ClockTicked(time=T0 + 11_000)])
            await engine.settle(log, state, now=T0 + 11_000)
            wl = state.workloads[KEY]
            assert wl.second_pass is None and wl.admission is None and not wl.reserving
            c = wl.condition("QuotaReserved")  # pending, the controller's blocker for a missing ClusterQueue
            assert c is not None and (c.status, c.reason, c.message) == ("False", "Misconfigured",
                                                                         "ClusterQueue cq doesn't exist")
            await engine.observe(log, state, upserts([cq], T0 + 12_000))
            await engine.settle(log, state, now=T0 + 12_000)
            await engine.observe(log, state, [ev.ClockTicked(time=T0 + 13_000)])
            await engine.settle(log, state, now=T0 + 13_000)
            return [r async for r in log.read()]
        finally:
            await log.close()

    records = asyncio.run(run())
    assert not [r.event for r in records if isinstance(r.event, ev.SecondPassFailed)]
    unset = [r.event for r in records if isinstance(r.event, ev.QuotaReservationUnset)]
    assert [(u.key, u.reason, u.message) for u in unset] == [
        (KEY, "Misconfigured", "ClusterQueue cq is terminating or missing")]
    _, state = asyncio.run(read_all(path))
    assert placement(state) == [(("n3",), 2), (("n4",), 1)]
    assert state.workloads[KEY].phase == "Admitted"


def test_a_workload_upsert_that_ends_or_starts_the_wait_for_a_second_pass_moves_the_clock(tmp_path: Path) -> None:
    """The watcher's echo of a Workload changes nothing the fold reads, but it is a workload update, on which Kueue
    re-checks the need for a second pass: with the ClusterQueue gone the need is over, and once it is back the need
    starts again; the clock the scheduler reads due second passes from follows the table it is built from."""
    path = tmp_path / "log"
    asyncio.run(first_pass(path))
    _, state = asyncio.run(read_all(path))
    assert KEY in state.second_pass and KEY in state.second_pass_due.at
    cq = next(obj for obj in objects() if isinstance(obj, o.ClusterQueue))
    workload = next(obj for obj in objects() if isinstance(obj, o.Workload))

    def apply(e: ev.AnyEvent) -> None:
        state.apply(ev.Record(state.offset + 1, e))

    apply(ev.ObjectDeleted(time=T0 + 10_500, key="cq", kind="ClusterQueue"))
    assert KEY in state.second_pass_due.at  # (the need is re-checked on the workload's next update)
    apply(upserts([workload], T0 + 10_600)[0])
    assert state.workloads[KEY].second_pass is None and KEY not in state.second_pass
    assert KEY not in state.second_pass_due.at
    apply(upserts([cq], T0 + 10_700)[0])
    apply(upserts([workload], T0 + 10_800)[0])
    assert state.workloads[KEY].second_pass == (1, T0 + 11_800)
    assert state.second_pass_due.at == {KEY: T0 + 11_800}
