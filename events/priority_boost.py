"""A Workload's ``kueue.x-k8s.io/priority-boost`` annotation (Kueue's ``PriorityBoost`` gate, alpha, off).

Under the gate the annotation's value is added to the workload's priority (``spec.priority``, nil as 0): the sum
is the effective priority every ordering and preemption rule compares. Kueue reads the value as Go's
``strconv.ParseInt(value, 10, 32)`` does (``pkg/util/priority``): an optional sign and decimal digits, nothing
else, within int32; an empty or missing value is no boost. Its Workload webhook refuses any other value, an empty
one too (``"0"`` says no boost), and should one reach the scheduler anyway it counts as no boost — as the fold
counts one from a log written without that check.
"""

from __future__ import annotations

from events.field_errors import go_quote
from events.goint import parse_int

ANNOTATION = "kueue.x-k8s.io/priority-boost"


def parse(value: str) -> int | None:
    """The boost ``value`` gives (0 when empty), or None when Kueue would not read it as an int32."""
    return parse_int(value, 32) if value else 0


def boost_of(value: str) -> int:
    """The boost ``value`` gives, a value Kueue cannot read counting as none."""
    boost = parse(value)
    return 0 if boost is None else boost


def error(value: str | None) -> str | None:
    """Why Kueue's webhook refuses ``value`` for the annotation (None: the annotation is missing), as a field error
    in Kueue's words (None: it accepts it). An empty value is refused though it reads as no boost: Kueue asks for
    an explicit ``"0"``."""
    if value is None or (value and parse(value) is not None):
        return None
    detail = "must be a valid signed integer"
    if not value:
        detail += '; use "0" explicitly, empty string is not allowed'
    return f"field `metadata.annotations[{ANNOTATION}]`: Invalid value: {go_quote(value)}: {detail}"
