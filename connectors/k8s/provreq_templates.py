"""The whole PodTemplate of a ProvisioningRequest pod set: the decision's, over the pod set's stored template.

Kueue's check controller writes a request's PodTemplate from the Workload pod set's whole template (its
``createPodTemplate``: ``Template: ps.Template``, then the admission's node selector, tolerations, labels and
gates merged in and limits copied into missing requests). The decision (:func:`kueue_es.scheduler.provisioning.
pod_template`) derives those from the fold's view of the template, which models only what Kueue's decisions read
(requests, node selector, tolerations, affinity...): written alone it dropped every container's command, args, env
and volume mounts, and the pod's volumes, topology spread constraints and the rest, so the autoscaler was asked for
capacity for pods unlike the Workload's (a zonal volume or a spread constraint it could not see), and the template
was not the pod set's (Kueue's provisioning integration test compares their containers).

So the applier reads the Workload as the apiserver holds it and keeps, from the pod set's template, every field the
decision does not decide; the decided ones (template labels and annotations, ``nodeSelector``, ``tolerations``,
``schedulingGates``, each container's ``requests`` and ``limits``) are the decision's, so a field the decision left
out (an earlier admission's annotation, the template's own gates) stays out.
"""

from __future__ import annotations

from typing import Any

DECIDED_META = ("labels", "annotations")
DECIDED_SPEC = ("nodeSelector", "tolerations", "schedulingGates")
DECIDED_RESOURCES = ("requests", "limits")


def _decided(stored: dict[str, Any], derived: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``stored`` less ``keys``, with ``derived``'s values of ``keys`` (those it carries, not empty)."""
    out = {k: v for k, v in stored.items() if k not in keys}
    out.update((k, derived[k]) for k in keys if derived.get(k))
    return out


def _containers(stored: list[dict[str, Any]], derived: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(stored) != len(derived):  # not the template the decision was derived from: the decision's
        return derived
    out = []
    for s, d in zip(stored, derived, strict=True):
        resources = _decided(s.get("resources") or {}, d.get("resources") or {}, DECIDED_RESOURCES)
        out.append({**s, "resources": resources} if resources or "resources" in s else dict(s))
    return out


def whole_template(derived: dict[str, Any], stored: dict[str, Any] | None) -> dict[str, Any]:
    """The PodTemplate body ``derived`` (the decision's, as JSON) with what ``stored`` (the pod set's ``template``
    in the stored Workload; None: not found, ``derived`` as it is) holds beyond the decided fields."""
    if stored is None:
        return derived
    template = derived.get("template") or {}
    d_meta, d_spec = template.get("metadata") or {}, template.get("spec") or {}
    s_spec = stored.get("spec") or {}
    spec = _decided(s_spec, d_spec, DECIDED_SPEC)
    for kind in ("initContainers", "containers"):
        if s_spec.get(kind) or d_spec.get(kind):
            spec[kind] = _containers(s_spec.get(kind) or [], d_spec.get(kind) or [])
    meta = _decided(stored.get("metadata") or {}, d_meta, DECIDED_META)
    return {**derived, "template": {"metadata": meta, "spec": spec}}


def stored_templates(workload: dict[str, Any], name_of: Any) -> dict[str, dict[str, Any]]:
    """PodTemplate name (``name_of(pod set name)``) -> the pod set's stored ``template``, for a Workload as JSON."""
    return {name_of(ps.get("name", "")): ps.get("template") or {}
            for ps in (workload.get("spec") or {}).get("podSets") or []}
