"""What the log keeps of Pods and Nodes, and which gated pods the ungater places where (no cluster needed)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s import trim
from connectors.k8s.ungating import group_offsets, plan
from events import objects as o
from events.tas_assignment import encode

HOST, RACK, BLOCK = "kubernetes.io/hostname", "cloud.example.com/rack", "cloud.example.com/block"
GATE = {"name": "kueue.x-k8s.io/topology"}
INDEX = "batch.kubernetes.io/job-completion-index"


def pod(name: str, *, index: int | None = None, gated: bool = True, selector: dict[str, str] | None = None,
        phase: str = "Pending", node: str = "", annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None) -> o.Pod:
    lbl = {"kueue.x-k8s.io/podset": "main", **(labels or {})}
    if index is not None:
        lbl[INDEX] = str(index)
    return o.Pod(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version="7",
                                       labels=lbl, annotations={"kueue.x-k8s.io/workload": "wl", **(annotations or {})}),
                 spec=o.PodSpec(node_selector=selector or {}, scheduling_gates=[GATE] if gated else [],
                                node_name=node,
                                containers=[o.Container(name="c", image="busybox",
                                                        resources=o.ResourceRequirements(requests={"cpu": "1"}))]),
                 status=o.PodStatus(phase=phase))


# --- trimming -----------------------------------------------------------------------------------------------------


def test_a_pod_keeps_only_what_tas_reads() -> None:
    p = pod("p", index=3, annotations={"other.io/x": "big", "kueue.x-k8s.io/podset-required-topology": RACK},
            labels={"app": "x"})
    kept = trim.pod_view(p)
    assert kept is not None
    assert kept.metadata.labels == {"kueue.x-k8s.io/podset": "main", INDEX: "3"}
    assert kept.metadata.annotations == {"kueue.x-k8s.io/workload": "wl",
                                         "kueue.x-k8s.io/podset-required-topology": RACK}
    assert kept.spec.containers == [o.Container(name="c", resources=o.ResourceRequirements(requests={"cpu": "1"}))]
    assert kept.spec.scheduling_gates == [GATE] and kept.metadata.uid == "uid-p"


def test_a_jobset_pod_keeps_its_job_index_for_the_ungaters_ranks() -> None:
    kept = trim.pod_view(pod("p", index=0, labels={"jobset.sigs.k8s.io/job-index": "1", "app": "x"}))
    assert kept is not None
    assert kept.metadata.labels == {"kueue.x-k8s.io/podset": "main", INDEX: "0", "jobset.sigs.k8s.io/job-index": "1"}


@pytest.mark.parametrize(("case", "p", "kept"), [
    ("a bound pod of anyone", o.Pod(metadata=o.ObjectMeta(name="x", namespace="ns"),
                                    spec=o.PodSpec(node_name="n1")), True),
    ("an unbound pod of no workload", o.Pod(metadata=o.ObjectMeta(name="x", namespace="ns")), False),
    ("a gated pod", o.Pod(metadata=o.ObjectMeta(name="x", namespace="ns"),
                          spec=o.PodSpec(scheduling_gates=[GATE])), True),
    ("a workload's pending pod", pod("x", gated=False), True),
    ("a workload's finished pod", pod("x", node="n1", phase="Succeeded"), False),
    ("a workload's failed pod", pod("x", node="n1", phase="Failed"), False),
])
def test_which_pods_the_log_keeps(case: str, p: o.Pod, kept: bool) -> None:
    assert (trim.view(p) is not None) == kept, case


def test_unchanged_content_is_recognised_across_resource_versions() -> None:
    p = trim.pod_view(pod("p"))
    assert p is not None
    newer = msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, resource_version="9"))
    assert trim.same_content(p, newer)
    assert trim.same_content(p, msgspec.structs.replace(newer, api_version="v1")), "list items carry no apiVersion"
    moved = msgspec.structs.replace(newer, spec=msgspec.structs.replace(newer.spec, node_name="n1"))
    assert not trim.same_content(p, moved)
    other = msgspec.structs.replace(newer, metadata=msgspec.structs.replace(newer.metadata, uid="u2"))
    assert not trim.same_content(p, other) and not trim.same_content(None, p)


def test_nodes_lose_their_annotations_only() -> None:
    n = o.Node(metadata=o.ObjectMeta(name="n1", labels={RACK: "r1"}, annotations={"node.alpha.kubernetes.io/ttl": "0"}),
               status=o.NodeStatus(allocatable={"cpu": "4"}))
    kept = trim.view(n)
    assert isinstance(kept, o.Node)
    assert kept.metadata.annotations == {} and kept.metadata.labels == {RACK: "r1"} and kept.status == n.status


# --- ungating -----------------------------------------------------------------------------------------------------


def assignment(levels: list[str], domains: list[tuple[list[str], int]]) -> o.PodSetAssignment:
    ta = encode(levels, [o.TopologyDomainAssignment(values=v, count=c) for v, c in domains])
    return o.PodSetAssignment(name="main", count=sum(c for _, c in domains), topology_assignment=ta)


RANKED = o.PodSetTopologyRequest(required=RACK, pod_index_label=INDEX)
THREE = assignment([HOST], [(["n1"], 2), (["n2"], 1)])


def placements(result) -> dict[str, str]:
    return {u.pod.metadata.name: u.node_selector[HOST] for u in result}


def test_rank_mode_places_each_index_in_the_domain_its_rank_falls_in() -> None:
    pods = [pod("c", index=2), pod("a", index=0), pod("b", index=1)]
    result = plan(THREE, RANKED, pods)
    assert placements(result) == {"a": "n1", "b": "n1", "c": "n2"}
    assert all(u.node_selector == {HOST: u.node_selector[HOST]} for u in result), "hostname only"


def test_rank_mode_ungates_only_the_gated_pods() -> None:
    pods = [pod("a", index=0, gated=False, selector={HOST: "n1"}), pod("b", index=1), pod("c", index=2)]
    assert placements(plan(THREE, RANKED, pods)) == {"b": "n1", "c": "n2"}


def test_greedy_mode_without_valid_ranks_fills_domains_in_order_with_pods_in_name_order() -> None:
    for pods in ([pod("z"), pod("y"), pod("x")],  # no index at all
                 [pod("z", index=0), pod("y", index=0), pod("x", index=1)],  # a duplicate rank
                 [pod("z", index=0), pod("y", index=1), pod("x", index=5)]):  # a rank beyond the count
        assert placements(plan(THREE, RANKED, pods)) == {"x": "n1", "y": "n1", "z": "n2"}
    assert placements(plan(THREE, None, [pod("b", index=1), pod("a", index=0)])) == {"a": "n1", "b": "n1"}


def test_greedy_mode_counts_the_pods_already_ungated() -> None:
    pods = [pod("a", gated=False, selector={HOST: "n1"}), pod("b"), pod("c"), pod("d")]
    assert placements(plan(THREE, None, pods)) == {"b": "n1", "c": "n2"}, "one slot each left; d waits"


def test_after_a_replacement_a_broken_rank_order_falls_back_to_greedy() -> None:
    # n1 failed and was replaced by n3: [n2, n3]; pod 1 still runs on n2 although rank 1 now means n3
    replaced = assignment([HOST], [(["n2"], 1), (["n3"], 1)])
    pods = [pod("p1", index=1, gated=False, selector={HOST: "n2"}), pod("p0-again", index=0)]
    assert placements(plan(replaced, RANKED, pods)) == {"p0-again": "n3"}


def test_terminal_pods_neither_count_nor_get_ungated() -> None:
    pods = [pod("a", gated=False, selector={HOST: "n2"}, phase="Failed"), pod("b", phase="Succeeded"), pod("c")]
    one = assignment([HOST], [(["n2"], 1)])
    assert placements(plan(one, None, pods)) == {"c": "n2"}


def test_pods_bound_for_an_unhealthy_node_stay_gated() -> None:
    assert placements(plan(THREE, RANKED, [pod("a", index=0), pod("c", index=2)], ("n1",))) == {"c": "n2"}
    assert placements(plan(THREE, None, [pod("a"), pod("b"), pod("c")], ("n1",))) == {"a": "n2"}


def test_a_topology_without_hostname_selects_every_level() -> None:
    racks = assignment([BLOCK, RACK], [(["b1", "r1"], 1), (["b1", "r2"], 1)])
    result = plan(racks, None, [pod("a"), pod("b")])
    assert [u.node_selector for u in result] == [{BLOCK: "b1", RACK: "r1"}, {BLOCK: "b1", RACK: "r2"}]


def test_nothing_to_do_without_a_topology_assignment_or_gated_pods() -> None:
    assert plan(o.PodSetAssignment(name="main", count=1), None, [pod("a")]) == []
    assert plan(THREE, RANKED, [pod("a", index=0, gated=False, selector={HOST: "n1"})]) == []


JOB_INDEX = "jobset.sigs.k8s.io/job-index"
SUBGROUPED = o.PodSetTopologyRequest(required=RACK, pod_index_label=INDEX, sub_group_index_label=JOB_INDEX,
                                     sub_group_count=2)


def test_a_jobsets_pods_are_ranked_by_job_index_then_completion_index() -> None:
    # a replicated Job of 2 Jobs x 2 pods: every Job has completion indexes 0 and 1, so the rank is
    # completion index + job index x 2 (Kueue's topology ungater); names deliberately out of rank order
    four = assignment([HOST], [(["n1"], 1), (["n2"], 1), (["n3"], 1), (["n4"], 1)])
    pods = [pod("a", index=1, labels={JOB_INDEX: "1"}), pod("b", index=0, labels={JOB_INDEX: "1"}),
            pod("c", index=1, labels={JOB_INDEX: "0"}), pod("d", index=0, labels={JOB_INDEX: "0"})]
    assert placements(plan(four, SUBGROUPED, pods)) == {"d": "n1", "c": "n2", "b": "n3", "a": "n4"}


def test_a_jobset_pod_without_a_valid_job_index_falls_back_to_greedy() -> None:
    four = assignment([HOST], [(["n1"], 2), (["n2"], 2)])
    for job_index in ("2", "x"):  # beyond the Jobs' count, not a number
        pods = [pod("a", index=0, labels={JOB_INDEX: "1"}), pod("b", index=0, labels={JOB_INDEX: job_index}),
                pod("c", index=1, labels={JOB_INDEX: "0"})]
        assert placements(plan(four, SUBGROUPED, pods)) == {"a": "n1", "b": "n1", "c": "n2"}
    pods = [pod("a", index=2, labels={JOB_INDEX: "0"}), pod("b", index=0, labels={JOB_INDEX: "1"})]
    assert placements(plan(four, SUBGROUPED, pods)) == {"a": "n1", "b": "n1"}, "a completion index beyond a Job's size"


OFFSET = {"kueue.x-k8s.io/pod-index-offset": "1"}


def test_a_pod_index_offset_is_taken_off_each_index_before_ranking() -> None:
    """An MPIJob's Workers under ``runLauncherAsWorker`` (indexes from 1, the launcher being rank 0) rank from 0 in
    their own pod set: index i goes where rank i − 1 falls. Without the offset their indexes overrun the pod set
    and the ungater falls back to name order."""
    pods = [pod("w-a", index=3, annotations=OFFSET), pod("w-b", index=2, annotations=OFFSET),
            pod("w-c", index=1, annotations=OFFSET)]
    assert placements(plan(THREE, RANKED, pods)) == {"w-c": "n1", "w-b": "n1", "w-a": "n2"}
    below = [pod("w-a", index=0, annotations=OFFSET), pod("w-b", index=1, annotations=OFFSET)]
    assert placements(plan(THREE, RANKED, below)) == {"w-a": "n1", "w-b": "n1"}, "rank -1: greedy"
    bad = {"kueue.x-k8s.io/pod-index-offset": "one"}
    assert plan(THREE, RANKED, [pod("a", index=0, annotations=bad), pod("b", index=1, annotations=bad)]) is None
    signed = {"kueue.x-k8s.io/pod-index-offset": "+1"}  # strconv.Atoi takes a sign
    assert placements(plan(THREE, RANKED, [pod("w-b", index=2, annotations=signed),
                                           pod("w-c", index=1, annotations=signed)])) == {"w-c": "n1", "w-b": "n1"}


def test_an_offset_of_other_digits_than_ascii_leaves_the_pod_set_gated() -> None:
    """An annotation is free text: ``"²"`` and ``"٣"`` pass ``str.isdigit`` (the first then crashed ``int``), and
    ``" 1"`` passes ``int``, yet Kueue's ``strconv.Atoi`` reads none, so its ungater ungates nothing — here too,
    without raising."""
    for text in ("²", "٣", " 1", "1_0"):
        odd = {"kueue.x-k8s.io/pod-index-offset": text}
        assert plan(THREE, RANKED, [pod("a", index=3, annotations=odd), pod("b", index=1, annotations=odd)]) is None


def test_a_pod_set_groups_workers_take_the_leaders_count_as_rank_offset() -> None:
    """Kueue's ungater: in a group of two the larger pod set (the second on a tie) ranks after the smaller."""

    def psa(name: str, count: int) -> o.PodSetAssignment:
        return o.PodSetAssignment(name=name, count=count)

    grouped = o.PodSetTopologyRequest(required=RACK, pod_set_group_name="g")
    requests = {"leader": grouped, "worker": grouped, "alone": RANKED, "solo": o.PodSetTopologyRequest(
        required=RACK, pod_set_group_name="h")}
    assert group_offsets([psa("leader", 1), psa("worker", 4), psa("alone", 3), psa("solo", 2)], requests) == {
        "worker": 1}
    assert group_offsets([psa("worker", 4), psa("leader", 1)], requests) == {"worker": 1}, "the smaller leads"
    assert group_offsets([psa("leader", 2), psa("worker", 2)], requests) == {"worker": 2}, "a tie: the second"
    workers = [pod("w-a", index=2), pod("w-b", index=1)]
    assert placements(plan(assignment([HOST], [(["n1"], 1), (["n2"], 1)]), RANKED, workers, group_offset=1)) == {
        "w-b": "n1", "w-a": "n2"}


# --- a LeaderWorkerSet's group ----------------------------------------------------------------------------------

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def test_a_leaderworkerset_pod_keeps_its_worker_index_for_the_ungaters_ranks() -> None:
    kept = trim.pod_view(pod("p", labels={WORKER_INDEX: "2", "leaderworkerset.sigs.k8s.io/name": "x"}))
    assert kept is not None
    assert kept.metadata.labels == {"kueue.x-k8s.io/podset": "main", WORKER_INDEX: "2"}


def _grouped(name: str, count: int) -> o.PodSetAssignment:
    return msgspec.structs.replace(assignment([HOST], [(["n1"], count)]), name=name, count=count)


def test_the_workers_of_a_pod_set_group_rank_after_the_leader() -> None:
    """A LeaderWorkerSet's workers carry worker indexes 1 .. size-1 against a pod set of size-1: in a PodSet group
    the larger pod set's indexes start after the smaller's count (Kueue's topology ungater), so index i is rank
    i − 1; outside a group index size-1 overruns the pod set and the ungater falls back to name order."""
    grouped = o.PodSetTopologyRequest(required=RACK, pod_set_group_name="g", pod_index_label=WORKER_INDEX)
    leader = o.PodSetTopologyRequest(required=RACK, pod_set_group_name="g")
    psas = [_grouped("leader", 1), _grouped("worker", 3)]
    offsets = group_offsets(psas, {"leader": leader, "worker": grouped})
    assert offsets == {"worker": 1}
    assert group_offsets(psas, {"leader": None, "worker": RANKED}) == {}, "no group: no offset"
    workers = assignment([HOST], [(["n1"], 1), (["n2"], 2)])
    pods = [pod("w-a", labels={WORKER_INDEX: "3"}), pod("w-b", labels={WORKER_INDEX: "1"}),
            pod("w-c", labels={WORKER_INDEX: "2"})]
    assert placements(plan(workers, grouped, pods, group_offset=offsets["worker"])) == {
        "w-b": "n1", "w-c": "n2", "w-a": "n2"}
    assert placements(plan(workers, grouped, pods)) == {"w-a": "n1", "w-b": "n2", "w-c": "n2"}, "name order"


@pytest.mark.parametrize("sub_count", [None, 0, 3])
def test_a_sub_group_label_without_a_usable_job_size_places_the_pods_greedily(sub_count: int | None) -> None:
    """Kueue's TestReconcile "ungate single pod with sub group index label but no (zero) sub group count": a
    pod set naming a sub-group index label (an AppWrapper's unvalidated annotation) with no sub-group count,
    a count of 0, or more sub groups than pods (no pod per Job) falls back to greedy placement, by name here,
    instead of ranking the pods by their index alone."""
    two = assignment([HOST], [(["n1"], 1), (["n2"], 1)])
    request = o.PodSetTopologyRequest(required=RACK, pod_index_label=INDEX, sub_group_index_label=JOB_INDEX,
                                      sub_group_count=sub_count)
    pods = [pod("a", index=1, labels={JOB_INDEX: "0"}), pod("b", index=0, labels={JOB_INDEX: "0"})]
    assert placements(plan(two, request, pods)) == {"a": "n1", "b": "n2"}
