"""Kueue's custom metric labels: the Configuration's ``metrics.customLabels`` under the ``CustomMetricLabels`` gate.

Each entry promotes a label (or annotation) of a Kubernetes object to a Prometheus label ``custom_<name>`` on the
metrics keyed by an object of its ``sourceKind`` (ClusterQueue by default, LocalQueue or Cohort): the value is the
object's label ``sourceLabelKey`` (``name`` when neither source key is set) or its annotation
``sourceAnnotationKey``; "" when the object has none, or is not known; :data:`UNTRACKED` when ``trackedValues``
lists values and this is not one of them. A metric carries the labels of its kind in the order they are
configured. ``sourceKind: Workload`` entries (``trackedValues`` required) split the gauges that count workloads —
``pending_workloads``, ``local_queue_pending_workloads``, ``admitted_active_workloads``,
``local_queue_admitted_active_workloads`` — by the values of the counted workloads, and the LocalQueue's admission
counter and wait histogram by the admitted workload's values (:data:`projections.metrics.SPLIT_BY_WORKLOAD`); their
labels come after the queue's, as Kueue orders the kinds (ClusterQueue, Cohort, LocalQueue, Workload).

The checks are Kueue's (``pkg/config/validation.go``), run whatever the gate, as Kueue runs them at start-up:
:func:`problem`. The fold reads the entries from the recorded Configuration (:func:`of_document`); the metrics
append the values when they are exposed (:mod:`projections.metrics`). Under the gate the Job and Pod integrations
copy what the ``Workload`` entries read from the job onto the Workload they make (:func:`workload_sources`,
:mod:`connectors.k8s.copied_metadata`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from events import objects as o
from events.field_errors import go_quote, go_string_slice, too_many
from events.labels import label_key_problems

CLUSTER_QUEUE, COHORT, LOCAL_QUEUE, WORKLOAD = "ClusterQueue", "Cohort", "LocalQueue", "Workload"
SOURCE_KINDS = (CLUSTER_QUEUE, COHORT, LOCAL_QUEUE, WORKLOAD)
DEFAULT_KIND = CLUSTER_QUEUE
UNTRACKED = "kueue.x-k8s.io/_UNTRACKED_VALUE_"
"""The value of a label whose ``trackedValues`` do not list the object's value."""
PREFIX = "custom_"

MAX_ENTRIES = 20
MAX_PER_KIND = {CLUSTER_QUEUE: 6, COHORT: 6, LOCAL_QUEUE: 6, WORKLOAD: 2}
MAX_TRACKED = 16
MAX_TRACKED_WORKLOAD = 12
NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*")


class Entry(Protocol):
    """One ``customLabels`` entry as the Configuration loader decodes it."""

    name: str
    source_label_key: str
    source_annotation_key: str
    source_kind: str | None
    tracked_values: Sequence[str] | None
    """None when the document gives none (Go's nil slice, which a field error shows unlike an empty one)."""


class CustomLabel(NamedTuple):
    label: str
    """The Prometheus label: ``custom_<name>``."""
    kind: str
    annotation: bool
    """Read from the object's annotations (else its labels)."""
    key: str
    tracked: frozenset[str]
    """The values reported as they are (empty: every value)."""

    def value(self, meta: o.ObjectMeta) -> str:
        return self.reported((meta.annotations if self.annotation else meta.labels).get(self.key, ""))

    def reported(self, found: str) -> str:
        """``found`` as the metrics report it (a workload without the key has "", untracked unless listed)."""
        return found if not self.tracked or found in self.tracked else UNTRACKED


class CustomLabels:
    """The entries of a Configuration, by source kind (each kind's in the configured order)."""

    def __init__(self, entries: Sequence[CustomLabel]) -> None:
        self.by_kind = {kind: tuple(e for e in entries if e.kind == kind) for kind in SOURCE_KINDS}
        self._names = {kind: tuple(e.label for e in found) for kind, found in self.by_kind.items()}
        self.workload_annotation_keys = frozenset(e.key for e in self.by_kind[WORKLOAD] if e.annotation)
        """The annotations of a Workload its entries read: the fold keeps those (``WorkloadInfo.metric_annotations``),
        since it keeps no other annotation of a workload."""

    def names(self, kind: str) -> tuple[str, ...]:
        """The Prometheus labels a metric keyed by an object of ``kind`` carries."""
        return self._names[kind]

    def values(self, kind: str, meta: o.ObjectMeta | None) -> tuple[str, ...]:
        """The values for an object of ``kind`` (None: not known, every value "", as Kueue's store answers)."""
        if meta is None:
            return ("",) * len(self.by_kind[kind])
        return tuple(e.value(meta) for e in self.by_kind[kind])

    def workload_values(self, labels: Mapping[str, str], kept: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
        """The values of a workload, from its labels and the annotations the fold kept of it (``kept``)."""
        annotations = dict(kept) if kept else {}
        return tuple(e.reported((annotations if e.annotation else labels).get(e.key, ""))
                     for e in self.by_kind[WORKLOAD])

    def changed(self, kind: str, old: o.ObjectMeta, new: o.ObjectMeta) -> bool:
        """An update of an object of ``kind`` changed its values: Kueue then clears the object's series."""
        if not self.by_kind[kind] or (old.labels == new.labels and old.annotations == new.annotations):
            return False
        return self.values(kind, old) != self.values(kind, new)


def of_document(document: Mapping[str, Any] | None) -> CustomLabels | None:
    """The entries of a recorded Configuration document (checked before it was recorded), None when it has none.
    Anything malformed is left out rather than stopping the fold."""
    stanza = document.get("metrics") if document else None
    raw = stanza.get("customLabels") if isinstance(stanza, dict) else None
    if not isinstance(raw, list):
        return None
    entries = [e for e in (_entry(x) for x in raw) if e is not None]
    return CustomLabels(entries) if entries else None


def _entry(raw: object) -> CustomLabel | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    name = raw["name"]
    annotation_key = raw.get("sourceAnnotationKey") or ""
    label_key = raw.get("sourceLabelKey") or ""
    tracked = raw.get("trackedValues") or []
    kind = raw.get("sourceKind") or DEFAULT_KIND
    if not isinstance(annotation_key, str) or not isinstance(label_key, str) or not isinstance(tracked, list):
        return None
    return CustomLabel(PREFIX + name, kind, bool(annotation_key), annotation_key or label_key or name,
                       frozenset(v for v in tracked if isinstance(v, str)))


def workload_sources(entries: Sequence[Entry]) -> tuple[frozenset[str], frozenset[str]]:
    """The (label keys, annotation keys) the ``sourceKind: Workload`` entries read: under the gate, Kueue's job
    integrations copy those from the job onto the Workload they make, so that its metrics see the job's values."""
    labels: set[str] = set()
    annotations: set[str] = set()
    for entry in entries:
        if entry.source_kind != WORKLOAD:
            continue
        if entry.source_annotation_key:
            annotations.add(entry.source_annotation_key)
        else:
            labels.add(entry.source_label_key or entry.name)
    return frozenset(labels), frozenset(annotations)


def problems(entries: Sequence[Entry], nil_tracked: Collection[int] = ()) -> list[tuple[str, str]]:
    """Every fault of ``metrics.customLabels``, as (field path, field error body), in the order and words of Kueue's
    validateCustomLabels (``pkg/config/validation.go``): the count, each entry's faults, then the kinds' counts in
    the kinds' sorted order. Where Kueue's error shows an entry or the whole list (a Go struct dump holding a
    pointer's address), the value part is left out and the detail said alone. ``nil_tracked``: the entries whose
    ``trackedValues`` were not given, shown as Go shows a nil list (an entry's None says so too)."""
    at = "metrics.customLabels"
    found: list[tuple[str, str]] = []
    if len(entries) > MAX_ENTRIES:
        found.append((at, too_many(len(entries), MAX_ENTRIES)))
    seen: set[str] = set()
    per_kind: dict[str, int] = {}
    for i, entry in enumerate(entries):
        found += _entry_problems(entry, f"{at}[{i}]", seen, i in nil_tracked)
        kind = entry.source_kind if entry.source_kind is not None else DEFAULT_KIND
        per_kind[kind] = per_kind.get(kind, 0) + 1
    for kind in sorted(per_kind):
        if kind not in MAX_PER_KIND:
            found.append((at, f"unknown source kind: {kind}"))
        elif per_kind[kind] > MAX_PER_KIND[kind]:
            found.append((at, f"too many custom labels for source kind {kind}: found {per_kind[kind]}, expected <= "
                              f"{MAX_PER_KIND[kind]}"))
    return found


def _strings(values: Sequence[str] | None) -> str:
    """A ``[]string`` as Go's %#v shows it in a field error: ``[]string(nil)`` when unset."""
    return "[]string(nil)" if values is None else go_string_slice("string", values)


def _entry_problems(entry: Entry, at: str, seen: set[str], nil_tracked: bool) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if not NAME.fullmatch(entry.name):
        found.append((f"{at}.name", f"Invalid value: {go_quote(entry.name)}: must match ^[a-zA-Z][a-zA-Z0-9_]*$"))
    if entry.name in seen:
        found.append((f"{at}.name", f"Duplicate value: {go_quote(entry.name)}"))
    seen.add(entry.name)
    if entry.source_label_key and entry.source_annotation_key:
        found.append((at, "sourceLabelKey and sourceAnnotationKey are mutually exclusive"))
    field, key = (("sourceLabelKey", entry.source_label_key) if entry.source_label_key else
                  ("sourceAnnotationKey", entry.source_annotation_key) if entry.source_annotation_key else
                  ("name", entry.name))
    bad = label_key_problems(key)
    if bad:
        found.append((f"{at}.{field}", f"Invalid value: {go_quote(key)}: {'; '.join(bad)}"))
    tracked = entry.tracked_values or ()
    shown = _strings(None if nil_tracked else entry.tracked_values)
    if entry.source_kind == WORKLOAD:
        if not tracked:
            found.append((f"{at}.trackedValues", f"Invalid value: {shown}: must not be empty when sourceKind is "
                                                 "'Workload'"))
        if len(tracked) > MAX_TRACKED_WORKLOAD:
            found.append((f"{at}.trackedValues", f"Invalid value: {shown}: must not be greater than "
                                                 f"{MAX_TRACKED_WORKLOAD} when sourceKind is 'Workload'"))
    elif len(tracked) > MAX_TRACKED:
        found.append((f"{at}.trackedValues", too_many(len(tracked), MAX_TRACKED)))
    if len(set(tracked)) < len(tracked):
        found.append((f"{at}.trackedValues", f"Invalid value: {shown}: must not contain duplicates"))
    return found
