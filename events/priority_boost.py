"""A Workload's ``kueue.x-k8s.io/priority-boost`` annotation (Kueue's ``PriorityBoost`` gate, alpha, off).

Under the gate the annotation's value is added to the workload's priority (``spec.priority``, nil as 0): the sum
is the effective priority every ordering and preemption rule compares. Kueue reads the value as Go's
``strconv.ParseInt(value, 10, 32)`` does (``pkg/util/priority``): an optional sign and decimal digits, nothing
else, within int32; an empty or missing value is no boost. Its Workload webhook refuses any other value, and
should one reach the scheduler anyway it counts as no boost — as the fold counts one from a log written without
that check.
"""

from __future__ import annotations

from events.goint import parse_int

ANNOTATION = "kueue.x-k8s.io/priority-boost"
_INT32 = (-(2**31), 2**31 - 1)

def parse(value: str) -> int | None:
    """The boost ``value`` gives (0 when empty), or None when Kueue would not read it as an int32."""
    return parse_int(value, 32) if value else 0


def boost_of(value: str) -> int:
    """The boost ``value`` gives, a value Kueue cannot read counting as none."""
    boost = parse(value)
    return 0 if boost is None else boost


def error(value: str) -> str | None:
    """Why Kueue's webhook refuses ``value`` for the annotation, as a field error (None: it accepts it)."""
    if parse(value) is not None:
        return None
    return (f"field `metadata.annotations[{ANNOTATION}]`: must be an integer between {_INT32[0]} and {_INT32[1]}, "
            f"not {value!r}")
