"""The flavor assigner's quota messages, and how ``replay --verify`` reads the ones already recorded.

Kueue writes the amounts in these messages as Kubernetes quantities, with the resource formatter it also writes
``resourceUsage`` with (``1G``, ``500m``, ``1k``): :func:`unused_quota` and :func:`over_capacity` do the same,
and name an amount past int64 (a pod set's exact total) exactly rather than capped
(:func:`events.quantity.exact_quantity`).

Logs recorded before kueue-es did hold other strings for the same amounts (``1000000000`` for ``1G``, ``1000``
cores for ``1k``) and, for a first pod set over the maximum capacity, the wording Kueue used before it named the
previously considered pod sets: ``request > maximum capacity (A > B)``, which says what ``previously considered
podsets requests (0) + current podset request (A) > maximum capacity (B)`` says. :func:`canonical_message`
rewrites both in every quota reason of a message into what the scheduler writes today, so a recorded decision
and a re-run compare them by value; any other difference in a message is left alone and stays a difference.
"""

from __future__ import annotations

import re

from events.quantity import MILLI_RESOURCES, QuantityError, exact_quantity, parse_quantity


def unused_quota(resource: str, flavor: str, needed: int, byte_valued: bool = False) -> str:
    """Kueue's ``fitsResourceQuota`` when the request fits the maximum capacity but not what is unused (a
    ``byte_valued`` resource, counter-based DRA, in binary units as Kueue's formatter writes it)."""
    return (f"insufficient unused quota for {resource} in flavor {flavor}, "
            f"{exact_quantity(resource, needed, byte_valued)} more needed")


def over_capacity(resource: str, flavor: str, assumed: int, request: int, max_capacity: int,
                  byte_valued: bool = False) -> str:
    """Kueue's ``fitsResourceQuota`` when earlier pod sets' usage of the flavor-resource (``assumed``, 0 for the
    first pod set too: Kueue has one wording for both) plus this request exceeds the most the ClusterQueue could
    ever get."""
    def q(v: int) -> str:
        return exact_quantity(resource, v, byte_valued)
    return (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({q(assumed)}) + current podset request ({q(request)}) > maximum capacity ({q(max_capacity)})")


def over_capacity_one_pod(resource: str, flavor: str, request: int, max_capacity: int,
                          byte_valued: bool = False) -> str:
    """Kueue v0.20's (#15444) reason for passing over a flavor that could not hold one pod of a pod set with no
    pods (``request`` is the per-pod request, or 1 for ``pods``)."""
    def q(v: int) -> str:
        return exact_quantity(resource, v, byte_valued)
    return (f"insufficient quota for {resource} in flavor {flavor}, one pod per zero-count podset request "
            f"({q(request)}) > maximum capacity ({q(max_capacity)})")


_QUANTITY = r"(\d+(?:[numkMGTPE]|[KMGTPE]i)?)"
_UNUSED = re.compile(rf"insufficient unused quota for (\S+) in flavor (\S+), {_QUANTITY} more needed")
_OVER = re.compile(rf"insufficient quota for (\S+) in flavor (\S+), previously considered podsets requests "
                   rf"\({_QUANTITY}\) \+ current podset request \({_QUANTITY}\) > maximum capacity \({_QUANTITY}\)")
_OVER_SHORT = re.compile(rf"insufficient quota for (\S+) in flavor (\S+), request > maximum capacity "
                         rf"\({_QUANTITY} > {_QUANTITY}\)")


def _value(resource: str, text: str) -> int | None:
    """The exact integer ``text`` stands for (milli for cpu); None when it is not a whole one."""
    try:
        v = parse_quantity(text)
    except QuantityError:
        return None
    if resource in MILLI_RESOURCES:
        v *= 1000
    return int(v) if v == v.to_integral_value() else None


def _unused(m: re.Match) -> str:
    resource, flavor, needed = m.groups()
    n = _value(resource, needed)
    return m.group(0) if n is None else unused_quota(resource, flavor, n)


def _over(m: re.Match) -> str:
    resource, flavor, *amounts = m.groups()
    values = [_value(resource, a) for a in amounts]
    if None in values:
        return m.group(0)
    if len(values) == 2:  # the older wording: nothing considered before this pod set
        values = [0, *values]
    return over_capacity(resource, flavor, *values)  # type: ignore[arg-type]


def canonical_message(message: str) -> str:
    """``message`` with every quota reason in it written as the scheduler writes it today."""
    if "quota for" not in message:
        return message
    message = _UNUSED.sub(_unused, message)
    message = _OVER.sub(_over, message)
    return _OVER_SHORT.sub(_over, message)
