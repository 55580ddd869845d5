"""A partially admitted batch/v1 Job (``kueue.x-k8s.io/job-min-parallelism``) starts with the admitted count as
its parallelism and gets its own back once stopped; under ``kueue.x-k8s.io/job-completions-equal-parallelism:
"true"`` its completions follow its parallelism both ways, as Kueue's ``Job.RunWithPodSetsInfo`` /
``RestorePodSetsInfo`` set them (pkg/controller/jobs/job/job_controller.go): an Indexed Job whose every index is
one rank of a gang must not wait, with its quota held, for ranks it was not admitted to run. No cluster needed:
the integration runs against a mirror, its writes recorded by a fake client."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import job, workload
from test_job_sync import _in_phase, _setup, _stored_admitted

from connectors.k8s.jobs import STOPPING, completions_follow_parallelism
from connectors.k8s.mirror import Mirror
from events import objects as o
from projections.workloads import WorkloadInfo

MIN = "kueue.x-k8s.io/job-min-parallelism"
SYNC = "kueue.x-k8s.io/job-completions-equal-parallelism"


def _job(sync: str | None, *, parallelism: int = 10, stopping: bool = False, rv: str = "7") -> o.Job:
    annotations = {MIN: "5", **({SYNC: sync} if sync is not None else {}), **({STOPPING: "true"} if stopping else {})}
    j = job(parallelism=parallelism, completions=parallelism, resource_version=rv)
    return msgspec.structs.replace(j, metadata=msgspec.structs.replace(j.metadata, annotations=annotations))


def _admitted(mirror: Mirror, count: int) -> None:
    """The Workload admitted with ``count`` of its pods, in the log and in its stored status."""
    psa = o.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": str(count)}, count=count)

    def shape(info: WorkloadInfo) -> None:
        info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[psa])

    _stored_admitted(mirror, shape)


def _job_patches(client: Any) -> list[dict[str, Any]]:
    return [body for kind, _, body in client.patches if kind == "Job"]


@pytest.mark.parametrize(("text", "follows"), [
    ("true", True), ("True", True), ("1", True), ("t", True), ("false", False), ("yes", False), ("", False),
    (None, False)])
def test_the_annotation_reads_as_go_reads_a_bool(text: str | None, follows: bool) -> None:
    assert completions_follow_parallelism({SYNC: text} if text is not None else {}) is follows


@pytest.mark.asyncio
@pytest.mark.parametrize(("sync", "want"), [
    ("true", {"parallelism": 8, "completions": 8}),
    ("false", {"parallelism": 8}),
    (None, {"parallelism": 8})])
async def test_a_partial_start_sets_completions_with_parallelism_when_they_follow_it(
        sync: str | None, want: dict[str, int]) -> None:
    jobs, mirror, _, client = _setup(workload(count=10, min_count=5), _job(sync))
    _admitted(mirror, 8)
    await jobs.reconcile("ns/train")
    (start,) = _job_patches(client)
    assert start["spec"]["suspend"] is False
    assert {k: v for k, v in start["spec"].items() if k in ("parallelism", "completions")} == want


@pytest.mark.asyncio
@pytest.mark.parametrize(("sync", "want"), [
    ("true", {"parallelism": 10, "completions": 10}),
    (None, {"parallelism": 10})])
async def test_the_restore_gives_completions_back_from_the_workloads_count(sync: str | None,
                                                                           want: dict[str, int]) -> None:
    """Running at 8 of 10 after a partial admission, then evicted: once no pod is active the Job gets its own
    count back — from the Workload's pod set, which the apiserver keeps (nothing kueue-es holds in memory)."""
    stopped = _job(sync, parallelism=8, stopping=True, rv="11")
    jobs, mirror, _, client = _setup(workload(count=10, min_count=5), stopped)
    _in_phase(mirror, "Pending", evicted="Preempted")
    await jobs.reconcile("ns/train")
    restore = _job_patches(client)[-1]
    assert restore["metadata"]["annotations"] == {STOPPING: None}
    assert {k: v for k, v in restore["spec"].items() if k in ("parallelism", "completions")} == want
