"""The job labels and annotations a job integration copies onto the Workload it makes, as Kueue copies them
(``pkg/controller/jobframework/reconciler.go`` ``NewWorkload``; for a pod group,
``pkg/controller/jobs/pod/pod_controller.go`` ``getWorkloadLabels``).

The keys are the Configuration's (:attr:`kueue_es.scheduler.config.SchedulerConfig.keys_to_copy`):
``integrations.labelKeysToCopy`` and, under ``CustomMetricLabels``, what its ``sourceKind: Workload`` custom metric
labels read. A key the job lacks is left out. They are copied when the Workload is made, never after: a Workload
keeps them whatever becomes of the job's, as Kueue's does. One Workload made of several Pods (a pod group) takes
a key's value from the Pods that carry it, which must agree; otherwise Kueue makes no Workload (its reconcile
fails, with no Event, and is retried), and neither does kueue-es, until the Pods change.

Pure: the callers (:mod:`connectors.k8s.jobs`, :mod:`connectors.k8s.pod_sync`, :mod:`connectors.k8s.pod_group`)
put the result in the Workload they build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kueue_es.scheduler.config import DEFAULT, KeysToCopy
from kueue_es.scheduler.config_record import in_force
from projections import gates
from projections.cluster import ClusterState
from projections.workloads import ADMISSION_GATED_BY_ANNOTATION, UNHEALTHY_NODES_THRESHOLD_ANNOTATION

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


def gated_annotations(state: ClusterState, annotations: Mapping[str, str]) -> dict[str, str]:
    """The job annotations a new Workload takes under a gate: a non-empty ``kueue.x-k8s.io/admission-gated-by``
    under ``AdmissionGatedBy`` (the Workload is not admitted until its gates are gone) and the unhealthy-node
    eviction threshold under ``TASReplaceMultipleFailedNodes`` (Kueue's webhook then checks it on the Workload)."""
    out: dict[str, str] = {}
    gate = annotations.get(ADMISSION_GATED_BY_ANNOTATION)
    if gate and state.gate(gates.ADMISSION_GATED_BY):
        out[ADMISSION_GATED_BY_ANNOTATION] = gate
    threshold = annotations.get(UNHEALTHY_NODES_THRESHOLD_ANNOTATION)
    if threshold is not None and state.gate(gates.TAS_REPLACE_MULTIPLE_FAILED_NODES):
        out[UNHEALTHY_NODES_THRESHOLD_ANNOTATION] = threshold
    return out
