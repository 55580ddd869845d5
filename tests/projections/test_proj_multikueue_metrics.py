"""Kueue v0.20's MultiKueue metrics: ``multikueue_cluster_status`` (a gauge of each manager ClusterQueue's workers)
and ``multikueue_workloads_evicted_total`` (copies evicted on the worker running them), on the MultiKueue dispatch
scenario driven as the connector and the scheduler drive it."""

from __future__ import annotations

from pathlib import Path

from fixtures import fastyaml
from fixtures.multikueue_states import MK_CONFIG

from events import objects as o
from events import schema as ev
from kueue_es.metrics import text as metrics_text
from kueue_es.scheduler import decide, settle
from kueue_es.statefile import load_state
from projections import snapshot
from projections.metrics import families

SCENARIO = Path(__file__).parents[1] / "scheduler" / "scenarios" / "multikueue-dispatch.yaml"
START = 1_704_067_200_000
KEY = "default/job-a"


def _state(tmp_path: Path, gates: dict[str, bool] | None = None):
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    state = load_state(str(path), None, START).state
    if gates is not None:
        _apply(state, ev.ConfigRecorded(time=START, writer="test", document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}))
    return state


def _apply(state, *events) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _remote(t: int, cluster: str, **conditions: str) -> ev.RemoteWorkloadObserved:
    return ev.RemoteWorkloadObserved(time=t, key=KEY, cluster=cluster, conditions=[
        o.Condition(type=k, status="True", reason=v, last_transition_time="2024-01-01T00:00:00Z")
        for k, v in sorted(conditions.items())])


def _series(state, name: str) -> dict:
    for f in families(state):
        if f.spec.name == name:
            return dict(f.samples)
    raise AssertionError(f"no metric {name}")


def test_cluster_status_reports_each_worker_of_a_manager_cluster_queue(tmp_path: Path) -> None:
    state = _state(tmp_path)
    # nothing observed of either worker yet: Unknown
    assert _series(state, "multikueue_cluster_status") == {
        ("cq", w, s): 1.0 if s == "Unknown" else 0.0 for w in ("worker1", "worker2") for s in ("True", "False", "Unknown")}
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker2", connected=False, reason="ClientConnectionFailed",
                                        message="refused"))
    got = _series(state, "multikueue_cluster_status")
    assert {k: v for k, v in got.items() if v} == {("cq", "worker1", "True"): 1.0, ("cq", "worker2", "False"): 1.0}
    assert len(got) == 6
    text = metrics_text([state])
    assert 'multikueue_cluster_status{active="True",cluster="worker1",cluster_queue="cq",' \
           'replica_role="standalone"} 1.0' in text
    # a cluster the config lists without a MultiKueueCluster object is not reported
    _apply(state, ev.ObjectDeleted(time=START + 1000, kind="MultiKueueCluster", key="worker2"))
    assert {k[1] for k in _series(state, "multikueue_cluster_status")} == {"worker1"}
    # a deleted ClusterQueue takes its series along
    _apply(state, ev.ObjectDeleted(time=START + 2000, kind="ClusterQueue", key="cq"))
    assert _series(state, "multikueue_cluster_status") == {}


def test_no_cluster_status_without_the_multikueue_gate(tmp_path: Path) -> None:
    state = _state(tmp_path, {"MultiKueue": False})
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    assert _series(state, "multikueue_cluster_status") == {}


def test_a_copy_evicted_on_its_worker_counts_under_the_worker_and_its_reason(tmp_path: Path) -> None:
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker2", connected=True))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="QuotaReserved", Admitted="Admitted"))
    settle(state, MK_CONFIG, now=START + 1000)
    wl = state.workloads[KEY]
    assert (wl.cluster_name, wl.check_states["mk"].state) == ("worker1", "Ready")
    assert _series(state, "multikueue_workloads_evicted_total") == {}
    _apply(state, _remote(START + 2000, "worker1", QuotaReserved="QuotaReserved", Admitted="Admitted",
                          Evicted="Preempted"))
    batch = decide(state, MK_CONFIG, now=START + 2000)
    assert [(type(d).__name__, getattr(d, "state", "")) for d in batch] == [("AdmissionCheckUpdated", "Retry")]
    _apply(state, *batch)
    assert _series(state, "multikueue_workloads_evicted_total") == {("cq", "worker1", "Preempted"): 1}
    restored = snapshot.decode(snapshot.encode(state))
    assert _series(restored, "multikueue_workloads_evicted_total") == {("cq", "worker1", "Preempted"): 1}
    # the manager's own check updates count nothing
    settle(state, MK_CONFIG, now=START + 3000)
    assert _series(state, "multikueue_workloads_evicted_total") == {("cq", "worker1", "Preempted"): 1}


def _gone(t: int, cluster: str) -> ev.RemoteWorkloadObserved:
    return ev.RemoteWorkloadObserved(time=t, key=KEY, cluster=cluster, exists=False)


def test_copies_made_on_workers_count_as_dispatched_and_the_one_admitted_as_admitted(tmp_path: Path) -> None:
    """Kueue v0.19 (#12782, #13050; its MultiKueue workload reconciler): ``multikueue_workloads_dispatched_total``
    counts each copy of a workload made on a worker, ``multikueue_workloads_admitted_total`` the copy a worker
    admitted (the check turns Ready), both under the manager's ClusterQueue and the worker."""
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker2", connected=True))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    assert _series(state, "multikueue_workloads_dispatched_total") == {}, "nominated, no copy made yet"
    _apply(state, _remote(START + 500, "worker1"), _remote(START + 500, "worker2"))
    dispatched = {("cq", "worker1"): 1, ("cq", "worker2"): 1}
    assert _series(state, "multikueue_workloads_dispatched_total") == dispatched
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="QuotaReserved", Admitted="Admitted"))
    assert _series(state, "multikueue_workloads_dispatched_total") == dispatched, "the same copy, changed"
    assert _series(state, "multikueue_workloads_admitted_total") == {}
    settle(state, MK_CONFIG, now=START + 1000)
    assert state.workloads[KEY].check_states["mk"].state == "Ready"
    assert _series(state, "multikueue_workloads_admitted_total") == {("cq", "worker1"): 1}
    settle(state, MK_CONFIG, now=START + 1500)
    assert _series(state, "multikueue_workloads_admitted_total") == {("cq", "worker1"): 1}, "once per admission"
    _apply(state, _gone(START + 2000, "worker2"), _gone(START + 2000, "worker1"),
           _remote(START + 2500, "worker1", QuotaReserved="QuotaReserved", Admitted="Admitted"))
    assert _series(state, "multikueue_workloads_dispatched_total") == {("cq", "worker1"): 2, ("cq", "worker2"): 1}
    restored = snapshot.decode(snapshot.encode(state))
    assert _series(restored, "multikueue_workloads_dispatched_total") == {("cq", "worker1"): 2, ("cq", "worker2"): 1}
    assert _series(restored, "multikueue_workloads_admitted_total") == {("cq", "worker1"): 1}
    assert 'multikueue_workloads_admitted_total{cluster="worker1",cluster_queue="cq",replica_role="standalone"} ' \
           '1.0' in metrics_text([state])
