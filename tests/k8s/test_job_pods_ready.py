"""Under waitForPodsReady the Job integration writes a Workload's first PodsReady condition (WaitForStart), as
Kueue's reconciler does on its first pass, and only that: the fold keeps it from there. Without waitForPodsReady
nothing is written (no cluster needed: the integration runs against a mirror)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s.jobs import JobIntegration, workload_name
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import desired_status
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

UID = "job-uid"
NAME = workload_name("train", UID)
KEY = f"ns/{NAME}"


def _job() -> o.Job:
    return o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid=UID, resource_version="7",
                                       labels={"kueue.x-k8s.io/queue-name": "lq"}),
                 spec=o.JobSpec(suspend=True, parallelism=1, completions=1), status=o.JobStatus())


def _workload() -> o.Workload:
    template = o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(
        name="c", resources=o.ResourceRequirements(requests={"cpu": "1"}))]))
    return o.Workload(
        metadata=o.ObjectMeta(name=NAME, namespace="ns", uid="wl-uid", resource_version="3",
                              owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name="train",
                                                                 uid=UID, controller=True)]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1, template=template)]))


class _Client:
    async def patch(self, *args: object, **kwargs: object) -> bytes:
        return msgspec.json.encode({"metadata": {"resourceVersion": "8"}})


def _integration(*events: ev.AnyEvent) -> tuple[JobIntegration, Mirror, list[ev.AnyEvent]]:
    mirror = Mirror()
    for e in events:
        mirror.apply(ev.Record(mirror.offset + 1, e))
    for obj in (_workload(), _job()):
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=1, key=obj.key, uid=obj.metadata.uid,
                                                                    obj=obj)))
    appended: list[ev.AnyEvent] = []

    async def append(events):
        appended.extend(events)
        return [mirror.offset + len(appended)]

    return JobIntegration(_Client(), LocalJournal(MemoryLog(), mirror), append=append), mirror, appended  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_pending_workload_gets_waitforstart_once() -> None:
    jobs, mirror, appended = _integration()
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
    jobs, mirror, appended = _integration(config)
    await jobs.reconcile("ns/train")
    assert not appended
    assert mirror.state.workloads[KEY].condition("PodsReady") is None
