"""What a mutating webhook's answer makes of an object, for tests that read the result rather than the ops."""

from __future__ import annotations

from typing import Any

import jsonpatch


def patched(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A copy of ``doc`` with the webhook's JSON patch applied; the webhooks tested here only ever add."""
    assert all(op["op"] == "add" for op in ops), ops
    return jsonpatch.apply_patch(doc, ops)
