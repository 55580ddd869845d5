"""MultiKueueClusterProfile (alpha) across two real apiservers: the manager (the session's) serves the
ClusterProfile API (``multicluster.x-k8s.io``), a ClusterProfile in Kueue's namespace offers the worker (the
module's second apiserver, ``test_multikueue``'s) through an access provider, and the Configuration names that
provider's credential plugin, a small script written by the test that hands back the worker's client certificate.
The plugin's first answer is a token the worker refuses (401) though it has not expired: the plugin is run again,
and its next answer reaches the worker. The profile's cluster names a ``proxy-url``, an HTTP CONNECT proxy the test
runs: the worker is reached through it. A MultiKueueCluster naming the profile gets connected with it and a Job
handed to MultiKueue runs on the worker; one naming a profile not there is ``BadClusterProfile`` until the profile is
made."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import yaml
from kubehelp import KUEUE, connect, create, eventually, get, job, kueue_es
from test_multikueue import (  # noqa: F401 - the worker apiserver fixture
    KUEUE_NAMESPACE,
    _cond,
    _maybe,
    _worker_queues,
    _workload_shows,
    multikueue_queues,
    worker_apiserver,
)

from connectors.k8s import crds
from connectors.k8s.clusterprofile import CLUSTER_PROFILES, EXEC_EXTENSION
from connectors.k8s.errors import AlreadyExists, NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
V1 = "client.authentication.k8s.io/v1"


def _profile_crd() -> dict[str, Any]:
    """The ClusterProfile API, enough of it: namespaced, its status a subresource, its fields kept as written."""
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "clusterprofiles.multicluster.x-k8s.io"},
            "spec": {"group": "multicluster.x-k8s.io", "scope": "Namespaced",
                     "names": {"kind": "ClusterProfile", "listKind": "ClusterProfileList",
                               "plural": "clusterprofiles", "singular": "clusterprofile"},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": free, "status": free}}}}]}}


def _plugin(tmp_path: Path, kubeconfig: dict[str, Any]) -> tuple[str, Path, Path]:
    """A credential plugin answering, the first time, with a token the worker does not know (expiring in 2100),
    then with the worker's admin client certificate; it records what it was handed, and each run."""
    user = kubeconfig["users"][0]["user"]
    refused = {"apiVersion": V1, "kind": "ExecCredential", "status": {
        "token": "not-known-there", "expirationTimestamp": "2100-01-01T00:00:00Z"}}
    answer = {"apiVersion": V1, "kind": "ExecCredential", "status": {
        "clientCertificateData": base64.b64decode(user["client-certificate-data"]).decode(),
        "clientKeyData": base64.b64decode(user["client-key-data"]).decode()}}
    seen, runs = tmp_path / "exec-info.json", tmp_path / "exec-runs"
    path = tmp_path / "worker-credentials"
    path.write_text(f"#!{sys.executable}\nimport os, sys\n"
                    f"open({str(seen)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'])\n"
                    f"first = not os.path.exists({str(runs)!r})\n"
                    f"open({str(runs)!r}, 'a').write('x')\n"
                    f"sys.stdout.write({json.dumps(json.dumps(refused))} if first else "
                    f"{json.dumps(json.dumps(answer))})\n")
    path.chmod(0o755)
    return str(path), seen, runs


@contextlib.asynccontextmanager
async def _connect_proxy() -> AsyncIterator[tuple[str, list[str]]]:
    """An HTTP CONNECT proxy on a free local port: its URL, and the ``host:port`` of each tunnel it opened."""
    tunnels: list[str] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target = head.split(b" ")[:2]
        if method != b"CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            writer.close()
            return
        host, port = target.decode().rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        tunnels.append(target.decode())
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", tunnels
    finally:
        server.close()


async def _profile(kc, name: str, cluster: dict[str, Any]) -> None:
    """A ClusterProfile in Kueue's namespace offering ``cluster`` through the access provider ``test-provider``."""
    await kc.create(CLUSTER_PROFILES, {"apiVersion": CLUSTER_PROFILES.api_version, "kind": "ClusterProfile",
                                       "metadata": {"name": name, "namespace": KUEUE_NAMESPACE},
                                       "spec": {"displayName": name, "clusterManager": {"name": "test"}}},
                    KUEUE_NAMESPACE)
    await kc.patch(CLUSTER_PROFILES, name, {"status": {"accessProviders": [
        {"name": "test-provider", "cluster": cluster}]}}, KUEUE_NAMESPACE, subresource="status")


async def _active(kc, name: str, status: str) -> dict[str, Any]:
    async def shows() -> dict[str, Any] | None:
        c = _cond(await get(kc, "MultiKueueCluster", name), "Active")
        return c if c is not None and c["status"] == status else None

    return await eventually(shows, timeout=60, what=f"the MultiKueueCluster {name} Active={status}")


@pytest.mark.asyncio
async def test_a_worker_named_by_a_cluster_profile_is_reached_with_the_plugins_credentials(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    worker_kc = yaml.safe_load(Path(worker_apiserver.kubeconfig).read_text())
    command, seen, runs = _plugin(tmp_path, worker_kc)
    config = load_config({"featureGates": {"MultiKueueClusterProfile": True}, "multiKueue": {"clusterProfile": {
        "accessProviders": [{"name": "test-provider", "execConfig": {
            "command": command, "apiVersion": V1, "interactiveMode": "Never", "provideClusterInfo": True}}]}}})
    server = worker_kc["clusters"][0]["cluster"]
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc, \
            _connect_proxy() as (proxy, tunnels):
        cluster = {"server": server["server"], "certificate-authority-data": server["certificate-authority-data"],
                   "proxy-url": proxy, "extensions": [{"name": EXEC_EXTENSION, "extension": {"audience": "worker"}}]}
        await crds.install(kc, docs=[*crds.all_crds(), _profile_crd()])
        await crds.install(wc)
        for raw in (await kc.list(BY_KIND["MultiKueueCluster"])).items:  # an earlier test's name the same worker
            with contextlib.suppress(NotFound):
                await kc.delete(BY_KIND["MultiKueueCluster"], msgspec.json.decode(raw)["metadata"]["name"])
        with contextlib.suppress(AlreadyExists):
            await kc.create(BY_KIND["Namespace"], {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": KUEUE_NAMESPACE}})
        sfx = secrets.token_hex(3)
        worker, check = f"profiled-{sfx}", f"mk-{sfx}"
        await _profile(kc, f"profile-{sfx}", cluster)
        for name, profile in ((worker, f"profile-{sfx}"), (f"missing-{sfx}", f"later-{sfx}")):
            await create(kc, {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": name},
                              "spec": {"clusterSource": {"clusterProfileRef": {"name": profile}}}})
        ns, _ = await multikueue_queues(kc, sfx, worker, check)
        await _worker_queues(wc, ns, sfx)

        async with kueue_es(wc, tmp_path / "worker-log"), kueue_es(kc, tmp_path / "manager-log", config=config):
            # --- a profile not there: BadClusterProfile, in Kueue's words -------------------------------------
            c = await _active(kc, f"missing-{sfx}", "False")
            assert (c["reason"], c["message"]) == (
                "BadClusterProfile",
                f'load client config failed: ClusterProfile.multicluster.x-k8s.io "later-{sfx}" not found')

            # --- the profile's worker, reached through its proxy with the plugin's credentials: the token it
            # refused before the token's expiry had the plugin run again ---------------------------------------
            c = await _active(kc, worker, "True")
            assert (c["reason"], c["message"]) == ("Active", "Connected")
            assert len(runs.read_text()) >= 2
            info = json.loads(seen.read_text())
            assert info == {"apiVersion": V1, "kind": "ExecCredential", "spec": {
                "interactive": False, "cluster": {"server": server["server"],
                                                  "certificate-authority-data": server["certificate-authority-data"],
                                                  "proxy-url": proxy, "config": {"audience": "worker"}}}}
            assert urlsplit(server["server"]).netloc in tunnels

            # --- a Job handed to MultiKueue runs on the worker ---------------------------------------------------
            handed = job(ns, "cp-job", "user-queue", cpu="1")
            handed["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
            manager_job = await create(kc, handed)
            wl_name = workload_name("cp-job", manager_job["metadata"]["uid"])
            wl = await _workload_shows(kc, wl_name, ns, "Admitted", "the manager's Workload to be admitted")
            assert wl["status"]["clusterName"] == worker
            assert [(s["name"], s["state"]) for s in wl["status"]["admissionChecks"]] == [(check, "Ready")]

            async def running_on_worker() -> dict[str, Any] | None:
                j = await _maybe(wc, "Job", "cp-job", ns)
                return j if j is not None and not j["spec"].get("suspend") else None

            remote = await eventually(running_on_worker, timeout=60, what="the Job's copy to run on the worker")
            assert remote["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == wl_name

            # --- the missing profile made: its cluster connects (the profile is followed) ------------------------
            await _profile(kc, f"later-{sfx}", cluster)
            c = await _active(kc, f"missing-{sfx}", "True")
            assert (c["reason"], c["message"]) == ("Active", "Connected")
        await kc.delete(BY_KIND["MultiKueueCluster"], f"missing-{sfx}")
