"""Kueue's ``integrations.externalFrameworks`` against the real apiserver: a controller of a listed kind is a
parent Kueue manages, run by an external controller that makes its Workload.

``Foo.v1.example.com`` is served from a tiny CRD made here; no Foo controller runs, so the test plays it: it
creates the Foo's Workload (owned by the Foo, in its queue) and the batch/v1 Job the Foo controls, and starts
that Job. The Job names a queue of its own, yet it is the queued Foo's child, as in Kueue
(``RegisterExternalJobType``, ``FindAncestorJobManagedByKueue``): the Job webhook (kueue-es's, as ``serve``
wires it from the Configuration, registered for this test's namespace only) leaves it running, it gets no
Workload of its own, the Job integration (``SkipChildJobSuspension`` off) suspends it while the Foo's Workload
is missing or not admitted (Normal ``Suspended`` "Kueue managed child job suspended") and leaves it running
once that Workload is admitted. Kueue never starts a child: the Foo's controller does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import admitted_workload, connect, create, eventually, free_port, get, job, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.certs import self_signed
from connectors.k8s.recorder import EVENTS
from connectors.k8s.resources import BY_KIND, Resource
from connectors.k8s.settings import KubeSettings
from connectors.k8s.webhook import MUTATING_CONFIGS, configuration, register
from connectors.k8s.webhook import serve as serve_webhook
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
KUEUE = "kueue.x-k8s.io/v1beta2"
Q = "kueue.x-k8s.io/queue-name"
FOOS = Resource("Foo", "example.com", "v1", "foos", True)
SUSPENDED = ("Suspended", "Kueue managed child job suspended")
CONFIG = load_config({"integrations": {"frameworks": ["batch/job"],
                                      "externalFrameworks": ["Foo.v1.example.com"]},
                      "featureGates": {"SkipChildJobSuspension": False}})  # children held (v0.19)


def _foo_crd() -> dict[str, Any]:
    """A namespaced ``foos.example.com`` serving ``Foo`` at v1, its spec kept as written."""
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Foo", "listKind": "FooList", "plural": "foos", "singular": "foo"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def _controlled_by(foo: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"apiVersion": FOOS.api_version, "kind": "Foo", "name": foo["metadata"]["name"],
             "uid": foo["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]


def _foo_workload(foo: dict[str, Any]) -> dict[str, Any]:
    """The Workload the Foo's controller makes for it: owned by the Foo, in its queue, one pod of 1 cpu."""
    meta = foo["metadata"]
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": f"foo-{meta['name']}", "namespace": meta["namespace"],
                         "ownerReferences": _controlled_by(foo)},
            "spec": {"queueName": meta["labels"][Q], "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


async def _events_on_job(kc: Any, ns: str, name: str) -> list[tuple[str, str]]:
    selector = f"involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Job"
    raw = await kc.request("GET", EVENTS.collection_path(ns), query=[("fieldSelector", selector)])
    return [(e["reason"], e["message"]) for e in msgspec.json.decode(raw)["items"]]


async def _workloads(kc: Any, ns: str) -> list[tuple[str, list[str]]]:
    """(name, owner uids) of the Workloads in ``ns``."""
    raw = await kc.request("GET", BY_KIND["Workload"].collection_path(ns))
    return sorted((w["metadata"]["name"], [r["uid"] for r in w["metadata"].get("ownerReferences") or []])
                  for w in msgspec.json.decode(raw)["items"])


@contextlib.asynccontextmanager
async def _job_webhook(kc: Any, ns: str):
    """kueue-es's webhook server as ``serve`` wires it from :data:`CONFIG`, its mutating webhooks registered
    fail-closed for ``ns`` alone; once a queued Job of no parent is suspended there, the apiserver calls
    it."""
    port = free_port()
    bundle = self_signed(["127.0.0.1"])
    settings = KubeSettings(webhook_port=port, webhook_address="127.0.0.1", webhook_hosts="127.0.0.1",
                            lease_namespace=ns)
    server = await serve_webhook(kc, settings, bundle, config=CONFIG)
    name = f"kueue-es-ext-{ns}"
    try:
        selector = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
        await register(kc, configuration(bundle.ca_pem, url=f"https://127.0.0.1:{port}", name=name,
                                         namespace_selector=selector))

        async def effective() -> bool:
            with contextlib.suppress(Exception):
                out = await kc.request("POST", BY_KIND["Job"].collection_path(ns), query=[("dryRun", "All")],
                                       body=job(ns, "probe", "user-queue", suspend=False))
                return msgspec.json.decode(out)["spec"]["suspend"] is True
            return False

        await eventually(effective, what="the Job webhook in effect")
        yield server
    finally:
        with contextlib.suppress(Exception):
            await kc.delete(MUTATING_CONFIGS, name)
        await server.stop()


@pytest.mark.asyncio
async def test_a_job_under_a_queued_parent_of_an_external_kind_runs_only_on_that_parents_admitted_workload(
        kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[_foo_crd()])
        q = await queues(kc, "ext", {"cpu": 2}, stopPolicy="Hold")  # nothing admitted until released
        foo = msgspec.json.decode(await kc.create(FOOS, {
            "apiVersion": FOOS.api_version, "kind": "Foo",
            "metadata": {"name": "f", "namespace": q.ns, "labels": {Q: "user-queue"}}, "spec": {}}, q.ns))
        async with _job_webhook(kc, q.ns), kueue_es(kc, tmp_path / "log", config=CONFIG) as (_, journal):
            # play the Foo controller: a Job it controls, naming a queue of its own, created running
            doc = job(q.ns, "child", "user-queue", suspend=False)
            doc["metadata"]["ownerReferences"] = _controlled_by(foo)
            child = await create(kc, doc)
            assert child["spec"]["suspend"] is False, "the webhook leaves the queued Foo's child to it"
            job_uid = child["metadata"]["uid"]

            async def held(times: int) -> bool:
                suspended = (await get(kc, "Job", "child", q.ns))["spec"].get("suspend") is True
                return suspended and (await _events_on_job(kc, q.ns, "child")).count(SUSPENDED) >= times

            await eventually(lambda: held(1), what="the child suspended: the Foo has no Workload")

            # play the Foo controller: its Workload, owned by it, in its queue (the ClusterQueue holds it)
            wl = await create(kc, _foo_workload(foo))
            await eventually(lambda: f"{q.ns}/{wl['metadata']['name']}" in journal.mirror.workloads,
                             what="the Foo's Workload seen")
            await kc.patch(BY_KIND["Job"], "child", {"spec": {"suspend": False}}, q.ns)
            await eventually(lambda: held(2), what="the child suspended again: the Foo's Workload is pending")

            await kc.patch(BY_KIND["ClusterQueue"], q.cq, {"spec": {"stopPolicy": "None"}})
            admitted = await admitted_workload(kc, "foo-f", q.ns, "the Foo's Workload admitted")
            assert admitted["status"]["admission"]["clusterQueue"] == q.cq
            # play the Foo controller: it starts its Job once its Workload is admitted
            await kc.patch(BY_KIND["Job"], "child", {"spec": {"suspend": False}}, q.ns)
            await asyncio.sleep(3)  # seen by the Job integration: a held child would be suspended by now
            assert (await get(kc, "Job", "child", q.ns))["spec"].get("suspend") is False, "left running"
            assert (await _events_on_job(kc, q.ns, "child")).count(SUSPENDED) == 2
            assert await _workloads(kc, q.ns) == [("foo-f", [foo["metadata"]["uid"]])], \
                f"the child (uid {job_uid}) is not queued apart"
