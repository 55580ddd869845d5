"""ResourceSlices (resource.k8s.io/v1) folded from the log: the devices DRA drivers publish, by driver and pool, as
Kueue groups them when it charges the counters and capacities of ``deviceClassMappings`` ``sources``
(``KueueDRAIntegrationPartitionableDevices``, ``KueueDRAIntegrationConsumableCapacity``).

A pool is a driver's pool name. Only the slices of its newest ``generation`` belong to it, and it is complete once
it has as many of them as its ``resourceSliceCount`` (read from the first of them by name, where Kueue reads the
first it lists); the devices of an incomplete pool are not looked at. A slice may hold shared counters, devices, or
both (the layout Kubernetes 1.34 allowed).

What the devices are worth is Kueue's rule too, given the devices a request matches: for a counter source, the
largest value of the counter among their ``consumesCounters`` (:func:`counter_charge`); for a capacity source, per
device the capacity the claim asks for (else the device's policy default, else its whole capacity) rounded to the
device's request policy, the largest of those (:func:`capacity_charge`); either times the request's ``count``,
saturating at the int64 bound, a negative driver value read as 0. Which devices a request matches (the CEL
selectors of the source, the DeviceClass and the request) is not decided here.

Pure: no I/O, no clock; every answer is in name order, never in dict order.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_CEILING, Decimal
from typing import NamedTuple

from events import objects as o
from events import schema as ev
from events.quantity import MAX_INT64, QuantityError, parse_quantity


class Pool(NamedTuple):
    driver: str
    name: str
    generation: int
    slice_count: int
    """The pool's ``resourceSliceCount``: complete once it has that many slices of its generation."""
    slices: tuple[o.ResourceSlice, ...]
    """The slices of its newest generation, by name."""

    @property
    def complete(self) -> bool:
        return len(self.slices) == self.slice_count

    @property
    def devices(self) -> tuple[o.Device, ...]:
        return tuple(d for s in self.slices for d in s.spec.devices)


class ResourceSlices:
    """The ResourceSlices the log says exist, by name (cluster-scoped)."""

    def __init__(self) -> None:
        self.by_name: dict[str, o.ResourceSlice] = {}

    def apply(self, event: ev.AnyEvent) -> bool:
        """Fold one event; whether it changed a ResourceSlice (the events of other kinds change nothing)."""
        match event:
            case ev.ObjectUpserted(obj=o.ResourceSlice() as rs):
                old = self.by_name.get(rs.metadata.name)
                self.by_name[rs.metadata.name] = rs
                return old is None or old.spec != rs.spec
            case ev.ObjectDeleted(kind="ResourceSlice", key=key):
                return self.by_name.pop(key, None) is not None
        return False

    def pools(self, driver: str) -> tuple[Pool, ...]:
        """``driver``'s pools, by name."""
        newest: dict[str, list[o.ResourceSlice]] = {}
        for name in sorted(self.by_name):
            rs = self.by_name[name]
            if rs.spec.driver != driver:
                continue
            pool = rs.spec.pool
            held = newest.get(pool.name)
            if held is None or pool.generation > held[0].spec.pool.generation:
                newest[pool.name] = [rs]
            elif pool.generation == held[0].spec.pool.generation:
                held.append(rs)
        return tuple(Pool(driver, p, held[0].spec.pool.generation, held[0].spec.pool.resource_slice_count,
                          tuple(held)) for p, held in sorted(newest.items()))

    def devices(self, driver: str) -> tuple[o.Device, ...]:
        """The devices of ``driver``'s complete pools, by pool, slice and place in the slice."""
        return tuple(d for p in self.pools(driver) if p.complete for d in p.devices)


def _decimal(q: o.Quantity) -> Decimal:
    """A driver's quantity (the log holds only ones that parse: :func:`events.manifests.check_foldable`)."""
    try:
        return parse_quantity(q)
    except QuantityError:
        return Decimal(0)


def _int(v: Decimal) -> int:
    """A quantity as Kueue charges it: its integer value rounded up (Kubernetes' ``Value``), bounded by int64, a
    negative one read as 0."""
    return 0 if v <= 0 else min(MAX_INT64, int(v.to_integral_value(rounding=ROUND_CEILING)))


def _times(value: int, count: int) -> int:
    return min(MAX_INT64, value * count) if count > 1 else value


def counter_charge(devices: Iterable[o.Device], counter: str, count: int) -> int | None:
    """What a request of ``count`` devices matching ``devices`` costs under a counter source of ``counter``: the
    largest value of the counter among their ``consumesCounters``, times ``count``; None when none of them
    consumes it (Kueue then leaves the workload inadmissible until the driver publishes it)."""
    values = [_decimal(c.value) for d in devices for consumption in d.consumes_counters
              if (c := consumption.counters.get(counter)) is not None]
    return _times(_int(max(values)), count) if values else None


class CapacityCharge(NamedTuple):
    value: int | None
    """The charge, or None with :attr:`error`."""
    error: str = ""
    """Kueue's reason when no device can be charged: none has the dimension, or none's policy takes the request."""


def capacity_charge(devices: Iterable[o.Device], dimension: str, requested: o.Quantity | None,
                    count: int) -> CapacityCharge:
    """What a request of ``count`` devices matching ``devices`` costs under a capacity source of ``dimension``
    (``requested``: the claim's ``capacity.requests`` of it, if any): per device having the dimension, the request
    (else the policy's ``default``, else the device's whole capacity) rounded to the device's request policy, the
    largest of those, times ``count``."""
    having = False
    best: Decimal | None = None
    for d in devices:
        cap = d.capacity.get(dimension)
        if cap is None:
            continue
        having = True
        policy = cap.request_policy
        base = requested if requested is not None else (
            policy.default if policy is not None and policy.default is not None else cap.value)
        rounded = _round_to_policy(_decimal(base), policy)
        if rounded is not None and (best is None or rounded > best):
            best = rounded
    if not having:
        return CapacityCharge(None, f'matched devices have no capacity dimension "{dimension}"')
    if best is None:
        return CapacityCharge(None, "capacity request cannot be satisfied by any matched device's RequestPolicy for "
                                    f'dimension "{dimension}"')
    return CapacityCharge(_times(_int(best), count))


def _round_to_policy(base: Decimal, policy: o.CapacityRequestPolicy | None) -> Decimal | None:
    """``base`` rounded up to the device's request policy: to the smallest of ``validValues`` (listed ascending)
    not below it, else into ``validRange`` in whole units (at least ``min``, on ``min`` plus a whole number of
    ``step``s, at most ``max``); None when the policy cannot take it."""
    if policy is None:
        return base
    if policy.valid_values:
        return next((v for v in map(_decimal, policy.valid_values) if v >= base), None)
    bounds = policy.valid_range
    if bounds is None:
        return base
    value = _bounded(base)
    if bounds.min is not None:
        low = _bounded(_decimal(bounds.min))
        value = max(value, low)
        step = _bounded(_decimal(bounds.step)) if bounds.step is not None else 0
        if step > 0 and (value - low) % step:
            value = min(MAX_INT64, low + ((value - low) // step + 1) * step)
    if bounds.max is not None and value > _bounded(_decimal(bounds.max)):
        return None
    return Decimal(value)


def _bounded(v: Decimal) -> int:
    """Kubernetes' ``Value`` of a quantity (rounded up), bounded by int64 either way."""
    return max(-MAX_INT64 - 1, min(MAX_INT64, int(v.to_integral_value(rounding=ROUND_CEILING))))
