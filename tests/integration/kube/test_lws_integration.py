"""Kueue's LeaderWorkerSet integration against the real apiserver, with
``leaderworkerset.x-k8s.io/leaderworkerset`` among the frameworks (the first test without ``pod``, which the
LeaderWorkerSet integration turns on by itself, as Kueue since v0.15; the others with it).

The LWS project is not installed: leaderworkerset.x-k8s.io/v1 is served from the minimal CRD of
:func:`connectors.k8s.crds.leaderworkerset_crd` and no LWS controller runs, so the test plays it: it makes each
group's leader and workers (their set name, group index, worker index, a worker's leader name) from the templates
as stored — which kueue-es's LeaderWorkerSet webhook (registered for this test's namespace) marked
``kueue.x-k8s.io/pod-suspending-parent: leaderworkerset``. A queued
LeaderWorkerSet of 2 groups of 3 pods gets 2 Workloads (``leader`` 1 + ``worker`` 2, owned by it); the Pod webhook
gates its pods, the LeaderWorkerSet integration makes each pod a member of its group's prebuilt pod group; both
Workloads are admitted and every pod is ungated with the flavor's node labels. Scaled down to one group, the second
group's Workload is deleted. Under ``manageJobsWithoutQueueName``, a set naming no queue has its pods made members
too, with no queue name, its group's Workload waiting in no queue.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    free_port,
    get,
    kueue_es,
    pod_webhooks,
    queues,
    scheduling_gates,
)

from connectors.k8s import crds, lws_webhook
from connectors.k8s import leaderworkerset as lw
from connectors.k8s.certs import ca_bundle, self_signed
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import Forbidden, NotFound
from connectors.k8s.pod_webhook import namespace_lookup
from connectors.k8s.resources import BY_KIND, LEADER_WORKER_SETS
from connectors.k8s.validating import VALIDATING_CONFIGS
from connectors.k8s.webhook import MUTATING_CONFIGS, WebhookServer, default_queue_lookup, register
from kueue_es.scheduler.config import LWS_FRAMEWORK, SchedulerConfig, load_config

pytestmark = pytest.mark.kube
NAMESPACES = BY_KIND["Namespace"]
Q = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
GATE = "kueue.x-k8s.io/admission"
MARKED = {lw.SUSPENDING_PARENT: lw.FRAMEWORK_NAME, lw.SERVING: "true"}
"""What Kueue's LeaderWorkerSet webhook puts in both templates of a set it holds."""


def _template(role: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"role": role}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "1"}}}]}}


def _lws(ns: str, name: str, replicas: int, size: int) -> dict[str, Any]:
    return {"apiVersion": LEADER_WORKER_SETS.api_version, "kind": lw.KIND,
            "metadata": {"name": name, "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"replicas": replicas, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {"size": size, "leaderTemplate": _template("leader"),
                                              "workerTemplate": _template("worker")}}}


def _pod(lws: dict[str, Any], group: int, worker: int) -> dict[str, Any]:
    """A pod as the LWS controller makes one: ``<name>-<group>`` the leader, ``<name>-<group>-<worker>`` a worker."""
    name, ns = lws["metadata"]["name"], lws["metadata"]["namespace"]
    lwt = lws["spec"]["leaderWorkerTemplate"]
    template = lwt["leaderTemplate"] if worker == 0 else lwt["workerTemplate"]
    leader = f"{name}-{group}"
    annotations = dict(template["metadata"].get("annotations") or {})
    if worker:
        annotations[lw.LEADER_NAME_ANNOTATION] = leader
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": leader if worker == 0 else f"{leader}-{worker}", "namespace": ns,
                         "labels": {**template["metadata"]["labels"], lw.SET_NAME_LABEL: name,
                                    lw.GROUP_INDEX_LABEL: str(group), lw.WORKER_INDEX_LABEL: str(worker)},
                         "annotations": annotations},
            "spec": template["spec"]}


@contextlib.asynccontextmanager
async def _lws_webhooks(kc: KubeClient, certs: Path, label: str, sfx: str, config: SchedulerConfig
                        ) -> AsyncIterator[WebhookServer]:
    """kueue-es's LeaderWorkerSet webhooks served as a replica with ``config`` serves them, registered fail-closed
    (each in a configuration ``<label>-lws-<sfx>``) for the namespaces labelled ``label=<sfx>`` only."""
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(certs)
    queues_lookup = default_queue_lookup(kc)
    hooks = lws_webhook.reviewers(lws_webhook.LeaderWorkerSetWebhooks.of(config), namespace_lookup(kc), queues_lookup)
    server = WebhookServer(queues_lookup, None, {}, parents=hooks)
    port = free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    name, url, selector = f"{label}-lws-{sfx}", f"https://127.0.0.1:{port}", {"matchLabels": {label: sfx}}
    configs = ((MUTATING_CONFIGS, "MutatingWebhookConfiguration", lws_webhook.MUTATING_PATH, True),
               (VALIDATING_CONFIGS, "ValidatingWebhookConfiguration", lws_webhook.VALIDATING_PATH, False))
    try:
        for _, config_kind, path, is_mutating in configs:
            hook = lws_webhook.registration({**ca_bundle(bundle.ca_pem), "url": url + path}, selector, on=True,
                                            mutating=is_mutating)
            await register(kc, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": config_kind,
                                "metadata": {"name": name}, "webhooks": [hook]})
        yield server
    finally:
        for resource, *_ in configs:
            with contextlib.suppress(Exception):
                await kc.delete(resource, name)
        await server.stop()


async def _created_marked(kc: KubeClient, doc: dict[str, Any]) -> dict[str, Any] | None:
    """Create ``doc`` once the mutating webhook marks it (the apiserver picks configurations up asynchronously: an
    unmarked dry run means not yet)."""
    ns = doc["metadata"]["namespace"]
    with contextlib.suppress(Exception):
        probe = msgspec.json.decode(await kc.request("POST", LEADER_WORKER_SETS.collection_path(ns),
                                                     query=[("dryRun", "All")], body=doc))
        if probe["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"].get("annotations") == MARKED:
            return msgspec.json.decode(await kc.create(LEADER_WORKER_SETS, doc, ns))
    return None


@pytest.mark.asyncio
async def test_each_group_of_a_queued_leaderworkerset_is_admitted_on_its_own_workload(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", LWS_FRAMEWORK]}})  # pod: turned on by LWS
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.leaderworkerset_crd()])
        async with pod_webhooks(kc, tmp_path / "certs", "kueue-es-lws-test", sfx, config), \
                _lws_webhooks(kc, tmp_path / "lws-certs", "kueue-es-lws-test", sfx, config):
            q = await queues(kc, "lws", {"cpu": 6}, sfx=sfx, flavor_labels={"pool": "a"})
            await kc.patch(NAMESPACES, q.ns, {"metadata": {"labels": {"kueue-es-lws-test": sfx}}})
            lws = await eventually(lambda: _created_marked(kc, _lws(q.ns, "serve", 2, 3)),
                                   what="the LeaderWorkerSet stored with its templates marked by the webhook")
            uid = lws["metadata"]["uid"]
            names = [lw.workload_name("serve", uid, g) for g in (0, 1)]
            async with kueue_es(kc, tmp_path / "log", config=config):
                async def admitted(name: str) -> dict[str, Any] | None:
                    with contextlib.suppress(Exception):
                        wl = await get(kc, "Workload", name, q.ns)
                        return wl if wl.get("status", {}).get("admission") else None
                    return None

                for name in names:
                    wl = await eventually(lambda n=name: admitted(n), what=f"the group workload {name} admitted")
                    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1),
                                                                                          ("worker", 2)]
                    owner = wl["metadata"]["ownerReferences"][0]
                    assert (owner["kind"], owner["uid"], owner["controller"]) == (lw.KIND, uid, True)

                # play the LWS controller: each group's leader, then its workers, gated by the Pod webhook
                pods = [_pod(lws, g, w) for g in (0, 1) for w in range(3)]
                for pod in pods:
                    made = await create(kc, pod)
                    assert GATE in scheduling_gates(made), made["metadata"]["name"]
                    assert not made["metadata"].get("finalizers"), "no Kueue finalizer (Kueue #8530)"

                async def ungated(pod_name: str) -> dict[str, Any] | None:
                    pod = await get(kc, "Pod", pod_name, q.ns)
                    return pod if not scheduling_gates(pod) else None

                for pod in pods:
                    pod_name = pod["metadata"]["name"]
                    running = await eventually(lambda p=pod_name: ungated(p), what=f"{pod_name} ungated")
                    labels, annotations = running["metadata"]["labels"], running["metadata"]["annotations"]
                    group = names[int(labels[lw.GROUP_INDEX_LABEL])]
                    # WorkloadIdentifierAnnotations (beta, on): group and prebuilt names as annotations only
                    assert annotations[GROUP] == group and annotations[PREBUILT] == group
                    assert GROUP not in labels and PREBUILT not in labels
                    assert labels[Q] == "user-queue" and labels["kueue.x-k8s.io/managed"] == "true"
                    role = "leader" if labels[lw.WORKER_INDEX_LABEL] == "0" else "worker"
                    assert annotations["kueue.x-k8s.io/role-hash"] == role
                    assert running["spec"]["nodeSelector"] == {"pool": "a"}, pod_name
                assert len({(await get(kc, "Workload", n, q.ns))["metadata"]["uid"] for n in names}) == 2

                # scaled down to one group: the second group's Workload is deleted
                await kc.patch(LEADER_WORKER_SETS, "serve", {"spec": {"replicas": 1}}, q.ns)

                async def second_gone() -> bool:
                    with contextlib.suppress(NotFound):
                        await get(kc, "Workload", names[1], q.ns)
                        return False
                    return True

                await eventually(second_gone, what="the scaled-down group's workload deleted")
                assert await admitted(names[0]), "the first group's workload stays admitted"


@pytest.mark.asyncio
async def test_a_set_naming_no_queue_under_manage_jobs_without_queue_name_has_its_pods_made_members(
        kube_apiserver, tmp_path) -> None:
    """Under ``manageJobsWithoutQueueName`` a LeaderWorkerSet naming no queue is Kueue's: its templates are marked,
    its group's Workload names no queue, and its pods are made members of their group all the same (no queue name
    given, as Kueue's reconciler gives none): the pod integration takes the group onto that Workload, which waits in
    no queue, the pods gated."""
    sfx = secrets.token_hex(3)
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.leaderworkerset_crd()])
        q = await queues(kc, "lws-noq", {"cpu": 6}, sfx=sfx)
        # only this test's namespace: the session's other tests make objects without a queue name too
        config = load_config({"manageJobsWithoutQueueName": True,
                              "managedJobsNamespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": q.ns}},
                              "integrations": {"frameworks": ["batch/job", "pod", LWS_FRAMEWORK]}})
        async with pod_webhooks(kc, tmp_path / "certs", "kueue-es-lws-noq", sfx, config), \
                _lws_webhooks(kc, tmp_path / "lws-certs", "kueue-es-lws-noq", sfx, config):
            await kc.patch(NAMESPACES, q.ns, {"metadata": {"labels": {"kueue-es-lws-noq": sfx}}})
            doc = _lws(q.ns, "noq", 1, 2)
            del doc["metadata"]["labels"][Q]
            lws = await eventually(lambda: _created_marked(kc, doc),
                                   what="the LeaderWorkerSet naming no queue stored with its templates marked")
            name = lw.workload_name("noq", lws["metadata"]["uid"], 0)
            async with kueue_es(kc, tmp_path / "log", config=config):
                async def workload() -> dict[str, Any] | None:
                    with contextlib.suppress(NotFound):
                        return await get(kc, "Workload", name, q.ns)
                    return None

                wl = await eventually(workload, what="the group's Workload")
                assert "queueName" not in wl["spec"]
                pods = [_pod(lws, 0, w) for w in range(2)]
                for pod in pods:
                    assert GATE in scheduling_gates(await create(kc, pod))

                async def member(pod_name: str) -> dict[str, Any] | None:
                    pod = await get(kc, "Pod", pod_name, q.ns)
                    return pod if pod["metadata"]["labels"].get("kueue.x-k8s.io/managed") == "true" else None

                for pod in pods:
                    made = await eventually(lambda p=pod["metadata"]["name"]: member(p), what="the pod a member")
                    labels, annotations = made["metadata"]["labels"], made["metadata"]["annotations"]
                    # WorkloadIdentifierAnnotations (beta, on): group and prebuilt names as annotations only
                    assert annotations[GROUP] == name and annotations[PREBUILT] == name
                    assert Q not in labels and GROUP not in labels and PREBUILT not in labels
                    assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "2"

                async def owned_by_its_pods() -> dict[str, Any] | None:
                    wl = await get(kc, "Workload", name, q.ns)
                    owners = {r["kind"] for r in wl["metadata"].get("ownerReferences") or []}
                    return wl if owners == {lw.KIND, "Pod"} else None

                wl = await eventually(owned_by_its_pods, what="the group taken onto its Workload by the pod integration")
                assert "queueName" not in wl["spec"] and "admission" not in (wl.get("status") or {})
                for pod in pods:
                    assert GATE in scheduling_gates(await get(kc, "Pod", pod["metadata"]["name"], q.ns))


@pytest.mark.asyncio
async def test_the_validating_webhook_refuses_bad_tas_annotations_on_the_pod_templates(kube_apiserver,
                                                                                         tmp_path) -> None:
    """Kueue v0.20: the LeaderWorkerSet webhook checks its pod templates' TAS annotations as any job's, on create
    and on update — here a worker slice larger than a group's 2 workers, and a pod index offset beside a pod-set
    group name."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod", LWS_FRAMEWORK]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.leaderworkerset_crd()])
        async with _lws_webhooks(kc, tmp_path / "lws-certs", "kueue-es-lws-tas", sfx, config):
            ns = f"lws-tas-{sfx}"
            await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": ns, "labels": {"kueue-es-lws-tas": sfx}}})
            good = _lws(ns, "serve", 1, 3)
            good["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
                "kueue.x-k8s.io/podset-required-topology": "block",
                "kueue.x-k8s.io/podset-slice-required-topology": "rack", "kueue.x-k8s.io/podset-slice-size": "2"}

            async def marked() -> bool:  # the configurations are picked up asynchronously
                with contextlib.suppress(Exception):
                    probe = msgspec.json.decode(await kc.request(
                        "POST", LEADER_WORKER_SETS.collection_path(ns), query=[("dryRun", "All")], body=good))
                    worker = probe["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
                    return worker.get(lw.SUSPENDING_PARENT) == lw.FRAMEWORK_NAME
                return False

            await eventually(marked, what="the webhooks in effect")
            stored = msgspec.json.decode(await kc.create(LEADER_WORKER_SETS, good, ns))
            assert stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"][
                "kueue.x-k8s.io/pod-index-offset"] == "1", "workers rank from 1 beside their leader (#8685)"
            too_big = _lws(ns, "too-big", 1, 3)
            too_big["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
                **good["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"],
                "kueue.x-k8s.io/podset-slice-size": "3"}

            async def refusal() -> str | None:  # the validating configuration is picked up asynchronously too
                try:
                    await kc.request("POST", LEADER_WORKER_SETS.collection_path(ns), query=[("dryRun", "All")],
                                     body=too_big)
                except Forbidden as exc:
                    return str(exc)
                return None

            assert ('spec.leaderWorkerTemplate.workerTemplate.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: '
                    'Invalid value: "3": must not be greater than pod set count 2') in await eventually(
                        refusal, what="the validating webhook in effect")
            grouped = {"kueue.x-k8s.io/podset-preferred-topology": "rack", "kueue.x-k8s.io/podset-group-name": "g"}
            with pytest.raises(Forbidden, match="kueue.x-k8s.io/pod-index-offset\\]: Forbidden: may not be set when"):
                await kc.patch(LEADER_WORKER_SETS, "serve", {"spec": {"leaderWorkerTemplate": {
                    "leaderTemplate": {"metadata": {"annotations": grouped}},
                    "workerTemplate": {"metadata": {"annotations": {
                        **grouped, "kueue.x-k8s.io/pod-index-offset": "1"}}}}}}, ns)
