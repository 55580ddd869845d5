"""A batch/v1 Job's reclaimable pods, as Kueue's Job integration counts them, reported to the log and written to
its Workload's ``status.reclaimablePods`` (no cluster needed: the integration runs against a mirror, its
writes recorded by a fake client)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.jobs import JobIntegration, reclaimable_pods, workload_name
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import desired_status, observed_status
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

UID = "job-uid"
NAME = workload_name("train", UID)
KEY = f"ns/{NAME}"


def job(parallelism: int = 4, completions: int | None = 4, succeeded: int = 0, suspend: bool = True,
        annotations: dict[str, str] | None = None) -> o.Job:
    return o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid=UID, resource_version="7",
                                       labels={"kueue.x-k8s.io/queue-name": "lq"}, annotations=annotations or {}),
                 spec=o.JobSpec(suspend=suspend, parallelism=parallelism, completions=completions),
                 status=o.JobStatus(succeeded=succeeded, active=parallelism - succeeded if not suspend else 0))


@pytest.mark.parametrize(("j", "want"), [
    (job(parallelism=1, completions=5, succeeded=3), ()),  # one pod at a time: nothing to give back
    (job(succeeded=0), ()),
    (job(parallelism=4, completions=10, succeeded=5), ()),  # 5 to come, 4 still needed
    (job(parallelism=4, completions=10, succeeded=7), (("main", 1),)),
    (job(parallelism=4, completions=4, succeeded=2), (("main", 2),)),
    (job(parallelism=3, completions=None, succeeded=1), (("main", 1),)),  # completions default to parallelism
])
def test_reclaimable_pods_of_a_job_are_kueues(j: o.Job, want: tuple) -> None:
    assert reclaimable_pods(j) == want


def _workload(count: int = 4, min_count: int | None = None) -> o.Workload:
    template = o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(
        name="c", resources=o.ResourceRequirements(requests={"cpu": "1"}))]))
    return o.Workload(
        metadata=o.ObjectMeta(name=NAME, namespace="ns", uid="wl-uid", resource_version="3",
                              owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name="train",
                                                                 uid=UID, controller=True)]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=count, min_count=min_count,
                                                                template=template)]))


class FakeClient:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        self.patches.append(body)
        return msgspec.json.encode({"metadata": {"resourceVersion": "8"}})


def _integration(*objs: o.KObject) -> tuple[JobIntegration, Mirror, list[ev.AnyEvent]]:
    mirror = Mirror()
    for obj in objs:
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=1, key=obj.key, uid=obj.metadata.uid,
                                                                    obj=obj)))
    appended: list[ev.AnyEvent] = []

    async def append(events):
        offsets = []
        for e in events:
            appended.append(e)
            offsets.append(mirror.offset + len(appended))
        return offsets

    return JobIntegration(FakeClient(), LocalJournal(MemoryLog(), mirror), append=append), mirror, appended  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_succeeded_pods_are_reported_once_and_the_writer_writes_them() -> None:
    jobs, mirror, appended = _integration(_workload(), job(succeeded=2))
    await jobs.reconcile("ns/train")
    (e,) = appended
    assert isinstance(e, ev.ReclaimablePodsChanged) and e.key == KEY and e.uid == "wl-uid"
    assert [(p.name, p.count) for p in e.reclaimable_pods] == [("main", 2)]
    await jobs.reconcile("ns/train")
    assert len(appended) == 1, "not repeated while the log has not applied it"
    mirror.apply(ev.Record(mirror.offset + 1, e))
    assert KEY in mirror.dirty_workloads and "ns/train" in mirror.dirty_jobs
    wl = mirror.state.workloads[KEY]
    assert wl.reclaimable == (("main", 2),) and wl.pod_sets[0].count == 2
    assert desired_status(wl)["reclaimablePods"] == [{"name": "main", "count": 2}]
    assert "reclaimablePods" not in observed_status(mirror.workloads[KEY]), "the writer has something to write"
    appended.clear()
    await jobs.reconcile("ns/train")
    assert not [x for x in appended if isinstance(x, ev.ReclaimablePodsChanged)]


@pytest.mark.asyncio
async def test_an_admission_without_the_reclaimable_pods_does_not_shrink_the_job() -> None:
    """Only a partial admission (the Job's minimum parallelism) sets ``parallelism``, as in Kueue: a Job admitted
    again after some of its pods succeeded keeps its parallelism (its finished pods are not run again)."""
    for min_count, want in ((None, None), (2, 3)):
        jobs, mirror, _ = _integration(_workload(4, min_count), job(succeeded=0))
        wl = mirror.state.workloads[KEY]
        wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "3"}, count=3)])
        await jobs._start(mirror.state.jobs["ns/train"], wl, mirror.workloads[KEY])
        (patch,) = jobs.client.patches  # type: ignore[attr-defined]
        assert patch["spec"]["suspend"] is False and patch["spec"].get("parallelism") == want
