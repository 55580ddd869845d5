"""A running Job (or Pod, or pod group) whose Workload the log holds evicted is stopped, and its quota given
back, only once the apiserver shows the Workload evicted (Evicted=True), as Kueue's job reconciler acts on the
Workload it reads: the eviction's status write may still be refused, and then nothing happened (the fold takes
it back). A Workload the apiserver no longer shows admitted, or a deactivated one, is stopped at once as
before."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import KEY, integration, job, workload

from connectors.k8s import pod_group, pod_sync
from connectors.k8s.jobframework import eviction_unshown
from connectors.k8s.jobs import JobIntegration
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import desired_status
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED

ADMISSION = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
    name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "4"}, count=4)])
BASE = {"key": KEY, "uid": "wl-uid", "input": 0}
PREEMPTED = (ev.WorkloadPreempted, {"reason": "InClusterQueue", "message": "Preempted to accommodate ns/high",
                                    "preemptor": "ns/high"})
DEACTIVATED = (ev.WorkloadDeactivated, {"reason": "Deactivated", "message": "The workload is deactivated"})


class Client:
    """Records every write; every write succeeds (the Job's pods still active: the template waits)."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        self.patches.append((resource.kind, name, body))
        return msgspec.json.encode({"metadata": {"resourceVersion": "9"}, "status": {"active": 4}})


def _fold(mirror: Mirror, *events: ev.AnyEvent) -> None:
    for e in events:
        mirror.apply(ev.Record(mirror.offset + 1, e))


def _store(mirror: Mirror, rv: int) -> o.Workload:
    """The watch brings the Workload as the status writer wrote what the log holds, at resourceVersion
    ``rv``."""
    raw = msgspec.to_builtins(mirror.workloads[KEY])
    raw["status"] = {k: v for k, v in desired_status(mirror.state.workloads[KEY]).items() if v is not None}
    raw["metadata"]["resourceVersion"] = str(rv)
    shown = msgspec.convert(raw, o.Workload)
    _fold(mirror, ev.ObjectUpserted(time=10 + rv, key=KEY, uid="wl-uid", obj=shown))
    return shown


def _running_admitted() -> tuple[JobIntegration, Mirror, list[ev.AnyEvent], Client]:
    """Job ``ns/train`` running on its Workload, admitted in the log and as stored."""
    jobs, mirror, appended = integration(workload(), job(suspend=False))
    mirror.state.flavors["default"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="default"),
                                                       spec=o.ResourceFlavorSpec())
    _fold(mirror, ev.QuotaReserved(time=2, cycle=1, admission=ADMISSION, **BASE),
          ev.WorkloadAdmitted(time=2, cycle=1, **BASE))
    _store(mirror, 5)
    client = jobs.client = Client()  # type: ignore[assignment]
    return jobs, mirror, appended, client


def _job_writes(client: Client) -> list[dict[str, Any]]:
    return [body for kind, _, body in client.patches if kind == "Job"]


@pytest.mark.asyncio
async def test_a_running_job_is_stopped_only_once_the_stored_workload_shows_its_eviction() -> None:
    jobs, mirror, appended, client = _running_admitted()
    kind, fields = PREEMPTED
    _fold(mirror, kind(time=3, cycle=2, **BASE, **fields))  # decided: the status write not done yet
    await jobs.reconcile("ns/train")
    assert _job_writes(client) == [], "suspended before the apiserver showed the eviction"
    assert not [e for e in appended if isinstance(e, (ev.JobStopped, ev.JobActed))]
    # the write refused: the fold takes the eviction back, and the Job ran on all along
    _fold(mirror, ev.DecisionRejected(time=4, decision=mirror.offset, reason="Forbidden", message="denied",
                                      key=KEY, uid="wl-uid"))
    assert not mirror.state.workloads[KEY].evicted
    await jobs.reconcile("ns/train")
    assert _job_writes(client) == []
    # decided again and written this time: the watch shows it evicted, and the Job is stopped
    _fold(mirror, kind(time=20, cycle=3, **BASE, **fields))
    _store(mirror, 6)
    await jobs.reconcile("ns/train")
    (suspend,) = _job_writes(client)
    assert suspend["spec"]["suspend"] is True
    (stopped,) = [e for e in appended if isinstance(e, ev.JobActed)]
    assert (stopped.action, stopped.message) == ("Stopped", "Preempted to accommodate ns/high")


@pytest.mark.asyncio
async def test_a_deactivated_workloads_job_is_stopped_at_once() -> None:
    jobs, mirror, appended, client = _running_admitted()
    kind, fields = DEACTIVATED
    _fold(mirror, kind(time=3, cycle=2, **BASE, **fields))
    await jobs.reconcile("ns/train")
    (suspend,) = _job_writes(client)
    assert suspend["spec"]["suspend"] is True


def test_eviction_unshown_reads_the_stored_workload() -> None:
    _, mirror, _, _ = _running_admitted()
    stored = mirror.workloads[KEY]
    kind, fields = PREEMPTED
    _fold(mirror, kind(time=3, cycle=2, **BASE, **fields))
    wl = mirror.state.workloads[KEY]
    assert wl.phase == ADMITTED and wl.evicted
    assert eviction_unshown(mirror.state, wl, stored)
    assert not eviction_unshown(mirror.state, wl, _store(mirror, 6)), "shown evicted"
    not_admitted = msgspec.structs.replace(stored, status=o.WorkloadStatus())
    assert not eviction_unshown(mirror.state, wl, not_admitted), "Kueue stops a job whose Workload is not admitted"
    assert not eviction_unshown(mirror.state, wl, None)


def _pod(name: str, running: bool = True) -> pod_sync.ManagedPod:
    return msgspec.convert({
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "5",
                     "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/pod-group-name": "g"},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": "1"},
                     "finalizers": ["kueue.x-k8s.io/managed"]},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running" if running else "Pending"}}, pod_sync.ManagedPod)


def test_a_running_pod_and_pod_group_wait_for_the_stored_eviction_too() -> None:
    _, mirror, _, _ = _running_admitted()
    kind, fields = PREEMPTED
    _fold(mirror, kind(time=3, cycle=2, **BASE, **fields))
    wl = msgspec.structs.replace(mirror.state.workloads[KEY],
                                 pod_sets=tuple(msgspec.structs.replace(ps, name="main")
                                                for ps in mirror.state.workloads[KEY].pod_sets))
    pod = _pod("p")
    assert pod_sync.next_step(pod, wl, managed=True, admission_shown=True,
                              eviction_unshown=True) == pod_sync.Step()
    assert pod_sync.next_step(pod, wl, managed=True, admission_shown=True).action == pod_sync.STOP
    step = pod_group.next_step([pod], wl, managed=True, admission_shown=True, prebuilt=True,
                               eviction_unshown=True)
    assert step.action != pod_group.STOP and not step.pods
    step = pod_group.next_step([pod], wl, managed=True, admission_shown=True, prebuilt=True)
    assert step.action == pod_group.STOP and step.pods == (pod,)


@pytest.mark.asyncio
async def test_an_eviction_rejected_but_not_taken_back_stops_the_job_as_before() -> None:
    """Something folded on the workload between the eviction and its rejection: the fold keeps it evicted, and
    nothing waits for a write that will not come (no refusal backoff, the writer blocked), so the Job is stopped
    from the log's view, as before the connectors waited for the stored eviction."""
    jobs, mirror, appended, client = _running_admitted()
    kind, fields = PREEMPTED
    _fold(mirror, kind(time=3, cycle=2, **BASE, **fields))
    decision = mirror.offset
    _fold(mirror, ev.UnhealthyNodesChanged(time=4, cycle=3, nodes=["n1"], **BASE))  # folded on it since
    await jobs.reconcile("ns/train")
    assert _job_writes(client) == [], "awaiting the eviction's outcome"
    _fold(mirror, ev.DecisionRejected(time=5, decision=decision, reason="Forbidden", message="denied",
                                      key=KEY, uid="wl-uid"))
    assert mirror.state.workloads[KEY].evicted, "not taken back: the workload changed since the decision"
    await jobs.reconcile("ns/train")
    (suspend,) = _job_writes(client)
    assert suspend["spec"]["suspend"] is True
