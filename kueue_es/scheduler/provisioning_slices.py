"""What a new slice of an elastic Job already has provisioned, for its ProvisioningRequest check (pure).

Under Kueue v0.20's ``ElasticJobsViaWorkloadSlicesForProvisioningRequests`` (alpha, off; read with
``ElasticJobsViaWorkloadSlices``; KEP-14615, Kueue #14316) the request of a scale-up slice asks only for the pods it
adds: for each pod set, the count assigned to the new slice less what the chain's last admitted slice runs there.
That slice is found walking the ``kueue.x-k8s.io/workload-slice-replacement-for`` annotations back: a slice that
only held quota (its own check never Ready, so its capacity never proven) is passed over, the first one admitted is
the baseline even once finished as replaced (its pods still run while the new slice waits), and an evicted one, or a
chain that ends before one (a slice deleted, the origin reached), leaves no baseline: the whole size is asked for,
over-provisioning rather than counting capacity that may be gone. What the baseline runs is its assigned count less
its reclaimable pods (and less a count lowered in place), the count it holds quota for.
"""

from __future__ import annotations

from projections import gates
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo


def delta_applies(state: ClusterState, wl: WorkloadInfo) -> bool:
    """The workload is a scale-up slice whose request asks only for its added pods (both gates on, the Workload
    annotated ``kueue.x-k8s.io/elastic-job: "true"`` and naming a slice it replaces)."""
    return (bool(wl.replaces) and wl.elastic and state.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
            and state.gate(gates.ELASTIC_JOBS_FOR_PROVISIONING_REQUESTS))


def _admitted(wl: WorkloadInfo) -> bool:
    c = wl.condition("Admitted")
    return c is not None and c.status == "True"


def baseline(state: ClusterState, wl: WorkloadInfo) -> WorkloadInfo | None:
    """The chain's last admitted slice before ``wl`` that is not evicted, or None (see the module doc)."""
    seen = {wl.key}
    key = wl.replaces
    while key and key not in seen:
        seen.add(key)
        old = state.workloads.get(key)
        if old is None or old.evicted:
            return None
        if _admitted(old) and old.admission is not None:
            return old
        key = old.replaces
    return None


def running_counts(wl: WorkloadInfo) -> dict[str, int]:
    """Pod set name -> the pods an admitted slice runs: its assigned count (the spec's when the assignment has
    none), at most the count left once reclaimable pods and a lowered count are taken off."""
    left = {ps.name: ps.count for ps in wl.pod_sets}
    spec = {ps.name: ps.count for ps in wl.spec_sets}
    out: dict[str, int] = {}
    if wl.admission is None:
        return out
    for psa in wl.admission.pod_set_assignments:
        assigned = psa.count if psa.count is not None else spec.get(psa.name, 0)
        out[psa.name] = max(0, min(assigned, left.get(psa.name, assigned)))
    return out


def provisioned(state: ClusterState, wl: WorkloadInfo) -> dict[str, int]:
    """Pod set name -> the pods a request of ``wl`` need not ask for again (empty when it asks for all)."""
    if not delta_applies(state, wl):
        return {}
    old = baseline(state, wl)
    return running_counts(old) if old is not None else {}
