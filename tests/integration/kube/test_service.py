"""``kueue-es run --kube`` as real processes against the real apiserver.

* health endpoints, leader election: one leader, one ready standby; SIGTERM hands the Lease over at once and the
  new leader (with an empty log of its own) picks the cluster up from the Workloads' status; the first, back over
  its old log, which the second's leadership made stale, moves it aside and starts afresh; ``/metrics`` on both,
  Kueue's metrics labelled ``replica_role="leader"`` on the leader, none on the standby (it holds no state);
* restart safety: SIGKILL between a decision (in the log) and its status write; the restarted process writes
  it — one admission, not two — and the Job runs; its graceful stop leaves a checkpoint of the whole log, from
  which the next start restores its connector and goes on admitting.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import time

import pytest
from kubehelp import connect, create, eventually, get, job, queues, running
from kubeproc import ready
from kubeproc import run as kueue_es_process

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from events import schema as ev
from events.filelog import FileLog
from kueue_es import checkpoints
from projections import snapshot
from projections.cluster import ClusterState

pytestmark = pytest.mark.kube


@pytest.mark.asyncio
async def test_health_leader_election_and_handover(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns = (await queues(kc, "svc", {"cpu": 4}, sfx=sfx, flavor_labels={"pool": sfx})).ns
        async with kueue_es_process(kube_apiserver, "r1", tmp_path / "log1", ns) as r1:
            body = await ready(r1, "leader")
            status, health = await r1.get("/healthz")
            assert status == 200 and health["status"] == "ok"
            assert body["offset"] >= 0
            async with kueue_es_process(kube_apiserver, "r2", tmp_path / "log2", ns) as r2:
                await ready(r2, "standby")
                await create(kc, job(ns, "j1", "user-queue", cpu="1"))
                await eventually(lambda: running(kc, ns, "j1"), what="j1 to run under r1")
                assert r1.reported("active") and not r2.reported("active")
                leading = await r1.metrics()
                assert (f'kueue_admitted_workloads_total{{cluster_queue="cq-{sfx}",priority_class="",'
                        'replica_role="leader"} 1.0') in leading
                assert 'kueue_admission_attempt_duration_seconds_count{replica_role="leader",result="success"}' \
                    in leading  # the leader times its attempts (the admission of j1 among them)
                standby = await r2.metrics()
                assert "process_cpu_seconds_total" in standby and "kueue_build_info{" in standby
                kueue_series = {line.split("{")[0] for line in standby.splitlines() if line.startswith("kueue_")}
                assert kueue_series == {"kueue_build_info"}  # a standby holds no state: its process's metrics only

                t0 = time.monotonic()
                r1.proc.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(r1.proc.wait(), 30) == 0
                await ready(r2, "leader")
                assert time.monotonic() - t0 < 10, "a released Lease is taken over without waiting for it to expire"
                assert (f'kueue_cluster_queue_status{{cluster_queue="cq-{sfx}",replica_role="leader",'
                        'status="active"} 1.0') in await r2.metrics()
                # r2 started from an empty log: it learned j1's admission from the Workload's status
                await create(kc, job(ns, "j2", "user-queue", cpu="3"))
                await eventually(lambda: running(kc, ns, "j2"), what="j2 to run under r2")
                await create(kc, job(ns, "j3", "user-queue", cpu="1"))
                await asyncio.sleep(2)
                assert not await running(kc, ns, "j3"), "the quota j1 holds must still count under r2"
                j3 = await get(kc, "Job", "j3", ns)
                wl = await get(kc, "Workload", workload_name("j3", j3["metadata"]["uid"]), ns)
                qr = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
                assert qr["status"] == "False" and "insufficient unused quota for cpu" in qr["message"]
                assert any('"event": "became leader"' in line for line in r2.logs), "structlog JSON on stderr"

                # r1 comes back over its old log, which r2's leadership made stale: it is moved aside, never
                # folded, and the fresh log learns the cluster from it (j3 still waits on j1's and j2's quota)
                async with kueue_es_process(kube_apiserver, "r1-again", tmp_path / "log1", ns) as r1b:
                    await ready(r1b, "standby")
                    r2.proc.send_signal(signal.SIGTERM)
                    assert await asyncio.wait_for(r2.proc.wait(), 30) == 0
                    await ready(r1b, "leader")
                    moved = next(r for r in r1b.reports if r.get("event") == "log_moved_aside")
                    assert moved["moved_to"].startswith(str(tmp_path / "log1.stale-"))
                    assert next(r for r in r1b.reports if r.get("event") == "active")["offset"] == -1
                    await create(kc, job(ns, "j4", "user-queue", cpu="1"))
                    await asyncio.sleep(2)
                    assert not await running(kc, ns, "j3") and not await running(kc, ns, "j4")
                    assert await running(kc, ns, "j1") and await running(kc, ns, "j2")


@pytest.mark.asyncio
async def test_sigkill_between_a_decision_and_its_write_converges_without_double_admission(
        kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns = (await queues(kc, "svc", {"cpu": 4}, sfx=sfx, flavor_labels={"pool": sfx})).ns
        log_dir = tmp_path / "log"
        no_election = {"KUEUE_ES_KUBE_LEADER_ELECTION": "false"}
        crash = {"CRASH_AT": "status-write", "CRASH_NAMESPACE": ns, **no_election}
        async with kueue_es_process(kube_apiserver, "crash", log_dir, ns, script="crashing_kube_run.py",
                                    extra_env=crash) as p:
            j = await create(kc, job(ns, "j1", "user-queue", cpu="2"))
            assert await asyncio.wait_for(p.proc.wait(), 60) == -signal.SIGKILL
        wl_name = workload_name("j1", j["metadata"]["uid"])
        key = f"{ns}/{wl_name}"
        records = [r for b in FileLog.open(log_dir, readonly=True).scan() for r in b]
        decided = [r for r in records if isinstance(r.event, ev.Decision) and r.event.key == key]
        assert [type(r.event).__name__ for r in decided] == ["QuotaReserved", "WorkloadAdmitted"]
        assert not [r for r in records if isinstance(r.event, ev.DecisionApplied) and r.event.key == key]
        wl = await get(kc, "Workload", wl_name, ns)
        assert not (wl.get("status") or {}).get("admission"), "killed before the write"
        assert (await get(kc, "Job", "j1", ns))["spec"]["suspend"] is True

        async with kueue_es_process(kube_apiserver, "again", log_dir, ns, extra_env=no_election) as p2:
            await ready(p2, "leader")
            await eventually(lambda: running(kc, ns, "j1"), what="j1 to run after the restart")

            # the Job starts only once its Workload's stored status shows the admission
            adm = ((await get(kc, "Workload", wl_name, ns)).get("status") or {}).get("admission") or {}
            assert adm["clusterQueue"] == f"cq-{sfx}"

            def outcomes_logged() -> bool:  # the outcome follows the write: stopping in between would lose it
                recs = [r for b in FileLog.open(log_dir, readonly=True).scan() for r in b]
                return {r.event.decision for r in recs if isinstance(r.event, ev.DecisionApplied)
                        and r.event.key == key} >= {r.offset for r in decided}

            await eventually(outcomes_logged, what="the restarted process to log its outcomes")
            p2.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(p2.proc.wait(), 30) == 0
        records = [r for b in FileLog.open(log_dir, readonly=True).scan() for r in b]
        decided = [r for r in records if isinstance(r.event, ev.Decision) and r.event.key == key]
        assert [type(r.event).__name__ for r in decided] == ["QuotaReserved", "WorkloadAdmitted"], \
            "the restart re-applied the logged decisions, it did not decide again"
        applied = sorted(r.event.decision for r in records if isinstance(r.event, ev.DecisionApplied)
                         and r.event.key == key)
        assert applied == [r.offset for r in decided]

        # the graceful stop left a checkpoint of the whole log, for replays: the state a fold from zero gives
        assert p2.reported("checkpoint")
        kept = checkpoints.listed(log_dir)
        assert kept and kept[-1][0] == records[-1].offset
        _st = checkpoints.restore(FileLog.open(log_dir, readonly=True))
        restored = _st.state
        assert restored is not None, _st.passed_over
        full = ClusterState()
        for r in records:
            full.apply(r)
        assert snapshot.digest(restored) == snapshot.digest(full)

        # the next start restores the connector from that checkpoint (it folds nothing) and carries on
        async with kueue_es_process(kube_apiserver, "third", log_dir, ns, extra_env=no_election) as p3:
            await ready(p3, "leader")
            active = next(r for r in p3.reports if r.get("event") == "active")
            assert active["checkpoint"] == active["offset"] == records[-1].offset
            await create(kc, job(ns, "j2", "user-queue", cpu="2"))
            await eventually(lambda: running(kc, ns, "j2"), what="j2 to run after a restart from the checkpoint")
            await create(kc, job(ns, "j3", "user-queue", cpu="1"))
            await asyncio.sleep(2)
            assert not await running(kc, ns, "j3"), "the quota j1 and j2 hold counts after the restore"
            p3.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(p3.proc.wait(), 30) == 0
        records = [r for b in FileLog.open(log_dir, readonly=True).scan() for r in b]
        assert [type(r.event).__name__ for r in records if isinstance(r.event, ev.Decision)
                and r.event.key == key] == ["QuotaReserved", "WorkloadAdmitted"], "j1 was not decided again"
