"""Kueue v0.20's ``WorkloadLevelWaitForPodsReady`` (alpha, off): a job's ``kueue.x-k8s.io/wait-for-pods-ready``
annotation is copied onto its new Workload (whose own timeouts the scheduler then reads), unless the gate is off
or ``DisableWaitForPodsReady`` is on. No cluster needed: the integration runs against a mirror."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import NAME, UID, RecordingClient, integration, job, workload

from events import objects as o
from events import schema as ev

ANNOTATION = "kueue.x-k8s.io/wait-for-pods-ready"
VALUE = '{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}'


def _gates(**gates: bool) -> tuple[ev.AnyEvent, ...]:
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    return (ev.ConfigRecorded(time=1, document=document, writer="test", id="config-gates"),)


def _raw_job(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": annotations},
            "spec": {"parallelism": 1, "suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}


@pytest.mark.parametrize(("gates", "annotations", "want"), [
    ({"WorkloadLevelWaitForPodsReady": True}, {ANNOTATION: VALUE}, {ANNOTATION: VALUE}),
    ({}, {ANNOTATION: VALUE}, None),  # the gate off (its default): not copied
    ({"WorkloadLevelWaitForPodsReady": True, "DisableWaitForPodsReady": True}, {ANNOTATION: VALUE}, None),
    ({"WorkloadLevelWaitForPodsReady": True}, {}, None),
])
def test_a_jobs_workload_carries_its_wait_for_pods_ready_annotation_under_the_gate(
        gates: dict[str, bool], annotations: dict[str, str], want: dict[str, str] | None) -> None:
    jobs, _, _ = integration(before=_gates(**gates))
    body = jobs.workload_for(_raw_job(annotations), NAME)
    assert body["metadata"].get("annotations") == want


def _workload_with(value: str | None) -> o.Workload:
    wl = workload()
    annotations = {ANNOTATION: value} if value is not None else {}
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(wl.metadata, annotations=annotations))


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate", "suspend", "wl_value", "job_value", "want"), [
    (True, True, '{"timeoutSeconds": 100}', '{"timeoutSeconds": 50}', '{"timeoutSeconds": 50}'),
    (True, True, None, '{"timeoutSeconds": 50}', '{"timeoutSeconds": 50}'),
    (True, True, '{"timeoutSeconds": 100}', None, None),  # the job's was removed: the Workload's goes
    (True, True, '{"timeoutSeconds": 50}', '{"timeoutSeconds": 50}', "unchanged"),
    (False, True, '{"timeoutSeconds": 100}', '{"timeoutSeconds": 50}', "unchanged"),  # gate off
])
async def test_a_suspended_jobs_changed_annotation_updates_its_workload_in_place(
        gate: bool, suspend: bool, wl_value: str | None, job_value: str | None, want: str | None) -> None:
    """Under the gate, the Workload of a suspended job follows the job's annotation, in place (a patch, no new
    Workload), with the Event ``UpdatedWorkload`` "Updated workload WaitForPodsReady annotation to <value>"."""
    annotations = {ANNOTATION: job_value} if job_value is not None else {}
    jobs, _, appended = integration(_workload_with(wl_value), job(annotations=annotations, suspend=suspend),
                                    before=_gates(WorkloadLevelWaitForPodsReady=gate))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    synced = [p for p in client.patches if ANNOTATION in (p[2].get("metadata", {}).get("annotations") or {})]
    if want == "unchanged":
        assert synced == []
        return
    assert synced == [("Workload", NAME, {"metadata": {"resourceVersion": "3", "annotations": {ANNOTATION: want}}})]
    acted = [e for e in appended if isinstance(e, ev.JobActed) and e.action == "UpdatedWorkload"]
    assert [e.message for e in acted] == [f"Updated workload WaitForPodsReady annotation to {want or ''}"]


@pytest.mark.asyncio
async def test_an_annotation_someone_set_back_on_the_workload_is_written_again_the_job_unchanged() -> None:
    """The write is remembered by the Workload's version as well as the job's: Kueue's reconciler runs on its
    Workloads' updates too, so a Workload whose annotation someone set back (its newer version showing the old
    value, the job unchanged) gets the job's again."""
    jobs, mirror, _ = integration(_workload_with('{"timeoutSeconds": 100}'),
                                  job(annotations={ANNOTATION: '{"timeoutSeconds": 50}'}),
                                  before=_gates(WorkloadLevelWaitForPodsReady=True))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    set_back = _workload_with('{"timeoutSeconds": 100}')
    set_back = msgspec.structs.replace(set_back, metadata=msgspec.structs.replace(set_back.metadata,
                                                                                  resource_version="5"))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=set_back.key, uid=set_back.metadata.uid,
                                                                obj=set_back)))
    await jobs.reconcile("ns/train")
    synced = [p[2]["metadata"] for p in client.patches if ANNOTATION in (p[2]["metadata"].get("annotations") or {})]
    assert [(m["resourceVersion"], m["annotations"][ANNOTATION]) for m in synced] == [
        ("3", '{"timeoutSeconds": 50}'), ("5", '{"timeoutSeconds": 50}')]
