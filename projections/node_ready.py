"""A node's Ready condition, and how long Kueue's TAS node controller waits on a node that is not Ready.

With TASReplaceNodeOnPodTermination off (or TASReplaceNodeDueToNotReadyOverFixedTime on), the controller treats a
node whose Ready condition is not True as failed for every workload placed on it once it has been so for
NodeFailureDelay (30 s from the condition's lastTransitionTime) (the rule is in ``kueue_es.scheduler.nodefailure``). The projection
indexes the nodes still inside that wait by when it ends, so the scheduler can be woken then and its rules look
again once the log's time reaches it; the fold needs the rule too and may not import the scheduler, so it lives
here.
"""

from __future__ import annotations

from events import objects as o
from events.timefmt import parse_time

NODE_FAILURE_DELAY_MS = 30_000
"""Kueue's NodeFailureDelay (``pkg/controller/tas``)."""


def ready_condition(node: o.Node) -> o.Condition | None:
    for c in node.status.conditions:
        if c.type == "Ready":
            return c
    return None


def not_ready_wait_ends(node: o.Node) -> int | None:
    """When the wait on ``node`` ends (ms), if its Ready condition is there and not True; None otherwise (a Ready
    node, or one without the condition, which counts as failed at once). A missing or unreadable
    lastTransitionTime counts from the epoch, so that wait is long over: Kueue counts from the zero time."""
    c = ready_condition(node)
    if c is None or c.status == "True":
        return None
    since = 0
    if c.last_transition_time:
        try:
            since = parse_time(c.last_transition_time)
        except (ValueError, OverflowError):
            since = 0  # refused at ingestion; an older log's record must not stop the fold
    return since + NODE_FAILURE_DELAY_MS
