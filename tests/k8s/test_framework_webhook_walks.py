"""The webhooks of the other job kinds (JobSet, MPIJob, training jobs, RayJob/RayCluster, LeaderWorkerSet) decide
"child" as the Job webhook does and as Kueue's ``WorkloadShouldBeSuspended`` does: by walking the controllers up
(:func:`connectors.k8s.webhook.ancestry_lookup`), not by the direct controller's kind. A controller of an enabled
kind whose ancestors name no queue (``manageJobsWithoutQueueName`` off) makes no child."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import jobset_webhook, kubeflow_webhook, lws_webhook, mpijob_webhook, ray_webhook
from connectors.k8s.errors import NotFound
from connectors.k8s.webhook import ancestry_lookup
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob",
              "ray.io/rayjob", "ray.io/raycluster", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]
CONFIG = load_config({"integrations": {"frameworks": FRAMEWORKS}})


class _Apiserver:
    """The parents the walk reads, by (kind, name), answered as the body's bytes as the client answers."""

    def __init__(self, *objects: tuple[str, str, dict]) -> None:
        self.objects = {(kind, name): {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", **meta}}
                        for kind, name, meta in objects}

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        if (resource.kind, name) not in self.objects:
            raise NotFound(f"{resource.kind} {name} not found", 404, "NotFound")
        return msgspec.json.encode(self.objects[(resource.kind, name)])


def _owned(obj: dict, api_version: str, kind: str, name: str = "parent") -> dict:
    obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name,
                                           "uid": f"uid-{name}", "controller": True}]
    return obj


def _obj(api_version: str, kind: str, spec: dict) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "team", "labels": {Q: "lq"}},
            "spec": spec}


async def _no_default(ns: str) -> bool:
    return False


async def _labels(ns: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": ns}


def _review(reviews: dict, path: str, obj: dict) -> dict:
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response: dict = asyncio.run(reviews[path](body))["response"]
    return response


def _ops(response: dict) -> list[dict]:
    assert response["allowed"], response
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _reviews(apiserver: _Apiserver) -> dict:
    walk = ancestry_lookup(apiserver, CONFIG)  # type: ignore[arg-type]
    rayjobs = ray_webhook.RayWebhooks.of(CONFIG, clusters=False)
    rayclusters = ray_webhook.RayWebhooks.of(CONFIG, clusters=True)
    return {**jobset_webhook.reviewers(jobset_webhook.JobSetWebhooks.of(CONFIG), _labels, _no_default, None, walk),
            **mpijob_webhook.reviewers(mpijob_webhook.MPIJobWebhooks.of(CONFIG), _labels, _no_default, None, walk),
            **kubeflow_webhook.reviewers(CONFIG, _labels, _no_default, None, walk),
            **ray_webhook.reviewers(rayjobs, rayclusters, _labels, _no_default, None, walk),
            **lws_webhook.reviewers(lws_webhook.LeaderWorkerSetWebhooks.of(CONFIG), _labels, _no_default, walk)}


CASES = {
    "jobset": (jobset_webhook.KIND.mutating_path, lambda: _obj("jobset.x-k8s.io/v1alpha2", "JobSet", {})),
    "mpijob": (mpijob_webhook.KIND.mutating_path,
               lambda: _obj("kubeflow.org/v2beta1", "MPIJob", {"runPolicy": {}})),
    "pytorchjob": (kubeflow_webhook.WEBHOOK_KINDS["PyTorchJob"].mutating_path,
                   lambda: _obj("kubeflow.org/v1", "PyTorchJob", {"runPolicy": {}})),
    "raycluster": (ray_webhook.RAYCLUSTER_KIND.mutating_path,
                   lambda: _obj("ray.io/v1", "RayCluster", {"headGroupSpec": {"template": {}}})),
    "leaderworkerset": (lws_webhook.MUTATING_PATH,
                        lambda: _obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
                                     {"leaderWorkerTemplate": {"workerTemplate": {"metadata": {}}}})),
}
HOLDS = {"leaderworkerset": "/spec/leaderWorkerTemplate/workerTemplate/metadata/annotations"}


def _held(case: str, ops: list[dict]) -> bool:
    """Whether the patch suspends the object (its suspend flag, or, a LeaderWorkerSet, its pod templates' marks)."""
    mark = HOLDS.get(case)
    return any(op["path"] == mark if mark else op["path"].endswith("suspend") or op.get("value") == {"suspend": True}
               for op in ops)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_queued_object_under_an_unqueued_job_is_not_a_child(case: str) -> None:
    """Its controller, a batch/v1 Job of an enabled integration, names no queue and has no managed ancestor: Kueue's
    walk finds none, so the object is top-level and suspended (before, the controller's kind alone made it a child,
    left running outside quota)."""
    path, make = CASES[case]
    obj = _owned(make(), "batch/v1", "Job")
    assert _held(case, _ops(_review(_reviews(_Apiserver(("Job", "parent", {"labels": {}}))), path, obj)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_queued_ancestor_two_levels_up_makes_a_child(case: str) -> None:
    """The walk reaches a queued JobSet above the controlling Job: the object is that JobSet's, not suspended."""
    path, make = CASES[case]
    obj = _owned(make(), "batch/v1", "Job")
    apiserver = _Apiserver(("Job", "parent", _owned({"metadata": {}}, "jobset.x-k8s.io/v1alpha2", "JobSet",
                                                    "top")["metadata"]),
                           ("JobSet", "top", {"labels": {Q: "lq"}}))
    assert not _held(case, _ops(_review(_reviews(apiserver), path, obj)))


def test_a_raycluster_under_an_unqueued_rayjob_is_suspended() -> None:
    """The case the brief names: a RayCluster naming a queue under a RayJob (its integration on) that names none."""
    path, make = CASES["raycluster"]
    obj = _owned(make(), "ray.io/v1", "RayJob")
    assert _held("raycluster", _ops(_review(_reviews(_Apiserver(("RayJob", "parent", {}))), path, obj)))
    queued = _Apiserver(("RayJob", "parent", {"labels": {Q: "lq"}}))
    assert not _held("raycluster", _ops(_review(_reviews(queued), path, _owned(make(), "ray.io/v1", "RayJob"))))


def test_a_walk_that_fails_refuses_the_object_as_the_job_webhook_does() -> None:
    """A parent the walk follows that is not there: refused 404, as the Job webhook refuses a Job."""
    path, make = CASES["jobset"]
    response = _review(_reviews(_Apiserver()), path, _owned(make(), "batch/v1", "Job"))
    assert response["allowed"] is False and response["status"]["code"] == 404
    assert "Job team/parent, controller of a job, not found" in response["status"]["message"]
