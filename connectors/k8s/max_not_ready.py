"""How many Pods of a group may be not ready while the group still counts as ``PodsReady``: Kueue v0.20's
``kueue.x-k8s.io/pod-group-max-not-ready-count`` annotation, read only under its ``WaitForPodsReadyMaxNotReady``
gate (alpha, off by default). Pure: no client, no clock.

Kueue's rule (KEP-15423): each Pod of the group may carry the annotation; a value is valid when it is a whole number
from 0 to the group's total count less one. The group's budget is the smallest value among its Pods, and a Pod
without a valid value counts as 0, so the budget is 0 (every Pod must be ready, as without the gate) unless every
Pod names one. With a budget, the not-ready Pods are the total count's slots not filled by a ready Pod (Pods not
made yet, or deleted, count as not ready), and the group is ready while there are no more of them than the budget.
Only pod groups read it: a single Pod, a Job or any other kind is ready as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_NOT_READY_ANNOTATION = "kueue.x-k8s.io/pod-group-max-not-ready-count"

_WHOLE = re.compile(r"[+-]?[0-9]+")


def pod_budget(annotations: dict[str, str], total: int) -> int:
    """One Pod's tolerated count: its annotation when a whole number in ``[0, total - 1]``, else 0."""
    raw = annotations.get(MAX_NOT_READY_ANNOTATION)
    if raw is None or not _WHOLE.fullmatch(raw):
        return 0
    value = int(raw)
    return value if 0 <= value < total else 0


def group_budget(annotations: Iterable[dict[str, str]], total: int) -> int:
    """The group's tolerated count of not-ready Pods: the strictest of its Pods' (0 for no Pods)."""
    return min((pod_budget(a, total) for a in annotations), default=0)


def ready_within_budget(total: int, ready: int, budget: int) -> bool:
    """The group counts as ready: no more of its ``total`` slots lack a ready Pod than ``budget`` tolerates."""
    return total - ready <= budget
