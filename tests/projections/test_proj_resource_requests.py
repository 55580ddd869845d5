"""``status.resourceRequests``: what it holds (per pod set totals, Kueue's quantities) and when the fold shows it.

Kueue writes it only in the scheduler's status write of a failed admission attempt, and empties it in the write
that reserves quota; the workload controller's own QuotaReserved=False updates leave it as it is.
"""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, cluster_queue, flavor, fold, local_queue, meta, namespace, records, upsert

from events import objects as o
from events import schema as ev
from events.quantity import MAX_INT64
from projections import snapshot
from projections.workloads import (
    PENDING_EVALUATION,
    PODS_READY_WAIT_MESSAGE,
    WorkloadInfo,
    failed_attempt,
    pod_set_info,
    resource_requests,
    status_of,
)

S = 1000


def pod_set(name: str, count: int, requests: dict[str, str] | None = None, *, limits: dict[str, str] | None = None,
            init: dict[str, str] | None = None) -> o.PodSet:
    containers = [o.Container(name="c", resources=o.ResourceRequirements(requests=requests or {}, limits=limits or {}))]
    inits = [o.Container(name="i", resources=o.ResourceRequirements(requests=init))] if init else []
    return o.PodSet(name=name, count=count,
                    template=o.PodTemplateSpec(spec=o.PodSpec(containers=containers, init_containers=inits)))


def workload(*pod_sets: o.PodSet, name: str = "w", status: o.WorkloadStatus | None = None) -> o.Workload:
    return o.Workload(metadata=meta(name, "team", uid=f"uid-{name}"),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=list(pod_sets)),
                      status=status or o.WorkloadStatus())


def info(*pod_sets: o.PodSet) -> WorkloadInfo:
    return WorkloadInfo(key="team/w", uid="uid-w", namespace="team", name="w", queue_name="lq", created=T0,
                        priority=0, priority_class="", pod_sets=tuple(pod_set_info(ps) for ps in pod_sets))


def d(t: int) -> dict[str, int]:
    return {"time": T0 + t * S, "cycle": t, "input": 0}


def no_fit(t: int, key: str = "team/w") -> ev.WorkloadPending:
    return ev.WorkloadPending(key=key, reason="WaitingForQuota", message="insufficient unused quota",
                              requeue_reason="PreemptionNoCandidates", parked=True, **d(t))


def reserved(t: int, key: str = "team/w") -> ev.QuotaReserved:
    return ev.QuotaReserved(key=key, admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "3"}, count=3)]), **d(t))


def base() -> list[ev.AnyEvent]:
    return [upsert(namespace("team"), T0), upsert(flavor("f0"), T0),
            upsert(cluster_queue("cq", quotas={"f0": 1}), T0), upsert(local_queue("team", "lq", "cq"), T0)]


def state_after(*events: ev.AnyEvent, wl: o.Workload | None = None):
    wl = wl or workload(pod_set("main", 3, {"cpu": "1", "memory": "1G"}))
    return fold(records([[*base(), upsert(wl, T0), *events]]))


# --- what it holds -------------------------------------------------------------------------------------------


def test_totals_per_pod_set_in_spec_order_times_the_count() -> None:
    wl = info(pod_set("workers", 4, {"cpu": "250m", "memory": "1000M", "example.com/gpu": "2"}),
              pod_set("driver", 1, {"cpu": "1500m", "memory": "512Mi"}, init={"cpu": "2"}),
              pod_set("launcher", 2, limits={"ephemeral-storage": "1Gi", "cpu": "500m"}))
    assert resource_requests(wl) == [
        # 4G is a whole number of KiB: Kueue writes it in binary units (3G is not, and stays 3G)
        {"name": "workers", "resources": {"cpu": "1", "example.com/gpu": "8", "memory": "3906250Ki"}},
        {"name": "driver", "resources": {"cpu": "2", "memory": "512Mi"}},  # the init container asks for more
        {"name": "launcher", "resources": {"cpu": "1", "ephemeral-storage": "2Gi"}},  # limits stand for requests
    ]


def test_a_pod_set_of_no_pods_asks_for_zero_and_one_asking_nothing_has_no_resources() -> None:
    wl = info(pod_set("idle", 0, {"cpu": "2", "memory": "1Gi"}), pod_set("empty", 5))
    assert resource_requests(wl) == [{"name": "idle", "resources": {"cpu": "0", "memory": "0"}}, {"name": "empty"}]


def test_totals_past_int64_are_capped_as_kueue_caps_them() -> None:
    wl = info(pod_set("huge", 2**20, {"example.com/units": str(2**50)}))
    assert resource_requests(wl) == [{"name": "huge", "resources": {"example.com/units": str(MAX_INT64)}}]


# --- which decisions write it ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("decision", "by_scheduler"), [
    (no_fit(1), True),
    (ev.WorkloadPending(key="team/w", reason="WaitingForQuota", message="m", **d(1)), True),
    (ev.WorkloadPending(key="team/w", reason="PendingEvaluation", message="The workload has failed admission checks",
                        **d(1)), True),
    (ev.WorkloadPending(key="team/w", reason="Misconfigured", message="Namespace team doesn't exist",
                        requeue_reason="NamespaceMismatch", **d(1)), True),
    (ev.WorkloadPending(key="team/w", reason="Misconfigured", message="LocalQueue lq doesn't exist", **d(1)), False),
    (ev.WorkloadPending(key="team/w", reason="Suspended", message="ClusterQueue cq is inactive", **d(1)), False),
    (ev.WorkloadPending(key="team/w", reason="Deactivated", message="The workload is deactivated", **d(1)), False),
    (ev.WorkloadPending(key="team/w", reason="PendingEvaluation", message=PENDING_EVALUATION, **d(1)), False),
    (ev.WorkloadPending(key="team/w", reason="WaitingForPodsReady", message=PODS_READY_WAIT_MESSAGE, **d(1)), False),
    (ev.WorkloadPending(key="team/w", reason="Waiting", message=PODS_READY_WAIT_MESSAGE, **d(1)), False),
])
def test_only_a_failed_admission_attempt_writes_it(decision: ev.WorkloadPending, by_scheduler: bool) -> None:
    assert failed_attempt(decision) is by_scheduler
    status = status_of(state_after(decision).workloads["team/w"])
    assert ("resourceRequests" in status) is by_scheduler
    if by_scheduler:
        assert status["resourceRequests"] == [{"name": "main", "resources": {"cpu": "3", "memory": "3G"}}]


def test_the_reservation_empties_it_and_it_stays_empty_until_the_next_failed_attempt() -> None:
    release = ev.WorkloadRequeued(key="team/w", status=True, reason="Preempted", release=True, **d(4))
    steps: list[tuple[ev.AnyEvent, bool]] = [
        (no_fit(1), True),
        (ev.WorkloadPending(key="team/w", reason="Suspended", message="ClusterQueue cq is inactive", **d(2)), True),
        (reserved(3), False),
        (ev.WorkloadPreempted(key="team/w", reason="InClusterQueue", message="preempted", **d(4)), False),
        (release, False),
        (ev.WorkloadPending(key="team/w", reason="PendingEvaluation", message=PENDING_EVALUATION, **d(5)), False),
        (no_fit(6), True),
    ]
    state = state_after()
    assert "resourceRequests" not in status_of(state.workloads["team/w"])
    for i, (event, shown) in enumerate(steps):
        state.apply(ev.Record(state.offset + 1, event))
        status = status_of(state.workloads["team/w"])
        assert ("resourceRequests" in status) is shown, f"after step {i}: {type(event).__name__}"


def test_it_follows_the_pod_sets_as_they_are_now() -> None:
    state = state_after(no_fit(1))
    bigger = workload(pod_set("main", 5, {"cpu": "1", "memory": "1G"}))
    state.apply(ev.Record(state.offset + 1, upsert(bigger, T0 + 2 * S)))
    assert status_of(state.workloads["team/w"])["resourceRequests"] == [
        {"name": "main", "resources": {"cpu": "5", "memory": "5G"}}]


# --- what a workload first seen with a status shows ----------------------------------------------------------


def test_a_pending_workload_first_seen_showing_it_keeps_showing_it() -> None:
    shown = o.WorkloadStatus(resource_requests=[o.PodSetRequest(name="main", resources={"cpu": "3"})])
    state = state_after(wl=workload(pod_set("main", 3, {"cpu": "1"}), status=shown))
    assert status_of(state.workloads["team/w"])["resourceRequests"] == [{"name": "main", "resources": {"cpu": "3"}}]
    state = state_after(wl=workload(pod_set("main", 3, {"cpu": "1"})))
    assert "resourceRequests" not in status_of(state.workloads["team/w"])


def test_a_reserved_workload_first_seen_shows_none() -> None:
    adm = reserved(0).admission
    st = o.WorkloadStatus(admission=adm, resource_requests=[o.PodSetRequest(name="main", resources={"cpu": "3"})],
                          conditions=[o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved",
                                                  last_transition_time="2024-05-01T08:00:00Z")])
    state = state_after(wl=workload(pod_set("main", 3, {"cpu": "1"}), status=st))
    assert state.workloads["team/w"].reserving
    assert "resourceRequests" not in status_of(state.workloads["team/w"])


def test_the_observed_field_decodes_from_the_api_and_the_flag_survives_a_snapshot() -> None:
    raw = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
           "status": {"resourceRequests": [{"name": "main", "resources": {"cpu": "3", "memory": "3G"}}]}}
    got = msgspec.convert(raw, o.Workload)
    assert got.status.resource_requests == [o.PodSetRequest(name="main", resources={"cpu": "3", "memory": "3G"})]
    state = state_after(no_fit(1))
    again = snapshot.decode(snapshot.encode(state))
    assert again.workloads["team/w"].shows_requests
    assert status_of(again.workloads["team/w"]) == status_of(state.workloads["team/w"])
