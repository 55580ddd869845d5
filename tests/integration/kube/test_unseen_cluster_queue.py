"""A ClusterQueue the log has not seen yet after a restart: no crash, no wrong admission (Kueue's restart race).

Kueue once admitted workloads twice over after a restart because its cache learned the Workloads before the
ClusterQueue they reserve quota in. Here the connector restarts while a ClusterQueue's object is withheld from
the log, in the two ways that can happen:

* a replica takes over with a log of its own (empty) and the ClusterQueue's list comes last — the Workloads,
  one of them admitted and holding all the quota, are folded and the scheduler decides before the
  ClusterQueue exists in the log (``kueue-es run --kube`` waits for every kind's list before deciding; the
  scheduler here is let decide earlier, to show that a partial state is safe too);
* the ClusterQueue is created only after the restart, the log already holding Workloads that wait for it.

Either way the pending Workload waits with Kueue's reason (QuotaReserved=False, ``Misconfigured``, "ClusterQueue
X doesn't exist"), then for quota the admitted one still holds, and is admitted once there is room.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from kubehelp import (
    cluster_queue,
    complete_job,
    connect,
    create,
    eventually,
    flavor,
    get,
    job,
    kueue_es,
    local_queue,
    namespace,
    queues,
)

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.journal import LocalJournal
from events import schema as ev

pytestmark = pytest.mark.kube


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


async def _running(kc, ns: str, name: str) -> bool:
    return not (await get(kc, "Job", name, ns))["spec"].get("suspend")


async def _wl_name(kc, ns: str, job_name: str) -> str:
    j = await get(kc, "Job", job_name, ns)
    return workload_name(job_name, j["metadata"]["uid"])


async def _pending_message(kc, ns: str, wl: str) -> str | None:
    try:
        c = _cond(await get(kc, "Workload", wl, ns), "QuotaReserved")
    except Exception:
        return None
    return c["message"] if c is not None and c["status"] == "False" else None


async def _records(journal: LocalJournal, key: str) -> list[ev.Record]:
    return [r async for r in journal.log.read() if r.event.key == key]


def _decisions(records: list[ev.Record]) -> list[tuple[str, str]]:
    return [(type(r.event).__name__, getattr(r.event, "message", "")) for r in records
            if isinstance(r.event, ev.Decision)]


@pytest.mark.asyncio
async def test_takeover_with_the_cluster_queue_listed_last_neither_crashes_nor_overadmits(
        kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, fl, cq, _ = await queues(kc, "race", {"cpu": 2})

        # --- before: j1 holds all the quota and runs, j2 waits for it ----------------------------------------
        async with kueue_es(kc, tmp_path / "before"):
            await create(kc, job(ns, "j1", "user-queue", cpu="2"))
            await eventually(lambda: _running(kc, ns, "j1"), what="j1 to run")
            await create(kc, job(ns, "j2", "user-queue", cpu="2"))
            j2 = await eventually(lambda: _wl_name(kc, ns, "j2"), what="j2's Workload name")
            msg = await eventually(lambda: _pending_message(kc, ns, j2), what="j2 to wait for quota")
            assert "insufficient unused quota for cpu" in msg
        j1 = await _wl_name(kc, ns, "j1")
        j1_key, j2_key = f"{ns}/{j1}", f"{ns}/{j2}"

        # --- a new leader with a log of its own; the ClusterQueue is listed last --------------------------------
        release = asyncio.Event()
        async with kueue_es(kc, tmp_path / "after", hold=("ClusterQueue",), release=release,
                            synced=False, decide_before_synced=True) as (connector, journal):
            state = journal.mirror.state
            missing = f"ClusterQueue {cq} doesn't exist"

            async def waits_for_the_missing_queue() -> bool:
                return ("WorkloadPending", missing) in _decisions(await _records(journal, j2_key))

            await eventually(waits_for_the_missing_queue, what="j2 to wait for its unseen ClusterQueue")
            assert cq not in state.cluster_queues and not connector.ready, "the ClusterQueue is still withheld"
            # j1's admission was folded from its status: its quota counts although its ClusterQueue is unknown
            assert state.workloads[j1_key].reserving and state.usage[cq] == {f"{fl}/cpu": 2000}
            assert not state.workloads[j2_key].reserving
            await asyncio.sleep(1.0)  # a few more scheduling rounds on the partial state: still nothing admitted
            assert [d for d, _ in _decisions(await _records(journal, j2_key)) if d != "WorkloadPending"] == []

            release.set()
            await asyncio.wait_for(connector.watcher.wait_synced(), 30)

            async def waits_for_quota() -> str | None:
                msg = await _pending_message(kc, ns, j2)
                return msg if msg and "insufficient unused quota for cpu" in msg else None

            await eventually(waits_for_quota, what="j2 to wait for the quota j1 holds, once its queue is seen")
            await asyncio.sleep(1.0)
            assert not await _running(kc, ns, "j2"), "j1 still holds the quota"
            assert not state.workloads[j2_key].reserving

            await complete_job(kc, ns, "j1")
            await eventually(lambda: _running(kc, ns, "j2"), what="j2 to run once j1 finished")
            wl = await get(kc, "Workload", j2, ns)
            assert wl["status"]["admission"]["clusterQueue"] == cq

            j1_records, j2_records = await _records(journal, j1_key), await _records(journal, j2_key)
            assert not [r for r in j1_records if isinstance(r.event, ev.QuotaReserved)], "j1 was not admitted again"
            finished = next(r.offset for r in j1_records if isinstance(r.event, ev.WorkloadFinished))
            reserved = [r.offset for r in j2_records if isinstance(r.event, ev.QuotaReserved)]
            assert len(reserved) == 1 and reserved[0] > finished, "j2 admitted once, only after j1 gave the quota back"


@pytest.mark.asyncio
async def test_cluster_queue_created_after_a_restart_admits_what_waited_for_it(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, cq = await namespace(kc, "late"), f"cq-{sfx}"
        await create(kc, flavor(f"f-{sfx}"))
        await create(kc, local_queue(ns, "user-queue", cq))
        log_dir = tmp_path / "log"

        async with kueue_es(kc, log_dir):
            await create(kc, job(ns, "j1", "user-queue", cpu="1"))
            j1 = await eventually(lambda: _wl_name(kc, ns, "j1"), what="j1's Workload name")
            wl = await eventually(lambda: _pending_message(kc, ns, j1), what="j1 to wait for its ClusterQueue")
            c = _cond(await get(kc, "Workload", j1, ns), "QuotaReserved")
            assert (c["reason"], c["message"]) == ("Misconfigured", f"ClusterQueue {cq} doesn't exist"), wl

        async with kueue_es(kc, log_dir) as (_connector, journal):  # restart on the same log
            await asyncio.sleep(0.5)
            assert not await _running(kc, ns, "j1")
            await create(kc, cluster_queue(cq, {f"f-{sfx}": {"cpu": 2}}))
            await eventually(lambda: _running(kc, ns, "j1"), what="j1 to run once its ClusterQueue exists")
            decided = [d for d, _ in _decisions(await _records(journal, f"{ns}/{j1}")) if d != "WorkloadPending"]
            assert decided == ["QuotaReserved", "WorkloadAdmitted"]
