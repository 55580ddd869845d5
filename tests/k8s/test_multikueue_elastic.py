"""An elastic RayCluster on a MultiKueue manager (:mod:`connectors.k8s.multikueue_elastic`, Kueue's Ray adapter's
``ElasticReplicaSync``): what the manager forwards onto the RayCluster's copy on the worker — the worker groups'
sizes, the in-tree autoscaling flag and the Workload the copy names — and when it forwards nothing; and which
copies of elastic slices stay on the workers (:func:`kueue_es.scheduler.multikueue_slices.keeps_copies`)."""

from __future__ import annotations

import copy
from typing import Any

from connectors.k8s.multikueue_elastic import copy_scaled_down, elastic_patch, worker_counts
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.multikueue_slices import keeps_copies
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, FINISHED, PENDING, PodSetInfo, WorkloadInfo

RAYCLUSTER = ("ray.io/v1", "RayCluster")
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
GATE_OFF = load_config({"featureGates": {"ElasticJobsViaWorkloadSlices": False}})


def _cluster(workers: int, *, elastic: bool = True, hosts: int | None = None, autoscaling: bool | None = None,
             prebuilt: str | None = None, where: str = "annotations") -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": "workers", "replicas": workers, "minReplicas": workers,
                             "maxReplicas": workers, "rayStartParams": {}, "template": {"spec": {}}}
    if hosts is not None:
        group["numOfHosts"] = hosts
    spec: dict[str, Any] = {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": [group]}
    if autoscaling is not None:
        spec["enableInTreeAutoscaling"] = autoscaling
    meta: dict[str, Any] = {"name": "rc", "namespace": "ns", "resourceVersion": "7", "labels": {}, "annotations": {}}
    if elastic:
        meta["annotations"]["kueue.x-k8s.io/elastic-job"] = "true"
    if prebuilt is not None:
        meta[where][PREBUILT] = prebuilt
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def _slice(name: str, workers: int, *, phase: str = ADMITTED, replaces: str = "", reserving: bool = True,
           finished_reason: str = "") -> WorkloadInfo:
    sets = tuple(PodSetInfo(name=n, count=c, min_count=None, requests=(("cpu", 1000),))
                 for n, c in (("head", 1), ("workers", workers)))
    conditions: list[o.Condition] = []
    if reserving:
        conditions.append(o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved"))
    if finished_reason:
        conditions.append(o.Condition(type="Finished", status="True", reason=finished_reason))
    return WorkloadInfo(key=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue_name="lq", created=0,
                        priority=0, priority_class="", pod_sets=sets, phase=phase, replaces=replaces, elastic=True,
                        conditions=tuple(conditions))


def test_worker_counts_are_replicas_times_hosts_by_group() -> None:
    assert worker_counts(_cluster(3)) == {"workers": 3}
    assert worker_counts(_cluster(3, hosts=2)) == {"workers": 6}


def test_a_scale_up_admitted_on_the_worker_resizes_the_copy_and_points_it_at_the_new_slice() -> None:
    """Once the new slice (asking for the manager's counts) is the one synced, the copy's worker group takes the
    manager's replicas, bounds included, and names the new slice where it named the old one."""
    remote = _cluster(1, prebuilt="wl-old")
    local = _cluster(2)
    patch = elastic_patch(DEFAULT, RAYCLUSTER, remote, local, _slice("wl-new", 2))
    assert patch is not None
    assert patch["metadata"] == {"annotations": {PREBUILT: "wl-new"}}
    group = patch["spec"]["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)
    assert group["template"] == remote["spec"]["workerGroupSpecs"][0]["template"], "only the sizes change"
    assert set(patch["spec"]) == {"workerGroupSpecs"}


def test_the_old_slice_synced_after_the_owner_grew_forwards_nothing() -> None:
    """Kueue's stale scale-up guard: the old slice, still admitted, does not ask for the grown counts; pushing them
    would start pods on the worker no slice there holds quota for."""
    assert elastic_patch(DEFAULT, RAYCLUSTER, _cluster(1, prebuilt="wl-old"), _cluster(2), _slice("wl-old", 1)) is None


def test_a_scale_down_in_place_goes_to_the_copy_at_once() -> None:
    """A scale-down lowers the admitted slice in place: the same Workload, fewer pods; no guard holds it."""
    patch = elastic_patch(DEFAULT, RAYCLUSTER, _cluster(3, prebuilt="wl"), _cluster(1), _slice("wl", 3))
    assert patch is not None and "metadata" not in patch
    assert patch["spec"]["workerGroupSpecs"][0]["replicas"] == 1


def test_a_label_naming_the_slice_is_repointed_as_a_label() -> None:
    patch = elastic_patch(DEFAULT, RAYCLUSTER, _cluster(1, prebuilt="wl-old", where="labels"), _cluster(1),
                          _slice("wl-new", 1))
    assert patch == {"metadata": {"labels": {PREBUILT: "wl-new"}}}


def test_hosts_and_the_autoscaling_flag_follow_the_manager() -> None:
    """numOfHosts changes the group's pod count, so it is forwarded; the copy's in-tree autoscaling becomes the
    manager's (an autoscaler running on the worker would fight the manager's counts)."""
    remote = _cluster(2, hosts=2, autoscaling=True, prebuilt="wl")
    patch = elastic_patch(DEFAULT, RAYCLUSTER, remote, _cluster(2), _slice("wl", 2))
    assert patch is not None
    assert "numOfHosts" not in patch["spec"]["workerGroupSpecs"][0]
    assert patch["spec"]["enableInTreeAutoscaling"] is None


def test_nothing_is_forwarded_when_counts_and_slice_agree() -> None:
    """Bounds alone, like any other spec edit, are not forwarded (Kueue syncs on a count or slice change only)."""
    remote = _cluster(2, prebuilt="wl")
    remote["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 5
    assert elastic_patch(DEFAULT, RAYCLUSTER, remote, _cluster(2), _slice("wl", 2)) is None


def test_nothing_is_forwarded_gate_off_not_elastic_or_another_kind() -> None:
    remote, local = _cluster(1, prebuilt="wl-old"), _cluster(2)
    assert elastic_patch(GATE_OFF, RAYCLUSTER, remote, local, _slice("wl-new", 2)) is None
    assert elastic_patch(DEFAULT, RAYCLUSTER, remote, _cluster(2, elastic=False), _slice("wl-new", 2)) is None
    rayjob = ("ray.io/v1", "RayJob")
    assert elastic_patch(DEFAULT, rayjob, remote, local, _slice("wl-new", 2)) is None, "RayJob: create-once"
    assert elastic_patch(DEFAULT, RAYCLUSTER, remote, local, _slice("wl-new", 2)) is not None


def test_the_copy_is_not_changed_in_place() -> None:
    remote = _cluster(1, prebuilt="wl-old")
    before = copy.deepcopy(remote)
    elastic_patch(DEFAULT, RAYCLUSTER, remote, _cluster(2), _slice("wl-new", 2))
    assert remote == before


def _state(*wls: WorkloadInfo, gate: bool = True) -> ClusterState:
    state = ClusterState()
    if not gate:
        state.config = ev.ConfigRecorded(time=1, writer="test", id="c", document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"ElasticJobsViaWorkloadSlices": False}})
    for wl in wls:
        state.workloads[wl.key] = wl
    return state


def test_copies_of_a_replaced_slice_and_of_a_waiting_scale_up_stay() -> None:
    replaced = _slice("old", 1, phase=FINISHED, reserving=False, finished_reason="WorkloadSliceReplaced")
    waiting = _slice("new", 2, phase=PENDING, replaces="ns/old", reserving=False)
    done = _slice("done", 1, phase=FINISHED, reserving=False, finished_reason="Succeeded")
    running = _slice("run", 1)
    state = _state(replaced, waiting, done, running)
    assert keeps_copies(state, replaced) and keeps_copies(state, waiting)
    assert not keeps_copies(state, done) and not keeps_copies(state, running)
    off = _state(replaced, waiting, gate=False)
    assert not keeps_copies(off, replaced) and not keeps_copies(off, waiting), "gate off: as any workload"


def _copy(head: int, workers: int) -> dict[str, Any]:
    return {"spec": {"podSets": [{"name": "head", "count": head}, {"name": "workers", "count": workers}]}}


def test_a_copy_asking_for_more_than_the_manager_slice_lowered_in_place_takes_its_pod_sets() -> None:
    """Kueue's workload controller updates an elastic copy whose manager Workload was scaled down (fewer pods in some
    pod set, more in none); any other difference (a scale-up, other pod sets) is not this update's."""
    wl = _slice("wl", 1)
    assert copy_scaled_down(DEFAULT, wl, _copy(1, 3))
    assert not copy_scaled_down(DEFAULT, wl, _copy(1, 1)), "in step already"
    assert not copy_scaled_down(DEFAULT, _slice("wl", 4), _copy(1, 3)), "a scale-up makes a new slice instead"
    assert not copy_scaled_down(DEFAULT, wl, {"spec": {"podSets": [{"name": "main", "count": 3}]}})
    assert not copy_scaled_down(GATE_OFF, wl, _copy(1, 3))


JOB = ("batch/v1", "Job")


def _job(parallelism: int, *, completions: int | None = None, prebuilt: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "template": {"spec": {}}}
    if completions is not None:
        spec["completions"] = completions
    meta: dict[str, Any] = {"name": "j", "namespace": "ns", "annotations": {"kueue.x-k8s.io/elastic-job": "true"},
                            "labels": {}}
    if prebuilt is not None:
        meta["labels"][PREBUILT] = prebuilt
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _job_slice(name: str, pods: int) -> WorkloadInfo:
    return WorkloadInfo(key=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue_name="lq", created=0,
                        priority=0, priority_class="", phase=ADMITTED, elastic=True,
                        pod_sets=(PodSetInfo(name="main", count=pods, min_count=None, requests=(("cpu", 1000),)),))


def test_an_elastic_jobs_copy_takes_the_manager_parallelism_and_slice() -> None:
    """Kueue's batch/v1 adapter: the copy's parallelism and the Workload it names, nothing else."""
    assert elastic_patch(DEFAULT, JOB, _job(2, prebuilt="wl-old"), _job(4), _job_slice("wl-new", 4)) == {
        "spec": {"parallelism": 4}, "metadata": {"labels": {PREBUILT: "wl-new"}}}
    assert elastic_patch(DEFAULT, JOB, _job(4, prebuilt="wl"), _job(1), _job_slice("wl", 4)) == {
        "spec": {"parallelism": 1}}, "a scale-down at once"
    assert elastic_patch(DEFAULT, JOB, _job(4, prebuilt="wl"), _job(4), _job_slice("wl", 4)) is None


def test_an_elastic_jobs_old_slice_does_not_push_a_grown_parallelism() -> None:
    """Stale: the slice synced asks for the Job's old pods; the Job's pods are min(parallelism, completions)."""
    assert elastic_patch(DEFAULT, JOB, _job(2, prebuilt="wl-old"), _job(4), _job_slice("wl-old", 2)) is None
    assert elastic_patch(DEFAULT, JOB, _job(2, prebuilt="wl-old"), _job(4, completions=3),
                         _job_slice("wl-new", 3)) is not None
