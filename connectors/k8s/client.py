"""A thin async client for the Kubernetes API: raw JSON in and out, decoded with msgspec.

kubernetes_asyncio provides the configuration (kubeconfig or in-cluster service account, TLS, bearer tokens and
their refresh) and the HTTP session; we call the REST paths ourselves with ``_preload_content=False`` and decode
the bytes straight into our views, without the generated models. Failures become
:mod:`connectors.k8s.errors` classes chosen by HTTP status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import msgspec
from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config as kconfig

from connectors.k8s.errors import Conflict, Invalid, KubeError, Unavailable, from_response
from connectors.k8s.resources import Resource

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
REQUEST_TIMEOUT_S = 30.0
LIST_PAGE = 500


class ListMeta(msgspec.Struct, frozen=True, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class RawList(msgspec.Struct):
    metadata: ListMeta = ListMeta()
    items: list[msgspec.Raw] = []


class WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Meta(msgspec.Struct, frozen=True, rename="camel"):
    resource_version: str = ""
    uid: str = ""


class _HasMeta(msgspec.Struct):
    metadata: _Meta = _Meta()


_list_decoder = msgspec.json.Decoder(RawList)
_event_decoder = msgspec.json.Decoder(WatchEvent)
_meta_decoder = msgspec.json.Decoder(_HasMeta)


def resource_version_of(raw: bytes | msgspec.Raw) -> str:
    """The resourceVersion of the object an answer or a watch event holds ("" when it holds none), the rest of it
    left undecoded."""
    return _meta_decoder.decode(raw).metadata.resource_version


def uid_of(raw: bytes | msgspec.Raw) -> str:
    """The uid of the object an answer holds ("" when it holds none), the rest of it left undecoded."""
    return _meta_decoder.decode(raw).metadata.uid


def resource_version_number(text: str) -> int:
    """A resourceVersion as the number an etcd-backed apiserver makes it (-1: not one): two versions of one object
    are ordered by it, as clients may order them since Kubernetes v1.35 (KEP-5504, comparable resource versions)."""
    return int(text) if text.isascii() and text.isdigit() else -1


class KubeClient:
    """Requests against one apiserver. Use :meth:`connect` (kubeconfig or in-cluster) or wrap an ApiClient."""

    def __init__(self, api: kclient.ApiClient, *, fence: Callable[[str, str], None] | None = None) -> None:
        self.api = api
        self.fence = fence
        """Called with the method and path before every request but a GET: raises to refuse the write (a leader
        whose Lease is not held any more writes nothing, to this apiserver or a MultiKueue worker's)."""

    @classmethod
    async def connect(cls, kubeconfig: str = "", context: str = "") -> KubeClient:
        """From ``kubeconfig`` (or ``$KUBECONFIG`` / ``~/.kube/config``), or in-cluster when there is none."""
        cfg = kclient.Configuration()
        try:
            if kubeconfig or not _in_cluster():
                await kconfig.load_kube_config(config_file=kubeconfig or None, context=context or None,
                                               client_configuration=cfg)
            else:
                kconfig.load_incluster_config(client_configuration=cfg)
        except (kconfig.ConfigException, OSError) as exc:
            raise KubeError(f"cannot load Kubernetes client configuration: {exc}") from exc
        return cls(kclient.ApiClient(configuration=cfg))

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plain requests ------------------------------------------------------------------------------------

    async def request(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | aiohttp.ClientTimeout = REQUEST_TIMEOUT_S) -> bytes:
        """One request; returns the response body, raises a :class:`KubeError` for any non-2xx status."""
        if self.fence is not None and method != "GET":
            self.fence(method, path)
        resp = await self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        try:
            data = await resp.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise Unavailable(f"{method} {path}: {exc or type(exc).__name__}") from exc
        finally:
            resp.release()
        if not 200 <= resp.status < 300:
            raise from_response(resp.status, data, f"{method} {path}")
        return data

    async def _send(self, method: str, path: str, *, query: list[tuple[str, Any]] | None, body: Any,
                    content_type: str, timeout: float | aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            return await self.api.call_api(
                path, method, query_params=query or [], header_params=headers, body=body,
                auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise Unavailable(f"{method} {path}: {exc or type(exc).__name__}") from exc

    async def get(self, resource: Resource, name: str, namespace: str = "", subresource: str = "") -> bytes:
        return await self.request("GET", resource.object_path(name, namespace, subresource))

    async def create(self, resource: Resource, body: dict[str, Any], namespace: str = "") -> bytes:
        return await self.request("POST", resource.collection_path(namespace), body=body)

    async def replace(self, resource: Resource, name: str, body: dict[str, Any], namespace: str = "",
                      subresource: str = "") -> bytes:
        return await self.request("PUT", resource.object_path(name, namespace, subresource), body=body)

    async def patch(self, resource: Resource, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = MERGE_PATCH) -> bytes:
        """A JSON patch opening with a ``test`` op is a write conditioned on what was read: when that test fails
        the apiserver answers 422, which is raised as the :class:`Conflict` it means (the object changed), not as
        :class:`Invalid` (retrying cannot help). A 422 an admission webhook answered (kueue-es's own, for a Kueue
        CRD's rules) is the refusal it says."""
        try:
            return await self.request("PATCH", resource.object_path(name, namespace, subresource), body=body,
                                      content_type=content_type)
        except Invalid as exc:
            if (content_type == JSON_PATCH and body and body[0].get("op") == "test"
                    and "denied the request" not in str(exc)):
                raise Conflict(f"{exc} (a tested field changed since it was read)", 409, "Conflict") from exc
            raise

    async def delete(self, resource: Resource, name: str, namespace: str = "", *, uid: str = "",
                     resource_version: str = "", propagation: str = "Background") -> bytes:
        """Delete, if ``uid`` (and ``resource_version``) given, only that object as it was (else 409 Conflict)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        return await self.request("DELETE", resource.object_path(name, namespace), body=body)

    # --- list and watch ------------------------------------------------------------------------------------

    async def list(self, resource: Resource, *, label_selector: str = "", field_selector: str = "",
                   namespace: str = "") -> RawList:
        """Every object of ``resource`` (all namespaces, or ``namespace``'s), page by page, as one consistent
        snapshot."""
        items: list[msgspec.Raw] = []
        token = ""
        rv = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", LIST_PAGE)]
            if token:
                query.append(("continue", token))
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            page = _list_decoder.decode(await self.request("GET", resource.collection_path(namespace), query=query))
            items.extend(page.items)
            rv = rv or page.metadata.resource_version
            token = page.metadata.continue_
            if not token:
                return RawList(metadata=ListMeta(resource_version=rv), items=items)

    async def watch(self, resource: Resource, resource_version: str, *, timeout_seconds: int = 300,
                    bookmarks: bool = True, on_open: Callable[[], None] | None = None,
                    field_selector: str = "", label_selector: str = "", namespace: str = ""
                    ) -> AsyncIterator[WatchEvent]:
        """Watch events after ``resource_version`` until the server ends the stream (``timeout_seconds``).

        ERROR events are turned into errors (410 Gone → :class:`connectors.k8s.errors.Gone`); a cut
        connection raises :class:`Unavailable`.
        """
        query: list[tuple[str, Any]] = [("watch", "1"), ("resourceVersion", resource_version),
                                        ("timeoutSeconds", timeout_seconds)]
        if bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if label_selector:
            query.append(("labelSelector", label_selector))
        path = resource.collection_path(namespace)
        timeout = aiohttp.ClientTimeout(sock_connect=REQUEST_TIMEOUT_S, sock_read=timeout_seconds + 30)
        resp = await self._send("GET", path, query=query, body=None, content_type="application/json",
                                timeout=timeout)
        try:
            if not 200 <= resp.status < 300:
                raise from_response(resp.status, await resp.read(), f"watch {path}")
            if on_open is not None:
                on_open()
            buf = b""
            try:
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            break
                        line, buf = buf[:nl], buf[nl + 1:]
                        if line.strip():
                            event = _event_decoder.decode(line)
                            if event.type == "ERROR":
                                st = msgspec.json.decode(event.object)
                                raise from_response(int(st.get("code") or 500), bytes(event.object),
                                                    f"watch {path}")
                            yield event
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise Unavailable(f"watch {path}: {exc or type(exc).__name__}") from exc
        finally:
            resp.close()  # a watch ends mid-stream: its connection cannot be reused


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token")
