"""The visibility API server over real TLS, without a cluster: front-proxy authentication, discovery documents,
the pending-workloads endpoints and their Status errors, and what the leader registers."""

from __future__ import annotations

import asyncio
import datetime
import re
import socket
import ssl
from pathlib import Path

import aiohttp
import msgspec
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from connectors.k8s import manifests
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import AlreadyExists
from connectors.k8s.settings import KubeSettings, validate
from connectors.k8s.visibility import (
    API_SERVICES,
    ENDPOINT_SLICES,
    ENDPOINTS,
    SERVICES,
    FrontProxy,
    Source,
    VisibilityServer,
    register,
    registration,
)
from events.errors import InvalidInput
from kueue_es.config import load
from kueue_es.scheduler.config import DEFAULT
from kueue_es.statefile import load_state
from projections.owners import WorkloadOwners

STATE = """
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 1}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: w1
  namespace: team
  uid: u1
  creationTimestamp: '2024-01-01T00:00:00Z'
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: j1, uid: job-u1, controller: true}]
spec:
  queueName: lq
  priority: 3
  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w2, namespace: team, uid: u2, creationTimestamp: '2024-01-01T00:00:01Z'}
spec:
  queueName: lq
  priority: 3
  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}}]
"""
V = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def _client_cert(tmp: Path, cn: str) -> tuple[bytes, Path, Path]:
    """A CA and a client certificate (CN ``cn``) it signs, as the apiserver's front proxy has."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "front-proxy-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(minutes=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (tmp / f"{cn}.crt").write_bytes(cert.public_bytes(pem))
    (tmp / f"{cn}.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    return ca.public_bytes(pem), tmp / f"{cn}.crt", tmp / f"{cn}.key"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest_asyncio.fixture
async def server(tmp_path: Path):
    (tmp_path / "state.yaml").write_text(STATE)
    owners = WorkloadOwners()
    loaded = load_state(str(tmp_path / "state.yaml"), record=owners.apply)
    proxy_ca, cert, key = _client_cert(tmp_path, "front-proxy-client")
    _, other_cert, other_key = _client_cert(tmp_path, "someone-else")  # signed by another CA
    serving = self_signed(["127.0.0.1"])
    _, scert, skey = serving.write(tmp_path / "serving")
    srv = VisibilityServer(FrontProxy(proxy_ca, ("front-proxy-client",)))
    port = _port()
    await srv.start("127.0.0.1", port, str(scert), str(skey))

    def client(cert_pair: tuple[Path, Path] | None) -> aiohttp.ClientSession:
        ctx = ssl.create_default_context(cadata=serving.ca_pem.decode())
        if cert_pair is not None:
            ctx.load_cert_chain(*cert_pair)
        return aiohttp.ClientSession(f"https://127.0.0.1:{port}", connector=aiohttp.TCPConnector(ssl=ctx))

    try:
        yield srv, client, (cert, key), (other_cert, other_key), Source(loaded.state, DEFAULT, owners)
    finally:
        await srv.stop()


async def _get(session: aiohttp.ClientSession, path: str, user: str | None = "alice") -> tuple[int, dict]:
    headers = {"X-Remote-User": user, "X-Remote-Group": "system:authenticated"} if user else {}
    async with session.get(path, headers=headers) as r:
        return r.status, await r.json()


@pytest.mark.asyncio
async def test_pending_workloads_through_the_front_proxy(server) -> None:
    srv, client, proxy, _, source = server
    async with client(proxy) as s:
        assert await _get(s, f"{V}/clusterqueues/cq/pendingworkloads") == (503, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "kueue-es is not leading or has not listed the cluster yet: pending workloads are answered by "
                       "the leader once it has", "reason": "ServiceUnavailable", "code": 503})
        srv.source = lambda: source
        code, doc = await _get(s, f"{V}/clusterqueues/cq/pendingworkloads")
        assert code == 200
        assert doc == {"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
                       "metadata": {}, "items": [
                           {"metadata": {"name": "w1", "namespace": "team", "creationTimestamp": "2024-01-01T00:00:00Z",
                                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j1",
                                                              "uid": "job-u1"}]},
                            "priority": 3, "localQueueName": "lq", "positionInClusterQueue": 0,
                            "positionInLocalQueue": 0},
                           {"metadata": {"name": "w2", "namespace": "team", "creationTimestamp": "2024-01-01T00:00:01Z"},
                            "priority": 3, "localQueueName": "lq", "positionInClusterQueue": 1,
                            "positionInLocalQueue": 1}]}
        code, doc = await _get(s, "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/team/localqueues/lq/"
                                  "pendingworkloads?offset=1&limit=5")
        assert code == 200 and doc["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
        assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in doc["items"]] == [("w2", 1)]
        code, doc = await _get(s, f"{V}/clusterqueues/cq/pendingworkloads?limit=-1")
        assert code == 200 and doc["items"] == []
        assert await _get(s, f"{V}/clusterqueues/nope/pendingworkloads") == (404, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found', "reason": "NotFound",
            "details": {"name": "nope", "group": "visibility.kueue.x-k8s.io", "kind": "clusterqueue"}, "code": 404})
        code, doc = await _get(s, f"{V}/namespaces/other/localqueues/lq/pendingworkloads")
        assert code == 404 and doc["message"] == 'localqueue.visibility.kueue.x-k8s.io "lq" not found'
        code, doc = await _get(s, f"{V}/clusterqueues/cq/pendingworkloads?limit=ten")
        assert (code, doc["reason"], doc["message"]) == (
            400, "BadRequest", 'strconv.ParseInt: parsing "ten": invalid syntax')
        code, doc = await _get(s, f"{V}/clusterqueues/cq")
        assert (code, doc["reason"]) == (404, "NotFound")
        async with s.post(f"{V}/clusterqueues/cq/pendingworkloads", headers={"X-Remote-User": "alice"}) as r:
            assert r.status == 405

        def broken() -> Source:
            raise RuntimeError("a bug")

        srv.source = broken
        code, doc = await _get(s, f"{V}/clusterqueues/cq/pendingworkloads")
        assert (code, doc["reason"], doc["message"]) == (500, "InternalError", "Internal error occurred: RuntimeError")
        srv.source = lambda: source  # and the server goes on
        assert (await _get(s, f"{V}/clusterqueues/cq/pendingworkloads"))[0] == 200
    assert srv.requests == 9  # the pendingworkloads GETs


@pytest.mark.asyncio
async def test_discovery_documents(server) -> None:
    _, client, proxy, _, _ = server
    async with client(proxy) as s:
        code, groups = await _get(s, "/apis", user=None)
        assert code == 200 and groups["kind"] == "APIGroupList"
        assert groups["groups"] == [{"name": "visibility.kueue.x-k8s.io", "versions": [
            {"groupVersion": "visibility.kueue.x-k8s.io/v1beta2", "version": "v1beta2"},
            {"groupVersion": "visibility.kueue.x-k8s.io/v1beta1", "version": "v1beta1"}],
            "preferredVersion": {"groupVersion": "visibility.kueue.x-k8s.io/v1beta2", "version": "v1beta2"}}]
        code, group = await _get(s, "/apis/visibility.kueue.x-k8s.io", user=None)
        assert code == 200 and group["kind"] == "APIGroup" and group["preferredVersion"]["version"] == "v1beta2"
        code, resources = await _get(s, V, user=None)
        assert code == 200 and resources["groupVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
        assert [(r["name"], r["namespaced"], r["verbs"]) for r in resources["resources"]] == [
            ("clusterqueues", False, []), ("clusterqueues/pendingworkloads", False, ["get"]),
            ("localqueues", True, []), ("localqueues/pendingworkloads", True, ["get"])]
        assert (await _get(s, "/apis/visibility.kueue.x-k8s.io/v1"))[0] == 404


@pytest.mark.asyncio
async def test_only_the_front_proxy_is_believed(server) -> None:
    srv, client, proxy, other, source = server
    srv.source = lambda: source
    async with client(None) as s:  # no client certificate: the user headers mean nothing
        code, doc = await _get(s, f"{V}/clusterqueues/cq/pendingworkloads")
        assert (code, doc["reason"]) == (401, "Unauthorized")
        assert (await _get(s, V))[0] == 401
    async with client(proxy) as s:  # the front proxy, but naming nobody
        assert (await _get(s, f"{V}/clusterqueues/cq/pendingworkloads", user=None))[0] == 401
    with pytest.raises(aiohttp.ClientError):  # a certificate of another CA fails the handshake
        async with client(other) as s:
            await _get(s, f"{V}/clusterqueues/cq/pendingworkloads")
    assert srv.requests == 0 and srv.refused == 3


@pytest.mark.asyncio
async def test_a_certificate_of_the_right_ca_with_a_name_not_allowed_is_refused(tmp_path: Path) -> None:
    ca, cert, key = _client_cert(tmp_path, "intruder")
    serving = self_signed(["127.0.0.1"])
    _, scert, skey = serving.write(tmp_path / "serving")
    srv = VisibilityServer(FrontProxy(ca, ("front-proxy-client",)))
    port = _port()
    await srv.start("127.0.0.1", port, str(scert), str(skey))
    try:
        ctx = ssl.create_default_context(cadata=serving.ca_pem.decode())
        ctx.load_cert_chain(cert, key)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
            code, _ = await _get(s, f"https://127.0.0.1:{port}{V}/clusterqueues/cq/pendingworkloads")
        assert code == 401
    finally:
        await srv.stop()


def test_registration_objects() -> None:
    k = KubeSettings(visibility_port=8082, lease_namespace="kueue-system", visibility_advertise_address="10.1.2.3")
    docs = registration(k, b"CA")
    # what backs the APIServices first: registered before its Service, an APIService is ServiceNotFound for a while
    assert [r for r, _ in docs] == [SERVICES, ENDPOINTS, ENDPOINT_SLICES, API_SERVICES, API_SERVICES]
    service, endpoints, slice_, v1beta2, v1beta1 = (d for _, d in docs)
    assert v1beta2["metadata"]["name"] == "v1beta2.visibility.kueue.x-k8s.io"
    assert v1beta2["spec"] == {"group": "visibility.kueue.x-k8s.io", "version": "v1beta2",
                               "groupPriorityMinimum": 100, "versionPriority": 100,
                               "service": {"name": "kueue-es-visibility", "namespace": "kueue-system", "port": 443},
                               "caBundle": "Q0E="}
    assert v1beta1["spec"]["version"] == "v1beta1"
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}]
    assert "selector" not in service["spec"]
    assert endpoints["subsets"] == [{"addresses": [{"ip": "10.1.2.3"}],
                                     "ports": [{"name": "https", "port": 8082, "protocol": "TCP"}]}]
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kueue-es-visibility"
    without = registration(KubeSettings(visibility_port=8082), b"CA")
    assert [r for r, _ in without] == [API_SERVICES, API_SERVICES]


def test_the_manifests_install_the_visibility_service_the_leader_registers() -> None:
    """Kueue's manifests ship the Service with the APIServices (port 443 ``https`` to 8082); so do kueue-es's, the
    Service the leader registers later (one definition), before the APIServices that name it."""
    docs = manifests.everything("kueue-system")
    (svc,) = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "kueue-es-visibility"]
    assert docs.index(svc) < min(i for i, d in enumerate(docs) if d["kind"] == "APIService")
    assert {a["spec"]["service"]["name"] for a in docs if a["kind"] == "APIService"} == {"kueue-es-visibility"}
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    leader = KubeSettings(visibility_port=int(env["KUEUE_ES_KUBE_VISIBILITY_PORT"]), lease_namespace="kueue-system",
                          visibility_service=env["KUEUE_ES_KUBE_VISIBILITY_SERVICE"],
                          visibility_advertise_address="10.1.2.3")
    assert svc == next(d for r, d in registration(leader, b"CA") if r is SERVICES)
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}]
    assert {"name": "visibility", "containerPort": 8082} in container["ports"]


class Stored:
    """An apiserver holding ``objects`` (kind, name) -> object: a create of one of them is refused AlreadyExists;
    replaces are recorded."""

    def __init__(self, objects: dict[tuple[str, str], dict]) -> None:
        self.objects = objects
        self.created: list[str] = []
        self.replaced: list[tuple[str, dict]] = []

    async def create(self, resource, doc: dict, namespace: str = "") -> bytes:
        if (resource.kind, doc["metadata"]["name"]) in self.objects:
            raise AlreadyExists("exists", 409, "AlreadyExists")
        self.created.append(resource.kind)
        return b"{}"

    async def get(self, resource, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.objects[(resource.kind, name)])

    async def replace(self, resource, name: str, body: dict, namespace: str = "") -> bytes:
        self.replaced.append((resource.kind, body))
        return b"{}"


def _stored_service(**spec: object) -> dict:
    """Service ``kueue-system/kueue-es-visibility`` as the apiserver stores the manifests' one (written out): a
    clusterIP and defaults added."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kueue-es-visibility", "namespace": "kueue-system", "resourceVersion": "7"},
            "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}],
                     "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"], "type": "ClusterIP",
                     "sessionAffinity": "None", **spec}}


@pytest.mark.asyncio
async def test_the_leader_takes_the_service_the_manifests_installed_as_it_is() -> None:
    """An existing Service that routes as the leader's is success: not written again (its clusterIP, and whatever
    else the apiserver or a later ``kubectl apply`` set on it, stay); the Endpoints still point at the leader."""
    k = KubeSettings(visibility_port=8082, lease_namespace="kueue-system", visibility_advertise_address="10.1.2.3")
    client = Stored({("Service", "kueue-es-visibility"): _stored_service(),
                     ("Endpoints", "kueue-es-visibility"): {"metadata": {"resourceVersion": "8"}}})
    await register(client, registration(k, b"CA"))  # type: ignore[arg-type]
    assert [kind for kind, _ in client.replaced] == ["Endpoints"]
    assert client.created == ["EndpointSlice", "APIService", "APIService"]


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", [{"selector": {"app": "x"}}, {"ports": [{"name": "https", "port": 443,
                                                                          "protocol": "TCP", "targetPort": 9999}]}],
                         ids=["a-selector", "another-port"])
async def test_an_existing_service_routing_otherwise_is_replaced_keeping_its_cluster_ip(spec: dict) -> None:
    k = KubeSettings(visibility_port=8082, lease_namespace="kueue-system", visibility_advertise_address="10.1.2.3")
    client = Stored({("Service", "kueue-es-visibility"): _stored_service(**spec)})
    await register(client, registration(k, b"CA"))  # type: ignore[arg-type]
    ((kind, body),) = client.replaced
    assert kind == "Service" and "selector" not in body["spec"] and body["spec"]["clusterIP"] == "10.96.0.9"
    assert body["spec"]["ports"][0]["targetPort"] == 8082 and body["metadata"]["resourceVersion"] == "7"


@pytest.mark.parametrize(("fields", "message"), [
    ({"visibility_port": 70000}, "$.kube.visibility_port: must be a port number"),
    ({"visibility_port": 8082, "visibility_advertise_address": "127.0.0.1"}, "127.0.0.1 is refused in Endpoints"),
    ({"visibility_port": 8082, "visibility_advertise_address": "169.254.1.1"}, "169.254.1.1 is refused"),
    ({"visibility_port": 8082, "visibility_advertise_address": "my-pod"}, "not an IP address: 'my-pod'"),
])
def test_settings_errors_name_the_setting(fields: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        validate(KubeSettings(**fields))


def test_settings_from_the_environment() -> None:
    settings = load(env={"KUEUE_ES_KUBE_VISIBILITY_PORT": "8082", "KUEUE_ES_KUBE_VISIBILITY_REGISTER": "true",
                         "KUEUE_ES_KUBE_VISIBILITY_ADVERTISE_ADDRESS": "10.0.0.7"})
    k = validate(settings.kube)
    assert (k.visibility_port, k.visibility_register, k.visibility_advertise_address) == (8082, True, "10.0.0.7")


@pytest.mark.asyncio
@pytest.mark.parametrize(("feature_gates", "served"), [({}, True), ({"VisibilityOnDemand": False}, False)])
async def test_the_server_starts_only_under_visibility_on_demand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 feature_gates: dict, served: bool) -> None:
    """``kueue-es run --kube`` starts the visibility server as Kueue's main does, only while the Kueue
    Configuration's VisibilityOnDemand gate is on: off, ``visibility_port`` is not listened on and the leader is
    handed no server, so it registers no APIServices either."""
    from kueue_es import kube_service
    from kueue_es.scheduler.config import load_config

    class Client:
        async def close(self) -> None:
            pass

    class Server:
        async def stop(self) -> None:
            started.append("stopped")

    started: list = []
    handed: list = []

    async def connect(cls, kubeconfig: str = "", context: str = "") -> Client:
        return Client()

    async def serve(client, k, bundle=None, tls=None) -> Server:
        started.append(k.visibility_port)
        return Server()

    async def lead(settings, opts, path, client, health, elector, stop, report, visibility=None, webhook=None) -> None:
        handed.append(visibility)

    monkeypatch.setattr(kube_service.KubeClient, "connect", classmethod(connect))
    monkeypatch.setattr(kube_service.visibility_api, "serve", serve)
    monkeypatch.setattr(kube_service, "_lead", lead)
    settings = load(env={}, overrides={"log": str(tmp_path / "log"), "kube": {
        "visibility_port": 18082, "visibility_register": True, "leader_election": False, "health_port": 0}})
    opts = type("Opts", (), {"config": load_config({"featureGates": feature_gates}), "instance_id": "kueue-es-0"})
    await kube_service.serve(settings, opts, asyncio.Event(), lambda *_: None)
    assert started == ([18082, "stopped"] if served else [])
    assert (handed[0] is not None) == served
