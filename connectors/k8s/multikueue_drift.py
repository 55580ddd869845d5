"""Whether a MultiKueue copy's spec drifted from its manager Workload's (Kueue's ``isRemoteSpecOutOfSync``, used by
``reconcileGroup`` step 5 of its MultiKueue workload reconciler): such a copy is deleted, and made anew where it is
still to be (the reserving worker's is not: the check goes Retry once it is seen gone).

Kueue compares the two specs with ``equality.Semantic.DeepEqual``, the preemption gates left out (the manager's
and a copy's are set apart). Here both specs are read as the log's view of a Workload spec (:mod:`events.objects`),
which holds the fields a copy can drift in (pod sets' names, counts and topology requests, queue, priority, active,
maximum execution time), and each pod set's template as its digest (:mod:`events.template_digest`), which equals
for templates ``equality.Semantic`` calls equal (quantities by value, a nil and an empty list alike). What the view
does not hold, or a template whose digest one side lacks, is not compared: a copy is deleted only on a difference
that is certain, never on one of form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from events import objects as o
from events.template_digest import template_digest

_BLANK_TEMPLATE = o.PodTemplateSpec()


def spec_drifted(manager: o.Workload, copy_raw: Mapping[str, Any]) -> bool:
    """Whether the copy ``copy_raw`` (a worker's Workload, as its watch shows it) has another spec than the
    manager's Workload ``manager`` (its view, pod-set templates stamped with their digests). A copy whose spec does
    not read as a Workload spec is not called drifted (nothing certain is known of it)."""
    raw_spec = copy_raw.get("spec")
    if not isinstance(raw_spec, Mapping):
        return False
    try:
        spec = msgspec.convert(raw_spec, o.WorkloadSpec, strict=False)
    except (msgspec.ValidationError, TypeError, ValueError):
        return False
    pod_sets = raw_spec.get("podSets")
    templates = [ps.get("template") if isinstance(ps, Mapping) else None
                 for ps in (pod_sets if isinstance(pod_sets, list) else ())]
    if len(templates) != len(spec.pod_sets):
        return False
    theirs = [template_digest(t) for t in templates]
    mine = [ps.template.digest for ps in manager.spec.pod_sets]
    known = [i < len(mine) and mine[i] is not None for i in range(len(theirs))]
    return _comparable(manager.spec, mine, known) != _comparable(spec, theirs, known)


def _comparable(spec: o.WorkloadSpec, digests: list[str | None], known: list[bool]) -> o.WorkloadSpec:
    """``spec`` as compared: no preemption gates, each pod set's template its digest (``digests``) alone, or blank
    where one side's digest is unknown (``known``; pod sets not as many differ anyway)."""
    pod_sets = [msgspec.structs.replace(ps, template=o.PodTemplateSpec(digest=digests[i])
                                        if i < len(known) and known[i] else _BLANK_TEMPLATE)
                for i, ps in enumerate(spec.pod_sets)]
    return msgspec.structs.replace(spec, pod_sets=pod_sets, preemption_gates=[])
