"""A burst of Jobs on a ClusterQueue with a ProvisioningRequest check, through kueue-es on a real kube-apiserver:
how long from the burst to the last ProvisioningRequest, and how much of that is the request applier's, which
carries out one decision (three or more API calls) at a time.

Starts etcd + kube-apiserver (``scripts/kube.sh``), installs the CRDs (the autoscaler's ProvisioningRequest one
too), one ResourceFlavor, one ClusterQueue with room for every Job and a ProvisioningRequest admission check, and a
LocalQueue; runs the connector and the scheduler in this process over an embedded log (fsync always, as
``kueue-es run --kube``) and creates N suspended Jobs at once. A separate watch times, per Workload, when the
apiserver first stores its quota reservation (the applier creates no request before: Kueue's rule) and when its
ProvisioningRequest appears, and the applier's time in its API calls is summed. Reports JSON (the connector's
log lines go to stderr).

    python benchmarks/provreq_burst.py --jobs 150
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

import msgspec
import structlog
from k8s_e2e import KUEUE, _job, run_on_cluster
from kubernetes_asyncio import config

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.connector import Connector, schedule
from connectors.k8s.errors import Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND, PROVISIONING_REQUESTS
from events.filelog import FileLog


async def _setup(kc: KubeClient, n: int, ns: str) -> None:
    await crds.install(kc)
    await crds.install(kc, docs=[crds.provisioning_request_crd()])
    await kc.create(BY_KIND["Namespace"], {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await kc.create(BY_KIND["ProvisioningRequestConfig"], {
        "apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": "prc"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"}})
    await kc.create(BY_KIND["AdmissionCheck"], {
        "apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": "prov"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                 "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"}}})
    await kc.create(BY_KIND["ResourceFlavor"], {"apiVersion": KUEUE, "kind": "ResourceFlavor",
                                                "metadata": {"name": "default"}, "spec": {}})
    await kc.create(BY_KIND["ClusterQueue"], {
        "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
                 "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                     {"name": "default", "resources": [{"name": "cpu", "nominalQuota": n}]}]}]}})
    await kc.create(BY_KIND["LocalQueue"], {"apiVersion": KUEUE, "kind": "LocalQueue",
                                            "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "cq"}},
                    ns)


async def _first_seen(kc: KubeClient, resource: object, into: dict[str, float], keep: object) -> None:
    """When each object of ``resource`` first satisfies ``keep`` (by name), from a list+watch; a watch refused or
    cut for a while (429 ``storage is (re)initializing`` for a CRD just installed) is opened again from the last
    resourceVersion seen."""
    rv = (await kc.list(resource)).metadata.resource_version
    while True:
        try:
            async for e in kc.watch(resource, rv, timeout_seconds=600):
                obj = msgspec.json.decode(e.object)
                rv = obj.get("metadata", {}).get("resourceVersion") or rv
                name = obj.get("metadata", {}).get("name", "")
                if e.type != "BOOKMARK" and name not in into and keep(obj):  # type: ignore[operator]
                    into[name] = time.perf_counter()
        except Unavailable:
            await asyncio.sleep(0.2)


def _reserved(wl: dict) -> bool:
    return any(c["type"] == "QuotaReserved" and c["status"] == "True"
               for c in (wl.get("status") or {}).get("conditions", []))


async def bench(kubeconfig: str, n: int, log_dir: Path) -> dict:
    kc = KubeClient(await config.new_client_from_config(config_file=kubeconfig))
    ns = "bench"
    await _setup(kc, n, ns)
    log = FileLog.open(log_dir, fsync="always")
    journal = LocalJournal(log, Mirror())
    connector = Connector(kc, journal, watch_timeout_s=300)
    busy = {"s": 0.0}
    apply = connector.requests._apply

    async def timed(offset: int, e: object) -> bool:
        t = time.perf_counter()
        try:
            return await apply(offset, e)  # type: ignore[arg-type]
        finally:
            busy["s"] += time.perf_counter() - t

    connector.requests._apply = timed  # type: ignore[method-assign]
    reserved: dict[str, float] = {}
    requested: dict[str, float] = {}
    tasks = [asyncio.create_task(connector.run()), asyncio.create_task(schedule(journal, ready=connector.watcher.wait_synced)),
             asyncio.create_task(_first_seen(kc, BY_KIND["Workload"], reserved, _reserved)),
             asyncio.create_task(_first_seen(kc, PROVISIONING_REQUESTS, requested, lambda _: True))]
    await connector.watcher.wait_synced()
    await asyncio.sleep(0.5)
    t0 = time.perf_counter()
    await asyncio.gather(*(kc.create(BY_KIND["Job"], _job(ns, f"job-{i:05d}"), ns) for i in range(n)))
    while len(requested) < n:
        if time.perf_counter() - t0 > 300:
            raise TimeoutError(f"{len(requested)} of {n} ProvisioningRequests after 300 s")
        await asyncio.sleep(0.05)
    for t in tasks:
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
    await log.close()
    await kc.close()
    lag = sorted(requested[f"{wl}-prov-1"] - t for wl, t in reserved.items() if f"{wl}-prov-1" in requested)
    return {"jobs": n,
            "request_after_reservation_s": {"p50": round(statistics.median(lag), 2), "max": round(lag[-1], 2)},
            "last_reservation_stored_s": round(max(reserved.values()) - t0, 2),
            "last_request_s": round(max(requested.values()) - t0, 2),
            "applier_busy_s": round(busy["s"], 2), "applied": connector.requests.stats.applied}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=150)
    args = p.parse_args()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    run_on_cluster(lambda kubeconfig, log: bench(kubeconfig, args.jobs, log))


if __name__ == "__main__":
    main()
