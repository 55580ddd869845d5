"""The webhooks' ancestor walk reads its parents from what the kueue-es process holds (the connector's parents
registry and the log's Jobs) before the apiserver, deciding as it does on the same parents."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from connectors.k8s.child_jobs import Parents
from connectors.k8s.errors import NotFound
from connectors.k8s.webhook import HeldParents, ancestry_lookup
from events import objects as o
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
CONFIG = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})


class _Apiserver:
    """Answers GETs as the client does (the body's bytes), counting them."""

    def __init__(self, *objects: tuple[str, str, dict]) -> None:
        self.objects = {(kind, name): {"metadata": {"name": name, "namespace": "team", **meta}}
                        for kind, name, meta in objects}
        self.reads: list[tuple[str, str]] = []

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        self.reads.append((resource.kind, name))
        if (resource.kind, name) not in self.objects:
            raise NotFound(f"{resource.kind} {name} not found", 404, "NotFound")
        return msgspec.json.encode(self.objects[(resource.kind, name)])


class _Held(msgspec.Struct):
    metadata: o.ObjectMeta


def _meta(name: str, uid: str, labels: dict[str, str], owner: tuple[str, str, str] | None = None) -> o.ObjectMeta:
    refs = [] if owner is None else [o.OwnerReference(api_version=owner[0], kind=owner[1], name=owner[2],
                                                      uid=f"uid-{owner[2]}", controller=True)]
    return o.ObjectMeta(name=name, namespace="team", uid=uid, labels=labels, owner_references=refs)


def _child(kind: str, api_version: str, parent: str, uid: str) -> dict:
    return {"metadata": {"name": "child", "namespace": "team", "labels": {Q: "lq"}, "ownerReferences": [
        {"apiVersion": api_version, "kind": kind, "name": parent, "uid": uid, "controller": True}]}}


def _walk(api: _Apiserver, held: HeldParents, obj: dict) -> bool:
    return asyncio.run(ancestry_lookup(api, CONFIG, held)("team", obj))  # type: ignore[arg-type]


def _held(jobsets: dict[str, o.ObjectMeta], jobs: dict[str, o.ObjectMeta]) -> HeldParents:
    parents = Parents()
    parents.hold("JobSet", {f"team/{n}": _Held(m) for n, m in jobsets.items()})
    held = HeldParents()
    held.attach(parents, lambda: {f"team/{n}": _Held(m) for n, m in jobs.items()})  # type: ignore[misc]
    return held


def test_the_walk_reads_held_parents_and_asks_the_apiserver_nothing() -> None:
    """A Job under a Job under a queued JobSet, all held: the walk finds the JobSet without one GET (before, one GET
    per parent inside the admission request); the unqueued JobSet, held too, leaves the child top-level."""
    api = _Apiserver()
    driver = _meta("driver", "uid-driver", {}, ("jobset.x-k8s.io/v1alpha2", "JobSet", "js"))
    held = _held({"js": _meta("js", "uid-js", {Q: "lq"})}, {"driver": driver})
    assert _walk(api, held, _child("Job", "batch/v1", "driver", "uid-driver")) is True
    assert api.reads == []
    unqueued = _held({"js": _meta("js", "uid-js", {})}, {"driver": driver})
    assert _walk(api, unqueued, _child("Job", "batch/v1", "driver", "uid-driver")) is False
    assert api.reads == []


def test_a_parent_not_held_is_read_from_the_apiserver() -> None:
    """Nothing attached (a standby), a parent the informer has not brought yet, or a held copy of another uid (the
    parent deleted and made again): the walk reads the apiserver, and decides as it would there."""
    api = _Apiserver(("JobSet", "js", {"uid": "uid-js", "labels": {Q: "lq"}}))
    child = _child("JobSet", "jobset.x-k8s.io/v1alpha2", "js", "uid-js")
    assert _walk(api, HeldParents(), child) is True
    assert _walk(api, _held({}, {}), child) is True
    stale = _held({"js": _meta("js", "uid-old", {})}, {})
    assert _walk(api, stale, child) is True, "the held JobSet is another object of that name"
    assert api.reads == [("JobSet", "js")] * 3
    detached = _held({"js": _meta("js", "uid-js", {})}, {})
    detached.detach()
    assert _walk(api, detached, child) is True and len(api.reads) == 4, "detached: nothing held any more"


def test_a_parent_neither_held_nor_stored_refuses_as_before() -> None:
    """Missed in memory and not found by the apiserver: the walk's error, as without the cache."""
    from connectors.k8s.child_jobs import OwnerMissing

    api = _Apiserver()
    try:
        _walk(api, _held({}, {}), _child("JobSet", "jobset.x-k8s.io/v1alpha2", "js", "uid-js"))
    except OwnerMissing as exc:
        assert "JobSet team/js" in str(exc)
    else:
        raise AssertionError("a missing parent must fail the walk")
