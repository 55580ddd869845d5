"""What Kueue's Configuration does to a pod's requests before they count against quota (``resources``).

After the in-memory adjustment (:mod:`projections.pod_adjustment`) and the per-pod sum, Kueue

1. applies ``transformations`` to everything the pod requests: an input resource's quantity — times the
   ``multiplyBy`` resource's quantity when the pod requests it — times each of its ``outputs`` is generated under
   that output's name, exactly (Kueue's decimal Quantity arithmetic since v0.19's #12953: ``300m`` cpu times
   ``1000`` is ``300``); ``Retain`` (the default) keeps the input as requested, unmultiplied, ``Replace`` drops it
   (v0.20's #13986);
2. drops every requested resource kept so far whose name starts with one of ``excludeResourcePrefixes``; what the
   transformations generate stays, whatever its name.

That order is Kueue v0.20's (#15954; #16041, v0.19.6's #16053): an excluded resource is not charged itself, but
still multiplies (``multiplyBy``) and is still transformed (``input``). Excluding first, as before, let a workload
take the outputs' quota for nothing, or for a multiplier of 1.

What the transformations generate is summed apart from what the pod requested: a negative output offsets other
outputs under its name, and a generated total that comes out negative counts as 0, so it never lowers a request
kept under the same name (v0.20's #13986); then each generated total is added to the request of its name, if any,
whatever the order the names come in (#13990). The exact result is converted to Kueue's integer units (rounded
up, at most MaxInt64) once, at the end, as Kueue converts its Quantities.

The rules live in the Configuration recorded in the log, so a projection reads them from the recorded document
(:func:`rules_of`); the scheduler's configuration loader validates the same fields with :func:`compile_rules`
and names the bad one.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from typing import Any

import msgspec

from events.errors import InvalidInput
from events.field_errors import OWN_RULE, go_quote, not_supported
from events.objects import Quantity
from events.quantity import MAX_INT64, MILLI_RESOURCES, QuantityError, parse_quantity
from projections import gates

RETAIN, REPLACE = "Retain", "Replace"


class ResourceTransformation(msgspec.Struct, kw_only=True, rename="camel", frozen=True, forbid_unknown_fields=False):
    """One entry of ``resources.transformations`` as the Configuration gives it."""

    input: str = ""
    strategy: str | None = None
    """``Retain`` (also when absent) or ``Replace``."""
    multiply_by: str = ""
    outputs: dict[str, Quantity] = {}


class _Resources(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    exclude_resource_prefixes: list[str] = []
    transformations: list[ResourceTransformation] = []


class _Doc(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    resources: _Resources | None = None


class Transform(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A compiled transformation: per-unit outputs as exact quantities, sorted by name."""

    input: str
    replace: bool
    multiply_by: str
    outputs: tuple[tuple[str, Decimal], ...]


class RequestRules(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """The compiled ``resources`` rules; part of the pod-set memo keys (see ``projections.workloads``)."""

    exclude: tuple[str, ...] = ()
    transforms: tuple[Transform, ...] = ()

    def apply(self, requests: dict[str, int]) -> dict[str, int]:
        """Per-pod ``requests`` (Kueue units: cpu in milli) as Kueue counts them under these rules."""
        exclude = self.exclude
        by_input = {t.input: t for t in self.transforms}
        if not any(r in by_input for r in requests):
            if exclude and any(r.startswith(exclude) for r in requests):
                return {r: v for r, v in requests.items() if not r.startswith(exclude)}
            return requests
        out: dict[str, Decimal] = {}
        generated: dict[str, Decimal] = {}
        for name in sorted(requests):  # every request, excluded or not: it may be an input or a multiplier
            quantity = _exact(name, requests[name])
            t = by_input.get(name)
            if (t is None or not t.replace) and not (exclude and name.startswith(exclude)):
                out[name] = quantity
            if t is None:
                continue
            if t.multiply_by and t.multiply_by in requests:
                quantity *= _exact(t.multiply_by, requests[t.multiply_by])
            for output, per_unit in t.outputs:
                value = per_unit * quantity
                generated[output] = generated[output] + value if output in generated else value
        for name, total in generated.items():
            total = max(total, _ZERO)
            out[name] = out[name] + total if name in out else total
        return {r: _units(r, q) for r, q in out.items()}


_ZERO = Decimal(0)


def _exact(resource: str, value: int) -> Decimal:
    return Decimal(value) / 1000 if resource in MILLI_RESOURCES else Decimal(value)


def _whole(quantity: Decimal) -> int:
    """A quantity's whole value, rounded up (Kubernetes' ``Quantity.Value()``)."""
    return int(quantity.to_integral_value(rounding=ROUND_CEILING))


def _units(resource: str, quantity: Decimal) -> int:
    if resource in MILLI_RESOURCES:
        quantity *= 1000
    return max(0, min(_whole(quantity), MAX_INT64))


RESERVED = "pods"
"""The resource Kueue counts a pod set's pods in: flavor assignment sets it to the pod count."""


def compile_rules(exclude: list[str], transformations: list[ResourceTransformation],
                  where: str, *, reserved_names: bool = True) -> RequestRules | None:
    """The rules of a Configuration's ``resources`` (None when there are none); a transformation Kueue would
    refuse is an error naming the field (an output that is no quantity first, the first of
    :func:`transformation_problems` then). ``reserved_names``: Kueue's ``ReservedResourceNameValidation`` gate
    (beta, on), under which a transformation may not name ``pods``, as its input or an output; off, such a
    configuration loads, and flavor assignment overwrites what it outputs as ``pods`` with the pod count."""
    check_output_quantities(transformations, where)
    problems = transformation_problems(transformations, reserved_names=reserved_names)
    if problems:
        raise InvalidInput(f"{where}: {problems[0]}")
    transforms = tuple(Transform(input=t.input, replace=(t.strategy or RETAIN) == REPLACE, multiply_by=t.multiply_by,
                                 outputs=tuple((name, parse_quantity(t.outputs[name])) for name in sorted(t.outputs)))
                       for t in transformations)
    if not exclude and not transforms:
        return None
    return RequestRules(exclude=tuple(exclude), transforms=transforms)


def check_output_quantities(transformations: list[ResourceTransformation], where: str) -> None:
    """An output that is no quantity is refused, naming it: Kueue's decoding refuses it (a ``resource.Quantity``),
    before any validation."""
    for i, t in enumerate(transformations):
        for name in sorted(t.outputs):
            try:
                parse_quantity(t.outputs[name])
            except QuantityError as exc:
                raise InvalidInput(f"{where}: field `resources.transformations[{i}].outputs.{name}`: {exc}") from None


def transformation_problems(transformations: list[ResourceTransformation], *, reserved_names: bool) -> list[str]:
    """Every fault of ``resources.transformations`` (``field `<path>`: ...``), entry by entry: a strategy Kueue
    does not know, ``pods`` as input or output (``reserved_names``), an input an earlier entry transforms;
    then kueue-es's own rules (:data:`~events.field_errors.OWN_RULE`: Kueue's validateResourceTransformations
    has neither), an input missing and an output without a name."""
    at = "resources.transformations"
    seen: set[str] = set()
    found: list[str] = []
    own: list[str] = []
    for i, t in enumerate(transformations):
        strategy = t.strategy or RETAIN
        if strategy not in (RETAIN, REPLACE):
            found.append(f"field `{at}[{i}].strategy`: " + not_supported(go_quote(strategy), (RETAIN, REPLACE)))
        if not t.input:
            own.append(f"field `{at}[{i}].input`: Required value: must be specified {OWN_RULE}")
        elif reserved_names and t.input == RESERVED:
            found.append(f"field `{at}[{i}].input`: {RESERVED!r} is reserved for internal kueue use")
        if reserved_names and RESERVED in t.outputs:
            found.append(f"field `{at}[{i}].outputs.{RESERVED}`: the key is reserved for internal kueue use")
        if t.input and t.input in seen:  # a ResourceName: Go prints it as its String(), unquoted
            found.append(f"field `{at}[{i}].input`: Duplicate value: {t.input}")
        seen.add(t.input)
        if "" in t.outputs:
            own.append(f'field `{at}[{i}].outputs`: Invalid value: "": a resource name must not be empty '
                       f"{OWN_RULE}")
    return found + own


_BY_DOCUMENT: dict[bytes, RequestRules | None] = {}
_ENC = msgspec.json.Encoder(order="sorted")


def rules_of(document: dict[str, Any] | None) -> RequestRules | None:
    """The rules of a recorded Configuration document (None: it has none). A document Kueue would refuse has none
    here: the scheduler refuses to decide under it, naming its offset, so the requests it would give never
    count. Equal documents give the same object."""
    if not document or not document.get("resources"):
        return None
    key = _ENC.encode(document.get("resources"))
    if key in _BY_DOCUMENT:
        return _BY_DOCUMENT[key]
    try:
        res = msgspec.convert(document, _Doc, strict=False).resources
        rules = None if res is None else compile_rules(res.exclude_resource_prefixes, res.transformations, "",
                                                       reserved_names=False)  # checked before it was recorded
    except (msgspec.ValidationError, InvalidInput):
        rules = None
    if len(_BY_DOCUMENT) > 1024:
        _BY_DOCUMENT.clear()
    _BY_DOCUMENT[key] = rules
    return rules


def reclaims(document: dict[str, Any] | None) -> bool:
    """Whether Kueue's ``ReclaimablePods`` gate (beta, on by default) is on in a recorded Configuration document:
    only then do reclaimable pods stop counting."""
    return gates.enabled(gates.of_document(document), "ReclaimablePods")
