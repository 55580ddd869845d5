"""Kueue's quota charge for Dynamic Resource Allocation (``KueueDRAIntegration``, beta, on).

A pod template's ``resourceClaims`` that name a ResourceClaimTemplate claim devices for each pod: every
``exactly`` request of the template asks for ``count`` devices of a DeviceClass. The Configuration's
``resources.deviceClassMappings`` names the logical resource each DeviceClass is charged as, so a pod set's
per-pod requests gain, per logical resource, the devices its templates ask for (summed over requests and claims),
and the count of pods multiplies them like any other request. Kueue adds them after ``excludeResourcePrefixes``
and ``transformations``, which do not apply to them.

What Kueue refuses makes the workload inadmissible rather than charged (its workload controller writes the
message on QuotaReserved=False and keeps it out of its queue): a claim by name (a ResourceClaim, not a template),
a template that does not exist, a ``firstAvailable`` request, ``allocationMode: All``, and a DeviceClass no
mapping names. An ``adminAccess`` request costs nothing. With the gate off, ``KueueDRARejectWorkloadsWhenDRADisabled``
(beta, on) makes any claim inadmissible; with both off, claims are ignored.

The errors of a pod set are kept relative to it (starting ``.template.spec...``); :func:`workload_problem`
prefixes its index as Kueue's field path does. Everything here is pure; where Kueue's outcome follows Go's map
order (which of several unmapped DeviceClasses it names), the first by name is taken.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events import objects as o
from events.quantity import MAX_INT64, to_int
from projections import gates

CLAIMS_BY_NAME = "KueueDRAIntegration feature does not support use of resource claims"
"""QuotaReserved=False message of a workload whose pods claim a ResourceClaim by name."""
REJECTED = "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
"""QuotaReserved=False message of a workload with claims while the DRA gate is off and the reject gate on."""
INADMISSIBLE = "Inadmissible"
"""QuotaReserved=False reason of a DRA problem (``Misconfigured`` under UnadmittedWorkloadsObservability)."""

Pairs = tuple[tuple[str, int], ...]


class DraView(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """What decides a namespace's claims: part of the pod-set memo keys of templates that have claims."""

    reject: bool
    """The DRA gate is off and the reject gate on: any claim makes the workload inadmissible."""
    mapping: tuple[tuple[str, str], ...] = ()
    """DeviceClass -> logical resource, by DeviceClass."""
    templates: tuple[tuple[str, o.ResourceClaimSpec], ...] = ()
    """The namespace's ResourceClaimTemplates (name, claim spec), by name."""


class _Mapping(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    name: str = ""
    device_class_names: list[str] = []


class _Resources(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    device_class_mappings: list[_Mapping] = []


class _Doc(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    resources: _Resources | None = None


def mode_of(document: dict[str, Any] | None) -> str:
    """``"charge"`` (the DRA gate on), ``"reject"`` (off, the reject gate on) or ``""`` (claims ignored) under a
    recorded Configuration document."""
    flags = gates.of_document(document)
    if gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION):
        return "charge"
    return "reject" if gates.enabled(flags, gates.KUEUE_DRA_REJECT_WORKLOADS_WHEN_DRA_DISABLED) else ""


def mapping_of(document: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The ``resources.deviceClassMappings`` of a recorded Configuration document as (DeviceClass, logical
    resource), by DeviceClass. The loader refused a class mapped twice; a malformed document maps nothing."""
    if not document or not isinstance(document.get("resources"), dict):
        return ()
    try:
        res = msgspec.convert(document, _Doc, strict=False).resources
    except msgspec.ValidationError:
        return ()
    if res is None:
        return ()
    found: dict[str, str] = {}
    for m in res.device_class_mappings:
        for dc in m.device_class_names:
            found.setdefault(dc, m.name)
    return tuple(sorted(found.items()))


def claim_charge(pod_set: str, claims: list[o.PodResourceClaim], view: DraView) -> tuple[Pairs, str]:
    """Per-pod DRA requests of a pod set's ``claims`` in Kueue units, by resource name, or ``((), error)``: the
    error Kueue gives, relative to the pod set, or a workload-wide message (:data:`CLAIMS_BY_NAME`,
    :data:`REJECTED`)."""
    if view.reject:
        return ((), REJECTED) if claims else ((), "")
    if any(c.resource_claim_name is not None for c in claims):
        return (), CLAIMS_BY_NAME
    templates = dict(view.templates)
    mapping = dict(view.mapping)
    total: dict[str, int] = {}
    for j, claim in enumerate(claims):
        name = claim.resource_claim_template_name
        if name is None:
            continue
        at = f".template.spec.resourceClaims[{j}]"
        spec = templates.get(name)
        if spec is None:
            return (), (f"{at}: Internal error: failed to get claim spec for ResourceClaimTemplate {name} in podset "
                        f'{pod_set}: resourceclaimtemplates.resource.k8s.io "{name}" not found')
        per_class, error = _device_counts(spec)
        if error:
            return (), f"{at}.{error[0]}: ResourceClaimTemplate {name}: {error[1]}"
        for dc in sorted(per_class):
            logical = mapping.get(dc)
            if logical is None:
                return (), f'{at}.resourceClaimTemplateName.deviceClassName: Not found: "{dc}"'
            value = to_int(logical, str(per_class[dc]))
            total[logical] = min(MAX_INT64, total.get(logical, 0) + value)
    return tuple(sorted(total.items())), ""


def _device_counts(spec: o.ResourceClaimSpec) -> tuple[dict[str, int], tuple[str, str] | None]:
    """Devices a claim spec asks for per DeviceClass, or the (field, message) Kueue refuses it with."""
    counts: dict[str, int] = {}
    for i, req in enumerate(spec.devices.requests):
        at = f"devices.requests[{i}]"
        if req.first_available is not None:
            return {}, (f"{at}: Invalid value: null", "FirstAvailable device selection is not supported")
        x = req.exactly
        if x is None:
            return {}, (f"{at}: Invalid value: null", "Exactly must be set if FirstAvailable is nil")
        if x.admin_access:
            continue
        mode = x.allocation_mode or "ExactCount"  # the API server's default
        if mode == "All":
            return {}, (f'{at}.exactly.allocationMode: Invalid value: "All"', "AllocationMode 'All' is not supported")
        if mode != "ExactCount":
            return {}, (f'{at}.exactly.allocationMode: Invalid value: "{mode}"', f"unsupported allocation mode: {mode}")
        if not x.device_class_name:
            continue
        count = 1 if x.count is None else x.count
        counts[x.device_class_name] = min(MAX_INT64, counts.get(x.device_class_name, 0) + count)
    return counts, None


def workload_problem(pod_sets: tuple[Any, ...]) -> str:
    """What Kueue's workload controller says of a pending workload's claims ("" when they are charged): the
    reject message, else the claims-by-name one, else the first pod set's error with its field path."""
    errors = [ps.dra_error for ps in pod_sets]
    if not any(errors):
        return ""
    for whole in (REJECTED, CLAIMS_BY_NAME):
        if whole in errors:
            return whole
    for i, error in enumerate(errors):
        if error:
            return f"spec.podSets[{i}]{error}"
    return ""


def has_claims(templates: Any) -> bool:
    """Some pod template of ``templates`` (pod sets or pod template specs) has ``resourceClaims``."""
    for t in templates:
        spec = t.template.spec if hasattr(t, "template") else t.spec
        if spec.resource_claims:
            return True
    return False
