"""What starting a Job adds to one pod set's template, as plain data (Kueue's PodSetInfo, §7.2 rule 8).

From the pod set's assignment: the flavors' ``nodeLabels`` (the first flavor, by name, wins a key) and
tolerations, the label ``kueue.x-k8s.io/podset`` and, under Kueue's ``AssignQueueLabelsForPods`` gate,
``local-queue-name`` and ``cluster-queue-name`` (the last only when the ClusterQueue's name is a DNS-1123 label),
and ``kueue.x-k8s.io/multikueue-worker-workload-pod: "true"`` when the Workload is a MultiKueue manager's copy on a
worker (labelled ``kueue.x-k8s.io/multikueue-origin``, Kueue #10242), so a worker's pods show they run for a manager.
While Kueue's TopologyAwareScheduling gate is on (in the recorded Configuration; off, none of this): the
annotation ``kueue.x-k8s.io/workload`` (how the ungater and the node-failure rules find a workload's pods)
and, with a ``topologyAssignment``, the scheduling gate ``kueue.x-k8s.io/topology`` that the ungater lifts pod
by pod and, when TAS is only implied (no required, preferred or unconstrained request), the annotation
``kueue.x-k8s.io/podset-unconstrained-topology: "true"``, by which such a pod is known as TAS's (no label:
Kueue stopped setting ``kueue.x-k8s.io/tas`` in v0.14, #6895, and reading it in v0.17, #8770). For an elastic
Job's slice (``ElasticJobsViaWorkloadSlices``), the annotation ``kueue.x-k8s.io/workload-slice-name`` naming
its chain (:func:`connectors.k8s.workload_slices.pod_slice_name`), by which every slice's pods are the Job's.
Then every Ready check's ``podSetUpdates`` for the pod set, in check-name order. Labels, annotations and the
node selector merge only without conflict (one key, two values): a conflict is a :class:`MergeConflict`, which
fails the start for good; tolerations (an empty operator counting as ``Equal``, the first kept as written) and
gates are deduplicated. Its message is Kueue's error text as the Workload's ``FailedToStart`` shows it
(pkg/podset ``BadPodSetsUpdateError``, whatever the merge): a check's update that conflicts with what comes
before it is named (``in admission check "NAME": ...``, the job reconciler's ``getPodSetsInfoFromStatus``),
what conflicts with the job's own template is not.
"""

from __future__ import annotations

import msgspec

from connectors.k8s import elastic_provreq
from events import objects as o
from events.field_errors import go_quote
from events.labels import is_dns_label
from events.tolerations import added as added_tolerations
from projections import gates
from projections.cluster import ClusterState
from projections.workloads import (
    MULTIKUEUE_ORIGIN_LABEL,
    TOPOLOGY_GATE,
    WORKLOAD_ANNOTATION,
    WorkloadInfo,
)

UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
PODSET_LABEL = "kueue.x-k8s.io/podset"
LQ_LABEL = "kueue.x-k8s.io/local-queue-name"
CQ_LABEL = "kueue.x-k8s.io/cluster-queue-name"
SLICE_NAME_ANNOTATION = "kueue.x-k8s.io/workload-slice-name"
MULTIKUEUE_WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"


class MergeConflict(Exception):
    """Two sources give one key different values; the message is Kueue's, as ``FailedToStart`` shows it."""


UPDATE_CONFLICT = "invalid admission check PodSetUpdate"
"""Kueue's ``ErrInvalidPodSetUpdate``: every conflict of a merge, onto a template as between checks."""


class PodSetInfo(msgspec.Struct, kw_only=True):
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[o.Toleration] = []
    scheduling_gates: list[dict[str, str]] = []


def _dns_label(value: str) -> bool:
    return is_dns_label(value)


def queue_labels(state: ClusterState, wl: WorkloadInfo) -> dict[str, str]:
    """The labels naming the workload's queues on its pods (none with ``AssignQueueLabelsForPods`` off)."""
    if not state.gate(gates.ASSIGN_QUEUE_LABELS_FOR_PODS):
        return {}
    labels = {LQ_LABEL: wl.queue_name}
    if wl.admission is not None and _dns_label(wl.admission.cluster_queue):
        labels[CQ_LABEL] = wl.admission.cluster_queue
    return labels


def workload_labels(state: ClusterState, wl: WorkloadInfo) -> dict[str, str]:
    """The labels every pod of the workload gets whatever its pod set: the queues' and, on a MultiKueue copy, the
    worker's mark."""
    labels = queue_labels(state, wl)
    if MULTIKUEUE_ORIGIN_LABEL in wl.labels:
        labels[MULTIKUEUE_WORKER_POD_LABEL] = "true"
    return labels


def _merge_map(field: str, into: dict[str, str], other: dict[str, str]) -> dict[str, str]:
    """(Kueue reports one conflicting key of a Go map, any; kueue-es the first by name.)"""
    for k in sorted(other):
        if k in into and into[k] != other[k]:
            raise MergeConflict(f"{UPDATE_CONFLICT}: conflict for {field}: conflict for key={k}, value1={into[k]}, "
                                f"value2={other[k]}")
    return {**into, **{k: v for k, v in other.items() if k not in into}}


def merge(into: PodSetInfo, other: PodSetInfo) -> PodSetInfo:
    """``into`` with ``other`` added (see the module docstring); raises :class:`MergeConflict`."""
    return PodSetInfo(
        annotations=_merge_map("annotations", into.annotations, other.annotations),
        labels=_merge_map("labels", into.labels, other.labels),
        node_selector=_merge_map("nodeSelector", into.node_selector, other.node_selector),
        tolerations=added_tolerations(into.tolerations, other.tolerations),
        scheduling_gates=into.scheduling_gates + [g for g in other.scheduling_gates
                                                  if g not in into.scheduling_gates],
    )


def _implied_tas(req: o.PodSetTopologyRequest | None) -> bool:
    return req is None or not (req.required or req.preferred or req.unconstrained is not None)


def from_assignment(state: ClusterState, wl: WorkloadInfo, psa: o.PodSetAssignment,
                    slice_name: str | None = None) -> PodSetInfo:
    """What the assignment itself adds (before the checks' updates); ``slice_name``: an elastic slice's chain."""
    node_selector: dict[str, str] = {}
    tolerations: list[o.Toleration] = []
    for name in sorted(set(psa.flavors.values())):
        flavor = state.flavors.get(name)
        if flavor is None:
            continue
        for k, v in sorted(flavor.spec.node_labels.items()):
            node_selector.setdefault(k, v)
        tolerations = added_tolerations(tolerations, flavor.spec.tolerations)
    labels = {PODSET_LABEL: psa.name, **workload_labels(state, wl)}
    tas = state.tas_enabled  # Kueue adds nothing of TAS while its TopologyAwareScheduling gate is off
    # the Pods name their Workload under TAS, and for Kueue's UnscheduledPodsTracker (:mod:`projections.pods_scheduled`)
    annotations = {WORKLOAD_ANNOTATION: wl.name} if tas or state.tracks_pods_scheduled else {}
    if slice_name:
        annotations[SLICE_NAME_ANNOTATION] = slice_name
    pod_gates: list[dict[str, str]] = []
    if tas and psa.topology_assignment is not None:
        pod_gates.append({"name": TOPOLOGY_GATE})
        ps = next((p for p in wl.pod_sets if p.name == psa.name), None)
        if _implied_tas(ps.topology if ps is not None else None):
            annotations[UNCONSTRAINED_ANNOTATION] = "true"
    return PodSetInfo(annotations=annotations, labels=labels, node_selector=node_selector,
                      tolerations=tolerations, scheduling_gates=pod_gates)


def start_info(state: ClusterState, wl: WorkloadInfo, psa: o.PodSetAssignment,
               slice_name: str | None = None) -> PodSetInfo:
    """Everything starting the pod set adds: the assignment's, then the checks' updates (in name order) — for an
    elastic slice whose pods take their ProvisioningRequest one by one, without what names one request
    (:mod:`connectors.k8s.elastic_provreq`)."""
    info = from_assignment(state, wl, psa, slice_name)
    per_pod = slice_name is not None and elastic_provreq.per_pod(state, wl)
    for name in sorted(wl.check_states):
        if wl.check_states[name].state != "Ready":
            continue
        for upd in wl.check_states[name].pod_set_updates:
            if upd.name == psa.name:
                if per_pod:
                    upd = elastic_provreq.template_update(upd)
                try:
                    info = merge(info, PodSetInfo(annotations=upd.annotations, labels=upd.labels,
                                                  node_selector=upd.node_selector, tolerations=list(upd.tolerations)))
                except MergeConflict as exc:
                    raise MergeConflict(f"in admission check {go_quote(name)}: {exc}") from exc
                break  # a check's first update of the pod set is its only one (Kueue's start takes no other)
    return info


def onto_template(template: o.PodTemplateSpec, info: PodSetInfo) -> PodSetInfo:
    """The template's labels, annotations, node selector, tolerations and gates once ``info`` is merged in (a
    conflict names no check: Kueue's ``podset.Merge`` in the job's ``RunWithPodSetsInfo``)."""
    current = PodSetInfo(annotations=dict(template.metadata.annotations), labels=dict(template.metadata.labels),
                         node_selector=dict(template.spec.node_selector), tolerations=list(template.spec.tolerations),
                         scheduling_gates=list(template.spec.scheduling_gates))
    return merge(current, info)
