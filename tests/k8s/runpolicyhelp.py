"""Pieces of the jobs with a ``runPolicy`` (the MPIJob, the training operator's jobs) as their tests write them:
the two kinds share these shapes, so their tests share the builders."""

from __future__ import annotations

from typing import Any


def replica(replicas: int | None = 1, annotations: dict[str, str] | None = None, priority_class: str = "",
            node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A replica spec: ``replicas`` (absent for None) of a one-container pod template asking for one cpu."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = node_selector
    out: dict[str, Any] = {"template": {"metadata": {"annotations": annotations} if annotations else {},
                                        "spec": spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def run_policy(suspend: bool | None, scheduling_priority: str) -> dict[str, Any]:
    """A ``runPolicy``: ``suspend`` (absent for None) and a scheduling policy's priority class when one is named."""
    out: dict[str, Any] = {} if suspend is None else {"suspend": suspend}
    if scheduling_priority:
        out["schedulingPolicy"] = {"priorityClass": scheduling_priority}
    return out
