"""What the fold keeps for SkipReassignmentForPodOwnedWorkloads: whether a workload is owned by a single Pod, and
the failed nodes its placement was kept on until Kueue's node controller looks at such a node anew.

The node controller is woken by nodes that appear or go, a Ready status that flips and (under
TASReplaceNodeOnNodeTaints) taints that change — not by Workload updates — so a node stays kept through any other
change of it, and a workload whose placement goes keeps nothing.
"""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, meta, namespace, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo, owned_by_single_pod, owner_of

KEY = "team/w"
POD = o.OwnerReference(api_version="v1", kind="Pod", name="p", uid="uid-p", controller=True)
JOB = o.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="uid-j", controller=True)
GROUP = {"kueue.x-k8s.io/is-group-workload": "true"}


@pytest.mark.parametrize(("owners", "annotations", "want"), [
    ([POD], {}, True),
    ([POD], {"kueue.x-k8s.io/is-group-workload": "false"}, True),
    ([POD], GROUP, False),
    ([JOB], {}, False),
    ([], {}, False),
    ([POD, msgspec.structs.replace(POD, name="q", uid="uid-q")], {}, False),
    ([POD, JOB], {}, False),
    ([msgspec.structs.replace(POD, api_version="example.com/v1")], {}, False),
])
def test_owned_by_single_pod(owners: list[o.OwnerReference], annotations: dict[str, str], want: bool) -> None:
    assert owned_by_single_pod(meta("w", "team", owner_references=owners, annotations=annotations)) is want


def workload(owners: list[o.OwnerReference], annotations: dict[str, str] | None = None) -> o.Workload:
    return o.Workload(metadata=meta("w", "team", uid="uid-w", owner_references=owners, annotations=annotations or {}),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1)]))


def node(ready: str = "True", taints: list[o.Taint] | None = None, cpu: str = "2") -> o.Node:
    return o.Node(api_version="v1", metadata=meta("n1"),
                  spec=o.NodeSpec(taints=taints or []),
                  status=o.NodeStatus(allocatable={"cpu": cpu},
                                      conditions=[o.Condition(type="Ready", status=ready)]))


class Fold:
    def __init__(self, owners: list[o.OwnerReference]) -> None:
        self.state = ClusterState()
        self.apply(upsert(namespace("team"), T0), upsert(flavor("f0"), T0),
                   upsert(cluster_queue("cq", quotas={"f0": 4}), T0), upsert(local_queue("team", "lq", "cq"), T0),
                   upsert(node("False"), T0), upsert(workload(owners), T0),
                   ev.QuotaReserved(time=T0, key=KEY, admission=admission("cq", "f0", 1000), cycle=1, input=0),
                   ev.WorkloadAdmitted(time=T0, key=KEY, cycle=1, input=0))

    def apply(self, *events: ev.AnyEvent) -> None:
        for e in events:
            self.state.apply(ev.Record(self.state.offset + 1, e))

    def keep(self, *nodes: str) -> None:
        self.apply(ev.UnhealthyNodesChanged(time=T0, key=KEY, nodes=[], kept=list(nodes), cycle=2, input=0))

    @property
    def wl(self) -> WorkloadInfo:
        return self.state.workloads[KEY]


def test_the_fold_follows_the_owner_references() -> None:
    f = Fold([POD])
    assert f.wl.pod_owned
    f.apply(upsert(workload([POD], GROUP), T0))
    assert not f.wl.pod_owned, "a pod group's workload"
    f.apply(upsert(workload([POD]), T0))
    assert f.wl.pod_owned
    f.apply(upsert(workload([JOB]), T0))
    assert not f.wl.pod_owned
    assert not Fold([JOB]).wl.pod_owned


def test_a_kept_node_is_forgotten_when_the_node_controller_looks_at_it_anew() -> None:
    f = Fold([POD])
    f.keep("n1", "n0")
    assert f.wl.kept_nodes == ("n0", "n1") and f.wl.unhealthy_nodes == ()
    f.apply(upsert(node("False", cpu="4"), T0 + 1))
    assert f.wl.kept_nodes == ("n0", "n1"), "a change the node controller is not woken by"
    f.apply(upsert(node("True", cpu="4"), T0 + 2))
    assert f.wl.kept_nodes == ("n0",) and f.state.keeping == {KEY: None}
    f.apply(ev.ObjectDeleted(time=T0 + 3, key="n0", kind="Node"))
    assert f.wl.kept_nodes == ("n0",), "a node the fold never saw"
    f.apply(upsert(o.Node(api_version="v1", metadata=meta("n0")), T0 + 4))
    assert f.wl.kept_nodes == () and f.state.keeping == {}, "a node that appears"


def test_a_taint_change_wakes_the_node_controller_only_under_its_gate() -> None:
    taint = [o.Taint(key="k", effect="NoSchedule")]
    f = Fold([POD])
    f.keep("n1")
    f.apply(upsert(node("False", taint), T0 + 1))
    assert f.wl.kept_nodes == ()
    off = Fold([POD])
    off.apply(ev.ConfigRecorded(time=T0, writer="t", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"TASReplaceNodeOnNodeTaints": False}}))
    off.keep("n1")
    off.apply(upsert(node("False", taint), T0 + 1))
    assert off.wl.kept_nodes == ("n1",)
    off.apply(ev.ObjectDeleted(time=T0 + 2, key="n1", kind="Node"))
    assert off.wl.kept_nodes == (), "a node that goes"


@pytest.mark.parametrize("ends", ["requeued", "finished", "deleted"])
def test_nothing_is_kept_once_the_placement_goes(ends: str) -> None:
    f = Fold([POD])
    f.keep("n1")
    match ends:
        case "requeued":
            f.apply(ev.WorkloadPreempted(time=T0, key=KEY, reason="InClusterQueue", message="m", cycle=3, input=0),
                    ev.JobStopped(time=T0, key=KEY),
                    ev.WorkloadRequeued(time=T0, key=KEY, status=False, reason="Preempted", release=True, cycle=4,
                                        input=0))
        case "finished":
            f.apply(ev.WorkloadFinished(time=T0, key=KEY))
        case _:
            f.apply(ev.ObjectDeleted(time=T0, key=KEY, kind="Workload"))
    if KEY in f.state.workloads:
        assert f.wl.kept_nodes == ()
    assert f.state.keeping == {}


def test_a_snapshot_keeps_the_owner_and_the_kept_nodes() -> None:
    f = Fold([POD])
    f.keep("n1")
    restored = snapshot.decode(snapshot.encode(f.state))
    assert snapshot.digest(restored) == snapshot.digest(f.state)
    wl = restored.workloads[KEY]
    assert wl.pod_owned and wl.kept_nodes == ("n1",) and restored.keeping == {KEY: None}
    restored.apply(ev.Record(restored.offset + 1, upsert(node("True"), T0 + 1)))
    assert restored.workloads[KEY].kept_nodes == () and restored.keeping == {}


def test_a_version_7_snapshot_loads_with_no_workload_owned_by_a_pod() -> None:
    f = Fold([POD])
    f.keep("n1")
    old = msgspec.to_builtins(snapshot.take(f.state))
    old[0] = 7
    for wl in old[snapshot.Snapshot.__struct_fields__.index("workloads")]:
        del wl[WorkloadInfo.__struct_fields__.index("pod_owned"):]
    restored = snapshot.decode(msgspec.msgpack.encode(old))
    wl = restored.workloads[KEY]
    assert not wl.pod_owned and wl.kept_nodes == () and restored.keeping == {}


def test_the_owner_multikueue_reads_follows_an_upsert_that_changes_it_and_is_kept_when_unchanged() -> None:
    """A prebuilt Workload adopted by its Job gains an owner; an echo of an unchanged one keeps the same record."""
    known = owner_of(meta("w", "team", owner_references=[JOB]))
    assert known == ("batch/v1", "Job", "j")
    assert owner_of(meta("w", "team", owner_references=[JOB]), known) is known
    renamed = owner_of(meta("w", "team", owner_references=[msgspec.structs.replace(JOB, name="k")]), known)
    assert renamed == ("batch/v1", "Job", "k")
    other_kind = owner_of(meta("w", "team", owner_references=[POD]), known)
    assert other_kind == ("v1", "Pod", "p")
    assert owner_of(meta("w", "team"), known) == ()


def test_a_kept_node_is_known_by_its_hostname_label_when_it_differs_from_its_name() -> None:
    """Kueue v0.20 (#15575): placements name nodes by their kubernetes.io/hostname label."""
    f = Fold([POD])
    f.keep("host-1")
    labelled = o.Node(api_version="v1", metadata=meta("node-1", labels={"kubernetes.io/hostname": "host-1"}),
                      status=o.NodeStatus(conditions=[o.Condition(type="Ready", status="True")]))
    f.apply(upsert(labelled, T0 + 1))
    assert f.wl.kept_nodes == () and f.state.keeping == {}
