"""A Job's labels and annotations copied onto its Workload against the real apiserver, as Kueue copies them.

With ``integrations.labelKeysToCopy: [team]``, a Job labelled ``team`` gets a Workload labelled the same, and
no other label of the Job; under ``CustomMetricLabels`` the annotation a ``sourceKind: Workload`` custom metric
label reads is copied too. The copy is made once: relabelling the Job afterwards leaves its Workload as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, queues, running

from connectors.k8s import crds
from connectors.k8s.jobs import JOBS, workload_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube

BUDGET = "example.com/budget"


@pytest.mark.asyncio
async def test_a_jobs_listed_labels_reach_its_workload_once(kube_apiserver, tmp_path) -> None:
    config = load_config({
        "integrations": {"labelKeysToCopy": ["team"]},
        "featureGates": {"CustomMetricLabels": True},
        "metrics": {"customLabels": [{"name": "budget", "sourceKind": "Workload", "sourceAnnotationKey": BUDGET,
                                      "trackedValues": ["b1"]}]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        q = await queues(kc, "copied-labels", {"cpu": 1})
        async with kueue_es(kc, tmp_path / "log", config=config):
            body = job(q.ns, "j", "user-queue", labels={"team": "a", "other": "x"})
            body["metadata"]["annotations"] = {BUDGET: "b1", "example.com/note": "n"}
            uid = (await create(kc, body))["metadata"]["uid"]
            wl_name = workload_name("j", uid)

            async def created() -> dict[str, Any] | None:
                try:
                    return await get(kc, "Workload", wl_name, q.ns)
                except Exception:  # noqa: BLE001 - not there yet
                    return None

            wl = await eventually(created, what="the Job's Workload")
            assert wl["metadata"]["labels"] == {"team": "a", "kueue.x-k8s.io/job-uid": uid}
            assert wl["metadata"].get("annotations") == {BUDGET: "b1"}

            await kc.patch(JOBS, "j", {"metadata": {"labels": {"team": "b"}}}, q.ns)
            await eventually(lambda: running(kc, q.ns, "j"), what="the Job admitted and started")
            admitted = await get(kc, "Workload", wl_name, q.ns)
            assert admitted["metadata"]["uid"] == wl["metadata"]["uid"]
            assert admitted["metadata"]["labels"]["team"] == "a", "copied when made, not kept in step"
