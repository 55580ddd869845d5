"""Which pod sets of an admission wait for their delayed topology (the second pass): the list the scheduler places
and the yes/no the fold asks on its hot path must agree."""

from __future__ import annotations

import itertools

import pytest

from events import objects as o
from projections.secondpass import awaits_delayed_topology, delayed_pod_sets

PLACED = o.TopologyAssignment(levels=["kubernetes.io/hostname"])
POD_SETS = [
    o.PodSetAssignment(name=f"ps-{request}-{placed}", delayed_topology_request=request,
                       topology_assignment=PLACED if placed else None)
    for request, placed in itertools.product((None, "Pending", "Ready"), (False, True))
]


@pytest.mark.parametrize("pod_sets", [list(c) for n in range(3) for c in itertools.combinations(POD_SETS, n)])
def test_awaits_delayed_topology_says_whether_any_pod_set_is_delayed(pod_sets: list[o.PodSetAssignment]) -> None:
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=pod_sets)
    assert awaits_delayed_topology(admission) == bool(delayed_pod_sets(admission))
    assert awaits_delayed_topology(admission) == any(
        p.delayed_topology_request == "Pending" and p.topology_assignment is None for p in pod_sets)


def test_no_admission_awaits_nothing() -> None:
    assert not awaits_delayed_topology(None)
