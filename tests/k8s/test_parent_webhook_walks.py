"""The Deployment and StatefulSet webhooks decide whether Kueue holds the object by Kueue's ancestor walk
(``WorkloadShouldBeSuspended``), as the other kinds' webhooks do, not by their controller's kind."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec

from connectors.k8s import deployment_webhook as dw
from connectors.k8s import statefulset_webhook as sw
from connectors.k8s.errors import NotFound
from connectors.k8s.webhook import ancestry_lookup
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
LWS = "leaderworkerset.x-k8s.io/v1"


class _Apiserver:
    """Answers GETs as the client does (the body's bytes), recording them."""

    def __init__(self, *objects: tuple[str, str, dict]) -> None:
        self.objects = {(kind, name): {"metadata": {"name": name, "namespace": "team", **meta}}
                        for kind, name, meta in objects}
        self.reads: list[tuple[str, str]] = []

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        self.reads.append((resource.kind, name))
        if (resource.kind, name) not in self.objects:
            raise NotFound(f"{resource.kind} {name} not found", 404, "NotFound")
        return msgspec.json.encode(self.objects[(resource.kind, name)])


def _obj(kind: str, labels: dict, owner: tuple[str, str, str] | None) -> dict:
    meta: dict = {"name": "x", "namespace": "team", "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2],
                                    "uid": f"uid-{owner[2]}", "controller": True}]
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": {"replicas": 2, "template": template}}


def _mutate(reviews: dict, path: str, obj: dict) -> dict:
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    return asyncio.run(reviews[path](body))["response"]


def _held(response: dict) -> bool:
    ops = msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []
    return any(PARENT in str(op) for op in ops)


async def _namespace_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


async def _no_default_queue(name: str) -> bool:
    return False


def _statefulset_reviews(api: _Apiserver, without_queue: bool = False) -> dict:
    config = load_config({"integrations": {"frameworks": ["pod", "statefulset", "leaderworkerset.x-k8s.io/"
                                                                               "leaderworkerset"]},
                          "manageJobsWithoutQueueName": without_queue})
    return sw.reviewers(dw.ParentDefaulting.of(config, "statefulset"), _namespace_labels, _no_default_queue,
                        ancestry_lookup(api, config))  # type: ignore[arg-type]


def test_a_queued_statefulset_a_queued_leaderworkerset_made_is_not_held() -> None:
    """The StatefulSet of a queued LeaderWorkerSet (whose Workload admits its pods) is left as made: Kueue's walk
    finds the set; before, its queue name alone made it held and grouped, queued twice. Under an unqueued set the
    walk finds nothing and the queued StatefulSet is held."""
    queued_set = _Apiserver(("LeaderWorkerSet", "set", {"uid": "uid-set", "labels": {Q: "lq"}}))
    sts = _obj("StatefulSet", {Q: "lq"}, (LWS, "LeaderWorkerSet", "set"))
    response = _mutate(_statefulset_reviews(queued_set), sw.MUTATING_PATH, sts)
    assert response["allowed"] and not _held(response)
    assert queued_set.reads == [("LeaderWorkerSet", "set")]
    unqueued_set = _Apiserver(("LeaderWorkerSet", "set", {"uid": "uid-set", "labels": {}}))
    assert _held(_mutate(_statefulset_reviews(unqueued_set), sw.MUTATING_PATH, sts))


def test_a_parent_whose_walk_fails_is_refused() -> None:
    """A controller of a kind the walk follows that is not there: refused as the other webhooks refuse (404),
    where before the StatefulSet was held on its controller's kind alone."""
    response = _mutate(_statefulset_reviews(_Apiserver()), sw.MUTATING_PATH,
                       _obj("StatefulSet", {Q: "lq"}, (LWS, "LeaderWorkerSet", "gone")))
    assert response["allowed"] is False and response["status"]["code"] == 404
    assert "LeaderWorkerSet team/gone" in response["status"]["message"]


def test_a_deployment_under_a_kind_not_followed_is_decided_on_its_own_labels() -> None:
    """A Deployment's usual controller is none, or of a kind no integration runs: the walk stops at once and
    reads nothing; queued, it is held."""
    config = load_config({"integrations": {"frameworks": ["pod", "deployment"]}})
    api = _Apiserver()
    reviews = dw.reviewers(dw.ParentDefaulting.of(config, "deployment"), _namespace_labels, _no_default_queue,
                           ancestry_lookup(api, config))  # type: ignore[arg-type]
    assert _held(_mutate(reviews, dw.MUTATING_PATH, _obj("Deployment", {Q: "lq"}, ("example.com/v1", "Foo", "f"))))
    assert not _held(_mutate(reviews, dw.MUTATING_PATH, _obj("Deployment", {}, None)))
    assert api.reads == []


def test_a_statefulset_being_deleted_is_not_walked_under_skip_ancestor_check_for_deleted_workloads() -> None:
    """The garbage collector's update of a StatefulSet being deleted whose LeaderWorkerSet is gone already: under
    ``SkipAncestorCheckForDeletedWorkloads`` (beta, on) Kueue neither walks nor holds it, so the update is allowed
    and nothing is read; off, the walk runs and refuses it for the missing owner, as before the gate."""
    sts = _obj("StatefulSet", {Q: "lq"}, (LWS, "LeaderWorkerSet", "gone"))
    sts["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "UPDATE", "namespace": "team", "object": sts,
                                            "oldObject": sts}})
    for gate_on in (True, False):
        api = _Apiserver()
        config = load_config({"integrations": {"frameworks": ["pod", "statefulset",
                                                              "leaderworkerset.x-k8s.io/leaderworkerset"]},
                              "featureGates": {"SkipAncestorCheckForDeletedWorkloads": gate_on}})
        reviews = sw.reviewers(dw.ParentDefaulting.of(config, "statefulset"), _namespace_labels, _no_default_queue,
                               ancestry_lookup(api, config))  # type: ignore[arg-type]
        response = asyncio.run(reviews[sw.MUTATING_PATH](body))["response"]
        if gate_on:
            assert response["allowed"] and not _held(response) and api.reads == []
        else:
            assert response["allowed"] is False and response["status"]["code"] == 404
            assert api.reads == [("LeaderWorkerSet", "gone")]
    sts["metadata"].pop("deletionTimestamp")
    on = load_config({"integrations": {"frameworks": ["pod", "statefulset",
                                                      "leaderworkerset.x-k8s.io/leaderworkerset"]}})
    reviews = sw.reviewers(dw.ParentDefaulting.of(on, "statefulset"), _namespace_labels, _no_default_queue,
                           ancestry_lookup(_Apiserver(), on))  # type: ignore[arg-type]
    assert _mutate(reviews, sw.MUTATING_PATH, sts)["allowed"] is False, "not being deleted: walked, refused"


# --- a parent of a kind an external controller runs for Kueue (``integrations.externalFrameworks``) ---------

FOO = ("example.com/v1", "Foo", "f")
EXTERNAL = {"integrations": {"frameworks": ["batch/job", "pod", "deployment"],
                             "externalFrameworks": ["Foo.v1.example.com"]}}


class _ExternalApiserver(_Apiserver):
    """:class:`_Apiserver` that also serves the discovery document of ``example.com/v1`` (its kind ``Foo``,
    resource ``foos``), as the apiserver does once the kind's CRD is installed."""

    async def request(self, method: str, path: str, **_: Any) -> bytes:
        self.reads.append(("discovery", path))
        if path != "/apis/example.com/v1":
            raise NotFound(f"GET {path}: 404", 404, "NotFound")
        return msgspec.json.encode({"kind": "APIResourceList", "groupVersion": "example.com/v1",
                                    "resources": [{"name": "foos", "kind": "Foo", "namespaced": True},
                                                  {"name": "foos/status", "kind": "Foo"}]})


def _review(obj: dict) -> bytes:
    return msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                            "object": obj}})


def _job_review(api: _Apiserver, config: Any, job: dict) -> dict:
    from connectors.k8s import webhook

    async def has_default_queue(namespace: str) -> bool:
        return True

    parent_runs = webhook.kueue_parents(frozenset(config.enabled_frameworks), config.external_job_kinds)
    ancestry = ancestry_lookup(api, config)  # type: ignore[arg-type]
    return asyncio.run(webhook.review(_review(job), has_default_queue, parent_runs=parent_runs,
                                      managed_ancestry=ancestry))["response"]


def _deployment_held(api: _Apiserver, config: Any) -> bool:
    reviews = dw.reviewers(dw.ParentDefaulting.of(config, "deployment"), _namespace_labels, _no_default_queue,
                           ancestry_lookup(api, config))  # type: ignore[arg-type]
    response = _mutate(reviews, dw.MUTATING_PATH, _obj("Deployment", {Q: "lq"}, FOO))
    assert response["allowed"]
    return _held(response)


def test_a_queued_parent_of_an_external_framework_kind_leaves_its_children_to_it() -> None:
    """Kueue registers each ``integrations.externalFrameworks`` kind as a job type of its own
    (``RegisterExternalJobType``): its ancestor walk reads a controller of that kind (``isKnownOwner``) and
    takes it for a Kueue-managed parent (``getJobTypeForOwner``, so ``IsOwnerManagedByKueue``). A queued
    Deployment or batch Job under a queued ``Foo`` is left to it (the external controller makes the Foo's
    Workload), not held and queued apart (quota counted twice), and the Job gets no default queue; under an
    unqueued Foo the Deployment is held."""
    config = load_config(EXTERNAL)
    api = _ExternalApiserver(("Foo", "f", {"uid": "uid-f", "labels": {Q: "lq"}}))
    assert not _deployment_held(api, config)
    assert api.reads == [("discovery", "/apis/example.com/v1"), ("Foo", "f")]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "j", "namespace": "team", "labels": {}, "ownerReferences": [
            {"apiVersion": FOO[0], "kind": FOO[1], "name": "f", "uid": "uid-f", "controller": True}]},
        "spec": {"suspend": False, "template": {}}}
    for labels in ({Q: "lq"}, {}):
        job["metadata"]["labels"] = labels
        response = _job_review(api, config, job)
        assert response["allowed"] and "patch" not in response, labels
    unqueued = _ExternalApiserver(("Foo", "f", {"uid": "uid-f", "labels": {}}))
    assert _deployment_held(unqueued, config), "an unqueued Foo is no ancestor"


def test_an_unqueued_pod_under_a_parent_of_an_external_kind_is_left_to_it_without_a_queue_name() -> None:
    """Under ``manageJobsWithoutQueueName`` every parent of a kind Kueue manages is Kueue's, an external
    kind's too: a Pod (no queue name) under a ``Foo`` is left as made, not gated as a Pod of its own; under a
    kind not listed it is gated."""
    from connectors.k8s import pod_webhook

    config = load_config({**EXTERNAL, "manageJobsWithoutQueueName": True})
    api = _ExternalApiserver(("Foo", "f", {"uid": "uid-f", "labels": {}}))

    def pod_patched(owner: tuple[str, str, str]) -> bool:
        pod = _obj("Pod", {}, owner)
        pod.update(apiVersion="v1", spec={"containers": [{"name": "c", "image": "busybox"}]})
        ancestry = ancestry_lookup(api, config)  # type: ignore[arg-type]
        response = asyncio.run(pod_webhook.review(_review(pod), pod_webhook.PodDefaulting.of(config),
                                                  _namespace_labels, _no_default_queue, ancestry))["response"]
        assert response["allowed"]
        return "patch" in response

    assert not pod_patched(FOO)
    assert pod_patched(("example.com/v1", "Bar", "b")), "a kind not listed: the Pod is Kueue's to gate"
