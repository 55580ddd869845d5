"""Which LocalQueues the LocalQueue metrics are kept for, under a recorded Configuration's
``metrics.localQueueMetrics`` (Kueue v1beta2).

Kueue exposes a LocalQueue's metrics when its ``LocalQueueMetrics`` gate is on, the stanza is enabled, and the
LocalQueue's labels match ``localQueueSelector`` (no selector: every LocalQueue). Kueue defaults only an absent
stanza, to ``{enable: true}``; a stanza that leaves ``enable`` out turns the metrics off (a Go ``bool`` left
unset). v1beta1 has no such stanza: its files take the default. A workload's series are its LocalQueue's: with a
selector, a LocalQueue that does not exist has no labels to match, so a workload naming one is not counted (Kueue
looks the LocalQueue up and, not finding it, reports nothing). Without a selector kueue-es keeps counting such a
workload under the LocalQueue it names, as before.

A recorded document whose selector is not a valid label selector (one taken before kueue-es refused them, as
Kueue v0.20 does) selects every LocalQueue, as Kueue before v0.20 read it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from events import objects as o
from events.labels import selector_problem
from projections.clusterqueues import selector_matches


class LocalQueueMetricsSetting(NamedTuple):
    """``enable`` as the stanza (or its default) says; ``selector`` None when every LocalQueue is selected."""

    enable: bool
    selector: o.LabelSelector | None


DEFAULT = LocalQueueMetricsSetting(True, None)
"""Kueue's default for an absent stanza, and no document recorded."""


def of_document(document: dict[str, Any] | None) -> LocalQueueMetricsSetting:
    """The setting a recorded Configuration document makes."""
    metrics = document.get("metrics") if isinstance(document, dict) else None
    stanza = metrics.get("localQueueMetrics") if isinstance(metrics, dict) else None
    if not isinstance(stanza, dict):  # absent or null: Kueue defaults it
        return DEFAULT
    enable = stanza.get("enable") is True
    raw = stanza.get("localQueueSelector")
    if not enable or raw is None:
        return LocalQueueMetricsSetting(enable, None)
    try:
        selector = msgspec.convert(raw, o.LabelSelector)
    except msgspec.ValidationError:
        return LocalQueueMetricsSetting(enable, None)
    if selector_problem(selector.match_labels,
                        [(r.key, r.operator, r.values) for r in selector.match_expressions]) is not None:
        return LocalQueueMetricsSetting(enable, None)
    return LocalQueueMetricsSetting(enable, selector)


def selects(setting: LocalQueueMetricsSetting, lq: o.LocalQueue | None) -> bool:
    """Whether an enabled ``setting`` keeps the metrics of ``lq`` (None: a LocalQueue that does not exist)."""
    if setting.selector is None:
        return True
    return lq is not None and selector_matches(setting.selector, lq.metadata.labels)
