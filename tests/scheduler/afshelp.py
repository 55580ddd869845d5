"""A small Admission Fair Sharing cluster built event by event, for the tests of its history (tracking, compaction):
one namespace ``ns``, one flavor ``f1``, ClusterQueues that do or do not order by usage, LocalQueues that may carry
a persisted consumed usage, and workloads that reserve (and are admitted) at a given time."""

from __future__ import annotations

import msgspec

from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
MIN = 60_000
KQ = "kueue.x-k8s.io/v1beta2"


def apply(state: ClusterState, *events: ev.AnyEvent) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def document(stanza: dict | None, anchor: bool = True) -> dict:
    """A v1beta2 Configuration, with ``admissionFairSharing: stanza`` unless None."""
    doc: dict = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                 "featureGates": {"AdmissionFairSharingAnchorAtQuotaReservation": anchor}}
    if stanza is not None:
        doc["admissionFairSharing"] = stanza
    return doc


def configure(state: ClusterState, t: int, stanza: dict | None, anchor: bool = True) -> None:
    apply(state, ev.ConfigRecorded(time=t, document=document(stanza, anchor), writer="test",
                                   id=f"config-{state.offset}"))


def upsert(state: ClusterState, d: dict, t: int) -> None:
    obj = msgspec.convert(d, o.KueueObject)
    apply(state, ev.ObjectUpserted(time=t, key=obj.key, obj=obj))


def cluster_queue(name: str, usage_based: bool, cpu_quota: int) -> dict:
    spec: dict = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": cpu_quota}]}]}]}
    if usage_based:
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    return {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cq: str, consumed_cpu: int | None = None) -> dict:
    d: dict = {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "ns"},
               "spec": {"clusterQueue": cq}}
    if consumed_cpu is not None:
        d["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {"cpu": str(consumed_cpu)}, "lastUpdate": "2023-01-01T00:00:00Z"}}}
    return d


def reserve(state: ClusterState, name: str, lq: str, cq: str, cpu: str, t: int, admit: bool = True) -> None:
    """Workload ``ns/name`` of LocalQueue ``lq`` requesting ``cpu`` reserves it in ``cq`` at ``t`` (and is admitted)."""
    w = {"apiVersion": KQ, "kind": "Workload", "metadata": {
        "name": name, "namespace": "ns", "uid": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"queueName": lq, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}
    upsert(state, w, t)
    admission = o.Admission(cluster_queue=cq, pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "f1"}, count=1, resource_usage={"cpu": cpu})])
    apply(state, ev.QuotaReserved(time=t, key=f"ns/{name}", admission=admission, cycle=1, input=0))
    if admit:
        apply(state, ev.WorkloadAdmitted(time=t, key=f"ns/{name}", cycle=1, input=0))
