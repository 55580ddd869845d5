"""Per-pod ProvisioningRequest identity of an elastic Job's pods (Kueue v0.20's
``ElasticJobsViaWorkloadSlicesForProvisioningRequests``, alpha, off; KEP-14615).

Each slice of an elastic Job gets a ProvisioningRequest of its own (for the pods it adds), while the Job's pod
template is written once, at its first start. So, for an elastic Job's slice under the gate (and
``ElasticJobsViaWorkloadSlices``): starting the Job leaves out of its template what names one request — the
``autoscaling.x-k8s.io/consume-provisioning-request`` annotation and the node selectors the Ready checks'
``podSetUpdates`` add — keeping the provisioning class annotation and the flavors' node labels, which no slice
changes (:func:`template_update`); and when the elastic-job gate of a pod is lifted, the pod is given the consume
and class annotations and the node selectors of the admitted slice's checks for its pod set, those it lacks
(:func:`identity_ops`). A pod already naming another request, or holding one of those node-selector keys at
another value (which the apiserver would not let change on a gated pod), stays gated and is not counted
(:func:`compatible`). Gate off, the template carries the first admission's updates whole and pods get nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from connectors.k8s.json_patch import map_ops
from events import objects as o
from projections import gates
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo

CONSUMES_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
IDENTITY_ANNOTATIONS = (CONSUMES_ANNOTATION, CLASS_ANNOTATION)


def per_pod(state: ClusterState, wl: WorkloadInfo) -> bool:
    """Whether ``wl``'s pods take their request identity one by one: an elastic Job's slice (annotated
    ``kueue.x-k8s.io/elastic-job: "true"``) with both gates on."""
    return (wl.elastic and state.gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
            and state.gate(gates.ELASTIC_JOBS_FOR_PROVISIONING_REQUESTS))


def template_update(update: o.PodSetUpdate) -> o.PodSetUpdate:
    """A check's update as it goes onto an elastic Job's shared template: no node selector, no consume
    annotation."""
    annotations = {k: v for k, v in update.annotations.items() if k != CONSUMES_ANNOTATION}
    return msgspec.structs.replace(update, annotations=annotations, node_selector={})


class PodAdmission(msgspec.Struct, frozen=True):
    """What a pod of one pod set takes from its admitted slice's checks as its gate is lifted."""

    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}


def pod_admission(wl: WorkloadInfo, pod_set: str) -> PodAdmission | None:
    """The request identity and node selectors the Ready checks of ``wl`` give pod set ``pod_set``, in check-name
    order; None when two updates give one key different values (no pod of it is released then). Every update
    naming the pod set counts, a check's second one too: Kueue's elastic-job ungater merges them all
    (``admissionUpdateForPodSet`` in ``pkg/controller/elasticjobs/elastic_job_ungater.go``), unlike a job's
    start, which takes a check's first only."""
    annotations: dict[str, str] = {}
    selector: dict[str, str] = {}
    for name in sorted(wl.check_states):
        state = wl.check_states[name]
        if state.state != "Ready":
            continue
        for upd in state.pod_set_updates:
            if upd.name != pod_set:
                continue
            for key in IDENTITY_ANNOTATIONS:
                value = upd.annotations.get(key)
                if value is not None:
                    if annotations.setdefault(key, value) != value:
                        return None
            for key, value in upd.node_selector.items():
                if selector.setdefault(key, value) != value:
                    return None
    return PodAdmission(annotations, selector)


def _maps(pod: Mapping[str, Any]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    return ((pod.get("metadata") or {}).get("annotations") or {}), ((pod.get("spec") or {}).get("nodeSelector") or {})


def compatible(pod: Mapping[str, Any], admission: PodAdmission) -> bool:
    """Whether ``pod`` (as the apiserver returns it) can take ``admission``: no annotation or node-selector key of
    it already at another value."""
    annotations, selector = _maps(pod)
    return (all(annotations.get(k, v) == v for k, v in admission.annotations.items())
            and all(selector.get(k, v) == v for k, v in admission.node_selector.items()))


def identity_ops(pod: Mapping[str, Any], admission: PodAdmission) -> list[dict[str, Any]]:
    """The JSON patch adding to ``pod`` the annotations and node selectors of ``admission`` it lacks."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return [*map_ops("/metadata/annotations", meta.get("annotations"), admission.annotations),
            *map_ops("/spec/nodeSelector", spec.get("nodeSelector"), admission.node_selector)]


def identities(state: ClusterState, wl: WorkloadInfo, pod_sets: Mapping[str, int]
               ) -> dict[str, PodAdmission | None] | None:
    """Per pod set of ``pod_sets``, what its pods take as their gate is lifted (:func:`pod_admission`); None when
    ``wl``'s pods take nothing (:func:`per_pod` false)."""
    if not per_pod(state, wl):
        return None
    return {name: pod_admission(wl, name) for name in sorted(pod_sets)}


def able(pods: Sequence[dict[str, Any]], identities: Mapping[str, PodAdmission | None],
         pod_set: Callable[[dict[str, Any]], str], gated: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """``pods`` without the ``gated`` ones that cannot take their pod set's identity (conflicting checks, or a
    value of their own in the way): Kueue's elastic-job ungater leaves them gated and counts them for nothing."""
    out = []
    for pod in pods:
        if gated(pod):
            admission = identities.get(pod_set(pod))
            if admission is None or not compatible(pod, admission):
                continue
        out.append(pod)
    return out

