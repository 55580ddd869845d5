"""Kueue's MPIJob integration, the pure part (:mod:`connectors.k8s.mpijob`): the Workload an MPIJob gets, its
priority class, what starting and stopping it write, when it is finished, active and ready — shapes from Kueue's
``mpijob_controller_test.go`` (no cluster needed)."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from runpolicyhelp import replica, run_policy

from connectors.k8s import job_selection, podsetinfo
from connectors.k8s import mpijob as mj
from events import objects as o
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections.cluster import ClusterState

UID = "mpi-uid"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def raw_mpijob(specs: dict[str, Any], *, labels: dict[str, str] | None = None, suspend: bool | None = True,
               scheduling_priority: str = "") -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq", **(labels or {})}},
            "spec": {"runPolicy": run_policy(suspend, scheduling_priority), "mpiReplicaSpecs": specs}}


def view(raw: dict[str, Any]) -> mj.MPIJob:
    return msgspec.convert(raw, mj.MPIJob)


# --- configuration --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("frameworks", "on"), [([], False), (["batch/job"], False),
                                                (["batch/job", "kubeflow.org/mpijob"], True)])
def test_mpijobs_are_managed_only_when_the_frameworks_list_them(frameworks: list[str], on: bool) -> None:
    assert load_config({"integrations": {"frameworks": frameworks}}).manages_mpijobs is on
    assert not DEFAULT.manages_mpijobs


@pytest.mark.parametrize(("frameworks", "child_managed"), [(["batch/job"], True),
                                                           (["batch/job", "kubeflow.org/mpijob"], False)])
@pytest.mark.parametrize("api_version", ["kubeflow.org/v2beta1", "kubeflow.org/v1"])
def test_under_manage_jobs_without_queue_name_an_mpijobs_launcher_job_is_left_to_it(
        frameworks: list[str], child_managed: bool, api_version: str) -> None:
    """Kueue's ``isMPIJob`` counts an MPIJob of any kubeflow.org version a Kueue-run parent (integration on)."""
    config = load_config({"manageJobsWithoutQueueName": True, "integrations": {"frameworks": frameworks}})
    owner = (api_version, "MPIJob")
    assert job_selection.is_managed({}, owner, {"kubernetes.io/metadata.name": "ns"}, config) is child_managed
    assert job_selection.is_managed({}, ("example.com/v1", "MPIJob"), {"kubernetes.io/metadata.name": "ns"},
                                    config), "an MPIJob of another group is no parent Kueue runs"


# --- the Workload ---------------------------------------------------------------------------------------------


def test_the_workload_name_hashes_kind_group_name_and_uid() -> None:
    digest = hashlib.sha1(f"MPIJob\nkubeflow.org\npi\n{UID}".encode()).hexdigest()[:5]
    assert mj.workload_name("pi", UID) == f"mpijob-pi-{digest}"


def test_a_launcher_then_a_worker_pod_set_of_replicas_pods_whatever_the_map_order() -> None:
    """Kueue's "no annotations" case (launcher 1, worker 3); replicas default to 1; other replica types are left
    out."""
    raw = raw_mpijob({"Worker": replica(3), "Launcher": replica(None), "Other": replica(2)})
    sets = mj.pod_sets(raw, tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("launcher", 1), ("worker", 3)]
    assert sets[1]["template"] == raw["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert all("topologyRequest" not in ps for ps in sets), "none while TopologyAwareScheduling is off"
    assert [ps["name"] for ps in mj.pod_sets(raw_mpijob({"Worker": replica(2)}), tas=False)] == ["worker"]


@pytest.mark.parametrize("annotation", [REQUIRED, PREFERRED])
def test_under_tas_each_pod_set_asks_for_its_templates_topology_ranked_by_replica_index(annotation: str) -> None:
    """Kueue's "with required/preferred topology annotation" cases; without annotations the rank label alone, as
    its reconciler cases (TAS on by default) show."""
    raw = raw_mpijob({"Launcher": replica(1, {annotation: "cloud.com/block"}),
                      "Worker": replica(3, {annotation: "cloud.com/block"})})
    key = "required" if annotation == REQUIRED else "preferred"
    for ps in mj.pod_sets(raw, tas=True):
        assert ps["topologyRequest"] == {key: "cloud.com/block", "podIndexLabel": "training.kubeflow.org/replica-index"}
    plain = mj.pod_sets(raw_mpijob({"Launcher": replica(1), "Worker": replica(2)}), tas=True)
    assert [ps["topologyRequest"] for ps in plain] == [{"podIndexLabel": "training.kubeflow.org/replica-index"}] * 2


def test_the_workload_is_owned_queued_and_finalized() -> None:
    raw = raw_mpijob({"Launcher": replica(1), "Worker": replica(2)})
    body = mj.workload_for(ClusterState(), NO_KEYS, raw, "wl")
    meta, spec = body["metadata"], body["spec"]
    assert meta["ownerReferences"] == [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi",
                                        "uid": UID, "controller": True, "blockOwnerDeletion": True}]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": UID}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert spec["queueName"] == "lq" and "priority" not in spec
    assert [(ps["name"], ps["count"]) for ps in spec["podSets"]] == [("launcher", 1), ("worker", 2)]


@pytest.mark.parametrize(("scheduling", "launcher", "worker", "want"), [
    ("", "", "", None),
    ("scheduling-priority", "launcher-priority", "worker-priority", "scheduling-priority"),
    ("", "launcher-priority", "worker-priority", "launcher-priority"),
    ("", "", "worker-priority", "worker-priority"),
])
def test_the_priority_class_is_the_run_policys_then_the_launchers_then_the_workers(
        scheduling: str, launcher: str, worker: str, want: str | None) -> None:
    """Kueue's ``TestCalcPriorityClassName`` cases."""
    raw = raw_mpijob({"Launcher": replica(1, priority_class=launcher), "Worker": replica(2, priority_class=worker)},
                     scheduling_priority=scheduling)
    assert mj.priority_class(view(raw)) == want
    assert mj.priority_class(view(raw_mpijob({"Worker": replica(2, priority_class="w")}))) == "w"


def test_suspended_is_the_run_policys_suspend_absent_meaning_running() -> None:
    specs = {"Launcher": replica(1), "Worker": replica(1)}
    assert view(raw_mpijob(specs, suspend=True)).spec.suspend
    assert not view(raw_mpijob(specs, suspend=False)).spec.suspend
    assert not view(raw_mpijob(specs, suspend=None)).spec.suspend


# --- starting and stopping ------------------------------------------------------------------------------------


def _admitted(*names: str) -> SimpleNamespace:
    """Enough of a WorkloadInfo for :func:`connectors.k8s.mpijob.start_infos` to look its assignments up."""
    return SimpleNamespace(admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "on-demand"}, count=1) for n in names]), check_states={})


def test_start_merges_each_pod_sets_info_into_its_replicas_template_and_unsuspends() -> None:
    raw = raw_mpijob({"Worker": replica(2, node_selector={"zone": "a"}), "Launcher": replica(1)})
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "l"}, labels={"x": "1"}),
             podsetinfo.PodSetInfo(node_selector={"pool": "w"})]
    patch = mj.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"} and patch["spec"]["runPolicy"] == {"suspend": False}
    specs = patch["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["template"]["spec"]["nodeSelector"] == {"pool": "l"}
    assert specs["Launcher"]["template"]["metadata"]["labels"] == {"x": "1"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] == {"zone": "a", "pool": "w"}


def test_start_fails_when_the_admission_lacks_a_replicas_pod_set() -> None:
    job = view(raw_mpijob({"Launcher": replica(1), "Worker": replica(2)}))
    with pytest.raises(mj.BadPodSets, match="expecting 2 podset, got 1"):
        mj.start_infos(ClusterState(), _admitted("launcher"), job)
    with pytest.raises(mj.BadPodSets, match="expecting 2 podset, got 2"):
        mj.start_infos(ClusterState(), _admitted("launcher", "workers"), job)


def test_stop_suspends_and_restores_each_template_as_its_workload_recorded_it() -> None:
    """What starting added is taken away (``null`` in the merge patch), what the Workload recorded is kept."""
    raw = raw_mpijob({"Launcher": replica(1, node_selector={"pool": "l", "zone": "a"}),
                      "Worker": replica(2, node_selector={"pool": "w"})}, suspend=False)
    saved = [o.PodSet(name="launcher", count=1, template=o.PodTemplateSpec(spec=o.PodSpec(node_selector={"zone": "a"}))),
             o.PodSet(name="worker", count=2)]
    patch = mj.stop_patch(raw, saved)
    assert patch["spec"]["runPolicy"] == {"suspend": True}
    specs = patch["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["template"]["spec"]["nodeSelector"] == {"pool": None, "zone": "a"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] is None


def test_stop_writes_no_empty_metadata_into_a_template_that_has_none() -> None:
    """A merge patch that sends ``metadata: {}`` creates the map: a spec change that bumps the generation
    (a9e6c089). Only what the template had and lost is written ``null``."""
    raw = raw_mpijob({"Launcher": replica(1, node_selector={"pool": "l"}), "Worker": replica(2)},
                     suspend=False)
    for spec in raw["spec"]["mpiReplicaSpecs"].values():
        del spec["template"]["metadata"]
    patch = mj.stop_patch(raw, [o.PodSet(name="launcher", count=1), o.PodSet(name="worker", count=2)])
    specs = patch["spec"]["mpiReplicaSpecs"]
    assert "metadata" not in specs["Launcher"]["template"] and "metadata" not in specs["Worker"]["template"]
    assert specs["Launcher"]["template"]["spec"]["nodeSelector"] is None


# --- what its status says ---------------------------------------------------------------------------------------


def _with_status(**status: Any) -> mj.MPIJob:
    return view({**raw_mpijob({"Launcher": replica(1), "Worker": replica(1)}), "status": status})


def test_finished_on_a_succeeded_or_failed_condition_with_its_message() -> None:
    assert mj.finished(_with_status(conditions=[{"type": "Running", "status": "True"}])) is None
    assert mj.finished(_with_status(conditions=[{"type": "Succeeded", "status": "False"}])) is None
    assert mj.finished(_with_status(conditions=[
        {"type": "Succeeded", "status": "True", "message": "MPIJob ns/pi successfully completed."}])) == (
        "Succeeded", "MPIJob ns/pi successfully completed.")
    assert mj.finished(_with_status(conditions=[{"type": "Failed", "status": "True", "message": "boom"}])) == (
        "Failed", "boom")


def test_pods_ready_is_the_running_condition_and_active_any_replicas_active_pods() -> None:
    assert mj.pods_ready(_with_status(conditions=[{"type": "Running", "status": "True"}]))
    assert not mj.pods_ready(_with_status(conditions=[{"type": "Running", "status": "False"}]))
    assert not mj.is_active(_with_status(replicaStatuses={"Launcher": {"succeeded": 1}}))
    assert mj.is_active(_with_status(replicaStatuses={"Launcher": {}, "Worker": {"active": 2}}))
