"""What the log keeps of the busiest kinds, Pods and Nodes, so that their churn does not flood it.

Kueue-es reads Pods for topology-aware scheduling (the usage of bound pods that TAS does not manage, which pods of
a TAS workload still run on a node for node failure, the gated pods the ungater places) and, under
WaitForPodsReadyUnscheduledTimeout, whether a Kueue workload's pods are scheduled (:mod:`projections.pods_scheduled`).
So:

* the watch asks the apiserver for non-terminal pods only (``Resource.field_selector``): a pod that succeeds or
  fails leaves the selection, and the log records it as deleted — terminal and deleted pods count the same
  everywhere TAS looks (but for a succeeded pod whose workload waits for its pods' scheduling:
  :mod:`connectors.k8s.succeeded_pods`);
* of the rest, a pod is kept only while it is bound to a node or belongs to a Kueue workload (its
  ``kueue.x-k8s.io/workload`` annotation or TAS scheduling gate); other pending pods are not in the log;
* a kept pod carries only what those rules read (:func:`pod_view`): Kueue's labels and annotations, the
  ranks (the completion index, a JobSet's Job index, a LeaderWorkerSet pod's worker index), the node, node
  selector and scheduling gates, the containers' resources and host ports (what Kueue's NodePorts check reads
  under SchedulerLibraryIntegration), the phase and deletion, and the status of its ``PodScheduled`` condition
  (WaitForPodsReadyUnscheduledTimeout: :mod:`projections.pods_scheduled`);
* a Node loses its annotations (agents keep rewriting them; nothing reads them);
* a ResourceClaim is kept only while it holds devices (``status.allocation``, which KueueDRADeviceFeasibility
  counts as taken), with nothing else of it;
* an update that changes none of that (a status heartbeat, a container restart count, a Node's
  lastHeartbeatTime) is not appended at all (:func:`same_content`).
"""

from __future__ import annotations

import msgspec

from events import objects as o
from projections.pods_scheduled import POD_SCHEDULED
from projections.workloads import WORKLOAD_ANNOTATION, topology_gated

KUEUE_PREFIX = "kueue.x-k8s.io/"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
"""A JobSet's pods: the index of their Job, which the ungater ranks them by with the completion index."""
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
"""A LeaderWorkerSet's pods: their index in their group, which the ungater ranks the workers by."""
RANK_LABELS = (COMPLETION_INDEX, JOB_INDEX, WORKER_INDEX)
TERMINAL = ("Succeeded", "Failed")
DEDUPLICATED = ("Pod", "Node", "ResourceClaim")
"""Kinds whose updates are dropped when the kept view did not change."""


def _kept_labels(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(KUEUE_PREFIX) or k in RANK_LABELS}


def _kept_annotations(annotations: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k.startswith(KUEUE_PREFIX)}


def _resources_only(containers: list[o.Container]) -> list[o.Container]:
    return [o.Container(name=c.name, resources=c.resources, restart_policy=c.restart_policy,
                        ports=[p for p in c.ports if p.host_port > 0]) for c in containers]


def wanted(pod: o.Pod) -> bool:
    """Whether TAS needs the pod at all (see the module docstring)."""
    if pod.status.phase in TERMINAL:
        return False
    if pod.spec.node_name or WORKLOAD_ANNOTATION in pod.metadata.annotations:
        return True
    return topology_gated(pod.spec.scheduling_gates)


def pod_view(pod: o.Pod) -> o.Pod | None:
    """The part of ``pod`` the log keeps, or None when it keeps none of it."""
    return kept_view(pod) if wanted(pod) else None


def kept_view(pod: o.Pod) -> o.Pod:
    """The part of ``pod`` the log keeps of a pod it keeps (a succeeded one too:
    :mod:`connectors.k8s.succeeded_pods`)."""
    m, s = pod.metadata, pod.spec
    return o.Pod(
        api_version=pod.api_version,
        metadata=o.ObjectMeta(name=m.name, namespace=m.namespace, uid=m.uid, resource_version=m.resource_version,
                              creation_timestamp=m.creation_timestamp, deletion_timestamp=m.deletion_timestamp,
                              labels=_kept_labels(m.labels), annotations=_kept_annotations(m.annotations)),
        spec=o.PodSpec(containers=_resources_only(s.containers), init_containers=_resources_only(s.init_containers),
                       node_selector=s.node_selector, overhead=s.overhead, resources=s.resources,
                       node_name=s.node_name, scheduling_gates=s.scheduling_gates),
        status=o.PodStatus(phase=pod.status.phase, conditions=[
            o.Condition(type=c.type, status=c.status) for c in pod.status.conditions if c.type == POD_SCHEDULED]),
    )


def view(obj: o.KObject) -> o.KObject | None:
    """What the log keeps of ``obj`` (None: treat it as absent)."""
    if isinstance(obj, o.Pod):
        return pod_view(obj)
    if isinstance(obj, o.ResourceClaim):
        if not obj.held():
            return None  # holds no device: nothing KueueDRADeviceFeasibility counts
        m = obj.metadata
        return msgspec.structs.replace(obj, metadata=o.ObjectMeta(
            name=m.name, namespace=m.namespace, uid=m.uid, resource_version=m.resource_version,
            creation_timestamp=m.creation_timestamp))
    if isinstance(obj, o.Node) and obj.metadata.annotations:
        return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, annotations={}))
    return obj


def same_content(old: o.KObject | None, new: o.KObject) -> bool:
    """``new`` says nothing ``old`` did not: only its resourceVersion differs (and its apiVersion, which list
    items omit and watch events carry)."""
    if old is None or type(old) is not type(new) or old.metadata.uid != new.metadata.uid:
        return False
    meta = msgspec.structs.replace(new.metadata, resource_version=old.metadata.resource_version)
    return msgspec.structs.replace(new, metadata=meta, api_version=old.api_version) == old
