"""The webhook server takes a review as large as Kueue's does (controller-runtime's 7 MiB: an object and its old
object at the apiserver's 3 MiB each), not aiohttp's default 1 MiB, which answered 413 to a large object's review
and, the webhook failing closed, had the apiserver refuse an object Kueue takes."""

from __future__ import annotations

import io
import socket
import ssl
import tempfile

import aiohttp
import msgspec
import pytest

from connectors.k8s.certs import self_signed
from connectors.k8s.webhook import MAX_REVIEW_BYTES, WebhookServer


async def _no_default_queue(namespace: str) -> bool:
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _review(size: int) -> bytes:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "big", "annotations": {"example.com/notes": "x" * size}}, "spec": {}}
    return msgspec.json.encode({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": "UPDATE", "object": flavor, "oldObject": flavor}})


@pytest.mark.asyncio
async def test_a_review_of_a_large_object_is_answered() -> None:
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(tempfile.mkdtemp(prefix="kueue-es-body-test-"))
    server, port = WebhookServer(_no_default_queue), _free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    client = ssl.create_default_context(cadata=bundle.ca_pem.decode())
    url = f"https://127.0.0.1:{port}/validate-kueue-x-k8s-io-v1beta2-resourceflavor"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=io.BytesIO(_review(1536 * 1024)), ssl=client) as resp:  # 3 MiB in all
                assert resp.status == 200
                assert (await resp.json())["response"]["uid"] == "u-1"
            async with session.post(url, data=io.BytesIO(_review(MAX_REVIEW_BYTES // 2)), ssl=client) as resp:
                assert resp.status == 413
    finally:
        await server.stop()
