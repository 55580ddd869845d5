"""Elastic workloads on a MultiKueue manager (Kueue's workload slices under ``ElasticJobsViaWorkloadSlices``, as
its MultiKueue workload controller treats them), as pure decisions.

An elastic Job's scale-up makes a new slice (a Workload naming the admitted one in its
``kueue.x-k8s.io/workload-slice-replacement-for`` annotation) that the scheduler admits in the old one's place,
finishing that one ``WorkloadSliceReplaced``. Behind a MultiKueue check, Kueue keeps the Job running on its worker
through that handover:

* **the same worker.** A slice that replaces one already placed on a worker (``status.clusterName``) is dispatched
  there alone, whatever the dispatcher (Kueue carries the old slice's cluster over to the new one: "new workload
  slices will continue to be assigned to the same cluster"), :func:`slice_worker`. kueue-es nominates that worker
  (``ClustersNominated`` with it alone), so its copy is made there and nowhere else; the worker's Kueue admits the
  copy in place of the old slice's copy, and the manager then takes it as admitted there as for any workload.
* **the copies stay.** The copies of an elastic slice finished ``WorkloadSliceReplaced``, and of a scale-up slice
  that holds no quota yet, are left where they are (Kueue's workload controller returns before it deletes remote
  objects for either), :func:`keeps_copies`: the owner's copy on the worker, which the old slice's copy named, is
  the one the new slice runs on (the connector points it at the new slice and forwards the new counts:
  :mod:`connectors.k8s.multikueue_elastic`).
"""

from __future__ import annotations

from projections import gates
from projections.cluster import ClusterState
from projections.workloads import FINISHED, WorkloadInfo

SLICE_REPLACED = "WorkloadSliceReplaced"
"""The Finished reason of a slice the scheduler replaced with a new one."""


def elastic(state: ClusterState, wl: WorkloadInfo) -> bool:
    """Kueue's ``IsElasticWorkload``: the gate on and the Workload annotated ``kueue.x-k8s.io/elastic-job: "true"``."""
    return wl.elastic and state.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)


def slice_worker(state: ClusterState, wl: WorkloadInfo) -> str | None:
    """The worker an elastic slice is dispatched to alone: the one the slice it replaces was placed on (that slice's
    ``status.clusterName``, kept once it is finished); None for any other workload, or when the replaced slice is
    gone or was on no worker (then it is dispatched as any workload)."""
    if not wl.replaces or not elastic(state, wl):
        return None
    old = state.workloads.get(wl.replaces)
    return old.cluster_name or None if old is not None else None


def keeps_copies(state: ClusterState, wl: WorkloadInfo) -> bool:
    """Whether the copies of the elastic ``wl`` stay on the workers although it is not to run there: finished as
    replaced by a new slice, or a scale-up slice not finished that holds no quota (Kueue's workload controller
    leaves both alone)."""
    if not elastic(state, wl):
        return False
    if wl.phase == FINISHED:
        finished = wl.condition("Finished")
        return finished is not None and finished.reason == SLICE_REPLACED
    return not wl.reserving and bool(wl.replaces)
