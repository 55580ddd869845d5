"""``kueue-es run --kube`` killed (SIGKILL) after one of its cadence checkpoints, then started again.

The checkpoint is a running process's: its recorder had already emptied part of the Events ledger, its writers
had carried decisions out. The second process restores its connector from it, folds what the first one appended
after it, and carries on: the Job the first process admitted keeps its quota, a second Job fits, a third waits
until the first one finishes, and no Workload is decided twice.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest
from kubehelp import complete_job, connect, create, eventually, job, queues, running
from kubeproc import ready
from kubeproc import run as kueue_es_process

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from events import schema as ev
from events.filelog import FileLog

pytestmark = pytest.mark.kube




def _records(log_dir) -> list[ev.Record]:
    log = FileLog.open(log_dir, readonly=True)
    try:
        return [r for b in log.scan() for r in b]
    finally:
        log.close_sync()


@pytest.mark.asyncio
async def test_a_killed_kube_run_restarts_from_its_last_checkpoint(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns = (await queues(kc, "ckpt", {"cpu": 4}, sfx=sfx, flavor_labels={"pool": sfx})).ns
        log_dir = tmp_path / "log"
        env = {"KUEUE_ES_KUBE_LEADER_ELECTION": "false", "KUEUE_ES_SCHEDULER_SNAPSHOT_EVERY_EVENTS": "1"}
        async with kueue_es_process(kube_apiserver, "first", log_dir, ns, extra_env=env) as p1:
            await ready(p1, "leader")
            j1 = await create(kc, job(ns, "j1", "user-queue", cpu="2"))
            await eventually(lambda: running(kc, ns, "j1"), what="j1 to run")
            key = f"{ns}/{workload_name('j1', j1['metadata']['uid'])}"

            def admitted_and_checkpointed() -> bool:
                applied = [r.offset for r in _records(log_dir)
                           if isinstance(r.event, ev.DecisionApplied) and r.event.key == key]
                done = [r["offset"] for r in p1.reports if r.get("event") == "checkpoint"]
                return len(applied) == 2 and bool(done) and max(done) >= max(applied)

            await eventually(admitted_and_checkpointed, what="a checkpoint after j1's admission was written")
            p1.proc.kill()
            await p1.proc.wait()

        async with kueue_es_process(kube_apiserver, "second", log_dir, ns, extra_env=env) as p2:
            await ready(p2, "leader")
            active = next(r for r in p2.reports if r.get("event") == "active")
            assert active["checkpoint"] is not None, "restored from the first process's checkpoint"
            assert not p2.reported("checkpoint_passed_over"), p2.reports
            await create(kc, job(ns, "j2", "user-queue", cpu="2"))
            await eventually(lambda: running(kc, ns, "j2"), what="j2 to run after the restart")
            await create(kc, job(ns, "j3", "user-queue", cpu="1"))
            await asyncio.sleep(2)
            assert not await running(kc, ns, "j3"), "j1's quota, restored from the checkpoint, still counts"
            await complete_job(kc, ns, "j1")
            await eventually(lambda: running(kc, ns, "j3"), what="j3 to run once j1 finished")

        decided = [type(r.event).__name__ for r in _records(log_dir)
                   if isinstance(r.event, ev.Decision) and r.event.key == key]
        assert decided == ["QuotaReserved", "WorkloadAdmitted"], "j1 was decided once, before the kill"
