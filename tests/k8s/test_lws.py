"""Kueue's LeaderWorkerSet integration, the pure part (:mod:`connectors.k8s.leaderworkerset`): the group Workloads
a LeaderWorkerSet gets, which are made, kept and deleted, the marks its pods get and what its webhooks add and
refuse — cases after Kueue's ``leaderworkerset_reconciler_test.go``, ``leaderworkerset_pod_reconciler_test.go`` and
``leaderworkerset_webhook_test.go`` (no cluster needed)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from connectors.k8s import job_selection, pod_prebuilt
from connectors.k8s import leaderworkerset as lw
from connectors.k8s.pod_sync import ManagedPod
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import NO_KEYS, KeysToCopy, built_in_kinds, load_config
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo

UID = "lws-uid"
Q = "kueue.x-k8s.io/queue-name"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"


def template(cpu: str = "1", image: str = "img:1", annotations: dict[str, str] | None = None,
             priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": cpu}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"annotations": annotations or {}}, "spec": spec}


def lws(*, replicas: int | None = 2, size: int | None = 3, leader: bool = True, labels: dict[str, str] | None = None,
        status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    lwt: dict[str, Any] = {"workerTemplate": template()}
    if size is not None:
        lwt["size"] = size
    if leader:
        lwt["leaderTemplate"] = template(cpu="2")
    body: dict[str, Any] = {"leaderWorkerTemplate": lwt, **spec}
    if replicas is not None:
        body["replicas"] = replicas
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": "ns", "uid": UID, "labels": {Q: "lq", **(labels or {})}},
            "spec": body, "status": status or {}}


# --- names and which Workloads --------------------------------------------------------------------------------


def test_a_groups_workload_name_is_kueues_owner_rule_over_name_and_group_index() -> None:
    digest = hashlib.sha1(f"LeaderWorkerSet\nleaderworkerset.x-k8s.io\nlws-1\n{UID}".encode()).hexdigest()[:5]
    assert lw.workload_name("lws", UID, 1) == f"leaderworkerset-lws-1-{digest}"
    assert lw.workload_name("lws", UID, 0) != lw.workload_name("lws", UID, 1)
    assert len(lw.workload_name("x" * 100, UID, 0, short=True)) == 63


def test_one_workload_is_made_per_group_index() -> None:
    create, keep, delete = lw.plan(lws(replicas=2), [])
    assert create == [(lw.workload_name("lws", UID, 0), 0), (lw.workload_name("lws", UID, 1), 1)]
    assert (keep, delete) == ([], [])
    assert lw.plan(lws(replicas=None), [])[0] == [(lw.workload_name("lws", UID, 0), 0)], "replicas default 1"



def test_a_replica_count_kueue_refuses_plans_nothing() -> None:
    """Kueue's #12715 (v0.18.3): ``spec.replicas`` above 1,000,000 or below 0 is refused with its error rather than
    planned (a count near 2^31 would be as many Workloads); 1,000,000 itself is planned."""
    with pytest.raises(InvalidInput, match=r"^invalid LeaderWorkerSet replicas: must be <= 1000000, got 1000001$"):
        lw.plan(lws(replicas=1_000_001), [])
    with pytest.raises(InvalidInput, match=r"^invalid LeaderWorkerSet replicas: must be >= 0, got -1$"):
        lw.plan(lws(replicas=-1), [lw.workload_name("lws", UID, 0)])
    assert lw.replica_count_error(lws(replicas=1_000_000)) is None
    assert lw.replica_count_error(lws(replicas=None)) is None

def test_existing_workloads_are_kept_and_those_beyond_the_group_count_deleted() -> None:
    names = [lw.workload_name("lws", UID, i) for i in range(3)]
    create, keep, delete = lw.plan(lws(replicas=2), [names[0], names[2], "stale"])
    assert create == [(names[1], 1)]
    assert keep == [names[0]]
    assert delete == sorted([names[2], "stale"])


MANAGER_UID = "manager-lws-uid"
ORIGIN = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}


def remote_copy(**kw: Any) -> dict[str, Any]:
    """A MultiKueue manager's copy of the set on a worker: the origin label, the manager's set's UID annotated."""
    copied = lws(labels=ORIGIN, **kw)
    copied["metadata"]["annotations"] = {"kueue.x-k8s.io/multikueue-origin-uid": MANAGER_UID}
    return copied


def test_a_multikueue_copys_groups_are_the_managers_workloads_and_none_is_made() -> None:
    """Kueue's ``GetOwnerUID`` and ``filterWorkloads`` on a worker: the names come from the manager's set's UID,
    the Workloads the manager copied here are kept, none is made, one beyond the group count is deleted."""
    names = [lw.workload_name("lws", MANAGER_UID, i) for i in range(3)]
    assert lw.owner_uid(remote_copy()) == MANAGER_UID
    assert lw.plan(remote_copy(replicas=2), []) == ([], [], [])
    assert lw.plan(remote_copy(replicas=2), [names[1], names[2]]) == ([], [names[1]], [names[2]])


def test_the_origin_uid_counts_only_on_a_multikueue_copy() -> None:
    """Without the origin label the set is its own: its UID names its groups, and they are made."""
    annotated = lws()
    annotated["metadata"]["annotations"] = {"kueue.x-k8s.io/multikueue-origin-uid": MANAGER_UID}
    assert lw.owner_uid(annotated) == UID
    assert lw.plan(annotated, [])[0][0] == (lw.workload_name("lws", UID, 0), 0)
    assert lw.owner_uid(lws(labels=ORIGIN)) == UID, "a copy without the annotation"


def test_a_rolling_update_with_a_surge_keeps_the_surge_groups_workloads() -> None:
    surge = {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 1}}}
    names = [lw.workload_name("lws", UID, i) for i in range(3)]
    updating = lws(replicas=2, status={"replicas": 3, "updatedReplicas": 1}, **surge)
    assert lw.plan(updating, names) == ([], names, [])
    done = lws(replicas=2, status={"replicas": 3, "updatedReplicas": 2}, **surge)
    assert lw.plan(done, names)[2] == [names[2]], "the surge group's Workload goes once every group is updated"
    no_surge = lws(replicas=2, status={"replicas": 3, "updatedReplicas": 1})
    assert lw.plan(no_surge, names)[2] == [names[2]], "a plain scale-down: status lags, spec counts"


def test_a_surge_of_other_digits_than_ascii_reads_as_none() -> None:
    """``maxSurge`` may be a string: Kueue reads one that is no percentage as Go's ``IntValue`` does, 0 unless
    ``strconv.Atoi`` takes it, and that takes ASCII digits only; ``"²"`` passes ``str.isdigit`` yet made ``int``
    raise, crashing the plan."""
    names = [lw.workload_name("lws", UID, i) for i in range(3)]
    for text in ("²", "²%", "0%", "-50%", "x%"):
        odd = {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": text}}}
        updating = lws(replicas=2, status={"replicas": 3, "updatedReplicas": 1}, **odd)
        assert lw.plan(updating, names)[2] == [names[2]], text


def test_a_percentage_surge_is_a_share_of_the_replicas_rounded_up() -> None:
    """Kueue v0.20 (#14405) reads a percentage ``maxSurge`` as LeaderWorkerSet scales it, a share of
    ``spec.replicas`` rounded up (v0.19 read every percentage as 0, so a rolling update configured so lost the
    surge groups' Workloads): while the update runs the surge groups keep theirs."""
    names = [lw.workload_name("lws", UID, i) for i in range(3)]
    for text in ("50%", "1%", "100%"):
        surge = {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": text}}}
        updating = lws(replicas=2, status={"replicas": 3, "updatedReplicas": 1}, **surge)
        assert lw.plan(updating, names) == ([], names, []), text
    assert [lw.max_surge(v, 10) for v in ("25%", "1%", "0%", "100%", 3, "4", "x")] == [3, 1, 0, 10, 3, 4, 0]


# --- one Workload ---------------------------------------------------------------------------------------------


def test_a_groups_workload_has_a_leader_and_a_worker_pod_set() -> None:
    wl = lw.workload_for(ClusterState(), NO_KEYS, lws(size=3), "wl", 1)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 2)]
    assert wl["spec"]["podSets"][0]["template"] == {"spec": template(cpu="2")["spec"]}, "the spec alone"
    assert wl["spec"]["queueName"] == "lq"
    meta = wl["metadata"]
    assert meta["ownerReferences"] == [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                        "name": "lws", "uid": UID, "controller": True, "blockOwnerDeletion": True}]
    assert meta["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true",
                                   "kueue.x-k8s.io/job-owner-gvk": "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet",
                                   "kueue.x-k8s.io/job-owner-name": "lws",
                                   "kueue.x-k8s.io/component-workload-index": "1"}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_without_a_leader_template_a_group_is_one_main_pod_set_of_its_size() -> None:
    wl = lw.workload_for(ClusterState(), NO_KEYS, lws(size=4, leader=False), "wl", 0)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 4)]
    assert [(ps["name"], ps["count"]) for ps in lw.pod_sets(lws(size=None, leader=False), tas=False)] == [("main", 1)]


def test_under_tas_the_workers_are_ranked_by_worker_index_and_a_podset_group_joins_both() -> None:
    raw = lws()
    for name in ("leaderTemplate", "workerTemplate"):
        raw["spec"]["leaderWorkerTemplate"][name]["metadata"]["annotations"] = {
            "kueue.x-k8s.io/podset-required-topology": "rack", GROUP_NAME: "g"}
    leader, worker = lw.pod_sets(raw, tas=True)
    assert worker["topologyRequest"]["podIndexLabel"] == lw.WORKER_INDEX_LABEL
    assert "podIndexLabel" not in leader["topologyRequest"]
    assert leader["topologyRequest"]["podSetGroupName"] == worker["topologyRequest"]["podSetGroupName"] == "g"
    assert "topologyRequest" not in lw.pod_sets(raw, tas=False)[0]


def test_priority_from_the_leaders_then_the_workers_priority_class_and_labels_copied() -> None:
    raw = lws(labels={"team": "a", "other": "b"})
    raw["spec"]["leaderWorkerTemplate"]["workerTemplate"] = template(priority_class="high")
    assert lw.pod_priority_class(raw) == "high"
    raw["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = template(priority_class="low")
    assert lw.pod_priority_class(raw) == "low"
    wl = lw.workload_for(ClusterState(), KeysToCopy(labels=("team",)), lws(labels={"team": "a"}), "wl", 0)
    assert wl["metadata"]["labels"] == {"team": "a", "kueue.x-k8s.io/job-uid": UID}


def test_every_groups_workload_carries_its_sets_own_uid_as_job_uid() -> None:
    """Kueue #9898: the set's uid ties its group Workloads together (TAS spreading's default selector, kubectl -l);
    a MultiKueue copy's Workloads come from the manager, so the local uid is the one written."""
    wl = lw.workload_for(ClusterState(), NO_KEYS, lws(), "wl", 0)
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == UID
    copy_ = lws()
    copy_["metadata"]["annotations"] = {lw.ORIGIN_UID_ANNOTATION: "manager-uid"}
    assert lw.workload_for(ClusterState(), NO_KEYS, copy_, "wl", 0)["metadata"]["labels"] == {
        "kueue.x-k8s.io/job-uid": UID}


def test_a_pod_sets_template_keeps_its_metadata_but_the_leaderworkerset_keys() -> None:
    """Kueue #10330: pod-set annotations Kueue reads (TAS, spreading) and the template's labels reach the Workload;
    the LeaderWorkerSet controller's own keys are dropped, its set-name label kept."""
    raw = lws()
    raw["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"team": "a", lw.SET_NAME_LABEL: "lws", lw.GROUP_INDEX_LABEL: "0"},
        "annotations": {"note": "x", lw.LEADER_NAME_ANNOTATION: "lws-0"}}
    worker = lw.workload_for(ClusterState(), NO_KEYS, raw, "wl", 0)["spec"]["podSets"][-1]
    assert worker["template"]["metadata"] == {"labels": {"team": "a", lw.SET_NAME_LABEL: "lws"},
                                              "annotations": {"note": "x"}}
    assert raw["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][lw.GROUP_INDEX_LABEL] == "0"


# --- its pods -------------------------------------------------------------------------------------------------


def pod_meta(*, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             group: str | None = "1", worker: bool = False) -> o.ObjectMeta:
    base = {lw.SET_NAME_LABEL: "lws", **({lw.GROUP_INDEX_LABEL: group} if group is not None else {})}
    notes = {lw.SUSPENDING_PARENT: lw.FRAMEWORK_NAME, **({lw.LEADER_NAME_ANNOTATION: "lws-1"} if worker else {})}
    return o.ObjectMeta(name="p", namespace="ns", labels={**base, **(labels or {})},
                        annotations={**notes, **(annotations or {})})


GROUP = "kueue.x-k8s.io/pod-group-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def test_an_adopted_pod_names_its_group_and_prebuilt_workload_in_annotations_under_the_gate() -> None:
    """Kueue's ``leaderworkerset_reconciler_test.go`` "should set queue-name when adopting a pod without it"
    (``WorkloadIdentifierAnnotations`` at its default, beta, on): the pod gets the managed label and the set's
    queue name as labels, its group's Workload as the ``pod-group-name`` and ``prebuilt-workload-name``
    annotations, and no label of either key."""
    name = lw.workload_name("lws", UID, "1")
    assert lw.pod_marks(pod_meta(), lws(size=3)) == {"metadata": {
        "labels": {"kueue.x-k8s.io/managed": "true", Q: "lq"},
        "annotations": {GROUP: name, PREBUILT: name, "kueue.x-k8s.io/pod-group-total-count": "3",
                        "kueue.x-k8s.io/role-hash": "leader"}}}


def test_a_leader_and_a_worker_pod_are_made_members_of_their_groups_prebuilt_pod_group() -> None:
    """With ``WorkloadIdentifierAnnotations`` off, the group and prebuilt names are labels (Kueue's cases
    "should set default values (leader+worker template, leader pod)" / "... worker pod", which turn the gate
    off)."""
    name = lw.workload_name("lws", UID, "1")
    for worker, role in ((False, "leader"), (True, "worker")):
        assert lw.pod_marks(pod_meta(worker=worker), lws(size=3), in_annotations=False) == {"metadata": {
            "labels": {"kueue.x-k8s.io/managed": "true", Q: "lq", GROUP: name, PREBUILT: name},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3", "kueue.x-k8s.io/role-hash": role}}}
    for in_annotations in (True, False):
        marks = lw.pod_marks(pod_meta(worker=True), lws(leader=False), in_annotations=in_annotations)
        assert marks is not None and marks["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "main"


def test_a_multikueue_copys_pods_run_on_the_workloads_the_manager_copied() -> None:
    """Kueue's "should set default values using origin UID in MultiKueue scenario" (the gate off), and the
    gate on."""
    name = lw.workload_name("lws", MANAGER_UID, "1")
    for in_annotations, where in ((False, "labels"), (True, "annotations")):
        marks = lw.pod_marks(pod_meta(), remote_copy(), in_annotations=in_annotations)
        assert marks is not None
        assert (marks["metadata"][where][PREBUILT], marks["metadata"][where][GROUP]) == (name, name)


def test_a_pod_is_left_alone_without_its_group_index_once_a_member_or_unmarked() -> None:
    assert lw.pod_marks(pod_meta(group=None), lws()) is None, "waits for its group index"
    member = pod_meta(labels={"kueue.x-k8s.io/managed": "true", Q: "lq"})
    assert lw.pod_marks(member, lws()) is None, "a member already"
    assert lw.pod_marks(member, lws(), gated=True) is None, "a member already, of the set's queue"
    assert lw.pod_marks(o.ObjectMeta(name="p", labels={lw.GROUP_INDEX_LABEL: "0"}), lws()) is None, "not a held pod"
    assert lw.pod_marks(pod_meta(), None) is None, "its set is gone"


def test_a_pod_of_a_set_naming_no_queue_is_made_a_member_without_one() -> None:
    """Under manageJobsWithoutQueueName a set naming no queue is Kueue's (its templates marked): Kueue's reconciler
    makes its pods members all the same, reading no queue name, so they run on their group's Workload, which names
    none either; a gated member is given no queue name."""
    unqueued = lws()
    del unqueued["metadata"]["labels"][Q]
    name = lw.workload_name("lws", UID, "1")
    assert lw.pod_marks(pod_meta(), unqueued) == {"metadata": {
        "labels": {"kueue.x-k8s.io/managed": "true"},
        "annotations": {GROUP: name, PREBUILT: name, "kueue.x-k8s.io/pod-group-total-count": "3",
                        "kueue.x-k8s.io/role-hash": "leader"}}}
    assert lw.pod_marks(pod_meta(), unqueued, in_annotations=False) == {"metadata": {
        "labels": {"kueue.x-k8s.io/managed": "true", GROUP: name, PREBUILT: name},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3", "kueue.x-k8s.io/role-hash": "leader"}}}
    assert lw.pod_marks(pod_meta(labels={"kueue.x-k8s.io/managed": "true"}), unqueued, gated=True) is None


def test_a_pod_is_a_member_by_kueues_managed_label_not_by_its_queue_name() -> None:
    """Kueue's newest reconciler takes a pod with ``kueue.x-k8s.io/managed`` as a member already: one made from a
    template naming a queue is still made a member, keeping its queue name; one managed without a queue name and
    no longer gated is not touched (the pod webhook refuses the change once it runs)."""
    name = lw.workload_name("lws", UID, "1")
    marks = lw.pod_marks(pod_meta(labels={Q: "from-template"}), lws())
    assert marks == {"metadata": {
        "labels": {"kueue.x-k8s.io/managed": "true"},
        "annotations": {GROUP: name, PREBUILT: name, "kueue.x-k8s.io/pod-group-total-count": "3",
                        "kueue.x-k8s.io/role-hash": "leader"}}}
    assert lw.pod_marks(pod_meta(labels={"kueue.x-k8s.io/managed": "true"}), lws()) is None


def test_a_gated_member_without_the_sets_queue_name_is_given_it() -> None:
    """Kueue's backfill: a member still gated whose queue name is missing or not the set's gets the set's, or the
    pod integration would skip it and its group never be ungated. A member adopted with labels (before the
    gate, or with it off) keeps them: Kueue's "should backfill queue-name on an already adopted pod" (gate at
    its default) changes the queue name alone."""
    for labels in ({}, {Q: "old"}, {Q: "old", GROUP: "g", PREBUILT: "g"}):
        member = pod_meta(labels={"kueue.x-k8s.io/managed": "true", **labels})
        for in_annotations in (True, False):
            assert lw.pod_marks(member, lws(), gated=True, in_annotations=in_annotations) == {
                "metadata": {"labels": {Q: "lq"}}}
            assert lw.pod_marks(member, lws(), gated=False, in_annotations=in_annotations) is None


def test_a_groups_prebuilt_workload_its_set_controls_is_the_groups() -> None:
    raw = lw.workload_for(ClusterState(), NO_KEYS, lws(), lw.workload_name("lws", UID, 0), 0)
    obs = o.Workload(metadata=o.ObjectMeta(name=raw["metadata"]["name"], namespace="ns", owner_references=[
        o.OwnerReference(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet", name="lws", uid=UID,
                         controller=True)]))
    pod = ManagedPod(metadata=o.ObjectMeta(name="lws-0", namespace="ns", uid="p0",
                                           labels={lw.SET_NAME_LABEL: "lws"}))
    wl = WorkloadInfo(key="ns/wl", uid="w", namespace="ns", name="wl", queue_name="lq", created=0,
                      priority=0, priority_class="", pod_sets=())
    assert pod_prebuilt.group_verdict([pod], obs, wl) == pod_prebuilt.ADD_OWNERS
    other = ManagedPod(metadata=o.ObjectMeta(name="x-0", namespace="ns", uid="p1", labels={lw.SET_NAME_LABEL: "x"}))
    assert pod_prebuilt.group_verdict([other], obs, wl) == pod_prebuilt.FOREIGN, "another set's Workload"


# --- the webhooks ---------------------------------------------------------------------------------------------


def test_the_mutating_webhook_marks_both_templates_with_the_queue_and_priority_class_labels() -> None:
    marks = lw.default_marks(lws(labels={"kueue.x-k8s.io/priority-class": "high"}))
    held = {lw.SUSPENDING_PARENT: "leaderworkerset", "kueue.x-k8s.io/pod-group-serving": "true"}
    queued = {Q: "lq", "kueue.x-k8s.io/priority-class": "high"}
    assert marks == [("leaderTemplate", queued, held), ("workerTemplate", queued, held)]
    assert lw.default_marks(lws(leader=False)) == [("workerTemplate", {Q: "lq"}, held)]


def test_creation_refuses_a_bad_queue_name() -> None:
    assert lw.create_errors(lws()) == []
    assert lw.create_errors(lws(labels={Q: "Bad_Name"})), "not a DNS-1123 subdomain"


def test_a_queued_set_may_start_its_workers_once_the_leader_is_ready() -> None:
    """Kueue supports the ``LeaderReady`` startup policy since #4023 (v0.11; its e2e runs the scaling cases under
    both policies): its v0.20 webhook has no startup-policy rule, so a queued set asking for it is admitted."""
    assert lw.create_errors(lws(startupPolicy="LeaderReady")) == []
    assert lw.update_errors(lws(startupPolicy="LeaderReady"), lws(startupPolicy="LeaderReady")) == []
    assert lw.update_errors(lws(), lws(startupPolicy="LeaderReady")) == []


def test_an_update_may_roll_images_but_not_change_the_queue_or_what_a_group_needs() -> None:
    old = lws()
    rolled = copy.deepcopy(old)
    rolled["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "img:2"
    rolled["spec"]["replicas"] = 5
    assert lw.update_errors(old, rolled) == []
    ready = {**old, "status": {"readyReplicas": 1}}
    requeued = lws(labels={Q: "other"})
    assert lw.update_errors(ready, requeued) == ['metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": '
                                                 "field is immutable"]
    resized = copy.deepcopy(old)
    resized["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"] = {}
    assert [e.split(":")[0] for e in lw.update_errors(old, resized)] == [
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests"]
    assert [e.split(":")[0] for e in lw.update_errors(old, lws(leader=False))] == [
        "spec.leaderWorkerTemplate.leaderTemplate"]
    unqueued = lws(leader=False)
    del unqueued["metadata"]["labels"][Q]
    assert lw.update_errors(unqueued, {**unqueued, "spec": lws()["spec"]}) == [], "one naming no queue changes freely"


def test_the_queue_name_may_change_while_no_replica_is_ready() -> None:
    """Kueue's #4932 (v0.18): as for a Deployment or StatefulSet, a set none of whose groups is ready (the stored
    set's ``status.readyReplicas`` 0 or unset) may be sent to another queue, or given one it lacked; its pending
    group Workloads then follow (the reconciler). Removing the name stays refused, as for those kinds."""
    old = lws()
    assert lw.update_errors(old, lws(labels={Q: "other"})) == []
    assert lw.update_errors({**old, "status": {"readyReplicas": 0}}, lws(labels={Q: "other"})) == []
    unqueued = lws()
    del unqueued["metadata"]["labels"][Q]
    assert lw.update_errors(unqueued, old) == []
    assert lw.update_errors(old, unqueued) == ['metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": '
                                               "field is immutable"]
    assert lw.update_errors({**unqueued, "status": {"readyReplicas": 2}}, old) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "lq": field is immutable']


@pytest.mark.parametrize("listed", [["leaderworkerset.x-k8s.io/leaderworkerset"],
                                    ["batch/job", "leaderworkerset.x-k8s.io/leaderworkerset"]])
def test_listed_without_pod_the_framework_turns_the_pod_integration_on_by_itself(listed: list[str]) -> None:
    """Kueue since v0.15 (#6736, ``ImplicitlyEnabledFrameworkNames: ["pod"]``): a Configuration listing the
    LeaderWorkerSet integration without ``pod`` starts, the pod integration set up with it as if listed; the list
    stays as written, and the MultiKueue adapters (Kueue's ``GetMultiKueueAdapters`` over the list) leave Pods out."""
    config = load_config({"integrations": {"frameworks": listed}})
    assert config.manages_leaderworkersets and config.manages_pods
    assert config.frameworks == tuple(listed) and config.enabled_frameworks == (*listed, "pod")
    assert ("v1", "Pod") not in built_in_kinds(config.frameworks)
    both = load_config({"integrations": {"frameworks": ["pod", *listed]}})
    assert both.manages_pods and both.enabled_frameworks == both.frameworks == ("pod", *listed)
    assert not load_config({}).manages_leaderworkersets and not load_config({}).manages_pods


@pytest.mark.parametrize(("frameworks", "child_managed"), [(["pod", "statefulset"], True),
                                                           (["pod", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"], False)])
def test_under_manage_jobs_without_queue_name_a_leaderworkersets_children_are_left_to_it(
        frameworks: list[str], child_managed: bool) -> None:
    """Kueue's ``IsOwnerManagedByKueue``: a LeaderWorkerSet is a parent Kueue runs, its integration on (its
    StatefulSets are its own, not queued apart)."""
    config = load_config({"manageJobsWithoutQueueName": True, "integrations": {"frameworks": frameworks}})
    ns = {"kubernetes.io/metadata.name": "ns"}
    owner = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert job_selection.is_managed({}, owner, ns, config) is child_managed
    assert job_selection.runs_parent(owner, config) is not child_managed
