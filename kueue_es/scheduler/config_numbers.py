"""Whole floats in a Configuration read as the integers Kueue reads them as.

Kueue turns its YAML configuration file into JSON before decoding it, and that step writes a whole number given as
a float (``backoffLimitCount: 3.0``) as an integer where the field it lands in is one, so Kueue takes it. kueue-es
decodes a user's document strictly (a value of another JSON type than its field's is refused), so before that it
rewrites such values the same way (:func:`whole_floats_as_ints`): only a float with no fractional part, only where
the field is an integer (a float field keeps its float; a bool is no number here). A fractional value for an
integer field is left alone, for the strict decoding to refuse naming the field, as Kueue refuses it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec.inspect as mi


@lru_cache(maxsize=8)
def _info(target: type) -> mi.Type:
    return mi.type_info(target)


def whole_floats_as_ints(doc: Any, target: type) -> Any:
    """``doc`` (a decoded YAML/JSON document meant as a ``target``) with each whole float that lands in an
    integer field of ``target`` made an ``int``; ``doc`` itself is not changed (a changed part is a copy)."""
    return _rewrite(doc, _info(target))


def _rewrite(value: Any, info: mi.Type) -> Any:
    if isinstance(info, mi.UnionType):
        return _rewrite_union(value, info)
    if isinstance(info, mi.IntType):
        return int(value) if type(value) is float and value.is_integer() else value
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f.type for f in info.fields}
        return _rebuilt_dict(value, lambda key: fields.get(key) if isinstance(key, str) else None)
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        return _rebuilt_dict(value, lambda _key: info.value_type)
    if isinstance(info, mi.ListType | mi.VarTupleType) and isinstance(value, list):
        items = [_rewrite(item, info.item_type) for item in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def _rewrite_union(value: Any, info: mi.UnionType) -> Any:
    """A union takes a whole float as an integer only when it holds an integer and no float."""
    if type(value) is float:
        kinds = {type(member) for member in info.types}
        return _rewrite(value, mi.IntType()) if mi.IntType in kinds and mi.FloatType not in kinds else value
    for member in info.types:
        if isinstance(value, dict) and isinstance(member, mi.StructType | mi.DictType):
            return _rewrite(value, member)
        if isinstance(value, list) and isinstance(member, mi.ListType | mi.VarTupleType):
            return _rewrite(value, member)
    return value


def _rebuilt_dict(value: dict[Any, Any], type_of: Any) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    changed = False
    for key, item in value.items():
        info = type_of(key)
        new = item if info is None else _rewrite(item, info)
        changed = changed or new is not item
        out[key] = new
    return out if changed else value
