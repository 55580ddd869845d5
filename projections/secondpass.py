"""When an admitted or reserving workload needs a second scheduling pass, and when it is retried.

Kueue runs a second pass for a workload that holds quota but still lacks its topology: either its topology
request was delayed until the admission checks (a ProvisioningRequest) were Ready, or a node under its placement
failed and must be replaced in place. Kueue keeps that queue in memory with a backoff per attempt; here the
attempt count and the time it is due are folded from the log, so a restart resumes the same retries.
"""

from __future__ import annotations

from collections.abc import Callable

from events import objects as o
from events.tas_assignment import decode
from projections.workloads import ADMITTED, RESERVED, WorkloadInfo

HOSTNAME = "kubernetes.io/hostname"
FIRST_DELAY_MS = 1_000
MAX_DELAY_MS = 30_000


def backoff_ms(iteration: int) -> int:
    """1 s·2^(iteration−1), capped at 30 s; no jitter (Kueue has none here either)."""
    return min(FIRST_DELAY_MS * 2 ** max(0, iteration - 1), MAX_DELAY_MS)


def delayed_pod_sets(admission: o.Admission | None) -> list[o.PodSetAssignment]:
    """Pod sets whose topology request waits for the second pass (``delayedTopologyRequest: Pending``, no topology)."""
    if admission is None:
        return []
    return [p for p in admission.pod_set_assignments
            if p.delayed_topology_request == "Pending" and p.topology_assignment is None]


def awaits_delayed_topology(admission: o.Admission | None) -> bool:
    """Whether :func:`delayed_pod_sets` has any, without building the list (the fold asks at each reservation and
    at each event about a reserved workload)."""
    if admission is not None:
        for p in admission.pod_set_assignments:
            if p.delayed_topology_request == "Pending" and p.topology_assignment is None:
                return True
    return False


def needs_second_pass(wl: WorkloadInfo, required_checks: Callable[[WorkloadInfo], list[str]]) -> bool:
    """Kueue's NeedsSecondPass: never for a finished, evicted or non-reserving workload; otherwise when every
    (and at least one) required check is Ready and a delayed topology request is still unplaced, or when an
    admitted workload lists an unhealthy node that its placement uses."""
    if wl.phase not in (RESERVED, ADMITTED) or wl.evicted or wl.admission is None:
        return False
    if wl.phase == RESERVED and awaits_delayed_topology(wl.admission):
        checks = required_checks(wl)
        states = wl.check_states
        return bool(checks) and all(c in states and states[c].state == "Ready" for c in checks)
    if wl.phase == ADMITTED and wl.unhealthy_nodes:
        return bool(pod_sets_on_node(wl.admission, wl.unhealthy_nodes[0]))
    return False


def pod_sets_on_node(admission: o.Admission, node: str) -> list[str]:
    """Names of the pod sets whose hostname-level placement uses ``node``."""
    out = []
    for p in admission.pod_set_assignments:
        ta = p.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != HOSTNAME:
            continue
        if any(d.values and d.values[-1] == node for d in decode(ta)):
            out.append(p.name)
    return out
