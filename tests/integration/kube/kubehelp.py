"""Helpers for the kube integration tests: a connected KubeClient, unique namespaces, object builders."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import inspect
import secrets
import socket
import tempfile
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec
from kubernetes_asyncio import config

from connectors.k8s import (
    crds,
    deployment_webhook,
    framework_webhook,
    jobset_webhook,
    mpijob_webhook,
    ray_webhook,
    statefulset_webhook,
)
from connectors.k8s.certs import ca_bundle, self_signed
from connectors.k8s.client import KubeClient
from connectors.k8s.connector import Connector, schedule
from connectors.k8s.errors import Forbidden, Invalid, Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.pod_webhook import PodDefaulting, namespace_lookup, reviewer
from connectors.k8s.recorder import EVENTS
from connectors.k8s.resources import BY_KIND
from connectors.k8s.validating import VALIDATING_CONFIGS, configuration
from connectors.k8s.webhook import (
    MUTATING_CONFIGS,
    HeldParents,
    WebhookServer,
    ancestry_lookup,
    default_queue_lookup,
    register,
)
from connectors.k8s.webhook import configuration as mutating
from events.filelog import FileLog
from kueue_es.scheduler import DEFAULT, SchedulerConfig, config_record

T = TypeVar("T")
KUEUE = "kueue.x-k8s.io/v1beta2"
NOW = "2026-01-01T00:00:00Z"  # for the status fields a test writes as the job controller would


async def connect(cluster) -> KubeClient:
    return KubeClient(await config.new_client_from_config(config_file=cluster.kubeconfig))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def namespace(kc: KubeClient, prefix: str, labels: dict[str, str] | None = None) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    await kc.create(BY_KIND["Namespace"], {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name, "labels": labels or {}}})
    return name


def lax_crd(kind: str, path: str, rule: str = "maxLength") -> dict:
    """``kind``'s CRD without the ``rule`` at ``path`` (a field of ``spec.versions[].schema``'s object, ``[]``
    an item): the laxer CRD an older kueue-es installed, which stored what the markers now refuse."""
    doc = next(d for d in crds.all_crds() if d["spec"]["names"]["kind"] == kind)
    for version in doc["spec"]["versions"]:
        node = version["schema"]["openAPIV3Schema"]
        for step in path.split("."):
            node = node["properties"].get(step.removesuffix("[]"), {"properties": {}})
            node = node.get("items", node) if step.endswith("[]") else node
        node.pop(rule, None)
    return doc


async def schema_takes(kc: KubeClient, doc: dict[str, Any], takes: bool = True) -> None:
    """Wait until the apiserver's schema for ``doc``'s kind takes it (or, ``takes`` False, refuses it), by dry
    runs of a copy under another name: a CRD's update reaches its handler asynchronously, after
    ``Established``."""
    meta = doc["metadata"]
    probe = {**doc, "metadata": {**meta, "name": f"{meta['name']}-probe"}}
    path = BY_KIND[doc["kind"]].collection_path(meta.get("namespace", ""))

    async def settled() -> bool:
        try:
            await kc.request("POST", path, query=[("dryRun", "All")], body=probe)
        except Invalid:
            return not takes
        return takes

    verb = "taking" if takes else "refusing"
    await eventually(settled, what=f"the {doc['kind']} schema {verb} {meta['name']}")


async def create(kc: KubeClient, doc: dict[str, Any]) -> dict[str, Any]:
    r = BY_KIND[doc["kind"]]
    return msgspec.json.decode(await kc.create(r, doc, doc["metadata"].get("namespace", "")))


async def refused(kc: KubeClient, doc: dict[str, Any]) -> str:
    """Why the apiserver (a webhook) refuses to create ``doc``: a webhook rule's 403, or the 422 of a rule of
    Kueue's CRDs, which kueue-es's webhook answers as the apiserver would; the test fails if it is created."""
    try:
        await create(kc, doc)
    except (Forbidden, Invalid) as exc:
        return str(exc)
    raise AssertionError(f"{doc['kind']} {doc['metadata']['name']} was created")


@contextlib.asynccontextmanager
async def validating_webhooks(kc: KubeClient, certs: Path, name: str, selector: dict[str, Any],
                              probe: dict[str, Any], feature_gates: dict[str, bool]) -> AsyncIterator[WebhookServer]:
    """kueue-es's webhook server, its ValidatingWebhookConfiguration registered as ``name`` for the objects
    ``selector`` (an objectSelector) selects only (other tests sharing the cluster never reach it), once a dry run
    of ``probe`` — a selected object it refuses — shows the apiserver calls it. The configuration is cluster-wide and fails
    closed: it is deleted before the server stops."""
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(certs)

    async def no_default(*_: Any) -> bool:
        return False

    server = WebhookServer(no_default, None, feature_gates)
    port = free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    try:
        await register(kc, configuration(bundle.ca_pem, url=f"https://127.0.0.1:{port}", name=name,
                                         object_selector=selector))
        resource = BY_KIND[probe["kind"]]

        async def effective() -> bool:  # the apiserver picks the configuration up asynchronously
            try:
                await kc.request("POST", resource.collection_path(probe["metadata"].get("namespace", "")),
                                 query=[("dryRun", "All")], body=probe)
            except (Forbidden, Invalid) as exc:  # a CRD rule's refusal is a 422
                return "denied the request" in str(exc)
            return False

        await eventually(effective, what=f"{name} in effect")
        yield server
    finally:
        with contextlib.suppress(Exception):
            await kc.delete(VALIDATING_CONFIGS, name)
        await server.stop()


def scheduling_gates(pod: dict[str, Any]) -> list[str]:
    """The names of a Pod's (as the apiserver returns it) scheduling gates, in order."""
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


@contextlib.asynccontextmanager
async def pod_webhooks(kc: KubeClient, certs: Path, label: str, sfx: str, config: SchedulerConfig
                       ) -> AsyncIterator[WebhookServer]:
    """kueue-es's webhook server answering Pods (and, with ``deployment`` or ``statefulset`` among the frameworks,
    Deployments or StatefulSets) as a replica with ``config`` does, its MutatingWebhookConfiguration (Jobs, Pods,
    Deployments, StatefulSets) registered fail-closed, as with the pod integration on, and the validating webhooks
    of the frameworks on in a configuration of their own, for the namespaces labelled ``label=<sfx>`` only (other
    tests sharing the cluster never reach them); deleted before the server stops."""
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(certs)
    queues_lookup = default_queue_lookup(kc)
    deployments = deployment_webhook.ParentDefaulting.of(config, "deployment")
    statefulsets = deployment_webhook.ParentDefaulting.of(config, "statefulset")
    parents = {**deployment_webhook.reviewers(deployments, namespace_lookup(kc), queues_lookup),
               **statefulset_webhook.reviewers(statefulsets, namespace_lookup(kc), queues_lookup)}
    server = WebhookServer(queues_lookup, None, {}, reviewer(kc, PodDefaulting.of(config), queues_lookup,
                                                            ancestry_lookup(kc, config)),
                           parents=parents)
    port = free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    name, url, selector = f"{label}-{sfx}", f"https://127.0.0.1:{port}", {"matchLabels": {label: sfx}}
    try:
        await register(kc, mutating(bundle.ca_pem, url=url, name=name, namespace_selector=selector, pods=True,
                                    deployments=deployments.enabled, statefulsets=statefulsets.enabled))
        hooks = [deployment_webhook.registration(hook_name, {**ca_bundle(bundle.ca_pem), "url": url + path},
                                                 selector, resource, on=True, mutating=False)
                 for on, hook_name, path, resource in (
                     (deployments.enabled, deployment_webhook.VALIDATING_NAME, deployment_webhook.VALIDATING_PATH,
                      "deployments"),
                     (statefulsets.enabled, statefulset_webhook.VALIDATING_NAME, statefulset_webhook.VALIDATING_PATH,
                      "statefulsets")) if on]
        if hooks:
            await register(kc, {"apiVersion": "admissionregistration.k8s.io/v1",
                                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
                                "webhooks": hooks})
        yield server
    finally:
        with contextlib.suppress(Exception):
            await kc.delete(MUTATING_CONFIGS, name)
        if deployments.enabled or statefulsets.enabled:
            with contextlib.suppress(Exception):
                await kc.delete(VALIDATING_CONFIGS, name)
        await server.stop()


@contextlib.asynccontextmanager
async def jobset_webhooks(kc: KubeClient, certs: Path, label: str, sfx: str, config: SchedulerConfig
                          ) -> AsyncIterator[WebhookServer]:
    """kueue-es's webhook server answering JobSets as a replica with ``config`` does, the JobSet webhooks alone
    registered fail-closed (``mjobset.kb.io`` and ``vjobset.kb.io``, each in a configuration named
    ``<label>-<sfx>``) for the namespaces labelled ``label=<sfx>`` only; deleted before the server stops."""
    async with framework_webhooks(kc, certs, label, sfx, jobset_webhook.KIND,
                                  jobset_webhook.JobSetWebhooks.of(config), config) as server:
        yield server


@contextlib.asynccontextmanager
async def mpijob_webhooks(kc: KubeClient, certs: Path, label: str, sfx: str, config: SchedulerConfig
                          ) -> AsyncIterator[WebhookServer]:
    """As :func:`jobset_webhooks`, for MPIJobs (``mmpijob.kb.io`` and ``vmpijob.kb.io``)."""
    async with framework_webhooks(kc, certs, label, sfx, mpijob_webhook.KIND,
                                  mpijob_webhook.MPIJobWebhooks.of(config), config) as server:
        yield server


@contextlib.asynccontextmanager
async def rayjob_webhooks(kc: KubeClient, certs: Path, label: str, sfx: str, config: SchedulerConfig
                          ) -> AsyncIterator[WebhookServer]:
    """As :func:`jobset_webhooks`, for RayJobs (``mrayjob.kb.io`` and ``vrayjob.kb.io``)."""
    settings = ray_webhook.RayWebhooks.of(config, clusters=False)
    async with framework_webhooks(kc, certs, label, sfx, ray_webhook.rayjob_kind(settings.without_queue),
                                  settings, config) as server:
        yield server


@contextlib.asynccontextmanager
async def framework_webhooks(kc: KubeClient, certs: Path, label: str, sfx: str, kind: framework_webhook.Kind,
                             settings: framework_webhook.FrameworkWebhooks, walk_config: SchedulerConfig | None = None,
                             reviewers: dict[str, Any] | None = None) -> AsyncIterator[WebhookServer]:
    """kueue-es's webhook server answering ``kind`` with ``settings``, its two webhooks alone registered fail-closed
    (each in a configuration named ``<label>-<sfx>``) for the namespaces labelled ``label=<sfx>`` only; deleted
    before the server stops. ``reviewers``: the kind's own (path -> review), when not the generic ones."""
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(certs)
    queues_lookup = default_queue_lookup(kc)
    held = HeldParents()  # empty (a standby's) until a test attaches what a leader's connector would hold
    walk = ancestry_lookup(kc, walk_config, held) if walk_config is not None else None  # the walk serve() gives them
    hooks = reviewers if reviewers is not None else framework_webhook.reviewers(
        kind, settings, namespace_lookup(kc), queues_lookup, None, walk)
    server = WebhookServer(queues_lookup, None, {}, parents=hooks, held_parents=held)
    port = free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    name, url, selector = f"{label}-{sfx}", f"https://127.0.0.1:{port}", {"matchLabels": {label: sfx}}
    configs = ((MUTATING_CONFIGS, "MutatingWebhookConfiguration", kind.mutating_path, True),
               (VALIDATING_CONFIGS, "ValidatingWebhookConfiguration", kind.validating_path, False))
    try:
        for _, config_kind, path, is_mutating in configs:
            hook = framework_webhook.registration(kind, {**ca_bundle(bundle.ca_pem), "url": url + path}, selector,
                                                  on=True, mutating=is_mutating)
            await register(kc, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": config_kind,
                                "metadata": {"name": name}, "webhooks": [hook]})
        yield server
    finally:
        for resource, *_ in configs:
            with contextlib.suppress(Exception):
                await kc.delete(resource, name)
        await server.stop()


async def ready_node(kc: KubeClient, name: str, labels: dict[str, str]) -> None:
    """A Ready node of 1 cpu (what the kubelet reports), without the ``not-ready`` taint the apiserver adds."""
    await create(kc, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    await kc.patch(BY_KIND["Node"], name, {"spec": {"taints": None}})
    now = "2026-01-01T00:00:00Z"
    cond = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test",
            "lastHeartbeatTime": now, "lastTransitionTime": now}
    await kc.patch(BY_KIND["Node"], name, {"status": {"allocatable": {"cpu": "1", "pods": "10"},
                                                      "capacity": {"cpu": "1", "pods": "10"}, "conditions": [cond]}},
                   subresource="status")


async def job_pod(kc: KubeClient, ns: str, name: str, pod: str) -> dict[str, Any]:
    """What the job controller makes of Job ``ns/name``: pod ``pod`` from the Job's current template, controlled
    by the Job (no job controller runs here)."""
    current = await get(kc, "Job", name, ns)
    tmpl, uid = current["spec"]["template"], current["metadata"]["uid"]
    meta = tmpl.get("metadata") or {}
    return await create(kc, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": pod, "namespace": ns, "annotations": meta.get("annotations") or {},
        "labels": {**(meta.get("labels") or {}), "batch.kubernetes.io/controller-uid": uid},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": True}]},
        "spec": tmpl["spec"]})


async def get(kc: KubeClient, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
    return msgspec.json.decode(await kc.get(BY_KIND[kind], name, namespace))


async def running(kc: KubeClient, ns: str, name: str) -> bool:
    """Whether Job ``ns/name`` is unsuspended."""
    return not (await get(kc, "Job", name, ns))["spec"].get("suspend")


async def eventually(probe: Callable[[], Awaitable[T | None] | T | None], timeout: float = 30.0,
                     what: str = "") -> T:
    """Poll ``probe`` (sync or async) until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        last = probe()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or probe}")
        await asyncio.sleep(0.05)


async def versions(kc: KubeClient, resource: Any, rv: str, *, field_selector: str = "") -> AsyncIterator[dict[str, Any]]:
    """Every version of ``resource`` the apiserver stores after ``rv``, as an informer's watch sees them: a watch
    that ends, or that the apiserver refuses or cuts for a while (a 429 ``storage is (re)initializing`` for a CRD
    just created, on a loaded machine), is opened again from the last resourceVersion seen, so none is missed; a
    410 Gone would lose versions and is raised."""
    while True:
        try:
            async for event in kc.watch(resource, rv, timeout_seconds=60, field_selector=field_selector):
                obj = msgspec.json.decode(event.object)
                rv = obj["metadata"].get("resourceVersion") or rv
                if event.type != "BOOKMARK":
                    yield obj
        except Unavailable:
            await asyncio.sleep(0.2)


async def admitted_workload(kc: KubeClient, name: str, ns: str, what: str) -> dict[str, Any]:
    """Workload ``ns/name`` once it has an admission (it may not exist yet); fails as :func:`eventually`."""

    async def admitted() -> dict[str, Any] | None:
        with contextlib.suppress(Exception):
            wl = await get(kc, "Workload", name, ns)
            return wl if wl.get("status", {}).get("admission") else None
        return None

    return await eventually(admitted, what=what)


async def finished_condition(kc: KubeClient, name: str, ns: str, what: str) -> dict[str, Any]:
    """The ``Finished`` condition of Workload ``ns/name`` once it is true; fails as :func:`eventually`."""

    async def finished() -> dict[str, Any] | None:
        wl = await get(kc, "Workload", name, ns)
        cond = next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == "Finished"), None)
        return cond if cond is not None and cond["status"] == "True" else None

    return await eventually(finished, what=what)


PODS_READY_TIMEOUT = "1h"
"""The ``waitForPodsReady.timeout`` every kueue-es of these tests runs with (Kueue's default is 5 minutes). No
kubelet runs here, so no pod ever becomes ready; and the cluster lives for the whole session, so each test's
kueue-es also manages the Workloads earlier tests admitted. With 5 minutes, those would be evicted and admitted
again part-way through a later test (Jobs unsuspended twice, pods ungated that the test did not make)."""


@functools.cache
def kueue_config_file() -> Path:
    """The Kueue Configuration a ``kueue-es run --kube`` process of these tests reads (``--kueue-config``): Kueue's
    defaults but :data:`PODS_READY_TIMEOUT`. One file for the test session."""
    path = Path(tempfile.mkdtemp(prefix="kueue-es-kube-tests-")) / "kueue-config.yaml"
    path.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                    f"waitForPodsReady:\n  timeout: {PODS_READY_TIMEOUT}\n")
    return path


@contextlib.asynccontextmanager
async def kueue_es(kc: KubeClient, log_dir: Path, *, kinds: Collection[str] | None = None,
                   hold: Collection[str] = (), release: asyncio.Event | None = None,
                   synced: bool = True, sync_timeout: float = 30.0, config: SchedulerConfig = DEFAULT,
                   decide_before_synced: bool = False, pods_ready_timeout: str = PODS_READY_TIMEOUT,
                   **connector_kw: Any) -> AsyncIterator[tuple[Connector, LocalJournal]]:
    """The connector and the scheduler over one embedded log, in this process, like ``kueue-es run --kube``
    (which records ``config`` in the log before its first decision), its ``waitForPodsReady.timeout`` set to
    ``pods_ready_timeout`` (see :data:`PODS_READY_TIMEOUT`).

    ``hold``: kinds whose (re)list waits for ``release`` — their objects stay out of the log meanwhile, while
    everything else is watched. ``synced``: wait until every kind is listed first. The scheduler, as in
    ``kueue-es run --kube``, decides only once every kind is listed; ``decide_before_synced`` lets it decide on
    whatever the log holds meanwhile (to show what a partial state leads to).
    """
    log = FileLog.open(log_dir, fsync="never")
    journal = LocalJournal(log, Mirror())
    for batch in log.scan():
        journal.mirror.apply_batch(batch)
    kw: dict[str, Any] = {"kinds": kinds} if kinds else {}
    connector = Connector(kc, journal, watch_timeout_s=30, **kw, **connector_kw)
    if hold:
        assert release is not None
        relist = connector.watcher.relist

        async def held_relist(r: Any) -> str:
            if r.kind in hold:
                await release.wait()
            return await relist(r)

        connector.watcher.relist = held_relist  # type: ignore[method-assign]
    config = msgspec.structs.replace(config, wait_for_pods_ready=msgspec.structs.replace(
        config.pods_ready, timeout=pods_ready_timeout))
    document = config_record.document_of(config)
    tasks = [asyncio.create_task(connector.run()), asyncio.create_task(
        schedule(journal, config, ready=None if decide_before_synced else connector.watcher.wait_synced,
                 record_config=lambda state: config_record.pending(state, document, writer="test")))]
    try:
        if synced:
            await asyncio.wait_for(connector.watcher.wait_synced(), sync_timeout)
        yield connector, journal
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await log.close()
        # A request cancelled in the middle of its TLS handshake leaves its socket to the garbage collector
        # (asyncio's SSL transport on Python 3.11); collect it here, where it is expected, rather than let the
        # ResourceWarning surface in whichever test happens to run next.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


async def complete_job(kc: KubeClient, ns: str, name: str) -> None:
    """Play the job controller (there is none here): the Job's pods succeeded, it is Complete."""
    done = {"status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods",
            "lastTransitionTime": NOW}
    await kc.patch(BY_KIND["Job"], name, {"status": {
        "startTime": NOW, "completionTime": NOW, "succeeded": 1,
        "conditions": [{"type": "SuccessCriteriaMet", **done}, {"type": "Complete", **done}]}}, ns,
        subresource="status")


def flavor(name: str, node_labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": node_labels or {}, **spec}}


def cluster_queue(name: str, flavor_quotas: dict[str, dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A ClusterQueue with one resource group of ``flavor_quotas`` (none for no flavor: a group lists at least one
    covered resource and flavor, the CRD's ``minItems``)."""
    resources = sorted({r for q in flavor_quotas.values() for r in q})
    groups = [{"coveredResources": resources,
               "flavors": [{"name": f, "resources": [{"name": r, "nominalQuota": q[r]} for r in resources]}
                           for f, q in flavor_quotas.items()]}] if flavor_quotas else []
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": groups, **spec}}


def local_queue(namespace: str, name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq}}


class Queues(NamedTuple):
    """What ``queues`` made. ``sfx`` ends the cluster-scoped names: a test names its own objects with it."""

    ns: str
    flavor: str
    cq: str
    sfx: str


async def queues(kc: KubeClient, prefix: str, quota: dict[str, Any], *, lq: str | tuple[str, ...] = "user-queue",
                 sfx: str | None = None, flavor_labels: dict[str, str] | None = None,
                 flavor_spec: dict[str, Any] | None = None, **cq_spec: Any) -> Queues:
    """A fresh namespace ``<prefix>-<hex>`` whose LocalQueue(s) ``lq`` feed a new ClusterQueue ``cq-<sfx>`` with
    ``quota`` (nominal, per resource) of one new ResourceFlavor ``f-<sfx>``.

    Cluster-scoped names are unique per call (the session's tests share one apiserver). ``cq_spec`` goes into the
    ClusterQueue's spec (preemption, cohortName, ...), ``flavor_spec`` into the flavor's.
    """
    sfx = sfx or secrets.token_hex(3)
    ns, fl, cq = await namespace(kc, prefix), f"f-{sfx}", f"cq-{sfx}"
    await create(kc, flavor(fl, flavor_labels, **(flavor_spec or {})))
    await create(kc, cluster_queue(cq, {fl: quota}, **cq_spec))
    for name in (lq,) if isinstance(lq, str) else lq:
        await create(kc, local_queue(ns, name, cq))
    return Queues(ns, fl, cq, sfx)


async def provisioning_check(kc: KubeClient, sfx: str,
                             class_name: str = "check-capacity.autoscaling.x-k8s.io") -> str:
    """An AdmissionCheck ``prov-<sfx>`` of Kueue's ProvisioningRequest controller, with its parameters (a
    ProvisioningRequestConfig ``prc-<sfx>`` of ``class_name``); returns the check's name."""
    await create(kc, {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": f"prc-{sfx}"},
                      "spec": {"provisioningClassName": class_name}})
    check = f"prov-{sfx}"
    await create(kc, {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": check},
                      "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                               "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                              "name": f"prc-{sfx}"}}})
    return check


async def provisioning_queues(kc: KubeClient, prefix: str, quota: dict[str, Any]) -> tuple[str, str]:
    """The ProvisioningRequest CRD installed (with Kueue's), a :func:`provisioning_check` and :func:`queues`
    whose ClusterQueue lists it: (the check's name, the namespace)."""
    await crds.install(kc)
    await crds.install(kc, docs=[crds.provisioning_request_crd()])
    sfx = secrets.token_hex(3)
    check = await provisioning_check(kc, sfx)
    ns, _, _, _ = await queues(kc, prefix, quota, sfx=sfx,
                               admissionChecksStrategy={"admissionChecks": [{"name": check}]})
    return check, ns


async def workload_events(kc: KubeClient, wl: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events on the Workload ``wl`` (as read), as ``kubectl describe`` finds
    them."""
    meta = wl["metadata"]
    selector = (f"involvedObject.name={meta['name']},involvedObject.namespace={meta['namespace']},"
                f"involvedObject.kind=Workload,involvedObject.uid={meta['uid']}")
    raw = await kc.request("GET", EVENTS.collection_path(meta["namespace"]),
                           query=[("fieldSelector", selector)])
    return [(e["type"], e["reason"], e["message"]) for e in msgspec.json.decode(raw)["items"]]


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def job(namespace: str, name: str, queue: str, *, cpu: str = "1", parallelism: int = 1, suspend: bool = True,
        labels: dict[str, str] | None = None, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}},
        "spec": {
            "suspend": suspend, "parallelism": parallelism, "completions": parallelism,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    **({"nodeSelector": node_selector} if node_selector else {}),
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "10"],
                                    "resources": {"requests": {"cpu": cpu}}}],
                },
            },
        },
    }
