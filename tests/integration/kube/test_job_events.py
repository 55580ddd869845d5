"""The Events Kueue's job reconciler records on batch/v1 Jobs, on a real apiserver: what ``kubectl describe job``
shows under Kueue.

A Job is given its Workload and started (``CreatedWorkload``, ``Started``); preempted by a higher-priority Job,
it is stopped with the eviction message (``Stopped``); the preemptor completes (``FinishedWorkload``) and the
first one starts again. A Job created unsuspended is stopped for lack of a Workload, and, unsuspended by hand
while pending, stopped as not admitted. A Job naming a WorkloadPriorityClass that does not exist gets a Warning
``WorkloadPriorityClassNotFound`` and no Workload, until the class is created. Restarting the connector on the
same log records none of them twice.

A Job whose pod template names a PriorityClass that does not exist gets no Workload and no Event (Kueue's
reconcile just fails on the lookup), and its Workload, with that class's priority, once the class is created.

Behind a ProvisioningRequest admission check, a Job whose Workload holds quota is told what the check waits for
(``UpdatedAdmissionCheck``), once per new message, and started once the capacity is provisioned; a restart
records none of those twice either.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import (
    cluster_queue,
    complete_job,
    connect,
    create,
    eventually,
    get,
    job,
    kueue_es,
    local_queue,
    priority_class,
    provisioning_check,
    queues,
)

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.recorder import EVENTS
from connectors.k8s.resources import BY_KIND, PROVISIONING_REQUESTS

pytestmark = pytest.mark.kube

JOBS = BY_KIND["Job"]


async def job_events(kc: KubeClient, ns: str, name: str, uid: str) -> list[dict[str, Any]]:
    """What ``kubectl describe job`` lists, oldest first."""
    selector = (f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Job,"
                f"involvedObject.uid={uid}")
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return sorted(msgspec.json.decode(raw)["items"], key=lambda e: (e["eventTime"], e["metadata"]["name"]))


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.mark.asyncio
async def test_job_events_as_kueue_records_them_and_none_twice_after_a_restart(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, fl, cq, sfx = await queues(kc, "job-events", {"cpu": 2}, lq="lq",
                                       preemption={"withinClusterQueue": "LowerPriority"})
        empty_cq = f"empty-{sfx}"
        await create(kc, cluster_queue(empty_cq, {fl: {"cpu": 0}}))
        await create(kc, local_queue(ns, "nowhere", empty_cq))
        await create(kc, priority_class(f"low-{sfx}", 100))
        await create(kc, priority_class(f"high-{sfx}", 1000))
        uids: dict[str, str] = {}

        async def events_of(name: str, *reasons: str) -> list[dict[str, Any]] | None:
            found = await job_events(kc, ns, name, uids[name])
            return found if [e["reason"] for e in found] == list(reasons) else None

        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            # --- given its Workload, admitted, started -----------------------------------------------------------
            low = await create(kc, job(ns, "low", "lq", cpu="2", labels={"kueue.x-k8s.io/priority-class": f"low-{sfx}"}))
            uids["low"] = low["metadata"]["uid"]
            low_wl = workload_name("low", uids["low"])
            created, started = await eventually(lambda: events_of("low", "CreatedWorkload", "Started"),
                                                what="CreatedWorkload and Started on the low Job")
            assert created["message"] == f"Created Workload: {ns}/{low_wl}"
            assert started["message"] == f"Admitted by clusterQueue {cq}"
            assert {(e["type"], e["action"], e["reportingComponent"]) for e in (created, started)} == {
                ("Normal", "CreatedWorkload", "batch/job-kueue-controller"),
                ("Normal", "Started", "batch/job-kueue-controller")}
            assert created["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns,
                                                 "name": "low", "uid": uids["low"]}

            # --- preempted by a higher-priority Job: stopped with the eviction message ---------------------------
            high = await create(kc, job(ns, "high", "lq", cpu="2",
                                        labels={"kueue.x-k8s.io/priority-class": f"high-{sfx}"}))
            uids["high"] = high["metadata"]["uid"]
            high_wl = workload_name("high", uids["high"])
            found = await eventually(lambda: events_of("low", "CreatedWorkload", "Started", "Stopped"),
                                     what="the low Job stopped")
            evicted = _cond(await get(kc, "Workload", low_wl, ns), "Evicted")
            assert evicted is not None and evicted["reason"] == "Preempted"
            assert found[2]["message"] == evicted["message"]
            assert found[2]["message"].startswith(
                f"Preempted to accommodate a workload (UID: {(await get(kc, 'Workload', high_wl, ns))['metadata']['uid']}"
                f", JobUID: {uids['high']}) due to prioritization in the ClusterQueue")
            await eventually(lambda: events_of("high", "CreatedWorkload", "Started"), what="the high Job started")

            # --- the preemptor completes; the first Job starts again ---------------------------------------------
            await complete_job(kc, ns, "high")
            found = await eventually(lambda: events_of("high", "CreatedWorkload", "Started", "FinishedWorkload"),
                                     what="FinishedWorkload on the high Job")
            assert found[2]["message"] == f"Workload '{ns}/{high_wl}' is declared finished"
            found = await eventually(lambda: events_of("low", "CreatedWorkload", "Started", "Stopped", "Started"),
                                     what="the low Job started again")
            assert found[3]["message"] == f"Admitted by clusterQueue {cq}"

            # --- created unsuspended (no webhook here), then unsuspended by hand while pending -------------------
            eager = await create(kc, job(ns, "eager", "nowhere", suspend=False))
            uids["eager"] = eager["metadata"]["uid"]
            eager_wl = workload_name("eager", uids["eager"])
            stopped, created = await eventually(lambda: events_of("eager", "Stopped", "CreatedWorkload"),
                                                what="the eager Job stopped, then given its Workload")
            assert stopped["message"] == "Missing Workload; unable to restore pod templates"
            assert created["message"] == f"Created Workload: {ns}/{eager_wl}"

            async def pending() -> bool:
                wl = await get(kc, "Workload", eager_wl, ns)
                cond = _cond(wl, "QuotaReserved")
                return cond is not None and cond["status"] == "False"

            await eventually(pending, what="the eager Workload pending (no quota)")
            await kc.patch(JOBS, "eager", {"spec": {"suspend": False}}, ns)
            found = await eventually(lambda: events_of("eager", "Stopped", "CreatedWorkload", "Stopped"),
                                     what="the eager Job stopped again")
            assert found[2]["message"] == "Not admitted by cluster queue"

            # --- its WorkloadPriorityClass missing: a Warning and no Workload, until the class is created ---------
            later = f"later-{sfx}"
            waiting = await create(kc, job(ns, "waiting", "nowhere",
                                           labels={"kueue.x-k8s.io/priority-class": later}))
            uids["waiting"] = waiting["metadata"]["uid"]
            waiting_wl = workload_name("waiting", uids["waiting"])
            (warned,) = await eventually(lambda: events_of("waiting", "WorkloadPriorityClassNotFound"),
                                         what="WorkloadPriorityClassNotFound on the waiting Job")
            assert (warned["type"], warned["action"], warned["reportingComponent"], warned["message"]) == (
                "Warning", "WorkloadPriorityClassNotFound", "batch/job-kueue-controller",
                f'WorkloadPriorityClass "{later}" not found')
            with pytest.raises(NotFound):
                await get(kc, "Workload", waiting_wl, ns)
            assert (await get(kc, "Job", "waiting", ns))["spec"]["suspend"] is True
            await create(kc, priority_class(later, 500))
            found = await eventually(lambda: events_of("waiting", "WorkloadPriorityClassNotFound", "CreatedWorkload"),
                                     what="the waiting Job given its Workload once the class exists")
            assert found[1]["message"] == f"Created Workload: {ns}/{waiting_wl}"
            spec = (await get(kc, "Workload", waiting_wl, ns))["spec"]
            assert (spec["priorityClassRef"], spec["priority"]) == (
                {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": later}, 500)

            mine = {f"{ns}/low", f"{ns}/high", f"{ns}/eager", f"{ns}/waiting", f"{ns}/{low_wl}", f"{ns}/{high_wl}",
                    f"{ns}/{eager_wl}", f"{ns}/{waiting_wl}"}

            def recorded() -> bool:
                return not any(r.event.key in mine for r in journal.mirror.kube_events.ready.values())

            await eventually(recorded, what="every Job action's Event recorded")
            before = {name: await job_events(kc, ns, name, uid) for name, uid in uids.items()}
            assert sum(map(len, before.values())) == 3 + 4 + 3 + 2
            assert all(e["eventTime"] for events in before.values() for e in events)

        # --- restart: the log is folded again, its Job actions are offered to the recorder again ---------------
        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            assert connector.recorder is not None
            stats = connector.recorder.stats
            await eventually(lambda: recorded() and stats.existing >= 12,
                             what="the replayed Job actions' Events to be found already there")
            after = {name: await job_events(kc, ns, name, uid) for name, uid in uids.items()}
            assert {n: [(e["metadata"]["name"], e["metadata"]["resourceVersion"]) for e in events]
                    for n, events in after.items()} == {
                n: [(e["metadata"]["name"], e["metadata"]["resourceVersion"]) for e in events]
                for n, events in before.items()}, "no Job Event recorded twice, none touched"


def _request_status(provisioned: str, message: str) -> dict[str, Any]:
    """What the cluster autoscaler writes: accepted, and capacity provisioned or on its way (the message)."""
    now = "2026-01-01T00:00:00Z"
    return {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted", "lastTransitionTime": now},
        {"type": "Provisioned", "status": provisioned, "reason": "Provisioned" if provisioned == "True" else "Waiting",
         "message": message, "lastTransitionTime": now}]}}


@pytest.mark.asyncio
async def test_a_job_waiting_on_its_admission_check_is_told_each_new_message_once(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        check = await provisioning_check(kc, secrets.token_hex(3))
        ns, _fl, cq, _sfx = await queues(kc, "job-checks", {"cpu": 2}, lq="lq",
                                        admissionChecksStrategy={"admissionChecks": [{"name": check}]})
        async with kueue_es(kc, tmp_path / "log") as (_connector, journal):
            gated = await create(kc, job(ns, "gated", "lq"))
            uid = gated["metadata"]["uid"]
            wl_name = workload_name("gated", uid)
            pr_name = f"{wl_name}-{check}-1"

            async def reasons(*want: str) -> list[dict[str, Any]] | None:
                found = await job_events(kc, ns, "gated", uid)
                return found if [e["reason"] for e in found] == list(want) else None

            async def request() -> dict[str, Any] | None:
                try:
                    return msgspec.json.decode(await kc.get(PROVISIONING_REQUESTS, pr_name, ns))
                except NotFound:
                    return None

            await eventually(request, what="the ProvisioningRequest")
            await kc.patch(PROVISIONING_REQUESTS, pr_name, _request_status("False", "capacity in 10m"), ns,
                           subresource="status")
            _created, told = await eventually(lambda: reasons("CreatedWorkload", "UpdatedAdmissionCheck"),
                                              what="UpdatedAdmissionCheck on the gated Job")
            assert (told["type"], told["action"], told["reportingComponent"], told["message"]) == (
                "Normal", "UpdatedAdmissionCheck", "batch/job-kueue-controller", f"{check}: capacity in 10m")
            wl = await get(kc, "Workload", wl_name, ns)
            assert [(c["name"], c["state"], c["message"]) for c in wl["status"]["admissionChecks"]] == [
                (check, "Pending", "capacity in 10m")]
            assert (await get(kc, "Job", "gated", ns))["spec"]["suspend"] is True

            await kc.patch(PROVISIONING_REQUESTS, pr_name, _request_status("False", "capacity in 5m"), ns,
                           subresource="status")
            found = await eventually(
                lambda: reasons("CreatedWorkload", "UpdatedAdmissionCheck", "UpdatedAdmissionCheck"),
                what="the new message on the gated Job")
            assert found[2]["message"] == f"{check}: capacity in 5m"

            await kc.patch(PROVISIONING_REQUESTS, pr_name, _request_status("True", "capacity is ready"), ns,
                           subresource="status")
            found = await eventually(
                lambda: reasons("CreatedWorkload", "UpdatedAdmissionCheck", "UpdatedAdmissionCheck", "Started"),
                what="the gated Job started once provisioned")
            assert found[3]["message"] == f"Admitted by clusterQueue {cq}"

            def recorded() -> bool:
                return not any(r.event.key in (f"{ns}/gated", f"{ns}/{wl_name}")
                               for r in journal.mirror.kube_events.ready.values())

            await eventually(recorded, what="every Event of the gated Job recorded")
            before = await job_events(kc, ns, "gated", uid)

        async with kueue_es(kc, tmp_path / "log") as (connector, journal):
            assert connector.recorder is not None
            stats = connector.recorder.stats
            await eventually(lambda: recorded() and stats.existing >= 4,
                             what="the replayed Events to be found already there")
            after = await job_events(kc, ns, "gated", uid)
            assert [(e["metadata"]["name"], e["metadata"]["resourceVersion"]) for e in after] == [
                (e["metadata"]["name"], e["metadata"]["resourceVersion"]) for e in before], "none recorded twice"


@pytest.mark.asyncio
async def test_a_job_naming_a_missing_pod_priority_class_waits_for_it_without_an_event(kube_apiserver,
                                                                                      tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _fl, cq, sfx = await queues(kc, "job-pc", {"cpu": 2}, lq="lq")
        pc = f"later-pc-{sfx}"
        async with kueue_es(kc, tmp_path / "log") as (connector, _journal):
            doc = job(ns, "waiting", "lq")
            doc["spec"]["template"]["spec"]["priorityClassName"] = pc
            uid = (await create(kc, doc))["metadata"]["uid"]
            wl_name = workload_name("waiting", uid)
            jobs = connector.jobs
            assert jobs is not None
            await eventually(lambda: jobs.stats.pod_class_missing >= 1, what="the Job seen without its class")
            with pytest.raises(NotFound):
                await get(kc, "Workload", wl_name, ns)
            assert await job_events(kc, ns, "waiting", uid) == [], "Kueue records no Event for it"

            await create(kc, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc},
                              "value": 300})

            async def started() -> list[dict[str, Any]] | None:
                found = await job_events(kc, ns, "waiting", uid)
                return found if [e["reason"] for e in found] == ["CreatedWorkload", "Started"] else None

            created, started_ = await eventually(started, what="the Job given its Workload and started")
            assert created["message"] == f"Created Workload: {ns}/{wl_name}"
            assert started_["message"] == f"Admitted by clusterQueue {cq}"
            spec = (await get(kc, "Workload", wl_name, ns))["spec"]
            assert (spec["priorityClassRef"], spec["priority"]) == (
                {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pc}, 300)
