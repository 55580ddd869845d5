"""The Job webhook hands a Job to MultiKueue (``spec.managedBy: kueue.x-k8s.io/multikueue``) when its queue's
ClusterQueue has a MultiKueue check, as Kueue's job webhook defaults it (over none or the built-in Job
controller's), whatever its ancestry; never over another ``managedBy`` the Job names, never while the MultiKueue
gate is off (no lookup)."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import webhook


def _review(job: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "ns", "object": job}})


def _job(queue: str = "mk-queue", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"suspend": True, **spec}}


async def _no_default(_: str) -> bool:
    return False


async def _multikueue_queues(namespace: str, queue: str) -> bool:
    return (namespace, queue) == ("ns", "mk-queue")


async def _patch(job: dict[str, Any], lookup: webhook.MultiKueueLookup | None) -> list[dict[str, Any]]:
    out = await webhook.review(_review(job), _no_default, multikueue=lookup)
    patch = out["response"].get("patch")
    return msgspec.json.decode(base64.b64decode(patch)) if patch else []


@pytest.mark.asyncio
async def test_a_job_of_a_multikueue_queue_is_handed_to_multikueue() -> None:
    assert await _patch(_job(), _multikueue_queues) == [
        {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"}]


@pytest.mark.asyncio
async def test_other_queues_a_named_manager_and_the_gate_off_leave_it() -> None:
    assert await _patch(_job("plain"), _multikueue_queues) == []
    assert await _patch(_job(managedBy="example.com/mine"), _multikueue_queues) == []
    assert await _patch(_job(), None) == []


@pytest.mark.asyncio
async def test_a_child_job_is_handed_to_multikueue_all_the_same() -> None:
    """Kueue's ``ApplyDefaultForManagedBy`` looks at the queue and the Job's own ``managedBy``, not at its
    ancestry (``WorkloadShouldBeSuspended`` does, for the suspension only): a Job whose controller is a Job Kueue
    runs is not suspended, but handed to MultiKueue as any Job of that queue — as the other kinds' webhooks do."""
    job = _job(suspend=False)
    job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "p", "uid": "p",
                                           "controller": True}]
    assert await _patch(job, _multikueue_queues) == [
        {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"}]


@pytest.mark.asyncio
async def test_a_job_naming_the_job_controller_is_handed_to_multikueue_too() -> None:
    """Kueue's job webhook defaults ``managedBy`` over the built-in Job controller's name as over none: naming the
    default manager asks for nothing else, and left so the Job would be rejected by the MultiKueue check."""
    assert await _patch(_job(managedBy="kubernetes.io/job-controller"), _multikueue_queues) == [
        {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"}]
