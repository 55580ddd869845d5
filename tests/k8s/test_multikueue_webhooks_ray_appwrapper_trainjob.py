"""Kueue's managedBy defaulting for MultiKueue in the RayJob, RayCluster, RayService, AppWrapper and TrainJob webhooks
(``ApplyDefaultForManagedBy`` with each kind's ``CanDefaultManagedBy``): under the MultiKueue gate, an object of a
queue whose ClusterQueue has a MultiKueue check, naming no manager or its own controller, is handed to MultiKueue."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import appwrapper_webhook as aww
from connectors.k8s import ray_webhook as rw
from connectors.k8s import trainjob_webhook as tw
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
MANAGED_BY_MK = {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"}
FRAMEWORKS = ["ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice", "workload.codeflare.dev/appwrapper",
              "trainer.kubeflow.org/trainjob"]
CONFIG = load_config({"integrations": {"frameworks": FRAMEWORKS}})
RAY_JOBS, RAY_CLUSTERS = rw.RayWebhooks.of(CONFIG, clusters=False), rw.RayWebhooks.of(CONFIG, clusters=True)


def _ray(multikueue: Any) -> dict[str, Any]:
    return rw.reviewers(RAY_JOBS, RAY_CLUSTERS, _namespace_labels, _has_default_queue, multikueue=multikueue)


KINDS = {
    # kind: (apiVersion, its own controller, mutating path, reviewers given the MultiKueue lookup)
    "RayJob": ("ray.io/v1", "ray.io/kuberay-operator", rw.RAYJOB_KIND.mutating_path, _ray),
    "RayCluster": ("ray.io/v1", "ray.io/kuberay-operator", rw.RAYCLUSTER_KIND.mutating_path, _ray),
    "RayService": ("ray.io/v1", "ray.io/kuberay-operator", rw.RAYSERVICE_KIND.mutating_path,
                   lambda mk: rw.service_reviewers(rw.RayWebhooks.for_services(CONFIG), _namespace_labels,
                                                   _has_default_queue, multikueue=mk)),
    "AppWrapper": ("workload.codeflare.dev/v1beta2", "workload.codeflare.dev/appwrapper-controller",
                   aww.KIND.mutating_path,
                   lambda mk: aww.reviewers(aww.AppWrapperWebhooks.of(CONFIG), _namespace_labels, _has_default_queue,
                                            multikueue=mk)),
    "TrainJob": ("trainer.kubeflow.org/v1alpha1", "trainer.kubeflow.org/trainjob-controller", tw.KIND.mutating_path,
                 lambda mk: tw.reviewers(tw.TrainJobWebhooks.of(CONFIG), _namespace_labels, _has_default_queue,
                                         multikueue=mk)),
}


async def _namespace_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


async def _has_default_queue(name: str) -> bool:
    return False


def _object(kind: str, queue: str | None = "lq", managed_by: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"shutdownAfterJobFinishes": True, "rayClusterSpec": {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray", "image": "ray"}]}}}}}
    if kind == "RayCluster":
        spec = spec["rayClusterSpec"]
    if kind == "RayService":
        spec = {"rayClusterConfig": spec["rayClusterSpec"]}
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {"apiVersion": KINDS[kind][0], "kind": kind,
            "metadata": {"name": "x", "namespace": "team", "labels": {Q: queue} if queue else {}}, "spec": spec}


def _mutate(kind: str, obj: dict[str, Any], multikueue_queues: set[str] | None) -> list[dict[str, Any]]:
    async def multikueue(namespace: str, queue: str) -> bool:
        return f"{namespace}/{queue}" in (multikueue_queues or set())

    _, _, path, reviewers = KINDS[kind]
    reviews = reviewers(None if multikueue_queues is None else multikueue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[path](body))["response"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("own", [False, True])
def test_an_object_of_a_multikueue_queue_is_handed_to_multikueue(kind: str, own: bool) -> None:
    """managedBy unset or the kind's own controller's becomes MultiKueue's, for a queue behind a MultiKueue check."""
    obj = _object(kind, managed_by=KINDS[kind][1] if own else None)
    ops = _mutate(kind, obj, {"team/lq"})
    assert MANAGED_BY_MK in ops
    assert [op for op in ops if op != MANAGED_BY_MK] == _mutate(kind, obj, {"team/other"})  # nothing else changes


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_object_is_not_handed_to_multikueue_otherwise(kind: str) -> None:
    assert MANAGED_BY_MK not in _mutate(kind, _object(kind, managed_by="example.com/other"), {"team/lq"})
    assert MANAGED_BY_MK not in _mutate(kind, _object(kind), {"team/other"})  # no MultiKueue check
    assert MANAGED_BY_MK not in _mutate(kind, _object(kind), None)  # the MultiKueue gate off: no lookup
    assert MANAGED_BY_MK not in _mutate(kind, _object(kind, queue=None), {"team/lq"})  # no queue


def test_another_kinds_controller_is_not_taken_for_the_own_one() -> None:
    """Each kind defaults over its own controller's managedBy only (a RayJob naming the Trainer keeps it)."""
    assert MANAGED_BY_MK not in _mutate("RayJob", _object("RayJob", managed_by=KINDS["TrainJob"][1]), {"team/lq"})
    assert MANAGED_BY_MK not in _mutate("TrainJob", _object("TrainJob", managed_by=KINDS["RayJob"][1]), {"team/lq"})
