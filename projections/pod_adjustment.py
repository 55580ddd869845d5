"""Kueue's in-memory adjustment of a pod template's resources, and the admissibility checks on the result.

Before Kueue counts a workload's requests against quota it adjusts a copy of each pod template (the Workload's
spec is never written):

1. a template that names a RuntimeClass and sets no ``overhead`` takes the RuntimeClass's ``overhead.podFixed``
   (a RuntimeClass that does not exist adds nothing);
2. a limit a container sets without a request becomes the request (so a limits-only template is charged its
   limits, not a LimitRange's ``defaultRequest``);
3. the namespace's LimitRanges, summarised (:func:`summarize`): the Container type's ``default`` fills the limits
   and its ``defaultRequest`` the requests that an init or regular container leaves out;
4. a container's limit still without a request (one a LimitRange's ``default`` added) becomes the request;
5. the pod-level ``resources``, when the template has them, are defaulted as the API server of Kubernetes
   1.37 does (:func:`_default_pod_level`: a missing request is the containers' aggregate, else the pod-level
   limit), then the Pod type's ``default`` and ``defaultRequest`` fill what they still leave out.

When it is nominated, the adjusted template must be admissible (Kueue's ``ValidateAdmissibility``): no request
above its limit ("resources validation failed"), then every container, and the pod as a whole, within the
LimitRanges' ``min`` and ``max`` ("resources didn't satisfy LimitRange constraints"); either makes the workload
Misconfigured. ``maxLimitRequestRatio`` is summarised but not checked, as in Kueue.

Both findings are functions of the template and the summary alone, so they are computed with the requests, once
per distinct template and summary, and kept on the pod set's projected form; :func:`admissibility` only joins
them into Kueue's message. Everything here is pure, and the summary depends on no dict or set order: the
LimitRanges are taken in name order (which one's ``default`` comes "first" is otherwise unspecified in Kueue).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import msgspec

from events import objects as o
from events.errors import aggregate
from events.quantity import decimal_string, parse_quantity, to_int

Pairs = tuple[tuple[str, o.Quantity], ...]
"""A resource list, sorted by resource name."""

INVALID_RESOURCES = "resources validation failed"
OUTSIDE_LIMIT_RANGES = "resources didn't satisfy LimitRange constraints"
_ABOVE_LIMITS = "requests must not exceed its limits"
_ABOVE_MAX = "requests must not be above the limitRange max"
_BELOW_MIN = "requests must not be below the limitRange min"


class LimitBounds(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One LimitRange type summarised over a namespace: the lowest ``max`` and ``maxLimitRequestRatio``, the
    highest ``min``, the first ``default`` and ``defaultRequest`` given for each resource."""

    default: Pairs = ()
    default_request: Pairs = ()
    max: Pairs = ()
    min: Pairs = ()
    max_limit_request_ratio: Pairs = ()


class LimitSummary(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """What a namespace's LimitRanges say about pods: its Container and Pod types (None: no such item)."""

    container: LimitBounds | None = None
    pod: LimitBounds | None = None


def summarize(ranges: Iterable[o.LimitRange]) -> LimitSummary | None:
    """Kueue's summary of a namespace's LimitRanges, given in name order (None when they say nothing about
    containers or pods). Each item is first defaulted as the API server stores it (:func:`api_defaults`), so a
    LimitRange imported from a file means what it would in a cluster."""
    acc: dict[str, dict[str, dict[str, o.Quantity]]] = {}
    for lr in ranges:
        for item in lr.spec.limits:
            if item.type not in ("Container", "Pod"):
                continue
            item = api_defaults(item)
            s = acc.setdefault(item.type, {f: {} for f in LimitBounds.__struct_fields__})
            _keep(s["max"], item.max, lower=True)
            _keep(s["max_limit_request_ratio"], item.max_limit_request_ratio, lower=True)
            _keep(s["min"], item.min, lower=False)
            for r, q in item.default.items():
                s["default"].setdefault(r, q)
            for r, q in item.default_request.items():
                s["default_request"].setdefault(r, q)
    if not acc:
        return None

    def bounds(s: dict[str, dict[str, o.Quantity]] | None) -> LimitBounds | None:
        if s is None:
            return None
        return LimitBounds(**{f: tuple(sorted(v.items())) for f, v in s.items()})

    return LimitSummary(container=bounds(acc.get("Container")), pod=bounds(acc.get("Pod")))


def api_defaults(item: o.LimitRangeItem) -> o.LimitRangeItem:
    """The API server's defaulting of a Container-type item: a missing ``default`` is ``max``, a missing
    ``defaultRequest`` is ``default``, else ``min``. Idempotent: objects read from a cluster already have it."""
    if item.type != "Container":
        return item
    default = {**item.max, **item.default}
    request = {**item.min, **default, **item.default_request}
    if default == item.default and request == item.default_request:
        return item
    return msgspec.structs.replace(item, default=default, default_request=request)


def scheduling_fields_changed(old: o.LimitRange | None, new: o.LimitRange | None) -> bool:
    """Whether a LimitRange going from ``old`` to ``new`` (None: it does not exist) changed anything
    scheduling reads of it: its items' number, or an item's type, bounds, ratio or defaults, quantities
    compared by value and items as the API server stores them (:func:`api_defaults`). Kueue then retries the
    inadmissible workloads of its namespace's ClusterQueues (its workload controller's
    ``limitRangeSchedulingFieldsChanged``): a template refused against the old bounds is no different to look
    at, so nothing else would retry it."""
    olds = old.spec.limits if old is not None else []
    news = new.spec.limits if new is not None else []
    if len(olds) != len(news):
        return True
    for a, b in zip(olds, news, strict=True):
        if a.type != b.type:
            return True
        a, b = api_defaults(a), api_defaults(b)
        if any(not _same_list(getattr(a, f), getattr(b, f)) for f in _ITEM_LISTS):
            return True
    return False


_ITEM_LISTS = ("max", "min", "default", "default_request", "max_limit_request_ratio")


def _same_list(a: Mapping[str, o.Quantity], b: Mapping[str, o.Quantity]) -> bool:
    """Two resource lists naming the same resources with the same values (``2`` is ``2000m``)."""
    return a.keys() == b.keys() and all(a[r] == b[r] or parse_quantity(a[r]) == parse_quantity(b[r])
                                        for r in a)


def _keep(into: dict[str, o.Quantity], values: Mapping[str, o.Quantity], *, lower: bool) -> None:
    for r, q in values.items():
        old = into.get(r)
        if old is None:
            into[r] = q
            continue
        new, cur = parse_quantity(q), parse_quantity(old)
        if (new < cur) if lower else (new > cur):
            into[r] = q


# --- the adjustment -----------------------------------------------------------------------------------------------


def overhead_for(spec: o.PodSpec, runtime_classes: Mapping[str, o.RuntimeClass] | None) -> Pairs | None:
    """The overhead the RuntimeClass adds to ``spec`` (None: it adds none — no RuntimeClass named, the template
    sets its own, or the RuntimeClass is missing or has no ``overhead``)."""
    name = spec.runtime_class_name
    if not name or spec.overhead or not runtime_classes:
        return None
    rc = runtime_classes.get(name)
    if rc is None or rc.overhead is None or not rc.overhead.pod_fixed:
        return None
    return tuple(sorted(rc.overhead.pod_fixed.items()))


def adjust(spec: o.PodSpec, limits: LimitSummary | None, overhead: Pairs | None) -> o.PodSpec:
    """``spec`` as Kueue counts it (see the module docstring); ``spec`` itself when nothing changes."""
    changes: dict[str, Any] = {}
    if overhead:
        changes["overhead"] = dict(overhead)
    container = limits.container if limits is not None else None
    pod = limits.pod if limits is not None else None
    for field, cs in (("containers", spec.containers), ("init_containers", spec.init_containers)):
        adjusted = [_adjust_resources(c.resources, container) for c in cs]
        if any(a is not c.resources for a, c in zip(adjusted, cs, strict=True)):
            changes[field] = [c if a is c.resources else msgspec.structs.replace(c, resources=a)
                              for a, c in zip(adjusted, cs, strict=True)]
    if spec.resources is not None:
        res = _default_pod_level(spec.resources, changes.get("containers", spec.containers),
                                 changes.get("init_containers", spec.init_containers))
        if pod is not None:  # the Pod type's defaults come last: a default limit becomes no request
            res = _with_defaults(res, _keep_first(res.limits, pod.default),
                                 _keep_first(res.requests, pod.default_request))
        if res is not spec.resources:
            changes["resources"] = res
    return msgspec.structs.replace(spec, **changes) if changes else spec


def _adjust_resources(res: o.ResourceRequirements, bounds: LimitBounds | None) -> o.ResourceRequirements:
    """A container's resources as Kueue counts them: its own limits as the requests it leaves out (Kueue
    v0.20, #15023: before any LimitRange default), then the Container type's defaults, then any limit still
    without a request (one a ``default`` added) as its request."""
    limits, requests = res.limits, _keep_first(res.requests, tuple(res.limits.items()))
    if bounds is not None:
        limits = _keep_first(limits, bounds.default)
        requests = _keep_first(requests, bounds.default_request)
    requests = _keep_first(requests, tuple(limits.items()))
    return _with_defaults(res, limits, requests)


def default_pod_level(spec: o.PodSpec) -> o.PodSpec:
    """``spec`` with its pod-level ``resources`` defaulted as the API server stores a Pod: Kubernetes'
    ``SetDefaults_Pod`` first makes each (init) container's limits the requests it leaves out, then runs the
    pod-level defaulting (:func:`_default_pod_level`) on those containers, so a container limited to 1 cpu
    under a pod-level limit of 4 makes a pod asking for 1. Only the pod level is written back (the containers'
    requests are read with their limits anyway); ``spec`` itself when nothing changes, as for a Pod read back
    from a cluster."""
    if spec.resources is None or _pod_level_defaulted(spec.resources, spec):
        return spec
    return _with_pod_level_defaults(spec)


def _with_pod_level_defaults(spec: o.PodSpec) -> o.PodSpec:
    """:func:`default_pod_level` worked out in full."""
    if spec.resources is None:
        return spec
    res = _default_pod_level(spec.resources, _limits_as_requests(spec.containers),
                             _limits_as_requests(spec.init_containers))
    return spec if res is spec.resources else msgspec.structs.replace(spec, resources=res)


def _pod_level_defaulted(res: o.ResourceRequirements, spec: o.PodSpec) -> bool:
    """Whether the pod-level defaulting would leave ``res`` as it is, told from the names alone (no
    aggregate, no new container): the pod level says nothing, or its requests name every pod-level resource
    its limits name and every one any (init) container requests or limits (a container's limits are its
    requests too, and a container's ``hugepages-*`` limit the pod level names in neither list would be added
    to both). A Pod read back from the API server passes (its pod level is stored defaulted); False only
    means "work it out", which may still change nothing."""
    requests = res.requests
    if not requests and not res.limits:
        return True
    named = [*res.limits, *(r for c in (*spec.containers, *spec.init_containers)
                            for r in (*c.resources.requests, *c.resources.limits))]
    return all(r in requests or not pod_level_resource(r) for r in named)


def _limits_as_requests(containers: Sequence[o.Container]) -> list[o.Container]:
    """The containers with their limits filling the requests they leave out, as a Pod's are stored."""
    out = []
    for c in containers:
        requests = _keep_first(c.resources.requests, tuple(sorted(c.resources.limits.items())))
        out.append(c if requests is c.resources.requests else msgspec.structs.replace(
            c, resources=_with_defaults(c.resources, c.resources.limits, requests)))
    return out


def _default_pod_level(res: o.ResourceRequirements, containers: Sequence[o.Container],
                       init_containers: Sequence[o.Container]) -> o.ResourceRequirements:
    """Pod-level resources (KEP-2837) as the API server defaults them, on containers that already carry
    their LimitRange defaults: Kubernetes 1.37 defaults them after admission, and Kueue's
    ``ApplyLimitRangeAndPodLevelDefaults`` takes that order for a 1.37+ server and for one whose version it
    has not fetched (kueue-es knows none). Nothing when the pod level says nothing; else a ``hugepages-*``
    limit that the containers' aggregate limits name and the pod level names in neither list is that
    aggregate (``DefaultHugePagePodLevelLimits``); then a missing request is the containers' aggregate
    request for cpu or memory, else the pod-level limit of a name Kubernetes manages at the pod level
    (``DefaultPodLevelRequests``): a container asking for 1 cpu under a pod-level limit of 4 makes a pod
    asking for 1, not 4. Aggregates are Kubernetes' (:func:`aggregate_requests`), exact, written back as
    quantities."""
    if not res.requests and not res.limits:
        return res
    huge = _aggregate(containers, init_containers, "limits")
    limits = _keep_first(res.limits, tuple(
        (r, decimal_string(v)) for r, v in sorted(huge.items())
        if r.startswith(_HUGEPAGES) and pod_level_resource(r) and r not in res.requests))
    asked = _aggregate(containers, init_containers, "requests")
    requests = _keep_first(res.requests, tuple(
        (r, decimal_string(v)) for r, v in sorted(asked.items())
        if pod_level_resource(r) and not r.startswith(_HUGEPAGES)))
    requests = _keep_first(requests, tuple((r, q) for r, q in sorted(limits.items())
                                           if pod_level_resource(r)))
    return _with_defaults(res, limits, requests)


_HUGEPAGES = "hugepages-"


def _aggregate(containers: Sequence[o.Container], init_containers: Sequence[o.Container],
               field: str) -> dict[str, Decimal]:
    """The containers' aggregate ``requests`` or ``limits``, exactly, as Kubernetes totals a pod's."""

    def exact(c: o.Container) -> dict[str, Decimal]:
        return {r: parse_quantity(q) for r, q in getattr(c.resources, field).items()}

    return aggregate_requests(map(exact, containers),
                              ((c.restart_policy == "Always", exact(c)) for c in init_containers))


def _with_defaults(res: o.ResourceRequirements, limits: dict[str, o.Quantity],
                   requests: dict[str, o.Quantity]) -> o.ResourceRequirements:
    """``res`` with these limits and requests (``res`` itself when both are its own)."""
    if limits is res.limits and requests is res.requests:
        return res
    return o.ResourceRequirements(requests=requests, limits=limits)


def _keep_first(values: dict[str, o.Quantity], extra: Pairs) -> dict[str, o.Quantity]:
    """``values`` with the resources of ``extra`` it lacks (``values`` itself when it lacks none)."""
    missing = [(r, q) for r, q in extra if r not in values]
    if not missing:
        return values
    return {**values, **dict(missing)}


# --- admissibility ------------------------------------------------------------------------------------------------


def resource_findings(spec: o.PodSpec) -> tuple[str, ...]:
    """Kueue's ValidateResources on an adjusted template: each (init) container, and the pod-level resources,
    whose requests exceed their limits (compared in Kueue's integer units). Paths are relative to the pod set."""
    out = []
    for field, cs in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, c in enumerate(cs):
            names = _greater(c.resources.requests, c.resources.limits, _units)
            if names:
                out.append(_invalid(f"template.spec.{field}[{i}]", names, _ABOVE_LIMITS))
    if spec.resources is not None:
        names = _greater(spec.resources.requests, spec.resources.limits, _units)
        if names:
            out.append(_invalid("template.spec.resources", names, _ABOVE_LIMITS))
    return tuple(out)


def limit_findings(spec: o.PodSpec, limits: LimitSummary | None) -> tuple[str, ...]:
    """Kueue's ValidateLimitRange on an adjusted template: each (init) container whose requests or limits go
    above the Container ``max`` or below its ``min``, then the pod's total requests against the Pod type's
    (compared exactly, as quantities). Paths are relative to the pod set."""
    if limits is None:
        return ()
    out = []
    c = limits.container
    if c is not None and (c.max or c.min):
        cmax, cmin = dict(c.max), dict(c.min)
        for field, cs in (("initContainers", spec.init_containers), ("containers", spec.containers)):
            for i, container in enumerate(cs):
                res = container.resources
                high = _merge(res.requests, res.limits, max)
                low = _merge(res.requests, res.limits, min)
                at = f"template.spec.{field}[{i}]"
                names = _greater(high, cmax, _exact)
                if names:
                    out.append(_invalid(at, names, _ABOVE_MAX))
                names = _greater(cmin, low, _exact)
                if names:
                    out.append(_invalid(at, names, _BELOW_MIN))
    p = limits.pod
    if p is not None and (p.max or p.min):
        total = _exact_pod_requests(spec)
        names = _greater(total, dict(p.max), _exact)
        if names:
            out.append(_invalid("template.spec", names, _ABOVE_MAX))
        names = _greater(dict(p.min), total, _exact)
        if names:
            out.append(_invalid("template.spec", names, _BELOW_MIN))
    return tuple(out)


def admissibility(pod_sets: Iterable[Any]) -> str:
    """Kueue's message for pod sets whose adjusted templates are not admissible ("" when they are). ``pod_sets``
    are projected pod sets (``invalid_resources``, ``outside_limit_ranges``), in spec order: requests above limits
    are reported first, and only when there are none the LimitRange violations."""
    pod_sets = list(pod_sets)
    for prefix, attr in ((INVALID_RESOURCES, "invalid_resources"), (OUTSIDE_LIMIT_RANGES, "outside_limit_ranges")):
        found = [f"spec.podSets[{i}].{f}" for i, ps in enumerate(pod_sets) for f in getattr(ps, attr)]
        if found:
            return f"{prefix}: {aggregate(found)}"
    return ""


def _invalid(path: str, names: list[str], detail: str) -> str:
    """A Kubernetes field error whose bad value is a list of resource names: apimachinery's field errors print a
    value that is no string, number or bool as JSON (``["cpu","memory"]``), as the Kueue releases built on it do."""
    return f"{path}: Invalid value: {msgspec.json.encode(names).decode()}: {detail}"


def _units(resource: str, q: o.Quantity) -> int:
    return to_int(resource, q)


def _exact(resource: str, q: o.Quantity | Decimal) -> Decimal:
    return q if isinstance(q, Decimal) else parse_quantity(q)


def _greater(a: Mapping[str, Any], b: Mapping[str, Any], value: Any) -> list[str]:
    """The resources in both ``a`` and ``b`` whose value in ``a`` is greater, by name."""
    if not a or not b:
        return []
    return sorted(r for r in a if r in b and value(r, a[r]) > value(r, b[r]))


def _merge(a: Mapping[str, o.Quantity], b: Mapping[str, o.Quantity], pick: Any) -> dict[str, Any]:
    """Both resource lists in one, ``pick`` (min or max, exactly) deciding where both have a resource."""
    out: dict[str, Any] = {r: parse_quantity(q) for r, q in a.items()}
    for r, q in b.items():
        v = parse_quantity(q)
        out[r] = pick(out[r], v) if r in out else v
    return out


def aggregate_requests(containers: Iterable[Mapping[str, Any]],
                       init_containers: Iterable[tuple[bool, Mapping[str, Any]]]) -> dict[str, Any]:
    """What a pod's containers ask for together, as Kubernetes totals it (KEP-753, the helper Kueue's
    ``PodRequests`` calls): the regular containers and every sidecar (an init container that is ``restartPolicy:
    Always``, given as ``(True, requests)``) run together and add up; a regular init container runs alone with only
    the sidecars declared before it; the pod needs the larger of the two, resource by resource. The running sum and
    the init peak are kept apart, so a sidecar declared after a regular init container never adds to that
    container's peak. Values are anything that adds and compares (Kueue units, exact quantities)."""
    running: dict[str, Any] = {}
    for reqs in containers:
        for r, v in reqs.items():
            running[r] = running[r] + v if r in running else v
    sidecars: dict[str, Any] = {}
    peak: dict[str, Any] = {}
    for sidecar, reqs in init_containers:
        for r, v in reqs.items():
            if sidecar:
                sidecars[r] = sidecars[r] + v if r in sidecars else v
                running[r] = running[r] + v if r in running else v
            else:
                alone = v + sidecars[r] if r in sidecars else v
                peak[r] = max(peak[r], alone) if r in peak else alone
    for r, v in peak.items():
        running[r] = max(running[r], v) if r in running else v
    return running


def pod_level_resource(resource: str) -> bool:
    """Whether Kubernetes manages ``resource`` at the pod level (KEP-2837: cpu, memory, ``hugepages-*``).
    Only these names of a template's pod-level ``resources`` count: the Kubernetes helper Kueue's
    ``PodRequests`` goes through reads no other name there (the API server refuses any other on a Pod, but
    not on a Workload written directly)."""
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def chargeable_overhead(overhead: Mapping[str, o.Quantity]) -> dict[str, o.Quantity]:
    """The overhead entries a pod is charged for (newest Kueue's ``ChargeableOverhead``, which every request Kueue
    computes from a spec goes through): not ``pods``, which flavor assignment sets from the pod count, nor a negative
    quantity, which would cancel a request the pod does make."""
    return {r: q for r, q in overhead.items() if r != "pods" and parse_quantity(q) >= 0}


def _exact_pod_requests(spec: o.PodSpec) -> dict[str, Decimal]:
    """The pod's total requests as exact quantities, by the same rules as ``projections.workloads.pod_requests``
    (on an adjusted template, whose requests already include what only limits said)."""

    def exact(c: o.Container) -> dict[str, Decimal]:
        return {r: parse_quantity(q) for r, q in c.resources.requests.items()}

    total = aggregate_requests(map(exact, spec.containers),
                               ((c.restart_policy == "Always", exact(c)) for c in spec.init_containers))
    if spec.resources is not None and (spec.resources.requests or spec.resources.limits):
        for r, q in spec.resources.requests.items():
            if pod_level_resource(r):
                total[r] = max(total.get(r, Decimal(0)), parse_quantity(q))
    for r, q in chargeable_overhead(spec.overhead).items():
        total[r] = total.get(r, Decimal(0)) + parse_quantity(q)
    return total
