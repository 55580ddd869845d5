"""Under waitForPodsReady the Job integration writes a Workload's first PodsReady condition (WaitForStart), as
Kueue's reconciler does on its first pass, and only that: the fold keeps it from there. Without waitForPodsReady
nothing is written (no cluster needed: the integration runs against a mirror)."""

from __future__ import annotations

import pytest
from fixtures.jobs import KEY, integration, job, workload

from connectors.k8s.writer import desired_status
from events import schema as ev


@pytest.mark.asyncio
async def test_a_pending_workload_gets_waitforstart_once() -> None:
    jobs, mirror, appended = integration(workload(count=1), job(parallelism=1, completions=1))
    await jobs.reconcile("ns/train")
    (e,) = appended
    assert isinstance(e, ev.PodsReadyChanged) and (e.key, e.uid, e.ready, e.reason) == (KEY, "wl-uid", False,
                                                                                         "WaitForStart")
    mirror.apply(ev.Record(mirror.offset + 1, e))
    (c,) = [c for c in desired_status(mirror.state.workloads[KEY])["conditions"] if c["type"] == "PodsReady"]
    assert (c["status"], c["reason"], c["message"]) == ("False", "WaitForStart", "Not all pods are ready or succeeded")
    appended.clear()
    await jobs.reconcile("ns/train")
    assert not appended, "written once: the fold keeps it from there"


@pytest.mark.asyncio
async def test_nothing_is_written_without_waitforpodsready() -> None:
    config = ev.ConfigRecorded(time=1, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "waitForPodsReady": {"enable": False}})
    jobs, mirror, appended = integration(workload(count=1), job(parallelism=1, completions=1), before=(config,))
    await jobs.reconcile("ns/train")
    assert not appended
    assert mirror.state.workloads[KEY].condition("PodsReady") is None
