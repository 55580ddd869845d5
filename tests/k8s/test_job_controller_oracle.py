"""Kueue's batch/v1 Job controller tests as an oracle for the Job integration's pure decisions.

Each case names the table and case of Kueue's ``pkg/controller/jobs/job/job_controller_test.go`` it follows
(``TestPodsReady``, ``TestPodSets``, ``TestPodSetsInfo``, ``TestReconciler``) and checks, on plain data, the
function of kueue-es that makes that decision: what counts as the Job's pods being ready, the pod set built
for the Job, what starting it merges into its template (and the ``FailedToStart`` messages of a conflict),
what is done with a Workload the Job no longer matches, which of several Workloads the Job keeps, the
priority class a Workload follows, what a finished Job says, and why a running Job is stopped. No cluster,
no fake apiserver: the objects are built here and the decisions read from them.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import KEY, NAME, integration, job, template, workload

from connectors.k8s import job_sync, podsetinfo
from connectors.k8s.job_events import job_finished, stop_message
from connectors.k8s.job_priority import not_found_message
from connectors.k8s.pods_ready import pods_ready_transition
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED, PENDING, RESERVED, WorkloadInfo

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
WPC = "kueue.x-k8s.io/priority-class"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _status(j: o.Job, **status: Any) -> o.Job:
    return msgspec.structs.replace(j, status=msgspec.structs.replace(j.status, **status))


def _admit(info: WorkloadInfo, count: int, phase: str = ADMITTED, cq: str = "cq") -> None:
    """Put ``info`` in ``phase`` with an admission of ``count`` pods on flavor ``default``."""
    info.phase = phase
    info.admission = o.Admission(cluster_queue=cq, pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "default"}, resource_usage={"cpu": str(count)}, count=count)])
    info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    if phase == ADMITTED:
        info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)


# --- TestPodsReady ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("parallelism", "completions", "ready", "succeeded", "want"), [
    (3, 3, 0, 0, False),  # "parallelism = completions; no progress"
    (3, 3, 1, 1, False),  # "parallelism = completions; not enough progress"
    (3, 3, 3, 0, True),  # "parallelism = completions; all ready"
    (3, 3, 2, 1, True),  # "parallelism = completions; some ready, some succeeded"
    (3, 3, 0, 3, True),  # "parallelism = completions; all succeeded"
    (2, 3, 2, 0, True),  # "parallelism < completions; reaching parallelism is enough"
    (3, 2, 2, 0, True),  # "parallelism > completions; reaching completions is enough"
    (3, None, 2, 0, False),  # "parallelism specified only; not enough progress"
    (3, None, 3, 0, True),  # "parallelism specified only; all ready"
])
def test_pods_ready_counts_ready_and_succeeded_pods_against_the_pod_set(
        parallelism: int, completions: int | None, ready: int, succeeded: int, want: bool) -> None:
    """TestPodsReady: ready + succeeded pods reach ``min(parallelism, completions)``."""
    j = _status(job(parallelism=parallelism, completions=completions, suspend=False), ready=ready,
                succeeded=succeeded)
    count = min(parallelism, completions) if completions is not None else parallelism
    jobs, mirror, _ = integration(workload(count=count), j)
    info = mirror.state.workloads[KEY]
    _admit(info, count)
    assert jobs.pods_ready(j, info) is want


# --- TestPodSets --------------------------------------------------------------------------------------------


def _pod_set(annotations: dict[str, str] | None = None, job_annotations: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """The one pod set of the Workload made for a Job of parallelism 3 whose template carries ``annotations``
    (TopologyAwareScheduling on, as by default; with it off see ``test_job_start_tas.py``)."""
    raw = msgspec.to_builtins(job(parallelism=3, completions=None, annotations=job_annotations))
    if annotations:
        raw["spec"]["template"].setdefault("metadata", {})["annotations"] = annotations
    jobs, _, _ = integration()
    (ps,) = jobs.workload_for(raw, NAME)["spec"]["podSets"]
    return ps


def test_pod_set_without_partial_admission() -> None:
    """TestPodSets "no partial admission": one pod set ``main`` of the Job's parallelism, no minimum."""
    ps = _pod_set()
    assert (ps["name"], ps["count"], "minCount" in ps) == ("main", 3, False)


def test_pod_set_with_partial_admission() -> None:
    """TestPodSets "partial admission": ``job-min-parallelism`` is the pod set's minimum count."""
    assert _pod_set({}, {MIN_PARALLELISM: "2"})["minCount"] == 2


@pytest.mark.parametrize(("key", "field"), [(REQUIRED, "required"), (PREFERRED, "preferred")])
def test_pod_set_topology_request_from_the_templates_annotation(key: str, field: str) -> None:
    """TestPodSets "with required/preferred topology annotation": the level, and the completion index as the
    pods' rank."""
    req = _pod_set({key: "cloud.com/block"})["topologyRequest"]
    assert req[field] == "cloud.com/block" and req["podIndexLabel"] == COMPLETION_INDEX


def test_pod_set_slice_only_topology() -> None:
    """TestPodSets "with slice-only topology": both slice annotations make the slice request."""
    req = _pod_set({SLICE_REQUIRED: "cloud.com/block", SLICE_SIZE: "1"})["topologyRequest"]
    assert (req.get("podSetSliceRequiredTopology"), req.get("podSetSliceSize"), req["podIndexLabel"]) == (
        "cloud.com/block", 1, COMPLETION_INDEX)
    assert "required" not in req and "preferred" not in req


def test_pod_set_slice_size_alone_asks_for_no_slice() -> None:
    """TestPodSets "with slice-only topology – only podset slice size annotation": the rank only."""
    req = _pod_set({SLICE_SIZE: "1"})["topologyRequest"]
    assert req.get("podSetSliceSize") is None and req.get("podSetSliceRequiredTopology") is None
    assert req["podIndexLabel"] == COMPLETION_INDEX


# --- TestPodSetsInfo ----------------------------------------------------------------------------------------


def _template(node_selector: dict[str, str] | None = None, tolerations: list[o.Toleration] | None = None
              ) -> o.PodTemplateSpec:
    t = template()
    return msgspec.structs.replace(t, spec=msgspec.structs.replace(
        t.spec, node_selector=node_selector or {}, tolerations=tolerations or []))


def test_starting_appends_node_selectors_and_tolerations() -> None:
    """TestPodSetsInfo "append": the admission's node selector and tolerations are added to the Job's own."""
    orig = o.Toleration(key="orig-t-key", operator="Equal", value="orig-t-val", effect="NoSchedule")
    new = o.Toleration(key="new-t-key", operator="Equal", value="new-t-val", effect="NoSchedule")
    merged = podsetinfo.onto_template(_template({"orig-key": "orig-val"}, [orig]),
                                      podsetinfo.PodSetInfo(node_selector={"new-key": "new-val"},
                                                            tolerations=[new]))
    assert merged.node_selector == {"orig-key": "orig-val", "new-key": "new-val"}
    assert merged.tolerations == [orig, new]


def test_starting_refuses_to_change_a_node_selector_the_job_has() -> None:
    """TestPodSetsInfo "update": a key of the Job's node selector given another value is
    ErrInvalidPodSetUpdate."""
    with pytest.raises(podsetinfo.MergeConflict, match="^invalid admission check PodSetUpdate"):
        podsetinfo.onto_template(_template({"orig-key": "orig-val"}),
                                 podsetinfo.PodSetInfo(node_selector={"orig-key": "new-val"}))


# --- TestReconciler: starting -------------------------------------------------------------------------------


def _update(name: str, **fields: dict[str, str]) -> o.AdmissionCheckState:
    return o.AdmissionCheckState(name=name, state="Ready",
                                 pod_set_updates=[o.PodSetUpdate(name="main", **fields)])


def _checked(*checks: o.AdmissionCheckState, cq: str = "cq") -> tuple[Any, WorkloadInfo]:
    """The Job's Workload admitted on ClusterQueue ``cq`` with Ready ``checks``."""
    jobs, mirror, _ = integration(workload(count=4), job())
    info = mirror.state.workloads[KEY]
    _admit(info, 4, cq=cq)
    info.check_states = {c.name: c for c in checks}
    return jobs, info


@pytest.mark.parametrize(("field", "kueue_name"), [
    ("labels", "labels"), ("annotations", "annotations"), ("node_selector", "nodeSelector")])
def test_checks_conflicting_on_a_key_fail_the_start(field: str, kueue_name: str) -> None:
    """TestReconciler "when workload is admitted and PodSetUpdates conflict between admission checks on
    labels/annotations/nodeSelector, the workload is finished with failure": FailedToStart's message names the
    later check."""
    jobs, info = _checked(_update("check1", **{field: {"ac-key": "ac-value1"}}),
                          _update("check2", **{field: {"ac-key": "ac-value2"}}))
    with pytest.raises(podsetinfo.MergeConflict) as exc:
        podsetinfo.start_info(jobs.state, info, info.admission.pod_set_assignments[0])
    assert str(exc.value) == (f'in admission check "check2": invalid admission check PodSetUpdate: '
                              f"conflict for {kueue_name}: conflict for key=ac-key, value1=ac-value1, "
                              "value2=ac-value2")


def test_a_check_conflicting_with_the_jobs_node_selector_fails_the_start() -> None:
    """TestReconciler "when workload is admitted and PodSetUpdates conflict between admission check
    nodeSelector and current node selector, the workload is finished with failure": no check is named."""
    jobs, info = _checked(_update("check", node_selector={"provisioning": "on-demand"}))
    add = podsetinfo.start_info(jobs.state, info, info.admission.pod_set_assignments[0])
    with pytest.raises(podsetinfo.MergeConflict) as exc:
        podsetinfo.onto_template(_template({"provisioning": "spot"}), add)
    assert str(exc.value) == ("invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for "
                              "key=provisioning, value1=spot, value2=on-demand")


def test_checks_agreeing_on_a_key_are_merged() -> None:
    """TestReconciler "when workload is admitted the PodSetUpdates values matching for key": one value per
    key, each check's own keys added, and the pod-set and queue labels."""
    jobs, info = _checked(
        _update("check1", labels={"label-key1": "common-value"},
                annotations={"annotation-key1": "common-value", "annotation-key2": "only-in-check1"},
                node_selector={"node-selector-key1": "common-value"}),
        _update("check2", labels={"label-key1": "common-value"},
                annotations={"annotation-key1": "common-value"},
                node_selector={"node-selector-key1": "common-value", "node-selector-key2": "only-in-check2"}))
    add = podsetinfo.start_info(jobs.state, info, info.admission.pod_set_assignments[0])
    assert add.labels == {"label-key1": "common-value", "kueue.x-k8s.io/podset": "main",
                          "kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}
    assert {k: v for k, v in add.annotations.items() if k.startswith("annotation")} == {
        "annotation-key1": "common-value", "annotation-key2": "only-in-check1"}
    assert add.node_selector == {"node-selector-key1": "common-value", "node-selector-key2": "only-in-check2"}


def test_no_cluster_queue_label_when_the_name_is_no_label_value() -> None:
    """TestReconciler "Pod cluster queue label is not set when cluster queue name is too long"."""
    jobs, info = _checked(cq="cq" * 50)
    labels = podsetinfo.start_info(jobs.state, info, info.admission.pod_set_assignments[0]).labels
    assert labels == {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "lq"}


def test_no_queue_labels_without_assign_queue_labels_for_pods() -> None:
    """TestReconciler "Pod queue labels are not set when AssignQueueLabelsForPods is disabled"."""
    off = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "featureGates": {"AssignQueueLabelsForPods": False}}
    jobs, mirror, _ = integration(workload(count=4), job(), before=(
        ev.ConfigRecorded(time=1, writer="t", document=off),))
    info = mirror.state.workloads[KEY]
    _admit(info, 4)
    labels = podsetinfo.start_info(jobs.state, info, info.admission.pod_set_assignments[0]).labels
    assert labels == {"kueue.x-k8s.io/podset": "main"}


# --- TestReconciler: a Workload the Job no longer matches ---------------------------------------------------


def _decide(j: o.Job, wl: o.Workload, phase: str = PENDING, admitted_count: int | None = None,
            max_exec: int | None = None) -> str:
    jobs, mirror, _ = integration(wl, j)
    info = mirror.state.workloads[KEY]
    if phase != PENDING:
        _admit(info, admitted_count if admitted_count is not None else wl.spec.pod_sets[0].count, phase)
    return job_sync.out_of_step(mirror.state, j, mirror.workloads[KEY], info, running=not j.spec.suspend,
                                max_exec=max_exec)


def _tolerating(j: o.Job | o.Workload, key: str) -> Any:
    tol = o.Toleration(key=key, operator="Exists", effect="NoSchedule")
    if isinstance(j, o.Job):
        t = j.spec.template
        return msgspec.structs.replace(j, spec=msgspec.structs.replace(
            j.spec, template=msgspec.structs.replace(
                t, spec=msgspec.structs.replace(t.spec, tolerations=[tol]))))
    ps = j.spec.pod_sets[0]
    ps = msgspec.structs.replace(ps, template=msgspec.structs.replace(
        ps.template, spec=msgspec.structs.replace(ps.template.spec, tolerations=[tol])))
    return msgspec.structs.replace(j, spec=msgspec.structs.replace(j.spec, pod_sets=[ps]))


@pytest.mark.parametrize(("j", "wl", "phase", "admitted", "want"), [
    # "non-matching admitted workload is deleted": 10 pods asked, 5 admitted
    (job(parallelism=10, completions=None), workload(count=5), ADMITTED, None, job_sync.DELETE),
    # "non-matching non-admitted workload is updated"
    (job(parallelism=10, completions=None), workload(count=5), PENDING, None, job_sync.UPDATE),
    # "suspended job with partial admission and admitted workload is unsuspended": 8 of 10 admitted, still
    # the Job's
    (job(parallelism=10, completions=None, annotations={MIN_PARALLELISM: "5"}),
     workload(count=10, min_count=5), ADMITTED, 8, ""),
    # "unsuspended job with partial admission and non-matching admitted workload is suspended and workload is
    # deleted": running with 10 pods where 8 were admitted
    (job(parallelism=10, completions=None, suspend=False, annotations={MIN_PARALLELISM: "5"}),
     workload(count=10, min_count=5), ADMITTED, 8, job_sync.STOP),
    # "the workload is admitted, tolerations and node selector change": running, tolerations no longer
    # compared
    (_tolerating(job(suspend=False), "tolerationkey2"), _tolerating(workload(), "tolerationkey1"), ADMITTED,
     None, ""),
    # "the workload is admitted, job still suspended and tolerations change": quota held, not admitted
    (_tolerating(job(), "tolerationkey2"), _tolerating(workload(), "tolerationkey1"), RESERVED, None,
     job_sync.DELETE),
    # "the workload is not admitted, tolerations and node selector change"
    (_tolerating(job(), "tolerationkey2"), _tolerating(workload(), "tolerationkey1"), PENDING, None,
     job_sync.UPDATE),
], ids=["admitted-deleted", "pending-updated", "partial-admitted-matches", "partial-running-stopped",
        "admitted-tolerations-ignored", "reserved-tolerations-deleted", "pending-tolerations-updated"])
def test_what_is_done_with_a_workload_the_job_no_longer_matches(j: o.Job, wl: o.Workload, phase: str,
                                                                admitted: int | None, want: str) -> None:
    """TestReconciler's not-matching cases (Kueue's ``EquivalentToWorkload`` and ``ensureOneWorkload``)."""
    assert _decide(j, wl, phase, admitted) == want


def test_a_changed_maximum_execution_time_rewrites_the_pending_workload() -> None:
    """TestReconciler "the maximum execution time is updated in the workload": 5 s stored, the label says
    10."""
    wl = workload()
    wl = msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, maximum_execution_time_seconds=5))
    assert _decide(job(labels={MAX_EXEC: "10"}), wl, max_exec=10) == job_sync.UPDATE


def test_a_second_workload_not_matching_is_the_one_deleted() -> None:
    """TestReconciler "checking a second non-matching workload is deleted": the admitted one of 5 pods matches
    the running Job of parallelism 5 and is kept; the other (10 pods, at least 5) goes."""
    j = job(parallelism=5, completions=None, suspend=False)
    first = workload(count=5)
    second = workload(count=10, min_count=5)
    second = msgspec.structs.replace(second, metadata=msgspec.structs.replace(
        second.metadata, name="second-workload", uid="second-uid"))
    first = msgspec.structs.replace(first, metadata=msgspec.structs.replace(
        first.metadata, name="first-workload"))
    jobs, mirror, _ = integration(first, second, j)
    _admit(mirror.state.workloads["ns/first-workload"], 5)
    owned = [(mirror.workloads[k], mirror.state.workloads[k])
             for k in ("ns/second-workload", "ns/first-workload")]
    keep, extras = job_sync.one_workload(mirror.state, j, owned, None)
    assert keep is not None and keep[0].metadata.name == "first-workload"
    assert [w.metadata.name for w in extras] == ["second-workload"]


# --- TestReconciler: the priority class ---------------------------------------------------------------------


def _classes() -> tuple[o.WorkloadPriorityClass, o.WorkloadPriorityClass, o.PriorityClass]:
    return (o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="test-wpc"), value=100),
            o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="test-wpc-high"), value=200),
            o.PriorityClass(metadata=o.ObjectMeta(name="test-pc"), value=200))


def _classed(kind: str, name: str, priority: int) -> o.Workload:
    wl = workload()
    group = "kueue.x-k8s.io" if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
    return msgspec.structs.replace(wl, spec=msgspec.structs.replace(
        wl.spec, priority_class_ref=o.PriorityClassRef(group=group, kind=kind, name=name), priority=priority))


@pytest.mark.parametrize(("labels", "wl", "want"), [
    # "the workload is updated when priority class has changed for suspended job"
    ({WPC: "test-wpc-high"}, _classed("WorkloadPriorityClass", "test-wpc", 100),
     ({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "test-wpc-high"}, 200)),
    # "a Pod PriorityClass-backed workload is left alone and reports nothing"
    ({WPC: "missing-wpc"}, _classed("PriorityClass", "pod-high", 2000), None),
    # "shouldn't update workload when priority class no changes" (a pod PriorityClass, no label)
    ({}, _classed("PriorityClass", "test-pc", 200), None),
], ids=["wpc-changed", "pod-class-left-alone", "no-change"])
def test_the_priority_class_a_workload_follows(labels: dict[str, str], wl: o.Workload, want: Any) -> None:
    j = job(labels=labels)
    jobs, mirror, _ = integration(*_classes(), wl, j)
    assert job_sync.priority_to_set(mirror.state, j, mirror.workloads[KEY],
                                    mirror.state.workloads[KEY]) == want


def test_a_missing_workload_priority_class_is_named_in_the_warning() -> None:
    """TestReconciler "a warning names the WorkloadPriorityClass that does not exist"."""
    assert not_found_message("missing-wpc") == 'WorkloadPriorityClass "missing-wpc" not found'


# --- TestReconciler: finished, stopped ----------------------------------------------------------------------


@pytest.mark.parametrize(("cond", "want"), [
    (o.Condition(type="Complete", status="True", message="Job finished successfully"),
     ("Succeeded", "Job finished successfully")),
    (o.Condition(type="Failed", status="True", message="BackoffLimitExceeded"),
     ("Failed", "BackoffLimitExceeded")),
    (o.Condition(type="Complete", status="False"), None),
])
def test_a_finished_job_finishes_its_workload(cond: o.Condition, want: tuple[str, str] | None) -> None:
    """TestReconciler "when job completes, workload is marked as finished": Finished=True, Succeeded, the
    Job's condition message; Failed likewise."""
    assert job_finished(_status(job(), conditions=[cond])) == want


@pytest.mark.parametrize(("reason", "message"), [
    ("Deactivated", "The workload is deactivated"),
    ("PodsReadyTimeout", "Exceeded the PodsReady timeout"),
    ("AdmissionCheck", "At least one admission check is false"),
    ("ClusterQueueStopped", "The ClusterQueue is stopped"),
    ("LocalQueueStopped", "The LocalQueue is stopped"),
    ("Preempted", "Preempted"),
])
def test_an_evicted_job_is_stopped_with_the_evictions_message(reason: str, message: str) -> None:
    """TestReconciler "when workload is evicted due to ..., job gets suspended": Stopped with Evicted's
    message."""
    info = WorkloadInfo(key=KEY, uid="wl-uid", namespace="ns", name=NAME, queue_name="lq", created=0,
                        priority=0, priority_class="", pod_sets=())
    info.set_condition("Evicted", "True", reason, message, 5)
    assert stop_message(info) == message
    assert stop_message(None) == "Missing Workload; unable to restore pod templates"


# --- TestReconciler: PodsReady under waitForPodsReady -------------------------------------------------------


def _ready_case(cond: tuple[str, str] | None, phase: str = ADMITTED, running: bool = True,
                ready: bool = False) -> tuple[bool, str] | None:
    jobs, mirror, _ = integration(workload(count=10),
                                  job(parallelism=10, completions=None, suspend=not running))
    info = mirror.state.workloads[KEY]
    if phase != PENDING:
        _admit(info, 10, phase)
    if cond is not None:
        info.set_condition("PodsReady", cond[0], cond[1], "m", 5)
        info.pods_ready = cond[0] == "True"
    return pods_ready_transition(info, running=running, ready=ready)


@pytest.mark.parametrize(("cond", "phase", "ready", "want"), [
    # "PodsReady is set to False before Workload is Admitted"
    (None, RESERVED, False, (False, "WaitForStart")),
    # "PodsReady is set to False after Workload is Admitted but not all Pods reached readiness"
    (None, ADMITTED, False, (False, "WaitForStart")),
    # "... some Pods became ready but not all Pods reached readiness" (already WaitForStart: nothing new)
    (("False", "WaitForStart"), ADMITTED, False, None),
    # "PodsReady is set to True after Workload is Admitted and all Pods reached readiness"
    (("False", "WaitForStart"), ADMITTED, True, (True, "Started")),
    # "... without previous PodsReady condition"
    (None, ADMITTED, True, (True, "Started")),
    # "PodsReady is set to False after Workload is running and one pod failed"
    (("True", "Started"), ADMITTED, False, (False, "WaitForRecovery")),
    # "PodsReady continues to be False after a pod failed and workload is still recovering"
    (("False", "WaitForRecovery"), ADMITTED, False, None),
    # "PodsReady is set to True after failing pod recovered"
    (("False", "WaitForRecovery"), ADMITTED, True, (True, "Recovered")),
], ids=["reserved", "admitted-not-ready", "still-not-ready", "ready", "ready-first", "lost", "recovering",
        "recovered"])
def test_pods_ready_condition_of_a_running_job(cond: tuple[str, str] | None, phase: str, ready: bool,
                                               want: tuple[bool, str] | None) -> None:
    """TestReconciler's PodsReady cases (Kueue's ``generatePodsReadyCondition``), for a running Job."""
    assert _ready_case(cond, phase, running=phase == ADMITTED, ready=ready) == want


# --- TestReconciler's step 4 (reclaimable pods) under the ReclaimablePods gate ------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate", "written"), [(False, "PodsReadyChanged"), (True, "ReclaimablePodsChanged")],
                         ids=["off", "on"])
async def test_reclaimable_pods_are_counted_only_with_the_gate_on(gate: bool, written: str) -> None:
    """Kueue's ``ReconcileGenericJob`` counts a job's reclaimable pods only under its ``ReclaimablePods`` gate
    (``implementsReclaimable && features.Enabled(features.ReclaimablePods)``): with it off nothing is written
    to ``status.reclaimablePods`` and the pass goes on (here: Kueue's first PodsReady write). With it on (the
    positive control) the same Job's succeeded pods are counted, the pass's one write."""
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "featureGates": {"ReclaimablePods": gate}}
    jobs, _, appended = integration(workload(), job(succeeded=2), before=(
        ev.ConfigRecorded(time=1, writer="t", document=config),))
    await jobs.reconcile("ns/train")
    assert [type(e).__name__ for e in appended] == [written]
