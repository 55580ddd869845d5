"""``kueue-es run --kube --log kafka://HOST:PORT/TOPIC``: the connector over a real Kafka broker and a real apiserver.

The connector appends what it watches to the Kafka log and follows that log into its mirror; the process's
scheduler replica (the Kafka scheduler service) decides in transactions on the same partition once the connector
has listed every kind; the connector writes the decisions back. A Job runs; after a SIGKILL the next process
folds the log from Kafka, takes over the shard, and goes on: the quota the first Job holds still counts, and no
Workload is decided twice. Its graceful stop snapshots the connector's mirror to the snapshot topic, and a third
process restores it from there instead of folding the partition.
"""

from __future__ import annotations

import asyncio
import secrets
import signal

import pytest
from kubehelp import complete_job, connect, create, eventually, get, job, queues, running
from kubeproc import ready
from kubeproc import run as kueue_es_process

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.kafka.log import KafkaLog
from connectors.kafka.settings import parse_url
from events import schema as ev


async def _records(url: str) -> list[ev.Record]:
    settings, shard = parse_url(url)
    log = await KafkaLog.open(settings, shard, create=False)
    try:
        return [r async for b in log.read_batches(0) for r in b]
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_kube_connector_and_scheduler_over_kafka(kube_apiserver, kafka_bootstrap, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns = (await queues(kc, "kk", {"cpu": 4}, sfx=sfx, flavor_labels={"pool": sfx})).ns
        url = f"kafka://{kafka_bootstrap}/kueue-es-kube-{sfx}"
        env = {"KUEUE_ES_KUBE_LEADER_ELECTION": "false"}
        async with kueue_es_process(kube_apiserver, "first", url, ns, extra_env=env) as p1:
            await ready(p1, "leader")
            j1 = await create(kc, job(ns, "j1", "user-queue", cpu="2"))
            await eventually(lambda: running(kc, ns, "j1"), timeout=60, what="j1 to run (decided over Kafka)")
            key = f"{ns}/{workload_name('j1', j1['metadata']['uid'])}"
            wl = await get(kc, "Workload", workload_name("j1", j1["metadata"]["uid"]), ns)
            assert wl["status"]["admission"]["clusterQueue"] == f"cq-{sfx}"

            async def applied() -> bool:
                recs = await _records(url)
                decided = {r.offset for r in recs if isinstance(r.event, ev.Decision) and r.event.key == key}
                done = {r.event.decision for r in recs if isinstance(r.event, ev.DecisionApplied)}
                return len(decided) == 2 and decided <= done

            await eventually(applied, what="j1's decisions and their outcomes in the Kafka log")
            p1.proc.send_signal(signal.SIGKILL)
            await p1.proc.wait()

        async with kueue_es_process(kube_apiserver, "second", url, ns, extra_env=env) as p2:
            await ready(p2, "leader")
            await create(kc, job(ns, "j2", "user-queue", cpu="2"))
            await eventually(lambda: running(kc, ns, "j2"), timeout=60, what="j2 to run after the restart")
            await create(kc, job(ns, "j3", "user-queue", cpu="1"))
            await asyncio.sleep(2)
            assert not await running(kc, ns, "j3"), "the quota j1 holds, folded from Kafka, still counts"
            await complete_job(kc, ns, "j1")
            await eventually(lambda: running(kc, ns, "j3"), timeout=60, what="j3 to run once j1 finished")
            p2.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(p2.proc.wait(), 60) == 0
        assert not next(r for r in p2.reports if r.get("event") == "active")["checkpoint"], "none before the kill"
        assert p2.reported("checkpoint"), "the graceful stop snapshots the connector's mirror"

        # the next start restores its mirror from that snapshot (it folds nothing) and carries on
        async with kueue_es_process(kube_apiserver, "third", url, ns, extra_env=env) as p3:
            await ready(p3, "leader")
            active = next(r for r in p3.reports if r.get("event") == "active")
            assert active["checkpoint"] is not None and active["checkpoint"] == active["offset"]
            await create(kc, job(ns, "j4", "user-queue", cpu="1"))
            await eventually(lambda: running(kc, ns, "j4"), timeout=60, what="j4 to run after the restore")
            p3.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(p3.proc.wait(), 60) == 0

        decided = [type(r.event).__name__ for r in await _records(url)
                   if isinstance(r.event, ev.Decision) and r.event.key == key]
        assert decided == ["QuotaReserved", "WorkloadAdmitted"], "j1 was decided once, before the kill"
