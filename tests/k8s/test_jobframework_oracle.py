"""Kueue's jobframework unit tests as the oracle (session 47):
``pkg/controller/jobframework/validation_test.go`` (``TestValidateImmutablePodSpec``,
``TestValidateJobOnUpdate``), ``workload_names.go`` through ``reconciler_test.go``
(``TestReconcileGenericJob``'s Workload names) — each case here names Kueue's.

Kueue's validation tests compare only each error's type and field (``cmpopts.IgnoreFields(field.Error{},
"BadValue", "Detail")``), so these do too: the field path and the ``Invalid value``/``Forbidden`` word."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import KEY, UID, integration
from fixtures.jobs import job as fixture_job
from fixtures.jobs import workload as fixture_workload

from connectors.k8s import (
    job_sync,
    job_validation,
    kubeflow,
    kubeflow_webhook,
    podsetinfo,
    ray_webhook,
    spark_webhook,
)
from connectors.k8s.workload_names import owner_workload_name
from connectors.k8s.workload_slices import slice_name
from events import objects as o
from projections.workloads import ADMITTED, RESERVED, WorkloadInfo

ELASTIC = "kueue.x-k8s.io/elastic-job"
QUEUE = "kueue.x-k8s.io/queue-name"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def _fields(errors: list[str]) -> list[tuple[str, str]]:
    """(field path, error type) of each error, as Kueue's tests compare them."""
    out = []
    for error in errors:
        path, kind = error.split(": ")[:2]
        out.append((path, kind))
    return out


# --- TestValidateImmutablePodSpec (ValidateImmutablePodGroupPodSpec) ----------------------------------------

def _cpu(value: str | None) -> dict[str, Any]:
    return {"resources": {"requests": {} if value is None else {"cpu": value}}}


TOLERATION = {"key": "example.com/gpu", "value": "present", "operator": "Equal"}
POD_SPEC_CASES = [
    ("add container", {}, {"containers": [{"image": "busybox"}]}, ["spec.containers"]),
    ("remove container", {"containers": [{"image": "busybox"}]}, {}, ["spec.containers"]),
    ("change image on container", {"containers": [{"image": "other"}]},
     {"containers": [{"image": "busybox"}]}, []),
    ("change request on container", {"containers": [_cpu("100m")]}, {"containers": [_cpu("200m")]},
     ["spec.containers[0].resources.requests"]),
    ("add init container", {}, {"initContainers": [{"image": "busybox"}]}, ["spec.initContainers"]),
    ("remove init container", {"initContainers": [{"image": "busybox"}]}, {}, ["spec.initContainers"]),
    ("change request on init container", {"initContainers": [_cpu("100m")]}, {"initContainers": [_cpu(None)]},
     ["spec.initContainers[0].resources.requests"]),
    ("change nodeTemplate", {}, {"nodeSelector": {"key": "value"}}, ["spec.nodeSelector"]),
    ("add toleration", {}, {"tolerations": [TOLERATION]}, ["spec.tolerations"]),
    ("change toleration", {"tolerations": [TOLERATION]}, {"tolerations": [{**TOLERATION, "value": "new"}]},
     ["spec.tolerations"]),
    ("delete toleration", {"tolerations": [TOLERATION]}, {}, ["spec.tolerations"]),
    ("change runtimeClassName", {"runtimeClassName": "new"}, {}, ["spec.runtimeClassName"]),
    ("change priority", {}, {"priority": 1}, ["spec.priority"]),
]


@pytest.mark.parametrize(("old", "new", "paths"), [c[1:] for c in POD_SPEC_CASES],
                         ids=[c[0] for c in POD_SPEC_CASES])
def test_validate_immutable_pod_spec(old: dict, new: dict, paths: list[str]) -> None:
    errors = job_validation.pod_group_spec_errors(old, new, "spec")
    assert _fields(errors) == [(p, "Invalid value") for p in paths]


# --- TestValidateJobOnUpdate (ValidateJobOnUpdate) ----------------------------------------------------------

def _job(queue: str | None = None, *, suspend: bool = True, annotations: dict[str, str] | None = None
         ) -> dict[str, Any]:
    """Kueue's ``testingjob.MakeJob("test-job", "ns1")`` (suspended, parallelism 1), with its ``Queue`` (""
    sets the label empty) and annotations."""
    labels = {} if queue is None else {QUEUE: queue}
    meta: dict[str, Any] = {"name": "test-job", "namespace": "ns1", "labels": labels,
                            "annotations": annotations or {}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"suspend": suspend, "parallelism": 1, "completions": 1,
                     "template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}}}


QUEUE_PATH = f"metadata.labels[{QUEUE}]"
ELASTIC_ON = {"ElasticJobsViaWorkloadSlices": True}
JOB_UPDATE_CASES = [
    ("local queue cannot be changed if job is not suspended",
     _job("lq1", suspend=False), _job("lq2", suspend=False), False, {}, [(QUEUE_PATH, "Invalid value")]),
    ("local queue can be changed", _job("lq1"), _job("lq2"), True, {}, []),
    ("local queue can be changed from default", _job("default"), _job("lq2"), True, {}, []),
    ("local queue cannot be removed if default queue exists and feature is enabled",
     _job("lq1"), _job(""), True, {}, [(QUEUE_PATH, "Invalid value")]),
    ("local queue can be removed if default queue does not exists and feature is enabled",
     _job("lq1"), _job(""), False, {}, []),
    ("elastic job enabled annotation cannot be removed on update",
     _job(annotations={ELASTIC: "true"}), _job(), False, ELASTIC_ON,
     [(f"metadata.annotations[{ELASTIC}]", "Invalid value")]),
    ("elastic job enabled annotation cannot be added on update",
     _job(), _job(annotations={ELASTIC: "true"}), False, ELASTIC_ON,
     [(f"metadata.annotations[{ELASTIC}]", "Invalid value")]),
]


@pytest.mark.parametrize(("old", "new", "default_queue", "gates", "want"), [c[1:] for c in JOB_UPDATE_CASES],
                         ids=[c[0] for c in JOB_UPDATE_CASES])
def test_validate_job_on_update(old: dict, new: dict, default_queue: bool, gates: dict, want: list) -> None:
    errors = job_validation.generic_update_errors(old, new, gates, default_queue=default_queue)
    assert _fields(errors) == want


def test_elastic_annotation_change_shows_the_new_setting_as_kueue_does() -> None:
    """``validatedUpdateForEnabledWorkloadSlice``: ``field.Invalid(annotations[elastic-job], newEnabled,
    FieldImmutableErrorMsg)`` — the value shown is whether the new Job is elastic (the path
    ``metadata.annotations`` since Kueue's #11342: its newer validation_test.go expects it there)."""
    errors = job_validation.generic_update_errors(_job(annotations={ELASTIC: "true"}), _job(), ELASTIC_ON)
    assert errors == [f"metadata.annotations[{ELASTIC}]: Invalid value: false: field is immutable"]


# --- TestReconcileGenericJob: the Workload's name (workload_names.go) ---------------------------------------

@pytest.mark.parametrize(("elastic", "want"), [
    pytest.param(False, "job-test-job-ce737",
                 id="handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = true)"),
    pytest.param(True, "job-test-job-3991b",
                 id="handle job with no workload (elasticJobsViaWorkloadSlicesEnabled = true and elastic job "
                    "annotation)"),
])
def test_workload_name_of_job_test_job(elastic: bool, want: str) -> None:
    """A Job ``test-job`` (uid ``test-job``): ``GetWorkloadNameForOwnerWithGVK``; elastic, its slice's name is
    hashed over the Job's generation too (0 in the test's fake client)."""
    name = (slice_name("Job", "batch", "test-job", "test-job", 0) if elastic
            else owner_workload_name("Job", "batch", "test-job", "test-job"))
    assert name == want


# --- TestEquivalentToWorkload (EquivalentToWorkload) --------------------------------------------------------

def _admitted(info: WorkloadInfo, count: int | None) -> None:
    """Kueue's ``ReserveQuotaAt(MakeAdmission("cq").PodSets({Name: main, Count: count}))`` then
    ``AdmittedAt(true)``."""
    info.phase = ADMITTED
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", count=count)])
    info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)


def _equivalent(j: o.Job, wl: o.Workload, *, admitted: int | None | bool = False, max_exec: int | None = None
                ) -> bool:
    _, mirror, _ = integration(wl, j)
    info = mirror.state.workloads[KEY]
    if admitted is not False:
        _admitted(info, None if admitted is True else admitted)
    return job_sync.equivalent(mirror.state, j, mirror.workloads[KEY], info, max_exec, generated=True)


def _partial_job(suspend: bool) -> o.Job:
    """``partiallyAdmittedJob``: parallelism 2, ``job-min-parallelism: "1"``."""
    return fixture_job(parallelism=2, completions=None, suspend=suspend, annotations={MIN_PARALLELISM: "1"})


@pytest.mark.parametrize(("j", "wl", "admitted", "want"), [
    pytest.param(fixture_job(parallelism=1, completions=None), fixture_workload(count=1), False, True,
                 id="matching controller and pod sets"),
    pytest.param(fixture_job(parallelism=1, completions=None), fixture_workload(count=2), False, False,
                 id="matching controller but different pod sets"),
    pytest.param(fixture_job(parallelism=1, completions=None, suspend=False), fixture_workload(count=1), True,
                 True, id="admitted workload with matching running pod sets"),
    pytest.param(fixture_job(parallelism=1, completions=None), fixture_workload(count=2), True, False,
                 id="admitted workload with different pod sets and a suspended job"),
    pytest.param(_partial_job(True), fixture_workload(count=2, min_count=1), 1, True,
                 id="suspended job falls back to spec comparison for an admitted workload"),
    pytest.param(_partial_job(False), fixture_workload(count=2, min_count=1), 1, False,
                 id="running job does not fall back to spec comparison for an admitted workload"),
])
def test_equivalent_to_workload(j: o.Job, wl: o.Workload, admitted: Any, want: bool) -> None:
    assert _equivalent(j, wl, admitted=admitted) is want


def test_equivalent_to_workload_different_maximum_execution_time() -> None:
    """TestEquivalentToWorkload "matching controller but different maximum execution time": the Job's
    ``max-exec-time-seconds: "60"`` against the Workload's 30."""
    wl = fixture_workload(count=1)
    wl = msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, maximum_execution_time_seconds=30))
    assert _equivalent(fixture_job(parallelism=1, completions=None), wl, max_exec=60) is False


# --- TestFindMatchingWorkloads (FindMatchingWorkloads) ------------------------------------------------------

JOB_REF = {"api_version": "batch/v1", "kind": "Job", "name": "train"}
CONFIGMAP_REF = {"api_version": "v1", "kind": "ConfigMap", "uid": "some-config-uid"}


def _owned_by(name: str, count: int, *refs: dict[str, Any]) -> o.Workload:
    """Workload ``name`` (one pod set ``main`` of ``count`` pods) with the owner references ``refs``."""
    wl = fixture_workload(count=count)
    owners = [o.OwnerReference(**{"name": "some-config", "controller": False, **r}) for r in refs]
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name=name, uid=f"{name}-uid", owner_references=owners))


PLAIN = {**JOB_REF, "uid": UID}
MINE = {**JOB_REF, "uid": UID, "controller": True}
FOREIGN_CONTROLLER = {**CONFIGMAP_REF, "controller": True}
FIND_CASES = [
    ("workload with only a non-controller owner reference is ignored",
     [_owned_by("foreign-plain", 1, PLAIN)], None, []),
    ("workload controlled by another object is ignored",
     [_owned_by("foreign-controlled", 1, PLAIN, FOREIGN_CONTROLLER)], None, []),
    ("workload controlled by a same-named object of a different kind is ignored",
     [_owned_by("foreign-same-name", 1, PLAIN, {**FOREIGN_CONTROLLER, "name": "train"})], None, []),
    ("foreign workload with different pod sets is neither matched nor deleted",
     [_owned_by("foreign-diff-pods", 2, PLAIN, FOREIGN_CONTROLLER)], None, []),
    ("workload controlled by the job with a stale UID is collected for deletion",
     [_owned_by("stale-uid", 1, {**MINE, "uid": "old-uid"})], None, ["stale-uid"]),
    ("equivalent workload controlled by the job is matched", [_owned_by("owned", 1, MINE)], "owned", []),
    ("foreign workloads are ignored while the owned workload is matched",
     [_owned_by("foreign-plain", 1, PLAIN), _owned_by("foreign-controlled", 1, PLAIN, FOREIGN_CONTROLLER),
      _owned_by("owned", 1, MINE)], "owned", []),
]


@pytest.mark.parametrize(("workloads", "match", "deleted"), [c[1:] for c in FIND_CASES],
                         ids=[c[0] for c in FIND_CASES])
def test_find_matching_workloads(workloads: list[o.Workload], match: str | None, deleted: list[str]) -> None:
    """The Workloads a suspended Job ``train`` of one pod controls (the mirror's ``owned_by``: a batch/v1
    Job's controller reference), the one it keeps and those it deletes."""
    j = fixture_job(parallelism=1, completions=None)
    jobs, mirror, _ = integration(*workloads, j)
    keep, extras = job_sync.one_workload(mirror.state, j, jobs._owned(j.key), None)
    assert (keep[0].metadata.name if keep else None,
            sorted(w.metadata.name for w in extras)) == (match, deleted)


def test_an_owned_workload_with_other_pod_sets_is_brought_in_step_not_kept_as_is() -> None:
    """TestFindMatchingWorkloads "owned workload with different pod sets is collected for deletion": Kueue
    lists it to delete, then (``ensureOneWorkload``) rewrites the first of those in place for a suspended Job
    whose Workload holds no quota; kueue-es keeps it to bring in step — the same write."""
    j = fixture_job(parallelism=1, completions=None)
    jobs, mirror, _ = integration(_owned_by("owned-diff-pods", 2, MINE), j)
    keep, extras = job_sync.one_workload(mirror.state, j, jobs._owned(j.key), None)
    assert keep is not None and keep[0].metadata.name == "owned-diff-pods" and extras == []
    assert job_sync.out_of_step(mirror.state, j, keep[0], keep[1], running=False,
                                max_exec=None) == job_sync.UPDATE


# --- validateCreateForMaxExecTime (validation.go) -----------------------------------------------------------

MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


@pytest.mark.parametrize(("value", "message"), [
    # strconv.Atoi takes int64's minimum; Kueue then finds it not greater than 0
    ("-9223372036854775808",
     f"metadata.labels[{MAX_EXEC}]: Invalid value: -9223372036854775808: should be greater than 0"),
    ("-9223372036854775809", f'metadata.labels[{MAX_EXEC}]: Invalid value: "-9223372036854775809": '
                             'strconv.Atoi: parsing "-9223372036854775809": value out of range'),
    ("9223372036854775808", f'metadata.labels[{MAX_EXEC}]: Invalid value: "9223372036854775808": '
                            'strconv.Atoi: parsing "9223372036854775808": value out of range'),
    ("9223372036854775807", None),
], ids=["int64 minimum", "below int64", "above int64", "int64 maximum"])
def test_max_exec_time_at_the_int64_bounds(value: str, message: str | None) -> None:
    """``validateCreateForMaxExecTime``: ``strconv.Atoi`` (64-bit), then ``v <= 0`` -> "should be greater than
    0" with the parsed value."""
    j = _job()
    j["metadata"]["labels"] = {MAX_EXEC: value}
    errors = job_validation.create_errors(j, {})
    assert errors == ([] if message is None else [message])


# --- validateCreateForPrebuiltWorkload (validation.go): the kinds a prebuilt Workload is supported for ------

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def _object(api_version: str, kind: str, spec: dict[str, Any], *, prebuilt: bool = True) -> dict[str, Any]:
    labels = {QUEUE: "lq", **({PREBUILT: "wl-1"} if prebuilt else {})}
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "j", "namespace": "ns", "labels": labels}, "spec": spec}


def _jaxjob(prebuilt: bool = True) -> dict[str, Any]:
    return _object("kubeflow.org/v1", "JAXJob", {"runPolicy": {"suspend": True}, "jaxReplicaSpecs": {}},
                   prebuilt=prebuilt)


def _tfjob() -> dict[str, Any]:
    return _object("kubeflow.org/v1", "TFJob", {"runPolicy": {"suspend": True}, "tfReplicaSpecs": {}})


def _spark(prebuilt: bool = True) -> dict[str, Any]:
    return _object("sparkoperator.k8s.io/v1beta2", "SparkApplication", {"suspend": True, "mode": "cluster"},
                   prebuilt=prebuilt)


def _rayservice(prebuilt: bool = True) -> dict[str, Any]:
    return _object("ray.io/v1", "RayService", {"rayClusterConfig": {"suspend": True, "headGroupSpec": {
        "template": {"spec": {"containers": [{"name": "head"}]}}}}}, prebuilt=prebuilt)


def _unsupported(gvk: str) -> str:
    return f'metadata.labels[{PREBUILT}]: Forbidden: Is not supported for "{gvk}"'


def _kubeflow_create(job: dict) -> list[str]:
    training = kubeflow.JAXJOB if job["kind"] == "JAXJob" else kubeflow.TFJOB
    return kubeflow_webhook.create_errors(training, job, {})


@pytest.mark.parametrize(("create", "obj", "want"), [
    pytest.param(_kubeflow_create, _jaxjob(), [_unsupported("kubeflow.org/v1, Kind=JAXJob")], id="JAXJob"),
    pytest.param(_kubeflow_create, _tfjob(), [], id="TFJob (supported)"),
    pytest.param(lambda o: [e for e in spark_webhook.create_errors(o, {}) if PREBUILT in e], _spark(),
                 [_unsupported("sparkoperator.k8s.io/v1beta2, Kind=SparkApplication")],
                 id="SparkApplication"),
    pytest.param(lambda o: [e for e in ray_webhook.rayservice_create_errors(o, {}) if PREBUILT in e],
                 _rayservice(), [_unsupported("ray.io/v1, Kind=RayService")], id="RayService"),
])
def test_a_prebuilt_workload_is_refused_for_a_kind_kueue_does_not_support(create: Any, obj: dict,
                                                                           want: list[str]) -> None:
    """``validateCreateForPrebuiltWorkload``: a ``prebuilt-workload-name`` label on a kind outside
    ``supportedPrebuiltWlJobGVKs`` (batch Job, JobSet, TF/Paddle/PyTorch/XGBoost jobs, TrainJob, MPIJob,
    RayJob, Pod, RayCluster, AppWrapper) is ``Forbidden: Is not supported for "<group/version, Kind=kind>"`` —
    the kinds whose webhooks run ``ValidateJobOnCreate`` (JAXJob through ``BaseWebhook``, SparkApplication,
    RayService)."""
    assert create(obj) == want


def test_a_suspended_update_checks_the_prebuilt_kind_as_on_create() -> None:
    """``validateUpdateForPrebuiltWorkload``: suspended, the new object's label is checked as on create."""
    errors = kubeflow_webhook.update_errors(kubeflow.JAXJOB, _jaxjob(prebuilt=False), _jaxjob(), {})
    assert _unsupported("kubeflow.org/v1, Kind=JAXJob") in errors


# --- TestReconcileGenericJob: what starting the Job adds to its pod set (getPodSetsInfoFromStatus) ----------

def test_multikueue_worker_pod_label_is_propagated_to_the_pod_template() -> None:
    """TestReconcileGenericJob "MultiKueue worker pod label is propagated to PodTemplate if workload has
    Multikueue origin label": the Workload (labelled ``kueue.x-k8s.io/multikueue-origin``, admitted to
    ``default-cq`` from LocalQueue ``test-lq``) starts its Job with the pod set's labels
    ``cluster-queue-name``, ``local-queue-name``, ``multikueue-worker-workload-pod: "true"`` and ``podset``,
    and the annotation ``kueue.x-k8s.io/workload`` (TopologyAwareScheduling on, as by default)."""
    wl = fixture_workload(count=1)
    wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, labels={"kueue.x-k8s.io/multikueue-origin": "origin"}), spec=msgspec.structs.replace(
        wl.spec, queue_name="test-lq"))
    _, mirror, _ = integration(wl)
    info = mirror.state.workloads[KEY]
    _admitted(info, 1)
    info.admission = msgspec.structs.replace(info.admission, cluster_queue="default-cq")
    got = podsetinfo.start_info(mirror.state, info, info.admission.pod_set_assignments[0])
    assert got.labels == {"kueue.x-k8s.io/cluster-queue-name": "default-cq",
                          "kueue.x-k8s.io/local-queue-name": "test-lq",
                          "kueue.x-k8s.io/multikueue-worker-workload-pod": "true",
                          "kueue.x-k8s.io/podset": "main"}
    assert got.annotations == {"kueue.x-k8s.io/workload": wl.metadata.name}
    assert (got.node_selector, got.tolerations, got.scheduling_gates) == ({}, [], [])


# --- TestReconcileGenericJob: the priority class of a Workload holding quota (UpdateWorkloadPriority) -------

WPC = "kueue.x-k8s.io/priority-class"


def _reserved_priority_change(labels: dict[str, str], pod_class: str | None) -> Any:
    """``priority_to_set`` for a Job with ``labels`` and pods naming ``pod_class``, whose Workload holds quota
    (``ReserveQuotaAt``, not admitted) under WorkloadPriorityClass ``high`` (100)."""
    j = fixture_job(parallelism=1, completions=None, labels=labels)
    if pod_class is not None:
        j = msgspec.structs.replace(j, spec=msgspec.structs.replace(j.spec, template=msgspec.structs.replace(
            j.spec.template,
            spec=msgspec.structs.replace(j.spec.template.spec, priority_class_name=pod_class))))
    wl = fixture_workload(count=1)
    wl = msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, priority=100, priority_class_ref=(
        o.PriorityClassRef(group="kueue.x-k8s.io", kind="WorkloadPriorityClass", name="high"))))
    classes = (o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="high"), value=100),
               o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="low"), value=10),
               o.PriorityClass(metadata=o.ObjectMeta(name="podpc"), value=50))
    _, mirror, _ = integration(*classes, wl, j)
    info = mirror.state.workloads[KEY]
    info.phase = RESERVED
    info.admission = o.Admission(cluster_queue="cq")
    info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    return job_sync.priority_to_set(mirror.state, j, mirror.workloads[KEY], info)


@pytest.mark.parametrize(("labels", "pod_class", "want"), [
    pytest.param({}, "podpc", None, id="quota-reserved workload is not moved onto a pod priority class"),
    pytest.param({}, None, None, id="quota-reserved workload keeps its priority class when the owner's stops "
                                    "resolving"),
    pytest.param({WPC: "low"}, None,
                 ({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"}, 10),
                 id="quota-reserved workload follows the owner to another workload priority class"),
])
def test_the_priority_class_of_a_workload_holding_quota(labels: dict[str, str], pod_class: str | None,
                                                         want: Any) -> None:
    """The class's group and kind are frozen while the Workload holds quota (a removal too); a rename within
    WorkloadPriorityClasses is written."""
    assert _reserved_priority_change(labels, pod_class) == want
