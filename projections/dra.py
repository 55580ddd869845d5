"""Kueue's quota charge for Dynamic Resource Allocation (``KueueDRAIntegration``, beta, on).

A pod template's ``resourceClaims`` that name a ResourceClaimTemplate claim devices for each pod: every
``exactly`` request of the template asks for ``count`` devices of a DeviceClass. The Configuration's
``resources.deviceClassMappings`` names the logical resource each DeviceClass is charged as, so a pod set's
per-pod requests gain, per logical resource, the devices its templates ask for (summed over requests and claims),
and the count of pods multiplies them like any other request. Kueue adds them after ``excludeResourcePrefixes``
and ``transformations``, which do not apply to them.

What Kueue refuses makes the workload inadmissible rather than charged (its workload controller writes the
message on QuotaReserved=False and keeps it out of its queue): a claim by name (a ResourceClaim, not a template),
a template that does not exist, ``allocationMode: All``, a DeviceClass no mapping names, and a ``firstAvailable``
request — unless ``KueueDRAIntegrationPrioritizedList`` (alpha, off) is on: one whose alternatives all fall
under the same logical resource is then charged the largest count among them (:func:`first_available_charge`).
An ``adminAccess`` request costs nothing. With the gate off, ``KueueDRARejectWorkloadsWhenDRADisabled``
(beta, on) makes any claim inadmissible; with both off, claims are ignored.

Under ``KueueDRAIntegrationExtendedResource`` (beta, on; with the DRA gate) a container's request of an extended
resource that a DeviceClass names in ``spec.extendedResourceName`` is a device request too: kube-scheduler serves it
from that class (the one created last, the first by name among those created together). Kueue then charges the
pod's total of it (requests, limits as missing requests, sidecars added, init containers maxed, no overhead) under
the class's ``deviceClassMappings`` resource, or under its own name when no mapping names the class, in place of
the request the rules left (:func:`extended_charge`); it needs no mapping, and the rules do not apply to the charge.
A quantity that is not whole is refused. An extended resource no DeviceClass names is an ordinary request, and so is
one no template of the workload requests (:func:`needs_extended`: a limit or LimitRange default alone).

The errors of a pod set are kept relative to it (starting ``.template.spec...``); :func:`workload_problem`
prefixes its index as Kueue's field path does. Everything here is pure; where Kueue's outcome follows Go's map
order (which of several unmapped DeviceClasses it names), the first by name is taken.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, NamedTuple

import msgspec

from events import objects as o
from events.labels import qualified_name_problem
from events.quantity import MAX_INT64, QuantityError, decimal_string, parse_quantity, to_int
from events.timefmt import parse_time
from projections import gates
from projections.pod_adjustment import aggregate_requests
from projections.resource_slices import capacity_charge, counter_charge

CLAIMS_BY_NAME = "KueueDRAIntegration feature does not support use of resource claims"
"""QuotaReserved=False message of a workload whose pods claim a ResourceClaim by name."""
REJECTED = "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
"""QuotaReserved=False message of a workload with claims while the DRA gate is off and the reject gate on."""
INADMISSIBLE = "Inadmissible"
"""QuotaReserved=False and Requeued=False reason of a DRA problem (:data:`UNRESOLVED` under
UnadmittedWorkloadsObservability)."""
UNRESOLVED = "DRAResourcesUnresolved"
"""QuotaReserved=False and Requeued=False reason of a DRA problem under UnadmittedWorkloadsObservability."""
RESOLVED = "DRAResourcesResolved"
"""Requeued=True reason once a workload's DRA problem is gone: it is queued again."""
RESOLVED_MESSAGE = "DRA resources were resolved after a previous inadmissible marking"
"""Requeued=True message with :data:`RESOLVED`, Kueue's own (its workload_controller_dra_test.go, "reconcile
DRA persists Requeued=True when previously inadmissible workload resources are resolved")."""
CLAIMS_NOT_SUPPORTED = "DRA resource claims not supported"
"""Requeued=False message of a workload whose pods claim a ResourceClaim by name (its QuotaReserved message is
:data:`CLAIMS_BY_NAME`)."""


def unresolved_reason(observability: bool) -> str:
    """The reason of a DRA problem on QuotaReserved=False and Requeued=False (``observability``: the
    UnadmittedWorkloadsObservability gate)."""
    return UNRESOLVED if observability else INADMISSIBLE


def requeued_message(problem: str) -> str:
    """Kueue's Requeued=False message for a DRA problem whose QuotaReserved message is ``problem``."""
    return CLAIMS_NOT_SUPPORTED if problem == CLAIMS_BY_NAME else problem

Pairs = tuple[tuple[str, int], ...]


class DraView(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """What decides a namespace's claims: part of the pod-set memo keys of templates that have claims."""

    reject: bool
    """The DRA gate is off and the reject gate on: any claim makes the workload inadmissible."""
    mapping: tuple[tuple[str, str], ...] = ()
    """DeviceClass -> logical resource, by DeviceClass."""
    templates: tuple[tuple[str, o.ResourceClaimSpec], ...] = ()
    """The namespace's ResourceClaimTemplates (name, claim spec), by name."""
    extended: tuple[tuple[str, str], ...] = ()
    """Extended resource -> the DeviceClass serving it, by resource (:func:`serving_classes`); empty unless
    KueueDRAIntegrationExtendedResource is on with the DRA gate."""
    counters: tuple[tuple[str, tuple[CounterSource, ...]], ...] = ()
    """DeviceClass -> its counter sources, by DeviceClass (:func:`counters_of`)."""
    class_selectors: tuple[tuple[str, tuple[str, ...] | None], ...] = ()
    """The CEL selectors of the DeviceClasses :attr:`counters` and :attr:`capacities` name (None: no such class),
    by DeviceClass."""
    devices: tuple[tuple[str, tuple[o.Device, ...]], ...] = ()
    """The devices of the complete pools of each driver :attr:`counters` and :attr:`capacities` name, by driver."""
    capacities: tuple[tuple[str, tuple[CapacitySource, ...]], ...] = ()
    """DeviceClass -> its capacity sources, by DeviceClass (:func:`capacities_of`)."""
    prioritized: bool = False
    """KueueDRAIntegrationPrioritizedList is on (with the DRA gate): ``firstAvailable`` requests are charged
    (:func:`first_available_charge`) rather than refused."""
    slice_devices: tuple[tuple[str, o.Device], ...] | None = None
    """Every device every ResourceSlice publishes (driver, device), by slice then place in it, whatever its pool:
    what the CEL selectors of requests are matched against (:func:`_cel_device_errors`); None: not known, the
    selectors are only compiled. :attr:`class_selectors` then also holds the classes of those requests."""


class CounterSource(NamedTuple):
    """A ``deviceClassMappings[].sources[].counter`` (under KueueDRAIntegrationPartitionableDevices)."""

    resource: str
    """The mapping's logical resource, which the counter is charged as."""
    driver: str
    counter: str
    selector: str
    """The CEL expression of its ``deviceSelector``."""


class CapacitySource(NamedTuple):
    """A ``deviceClassMappings[].sources[].capacity`` (under KueueDRAIntegrationConsumableCapacity)."""

    resource: str
    """The mapping's logical resource, which the capacity is charged as."""
    driver: str
    capacity: str
    """The capacity dimension (a qualified name) of the devices, and of the claim's ``capacity.requests``."""
    selector: str
    """The CEL expression of its ``deviceSelector``."""


class _Cel(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    expression: str = ""


class _Selector(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    cel: _Cel | None = None


class _Counter(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    name: str = ""
    driver: str = ""
    device_selector: _Selector | None = None


class _Source(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    counter: _Counter | None = None
    capacity: _Counter | None = None


class _Mapping(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    name: str = ""
    device_class_names: list[str] = []
    sources: list[_Source] = []


class _Resources(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    device_class_mappings: list[_Mapping] = []


class _Doc(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    resources: _Resources | None = None


def extended_on(document: dict[str, Any] | None) -> bool:
    """Kueue charges extended resources backed by a DeviceClass as DRA devices under a recorded Configuration
    document: ``KueueDRAIntegrationExtendedResource`` on, and the DRA gate it depends on."""
    flags = gates.of_document(document)
    return (gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION)
            and gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION_EXTENDED_RESOURCE))


def prioritized_on(document: dict[str, Any] | None) -> bool:
    """Kueue charges ``firstAvailable`` requests under a recorded Configuration document:
    ``KueueDRAIntegrationPrioritizedList`` on, with the DRA gate."""
    flags = gates.of_document(document)
    return (gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION)
            and gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION_PRIORITIZED_LIST))


def mode_of(document: dict[str, Any] | None) -> str:
    """``"charge"`` (the DRA gate on), ``"reject"`` (off, the reject gate on) or ``""`` (claims ignored) under a
    recorded Configuration document."""
    flags = gates.of_document(document)
    if gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION):
        return "charge"
    return "reject" if gates.enabled(flags, gates.KUEUE_DRA_REJECT_WORKLOADS_WHEN_DRA_DISABLED) else ""


def _mappings(document: dict[str, Any] | None) -> list[_Mapping]:
    if not document or not isinstance(document.get("resources"), dict):
        return []
    try:
        res = msgspec.convert(document, _Doc, strict=False).resources
    except msgspec.ValidationError:
        return []
    return res.device_class_mappings if res is not None else []


def mapping_of(document: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The ``resources.deviceClassMappings`` of a recorded Configuration document as (DeviceClass, logical
    resource), by DeviceClass. The loader refused a class mapped to two resources, save by mappings counting
    different counters of partitionable devices: of those, the first maps it (as Kueue looks it up). A malformed
    document maps nothing."""
    found: dict[str, str] = {}
    for m in _mappings(document):
        for dc in m.device_class_names:
            found.setdefault(dc, m.name)
    return tuple(sorted(found.items()))


def counters_of(document: dict[str, Any] | None) -> tuple[tuple[str, tuple[CounterSource, ...]], ...]:
    """DeviceClass -> the counter sources of the mappings naming it (in the document's order), by DeviceClass,
    under a recorded Configuration document; empty unless KueueDRAIntegrationPartitionableDevices is on with the
    DRA gate. A class with counter sources is charged their counters instead of its count of devices."""
    return _sources_of(document, gates.KUEUE_DRA_INTEGRATION_PARTITIONABLE_DEVICES, "counter", CounterSource)


def capacities_of(document: dict[str, Any] | None) -> tuple[tuple[str, tuple[CapacitySource, ...]], ...]:
    """DeviceClass -> the capacity sources of the mapping naming it (in the document's order), by DeviceClass,
    under a recorded Configuration document; empty unless KueueDRAIntegrationConsumableCapacity is on with the DRA
    gate. A class with capacity sources is charged the capacity its requests take instead of its count of
    devices."""
    return _sources_of(document, gates.KUEUE_DRA_INTEGRATION_CONSUMABLE_CAPACITY, "capacity", CapacitySource)


def _sources_of(document: dict[str, Any] | None, gate: str, kind: str, make: Any) -> tuple[tuple[str, tuple], ...]:
    flags = gates.of_document(document)
    if not (gates.enabled(flags, gates.KUEUE_DRA_INTEGRATION) and gates.enabled(flags, gate)):
        return ()
    found: dict[str, list] = {}
    for m in _mappings(document):
        for dc in m.device_class_names:
            for source in m.sources:
                c = getattr(source, kind)
                if c is not None:
                    cel = c.device_selector.cel if c.device_selector is not None else None
                    found.setdefault(dc, []).append(make(m.name, c.driver, c.name,
                                                         cel.expression if cel is not None else ""))
    return tuple((dc, tuple(v)) for dc, v in sorted(found.items()))


def claim_charge(pod_set: str, claims: list[o.PodResourceClaim], view: DraView) -> tuple[Pairs, str]:
    """Per-pod DRA requests of a pod set's ``claims`` in Kueue units, by resource name, or ``((), error)``: the
    error Kueue gives, relative to the pod set (several, of one claim, joined by newlines), or a workload-wide
    message (:data:`CLAIMS_BY_NAME`, :data:`REJECTED`). A claim's requests with CEL selectors are matched against
    the cluster's devices first (:func:`_cel_device_errors`)."""
    if view.reject:
        return ((), REJECTED) if claims else ((), "")
    if any(c.resource_claim_name is not None for c in claims):
        return (), CLAIMS_BY_NAME
    templates = dict(view.templates)
    mapping = dict(view.mapping)
    counted = {*dict(view.counters), *dict(view.capacities)}
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
        per_class, per_logical, error = _device_counts(spec, view)
        if error:
            return (), f"{at}.{error[0]}: ResourceClaimTemplate {name}: {error[1]}"
        unmatched = _cel_device_errors(spec, name, at, view)
        if unmatched:
            return (), "\n".join(unmatched)
        for logical, count in per_logical:
            total[logical] = min(MAX_INT64, total.get(logical, 0) + count)
        for dc in sorted(per_class):
            logical = mapping.get(dc)
            if logical is None:
                return (), f'{at}.resourceClaimTemplateName.deviceClassName: Not found: "{dc}"'
            if dc in counted:
                continue  # charged its counters or capacities (:func:`counter_charge_of`, :func:`capacity_charge_of`)
            value = to_int(logical, str(per_class[dc]))
            total[logical] = min(MAX_INT64, total.get(logical, 0) + value)
    return tuple(sorted(total.items())), ""


def cel_classes(spec: o.ResourceClaimSpec) -> tuple[str, ...]:
    """The DeviceClasses (possibly "") of claim ``spec``'s ``exactly`` requests that have CEL selectors, which Kueue
    matches against the cluster's devices (:func:`claim_charge`)."""
    return tuple(r.exactly.device_class_name for r in spec.devices.requests
                 if r.exactly is not None and any(s.cel is not None for s in r.exactly.selectors))


def _cel_device_errors(spec: o.ResourceClaimSpec, template: str, at: str, view: DraView) -> list[str]:
    """Kueue's errors, relative to the pod set (``at``: the claim's field), for the requests of claim ``spec``
    (of ResourceClaimTemplate ``template``) with CEL selectors that the cluster's devices cannot satisfy: each
    request's class (which must exist, its selectors compiling) and its selectors are matched against the devices
    of :attr:`DraView.slice_devices` — every slice's when some such request's class has no counter or capacity
    sources, else the slices of those sources' drivers — a device matched by one request not counted for
    another; fewer than its count is an error, and so is a selector failing on a device."""
    from projections.dra_cel import compile_selector, device_activation, matches  # noqa: PLC0415 - see above

    asking = [(i, req.exactly) for i, req in enumerate(spec.devices.requests)
              if req.exactly is not None and any(s.cel is not None for s in req.exactly.selectors)]
    if not asking or view.slice_devices is None:
        return []
    sourced: dict[str, list[str]] = {}
    for dc, sources in (*view.counters, *view.capacities):
        sourced.setdefault(dc, []).extend(s.driver for s in sources)
    pool = view.slice_devices
    if all(sourced.get(x.device_class_name) for _, x in asking):
        drivers = list(dict.fromkeys(d for _, x in asking for d in sourced[x.device_class_name]))
        pool = tuple(pd for d in drivers for pd in view.slice_devices if pd[0] == d)
    known = dict(view.class_selectors)
    taken: set[int] = set()
    activations: dict[int, Any] = {}
    errors: list[str] = []
    for i, x in asking:
        here, dc = f"{at}.devices.requests[{i}]", x.device_class_name
        class_exprs: tuple[str, ...] = ()
        if dc:
            found = known.get(dc)
            if found is None:
                errors.append(f"{here}: Internal error: ResourceClaimTemplate {template}: failed to get DeviceClass "
                              f'{dc}: deviceclasses.resource.k8s.io "{dc}" not found')
                continue
            bad = next(((k, e) for k, e in enumerate(found) if compile_selector(e).error), None)
            if bad is not None:
                errors.append(f"{here}[{bad[0]}].cel.expression: Invalid value: {_quoted(bad[1])}: "
                              f"ResourceClaimTemplate {template}: DeviceClass {dc} has invalid CEL selector: "
                              f"{compile_selector(bad[1]).error}")
                continue
            class_exprs = found
        programs = [compile_selector(e).program for e in class_exprs]
        own = [compile_selector(s.cel.expression).program for s in x.selectors if s.cel is not None]
        need = 1 if x.count is None else x.count
        count, failure = 0, ""
        for k, (driver, device) in enumerate(pool):
            if k in taken:
                continue
            activation = activations.get(k)
            if activation is None:
                activation = activations[k] = device_activation(driver, device)
            fit = True
            for program in (*programs, *own):
                fit, failure = matches(program, activation)
                if failure or not fit:
                    break
            if failure:
                break
            if fit:
                taken.add(k)
                count += 1
                if count >= need:
                    break
        if failure:
            errors.append(f"{here}.exactly.selectors: Invalid value: null: ResourceClaimTemplate {template}: CEL "
                          f"evaluation failed for DeviceClass {dc}: {failure}")
        elif count < need:
            errors.append(f"{here}.exactly.selectors: Internal error: ResourceClaimTemplate {template}: insufficient "
                          f"matching devices for CEL selector in DeviceClass {dc}: {count} device(s) match in the "
                          f"cluster but {need} requested")
    return errors


def _device_counts(spec: o.ResourceClaimSpec, view: DraView) -> tuple[dict[str, int], Pairs, tuple[str, str] | None]:
    """Devices a claim spec asks for per DeviceClass (``exactly`` requests) and per logical resource
    (``firstAvailable`` ones, under :attr:`DraView.prioritized`), or the (field, message) Kueue refuses it with."""
    counts: dict[str, int] = {}
    logical: dict[str, int] = {}
    for i, req in enumerate(spec.devices.requests):
        at = f"devices.requests[{i}]"
        if req.first_available is not None:
            if not view.prioritized:
                return {}, (), (f"{at}: Invalid value: null", "FirstAvailable device selection is not supported")
            charged, error = first_available_charge(req.first_available, at, view)
            if error:
                return {}, (), error
            resource, count = charged
            total = logical.get(resource, 0) + count
            # Kueue refuses a sum reaching its "unlimited" sentinel rather than saturate
            if total >= MAX_INT64:
                return {}, (), (f"{at}: Invalid value: {count}",
                                f"the counts charged to logical resource {resource} "
                                "do not add up to a bounded quota amount")
            logical[resource] = total
            continue
        x = req.exactly
        if x is None:
            return {}, (), (f"{at}: Invalid value: null", "Exactly must be set if FirstAvailable is nil")
        bad = _selector_errors(x.selectors, f"{at}.exactly.selectors", "CEL compilation failed")
        if bad:
            return {}, (), (f"{at}.exactly.selectors: Invalid value: null", bad[0] if len(bad) == 1
                            else f"[{', '.join(bad)}]")
        if x.admin_access:
            continue
        mode = x.allocation_mode or "ExactCount"  # the API server's default
        if mode == "All":
            return {}, (), (f'{at}.exactly.allocationMode: Invalid value: "All"',
                            "AllocationMode 'All' is not supported")
        if mode != "ExactCount":
            return {}, (), (f'{at}.exactly.allocationMode: Invalid value: "{mode}"',
                            f"unsupported allocation mode: {mode}")
        if not x.device_class_name:
            continue
        count = 1 if x.count is None else x.count
        counts[x.device_class_name] = min(MAX_INT64, counts.get(x.device_class_name, 0) + count)
    return counts, tuple(sorted(logical.items())), None


class Alternative(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    """A ``firstAvailable`` sub-request, as far as the charge and the device check read it."""

    device_class_name: str = ""
    allocation_mode: str = ""
    count: int | None = None
    selectors: list[o.DeviceSelector] = []
    tolerations: list[o.Toleration] = []


def first_available_charge(alternatives: list[dict[str, Any]], at: str,
                           view: DraView) -> tuple[tuple[str, int], tuple[str, str] | None]:
    """The (logical resource, device count) a ``firstAvailable`` request (field ``at``) is charged, as Kueue
    charges a prioritized list under KueueDRAIntegrationPrioritizedList, or the (field, message) it refuses it
    with: every alternative must ask for an exact count (the API server's defaults: ExactCount, one device; a
    count of 0 is read as one) of a mapped DeviceClass whose mapping gives no counter or capacity sources, its
    selectors compiling, and all of them under the same logical resource — then the largest count among them
    is charged, as whichever kube-scheduler allocates costs no more (Kueue's chargeForPrioritizedList).
    Whether any alternative can be satisfied is not looked at; nothing is matched against devices."""
    if not alternatives:
        return ("", 0), (f"{at}.firstAvailable: Required value", "must list at least one alternative")
    mapping = dict(view.mapping)
    sourced = {*dict(view.counters), *dict(view.capacities)}
    chosen: tuple[str, int] | None = None
    for j, raw in enumerate(alternatives):
        here = f"{at}.firstAvailable[{j}]"
        try:
            sub = msgspec.convert(raw, Alternative)
        except msgspec.ValidationError as e:
            return ("", 0), (f"{here}: Invalid value: null", str(e))
        mode = sub.allocation_mode or "ExactCount"
        if mode != "ExactCount":
            return ("", 0), (f'{here}.allocationMode: Unsupported value: "{mode}"', 'supported values: "ExactCount"')
        count = sub.count or 1
        if count < 0:
            return ("", 0), (f"{here}.count: Invalid value: {count}", "must not be negative")
        dc = sub.device_class_name
        if not dc:
            return ("", 0), (f"{here}.deviceClassName: Required value", "")
        bad = _selector_errors(sub.selectors, f"{here}.selectors", "CEL compilation failed")
        if bad:
            return ("", 0), (f"{here}.selectors: Invalid value: null", bad[0] if len(bad) == 1
                             else f"[{', '.join(bad)}]")
        resource = mapping.get(dc)
        if resource is None:
            return ("", 0), (f'{here}.deviceClassName: Not found: "{dc}"', "")
        if dc in sourced:
            return ("", 0), (f'{here}.deviceClassName: Invalid value: "{dc}"',
                             "a counter-backed or capacity-backed DeviceClass is not supported for firstAvailable")
        if chosen is None:
            chosen = (resource, count)
        elif resource != chosen[0]:
            return ("", 0), (f'{here}.deviceClassName: Invalid value: "{dc}"',
                             f'every alternative must map to "{chosen[0]}", this one maps to "{resource}"')
        else:
            chosen = (resource, max(chosen[1], count))
    return (chosen if chosen is not None else ("", 0)), None


def _selector_errors(selectors: Any, at: str, context: str) -> list[str]:
    """Kueue's field error for each CEL selector of ``selectors`` (``at``: their field) that does not compile."""
    errors = []
    for i, sel in enumerate(selectors):
        if sel.cel is None:
            continue
        from projections.dra_cel import compile_selector  # noqa: PLC0415 - CEL's parser only when a claim has selectors

        compiled = compile_selector(sel.cel.expression)
        if compiled.error:
            errors.append(f"{at}[{i}].cel.expression: Invalid value: {_quoted(sel.cel.expression)}: "
                          f"{context}: {compiled.error}")
    return errors


def _quoted(text: str) -> str:
    """A string as Go's ``%q`` writes a field error's bad value (the common characters)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


COUNTERS = "@counters "
"""Marks a pod set's error about its counter sources, which Kueue looks at last but for capacities
(:func:`workload_problem`)."""
CAPACITIES = "@capacities "
"""Marks a pod set's error about its capacity sources, which Kueue looks at last (:func:`workload_problem`)."""


def counter_charge_of(claims: list[o.PodResourceClaim], view: DraView) -> tuple[Pairs, str]:
    """Per-pod charge of a pod set's ``claims`` under the counter sources of their DeviceClasses
    (KueueDRAIntegrationPartitionableDevices), by resource, or ``((), error)`` marked :data:`COUNTERS`: for each
    ``exactly`` request of such a class and each of its sources, the devices of the source's driver (complete pools
    only) satisfying the source's ``deviceSelector``, the class's selectors and the request's are matched; fewer
    than the request's count, or none consuming the counter, leaves the workload inadmissible until the driver
    publishes them; else the largest value of the counter times the count is charged
    (:func:`projections.resource_slices.counter_charge`). Called once the pod set's other charges have no error."""
    return _sources_charge(claims, view, view.counters, COUNTERS)


def capacity_charge_of(claims: list[o.PodResourceClaim], view: DraView) -> tuple[Pairs, str]:
    """Per-pod charge of a pod set's ``claims`` under the capacity sources of their DeviceClasses
    (KueueDRAIntegrationConsumableCapacity), by resource, or ``((), error)`` marked :data:`CAPACITIES`: the devices
    are matched as for counters (:func:`counter_charge_of`); then per device having the source's capacity, what
    the request's ``capacity.requests`` asks of it (else the device's policy default, else its whole capacity)
    rounded up to the device's request policy, the largest of those times the count, is charged
    (:func:`projections.resource_slices.capacity_charge`). No matched device having the capacity, or none whose
    policy takes the request, leaves the workload inadmissible. Called once the counters have no error."""
    return _sources_charge(claims, view, view.capacities, CAPACITIES)


def _sources_charge(claims: list[o.PodResourceClaim], view: DraView, by_class: tuple, mark: str) -> tuple[Pairs, str]:
    if not by_class or not claims:
        return (), ""
    sources, templates = dict(by_class), dict(view.templates)
    activations: dict[int, Any] = {}
    """Device (by identity, within this call) -> what CEL reads of it: built once for all requests and sources."""
    total: dict[str, int] = {}
    for j, claim in enumerate(claims):
        name = claim.resource_claim_template_name
        spec = templates.get(name) if name is not None else None
        if spec is None:
            continue
        for r, req in enumerate(spec.devices.requests):
            x = req.exactly
            configs = sources.get(x.device_class_name, ()) if x is not None else ()
            if x is None or not configs:
                continue
            at = f".template.spec.resourceClaims[{j}].devices.requests[{r}]"
            count = 1 if x.count is None else x.count
            for source in configs:
                value, error = _source_charge(source, x, count, view, at, activations)
                if error:
                    return (), mark + error
                total[source.resource] = min(MAX_INT64, total.get(source.resource, 0) + value)
    return tuple(sorted(total.items())), ""


def _source_charge(source: CounterSource | CapacitySource, x: o.ExactDeviceRequest, count: int, view: DraView,
                   at: str, activations: dict[int, Any]) -> tuple[int, str]:
    """What one counter or capacity source charges for request ``x`` (at field ``at``), or (0, error)."""
    from projections.dra_cel import compile_selector, device_activation, matches  # noqa: PLC0415 - see above

    known = dict(view.class_selectors)
    dc = x.device_class_name
    class_exprs = known.get(dc)
    if class_exprs is None:
        return 0, (f"{at}: Internal error: failed to get DeviceClass {dc}: "
                   f'deviceclasses.resource.k8s.io "{dc}" not found')
    for i, expr in enumerate(class_exprs):
        if compile_selector(expr).error:
            return 0, (f"{at}[{i}].cel.expression: Invalid value: {_quoted(expr)}: DeviceClass {dc} has invalid "
                       f"CEL selector: {compile_selector(expr).error}")
    bad = _selector_errors(x.selectors, f"{at}.exactly.selectors", "CEL compilation failed")
    if bad:
        return 0, bad[0]
    own = compile_selector(source.selector)
    if own.error:
        return 0, (f"{at}[0].cel.expression: Invalid value: {_quoted(source.selector)}: deviceSelector CEL "
                   f"compilation failed: {own.error}")
    stages = (("deviceSelector", (own.program,)),
              ("DeviceClass selector", tuple(compile_selector(e).program for e in class_exprs)),
              ("request selector", tuple(compile_selector(s.cel.expression).program for s in x.selectors
                                         if s.cel is not None)))
    matched = []
    for device in dict(view.devices).get(source.driver, ()):
        activation = activations.get(id(device))
        if activation is None:
            activation = activations[id(device)] = device_activation(source.driver, device)
        for what, programs in stages:
            fit = True
            for program in programs:
                fit, error = matches(program, activation)
                if error:
                    return 0, f"{at}: Internal error: CEL evaluation error in {what} for device {device.name}: {error}"
                if not fit:
                    break
            if not fit:
                break
        else:
            matched.append(device)
    kind = "counter" if isinstance(source, CounterSource) else "capacity"
    if len(matched) < count:
        return 0, (f"{at}: Internal error: insufficient matching devices for {kind} driver: {len(matched)} "
                   f"device(s) match but {count} requested")
    if isinstance(source, CounterSource):
        value = counter_charge(matched, source.counter, count)
        if value is None:
            return 0, (f"{at}: Internal error: matched devices have no consumesCounters entry for counter "
                       f'"{source.counter}"')
        return value, ""
    wanted = x.capacity.requests.get(source.capacity) if x.capacity is not None else None
    charged = capacity_charge(matched, source.capacity, wanted, count)
    if charged.value is None:
        head = "Internal error" if charged.error.startswith("matched devices") else "Invalid value: null"
        return 0, f"{at}: {head}: {charged.error}"
    return charged.value, ""


def workload_problem(pod_sets: tuple[Any, ...]) -> str:
    """What Kueue's workload controller says of a pending workload's claims ("" when they are charged): the
    reject message, else the claims-by-name one, else the first pod set's error about its claims with its field
    path, else every pod set's errors about its extended resources (which Kueue looks at only once all claims are
    charged, and lists all of, in brackets when more than one, as its aggregated field errors read), else the first
    pod set's error about its counter sources, else the first one's about its capacity sources."""
    for ps in pod_sets:  # the fold asks this at every enqueue and flag check: no list for the usual no
        if ps.dra_error:
            break
    else:
        return ""
    errors = [ps.dra_error for ps in pod_sets]
    for whole in (REJECTED, CLAIMS_BY_NAME):
        if whole in errors:
            return whole
    for i, error in enumerate(errors):
        if error.startswith(".template.spec.resourceClaims"):
            listed = [f"spec.podSets[{i}]{one}" for one in error.split("\n")]
            return listed[0] if len(listed) == 1 else f"[{', '.join(listed)}]"
    listed = list(dict.fromkeys(f"spec.podSets[{i}]{one}" for i, error in enumerate(errors)
                                if error and not error.startswith((COUNTERS, CAPACITIES))
                                for one in error.split("\n")))
    if listed:
        return listed[0] if len(listed) == 1 else f"[{', '.join(listed)}]"
    for mark in (COUNTERS, CAPACITIES):  # Kueue charges every pod set's counters, then every one's capacities
        for i, error in enumerate(errors):
            if error.startswith(mark):
                return f"spec.podSets[{i}]{error[len(mark):]}"
    return ""


def has_claims(templates: Any) -> bool:
    """Some pod template of ``templates`` (pod sets or pod template specs) has ``resourceClaims``."""
    for t in templates:
        spec = t.template.spec if hasattr(t, "template") else t.spec
        if spec.resource_claims:
            return True
    return False


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes' extended resource name: outside the ``kubernetes.io`` namespace (so prefixed), not starting
    ``requests.``, and a qualified name once so prefixed (as quota names it)."""
    return ("/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
            and qualified_name_problem("requests." + name) is None)


def serving_classes(classes: Any) -> tuple[tuple[str, str], ...]:
    """Extended resource -> the DeviceClass kube-scheduler serves its requests from, by resource, of the
    DeviceClasses ``classes``: of those naming it in ``spec.extendedResourceName``, the one created last, the first
    by name among those created together (a class without a creation time counts as the oldest)."""
    best: dict[str, tuple[int, str]] = {}
    for dc in classes:
        name = dc.spec.extended_resource_name
        if not name:
            continue
        created = parse_time(dc.metadata.creation_timestamp) if dc.metadata.creation_timestamp else 0
        created -= created % 1000  # the API keeps whole seconds
        found = best.get(name)
        if found is None or created > found[0] or (created == found[0] and dc.metadata.name < found[1]):
            best[name] = (created, dc.metadata.name)
    return tuple(sorted((r, dc) for r, (_, dc) in best.items()))


def requests_extended(templates: Any, served: Any) -> bool:
    """Some container of ``templates`` (pod sets or pod template specs) requests (or limits) a resource of
    ``served`` (a collection of names; None: any extended resource)."""
    for t in templates:
        spec = t.template.spec if hasattr(t, "template") else t.spec
        for c in (*spec.init_containers, *spec.containers):
            for r in (*c.resources.requests, *c.resources.limits):
                if (r in served) if served is not None else is_extended_resource_name(r):
                    return True
    return False


def needs_extended(templates: Any, served: Any) -> bool:
    """Kueue looks for extended resources DeviceClasses serve (``served``: names) only in a workload some container
    of whose pod sets (``templates``: pod sets, pod template specs or pod specs) requests one in a quantity that is
    not zero, as its template says: a limit alone or a LimitRange default does not count (its workload controller
    checks before adjusting the pods). Once it looks, every pod set's adjusted pods are charged
    (:func:`extended_charge`)."""
    for t in templates:
        spec = t.template.spec if hasattr(t, "template") else getattr(t, "spec", t)
        for c in (*spec.init_containers, *spec.containers):
            for r, q in c.resources.requests.items():
                if r in served and _positive(q):
                    return True
    return False


def _positive(quantity: Any) -> bool:
    try:
        return parse_quantity(quantity) != 0
    except QuantityError:
        return False


def asks_for_served(templates: Any, limits: Any, served: Any) -> bool:
    """A pod of ``templates`` asks for a resource of ``served`` (names; None: any extended resource), in its
    containers or through a default of its namespace's LimitRanges (``limits``, their summary), which Kueue applies
    before looking."""
    if requests_extended(templates, served):
        return True
    bounds = limits.container if limits is not None else None
    return bounds is not None and any((r in served) if served is not None else is_extended_resource_name(r)
                                      for r, _ in (*bounds.default, *bounds.default_request))


def extended_charge(spec: o.PodSpec, view: DraView) -> tuple[tuple[str, ...], Pairs, str]:
    """The extended resources of a pod set's (adjusted) pod ``spec`` that DeviceClasses serve under ``view``:
    their names (which leave the pod's ordinary requests), the per-pod charge by quota resource (the class's mapped
    resource, else the name itself), and Kueue's errors, relative to the pod set, when quantities are not whole
    int64s — one per container asking for a fraction (or more than an int64 holds), by resource, init containers
    first; else one at the first container asking when the pod's total overflows an int64 — joined by newlines
    (:func:`workload_problem` lists them all, as Kueue does). A resource served by a class whose mapping gives
    counter or capacity sources is refused instead, at the first container asking for it: those are charged only
    through ResourceClaimTemplates."""
    served = dict(view.extended)
    mapping = dict(view.mapping)
    asked: list[tuple[str, int, bool, dict[str, Decimal]]] = []
    """(field, index, sidecar, positive quantity by served resource) per container asking for any."""
    for field, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for j, c in enumerate(containers):
            wanted: dict[str, Decimal] = {}
            for r, q in {**c.resources.limits, **c.resources.requests}.items():
                if r not in served:
                    continue
                try:
                    value = parse_quantity(q)
                except QuantityError:
                    continue
                if value > 0:
                    wanted[r] = value
            if wanted:
                asked.append((field, j, c.restart_policy == "Always", wanted))
    errors: list[str] = []
    totals: dict[str, int] = {}
    counted, capacities = dict(view.counters), dict(view.capacities)
    for r in sorted({r for *_, wanted in asked for r in wanted}):
        having = [(field, j, sidecar, wanted[r]) for field, j, sidecar, wanted in asked if r in wanted]
        dc = served[r]
        if dc in mapping and (dc in counted or dc in capacities):
            field, j = having[0][:2]
            errors.append(f'.template.spec.{field}[{j}]: Invalid value: "{r}": extended resource {r} resolves to '
                          f"DeviceClass {dc} with " + (
                              "counters configured; use ResourceClaimTemplates with CEL selectors for "
                              "counter-based quota" if dc in counted else
                              "capacity sources configured; use ResourceClaimTemplates with capacity.requests for "
                              "capacity-based quota"))
            continue
        fractions = [f".template.spec.{field}[{j}].resources.requests.{r}: Invalid value: "
                     f'"{decimal_string(q)}": extended resource quantity must be an integer'
                     for field, j, _, q in having if q != q.to_integral_value() or q > MAX_INT64]
        if fractions:
            errors.extend(fractions)
            continue
        total = _pod_total([(field, sidecar, int(q)) for field, _, sidecar, q in having])
        if total > MAX_INT64:
            field, j = having[0][:2]
            errors.append(f'.template.spec.{field}[{j}].resources.requests.{r}: Invalid value: "{decimal_string(Decimal(total))}": '
                          "total extended resource quantity overflows int64")
        totals[r] = total
    if errors:
        return (), (), "\n".join(errors)
    charge: dict[str, int] = {}
    for r in sorted(totals):
        key = mapping.get(served[r], r)
        charge[key] = min(MAX_INT64, charge.get(key, 0) + totals[r])
    return tuple(sorted(totals)), tuple(sorted(charge.items())), ""


def _pod_total(asked: list[tuple[str, bool, int]]) -> int:
    """A pod's total of one resource that its containers (field, sidecar, quantity; init containers first) ask
    for, as Kubernetes totals pod requests (:func:`projections.pod_adjustment.aggregate_requests`)."""
    return aggregate_requests(({"": q} for field, _, q in asked if field == "containers"),
                              ((sidecar, {"": q}) for field, sidecar, q in asked if field == "initContainers")).get("", 0)
