"""Which Workloads are a batch/v1 Job's: those its controller ownerReference names as ``batch/v1`` Job of its
name. One controlled by a Job of another apiVersion (``batch/v1beta1``, same name and uid: only a hand-written
reference makes one) is not — Kueue's ``EquivalentToWorkload`` wants the Job's kind, apiVersion and name
(reconciler_test.go TestEquivalentToWorkload "controller with a different apiVersion"): the Job gets a Workload
of its own and leaves that one alone. No cluster needed."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.jobs import NAME, UID, job, workload
from test_job_sync import _setup

from events import objects as o


def _controlled_by(api_version: str) -> o.Workload:
    w = workload()
    ref = o.OwnerReference(api_version=api_version, kind="Job", name="train", uid=UID, controller=True)
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(
        w.metadata, name="hand-made", uid="hand-made-uid", owner_references=[ref]))


@pytest.mark.asyncio
async def test_a_workload_controlled_by_another_apiversion_of_job_is_not_the_jobs() -> None:
    jobs, mirror, _, client = _setup(_controlled_by("batch/v1beta1"), job())
    await jobs.reconcile("ns/train")
    assert [made["metadata"]["name"] for made in client.created] == [NAME], "the Job gets a Workload of its own"
    assert client.deleted == [] and not [p for kind, _, p in client.patches if kind == "Workload"]


def test_one_controlled_by_the_batch_v1_job_is() -> None:
    _, mirror, _, _ = _setup(_controlled_by("batch/v1"), job())
    assert mirror.owned_by["ns/train"] == {"ns/hand-made"}
