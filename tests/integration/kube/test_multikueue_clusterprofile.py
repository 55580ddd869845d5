"""MultiKueueClusterProfile (alpha) across two real apiservers: the manager (the session's) serves the
ClusterProfile API (``multicluster.x-k8s.io``), a ClusterProfile in Kueue's namespace offers the worker (the
module's second apiserver, ``test_multikueue``'s) through an access provider, and the Configuration names that
provider's credential plugin, a small script written by the test that hands back the worker's client certificate.
A MultiKueueCluster naming the profile gets connected with it and a Job handed to MultiKueue runs on the worker; one
naming a profile not there is ``BadClusterProfile`` until the profile is made."""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import sys
from pathlib import Path
from typing import Any

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


def _plugin(tmp_path: Path, kubeconfig: dict[str, Any]) -> tuple[str, Path]:
    """A credential plugin answering with the worker's admin client certificate; it records what it was handed."""
    user = kubeconfig["users"][0]["user"]
    answer = {"apiVersion": V1, "kind": "ExecCredential", "status": {
        "clientCertificateData": base64.b64decode(user["client-certificate-data"]).decode(),
        "clientKeyData": base64.b64decode(user["client-key-data"]).decode()}}
    seen = tmp_path / "exec-info.json"
    path = tmp_path / "worker-credentials"
    path.write_text(f"#!{sys.executable}\nimport os, sys\n"
                    f"open({str(seen)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'])\n"
                    f"sys.stdout.write({json.dumps(json.dumps(answer))})\n")
    path.chmod(0o755)
    return str(path), seen


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
    command, seen = _plugin(tmp_path, worker_kc)
    config = load_config({"featureGates": {"MultiKueueClusterProfile": True}, "multiKueue": {"clusterProfile": {
        "accessProviders": [{"name": "test-provider", "execConfig": {
            "command": command, "apiVersion": V1, "interactiveMode": "Never", "provideClusterInfo": True}}]}}})
    server = worker_kc["clusters"][0]["cluster"]
    cluster = {"server": server["server"], "certificate-authority-data": server["certificate-authority-data"],
               "extensions": [{"name": EXEC_EXTENSION, "extension": {"audience": "worker"}}]}
    async with await connect(kube_apiserver) as kc, await connect(worker_apiserver) as wc:
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

            # --- the profile's worker, reached with the plugin's credentials ----------------------------------
            c = await _active(kc, worker, "True")
            assert (c["reason"], c["message"]) == ("Active", "Connected")
            info = json.loads(seen.read_text())
            assert info == {"apiVersion": V1, "kind": "ExecCredential", "spec": {
                "interactive": False, "cluster": {"server": server["server"],
                                                  "certificate-authority-data": server["certificate-authority-data"],
                                                  "config": {"audience": "worker"}}}}

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
