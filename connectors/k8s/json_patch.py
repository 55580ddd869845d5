"""JSON patches (RFC 6902) the mutating webhooks answer with: the few operations they need; and a merge patch
(RFC 7386) applied to an object here rather than by an apiserver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def escape(key: str) -> str:
    """A map key as a JSON-pointer token (RFC 6901): label and annotation keys hold ``/``."""
    return key.replace("~", "~0").replace("/", "~1")


def map_ops(path: str, present: Mapping[str, Any] | None, wanted: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSON patch that sets each ``wanted`` key of the map at ``path`` (``present``: the map there, None when
    absent), leaving those already so."""
    changed = {k: v for k, v in wanted.items() if (present or {}).get(k) != v}
    if not changed:
        return []
    if present is None:
        return [{"op": "add", "path": path, "value": changed}]
    return [{"op": "add", "path": f"{path}/{escape(k)}", "value": v} for k, v in changed.items()]


def merge_patched(target: Any, patch: Any) -> Any:
    """``target`` with the merge patch ``patch`` applied (RFC 7386: a map is merged key by key, ``null`` removes
    a key, anything else replaces), ``target`` left as it is."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patched(out.get(key), value)
    return out


def merge_patch_to(current: Any, want: Any) -> Any:
    """The merge-patch value (RFC 7386) that turns ``current`` into exactly ``want``: a map into a map key by
    key, ``null`` for each key ``want`` drops, at any depth, as a merge patch merges nested maps rather than
    replacing them; anything else is ``want`` itself (a list is replaced whole)."""
    if not isinstance(want, Mapping) or not isinstance(current, Mapping):
        return want
    out: dict[str, Any] = {k: None for k in current if k not in want}
    out.update((k, merge_patch_to(current.get(k), v)) for k, v in want.items())
    return out
