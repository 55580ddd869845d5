"""A Workload's pod templates name each container's env variable once, as Kueue writes them.

A Pod tolerates one env name given twice (the last value counts), and Job authors write such templates; Kueue's
Workload CRD keys a container's ``env`` by name, so Kueue writes every Workload's pod sets with the repetitions
folded (``SanitizePodSets``, kubernetes-sigs/kueue#7425, in every release from 0.13): one entry per name, where the
name first stood, with its last value — for containers and init containers. The job itself keeps its template.
Applied once, where every integration's Workload body is finished (:mod:`connectors.k8s.workload_body`).
"""

from __future__ import annotations

from typing import Any


def deduplicated(workload: dict[str, Any]) -> dict[str, Any]:
    """``workload`` (a Workload body about to be written, plain data) with its pod templates' env folded as above,
    in place; returned for chaining."""
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        spec = ((pod_set or {}).get("template") or {}).get("spec") or {}
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or []:
                env = container.get("env") if isinstance(container, dict) else None
                if env:
                    container["env"] = _one_per_name(env)
    return workload


def _one_per_name(env: list[Any]) -> list[Any]:
    last: dict[Any, Any] = {}  # insertion-ordered: each name where it first stood
    for entry in env:
        last[entry.get("name") if isinstance(entry, dict) else None] = entry
    return list(last.values()) if len(last) < len(env) else env
