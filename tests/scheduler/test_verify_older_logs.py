"""``replay --verify`` of logs written by an older kueue-es. Before session 32 the scheduler did not evict a
deactivated Workload that holds no quota (Kueue's workload controller does, whatever the admission): such a log
holds, for the cycle that now starts with that eviction, what the older scheduler decided instead, the
workload's blocker, or the cycle's other decisions when the blocker was already shown. Nor did it write a
skipped attempt with nothing new to say so the cycle's written skips count them all, which a state folded from
a log without skip marks (their count unknown) asks of every cycle that skips. All of these verify; a batch
that matches neither the scheduler nor its older self still does not."""

from __future__ import annotations

from pathlib import Path

import msgspec
from fixtures import fastyaml

from events import schema as ev
from events.manifests import load_text
from events.timefmt import parse_time
from kueue_es.scheduler import decide
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.verify import verify
from projections.cluster import ClusterState

T = parse_time("2024-01-01T00:01:00Z")
OBJECTS = """
- {apiVersion: v1, kind: Namespace, metadata: {name: team}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: cq}
  spec:
    namespaceSelector: {}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:
      - {name: default, resources: [{name: cpu, nominalQuota: 1}]}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq, namespace: team},
   spec: {clusterQueue: cq}}
"""
BORN_OFF = """
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {name: born-off, namespace: team, uid: uid-born-off, creationTimestamp: "2024-01-01T00:00:01Z"}
  spec:
    active: false
    queueName: lq
    podSets:
    - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
"""
SHOWS_BLOCKER = """
  status:
    conditions:
    - {type: QuotaReserved, status: "False", reason: Deactivated, message: The workload is deactivated,
       lastTransitionTime: "2024-01-01T00:00:02Z"}
"""
RUNS = """
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {name: runs, namespace: team, uid: uid-runs, creationTimestamp: "2024-01-01T00:00:00Z"}
  spec:
    queueName: lq
    podSets:
    - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
"""


def objects_log(text: str) -> list[ev.Event]:
    objs = load_text(fastyaml.safe_dump_all(fastyaml.safe_load(text)), "objects").objects
    return [ev.ObjectUpserted(time=T, key=x.key, uid=x.metadata.uid, obj=x) for x in objs]


def folded(log: list[ev.Event]) -> ClusterState:
    state = ClusterState()
    for i, e in enumerate(log):
        state.apply(ev.Record(i, e))
    return state


def verified(log: list[ev.Event]) -> bool:
    records = [ev.Record(i, e) for i, e in enumerate(log)]
    return verify(lambda: records).ok


def blocker(input_: int, reason: str = "Deactivated") -> ev.WorkloadPending:
    """What kueue-es before session 32 wrote in the first cycle for a Workload created inactive."""
    return ev.WorkloadPending(key="team/born-off", uid="uid-born-off", reason=reason,
                              message="The workload is deactivated", time=T, cycle=1, input=input_)


def test_a_cycle_holding_the_blocker_where_the_eviction_now_comes_verifies() -> None:
    log = objects_log(OBJECTS + BORN_OFF)
    now = decide(folded(log), DEFAULT, T)
    assert [type(d).__name__ for d in now] == ["WorkloadDeactivated"]
    assert verified([*log, *now])
    assert verified([*log, blocker(len(log) - 1)])  # the log 5f0c30dc writes for this scenario
    assert not verified([*log, blocker(len(log) - 1, reason="Inadmissible")])


def test_a_cycle_holding_the_admissions_where_the_eviction_now_comes_verifies() -> None:
    """The older scheduler had nothing to say of a workload already showing its blocker, so it ran the cycle."""
    log = objects_log(OBJECTS + BORN_OFF + SHOWS_BLOCKER + RUNS)
    state = folded(log)
    now = decide(state, DEFAULT, T)
    assert [(type(d).__name__, d.key) for d in now] == [("WorkloadDeactivated", "team/born-off")]
    older = run_cycle(state, DEFAULT, T, 1)
    assert ("WorkloadAdmitted", "team/runs") in [(type(d).__name__, d.key) for d in older]
    assert verified([*log, *older])
    assert not verified([*log, *older[:-1]])


OVERLAP = Path(__file__).parent / "scenarios" / "overlap-recompute-new-targets-gate-off.yaml"
ELSEWHERE = """
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: d}
  spec:
    namespaceSelector: {}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:
      - {name: default, resources: [{name: cpu, nominalQuota: 1}]}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq-d, namespace: team},
   spec: {clusterQueue: d}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {name: wd, namespace: team, uid: uid-wd, creationTimestamp: "2024-01-01T00:00:20Z"}
  spec:
    queueName: lq-d
    podSets:
    - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
"""


def test_a_cycle_without_the_settling_skip_writes_of_a_log_without_marks_verifies() -> None:
    """Cycle 1 skips ``wa`` (its target overlaps ``wb``'s), written without the mark as logs did before the marks.
    A Workload elsewhere then makes cycle 2, which skips ``wa`` again with nothing new to say: the older scheduler
    wrote only the admission; the scheduler now writes ``wa``'s attempt too, the skips' count being unknown."""
    spec = fastyaml.safe_load(OVERLAP.read_text())
    config = load_config(spec["config"])
    log: list[ev.Event] = [ev.ConfigRecorded(time=T, writer="test", document=spec["config"])]
    log += objects_log(fastyaml.safe_dump(spec["objects"]))
    first = decide(folded(log), config, T)
    assert [d.key for d in first if isinstance(d, ev.WorkloadPending) and d.preemption_skipped] == ["team/wa"]
    log += [msgspec.structs.replace(d, preemption_skipped=False) if isinstance(d, ev.WorkloadPending) else d
            for d in first]
    log += objects_log(ELSEWHERE)
    second = decide(folded(log), config, T + 1000)
    assert [(type(d).__name__, d.key) for d in second] == [
        ("QuotaReserved", "team/wd"), ("WorkloadAdmitted", "team/wd"), ("WorkloadPending", "team/wa")]
    assert verified([*log, *second])
    assert verified([*log, *second[:2]])
    assert not verified([*log, second[0], second[2]])
