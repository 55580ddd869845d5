"""WaitForPodsReadyUnscheduledTimeout (alpha): the PodsScheduled condition a folded Workload shows follows its Pods
in the log as Kueue's UnscheduledPodsTracker writes it, PodsReady waits for the scheduling while it says False,
and the scheduler's deadline is the admission plus ``unscheduledTimeout`` with the underlying cause
``WaitForScheduling``. Off (gate, timeout unset or zero), nothing of it."""

from __future__ import annotations

import pytest
from fixtures.eventgen import T0, admission, flavor, local_queue, meta, namespace, upsert, workload

from connectors.k8s import trim
from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from kueue_es.scheduler import pods_ready_timeouts
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.reconcile import next_deadline
from projections import pods_scheduled, snapshot
from tests.projections.test_proj_pods_ready_condition import Log as ConditionLog

KEY = "ns/w1"
UNSCHEDULED = ("False", "WaitForScheduling", "At least one required pod is not scheduled")
SCHEDULED = ("True", "AllRequiredPodsScheduled", "All required pods were scheduled or succeeded")
RESET = ("False", "WaitForStart", "Not all pods are ready or succeeded")
ON = {"waitForPodsReady": {"timeout": "5m", "unscheduledTimeout": "2m"},
      "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True}}


def at(seconds: int) -> int:
    return T0 + seconds * 1000


class Log(ConditionLog):
    def __init__(self, config: dict, count: int = 2) -> None:
        super().__init__()
        self.document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **config}
        self.observe(ev.ConfigRecorded(time=T0, writer="test", document=self.document))
        cq = o.ClusterQueue(metadata=o.ObjectMeta(name="cq"), spec=o.ClusterQueueSpec(
            namespace_selector=o.LabelSelector(),
            resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[
                o.FlavorQuotas(name="f0", resources=[o.ResourceQuota(name="cpu", nominal_quota="8")])])]))
        self.observe(*(upsert(x, T0) for x in (namespace("ns"), flavor("f0"), cq, local_queue("ns", "lq", "cq"),
                                               workload("ns", "w1", queue="lq", created=T0, count=count))))
        self.count = count

    def admit(self, time: int) -> None:
        self.decide(time, ev.QuotaReserved, admission=admission("cq", "f0", 1000 * self.count, count=self.count))
        self.decide(time, ev.WorkloadAdmitted)
        self.observe(ev.PodsReadyChanged(time=time, key=KEY, ready=False, reason="WaitForStart"))

    def pod(self, time: int, name: str, *, bound: bool = False, phase: str = "Pending", owner: str = "w1",
            deleting: bool = False) -> None:
        conditions = [o.Condition(type="PodScheduled", status="True" if bound else "False")]
        m = meta(name, "ns", annotations={"kueue.x-k8s.io/workload": owner},
                 labels={"kueue.x-k8s.io/podset": "main"}, deletion_timestamp=format_time(time) if deleting else None)
        self.observe(upsert(o.Pod(metadata=m, spec=o.PodSpec(node_name="n1" if bound else ""),
                                  status=o.PodStatus(phase=phase, conditions=conditions)), time))

    def gone(self, time: int, name: str) -> None:
        self.observe(ev.ObjectDeleted(time=time, key=f"ns/{name}", kind="Pod"))

    def shown(self, type_: str = "PodsScheduled") -> tuple[str, str, str] | None:  # type: ignore[override]
        c = self.state.workloads[KEY].condition(type_)
        return None if c is None else (c.status, c.reason, c.message)

    def since(self, type_: str = "PodsScheduled") -> str | None:
        c = self.state.workloads[KEY].condition(type_)
        return None if c is None else c.last_transition_time

    def deadline(self) -> tuple[int, str] | None:
        return pods_ready_timeouts.deadline(load_config(self.document), self.state.workloads[KEY])


def test_unscheduled_pods_are_observed_then_scheduled_and_the_deadline_follows() -> None:
    log = Log(ON)
    log.admit(at(1))
    assert log.shown() is None  # no live Pod seen: nothing observed, the 5m timeout
    assert log.deadline() == (at(1) + 300_000, "WaitForStart")
    log.pod(at(3), "p0", bound=True)
    assert log.shown() == UNSCHEDULED  # one of two slots: not all scheduled
    assert log.since() == format_time(at(3))
    assert log.shown("PodsReady")[:2] == ("False", "WaitForScheduling")
    assert log.deadline() == (at(1) + 120_000, "WaitForScheduling")  # from the admission, not the observation
    config = load_config(log.document)
    assert next_deadline(log.state, config) == at(1) + 120_000
    assert KEY in pods_ready_timeouts.due(log.state, config, at(1) + 120_000)
    log.pod(at(5), "p1")  # a second, unscheduled Pod: the observation stands, with its time
    assert log.shown() == UNSCHEDULED and log.since() == format_time(at(3))
    log.pod(at(8), "p1", bound=True)
    assert log.shown() == SCHEDULED and log.since() == format_time(at(8))
    assert log.shown("PodsReady")[:2] == ("False", "WaitForStart")
    assert log.deadline() == (at(1) + 300_000, "WaitForStart")
    assert next_deadline(log.state, config) == at(1) + 300_000
    log.gone(at(9), "p0")  # True stays for the admission (replacement Pods are not tracked)
    assert log.shown() == SCHEDULED


def test_failed_and_deleting_pods_fill_no_slot_and_open_no_observation() -> None:
    log = Log(ON, count=1)
    log.admit(at(1))
    log.pod(at(2), "p0", bound=True, phase="Failed")
    log.pod(at(2), "p1", bound=True, deleting=True)
    assert log.shown() is None
    log.pod(at(3), "p2")
    assert log.shown() == UNSCHEDULED
    log.pod(at(4), "other", bound=True, owner="w2")  # another Workload's Pod
    assert log.shown() == UNSCHEDULED


def test_a_bound_pod_not_shown_scheduled_is_not_scheduled() -> None:
    log = Log(ON, count=1)
    log.admit(at(1))
    m = meta("p0", "ns", annotations={"kueue.x-k8s.io/workload": "w1"}, labels={"kueue.x-k8s.io/podset": "main"})
    log.observe(upsert(o.Pod(metadata=m, spec=o.PodSpec(node_name="n1"), status=o.PodStatus(phase="Pending")), at(2)))
    assert log.shown() == UNSCHEDULED


def test_a_lost_admission_resets_true_and_a_readmission_ignores_the_old_observation() -> None:
    log = Log(ON, count=1)
    log.admit(at(1))
    log.pod(at(2), "p0", bound=True)
    assert log.shown() == SCHEDULED
    log.decide(at(10), ev.WorkloadEvicted, reason="PodsReadyTimeout", message="timeout")
    assert log.shown() == SCHEDULED  # evicted, still admitted: kept
    log.gone(at(11), "p0")
    log.decide(at(12), ev.WorkloadRequeued, status=True, reason="PodsReadyTimeout", message="requeued", release=True)
    assert log.shown() == RESET
    log.admit(at(20))
    assert log.shown() == RESET  # no live Pod yet: not this admission's observation
    assert log.deadline() == (at(20) + 300_000, "WaitForStart")
    log.pod(at(21), "p0b")
    assert log.shown() == UNSCHEDULED
    assert log.deadline() == (at(20) + 120_000, "WaitForScheduling")


def test_an_observation_from_an_earlier_admission_does_not_count() -> None:
    log = Log(ON, count=1)
    log.admit(at(1))
    log.pod(at(2), "p0")
    assert log.shown() == UNSCHEDULED
    wl = log.state.workloads[KEY]
    wl.admitted_at = at(30)  # as if admitted again later without a new observation
    assert not pods_scheduled.waiting_for_scheduling(wl)
    assert log.deadline() == (at(30) + 300_000, "WaitForScheduling")  # the reason still says so: timeout


@pytest.mark.parametrize("config", [
    {"waitForPodsReady": {"timeout": "5m", "unscheduledTimeout": "2m"}},
    {"waitForPodsReady": {"timeout": "5m", "unscheduledTimeout": "0s"},
     "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True}},
    {"waitForPodsReady": {"timeout": "5m"}, "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True}},
])
def test_nothing_changes_when_not_tracked(config: dict) -> None:
    log = Log(config, count=1)
    log.admit(at(1))
    log.pod(at(2), "p0")
    assert log.shown() is None
    assert log.shown("PodsReady")[:2] == ("False", "WaitForStart")
    assert log.deadline() == (at(1) + 300_000, "WaitForStart")
    assert next_deadline(log.state, load_config(log.document)) == at(1) + 300_000


def test_tracking_reads_the_gate_the_timeout_and_waitforpodsready() -> None:
    assert Log(ON).state.tracks_pods_scheduled
    # the gate as the fold reads every gate: AllAlpha turns it on (and DisableWaitForPodsReady, unless kept off)
    assert Log({**ON, "featureGates": {"AllAlpha": True, "DisableWaitForPodsReady": False}}).state.tracks_pods_scheduled
    assert not Log({**ON, "featureGates": {"AllAlpha": True}}).state.tracks_pods_scheduled
    assert not Log({**ON, "featureGates": {}}).state.tracks_pods_scheduled
    assert not ConditionLog().state.tracks_pods_scheduled  # no configuration recorded: Kueue's defaults
    assert not Log({**ON, "featureGates": {
        "WaitForPodsReadyUnscheduledTimeout": True, "DisableWaitForPodsReady": True}}).state.tracks_pods_scheduled
    assert not Log({"waitForPodsReady": {"unscheduledTimeout": "0m0s"},
                    "featureGates": {"WaitForPodsReadyUnscheduledTimeout": True}}).state.tracks_pods_scheduled


def test_the_log_keeps_only_the_pods_podscheduled_status() -> None:
    pod = o.Pod(metadata=meta("p0", "ns", annotations={"kueue.x-k8s.io/workload": "w1"}),
                spec=o.PodSpec(node_name="n1"), status=o.PodStatus(phase="Running", conditions=[
                    o.Condition(type="Ready", status="True", reason="x"),
                    o.Condition(type="PodScheduled", status="True", reason="y", message="m",
                                last_transition_time=format_time(T0))]))
    kept = trim.pod_view(pod)
    assert kept is not None and kept.status.conditions == [o.Condition(type="PodScheduled", status="True")]
    assert pods_scheduled.scheduled(kept)


class _CountingPods(dict):
    """The state's Pod table, counting the Pods read by key and the passes over the whole table."""

    def __init__(self, table: dict) -> None:
        super().__init__(table)
        self.read: list[str] = []
        self.passes = 0

    def __getitem__(self, key: str) -> o.Pod:
        self.read.append(key)
        return super().__getitem__(key)

    def __iter__(self):
        self.passes += 1
        return super().__iter__()

    def values(self):  # type: ignore[override]
        self.passes += 1
        return super().values()

    def items(self):  # type: ignore[override]
        self.passes += 1
        return super().items()


def test_a_look_reads_the_pods_its_workload_annotation_links_and_no_other() -> None:
    log = Log(ON)
    log.admit(at(1))
    for i in range(20):  # Pods of other workloads, and Pods of none
        log.pod(at(2), f"other{i}", owner="w9" if i % 2 else "")
    log.pod(at(2), "p0", bound=True)
    assert log.state.pods_of["ns/w1"] == {"ns/p0": None}
    counting = log.state.pods = _CountingPods(log.state.pods)
    log.pod(at(3), "p1", bound=True)  # the look at w1 reads its two Pods
    assert log.shown() == SCHEDULED
    assert sorted(set(counting.read)) == ["ns/p0", "ns/p1"] and counting.passes == 0


def test_the_index_follows_a_pods_annotation_and_is_rebuilt_on_restore() -> None:
    log = Log(ON)
    log.admit(at(1))
    log.pod(at(2), "p0")
    log.pod(at(2), "p1")
    log.pod(at(3), "p1", owner="w2")  # re-annotated: linked to another workload
    assert log.state.pods_of == {"ns/w1": {"ns/p0": None}, "ns/w2": {"ns/p1": None}}
    log.gone(at(4), "p0")
    assert log.state.pods_of == {"ns/w2": {"ns/p1": None}}
    assert snapshot.restore(snapshot.take(log.state)).pods_of == log.state.pods_of
