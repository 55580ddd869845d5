"""Kueue's check of TAS pod-set groups across a job's pod sets (``ValidatePodSetGroupingTopology``,
#7061 / #7263): a group is exactly 2 pod sets, one of them of 1 pod, both asking for the same required or
preferred level (and, under ``TASTopologySpreading``, for the same spreading). The JobSet, MPIJob,
LeaderWorkerSet, RayJob, RayCluster and RayService webhooks refuse the rest under ``TopologyAwareScheduling``,
at each member's annotations, in Kueue's words (its ``jobset_webhook_test.go``, ``mpijob_webhook_test.go``,
``leaderworkerset_webhook_test.go`` and Ray cases)."""

from __future__ import annotations

from typing import Any

from connectors.k8s import jobset_webhook, lws_webhook, mpijob_webhook, ray_webhook

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
SPREADING = "kueue.x-k8s.io/podset-topology-spreading"
TAS_OFF = {"TopologyAwareScheduling": False}
SIZE = "can only define groups of exactly 2 pod sets, got: {} pod set(s)"
NO_LEADER = ("can only define groups where at least one pod set has only 1 replica, got: {} replica(s) "
             "and {} replica(s) in the group")
CONSISTENT = (f"must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with '{{}}' in group '{{}}'")


def _pod(annotations: dict[str, str] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "img"}]}}
    return {**pod, "metadata": {"annotations": annotations}} if annotations else pod


def _grouped(group: str, level: str = "cloud.com/block", key: str = REQUIRED, **more: str) -> dict[str, str]:
    return {key: level, GROUP: group, **more}


# --- JobSet -------------------------------------------------------------------------------------------------


def _jobset(*jobs: tuple[str, int, int, dict[str, str] | None]) -> dict[str, Any]:
    """(name, replicas, parallelism = completions, pod annotations) per replicated Job."""
    return {"metadata": {"name": "js", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"replicatedJobs": [
                {"name": name, "replicas": replicas,
                 "template": {"spec": {"parallelism": pods, "completions": pods,
                                       "template": _pod(annotations)}}}
                for name, replicas, pods, annotations in jobs]}}


def _js_at(i: int) -> str:
    return f"spec.replicatedJobs[{i}].template.spec.template.metadata.annotations"


def test_a_jobset_launcher_and_workers_group_passes() -> None:
    js = _jobset(("launcher", 1, 1, _grouped("groupname")), ("worker", 4, 1, _grouped("groupname")))
    assert jobset_webhook.create_errors(js, {}) == []


def test_jobset_groups_of_other_than_two_are_refused_at_each_member() -> None:
    js = _jobset(("job1", 1, 1, _grouped("1podset")), ("job2", 1, 1, _grouped("3podsets")),
                 ("job3", 2, 1, _grouped("3podsets")), ("job4", 2, 2, _grouped("3podsets")))
    assert jobset_webhook.create_errors(js, {}) == [
        f'{_js_at(0)}[{GROUP}]: Invalid value: "1podset": {SIZE.format(1)}',
        f'{_js_at(1)}[{GROUP}]: Invalid value: "3podsets": {SIZE.format(3)}',
        f'{_js_at(2)}[{GROUP}]: Invalid value: "3podsets": {SIZE.format(3)}',
        f'{_js_at(3)}[{GROUP}]: Invalid value: "3podsets": {SIZE.format(3)}',
    ]
    assert jobset_webhook.create_errors(js, TAS_OFF) == [], "only under TopologyAwareScheduling"


def test_a_jobset_group_needs_a_one_pod_member() -> None:
    js = _jobset(("job1", 2, 1, _grouped("groupname")), ("job2", 1, 3, _grouped("groupname")))
    assert jobset_webhook.create_errors(js, {}) == [
        f'{_js_at(0)}[{GROUP}]: Invalid value: "groupname": {NO_LEADER.format(2, 3)}',
        f'{_js_at(1)}[{GROUP}]: Invalid value: "groupname": {NO_LEADER.format(2, 3)}',
    ]


def test_a_jobset_groups_members_ask_for_the_same_level() -> None:
    expected = [f"{_js_at(0)}: Invalid value: {CONSISTENT.format(_js_at(1), 'groupname')}",
                f"{_js_at(1)}: Invalid value: {CONSISTENT.format(_js_at(0), 'groupname')}"]
    racks = _jobset(("job1", 1, 1, _grouped("groupname", "cloud.com/rack")),
                    ("job2", 2, 1, _grouped("groupname")))
    assert jobset_webhook.create_errors(racks, {}) == expected, "required levels differ"
    preferred = _jobset(("job1", 1, 1, _grouped("groupname", "cloud.com/rack", PREFERRED)),
                        ("job2", 2, 1, _grouped("groupname", key=PREFERRED)))
    assert jobset_webhook.create_errors(preferred, {}) == expected, "preferred levels differ"
    mixed = _jobset(("job1", 1, 1, _grouped("groupname", "cloud.com/rack")),
                    ("job2", 2, 1, _grouped("groupname", "cloud.com/block", PREFERRED)))
    assert jobset_webhook.create_errors(mixed, {}) == expected, "required beside preferred"


def test_a_group_name_without_a_level_is_no_member() -> None:
    """Kueue keeps a template's group name in its pod set only beside a required or preferred level: without
    one it is refused on its own and its pod set joins no group."""
    js = _jobset(("job1", 1, 1, {GROUP: "g"}), ("job2", 2, 1, _grouped("g")))
    assert jobset_webhook.create_errors(js, {}) == [
        f"{_js_at(0)}[{GROUP}]: Forbidden: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' "
        "is specified",
        f'{_js_at(1)}[{GROUP}]: Invalid value: "g": {SIZE.format(1)}',
    ]


def test_a_groups_members_carry_the_same_spreading_under_its_gate() -> None:
    spreading = '{"rules":[{"topologyKey":"cloud.com/rack","maxShareAllowingPlacement":"0.45"}]}'
    js = _jobset(("leader", 1, 1, _grouped("g", **{SPREADING: spreading})), ("workers", 3, 1, _grouped("g")))
    detail = "must specify the same '{}' annotation as '{}' in group 'g', or neither pod set may specify it"
    assert jobset_webhook.create_errors(js, {"TASTopologySpreading": True}) == [
        f"{_js_at(0)}: Invalid value: {detail.format(SPREADING, _js_at(1))}",
        f"{_js_at(1)}: Invalid value: {detail.format(SPREADING, _js_at(0))}",
    ]
    assert jobset_webhook.create_errors(js, {}) == [], "the gate off: the spreading is not looked at"
    both = _jobset(("leader", 1, 1, _grouped("g", **{SPREADING: spreading})),
                   ("workers", 3, 1, _grouped("g", **{SPREADING: spreading})))
    assert jobset_webhook.create_errors(both, {"TASTopologySpreading": True}) == []


# --- MPIJob -------------------------------------------------------------------------------------------------


def _mpijob(launcher: dict[str, str] | None, worker: dict[str, str] | None,
            workers: int = 4) -> dict[str, Any]:
    return {"metadata": {"name": "pi", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": _pod(launcher)},
                                         "Worker": {"replicas": workers, "template": _pod(worker)}}}}


def test_mpijob_members_of_different_groups_are_each_a_group_of_one() -> None:
    mpijob = _mpijob(_grouped("groupname1"), _grouped("groupname2"))
    launcher, worker = (f"spec.mpiReplicaSpecs[{t}].template.metadata.annotations"
                        for t in ("Launcher", "Worker"))
    assert mpijob_webhook.create_errors(mpijob, {}) == [
        f'{launcher}[{GROUP}]: Invalid value: "groupname1": {SIZE.format(1)}',
        f'{worker}[{GROUP}]: Invalid value: "groupname2": {SIZE.format(1)}',
    ]
    assert mpijob_webhook.create_errors(_mpijob(_grouped("g"), _grouped("g")), {}) == []


def test_mpijob_launcher_and_worker_ask_for_the_same_level() -> None:
    mpijob = _mpijob(_grouped("g", "cloud.com/rack"), _grouped("g"))
    launcher, worker = (f"spec.mpiReplicaSpecs[{t}].template.metadata.annotations"
                        for t in ("Launcher", "Worker"))
    assert mpijob_webhook.create_errors(mpijob, {}) == [
        f"{launcher}: Invalid value: {CONSISTENT.format(worker, 'g')}",
        f"{worker}: Invalid value: {CONSISTENT.format(launcher, 'g')}",
    ]


# --- LeaderWorkerSet ----------------------------------------------------------------------------------------


def _lws(leader: dict[str, str] | None, worker: dict[str, str] | None, *, with_leader: bool = True
         ) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": 4, "workerTemplate": _pod(worker)}
    if with_leader:
        lwt["leaderTemplate"] = _pod(leader)
    return {"metadata": {"name": "lws", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"leaderWorkerTemplate": lwt}}


LEADER_AT = "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations"
WORKER_AT = "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"


def test_lws_group_named_on_one_template_only_is_refused() -> None:
    assert lws_webhook.create_errors(_lws(_grouped("groupname"), None), {}) == [
        f'{LEADER_AT}[{GROUP}]: Invalid value: "groupname": {SIZE.format(1)}']
    assert lws_webhook.create_errors(_lws(None, _grouped("groupname")), {}) == [
        f'{WORKER_AT}[{GROUP}]: Invalid value: "groupname": {SIZE.format(1)}']
    assert lws_webhook.create_errors(_lws(None, _grouped("groupname"), with_leader=False), {}) == [
        f'{WORKER_AT}[{GROUP}]: Invalid value: "groupname": {SIZE.format(1)}'], "no leader template"
    assert lws_webhook.create_errors(_lws(_grouped("groupname"), _grouped("groupname")), {}) == []


def test_lws_leader_and_workers_ask_for_the_same_level() -> None:
    assert lws_webhook.create_errors(
        _lws(_grouped("groupname"), _grouped("groupname", key=PREFERRED)), {}) == [
        f"{LEADER_AT}: Invalid value: {CONSISTENT.format(WORKER_AT, 'groupname')}",
        f"{WORKER_AT}: Invalid value: {CONSISTENT.format(LEADER_AT, 'groupname')}",
    ]


# --- Ray ----------------------------------------------------------------------------------------------------


def _cluster_spec(head: dict[str, str] | None,
                  *workers: tuple[str, int, dict[str, str] | None]) -> dict[str, Any]:
    return {"headGroupSpec": {"template": _pod(head)},
            "workerGroupSpecs": [{"groupName": name, "replicas": replicas, "template": _pod(annotations)}
                                 for name, replicas, annotations in workers]}


RAY_CASE = _cluster_spec(_grouped("1podset"), ("w1", 1, _grouped("3podsets")),
                         ("w2", 1, _grouped("3podsets")), ("w3", 2, _grouped("3podsets")))


def _ray_expected(at: str) -> list[str]:
    head = f"{at}.headGroupSpec.template.metadata.annotations"
    return [f'{head}[{GROUP}]: Invalid value: "1podset": {SIZE.format(1)}',
            *(f"{at}.workerGroupSpecs[{i}].template.metadata.annotations[{GROUP}]: "
              f'Invalid value: "3podsets": {SIZE.format(3)}' for i in range(3))]


def test_a_rayclusters_groups_are_checked_across_head_and_worker_groups() -> None:
    cluster = {"metadata": {"name": "rc", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
               "spec": RAY_CASE}
    assert ray_webhook.raycluster_create_errors(cluster, {}) == _ray_expected("spec")


def test_a_rayjobs_and_a_rayservices_groups_are_checked_in_their_cluster_spec() -> None:
    meta = {"name": "r", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    job = {"metadata": meta, "spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": RAY_CASE}}
    assert ray_webhook.rayjob_create_errors(job, {}) == _ray_expected("spec.rayClusterSpec")
    service = {"metadata": meta, "spec": {"rayClusterConfig": RAY_CASE, "upgradeStrategy": {"type": "None"}}}
    assert ray_webhook.rayservice_create_errors(service, {}) == _ray_expected("spec.rayClusterSpec")


def test_ray_group_errors_come_after_the_heads_and_before_the_worker_groups_own() -> None:
    """Kueue checks the head's annotations, then the groups, then each worker group's annotations."""
    spec = _cluster_spec(_grouped("g", "cloud.com/rack"),
                         ("w1", 1, {**_grouped("g"), PREFERRED: "cloud.com/rack"}))
    cluster = {"metadata": {"name": "rc", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
               "spec": spec}
    errors = ray_webhook.raycluster_create_errors(cluster, {})
    head, worker = ("spec.headGroupSpec.template.metadata.annotations",
                    "spec.workerGroupSpecs[0].template.metadata.annotations")
    assert [e.split(": ", 2)[:2] for e in errors] == [
        [head, "Invalid value"], [worker, "Invalid value"], [worker, "Invalid value"]]
    assert errors[0] == f"{head}: Invalid value: {CONSISTENT.format(worker, 'g')}"
    assert errors[2].startswith(
        f"{worker}: Invalid value: must not contain more than one topology annotation")
