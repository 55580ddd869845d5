"""The client's conditioned JSON patches against the real apiserver: a failed ``test`` op is a Conflict.

The apiserver answers a JSON patch whose ``test`` op fails with 422, as it answers an invalid object; the client
raises it as the Conflict it means, so a caller retries it (an elastic Job's pod changed by the topology ungater
between the list and the lift of its gate stayed gated for good when this was taken for Invalid).
"""

from __future__ import annotations

import secrets

import msgspec
import pytest
from kubehelp import connect

from connectors.k8s.client import JSON_PATCH
from connectors.k8s.errors import Conflict, Invalid
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube
NAMESPACES = BY_KIND["Namespace"]


@pytest.mark.asyncio
async def test_a_json_patch_whose_resource_version_test_fails_is_a_conflict(kube_apiserver) -> None:
    name = f"patch-{secrets.token_hex(3)}"
    async with await connect(kube_apiserver) as kc:
        created = msgspec.json.decode(await kc.create(NAMESPACES, {"metadata": {"name": name}}))
        rv = created["metadata"]["resourceVersion"]
        label = [{"op": "add", "path": "/metadata/labels", "value": {"step": "one"}}]
        patched = msgspec.json.decode(await kc.patch(
            NAMESPACES, name, [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, *label],
            content_type=JSON_PATCH))
        assert patched["metadata"]["labels"]["step"] == "one"
        with pytest.raises(Conflict, match="a tested field changed"):
            await kc.patch(NAMESPACES, name, [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                                              *label], content_type=JSON_PATCH)
        with pytest.raises(Invalid):  # not conditioned: an invalid patch stays Invalid
            await kc.patch(NAMESPACES, name, [{"op": "remove", "path": "/metadata/nothing-here"}],
                           content_type=JSON_PATCH)
