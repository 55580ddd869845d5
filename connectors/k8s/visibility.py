"""Kueue's visibility API served over HTTPS as an aggregated API (``visibility.kueue.x-k8s.io``, v1beta2 and v1beta1).

The kube-apiserver's aggregation layer forwards ``/apis/visibility.kueue.x-k8s.io/...`` to the Service an
``APIService`` names (:func:`registration`). This server answers

* the discovery documents an aggregated server must serve: ``/apis`` (APIGroupList), ``/apis/<group>`` (APIGroup)
  and ``/apis/<group>/<version>`` (APIResourceList: ``clusterqueues``, ``clusterqueues/pendingworkloads``,
  ``localqueues``, ``localqueues/pendingworkloads``, as Kueue's server lists them);
* ``GET .../clusterqueues/<cq>/pendingworkloads`` and ``.../namespaces/<ns>/localqueues/<lq>/pendingworkloads``
  with ``offset`` and ``limit`` — the PendingWorkloadsSummary of :mod:`kueue_es.scheduler.visibility`, computed
  on the leader's state as it is when the request arrives (the fold runs on the same event loop, so a request
  sees the state between two records, never inside one); errors are ``metav1.Status`` documents as Kubernetes
  writes them (404 for an unknown queue, 400 for an offset or limit that is not an integer, 503 on a standby or
  before the connector has listed every kind).

Authentication follows the aggregation layer's front-proxy scheme: the apiserver connects with its proxy client
certificate and names the user in request headers. The certificate is verified against the requestheader CA
(and its CN against the allowed names) that the apiserver publishes in ``kube-system/
extension-apiserver-authentication``; the user headers are believed only on such a connection. Requests without
that certificate are refused (401). Authorization is the apiserver's: it authorizes every request (``get`` on
``clusterqueues/pendingworkloads`` or ``localqueues/pendingworkloads`` in this group) before forwarding it. Unlike
Kueue's server, this one does not authorize again itself with a SubjectAccessReview, accepts no bearer tokens
(TokenReview), and reads the CA once at start (no rotation).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog
from aiohttp import web

from connectors.k8s import https
from connectors.k8s.certs import CertBundle, ca_bundle, self_signed
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, KubeError, NotFound
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import Resource
from connectors.k8s.settings import KubeSettings
from events import objects as o
from kueue_es.scheduler import visibility as vis
from kueue_es.scheduler.config import SchedulerConfig
from kueue_es.scheduler.tls_options import TLSSettings
from projections.cluster import ClusterState

log = structlog.get_logger("kueue_es.k8s.visibility")

GROUP = vis.GROUP
PREFIX = f"/apis/{GROUP}"
AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
CONFIG_MAPS = Resource("ConfigMap", "", "v1", "configmaps", True)
SERVICES = Resource("Service", "", "v1", "services", True)
ENDPOINTS = Resource("Endpoints", "", "v1", "endpoints", True)
ENDPOINT_SLICES = Resource("EndpointSlice", "discovery.k8s.io", "v1", "endpointslices", True)
API_SERVICES = Resource("APIService", "apiregistration.k8s.io", "v1", "apiservices", False)


# --- what is served --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """What a query is answered from: the leader's state, the configuration its scheduler runs with, and the
    owner references of its workloads."""

    state: ClusterState
    config: SchedulerConfig
    owners: vis.Owners


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``metav1.Status`` failure, as the apiserver machinery encodes one."""
    doc: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reason}
    if details is not None:
        doc["details"] = details
    doc["code"] = code
    return doc


def not_found(resource: str, name: str) -> dict[str, Any]:
    return status(404, "NotFound", f'{resource}.{GROUP} "{name}" not found',
                  {"name": name, "group": GROUP, "kind": resource})


def group_document() -> dict[str, Any]:
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in vis.VERSIONS]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": versions,
            "preferredVersion": versions[0]}


def group_list_document() -> dict[str, Any]:
    group = group_document()
    del group["kind"], group["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}


def resource_list_document(version: str) -> dict[str, Any]:
    def resource(name: str, singular: str, namespaced: bool, verbs: list[str]) -> dict[str, Any]:
        return {"name": name, "singularName": singular, "namespaced": namespaced, "kind": vis.KIND, "verbs": verbs}

    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{version}", "resources": [
        resource("clusterqueues", "clusterqueue", False, []),
        resource("clusterqueues/pendingworkloads", "", False, ["get"]),
        resource("localqueues", "localqueue", True, []),
        resource("localqueues/pendingworkloads", "", True, ["get"]),
    ]}


_INT64 = re.compile(r"[+-]?[0-9]+")


def query_int(query: Any, name: str) -> int | None:
    """An integer query parameter as the apiserver converts one (its first value, base 10, 64 bits); None when
    absent. Raises ValueError with the apiserver's wording otherwise."""
    values = query.getall(name, [])
    if not values:
        return None
    text = values[0]
    if not _INT64.fullmatch(text):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def answer(source: Source | None, version: str, *, cluster_queue: str = "", namespace: str = "",
           local_queue: str = "", query: Any = None) -> tuple[int, dict[str, Any]]:
    """(HTTP status, document) for one pendingworkloads request."""
    try:
        limit = query_int(query, "limit") if query is not None else None
        offset = query_int(query, "offset") if query is not None else None
    except ValueError as exc:
        return 400, status(400, "BadRequest", str(exc))
    if source is None:
        return 503, status(503, "ServiceUnavailable", "kueue-es is not leading or has not listed the cluster yet: "
                           "pending workloads are answered by the leader once it has")
    if cluster_queue:
        items = vis.in_cluster_queue(source.state, source.config, cluster_queue, limit=limit, offset=offset)
        if items is None:
            return 404, not_found("clusterqueue", cluster_queue)
    else:
        items = vis.in_local_queue(source.state, source.config, namespace, local_queue, limit=limit, offset=offset)
        if items is None:
            return 404, not_found("localqueue", local_queue)
    return 200, vis.summary(items, version, source.owners)


# --- who is asking ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FrontProxy:
    """The apiserver's requestheader settings (``--requestheader-*``), as it publishes them."""

    client_ca: bytes
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)

    @classmethod
    async def from_cluster(cls, client: KubeClient) -> FrontProxy:
        ns, name = AUTH_CONFIGMAP
        try:
            data = msgspec.json.decode(await client.get(CONFIG_MAPS, name, ns)).get("data") or {}
        except NotFound:
            data = {}
        ca = data.get("requestheader-client-ca-file", "")
        if not ca:
            raise KubeError(f"ConfigMap {ns}/{name} holds no requestheader-client-ca-file: the visibility API is "
                            "served through the apiserver's aggregation layer, which needs kube-apiserver's "
                            "--requestheader-client-ca-file and --proxy-client-cert-file/--proxy-client-key-file")

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            raw = data.get(key)
            return tuple(json.loads(raw)) if raw else default

        return cls(ca.encode(), names("requestheader-allowed-names", ()),
                   names("requestheader-username-headers", ("X-Remote-User",)),
                   names("requestheader-group-headers", ("X-Remote-Group",)))

    def user(self, request: web.Request) -> tuple[str, tuple[str, ...]] | None:
        """The user the apiserver forwards the request for, or None when the connection is not the apiserver's
        (no client certificate verified against the requestheader CA, or a CN not allowed)."""
        cn = peer_common_name(request)
        if cn is None or (self.allowed_names and cn not in self.allowed_names):
            return None
        user = next((request.headers[h] for h in self.username_headers if request.headers.get(h)), "")
        groups = tuple(g for h in self.group_headers for g in request.headers.getall(h, []))
        return user, groups


def peer_common_name(request: web.Request) -> str | None:
    """The CN of the client certificate the TLS handshake verified (None: none was presented)."""
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return ""


# --- the server ------------------------------------------------------------------------------------------------


class VisibilityServer:
    """HTTPS on ``address:port``; answers from ``source()`` (None on a standby, or before the leader's
    connector has listed every kind)."""

    def __init__(self, front_proxy: FrontProxy, source: Callable[[], Source | None] = lambda: None,
                 ca_pem: bytes = b"") -> None:
        self.front_proxy = front_proxy
        self.source = source
        self.ca_pem = ca_pem
        """The CA of the serving certificate (what an APIService's caBundle must hold)."""
        self.requests = 0
        self.refused = 0
        self._runner: web.AppRunner | None = None

    async def start(self, address: str, port: int, certfile: str, keyfile: str,
                    options: TLSSettings | None = None) -> None:
        """Serve on ``address:port`` with ``options`` (the Configuration's ``tls`` stanza; None: the library's
        defaults)."""
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        tls = https.server_tls(certfile, keyfile, self.front_proxy.client_ca, options)
        self._runner = await https.serve(app, address, port, tls)
        log.info("visibility serving", address=address, port=port, group=GROUP, versions=list(vis.VERSIONS))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            code, doc = self.route(request)
        except Exception as exc:  # a bug must not take the server down, nor leak a traceback to the caller
            log.exception("visibility request failed", path=request.path)
            code, doc = 500, status(500, "InternalError", f"Internal error occurred: {type(exc).__name__}")
        if code == 401:
            self.refused += 1
        return web.json_response(doc, status=code)

    def route(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        who = self.front_proxy.user(request)
        if who is None:
            return 401, status(401, "Unauthorized", "Unauthorized: the visibility API is served through the "
                               "kube-apiserver's aggregation layer (no verified front-proxy client certificate)")
        path = request.path.rstrip("/")
        if path == "/apis":
            return self._get(request, group_list_document())
        if path == PREFIX:
            return self._get(request, group_document())
        parts = path[len(PREFIX) + 1:].split("/") if path.startswith(PREFIX + "/") else []
        if not parts or parts[0] not in vis.VERSIONS:
            return 404, status(404, "NotFound", "the server could not find the requested resource", {})
        version, rest = parts[0], parts[1:]
        if not rest:
            return self._get(request, resource_list_document(version))
        if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            kw: dict[str, str] = {"cluster_queue": rest[1]}
        elif (len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues"
              and rest[4] == "pendingworkloads"):
            kw = {"namespace": rest[1], "local_queue": rest[3]}
        else:
            return 404, status(404, "NotFound", "the server could not find the requested resource", {})
        if request.method not in ("GET", "HEAD"):
            return 405, status(405, "MethodNotAllowed", f"{request.method} is not supported", {})
        if not who[0]:
            return 401, status(401, "Unauthorized", "Unauthorized: no user named by the front proxy")
        self.requests += 1
        code, doc = answer(self.source(), version, query=request.query, **kw)
        log.debug("pending workloads", user=who[0], path=path, status=code)
        return code, doc

    @staticmethod
    def _get(request: web.Request, doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if request.method not in ("GET", "HEAD"):
            return 405, status(405, "MethodNotAllowed", f"{request.method} is not supported", {})
        return 200, doc


# --- registration ----------------------------------------------------------------------------------------------


def certificate(k: KubeSettings) -> CertBundle:
    """The serving certificate: from ``visibility_cert_dir``, else a new self-signed one for the Service's names
    (the names the aggregation layer checks it against)."""
    if k.visibility_cert_dir and (Path(k.visibility_cert_dir) / "tls.crt").exists():
        return CertBundle.read(k.visibility_cert_dir)
    svc = f"{k.visibility_service}.{k.lease_namespace}.svc"
    return self_signed([svc, f"{svc}.cluster.local"])


def apiservice_names() -> list[str]:
    return [f"{v}.{GROUP}" for v in vis.VERSIONS]


def apiservices(namespace: str, service: str, ca_pem: bytes = b"") -> list[dict[str, Any]]:
    """The APIServices, one per served version, pointing at Service ``service`` in ``namespace`` and trusting
    ``ca_pem`` (none: as ``kueue-es manifests`` installs them, their CA set by the first leader)."""
    return [{
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": f"{version}.{GROUP}", "labels": {"app.kubernetes.io/managed-by": "kueue-es"}},
        "spec": {"group": GROUP, "version": version, "groupPriorityMinimum": 100, "versionPriority": priority,
                 "service": {"name": service, "namespace": namespace, "port": 443}, **ca_bundle(ca_pem)},
    } for priority, version in zip((100, 90), vis.VERSIONS, strict=True)]


MANAGED = {"app.kubernetes.io/managed-by": "kueue-es"}


def service(namespace: str, name: str, port: int) -> dict[str, Any]:
    """The Service the APIServices name, the one definition ``kueue-es manifests`` installs and the leader
    registers: port 443 (``https``, TCP) to ``port``, as Kueue's ``visibility-server`` Service. Unlike Kueue's it
    has no selector: only the leader answers (a standby says 503), so the leader routes the Service to itself
    through the Endpoints and EndpointSlice it writes (:func:`registration`); a selector would route to every
    replica and hand the Service's endpoints to the cluster's endpoint controllers."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace, "labels": MANAGED},
            "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}}


def registration(k: KubeSettings, ca_pem: bytes) -> list[tuple[Resource, dict[str, Any]]]:
    """The APIServices (:func:`apiservices`) pointing at the Service ``visibility_service``, preceded — when
    ``visibility_advertise_address`` is set — by that Service (:func:`service`) and the Endpoints and
    EndpointSlice that route it to this replica (the leader) at that address. In that order, as Kueue's manifests
    install its Service before its APIService: an APIService registered first is marked ``ServiceNotFound`` by
    the aggregator's availability controller until its Service follows."""
    ns, name = k.lease_namespace, k.visibility_service
    apis: list[tuple[Resource, dict[str, Any]]] = [(API_SERVICES, d) for d in apiservices(ns, name, ca_pem)]
    address = k.visibility_advertise_address
    if not address:
        return apis
    port = {"name": "https", "port": k.visibility_port, "protocol": "TCP"}
    return [
        (SERVICES, service(ns, name, k.visibility_port)),
        (ENDPOINTS, {
            "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": ns, "labels": MANAGED},
            "subsets": [{"addresses": [{"ip": address}], "ports": [port]}]}),
        (ENDPOINT_SLICES, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {**MANAGED, "kubernetes.io/service-name": name,
                                    "endpointslice.kubernetes.io/managed-by": "kueue-es"}},
            "addressType": "IPv6" if ":" in address else "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}], "ports": [port]}),
        *apis]


def routes_as(current: dict[str, Any], doc: dict[str, Any]) -> bool:
    """Whether Service ``current`` (as stored) already routes as ``doc``: no selector, and the same ports (each
    compared on the fields ``doc`` sets; the apiserver adds others)."""
    spec, want = current.get("spec") or {}, doc["spec"]["ports"]
    ports = spec.get("ports") or []
    return not spec.get("selector") and len(ports) == len(want) and all(
        all(p.get(f) == v for f, v in w.items()) for p, w in zip(ports, want, strict=True))


async def register(client: KubeClient, docs: list[tuple[Resource, dict[str, Any]]]) -> None:
    """Create each object in turn, or replace the one of that name — but a Service that already routes as this
    one (the one ``kueue-es manifests`` installs, or an earlier leader's) is left as it is: an existing Service is
    success, and its clusterIP and whatever else was set on it stay. One that does not is replaced, keeping its
    clusterIP."""
    for resource, doc in docs:
        meta = doc["metadata"]
        ns = meta.get("namespace", "")
        try:
            await client.create(resource, doc, ns)
        except AlreadyExists:
            current = msgspec.json.decode(await client.get(resource, meta["name"], ns))
            if resource is SERVICES and routes_as(current, doc):
                continue
            body = {**doc, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
            if resource is SERVICES:
                spec = current.get("spec") or {}
                body["spec"] = {**doc["spec"], **{k: spec[k] for k in ("clusterIP", "clusterIPs") if k in spec}}
            await client.replace(resource, meta["name"], body, ns)
    log.info("visibility registered", objects=[f"{r.kind}/{d['metadata']['name']}" for r, d in docs])


async def serve(client: KubeClient, k: KubeSettings, bundle: CertBundle | None = None,
                tls: TLSSettings | None = None) -> VisibilityServer:
    """Start the server as ``k`` says (answering 503 until :attr:`VisibilityServer.source` is set), with ``tls``
    (:attr:`SchedulerConfig.server_tls`). Stop it when done."""
    front_proxy = await FrontProxy.from_cluster(client)
    bundle = bundle or certificate(k)
    _, cert, key = bundle.write(tempfile.mkdtemp(prefix="kueue-es-visibility-"))
    server = VisibilityServer(front_proxy, ca_pem=bundle.ca_pem)
    await server.start(k.visibility_address, k.visibility_port, str(cert), str(key), tls)
    return server


def leader_source(mirror: Mirror, config: SchedulerConfig, ready: Callable[[], bool]) -> Callable[[], Source | None]:
    """Answers from the connector's mirror — its state, and the owner references of the Workload objects it last
    observed — once ``ready`` (every kind listed)."""
    workloads = mirror.workloads

    def owners(key: str) -> list[o.OwnerReference]:
        w = workloads.get(key)
        return w.metadata.owner_references if w is not None else []

    def source() -> Source | None:
        return Source(mirror.state, config, owners) if ready() else None

    return source
