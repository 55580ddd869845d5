"""A batch/v1 Job that names its prebuilt Workload (``kueue.x-k8s.io/prebuilt-workload-name``), as Kueue's Job
reconciler treats it: which key names it under ``WorkloadIdentifierAnnotations`` (beta, on) and with it off, the
Workload adopted rather than one created, the Job waiting while it is missing, controlled by another object or
out of sync (finished ``OutOfSync``, with no ``FinishedWorkload`` Event), and, once adopted and equivalent, the
Workload used as a generated one is. No cluster needed: the integration runs against a mirror, its writes
recorded by a fake client."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import RecordingClient, integration

from connectors.k8s import job_sync, prebuilt
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import MIN_PARALLELISM
from connectors.k8s.workload_body import compared_max_execution_seconds
from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, FINISHED

KEY = prebuilt.KEY
UID = "job-uid"
GATE_OFF = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"WorkloadIdentifierAnnotations": False}}
PARTIAL_OFF = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
               "featureGates": {"PartialAdmission": False}}
CPU = o.ResourceRequirements(requests={"cpu": "1"})
SPOT = o.Toleration(key="spot", operator="Exists", effect="NoSchedule")


def _job(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, *, suspend: bool = True,
         parallelism: int = 2, succeeded: int = 0, cpu: str = "1", complete: bool = False) -> o.Job:
    template = o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(
        name="c", resources=o.ResourceRequirements(requests={"cpu": cpu}))]))
    conditions = [o.Condition(type="Complete", status="True")] if complete else []
    return o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid=UID, resource_version="7",
                                       labels={"kueue.x-k8s.io/queue-name": "lq", **(labels or {})},
                                       annotations=annotations or {}),
                 spec=o.JobSpec(suspend=suspend, parallelism=parallelism, completions=parallelism, template=template),
                 status=o.JobStatus(succeeded=succeeded, active=0 if suspend else parallelism - succeeded,
                                    conditions=conditions))


def _workload(name: str = "pre", *, owners: list[o.OwnerReference] | None = None, count: int = 2,
              min_count: int | None = None, cpu: str = "1000m", tolerations: list[o.Toleration] | None = None,
              max_exec: int | None = None) -> o.Workload:
    """A Workload ``ns/<name>`` as a user prebuilds it: one pod set of ``count`` pods asking for ``cpu`` each."""
    template = o.PodTemplateSpec(spec=o.PodSpec(tolerations=tolerations or [], containers=[o.Container(
        name="c", resources=o.ResourceRequirements(requests={"cpu": cpu}))]))
    return o.Workload(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"{name}-uid", resource_version="3",
                                            owner_references=owners or []),
                      spec=o.WorkloadSpec(queue_name="lq", maximum_execution_time_seconds=max_exec, pod_sets=[
                          o.PodSet(name="main", count=count, min_count=min_count, template=template)]))


def _owned(name: str = "pre", **kw: Any) -> o.Workload:
    ref = o.OwnerReference(api_version="batch/v1", kind="Job", name="train", uid=UID, controller=True)
    return _workload(name, owners=[ref], **kw)


def _config(document: dict[str, Any]) -> tuple[ev.AnyEvent, ...]:
    return (ev.ConfigRecorded(time=1, document=document, writer="test", id="config"),)


async def _reconcile(*objs: o.KObject, before: tuple[ev.AnyEvent, ...] = ()
                     ) -> tuple[RecordingClient, list[ev.AnyEvent], Any, Mirror]:
    jobs, mirror, appended = integration(*objs, before=before)
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    return client, appended, jobs, mirror


# --- which key names it -------------------------------------------------------------------------------------------

LONG = "w" * 64


@pytest.mark.parametrize(("labels", "annotations", "gate_on", "want"), [
    ({KEY: "a"}, {KEY: "b"}, True, "b"),  # gate on: the annotation first
    ({KEY: "a"}, {KEY: ""}, True, "a"),  # an empty annotation falls back to the label
    ({}, {KEY: "b"}, True, "b"),
    ({KEY: "a"}, {KEY: "b"}, False, "a"),  # gate off: the label first
    ({}, {KEY: "b"}, False, ""),  # and the annotation only when no label value could hold it
    ({}, {KEY: LONG}, False, LONG),
    ({}, {}, True, ""),
])
def test_the_name_is_read_as_the_gate_says(labels: dict, annotations: dict, gate_on: bool, want: str) -> None:
    assert prebuilt.name_of(_job(labels, annotations), annotation_first=gate_on) == want


@pytest.mark.asyncio
@pytest.mark.parametrize(("before", "adopted"), [((), "b"), (_config(GATE_OFF), "a")],
                         ids=["default-gates", "gate-off"])
async def test_the_job_adopts_the_workload_the_gate_reads(before: tuple, adopted: str) -> None:
    client, _, _, _ = await _reconcile(_workload("a"), _workload("b"), _job({KEY: "a"}, {KEY: "b"}), before=before)
    assert [(kind, name) for kind, name, _ in client.patches] == [("Workload", adopted)]


# --- adoption -------------------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_uncontrolled_prebuilt_workload_is_adopted_not_duplicated() -> None:
    other = o.OwnerReference(api_version="v1", kind="ConfigMap", name="keep", uid="cm-uid")
    client, appended, jobs, _ = await _reconcile(_workload(owners=[other]), _job({KEY: "pre"}))
    (kind, name, body), = client.patches
    assert (kind, name) == ("Workload", "pre")
    assert body == {"metadata": {
        "resourceVersion": "3",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm-uid"},
                            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": UID,
                             "controller": True, "blockOwnerDeletion": True}],
        "labels": {"kueue.x-k8s.io/job-uid": UID}}}
    assert appended == [], "no CreatedWorkload: nothing was created"
    await jobs.reconcile("ns/train")
    assert len(client.patches) == 1, "not repeated for the same version of the Job"


@pytest.mark.asyncio
async def test_a_workload_another_object_controls_is_not_the_jobs() -> None:
    stranger = o.OwnerReference(api_version="batch/v1", kind="Job", name="train", uid="old-uid", controller=True)
    client, appended, _, _ = await _reconcile(_workload(owners=[stranger]), _job({KEY: "pre"}))
    assert client.patches == [] and appended == []


# --- missing --------------------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_suspended_job_waits_for_its_missing_workload() -> None:
    client, appended, _, _ = await _reconcile(_job({KEY: "pre"}))
    assert client.patches == [] and appended == [], "no Workload created, nothing written"


@pytest.mark.asyncio
async def test_a_running_job_without_its_workload_is_suspended() -> None:
    client, appended, _, _ = await _reconcile(_job({KEY: "pre"}, suspend=False))
    assert client.patches == [("Job", "train", {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}})]
    (acted,) = appended
    assert isinstance(acted, ev.JobActed)
    assert (acted.action, acted.message, acted.workload) == ("Stopped", "missing workload", "ns/pre")


@pytest.mark.asyncio
async def test_the_job_is_looked_at_again_when_the_workload_it_names_arrives() -> None:
    for labels, notes in (({KEY: "pre"}, {}), ({}, {KEY: "pre"})):
        _, _, _, mirror = await _reconcile(_job(labels, notes))
        mirror.dirty_jobs.clear()
        wl = _workload()
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=wl.key, uid="pre-uid", obj=wl)))
        assert mirror.dirty_jobs == {"ns/train"}
    job = _job()  # the name taken off the Job: no longer looked at for that Workload
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key=job.key, uid=UID, obj=job)))
    mirror.dirty_jobs.clear()
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=4, key=wl.key, uid="pre-uid", obj=wl)))
    assert mirror.dirty_jobs == set() and mirror.named_by == {}


# --- out of sync ----------------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_out_of_sync_workload_is_finished_and_the_job_stopped() -> None:
    client, appended, _, mirror = await _reconcile(_owned(count=3), _job({KEY: "pre"}, suspend=False))
    finished, acted = appended
    assert isinstance(finished, ev.WorkloadFinished) and finished.key == "ns/pre"
    assert (finished.reason, finished.message) == ("OutOfSync", "The prebuilt workload is out of sync with its user job")
    assert isinstance(acted, ev.JobActed) and (acted.action, acted.message) == ("Stopped", "missing workload")
    assert client.patches == [("Job", "train", {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}})]
    mirror.apply(ev.Record(mirror.offset + 1, finished))
    assert not [r for r in mirror.kube_events.ready.values() if isinstance(r.event, ev.WorkloadFinished)], \
        "Kueue then holds the Job to have no Workload: no FinishedWorkload Event"


@pytest.mark.parametrize(("wl", "job", "before", "same"), [
    (_owned(), _job({KEY: "pre"}), (), True),  # 1000m is 1 cpu
    (_owned(cpu="2"), _job({KEY: "pre"}), (), False),
    (_owned(count=3), _job({KEY: "pre"}), (), False),
    (_owned(max_exec=60), _job({KEY: "pre"}), (), False),
    (_owned(max_exec=60), _job({KEY: "pre", "kueue.x-k8s.io/max-exec-time-seconds": "60"}), (), True),
    (_owned(tolerations=[SPOT]), _job({KEY: "pre"}), (), False),  # not admitted: tolerations count
    (_owned(min_count=1), _job({KEY: "pre"}, {MIN_PARALLELISM: "1"}), (), True),
    (_owned(min_count=1), _job({KEY: "pre"}, {MIN_PARALLELISM: "1"}), _config(PARTIAL_OFF), False),
], ids=["same", "resources", "count", "max-exec", "max-exec-both", "tolerations", "min-count",
        "min-count-partial-admission-off"])
def test_equivalence_is_kueues(wl: o.Workload, job: o.Job, before: tuple, same: bool) -> None:
    _, mirror, _ = integration(wl, job, before=before)
    info = mirror.state.workloads["ns/pre"]
    assert job_sync.equivalent(mirror.state, job, wl, info, compared_max_execution_seconds(job.metadata.labels)) is same


def _admitted(state: ClusterState, count: int) -> None:
    """Workload ``ns/pre`` admitted with ``count`` pods on flavor ``spot`` (which tolerates SPOT)."""
    state.flavors["spot"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="spot"),
                                             spec=o.ResourceFlavorSpec(tolerations=[SPOT]))
    info = state.workloads["ns/pre"]
    info.phase = ADMITTED
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "spot"}, resource_usage={"cpu": str(count)}, count=count)])
    info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)


@pytest.mark.parametrize(("parallelism", "suspend", "same"), [
    (3, False, True),  # running as partially admitted: 3 of 4 pods
    (4, True, True),  # suspended, not started yet: the spec's count
    (4, False, False),
    (2, False, False),
])
def test_a_partially_admitted_workload_is_compared_with_what_running_it_makes(parallelism: int, suspend: bool,
                                                                              same: bool) -> None:
    wl = _owned(count=4, min_count=2)
    job = _job({KEY: "pre"}, {MIN_PARALLELISM: "2"}, parallelism=parallelism, suspend=suspend)
    started = msgspec.structs.replace(job.spec.template, spec=msgspec.structs.replace(
        job.spec.template.spec, tolerations=[SPOT] if not suspend else []))  # the flavor's, merged in at start
    job = msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, template=started))
    _, mirror, _ = integration(wl, job)
    _admitted(mirror.state, 3)
    assert job_sync.equivalent(mirror.state, job, wl, mirror.state.workloads["ns/pre"], None) is same


# --- adopted: used as a generated one is ----------------------------------------------------------------------------


def _upsert(mirror: Mirror, obj: o.KObject) -> None:
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=mirror.offset + 1, key=obj.key,
                                                                uid=obj.metadata.uid, obj=obj)))


@pytest.mark.asyncio
async def test_from_its_adoption_on_the_workload_is_the_jobs_as_a_generated_one_is() -> None:
    jobs, mirror, appended = integration(_workload(), _job({KEY: "pre"}))
    deleted: list[str] = []

    class Client(RecordingClient):
        async def delete(self, resource: Any, name: str, namespace: str = "", uid: str = "") -> None:
            deleted.append(name)

    client = jobs.client = Client()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert [(kind, name) for kind, name, _ in client.patches] == [("Workload", "pre")]
    adopted = _owned()
    _upsert(mirror, msgspec.structs.replace(adopted, metadata=msgspec.structs.replace(
        adopted.metadata, labels={"kueue.x-k8s.io/job-uid": UID}, resource_version="4")))
    assert mirror.workload_of["ns/train"] == "ns/pre", "the mirror links them as it links a generated one"

    _upsert(mirror, _job({KEY: "pre"}, succeeded=1))  # one of two pods done: one given back
    await jobs.reconcile("ns/train")
    (changed,) = appended
    assert isinstance(changed, ev.ReclaimablePodsChanged) and changed.key == "ns/pre"
    assert [(p.name, p.count) for p in changed.reclaimable_pods] == [("main", 1)]
    mirror.apply(ev.Record(mirror.offset + 1, changed))

    _upsert(mirror, _job({KEY: "pre"}, succeeded=2, complete=True))
    await jobs.reconcile("ns/train")
    finished = appended[-1]
    assert isinstance(finished, ev.WorkloadFinished) and (finished.key, finished.reason) == ("ns/pre", "Succeeded")
    mirror.apply(ev.Record(mirror.offset + 1, finished))
    assert [r.event for r in mirror.kube_events.ready.values()] == [finished], "FinishedWorkload on the Job"

    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectDeleted(time=9, kind="Job", key="ns/train", uid=UID)))
    await jobs.reconcile("ns/train")
    assert deleted == ["pre"], "deleted with its Job, as the garbage collector deletes what a Job owns"
    assert len(client.patches) == 1, "adopted once; nothing created"


# --- Kueue's ensureOneWorkload (reconciler.go): an elastic Job's scaled-up prebuilt slice -------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("elastic", "replaces", "finished"), [
    (True, "ns/old", False),  # a scaled-up replacement: not compared (the copy may not be synced yet)
    (True, "", True),  # the first slice of the chain is compared as any prebuilt Workload
    (False, "ns/old", True),  # a Job that is not elastic is compared whatever its Workload says
])
async def test_a_scaled_up_prebuilt_slice_of_an_elastic_job_is_not_finished_out_of_sync(
        elastic: bool, replaces: str, finished: bool) -> None:
    """Kueue's ``ensureOneWorkload``: "Skip the in-sync check for ElasticJob workloads if the workload is a
    newly scaled-up replacement" (``workloadslicing.Enabled(job) && workloadslicing.ScaledUp(wl)``: the
    elastic-job annotation under ``ElasticJobsViaWorkloadSlices``, and the Workload's
    ``workload-slice-replacement-for``): a MultiKueue worker's elastic copy is not stopped, nor its slice
    finished, before the copy is synced."""
    wl = _owned(count=6)
    if replaces:
        wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(wl.metadata, annotations={
            "kueue.x-k8s.io/elastic-job": "true", "kueue.x-k8s.io/workload-slice-replacement-for": replaces}))
    annotations = {"kueue.x-k8s.io/elastic-job": "true"} if elastic else {}
    client, appended, _, _ = await _reconcile(wl, _job({KEY: "pre"}, annotations, suspend=False,
                                                       parallelism=4))
    assert any(isinstance(e, ev.WorkloadFinished) for e in appended) is finished
    assert bool([p for p in client.patches if p[0] == "Job"]) is finished, "stopped only once it is finished"


# --- Kueue's reconciler_test.go TestReconcileGenericJob_PrebuiltOutOfSync, as merged Kueue decides it -------
# The stored test comes from Kueue's open #14441 (stop the Job before finishing its prebuilt Workload); merged
# Kueue's ensureOneWorkload finishes an out-of-sync prebuilt Workload at once (workload.Finish, a no-op on one
# already finished) and then treats the Job as having none; one in sync again is the Job's, finished or not.
# These rows take #14441's inputs and merged Kueue's outcomes (the report lists where #14441 would differ).

FINALIZER = "kueue.x-k8s.io/resource-in-use"


def _finished_out_of_sync(**kw: Any) -> o.Workload:
    wl = _owned(**kw)
    cond = o.Condition(type="Finished", status="True", reason="OutOfSync",
                       message="The prebuilt workload is out of sync with its user job")
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(wl.metadata, finalizers=[FINALIZER]),
                                   status=msgspec.structs.replace(wl.status, conditions=[cond]))


def _folded_finished(mirror: Mirror) -> None:
    """The log holds the Workload finished ``OutOfSync``, as the stored one shows."""
    info = mirror.state.workloads["ns/pre"]
    info.phase = FINISHED
    info.set_condition("Finished", "True", "OutOfSync",
                       "The prebuilt workload is out of sync with its user job", 5)


@pytest.mark.asyncio
async def test_a_finished_job_with_an_out_of_sync_prebuilt_workload_finishes_it_out_of_sync() -> None:
    """#14441's "a job that succeeded keeps its own reason": merged Kueue compares before it looks at the
    Job's end, so the Workload is finished ``OutOfSync``, not ``Succeeded``."""
    _, appended, _, _ = await _reconcile(_owned(count=3), _job({KEY: "pre"}, succeeded=2, complete=True))
    assert [(e.key, e.reason) for e in appended if isinstance(e, ev.WorkloadFinished)] == [
        ("ns/pre", "OutOfSync")]


@pytest.mark.asyncio
@pytest.mark.parametrize("running", [False, True])
async def test_a_prebuilt_workload_finished_out_of_sync_in_sync_again_loses_its_finalizer(
        running: bool) -> None:
    """#14441's "corrected even once the pair matches again" and "stops a running job even once the pair
    matches again": merged Kueue runs the Job on it again, so its finished branch takes the finalizer off, the
    reason left as it is (Finish does nothing on a finished Workload) and a running Job left running."""
    jobs, mirror, appended = integration(_finished_out_of_sync(),
                                         _job({KEY: "pre"}, succeeded=0 if running else 2,
                                              complete=not running, suspend=not running))
    _folded_finished(mirror)
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert not [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert [(kind, name) for kind, name, _ in client.patches] == [("Workload", "pre")], (
        "only the finalizer goes")
    assert client.patches[0][2]["metadata"]["finalizers"] is None, "the finalizer removed, none left"


@pytest.mark.asyncio
async def test_a_prebuilt_workload_finished_out_of_sync_and_still_so_keeps_its_finalizer() -> None:
    """#14441's "already finished as OutOfSync is corrected before it is finalized": merged Kueue's
    ensureOneWorkload returns no Workload for it (out of sync), so nothing is written while the Job exists."""
    jobs, mirror, appended = integration(_finished_out_of_sync(count=3),
                                         _job({KEY: "pre"}, succeeded=2, complete=True))
    _folded_finished(mirror)
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert (appended, client.patches) == ([], [])
