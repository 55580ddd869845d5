"""``null`` in a Configuration read as Kueue's decoder reads it.

Kueue turns its YAML file into JSON (``~``, ``null`` and an empty value all become ``null``) and decodes that
strictly into a fresh Configuration. Go's JSON decoding takes ``null`` for any field and leaves the field as it
was: ``nil`` for a pointer, slice or map, the zero value for a scalar or a struct held by value, so that Kueue's
defaulting (``apis/config/v1beta2/defaults.go``), which fills what is ``nil`` or zero, then applies as if the field
were absent. The one exception is a type that decodes ``null`` itself: a ``metav1.Duration`` held by value parses
it as the empty string, which is no duration, and Kueue refuses the file. Inside a map or a list ``null`` is an
entry: a map keeps its key with the zero value (``featureGates: {X: null}`` sets ``X`` off), a list its position
with the zero element (``[null]`` of strings is ``[""]``, of objects ``[{}]``; a quantity's zero is ``0``).

:func:`nulls_as_go` writes a document that way, by the types of :mod:`~kueue_es.scheduler.config_schema` (where a
field's type without ``| None`` is exactly a field that refuses ``null``): a field set to ``null`` is dropped,
unless its type refuses ``null`` (kept, for the type check to refuse, naming it); a ``null`` entry becomes its zero.
A field the schema does not know keeps its ``null`` (refused as unknown, as Kueue refuses it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec.inspect as mi


@lru_cache(maxsize=8)
def _info(target: type) -> mi.Type:
    return mi.type_info(target)


def nulls_as_go(doc: Any, target: type) -> Any:
    """``doc`` (a decoded YAML/JSON document meant as a ``target``) with its ``null`` values as Go reads them;
    ``doc`` itself is not changed (a changed part is a copy)."""
    return _rewrite(doc, _info(target))


def _rewrite(value: Any, info: mi.Type) -> Any:
    if isinstance(info, mi.UnionType):
        member = next((m for m in info.types if _holds(m, value)), None)
        return value if member is None else _rewrite(value, member)
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        return _struct(value, {f.encode_name: f.type for f in info.fields})
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        out = {k: zero(info.value_type) if v is None else _rewrite(v, info.value_type) for k, v in value.items()}
        return out if any(out[k] is not v for k, v in value.items()) else value
    if isinstance(info, mi.ListType) and isinstance(value, list):
        items = [zero(info.item_type) if v is None else _rewrite(v, info.item_type) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def _holds(info: mi.Type, value: Any) -> bool:
    """Whether a union's member ``info`` is the one an object or a list ``value`` decodes as."""
    if isinstance(value, dict):
        return isinstance(info, mi.StructType | mi.DictType)
    return isinstance(value, list) and isinstance(info, mi.ListType)


def _struct(value: dict[Any, Any], fields: dict[str, mi.Type]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, item in value.items():
        info = fields.get(key) if isinstance(key, str) else None
        if info is None:
            out[key] = item  # unknown: left to the strict decoding's error
        elif item is None:
            if not nullable(info):
                out[key] = item  # refuses null: left to the type check's error
        else:
            out[key] = _rewrite(item, info)
    same = len(out) == len(value) and all(out[k] is v for k, v in value.items())
    return value if same else out


def nullable(info: mi.Type) -> bool:
    """Whether a field of type ``info`` takes ``null`` (the schema says so with ``| None``)."""
    return isinstance(info, mi.NoneType) or (
        isinstance(info, mi.UnionType) and any(isinstance(m, mi.NoneType) for m in info.types))


_ZEROS: tuple[tuple[type, Any], ...] = ((mi.IntType, 0), (mi.FloatType, 0.0), (mi.BoolType, False), (mi.StrType, ""),
                                        (mi.StructType, {}), (mi.DictType, {}), (mi.ListType, []))
"""Go's zero value of each kind, as a document writes it; in a union (a quantity: string or number) the first kind
the union holds, so a quantity's zero is the number 0."""


def zero(info: mi.Type) -> Any:
    """The zero value of ``info`` as a document writes it (None for a type that has none here)."""
    members = info.types if isinstance(info, mi.UnionType) else (info,)
    for kind, value in _ZEROS:
        if any(isinstance(m, kind) for m in members):
            return type(value)() if isinstance(value, dict | list) else value  # a fresh one
    return None
