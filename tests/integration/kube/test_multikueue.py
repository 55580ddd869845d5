"""MultiKueue across two real apiservers: the session's as the manager, a second one (started for this module by
``scripts/kube.sh start``) as the worker, a kueue-es process on each.

On the manager a MultiKueueCluster names the worker through a Secret holding its kubeconfig, a MultiKueueConfig
lists it and the ClusterQueue has a MultiKueue check. kueue-es's Job webhook, called by the manager's apiserver,
hands a Job of that queue to MultiKueue (``spec.managedBy: kueue.x-k8s.io/multikueue``); it gets its Workload admitted on the manager only once the worker admitted the copy of
it the manager dispatched there (``status.clusterName``, the check Ready "The workload was admitted on ..."); the
Job's copy then runs on the worker, on that copy. The test plays the worker's job controller and completes it
there: the manager's Job shows the worker's status and its Workload finishes with the worker's reason (from the
worker's Workload or the mirrored Job, whichever reaches the manager's log first), and the copies on the worker are
deleted. Along the way the MultiKueueCluster and the check show Kueue's Active
conditions. A JobSet CRD installed on the worker only once the manager is connected gets the worker's JobSets
watched without a reconnect. A RayService handed to MultiKueue is copied to the worker, started there by the
worker's Kueue, its Ready condition mirrored, a ``serveConfigV2`` edited on the manager forwarded to the copy, and
its copies deleted once its Workload is deactivated. A
LeaderWorkerSet's two groups go to the worker together, on one copy of the set. Under
MultiKueueManagerQuotaAutomation the manager's ClusterQueue takes the worker ClusterQueue's quota. Under
MultiKueueOrchestratedPreemption a copy made gated preempts on the worker only once the manager opens its gate.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from kubehelp import (
    KUEUE,
    NOW,
    complete_job,
    connect,
    create,
    eventually,
    free_port,
    get,
    job,
    kueue_es,
    queues,
    scheduling_gates,
)

from connectors.k8s import crds, multikueue_kubeconfigs, pod_sync
from connectors.k8s import leaderworkerset as lw
from connectors.k8s.errors import AlreadyExists, NotFound, Unavailable
from connectors.k8s.framework_webhook import value_at
from connectors.k8s.jobs import workload_name
from connectors.k8s.jobset import workload_name as jobset_workload_name
from connectors.k8s.kubeflow import KINDS as KUBEFLOW_KINDS
from connectors.k8s.rayjob import workload_name as rayjob_workload_name
from connectors.k8s.rayservice import workload_name as rayservice_workload_name
from connectors.k8s.resources import (
    BY_KIND,
    JOBSETS,
    LEADER_WORKER_SETS,
    RAYJOBS,
    RAYSERVICES,
    SECRETS,
    Resource,
)
from connectors.k8s.settings import KubeSettings
from connectors.k8s.webhook import (
    MUTATING_CONFIGS,
    WebhookServer,
    certificate,
    configuration,
    default_queue_lookup,
    multikueue_lookup,
)
from connectors.k8s.webhook import register as register_webhook
from events import schema as ev
from kueue_es.scheduler.config import LWS_FRAMEWORK, load_config

pytestmark = pytest.mark.kube
KUBE_SH = Path(__file__).resolve().parents[3] / "scripts" / "kube.sh"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
"""Named in an annotation on the copies: WorkloadIdentifierAnnotations (beta) is on."""
KUEUE_NAMESPACE = "kueue-system"  # the Configuration's namespace, where the worker's kubeconfig Secret is


def _kube_sh(*args: str) -> str:
    proc = subprocess.run(["bash", str(KUBE_SH), *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=dict(os.environ, KUBE_OWNER_PID=str(os.getpid())))
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/kube.sh {' '.join(args)}: {proc.returncode}\n{proc.stderr}")
    return proc.stdout


@pytest.fixture(scope="module")
def worker_apiserver(kube_apiserver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """A second etcd + kube-apiserver, for this module only (the manager is the session's)."""
    work = tmp_path_factory.mktemp("worker")
    try:
        env = dict(line.split("=", 1) for line in _kube_sh("start", str(work)).splitlines() if "=" in line)
    except BaseException:
        _kube_sh("stop", str(work))
        raise
    try:
        yield SimpleNamespace(kubeconfig=env["KUBECONFIG"])
    finally:
        _kube_sh("stop", str(work))


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def _true(obj: dict[str, Any], type_: str) -> bool:
    c = _cond(obj, type_)
    return c is not None and c["status"] == "True"


async def _maybe(kc, kind: str, name: str, ns: str = "") -> dict[str, Any] | None:
    with contextlib.suppress(NotFound):
        return await get(kc, kind, name, ns)
    return None


async def _workload_shows(kc, name: str, ns: str, type_: str, what: str, wc: Any = None) -> dict[str, Any]:
    """Workload ``name`` once its condition ``type_`` is True (waited for). A timeout says what the Workload, and
    its copy on the worker ``wc`` when given, showed last: which side stopped short."""
    async def shows() -> dict[str, Any] | None:
        wl = await _maybe(kc, "Workload", name, ns)
        return wl if wl is not None and _true(wl, type_) else None

    try:
        return await eventually(shows, timeout=60, what=what)
    except AssertionError as exc:
        sides = [("the Workload", kc), ("its copy on the worker", wc)] if wc is not None else [("the Workload", kc)]
        seen = [f"{side}: {_last_seen(await _maybe(client, 'Workload', name, ns))}" for side, client in sides]
        raise AssertionError(f"{exc}; last seen: {'; '.join(seen)}") from None


def _last_seen(wl: dict[str, Any] | None) -> str:
    """A Workload's conditions and admission checks, shortly (``gone`` when there is none)."""
    if wl is None:
        return "gone"
    status = wl.get("status") or {}
    conditions = [f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
                  for c in status.get("conditions") or []]
    checks = [f"{a['name']}={a['state']}" for a in status.get("admissionChecks") or []]
    return f"conditions {conditions}, checks {checks}"


async def _remote(wc, r: Resource, name: str, ns: str) -> dict[str, Any] | None:
    """The worker's object of kind ``r`` named ``name`` (None: there is none)."""
    with contextlib.suppress(NotFound):
        return msgspec.json.decode(await wc.get(r, name, ns))
    return None


async def _copies_deleted(wc, r: Resource, name: str, wl_name: str, ns: str) -> None:
    """Waits until the worker holds neither the Workload's copy nor its owner's."""
    async def gone() -> bool:
        return await _maybe(wc, "Workload", wl_name, ns) is None and await _remote(wc, r, name, ns) is None

    await eventually(gone, timeout=60, what="the copies on the worker to be deleted")


async def _condition_mirrored(kc, wc, r: Resource, name: str, ns: str, cond: dict[str, str], what: str) -> None:
    """The worker's controller of kind ``r`` sets the True condition ``cond`` on the copy's status: waits until the
    manager's owner shows it."""
    stamped = {**cond, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await wc.patch(r, name, {"status": {"conditions": [stamped]}}, ns, subresource="status")

    async def shown() -> dict[str, Any] | None:
        owner = msgspec.json.decode(await kc.get(r, name, ns))
        return owner if _true(owner, cond["type"]) else None

    await eventually(shown, timeout=60, what=what)


async def _rejected(kc, wl_name: str, ns: str, check: str, what: str) -> dict[str, Any]:
    """The Workload of an owner not handed to MultiKueue once its check shows Rejected and it holds no quota.
    Kueue's MultiKueue controller checks the owner before quota, so the check is normally Rejected while the
    workload is pending (it then never reserves, and stays active); when the owner's read comes after the
    scheduler reserved (a race Kueue has too), the rejection deactivates it, the eviction resets the check to
    Pending and the controller rejects it again: the same check, no quota, either way."""
    async def rejected() -> dict[str, Any] | None:
        wl = await _maybe(kc, "Workload", wl_name, ns)
        if wl is None or _true(wl, "QuotaReserved"):
            return None
        state = next((c for c in (wl.get("status") or {}).get("admissionChecks") or [] if c["name"] == check), None)
        return wl if state is not None and state["state"] == "Rejected" else None

    return await eventually(rejected, timeout=60, what=what)


def _check_message(wl: dict[str, Any], check: str) -> str:
    return next(c["message"] for c in wl["status"]["admissionChecks"] if c["name"] == check)


async def _secret_cluster_active(kc, name: str, kubeconfig: dict[str, Any]) -> dict[str, Any]:
    """The Active condition of a new MultiKueueCluster ``name`` whose kubeconfig, ``kubeconfig``, is in a Secret of
    that name in Kueue's namespace, once it has one."""
    await kc.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": KUEUE_NAMESPACE},
                              "data": {"kubeconfig": base64.b64encode(msgspec.json.encode(kubeconfig)).decode()}},
                    KUEUE_NAMESPACE)
    await create(kc, {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": name},
                      "spec": {"clusterSource": {"kubeConfig": {"location": name, "locationType": "Secret"}}}})

    async def active() -> dict[str, Any] | None:
        return _cond(await get(kc, "MultiKueueCluster", name), "Active")

    return await eventually(active, what=f"the MultiKueueCluster {name}'s Active condition")


UNMANAGED = 'The owner is not managed by Kueue: Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'
"""The check's message for an owner that names no manager (Kueue's words)."""


@pytest.mark.asyncio
async def test_a_job_is_dispatched_to_the_worker_runs_there_and_finishes_on_the_manager(
        kube_apiserver, worker_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
        await crds.install(kc)
        await crds.install(wc)
        sfx = secrets.token_hex(3)
        ns, cq, worker, check = await _manager_queues(kc, worker_apiserver, sfx)
        async with _job_webhook(kc, ns, sfx, tmp_path):
            await _dispatch_run_and_finish(kc, wc, ns, cq, worker, check, sfx, tmp_path)


async def _manager_queues(kc, worker_apiserver, sfx: str) -> tuple[str, str, str, str]:
    """The manager: queues behind a MultiKueue check, the worker reached through a Secret; (namespace,
    ClusterQueue, worker, check). An earlier test's MultiKueueClusters are deleted first: they name the same worker
    apiserver, whose copies they would see too."""
    for raw in (await kc.list(BY_KIND["MultiKueueCluster"])).items:
        with contextlib.suppress(NotFound):
            await kc.delete(BY_KIND["MultiKueueCluster"], msgspec.json.decode(raw)["metadata"]["name"])
    with contextlib.suppress(AlreadyExists):
        await kc.create(BY_KIND["Namespace"], {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": KUEUE_NAMESPACE}})
    kubeconfig = Path(worker_apiserver.kubeconfig).read_bytes()
    await kc.create(SECRETS, {"apiVersion": "v1", "kind": "Secret",
                              "metadata": {"name": f"worker-{sfx}", "namespace": KUEUE_NAMESPACE},
                              "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()}}, KUEUE_NAMESPACE)
    worker, check = f"worker-{sfx}", f"mk-{sfx}"
    await create(kc, {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": worker},
                      "spec": {"clusterSource": {"kubeConfig": {"location": f"worker-{sfx}",
                                                                "locationType": "Secret"}}}})
    ns, cq = await multikueue_queues(kc, sfx, worker, check)
    return ns, cq, worker, check


async def multikueue_queues(kc, sfx: str, worker: str, check: str) -> tuple[str, str]:
    """A MultiKueueConfig listing ``worker``, the MultiKueue check ``check`` on it and queues behind that check:
    (namespace, ClusterQueue)."""
    await create(kc, {"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": {"name": f"mkc-{sfx}"},
                      "spec": {"clusters": [worker]}})
    await create(kc, {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": check},
                      "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                               "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                              "name": f"mkc-{sfx}"}}})
    ns, _, cq, _ = await queues(kc, "mk", {"cpu": 4}, sfx=sfx,
                                admissionChecksStrategy={"admissionChecks": [{"name": check}]})
    return ns, cq


async def _worker_queues(wc, ns: str, sfx: str, **cq_spec: Any) -> None:
    """The worker: the same namespace and LocalQueue, a ClusterQueue of its own (``cq_spec`` added to its spec)."""
    await wc.create(BY_KIND["Namespace"], {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create(wc, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"wf-{sfx}"}})
    await create(wc, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"wcq-{sfx}"},
                      "spec": {**cq_spec, "namespaceSelector": {}, "resourceGroups": [{
                          "coveredResources": ["cpu"],
                          "flavors": [{"name": f"wf-{sfx}", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}})
    await create(wc, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "user-queue", "namespace": ns},
                      "spec": {"clusterQueue": f"wcq-{sfx}"}})


@contextlib.asynccontextmanager
async def _manager_and_worker(kube_apiserver, worker_apiserver, **worker_cq: Any) -> AsyncIterator[SimpleNamespace]:
    """Both apiservers with Kueue's CRDs, the manager's queues behind a MultiKueue check and the worker's
    (``worker_cq`` added to its ClusterQueue's spec): (kc, wc, ns, cq, worker, sfx)."""
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
        await crds.install(kc)
        await crds.install(wc)
        sfx = secrets.token_hex(3)
        ns, cq, worker, _ = await _manager_queues(kc, worker_apiserver, sfx)
        await _worker_queues(wc, ns, sfx, **worker_cq)
        yield SimpleNamespace(kc=kc, wc=wc, ns=ns, cq=cq, worker=worker, sfx=sfx)


@contextlib.asynccontextmanager
async def _job_webhook(kc, ns: str, sfx: str, tmp_path: Path) -> AsyncIterator[None]:
    """kueue-es's Job webhook, with the MultiKueue lookup, registered for namespace ``ns`` only."""
    await kc.patch(BY_KIND["Namespace"], ns, {"metadata": {"labels": {"kueue-es-mk-test": sfx}}})
    bundle = await certificate(kc, KubeSettings(webhook_hosts="127.0.0.1", webhook_secret=f"cert-{sfx}",
                                                lease_namespace=KUEUE_NAMESPACE))
    _, cert, key = bundle.write(tmp_path / "certs")
    server = WebhookServer(default_queue_lookup(kc), multikueue=multikueue_lookup(kc))
    port = free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    hook = f"kueue-es-mk-test-{sfx}"
    try:
        await register_webhook(kc, configuration(bundle.ca_pem, url=f"https://127.0.0.1:{port}", name=hook,
                                                 namespace_selector={"matchLabels": {"kueue-es-mk-test": sfx}}))

        async def effective() -> bool:  # the apiserver picks the configuration up asynchronously
            with contextlib.suppress(Exception):
                out = await kc.request("POST", BY_KIND["Job"].collection_path(ns), query=[("dryRun", "All")],
                                       body=job(ns, "probe", "user-queue"))
                return msgspec.json.decode(out)["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue"
            return False

        await eventually(effective, what="the Job webhook in effect")
        yield
    finally:
        with contextlib.suppress(Exception):
            await kc.delete(MUTATING_CONFIGS, hook)
        await server.stop()


async def _dispatch_run_and_finish(kc, wc, ns: str, cq: str, worker: str, check: str, sfx: str,
                                   tmp_path: Path) -> None:
    await _worker_queues(wc, ns, sfx)

    ttl_gate_on = load_config({"featureGates": {  # alpha, off since v0.20
        "MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster": True}})
    async with kueue_es(wc, tmp_path / "worker-log"), kueue_es(kc, tmp_path / "manager-log",
                                                               config=ttl_gate_on) as (_, journal):
        async def cluster_active() -> dict[str, Any] | None:
            c = _cond(await get(kc, "MultiKueueCluster", worker), "Active")
            return c if c is not None and c["status"] == "True" else None

        c = await eventually(cluster_active, what="the MultiKueueCluster to be Active")
        assert (c["reason"], c["message"]) == ("Active", "Connected")

        async def check_active() -> dict[str, Any] | None:
            c = _cond(await get(kc, "AdmissionCheck", check), "Active")
            return c if c is not None and c["status"] == "True" else None

        c = await eventually(check_active, what="the MultiKueue check to be Active")
        assert (c["reason"], c["message"]) == ("Active", "The admission check is active")

        # --- a kubeconfig path outside Kueue's directory is refused (MultiKueueKubeConfigPathValidation, on) ---
        outside = str(tmp_path / "kubeconfig")
        await create(kc, {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": f"path-{sfx}"},
                          "spec": {"clusterSource": {"kubeConfig": {"location": outside, "locationType": "Path"}}}})

        async def path_refused() -> dict[str, Any] | None:
            return _cond(await get(kc, "MultiKueueCluster", f"path-{sfx}"), "Active")

        c = await eventually(path_refused, what="the Path MultiKueueCluster's Active condition")
        assert (c["status"], c["reason"]) == ("False", "BadKubeConfig")
        assert c["message"] == ("load client config failed: kubeconfig path is not under the allowed prefix: "
                                f'"{outside}" is not under "/etc/multikueue/kubeconfigs"')

        # --- a kubeconfig whose current context resolves to no cluster: Kueue's client library refuses it -----
        unresolved = {"apiVersion": "v1", "kind": "Config", "current-context": "elsewhere", "clusters": [
            {"name": "w", "cluster": {"server": "https://worker.example:6443", "certificate-authority-data": "Q0E="}}]}
        c = await _secret_cluster_active(kc, f"unresolved-{sfx}", unresolved)
        assert (c["status"], c["reason"]) == ("False", "InsecureKubeConfig")
        assert c["message"] == ("load client config failed: invalid configuration: [context was not found for "
                                "specified context: elsewhere, cluster has no server defined]")

        # --- a current user with a client certificate and no key: refused before any client is built ----------
        keyless = {"apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [
            {"name": "w", "cluster": {"server": "https://worker.example:6443", "certificate-authority-data": "Q0E="}}],
            "users": [{"name": "u", "user": {"client-certificate-data": "Q0VSVA=="}}],
            "contexts": [{"name": "c", "context": {"cluster": "w", "user": "u"}}]}
        c = await _secret_cluster_active(kc, f"keyless-{sfx}", keyless)
        assert (c["status"], c["reason"]) == ("False", "InsecureKubeConfig")
        assert c["message"] == ("load client config failed: invalid configuration: client-key-data or client-key must "
                                "be specified for u to use the clientCert authentication method.")

        # --- a Job handed to MultiKueue by the webhook is admitted on the worker --------------------------
        with_ttl = job(ns, "mk-job", "user-queue", cpu="1")
        with_ttl["spec"]["ttlSecondsAfterFinished"] = 600
        manager_job = await create(kc, with_ttl)
        assert manager_job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        wl_name = workload_name("mk-job", manager_job["metadata"]["uid"])

        wl = await _workload_shows(kc, wl_name, ns, "Admitted", "the manager's Workload to be admitted", wc)
        assert wl["status"]["clusterName"] == worker
        assert not wl["status"].get("nominatedClusterNames")
        assert wl["status"]["admission"]["clusterQueue"] == cq
        [state] = wl["status"]["admissionChecks"]
        assert (state["name"], state["state"]) == (check, "Ready")
        assert state["message"] == f'The workload was admitted on "{worker}"'

        remote_wl = await get(wc, "Workload", wl_name, ns)
        assert remote_wl["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert _true(remote_wl, "Admitted")

        async def running_on_worker() -> dict[str, Any] | None:
            j = await _maybe(wc, "Job", "mk-job", ns)
            return j if j is not None and not j["spec"].get("suspend") else None

        remote_job = await eventually(running_on_worker, timeout=60, what="the Job's copy to run on the worker")
        labels = remote_job["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert remote_job["metadata"]["annotations"][PREBUILT] == wl_name  # WorkloadIdentifierAnnotations on
        assert "managedBy" not in remote_job["spec"]
        assert "ttlSecondsAfterFinished" not in remote_job["spec"]  # MultiKueueBatchJobClearingTTL..., turned on
        # started by the worker's Kueue on the manager's copy: its pods are marked as a worker's (Kueue #10242)
        assert remote_job["spec"]["template"]["metadata"]["labels"][
            "kueue.x-k8s.io/multikueue-worker-workload-pod"] == "true"
        manager_spec = (await get(kc, "Job", "mk-job", ns))["spec"]
        assert (manager_spec["managedBy"], manager_spec["ttlSecondsAfterFinished"]) == (
            "kueue.x-k8s.io/multikueue", 600)

        # --- running on the worker: the manager's Job shows it -------------------------------------------
        await wc.patch(BY_KIND["Job"], "mk-job", {"status": {"startTime": NOW, "active": 1, "ready": 1}}, ns,
                       subresource="status")

        async def manager_job_running() -> dict[str, Any] | None:
            j = await get(kc, "Job", "mk-job", ns)
            return j if j["status"].get("active") == 1 else None

        await eventually(manager_job_running, timeout=60, what="the manager's Job to show the copy's active pod")

        # --- completed on the worker: the manager's Job and Workload finish -------------------------------
        await wc.patch(BY_KIND["Job"], "mk-job", {"status": {"active": None, "ready": 0}}, ns, subresource="status")
        await complete_job(wc, ns, "mk-job")

        wl = await _workload_shows(kc, wl_name, ns, "Finished", "the manager's Workload to finish")
        assert _cond(wl, "Finished")["reason"] == "Succeeded"

        async def manager_job_complete() -> dict[str, Any] | None:
            j = await get(kc, "Job", "mk-job", ns)
            return j if _true(j, "Complete") else None

        j = await eventually(manager_job_complete, timeout=60, what="the manager's Job to show Complete")
        assert j["status"]["succeeded"] == 1 and "active" not in j["status"]  # the copy's status, not merged

        await _copies_deleted(wc, BY_KIND["Job"], "mk-job", wl_name, ns)

        records = [r async for r in journal.log.read()]
        kinds = [type(r.event).__name__ for r in records if r.event.key == f"{ns}/{wl_name}"
                 and isinstance(r.event, ev.Decision) and not isinstance(r.event, ev.WorkloadPending)]
        assert kinds[:5] == ["QuotaReserved", "ClustersNominated", "WorkerClusterAssigned",
                             "AdmissionCheckUpdated", "WorkloadAdmitted"]
        # finished by whichever reaches the manager's log first, with the same reason: the worker's Workload
        # finishing (RemoteWorkloadFinished) or the manager's Job showing the copy's completion (WorkloadFinished)
        finishes = [r.event for r in records if r.event.key == f"{ns}/{wl_name}"
                    and isinstance(r.event, ev.RemoteWorkloadFinished | ev.WorkloadFinished)]
        assert finishes and finishes[0].reason == "Succeeded"


@pytest.mark.asyncio
async def test_a_job_evicted_on_the_manager_while_it_runs_on_the_worker_gives_its_quota_back_once_stopped_there(
        kube_apiserver, worker_apiserver, tmp_path) -> None:
    """The manager's ClusterQueue is stopped (HoldAndDrain) while the Job runs on the worker: its Workload is
    evicted there but holds its quota until the Job stops. Kueue's MultiKueue controller keeps the copies, sets the
    DeactivationTarget on the admitted copy (the worker's Kueue deactivates it and stops the Job's copy), mirrors
    the stopped copy's status to the manager's Job, whose controller then gives the quota back; only then are the
    copies deleted. The worker is a kueue-es, which acts on the DeactivationTarget by itself (the copy deactivated,
    evicted with the target's reason and message, the target removed); the test plays the worker's job controller
    (the copy's pods gone)."""
    async with _manager_and_worker(kube_apiserver, worker_apiserver) as c, _job_webhook(c.kc, c.ns, c.sfx, tmp_path):
        kc, wc, ns = c.kc, c.wc, c.ns
        async with kueue_es(wc, tmp_path / "worker-log"), kueue_es(kc, tmp_path / "manager-log"):
            manager_job = await create(kc, job(ns, "evicted-job", "user-queue", cpu="1"))
            wl_name = workload_name("evicted-job", manager_job["metadata"]["uid"])
            await _workload_shows(kc, wl_name, ns, "Admitted", "the manager's Workload to be admitted", wc)

            async def running_on_worker() -> dict[str, Any] | None:
                j = await _maybe(wc, "Job", "evicted-job", ns)
                return j if j is not None and not j["spec"].get("suspend") else None

            await eventually(running_on_worker, timeout=60, what="the Job's copy to run on the worker")
            await wc.patch(BY_KIND["Job"], "evicted-job", {"status": {"startTime": NOW, "active": 1, "ready": 1}}, ns,
                           subresource="status")

            async def manager_job_active(n: int | None) -> dict[str, Any] | None:
                j = await get(kc, "Job", "evicted-job", ns)
                return j if j["status"].get("active") == n else None

            await eventually(partial(manager_job_active, 1), timeout=60, what="the manager's Job to run")

            # --- the manager drains its ClusterQueue: evicted there, the quota held while the Job runs -----------
            await kc.patch(BY_KIND["ClusterQueue"], c.cq, {"spec": {"stopPolicy": "HoldAndDrain"}})
            wl = await _workload_shows(kc, wl_name, ns, "Evicted", "the manager's Workload to be evicted", wc)
            evicted = _cond(wl, "Evicted")
            assert evicted["reason"] == "ClusterQueueStopped"

            # --- the worker (a kueue-es) acts on the copy's DeactivationTarget itself, as Kueue's controller does --
            async def copy_deactivated() -> dict[str, Any] | None:
                copy = await _maybe(wc, "Workload", wl_name, ns)
                if copy is None or copy["spec"].get("active", True) or not _true(copy, "Evicted"):
                    return None
                return copy

            copy = await eventually(copy_deactivated, timeout=60, what="the worker to deactivate the copy")
            copy_evicted = _cond(copy, "Evicted")
            assert (copy_evicted["reason"], copy_evicted["message"]) == (
                "DeactivatedDueToEvictedOnManagerCluster",
                f"The workload is deactivated due to Evicted on manager: {evicted['message']}")
            assert _cond(copy, "DeactivationTarget") is None, "removed with the deactivation, as Kueue does"
            assert _true(await get(kc, "Workload", wl_name, ns), "QuotaReserved"), "held while the Job runs"
            assert await _remote(wc, BY_KIND["Job"], "evicted-job", ns) is not None

            # --- the worker stops the copy's Job; its pods go ------------------------------------------------------
            async def copy_stopped() -> dict[str, Any] | None:
                j = await _maybe(wc, "Job", "evicted-job", ns)
                return j if j is not None and j["spec"].get("suspend") else None

            await eventually(copy_stopped, timeout=60, what="the worker to stop the Job's copy")
            await wc.patch(BY_KIND["Job"], "evicted-job", {"status": {"active": None, "ready": 0}}, ns,
                           subresource="status")

            async def quota_released() -> dict[str, Any] | None:
                w = await get(kc, "Workload", wl_name, ns)
                reserved = _cond(w, "QuotaReserved")
                return w if reserved is not None and reserved["status"] == "False" else None

            wl = await eventually(quota_released, timeout=60, what="the manager's Workload to give its quota back")
            assert "admission" not in wl["status"]
            assert "active" not in (await get(kc, "Job", "evicted-job", ns))["status"]
            await _copies_deleted(wc, BY_KIND["Job"], "evicted-job", wl_name, ns)


def _jobset(ns: str, name: str, managed_by: str | None) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36",
                                                                   "resources": {"requests": {"cpu": "1"}}}]}}
    spec: dict[str, Any] = {"suspend": True, "replicatedJobs": [
        {"name": "workers", "replicas": 2, "template": {"spec": {"template": template}}}]}
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {"apiVersion": JOBSETS.api_version, "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": spec}


@pytest.mark.asyncio
async def test_a_jobset_is_dispatched_to_the_worker_and_finishes_there(kube_apiserver, worker_apiserver,
                                                                       tmp_path) -> None:
    """Kueue's JobSet adapter: a JobSet handed to MultiKueue is copied to the worker that admitted its Workload
    (Kueue's labels, no managedBy), its status mirrored back; the test plays the worker's JobSet controller and
    completes it there, and the copies are deleted. One not handed to MultiKueue has its check Rejected in Kueue's
    words, which deactivates its Workload."""
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
        await crds.install(kc, docs=[*crds.all_crds(), crds.jobset_crd()])
        await crds.install(wc, docs=[*crds.all_crds(), crds.jobset_crd()])
        sfx = secrets.token_hex(3)
        ns, _, worker, check = await _manager_queues(kc, worker_apiserver, sfx)
        await _worker_queues(wc, ns, sfx)
        async with (kueue_es(wc, tmp_path / "worker-log", config=config),
                    kueue_es(kc, tmp_path / "manager-log", config=config)):
            handed = msgspec.json.decode(await kc.create(JOBSETS, _jobset(ns, "mk-js", "kueue.x-k8s.io/multikueue"),
                                                         ns))
            wl_name = jobset_workload_name("mk-js", handed["metadata"]["uid"])

            wl = await _workload_shows(kc, wl_name, ns, "Admitted", "the JobSet's Workload to be admitted", wc)
            assert wl["status"]["clusterName"] == worker

            async def copied() -> dict[str, Any] | None:
                return await _remote(wc, JOBSETS, "mk-js", ns)

            remote = await eventually(copied, timeout=60, what="the JobSet's copy on the worker")
            labels = remote["metadata"]["labels"]
            assert labels["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
            assert remote["metadata"]["annotations"][PREBUILT] == wl_name
            assert "managedBy" not in remote["spec"]

            # --- the worker's JobSet controller completes it: the manager's JobSet shows it, the copies go ----
            await _condition_mirrored(kc, wc, JOBSETS, "mk-js", ns, {
                "type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed"},
                "the manager's JobSet to show Completed")

            await _workload_shows(kc, wl_name, ns, "Finished", "the manager's Workload to finish")

            await _copies_deleted(wc, JOBSETS, "mk-js", wl_name, ns)

            # --- a JobSet MultiKueue is not handed: its check is Rejected ----------------------------------------
            other = msgspec.json.decode(await kc.create(JOBSETS, _jobset(ns, "local-js", None), ns))
            other_wl = jobset_workload_name("local-js", other["metadata"]["uid"])

            wl = await _rejected(kc, other_wl, ns, check, "the unmanaged JobSet's Workload to be rejected")
            assert _check_message(wl, check) == UNMANAGED


def _ray_cluster() -> dict[str, Any]:
    """A Ray cluster spec: a head and one worker of 1 cpu."""
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
                                         "resources": {"requests": {"cpu": "1"}}}]}}
    return {"headGroupSpec": {"rayStartParams": {}, "template": template},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 1,
                                  "rayStartParams": {}, "template": template}]}


def _handed(r: Resource, ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An object of kind ``r`` of the queue behind the MultiKueue check, handed to MultiKueue."""
    return {"apiVersion": r.api_version, "kind": r.kind,
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"managedBy": "kueue.x-k8s.io/multikueue", **spec}}


def _rayjob(ns: str, name: str) -> dict[str, Any]:
    """A RayJob handed to MultiKueue; submitted over HTTP (no submitter pod set)."""
    return _handed(RAYJOBS, ns, name, {"suspend": True, "submissionMode": "HTTPMode", "shutdownAfterJobFinishes": True,
                                       "entrypoint": "python -c 'print(1)'", "rayClusterSpec": _ray_cluster()})


@contextlib.asynccontextmanager
async def _ray_clusters(kube_apiserver, worker_apiserver, tmp_path: Path, framework: str,
                        feature_gates: dict[str, bool] | None = None) -> AsyncIterator[SimpleNamespace]:
    """The manager and the worker with the Ray CRDs, their queues and a kueue-es each running ``framework`` (and
    ``feature_gates``): (kc, wc, ns, worker, check)."""
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job", framework],
                         [crds.rayjob_crd(), crds.raycluster_crd(), crds.rayservice_crd()],
                         feature_gates=feature_gates) as c:
        yield c


@contextlib.asynccontextmanager
async def _clusters(kube_apiserver, worker_apiserver, tmp_path: Path, frameworks: list[str],
                    docs: list[dict[str, Any]], multi_kueue: dict[str, Any] | None = None,
                    feature_gates: dict[str, bool] | None = None) -> AsyncIterator[SimpleNamespace]:
    """The manager and the worker with Kueue's CRDs and ``docs``, their queues and a kueue-es each running
    ``frameworks`` (and the Configuration's ``multi_kueue`` section and ``feature_gates``): (kc, wc, ns, worker,
    check)."""
    config = load_config({"integrations": {"frameworks": frameworks}, "multiKueue": multi_kueue or {},
                          "featureGates": feature_gates or {}})
    all_docs = [*crds.all_crds(), *docs]
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
        await crds.install(kc, docs=all_docs)
        await crds.install(wc, docs=all_docs)
        sfx = secrets.token_hex(3)
        ns, _, worker, check = await _manager_queues(kc, worker_apiserver, sfx)
        await _worker_queues(wc, ns, sfx)
        async with (kueue_es(wc, tmp_path / "worker-log", config=config),
                    kueue_es(kc, tmp_path / "manager-log", config=config)):
            yield SimpleNamespace(kc=kc, wc=wc, ns=ns, worker=worker, check=check)


async def _admitted_on_worker(c: SimpleNamespace, wl_name: str, what: str) -> None:
    """The manager's Workload ``wl_name`` admitted once its copy was on ``c.worker``, its check Ready."""
    wl = await _workload_shows(c.kc, wl_name, c.ns, "Admitted", what, c.wc)
    assert wl["status"]["clusterName"] == c.worker
    assert [(s["name"], s["state"]) for s in wl["status"]["admissionChecks"]] == [(c.check, "Ready")]


async def _started_copy(c: SimpleNamespace, r: Resource, name: str, wl_name: str, suspend_at: tuple[str, ...],
                        what: str) -> dict[str, Any]:
    """The owner's copy on the worker once the worker's Kueue started it (its flag at ``suspend_at`` false): Kueue's
    two labels, no managedBy, run on the copied Workload, admitted there and the only one in the namespace."""
    async def started() -> dict[str, Any] | None:
        remote = await _remote(c.wc, r, name, c.ns)
        return remote if remote is not None and value_at(remote, suspend_at) is False else None

    remote = await eventually(started, timeout=60, what=what)
    labels = remote["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    assert remote["metadata"]["annotations"][PREBUILT] == wl_name
    assert "managedBy" not in remote["spec"]
    assert _true(await get(c.wc, "Workload", wl_name, c.ns), "Admitted")
    on_worker = [msgspec.json.decode(raw)["metadata"] for raw in (await c.wc.list(BY_KIND["Workload"])).items]
    assert [m["name"] for m in on_worker if m["namespace"] == c.ns] == [wl_name], "run on the copied Workload"
    return remote


@pytest.mark.asyncio
async def test_a_rayjob_is_dispatched_to_the_worker_and_finishes_there(kube_apiserver, worker_apiserver,
                                                                       tmp_path) -> None:
    """Kueue's RayJob adapter: a RayJob handed to MultiKueue is copied to the worker that admitted its Workload
    (Kueue's labels, no managedBy, suspended for the worker's Kueue, which starts it on the copied Workload); the
    test plays KubeRay on the worker, the copy's status reaching the manager's RayJob while it runs and once it
    completes; the manager's Workload finishes and the copies are deleted."""
    async with _ray_clusters(kube_apiserver, worker_apiserver, tmp_path, "ray.io/rayjob") as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        handed = msgspec.json.decode(await kc.create(RAYJOBS, _rayjob(ns, "mk-ray"), ns))
        wl_name = rayjob_workload_name("mk-ray", handed["metadata"]["uid"])

        await _admitted_on_worker(c, wl_name, "the RayJob's Workload to be admitted")
        remote = await _started_copy(c, RAYJOBS, "mk-ray", wl_name, ("spec", "suspend"),
                                     "the RayJob's copy started by the worker's Kueue")
        assert remote["spec"]["entrypoint"] == "python -c 'print(1)'"

        # --- KubeRay runs the copy on the worker: the manager's RayJob shows it --------------------------------
        await wc.patch(RAYJOBS, "mk-ray", {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}},
                       ns, subresource="status")

        async def manager_shows(deployment: str) -> dict[str, Any] | None:
            rj = msgspec.json.decode(await kc.get(RAYJOBS, "mk-ray", ns))
            return rj if (rj.get("status") or {}).get("jobDeploymentStatus") == deployment else None

        await eventually(lambda: manager_shows("Running"), timeout=60,
                         what="the manager's RayJob to show the copy running")

        # --- completed on the worker: the manager's RayJob and Workload finish, the copies go -----------------
        await wc.patch(RAYJOBS, "mk-ray", {"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                                                      "message": "Job finished successfully."}},
                       ns, subresource="status")
        rj = await eventually(lambda: manager_shows("Complete"), timeout=60,
                              what="the manager's RayJob to show the copy complete")
        assert (rj["status"]["jobStatus"], rj["status"]["message"]) == ("SUCCEEDED", "Job finished successfully.")

        wl = await _workload_shows(kc, wl_name, ns, "Finished", "the manager's Workload to finish")
        assert _cond(wl, "Finished")["reason"] == "Succeeded"

        await _copies_deleted(wc, RAYJOBS, "mk-ray", wl_name, ns)


def _rayservice(ns: str, name: str) -> dict[str, Any]:
    """A RayService handed to MultiKueue, suspended at its cluster config."""
    return _handed(RAYSERVICES, ns, name, {"serveConfigV2": "applications: []",
                                           "rayClusterConfig": {"suspend": True, **_ray_cluster()}})


@pytest.mark.asyncio
async def test_a_rayservice_is_dispatched_to_the_worker_and_its_status_mirrored(kube_apiserver, worker_apiserver,
                                                                                tmp_path) -> None:
    """Kueue's RayService adapter: a RayService handed to MultiKueue is copied to the worker that admitted its
    Workload (Kueue's labels, no managedBy, suspended at its cluster config for the worker's Kueue, which starts it
    on the copied Workload); the test plays KubeRay on the worker, the copy's Ready condition reaching the manager's
    RayService. A service never finishes: its copies go once the manager's Workload is deactivated."""
    async with _ray_clusters(kube_apiserver, worker_apiserver, tmp_path, "ray.io/rayservice") as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        handed = msgspec.json.decode(await kc.create(RAYSERVICES, _rayservice(ns, "mk-svc"), ns))
        wl_name = rayservice_workload_name("mk-svc", handed["metadata"]["uid"])

        await _admitted_on_worker(c, wl_name, "the RayService's Workload to be admitted")
        remote = await _started_copy(c, RAYSERVICES, "mk-svc", wl_name, ("spec", "rayClusterConfig", "suspend"),
                                     "the RayService's copy started by the worker's Kueue")
        assert remote["spec"]["serveConfigV2"] == "applications: []"

        # --- KubeRay serves the copy on the worker: the manager's RayService shows it ---------------------------
        await _condition_mirrored(kc, wc, RAYSERVICES, "mk-svc", ns, {
            "type": "Ready", "status": "True", "reason": "RayServiceReady", "message": ""},
            "the manager's RayService to show the copy Ready")

        # --- the Serve applications edited on the manager: the copy gets them in place (MultiKueueRemoteSpecSync)
        serve = "applications:\n- name: edited\n  import_path: app:deployment\n"
        await kc.patch(RAYSERVICES, "mk-svc", {"spec": {"serveConfigV2": serve}}, ns)

        async def copy_serves() -> dict[str, Any] | None:
            there = await _remote(wc, RAYSERVICES, "mk-svc", ns)
            return there if there is not None and there["spec"].get("serveConfigV2") == serve else None

        edited = await eventually(copy_serves, timeout=30, what="the copy to get the manager's serveConfigV2")
        assert edited["metadata"]["uid"] == remote["metadata"]["uid"], "patched in place, not made anew"
        assert edited["spec"]["rayClusterConfig"]["suspend"] is False, "still started by the worker's Kueue"

        # --- deactivated on the manager: the copies go -------------------------------------------------------
        await kc.patch(BY_KIND["Workload"], wl_name, {"spec": {"active": False}}, ns)
        await _copies_deleted(wc, RAYSERVICES, "mk-svc", wl_name, ns)


PYTORCH = KUBEFLOW_KINDS["PyTorchJob"]


def _pytorchjob(ns: str, name: str, managed_by: str | None) -> dict[str, Any]:
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}}
    run_policy: dict[str, Any] = {"suspend": True}
    if managed_by is not None:
        run_policy["managedBy"] = managed_by
    return {"apiVersion": PYTORCH.resource.api_version, "kind": PYTORCH.KIND,
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"runPolicy": run_policy, PYTORCH.specs_field: {"Master": replica, "Worker": replica}}}


@pytest.mark.asyncio
async def test_a_pytorchjob_is_dispatched_to_the_worker_and_finishes_there(kube_apiserver, worker_apiserver,
                                                                           tmp_path) -> None:
    """Kueue's Kubeflow adapter: a PyTorchJob handed to MultiKueue (``spec.runPolicy.managedBy``) is copied to the
    worker that admitted its Workload (Kueue's labels, no managedBy), where the worker's kueue-es runs it on the
    copied Workload; the test plays the training operator there, and the copy's status replaces the manager's
    until it succeeds, the Workload finishes and the copies are deleted. One not handed to MultiKueue has its check
    Rejected in Kueue's words (which name ``spec.managedBy``)."""
    config = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob"]}})
    docs = [*crds.all_crds(), crds.kubeflow_crd(PYTORCH.KIND, PYTORCH.specs_field)]
    r = PYTORCH.resource
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
        await crds.install(kc, docs=docs)
        await crds.install(wc, docs=docs)
        sfx = secrets.token_hex(3)
        ns, _, worker, check = await _manager_queues(kc, worker_apiserver, sfx)
        await _worker_queues(wc, ns, sfx)
        async with (kueue_es(wc, tmp_path / "worker-log", config=config),
                    kueue_es(kc, tmp_path / "manager-log", config=config)):
            handed = msgspec.json.decode(await kc.create(r, _pytorchjob(ns, "mk-pt", "kueue.x-k8s.io/multikueue"), ns))
            wl_name = PYTORCH.workload_name("mk-pt", handed["metadata"]["uid"])

            wl = await _workload_shows(kc, wl_name, ns, "Admitted", "the PyTorchJob's Workload to be admitted", wc)
            assert wl["status"]["clusterName"] == worker

            async def remote() -> dict[str, Any] | None:
                return await _remote(wc, r, "mk-pt", ns)

            async def running_on_worker() -> dict[str, Any] | None:
                copy = await remote()
                return copy if copy is not None and copy["spec"]["runPolicy"].get("suspend") is False else None

            copy = await eventually(running_on_worker, timeout=60, what="the PyTorchJob's copy to run on the worker")
            labels = copy["metadata"]["labels"]
            assert labels["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
            assert copy["metadata"]["annotations"][PREBUILT] == wl_name
            assert "managedBy" not in copy["spec"]["runPolicy"]
            assert msgspec.json.decode(await kc.get(r, "mk-pt", ns))["spec"]["runPolicy"]["managedBy"] == (
                "kueue.x-k8s.io/multikueue")

            # --- the training operator on the worker runs it, then succeeds: the manager's shows each ---------
            running = {"type": "Running", "status": "True", "reason": "PyTorchJobRunning", "message": "running",
                       "lastTransitionTime": NOW}
            await wc.patch(r, "mk-pt", {"status": {"conditions": [running], "replicaStatuses": {
                "Master": {"active": 1}, "Worker": {"active": 1}}}}, ns, subresource="status")

            async def manager_status(type_: str) -> dict[str, Any] | None:
                pt = msgspec.json.decode(await kc.get(r, "mk-pt", ns))
                return pt if _true(pt, type_) else None

            await eventually(lambda: manager_status("Running"), timeout=60,
                             what="the manager's PyTorchJob to show Running")
            succeeded = {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded",
                         "message": "PyTorchJob mk-pt is successfully completed.", "lastTransitionTime": NOW}
            await wc.patch(r, "mk-pt", {"status": {"conditions": [{**running, "status": "False"}, succeeded],
                                                   "replicaStatuses": {"Master": {"active": None, "succeeded": 1},
                                                                       "Worker": {"active": None, "succeeded": 1}}}},
                           ns, subresource="status")
            pt = await eventually(lambda: manager_status("Succeeded"), timeout=60,
                                  what="the manager's PyTorchJob to show Succeeded")
            assert pt["status"]["replicaStatuses"] == {"Master": {"succeeded": 1}, "Worker": {"succeeded": 1}}

            await _workload_shows(kc, wl_name, ns, "Finished", "the manager's Workload to finish")

            await _copies_deleted(wc, r, "mk-pt", wl_name, ns)

            # --- a PyTorchJob MultiKueue is not handed: its check is Rejected ------------------------------------
            other = msgspec.json.decode(await kc.create(r, _pytorchjob(ns, "local-pt", None), ns))
            other_wl = PYTORCH.workload_name("local-pt", other["metadata"]["uid"])

            wl = await _rejected(kc, other_wl, ns, check, "the unmanaged PyTorchJob's Workload to be rejected")
            assert _check_message(wl, check) == UNMANAGED


@pytest.mark.asyncio
async def test_a_jobset_crd_installed_on_the_worker_after_connecting_is_watched_there(kube_apiserver, worker_apiserver,
                                                                                     tmp_path) -> None:
    """Kueue lists a worker's JobSets again on its next reconcile: the JobSet CRD installed on the worker once the
    manager is connected, a JobSet dispatched there has its copy's status mirrored back while it runs (only a
    watch of the worker's JobSets shows it), with no reconnect."""
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
        await crds.install(kc, docs=[*crds.all_crds(), crds.jobset_crd()])
        await crds.install(wc)
        jobset_crd = crds.jobset_crd()["metadata"]["name"]
        with contextlib.suppress(NotFound):  # an earlier test's, on the module's worker
            await wc.delete(crds.CRD_RESOURCE, jobset_crd)

        async def crd_gone() -> bool:
            try:
                await wc.get(crds.CRD_RESOURCE, jobset_crd)
            except NotFound:
                return True
            return False

        await eventually(crd_gone, timeout=60, what="the worker's JobSet CRD to be gone")
        sfx = secrets.token_hex(3)
        ns, _, worker, _ = await _manager_queues(kc, worker_apiserver, sfx)
        await _worker_queues(wc, ns, sfx)
        async with kueue_es(wc, tmp_path / "worker-log"), kueue_es(kc, tmp_path / "manager-log", config=config):
            async def cluster_active() -> bool:
                return _true(await get(kc, "MultiKueueCluster", worker), "Active")

            await eventually(cluster_active, what="the MultiKueueCluster to be Active")
            await crds.install(wc, docs=[crds.jobset_crd()])

            handed = msgspec.json.decode(await kc.create(JOBSETS, _jobset(ns, "late-js", "kueue.x-k8s.io/multikueue"),
                                                         ns))
            wl_name = jobset_workload_name("late-js", handed["metadata"]["uid"])

            async def copied() -> dict[str, Any] | None:
                return await _remote(wc, JOBSETS, "late-js", ns)

            await eventually(copied, timeout=60, what="the JobSet's copy on the worker")
            wl = await get(kc, "Workload", wl_name, ns)
            assert wl["status"]["clusterName"] == worker
            running = [{"name": "workers", "active": 2, "ready": 2}]
            await wc.patch(JOBSETS, "late-js", {"status": {"replicatedJobsStatus": running}}, ns,
                           subresource="status")

            async def mirrored() -> dict[str, Any] | None:
                js = msgspec.json.decode(await kc.get(JOBSETS, "late-js", ns))
                return js if (js.get("status") or {}).get("replicatedJobsStatus") == running else None

            await eventually(mirrored, timeout=60, what="the manager's JobSet to show its running copy's status")


@pytest.mark.asyncio
async def test_a_leaderworkersets_groups_run_on_one_worker_on_one_copy_of_the_set(kube_apiserver, worker_apiserver,
                                                                                 tmp_path) -> None:
    """Kueue's LWS adapter: both groups' Workloads are admitted on the worker, the set copied there once with the
    manager's set's UID, which the worker's LWS integration names the groups' Workloads from (it makes none: its
    groups run on the copied ones); the set's status is not mirrored. One group's Workload deactivated on the
    manager takes its copy and the set's copy along."""
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job", "pod", LWS_FRAMEWORK],
                         [crds.leaderworkerset_crd()]) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        template = {"spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                             "resources": {"requests": {"cpu": "1"}}}]}}
        doc = {"apiVersion": LEADER_WORKER_SETS.api_version, "kind": lw.KIND,
               "metadata": {"name": "mk-lws", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
               "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": template}}}
        made = msgspec.json.decode(await kc.create(LEADER_WORKER_SETS, doc, ns))
        uid = made["metadata"]["uid"]
        names = [lw.workload_name("mk-lws", uid, g) for g in (0, 1)]
        for name in names:
            await _admitted_on_worker(c, name, f"the group Workload {name} to be admitted")

        remote = await eventually(lambda: _remote(wc, LEADER_WORKER_SETS, "mk-lws", ns), timeout=60,
                                  what="the set's copy on the worker")
        assert remote["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert "kueue.x-k8s.io/prebuilt-workload-name" not in remote["metadata"]["labels"]
        assert remote["metadata"]["annotations"]["kueue.x-k8s.io/multikueue-origin-uid"] == uid
        on_worker = [msgspec.json.decode(raw)["metadata"] for raw in (await wc.list(BY_KIND["Workload"])).items]
        assert sorted(m["name"] for m in on_worker if m["namespace"] == ns) == sorted(names)

        # the set has no managedBy, so its LWS controller makes its groups' pods on the manager too (played here,
        # as Kueue's webhook leaves them): the pod integration adopts them for the groups' admitted Workloads, but
        # starts none, the Workloads having a MultiKueue check (Kueue's ShouldSkipLocalExecution)
        for g in (0, 1):
            await create(kc, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"mk-lws-{g}", "namespace": ns,
                "labels": {lw.SET_NAME_LABEL: "mk-lws", lw.GROUP_INDEX_LABEL: str(g), lw.WORKER_INDEX_LABEL: "0"},
                "annotations": {lw.SUSPENDING_PARENT: lw.FRAMEWORK_NAME, lw.SERVING: "true"}},
                "spec": {**template["spec"], "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}})

        async def adopted(name: str, pod: str) -> bool:
            refs = (await get(kc, "Workload", name, ns))["metadata"].get("ownerReferences") or []
            return any(r["kind"] == "Pod" and r["name"] == pod for r in refs)

        for g, name in enumerate(names):
            await eventually(lambda n=name, p=f"mk-lws-{g}": adopted(n, p), timeout=60,
                             what=f"mk-lws-{g} adopted for its group's Workload on the manager")
        await asyncio.sleep(3)  # a start would follow the adoption at once
        for g in (0, 1):
            assert scheduling_gates(await get(kc, "Pod", f"mk-lws-{g}", ns)) == ["kueue.x-k8s.io/admission"]

        await wc.patch(LEADER_WORKER_SETS, "mk-lws", {"status": {"readyReplicas": 2, "replicas": 2}}, ns,
                       subresource="status")
        await kc.patch(BY_KIND["Workload"], names[1], {"spec": {"active": False}}, ns)

        async def taken_along() -> bool:  # the set's copy deleted (group 0, still running there, copies it anew)
            now = await _remote(wc, LEADER_WORKER_SETS, "mk-lws", ns)
            gone = now is None or now["metadata"]["uid"] != remote["metadata"]["uid"]
            return gone and await _maybe(wc, "Workload", names[1], ns) is None

        await eventually(taken_along, timeout=60, what="group 1's copy and the set's copy deleted on the worker")
        assert (msgspec.json.decode(await kc.get(LEADER_WORKER_SETS, "mk-lws", ns)).get("status") or {}).get(
            "readyReplicas") is None, "the set's status is not mirrored"


def _gated_pod(ns: str, name: str, labels: dict[str, str], annotations: dict[str, str], cpu: str = "1"
               ) -> dict[str, Any]:
    """A queued Pod as Kueue's Pod webhook stores it: gated, labelled managed, with Kueue's finalizer."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": ns, "finalizers": ["kueue.x-k8s.io/managed"],
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/managed": "true", **labels},
        "annotations": annotations},
        "spec": {"restartPolicy": "Never", "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                 "containers": [{"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}}}]}}


@pytest.mark.asyncio
async def test_a_pod_runs_on_the_worker_on_a_copy_and_its_status_is_mirrored(kube_apiserver, worker_apiserver,
                                                                              tmp_path) -> None:
    """Kueue's Pod adapter (the ``pod`` framework): a Pod has no managedBy and is MultiKueue's; admitted on the
    worker, it is copied there (name, labels, annotations, spec; Kueue's two labels added), the worker's Kueue
    lifts the copy's gate on the copied Workload while the manager's Pod stays gated, and the copy's status is
    mirrored to it, the copy's PodScheduled=True replacing its SchedulingGated (Kueue #13136); the copy succeeding
    finishes the Workload on the manager and the copies are deleted."""
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job", "pod"], []) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        pods = BY_KIND["Pod"]
        gated = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
        made = await create(kc, _gated_pod(ns, "mk-pod", {"app": "a"}, {"team": "x"}))
        await kc.patch(pods, "mk-pod", {"status": {"conditions": [gated]}}, ns, subresource="status")
        wl_name = pod_sync.workload_name("mk-pod", made["metadata"]["uid"])
        await _admitted_on_worker(c, wl_name, "the Pod's Workload to be admitted on the worker")

        async def started() -> dict[str, Any] | None:
            remote = await _remote(wc, pods, "mk-pod", ns)
            return remote if remote is not None and not scheduling_gates(remote) else None

        remote = await eventually(started, timeout=60, what="the Pod's copy ungated on the worker")
        copied = {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/managed": "true", "app": "a",
                  "kueue.x-k8s.io/multikueue-origin": "multikueue"}
        assert copied.items() <= remote["metadata"]["labels"].items()  # with what the worker's start added
        assert remote["metadata"]["annotations"]["team"] == "x"
        assert remote["metadata"]["annotations"][PREBUILT] == wl_name
        on_worker = [msgspec.json.decode(raw)["metadata"] for raw in (await wc.list(BY_KIND["Workload"])).items]
        assert [m["name"] for m in on_worker if m["namespace"] == ns] == [wl_name], "run on the copied Workload"

        # the worker's kubelet, played: the copy is scheduled and runs
        await wc.patch(pods, "mk-pod", {"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}]}}, ns,
            subresource="status")

        async def running() -> dict[str, Any] | None:
            local = await get(kc, "Pod", "mk-pod", ns)
            return local if (local.get("status") or {}).get("phase") == "Running" else None

        local = await eventually(running, timeout=60, what="the copy's status mirrored to the manager's Pod")
        conds = {x["type"]: (x["status"], x.get("reason")) for x in local["status"]["conditions"]}
        assert conds == {"PodScheduled": ("True", None), "Ready": ("True", None)}
        assert scheduling_gates(local) == ["kueue.x-k8s.io/admission"], "never started on the manager"

        await wc.patch(pods, "mk-pod", {"status": {"phase": "Succeeded"}}, ns, subresource="status")
        await _workload_shows(kc, wl_name, ns, "Finished", "the Pod's Workload finished on the manager")
        await _copies_deleted(wc, pods, "mk-pod", wl_name, ns)
        assert (await get(kc, "Pod", "mk-pod", ns))["status"]["phase"] == "Succeeded"


@pytest.mark.asyncio
async def test_a_pod_groups_pods_are_each_copied_to_the_worker_and_mirrored(kube_apiserver, worker_apiserver,
                                                                            tmp_path) -> None:
    """Kueue's Pod adapter with a pod group: its one Workload admitted on the worker, every Pod of the group is
    copied there and started by the worker's Kueue on the copied Workload, each copy's status mirrored to its Pod
    on the manager; the group succeeding there finishes the Workload and every copy is deleted."""
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job", "pod"], []) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        pods, names = BY_KIND["Pod"], ["mk-g-0", "mk-g-1"]
        for name in names:
            await create(kc, _gated_pod(ns, name, {"kueue.x-k8s.io/pod-group-name": "mk-g"},
                                        {"kueue.x-k8s.io/pod-group-total-count": "2"}, cpu="500m"))
        await _admitted_on_worker(c, "mk-g", "the group's Workload to be admitted on the worker")

        async def started(name: str) -> dict[str, Any] | None:
            remote = await _remote(wc, pods, name, ns)
            return remote if remote is not None and not scheduling_gates(remote) else None

        for name in names:
            remote = await eventually(lambda n=name: started(n), timeout=60, what=f"{name}'s copy ungated")
            assert remote["metadata"]["annotations"][PREBUILT] == "mk-g"
        on_worker = [msgspec.json.decode(raw)["metadata"] for raw in (await wc.list(BY_KIND["Workload"])).items]
        assert [m["name"] for m in on_worker if m["namespace"] == ns] == ["mk-g"], "run on the copied Workload"

        for name in names:
            await wc.patch(pods, name, {"status": {"phase": "Running"}}, ns, subresource="status")

        async def mirrored() -> bool:
            phases = [((await get(kc, "Pod", n, ns)).get("status") or {}).get("phase") for n in names]
            return phases == ["Running", "Running"]

        await eventually(mirrored, timeout=60, what="each copy's status mirrored to its Pod on the manager")
        for name in names:
            assert scheduling_gates(await get(kc, "Pod", name, ns)) == ["kueue.x-k8s.io/admission"]
            await wc.patch(pods, name, {"status": {"phase": "Succeeded"}}, ns, subresource="status")
        await _workload_shows(kc, "mk-g", ns, "Finished", "the group's Workload finished on the manager")

        async def all_gone() -> bool:
            return await _maybe(wc, "Workload", "mk-g", ns) is None and all(
                [await _remote(wc, pods, n, ns) is None for n in names])

        await eventually(all_gone, timeout=60, what="every copy deleted on the worker")


WIDGETS = Resource("Widget", "example.com", "v1", "widgets", True, status_subresource=True, optional=True)


def _widget_crd() -> dict[str, Any]:
    """A small custom job kind, example.com/v1 Widget: no controller of its own, its spec and status kept as
    written, a status subresource."""
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": free, "status": free}}}}]}}


async def _widget_workload(kc, ns: str, name: str, managed_by: str | None) -> str:
    """A Widget and its Workload, as the kind's own controller (an external framework's) makes them: the Workload
    owned by the Widget, in the queue. Returns the Workload's name."""
    spec: dict[str, Any] = {"size": 3}
    if managed_by is not None:
        spec["managedBy"] = managed_by
    widget = msgspec.json.decode(await kc.create(WIDGETS, {
        "apiVersion": WIDGETS.api_version, "kind": "Widget",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": "a"}}, "spec": spec}, ns))
    wl_name = f"widget-{name}"
    await create(kc, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {
        "name": wl_name, "namespace": ns, "ownerReferences": [{
            "apiVersion": WIDGETS.api_version, "kind": "Widget", "name": name, "uid": widget["metadata"]["uid"],
            "controller": True}]},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    return wl_name


@pytest.mark.asyncio
async def test_a_custom_kind_is_run_on_the_worker_by_the_generic_adapter(kube_apiserver, worker_apiserver,
                                                                         tmp_path) -> None:
    """MultiKueueAdaptersForCustomJobs (beta, on): a kind of ``multiKueue.externalFrameworks`` (found through the
    manager's API discovery) handed to MultiKueue (``spec.managedBy``) is copied whole to the worker that admitted
    its Workload (Kueue's labels, no managedBy); the copy's status, set there by the kind's controller (played by
    the test), is mirrored to the manager's; finished there, the manager's Workload finishes and the copies go. One
    not handed to MultiKueue is Rejected in the generic adapter's words."""
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job"], [_widget_crd()],
                         {"externalFrameworks": [{"name": "Widget.v1.example.com"}]}) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        wl_name = await _widget_workload(kc, ns, "mk-widget", "kueue.x-k8s.io/multikueue")
        await _admitted_on_worker(c, wl_name, "the Widget's Workload to be admitted")
        remote = await eventually(lambda: _remote(wc, WIDGETS, "mk-widget", ns), timeout=60,
                                  what="the Widget's copy on the worker")
        labels = remote["metadata"]["labels"]
        assert (labels["team"], labels["kueue.x-k8s.io/multikueue-origin"],
                remote["metadata"]["annotations"][PREBUILT]) == ("a", "multikueue", wl_name)
        assert remote["spec"] == {"size": 3}, "copied whole but for spec.managedBy"

        # --- the kind's controller on the worker reports: the manager's Widget shows it -----------------------
        await _condition_mirrored(kc, wc, WIDGETS, "mk-widget", ns, {
            "type": "Running", "status": "True", "reason": "Started", "message": ""},
            "the manager's Widget to show its copy's status")

        # --- finished on the worker (its Workload, as the kind's controller there finishes it) -----------------
        there = await get(wc, "Workload", wl_name, ns)
        finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}
        await wc.patch(BY_KIND["Workload"], wl_name, {"status": {"conditions": [
            *there["status"]["conditions"], finished]}}, ns, subresource="status")
        wl = await _workload_shows(kc, wl_name, ns, "Finished", "the manager's Workload to finish")
        assert _cond(wl, "Finished")["reason"] == "Succeeded"
        await _copies_deleted(wc, WIDGETS, "mk-widget", wl_name, ns)

        # --- a Widget not handed to MultiKueue: Rejected ------------------------------------------------------
        other = await _widget_workload(kc, ns, "own-widget", None)
        wl = await _rejected(kc, other, ns, c.check, "the unhanded Widget's Workload to be rejected")
        assert _check_message(wl, c.check) == (
            'The owner is not managed by Kueue: Expecting .spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""')
        assert await _remote(wc, WIDGETS, "own-widget", ns) is None


@pytest.mark.asyncio
async def test_manager_quota_follows_the_worker_cluster_queues(kube_apiserver, worker_apiserver, tmp_path) -> None:
    """MultiKueueManagerQuotaAutomation: the manager's ClusterQueue shows the condition (NotRequested until its
    MultiKueueConfig asks for ``Automated``), then takes the worker ClusterQueue's quota into its spec, and follows
    it when the worker's changes, told by the watch on the worker's ClusterQueues: each of the worker's queue kinds
    is listed once, and not again; the fold schedules with it."""
    gate_on = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                           "featureGates": {"MultiKueueManagerQuotaAutomation": True}})
    async with _manager_and_worker(kube_apiserver, worker_apiserver) as c:
        kc, wc, cq, sfx = c.kc, c.wc, c.cq, c.sfx
        async with kueue_es(kc, tmp_path / "manager-log", config=gate_on) as (connector, journal):
            async def condition(reason: str) -> dict[str, Any] | None:
                c = _cond(await get(kc, "ClusterQueue", cq), "MultiKueueManagerQuotaAutomation")
                return c if c is not None and c["reason"] == reason else None

            c = await eventually(partial(condition, "NotRequested"), what="the condition NotRequested")
            assert (c["status"], c["message"]) == ("False", "MultiKueue manager quota automation has not been requested.")
            await kc.patch(BY_KIND["MultiKueueConfig"], f"mkc-{sfx}", {"spec": {"quotaManagement": "Automated"}})
            c = await eventually(partial(condition, "QuotaAutomated"), what="the condition QuotaAutomated")
            assert (c["status"], c["message"]) == (
                "True", "ClusterQueue quota is automatically managed based on MultiKueue workers.")
            assert connector.manager_quota.lists == 2  # the worker's LocalQueues and ClusterQueues, listed once
            await wc.patch(BY_KIND["ClusterQueue"], f"wcq-{sfx}", {"spec": {"resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": f"wf-{sfx}", "resources": [{"name": "cpu", "nominalQuota": "7500m"}]}]}]}})

            async def followed() -> dict[str, Any] | None:
                spec = (await get(kc, "ClusterQueue", cq))["spec"]
                return spec if spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "7500m" \
                    else None

            spec = await eventually(followed, what="the manager's quota to follow the worker's")
            assert spec["resourceGroups"][0]["flavors"][0]["name"] == f"f-{sfx}"
            assert connector.manager_quota.lists == 2  # the change came by the watch, nothing listed again

            async def folded() -> bool:
                rq = journal.mirror.state.cluster_queues[cq].spec.resource_groups[0].flavors[0].resources[0]
                return rq.nominal_quota == "7500m"

            await eventually(folded, what="the fold to hold the automated quota")


@pytest.mark.asyncio
async def test_a_gated_copy_preempts_on_the_worker_only_once_the_manager_opens_its_gate(
        kube_apiserver, worker_apiserver, tmp_path) -> None:
    """MultiKueueOrchestratedPreemption (beta, on since v0.20) on, manager and worker: the copy of a high-priority Job's Workload
    is made with the ``kueue.x-k8s.io/multikueue`` preemption gate; the worker's scheduler, which would preempt a
    lower-priority Workload for it, is held by the closed gate (``BlockedOnPreemptionGates`` True,
    ``PreemptionGated``); the manager sees that and opens the gate on the copy (``status.preemptionGates``); the
    worker then preempts, admits the copy, and the manager's Workload is admitted there."""
    gate = "kueue.x-k8s.io/multikueue"
    config = load_config({"integrations": {"frameworks": ["batch/job"]},
                          "featureGates": {"MultiKueueOrchestratedPreemption": True}})
    async with _manager_and_worker(kube_apiserver, worker_apiserver,
                                   preemption={"withinClusterQueue": "LowerPriority"}) as c:
        kc, wc, ns, worker, sfx = c.kc, c.wc, c.ns, c.worker, c.sfx
        for kube in (kc, wc):
            await create(kube, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass",
                                "metadata": {"name": f"high-{sfx}"}, "value": 100})
        async with (kueue_es(wc, tmp_path / "worker-log", config=config),
                    kueue_es(kc, tmp_path / "manager-log", config=config)):
            # --- on the worker, a local low-priority Job takes the whole queue ---------------------------------
            low_job = await create(wc, job(ns, "low", "user-queue", cpu="4"))
            low_name = workload_name("low", low_job["metadata"]["uid"])
            await _workload_shows(wc, low_name, ns, "QuotaReserved", "the worker's low Workload to hold the quota")

            # --- a high-priority Job handed to MultiKueue on the manager --------------------------------------
            high = job(ns, "high", "user-queue", cpu="4", labels={"kueue.x-k8s.io/priority-class": f"high-{sfx}"})
            high["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
            manager_job = await create(kc, high)
            wl_name = workload_name("high", manager_job["metadata"]["uid"])

            copy_ = await eventually(lambda: _maybe(wc, "Workload", wl_name, ns), timeout=60,
                                     what="the copy on the worker")
            assert copy_["spec"]["preemptionGates"] == [{"name": gate}], "made gated"

            # --- held by the gate, then let through by the manager -------------------------------------------
            async def opened() -> dict[str, Any] | None:
                there = await _maybe(wc, "Workload", wl_name, ns)
                states = (there or {}).get("status", {}).get("preemptionGates") or []
                return there if [(g["name"], g["position"]) for g in states] == [(gate, "Open")] else None

            there = await eventually(opened, timeout=60, what="the manager to open the copy's preemption gate")
            blocked = _cond(there, "BlockedOnPreemptionGates")
            assert blocked is not None, "the worker's scheduler was held by the closed gate first"
            assert blocked["reason"] in ("PreemptionGated", "QuotaReserved")
            assert "Workload requires preemption, but it's gated" in blocked["message"]

            low = await _workload_shows(wc, low_name, ns, "Preempted", "the low Workload to be preempted on the worker")
            assert _cond(low, "Preempted")["reason"] == "InClusterQueue"
            wl = await _workload_shows(kc, wl_name, ns, "Admitted", "the manager's Workload to be admitted", wc)
            assert wl["status"]["clusterName"] == worker
            there = await _workload_shows(wc, wl_name, ns, "QuotaReserved", "the copy to hold the worker's quota")
            blocked = _cond(there, "BlockedOnPreemptionGates")
            assert (blocked["status"], blocked["reason"], blocked["message"]) == (
                "False", "QuotaReserved", "Previously: Workload requires preemption, but it's gated")


class _LateWrites:
    """A worker's client whose creates and patches answer ``late_s`` after the apiserver did, as to a busy
    manager: the worker acts on what was written, and the manager's watch of it brings that, before the manager
    reads the answer."""

    def __init__(self, client: Any, late_s: float) -> None:
        self._client, self._late_s = client, late_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def create(self, *args: Any, **kw: Any) -> bytes:
        answer = await self._client.create(*args, **kw)
        await asyncio.sleep(self._late_s)
        return answer

    async def patch(self, *args: Any, **kw: Any) -> bytes:
        answer = await self._client.patch(*args, **kw)
        await asyncio.sleep(self._late_s)
        return answer


@pytest.mark.asyncio
async def test_a_late_answer_from_the_worker_does_not_hide_what_its_watch_brought_since(
        kube_apiserver, worker_apiserver, tmp_path, monkeypatch) -> None:
    """The manager knows the worker's copies as its watch of the worker shows them. The answer to its own write
    (the copy created) may come after the watch brought a later version (the worker admitted the copy
    meanwhile): kept, it would take the manager back to the copy as written, which would never be seen admitted
    (CI's intermittent timeouts waiting for a Workload admitted on the worker)."""
    built = multikueue_kubeconfigs.client_from

    async def late_client_from(kubeconfig: bytes) -> Any:
        return _LateWrites(await built(kubeconfig), late_s=3.0)

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", late_client_from)
    async with (_manager_and_worker(kube_apiserver, worker_apiserver) as c,
                kueue_es(c.wc, tmp_path / "worker-log"), kueue_es(c.kc, tmp_path / "manager-log")):
        handed = job(c.ns, "mk-late", "user-queue")
        handed["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
        manager_job = await create(c.kc, handed)
        wl_name = workload_name("mk-late", manager_job["metadata"]["uid"])

        wl = await _workload_shows(c.kc, wl_name, c.ns, "Admitted", "the Workload to be admitted on the worker", c.wc)
        assert wl["status"]["clusterName"] == c.worker

        async def started() -> dict[str, Any] | None:
            remote = await _remote(c.wc, BY_KIND["Job"], "mk-late", c.ns)
            return remote if remote is not None and remote["spec"].get("suspend") is False else None

        await eventually(started, timeout=60, what="the Job's copy to run on the worker")


class _CutOnce:
    """A worker's client whose first Workload watch, opened, ends as a cut connection once ``cut`` is set (an LB
    idle timeout, the worker apiserver restarting); ``opened`` counts the Workload watches asked for."""

    def __init__(self, client: Any) -> None:
        self._client, self.cut, self.opened = client, asyncio.Event(), 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def watch(self, resource: Any, rv: str, **kw: Any) -> Any:
        if resource.kind == "Workload":
            self.opened += 1
            if self.opened == 1:
                if kw.get("on_open") is not None:
                    kw["on_open"]()
                await self.cut.wait()
                raise Unavailable("watch /apis/kueue.x-k8s.io/v1beta2/workloads: connection reset by peer")
        async for e in self._client.watch(resource, rv, **kw):
            yield e


@pytest.mark.asyncio
async def test_a_cut_worker_watch_keeps_the_worker_active_and_its_pending_copy(
        kube_apiserver, worker_apiserver, tmp_path, monkeypatch) -> None:
    """Kueue only reconnects a worker whose watch ended: its MultiKueueCluster stays Active and the copy pending
    there is left as it is (not deleted with the worker taken for lost, then made again at the back of its queue).
    No Kueue runs on the worker here: its copies stay pending."""
    built = multikueue_kubeconfigs.client_from
    clients: list[_CutOnce] = []

    async def cut_client_from(kubeconfig: bytes) -> Any:
        clients.append(_CutOnce(await built(kubeconfig)))
        return clients[-1]

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", cut_client_from)
    async with (_manager_and_worker(kube_apiserver, worker_apiserver) as c,
                kueue_es(c.kc, tmp_path / "manager-log")):
        names = []
        for name in ("mk-cut-a", "mk-cut-b"):
            handed = job(c.ns, name, "user-queue")
            handed["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
            names.append(workload_name(name, (await create(c.kc, handed))["metadata"]["uid"]))
            if len(names) == 1:
                copy = await eventually(partial(_maybe, c.wc, "Workload", names[0], c.ns), timeout=60,
                                        what="the copy on the worker")
                active = _cond(await _maybe(c.kc, "MultiKueueCluster", c.worker), "Active")
                assert active is not None and active["status"] == "True"
                clients[-1].cut.set()

                async def reconnected() -> bool:
                    return clients[-1].opened > 1

                await eventually(reconnected, timeout=60, what="the worker's Workload watch opened again")
        # the second copy is made by a pass after the reconnect: the first one's fate is decided by then
        await eventually(partial(_maybe, c.wc, "Workload", names[1], c.ns), timeout=60,
                         what="the second copy on the worker")
        after = await _maybe(c.wc, "Workload", names[0], c.ns)
        assert after is not None and after["metadata"]["uid"] == copy["metadata"]["uid"], "the copy kept"
        assert _cond(await _maybe(c.kc, "MultiKueueCluster", c.worker), "Active") == active, "Active kept"
