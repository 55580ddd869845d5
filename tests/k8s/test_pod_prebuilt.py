"""Prebuilt Workloads for plain Pods and pod groups (:mod:`connectors.k8s.pod_prebuilt`), decided from the Pods and
the Workload alone: the name read, adopting one nothing controls, leaving one another object controls, finishing
one no longer equivalent, and what the Pod or group does while it has none (no cluster needed)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s import pod_group, pod_prebuilt, pod_sync
from connectors.k8s.pod_prebuilt import ADD_OWNERS, ADOPT, FOREIGN, OUT_OF_SYNC, USABLE
from connectors.k8s.pod_sync import ManagedPod, ManagedPodSpec, ManagedPodStatus
from events import objects as o
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, FINISHED, PENDING, PodSetInfo, WorkloadInfo

KEY = "kueue.x-k8s.io/prebuilt-workload-name"
GATE = {"name": "kueue.x-k8s.io/admission"}
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE = "kueue.x-k8s.io/role-hash"


def cpu(value: str) -> list[o.Container]:
    return [o.Container(name="c", resources=o.ResourceRequirements(requests={"cpu": value}))]


def pod(*, gated: bool = True, labels: dict | None = None, annotations: dict | None = None, cpu_request: str = "1"
        ) -> ManagedPod:
    return ManagedPod(
        metadata=o.ObjectMeta(name="p", namespace="ns", uid="pod-uid", resource_version="5",
                              labels={"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "lq",
                                      KEY: "pre", **(labels or {})},
                              annotations=annotations or {}, finalizers=["kueue.x-k8s.io/managed"]),
        spec=ManagedPodSpec(scheduling_gates=[GATE] if gated else [], containers=cpu(cpu_request)))


def prebuilt(*, owners: list[o.OwnerReference] | None = None, max_exec: int | None = None,
             sets: list[o.PodSet] | None = None) -> o.Workload:
    return o.Workload(
        metadata=o.ObjectMeta(name="pre", namespace="ns", uid="wl-uid", resource_version="3",
                              owner_references=owners or []),
        spec=o.WorkloadSpec(queue_name="lq", maximum_execution_time_seconds=max_exec, pod_sets=sets or [
            o.PodSet(name="main", count=1, template=o.PodTemplateSpec(spec=o.PodSpec(containers=cpu("1"))))]))


def info(phase: str = PENDING, sets: tuple[PodSetInfo, ...] = ()) -> WorkloadInfo:
    return WorkloadInfo(key="ns/pre", uid="wl-uid", namespace="ns", name="pre", queue_name="lq", created=0,
                        priority=0, priority_class="", pod_sets=sets, phase=phase)


def controlled_by(uid: str, name: str = "p") -> list[o.OwnerReference]:
    return [o.OwnerReference(api_version="v1", kind="Pod", name=name, uid=uid, controller=True)]


def test_the_pod_names_its_workload_as_the_gate_reads_the_label_and_annotation() -> None:
    assert pod_prebuilt.name_for(pod(), annotation_first=True) == "pre"
    both = pod(annotations={KEY: "from-annotation"})
    assert pod_prebuilt.name_for(both, annotation_first=True) == "from-annotation"
    assert pod_prebuilt.name_for(both, annotation_first=False) == "pre"
    bare = ManagedPod(metadata=o.ObjectMeta(name="p", namespace="ns"))
    assert pod_prebuilt.name_for(bare, annotation_first=True) == ""


def test_a_single_pod_adopts_a_workload_nothing_controls_and_leaves_one_another_object_controls() -> None:
    state = ClusterState()
    assert pod_prebuilt.single_verdict(state, pod(), prebuilt(), info()) == ADOPT
    assert pod_prebuilt.single_verdict(state, pod(), prebuilt(owners=controlled_by("other")), info()) == FOREIGN
    assert pod_prebuilt.single_verdict(state, pod(), prebuilt(owners=controlled_by("pod-uid")), info()) == USABLE
    patch = pod_prebuilt.adoption_patch(pod(), prebuilt(owners=[
        o.OwnerReference(api_version="v1", kind="ConfigMap", name="keep", uid="cm")]))
    assert patch == {"metadata": {"resourceVersion": "3", "labels": {"kueue.x-k8s.io/job-uid": "pod-uid"},
                                  "ownerReferences": [
                                      {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm"},
                                      pod_sync.controller_ref("p", "pod-uid")]}}


def test_a_prebuilt_workload_no_longer_equivalent_to_its_pod_is_out_of_sync() -> None:
    state, mine = ClusterState(), controlled_by("pod-uid")
    assert pod_prebuilt.single_verdict(state, pod(cpu_request="2"), prebuilt(owners=mine), info()) == OUT_OF_SYNC
    limited = pod(labels={"kueue.x-k8s.io/max-exec-time-seconds": "60"})
    assert pod_prebuilt.single_verdict(state, limited, prebuilt(owners=mine), info()) == OUT_OF_SYNC
    assert pod_prebuilt.single_verdict(state, limited, prebuilt(owners=mine, max_exec=60), info()) == USABLE
    two = [o.PodSet(name="main", count=2, template=o.PodTemplateSpec(spec=o.PodSpec(containers=cpu("1"))))]
    assert pod_prebuilt.single_verdict(state, pod(), prebuilt(owners=mine, sets=two), info()) == OUT_OF_SYNC


@pytest.mark.parametrize("extra", [
    {"resources": {"limits": {"cpu": "4"}, "requests": {"cpu": "1"}}},
    {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
])
def test_a_pod_matches_the_prebuilt_workload_made_from_it_whatever_its_pod_level_fields(extra: dict) -> None:
    """The Pod's side of the comparison keeps its pod-level ``resources`` and ``resourceClaims``, which the
    Workload made from it keeps too (ro-diff-c H1)."""
    state = ClusterState()
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", "resourceVersion": "5",
                        "labels": {"kueue.x-k8s.io/queue-name": "lq", KEY: "pre"}},
           "spec": {"schedulingGates": [GATE],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **extra}}
    body = pod_sync.workload_for(state, raw, "pre")  # the Workload kueue-es builds from this very Pod
    body["metadata"]["uid"], body["metadata"]["resourceVersion"] = "wl-uid", "3"
    obs = msgspec.convert(body, o.Workload)
    managed = msgspec.convert(raw, ManagedPod)
    assert pod_prebuilt.single_verdict(state, managed, obs, info()) == USABLE
    changed = msgspec.convert({**raw, "spec": {**raw["spec"], "resources": {"requests": {"cpu": "2"}}}},
                              ManagedPod)
    assert pod_prebuilt.single_verdict(state, changed, obs, info()) == OUT_OF_SYNC, "a different one is not"


def test_a_pod_naming_a_missing_workload_gets_none_made_and_a_running_one_is_stopped() -> None:
    gated = pod_sync.next_step(pod(), None, managed=True, admission_shown=False, prebuilt=True)
    assert gated.action == pod_sync.NOTHING
    running = pod_sync.next_step(pod(gated=False), None, managed=True, admission_shown=False, prebuilt=True)
    assert (running.action, running.reason, running.message) == (pod_sync.STOP, "NoMatchingWorkload",
                                                                 "missing workload")
    assert pod_sync.next_step(pod(), None, managed=True, admission_shown=False).action == pod_sync.CREATE


# --- pod groups ------------------------------------------------------------------------------------------------

def member(name: str, *, role: str = "r1", gated: bool = True, phase: str = "Pending", total: str = "2",
           prebuilt_name: str = "pre") -> ManagedPod:
    return ManagedPod(
        metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version="1",
                              creation_timestamp=f"2026-01-01T00:00:0{ord(name[0]) % 10}Z",
                              labels={"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "lq", GROUP: "g",
                                      KEY: prebuilt_name},
                              annotations={TOTAL: total, ROLE: role}, finalizers=["kueue.x-k8s.io/managed"]),
        spec=ManagedPodSpec(scheduling_gates=[GATE] if gated else []), status=ManagedPodStatus(phase=phase))


def group_prebuilt(counts: dict[str, int], owners: str = "", controller: str = "") -> o.Workload:
    refs = [o.OwnerReference(api_version="v1", kind="Pod", name=n, uid=f"uid-{n}") for n in owners]
    if controller:
        refs.append(o.OwnerReference(api_version="v1", kind="Job", name="j", uid=controller, controller=True))
    return o.Workload(
        metadata=o.ObjectMeta(name="pre", namespace="ns", uid="wl-uid", resource_version="3", owner_references=refs),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name=n, count=c) for n, c in counts.items()]))


def group_info(counts: dict[str, int], phase: str = PENDING) -> WorkloadInfo:
    return info(phase, tuple(PodSetInfo(name=n, count=c, min_count=None, requests=()) for n, c in counts.items()))


def test_a_group_makes_each_of_its_pods_an_owner_of_its_prebuilt_workload() -> None:
    pods = [member("a"), member("b")]
    obs = group_prebuilt({"r1": 2}, owners="a")
    assert pod_prebuilt.group_verdict(pods, obs, group_info({"r1": 2})) == ADD_OWNERS
    assert pod_prebuilt.owners_patch(pods, obs) == {"metadata": {"resourceVersion": "3", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "uid-a"},
        {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "uid-b"}]}}
    assert pod_prebuilt.owners_patch(pods, group_prebuilt({"r1": 2}, owners="ab")) is None
    assert pod_prebuilt.group_verdict(pods, group_prebuilt({"r1": 2}, owners="ab"), group_info({"r1": 2})) == USABLE
    foreign = group_prebuilt({"r1": 2}, controller="job-uid")
    assert pod_prebuilt.group_verdict(pods, foreign, group_info({"r1": 2})) == FOREIGN


def test_a_group_with_a_role_its_prebuilt_workload_lacks_or_counts_short_is_out_of_sync() -> None:
    pods = [member("a"), member("b", role="r2")]
    assert pod_prebuilt.group_verdict(pods, group_prebuilt({"r1": 1}, owners="ab"), group_info({"r1": 1})) == (
        OUT_OF_SYNC)
    three = [member("a"), member("b"), member("c")]
    assert pod_prebuilt.group_verdict(three, group_prebuilt({"r1": 2}, owners="abc"), group_info({"r1": 2})) == (
        OUT_OF_SYNC)
    assert pod_prebuilt.group_verdict(three, group_prebuilt({"r1": 2}, owners="abc"),
                                      group_info({"r1": 2}, FINISHED)) == USABLE, "finished: counts not compared"
    roomy = group_prebuilt({"r0": 1, "r1": 3, "r2": 1}, owners="ab")
    assert pod_prebuilt.group_verdict(pods, roomy, group_info({"r1": 3})) == USABLE


def test_a_group_without_its_prebuilt_workload_gets_none_made_and_its_running_pods_are_stopped() -> None:
    gated = pod_group.next_step([member("a"), member("b")], None, managed=True, admission_shown=False, prebuilt=True)
    assert gated.action == pod_group.NOTHING and not gated.remove and not gated.finalize
    alone = pod_group.next_step([member("a")], None, managed=True, admission_shown=False, prebuilt=True)
    assert alone.action == pod_group.NOTHING, "no ErrWorkloadCompose: nothing is composed"
    running = pod_group.next_step([member("a", gated=False), member("b")], None, managed=True, admission_shown=False,
                                  prebuilt=True)
    assert (running.action, [p.metadata.name for p in running.pods], running.message) == (
        pod_group.STOP, ["a"], "missing workload")


def test_kueue_removes_no_excess_pods_of_a_group_on_a_prebuilt_workload() -> None:
    pods = [member("a"), member("b"), member("c")]
    wl = group_info({"r1": 2}, ADMITTED)
    assert pod_group.next_step(pods, wl, managed=True, admission_shown=True).remove, "a Workload it made: excess"
    step = pod_group.next_step(pods, wl, managed=True, admission_shown=True, prebuilt=True)
    assert step.action == pod_group.START and not step.remove
