"""The connectors that lift Kueue's scheduling gates record each removal (``SchedulingGateRemoved``, from
which ``pod_scheduling_gate_removal_seconds`` is folded): the pod integration starting a Pod (``admission``),
the topology ungater (``topology``), an elastic Job's slice releasing its pods (``elastic-job``) — once the
patch succeeded, and only for a Pod that carried the gate (the topology ungater's patch that keeps conflicting
records nothing: tests/k8s/test_ungater_conflicts.py)."""

from __future__ import annotations

from typing import Any

import pytest
from test_pods_integration import (
    _admitted_group_of_two,
    group_workload_obs,
    integration,
    managed_pod,
    pod_workload,
)
from test_ungater_conflicts import TOPOLOGY, _admitted, _Apiserver
from test_workload_slices import _elastic_job, _phase, _pod, _setup, _slice

from connectors.k8s.errors import Conflict
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED

ADMISSION, ELASTIC = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/elastic-job"


def removals(events: list[Any]) -> list[tuple[str, str, str, str, bool]]:
    """(pod, gate, workload, workload uid, is_group) of each removal recorded."""
    return [(e.key, e.gate, e.workload, e.workload_uid, e.is_group) for e in events
            if isinstance(e, ev.SchedulingGateRemoved)]


# --- the pod integration: the admission gate ----------------------------------------------------------------


def _admitted_single(mirror: Any) -> Any:
    wl = next(iter(mirror.state.workloads.values()))
    wl.phase = ADMITTED
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", flavors={}, count=1)])
    return wl


@pytest.mark.asyncio
async def test_starting_a_gated_pod_records_the_admission_gates_removal() -> None:
    pods, mirror, appended, client = integration(pod_workload())
    wl = _admitted_single(mirror)
    pod = managed_pod()
    await pods._start(pod, wl)
    assert [c[0] for c in client.calls] == ["patch"]
    (e,) = [e for e in appended if isinstance(e, ev.SchedulingGateRemoved)]
    assert (e.key, e.uid, e.gate, e.workload, e.workload_uid, e.is_group) == (
        "ns/p", pod.metadata.uid, ADMISSION, wl.key, "wl-uid", False)
    assert e.time > 1_700_000_000_000, "the connector's clock, as the creation record has it"


@pytest.mark.asyncio
async def test_starting_a_pod_without_the_admission_gate_records_nothing() -> None:
    pods, mirror, appended, client = integration(pod_workload())
    await pods._start(managed_pod(gated=False), _admitted_single(mirror))
    assert [c[0] for c in client.calls] == ["patch"] and removals(appended) == []


@pytest.mark.asyncio
async def test_a_pod_groups_pods_are_recorded_as_a_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    pods, mirror, appended, _ = integration(group_workload_obs())
    _admitted_group_of_two(pods, mirror, monkeypatch)
    await pods.reconcile("group/ns/g")
    assert removals(appended) == [("ns/a", ADMISSION, "ns/g", "wl-uid", True),
                                  ("ns/b", ADMISSION, "ns/g", "wl-uid", True)]


@pytest.mark.asyncio
async def test_a_failed_start_records_nothing() -> None:
    pods, mirror, appended, client = integration(pod_workload())

    async def refused(*args: Any, **kwargs: Any) -> bytes:
        raise Conflict("the object has been modified", 409, "Conflict")

    client.patch = refused  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        await pods._start(managed_pod(), _admitted_single(mirror))
    assert removals(appended) == []


# --- the topology ungater -----------------------------------------------------------------------------------


async def _events(journal: Any) -> list[Any]:
    """What the journal's log holds (through the log's codec, as on disk)."""
    return [r.event async for r in journal.log.read(0)]


@pytest.mark.asyncio
async def test_the_topology_ungater_records_each_pod_it_ungated() -> None:
    server = _Apiserver([TOPOLOGY])
    journal, ungater, _ = await _admitted(server)
    await ungater.sync_guarded("ns/wl")
    assert removals(await _events(journal)) == [("ns/p", "kueue.x-k8s.io/topology", "ns/wl", "u", False)]


@pytest.mark.asyncio
async def test_a_pod_groups_pod_ungated_by_topology_is_recorded_as_a_groups() -> None:
    server = _Apiserver([TOPOLOGY])
    assert server.pod is not None
    server.pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    journal, ungater, _ = await _admitted(server)
    await ungater.sync_guarded("ns/wl")
    assert removals(await _events(journal)) == [("ns/p", "kueue.x-k8s.io/topology", "ns/wl", "u", True)]


# --- an elastic Job's slice: the elastic-job gate -----------------------------------------------------------


@pytest.mark.asyncio
async def test_an_elastic_slice_records_each_pod_whose_gate_it_lifted() -> None:
    jobs, mirror, appended, client = _setup(_elastic_job(4), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    client.pods = [_pod("p1", ELASTIC), _pod("p2"), _pod("p3", "kueue.x-k8s.io/topology")]
    await jobs.reconcile("ns/train")
    uid = mirror.state.workloads["ns/a"].uid
    assert removals(appended) == [("ns/p1", ELASTIC, "ns/a", uid, False)], \
        "only the pod that carried the gate"


@pytest.mark.asyncio
async def test_an_elastic_pod_whose_patch_conflicts_is_recorded_only_once_lifted() -> None:
    jobs, mirror, appended, client = _setup(_elastic_job(4), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    client.pods = [_pod("p1", ELASTIC)]
    patch = client.patch
    conflicted: list[str] = []

    async def patch_once_stale(resource: Any, name: str, body: Any, *args: Any, **kwargs: Any) -> bytes:
        if resource.kind == "Pod" and not conflicted:
            conflicted.append(name)
            raise Conflict("the object has been modified", 409, "Conflict")
        return await patch(resource, name, body, *args, **kwargs)

    client.patch = patch_once_stale  # type: ignore[method-assign]
    await jobs.reconcile_guarded("ns/train")
    assert conflicted == ["p1"] and removals(appended) == []
    await jobs.reconcile("ns/train")
    assert [r[0] for r in removals(appended)] == ["ns/p1"]

