"""The ``kueue.x-k8s.io/wait-for-pods-ready`` annotation a job's new Workload carries over from the job (from the Pod
for a Pod or a pod group), as Kueue v0.20 copies it under ``WorkloadLevelWaitForPodsReady`` (alpha, off) while
``DisableWaitForPodsReady`` is off: the workload's own waitForPodsReady timeouts
(:mod:`projections.workload_pods_ready`). Pure."""

from __future__ import annotations

from projections import gates
from projections.cluster import ClusterState
from projections.workload_pods_ready import WAIT_FOR_PODS_READY_ANNOTATION


def carried(state: ClusterState, annotations: dict[str, str]) -> dict[str, str]:
    """The annotation the Workload takes of the job's ``annotations`` (empty: none, or the gate is off)."""
    value = annotations.get(WAIT_FOR_PODS_READY_ANNOTATION)
    if not value or not state.gate(gates.WORKLOAD_LEVEL_WAIT_FOR_PODS_READY) or state.gate(
            gates.DISABLE_WAIT_FOR_PODS_READY):
        return {}
    return {WAIT_FOR_PODS_READY_ANNOTATION: value}
