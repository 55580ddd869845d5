"""What Kueue's Pod webhook reads and writes of a pod group's metadata: its name and size, each Pod's role and
index.

No dependencies on the rest of the pod integration, so the webhook (:mod:`connectors.k8s.pod_webhook`) and the
group's decisions (:mod:`connectors.k8s.pod_group`) share it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
"""A group's Pod's index in its group: the rank the topology ungater places it by."""
POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
"""Names the label whose value the Pod webhook copies into :data:`POD_INDEX_LABEL` (under TAS)."""

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def group_name(labels: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> str:
    """The pod group a Pod is in ("" none): under ``WorkloadIdentifierAnnotations`` (``annotations`` given) its
    ``kueue.x-k8s.io/pod-group-name`` annotation when set, else (and with the gate off) its label of that key, as
    Kueue's ``GetPodGroupName`` reads it."""
    if annotations:
        named = annotations.get(GROUP_LABEL)
        if named:
            return named
    return labels.get(GROUP_LABEL, "")


def group_path(annotations: Mapping[str, str] | None) -> tuple[str, str]:
    """(the field path, the word) of where a Pod names its group, as :func:`group_name` reads it."""
    if annotations and annotations.get(GROUP_LABEL):
        return f"metadata.annotations[{GROUP_LABEL}]", "annotation"
    return f"metadata.labels[{GROUP_LABEL}]", "label"


def total_count(annotations: dict[str, str]) -> int:
    """The group's size as a Pod states it; ValueError (Kueue's words) unless a whole number above 0."""
    raw = annotations.get(TOTAL_COUNT_ANNOTATION)
    if raw is None:
        raise ValueError(f"failed to extract '{TOTAL_COUNT_ANNOTATION}' annotation")
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise ValueError(f'strconv.Atoi: parsing "{raw}": invalid syntax')
    if int(raw) < 1:
        raise ValueError(f"incorrect annotation value '{TOTAL_COUNT_ANNOTATION}={raw}': group total count should be "
                         "greater than zero")
    return int(raw)


def metadata_errors(labels: dict[str, str], annotations: dict[str, str], annotation_first: bool = False
                    ) -> list[str]:
    """Why Kueue's Pod webhook refuses a Pod's group name and total count (empty: it does not), as Kueue words
    each field error. ``annotation_first``: ``WorkloadIdentifierAnnotations``, under which the group may be named
    in an annotation (:func:`group_name`)."""
    named_in = annotations if annotation_first else None
    label_path, word = group_path(named_in)
    both = f"both the '{TOTAL_COUNT_ANNOTATION}' annotation and the '{GROUP_LABEL}' {word} should be set"
    name, count = group_name(labels, named_in), annotations.get(TOTAL_COUNT_ANNOTATION)
    annotation_path = f"metadata.annotations[{TOTAL_COUNT_ANNOTATION}]"
    if not name:
        return [f"{label_path}: Required value: {both}"] if count is not None else []
    errors = []
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        errors.append(f'{label_path}: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                      "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                      "character (e.g. 'example.com', regex used for validation is "
                      r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    if count is None:
        return [*errors, f"{annotation_path}: Required value: {both}"]
    try:
        total_count(annotations)
    except ValueError as exc:
        errors.append(f'{annotation_path}: Invalid value: "{count}": {exc}')
    return errors


# --- roles ------------------------------------------------------------------------------------------------------

def spec_shape(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What admission looks at in a pod spec (Kueue's ``SpecShape``): each container's and init container's
    requests and ports, the node selector, affinity, tolerations, runtime class, priority, topology spread
    constraints, overhead and resource claims; keys sorted, an absent or empty field as None."""
    containers = [_container_shape(c) for c in spec.get("containers") or []] or None
    init = [_container_shape(c) for c in spec.get("initContainers") or []] or None
    return {
        "affinity": spec.get("affinity") or None, "containers": containers, "initContainers": init,
        "nodeSelector": spec.get("nodeSelector") or None, "overhead": spec.get("overhead") or None,
        "priority": spec.get("priority"), "resourceClaims": spec.get("resourceClaims") or None,
        "runtimeClassName": spec.get("runtimeClassName"), "tolerations": spec.get("tolerations") or None,
        "topologySpreadConstraints": spec.get("topologySpreadConstraints") or None}


def role_hash(spec: dict[str, Any]) -> str:
    """The role of a Pod with this spec (as the apiserver serializes it): the first 8 hex digits of the SHA-256 of
    the JSON of its :func:`spec_shape`, keys in Kueue's order (a map's sorted, a struct's as the apiserver
    writes them), absent fields as null."""
    text = json.dumps({"spec": spec_shape(spec)}, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _container_shape(container: dict[str, Any]) -> dict[str, Any]:
    requests = (container.get("resources") or {}).get("requests") or None
    return {"ports": container.get("ports") or None, "resources": {"requests": requests}}


def shape_changes(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any], path: str) -> list[tuple[str, Any]]:
    """Where a serving group's pod spec changes what admission looks at (its :func:`spec_shape`), as Kueue's
    ``ValidateImmutablePodGroupPodSpec`` finds it: ``(field path, new value)`` for each field of the shape that
    differs, a container list of another length as a whole, else container by container. In sorted field order
    (Kueue walks a Go set, in random order)."""
    return _changes(spec_shape(old_spec), spec_shape(new_spec), path)


def _changes(old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for name in sorted(set(old) | set(new)):
        at, before, after = f"{path}.{name}", old.get(name), new.get(name)
        if name == "resources":  # a container's: its requests compared as one field
            found += _changes(before, after, at)
        elif name in ("containers", "initContainers") and len(before or []) == len(after or []):
            for i, (b, a) in enumerate(zip(before or [], after or [], strict=True)):
                found += _changes(b, a, f"{at}[{i}]")
        elif before != after:
            found.append((at, after))
    return found


def role_annotation_patch(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that records the Pod's role (:func:`role_hash`) in ``kueue.x-k8s.io/role-hash``, as
    Kueue's webhook does for every Pod it makes Kueue's, in a group or not (``Default`` calls ``addRoleHash``
    for each Pod it gates; a Pod that joins a group later keeps the role it was made with); empty for one
    naming its role already (Kueue's ``getRoleHash`` answers with it: a client names its roles to match the
    pod sets of a Workload it built)."""
    meta = pod.get("metadata") or {}
    if ROLE_HASH_ANNOTATION in (meta.get("annotations") or {}):
        return []
    role = role_hash(pod.get("spec") or {})
    if meta.get("annotations") is None:
        return [{"op": "add", "path": "/metadata/annotations", "value": {ROLE_HASH_ANNOTATION: role}}]
    return [{"op": "add", "path": "/metadata/annotations/" + ROLE_HASH_ANNOTATION.replace("/", "~1"), "value": role}]
