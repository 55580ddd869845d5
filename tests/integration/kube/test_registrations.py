"""The cluster-wide registrations against the real apiserver: installed by the manifests, completed by a replica.

`kueue-es manifests` carries the MutatingWebhookConfiguration, the ValidatingWebhookConfiguration and the
visibility APIServices without a CA, so that deleting the manifests deletes them. The apiserver takes them so;
a replica that starts then registers the same objects over them with its CA (create-or-replace), and a second
`kubectl apply` of the manifests leaves that CA in place. The manifests carry the visibility Service too (as
Kueue's do): the leader takes it as it is — an existing Service routing as its own is success — and routes it to
itself through its Endpoints and EndpointSlice.
"""

from __future__ import annotations

import base64
import contextlib

import msgspec
import pytest
from kubehelp import connect, namespace
from kubernetes_asyncio import client, config, dynamic

from connectors.k8s import manifests as m
from connectors.k8s import validating, visibility, webhook
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import NotFound
from connectors.k8s.settings import KubeSettings
from connectors.k8s.visibility import API_SERVICES, ENDPOINT_SLICES, ENDPOINTS, SERVICES

pytestmark = pytest.mark.kube

NAMESPACE = "kueue-es-registrations"
CONFIGS = {"MutatingWebhookConfiguration": webhook.MUTATING_CONFIGS,
           "ValidatingWebhookConfiguration": validating.VALIDATING_CONFIGS, "APIService": API_SERVICES}


def _ca(doc: dict) -> list[str]:
    """Every caBundle the object carries (a webhook configuration's per webhook, an APIService's one)."""
    if doc["kind"] == "APIService":
        return [doc["spec"].get("caBundle", "")]
    return [w["clientConfig"].get("caBundle", "") for w in doc["webhooks"]]


async def _apply(api: client.ApiClient, docs: list[dict]) -> None:
    """What `kubectl apply` does to each: server-side apply under the field manager kubectl uses."""
    dyn = await dynamic.DynamicClient(api)
    for doc in docs:
        res = await dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        await dyn.server_side_apply(res, body=doc, field_manager="kubectl", force_conflicts=True)


@pytest.mark.asyncio
async def test_manifests_install_the_registrations_and_a_replica_completes_them(kube_apiserver) -> None:
    docs = m.registrations(NAMESPACE)
    assert [d["kind"] for d in docs] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                                         "APIService", "APIService"]
    assert all(ca == "" for d in docs for ca in _ca(d))  # no CA until a replica serves
    bundle = self_signed(["kueue-es-webhook.kueue-es-registrations.svc"])
    ca = base64.b64encode(bundle.ca_pem).decode()
    settings = KubeSettings(lease_namespace=NAMESPACE)
    async with await connect(kube_apiserver) as kc, \
            await config.new_client_from_config(config_file=kube_apiserver.kubeconfig) as api:
        try:
            await _apply(api, docs)  # the apiserver takes them without a CA
            for d in docs:
                got = msgspec.json.decode(await kc.get(CONFIGS[d["kind"]], d["metadata"]["name"]))
                assert all(c == "" for c in _ca(got)), d["metadata"]["name"]
            # a replica starts: it registers the same objects, by the same names, with its CA
            service = (m.WEBHOOK_SERVICE, NAMESPACE, 443)
            await webhook.register(kc, webhook.configuration(bundle.ca_pem, service=service,
                                                             excluded_namespaces=("kube-system", NAMESPACE)))
            await webhook.register(kc, validating.configuration(bundle.ca_pem, service=service,
                                                                excluded_namespaces=("kube-system", NAMESPACE)))
            await visibility.register(kc, visibility.registration(settings, bundle.ca_pem))
            await _apply(api, docs)  # an upgrade applies the manifests again: the CA stays
            for d in docs:
                got = msgspec.json.decode(await kc.get(CONFIGS[d["kind"]], d["metadata"]["name"]))
                assert set(_ca(got)) == {ca}, d["metadata"]["name"]
        finally:  # cluster-wide and failing closed: never leave them to the other tests
            for d in docs:
                with contextlib.suppress(NotFound):
                    await kc.delete(CONFIGS[d["kind"]], d["metadata"]["name"])


@pytest.mark.asyncio
async def test_the_leader_takes_the_visibility_service_the_manifests_installed(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc, \
            await config.new_client_from_config(config_file=kube_apiserver.kubeconfig) as api:
        ns = await namespace(kc, "kueue-es-vis")
        (svc,) = [d for d in m.everything(ns) if d["kind"] == "Service" and d["metadata"]["name"] == m.VISIBILITY_SERVICE]
        settings = KubeSettings(lease_namespace=ns, visibility_port=m.VISIBILITY_PORT,
                                visibility_advertise_address="10.1.2.3")
        docs = visibility.registration(settings, self_signed([f"{m.VISIBILITY_SERVICE}.{ns}.svc"]).ca_pem)
        try:
            await _apply(api, [svc])
            installed = msgspec.json.decode(await kc.get(SERVICES, m.VISIBILITY_SERVICE, ns))
            await visibility.register(kc, docs)  # the leader: the Service there is success, not an error
            await visibility.register(kc, docs)  # and again, as a new leader would
            kept = msgspec.json.decode(await kc.get(SERVICES, m.VISIBILITY_SERVICE, ns))
            assert kept["metadata"]["resourceVersion"] == installed["metadata"]["resourceVersion"], "not rewritten"
            assert kept["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}]
            assert "selector" not in kept["spec"]
            endpoints = msgspec.json.decode(await kc.get(ENDPOINTS, m.VISIBILITY_SERVICE, ns))
            assert endpoints["subsets"][0]["addresses"] == [{"ip": "10.1.2.3"}]
            await _apply(api, [svc])  # an upgrade applies the manifests again: the leader's routing stays
            assert msgspec.json.decode(await kc.get(ENDPOINTS, m.VISIBILITY_SERVICE, ns))["subsets"] == \
                endpoints["subsets"]
        finally:
            for d in [d for _, d in docs if d["kind"] == "APIService"]:
                with contextlib.suppress(NotFound):
                    await kc.delete(API_SERVICES, d["metadata"]["name"])
            for resource in (ENDPOINT_SLICES, ENDPOINTS, SERVICES):
                with contextlib.suppress(NotFound):
                    await kc.delete(resource, m.VISIBILITY_SERVICE, ns)
