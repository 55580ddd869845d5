"""The topology ungater and a pod that changed since the version in the log: the watch drops an update that changes
nothing the log keeps of a pod (a label not Kueue's, a finalizer), so the log's resourceVersion for it can stay stale
for good; the ungater must still ungate it, while a pod changed in a kept way, deleted or re-created is left to
what the watch brings."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s import trim
from connectors.k8s.errors import Conflict, NotFound
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.ungater import REREADS, Ungater
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.tas_assignment import encode
from projections.workloads import ADMITTED

HOST = "kubernetes.io/hostname"
TOPOLOGY = {"name": "kueue.x-k8s.io/topology"}
OTHER = {"name": "example.com/other"}
PODS = BY_KIND["Pod"]


class _Apiserver:
    """One pod as the apiserver holds it: a merge PATCH conditioned on uid and resourceVersion (409 otherwise),
    a GET; ``change`` writes it as another client would (a new resourceVersion)."""

    def __init__(self, gates: list[dict[str, str]]) -> None:
        self.pod: dict[str, Any] | None = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-p", "resourceVersion": "1",
                         "labels": {"kueue.x-k8s.io/podset": "main"},
                         "annotations": {"kueue.x-k8s.io/workload": "wl"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "schedulingGates": gates}}
        self.patches: list[str] = []
        """The resourceVersion each PATCH was conditioned on."""
        self.gets = 0
        self.on_patch: Any = None
        """Called before each PATCH is answered (another client's write racing it)."""

    def change(self, edit: Any) -> o.Pod:
        assert self.pod is not None
        edit(self.pod)
        self.pod["metadata"]["resourceVersion"] = str(int(self.pod["metadata"]["resourceVersion"]) + 1)
        return self.decoded()

    def decoded(self) -> o.Pod:
        return msgspec.json.decode(msgspec.json.encode(self.pod), type=PODS.view)

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.gets += 1
        if self.pod is None:
            raise NotFound("pods \"p\" not found", 404, "NotFound")
        return msgspec.json.encode(self.pod)

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "") -> bytes:
        meta = body["metadata"]
        self.patches.append(meta["resourceVersion"])
        if self.on_patch is not None:
            self.on_patch()
        if self.pod is None:
            raise NotFound("pods \"p\" not found", 404, "NotFound")
        live = self.pod["metadata"]
        if meta["uid"] != live["uid"] or meta["resourceVersion"] != live["resourceVersion"]:
            raise Conflict("the object has been modified", 409, "Conflict")

        def apply(pod: dict[str, Any]) -> None:
            spec = body["spec"]
            if spec["schedulingGates"] is None:
                pod["spec"].pop("schedulingGates", None)
            else:
                pod["spec"]["schedulingGates"] = spec["schedulingGates"]
            pod["spec"].setdefault("nodeSelector", {}).update(spec["nodeSelector"])

        self.change(apply)
        return msgspec.json.encode(self.pod)


async def _admitted(server: _Apiserver, *, retry_s: float = 1.0) -> tuple[LocalJournal, Ungater, Watcher]:
    """The log holds the Workload, admitted onto n1 by TAS, and its gated pod as the apiserver has it now."""
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="u", resource_version="1"),
                    spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1)]))
    pod = trim.view(server.decoded())
    assert pod is not None
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key="ns/wl", uid="u", obj=wl),
                          ev.ObjectUpserted(time=1, key="ns/p", uid="u-p", resource_version="1", obj=pod)])
    info = journal.mirror.state.workloads["ns/wl"]
    ta = encode([HOST], [o.TopologyDomainAssignment(values=["n1"], count=1)])
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", count=1, topology_assignment=ta)])
    info.phase = ADMITTED
    ungater = Ungater(server, journal, retry_s=retry_s)  # type: ignore[arg-type]
    ungater._take()
    return journal, ungater, Watcher(server, journal.mirror, journal.append)  # type: ignore[arg-type]


async def _watched(journal: LocalJournal, watcher: Watcher, pod: o.Pod) -> bool:
    """Hand ``pod`` to the watch; answer whether the log took it."""
    view = trim.view(pod)
    assert view is not None
    e = watcher._upsert(PODS, view, 2)
    if e is not None:
        await journal.append([e])
    return e is not None


# --- a change the log does not keep -------------------------------------------------------------------------------


def _label_and_finalizer(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"]["team"] = "a"
    pod["metadata"]["finalizers"] = ["example.com/x"]


@pytest.mark.asyncio
async def test_a_pod_changed_in_a_way_the_log_does_not_keep_is_ungated_on_its_live_version() -> None:
    server = _Apiserver([TOPOLOGY])
    journal, ungater, watcher = await _admitted(server)
    assert not await _watched(journal, watcher, server.change(_label_and_finalizer)), "the watch drops it"

    await ungater.sync_guarded("ns/wl")
    assert server.patches == ["1", "2"], "the stale version conflicts; the pod read unchanged is patched on its own"
    assert server.gets == 1 and ungater.stats.conflicts == 1 and ungater.stats.ungated == 1
    live = server.pod
    assert live is not None
    assert "schedulingGates" not in live["spec"] and live["spec"]["nodeSelector"] == {HOST: "n1"}
    assert live["metadata"]["labels"]["team"] == "a", "the other client's change is kept"

    assert ungater._take() == set()
    await ungater.sync("ns/wl")
    assert server.patches == ["1", "2"], "not ungated twice while the log has not caught up with the patch"


@pytest.mark.asyncio
async def test_a_pod_that_keeps_changing_under_the_patch_is_retried() -> None:
    server = _Apiserver([TOPOLOGY])
    journal, ungater, watcher = await _admitted(server, retry_s=0.0)
    server.on_patch = lambda: server.change(_label_and_finalizer)  # every patch races another client's write

    await ungater.sync_guarded("ns/wl")
    assert len(server.patches) == REREADS + 1 and server.gets == REREADS
    assert ungater._take() == {"ns/wl"}, "scheduled again (it reads the pod again then)"
    assert server.pod is not None and server.pod["spec"]["schedulingGates"] == [TOPOLOGY]
    assert await _removals(journal) == [], "no gate removed, none recorded"

    server.on_patch = None
    await ungater.sync_guarded("ns/wl")
    assert server.pod["spec"].get("schedulingGates") is None and server.pod["spec"]["nodeSelector"] == {HOST: "n1"}
    assert await _removals(journal) == ["ns/p"], "the removal recorded once the patch went through"


async def _removals(journal: LocalJournal) -> list[str]:
    """The pods whose gate removal the log records (``pod_scheduling_gate_removal_seconds``)."""
    return [r.event.key async for r in journal.log.read(0) if isinstance(r.event, ev.SchedulingGateRemoved)]


# --- a change the log keeps: left to the watch ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_pod_whose_other_gate_was_removed_is_planned_again_from_its_newer_version() -> None:
    server = _Apiserver([TOPOLOGY, OTHER])
    journal, ungater, watcher = await _admitted(server)
    newer = server.change(lambda pod: pod["spec"].update(schedulingGates=[TOPOLOGY]))

    await ungater.sync_guarded("ns/wl")
    assert server.patches == ["1"] and server.gets == 1, "no patch from the plan made on the older gates"
    assert server.pod is not None and server.pod["spec"]["schedulingGates"] == [TOPOLOGY]

    assert await _watched(journal, watcher, newer)
    assert ungater._take() == {"ns/wl"}
    await ungater.sync_guarded("ns/wl")
    assert server.patches == ["1", "2"]
    assert "schedulingGates" not in server.pod["spec"] and server.pod["spec"]["nodeSelector"] == {HOST: "n1"}


@pytest.mark.asyncio
async def test_a_deleted_pod_read_after_the_conflict_is_not_patched_again() -> None:
    server = _Apiserver([TOPOLOGY])
    _, ungater, _ = await _admitted(server)
    server.change(_label_and_finalizer)

    def delete() -> None:
        server.on_patch = None
        server.get = _gone  # type: ignore[method-assign]
    server.on_patch = delete

    await ungater.sync_guarded("ns/wl")
    assert server.patches == ["1"], "gone when read: its deletion in the log ends it"
    assert ungater.stats.errors == 0 and ungater._take() == set()


async def _gone(resource: Any, name: str, namespace: str = "") -> bytes:
    raise NotFound("pods \"p\" not found", 404, "NotFound")


@pytest.mark.asyncio
async def test_a_re_created_pod_is_not_patched_from_the_plan_made_for_the_old_one() -> None:
    server = _Apiserver([TOPOLOGY])
    _, ungater, _ = await _admitted(server)
    old = copy.deepcopy(server.pod)

    def recreate(pod: dict[str, Any]) -> None:
        assert old is not None
        pod.update(copy.deepcopy(old))
        pod["metadata"]["uid"] = "u-p2"
    server.change(recreate)

    await ungater.sync_guarded("ns/wl")
    assert server.patches == ["1"] and server.gets == 1
    assert server.pod is not None and server.pod["spec"]["schedulingGates"] == [TOPOLOGY]
    assert ungater.stats.ungated == 0 and ungater._take() == set()
