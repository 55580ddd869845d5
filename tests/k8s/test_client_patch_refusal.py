"""A conditioned JSON patch refused 422 by an admission webhook is the refusal it is, not a failed ``test`` op.

kueue-es's validating webhook answers a refusal for a Kueue CRD's rules 422 Invalid, as the apiserver does when
the CRD carries them (:func:`connectors.k8s.validating.refusal_status`); the apiserver passes it on prefixed
``admission webhook "..." denied the request``. Read as a Conflict, the write would be retried as if the object
had changed, and refused again for ever.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s.client import JSON_PATCH, KubeClient
from connectors.k8s.errors import Conflict, Invalid
from connectors.k8s.resources import BY_KIND

WORKLOADS = BY_KIND["Workload"]
TESTED = [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
          {"op": "replace", "path": "/spec/podSets/0/count", "value": 1}]


def _client(message: str) -> KubeClient:
    client = KubeClient(None)  # type: ignore[arg-type]

    async def request(method: str, path: str, **_: Any) -> bytes:
        raise Invalid(f"PATCH {path}: 422 Invalid: {message}", 422, "Invalid")

    client.request = request  # type: ignore[method-assign]
    return client


@pytest.mark.asyncio
async def test_a_webhook_s_422_refusal_of_a_tested_patch_stays_invalid() -> None:
    denied = ('admission webhook "vworkload.kb.io" denied the request: Workload.kueue.x-k8s.io "w" is invalid: '
              "spec.podSets[0]: minCount should be positive and less or equal to count")
    with pytest.raises(Invalid) as raised:
        await _client(denied).patch(WORKLOADS, "w", TESTED, "team", content_type=JSON_PATCH)
    assert not isinstance(raised.value, Conflict)
    with pytest.raises(Conflict, match="a tested field changed"):
        await _client("the server rejected our request due to an error in our request").patch(
            WORKLOADS, "w", TESTED, "team", content_type=JSON_PATCH)
