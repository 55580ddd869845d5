"""Kueue's visibility API through the real kube-apiserver's aggregation layer.

``kueue-es run --kube`` serves it over HTTPS and, as leader, registers the APIServices (v1beta2, v1beta1) with its
serving CA, plus a selector-less Service whose Endpoints and EndpointSlice hold this machine's non-loopback
address (the apiserver refuses loopback endpoints; ``--enable-aggregator-routing`` makes it dial them). Jobs
queue in two LocalQueues of one ClusterQueue that has room for one; the pending ones are asked for at
``/apis/visibility.kueue.x-k8s.io/...`` *on the apiserver*, which authenticates and authorizes the caller and
forwards the request with its front-proxy client certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import secrets
import socket
import ssl
import struct
from pathlib import Path

import aiohttp
import msgspec
import pytest
from kubehelp import connect, create, eventually, free_port, get, job, priority_class, queues, versions
from kubeproc import ready
from kubeproc import run as kueue_es_process

from connectors.k8s import crds
from connectors.k8s.errors import NotFound, Unavailable
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import Resource
from connectors.k8s.visibility import API_SERVICES

pytestmark = pytest.mark.kube
GROUP = "/apis/visibility.kueue.x-k8s.io"
V = f"{GROUP}/v1beta2"
ROLES = Resource("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", False)
SIOCGIFADDR = 0x8915
BINDINGS = Resource("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)


def machine_address() -> str:
    """A non-loopback, non-link-local IPv4 address of one of this machine's interfaces (Linux)."""
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, contextlib.suppress(OSError):
            packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            address = ipaddress.ip_address(socket.inet_ntoa(packed[20:24]))
            if not (address.is_loopback or address.is_link_local):
                return str(address)
    raise AssertionError("this machine has no non-loopback IPv4 address for the apiserver to reach kueue-es at")


async def _json(kc, path: str, query: list[tuple[str, str]] | None = None) -> dict:
    return msgspec.json.decode(await kc.request("GET", path, query=query))


async def _proxied(kc, path: str) -> dict | None:
    """``path`` through the aggregation layer, None while the aggregator itself answers 503.

    The kube-aggregator's proxy for an APIService keeps its own copy of the service's availability, refreshed
    from its informer after the availability controller has stored ``Available=True``, and resolves the
    endpoint through its own Service/EndpointSlice informers: until those catch up it answers a plain-text
    ``service unavailable`` 503 without reaching kueue-es (kube-aggregator ``handler_proxy.go``, Kubernetes
    v1.36), though ``Available`` reads True and discovery lists the group. Kueue's e2e tests wrap every read of
    this API in ``Eventually`` for the same reason. kueue-es serves its discovery documents from its first
    request and answers its own 503s as a ``metav1.Status`` (reason ``ServiceUnavailable``): those, and every
    other error, are not waited out here."""
    try:
        return await _json(kc, path)
    except Unavailable as exc:
        if exc.status == 503 and not exc.reason and str(exc).rstrip().endswith(": service unavailable"):
            return None
        raise


async def _availability(kc, into: list[tuple[str, str, str]]) -> None:
    """Every (APIService, Available status, reason) the availability controller stores from now on."""
    rv = (await kc.list(API_SERVICES)).metadata.resource_version
    async for api in versions(kc, API_SERVICES, rv):
        if api["spec"].get("group") == "visibility.kueue.x-k8s.io":
            into.extend((api["metadata"]["name"], c["status"], c.get("reason", ""))
                        for c in (api.get("status") or {}).get("conditions", []) if c["type"] == "Available")


def _names(doc: dict) -> list[str]:
    return [i["metadata"]["name"] for i in doc["items"]]


async def _as_user(cluster, user: str, path: str) -> tuple[int, dict]:
    """GET ``path`` on the apiserver as ``user`` (the admin impersonating them)."""
    pki = Path(cluster.dir) / "pki"
    ctx = ssl.create_default_context(cafile=cluster.ca_file)
    ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s, \
            s.get(cluster.server + path, headers={"Impersonate-User": user}) as r:
        return r.status, await r.json()


@pytest.mark.asyncio
async def test_pending_workloads_through_the_aggregation_layer(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, _, cq, _ = await queues(kc, "vis", {"cpu": 1}, lq=("lq-a", "lq-b"), sfx=sfx,
                                    flavor_labels={"pool": sfx})
        await create(kc, priority_class(f"high-{sfx}", 100))
        await create(kc, priority_class(f"low-{sfx}", 1))
        env = {"KUEUE_ES_KUBE_VISIBILITY_PORT": str(free_port()), "KUEUE_ES_KUBE_VISIBILITY_REGISTER": "true",
               "KUEUE_ES_KUBE_VISIBILITY_ADVERTISE_ADDRESS": machine_address(),
               "KUEUE_ES_KUBE_VISIBILITY_SERVICE": f"visibility-{sfx}"}
        seen: list[tuple[str, str, str]] = []
        recorder = asyncio.create_task(_availability(kc, seen))
        try:
            async with kueue_es_process(kube_apiserver, "vis", tmp_path / "log", ns, extra_env=env) as proc:
                await ready(proc, "leader")

                async def available() -> bool:
                    with contextlib.suppress(NotFound):
                        api = msgspec.json.decode(await kc.get(API_SERVICES, "v1beta2.visibility.kueue.x-k8s.io"))
                        conds = {c["type"]: c for c in (api.get("status") or {}).get("conditions", [])}
                        return conds.get("Available", {}).get("status") == "True"
                    return False

                await eventually(available, timeout=60, what="the APIService to be Available")
                # the leader creates the Service and its endpoints before the APIServices that point at them, so
                # the availability controller never finds an APIService without its Service
                await eventually(lambda: ("v1beta2.visibility.kueue.x-k8s.io", "True", "Passed") in seen,
                                 what="the recorder to see the APIService Available")
                assert [s for s in seen if s[2] == "ServiceNotFound"] == []

                async def discovered() -> bool:
                    groups = (await _json(kc, "/apis"))["groups"]
                    return any(g["name"] == "visibility.kueue.x-k8s.io"
                               and g["preferredVersion"]["version"] == "v1beta2" for g in groups)

                await eventually(discovered, timeout=60, what="the group in the apiserver's discovery")
                resources = await eventually(lambda: _proxied(kc, V), timeout=60, what="the group served through the proxy")
                assert resources["kind"] == "APIResourceList"
                assert [r["name"] for r in resources["resources"]] == [
                    "clusterqueues", "clusterqueues/pendingworkloads", "localqueues", "localqueues/pendingworkloads"]

                jobs = {}
                for name, queue, prio in [("running", "lq-a", "high"), ("a-low", "lq-a", "low"),
                                          ("b-high", "lq-b", "high"), ("a-high", "lq-a", "high")]:
                    jobs[name] = await create(kc, job(ns, name, queue, labels={
                        "kueue.x-k8s.io/priority-class": f"{prio}-{sfx}"}))
                    if name == "running":
                        await eventually(lambda: _unsuspended(kc, ns, "running"), timeout=60,
                                         what="the first job to be admitted")
                    await asyncio.sleep(1.1)  # creation timestamps have whole seconds: one per job keeps the order exact
                wl = {name: workload_name(name, j["metadata"]["uid"]) for name, j in jobs.items()}

                async def three_pending() -> dict | None:
                    doc = await _json(kc, f"{V}/clusterqueues/{cq}/pendingworkloads")
                    return doc if len(doc["items"]) == 3 else None

                doc = await eventually(three_pending, timeout=60, what="three pending workloads")
                assert doc["kind"] == "PendingWorkloadsSummary"
                assert doc["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
                # b-high and a-high tie on priority: the earlier Workload (then the smaller UID) goes first; the
                # jobs were created a second apart, so b-high's normally is
                meta = {n: (await get(kc, "Workload", wl[n], ns))["metadata"] for n in ("b-high", "a-high")}
                highs = sorted(meta, key=lambda n: (meta[n]["creationTimestamp"], meta[n]["uid"]))
                order = [*highs, "a-low"]
                queue = {"b-high": "lq-b", "a-high": "lq-a", "a-low": "lq-a"}
                prio = {"b-high": 100, "a-high": 100, "a-low": 1}
                assert _names(doc) == [wl[n] for n in order]
                assert [(i["localQueueName"], i["priority"], i["positionInClusterQueue"], i["positionInLocalQueue"])
                        for i in doc["items"]] == [
                    (queue[n], prio[n], pos, [queue[m] for m in order[:pos]].count(queue[n]))
                    for pos, n in enumerate(order)]
                owner = doc["items"][0]["metadata"]["ownerReferences"]
                assert owner == [{"apiVersion": "batch/v1", "kind": "Job", "name": order[0],
                                  "uid": jobs[order[0]]["metadata"]["uid"]}]

                page = await _json(kc, f"{V}/namespaces/{ns}/localqueues/lq-a/pendingworkloads",
                                   [("offset", "1"), ("limit", "1")])
                assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
                        for i in page["items"]] == [(wl["a-low"], 2, 1)]
                old = await _json(kc, f"{GROUP}/v1beta1/clusterqueues/{cq}/pendingworkloads", [("limit", "1")])
                assert old["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1" and _names(old) == [wl[order[0]]]

                with pytest.raises(NotFound, match='clusterqueue.visibility.kueue.x-k8s.io \\\\?"nope\\\\?" not found'):
                    await kc.request("GET", f"{V}/clusterqueues/nope/pendingworkloads")

                # the apiserver authorizes before it forwards: a user without RBAC gets 403, with it the list
                path = f"{V}/clusterqueues/{cq}/pendingworkloads"
                code, body = await _as_user(kube_apiserver, f"viewer-{sfx}", path)
                assert code == 403 and body["reason"] == "Forbidden"
                await kc.create(ROLES, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                        "metadata": {"name": f"pending-{sfx}"}, "rules": [{
                                            "apiGroups": ["visibility.kueue.x-k8s.io"],
                                            "resources": ["clusterqueues/pendingworkloads"], "verbs": ["get"]}]})
                await kc.create(BINDINGS, {
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": f"pending-{sfx}"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"pending-{sfx}"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"viewer-{sfx}"}]})

                async def allowed() -> dict | None:
                    code, body = await _as_user(kube_apiserver, f"viewer-{sfx}", path)
                    return body if code == 200 else None

                assert _names(await eventually(allowed, what="the viewer's RBAC to take effect")) == _names(doc)
        finally:
            recorder.cancel()
            for version in ("v1beta2", "v1beta1"):
                with contextlib.suppress(NotFound):
                    await kc.delete(API_SERVICES, f"{version}.visibility.kueue.x-k8s.io")


async def _unsuspended(kc, ns: str, name: str) -> bool:
    return not (await get(kc, "Job", name, ns))["spec"].get("suspend")
