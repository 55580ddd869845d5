"""Kueue's own pod controller tests as an oracle: the cases of ``TestReconciler``, ``TestPodSets`` and
``TestPod_IsActive`` in ``pkg/controller/jobs/pod/pod_controller_test.go`` (its v1beta2 version), each
translated to plain data and run through kueue-es's pure decisions (:mod:`connectors.k8s.pod_sync` for a
single Pod, :mod:`connectors.k8s.pod_group` for a group, :mod:`connectors.k8s.podsetinfo` for what a start
adds, :func:`projections.workloads.replacement_pods_condition`). Every test names the Kueue case it follows;
the Pods are Kueue's ``basePodWrapper`` (one container requesting one CPU, role ``dc85db45``), the
ClusterQueue ``cq``."""

from __future__ import annotations

import pytest

from connectors.k8s import pod_group, pod_sync
from connectors.k8s import podsetinfo as psi
from connectors.k8s.pod_group import (
    CREATE,
    DELETE,
    FINALIZE,
    FINISH,
    INVALID,
    NOTHING,
    RECLAIM,
    RELEASE,
    START,
    STOP,
    UPDATE,
    WAIT,
)
from connectors.k8s.pod_roles import role_hash
from connectors.k8s.pod_sync import ManagedPod, ManagedPodSpec, ManagedPodStatus, PodCondition
from events import objects as o
from projections.cluster import ClusterState
from projections.workloads import (
    ADMITTED,
    FINISHED,
    PENDING,
    PodSetInfo,
    WorkloadInfo,
    replacement_pods_condition,
)

GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE = "kueue.x-k8s.io/role-hash"
GATE = {"name": "kueue.x-k8s.io/admission"}
FINALIZER = "kueue.x-k8s.io/managed"
CPU = {"containers": [{"name": "c", "image": "", "resources": {"requests": {"cpu": "1"}}}]}
CPU_MEM = {"containers": [{"name": "c", "image": "",
                           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
R = "dc85db45"
"""Kueue's ``podUID``: the role of ``basePodWrapper``."""
NOW = "2026-03-01T12:00:00Z"


def at(minutes: int) -> str:
    """``now`` shifted by whole minutes (within the hour), as Kueue's cases shift it."""
    return f"2026-03-01T{12 + minutes // 60 if minutes >= 0 else 11}:{minutes % 60:02d}:00Z"


def pod(name: str = "pod", *, group: str = "", total: int = 2, role: str = R, gated: bool = False,
        phase: str = "", deleting: str | None = None, node: str = "", finalizer: bool = True,
        created: str = NOW, queue: str = "user-queue", annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, conditions: list[PodCondition] | None = None) -> ManagedPod:
    """Kueue's ``basePodWrapper.Clone()...``: managed, with Kueue's finalizer unless said, in group
    ``group``."""
    lab = {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": queue, **(labels or {})}
    ann = dict(annotations or {})
    if group:
        lab[GROUP] = group
        ann = {TOTAL: str(total), ROLE: role, **ann}
    return ManagedPod(
        metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version="1",
                              creation_timestamp=created, deletion_timestamp=deleting, labels=lab,
                              annotations=ann, finalizers=[FINALIZER] if finalizer else []),
        spec=ManagedPodSpec(scheduling_gates=[GATE] if gated else [], node_name=node),
        status=ManagedPodStatus(phase=phase, conditions=conditions or []))


def workload(phase: str = PENDING, *, sets: dict[str, int] | None = None, evicted: str = "",
             evicted_message: str = "Preempted to accommodate a higher priority Workload",
             reserving: bool = False, reclaimable: tuple[tuple[str, int], ...] = (),
             conditions: tuple[o.Condition, ...] = (), max_exec: int | None = None,
             name: str = "test-group") -> WorkloadInfo:
    """A Workload as Kueue's case sets it up (``ReserveQuotaAt`` + ``AdmittedAt``: ``ADMITTED`` and
    reserving)."""
    pod_sets = tuple(PodSetInfo(name=n, count=c, min_count=None, requests=(("cpu", 1000),))
                     for n, c in (sets or {R: 2}).items())
    conds = conditions
    if evicted:
        conds += (o.Condition(type="Evicted", status="True", reason=evicted, message=evicted_message),)
    if reserving or phase == ADMITTED:
        conds += (o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved"),)
    wl = WorkloadInfo(key=f"ns/{name}", uid="wl", namespace="ns", name=name, queue_name="user-queue",
                      created=0, priority=0, priority_class="", pod_sets=pod_sets, phase=phase,
                      evicted=evicted, conditions=conds, reclaimable=reclaimable,
                      max_execution_seconds=max_exec)
    if phase == ADMITTED:
        wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
            o.PodSetAssignment(name=n, flavors={"cpu": "unit-test-flavor"}, count=c)
            for n, c in (sets or {R: 2}).items()])
    return wl


def group_step(pods: list[ManagedPod], wl: WorkloadInfo | None, **kw: bool) -> pod_group.GroupStep:
    shown = kw.pop("admission_shown", True)
    return pod_group.next_step(sorted(pods, key=lambda p: p.metadata.name), wl, managed=True,
                               admission_shown=shown, **kw)


def names(pods: tuple[ManagedPod, ...] | list[ManagedPod]) -> list[str]:
    return sorted(p.metadata.name for p in pods)


WAITING = o.Condition(type="WaitingForReplacementPods", status="True", reason="PodsFailed",
                      message="Some Failed pods need replacement")


# --- roles and pod sets -------------------------------------------------------------------------------------

def test_the_roles_of_kueues_cases_hash_as_kueue_names_them() -> None:
    """Kueue's cases name the role of ``basePodWrapper`` (one CPU) ``dc85db45`` and, with ``1Gi`` of memory
    more ("reclaimable pods updated for pod group"), ``4ebdd4a6``."""
    assert role_hash(CPU) == R
    assert role_hash(CPU_MEM) == "4ebdd4a6"


# --- a single Pod -------------------------------------------------------------------------------------------

def test_scheduling_gate_is_removed_and_node_selector_is_added_if_workload_is_admitted() -> None:
    """The gated Pod of an admitted Workload starts: the flavor's node labels,
    ``kueue.x-k8s.io/podset: main``, the queue labels and (TAS on by default) the
    ``kueue.x-k8s.io/workload`` annotation."""
    p = pod(gated=True)
    wl = workload(ADMITTED, sets={"main": 1}, name="unit-test")
    assert pod_sync.next_step(p, wl, managed=True, admission_shown=True).action == pod_sync.START
    state = ClusterState()
    state.flavors["unit-test-flavor"] = o.ResourceFlavor(
        metadata=o.ObjectMeta(name="unit-test-flavor"),
        spec=o.ResourceFlavorSpec(node_labels={"kubernetes.io/arch": "arm64"}))
    assert wl.admission is not None
    info = psi.start_info(state, wl, wl.admission.pod_set_assignments[0])
    patch = pod_sync.start_patch(p, info)
    assert patch["spec"]["nodeSelector"] == {"kubernetes.io/arch": "arm64"}
    assert patch["spec"]["schedulingGates"] is None
    labels = patch["metadata"]["labels"]
    assert {k: labels[k] for k in ("kueue.x-k8s.io/podset", "kueue.x-k8s.io/local-queue-name",
                                   "kueue.x-k8s.io/cluster-queue-name")} == {
        "kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "user-queue",
        "kueue.x-k8s.io/cluster-queue-name": "cq"}
    assert patch["metadata"]["annotations"] == {"kueue.x-k8s.io/workload": "unit-test"}


def test_the_workload_is_created_when_queue_name_is_set() -> None:
    """Kueue: one pod set ``main`` of the Pod's spec (its gate kept in the template), the pod index label of a
    topology request (TAS on), priority 0, the Pod as controller and its uid label."""
    p = pod(gated=True, queue="test-queue")
    assert pod_sync.next_step(p, None, managed=True, admission_shown=False).action == pod_sync.CREATE
    raw = {"metadata": {"name": "pod", "namespace": "ns", "uid": "test-uid",
                        "labels": {"kueue.x-k8s.io/managed": "true",
                                   "kueue.x-k8s.io/queue-name": "test-queue"}},
           "spec": {**CPU, "schedulingGates": [GATE]}}
    body = pod_sync.workload_for(ClusterState(), raw, pod_sync.workload_name("pod", "test-uid"))
    assert body["metadata"]["name"].startswith("pod-pod-")
    assert body["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "test-uid"}
    assert body["metadata"]["ownerReferences"] == [pod_sync.controller_ref("pod", "test-uid")]
    (ps,) = body["spec"]["podSets"]
    assert (ps["name"], ps["count"], ps["template"]["spec"]["schedulingGates"]) == ("main", 1, [GATE])
    assert ps["topologyRequest"] == {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}
    assert (body["spec"]["queueName"], body["spec"].get("priority", 0)) == ("test-queue", 0)


def test_the_pod_reconciliation_is_skipped_when_the_managed_label_is_not_set() -> None:
    p = pod()
    bare = ManagedPod(metadata=o.ObjectMeta(name="pod", namespace="ns",
                                            labels={"kueue.x-k8s.io/queue-name": "q"}))
    assert pod_sync.is_managed(p) and not pod_sync.is_managed(bare)


def test_pod_is_stopped_when_workload_is_evicted() -> None:
    step = pod_sync.next_step(pod(queue="test-queue"),
                              workload(sets={"main": 1}, evicted="Preempted", name="job"),
                              managed=True, admission_shown=False)
    assert (step.action, step.reason, step.message) == (
        pod_sync.STOP, "WorkloadEvictedDueToPreempted", "Preempted to accommodate a higher priority Workload")


def test_pod_is_finalized_when_its_succeeded_and_the_condition_is_added_even_if_the_pod_is_finalized(
) -> None:
    """Kueue: "pod is finalized when it's succeeded", "workload status condition is added even if the pod is
    finalized": the Workload finishes ``Succeeded`` with the Pod's message, then the Pod loses the
    finalizer."""
    wl = workload(ADMITTED, sets={"main": 1}, name="unit-test")
    for finalizer in (True, False):
        p = ManagedPod(metadata=pod(finalizer=finalizer).metadata,
                       status=ManagedPodStatus(phase="Succeeded", message="Job finished successfully"))
        step = pod_sync.next_step(p, wl, managed=True, admission_shown=True)
        assert (step.action, step.reason, step.message) == (
            pod_sync.FINISH, "Succeeded", "Job finished successfully")
    done = workload(FINISHED, sets={"main": 1}, name="unit-test")
    assert pod_sync.next_step(p, done, managed=True, admission_shown=True).action == pod_sync.NOTHING
    step = pod_sync.next_step(pod(phase="Succeeded"), done, managed=True, admission_shown=True)
    assert (step.action, step.finished_workload) == (pod_sync.FINALIZE, True)


def test_pod_without_scheduling_gate_is_terminated_if_workload_is_not_admitted() -> None:
    step = pod_sync.next_step(pod(), workload(sets={"main": 1}, name="unit-test"), managed=True,
                              admission_shown=False)
    assert (step.action, step.reason, step.message) == (
        pod_sync.STOP, "NotAdmitted", "Not admitted by cluster queue")


# --- a group without its Workload ---------------------------------------------------------------------------

def raw(p: ManagedPod, spec: dict | None = None) -> dict:
    meta = p.metadata
    return {"metadata": {"name": meta.name, "namespace": "ns", "uid": meta.uid, "labels": dict(meta.labels),
                         "annotations": dict(meta.annotations)},
            "spec": {**(spec or CPU), "schedulingGates": list(p.spec.scheduling_gates)}}


def test_workload_is_composed_and_created_for_the_pod_group() -> None:
    """The group's Workload: one pod set per role (``dc85db45`` of 2), gated templates, the pod index label,
    every Pod an owner (not the controller), ``is-group-workload`` and the ProvisioningRequest annotations
    only."""
    prov = {"provreq.kueue.x-k8s.io/test-annotation": "test-val",
            "invalid-provreq-prefix/test-annotation-2": "x"}
    pods = [pod("pod", group="test-group", gated=True, annotations=prov),
            pod("pod2", group="test-group", gated=True, annotations=prov)]
    step = group_step(pods, None)
    assert step.action == CREATE and names(step.kept) == ["pod", "pod2"]
    body = pod_group.workload_for(ClusterState(), [raw(p) for p in pods])
    assert body["metadata"]["name"] == "test-group"
    assert body["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true",
                                               "provreq.kueue.x-k8s.io/test-annotation": "test-val"}
    assert [r["name"] for r in body["metadata"]["ownerReferences"]] == ["pod", "pod2"]
    assert not any(r.get("controller") for r in body["metadata"]["ownerReferences"])
    (ps,) = body["spec"]["podSets"]
    assert (ps["name"], ps["count"], ps["template"]["spec"]["schedulingGates"]) == (R, 2, [GATE])
    assert ps["topologyRequest"] == {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}


def test_workload_is_composed_and_created_for_the_pod_group_with_max_exec_time() -> None:
    label = {"kueue.x-k8s.io/max-exec-time-seconds": "10"}
    pods = [pod("pod", group="test-group", gated=True, labels=label),
            pod("pod2", group="test-group", gated=True, labels=label)]
    body = pod_group.workload_for(ClusterState(), [raw(p) for p in pods])
    assert body["spec"]["maximumExecutionTimeSeconds"] == 10


def test_workload_is_recreated_when_max_exec_time_changes() -> None:
    """Not admitted, gated Pods whose label now says 10 s against the Workload's 5: rewritten in place
    (``UpdatedWorkload``)."""
    label = {"kueue.x-k8s.io/max-exec-time-seconds": "10"}
    pods = [pod("pod", group="test-group", gated=True, labels=label),
            pod("pod2", group="test-group", gated=True, labels=label)]
    step = group_step(pods, workload(max_exec=5))
    assert step.action == UPDATE and names(step.kept) == ["pod", "pod2"]


def test_workload_is_found_for_the_pod_group() -> None:
    pods = [pod("pod", group="test-group", gated=True), pod("pod2", group="test-group", gated=True)]
    step = group_step(pods, workload())
    assert (step.action, step.remove, step.finalize) == (NOTHING, (), ())


def test_workload_for_pod_group_with_different_queue_names_shouldnt_be_created() -> None:
    pods = [pod("pod", group="test-group", gated=True, queue="test-queue"),
            pod("pod2", group="test-group", gated=True, queue="new-test-queue")]
    assert group_step(pods, None).action == INVALID


def test_if_pod_group_is_finished_and_wl_is_deleted_new_workload_shouldnt_be_created() -> None:
    """Both Pods succeeded and the Workload is gone: Kueue makes none, and lets the Pods go."""
    pods = [pod("pod", group="test-group", phase="Succeeded"),
            pod("pod2", group="test-group", phase="Succeeded")]
    step = group_step(pods, None)
    assert step.action != CREATE
    assert names(step.pods if step.action == FINALIZE else step.finalize) == ["pod", "pod2"]


def test_if_pod_in_group_is_scheduling_gated_and_wl_is_deleted_workload_should_be_recreated() -> None:
    pods = [pod("pod", group="test-group", gated=True), pod("pod2", group="test-group", phase="Succeeded")]
    step = group_step(pods, None)
    assert step.action == CREATE and names(step.kept) == ["pod", "pod2"]


def test_if_theres_not_enough_non_failed_pods_in_the_group_workload_should_not_be_created() -> None:
    pods = [pod("pod", group="test-group", gated=True), pod("pod2", group="test-group", phase="Failed")]
    step = group_step(pods, None)
    assert (step.action, step.reason, step.message) == (
        WAIT, "ErrWorkloadCompose", "'test-group' group has fewer runnable pods than expected")
    assert names(step.pods) == ["pod"] and names(step.finalize) == ["pod2"]


def test_deleted_pods_in_incomplete_group_are_finalized() -> None:
    pods = [pod("p1", group="group", total=3, gated=True, phase="Pending", deleting=NOW),
            pod("p2", group="group", total=3, gated=True, phase="Pending", deleting=NOW)]
    step = group_step(pods, None)
    assert (step.action == WAIT and step.reason == "ErrWorkloadCompose"
            and names(step.finalize) == ["p1", "p2"])


def test_excess_pods_before_wl_creation_youngest_pods_are_deleted() -> None:
    pods = [pod("pod", group="test-group", total=1, gated=True, created=NOW),
            pod("pod2", group="test-group", total=1, gated=True, created=at(1))]
    step = group_step(pods, None)
    assert step.action == CREATE and names(step.remove) == ["pod2"] and names(step.kept) == ["pod"]


def test_deletion_of_excess_pod_is_blocked_by_another_controller() -> None:
    """Deleted before reaching a node, without Kueue's finalizer: not counted, nothing to finalize."""
    pods = [pod("pod", group="test-group", total=1, gated=True, created=NOW),
            pod("pod2", group="test-group", total=1, gated=True, created=at(1), deleting=NOW,
                finalizer=False)]
    step = group_step(pods, None)
    assert step.action == CREATE and names(step.kept) == ["pod"] and step.remove == () and step.finalize == ()


# --- a group with its Workload ------------------------------------------------------------------------------

def test_scheduling_gate_is_removed_for_all_pods_in_the_group_if_workload_is_admitted() -> None:
    pods = [pod("pod", group="test-group", gated=True), pod("pod2", group="test-group", gated=True)]
    step = group_step(pods, workload(ADMITTED))
    assert step.action == START and names(step.pods) == ["pod", "pod2"]


def test_workload_is_not_finished_if_the_pod_in_the_group_is_running() -> None:
    pods = [pod("pod", group="test-group", phase="Succeeded"), pod("pod2", group="test-group")]
    step = group_step(pods, workload(ADMITTED))
    assert (step.action, step.reclaimable) == (RECLAIM, ((R, 1),))


def test_workload_is_finished_if_all_pods_in_the_group_has_finished() -> None:
    pods = [pod("pod", group="test-group", phase="Succeeded"),
            pod("pod2", group="test-group", phase="Succeeded")]
    step = group_step(pods, workload(ADMITTED))
    assert (step.action, step.reason, step.message) == (FINISH, "Succeeded", "Pods succeeded: 2/2.")
    step = group_step(pods, workload(FINISHED))
    assert step.action == FINALIZE and names(step.pods) == ["pod", "pod2"]


def test_pod_group_of_size_2_is_finished_when_2_pods_has_succeeded_and_1_pod_has_failed() -> None:
    pods = [pod("pod", group="test-group", phase="Failed"),
            pod("pod2", group="test-group", phase="Succeeded"),
            pod("pod3", group="test-group", phase="Succeeded")]
    step = group_step(pods, workload(ADMITTED))
    assert (step.action, step.message) == (FINISH, "Pods succeeded: 2/2.")


def test_pods_are_finalized_even_if_one_of_the_pods_in_the_finished_group_is_absent() -> None:
    step = group_step([pod("pod", group="test-group", phase="Succeeded")],
                      workload(FINISHED, conditions=(WAITING,)))
    assert step.action == FINALIZE and names(step.pods) == ["pod"]


def test_workload_is_not_deleted_if_the_pod_in_group_has_been_deleted_after_admission() -> None:
    step = group_step([pod("pod", group="test-group")], workload(ADMITTED, conditions=(WAITING,)))
    assert (step.action, step.remove, step.finalize) == (NOTHING, (), ())


def test_pod_group_remains_stopped_when_workload_is_evicted() -> None:
    pods = [pod("pod", group="test-group", gated=True, queue="test-queue"),
            pod("pod2", group="test-group", gated=True, queue="test-queue")]
    step = group_step(pods, workload(evicted="Preempted"))
    assert (step.action, step.remove, step.finalize) == (NOTHING, (), ())


def test_all_pods_in_group_should_be_removed_if_workload_is_deleted() -> None:
    pods = [pod("pod", group="test-group", queue="test-queue"),
            pod("pod2", group="test-group", queue="test-queue", phase="Succeeded")]
    step = group_step(pods, workload(ADMITTED), wl_deleting=True)
    assert (step.action, step.reason, step.message) == (STOP, "WorkloadDeleted", "Workload is deleted")
    assert names(step.pods) == ["pod", "pod2"] and names(step.finalize) == ["pod", "pod2"]


def test_replacement_pod_should_be_started_for_pod_group_of_size_1() -> None:
    """The Workload counts 2 Pods of the role: the failed one is not replaced yet, so it keeps its
    finalizer."""
    pods = [pod("pod", group="test-group", total=1, phase="Failed"),
            pod("pod2", group="test-group", total=1, gated=True)]
    step = group_step(pods, workload(ADMITTED, conditions=(WAITING,)))
    assert step.action == START and names(step.pods) == ["pod2"] and step.finalize == ()


def test_replacement_pod_should_be_started_for_set_of_running_failed_succeeded_pods() -> None:
    pods = [pod("pod", group="test-group", total=3, phase="Running"),
            pod("pod2", group="test-group", total=3, phase="Failed"),
            pod("pod3", group="test-group", total=3, phase="Succeeded"),
            pod("replacement", group="test-group", total=3, gated=True)]
    wl = workload(ADMITTED, sets={R: 3}, reclaimable=((R, 1),))
    step = group_step(pods, wl)
    assert step.action == START and names(step.pods) == ["replacement"] and names(step.finalize) == ["pod2"]
    assert names(pod_group.kept(pods, wl)) == ["pod", "pod3", "replacement"]


def test_wl_should_not_get_the_quota_reservation_cleared_for_a_running_pod_group_of_size_1() -> None:
    wl = workload(ADMITTED, sets={R: 1}, evicted="Preempted")
    step = group_step([pod("pod", group="test-group", total=1, phase="Running", deleting=NOW)], wl)
    assert step.action == NOTHING


def test_wl_should_get_the_quota_reservation_cleared_for_a_failed_pod_group_of_size_1() -> None:
    wl = workload(ADMITTED, sets={R: 1}, evicted="Preempted")
    step = group_step([pod("pod", group="test-group", total=1, phase="Failed", deleting=NOW)], wl)
    assert step.action == RELEASE and step.finalize == ()


def test_workload_is_not_deleted_if_all_of_the_pods_in_the_group_are_deleted() -> None:
    pods = [pod("pod", group="test-group", deleting=NOW), pod("pod2", group="test-group", deleting=NOW)]
    step = group_step(pods, workload(ADMITTED, conditions=(WAITING,)))
    assert (step.action, step.remove, step.finalize) == (NOTHING, (), ())


def test_workload_is_not_deleted_if_one_pod_role_is_absent_from_the_cluster() -> None:
    step = group_step([pod("pod", group="test-group", deleting=NOW)],
                      workload(ADMITTED, sets={"absent-pod-role": 1, R: 1}, conditions=(WAITING,)))
    assert (step.action, step.remove, step.finalize) == (NOTHING, (), ())


def test_pod_group_is_considered_finished_if_there_is_an_unretriable_pod_and_no_running_pods() -> None:
    pods = [pod("pod", group="test-group", total=3, phase="Failed",
                annotations={"kueue.x-k8s.io/retriable-in-group": "false"}),
            pod("pod2", group="test-group", total=3, phase="Succeeded"),
            pod("pod3", group="test-group", total=3, phase="Failed", role="4ebdd4a6")]
    step = group_step(pods, workload(ADMITTED, sets={"a119f908": 1, R: 2}, conditions=(WAITING,)))
    assert (step.action, step.message) == (FINISH, "Pods succeeded: 1/3.")


def test_reclaimable_pods_updated_for_pod_group_but_not_for_a_serving_one() -> None:
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    for ann, want in (({}, (RECLAIM, (("4ebdd4a6", 1),))), (serving, (NOTHING, ()))):
        pods = [pod("pod", group="test-group", total=3, phase="Failed", annotations=ann),
                pod("pod2", group="test-group", total=3, phase="Running", annotations=ann),
                pod("pod3", group="test-group", total=3, phase="Succeeded", role="4ebdd4a6", annotations=ann)]
        step = group_step(pods, workload(ADMITTED, sets={"4ebdd4a6": 1, R: 2}, conditions=(WAITING,)))
        assert (step.action, step.reclaimable) == want


def test_excess_pods_before_admission_youngest_pods_are_deleted() -> None:
    pods = [pod("pod", group="test-group", gated=True, created=NOW),
            pod("pod2", group="test-group", gated=True, created=at(1)),
            pod("pod3", group="test-group", gated=True, created=at(2))]
    step = group_step(pods, workload())
    assert step.action == NOTHING and names(step.remove) == ["pod3"]


def test_excess_pods_in_pod_set_after_admission_youngest_pods_are_deleted() -> None:
    pods = [pod("pod", group="test-group", created=NOW),
            pod("pod2", group="test-group", gated=True, created=at(2))]
    step = group_step(pods, workload(ADMITTED, sets={"aaf269e6": 1, R: 1}, conditions=(WAITING,)))
    assert names(step.remove) == ["pod2"] and step.action == NOTHING


def test_delete_excess_pod_that_is_gated() -> None:
    pods = [pod("pod", group="test-group", created=NOW), pod("pod2", group="test-group", created=at(1)),
            pod("pod3", group="test-group", gated=True, created=at(1))]
    step = group_step(pods, workload(ADMITTED))
    assert names(step.remove) == ["pod3"]


def test_replacement_pods_are_owning_the_workload() -> None:
    pods = [pod("pod1", group="test-group", phase="Failed", finalizer=False),
            pod("pod2", group="test-group", deleting=NOW),
            pod("replacement-for-pod1", group="test-group")]
    wl = workload(ADMITTED, sets={R: 3}, conditions=(WAITING,))
    step = group_step(pods, wl)
    assert (step.action, step.finalize, step.remove) == (NOTHING, (), ())
    assert names(pod_group.kept(pods, wl)) == ["pod1", "pod2", "replacement-for-pod1"]


def test_all_pods_in_a_group_should_receive_the_event_about_preemption_unless_already_terminating() -> None:
    pods = [pod("pod1", group="test-group", total=3), pod("pod2", group="test-group", total=3, deleting=NOW),
            pod("pod3", group="test-group", total=3)]
    step = group_step(pods, workload(sets={R: 3}, evicted="Preempted"))
    assert (step.action, step.reason) == (STOP, "WorkloadEvictedDueToPreempted")
    assert names(step.pods) == ["pod1", "pod3"]


def test_preemption_reason_should_be_propagated_to_termination_target() -> None:
    wl = workload(sets={R: 3}, evicted="PodsReadyTimeout",
                  evicted_message="Workload evicted due to a PodsReady timeout")
    step = group_step([pod("pod1", group="test-group", total=1)], wl)
    assert (step.action, step.reason, step.message) == (
        STOP, "WorkloadEvictedDueToPodsReadyTimeout", "Workload evicted due to a PodsReady timeout")


def failed(name: str, at_minute: int, *, deleting: str | None = None, finalizer: bool = True) -> ManagedPod:
    """A Pod that failed ``at_minute`` minutes from now (its ContainersReady False, reason ``Failed``)."""
    cond = PodCondition(type="ContainersReady", status="False", reason="Failed",
                        last_transition_time=at(at_minute))
    return pod(name, group="test-group", total=4, phase="Failed", deleting=deleting, finalizer=finalizer,
               conditions=[cond])


def test_the_failed_pods_are_finalized_in_order() -> None:
    """Of the failed Pods, those that were active last are kept: one deleted 4 minutes ago, one that failed 3
    minutes ago and one that failed 5 minutes ago; two are replaced: the deleted one and the one that failed
    first lose the finalizer."""
    pods = [pod("active-pod", group="test-group", total=4),
            failed("finished-with-error", -5), failed("deleted", -3, deleting=at(-4)),
            failed("finished-with-error2", -3),
            pod("replacement1", group="test-group", total=4),
            pod("replacement2", group="test-group", total=4)]
    wl = workload(ADMITTED, sets={R: 4}, conditions=(WAITING,))
    step = group_step(pods, wl)
    assert names(step.finalize) == ["deleted", "finished-with-error"]
    assert names(pod_group.kept(pods, wl)) == [
        "active-pod", "finished-with-error2", "replacement1", "replacement2"]


def test_no_unnecessary_additional_failed_pods_are_finalized() -> None:
    pods = [failed("finished-with-error", -5),
            failed("finished-with-error-no-finalizer", -3, finalizer=False),
            pod("replacement", group="test-group", total=2)]
    step = group_step(pods, workload(ADMITTED, sets={R: 4}, conditions=(WAITING,)))
    assert step.finalize == ()


def test_deleted_unschedulable_pods_are_finalized() -> None:
    pods = [pod("pod1", group="test-group", phase="Running", created=at(-60)),
            pod("pod2", group="test-group", phase="Pending", deleting=NOW, created=at(-60)),
            pod("replacement", group="test-group", gated=True)]
    step = group_step(pods, workload(ADMITTED))
    assert step.action == START and names(step.pods) == ["replacement"] and names(step.finalize) == ["pod2"]


@pytest.mark.parametrize(("case", "phases", "condition", "want"), [
    ("shouldn't set waiting for pods ready condition to true when all pods pending",
     ("Pending", "Pending"), None, None),
    ("should set waiting for pods ready condition to true when at least one pod failed",
     ("Failed", "Pending"), None, ("True", "PodsFailed", "Some Failed pods need replacement")),
    ("should set waiting for pods ready condition to true when at least one pod deleted",
     ("Pending", "deleted"), None, ("True", "PodsFailed", "Some Failed pods need replacement")),
    ("should set waiting for pods ready condition to false when pods was replaced",
     ("Pending", "Pending"), WAITING, ("False", "PodsReady", "No pods need replacement")),
])
def test_waiting_for_replacement_pods(case: str, phases: tuple[str, str], condition: o.Condition | None,
                                      want: tuple[str, str, str] | None) -> None:
    pods = [pod("pod1", group="test-group", phase=phases[0]),
            pod("pod2", group="test-group", phase="Pending", deleting=NOW) if phases[1] == "deleted"
            else pod("pod2", group="test-group", phase=phases[1])]
    wl = workload(ADMITTED, conditions=(condition,) if condition else ())
    assert replacement_pods_condition(wl, pod_group.absent_pods(pods, wl) > 0) == want, case


def test_waiting_for_replacement_pods_follows_the_eviction() -> None:
    """"should set ... to true when workload was evicted", "should update reason and message ... when workload
    was evicted again", "shouldn't change ... when it's true and workload was readmitted"."""
    pods = [pod("pod1", group="test-group", phase="Failed"), pod("pod2", group="test-group", phase="Pending",
                                                                   deleting=NOW)]
    evicted = workload(ADMITTED, evicted="Preempted")
    assert replacement_pods_condition(evicted, pod_group.absent_pods(pods, evicted) > 0) == (
        "True", "Preempted", "Preempted to accommodate a higher priority Workload")
    stale = o.Condition(type="WaitingForReplacementPods", status="True", reason="Preempted",
                        message="Preempted to accommodate a higher priority Workload")
    again = workload(ADMITTED, evicted="PodsReadyTimeout", evicted_message="Exceeded the PodsReady timeout",
                     conditions=(stale,))
    assert replacement_pods_condition(again, True) == (
        "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout")
    readmitted = workload(ADMITTED, conditions=(
        o.Condition(type="Evicted", status="False", reason="Preempted", message="m"), stale))
    pods = [pod("pod1", group="test-group", phase="Failed"), pod("pod2", group="test-group", phase="Pending")]
    assert replacement_pods_condition(readmitted, pod_group.absent_pods(pods, readmitted) > 0) == (
        "True", "Preempted", "Preempted to accommodate a higher priority Workload")


# --- TestPodSets --------------------------------------------------------------------------------------------

def test_pod_sets_of_a_single_pod_follow_its_topology_annotations_while_tas_is_on() -> None:
    state = ClusterState()
    req = {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "cloud.com/block"}},
           "spec": CPU}
    pref = {"metadata": {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": "cloud.com/block"}},
            "spec": CPU}
    assert pod_sync.pod_set(state, req, "main", 1)["topologyRequest"] == {
        "required": "cloud.com/block", "podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}
    assert pod_sync.pod_set(state, pref, "main", 1)["topologyRequest"] == {
        "preferred": "cloud.com/block", "podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}


@pytest.mark.parametrize(("index", "why"), [
    ("1", "reconciler returns error in case pod group pod index is bigger or equal pod group total count"),
    ("-1", "reconciler returns error in case pod group pod index is less than 0"),
    ("x", "not a number"),
])
def test_a_group_whose_pod_index_is_out_of_its_total_gets_no_workload(index: str, why: str) -> None:
    """Kueue's reconciler reads the pod index of the Pod standing for the group before composing its Workload:
    a whole number below the total, else an error and no Workload."""
    p = pod("pod", group="test-group", total=1, gated=True,
            labels={"kueue.x-k8s.io/pod-group-pod-index": index})
    assert group_step([p], None).action == INVALID, why
    ok = pod("pod", group="test-group", total=1, gated=True,
             labels={"kueue.x-k8s.io/pod-group-pod-index": "0"})
    assert group_step([ok], None).action == CREATE


def test_deleted_pods_in_group_should_not_be_finalized_if_the_workload_doesnt_match() -> None:
    """Kueue's case: the group's Workload (deleted, of a role none of its Pods has) no longer matches the two
    Pods, both being deleted on their node; it goes, and as no Pod is left to stop and none is ``Running``, a
    new one is made of both Pods in the same reconcile, their finalizers kept."""
    pods = [pod("pod", group="test-group", queue="test-queue", node="test-node", deleting=NOW),
            pod("pod2", group="test-group", queue="test-queue", node="test-node", deleting=NOW)]
    old = workload(ADMITTED, sets={"incorrect-role-name": 1})
    step = group_step(pods, old, wl_deleting=True)
    assert (step.action, step.pods) == (DELETE, ())
    step = group_step(pods, None)
    assert step.action == CREATE and names(step.kept) == ["pod", "pod2"] and step.finalize == ()


def test_no_workload_is_made_while_a_pod_of_the_group_is_running() -> None:
    """Kueue's reconciler makes a job's Workload only once the job is not active (``IsActive``: a Pod of the
    group ``Running``): a group whose Workload went while a Pod still runs waits for it, with nothing
    finalized."""
    pods = [pod("a", group="g", gated=True), pod("b", group="g", phase="Running", node="n", deleting=NOW),
            pod("c", group="g", phase="Failed")]
    step = group_step(pods, None)
    assert (step.action, step.finalize) == (WAIT, ())
    done = [pods[0], pod("b", group="g", phase="Succeeded", node="n"), pods[2]]
    assert group_step(done, None).action == CREATE


def test_pod_sets_carry_no_topology_request_if_tas_is_disabled() -> None:
    """``TestPodSets`` "without required/preferred topology annotation if TAS is disabled"."""
    from events import schema as ev

    state = ClusterState()
    state.apply(ev.Record(1, ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"TopologyAwareScheduling": False}})))
    for key in ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"):
        ps = pod_sync.pod_set(state, {"metadata": {"annotations": {key: "cloud.com/block"}}, "spec": CPU},
                              "main", 1)
        assert "topologyRequest" not in ps and (ps["name"], ps["count"]) == ("main", 1)


def test_when_a_workload_is_created_for_the_pod_it_has_its_provreq_annotations_copied() -> None:
    p = pod(gated=True, annotations={"provreq.kueue.x-k8s.io/test-annotation": "test-val",
                                     "invalid-provreq-prefix/test-annotation-2": "test-val-2"})
    body = pod_sync.workload_for(ClusterState(), raw(p), pod_sync.workload_name("pod", "test-uid"))
    assert body["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/test-annotation": "test-val"}
