"""The PodsReady condition a folded Workload shows follows Kueue's job reconciler through admission, readiness, loss
of readiness, eviction and re-admission — from the log alone — and is not written without waitForPodsReady."""

from __future__ import annotations

import pytest
from fixtures.eventgen import T0, admission, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.schema import Record
from events.timefmt import format_time
from projections.cluster import ClusterState
from projections.pods_ready_condition import pods_ready_condition

NOT_READY = "Not all pods are ready or succeeded"
RECOVERING = "At least one pod has failed, waiting for recovery"
READY = "All pods reached readiness and the workload is running"
KEY = "ns/w1"


class Log:
    def __init__(self) -> None:
        self.state = ClusterState()
        self.offset = 0
        self.cycle = 0

    def observe(self, *events: ev.AnyEvent) -> None:
        for e in events:
            self.state.apply(Record(self.offset, e))
            self.offset += 1

    def decide(self, time: int, t: type, **kw: object) -> None:
        self.cycle += 1
        self.observe(t(time=time, cycle=self.cycle, input=self.offset - 1, key=KEY, **kw))

    def ready(self, time: int, is_ready: bool, reason: str = "") -> None:
        self.observe(ev.PodsReadyChanged(time=time, key=KEY, ready=is_ready, reason=reason))

    def shown(self) -> tuple[str, str, str, str] | None:
        c = self.state.workloads[KEY].condition("PodsReady")
        return None if c is None else (c.status, c.reason, c.message, c.last_transition_time)


def cluster_queue() -> o.ClusterQueue:
    return o.ClusterQueue(metadata=o.ObjectMeta(name="cq"), spec=o.ClusterQueueSpec(
        namespace_selector=o.LabelSelector(),
        resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[
            o.FlavorQuotas(name="f0", resources=[o.ResourceQuota(name="cpu", nominal_quota="4")])])]))


def started(config: dict | None = None) -> Log:
    log = Log()
    if config is not None:
        log.observe(ev.ConfigRecorded(time=T0, writer="test", document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **config}))
    log.observe(*(upsert(x, T0) for x in (namespace("ns"), flavor("f0"), cluster_queue(), local_queue("ns", "lq", "cq"),
                                          workload("ns", "w1", queue="lq", created=T0))))
    return log


def at(seconds: int) -> int:
    return T0 + seconds * 1000


def when(seconds: int) -> str:
    return format_time(at(seconds))


def test_admission_readiness_loss_recovery_eviction_and_readmission() -> None:
    log = started()
    assert log.shown() is None  # no job integration has written it yet: nothing is made up
    log.ready(at(1), False, "WaitForStart")  # the Job integration's first pass over the pending Workload
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(1))

    log.decide(at(2), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    log.decide(at(2), ev.WorkloadAdmitted)
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(1))  # False all along: time kept
    log.ready(at(5), True, "Started")
    assert log.shown() == ("True", "Started", READY, when(5))
    log.ready(at(7), False, "WaitForRecovery")
    assert log.shown() == ("False", "WaitForRecovery", RECOVERING, when(7))
    log.ready(at(8), True, "Recovered")
    assert log.shown() == ("True", "Recovered", READY, when(8))

    # evicted with its pods ready: still True until the stopped Job's pods are gone, then waiting for a
    # recovery while admitted, and for a start once the quota is released
    log.decide(at(10), ev.WorkloadEvicted, reason="PodsReadyTimeout", message="timeout")
    assert log.shown() == ("True", "Recovered", READY, when(8))
    log.observe(ev.JobStopped(time=at(11), key=KEY))
    assert log.shown() == ("False", "WaitForRecovery", RECOVERING, when(11))
    log.decide(at(12), ev.WorkloadRequeued, status=True, reason="PodsReadyTimeout", message="requeued",
               release=True)
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(11))

    # given quota again: waits for a start (not a recovery), and its readiness is a start again
    log.decide(at(20), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    log.decide(at(20), ev.WorkloadAdmitted)
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(11))
    log.ready(at(25), True, "Recovered")  # the reason the event carries is not the rule's: the rule's is shown
    assert log.shown() == ("True", "Started", READY, when(25))


def test_readmitted_without_a_release_in_between_shows_the_stale_condition_no_more() -> None:
    """The known gap: an older log holds no PodsReadyChanged after the second admission; folded now, the
    Workload no longer shows the readiness of its first admission."""
    log = started()
    log.decide(at(1), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    log.decide(at(1), ev.WorkloadAdmitted)
    log.ready(at(3), True, "Started")
    log.decide(at(5), ev.WorkloadPreempted, reason="InCohortReclamation", message="preempted", preemptor="ns/x")
    log.decide(at(6), ev.WorkloadRequeued, status=True, reason="Preempted", message="requeued", release=True)
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(6))
    log.decide(at(9), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(6))
    assert not log.state.workloads[KEY].pods_ready


def test_ready_pods_of_a_workload_only_holding_quota_wait_for_its_admission() -> None:
    log = started()
    log.decide(at(1), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    log.ready(at(2), True)
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(2))  # not admitted: Kueue's WaitForStart
    log.decide(at(3), ev.WorkloadAdmitted)
    assert log.shown() == ("True", "Started", READY, when(3))


def test_deactivation_releases_to_waiting_for_the_start() -> None:
    log = started()
    log.decide(at(1), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    log.decide(at(1), ev.WorkloadAdmitted)
    log.ready(at(2), True)
    log.decide(at(4), ev.WorkloadDeactivated, reason="Deactivated", message="The workload is deactivated")
    assert log.shown() == ("False", "WaitForStart", NOT_READY, when(4))


@pytest.mark.parametrize("config", [{"waitForPodsReady": {"enable": False}},
                                    {"featureGates": {"DisableWaitForPodsReady": True}}])
def test_nothing_is_written_without_waitforpodsready(config: dict) -> None:
    log = started(config)
    log.decide(at(1), ev.QuotaReserved, admission=admission("cq", "f0", 1000))
    log.decide(at(1), ev.WorkloadAdmitted)
    log.ready(at(2), True)
    assert log.shown() is None
    assert log.state.workloads[KEY].pods_ready  # what the scheduler reads still follows the pods
    log.ready(at(3), False)
    log.decide(at(4), ev.WorkloadEvicted, reason="PodsReadyTimeout", message="timeout")
    log.decide(at(5), ev.WorkloadRequeued, status=True, reason="PodsReadyTimeout", message="r", release=True)
    assert log.shown() is None


def _cond(status: str, reason: str) -> o.Condition:
    return o.Condition(type="PodsReady", status=status, reason=reason, message="", last_transition_time="")


@pytest.mark.parametrize(("current", "admitted", "ready", "want"), [
    (None, False, False, "WaitForStart"),
    (None, False, True, "WaitForStart"),
    (_cond("True", "Started"), False, True, "WaitForStart"),
    (None, True, False, "WaitForStart"),
    (None, True, True, "Started"),
    (_cond("False", "WaitForStart"), True, True, "Started"),
    (_cond("False", "PodsReady"), True, False, "WaitForStart"),  # the old reason
    (_cond("True", "Started"), True, False, "WaitForRecovery"),
    (_cond("True", "Recovered"), True, False, "WaitForRecovery"),
    (_cond("False", "WaitForRecovery"), True, False, "WaitForRecovery"),
    (_cond("False", "WaitForRecovery"), True, True, "Recovered"),
    (_cond("True", "Recovered"), True, True, "Recovered"),
    (_cond("True", "Started"), True, True, "Started"),
])
def test_the_rule(current: o.Condition | None, admitted: bool, ready: bool, want: str) -> None:
    status, reason, _ = pods_ready_condition(current, admitted, ready)
    assert (status, reason) == ("True" if want in ("Started", "Recovered") else "False", want)
