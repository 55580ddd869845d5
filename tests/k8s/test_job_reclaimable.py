"""A batch/v1 Job's reclaimable pods, as Kueue's Job integration counts them, reported to the log and written to
its Workload's ``status.reclaimablePods`` (no cluster needed: the integration runs against a mirror, its
writes recorded by a fake client)."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.jobs import KEY, integration, job, workload

from connectors.k8s.jobs import reclaimable_pods
from connectors.k8s.writer import desired_status, observed_status
from events import objects as o
from events import schema as ev


@pytest.mark.parametrize(("j", "want"), [
    (job(parallelism=1, completions=5, succeeded=3), ()),  # one pod at a time: nothing to give back
    (job(succeeded=0), ()),
    (job(parallelism=4, completions=10, succeeded=5), ()),  # 5 to come, 4 still needed
    (job(parallelism=4, completions=10, succeeded=7), (("main", 1),)),
    (job(parallelism=4, completions=4, succeeded=2), (("main", 2),)),
    (job(parallelism=3, completions=None, succeeded=1), (("main", 1),)),  # completions default to parallelism
    # Kueue v0.20 #16111: parallelism above completions runs only `completions` pods (the pod set's count): with
    # 1 of 3 succeeded, 2 still run and only 1 pod's quota is given back (5 - 2 = 3 was the whole pod set)
    (job(parallelism=5, completions=3, succeeded=1), (("main", 1),)),
    (job(parallelism=5, completions=3, succeeded=3), (("main", 3),)),
])
def test_reclaimable_pods_of_a_job_are_kueues(j: o.Job, want: tuple) -> None:
    assert reclaimable_pods(j) == want


def _failed(j: o.Job, indexes: str) -> o.Job:
    return msgspec.structs.replace(j, status=msgspec.structs.replace(j.status, failed_indexes=indexes))


@pytest.mark.parametrize(("j", "want"), [
    # Kueue v0.20 #13486: an index failed for good (backoffLimitPerIndex) never completes, so its pod is given back
    (_failed(job(parallelism=4, completions=4), "0,2"), (("main", 2),)),
    (_failed(job(parallelism=4, completions=8, succeeded=2), "1,3-5"), (("main", 2),)),  # 8 - 2 - 4 = 2 to come
    (_failed(job(parallelism=4, completions=10, succeeded=2), "7"), ()),  # 7 to come, all 4 still needed
    (_failed(job(parallelism=4, completions=4), ""), ()),
])
def test_failed_indexes_release_their_pods(j: o.Job, want: tuple) -> None:
    assert reclaimable_pods(j) == want


def test_failed_indexes_are_read_from_the_jobs_status() -> None:
    raw = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
           "spec": {"parallelism": 3, "completions": 3}, "status": {"failedIndexes": "0-1"}}
    assert reclaimable_pods(msgspec.convert(raw, o.Job)) == (("main", 2),)


def _indexed(parallelism: int, completions: int, succeeded: int = 0, completed: str | None = None,
             failed: str | None = None) -> o.Job:
    raw = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
           "spec": {"parallelism": parallelism, "completions": completions, "completionMode": "Indexed"},
           "status": {"succeeded": succeeded, "completedIndexes": completed, "failedIndexes": failed}}
    return msgspec.convert(raw, o.Job)


@pytest.mark.parametrize(("j", "want"), [
    (_indexed(4, 4, succeeded=2, completed="1,3"), (("main", 2),)),
    # kueue#12670 (job_controller_test "Should not wedge the reconciler when scaling down below the accumulated
    # succeeded count"): scaled 8 -> 3 with indexes 0-3 done, only 0-2 remain: 3, not 4 (above the pod set)
    (_indexed(3, 3, succeeded=4, completed="0-3"), (("main", 3),)),
    # kueue#13117 ("...while status.Succeeded is stale after scale-down"): 15 counted, 5-9 done of 10: 5
    (_indexed(10, 10, succeeded=15, completed="5-9"), (("main", 5),)),
    # kueue#13552 ("Should ignore a permanently failed index removed by a scale-down"): index 4 is gone at 3
    (_indexed(3, 3, failed="4"), ()),
    # kueue#13486: an index both completed and failed (older Kubernetes lets them overlap) counts once
    (_indexed(10, 10, succeeded=10, completed="0-9", failed="2-3"), (("main", 10),)),
    (_indexed(4, 8, completed="0-1", failed="5"), ()),  # 8 - 3 = 5 to come: all 4 pods still needed
    (_indexed(4, 6, succeeded=2, completed="0-1", failed="5"), (("main", 1),)),  # 6 - 3 = 3 to come: 1 pod given back
])
def test_an_indexed_jobs_terminal_indexes_below_its_completions_release_their_pods(j: o.Job, want: tuple) -> None:
    """Kueue (#13178, #13486): an Indexed Job's finished pods are its completed and failed indexes, each counted
    once and only below ``completions`` — ``status.succeeded`` still counts indexes an elastic scale-down removed."""
    assert reclaimable_pods(j) == want


@pytest.mark.asyncio
async def test_succeeded_pods_are_reported_once_and_the_writer_writes_them() -> None:
    jobs, mirror, appended = integration(workload(), job(succeeded=2))
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
        jobs, mirror, _ = integration(workload(4, min_count), job(succeeded=0))
        wl = mirror.state.workloads[KEY]
        wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "3"}, count=3)])
        await jobs._start(mirror.state.jobs["ns/train"], wl, mirror.workloads[KEY])
        (patch,) = jobs.client.patches  # type: ignore[attr-defined]
        assert patch["spec"]["suspend"] is False and patch["spec"].get("parallelism") == want


@pytest.mark.asyncio
async def test_reclaimable_pods_are_at_most_the_pod_sets_count() -> None:
    """Kueue #12670: a Job scaled below the pods it already reclaimed (an elastic Job's scale-down in place)
    reports at most its pod set's count, which the Workload's webhook accepts."""
    jobs, _, appended = integration(workload(2), job(parallelism=2, completions=None, succeeded=4))
    await jobs.reconcile("ns/train")
    (e,) = appended
    assert isinstance(e, ev.ReclaimablePodsChanged)
    assert [(p.name, p.count) for p in e.reclaimable_pods] == [("main", 2)]
