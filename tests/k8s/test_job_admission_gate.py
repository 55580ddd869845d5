"""The Job integration and Kueue's ``kueue.x-k8s.io/admission-gated-by`` annotation (AdmissionGatedBy, beta, on):
the Workload of a gated Job carries the Job's gates, and follows the Job as gates are removed, the annotation
going once the Job's is gone or empty (``UpdatedWorkload`` "Updated workload AdmissionGatedBy to "<gates>"" recorded
on the Job, as Kueue's reconciler does); with the gate off the annotation is neither copied nor followed. No
cluster needed: the integration runs against a mirror, its writes recorded by a fake client."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import NAME, UID, RecordingClient, integration, job, workload

from events import objects as o
from events import schema as ev

GATE = "kueue.x-k8s.io/admission-gated-by"
GATE_OFF = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"AdmissionGatedBy": False}}


def _gated_workload(gate: str) -> o.Workload:
    wl = workload()
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(wl.metadata, annotations={GATE: gate}))


def _raw_job(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": annotations},
            "spec": {"parallelism": 1, "suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def _gate_off() -> tuple[ev.AnyEvent, ...]:
    return (ev.ConfigRecorded(time=1, document=GATE_OFF, writer="test", id="config-gate-off"),)


@pytest.mark.parametrize(("annotations", "before", "want"), [
    ({GATE: "example.com/a,example.com/b"}, (), {GATE: "example.com/a,example.com/b"}),
    ({GATE: ""}, (), None),  # an empty annotation gates nothing
    ({}, (), None),
    ({GATE: "example.com/a"}, _gate_off(), None),  # gate off: not copied
])
def test_the_workload_of_a_gated_job_carries_its_gates(annotations: dict, before: tuple, want: dict | None) -> None:
    jobs, _, _ = integration(before=before)
    body = jobs.workload_for(_raw_job(annotations), NAME)
    assert body["metadata"].get("annotations") == want


async def _reconcile(wl_gate: str | None, job_annotations: dict[str, str], before: tuple = ()
                     ) -> tuple[RecordingClient, list[ev.AnyEvent], Any]:
    wl = _gated_workload(wl_gate) if wl_gate is not None else workload()
    jobs, _, appended = integration(wl, job(annotations=job_annotations), before=before)
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    return client, appended, jobs


@pytest.mark.asyncio
@pytest.mark.parametrize(("job_annotations", "want"), [
    ({}, None),  # the Job's annotation was removed: the Workload's goes
    ({GATE: ""}, None),  # emptied: the same
    ({GATE: "example.com/b"}, "example.com/b"),  # a gate removed: the Workload keeps the others
])
async def test_the_workload_follows_the_jobs_gates(job_annotations: dict[str, str], want: str | None) -> None:
    client, appended, jobs = await _reconcile("example.com/a,example.com/b", job_annotations)
    assert client.patches == [("Workload", NAME, {"metadata": {"resourceVersion": "3", "annotations": {GATE: want}}})]
    assert [(e.kind, e.action, e.message) for e in appended] == [
        ("Job", "UpdatedWorkload", f'Updated workload AdmissionGatedBy to "{want or ""}"')], (
        "Kueue's UpdatedWorkload on the Job, and nothing decided for the Workload before it shows the change")
    await jobs.reconcile("ns/train")
    assert len(client.patches) == 1, "not repeated for the same version of the Job"


@pytest.mark.asyncio
@pytest.mark.parametrize(("wl_gate", "job_annotations", "before"), [
    ("example.com/a", {GATE: "example.com/a"}, ()),  # in step
    (None, {}, ()),  # neither gated
    ("example.com/a", {}, _gate_off()),  # gate off: the Workload's annotation is left as it is
    (None, {GATE: "example.com/a"}, ()),  # made while the gate was off: Kueue's webhook refuses a gate added
    ("example.com/a", {GATE: "example.com/a,example.com/b"}, ()),  # nor one more gate
])
async def test_nothing_to_sync(wl_gate: str | None, job_annotations: dict[str, str], before: tuple) -> None:
    client, _, _ = await _reconcile(wl_gate, job_annotations, before)
    assert not [p for p in client.patches if p[0] == "Workload"]
