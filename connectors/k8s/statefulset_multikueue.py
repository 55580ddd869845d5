"""MultiKueue's StatefulSet adapter on a manager (Kueue's ``statefulset_multikueue_adapter.go``, built while the
``statefulset`` framework is enabled): a queued StatefulSet runs on the worker its pod group's Workload was admitted
on, as one copy of the whole set there.

* **matching.** kueue-es runs a StatefulSet's pods as one serving pod group whose Workload its pods own (the
  StatefulSet webhook's model, :mod:`connectors.k8s.statefulset_webhook`); Kueue's Workload is the StatefulSet's
  own. So a Workload owned by a StatefulSet, or one owned by Pods that a StatefulSet holds (marked
  ``kueue.x-k8s.io/pod-suspending-parent: statefulset`` and controlled by it: :func:`holding_statefulset`), is run by
  this adapter — the set is copied, not its pods, which stay gated on the manager.
* **copy.** :func:`statefulset_copy`: the set's name, namespace, labels, annotations and spec (Kueue's
  ``CloneObjectMetaForCreation``), the origin label and ``kueue.x-k8s.io/prebuilt-workload-name`` added (an
  annotation under WorkloadIdentifierAnnotations: :mod:`connectors.k8s.multikueue_identifiers`), and the
  manager's set's UID as ``kueue.x-k8s.io/multikueue-origin-uid``. The kind has no managedBy: every set is
  MultiKueue's, nothing read.
* **status.** Not mirrored: the manager's StatefulSet controller, which no managedBy stops, would overwrite it at
  once (Kueue's adapter leaves a copy that exists alone).
* **delete.** The copy goes with its Workload's copy (found by its prebuilt-workload name and this origin's label),
  as Kueue's adapter deletes the remote set.
* **on the worker.** Kueue's StatefulSet reconciler makes no Workload for a set carrying the origin label: the set's
  group runs on the Workload the manager copied there, found by the name the copy carries
  (:func:`copied_workload`; Kueue derives the same name from the ``kueue.x-k8s.io/multikueue-origin-uid``
  annotation). So the pods the worker's StatefulSet controller makes of a copy are a group on that prebuilt
  Workload (:mod:`connectors.k8s.pods_integration`): made its owners and started once it is admitted there, gated
  while it is missing, and never given a Workload of the worker's own.
"""

from __future__ import annotations

import copy
from typing import Any

from connectors.k8s.leaderworkerset import ORIGIN_UID_ANNOTATION
from connectors.k8s.multikueue_identifiers import workload_name_of
from connectors.k8s.pod_webhook import SUSPENDING_PARENT
from connectors.k8s.prebuilt import KEY as PREBUILT_WORKLOAD
from connectors.k8s.resources import STATEFUL_SETS
from kueue_es.scheduler.config import MULTIKUEUE_ORIGIN_LABEL as ORIGIN_LABEL

KIND = (STATEFUL_SETS.api_version, STATEFUL_SETS.kind)
"""(apiVersion, kind) of the adapter's owners: ``apps/v1`` StatefulSets."""
PARENT = "statefulset"
"""The ``kueue.x-k8s.io/pod-suspending-parent`` value of a pod Kueue's StatefulSet webhook marked."""


def statefulset_copy(manager_sts: dict[str, Any], manager_wl: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager's StatefulSet created on the worker its Workload runs on: its name, namespace, labels,
    annotations and spec, the origin label and prebuilt-workload name added (the worker's Kueue runs it on the
    Workload's copy), and the manager's set's UID, which the worker's Kueue names the set's Workload from."""
    meta = manager_sts.get("metadata") or {}
    return {
        "apiVersion": STATEFUL_SETS.api_version, "kind": STATEFUL_SETS.kind,
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin,
                                PREBUILT_WORKLOAD: manager_wl["metadata"]["name"]},
                     "annotations": {**(meta.get("annotations") or {}),
                                     ORIGIN_UID_ANNOTATION: str(meta.get("uid", ""))}},
        "spec": copy.deepcopy(manager_sts.get("spec") or {}),
    }


def holding_statefulset(pod: dict[str, Any]) -> str | None:
    """The name of the StatefulSet holding ``pod`` (a raw Pod) when Kueue's StatefulSet webhook marked it and the set
    is its controller; None otherwise (a plain pod, a group of plain pods, an orphan whose set is gone)."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(SUSPENDING_PARENT) != PARENT:
        return None
    controller = next((r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")),
                      None)
    if controller is None or (controller.get("apiVersion"), controller.get("kind")) != KIND:
        return None
    return controller.get("name") or None


def copied_workload(meta: dict[str, Any]) -> str:
    """The Workload a StatefulSet MultiKueue copied to this worker runs on (``meta``: the set's metadata): the
    prebuilt Workload it names (annotation, else label); "" for a set without the origin label (not a copy) or
    naming none (or two)."""
    if ORIGIN_LABEL not in (meta.get("labels") or {}):
        return ""
    return workload_name_of({"metadata": meta}) or ""
