"""Kueue's pod groups (:mod:`connectors.k8s.pod_group`, :mod:`connectors.k8s.pod_roles`): the role hash, the
group metadata the Pod webhook refuses, and what the reconciler does next with a group (no cluster needed)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s import pod_group, pod_sync
from connectors.k8s.pod_group import CREATE, FINALIZE, FINISH, INVALID, RELEASE, START, STOP, WAIT, next_step
from connectors.k8s.pod_roles import metadata_errors, role_annotation_patch, role_hash
from connectors.k8s.pod_sync import ManagedPod, ManagedPodSpec, ManagedPodStatus
from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, FINISHED, PENDING, RESERVED, PodSetInfo, WorkloadInfo

GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE = "kueue.x-k8s.io/role-hash"


def test_the_role_hash_is_kueues() -> None:
    """Kueue's own tests name the role of a Pod with one container and no requests ``7aa6c7b8``."""
    assert role_hash({"containers": [{"name": "c", "image": "pause"}]}) == "7aa6c7b8"
    assert role_hash({"containers": [{"name": "other", "image": "busybox", "args": ["x"]}]}) == "7aa6c7b8", (
        "names, images and arguments are no part of a role")
    cpu = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    assert role_hash(cpu) != "7aa6c7b8" and role_hash({**cpu, "priority": 0}) != role_hash(cpu)


def test_group_metadata_kueue_refuses() -> None:
    assert metadata_errors({}, {}) == [] and metadata_errors({GROUP: "g"}, {TOTAL: "2"}) == []
    both = f"both the '{TOTAL}' annotation and the '{GROUP}' label should be set"
    assert metadata_errors({}, {TOTAL: "2"}) == [f"metadata.labels[{GROUP}]: Required value: {both}"]
    assert metadata_errors({GROUP: "g"}, {}) == [f"metadata.annotations[{TOTAL}]: Required value: {both}"]
    assert metadata_errors({GROUP: "g"}, {TOTAL: "x"}) == [
        f'metadata.annotations[{TOTAL}]: Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax']
    assert metadata_errors({GROUP: "g"}, {TOTAL: "0"}) == [
        f"metadata.annotations[{TOTAL}]: Invalid value: \"0\": incorrect annotation value '{TOTAL}=0': group total "
        "count should be greater than zero"]
    (bad_name,) = metadata_errors({GROUP: "Not_A_Name"}, {TOTAL: "1"})
    assert bad_name.startswith(f'metadata.labels[{GROUP}]: Invalid value: "Not_A_Name": a lowercase RFC 1123')


def test_a_pods_role_is_recorded_in_a_group_or_not() -> None:
    """Kueue's webhook records the role of every Pod it makes Kueue's (``pod_webhook_test.go``
    ``TestDefault``: ``RoleHash`` on a single Pod's expected Pod too)."""
    pod = {"metadata": {"labels": {GROUP: "g"}}, "spec": {"containers": [{"name": "c"}]}}
    assert role_annotation_patch(pod) == [{"op": "add", "path": "/metadata/annotations", "value": {ROLE: "7aa6c7b8"}}]
    pod["metadata"]["annotations"] = {TOTAL: "1"}
    assert role_annotation_patch(pod) == [
        {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1role-hash", "value": "7aa6c7b8"}]
    single = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    assert role_annotation_patch(single) == [
        {"op": "add", "path": "/metadata/annotations", "value": {ROLE: "7aa6c7b8"}}]


def test_a_role_the_pod_names_itself_is_kept() -> None:
    """Kueue's webhook records the role its ``getRoleHash`` gives, which is the Pod's own
    ``kueue.x-k8s.io/role-hash`` when it has one (pod_controller_test.go's prebuilt groups and scheduling shape
    ordering name their roles ``leader`` and ``worker``): overwritten, a prebuilt group's Pods match none of its
    Workload's pod sets."""
    pod = {"metadata": {"labels": {GROUP: "g"}, "annotations": {TOTAL: "2", ROLE: "leader"}},
           "spec": {"containers": [{"name": "c"}]}}
    assert role_annotation_patch(pod) == []


def member(name: str, *, role: str = "r1", gated: bool = True, phase: str = "Pending", queue: str = "lq",
           total: str = "2", created: str = "2026-01-01T00:00:00Z", deleting: bool = False, node: str = "",
           finalizer: bool = True, ready: bool = False, annotations: dict | None = None) -> ManagedPod:
    return ManagedPod(
        metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version="1",
                              creation_timestamp=created,
                              deletion_timestamp="2026-01-02T00:00:00Z" if deleting else None,
                              labels={"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": queue, GROUP: "g"},
                              annotations={TOTAL: total, ROLE: role, **(annotations or {})},
                              finalizers=["kueue.x-k8s.io/managed"] if finalizer else []),
        spec=ManagedPodSpec(scheduling_gates=[{"name": "kueue.x-k8s.io/admission"}] if gated else [], node_name=node),
        status=ManagedPodStatus(phase=phase))


def group_workload(phase: str = PENDING, *, counts: dict[str, int] | None = None, evicted: str = "",
                   reserving: bool = False, reclaimable: tuple[tuple[str, int], ...] = ()) -> WorkloadInfo:
    sets = tuple(PodSetInfo(name=n, count=c, min_count=None, requests=()) for n, c in (counts or {"r1": 2}).items())
    conditions = (o.Condition(type="Evicted", status="True", reason=evicted, message="Preempted by x"),) if evicted else ()
    if reserving:
        conditions += (o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved"),)
    return WorkloadInfo(key="ns/g", uid="wl", namespace="ns", name="g", queue_name="lq", created=0, priority=0,
                        priority_class="", pod_sets=sets, phase=phase, evicted=evicted, conditions=conditions,
                        reclaimable=reclaimable)


def names(pods: tuple[ManagedPod, ...]) -> list[str]:
    return [p.metadata.name for p in pods]


def test_no_workload_until_the_whole_group_is_there() -> None:
    step = next_step([member("a")], None, managed=True, admission_shown=False)
    assert (step.action, step.message) == (WAIT, "'g' group has fewer runnable pods than expected")
    failed = member("b", phase="Failed", gated=False)
    step = next_step([member("a"), failed], None, managed=True, admission_shown=False)
    assert step.action == WAIT and names(step.finalize) == ["b"], "a failed Pod does not count, and is let go"
    step = next_step([member("a"), member("b")], None, managed=True, admission_shown=False)
    assert step.action == CREATE and names(step.kept) == ["a", "b"] and step.remove == ()
    assert next_step([member("a"), member("b")], None, managed=False, admission_shown=False).action == "nothing"


def test_pods_beyond_the_count_are_removed_newest_gated_first() -> None:
    pods = [member("a", created="2026-01-01T00:00:03Z"), member("b", created="2026-01-01T00:00:01Z"),
            member("c", created="2026-01-01T00:00:02Z")]
    step = next_step(pods, None, managed=True, admission_shown=False)
    assert step.action == CREATE and names(step.remove) == ["a"] and names(step.kept) == ["b", "c"]
    admitted = group_workload(ADMITTED)
    step = next_step([*pods, member("d", gated=False, phase="Running")], admitted, managed=True, admission_shown=True)
    assert sorted(names(step.remove)) == ["a", "c"], "a running Pod is kept before gated ones"
    assert step.action == START and names(step.pods) == ["b"]


def test_pods_that_disagree_get_no_workload() -> None:
    step = next_step([member("a"), member("b", queue="other")], None, managed=True, admission_shown=False)
    assert (step.action, step.message) == (INVALID, "pods 'a' and 'b' has different queue names: lq!=other")
    step = next_step([member("a"), member("b", total="3")], None, managed=True, admission_shown=False)
    assert step.action == INVALID and "kueue.x-k8s.io/pod-group-total-count' values: 2!=3" in step.message


def test_an_admitted_group_starts_every_gated_pod_once_the_apiserver_shows_it() -> None:
    pods = [member("a", role="r1"), member("b", role="r2")]
    wl = group_workload(ADMITTED, counts={"r1": 1, "r2": 1})
    assert next_step(pods, wl, managed=True, admission_shown=False).action == "nothing"
    step = next_step(pods, wl, managed=True, admission_shown=True)
    assert step.action == START and names(step.pods) == ["a", "b"]


def test_the_group_finishes_when_as_many_pods_succeeded_as_its_total() -> None:
    wl = group_workload(ADMITTED, reclaimable=(("r1", 1),))
    running = [member("a", gated=False, phase="Succeeded"), member("b", gated=False, phase="Running")]
    assert next_step(running, wl, managed=True, admission_shown=True).action == "nothing"
    failed = [member("a", gated=False, phase="Succeeded"), member("b", gated=False, phase="Failed")]
    assert next_step(failed, wl, managed=True, admission_shown=True).action == "nothing", "waits for a replacement"
    unretriable = [failed[0], member("b", gated=False, phase="Failed", annotations={
        "kueue.x-k8s.io/retriable-in-group": "false"})]
    step = next_step(unretriable, wl, managed=True, admission_shown=True)
    assert (step.action, step.reason, step.message) == (FINISH, "Succeeded", "Pods succeeded: 1/2.")
    done = [member("a", gated=False, phase="Succeeded"), member("b", gated=False, phase="Succeeded")]
    step = next_step(done, wl, managed=True, admission_shown=True)
    assert (step.action, step.message) == (FINISH, "Pods succeeded: 2/2.")
    step = next_step(done, group_workload(FINISHED), managed=True, admission_shown=True)
    assert step.action == FINALIZE and names(step.pods) == ["a", "b"]


def test_an_evicted_group_is_stopped_then_its_quota_given_back() -> None:
    wl = group_workload(ADMITTED, evicted="Preempted", reserving=True)
    pods = [member("a", gated=False, phase="Running"), member("b", gated=False, phase="Running")]
    step = next_step(pods, wl, managed=True, admission_shown=True)
    assert (step.action, step.reason, step.message) == (STOP, "WorkloadEvictedDueToPreempted", "Preempted by x")
    assert names(step.pods) == ["a", "b"]
    stopping = [member(n, gated=False, phase="Running", deleting=True, node="n1") for n in "ab"]
    assert next_step(stopping, wl, managed=True, admission_shown=True).action == "nothing", "still Running"
    gone = [member(n, gated=False, phase="Failed", deleting=True, node="n1") for n in "ab"]
    assert next_step(gone, wl, managed=True, admission_shown=True).action == RELEASE


def test_running_pods_of_a_group_not_admitted_are_stopped() -> None:
    pods = [member("a", gated=False, phase="Running"), member("b")]
    step = next_step(pods, group_workload(PENDING), managed=True, admission_shown=False)
    assert (step.action, step.reason) == (STOP, "NotAdmitted") and names(step.pods) == ["a"]


def test_an_admitted_group_whose_workload_runs_on_a_worker_keeps_its_pods_gated() -> None:
    """A LeaderWorkerSet's group on a MultiKueue manager: the set's controller makes its pods here too (a set has
    no managedBy), but its Workload runs on a worker, so, admitted there, none is started here."""
    pods = [member("a", role="r1"), member("b", role="r2")]
    wl = group_workload(ADMITTED, counts={"r1": 1, "r2": 1})
    step = next_step(pods, wl, managed=True, admission_shown=True, remote=True)
    assert step.action == "nothing" and step.pods == ()
    running = [member("a", gated=False, phase="Running"), member("b")]
    step = next_step(running, group_workload(PENDING), managed=True, admission_shown=True, remote=True)
    assert (step.action, step.reason) == (STOP, "NotAdmitted"), "one running while not admitted is still stopped"


def raw(name: str, role_cpu: str, *, priority_class: str = "") -> dict:
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": role_cpu}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": {GROUP: "g", "kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": {TOTAL: "3"}}, "spec": spec}


def test_the_group_workload_has_a_pod_set_per_role_and_every_pod_as_owner() -> None:
    raws = [raw("a", "1"), raw("b", "2"), raw("c", "1")]
    body = pod_group.workload_for(ClusterState(), raws)
    assert body["metadata"]["name"] == "g"
    assert body["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": n, "uid": f"uid-{n}"} for n in "abc"]
    one, two = role_hash(raws[0]["spec"]), role_hash(raws[1]["spec"])
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == sorted([(one, 2), (two, 1)])
    assert body["spec"]["queueName"] == "lq"


def test_more_than_eighteen_roles_get_no_workload() -> None:
    """Kueue v0.19's 18 pod sets (#12819): 18 roles make a Workload, 19 none."""
    pods = [raw(f"p{i}", str(i + 1)) for i in range(18)]
    assert len(pod_group.workload_for(ClusterState(), pods)["spec"]["podSets"]) == 18
    with pytest.raises(ValueError, match="can't include more than 18 roles"):
        pod_group.workload_for(ClusterState(), [raw(f"p{i}", str(i + 1)) for i in range(19)])


FAST = {"kueue.x-k8s.io/pod-group-fast-admission": "true"}


def test_fast_admission_makes_the_workload_from_the_first_runnable_pod() -> None:
    """Kueue skips the wait for the whole group when its first Pod asks for fast admission (the key alone)."""
    step = next_step([member("a", annotations=FAST, total="3")], None, managed=True, admission_shown=False)
    assert step.action == CREATE and names(step.kept) == ["a"]
    step = next_step([member("a", annotations={"kueue.x-k8s.io/pod-group-fast-admission": ""}, total="3")], None,
                     managed=True, admission_shown=False)
    assert step.action == CREATE, "only the key counts"
    step = next_step([member("a", total="3"), member("b", annotations=FAST, total="3")], None, managed=True,
                     admission_shown=False)
    assert step.action == WAIT, "the first Pod stands for the group"
    failed = member("b", gated=False, phase="Failed", total="3", annotations=FAST)
    step = next_step([member("a", total="3", annotations=FAST, deleting=True), failed], None, managed=True,
                     admission_shown=False)
    assert (step.action, step.message) == (WAIT, "failed to find a runnable pod in the group")
    step = next_step([member("a", annotations=FAST), member("b", queue="other")], None, managed=True,
                     admission_shown=False)
    assert step.action == INVALID, "Pods that disagree still get none"


def test_a_fast_admission_workload_has_one_pod_set_of_the_whole_total() -> None:
    first, other = raw("a", "1"), raw("b", "2")
    first["metadata"]["annotations"].update(FAST)
    body = pod_group.workload_for(ClusterState(), [first, other])
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [(role_hash(first["spec"]), 3)]
    assert body["spec"]["podSets"][0]["template"] == {"spec": first["spec"]}


SERVING = {"kueue.x-k8s.io/pod-group-serving": "true"}


def test_succeeded_pods_of_a_group_are_reclaimable_unless_it_is_serving() -> None:
    wl = group_workload(ADMITTED, counts={"r1": 2, "r2": 1})
    pods = [member("a", gated=False, phase="Succeeded", total="3"), member("b", gated=False, phase="Running", total="3"),
            member("c", role="r2", gated=False, phase="Succeeded", total="3")]
    step = next_step(pods, wl, managed=True, admission_shown=True)
    assert (step.action, step.reclaimable) == (pod_group.RECLAIM, (("r1", 1), ("r2", 1)))
    shown = group_workload(ADMITTED, counts={"r1": 2, "r2": 1}, reclaimable=(("r1", 1), ("r2", 1)))
    assert next_step(pods, shown, managed=True, admission_shown=True).action == "nothing"
    serving = [member(p.metadata.name, role=role_of, gated=False, phase=p.status.phase, total="3", annotations=SERVING)
               for p, role_of in zip(pods, ("r1", "r1", "r2"), strict=True)]
    assert next_step(serving, wl, managed=True, admission_shown=True).action == "nothing"
    step = next_step(serving, shown, managed=True, admission_shown=True)
    assert (step.action, step.reclaimable) == (pod_group.RECLAIM, ()), "a serving group has none"


def test_no_reclaimable_pods_are_counted_with_the_gate_off() -> None:
    """Kueue's generic job reconciler counts them only under its ``ReclaimablePods`` gate (pod groups too)."""
    wl = group_workload(ADMITTED, counts={"r1": 2, "r2": 1})
    pods = [member("a", gated=False, phase="Succeeded", total="3"),
            member("b", gated=False, phase="Running", total="3"),
            member("c", role="r2", gated=False, phase="Succeeded", total="3")]
    assert next_step(pods, wl, managed=True, admission_shown=True, reclaim=False).action == "nothing"


def test_a_serving_group_never_finishes() -> None:
    done = [member(n, gated=False, phase="Succeeded", annotations=SERVING) for n in "ab"]
    assert next_step(done, group_workload(ADMITTED), managed=True, admission_shown=True).action == "nothing"
    unretriable = {**SERVING, "kueue.x-k8s.io/retriable-in-group": "false"}
    failed = [member(n, gated=False, phase="Failed", annotations=unretriable) for n in "ab"]
    assert next_step(failed, group_workload(ADMITTED), managed=True, admission_shown=True).action == "nothing"


def test_a_failed_pod_with_a_replacement_loses_the_finalizer() -> None:
    wl = group_workload(ADMITTED)
    failed = member("a", gated=False, phase="Failed", annotations=SERVING)
    pods = [failed, member("b", gated=False, phase="Running", annotations=SERVING)]
    assert next_step(pods, wl, managed=True, admission_shown=True).finalize == (), "no replacement yet"
    step = next_step([*pods, member("c", annotations=SERVING)], wl, managed=True, admission_shown=True)
    assert names(step.finalize) == ["a"] and step.action == START and names(step.pods) == ["c"]
    older = member("d", gated=False, phase="Failed", deleting=True, node="n1", annotations=SERVING)
    four = [failed, older, *pods[1:], member("c", annotations=SERVING)]
    assert names(next_step(four, wl, managed=True, admission_shown=True).finalize) == ["a", "d"]
    step = next_step(four, group_workload(ADMITTED, counts={"r1": 3}), managed=True, admission_shown=True)
    assert names(step.finalize) == ["d"], "the one active less lately (deleted before) goes first"


SUSPENDING = "kueue.x-k8s.io/pod-suspending-parent"
STATEFULSET_POD = {**SERVING, SUSPENDING: "statefulset"}


def test_a_statefulsets_ended_pods_lose_the_finalizer_so_that_it_can_scale_to_zero_or_replace_them() -> None:
    """As Kueue's StatefulSet reconciler finalizes them: scaled to zero (its pods deleted and ended), the
    StatefulSet's pods go, so that ``status.replicas`` reaches 0 and it may scale up again; one that ended is let go
    so that the StatefulSet controller can make it anew under the same name. A plain serving group's are kept."""
    wl = group_workload(ADMITTED)
    ended = [member("web-0", gated=False, phase="Failed", deleting=True, node="n1", annotations=STATEFULSET_POD),
             member("web-1", gated=False, phase="Succeeded", deleting=True, node="n1", annotations=STATEFULSET_POD)]
    assert names(next_step(ended, wl, managed=True, admission_shown=True).finalize) == ["web-0", "web-1"]
    one = [ended[0], member("web-1", gated=False, phase="Running", node="n1", annotations=STATEFULSET_POD)]
    assert names(next_step(one, wl, managed=True, admission_shown=True).finalize) == ["web-0"]
    plain = [member(n, gated=False, phase="Failed", deleting=True, node="n1", annotations=SERVING) for n in "ab"]
    assert next_step(plain, wl, managed=True, admission_shown=True).finalize == ()


def test_a_statefulsets_pods_deleted_before_reaching_a_node_lose_the_finalizer() -> None:
    """Scaled to zero, or deleted, while still queued: its gated pods never run, so never end; Kueue's StatefulSet
    reconciler lets them go all the same (all of them at zero replicas, or once the StatefulSet is gone)."""
    pending = group_workload(PENDING)
    gated = [member(f"web-{i}", deleting=True, annotations=STATEFULSET_POD) for i in (0, 1)]
    assert names(next_step(gated, pending, managed=True, admission_shown=False).finalize) == ["web-0", "web-1"]
    waiting = [member(f"web-{i}", annotations=STATEFULSET_POD) for i in (0, 1)]
    assert next_step(waiting, pending, managed=True, admission_shown=False).finalize == (), "not deleted: kept"
    placed = [member("web-0", gated=False, phase="Running", deleting=True, node="n1", annotations=STATEFULSET_POD)]
    assert next_step(placed, group_workload(ADMITTED), managed=True, admission_shown=True).finalize == (), (
        "placed on a node: kept until it has ended")


def test_absent_pods_count_per_role_and_under_fast_admission_only_roles_with_none() -> None:
    wl = group_workload(ADMITTED, counts={"r1": 2, "r2": 1})
    pods = [member("a", gated=False, phase="Failed"), member("b", gated=False, phase="Succeeded"),
            member("c", role="r2", deleting=True)]
    assert pod_group.absent_pods(pods, wl) == 2
    fast = [member("a", annotations=FAST, total="3"), member("c", role="r2", annotations=FAST, total="3")]
    assert pod_group.absent_pods(fast, group_workload(ADMITTED, counts={"r1": 3})) == 0, "the rest are to come"
    assert pod_group.absent_pods(fast[1:], group_workload(ADMITTED, counts={"r1": 3})) == 1


@pytest.mark.parametrize("fast", [False, True], ids=["gate-off", "FastQuotaReleaseInPodIntegration"])
def test_an_evicted_groups_quota_goes_once_no_pod_runs_or_under_the_gate_once_every_one_is_terminating(
        fast: bool) -> None:
    wl = group_workload(ADMITTED, evicted="Preempted", reserving=True)
    stopping = [member(n, gated=False, phase="Running", deleting=True, node="n1") for n in "ab"]
    step = next_step(stopping, wl, managed=True, admission_shown=True, fast_quota_release=fast)
    assert step.action == (RELEASE if fast else "nothing"), "terminating Pods hold the quota only with the gate off"
    one_left = [stopping[0], member("b", gated=False, phase="Running", node="n1")]
    assert next_step(one_left, wl, managed=True, admission_shown=True, fast_quota_release=fast).action == STOP
    gone = [member(n, gated=False, phase="Failed", deleting=True, node="n1") for n in "ab"]
    assert next_step(gone, wl, managed=True, admission_shown=True, fast_quota_release=fast).action == RELEASE


def test_a_group_whose_workload_is_being_deleted_has_every_pod_stopped_and_finalized() -> None:
    """As Kueue's pod reconciler with a Workload being deleted: every Pod not already going is stopped, whatever
    its state (``WorkloadDeleted``), and every Pod loses Kueue's finalizer."""
    pods = [member("a", gated=False, phase="Running"), member("b"), member("c", gated=False, phase="Failed"),
            member("d", deleting=True, finalizer=False)]
    step = next_step(pods, group_workload(ADMITTED), managed=True, admission_shown=True, wl_deleting=True)
    assert (step.action, step.reason, step.message) == (STOP, "WorkloadDeleted", "Workload is deleted")
    assert names(step.pods) == ["a", "b", "c"] and names(step.finalize) == ["a", "b", "c"]
    finished = next_step(pods, group_workload(FINISHED), managed=True, admission_shown=True, wl_deleting=True)
    assert finished.action == FINALIZE


def test_the_group_workload_carries_kueues_resource_in_use_finalizer() -> None:
    body = pod_group.workload_for(ClusterState(), [raw("a", "1"), raw("b", "1")])
    assert body["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_pods_of_a_role_the_workload_has_no_pod_set_for_are_left_out() -> None:
    """A StatefulSet rolling update whose template changes what admission looks at: its new pods have another role.
    As Kueue's pod reconciler keeps only the Pods of the Workload's roles: those are neither started (admitted)
    nor stopped (not admitted, or evicted), nor removed as excess, nor counted as the group's."""
    fast = {**STATEFULSET_POD, "kueue.x-k8s.io/pod-group-fast-admission": "true"}
    wl = group_workload(ADMITTED, counts={"r1": 2})
    old = member("web-0", gated=False, phase="Running", node="n1", annotations=fast)
    new = member("web-1", role="r2", annotations=fast)
    step = next_step([old, new], wl, managed=True, admission_shown=True)
    assert step.action == "nothing" and step.remove == () and step.finalize == (), "web-1 stays gated"
    new_running = member("web-1", role="r2", gated=False, phase="Running", node="n1", annotations=fast)
    step = next_step([old, new_running], group_workload(PENDING, counts={"r1": 2}), managed=True,
                     admission_shown=False)
    assert step.action == STOP and names(step.pods) == ["web-0"]
    evicted = group_workload(ADMITTED, counts={"r1": 2}, evicted="Preempted", reserving=True)
    gone = member("web-0", gated=False, phase="Failed", deleting=True, node="n1", finalizer=False, annotations=fast)
    assert next_step([gone, new_running], evicted, managed=True, admission_shown=True).action == RELEASE, (
        "only the Workload's own Pods hold its quota")
    done = member("web-0", gated=False, phase="Succeeded", node="n1", finalizer=False)
    other = member("web-1", role="r2", gated=False, phase="Succeeded", node="n1")
    one_reclaimable = group_workload(ADMITTED, counts={"r1": 2}, reclaimable=(("r1", 1),))
    assert next_step([done, other], one_reclaimable, managed=True, admission_shown=True).action == "nothing", (
        "1 of 2 succeeded in the Workload's role: not finished, and only that one reclaimable")


REVISION = "controller-revision-hash"


def sts_member(name: str, revision: str, **kwargs) -> ManagedPod:
    """A StatefulSet's pod of ``revision`` (its controller's ``controller-revision-hash`` label)."""
    pod = member(name, annotations={**STATEFULSET_POD, **kwargs.pop("annotations", {})}, **kwargs)
    labels = {**pod.metadata.labels, REVISION: revision}
    return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, labels=labels))


def test_during_a_rolling_update_the_current_revisions_pods_are_ungated_and_let_go() -> None:
    """As Kueue's StatefulSet reconciler (of the template design): while ``status.currentRevision`` differs from
    ``status.updateRevision``, the pods of the current (older) revision lose the admission gate and Kueue's
    finalizer, so that the StatefulSet controller can replace them; the new revision's pods are the group's."""
    wl = group_workload(ADMITTED, counts={"r1": 3})
    updating = pod_group.StatefulSetView(current_revision="web-old", update_revision="web-new")
    pods = [sts_member("web-0", "web-old", gated=False, phase="Running", node="n1"),
            sts_member("web-1", "web-new", gated=False, phase="Running", node="n1"),
            sts_member("web-2", "web-old")]
    step = next_step(pods, wl, managed=True, admission_shown=True, statefulset=updating)
    assert names(step.let_go) == ["web-0", "web-2"]
    assert step.action == START and names(step.pods) == ["web-2"], "the group's start comes first, as in Kueue"
    settled = pod_group.StatefulSetView(current_revision="web-new", update_revision="web-new")
    assert next_step(pods, wl, managed=True, admission_shown=True, statefulset=settled).let_go == ()
    assert next_step(pods, wl, managed=True, admission_shown=True).let_go == (), "the StatefulSet not known (yet)"
    assert next_step(pods, wl, managed=False, admission_shown=True, statefulset=updating).let_go == ()
    done = sts_member("web-0", "web-old", gated=False, phase="Running", node="n1", finalizer=False)
    assert next_step([done], wl, managed=True, admission_shown=True, statefulset=updating).let_go == (), (
        "nothing left to let go of")
    plain = [msgspec.structs.replace(p, metadata=msgspec.structs.replace(
        p.metadata, annotations={k: v for k, v in p.metadata.annotations.items() if k != SUSPENDING})) for p in pods]
    assert next_step(plain, wl, managed=True, admission_shown=True, statefulset=updating).let_go == (), (
        "not a StatefulSet's")


@pytest.mark.parametrize("case", ["no workload", "pending", "reserved", "evicted", "admission not shown",
                                  "on a worker"])
def test_during_a_rolling_update_the_current_revisions_pods_stay_held_until_the_workload_is_admitted(
        case: str) -> None:
    """Kueue v0.19.7 #16401 / v0.20.0 #16329: the current revision's pods are ungated only once the group's
    Workload is admitted, else they would run on no quota. Not admitted, they keep the gate and Kueue's finalizer
    (the group's rules hold them as any of its pods; deleted before reaching a node, they lose the finalizer as
    ever). As for any pod of the group, "admitted" is as the group would start its pods: shown so by the apiserver,
    and not run on a MultiKueue worker."""
    updating = pod_group.StatefulSetView(current_revision="web-old", update_revision="web-new")
    pods = [sts_member("web-0", "web-old"), sts_member("web-1", "web-old"), sts_member("web-2", "web-new")]
    wl = {"no workload": None, "pending": group_workload(PENDING, counts={"r1": 3}),
          "reserved": group_workload(RESERVED, counts={"r1": 3}, reserving=True),
          "evicted": group_workload(ADMITTED, counts={"r1": 3}, evicted="Preempted", reserving=True),
          "admission not shown": group_workload(ADMITTED, counts={"r1": 3}),
          "on a worker": group_workload(ADMITTED, counts={"r1": 3})}[case]
    step = next_step(pods, wl, managed=True, admission_shown=case != "admission not shown", statefulset=updating,
                     remote=case == "on a worker")
    assert step.let_go == (), "no quota behind them yet: kept gated"
    assert step.finalize == () and step.action != START, "and Kueue's finalizer kept"
    deleted = sts_member("web-1", "web-old", deleting=True)
    step = next_step([pods[0], deleted, pods[2]], wl, managed=True, admission_shown=case != "admission not shown",
                     statefulset=updating, remote=case == "on a worker")
    assert step.let_go == () and names(step.finalize) == ["web-1"], "one the controller deletes goes as ever"
    admitted = next_step(pods, group_workload(ADMITTED, counts={"r1": 3}), managed=True, admission_shown=True,
                         statefulset=updating)
    assert names(admitted.let_go) == ["web-0", "web-1"], "once admitted, let go as before"


def test_pods_remade_during_a_rolling_update_without_a_finalizer_start_once_the_workload_is_admitted() -> None:
    """Kueue v0.20.0 #16329's other half ("StatefulSet Pods recreated during the rollout could stay gated
    indefinitely"; the fix's code is not in the store, so this pins kueue-es's answer, not a port): pods as the Pod
    webhook now makes them (gated, no finalizer: Kueue #8530), remade by the controller at either revision, are
    held while the Workload is not admitted and started once it is, whatever the revision; a remade pod of the
    current revision is let go besides. Nothing is finalized: none carries the finalizer."""
    updating = pod_group.StatefulSetView(current_revision="web-old", update_revision="web-new")
    pods = [sts_member("web-0", "web-old", gated=False, phase="Running", node="n1", finalizer=False),
            sts_member("web-1", "web-old", finalizer=False), sts_member("web-2", "web-new", finalizer=False)]
    held = next_step(pods, group_workload(PENDING, counts={"r1": 3}), managed=True, admission_shown=False,
                     statefulset=updating)
    assert held.let_go == () and held.finalize == () and held.action == STOP and names(held.pods) == ["web-0"], (
        "the remade pods held; the one running on no admission stopped")
    admitted = next_step(pods, group_workload(ADMITTED, counts={"r1": 3}), managed=True, admission_shown=True,
                         statefulset=updating)
    assert admitted.action == START and names(admitted.pods) == ["web-1", "web-2"], "both remade pods started"
    assert names(admitted.let_go) == ["web-1"] and admitted.finalize == ()
    settled = pod_group.StatefulSetView(current_revision="web-new", update_revision="web-new")
    after = next_step([sts_member("web-0", "web-new", finalizer=False)], group_workload(ADMITTED, counts={"r1": 1}),
                      managed=True, admission_shown=True, statefulset=settled)
    assert after.action == START and names(after.pods) == ["web-0"] and after.let_go == (), "after the rollout too"


def test_once_the_statefulset_is_gone_every_pod_is_ungated_and_let_go() -> None:
    ended = sts_member("web-0", "web-old", gated=False, phase="Failed", node="n1")
    pods = [ended, sts_member("web-1", "web-old", gated=False, phase="Running", node="n1"),
            sts_member("web-2", "web-new")]
    step = next_step(pods, group_workload(ADMITTED, counts={"r1": 3}), managed=True, admission_shown=True,
                     statefulset=pod_group.STATEFULSET_GONE)
    assert names(step.let_go) == ["web-0", "web-1", "web-2"]
    assert step.finalize == (), "let go once: the ended one is not finalized besides"


def test_a_tas_pod_let_go_loses_the_topology_gate_too() -> None:
    """Kueue's StatefulSet reconciler lifts both of Kueue's scheduling gates from a pod it lets go (a pod of a TAS
    group keeps the topology gate until the ungater places it): one left topology-gated would never schedule, and
    a rolling update would wait on it. A pod held by that gate alone is let go as well."""
    tas_gates = [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}, {"name": "other.io/x"}]
    both = sts_member("web-0", "web-old")
    both = msgspec.structs.replace(both, spec=msgspec.structs.replace(both.spec, scheduling_gates=tas_gates))
    patch = pod_sync.let_go_patch(both)
    assert patch["spec"] == {"schedulingGates": [{"name": "other.io/x"}]}
    only_tas = sts_member("web-1", "web-old", gated=False, finalizer=False)
    only_tas = msgspec.structs.replace(only_tas, spec=msgspec.structs.replace(
        only_tas.spec, scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}]))
    step = next_step([only_tas], group_workload(ADMITTED, counts={"r1": 1}), managed=True, admission_shown=True,
                     statefulset=pod_group.STATEFULSET_GONE)
    assert names(step.let_go) == ["web-1"]
    assert pod_sync.let_go_patch(only_tas)["spec"] == {"schedulingGates": None}


def test_a_group_workload_none_of_whose_pods_has_its_roles_is_deleted_as_no_longer_matching() -> None:
    """As Kueue's pod reconciler: the Workload keeps none of the group's Pods (all of another role, as a
    StatefulSet's pods remade from a template changed in what admission looks at): it is deleted, and the group
    gets a new one made from its Pods. Running Pods, none held back, are stopped first."""
    wl = group_workload(ADMITTED, counts={"r1": 2})
    new = [member("web-0", role="r2", annotations=STATEFULSET_POD), member("web-1", role="r2", annotations=STATEFULSET_POD)]
    step = next_step(new, wl, managed=True, admission_shown=True)
    assert (step.action, step.pods) == (pod_group.DELETE, ()), "gated: nothing to stop"
    running = [member(n, role="r2", gated=False, phase="Running", node="n1") for n in ("web-0", "web-1")]
    step = next_step(running, wl, managed=True, admission_shown=True)
    assert step.action == pod_group.DELETE and names(step.pods) == ["web-0", "web-1"]
    assert (step.reason, step.message) == (
        "NoMatchingWorkload", "No matching Workload; restoring pod templates according to existent Workload")
    assert next_step(new, group_workload(FINISHED), managed=True, admission_shown=True).action == pod_group.DELETE
    old = member("web-0", gated=False, phase="Failed", node="n1", annotations=STATEFULSET_POD)
    assert next_step([old, new[1]], wl, managed=True, admission_shown=True).action != pod_group.DELETE, (
        "a Pod of its roles, even failed, is still its own")
    assert next_step(new, wl, managed=True, admission_shown=True, prebuilt=True).action != pod_group.DELETE
    assert next_step(new, wl, managed=False, admission_shown=True).action != pod_group.DELETE
    assert pod_group.no_longer_matching(new, wl) and not pod_group.no_longer_matching([old], wl)


def test_a_group_workload_holding_no_quota_is_rewritten_in_place_while_the_group_is_held_back() -> None:
    """As newer Kueue's ``ensureOneWorkload``: the Workload no longer matches the group, a Pod of it is gated or
    ended (Kueue's group is suspended) and the Workload holds no quota: it is updated in place from the Pods a new
    one would be made of (``UPDATE``), not deleted; holding quota, or none of its Pods held back, it is deleted."""
    new = [member("web-0", role="r2", annotations=STATEFULSET_POD), member("web-1", role="r2", annotations=STATEFULSET_POD)]
    pending = group_workload(PENDING, counts={"r1": 2})
    step = next_step(new, pending, managed=True, admission_shown=False)
    assert step.action == pod_group.UPDATE and names(step.kept) == ["web-0", "web-1"] and step.pods == ()
    assert next_step(new, group_workload(RESERVED, counts={"r1": 2}, reserving=True), managed=True,
                     admission_shown=False).action == pod_group.DELETE, "quota reserved: deleted"
    assert next_step(new, group_workload(ADMITTED, counts={"r1": 2}), managed=True,
                     admission_shown=True).action == pod_group.DELETE
    evicted = group_workload(PENDING, counts={"r1": 2}, evicted="Preempted")
    assert next_step(new, evicted, managed=True, admission_shown=False).action == pod_group.UPDATE, (
        "evicted, its quota given back: rewritten too")
    running = [member(n, role="r2", gated=False, phase="Running", node="n1") for n in ("web-0", "web-1")]
    assert next_step(running, pending, managed=True, admission_shown=False).action == pod_group.DELETE, (
        "not suspended: the Workload goes, its Pods stopped first")
    step = next_step(new[:1], pending, managed=True, admission_shown=False)
    assert (step.action, step.message) == (WAIT, "'g' group has fewer runnable pods than expected"), (
        "not ready for a Workload: it waits as a group without one")
    assert next_step(new, pending, managed=True, admission_shown=False, prebuilt=True).action != pod_group.UPDATE


def test_an_orphaned_pod_is_traced_to_its_statefulset_by_its_group_name() -> None:
    """A StatefulSet deleted with ``--cascade=orphan`` leaves its pods without a controller; Kueue's StatefulSet
    reconciler finds them by the group name it derives from the StatefulSet's name, so the pod's StatefulSet is the
    one its name (less its ordinal) makes that group name for; a pod another StatefulSet controls is that one's."""
    from connectors.k8s.statefulset_webhook import workload_name

    def sts_pod(name: str, group: str, owners: list[o.OwnerReference] | None = None,
                annotations: dict | None = None) -> ManagedPod:
        pod = member(name, annotations=STATEFULSET_POD if annotations is None else annotations)
        labels = {**pod.metadata.labels, GROUP: group}
        return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(
            pod.metadata, labels=labels, owner_references=owners or []))

    group = workload_name("web-db")
    assert pod_group.statefulset_name(sts_pod("web-db-1", group)) == "web-db"
    assert pod_group.statefulset_name(sts_pod("web-db-1", workload_name("web-db", short=True))) == "web-db"
    assert pod_group.statefulset_name(sts_pod("other-1", group)) is None, "not named after the group's StatefulSet"
    assert pod_group.statefulset_name(sts_pod("web-db-x", group)) is None, "no ordinal"
    assert pod_group.statefulset_name(sts_pod("web-db-1", group, annotations={})) is None, "not a StatefulSet's"
    sts = o.OwnerReference(api_version="apps/v1", kind="StatefulSet", name="renamed", uid="s", controller=True)
    assert pod_group.statefulset_name(sts_pod("web-db-1", group, [sts])) == "renamed"
    rs = o.OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="rs", uid="r", controller=True)
    assert pod_group.statefulset_name(sts_pod("web-db-1", group, [rs])) is None


def _gated_state(**gates: bool) -> ClusterState:
    state = ClusterState()
    state.apply(ev.Record(1, ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates})))
    return state


def _with_role(r: dict, role: str) -> dict:
    r["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = role
    return r


def test_a_groups_pod_sets_are_ordered_by_scheduling_shape_not_a_client_set_role_hash() -> None:
    """Kueue v0.20's ``PodGroupSchedulingShapeOrdering`` (on by default): the flavor assigner goes through a
    group's pod sets in order, so the order follows what admission looks at of their Pods, not the role hash a
    client may write; pod sets alike in shape follow their first Pod's name. Off, the pod sets go by name."""
    small, large = raw("a", "1"), raw("b", "2")
    assert role_hash(large["spec"]) < role_hash(small["spec"])
    raws = [_with_role(small, "aaa"), _with_role(large, "zzz")]
    shaped = pod_group.workload_for(ClusterState(), raws)["spec"]["podSets"]
    assert [(ps["name"], ps["count"]) for ps in shaped] == [("zzz", 1), ("aaa", 1)]
    by_name = pod_group.workload_for(_gated_state(PodGroupSchedulingShapeOrdering=False), raws)["spec"]["podSets"]
    assert [ps["name"] for ps in by_name] == ["aaa", "zzz"]
    alike = [_with_role(raw("b", "1"), "aaa"), _with_role(raw("c", "1"), "bbb"), _with_role(raw("a", "1"), "ccc")]
    assert [ps["name"] for ps in pod_group.workload_for(ClusterState(), alike)["spec"]["podSets"]] == [
        "ccc", "aaa", "bbb"]


SERVING = {"kueue.x-k8s.io/pod-group-serving": "true"}


def test_an_evicted_serving_groups_pod_that_ended_while_deleting_loses_the_finalizer_at_once() -> None:
    """Kueue's "Pod controller finalizer consistency on eviction" (#13830, fixed by #14632, in v0.18.7 by #14795):
    a serving group's Pod stopped by an eviction that is not the Workload's deletion, and that then ends, goes at
    once — whether it ran on a node or never reached one — and a replacement made beside it is kept, not removed as
    excess: else the Pod is stuck deleting (a StatefulSet can never remake it) and its owner thrashes."""
    wl = group_workload(ADMITTED, counts={"r1": 1}, evicted="PodsReadyTimeout", reserving=True)
    ran = member("old-pod", gated=False, phase="Succeeded", deleting=True, node="n1", total="1", annotations=SERVING)
    assert names(next_step([ran], wl, managed=True, admission_shown=True).finalize) == ["old-pod"]
    unplaced = member("sts-0", gated=False, phase="Succeeded", deleting=True, total="1", annotations=SERVING)
    assert names(next_step([unplaced], wl, managed=True, admission_shown=True).finalize) == ["sts-0"]
    new = member("new-pod", total="1", annotations=SERVING)
    step = next_step([new, ran], group_workload(PENDING, counts={"r1": 1}, evicted="PodsReadyTimeout"),
                     managed=True, admission_shown=False)
    assert step.remove == () and names(step.finalize) == ["old-pod"], "the replacement is the group's Pod now"
    batch = member("old-pod", gated=False, phase="Succeeded", deleting=True, node="n1", total="1")
    assert next_step([batch], wl, managed=True, admission_shown=True).finalize == (), (
        "a batch group's succeeded Pod is still counted: it keeps the finalizer until the group finishes")


def test_a_leader_ready_sets_leader_is_started_alone_on_its_groups_admitted_workload() -> None:
    """A LeaderWorkerSet with ``startupPolicy: LeaderReady`` makes its workers only once its leader is ready: its
    group's prebuilt Workload, admitted, starts the leader alone (a prebuilt group counts no absent Pods), as
    Kueue since #4023."""
    wl = group_workload(ADMITTED, counts={"leader": 1, "worker": 2})
    step = next_step([member("lws-0", role="leader", total="3")], wl, managed=True, admission_shown=True,
                     prebuilt=True)
    assert (step.action, names(step.pods)) == (START, ["lws-0"])


def test_a_statefulsets_gated_pods_take_its_queue_name_when_it_changes() -> None:
    """Kueue's StatefulSet reconciler (``syncQueueLabel``, the fix of #9830, e2e "should allow to change queue name
    after scale up from zero (two-phase pattern)"): a StatefulSet whose queue name changed while none of its
    replicas was ready puts the new name on its pods, whose template revision may never roll while they are gated;
    the group's Workload then follows its pods' queue name as any gated group's does. Only gated pods: Kueue's Pod
    webhook refuses the change on one already started. Nothing else is done with the group in that pass."""
    renamed = pod_group.StatefulSetView(current_revision="web-1", update_revision="web-2", queue="good", replicas=2)
    pods = [sts_member("web-0", "web-1", queue="bad"), sts_member("web-1", "web-1", queue="good"),
            sts_member("web-2", "web-1", queue="bad", gated=False, phase="Running", node="n1")]
    step = next_step(pods, group_workload(PENDING, counts={"r1": 2}), managed=True, admission_shown=False,
                     statefulset=renamed)
    assert names(step.relabel) == ["web-0"] and step.action == "nothing" and step.let_go == ()
    assert step.relabel_queue == "good"
    for view in (pod_group.StatefulSetView(queue="good", replicas=0), pod_group.StatefulSetView(replicas=2)):
        assert next_step(pods, None, managed=True, admission_shown=False, statefulset=view).relabel == (), (
            "scaled to zero, or naming no queue: left as they are")


def test_a_finished_group_whose_workload_is_gone_gets_none_made_again_and_its_pods_are_let_go() -> None:
    """Kueue's "if pod group is finished and wl is deleted, new workload shouldn't be created"
    (pod_controller_test.go): the reconciler handles a finished job before one without a Workload, so a group
    whose Workload a retention policy deleted after it finished is not queued again. A serving group never
    finishes: it gets a Workload as any."""
    done = [member("a", gated=False, phase="Succeeded"),
            member("b", gated=False, phase="Succeeded", finalizer=False)]
    step = next_step(done, None, managed=True, admission_shown=False)
    assert step.action == FINALIZE and names(step.pods) == ["a"]
    serving = {"kueue.x-k8s.io/pod-group-serving": "true"}
    pods = [member("a", phase="Succeeded", annotations=serving),
            member("b", phase="Succeeded", annotations=serving)]
    assert next_step(pods, None, managed=True, admission_shown=False).action == CREATE
