"""The ``PodsReady`` decision every job integration writes to the log (Job, JobSet, Pod, pod group), from what a
kind says of its pods. Its own module so that the shared job reconciler (:mod:`connectors.k8s.jobframework`) and
the Pod integration (:mod:`connectors.k8s.pod_sync`) both use it without importing each other."""

from __future__ import annotations

from projections.pods_ready_condition import WAIT_FOR_START
from projections.workloads import ADMITTED, FINISHED, WorkloadInfo


def is_admitted(wl: WorkloadInfo) -> bool:
    """Admitted in the log, neither evicted nor deactivated: what lets a job run."""
    return wl.phase == ADMITTED and not wl.evicted and wl.active


def pods_ready_transition(wl: WorkloadInfo, *, running: bool, ready: bool) -> tuple[bool, str] | None:
    """``(ready, reason)`` to put in the log for the Workload's PodsReady, from what its pods show: ``running``
    (some pod neither held back nor ended) and ``ready`` (Kueue's ``PodsReady`` for the kind). While admitted and
    running: ``Started``, ``Recovered`` after a loss, else ``WaitForRecovery``; otherwise, or before the pods are
    ready, Kueue's first write (``WaitForStart``) when none is shown yet. None: nothing to change."""
    if wl.phase == FINISHED:
        return None
    first = None if wl.condition("PodsReady") is not None else (False, WAIT_FOR_START)
    if not (is_admitted(wl) and running):
        return first if not wl.pods_ready else None
    if ready == wl.pods_ready:
        return first if not ready else None
    if ready:
        prior = wl.condition("PodsReady")
        return True, "Recovered" if prior is not None and prior.reason in ("WaitForRecovery", "Recovered") else "Started"
    return False, "WaitForRecovery"
