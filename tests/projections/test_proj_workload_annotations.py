"""What a Workload's annotations set on its projected state, whether it carries them when first seen or gains them at
a later upsert: the fold builds a new workload's state on one path and updates a known one's on another, so a field
taken on one and forgotten on the other would differ only for workloads first seen with annotations."""

from __future__ import annotations

import pytest
from fixtures.eventgen import T0, cluster_queue, flavor, local_queue, meta, namespace, upsert

from events import objects as o
from events import schema as ev
from events.priority_boost import ANNOTATION as PRIORITY_BOOST_ANNOTATION
from events.unhealthy_threshold import UNHEALTHY_NODES_THRESHOLD_ANNOTATION
from projections.cluster import ClusterState
from projections.workload_pods_ready import WAIT_FOR_PODS_READY_ANNOTATION
from projections.workloads import (
    ADMISSION_GATED_BY_ANNOTATION,
    ALLOWED_FLAVORS_ANNOTATION,
    COMPONENT_INDEX_ANNOTATION,
    ELASTIC_JOB_ANNOTATION,
    JOB_OWNER_GVK_ANNOTATION,
    PROVREQ_ANNOTATION_PREFIX,
    SLICE_REPLACEMENT_FOR_ANNOTATION,
)

ANNOTATIONS = {
    PROVREQ_ANNOTATION_PREFIX + "ValidUntilSeconds": "60",
    ADMISSION_GATED_BY_ANNOTATION: "example.com/gate",
    PRIORITY_BOOST_ANNOTATION: "5",
    SLICE_REPLACEMENT_FOR_ANNOTATION: "team/w-old",
    JOB_OWNER_GVK_ANNOTATION: "batch/v1, Kind=Job",
    COMPONENT_INDEX_ANNOTATION: "2",
    ELASTIC_JOB_ANNOTATION: "true",
    ALLOWED_FLAVORS_ANNOTATION: "f0, f1",
    UNHEALTHY_NODES_THRESHOLD_ANNOTATION: "3",
    WAIT_FOR_PODS_READY_ANNOTATION: '{"timeoutSeconds": 120}',
}
TAKEN = ("provreq_parameters", "admission_gate", "boost", "boost_annotation", "metric_annotations", "replaces",
         "component_index", "elastic", "allowed_flavors", "unhealthy_threshold", "own_pods_ready")
"""The fields the annotations set (:meth:`ClusterState._on_workload_upserted`)."""


def workload(annotations: dict[str, str], resource_version: str) -> o.Workload:
    return o.Workload(metadata=meta("w", "team", uid="uid-w", generation=1, resource_version=resource_version,
                                    annotations=annotations),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1)]))


def folded(*workloads: o.Workload) -> ClusterState:
    state = ClusterState()
    for e in (upsert(namespace("team"), T0), upsert(flavor("f0"), T0), upsert(cluster_queue("cq", quotas={"f0": 4}), T0),
              upsert(local_queue("team", "lq", "cq"), T0), *(upsert(w, T0) for w in workloads)):
        state.apply(ev.Record(state.offset + 1, e))
    return state


@pytest.mark.parametrize("field", TAKEN)
def test_first_seen_with_annotations_as_if_gained_later(field: str) -> None:
    first = folded(workload(ANNOTATIONS, "1")).workloads["team/w"]
    later = folded(workload({}, "1"), workload(ANNOTATIONS, "2")).workloads["team/w"]
    assert getattr(first, field) == getattr(later, field)


def test_the_annotations_are_taken() -> None:
    wl = folded(workload(ANNOTATIONS, "1")).workloads["team/w"]
    assert wl.provreq_parameters == (("ValidUntilSeconds", "60"),)
    assert (wl.admission_gate, wl.boost_annotation, wl.replaces) == ("example.com/gate", "5", "team/w-old")
    assert (wl.component_index, wl.elastic, wl.allowed_flavors) == (2, True, ("f0", "f1"))
    assert (wl.unhealthy_threshold, wl.own_pods_ready) == (3, (120_000, 120_000))


def test_without_annotations_the_defaults() -> None:
    wl = folded(workload({}, "1")).workloads["team/w"]
    defaults = dict(zip(type(wl).__struct_fields__[-len(type(wl).__struct_defaults__):],
                        type(wl).__struct_defaults__, strict=True))
    assert {f: getattr(wl, f) for f in TAKEN} == {f: defaults[f] for f in TAKEN}
