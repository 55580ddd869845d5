"""End to end on a real apiserver: batch/v1 Jobs through the whole pipeline, in one process.

ResourceFlavor + ClusterQueue + LocalQueue + a Job with the queue label → the connector creates the Workload,
the scheduler admits it, the writer writes its status, the Job integration unsuspends the Job with the
flavor's nodeSelector. A higher-priority Job then preempts it: the first Workload is evicted, its Job suspended
and its template restored; once its pods are gone (there is no job controller here: the test plays it, setting
``status.active`` and ``startTime``) the quota is released and the second Job starts. When the second Job
completes, the first is admitted and started again. Every decision ends with a ``DecisionApplied``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import pytest
from kubehelp import complete_job, connect, create, eventually, get, job, kueue_es, priority_class, queues

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND
from events import schema as ev

pytestmark = pytest.mark.kube
JOBS = BY_KIND["Job"]
NOW = "2026-01-01T00:00:00Z"


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def _true(obj: dict[str, Any], type_: str) -> bool:
    c = _cond(obj, type_)
    return c is not None and c["status"] == "True"


async def _setup(kc, sfx: str) -> tuple[str, str, str]:
    """2 cpu on a flavor with a node label and a toleration; preemption within the queue; two priorities."""
    ns, fl, cq, _ = await queues(kc, "e2e", {"cpu": 2}, sfx=sfx, flavor_labels={"instance-type": f"on-demand-{sfx}"},
                                 flavor_spec={"tolerations": [{"key": "spot", "operator": "Exists",
                                                               "effect": "NoSchedule"}]},
                                 preemption={"withinClusterQueue": "LowerPriority"})
    await create(kc, priority_class(f"low-{sfx}", 100))
    await create(kc, priority_class(f"high-{sfx}", 1000))
    return ns, fl, cq


@pytest.mark.asyncio
async def test_job_is_admitted_runs_and_is_preempted_by_a_higher_priority_job(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, fl, cq = await _setup(kc, sfx)
        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            # --- a Job with the queue label gets a Workload, is admitted and runs on the flavor -------------
            low = await create(kc, job(ns, "low", "user-queue", cpu="2", parallelism=1,
                                       labels={"kueue.x-k8s.io/priority-class": f"low-{sfx}"},
                                       node_selector={"disk": "ssd"}))
            low_wl = workload_name("low", low["metadata"]["uid"])

            async def admitted(name: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, ns)
                    return wl if _true(wl, "Admitted") else None
                return None

            wl = await eventually(lambda: admitted(low_wl), what="the low Workload to be admitted")
            assert wl["metadata"]["ownerReferences"][0]["uid"] == low["metadata"]["uid"]
            assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == low["metadata"]["uid"]
            assert wl["spec"]["queueName"] == "user-queue"
            assert wl["spec"]["priority"] == 100
            assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
            assert wl["status"]["admission"]["clusterQueue"] == cq
            assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": fl}
            assert _true(wl, "QuotaReserved")

            async def running(name: str) -> dict[str, Any] | None:
                j = await get(kc, "Job", name, ns)
                return j if not j["spec"].get("suspend") else None

            j = await eventually(lambda: running("low"), what="the low Job to be unsuspended")
            tspec = j["spec"]["template"]["spec"]
            assert tspec["nodeSelector"] == {"disk": "ssd", "instance-type": f"on-demand-{sfx}"}
            assert {"key": "spot", "operator": "Exists", "effect": "NoSchedule"} in tspec["tolerations"]
            labels = j["spec"]["template"]["metadata"]["labels"]
            assert labels["kueue.x-k8s.io/podset"] == "main"
            assert labels["kueue.x-k8s.io/local-queue-name"] == "user-queue"
            assert labels["kueue.x-k8s.io/cluster-queue-name"] == cq
            # Kueue's reconciler writes PodsReady=False (WaitForStart) before the pods are ready
            async def waits_for_start(name: str) -> dict[str, Any] | None:
                wl = await get(kc, "Workload", name, ns)
                c = _cond(wl, "PodsReady")
                return wl if c is not None and (c["status"], c["reason"]) == ("False", "WaitForStart") else None

            wl = await eventually(lambda: waits_for_start(low_wl), what="PodsReady=False WaitForStart on low")
            assert _cond(wl, "PodsReady")["message"] == "Not all pods are ready or succeeded"
            # play the job controller: the pods run and are ready
            await kc.patch(JOBS, "low", {"status": {"startTime": NOW, "active": 1, "ready": 1}}, ns,
                           subresource="status")

            async def pods_ready() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", low_wl, ns)
                return wl if _true(wl, "PodsReady") else None

            wl = await eventually(pods_ready, what="PodsReady=True on the low Workload")
            assert _cond(wl, "PodsReady")["reason"] == "Started"
            assert _cond(wl, "PodsReady")["message"] == "All pods reached readiness and the workload is running"

            # --- a higher-priority Job preempts it ------------------------------------------------------------
            high = await create(kc, job(ns, "high", "user-queue", cpu="2",
                                        labels={"kueue.x-k8s.io/priority-class": f"high-{sfx}"}))
            high_wl = workload_name("high", high["metadata"]["uid"])

            async def preempted() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", low_wl, ns)
                return wl if _true(wl, "Evicted") and _true(wl, "Preempted") else None

            wl = await eventually(preempted, what="the low Workload to be preempted")
            assert _cond(wl, "Evicted")["reason"] == "Preempted"
            assert _cond(wl, "Preempted")["reason"] == "InClusterQueue"
            # the eviction's own write counts it, as Kueue's does (the cause written though empty)
            assert wl["status"]["schedulingStats"] == {
                "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}

            async def suspended(name: str, stopping: bool) -> dict[str, Any] | None:
                j = await get(kc, "Job", name, ns)
                annotated = "kueue.x-k8s.io/stopping" in (j["metadata"].get("annotations") or {})
                return j if j["spec"].get("suspend") and annotated == stopping else None

            async def stopping() -> dict[str, Any] | None:  # suspended, startTime cleared, pods still active
                j = await suspended("low", stopping=True)
                return j if j is not None and "startTime" not in (j.get("status") or {}) else None

            await eventually(stopping, what="the low Job to be suspended and its startTime cleared")
            # its pod still runs: the template cannot change yet, and the quota is held (preemption grace)
            await asyncio.sleep(1.0)
            assert not _true(await get(kc, "Workload", high_wl, ns), "QuotaReserved")
            assert _true(await get(kc, "Workload", low_wl, ns), "QuotaReserved")
            await kc.patch(JOBS, "low", {"status": {"active": 0, "ready": 0}}, ns, subresource="status")  # pod gone

            j = await eventually(lambda: suspended("low", stopping=False), what="the low Job's template restored")
            assert j["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
            assert "tolerations" not in j["spec"]["template"]["spec"]
            assert {k: v for k, v in j["spec"]["template"]["metadata"]["labels"].items()
                    if "job-name" not in k and "controller-uid" not in k} == {"app": "low"}

            await eventually(lambda: admitted(high_wl), what="the high Workload to be admitted")
            j = await eventually(lambda: running("high"), what="the high Job to be unsuspended")
            assert j["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": f"on-demand-{sfx}"}
            wl = await get(kc, "Workload", low_wl, ns)
            assert not _true(wl, "QuotaReserved") and "admission" not in wl["status"]
            assert _cond(wl, "Requeued")["status"] == "True"
            assert (_cond(wl, "PodsReady")["status"], _cond(wl, "PodsReady")["reason"]) == ("False", "WaitForStart")
            assert (await get(kc, "Job", "low", ns))["spec"]["suspend"] is True

            # --- the high Job completes: the low one is admitted and started again ------------------------------
            await complete_job(kc, ns, "high")

            async def finished() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", high_wl, ns)
                return wl if _true(wl, "Finished") else None

            wl = await eventually(finished, what="the high Workload to finish")
            assert _cond(wl, "Finished")["reason"] == "Succeeded"
            await eventually(lambda: admitted(low_wl), what="the low Workload to be admitted again")
            j = await eventually(lambda: running("low"), what="the low Job to run again")
            assert j["spec"]["template"]["spec"]["nodeSelector"]["instance-type"] == f"on-demand-{sfx}"
            # given quota again, it waits for a start: the readiness of its first admission is not shown
            c = _cond(await get(kc, "Workload", low_wl, ns), "PodsReady")
            assert (c["status"], c["reason"]) == ("False", "WaitForStart")

            # --- every decision reached the cluster ---------------------------------------------------------
            await eventually(lambda: not journal.mirror.pending.get(f"{ns}/{low_wl}")
                             and not journal.mirror.pending.get(f"{ns}/{high_wl}"), what="no pending decisions")
            records = [r async for r in journal.log.read()]
            decided = {r.offset for r in records if isinstance(r.event, ev.Decision)
                       and r.event.key in (f"{ns}/{low_wl}", f"{ns}/{high_wl}")}
            applied = [r.event.decision for r in records if isinstance(r.event, ev.DecisionApplied)
                       and r.event.decision in decided]
            assert sorted(applied) == sorted(decided), "each decision applied exactly once"
            assert not [r for r in records if isinstance(r.event, ev.DecisionRejected)]
            kinds = [type(r.event).__name__ for r in records if r.event.key == f"{ns}/{low_wl}"
                     and isinstance(r.event, ev.Decision)]
            # while the high Job runs, the low Workload waits (QuotaReserved=False, written like any decision)
            assert "WorkloadPending" in kinds
            assert [k for k in kinds if k != "WorkloadPending"] == [
                "QuotaReserved", "WorkloadAdmitted", "WorkloadPreempted", "WorkloadRequeued", "QuotaReserved",
                "WorkloadAdmitted"]


@pytest.mark.asyncio
async def test_bad_objects_get_kueues_messages_and_the_connector_keeps_running(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, fl, cq = await _setup(kc, sfx)
        async with kueue_es(kc, tmp_path / "log") as (connector, _journal):
            # a Job for a LocalQueue that does not exist: its Workload says so, as Kueue writes it
            lost = await create(kc, job(ns, "lost", "nope", cpu="1"))
            lost_wl = workload_name("lost", lost["metadata"]["uid"])

            async def misconfigured() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", lost_wl, ns)
                    c = _cond(wl, "QuotaReserved")
                    return c if c is not None and c["status"] == "False" else None
                return None

            c = await eventually(misconfigured, what="QuotaReserved=False on the Workload of a missing queue")
            assert (c["reason"], c["message"]) == ("Misconfigured", "LocalQueue nope doesn't exist")
            # a Workload the projections could not fold (a malformed quantity): skipped, reported
            await create(kc, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                              "metadata": {"name": "garbage", "namespace": ns},
                              "spec": {"queueName": "user-queue", "podSets": [{"count": 1, "template": {"spec": {
                                  "containers": [{"name": "c", "resources": {"requests": {"cpu": "two"}}}]}}}]}})
            # a Job asking for more than the ClusterQueue has
            await create(kc, job(ns, "huge", "user-queue", cpu="64"))
            # ... and a good Job still runs
            await create(kc, job(ns, "fine", "user-queue", cpu="1"))

            async def fine_runs() -> bool:
                return not (await get(kc, "Job", "fine", ns))["spec"].get("suspend")

            await eventually(fine_runs, what="a good Job to run next to the bad objects")
            assert f"Workload {ns}/garbage" in connector.watcher.stats.skipped
            huge = await get(kc, "Job", "huge", ns)
            wl = await get(kc, "Workload", workload_name("huge", huge["metadata"]["uid"]), ns)
            c = _cond(wl, "QuotaReserved")
            assert c["status"] == "False" and "cpu" in c["message"], c
            assert huge["spec"]["suspend"] is True
            assert (await get(kc, "Job", "lost", ns))["spec"]["suspend"] is True
