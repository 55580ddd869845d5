"""The ``kueue.x-k8s.io/resource-in-use`` finalizer: what still uses a queue object, from the projection.

Kueue's controllers put the finalizer on every ClusterQueue, ResourceFlavor, AdmissionCheck and Topology and,
once the object is being deleted, take it off only when nothing uses it any more:

* a ClusterQueue — while any workload reserves quota in it (admitted or not, until it finishes or is evicted
  and gives the quota back);
* a ResourceFlavor — while any ClusterQueue (terminating ones included) lists it in a resource group in force
  (under DynamicQuotaOrchestration, its ``status.effectiveQuotas``' when set: Kueue asks its cache, which holds
  those);
* an AdmissionCheck — while any ClusterQueue's ``admissionChecksStrategy`` names it;
* a Topology — while any ResourceFlavor (terminating ones included) names it in ``topologyName``.

Kueue's Topology controller is one of its TAS controllers, which it sets up only under the
``TopologyAwareScheduling`` gate: with the gate off nothing adds the finalizer to a Topology or takes
it off one.
"""

from __future__ import annotations

from typing import Literal

from events import objects as o
from projections import effective_quotas
from projections.cluster import ClusterState

FINALIZER = "kueue.x-k8s.io/resource-in-use"
KINDS = ("ClusterQueue", "ResourceFlavor", "AdmissionCheck", "Topology")


def users(state: ClusterState, kind: str, name: str) -> list[str]:
    """What still uses the ``kind`` object ``name`` (sorted; empty: the finalizer may go)."""
    if kind == "ClusterQueue":
        return sorted(state.reserving.get(name, {}))
    if kind == "ResourceFlavor":
        dynamic = state.dynamic_quotas
        return sorted(cq for cq, obj in state.cluster_queues.items()
                      if any(fq.name == name for rg in effective_quotas.in_force(obj, dynamic).spec.resource_groups
                             for fq in rg.flavors))
    if kind == "AdmissionCheck":
        return sorted(cq for cq, obj in state.cluster_queues.items() if obj.spec.admission_checks_strategy
                      and any(r.name == name for r in obj.spec.admission_checks_strategy.admission_checks))
    if kind == "Topology":
        return sorted(f for f, obj in state.flavors.items() if obj.spec.topology_name == name)
    raise ValueError(f"no resource-in-use finalizer on {kind}")


def finalizer_action(state: ClusterState, kind: str, obj: o.KObject) -> Literal["add", "remove"] | None:
    """What to do with the finalizer of ``obj`` now: add it (alive, without it), remove it (deleting, unused);
    nothing on a Topology while TopologyAwareScheduling is off."""
    if kind == "Topology" and not state.tas_enabled:
        return None  # no Topology controller runs
    meta = obj.metadata
    has = FINALIZER in meta.finalizers
    if not meta.deletion_timestamp:
        return None if has else "add"
    if has and not users(state, kind, meta.name):
        return "remove"
    return None


def objects(state: ClusterState, kind: str) -> dict[str, o.KObject]:
    """The projection's table of ``kind`` objects, by name."""
    return getattr(state, _TABLES[kind])


_TABLES = {"ClusterQueue": "cluster_queues", "ResourceFlavor": "flavors", "AdmissionCheck": "admission_checks",
           "Topology": "topologies"}
