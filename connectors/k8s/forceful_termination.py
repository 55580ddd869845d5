"""Kueue's FailureRecoveryPolicy (alpha, off): which pods stuck terminating on an unreachable node are forced to
``Failed``, and when. Pure: the pod, its node and the time in; what to do out (the write is
:mod:`connectors.k8s.failure_recovery`).

A node that stops reporting gets the ``node.kubernetes.io/unreachable`` taint, and a pod being deleted there
stays ``Terminating`` for good: no kubelet confirms it stopped. A Job with ``podReplacementPolicy: Failed`` then
never replaces it. A pod that opted in (annotation ``kueue.x-k8s.io/safe-to-forcefully-terminate: "true"``) and is
being deleted, not yet ``Succeeded`` or ``Failed``, is given the forceful-termination grace period (1 min) after
its ``deletionTimestamp``; then, if the node it is bound to carries the unreachable taint (any effect), its phase
is set to ``Failed`` with the condition ``KueueFailureRecovery=True`` (reason ``KueueForcefullyTerminated``). A
pod whose node is gone, or reachable at that point, is left as it is. This follows Kueue's
``pkg/controller/failurerecovery/pod_termination_controller.go`` as released (v0.15 on); Kueue's newest source
renames the annotation ``safe-to-forcefully-delete`` and also deletes the pod with no grace, which kueue-es does
not do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from events import objects as o
from events.timefmt import parse_time

ANNOTATION = "kueue.x-k8s.io/safe-to-forcefully-terminate"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
GRACE_MS = 60_000
"""Kueue's forceful-termination grace period: no Configuration field sets it."""
CONDITION_TYPE = "KueueFailureRecovery"
REASON = "KueueForcefullyTerminated"
_TERMINAL = ("Succeeded", "Failed")

LEAVE, WAIT, FAIL = "leave", "wait", "fail"


@dataclass(frozen=True)
class Verdict:
    """``action`` is LEAVE (nothing to do until the pod or its node changes), WAIT (look again at ``at``, ms) or
    FAIL (force the pod to Failed now)."""
    action: str
    at: int | None = None


def opted_in(pod: o.Pod) -> bool:
    """The pod asks for it and is being deleted: the pods the controller follows at all."""
    return pod.metadata.annotations.get(ANNOTATION) == "true" and pod.metadata.deletion_timestamp is not None


def still_stuck(live: dict[str, Any]) -> bool:
    """Whether the pod as the apiserver returns it still opted in, is being deleted and is not terminal: the log's
    view may lag (a kubelet back in time to report the pod Succeeded), and Kueue decides on the pod it just read."""
    meta, status = live.get("metadata") or {}, live.get("status") or {}
    return ((meta.get("annotations") or {}).get(ANNOTATION) == "true" and bool(meta.get("deletionTimestamp"))
            and status.get("phase") not in _TERMINAL)


def verdict(pod: o.Pod, node: o.Node | None, now: int, grace_ms: int = GRACE_MS) -> Verdict:
    """What to do with ``pod`` at ``now`` (ms), bound to ``node`` (None: no such node)."""
    if not opted_in(pod) or pod.status.phase in _TERMINAL:
        return Verdict(LEAVE)
    assert pod.metadata.deletion_timestamp is not None
    due = parse_time(pod.metadata.deletion_timestamp) + grace_ms
    if now < due:
        return Verdict(WAIT, due)
    if node is None or not any(t.key == UNREACHABLE_TAINT for t in node.spec.taints):
        return Verdict(LEAVE)
    return Verdict(FAIL)


def message(node: str, deletion_grace_seconds: int, grace_ms: int = GRACE_MS) -> str:
    """Kueue's condition message. Kueue adds the pod's ``deletionGracePeriodSeconds`` to the grace period as a
    count of nanoseconds, so a 30 s grace shows as ``1m0.00000003s``: kept as Kueue writes it."""
    total = go_duration(grace_ms * 1_000_000 + deletion_grace_seconds)
    return (f"Pod forcefully terminated after {total} grace period due to unreachable node `{node}` "
            f"(triggered by `{ANNOTATION}` annotation)")


def go_duration(ns: int) -> str:
    """``ns`` nanoseconds as Go's ``time.Duration.String`` writes them (``1m0s``, ``1h2m3.5s``, ``250ms``)."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _with_fraction(ns, size) + unit
    seconds, frac = divmod(ns, 1_000_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{secs}{_fraction(frac, 9)}s"
    if hours or minutes:
        out = f"{minutes}m{out}"
    if hours:
        out = f"{hours}h{out}"
    return sign + out


def _with_fraction(value: int, size: int) -> str:
    whole, frac = divmod(value, size)
    return f"{whole}{_fraction(frac, len(str(size)) - 1)}"


def _fraction(frac: int, digits: int) -> str:
    return f".{frac:0{digits}d}".rstrip("0") if frac else ""


def status_patch(live: dict[str, Any], text: str, at: str) -> dict[str, Any]:
    """The merge patch of the live pod's status (the apiserver's JSON): phase ``Failed`` and the recovery
    condition (turned at ``at``) put in place of one of its type, or added; conditioned on the pod's uid and
    resourceVersion."""
    meta = live.get("metadata") or {}
    kept = [c for c in (live.get("status") or {}).get("conditions") or [] if c.get("type") != CONDITION_TYPE]
    condition = {"type": CONDITION_TYPE, "status": "True", "reason": REASON, "message": text,
                 "lastTransitionTime": at}
    return {"metadata": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "status": {"phase": "Failed", "conditions": [*kept, condition]}}
