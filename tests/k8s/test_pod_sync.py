"""What Kueue's pod reconciler does next with a single plain Pod (:mod:`connectors.k8s.pod_sync`), decided from the
Pod and its Workload alone; and the Workload and the patches it makes (no cluster needed)."""

from __future__ import annotations

import hashlib

import pytest

from connectors.k8s import pod_sync
from connectors.k8s.job_priority import WorkloadPriorityClassNotFound
from connectors.k8s.pod_sync import (
    CREATE,
    FINALIZE,
    FINISH,
    NOTHING,
    RELEASE,
    START,
    STOP,
    ManagedPod,
    ManagedPodSpec,
    ManagedPodStatus,
    PodCondition,
    next_step,
    pods_ready_change,
)
from connectors.k8s.podsetinfo import MergeConflict, PodSetInfo
from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, FINISHED, PENDING, RESERVED, WorkloadInfo

GATE = {"name": "kueue.x-k8s.io/admission"}
Q = "kueue.x-k8s.io/queue-name"


def pod(*, gated: bool = True, phase: str = "Pending", deleting: bool = False, finalizer: bool = True,
        queue: str | None = "lq", ready: bool = False, message: str = "") -> ManagedPod:
    labels = {"kueue.x-k8s.io/managed": "true", **({Q: queue} if queue else {})}
    return ManagedPod(
        metadata=o.ObjectMeta(name="p", namespace="ns", uid="pod-uid", resource_version="5", labels=labels,
                              finalizers=["kueue.x-k8s.io/managed"] if finalizer else [],
                              deletion_timestamp="2026-01-01T00:00:00Z" if deleting else None),
        spec=ManagedPodSpec(scheduling_gates=[GATE] if gated else []),
        status=ManagedPodStatus(phase=phase, message=message,
                                conditions=[PodCondition(type="Ready", status="True" if ready else "False")]))


def workload(phase: str = PENDING, *, evicted: str = "", job_stopped: bool = False, pods_ready: bool = False,
             conditions: tuple[o.Condition, ...] = ()) -> WorkloadInfo:
    return WorkloadInfo(key="ns/pod-p-abcde", uid="wl-uid", namespace="ns", name="pod-p-abcde", queue_name="lq",
                        created=0, priority=0, priority_class="", pod_sets=(), phase=phase, evicted=evicted, job_stopped=job_stopped,
                        pods_ready=pods_ready, conditions=conditions)


def evicted_condition(reason: str = "Preempted", message: str = "Preempted to accommodate a workload") -> tuple:
    return (o.Condition(type="Evicted", status="True", reason=reason, message=message),)


def step(p: ManagedPod, wl: WorkloadInfo | None, *, managed: bool = True, shown: bool = True) -> pod_sync.Step:
    return next_step(p, wl, managed=managed, admission_shown=shown)


def test_a_gated_pod_without_a_workload_gets_one() -> None:
    assert step(pod(), None).action == CREATE


@pytest.mark.parametrize("p", [pod(queue=None), pod()])
def test_a_pod_that_is_not_kueues_to_queue_is_left_alone(p: ManagedPod) -> None:
    """Outside a managed namespace, or naming no queue without ``manageJobsWithoutQueueName``
    (``job_selection.is_managed``, the caller's)."""
    assert step(p, None, managed=False).action == NOTHING


def test_a_pod_naming_no_queue_that_kueue_manages_all_the_same_gets_a_workload() -> None:
    assert step(pod(queue=None), None).action == CREATE


def test_a_pod_being_deleted_only_loses_the_finalizer_whatever_else_holds() -> None:
    assert step(pod(deleting=True), workload(ADMITTED)).action == FINALIZE
    assert step(pod(deleting=True), None, managed=False).action == FINALIZE
    assert step(pod(deleting=True, finalizer=False), None).action == NOTHING


def test_a_running_pod_without_a_workload_is_stopped_and_an_ended_one_finalized() -> None:
    s = step(pod(gated=False, phase="Running"), None)
    assert (s.action, s.reason, s.message) == (STOP, "NoMatchingWorkload",
                                               "Missing Workload; unable to restore pod templates")
    assert step(pod(gated=False, phase="Succeeded"), None).action == FINALIZE


def test_a_gated_pod_starts_only_once_admitted_in_the_log_and_in_the_apiserver() -> None:
    assert step(pod(), workload(ADMITTED)).action == START
    assert step(pod(), workload(ADMITTED), shown=False).action == NOTHING, "the status write is still to come"
    assert step(pod(), workload(RESERVED)).action == NOTHING, "quota reserved, checks pending: still gated"


def test_a_running_pod_whose_workload_is_not_admitted_is_stopped() -> None:
    s = step(pod(gated=False, phase="Running"), workload(PENDING))
    assert (s.action, s.reason, s.message) == (STOP, "NotAdmitted", "Not admitted by cluster queue")
    assert step(pod(gated=False, phase="Running"), workload(ADMITTED)).action == NOTHING


def test_an_evicted_running_pod_is_stopped_and_its_quota_given_back() -> None:
    s = step(pod(gated=False, phase="Running"), workload(ADMITTED, evicted="Preempted",
                                                         conditions=evicted_condition()))
    assert (s.action, s.reason, s.message, s.release) == (
        STOP, "WorkloadEvictedDueToPreempted", "Preempted to accommodate a workload", True)


def test_a_pod_evicted_before_it_ran_only_gives_the_quota_back_once() -> None:
    assert step(pod(), workload(RESERVED, evicted="AdmissionCheck")).action == RELEASE
    assert step(pod(), workload(RESERVED, evicted="AdmissionCheck", job_stopped=True)).action == NOTHING
    assert step(pod(), workload(PENDING, evicted="Preempted")).action == NOTHING, "no quota held any more"


def test_an_ended_pod_finishes_its_workload_then_is_finalized() -> None:
    s = step(pod(gated=False, phase="Failed", message="OOMKilled"), workload(ADMITTED))
    assert (s.action, s.reason, s.message) == (FINISH, "Failed", "OOMKilled")
    assert step(pod(gated=False, phase="Succeeded"), workload(ADMITTED)).reason == "Succeeded"
    done = step(pod(gated=False, phase="Succeeded"), workload(FINISHED))
    assert (done.action, done.finished_workload) == (FINALIZE, True)
    assert step(pod(gated=False, phase="Succeeded", finalizer=False), workload(FINISHED)).action == NOTHING


def test_pods_ready_follows_the_pods_ready_condition_as_for_jobs() -> None:
    assert pods_ready_change(pod(), workload(PENDING)) == (False, "WaitForStart"), "Kueue's first write"
    shown = (o.Condition(type="PodsReady", status="False", reason="WaitForStart"),)
    assert pods_ready_change(pod(), workload(PENDING, conditions=shown)) is None
    running = pod(gated=False, phase="Running", ready=True)
    assert pods_ready_change(running, workload(ADMITTED, conditions=shown)) == (True, "Started")
    lost = (o.Condition(type="PodsReady", status="False", reason="WaitForRecovery"),)
    assert pods_ready_change(running, workload(ADMITTED, conditions=lost)) == (True, "Recovered")
    up = (o.Condition(type="PodsReady", status="True", reason="Started"),)
    assert pods_ready_change(pod(gated=False, phase="Running"), workload(ADMITTED, pods_ready=True,
                                                                          conditions=up)) == (False, "WaitForRecovery")
    assert pods_ready_change(running, workload(FINISHED)) is None


def test_the_workload_name_is_kueues() -> None:
    digest = hashlib.sha1(b"Pod\n\nmy-pod\nuid-1").hexdigest()[:5]
    assert pod_sync.workload_name("my-pod", "uid-1") == f"pod-my-pod-{digest}"
    assert len(pod_sync.workload_name("x" * 300, "u")) == 253
    assert len(pod_sync.workload_name("x" * 300, "u", short=True)) == 63


def _raw(labels: dict | None = None, annotations: dict | None = None, **spec: object) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid",
                         "labels": {Q: "lq", **(labels or {})}, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "schedulingGates": [GATE], **spec}}


def test_the_workload_of_a_pod_has_one_pod_set_of_its_spec_owned_by_it() -> None:
    body = pod_sync.workload_for(ClusterState(), _raw(annotations={"provreq.kueue.x-k8s.io/x": "1", "other": "y"}),
                                 "pod-p-abcde")
    assert body["metadata"] == {
        "name": "pod-p-abcde", "namespace": "ns", "labels": {"kueue.x-k8s.io/job-uid": "pod-uid"},
        "finalizers": ["kueue.x-k8s.io/resource-in-use"], "annotations": {"provreq.kueue.x-k8s.io/x": "1"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True,
                             "blockOwnerDeletion": True}]}
    assert body["spec"] == {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], "schedulingGates": [GATE]}},
        "topologyRequest": {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}}]}


def test_the_workload_takes_the_pods_priority_class_and_maximum_execution_time() -> None:
    state = ClusterState()
    state.workload_priority_classes["gold"] = o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="gold"), value=50)
    body = pod_sync.workload_for(state, _raw({"kueue.x-k8s.io/priority-class": "gold",
                                              "kueue.x-k8s.io/max-exec-time-seconds": "60"}), "w")
    assert body["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                "name": "gold"}
    assert (body["spec"]["priority"], body["spec"]["maximumExecutionTimeSeconds"]) == (50, 60)
    with pytest.raises(WorkloadPriorityClassNotFound):
        pod_sync.workload_for(state, _raw({"kueue.x-k8s.io/priority-class": "silver"}), "w")
    body = pod_sync.workload_for(state, _raw({"kueue.x-k8s.io/max-exec-time-seconds": "0"}), "w")
    assert "maximumExecutionTimeSeconds" not in body["spec"], "Kueue's job framework reads it as none"


def test_starting_lifts_the_admission_gate_and_merges_what_the_admission_adds() -> None:
    p = ManagedPod(metadata=o.ObjectMeta(name="p", namespace="ns", resource_version="5", labels={"app": "a"}),
                   spec=ManagedPodSpec(scheduling_gates=[{"name": "other"}, GATE, {"name": "kueue.x-k8s.io/topology"}],
                                       node_selector={"zone": "z1"},
                                       tolerations=[o.Toleration(key="k", operator="Exists")]))
    info = PodSetInfo(labels={"kueue.x-k8s.io/podset": "main"}, node_selector={"pool": "a"},
                      tolerations=[o.Toleration(key="spot", operator="Exists", effect="NoSchedule")],
                      scheduling_gates=[{"name": "added"}])
    assert pod_sync.start_patch(p, info) == {
        "metadata": {"resourceVersion": "5", "labels": {"app": "a", "kueue.x-k8s.io/podset": "main"},
                     "annotations": None},
        "spec": {"nodeSelector": {"zone": "z1", "pool": "a"},
                 "tolerations": [{"key": "k", "operator": "Exists"},
                                 {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                 "schedulingGates": [{"name": "other"}]}}, "gates are never added to a Pod, only lifted"
    with pytest.raises(MergeConflict, match="conflict for key=zone"):
        pod_sync.start_patch(p, PodSetInfo(node_selector={"zone": "z2"}))


def test_finalizing_keeps_the_other_finalizers() -> None:
    p = ManagedPod(metadata=o.ObjectMeta(name="p", resource_version="5",
                                         finalizers=["a", "kueue.x-k8s.io/managed"]))
    assert pod_sync.finalize_patch(p) == {"metadata": {"resourceVersion": "5", "finalizers": ["a"]}}
    assert pod_sync.finalize_patch(pod()) == {"metadata": {"resourceVersion": "5", "finalizers": None}}


@pytest.mark.parametrize("p", [pod(gated=False, phase="Running"), pod(), pod(gated=False, phase="Succeeded")],
                         ids=["running", "gated", "ended"])
def test_a_pod_whose_workload_is_being_deleted_is_stopped_whatever_its_state(p: ManagedPod) -> None:
    """Kueue stops the Pod of a Workload being deleted (its ``resource-in-use`` finalizer holds it) before the
    finalizer goes, even one still gated or ended: ``TerminationTarget`` ``WorkloadDeleted``, then deleted."""
    got = next_step(p, workload(ADMITTED), managed=True, admission_shown=True, wl_deleting=True)
    assert (got.action, got.reason, got.message, got.release) == (STOP, "WorkloadDeleted", "Workload is deleted", False)
    assert next_step(pod(deleting=True), workload(), managed=True, admission_shown=True,
                     wl_deleting=True).action == FINALIZE, "a Pod already going only loses Kueue's finalizer"
    assert next_step(p, workload(FINISHED), managed=True, admission_shown=True,
                     wl_deleting=True).action != STOP, "a finished Workload: its Pod is finalized, not stopped"


def test_the_workload_of_a_pod_carries_kueues_resource_in_use_finalizer() -> None:
    body = pod_sync.workload_for(ClusterState(), _raw(), "pod-p-abcde")
    assert body["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def _multikueue_state(*, gate: bool = True, controller: str = "kueue.x-k8s.io/multikueue") -> ClusterState:
    state = ClusterState()
    state.admission_checks["mk"] = o.AdmissionCheck(metadata=o.ObjectMeta(name="mk"),
                                                    spec=o.AdmissionCheckSpec(controller_name=controller))
    state.config = ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"MultiKueue": gate}})
    return state


def _checked(name: str, check_state: str = "Ready") -> WorkloadInfo:
    wl = workload(ADMITTED)
    wl.check_states = {name: o.AdmissionCheckState(name=name, state=check_state)}
    return wl


def test_a_workload_with_a_multikueue_check_runs_on_a_worker() -> None:
    """Kueue's ``ShouldSkipLocalExecution``: the Workload has the state of a check of MultiKueue's controller,
    whatever that state, with the ``MultiKueue`` gate on; a check not found, or another controller's, is not."""
    state = _multikueue_state()
    assert pod_sync.runs_on_a_worker(state, _checked("mk"))
    assert pod_sync.runs_on_a_worker(state, _checked("mk", "Pending"))
    assert not pod_sync.runs_on_a_worker(state, _checked("gone")), "an AdmissionCheck not found"
    assert not pod_sync.runs_on_a_worker(state, workload(ADMITTED)) and not pod_sync.runs_on_a_worker(state, None)
    assert not pod_sync.runs_on_a_worker(_multikueue_state(controller="kueue.x-k8s.io/provisioning-request"),
                                         _checked("mk"))
    assert not pod_sync.runs_on_a_worker(_multikueue_state(gate=False), _checked("mk"))


def test_a_gated_pod_whose_workload_runs_on_a_worker_is_never_started_here() -> None:
    s = next_step(pod(), workload(ADMITTED), managed=True, admission_shown=True, remote=True)
    assert s.action == NOTHING
    running = next_step(pod(gated=False, phase="Running"), workload(PENDING), managed=True, admission_shown=True,
                        remote=True)
    assert running.action == STOP, "one running though its Workload is not admitted is still stopped"
