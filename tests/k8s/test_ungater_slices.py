"""The topology ungater and an elastic Job's workload slices (Kueue's TAS ungater lists a Workload's pods by
workload-slice name): after a scale-up the admitted slice counts the pods started on the earlier slice, which
keep their ``kueue.x-k8s.io/workload`` annotation naming it, and only the added pods are ungated, into the slots
the running ones leave."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.ungater import Ungater
from connectors.k8s.ungating import plan, pod_chain, workload_chain
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.tas_assignment import encode
from projections.workloads import ADMITTED, FINISHED, RESERVED, WorkloadInfo
from tests.k8s.test_lws_ungating import _Recorder  # records each pod's hostname

HOST = "kubernetes.io/hostname"
GATES = [{"name": "kueue.x-k8s.io/topology"}, {"name": "kueue.x-k8s.io/elastic-job"}]
WORKLOAD, SLICE_NAME = "kueue.x-k8s.io/workload", "kueue.x-k8s.io/workload-slice-name"
ELASTIC, REPLACES = "kueue.x-k8s.io/elastic-job", "kueue.x-k8s.io/workload-slice-replacement-for"


def _pod(name: str, *, on: str | None = None, annotations: dict[str, str] | None = None) -> o.Pod:
    """A pod of the elastic Job: started on slice ``first`` (the template's annotations), ungated onto ``on``, or
    gated (a pod the scale-up added)."""
    kept = {WORKLOAD: "first", SLICE_NAME: "first"} if annotations is None else annotations
    return o.Pod(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"u-{name}", resource_version="1",
                                       labels={"kueue.x-k8s.io/podset": "main"}, annotations=kept),
                 spec=o.PodSpec(node_selector={HOST: on} if on else {}, scheduling_gates=[] if on else GATES))


def _slice(name: str, count: int, replaces: str | None = None) -> o.Workload:
    annotations = {ELASTIC: "true", SLICE_NAME: "first"}
    if replaces:
        annotations[REPLACES] = f"ns/{replaces}"
    return o.Workload(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"u-{name}", resource_version="1",
                                            annotations=annotations),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=count)]))


def _assignment(**domains: int) -> o.PodSetAssignment:
    ta = encode([HOST], [o.TopologyDomainAssignment(values=[v], count=c) for v, c in domains.items()])
    return o.PodSetAssignment(name="main", count=sum(domains.values()), topology_assignment=ta)


def test_a_slice_counts_the_pods_of_its_chain_whichever_slice_they_were_started_on() -> None:
    assert workload_chain(_slice("first", 2)) == "ns/first"
    assert workload_chain(_slice("second", 4, replaces="first")) == "ns/first"
    plain = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns"))
    assert workload_chain(plain) == "ns/wl", "a workload of no chain: its own name"
    assert pod_chain(_pod("a", on="n1")) == "ns/first"
    assert pod_chain(_pod("b", annotations={WORKLOAD: "wl"})) == "ns/wl", "no slice name: the workload annotation"
    assert pod_chain(_pod("c", annotations={WORKLOAD: "second", SLICE_NAME: "first"})) == "ns/first"
    assert pod_chain(_pod("d", annotations={})) is None

    # the new slice's assignment keeps the old slice's domain (n1, both pods there) and adds n2: of the chain's
    # pods, the two running ones fill n1, and only the two added go, to n2
    pods = [_pod("el-0", on="n1"), _pod("el-1", on="n1"), _pod("el-2"), _pod("el-3"),
            _pod("other", annotations={WORKLOAD: "other"})]
    second = _slice("second", 4, replaces="first")
    mine = [p for p in pods if pod_chain(p) == workload_chain(second)]
    placed = {u.pod.metadata.name: u.node_selector for u in plan(_assignment(n1=2, n2=2), None, mine)}
    assert placed == {"el-2": {HOST: "n2"}, "el-3": {HOST: "n2"}}


def _upserts(*objs: o.KObject) -> list[ev.ObjectUpserted]:
    return [ev.ObjectUpserted(time=1, key=f"ns/{x.metadata.name}", uid=x.metadata.uid, obj=x) for x in objs]


@pytest.mark.asyncio
async def test_after_a_scale_up_the_added_pods_are_ungated_into_the_domains_left() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append(_upserts(_slice("first", 2), _slice("second", 4, replaces="first"),
                                  _pod("el-0", on="n1"), _pod("el-1", on="n1")))
    state = journal.mirror.state
    state.workloads["ns/first"].phase = FINISHED  # replaced when the new slice was admitted
    second = state.workloads["ns/second"]
    second.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[_assignment(n1=2, n2=2)])
    second.phase = ADMITTED
    client = _Recorder()
    ungater = Ungater(client, journal)  # type: ignore[arg-type]
    ungater._take()

    # the job controller adds the pods after the admission; they name the slice the Job was started on
    await journal.append(_upserts(_pod("el-2"), _pod("el-3")))
    assert ungater._take() == {"ns/first", "ns/second"}, "a pod of the chain brings back each of its slices"
    await ungater.sync("ns/first")
    assert client.placed == {}, "the finished slice ungates nothing"
    await ungater.sync("ns/second")
    assert client.placed == {"el-2": "n2", "el-3": "n2"}


@pytest.mark.asyncio
async def test_a_chain_whose_first_slice_is_gone_still_ungates_its_pods() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append(_upserts(_slice("second", 3, replaces="first"), _pod("el-0", on="n1"), _pod("el-1")))
    second = journal.mirror.state.workloads["ns/second"]
    second.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[_assignment(n1=1, n2=2)])
    second.phase = ADMITTED
    client = _Recorder()
    ungater = Ungater(client, journal)  # type: ignore[arg-type]
    await ungater.sync("ns/second")
    assert client.placed == {"el-1": "n2"}
    await journal.append(_upserts(_pod("el-2")))
    assert "ns/second" in ungater._take()


class _Replacing(_Recorder):
    """The fold changes the Workload while its first pod is ungated: ``change`` applied to it after that patch."""

    def __init__(self, wl: WorkloadInfo, change: Callable[[WorkloadInfo], None]) -> None:
        super().__init__()
        self.wl, self.change = wl, change

    async def patch(self, resource, name, body, namespace):
        answer = await super().patch(resource, name, body, namespace)
        if len(self.placed) == 1:
            self.change(self.wl)
        return answer


def _replace_node(wl: WorkloadInfo) -> None:  # a failed node replaced: a new assignment (Kueue's second pass)
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[_assignment(n3=2)])


def _evict(wl: WorkloadInfo) -> None:  # preempted: the admission kept, the workload evicted
    wl.evicted = "Preempted"


@pytest.mark.asyncio
@pytest.mark.parametrize("change", [_replace_node, _evict], ids=["node-replaced", "evicted"])
async def test_pods_left_gated_when_the_admission_changes_while_the_first_is_ungated(
        change: Callable[[WorkloadInfo], None]) -> None:
    """The plan was made from the admission the sync saw; the rest of it is not carried out once the fold changed
    that admission (the change's record makes the workload dirty: its next sync plans anew) or evicted it."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append(_upserts(_slice("first", 2), _pod("el-0"), _pod("el-1")))
    wl = journal.mirror.state.workloads["ns/first"]
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[_assignment(n1=2)])
    wl.phase = ADMITTED
    client = _Replacing(wl, change)
    ungater = Ungater(client, journal)  # type: ignore[arg-type]
    ungater._take()
    await ungater.sync("ns/first")
    assert client.placed == {"el-0": "n1"}


def _finished(wl: WorkloadInfo) -> None:
    wl.phase = FINISHED


def _only_reserved(wl: WorkloadInfo) -> None:
    wl.phase = RESERVED


def _left_admitted(wl: WorkloadInfo) -> None:
    """The replacement slice as the test sets it up: admitted, not evicted (the positive control)."""


@pytest.mark.asyncio
@pytest.mark.parametrize(("state_of", "placed"), [
    (_finished, {}), (_evict, {}), (_only_reserved, {}), (_left_admitted, {"late": "n1"})],
    ids=["finished", "evicted", "reserved", "admitted"])
async def test_only_an_admitted_replacement_slice_ungates_a_late_pod(
        state_of: Callable[[WorkloadInfo], None], placed: dict[str, str]) -> None:
    """Kueue's TestTopologyUngaterElasticSlice ("finished / evicted replacement cannot ungate", "quota
    reservation without admission cannot ungate"): a pod of the chain that names the first slice is placed
    only by an admitted, not evicted slice (``admitted``: the same setup does place it); the first slice,
    finished, places nothing either."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append(_upserts(_slice("first", 1), _slice("second", 2, replaces="first"),
                                  _pod("running", on="n1")))
    state = journal.mirror.state
    state.workloads["ns/first"].phase = FINISHED
    second = state.workloads["ns/second"]
    second.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[_assignment(n1=2)])
    second.phase = ADMITTED
    state_of(second)
    client = _Recorder()
    ungater = Ungater(client, journal)  # type: ignore[arg-type]
    await journal.append(_upserts(_pod("late")))
    for key in sorted(ungater._take()):
        await ungater.sync(key)
    assert client.placed == placed
