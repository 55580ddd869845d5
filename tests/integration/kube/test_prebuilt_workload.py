"""Prebuilt Workloads against the real apiserver, as Kueue runs them: a Job naming an existing Workload
(``kueue.x-k8s.io/prebuilt-workload-name``) is admitted and started through that Workload, which it adopts (the
Job becomes its controller owner, its ``kueue.x-k8s.io/job-uid`` label the Job's uid), and no second Workload is
created. Under the default gates the name is read from the annotation first; with ``WorkloadIdentifierAnnotations``
off from the label. A Job naming a Workload not there yet stays suspended with no Workload at all until the
Workload is created, and then runs on it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kubehelp import KUEUE, connect, create, eventually, get, job, kueue_es, queues, running

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.jobs import WORKLOADS
from connectors.k8s.recorder import EVENTS
from kueue_es.scheduler.config import DEFAULT, load_config

pytestmark = pytest.mark.kube
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
GATE_OFF = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                        "featureGates": {"WorkloadIdentifierAnnotations": False}})


def _workload(ns: str, name: str, queue: str = "user-queue") -> dict[str, Any]:
    """A Workload as a user prebuilds it for the Job of ``kubehelp.job``: one pod of 1 cpu."""
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}],
            }}}]}}


async def _workload_names(kc: KubeClient, ns: str) -> list[str]:
    raw = await kc.request("GET", WORKLOADS.collection_path(ns))
    return sorted(w["metadata"]["name"] for w in msgspec.json.decode(raw)["items"])


async def _job_events(kc: KubeClient, ns: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events on Job ``ns/name``."""
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Job"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"]) for e in msgspec.json.decode(raw)["items"]]


async def _adopted_by(kc: KubeClient, ns: str, name: str, job_uid: str) -> dict[str, Any] | None:
    wl = await get(kc, "Workload", name, ns)
    refs = [r for r in wl["metadata"].get("ownerReferences") or [] if r.get("controller")]
    owned = [(r["kind"], r["name"], r["uid"]) for r in refs] == [("Job", "j", job_uid)]
    return wl if owned and (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == job_uid else None


@pytest.mark.asyncio
@pytest.mark.parametrize("gate_on", [True, False], ids=["default-gates", "gate-off"])
async def test_a_job_runs_on_the_workload_it_names(kube_apiserver, tmp_path, gate_on: bool) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "prebuilt", {"cpu": 2})
        await create(kc, _workload(q.ns, "pre"))
        await create(kc, _workload(q.ns, "decoy", queue="no-such-queue"))  # left pending, whatever happens
        async with kueue_es(kc, tmp_path / "log", config=DEFAULT if gate_on else GATE_OFF):
            doc = job(q.ns, "j", "user-queue")
            # the gate decides which of the two names counts
            doc["metadata"]["labels"][PREBUILT] = "decoy" if gate_on else "pre"
            doc["metadata"]["annotations"] = {PREBUILT: "pre" if gate_on else "decoy"}
            uid = (await create(kc, doc))["metadata"]["uid"]
            await eventually(lambda: running(kc, q.ns, "j"), what="the Job to be admitted and started")
            wl = await eventually(lambda: _adopted_by(kc, q.ns, "pre", uid), what="the Workload adopted by the Job")
            assert wl["status"]["admission"]["clusterQueue"] == q.cq
            decoy = await get(kc, "Workload", "decoy", q.ns)
            assert not decoy["metadata"].get("ownerReferences") and "admission" not in (decoy.get("status") or {})
            assert await _workload_names(kc, q.ns) == ["decoy", "pre"], "no Workload generated for the Job"
            started = ("Started", f"Admitted by clusterQueue {q.cq}")
            events = await eventually(lambda: _has(kc, q.ns, started), what="the Started Event on the Job")
            assert not [e for e in events if e[0] == "CreatedWorkload"]


@pytest.mark.asyncio
async def test_a_job_waits_for_the_workload_it_names(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "prebuilt-later", {"cpu": 2})
        async with kueue_es(kc, tmp_path / "log") as (_, journal):
            uid = (await create(kc, job(q.ns, "j", "user-queue", labels={PREBUILT: "later"})))["metadata"]["uid"]
            await eventually(lambda: f"{q.ns}/j" in journal.mirror.state.jobs, what="the Job in the log")
            await asyncio.sleep(1.5)
            assert not await running(kc, q.ns, "j"), "no Workload to run on"
            assert await _workload_names(kc, q.ns) == [], "none is generated for it"

            await create(kc, _workload(q.ns, "later"))
            await eventually(lambda: running(kc, q.ns, "j"), what="the Job to start once its Workload is there")
            wl = await eventually(lambda: _adopted_by(kc, q.ns, "later", uid), what="the Workload adopted")
            assert wl["status"]["admission"]["clusterQueue"] == q.cq
            assert await _workload_names(kc, q.ns) == ["later"]


async def _has(kc: KubeClient, ns: str, event: tuple[str, str]) -> list[tuple[str, str]] | None:
    events = await _job_events(kc, ns, "j")
    return events if event in events else None
