"""The shared job reconciler's steps as JobSets and MPIJobs now take them, as Jobs did (Kueue's
``jobframework/reconciler.go``): a Workload the object no longer matches rewritten, deleted or stopped with
(``EquivalentToWorkload``, ``updateWorkloadToMatchJob``), prebuilt Workloads (adopted, missing, out of sync, and
the object marked when the one it names arrives), the ``admission-gated-by`` gates copied to the Workload and
removed from it, and the Events a Job's come from the log for (``FinishedWorkload``, ``UpdatedAdmissionCheck``,
recorded by the kind's own recorder); no cluster needed."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.watched_jobs import Client
from test_jobset_reconcile import NAME as JS_NAME
from test_jobset_reconcile import integration as jobset_integration
from test_jobset_reconcile import raw_jobset
from test_jobset_reconcile import workload as jobset_workload
from test_mpijob_reconcile import NAME as MPI_NAME
from test_mpijob_reconcile import integration as mpijob_integration
from test_mpijob_reconcile import raw_mpijob
from test_mpijob_reconcile import workload as mpijob_workload

from connectors.k8s import job_events, jobset_webhook, mpijob_webhook
from connectors.k8s.decision_events import Involved
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from projections.workloads import ADMISSION_GATED_BY_ANNOTATION, FINISHED, RESERVED

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def _acted(appended: list[ev.AnyEvent]) -> list[tuple[str, str, str]]:
    return [(e.kind, e.action, e.message) for e in appended if isinstance(e, ev.JobActed)]


def _set(integ: Any, key: str, **fields: Any) -> None:
    """Give the log's view of Workload ``key`` these fields (its phase, checks...)."""
    integ.state.workloads[key] = msgspec.structs.replace(integ.state.workloads[key], **fields)


# --- a Workload the object no longer matches -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_suspended_jobset_with_more_replicas_has_its_workload_rewritten() -> None:
    raw = raw_jobset()
    raw["spec"]["replicatedJobs"][1]["replicas"] = 3  # 6 workers where the Workload holds 4
    integ, client, appended = integration_js(raw, jobset_workload())
    await integ.reconcile("ns/train")
    (kind, name, patch), = client.patches
    assert (kind, name, patch["metadata"]) == ("Workload", JS_NAME, {"resourceVersion": "3"})
    assert [(ps["name"], ps["count"]) for ps in patch["spec"]["podSets"]] == [("leader", 1), ("workers", 6)]
    assert _acted(appended) == [("JobSet", "UpdatedWorkload",
                                 f"Updated not matching Workload for suspended job: ns/{JS_NAME}")]


@pytest.mark.asyncio
async def test_a_suspended_mpijob_whose_workload_holds_quota_has_it_deleted_when_workers_change() -> None:
    raw = raw_mpijob()
    raw["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 4
    integ, client, appended = integration_mpi(raw, mpijob_workload())
    _set(integ, f"ns/{MPI_NAME}", phase=RESERVED)
    await integ.reconcile("ns/pi")
    assert [(kind, body["metadata"]["finalizers"]) for kind, _, body in client.patches] == [("Workload", None)]
    assert client.deleted == [("Workload", MPI_NAME)]
    assert _acted(appended) == [("MPIJob", "DeletedWorkload", f"Deleted not matching Workload: ns/{MPI_NAME}")]


@pytest.mark.asyncio
async def test_a_running_mpijob_that_no_longer_matches_is_stopped_first() -> None:
    raw = raw_mpijob(suspend=False)
    raw["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 4
    integ, client, appended = integration_mpi(raw, mpijob_workload())
    await integ.reconcile("ns/pi")
    (kind, _, patch), = client.patches
    assert (kind, patch["spec"]["runPolicy"]) == ("MPIJob", {"suspend": True})
    assert _acted(appended) == [("MPIJob", "Stopped", "No matching Workload; restoring pod templates according to "
                                                      "existent Workload")]


@pytest.mark.asyncio
async def test_of_two_workloads_a_jobset_keeps_the_one_that_matches_it_and_deletes_the_other() -> None:
    """Kueue's ``ensureOneWorkload``: the oldest matching Workload is kept, every other one deleted."""
    matching = jobset_workload()
    matching = msgspec.structs.replace(matching, metadata=msgspec.structs.replace(
        matching.metadata, creation_timestamp="2026-01-01T00:00:02Z"))
    stale = msgspec.structs.replace(jobset_workload(), metadata=msgspec.structs.replace(
        matching.metadata, name="jobset-train-old", uid="old-uid", creation_timestamp="2026-01-01T00:00:01Z"))
    stale = msgspec.structs.replace(stale, spec=msgspec.structs.replace(
        stale.spec, pod_sets=[stale.spec.pod_sets[0], msgspec.structs.replace(stale.spec.pod_sets[1], count=2)]))
    integ, client, appended = integration_js(raw_jobset(), matching, stale)
    await integ.reconcile("ns/train")
    assert client.deleted == [("Workload", "jobset-train-old")]
    assert _acted(appended) == [("JobSet", "DeletedWorkload", "Deleted not matching Workload: ns/jobset-train-old")]


# --- prebuilt Workloads ----------------------------------------------------------------------------------------


def _prebuilt(name: str = "pre", owner: o.OwnerReference | None = None, count: int = 4) -> o.Workload:
    template = msgspec.convert({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                               o.PodTemplateSpec)
    return o.Workload(
        metadata=o.ObjectMeta(name=name, namespace="ns", uid="pre-uid", resource_version="7",
                              owner_references=[owner] if owner else []),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="leader", count=1, template=template),
                                                       o.PodSet(name="workers", count=count, template=template)]))


def _owned_by_train() -> o.OwnerReference:
    return o.OwnerReference(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="train", uid="js-uid",
                            controller=True)


@pytest.mark.asyncio
async def test_a_jobset_naming_a_prebuilt_workload_nothing_controls_adopts_it() -> None:
    raw = raw_jobset()
    raw["metadata"]["labels"][PREBUILT] = "pre"
    integ, client, appended = integration_js(raw, _prebuilt())
    await integ.reconcile("ns/train")
    (kind, name, patch), = client.patches
    assert (kind, name) == ("Workload", "pre")
    assert patch["metadata"]["ownerReferences"] == [{
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train", "uid": "js-uid",
        "controller": True, "blockOwnerDeletion": True}]
    assert patch["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "js-uid"}
    assert (client.created, appended) == ([], [])


@pytest.mark.asyncio
async def test_a_running_mpijob_whose_prebuilt_workload_is_missing_is_suspended_and_given_none() -> None:
    raw = raw_mpijob(suspend=False)
    raw["metadata"]["annotations"] = {PREBUILT: "pre"}
    integ, client, appended = integration_mpi(raw)
    await integ.reconcile("ns/pi")
    (kind, _, patch), = client.patches
    assert (kind, patch["spec"]) == ("MPIJob", {"runPolicy": {"suspend": True}})
    assert _acted(appended) == [("MPIJob", "Stopped", "missing workload")]
    integ.known["ns/pi"] = msgspec.structs.replace(integ.known["ns/pi"], spec=msgspec.structs.replace(
        integ.known["ns/pi"].spec, run_policy=msgspec.convert({"suspend": True}, type(integ.known["ns/pi"].spec.run_policy))))
    await integ.reconcile("ns/pi")
    assert client.created == [], "no Workload is made for an MPIJob naming a prebuilt one"


@pytest.mark.asyncio
async def test_a_jobset_runs_on_the_prebuilt_workload_it_controls_and_one_out_of_sync_is_finished() -> None:
    raw = raw_jobset()
    raw["metadata"]["labels"][PREBUILT] = "pre"
    integ, client, appended = integration_js(raw, _prebuilt(owner=_owned_by_train()))
    await integ.reconcile("ns/train")
    assert client.patches == [], "in step: nothing to rewrite, adopt or start"
    assert not [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    integ, client, appended = integration_js(raw, _prebuilt(owner=_owned_by_train(), count=6))
    await integ.reconcile("ns/train")
    assert [(type(e).__name__, e.reason) for e in appended] == [("WorkloadFinished", "OutOfSync")]  # type: ignore[attr-defined]
    assert client.created == []


def test_a_prebuilt_workload_arriving_marks_the_jobset_naming_it() -> None:
    raw = raw_jobset()
    raw["metadata"]["annotations"] = {PREBUILT: "pre"}
    integ, _, _ = integration_js(None)
    integ.known["ns/train"] = msgspec.convert(raw, integ.ITEM)
    integ._mark({"ns/train"})
    integ.dirty.clear()
    wl = _prebuilt()
    integ._on_applied([ev.Record(9, ev.ObjectUpserted(time=1, key=wl.key, uid=wl.metadata.uid, obj=wl))])
    assert integ.dirty == {"ns/train"}


# --- admission gates -------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_jobsets_admission_gate_is_copied_to_its_new_workload() -> None:
    raw = raw_jobset()
    raw["metadata"]["annotations"] = {ADMISSION_GATED_BY_ANNOTATION: "example.com/a"}
    integ, client, _ = integration_js(raw)
    await integ.reconcile("ns/train")
    (created,) = client.created
    assert created["metadata"]["annotations"] == {ADMISSION_GATED_BY_ANNOTATION: "example.com/a"}


@pytest.mark.asyncio
async def test_an_admission_gate_the_mpijob_drops_is_removed_from_its_workload() -> None:
    raw = raw_mpijob()
    raw["metadata"]["annotations"] = {ADMISSION_GATED_BY_ANNOTATION: "example.com/b"}
    wl = mpijob_workload()
    wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, annotations={ADMISSION_GATED_BY_ANNOTATION: "example.com/a,example.com/b"}))
    integ, client, _ = integration_mpi(raw, wl)
    await integ.reconcile("ns/pi")
    (kind, _, patch), = client.patches
    assert (kind, patch["metadata"]["annotations"]) == ("Workload", {ADMISSION_GATED_BY_ANNOTATION: "example.com/b"})


# --- Events ----------------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_finished_workload_is_reported_on_its_jobset_once() -> None:
    integ, _, appended = integration_js(raw_jobset(), jobset_workload())
    _set(integ, f"ns/{JS_NAME}", phase=FINISHED)
    await integ.reconcile("ns/train")
    await integ.reconcile("ns/train")
    assert [(e.action, e.workload) for e in appended if isinstance(e, ev.JobActed)] == [
        ("FinishedWorkload", f"ns/{JS_NAME}")]


@pytest.mark.asyncio
async def test_what_was_told_of_a_finished_workload_goes_with_it() -> None:
    """The uids of finished Workloads already reported are kept only while the log holds the Workload, so a
    long-running connector does not keep one per Workload it ever saw."""
    integ, _, _ = integration_js(raw_jobset(), jobset_workload())
    key = f"ns/{JS_NAME}"
    _set(integ, key, phase=FINISHED)
    await integ.reconcile("ns/train")
    uid = integ.state.workloads[key].uid
    assert uid in integ._finished_told
    integ._on_applied([ev.Record(1, ev.ObjectDeleted(time=1, key=key, uid=uid, kind="Workload"))])
    assert uid not in integ._finished_told


@pytest.mark.asyncio
async def test_pending_checks_are_reported_on_a_suspended_mpijob_when_their_message_changes() -> None:
    integ, _, appended = integration_mpi(raw_mpijob(), mpijob_workload())
    check = o.AdmissionCheckState(name="prov", state="Pending", message="waiting")
    _set(integ, f"ns/{MPI_NAME}", phase=RESERVED, check_states={"prov": check})
    await integ.reconcile("ns/pi")
    await integ.reconcile("ns/pi")
    assert _acted(appended) == [("MPIJob", "UpdatedAdmissionCheck", "prov: waiting")]


def test_each_kinds_events_are_recorded_by_its_integrations_recorder() -> None:
    for kind, component in (("JobSet", "jobset.x-k8s.io/jobset-kueue-controller"),
                            ("MPIJob", "kubeflow.org/mpijob-kueue-controller"), ("Job", "batch/job-kueue-controller"),
                            ("RayJob", "ray.io/rayjob-kueue-controller"),
                            ("RayCluster", "ray.io/raycluster-kueue-controller"),
                            ("PyTorchJob", "kubeflow.org/pytorchjob-kueue-controller")):
        acted = ev.JobActed(time=1, key="ns/x", uid="u", kind=kind, action="FinishedWorkload", workload="ns/w")
        (event,) = job_events.job_events(acted, Involved("v", kind, "ns", "x", "u"))
        assert (event.reason, event.message, event.component) == (
            "FinishedWorkload", "Workload 'ns/w' is declared finished", component)
    mirror = Mirror()
    mirror.apply(ev.Record(1, ev.JobActed(time=1, key="ns/pi", uid="u", kind="MPIJob", action="FinishedWorkload",
                                          workload="ns/w")))
    assert mirror.kube_events.ready[1].before.kind == "MPIJob"  # type: ignore[union-attr]


def integration_js(raw: dict[str, Any] | None, *objs: o.KObject) -> tuple[Any, Client, list[ev.AnyEvent]]:
    return jobset_integration(raw, *objs)


def integration_mpi(raw: dict[str, Any] | None, *objs: o.KObject) -> tuple[Any, Client, list[ev.AnyEvent]]:
    return mpijob_integration(raw, *objs)


# --- the webhooks' admission-gate rule -------------------------------------------------------------------------


def _gated(obj: dict[str, Any], gate: str | None) -> dict[str, Any]:
    out = msgspec.json.decode(msgspec.json.encode(obj))
    if gate is not None:
        out["metadata"]["annotations"] = {ADMISSION_GATED_BY_ANNOTATION: gate}
    return out


@pytest.mark.parametrize("update_errors, obj", [(jobset_webhook.update_errors, raw_jobset()),
                                                (mpijob_webhook.update_errors, raw_mpijob())])
def test_a_jobsets_or_mpijobs_update_may_only_remove_admission_gates(update_errors: Any, obj: dict[str, Any]) -> None:
    path = f"metadata.annotations[{ADMISSION_GATED_BY_ANNOTATION}]"
    assert update_errors(_gated(obj, "example.com/a,example.com/b"), _gated(obj, "example.com/a"), {}) == []
    assert update_errors(_gated(obj, "example.com/a"), _gated(obj, "example.com/a,example.com/c"), {}) == [
        f"{path}: Forbidden: can only remove gates, not add new ones"]
    assert update_errors(_gated(obj, None), _gated(obj, "example.com/a"), {}) == [
        f"{path}: Forbidden: cannot add admission gate after creation"]
    assert update_errors(_gated(obj, None), _gated(obj, "example.com/a"), {"AdmissionGatedBy": False}) == []
