"""Kueue's topology ungater tests (``pkg/controller/tas/topology_ungater_test.go``, TestReconcile) as an
oracle: each case's pod sets, requests and pods go through the ungater's plan
(:func:`connectors.k8s.ungating.plan` with the pod-set group offsets of
:func:`connectors.k8s.ungating.group_offsets`, as ``Ungater.sync`` calls them) and the pods ungated, with the
domain each gets, are Kueue's. Cases the older unit tests already cover are left out."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s.ungating import group_offsets, plan
from events import objects as o
from events.tas_assignment import encode

BLOCK, RACK, HOST = "cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"
LEVELS = [BLOCK, RACK]
GATE = {"name": "kueue.x-k8s.io/topology"}
COMPLETION, WORKER, REPLICA = ("batch.kubernetes.io/job-completion-index",
                               "leaderworkerset.sigs.k8s.io/worker-index",
                               "training.kubeflow.org/replica-index")
OFFSET = "kueue.x-k8s.io/pod-index-offset"


def _pod(name: str, pod_set: str = "main", index: tuple[str, int] | None = None, *, on: str = "",
         phase: str = "Pending", offset: str | None = None) -> o.Pod:
    """A pod of the workload; ``on``: ungated onto that ``block/rack`` (else gated)."""
    labels = {"kueue.x-k8s.io/podset": pod_set}
    if index is not None:
        labels[index[0]] = str(index[1])
    selector = dict(zip(LEVELS, on.split("/"), strict=True)) if on else {}
    annotations = {"kueue.x-k8s.io/workload": "wl", **({OFFSET: offset} if offset is not None else {})}
    return o.Pod(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"u-{name}", labels=labels,
                                       annotations=annotations),
                 spec=o.PodSpec(node_selector=selector, scheduling_gates=[] if on else [GATE]),
                 status=o.PodStatus(phase=phase))


def _psa(name: str, domains: list[tuple[str, int]], count: int | None = None) -> o.PodSetAssignment:
    ta = encode(LEVELS, [o.TopologyDomainAssignment(values=v.split("/"), count=c) for v, c in domains])
    return o.PodSetAssignment(name=name, count=count if count is not None else sum(c for _, c in domains),
                              topology_assignment=ta)


def _request(index: str | None = None, group: str | None = None) -> o.PodSetTopologyRequest:
    return o.PodSetTopologyRequest(required=RACK, pod_index_label=index, pod_set_group_name=group)


def _ungated(psas: list[o.PodSetAssignment], requests: dict[str, o.PodSetTopologyRequest],
             pods: list[o.Pod]) -> dict[str, str] | None:
    offsets = group_offsets(psas, requests)
    out: dict[str, str] = {}
    for psa in psas:
        mine = [p for p in pods if p.metadata.labels["kueue.x-k8s.io/podset"] == psa.name]
        planned = plan(psa, requests.get(psa.name), mine, (), offsets.get(psa.name, 0))
        if planned is None:
            return None
        out.update({u.pod.metadata.name: "/".join(u.node_selector[level] for level in LEVELS)
                    for u in planned})
    return out


FIVE = [("b1/r1", 2), ("b1/r2", 1), ("b2/r1", 2)]
FOUR = [("b1/r1", 2), ("b1/r2", 1), ("b2/r1", 1)]
WORKERS = [("b1/r1", 1), ("b1/r2", 1), ("b2/r1", 2)]
LWS = {"workers": _request(WORKER, "lws-group"), "leader": _request(WORKER, "lws-group")}
MPI = {"launcher": _request(REPLICA, "mpijob-group"), "worker": _request(REPLICA, "mpijob-group")}
MPI_PSAS = [_psa("launcher", [("b1/r1", 1)]), _psa("worker", [("b1/r1", 1), ("b1/r2", 1), ("b2/r1", 1)])]

CASES: list[tuple[str, list[o.PodSetAssignment], dict[str, o.PodSetTopologyRequest], list[o.Pod], Any]] = [
    ("ranks: ungate pods according to their ranks for batch/Job - some Pods already scheduled",
     [_psa("main", FIVE)], {"main": _request(COMPLETION)},
     [_pod("p0", index=(COMPLETION, 0), on="b1/r1"), _pod("p1", index=(COMPLETION, 1)),
      _pod("p2", index=(COMPLETION, 2)), _pod("p3", index=(COMPLETION, 3), on="b2/r1"),
      _pod("p4", index=(COMPLETION, 4))],
     {"p1": "b1/r1", "p2": "b1/r2", "p4": "b2/r1"}),
    ("ranks: ungate pods according to their ranks for LeaderWorkerSet - for all Pods (workers listed first)",
     [_psa("workers", WORKERS), _psa("leader", [("b1/r1", 1)])], LWS,
     [_pod("p0", "leader", (WORKER, 0)), _pod("p1", "workers", (WORKER, 2)),
      _pod("p2", "workers", (WORKER, 1)), _pod("p3", "workers", (WORKER, 3)),
      _pod("p4", "workers", (WORKER, 4))],
     {"p0": "b1/r1", "p2": "b1/r1", "p1": "b1/r2", "p3": "b2/r1", "p4": "b2/r1"}),
    ("ranks: gracefully handle situation with ranks going below 0 (workers indexed from 0: greedy by name)",
     [_psa("workers", WORKERS), _psa("leader", [("b1/r1", 1)])], LWS,
     [_pod("p0", "leader", (WORKER, 0)), _pod("p4", "workers", (WORKER, 0)),
      _pod("p3", "workers", (WORKER, 1)), _pod("p2", "workers", (WORKER, 2)),
      _pod("p1", "workers", (WORKER, 3))],
     {"p0": "b1/r1", "p1": "b1/r1", "p2": "b1/r2", "p3": "b2/r1", "p4": "b2/r1"}),
    ("ranks: gracefully handle situation when parallelism < completions (the failed index 0 frees its slot)",
     [_psa("main", [("b1/r1", 1)])], {"main": _request(COMPLETION)},
     [_pod("p0", index=(COMPLETION, 0), on="b1/r1", phase="Failed"), _pod("p1", index=(COMPLETION, 1))],
     {"p1": "b1/r1"}),
    ("ranks: support rank-based ordering for kubeflow with valid offset annotation (in a group as well)",
     MPI_PSAS, MPI,
     [_pod("l0", "launcher", (REPLICA, 0)), _pod("w1", "worker", (REPLICA, 1), offset="1"),
      _pod("w2", "worker", (REPLICA, 2), offset="1"), _pod("w3", "worker", (REPLICA, 3), offset="1")],
     {"l0": "b1/r1", "w1": "b1/r1", "w2": "b1/r2", "w3": "b2/r1"}),
    ("ranks: support rank-based ordering for kubeflow with invalid offset annotation (nothing ungated)",
     MPI_PSAS, MPI,
     [_pod("l0", "launcher", (REPLICA, 0)), _pod("w0", "worker", (REPLICA, 0), offset="invalid"),
      _pod("w1", "worker", (REPLICA, 1), offset="invalid"),
      _pod("w2", "worker", (REPLICA, 2), offset="invalid")],
     None),
    ("ranks: out-of-range pod index falls back to greedy assignment (the stray pod stays gated)",
     [_psa("worker", [("b1/r1", 1), ("b1/r2", 1)])], {"worker": _request(COMPLETION)},
     [_pod("w1", "worker", (COMPLETION, 1), on="b1/r1", offset="1"),
      _pod("w2", "worker", (COMPLETION, 2), on="b1/r2", offset="1"),
      _pod("stray", "worker", (COMPLETION, 3), offset="1")],
     {}),
    ("ranks: TopologyAssignment shorter than the PodSet count falls back to greedy assignment",
     [_psa("worker", [("b1/r1", 1)], count=2)], {"worker": _request(COMPLETION)},
     [_pod("w1", "worker", (COMPLETION, 1))], {"w1": "b1/r1"}),
    ("ranks: support rank-based ordering for kubeflow - some Pods already scheduled "
     "(a launcher without index)",
     [_psa("main", FOUR)], {"main": _request(REPLICA)},
     [_pod("l0"), _pod("w0", index=(REPLICA, 0)), _pod("w1", index=(REPLICA, 1), on="b1/r1"),
      _pod("w2", index=(REPLICA, 2), on="b1/r2")],
     {"l0": "b1/r1", "w0": "b2/r1"}),
    ("ranks: support rank-based ordering for pod groups - some Pods already scheduled",
     [_psa("main", FOUR)], {"main": _request("kueue.x-k8s.io/pod-group-pod-index")},
     [_pod("w0", index=("kueue.x-k8s.io/pod-group-pod-index", 0)),
      _pod("w1", index=("kueue.x-k8s.io/pod-group-pod-index", 1), on="b1/r1"),
      _pod("w2", index=("kueue.x-k8s.io/pod-group-pod-index", 2)),
      _pod("w3", index=("kueue.x-k8s.io/pod-group-pod-index", 3), on="b2/r1")],
     {"w0": "b1/r1", "w2": "b1/r2"}),
    ("expect single pod; one already running - don't ungate second pod",
     [_psa("main", [("b1/r1", 1)])], {},
     [_pod("pod-already-running", on="b1/r1", phase="Running"), _pod("pod-gated")], {}),
]


@pytest.mark.parametrize(("case", "psas", "requests", "pods", "expected"), CASES,
                         ids=[c[0][:60] for c in CASES])
def test_kueues_ungater_case(case: str, psas: list[o.PodSetAssignment],
                             requests: dict[str, o.PodSetTopologyRequest],
                             pods: list[o.Pod], expected: dict[str, str] | None) -> None:
    assert _ungated(psas, requests, pods) == expected, case
