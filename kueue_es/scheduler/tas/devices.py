"""KueueDRADeviceFeasibility (alpha, off): TAS places a pod only on nodes whose DRA devices can serve its claims.

Kueue v0.20 builds, for a pod of the set, the ResourceClaims it will hold (one per ``resourceClaims`` entry naming a
ResourceClaimTemplate, with the template's spec) and asks DRA's allocator, for every node the set's other filters
leave (taints, nodeSelector, required node affinity; under SchedulerLibraryIntegration, the library's), whether
those claims can be allocated from the devices the node can reach. A node where they cannot is dropped and counted
in the not-fit message as ``draNoFit: N`` (e.g. "... doesn't allow to fit any of 1 pod(s). Total nodes: 2; excluded:
draNoFit: 2"). It is asked of one pod per node, not of the pods placed there together (Kueue's limit too).

The allocation is modelled as the allocator decides it, for what kueue-es folds:

* the devices a node reaches are those of the complete pools (newest generation, :mod:`projections.resource_slices`)
  whose slice names the node (``nodeName``), serves all nodes (``allNodes``) or selects it (``nodeSelector``), or,
  for a slice with ``perDeviceNodeSelection``, whose device does so;
* each ``exactly`` request of each claim takes ``count`` (1 by default) distinct devices satisfying its DeviceClass's
  CEL selectors and its own; ``allocationMode: All`` takes every such device the node reaches (at least one); a
  ``firstAvailable`` request takes the first of its alternatives that can be allocated alongside the others'; the
  choice is searched (a device given to one request is tried for another when that is what makes all fit). A
  device with ``allowMultipleAllocations`` may serve several requests, and an ``adminAccess`` request takes no
  device from the others;
* a DeviceClass the log does not hold, or a selector that fails to compile or to evaluate on a device, makes the
  allocation fail on that node (Kueue excludes the node, so that one bad class does not stall scheduling);
* under KueueDRAIntegrationDeviceTaints (alpha, off; needs this gate), a device with a ``NoSchedule`` or
  ``NoExecute`` taint its request does not tolerate (the request's ``tolerations``, as Kubernetes matches pod
  tolerations) is not taken, whether its ResourceSlice publishes the taint or a DeviceTaintRule selecting it
  (by driver, pool and device name, each when given) applies it; ``None`` taints are ignored. Off, device taints
  are ignored.

A device an existing ResourceClaim holds (its ``status.allocation``, folded from the log) is taken, unless the
allocation shares it (a ``shareID``) or is for admin access; an ``adminAccess`` request may take a held device. As in
Kueue, the devices of workloads a preemption would remove are not freed for the check.

Not modelled: ``constraints`` (matchAttribute), consumable capacity amounts, and the claims kube-scheduler makes
for DRA-backed extended resources.

Pure: the answer depends only on the devices, classes and claims given; memoised per (node, claims).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import msgspec

from events import objects as o
from kueue_es.scheduler.tas.nodes import Exclusion, affinity_matches, tolerates
from kueue_es.scheduler.tas.request import PodSetRequest
from projections.dra import Alternative
from projections.topology import FlavorSnapshot

DRA_NO_FIT: Exclusion = ("dra", "")
"""A node whose devices cannot serve the pod's claims: counted as ``draNoFit`` in the not-fit message."""

_BLOCKING = ("NoSchedule", "NoExecute")

DeviceId = tuple[str, str, str]
"""(driver, pool, device name)."""


class _Device:
    __slots__ = ("activation", "device", "driver", "id", "shared", "taints")

    def __init__(self, driver: str, pool: str, device: o.Device, rules: Sequence[o.DeviceTaintRule]) -> None:
        self.id: DeviceId = (driver, pool, device.name)
        self.driver = driver
        self.device = device
        self.shared = bool(device.allow_multiple_allocations)
        self.activation: dict[str, Any] | None = None
        self.taints = (*device.taints, *(r.spec.taint for r in rules if r.selects(driver, pool, device.name)))
        """Its own taints and those of the DeviceTaintRules selecting it."""


class _Request:
    """One request (an ``exactly`` request, or an alternative of a ``firstAvailable`` one) as the check reads it."""

    __slots__ = ("admin", "all", "class_name", "count", "selectors", "tolerations")

    def __init__(self, class_name: str, mode: str, count: int | None, selectors: tuple[str, ...],
                 tolerations: tuple[o.Toleration, ...], admin: bool) -> None:
        self.class_name = class_name
        self.all = mode == "All"
        self.count = 1 if count is None else count
        self.selectors = selectors
        self.tolerations = tolerations
        self.admin = admin


class DeviceWorld:
    """The devices, DeviceClasses and gates the check reads in one cycle, with its answers memoised per (node,
    claims). ``taints``: KueueDRAIntegrationDeviceTaints is on."""

    __slots__ = ("_memo", "allocated", "classes", "rules", "slices", "taints", "templates")

    def __init__(self, slices: Sequence[o.ResourceSlice], classes: Mapping[str, tuple[str, ...]],
                 templates: Mapping[str, o.ResourceClaimSpec], taints: bool,
                 allocated: frozenset[DeviceId] = frozenset(), rules: Sequence[o.DeviceTaintRule] = ()) -> None:
        self.slices = tuple(slices)
        """The slices of complete pools, newest generation, by driver, pool, then slice name."""
        self.classes = classes
        """DeviceClass name -> its CEL selector expressions."""
        self.taints = taints
        self.templates = templates
        """ResourceClaimTemplate (``namespace/name``) -> the claim spec it makes."""
        self.allocated = allocated
        """The devices existing ResourceClaims hold (not shared, not for admin access): taken for everyone else."""
        self.rules = tuple(rules)
        """The DeviceTaintRules, by name: their taints are the selected devices' too (read with :attr:`taints`)."""
        self._memo: dict[tuple[str, tuple[str, ...]], bool] = {}

    def feasible(self, node: o.Node, claims: tuple[str, ...]) -> bool:
        """Whether the claims of one pod (made from the ResourceClaimTemplates ``claims`` names) can be allocated
        from the devices ``node`` reaches; not when a template is missing (the workload is then inadmissible
        before any placement, :mod:`projections.dra`)."""
        key = (node.metadata.name, claims)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) > 65536:
                self._memo.clear()
            specs = [self.templates.get(c) for c in claims]
            found = self._memo[key] = all(s is not None for s in specs) and _allocatable(
                self, node, tuple(s for s in specs if s is not None))
        return found

    def excluded(self, nodes: Sequence[o.Node], claims: tuple[str, ...],
                 already: Mapping[int, Exclusion]) -> Mapping[int, Exclusion]:
        """``already`` with every other node of ``nodes`` (by index) whose devices cannot serve ``claims``
        marked :data:`DRA_NO_FIT` (a new mapping; ``already`` itself when no node is)."""
        out: dict[int, Exclusion] | None = None
        for i, node in enumerate(nodes):
            if not claims or i in already or self.feasible(node, claims):
                continue
            if out is None:
                out = dict(already)
            out[i] = DRA_NO_FIT
        return already if out is None else out


class LazyDeviceWorld:
    """A :class:`DeviceWorld` built the first time a placement checks a pod set's claims against it (a scheduling
    cycle without such a placement never builds it); answers as the world ``build`` makes."""

    __slots__ = ("_build", "_world")

    def __init__(self, build: Callable[[], DeviceWorld]) -> None:
        self._build = build
        self._world: DeviceWorld | None = None

    @property
    def built(self) -> bool:
        return self._world is not None

    def world(self) -> DeviceWorld:
        if self._world is None:
            self._world = self._build()
        return self._world

    def feasible(self, node: o.Node, claims: tuple[str, ...]) -> bool:
        return self.world().feasible(node, claims)

    def excluded(self, nodes: Sequence[o.Node], claims: tuple[str, ...],
                 already: Mapping[int, Exclusion]) -> Mapping[int, Exclusion]:
        return self.world().excluded(nodes, claims, already) if claims else already


Devices = DeviceWorld | LazyDeviceWorld
"""What placement checks claims against under KueueDRADeviceFeasibility."""


def world_of(pools: Iterable[Any], classes: Iterable[o.DeviceClass], templates: Iterable[o.ResourceClaimTemplate],
             claims: Iterable[o.ResourceClaim], taints: bool, rules: Iterable[o.DeviceTaintRule] = ()) -> DeviceWorld:
    """The :class:`DeviceWorld` of the given pools (:class:`projections.resource_slices.Pool`; only the complete
    ones count), DeviceClasses, ResourceClaimTemplates, ResourceClaims (the devices they hold are taken) and
    DeviceTaintRules."""
    slices = [s for p in pools if p.complete for s in p.slices]
    by_class = {dc.metadata.name: tuple(s.cel.expression for s in dc.spec.selectors if s.cel is not None)
                for dc in classes}
    allocated = frozenset((d, p, n) for c in claims for d, p, n, shared in c.held() if not shared)
    return DeviceWorld(slices, by_class, {t.key: t.spec.spec for t in templates}, taints, allocated, tuple(rules))


def _reaches(node: o.Node, name: str | None, all_nodes: bool | None, selector: o.NodeSelector | None) -> bool:
    if name is not None:
        return name == node.metadata.name
    if all_nodes:
        return True
    if selector is not None:
        return affinity_matches(selector.node_selector_terms, node)
    return False


def _node_devices(world: DeviceWorld, node: o.Node) -> list[_Device]:
    out = []
    for rs in world.slices:
        spec = rs.spec
        per_device = bool(spec.per_device_node_selection)
        if not per_device and not _reaches(node, spec.node_name, spec.all_nodes, spec.node_selector):
            continue
        for d in spec.devices:
            if per_device and not _reaches(node, d.node_name, d.all_nodes, d.node_selector):
                continue
            out.append(_Device(spec.driver, spec.pool.name, d, world.rules))
    return out


def _exact(x: o.ExactDeviceRequest) -> _Request:
    return _Request(x.device_class_name, x.allocation_mode or "ExactCount", x.count,
                    tuple(s.cel.expression for s in x.selectors if s.cel is not None), tuple(x.tolerations),
                    bool(x.admin_access))


def _alternative(sub: dict[str, Any]) -> _Request | None:
    try:
        x = msgspec.convert(sub, Alternative)
    except msgspec.ValidationError:
        return None
    return _Request(x.device_class_name, x.allocation_mode or "ExactCount", x.count,
                    tuple(s.cel.expression for s in x.selectors if s.cel is not None), tuple(x.tolerations), False)


class _Failed(Exception):
    """The allocation fails on this node whatever is chosen (a class or selector error)."""


def _allocatable(world: DeviceWorld, node: o.Node, claims: tuple[o.ResourceClaimSpec, ...]) -> bool:
    from projections.dra_cel import compile_selector  # noqa: PLC0415 - celpy loads only when a claim is checked

    devices = _node_devices(world, node)
    groups: list[list[_Request]] = []
    for claim in claims:
        for req in claim.devices.requests:
            if req.exactly is not None:
                groups.append([_exact(req.exactly)])
            elif req.first_available:
                alternatives = [_alternative(s) for s in req.first_available]
                if any(a is None for a in alternatives):
                    return False
                groups.append([a for a in alternatives if a is not None])
    if not groups:
        return True
    programs: dict[str, Any] = {}

    def program(expression: str) -> Any:
        found = programs.get(expression)
        if found is None:
            compiled = compile_selector(expression)
            if compiled.error:
                raise _Failed
            found = programs[expression] = compiled.program
        return found

    candidates: dict[int, list[int]] = {}

    def fitting(req: _Request) -> list[int]:
        """Indexes in ``devices`` of those ``req`` may take (whether free or not)."""
        found = candidates.get(id(req))
        if found is not None:
            return found
        if req.class_name not in world.classes:
            raise _Failed
        programs_of = [program(e) for e in (*world.classes[req.class_name], *req.selectors)]
        out = []
        for k, d in enumerate(devices):
            if world.taints and _untolerated(d.taints, req.tolerations):
                continue
            if _satisfies(d, programs_of):
                out.append(k)
        candidates[id(req)] = out
        return out

    held = {k for k, d in enumerate(devices) if d.id in world.allocated}
    try:
        return _search(groups, 0, held, devices, fitting)
    except _Failed:
        return False


def _untolerated(taints: Iterable[o.Taint], tolerations: tuple[o.Toleration, ...]) -> bool:
    return any(t.effect in _BLOCKING and not any(tolerates(x, t) for x in tolerations) for t in taints)


def _satisfies(d: _Device, programs: list[Any]) -> bool:
    from projections.dra_cel import device_activation, matches  # noqa: PLC0415 - as above

    if not programs:
        return True
    if d.activation is None:
        d.activation = device_activation(d.driver, d.device)
    for p in programs:
        fit, failure = matches(p, d.activation)
        if failure:
            raise _Failed
        if not fit:
            return False
    return True


_BUDGET = 100000
"""The choices searched for one node, over all its groups, before giving up on it (the allocator, too, bounds
its search)."""


def _search(groups: list[list[_Request]], at: int, taken: set[int], devices: list[_Device], fitting,
            budget: list[int] | None = None) -> bool:
    """Whether groups ``at``... can be allocated beside the devices ``taken``: each group by the first of its
    alternatives that leaves the rest allocatable. ``budget``: the choices left to try, shared by the whole
    search (one node's)."""
    if at == len(groups):
        return True
    if budget is None:
        budget = [_BUDGET]
    for req in groups[at]:
        free = [k for k in fitting(req) if req.admin or devices[k].shared or k not in taken]
        if req.all:
            if not free or len(free) != len(fitting(req)):
                continue
            choices: Iterable[tuple[int, ...]] = (tuple(free),)
        else:
            if len(free) < req.count:
                continue
            choices = combinations(free, req.count)
        for choice in choices:
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            added = set() if req.admin else {k for k in choice if not devices[k].shared}
            if _search(groups, at + 1, taken | added, devices, fitting, budget):
                return True
    return False


def device_excluded(snap: FlavorSnapshot, req: PodSetRequest, excluded: Mapping[int, Exclusion],
                    devices: Devices | None) -> Mapping[int, Exclusion]:
    """Leaf index -> why: ``excluded`` with, under the gate (``devices``), every other node leaf whose devices
    cannot serve the pod set's claims; unchanged unless the lowest level is the hostname (below another level
    each node is checked by :func:`kueue_es.scheduler.tas.pernode.node_view`)."""
    if devices is None or not req.claims or not snap.tree.hostname_lowest:
        return excluded
    return devices.excluded(snap.tree.leaf_node, req.claims, excluded)
