"""The podSetUpdates a TAS placement reads (the second pass of a delayed topology request, a node
replacement): every one of a Ready check naming the pod set, a check's second one too, as Kueue's
``podSetTopologyRequest`` (``pkg/scheduler/flavorassigner/tas_flavorassigner.go``) collects them; a job's
start, which takes a check's first only, reads them otherwise
(:func:`connectors.k8s.podsetinfo.start_info`)."""

from __future__ import annotations

from events import objects as o
from kueue_es.scheduler.tasplace import _updates
from projections.workloads import PodSetInfo, WorkloadInfo


def _workload(checks: dict[str, o.AdmissionCheckState]) -> WorkloadInfo:
    ps = PodSetInfo(name="main", count=2, min_count=None, requests=(("cpu", 1000),))
    return WorkloadInfo(key="ns/wl", uid="u", namespace="ns", name="wl", queue_name="lq", created=0,
                        priority=0, priority_class="", pod_sets=(ps,), check_states=checks)


def test_every_update_of_a_ready_check_naming_the_pod_set_counts() -> None:
    first = o.PodSetUpdate(name="main", node_selector={"pool": "a"})
    other = o.PodSetUpdate(name="side", node_selector={"pool": "x"})
    second = o.PodSetUpdate(name="main", tolerations=[o.Toleration(key="spot", operator="Exists")])
    later = o.PodSetUpdate(name="main", node_selector={"zone": "z"})
    wl = _workload({
        "b": o.AdmissionCheckState(name="b", state="Ready", pod_set_updates=[later]),
        "a": o.AdmissionCheckState(name="a", state="Ready", pod_set_updates=[first, other, second]),
        "c": o.AdmissionCheckState(name="c", state="Pending", pod_set_updates=[later]),
    })
    assert _updates(wl, "main") == [first, second, later], "check-name order, Ready checks only, all matches"
