"""Enums, bounds, patterns, list types and required fields Kueue's CRDs put on single fields
(``+kubebuilder:validation:Enum``, ``MaxLength``, ``MinLength``, ``Pattern``, ``Minimum``, ``MaxItems``,
``MinItems``, ``MaxProperties``, ``+listType``, ``+required`` in ``apis/kueue/v1beta2/*_types.go``), declared
once: :mod:`connectors.k8s.crds` writes them into the generated CRDs, so that the apiserver refuses what
Kueue's refuses, and :func:`errors` refuses the same values on import and in the validating webhooks, in the
apiserver's words. A path is the wire's (camelCase), ``[]`` standing for every item of a list.

The integer formats (``int32``/``int64``, from the Go types) are declared on the views instead
(:data:`events.objects.Int32`), where the generated schemas pick them up: :func:`errors` refuses a value out
of their range too, found by walking the kind's view."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any, NamedTuple

import msgspec
import msgspec.inspect as mi

from events import objects as o
from events import quota_rules
from events.field_errors import go_quote, not_supported, too_long, too_many

ADMISSION_CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$"
LABEL_KEY = rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
"""Kueue's patterns for a DNS subdomain and a label key, as its CRDs write them."""
ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")
MAX_RESOURCE_WEIGHTS = 16
"""A ResourceFlavor's ``resourceWeights``: ``+kubebuilder:validation:MaxProperties=16``
(``apis/kueue/v1beta2/resourceflavor_types.go``)."""


class Marker(NamedTuple):
    path: str
    enum: tuple[str, ...] = ()
    max_length: int | None = None
    required: bool = False
    """The field must be given (with its parent object, if nested)."""
    minimum: int | None = None
    max_items: int | None = None
    min_length: int | None = None
    pattern: str | None = None
    """The field's regular expression, anchored, as the CRD states it."""
    max_properties: int | None = None
    value_max_length: int | None = None
    """A map's: the longest each of its values may be (``MaxLength`` on the map's value type)."""
    list_keys: tuple[str, ...] | None = None
    """A list's ``+listType``: ``()`` a set (each item once), else a map keyed by these fields."""
    min_items: int | None = None


_TOPOLOGY_REQUEST = "spec.podSets[].topologyRequest"
MARKERS: dict[str, tuple[Marker, ...]] = {
    "Workload": (
        *(Marker(f"{_TOPOLOGY_REQUEST}.{field}", max_length=most) for field, most in (
            ("required", 63), ("preferred", 63), ("podIndexLabel", 317), ("subGroupIndexLabel", 317),
            ("podSetGroupName", 256), ("podSetSliceRequiredTopology", 63))),
        # a pod set assignment's count: Kueue's PodSetAssignment.count, +kubebuilder:validation:Minimum=0
        Marker("status.admission.podSetAssignments[].count", minimum=0),
        Marker("status.requeueState.count", minimum=0),
        Marker("status.admissionChecks[].state", enum=ADMISSION_CHECK_STATES),
        Marker("status.admissionChecks[].message", max_length=32768),
        Marker("status.admissionChecks[].podSetUpdates", max_items=8),
        Marker("status.schedulingStats.evictions", max_items=256),
        Marker("status.schedulingStats.evictions[].reason", max_length=316),
        Marker("status.schedulingStats.evictions[].underlyingCause", max_length=316),
        Marker("status.schedulingStats.evictions[].count", minimum=0),
        Marker("status.nominatedClusterNames", max_items=20),  # a MultiKueueConfig names at most 20
        Marker("status.clusterName", max_length=256),
    ),
    "ClusterQueue": (
        # AdmissionChecksStrategy.admissionChecks: +required, MinItems=1, MaxItems=64, listType=map (name);
        # AdmissionCheckStrategyRule.onFlavors: listType=set, MaxItems=64
        Marker("spec.admissionChecksStrategy.admissionChecks", required=True, min_items=1, max_items=64,
               list_keys=("name",)),
        Marker("spec.admissionChecksStrategy.admissionChecks[].onFlavors", max_items=64, list_keys=()),
        Marker("spec.admissionScope.admissionMode", enum=ADMISSION_MODES, required=True),
    ),
    "ResourceFlavor": (Marker("spec.resourceWeights", max_properties=MAX_RESOURCE_WEIGHTS),),
    "WorkloadPriorityClass": (Marker("value", required=True), Marker("description", max_length=2048)),
    "ProvisioningRequestConfig": (  # no minimum on the retry strategy: Kueue's CRD takes a negative value
        Marker("spec.provisioningClassName", required=True, max_length=253, min_length=1,
               pattern=DNS_SUBDOMAIN),
        Marker("spec.parameters", max_properties=100, value_max_length=255),
        Marker("spec.managedResources", max_items=100, list_keys=()),
        Marker("spec.podSetUpdates.nodeSelector", max_items=8, list_keys=("key",)),
        Marker("spec.podSetUpdates.nodeSelector[].key", required=True, max_length=317, min_length=1,
               pattern=LABEL_KEY),
        Marker("spec.podSetUpdates.nodeSelector[].valueFromProvisioningClassDetail", required=True,
               max_length=32768, min_length=1),
        Marker("spec.podSetMergePolicy", enum=o.POD_SET_MERGE_POLICIES),
    ),
}
"""Per kind, in the order the apiserver reports the fields (the schema's)."""


def errors(kind: str, data: Mapping[str, Any], *, required: bool = True,
           ratcheted: frozenset[str] = frozenset()) -> list[str]:
    """The field errors of ``data`` (an object of ``kind`` as plain data: its document, or its view's
    builtins) for the :data:`MARKERS` it breaks, every one but those ``ratcheted`` (:func:`ratcheted`).
    ``required``: whether a field left out is refused (not when ``data`` is a view's, which leaves out a zero
    it was given)."""
    out: list[str] = []
    for marker in MARKERS.get(kind, ()):
        for at, parent in _parents(data, marker.path.split(".")[:-1], ""):
            out += _field_errors(marker, at, parent, required)
    out += _format_errors(kind, data)
    for marker in MARKERS.get(kind, ()):  # the list types' after the schema's, as the apiserver checks them
        if marker.list_keys is not None:
            for at, parent in _parents(data, marker.path.split(".")[:-1], ""):
                out += _duplicates(marker, at, parent)
    return [e for e in out if e not in ratcheted]


def ratcheted(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> frozenset[str]:
    """The field errors an update from ``old`` to ``new`` (documents of ``kind``) keeps, as the apiserver
    ratchets a CRD's validation (KEP-4008, GA in Kubernetes 1.33): those ``old`` has too at a field ``new``
    leaves as it was (given alike, or left out of both). An object stored under a laxer CRD thus stays
    updatable (its status written, a label added) until the field itself changes. Not for a create, nor
    ``kueue-es import``."""
    kept: set[str] = set()
    for marker in MARKERS.get(kind, ()):
        steps, name = marker.path.split(".")[:-1], marker.path.rsplit(".", 1)[-1]
        now = dict(_parents(new, steps, ""))
        for at, parent in _parents(old, steps, ""):
            if at in now and now[at].get(name, _ABSENT) == parent.get(name, _ABSENT):
                kept.update(_field_errors(marker, at, parent, True))
                kept.update(_duplicates(marker, at, parent))
    kept.update(set(_format_errors(kind, old)) & set(_format_errors(kind, new)))  # they show path and value
    if kind == "ResourceFlavor":
        kept.update(_kept_weight_errors(old, new))
    return frozenset(kept)


def _kept_weight_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The errors of a flavor's ``resourceWeights`` that are no quantity (the CRD's type, which kueue-es's
    CRD does not check: such a weight can be stored) at a resource whose weight ``new`` leaves as it was."""
    before, after = _weights(old), _weights(new)
    return quota_rules.resource_weight_quantity_errors(
        {r: w for r, w in before.items() if r in after and after[r] == w})


def _weights(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = doc.get("spec")
    weights = spec.get("resourceWeights") if isinstance(spec, Mapping) else None
    return weights if isinstance(weights, Mapping) else {}


_ABSENT = object()


def _field_errors(marker: Marker, at: str, parent: Mapping[str, Any], required: bool) -> list[str]:
    """The errors of the field ``marker`` names in ``parent`` (found at ``at``), in the apiserver's words."""
    name = marker.path.rsplit(".", 1)[-1]
    path = f"{at}.{name}" if at else name
    if name not in parent:
        return [f"field `{path}`: Required value"] if required and marker.required else []
    value, out = parent[name], []
    if marker.enum and value not in marker.enum:
        out.append(f"field `{path}`: {not_supported(go_quote(str(value)), marker.enum)}")
    if isinstance(value, str):
        if marker.max_length is not None and len(value) > marker.max_length:
            out.append(f"field `{path}`: {too_long(marker.max_length)}")
        if marker.min_length is not None and len(value) < marker.min_length:
            out.append(f"field `{path}`: Invalid value: {go_quote(value)}: {path} in body should be at least "
                       f"{marker.min_length} chars long")
        if marker.pattern is not None and not re.search(marker.pattern, value):
            out.append(f"field `{path}`: Invalid value: {go_quote(value)}: {path} in body should match "
                       f"'{marker.pattern}'")
    if marker.minimum is not None and isinstance(value, int) and value < marker.minimum:
        out.append(f"field `{path}`: Invalid value: {value}: {path} in body should be greater than or equal "
                   f"to {marker.minimum}")
    if marker.max_items is not None and isinstance(value, list) and len(value) > marker.max_items:
        out.append(f"field `{path}`: {too_many(len(value), marker.max_items)}")
    if marker.min_items is not None and isinstance(value, list) and len(value) < marker.min_items:
        out.append(f"field `{path}`: Invalid value: {len(value)}: {path} in body should have at least "
                   f"{marker.min_items} items")
    if isinstance(value, Mapping):
        if marker.max_properties is not None and len(value) > marker.max_properties:
            out.append(f"field `{path}`: {too_many(len(value), marker.max_properties)}")
        if marker.value_max_length is not None:
            out += [f"field `{path}.{key}`: {too_long(marker.value_max_length)}" for key in sorted(value)
                    if isinstance(value[key], str) and len(value[key]) > marker.value_max_length]
    return out


def _duplicates(marker: Marker, at: str, parent: Mapping[str, Any]) -> list[str]:
    """The items of a set or map list (``marker.list_keys``) given again after their first, in the apiserver's
    words: a set's item quoted, a map's keys as the JSON object of them (as Kubernetes 1.36 writes it)."""
    name = marker.path.rsplit(".", 1)[-1]
    items = parent.get(name)
    if marker.list_keys is None or not isinstance(items, list):
        return []
    path = f"{at}.{name}" if at else name
    seen: set[str] = set()
    out = []
    for i, item in enumerate(items):
        if marker.list_keys:
            fields = item if isinstance(item, Mapping) else {}
            shown = msgspec.json.encode({k: fields.get(k) for k in sorted(marker.list_keys)}).decode()
        else:
            shown = go_quote(item) if isinstance(item, str) else str(item)
        if shown in seen:
            out.append(f"field `{path}[{i}]`: Duplicate value: {shown}")
        seen.add(shown)
    return out



_INT_RANGES = {"int32": range(-(2**31), 2**31), "int64": range(-(2**63), 2**63)}


def _format_errors(kind: str, data: Mapping[str, Any]) -> list[str]:
    """A value out of its integer format's range, in the apiserver's words (which show the value as ``""``;
    these show it)."""
    out: list[str] = []
    for field, fmt in integer_formats(kind):
        *steps, name = field.split(".")
        for at, parent in _parents(data, steps, ""):
            here = f"{at}.{name.removesuffix('[]')}" if at else name.removesuffix("[]")
            value = parent.get(name.removesuffix("[]"))
            values = enumerate(value) if name.endswith("[]") and isinstance(value, list) else [(None, value)]
            for i, item in values:
                if isinstance(item, int) and not isinstance(item, bool) and item not in _INT_RANGES[fmt]:
                    path = here if i is None else f"{here}[{i}]"
                    out.append(f"field `{path}`: Invalid value: {item}: Checked value must be of type "
                               f"integer with format {fmt} in {path}")
    return out


@cache
def integer_formats(kind: str) -> tuple[tuple[str, str], ...]:
    """The paths (as :data:`MARKERS`'s; one ending ``[]``: each item of a list of integers) of ``kind``'s
    integer fields its view declares a format of, with that format, in the view's (the schema's) order."""
    view = o.KINDS.get(kind)
    return tuple(_formats(mi.type_info(view), "")) if view is not None else ()


def _formats(info: mi.Type, at: str) -> Iterator[tuple[str, str]]:
    if isinstance(info, mi.Metadata):
        fmt = (info.extra_json_schema or {}).get("format")
        if isinstance(info.type, mi.IntType) and fmt in _INT_RANGES:
            yield at, fmt
        else:
            yield from _formats(info.type, at)
    elif isinstance(info, mi.StructType):
        for f in info.fields:
            yield from _formats(f.type, f"{at}.{f.encode_name}" if at else f.encode_name)
    elif isinstance(info, mi.UnionType):
        for member in info.types:
            yield from _formats(member, at)
    elif isinstance(info, mi.ListType | mi.VarTupleType):
        yield from _formats(info.item_type, f"{at}[]")


def _parents(node: Any, steps: list[str], at: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each mapping ``steps`` leads to from ``node`` (a step ending ``[]``: every item of that list), with its
    path."""
    if not steps:
        if isinstance(node, Mapping):
            yield at, node
        return
    step, rest = steps[0], steps[1:]
    name = step.removesuffix("[]")
    child = node.get(name) if isinstance(node, Mapping) else None
    here = f"{at}.{name}" if at else name
    if step.endswith("[]"):
        for i, item in enumerate(child if isinstance(child, list) else ()):
            yield from _parents(item, rest, f"{here}[{i}]")
    elif child is not None:
        yield from _parents(child, rest, here)


def apply(kind: str, schema: dict[str, Any]) -> None:
    """Write ``kind``'s :data:`MARKERS` into its CRD's openAPIV3Schema (``schema``, its object node)."""
    for marker in MARKERS.get(kind, ()):
        *steps, name = marker.path.split(".")
        node = schema
        for step in steps:
            node = node["properties"][step.removesuffix("[]")]
            if step.endswith("[]"):
                node = node["items"]
        if marker.required:
            node["required"] = sorted({*node.get("required", ()), name})
        field = node["properties"][name]
        if marker.enum:
            field["enum"] = list(marker.enum)
        for key, bound in (("maxLength", marker.max_length), ("minLength", marker.min_length),
                           ("pattern", marker.pattern), ("minimum", marker.minimum),
                           ("maxItems", marker.max_items), ("minItems", marker.min_items),
                           ("maxProperties", marker.max_properties)):
            if bound is not None:
                field[key] = bound
        if marker.value_max_length is not None:
            field["additionalProperties"]["maxLength"] = marker.value_max_length
        if marker.list_keys is not None:
            field["x-kubernetes-list-type"] = "map" if marker.list_keys else "set"
            if marker.list_keys:
                field["x-kubernetes-list-map-keys"] = list(marker.list_keys)
