"""Kueue's validating webhook for Pods (``vpod.kb.io`` at ``/validate--v1-pod``, CREATE and UPDATE): what Kueue's
manager refuses in a Pod, worded as it words it (Kubernetes field errors, several joined as ``[a, b]``).

Kueue registers it whatever its Configuration says; while the ``pod`` integration is off it allows every Pod, and
so does kueue-es. With it on, Kueue validates every Pod the webhook configuration selects (all namespaces but
``kube-system`` and its own), Kueue's or not (``pkg/controller/jobs/pod/pod_webhook.go`` ValidateCreate and
ValidateUpdate, with ``pkg/controller/jobframework/validation.go``):

* **on create, and again on every update**: the managed label ``kueue.x-k8s.io/managed``, when set, is ``"true"``;
  the pod group's label and ``kueue.x-k8s.io/pod-group-total-count`` annotation are both set or neither, the name
  a DNS-1123 subdomain and the total a whole number above 0 (:func:`connectors.k8s.pod_roles.metadata_errors`);
  the Pod's TAS annotations as a Job template's (:func:`connectors.k8s.job_validation.topology_errors`, under
  ``metadata.annotations``), whatever ``TopologyAwareScheduling`` says and with no bound from a pod count, as
  Kueue's ``validateTopologyRequest`` (``ValidateTASPodSetRequest`` alone); a group's Pod naming a prebuilt
  Workload names its group's ("prebuilt workload and pod group should be equal");
* **on create**: the ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/prebuilt-workload-name`` labels are DNS-1123
  subdomains and ``kueue.x-k8s.io/max-exec-time-seconds`` an integer above 0, as for a Job;
* **on update**: the rules Kueue holds every job it manages to (:func:`connectors.k8s.job_validation.generic_update_errors`),
  a Pod counting as suspended while it carries the ``kueue.x-k8s.io/admission`` scheduling gate: its queue name
  does not change once ungated, nor is it removed in a namespace with a LocalQueue ``default``; the prebuilt
  Workload's name and the maximum execution time do not change once ungated; a WorkloadPriorityClass is not added
  once ungated, nor ever removed. The group name does not change once set, and a Pod of a group annotated
  ``kueue.x-k8s.io/retriable-in-group: "false"`` keeps that.

The mutating Pod webhook (:mod:`connectors.k8s.pod_webhook`) refuses nothing, as Kueue's. Neither webhook compares
a group Pod's ``kueue.x-k8s.io/pod-group-pod-index`` with its total, as in Kueue. A Pod labelled
``kueue.x-k8s.io/managed: "true"`` whose controller an enabled integration runs is allowed with Kueue's
warning (:func:`managed_label_warnings`), on create and on update (there not while its parent holds it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from functools import partial
from typing import Any

from connectors.k8s import job_selection, job_validation, prebuilt
from connectors.k8s.pod_roles import group_name, group_path, metadata_errors
from connectors.k8s.pods_ready_validation import PodsReadyRule
from events import objects as o
from projections import gates
from projections.workloads import MANAGED_LABEL

PATH = "/validate--v1-pod"
WEBHOOK_NAME = "vpod.kb.io"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
RETRIABLE_IN_GROUP = "kueue.x-k8s.io/retriable-in-group"
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"

HasDefaultQueue = Callable[[str], Awaitable[bool]]


def _meta(pod: Mapping[str, Any], field: str) -> dict[str, str]:
    meta = pod.get("metadata")
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def gated(pod: Mapping[str, Any]) -> bool:
    """Kueue's Pod is suspended while its admission gate holds it back."""
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    return any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates or [])


def _as_job(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Pod as the generic job rules read a job: its metadata, suspended while gated."""
    return {"metadata": pod.get("metadata") or {}, "spec": {"suspend": gated(pod)}}


def _common(pod: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """What is checked on create and again on every update: the managed label, the group's metadata, the TAS
    annotations."""
    errors = []
    labels, annotations = _meta(pod, "labels"), _meta(pod, "annotations")
    if MANAGED_LABEL in labels and labels[MANAGED_LABEL] != "true":
        errors.append(job_validation.forbidden(f"metadata.labels[{MANAGED_LABEL}]",
                                               "managed label value can only be 'true'"))
    return (errors + metadata_errors(labels, annotations, _annotation_first(feature_gates))
            + _topology(annotations, feature_gates) + _prebuilt_of_its_group(pod, feature_gates))


def _prebuilt_of_its_group(pod: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """A group's Pod naming a prebuilt Workload names its group's (Kueue's ``validatePrebuiltWorkloadName``): the
    field it is named in is the annotation where the gate reads that first and it is set, else the label."""
    first = _annotation_first(feature_gates)
    annotations = _meta(pod, "annotations")
    name = prebuilt.name_in(o.ObjectMeta(name="", labels=_meta(pod, "labels"), annotations=annotations), first)
    group = _group(pod, feature_gates)
    if not group or not name or name == group:
        return []
    where = "annotations" if first and annotations.get(prebuilt.KEY) else "labels"
    return [job_validation.invalid(f"metadata.{where}[{prebuilt.KEY}]", name,
                                   "prebuilt workload and pod group should be equal")]


def _annotation_first(feature_gates: Mapping[str, bool]) -> bool:
    """``WorkloadIdentifierAnnotations``: a Pod may name its group in an annotation."""
    return gates.enabled(feature_gates, gates.WORKLOAD_IDENTIFIER_ANNOTATIONS)


def _group(pod: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> str:
    """The group a Pod names, as Kueue's ``GetPodGroupName`` reads it under the Configuration's gates."""
    return group_name(_meta(pod, "labels"), _meta(pod, "annotations") if _annotation_first(feature_gates) else None)


def _topology(annotations: Mapping[str, str], feature_gates: Mapping[str, bool]) -> list[str]:
    """A Pod's TAS annotations, held to a Job template's rules whatever ``TopologyAwareScheduling`` says and
    whether Kueue manages the Pod or not (Kueue's Pod webhook checks them unconditionally), with no bound from a
    pod count (it does not compare a slice size with the Pod's or its group's)."""
    return job_validation.topology_errors(annotations, None, partial(gates.enabled, feature_gates),
                                          path="metadata.annotations")


def create_errors(pod: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                  pods_ready: PodsReadyRule | None = None) -> list[str]:
    """What Kueue refuses in a Pod being created, in its order (``pods_ready``: the
    ``kueue.x-k8s.io/wait-for-pods-ready`` checks in force, :mod:`connectors.k8s.pods_ready_validation`)."""
    return job_validation.generic_create_errors(pod, feature_gates, pods_ready=pods_ready) + _common(pod, feature_gates)


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                  default_queue: bool = False, pods_ready: PodsReadyRule | None = None) -> list[str]:
    """What Kueue refuses in the update of Pod ``old`` into ``new``, in its order. ``default_queue``: the
    namespace has a LocalQueue ``default``; ``pods_ready``: as for :func:`create_errors` (a Pod is suspended
    while gated)."""
    errors = job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                  default_queue=default_queue, pods_ready=pods_ready)
    errors += _common(new, feature_gates)
    errors += _retriable_update(old, new, feature_gates)
    old_group, new_group = _group(old, feature_gates), _group(new, feature_gates)
    if old_group and new_group != old_group:
        path, _ = group_path(_meta(new, "annotations") if _annotation_first(feature_gates) else None)
        errors.append(job_validation.invalid(path, new_group, job_validation.IMMUTABLE))
    return errors


def _retriable_update(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool]
                      ) -> list[str]:
    """A group's Pod that may not be retried stays so."""
    def unretriable(pod: Mapping[str, Any]) -> bool:
        return _meta(pod, "annotations").get(RETRIABLE_IN_GROUP) == "false"

    if _group(new, feature_gates) and unretriable(old) and not unretriable(new):
        return [job_validation.forbidden(f"metadata.annotations[{RETRIABLE_IN_GROUP}]",
                                         "unretriable pod group can't be converted to retriable")]
    return []


OWNED_MANAGED_WARNING = (f"pod owner is managed by kueue, label '{MANAGED_LABEL}=true' might lead to "
                         "unexpected behaviour")


def managed_label_warnings(new: Mapping[str, Any], old: Mapping[str, Any] | None, frameworks: Collection[str],
                           external: Collection[tuple[str, str]] = ()) -> list[str]:
    """Kueue's ``warningForPodManagedLabel``: a Pod labelled ``kueue.x-k8s.io/managed: "true"`` whose
    controller is of a kind an enabled integration runs (``frameworks``, or an ``external`` kind: Kueue's
    ``IsOwnerManagedByKueueForObject``) is allowed with a warning, its parent's Workload being the one that
    admits it; on update, not while ``kueue.x-k8s.io/pod-suspending-parent`` says its parent holds it."""
    if _meta(new, "labels").get(MANAGED_LABEL) != "true":
        return []
    if old is not None and SUSPENDING_PARENT in _meta(new, "annotations"):
        return []
    meta = new.get("metadata")
    owner = job_selection.raw_controller(meta if isinstance(meta, dict) else {})
    return [OWNED_MANAGED_WARNING] if job_selection.kueue_owner(owner, frameworks, external) else []


async def review(body: bytes, feature_gates: Mapping[str, bool], has_default_queue: HasDefaultQueue, *,
                 pods_ready: PodsReadyRule | None = None, frameworks: Collection[str] = (),
                 external: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) for a Pod, the pod integration on: allowed, or refused (403) with Kueue's
    field errors; with :func:`managed_label_warnings` under the enabled ``frameworks`` and ``external``
    kinds."""
    return await job_validation.answer(
        body, has_default_queue, lambda new: create_errors(new, feature_gates, pods_ready=pods_ready),
        lambda old, new, default: update_errors(old, new, feature_gates, default_queue=default,
                                                pods_ready=pods_ready),
        lambda new, old: managed_label_warnings(new, old, frameworks, external))


Reviewer = Callable[[bytes], Awaitable[dict[str, Any]]]


def reviewer(feature_gates: Mapping[str, bool], has_default_queue: HasDefaultQueue, *,
             pods_ready: PodsReadyRule | None = None, frameworks: Collection[str] = (),
             external: Collection[tuple[str, str]] = ()) -> Reviewer:
    """:func:`review` under these gates and integrations, the default LocalQueue asked of
    ``has_default_queue``."""

    async def answer(body: bytes) -> dict[str, Any]:
        return await review(body, feature_gates, has_default_queue, pods_ready=pods_ready,
                            frameworks=frameworks, external=external)

    return answer
