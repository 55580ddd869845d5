"""MultiKueue's deadlines (a worker lost, the incremental dispatcher's next round) read only the workloads the fold
indexes as nominated or placed on a worker (``ClusterState.dispatched``), and stay what a look at every workload
finds: through nominations, a placement, a lost worker, a deletion and a snapshot's restore."""

from __future__ import annotations

from pathlib import Path

from fixtures import fastyaml

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.multikueue import lost_at, lost_deadlines, lost_workers, round_deadlines, round_over
from kueue_es.scheduler.reconcile import dispatcher_of
from kueue_es.statefile import load_state
from projections import snapshot

START = 1_704_067_200_000
LOST_MS = 5 * 60_000
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "multiKueue": {"workerLostTimeout": "5m",
                                     "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental"}})
WORKERS = ("worker1", "worker2", "worker3", "worker4", "worker5")
QUEUED = 4
"""Workloads the ClusterQueue's quota holds (one cpu each); twice as many more wait without quota."""


def _objects() -> list[dict]:
    out: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "mk-config"},
         "spec": {"clusters": list(WORKERS)}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": w},
           "spec": {"clusterSource": {"kubeConfig": {"location": f"{w}-secret"}}}}
          for w in WORKERS),
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "mk"},
         "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk-config"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": "mk"}]},
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "default", "resources": [{"name": "cpu", "nominalQuota": QUEUED}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "default"},
         "spec": {"clusterQueue": "cq"}},
    ]
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    for i in range(3 * QUEUED):
        out.append({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": f"j{i}", "namespace": "default", "uid": f"job-{i}"},
                    "spec": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue", "template": pod}})
        out.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "metadata": {"name": f"w{i}", "namespace": "default", "uid": f"uid-{i}",
                                 "creationTimestamp": f"2024-01-01T00:00:{i:02d}Z",
                                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"j{i}",
                                                      "uid": f"job-{i}", "controller": True}]},
                    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": pod}]}})
    return out


def _state(tmp_path: Path):
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(_objects()))
    return load_state(str(path), None, START + 60_000).state


def _apply(state, *events) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _every_workload_lost(state) -> list[tuple[int, str]]:
    """What the deadlines were before the index: every workload looked at."""
    lost = lost_workers(state, LOST_MS)
    return sorted((at, key) for key, wl in state.workloads.items() if (at := lost_at(state, wl, lost)) is not None)


def _every_workload_rounds(state) -> list[tuple[int, str]]:
    dispatcher = dispatcher_of(CONFIG)
    return sorted((at, key) for key, wl in state.workloads.items()
                  if (at := round_over(state, wl, dispatcher)) is not None)


def _same_as_every_workload(state) -> tuple[list, list]:
    lost = lost_deadlines(state, LOST_MS)
    rounds = round_deadlines(state, dispatcher_of(CONFIG))
    assert lost == _every_workload_lost(state)
    assert rounds == _every_workload_rounds(state)
    return lost, rounds


class _Counting(dict):
    """The workloads, counting reads of one."""

    reads = 0

    def __getitem__(self, key):
        _Counting.reads += 1
        return super().__getitem__(key)

    def get(self, key, default=None):
        _Counting.reads += 1
        return super().get(key, default)


def test_the_deadlines_read_only_the_dispatched_workloads_and_stay_the_same(tmp_path: Path) -> None:
    state = _state(tmp_path)
    t = START + 60_000
    _apply(state, *(ev.MultiKueueClusterObserved(time=t, key=w, connected=True)
                    for w in WORKERS))
    settle(state, CONFIG, now=t)
    assert sum(1 for wl in state.workloads.values() if wl.reserving) == QUEUED
    lost, rounds = _same_as_every_workload(state)
    assert lost == [] and len(rounds) == QUEUED  # each nominated on three workers of five: a round to come

    t += 1000  # w0's copy is admitted on the worker it was nominated on
    first = state.workloads["default/w0"].nominated[0]
    _apply(state, ev.RemoteWorkloadObserved(time=t, key="default/w0", cluster=first, conditions=[
        o.Condition(type="Admitted", status="True", reason="Admitted", last_transition_time="2024-01-01T00:01:01Z")]))
    settle(state, CONFIG, now=t)
    assert state.workloads["default/w0"].cluster_name == first
    t += 1000  # its worker is lost
    _apply(state, ev.MultiKueueClusterObserved(time=t, key=first, connected=False, reason="ClientConnectionFailed",
                                               message="refused"))
    lost, rounds = _same_as_every_workload(state)
    assert lost == [(t + LOST_MS, "default/w0")] and len(rounds) == QUEUED - 1

    state.workloads = _Counting(state.workloads)
    _Counting.reads = 0
    lost_deadlines(state, LOST_MS)
    round_deadlines(state, dispatcher_of(CONFIG))
    assert len(state.dispatched) == QUEUED
    assert _Counting.reads == 2 * QUEUED, "the waiting workloads, never nominated, are not read"
    state.workloads = dict(state.workloads)

    _apply(state, ev.ObjectDeleted(time=t, key="default/w1", kind="Workload", uid="uid-1"))
    assert "default/w1" not in state.dispatched
    _same_as_every_workload(state)
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.dispatched.keys() == state.dispatched.keys()
    assert _same_as_every_workload(restored) == _same_as_every_workload(state)
