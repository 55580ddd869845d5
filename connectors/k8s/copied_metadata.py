"""The job labels and annotations a job integration copies onto the Workload it makes, as Kueue copies them
(``pkg/controller/jobframework/reconciler.go`` ``NewWorkload``; for a pod group,
``pkg/controller/jobs/pod/pod_controller.go`` ``getWorkloadLabels``).

The keys are the Configuration's (:attr:`kueue_es.scheduler.config.SchedulerConfig.keys_to_copy`):
``integrations.labelKeysToCopy`` and, under ``CustomMetricLabels``, what its ``sourceKind: Workload`` custom metric
labels read. A key the job lacks is left out. They are copied when the Workload is made, never after: a Workload
keeps them whatever becomes of the job's, as Kueue's does. One Workload made of several Pods (a pod group) takes
a key's value from the Pods that carry it, which must agree; otherwise Kueue makes no Workload (its reconcile
fails, with no Event, and is retried), and neither does kueue-es, until the Pods change.

Some job annotations are copied only under a gate (:data:`GATED`), and a job's Workload always takes its
ProvisioningRequest parameters (:func:`workload_annotations`).

Pure: the callers (:mod:`connectors.k8s.jobs`, :mod:`connectors.k8s.jobset`, :mod:`connectors.k8s.pod_sync`,
:mod:`connectors.k8s.pod_group`, ...) put the result in the Workload they build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kueue_es.scheduler.config import DEFAULT, KeysToCopy
from kueue_es.scheduler.config_record import in_force
from projections import gates
from projections.cluster import ClusterState
from projections.workload_pods_ready import WAIT_FOR_PODS_READY_ANNOTATION
from projections.workloads import (
    ADMISSION_GATED_BY_ANNOTATION,
    PROVREQ_ANNOTATION_PREFIX,
    UNHEALTHY_NODES_THRESHOLD_ANNOTATION,
)

LABELS_MISMATCH = "constructing workload: pods have different label values"
"""Kueue's error for a pod group whose Pods carry a copied label with different values."""
ANNOTATIONS_MISMATCH = "constructing workload: pods have different annotation values"


def keys(state: ClusterState) -> KeysToCopy:
    """The keys to copy under the Configuration recorded in the log."""
    return (in_force(state) or DEFAULT).keys_to_copy


def copied(keys: Sequence[str], found: Mapping[str, str]) -> dict[str, str]:
    """The entries of ``found`` (one object's labels or annotations) under ``keys``."""
    return {k: found[k] for k in keys if k in found}


def agreed(keys: Sequence[str], each: Sequence[Mapping[str, str]], mismatch: str) -> dict[str, str]:
    """The entries under ``keys`` of several objects (a group's Pods) taken together: a key's value from those
    that carry it. Raises ValueError when two of them carry it with different values: ``mismatch`` (Kueue's words),
    then the key and the two values, so that the log says which."""
    out: dict[str, str] = {}
    for found in each:
        for key in keys:
            if key not in found:
                continue
            if out.setdefault(key, found[key]) != found[key]:
                raise ValueError(f"{mismatch}: {key!r}: {out[key]!r} != {found[key]!r}")
    return out


@dataclass(frozen=True)
class _Gated:
    """A job annotation a new Workload takes only while ``on`` says so for the state; ``empty``: an empty value
    is copied too."""

    key: str
    on: Callable[[ClusterState], bool]
    empty: bool = False


def _pods_ready_on(state: ClusterState) -> bool:
    """``WorkloadLevelWaitForPodsReady`` on and ``DisableWaitForPodsReady`` (which turns the feature off) off."""
    return state.gate(gates.WORKLOAD_LEVEL_WAIT_FOR_PODS_READY) and not state.gate(gates.DISABLE_WAIT_FOR_PODS_READY)


GATED = (
    _Gated(ADMISSION_GATED_BY_ANNOTATION, lambda state: state.gate(gates.ADMISSION_GATED_BY)),
    _Gated(UNHEALTHY_NODES_THRESHOLD_ANNOTATION, lambda state: state.gate(gates.TAS_REPLACE_MULTIPLE_FAILED_NODES),
           empty=True),
    _Gated(WAIT_FOR_PODS_READY_ANNOTATION, _pods_ready_on),
)
"""The job annotations a new Workload takes under a gate: a non-empty ``kueue.x-k8s.io/admission-gated-by`` under
``AdmissionGatedBy`` (the Workload is not admitted until its gates are gone); the unhealthy-node eviction threshold
under ``TASReplaceMultipleFailedNodes`` (Kueue's webhook then checks it on the Workload); a non-empty
``kueue.x-k8s.io/wait-for-pods-ready`` under ``WorkloadLevelWaitForPodsReady`` while ``DisableWaitForPodsReady`` is
off (the workload's own waitForPodsReady timeouts, :mod:`projections.workload_pods_ready`)."""

ALL_GATED = tuple(g.key for g in GATED)
PODS_READY_ONLY = (WAIT_FOR_PODS_READY_ANNOTATION,)
"""Of :data:`GATED`, what a pod group takes (Ray objects go through Kueue's generic job path and take them all)."""
ADMISSION_GATE_ONLY = (ADMISSION_GATED_BY_ANNOTATION,)
"""Of :data:`GATED`, what a StatefulSet gives its pod group's Workload (Kueue v0.20's StatefulSet reconciler)."""
GROUP_GATED = (ADMISSION_GATED_BY_ANNOTATION, WAIT_FOR_PODS_READY_ANNOTATION)
"""Of :data:`GATED`, what a LeaderWorkerSet's group Workloads take: its admission gate (Kueue v0.20's
LeaderWorkerSet reconciler, which then follows the set's gates) and its waitForPodsReady timeouts."""


def gated_annotations(state: ClusterState, annotations: Mapping[str, str],
                      only: Sequence[str] = ALL_GATED) -> dict[str, str]:
    """The job ``annotations`` of :data:`GATED` (those keyed in ``only``) a new Workload takes now."""
    out: dict[str, str] = {}
    for gated in GATED:
        value = annotations.get(gated.key)
        if gated.key in only and value is not None and (value or gated.empty) and gated.on(state):
            out[gated.key] = value
    return out


def pods_ready_annotation(state: ClusterState, annotations: Mapping[str, str]) -> str | None:
    """The job's ``kueue.x-k8s.io/wait-for-pods-ready`` its Workload carries (None: none, or the gate is off)."""
    return gated_annotations(state, annotations, PODS_READY_ONLY).get(WAIT_FOR_PODS_READY_ANNOTATION)


def workload_annotations(state: ClusterState, keys: KeysToCopy, annotations: Mapping[str, str],
                         gated: Sequence[str] = ALL_GATED) -> dict[str, str]:
    """The annotations a job's new Workload takes of the job's (a single Pod's) ``annotations``: those the
    Configuration copies (``keys``), the ProvisioningRequest parameters (``provreq.kueue.x-k8s.io/...``), and the
    :data:`GATED` ones (those keyed in ``gated``) whose gate is on."""
    out = copied(keys.annotations, annotations)
    out.update((k, v) for k, v in annotations.items() if k.startswith(PROVREQ_ANNOTATION_PREFIX))
    out.update(gated_annotations(state, annotations, gated))
    return out
