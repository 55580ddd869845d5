"""A digest of a pod set's whole template, as Kueue's ``equality.Semantic`` compares templates.

The log keeps Workloads as views (:mod:`events.objects`): only what Kueue's decisions read of a pod template. One
decision reads all of it: a ProvisioningRequest check with ``podSetMergePolicy: IdenticalPodTemplates`` merges two
pod sets only when their templates are semantically equal (Kueue's ``canMergePodSets``:
``equality.Semantic.DeepEqual(ps1.Template, ps2.Template)``), so two pod sets that differ in their args, env,
volumes or service account alone are two request pod sets. So whoever turns a Workload as the apiserver (or a
user) writes it into a view — the watch connector, ``kueue-es import``, every manifest loader — stamps each pod set's
template view with :func:`template_digest` of the raw template (:attr:`events.objects.PodTemplateSpec.digest`), and
the decision compares those (:func:`kueue_es.scheduler.provisioning.merged_pod_sets`).

The digest is of the template's canonical form, which equals for templates ``equality.Semantic`` calls equal:

* keys sorted (the encoding's), lists in order;
* null, empty lists and empty maps dropped, at any depth, and a map left empty by that dropped too
  (``Semantic.DeepEqual`` holds a nil and an empty slice or map equal, and an absent struct field is its zero
  value). ``""``, ``0`` and ``false`` are kept: many of the pod spec's scalars are pointers, where nil and zero
  differ (``automountServiceAccountToken: false``, ``runAsUser: 0``). Two approximations, both rare: a non-pointer
  scalar written as its zero value differs from one left out (a template serialized by Go omits it), and a pointer
  to an empty struct (``securityContext: {}``) equals none;
* every quantity by value (``Quantity.Cmp``: ``"1000m"`` is ``"1"``, ``1Gi`` is ``"1073741824"``): the
  containers' (and init and ephemeral containers') requests and limits, the pod's ``overhead`` and ``resources``,
  an ``emptyDir.sizeLimit`` and a generic ephemeral volume's claim requests. A quantity that does not parse is
  kept as written.

The digest is SHA-256 over the canonical JSON (no dependence on ``PYTHONHASHSEED`` or dict order), 32 hex digits.
Pure: the producers compute it once per template; the fold only carries it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from events import objects as o
from events.quantity import QuantityError, parse_quantity

DIGEST_FIELD = "kueueEsDigest"
"""The digest's name in a template view's wire form (not a Kubernetes field: never read from a raw template)."""

_canonical_json = msgspec.json.Encoder(order="sorted")


def template_digest(template: Any) -> str:
    """The digest of a raw pod template (plain data, as JSON decodes it; see the module docstring)."""
    canonical = _canonical(template if isinstance(template, Mapping) else {}, _TEMPLATE)
    return hashlib.sha256(_canonical_json.encode(canonical)).hexdigest()[:32]


# Where quantities are, as a tree of keys: a map's values are quantities at ``_QUANTITY_MAP``, the value is one
# at ``_QUANTITY``; ``_EACH`` is every item of a list. Everything else is compared as written.
_QUANTITY, _QUANTITY_MAP, _EACH = "quantity", "quantity-map", "each"
_RESOURCES = {"requests": _QUANTITY_MAP, "limits": _QUANTITY_MAP}
_CONTAINER = {_EACH: {"resources": _RESOURCES}}
_TEMPLATE: dict[str, Any] = {"spec": {
    "containers": _CONTAINER, "initContainers": _CONTAINER, "ephemeralContainers": _CONTAINER,
    "overhead": _QUANTITY_MAP, "resources": _RESOURCES,
    "volumes": {_EACH: {"emptyDir": {"sizeLimit": _QUANTITY},
                        "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": _RESOURCES}}}}},
}}


def _quantity(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    try:
        parsed = parse_quantity(value)
    except QuantityError:
        return value
    return "0" if parsed == 0 else str(parsed.normalize())


def _canonical(node: Any, where: Any) -> Any:
    """``node`` in canonical form (None: dropped), ``where`` telling where its quantities are."""
    if where == _QUANTITY:
        return _quantity(node)
    if isinstance(node, Mapping):
        out = {}
        for k, v in node.items():
            if k == DIGEST_FIELD:
                continue
            inner = (_QUANTITY if where == _QUANTITY_MAP else where.get(k)) if where is not None else None
            c = _canonical(v, inner)
            if c is not None:
                out[k] = c
        return out or None
    if isinstance(node, list):
        item = where.get(_EACH) if isinstance(where, dict) else None
        items = [_canonical(v, item) for v in node]
        return [{} if v is None and isinstance(node[i], Mapping) else v for i, v in enumerate(items)] or None
    return node


# --- stamping views ------------------------------------------------------------------------------------------------


def stamped(workload: o.Workload, templates: Sequence[Any]) -> o.Workload:
    """``workload`` with each pod set's template view carrying the digest of its raw template (``templates``, in
    pod-set order, as the document the view was decoded from holds them)."""
    return _with_digests(workload, [template_digest(t) for t in templates])


def stamped_from_document(obj: o.KObject, doc: Mapping[str, Any]) -> o.KObject:
    """:func:`stamped` for a Workload decoded from the plain data ``doc`` (other kinds as they are)."""
    if not isinstance(obj, o.Workload):
        return obj
    spec = doc.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    raw = [ps.get("template") if isinstance(ps, Mapping) else None
           for ps in (pod_sets if isinstance(pod_sets, list) else ())]
    return stamped(obj, raw)


class _RawPodSet(msgspec.Struct):
    template: msgspec.Raw = msgspec.Raw(b"")


class _RawSpec(msgspec.Struct, rename={"pod_sets": "podSets"}):
    pod_sets: list[_RawPodSet] = []


class _RawWorkload(msgspec.Struct):
    spec: _RawSpec = msgspec.field(default_factory=_RawSpec)


_raw_decoder = msgspec.json.Decoder(_RawWorkload)
_DIGESTS: dict[bytes, str] = {}
DIGEST_MEMO_SIZE = 4096
"""Digests kept by a BLAKE2b hash of the raw template's bytes (not the bytes: a template may be kilobytes): a
Workload is delivered again at every status change with the same templates, whose digest is then a lookup.
Cleared when full: a cache, never state."""


def stamped_from_json(workload: o.Workload, raw: bytes | msgspec.Raw) -> o.Workload:
    """:func:`stamped` for a Workload decoded from the JSON ``raw`` (as the apiserver sends it)."""
    if not workload.spec.pod_sets:
        return workload
    pod_sets = _raw_decoder.decode(raw).spec.pod_sets
    digests = []
    for ps in pod_sets:
        key = hashlib.blake2b(ps.template, digest_size=16).digest()
        digest = _DIGESTS.get(key)
        if digest is None:
            if len(_DIGESTS) >= DIGEST_MEMO_SIZE:
                _DIGESTS.clear()
            digest = _DIGESTS[key] = template_digest(msgspec.json.decode(ps.template) if ps.template else None)
        digests.append(digest)
    return _with_digests(workload, digests)


def _with_digests(workload: o.Workload, digests: list[str]) -> o.Workload:
    pod_sets = workload.spec.pod_sets
    if not pod_sets or len(digests) != len(pod_sets):  # not the document the view came from: left without
        return workload
    if all(ps.template.digest == d for ps, d in zip(pod_sets, digests, strict=True)):
        return workload
    new = [ps if ps.template.digest == d else
           msgspec.structs.replace(ps, template=msgspec.structs.replace(ps.template, digest=d))
           for ps, d in zip(pod_sets, digests, strict=True)]
    return msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, pod_sets=new))
