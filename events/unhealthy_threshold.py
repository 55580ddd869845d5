"""Kueue's ``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold`` Workload annotation (alpha gate
``TASReplaceMultipleFailedNodes``): how many failed nodes a TAS workload keeps in ``status.unhealthyNodes`` for
replacement before a further one evicts it, and what Kueue's Workload webhook refuses of it.

Pure: the fold (:mod:`projections.workloads`) and the webhooks (:func:`threshold_errors`) read the value alike.
"""

from __future__ import annotations

from collections.abc import Mapping

UNHEALTHY_NODES_THRESHOLD_ANNOTATION = "kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"
"""The key Kueue's pull request #12344 gave the annotation in review (Kueue's constant
``UnhealthyNodesConcurrentEvictionThresholdAnnotation``; its value was not in the sources at hand)."""
MAX_UNHEALTHY_NODES = 8
"""``status.unhealthyNodes`` holds at most 8 nodes (the CRD's ``maxItems``): the threshold's upper bound."""
OUT_OF_RANGE = f"must be an integer between 1 and {MAX_UNHEALTHY_NODES}"
"""Kueue's detail for a value it refuses."""


def unhealthy_threshold_of(value: str | None) -> int | None:
    """The annotation's value as Kueue's webhook takes it: decimal digits only (no sign, blank or fraction) for a
    number from 1 to :data:`MAX_UNHEALTHY_NODES`; None otherwise."""
    if not value or not value.isascii() or not value.isdigit() or len(value) > 2:
        return None
    n = int(value)
    return n if 1 <= n <= MAX_UNHEALTHY_NODES else None


def threshold_errors(annotations: Mapping[str, str], old: Mapping[str, str] | None = None) -> list[str]:
    """What Kueue's Workload webhook refuses under the gate: the annotation, when present, holds a whole number from
    1 to :data:`MAX_UNHEALTHY_NODES` (an empty value too is refused). On an update (``old``: the stored Workload's
    annotations) a value left as it was passes, so a Workload written while the gate was off keeps its status
    writable; changing it, or adding it, to another invalid value does not."""
    value = annotations.get(UNHEALTHY_NODES_THRESHOLD_ANNOTATION)
    if value is None or unhealthy_threshold_of(value) is not None:
        return []
    if old is not None and old.get(UNHEALTHY_NODES_THRESHOLD_ANNOTATION) == value:
        return []
    return [f'field `metadata.annotations[{UNHEALTHY_NODES_THRESHOLD_ANNOTATION}]`: Invalid value: "{value}": '
            f"{OUT_OF_RANGE}"]
