"""How MultiKueue's copies name the Workload they run on, and how a pod group is named, in either of the two forms
Kueue's ``WorkloadIdentifierAnnotations`` gate (beta, on) allows: a label, or an annotation of the same key.

* **written** (Kueue's ``SetMultiKueueMeta``, every adapter that names a prebuilt Workload): the origin label
  always; the prebuilt Workload's name (``kueue.x-k8s.io/prebuilt-workload-name``) as an annotation while the gate
  is on, or whatever the gate when the name is too long for a label value (over 63 characters), else as a label
  (:func:`place_prebuilt`). The copy's labels otherwise stay the manager owner's.
* **read** (Kueue's ``MultiKueueWorkloadNameFor``, whatever the gate, so that copies made before a gate flip are
  still found): the annotation when set, else the label; both set and different, the copy is not taken as
  MultiKueue's (:func:`workload_name_of`, None). A pod's group (``kueue.x-k8s.io/pod-group-name``) is read alike
  (:func:`group_name_of`).
"""

from __future__ import annotations

from typing import Any

from connectors.k8s.pod_roles import GROUP_LABEL
from connectors.k8s.prebuilt import KEY as PREBUILT_WORKLOAD
from connectors.k8s.prebuilt import LABEL_VALUE_MAX
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates


def as_annotation(config: SchedulerConfig, workload_name: str) -> bool:
    """Whether the copy names its prebuilt Workload ``workload_name`` in an annotation: the gate on, or a name no
    label value can hold."""
    return config.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS) or len(workload_name) > LABEL_VALUE_MAX


def place_prebuilt(made: dict[str, Any], manager_owner: dict[str, Any], workload_name: str,
                   config: SchedulerConfig) -> dict[str, Any]:
    """The copy ``made`` (an adapter's, naming ``workload_name`` in its labels) with that name where the Configuration
    says it goes: moved to its annotations under the gate (or for a long name), its labels then the manager owner's
    (its own label of that key, if any, kept as it was). A copy naming no prebuilt Workload (a LeaderWorkerSet's)
    is left as it is."""
    meta = made.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(PREBUILT_WORKLOAD) != workload_name or not as_annotation(config, workload_name):
        return made
    own = ((manager_owner.get("metadata") or {}).get("labels") or {}).get(PREBUILT_WORKLOAD)
    labels = {k: v for k, v in labels.items() if k != PREBUILT_WORKLOAD}
    if own is not None:
        labels[PREBUILT_WORKLOAD] = own
    annotations = {**(meta.get("annotations") or {}), PREBUILT_WORKLOAD: workload_name}
    return {**made, "metadata": {**meta, "labels": labels, "annotations": annotations}}


def _either(obj: dict[str, Any], key: str) -> str | None:
    """The value of ``key`` as annotation, else as label ("" without either); None when both are set and differ."""
    meta = obj.get("metadata") or {}
    label = (meta.get("labels") or {}).get(key) or ""
    annotation = (meta.get("annotations") or {}).get(key) or ""
    if label and annotation and label != annotation:
        return None
    return annotation or label


def workload_name_of(obj: dict[str, Any]) -> str | None:
    """The prebuilt Workload a copy names ("" none); None: its label and annotation disagree (not MultiKueue's)."""
    return _either(obj, PREBUILT_WORKLOAD)


def group_name_of(pod: dict[str, Any]) -> str | None:
    """The pod group a Pod is in ("" none); None: its label and annotation disagree."""
    return _either(pod, GROUP_LABEL)
