"""``kueue-es metrics``: Kueue's Prometheus metrics at a point of the log, through the real command."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import FIXTURES, append, kueue_es, one_line_error
from prometheus_client.parser import text_string_to_metric_families

from events import schema as ev
from events.filelog import FileLog
from events.objects import Admission, PodSetAssignment
from events.timefmt import parse_time
from kueue_es import metrics
from projections.cluster import ClusterState


def t(clock: str) -> int:
    return parse_time(f"2024-05-01T{clock}Z")


ADMISSION = Admission(cluster_queue="cq-b", pod_set_assignments=[
    PodSetAssignment(name="main", flavors={"cpu": "on-demand"}, resource_usage={"cpu": "500m"}, count=1)])


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """cluster.yaml imported (offsets 0..10; train-1 admitted in cq-a, infer-2 pending in cq-b), then infer-2
    fails an attempt, preempts train-1, gets its quota and finishes; then a configuration turns the ClusterQueue
    resource gauges on."""
    path = tmp_path / "log"
    assert kueue_es("import", "-f", FIXTURES / "cluster.yaml", "--log", path, "--time", "2024-05-01T08:00:00Z").code == 0
    for batch in [
        [ev.WorkloadPending(key="team-a/infer-2", reason="WaitingForQuota", message="no room", requeue_reason="NoFit",
                            time=t("10:02:00"), cycle=1, input=10)],                                        # 11
        [ev.WorkloadPreempted(key="team-a/train-1", reason="InCohortReclamation", message="preempted",
                              preemptor="team-a/infer-2", time=t("10:02:02"), cycle=2, input=11)],          # 12
        [ev.JobStopped(key="team-a/train-1", time=t("10:02:10"))],                                        # 13
        [ev.WorkloadRequeued(key="team-a/train-1", status=True, reason="Preempted", release=True,
                             time=t("10:02:11"), cycle=3, input=13),                                        # 14
         ev.QuotaReserved(key="team-a/infer-2", admission=ADMISSION, time=t("10:02:11"), cycle=3, input=13),  # 15
         ev.WorkloadAdmitted(key="team-a/infer-2", time=t("10:02:11"), cycle=3, input=13)],                # 16
        [ev.WorkloadFinished(key="team-a/infer-2", time=t("10:30:00"))],                                  # 17
        [ev.ConfigRecorded(time=t("10:30:00"), document={                                                    # 18
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "metrics": {"enableClusterQueueResources": True}})],
    ]:
        append(path, batch)
    return path


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted({**labels, "replica_role": "standalone"}.items()))))


def test_metrics_at_the_end_of_the_log(log: Path) -> None:
    r = kueue_es("metrics", "--log", log)
    assert r.code == 0, r.err
    found = samples(r.out)
    assert value(found, "kueue_admission_attempts_total", result="inadmissible") == 2  # cycles 1 and 2
    assert value(found, "kueue_admission_attempts_total", result="success") == 1
    assert value(found, "kueue_quota_reserved_workloads_total", cluster_queue="cq-b", priority_class="") == 1
    # infer-2 was created at 10:01:00 and got its quota 71 s later
    wait = "kueue_quota_reserved_wait_time_seconds"
    assert value(found, f"{wait}_bucket", cluster_queue="cq-b", priority_class="", le="40") == 0
    assert value(found, f"{wait}_bucket", cluster_queue="cq-b", priority_class="", le="80") == 1
    assert value(found, f"{wait}_bucket", cluster_queue="cq-b", priority_class="", le="+Inf") == 1
    assert value(found, f"{wait}_sum", cluster_queue="cq-b", priority_class="") == 71
    assert value(found, "kueue_admission_wait_time_seconds_bucket", cluster_queue="cq-b", priority_class="",
                 le="40960") == 1
    assert value(found, "kueue_evicted_workloads_total", cluster_queue="cq-a", reason="Preempted",
                 underlying_cause="", priority_class="high") == 1
    assert value(found, "kueue_preempted_workloads_total", preempting_cluster_queue="cq-b",
                 reason="InCohortReclamation") == 1
    assert value(found, "kueue_finished_workloads_total", cluster_queue="cq-b", priority_class="") == 1
    assert value(found, "kueue_execution_time_seconds_sum", cluster_queue="cq-b", priority_class="") == 1669
    assert value(found, "kueue_finished_workloads", cluster_queue="cq-b") == 1
    assert value(found, "kueue_finished_workloads", cluster_queue="cq-a") == 1  # etl-0, imported finished
    assert value(found, "kueue_pending_workloads", cluster_queue="cq-a", status="active") == 1  # train-1 again
    assert value(found, "kueue_cluster_queue_nominal_quota", cohort="research", cluster_queue="cq-a",
                 flavor="on-demand", resource="memory") == 64 * 2**30
    assert value(found, "kueue_cluster_queue_borrowing_limit", cohort="research", cluster_queue="cq-b",
                 flavor="on-demand", resource="cpu") == float("inf")
    assert value(found, "kueue_cohort_subtree_admitted_workloads_total", cohort="research", priority_class="") == 1
    assert "# TYPE kueue_quota_reserved_wait_time_seconds histogram" in r.out

    state = ClusterState()  # exactly what the projection gives, in the exposition format
    for batch in FileLog.open(log, readonly=True).scan():
        for rec in batch:
            state.apply(rec)
    assert r.out == metrics.text([state])


def test_metrics_at_an_earlier_point(log: Path) -> None:
    before = samples(kueue_es("metrics", "--log", log, "--to", "13").out)
    assert value(before, "kueue_quota_reserved_workloads_total", cluster_queue="cq-b", priority_class="") is None
    assert value(before, "kueue_admission_attempts_total", result="inadmissible") == 2
    assert value(before, "kueue_reserving_active_workloads", cluster_queue="cq-a") == 1  # train-1 still holds it
    at = samples(kueue_es("metrics", "--log", log, "--at", "2024-05-01T10:02:00Z").out)
    assert value(at, "kueue_admission_attempts_total", result="inadmissible") == 1
    assert value(at, "kueue_evicted_workloads_total", cluster_queue="cq-a", reason="Preempted",
                 underlying_cause="", priority_class="high") is None


def test_metrics_errors(log: Path, tmp_path: Path) -> None:
    r = kueue_es("metrics", "--log", tmp_path / "nope")
    assert r.code == 2 and "no such log" in one_line_error(r)
    r = kueue_es("metrics", "--log", log, "--to", "99")
    assert r.code == 0 and "past the end of the log" in r.err
    r = kueue_es("metrics", "--log", log, "--at", "2000-01-01T00:00:00Z")
    assert r.code == 0 and "--at 2000-01-01T00:00:00.000Z is before the log's first event; the state is empty" in r.err
    r = kueue_es("metrics", "--log", log, "--to", "3", "--at", "2024-05-01T10:02:00Z")
    assert r.code == 2 and "not allowed with argument" in one_line_error(r)
