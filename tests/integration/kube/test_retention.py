"""Kueue's objectRetentionPolicies against the real apiserver: time from the log, deletion by the connector.

* ``afterFinished``: a Job completes, its Workload finishes, and once the retention has run out (clock ticks in
  the log) the scheduler decides RetentionExpired and the connector deletes the Workload — one DecisionApplied;
* ``afterDeactivatedByKueue``: the connector's half — a RetentionExpired decision naming the Job deletes the
  Workload's owner Job, and the orphaned Workload goes with it; a JobSet's Workload has its JobSet deleted
  (Kueue's job reconciler deletes the job of whatever kind it runs).
"""

from __future__ import annotations

import msgspec
import pytest
from kubehelp import complete_job, connect, create, eventually, get, job, kueue_es, queues

from connectors.k8s import crds, jobset
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import JOBSETS
from events import schema as ev
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "objectRetentionPolicies": {"workloads": {"afterFinished": "3s"}}})


async def _exists(kc, kind: str, name: str, ns: str) -> bool:
    try:
        await get(kc, kind, name, ns)
    except NotFound:
        return False
    return True


async def _running(kc, ns: str, name: str) -> bool:
    return not (await get(kc, "Job", name, ns))["spec"].get("suspend")


@pytest.mark.asyncio
async def test_finished_workload_deleted_after_its_retention(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = (await queues(kc, "ret", {"cpu": 4})).ns
        async with kueue_es(kc, tmp_path / "log", config=CONFIG) as (connector, journal):
            j = await create(kc, job(ns, "done", "user-queue", cpu="1"))
            wl = workload_name("done", j["metadata"]["uid"])
            await eventually(lambda: _running(kc, ns, "done"), what="the Job to run")
            await complete_job(kc, ns, "done")

            async def finished() -> bool:
                w = await get(kc, "Workload", wl, ns)
                return any(c["type"] == "Finished" and c["status"] == "True"
                           for c in w.get("status", {}).get("conditions", []))

            await eventually(finished, what="the Workload finished")
            await eventually(lambda: _gone(kc, "Workload", wl, ns), timeout=60,
                             what="the finished Workload deleted after its retention")
            assert await _exists(kc, "Job", "done", ns), "afterFinished deletes the Workload, not the Job"
            records = [r async for r in journal.log.read() if r.event.key == f"{ns}/{wl}"]
            expired = [r for r in records if isinstance(r.event, ev.RetentionExpired)]
            assert len(expired) == 1 and expired[0].event.target == "Workload"
            finished_at = next(r.event.time for r in records if isinstance(r.event, ev.WorkloadFinished))
            assert expired[0].event.time >= finished_at // 1000 * 1000 + 3000, "decided on time from the log"
            await eventually(lambda: _applied(journal, expired[0].offset), what="the decision applied")
            # the cluster is shared by the session's tests: their finished Workloads are past retention too
            assert connector.retention.stats.workloads_deleted >= 1


@pytest.mark.asyncio
async def test_retention_decision_on_a_job_deletes_the_owner_job(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = (await queues(kc, "ret", {"cpu": 4})).ns
        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            j = await create(kc, job(ns, "stuck", "user-queue", cpu="1"))
            wl = workload_name("stuck", j["metadata"]["uid"])
            key = f"{ns}/{wl}"
            await eventually(lambda: _running(kc, ns, "stuck"), what="the Job to run")
            state = journal.mirror.state
            offset = await _deactivation_retention_expired(connector, state, key)
            await eventually(lambda: _gone(kc, "Job", "stuck", ns), what="the owner Job deleted")
            await eventually(lambda: _gone(kc, "Workload", wl, ns), what="its orphaned Workload deleted")
            await eventually(lambda: _applied(journal, offset), what="the decision applied")
            assert connector.retention.stats.jobs_deleted == 1


@pytest.mark.asyncio
async def test_retention_decision_on_a_jobsets_workload_deletes_the_jobset(kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.jobset_crd()])
        ns = (await queues(kc, "ret", {"cpu": 4})).ns
        template = {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}
        labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
        body = {"apiVersion": JOBSETS.api_version, "kind": "JobSet",
                "metadata": {"name": "stuck", "namespace": ns, "labels": labels},
                "spec": {"suspend": True, "replicatedJobs": [
                    {"name": "w", "replicas": 1, "template": {"spec": {"template": template}}}]}}
        js = msgspec.json.decode(await kc.create(JOBSETS, body, ns))
        async with kueue_es(kc, tmp_path / "log", config=config) as (connector, journal):
            key = f"{ns}/{jobset.workload_name('stuck', js['metadata']['uid'])}"
            state = journal.mirror.state
            await eventually(lambda: _known(state, key), what="the JobSet's Workload")
            offset = await _deactivation_retention_expired(connector, state, key)
            await eventually(lambda: _jobset_gone(kc, ns, "stuck"), what="the owner JobSet deleted")
            await eventually(lambda: _applied(journal, offset), what="the decision applied")
            assert connector.retention.stats.jobs_deleted == 1


async def _deactivation_retention_expired(connector, state, key: str) -> int:
    """Append what the scheduler decides afterDeactivatedByKueue after Kueue deactivated Workload ``key``."""
    (offset,) = await connector.appender.emit([ev.RetentionExpired(
        time=state.time, key=key, uid=state.workloads[key].uid, cycle=state.last_cycle + 1,
        input=state.offset, target="Job", message="Deleted job: deactivation retention period expired")])
    return offset


async def _known(state, key: str) -> bool:
    return key in state.workloads


async def _jobset_gone(kc, ns: str, name: str) -> bool:
    try:
        await kc.get(JOBSETS, name, ns)
    except NotFound:
        return True
    return False


async def _gone(kc, kind: str, name: str, ns: str) -> bool:
    return not await _exists(kc, kind, name, ns)


async def _applied(journal, offset: int) -> bool:
    return any([isinstance(r.event, ev.DecisionApplied) and r.event.decision == offset
                async for r in journal.log.read()])
