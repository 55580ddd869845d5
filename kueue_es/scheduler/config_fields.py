"""The fields a Kueue ``Configuration`` may hold, for refusing the ones it may not, as Kueue does.

Kueue reads its configuration file with a strict decoder: a field its Configuration type does not have stops it
from starting, with the decoder's error (``strict decoding error: unknown field "waitForPodsReady.timeoutt"``, every
unknown field named, in the order the decoder meets them: Kueue turns the YAML into JSON through a Go map
first, so each object's keys come sorted). kueue-es refuses such a file the same way (:func:`unknown_fields`).

The fields known are those of Kueue's Configuration of the version the file's ``apiVersion`` names
(:func:`known_in`: the types of :mod:`kueue_es.scheduler.config_schema`, which also type-check every value), so a
field only the other version has is refused as well (:data:`ONLY_IN`, the same split said as paths, for
:func:`in_version`): v1beta2 dropped ``queueVisibility``, ``integrations.podOptions`` and the ``enable`` switches
of ``fairSharing`` and ``waitForPodsReady`` (the stanza's presence switches it on), and v1beta1 never got the
fields added since. Free-form maps (``featureGates``, label selectors' ``matchLabels``,
``controller.groupKindConcurrency``) are not looked into.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec
import msgspec.inspect as mi

from kueue_es.scheduler.config_schema import V1BETA1, V1BETA2, schema_for

Tree = dict[str, Any]
"""Field name -> ``None`` (a value not looked into), a :data:`Tree` (an object) or ``[Tree]`` (a list of objects)."""


def tree_of(info: mi.Type) -> Tree | list[Tree] | None:
    """What a decoded type says of the fields below it."""
    if isinstance(info, mi.UnionType):
        found = [t for t in (tree_of(member) for member in info.types) if t is not None]
        return found[0] if found else None
    if isinstance(info, mi.StructType):
        return {f.encode_name: tree_of(f.type) for f in info.fields}
    if isinstance(info, mi.ListType | mi.VarTupleType):
        item = tree_of(info.item_type)
        return [item] if isinstance(item, dict) else None
    return None


@lru_cache(maxsize=4)
def known_in(api_version: str) -> Tree:
    """The fields a Configuration of ``api_version`` has (Kueue decodes a file as the version it names; an
    apiVersion it has not, refused elsewhere, is taken as v1beta2)."""
    tree = tree_of(mi.type_info(schema_for(api_version)))
    assert isinstance(tree, dict)
    return tree


ONLY_IN: dict[str, tuple[str, ...]] = {
    V1BETA1: ("queueVisibility", "integrations.podOptions", "fairSharing.enable", "waitForPodsReady.enable"),
    V1BETA2: ("multiKueue.clusterProfile", "multiKueue.singleClusterPreemptionTimeout",
              "multiKueue.incrementalDispatcherConfig", "resources.quotaCheckStrategy",
              "resources.deviceClassMappings[].sources", "metrics.customLabels[].sourceKind",
              "metrics.customLabels[].trackedValues", "waitForPodsReady.unscheduledTimeout",
              "waitForPodsReady.maxTimeoutOnWorkload", "metrics.localQueueMetrics", "visibilityServer"),
}
"""apiVersion -> the fields (``a.b``, ``a[].b`` below a list) only that version of Kueue's Configuration has: the
ones v1beta2 removed or replaced (its conversion drops them), and the ones added to v1beta2 alone (its conversion
to v1beta1 loses them). The two schemas of :mod:`~kueue_es.scheduler.config_schema` differ by exactly these."""


def unknown_fields(doc: Any, tree: Tree, at: str = "") -> list[str]:
    """The paths (``a.b[0].c``) of the fields of ``doc`` that ``tree`` does not know, in the order Kueue's
    decoder meets them: depth first, each object's keys in sorted order (the YAML-to-JSON step writes them
    from a Go map, which it sorts; Kueue's config_test.go TestLoad "invalid config"), list items in theirs."""
    found: list[str] = []
    if not isinstance(doc, dict):
        return found
    for key, value in sorted(doc.items(), key=lambda item: str(item[0])):
        path = f"{at}.{key}" if at else str(key)
        if key not in tree:
            found.append(path)
            continue
        below = tree[key]
        if isinstance(below, dict):
            found += unknown_fields(value, below, path)
        elif isinstance(below, list) and isinstance(value, list):
            for i, item in enumerate(value):
                found += unknown_fields(item, below[0], f"{path}[{i}]")
    return found


def _struct(info: mi.Type) -> mi.StructType | None:
    """The object type ``info`` stands for, through optional values and lists."""
    if isinstance(info, mi.UnionType):
        found = [t for t in (_struct(member) for member in info.types) if t is not None]
        return found[0] if found else None
    if isinstance(info, mi.ListType | mi.VarTupleType):
        return _struct(info.item_type)
    return info if isinstance(info, mi.StructType) else None


def _default_at(read: type, path: str) -> Any:
    """The value (as plain data) a field of ``read`` at ``path`` has when not set; a path ``read`` does not decode
    has no default (a value no field holds)."""
    info: mi.Type | None = mi.type_info(read)
    field = None
    for part in path.split("."):
        struct = _struct(info) if info is not None else None
        field = next((f for f in struct.fields if f.encode_name == part.removesuffix("[]")), None) if struct else None
        if field is None:
            return _NO_DEFAULT
        info = field.type
    assert field is not None
    if field.default is not mi.NODEFAULT:
        return msgspec.to_builtins(field.default)
    return msgspec.to_builtins(field.default_factory()) if field.default_factory is not mi.NODEFAULT else _NO_DEFAULT


_NO_DEFAULT = object()


def _drop_default(doc: Any, path: str, default: Any) -> Any:
    """``doc`` less the field at ``path`` where it holds ``default``."""
    if not isinstance(doc, dict):
        return doc
    head, _, rest = path.partition(".")
    name = head.removesuffix("[]")
    if name not in doc:
        return doc
    if not rest:
        return {k: v for k, v in doc.items() if k != name} if doc[name] == default else doc
    below = doc[name]
    if head.endswith("[]") and isinstance(below, list):
        return {**doc, name: [_drop_default(item, rest, default) for item in below]}
    return {**doc, name: _drop_default(below, rest, default)}


def in_version(doc: Tree, read: type) -> Tree:
    """``doc`` (a decoded ``read`` turned back into plain data, every field written out) less the fields only another
    version than its ``apiVersion`` has that it leaves unset (:data:`ONLY_IN`), so that it decodes strictly as the
    version it names. A field of another version set otherwise is kept (that version's value, loaded as recorded)."""
    version = doc.get("apiVersion") if doc.get("apiVersion") in ONLY_IN else V1BETA2
    for other, paths in ONLY_IN.items():
        if other != version:
            for path in paths:
                default = _default_at(read, path)
                if default is not _NO_DEFAULT:
                    doc = _drop_default(doc, path, default)
    return doc
