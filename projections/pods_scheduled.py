"""Kueue v0.20's ``WaitForPodsReadyUnscheduledTimeout`` (alpha, off): the ``PodsScheduled`` condition Kueue's
UnscheduledPodsTracker keeps on an admitted Workload, read off the Pods in the log. Pure.

Tracking is on when the gate is, waitForPodsReady is in force and ``waitForPodsReady.unscheduledTimeout`` is set
and above zero (unset or ``0s``: nothing of it, not even the reset). Then, for an admitted Workload that is neither
evicted nor finished (a ConcurrentAdmission variant excepted), the Pods linked to it by their
``kueue.x-k8s.io/workload`` annotation are counted per pod set (their ``kueue.x-k8s.io/podset`` label):

* a Pod bound to a node (``spec.nodeName``) whose ``PodScheduled`` condition is True counts as scheduled; a
  ``Succeeded`` one, or the pod set's reclaimable pods under ``ReclaimablePods``, as done; a ``Failed`` or deleting
  one fills no slot;
* each pod set of the admission needs its admitted count (the spec's when the admission gives none) scheduled
  or done.

No observation is made before a live Pod is seen. The first one (for this admission) writes ``PodsScheduled``
False ``WaitForScheduling`` "At least one required pod is not scheduled", or True ``AllRequiredPodsScheduled``
"All required pods were scheduled or succeeded" when every slot is filled; a False one turns True when every slot
is, and a True one stays for the rest of the admission. A Workload that lost its admission and shows True is reset
to False ``WaitForStart`` "Not all pods are ready or succeeded".

An observation counts for the current admission only when made at or after it, in whole seconds as the API shows
times (Kueue stamps its first observation a second after the admission and takes one whose lastTransitionTime is
after the Admitted condition's; the fold is ordered, so it observes at once). While one says False and the pods were never ready, the job integration's PodsReady
reason is ``WaitForScheduling`` (:mod:`projections.pods_ready_condition`), and the workload controller evicts at
the admission plus ``unscheduledTimeout`` (:mod:`kueue_es.scheduler.pods_ready_timeouts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from events import objects as o
from events.timefmt import parse_time
from projections import gates
from projections.pods_ready import recorded_in_force
from projections.pods_ready_condition import WAIT_FOR_SCHEDULING
from projections.workloads import WorkloadInfo

PODS_SCHEDULED = "PodsScheduled"
ALL_SCHEDULED = "AllRequiredPodsScheduled"
UNSCHEDULED_MESSAGE = "At least one required pod is not scheduled"
ALL_SCHEDULED_MESSAGE = "All required pods were scheduled or succeeded"
POD_SCHEDULED = "PodScheduled"
"""The Pod condition kube-scheduler sets when it binds the Pod."""
PODSET_LABEL = "kueue.x-k8s.io/podset"


def tracking(document: dict[str, Any] | None, gate: Callable[[str], bool]) -> bool:
    """Whether Pods' scheduling is tracked under a recorded Configuration document (None: Kueue's defaults, off);
    ``gate`` reads a feature gate of that configuration (:meth:`ClusterState.gate`)."""
    if not document or not gate(gates.WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT):
        return False
    stanza = recorded_in_force(document)
    raw = stanza.unscheduled_timeout
    return stanza.enable and raw is not None and any(ch in "123456789" for ch in raw)  # validated: a nonzero digit


def scheduled(pod: o.Pod) -> bool:
    """Bound to a node and shown scheduled."""
    return bool(pod.spec.node_name) and any(
        c.type == POD_SCHEDULED and c.status == "True" for c in pod.status.conditions)


def current(wl: WorkloadInfo) -> o.Condition | None:
    """The PodsScheduled condition when it is an observation of the current admission (None: none is)."""
    c = wl.condition(PODS_SCHEDULED)
    if c is None or wl.admitted_at is None or not c.last_transition_time:
        return None
    if (c.status, c.reason) not in (("False", WAIT_FOR_SCHEDULING), ("True", ALL_SCHEDULED)):
        return None
    # both times as the API shows them, in whole seconds: an observation in the admission's second is this one's
    return c if parse_time(c.last_transition_time) >= wl.admitted_at // 1000 * 1000 else None


def waiting_for_scheduling(wl: WorkloadInfo) -> bool:
    """A current observation says some required pod is not scheduled."""
    c = current(wl)
    return c is not None and c.status == "False"


def observe(wl: WorkloadInfo, pods: Iterable[o.Pod], reclaim: bool) -> tuple[str, str, str] | None:
    """(status, reason, message) to write on an admitted, tracked workload given its linked ``pods`` (None: write
    nothing). ``reclaim``: the ReclaimablePods gate is on."""
    now = current(wl)
    if now is not None and now.status == "True" or wl.admission is None:
        return None
    live = 0
    on_node: dict[str, int] = {}
    done: dict[str, int] = {}
    for pod in pods:
        ps = pod.metadata.labels.get(PODSET_LABEL, "")
        if pod.status.phase == "Succeeded":
            done[ps] = done.get(ps, 0) + 1
        elif pod.status.phase == "Failed" or pod.metadata.deletion_timestamp:
            continue
        else:
            live += 1
            if scheduled(pod):
                on_node[ps] = on_node.get(ps, 0) + 1
    reclaimable = dict(wl.reclaimable) if reclaim else {}
    spec = {p.name: p.count for p in (wl.spec_pod_sets or wl.pod_sets)}
    required = filled = done_capped = 0
    for psa in wl.admission.pod_set_assignments:
        count = psa.count if psa.count is not None else spec.get(psa.name, 0)
        required += count
        filled += min(count, on_node.get(psa.name, 0) + max(done.get(psa.name, 0), reclaimable.get(psa.name, 0)))
        done_capped += min(count, done.get(psa.name, 0))
    if now is None and live == 0 and not (required > 0 and done_capped == required):
        return None  # nothing observed yet
    if filled >= required:
        return "True", ALL_SCHEDULED, ALL_SCHEDULED_MESSAGE
    if now is not None:
        return None  # still not scheduled: the observation stands, with its time
    return "False", WAIT_FOR_SCHEDULING, UNSCHEDULED_MESSAGE


def unscheduled_wait(wl: WorkloadInfo) -> bool:
    """An admitted workload runs on ``unscheduledTimeout``: its PodsReady condition waits for the scheduling and a
    current observation says a pod is not scheduled (Kueue: the reason selects the clock, the observation confirms
    it is this admission's)."""
    ready = wl.condition("PodsReady")
    return ready is not None and ready.status == "False" and ready.reason == WAIT_FOR_SCHEDULING and (
        waiting_for_scheduling(wl))
