"""A Ray object's ``kueue.x-k8s.io/admission-gated-by`` under ``AdmissionGatedBy``: Kueue builds a Ray object's
Workload through its generic job path, so the Workload takes the gates when made and loses those the Ray object
drops, as a Job's does (that step is the shared reconciler's) (:mod:`connectors.k8s.raycluster`, :func:`connectors.k8s.jobframework.admission_gate_change`)."""

from __future__ import annotations

import pytest
from test_ray_reconcile import (
    BOTH_ON,
    CLUSTER_WL,
    JOB_WL,
    cluster_integration,
    job_integration,
    raw_cluster,
    raw_job,
)

from projections.workloads import ADMISSION_GATED_BY_ANNOTATION as GATE


@pytest.mark.asyncio
@pytest.mark.parametrize(("gate_on", "want"), [(True, {GATE: "example.com/a"}), (False, None)])
async def test_a_ray_objects_admission_gate_is_copied_to_its_new_workload_under_the_gate(
        gate_on: bool, want: dict[str, str] | None) -> None:
    config = {**BOTH_ON, "featureGates": {"AdmissionGatedBy": gate_on}}
    cluster = raw_cluster()
    cluster["metadata"]["annotations"] = {GATE: "example.com/a"}
    job = raw_job()
    job["metadata"]["annotations"] = {GATE: "example.com/a"}
    for (integ, client, _), key, name in ((cluster_integration(cluster, config=config), "ns/rc", CLUSTER_WL),
                                          (job_integration(job, config=config), "ns/job", JOB_WL)):
        await integ.reconcile(key)
        (created,) = client.created
        assert created["metadata"]["name"] == name
        assert created["metadata"].get("annotations") == want

