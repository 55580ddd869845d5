"""MultiKueue on a manager, driven by events as the connector appends them: the decisions of
:mod:`kueue_es.scheduler.multikueue` through the whole flow, the state a snapshot keeps of it, and the rules that
the timeline scenarios (``scenarios/multikueue-*.yaml``) do not show on their own."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from fixtures import fastyaml
from fixtures.multikueue_states import LWS, LWS_UID, MK_CONFIG, lws_state, lws_workload

from events import objects as o
from events import schema as ev
from events.manifests import load_text
from kueue_es.scheduler import decide, next_deadline, settle
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.multikueue import adapters_in_force, components, group_touched, unmanaged_reason
from kueue_es.statefile import load_state
from projections import snapshot
from projections.workloads import status_of

SCENARIO = Path(__file__).parent / "scenarios" / "multikueue-dispatch.yaml"
START = 1_704_067_200_000
KEY = "default/job-a"


def _state(tmp_path: Path):
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    return load_state(str(path), None, START).state


def _apply(state, *events) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _remote(t: int, cluster: str, **conditions: str) -> ev.RemoteWorkloadObserved:
    return ev.RemoteWorkloadObserved(time=t, key=KEY, cluster=cluster, conditions=[
        o.Condition(type=k, status=v, reason=k, last_transition_time="2024-01-01T00:00:00Z")
        for k, v in sorted(conditions.items())])


def test_nothing_is_nominated_on_a_worker_not_reached(tmp_path: Path) -> None:
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker2", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker1", connected=False, reason="BadConfig",
                                        message="no kubeconfig"))
    settle(state, MK_CONFIG, now=START)
    assert status_of(state.workloads[KEY])["nominatedClusterNames"] == ["worker2"]
    _apply(state, ev.MultiKueueClusterObserved(time=START + 1000, key="worker1", connected=True))
    batch = decide(state, MK_CONFIG, now=START + 1000)
    assert [type(d).__name__ for d in batch] == ["ClustersNominated"]
    _apply(state, *batch)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")


def test_a_copy_admitted_on_an_unreachable_worker_wins_nothing(tmp_path: Path) -> None:
    """Kueue reads only the workers it has a client for: what was last seen of a worker now lost is not read."""
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START + 1000, "worker1", Admitted="True"),
           ev.MultiKueueClusterObserved(time=START + 1000, key="worker1", connected=False))
    settle(state, MK_CONFIG, now=START + 1000)
    wl = state.workloads[KEY]
    assert wl.cluster_name == "" and wl.check_states["mk"].state == "Pending"


def test_a_snapshot_keeps_what_multikueue_knows(tmp_path: Path) -> None:
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker2", connected=False, reason="ClientConnectionFailed",
                                        message="refused"))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START + 1000, "worker1", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 1000)
    restored = snapshot.decode(snapshot.encode(state))
    assert snapshot.digest(restored) == snapshot.digest(state)
    assert restored.cluster_links == state.cluster_links
    wl = restored.workloads[KEY]
    assert (wl.cluster_name, wl.owner) == ("worker1", ("batch/v1", "Job", "a"))
    assert set(wl.remotes) == {"worker1"}
    assert sorted(restored.multikueue_clusters) == ["worker1", "worker2"]
    assert next_deadline(restored, MK_CONFIG) == next_deadline(state, MK_CONFIG)


def test_the_job_must_be_handed_to_multikueue(tmp_path: Path) -> None:
    state = _state(tmp_path)
    wl = state.workloads[KEY]
    assert unmanaged_reason(state, wl) is None
    job = load_text(fastyaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job",
                                    "metadata": {"name": "a", "namespace": "default", "uid": "job-a-uid"},
                                    "spec": {"managedBy": "example.com/other"}}), "job").objects[0]
    _apply(state, ev.ObjectUpserted(time=START, key=job.key, obj=job))
    assert unmanaged_reason(state, wl) == ('The owner is not managed by Kueue: Expecting spec.managedBy to be '
                                           '"kueue.x-k8s.io/multikueue" not "example.com/other"')


def _jobset_state(tmp_path: Path):
    """The dispatch scenario's workload, owned by a JobSet (an owner the log does not hold)."""
    return _owned_state(tmp_path, "jobset.x-k8s.io/v1alpha2", "JobSet")


def _owned_state(tmp_path: Path, api_version: str, kind: str):
    """The dispatch scenario's workload, owned by an object of kind ``kind``."""
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    for obj in objects:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            ref.update(apiVersion=api_version, kind=kind)
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    return load_state(str(path), None, START).state


def test_a_jobset_has_an_adapter_and_waits_for_its_managed_by(tmp_path: Path) -> None:
    """Kueue's JobSet adapter reads the JobSet's managedBy: until the connector observed it nothing is decided on
    it (Kueue's read retries); handed to MultiKueue, the JobSet is dispatched as a Job is."""
    state = _jobset_state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    wl = state.workloads[KEY]
    assert wl.owner == ("jobset.x-k8s.io/v1alpha2", "JobSet", "a")
    assert unmanaged_reason(state, wl) is None
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].reserving and not state.workloads[KEY].nominated
    _apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by="kueue.x-k8s.io/multikueue"))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].nominated == ("worker1",)
    assert state.workloads[KEY].check_states["mk"].state == "Pending"


def test_a_pod_has_an_adapter_that_takes_it_as_multikueues_without_reading_it(tmp_path: Path) -> None:
    """Kueue's Pod adapter (the ``pod`` framework): a Pod has no managedBy, so its workload is dispatched as a Job's
    is, no OwnerObserved awaited."""
    state = _owned_state(tmp_path, "v1", "Pod")
    wl = state.workloads[KEY]
    assert unmanaged_reason(state, wl) is None
    assert unmanaged_reason(state, wl, adapters_in_force(MK_CONFIG)) is None
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    settle(state, MK_CONFIG, now=START)
    assert wl.owner_managed_by is None and wl.nominated == ("worker1",)
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="True", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 1000)
    assert (wl.cluster_name, wl.check_states["mk"].state) == ("worker1", "Ready")


def test_a_pods_adapter_is_built_only_with_the_pod_framework(tmp_path: Path) -> None:
    state = _owned_state(tmp_path, "v1", "Pod")
    without_pods = load_config({"integrations": {"frameworks": ["batch/job"]}})
    assert unmanaged_reason(state, state.workloads[KEY], adapters_in_force(without_pods)) == (
        'No multikueue adapter found for owner kind "/v1, Kind=Pod"')


def _rejected_while_pending(state) -> None:
    """Rejected before it reserved (Kueue checks the owner before quota): nothing nominated, no quota taken, and not
    deactivated (Kueue's workload controller deactivates for a Rejected check only a workload holding quota)."""
    wl = state.workloads[KEY]
    assert not wl.reserving and wl.active and not wl.nominated


def test_a_jobset_not_handed_to_multikueue_is_rejected(tmp_path: Path) -> None:
    state = _jobset_state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.OwnerObserved(time=START, key=KEY, managed_by=""))
    decided = []
    for _ in range(5):
        batch = decide(state, MK_CONFIG, now=START)
        decided += batch
        _apply(state, *batch)
    assert [(type(d).__name__, d.state, d.message) for d in decided if isinstance(d, ev.AdmissionCheckUpdated)] == [
        ("AdmissionCheckUpdated", "Rejected", 'The owner is not managed by Kueue: Expecting spec.managedBy to be '
                                              '"kueue.x-k8s.io/multikueue" not ""')]
    _rejected_while_pending(state)


def test_a_jobset_read_only_once_it_holds_quota_is_rejected_and_deactivated(tmp_path: Path) -> None:
    """The race Kueue has too: the scheduler reserved before the owner was read. The rejection then deactivates
    the workload, which gives its quota back (Kueue's workload controller, for a workload holding quota)."""
    state = _jobset_state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].reserving, "undecided while its owner is not read: the cycle reserves"
    _apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by=""))
    settle(state, MK_CONFIG, now=START)
    wl = state.workloads[KEY]
    assert (wl.active, wl.reserving, wl.evicted) == (False, False, "DeactivatedDueToAdmissionCheck")
    assert wl.check_states["mk"].state == "Rejected", "reset to Pending by the eviction, then rejected again"


def test_a_snapshot_keeps_a_jobsets_managed_by(tmp_path: Path) -> None:
    state = _jobset_state(tmp_path)
    _apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by="example.com/other"))
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.workloads[KEY].owner_managed_by == "example.com/other"
    assert snapshot.digest(restored) == snapshot.digest(state)


def test_an_owner_kind_without_an_adapter_is_rejected_naming_it(tmp_path: Path) -> None:
    state = _jobset_state(tmp_path)
    state.workloads[KEY].owner = ("kubeflow.org/v1", "MXJob", "a")
    assert unmanaged_reason(state, state.workloads[KEY]) == (
        'No multikueue adapter found for owner kind "kubeflow.org/v1, Kind=MXJob"')


def test_an_eviction_forgets_the_copies_so_a_new_reservation_waits_for_a_new_admission(tmp_path: Path) -> None:
    """Evicted on the manager, the workload's copies are deleted (Kueue removes the remote objects): what was
    observed of them no longer speaks for the workload, or its next reservation would be admitted at once on the
    strength of the copy being deleted."""
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="True", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 1000)
    wl = state.workloads[KEY]
    assert (wl.cluster_name, wl.check_states["mk"].state) == ("worker1", "Ready")
    _apply(state, ev.WorkloadEvicted(time=START + 2000, cycle=90, input=0, key=KEY, uid=wl.uid,
                                     reason="AdmissionCheck", message="evicted on the manager"),
           ev.JobStopped(time=START + 2000, key=KEY))
    assert not wl.remotes  # no copy speaks for it
    settle(state, MK_CONFIG, now=START + 3000)
    assert wl.reserving and wl.cluster_name == "" and wl.check_states["mk"].state == "Pending"
    assert wl.nominated == ("worker1",)


def test_a_workload_finished_on_its_worker_is_counted_as_finished(tmp_path: Path) -> None:
    """RemoteWorkloadFinished finishes the workload as WorkloadFinished does: Kueue's finished-workloads counter
    counts it (the audit trail's Finished line: tests/projections/test_proj_audit.py)."""
    from projections.metrics import FINISHED_TOTAL

    state = _state(tmp_path)
    records: list[ev.Record] = []

    def apply(*events: ev.AnyEvent) -> None:
        for e in events:
            r = ev.Record(state.offset + 1, e)
            state.apply(r)
            records.append(r)

    apply(ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    for t in (START, START + 1000, START + 2000):
        if t == START + 1000:
            apply(_remote(t, "worker1", QuotaReserved="True", Admitted="True"))
        if t == START + 2000:
            apply(_remote(t, "worker1", Admitted="True", Finished="True"))
        for _ in range(4):
            batch = decide(state, MK_CONFIG, now=t)
            if not batch:
                break
            apply(*batch)
    assert state.workloads[KEY].phase == "Finished"
    assert any(isinstance(r.event, ev.RemoteWorkloadFinished) for r in records)
    assert sum(state.metrics.counters[FINISHED_TOTAL.name].values()) == 1


OBSERVED_OWNERS = [("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayService"),
                   ("workload.codeflare.dev/v1beta2", "AppWrapper"), ("trainer.kubeflow.org/v1alpha1", "TrainJob")]
"""Kinds whose MultiKueue adapter (Kueue's ``rayjob``, ``raycluster``, ``rayservice``, ``appwrapper``, ``trainjob``
ones) reads the owner's ``spec.managedBy``, which the log does not hold, as the connector observed it."""


def _owned_state(tmp_path: Path, api_version: str, kind: str):
    """The dispatch scenario's workload, owned by an object of ``kind`` (one the log does not hold)."""
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    for obj in objects:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            ref.update(apiVersion=api_version, kind=kind)
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    return load_state(str(path), None, START).state


@pytest.mark.parametrize(("api_version", "kind"), OBSERVED_OWNERS)
def test_an_observed_owner_kind_has_an_adapter_and_waits_for_its_managed_by(tmp_path: Path, api_version: str,
                                                                            kind: str) -> None:
    """Nothing is decided on the workload until its owner's managedBy is observed (Kueue's adapter reads it first);
    handed to MultiKueue, it is dispatched as a Job is."""
    state = _owned_state(tmp_path, api_version, kind)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    wl = state.workloads[KEY]
    assert wl.owner == (api_version, kind, "a")
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].reserving and not state.workloads[KEY].nominated
    _apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by="kueue.x-k8s.io/multikueue"))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].nominated == ("worker1",)
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="True", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 1000)
    wl = state.workloads[KEY]
    assert (wl.cluster_name, wl.check_states["mk"].state) == ("worker1", "Ready")


@pytest.mark.parametrize(("api_version", "kind"), OBSERVED_OWNERS)
@pytest.mark.parametrize("managed_by", ["", "ray.io/kuberay-operator", "trainer.kubeflow.org/trainjob-controller"])
def test_an_observed_owner_not_handed_to_multikueue_is_rejected(tmp_path: Path, api_version: str, kind: str,
                                                                managed_by: str) -> None:
    state = _owned_state(tmp_path, api_version, kind)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.OwnerObserved(time=START, key=KEY, managed_by=managed_by))
    decided = []
    for _ in range(5):
        batch = decide(state, MK_CONFIG, now=START)
        decided += batch
        _apply(state, *batch)
    assert [(d.state, d.message) for d in decided if isinstance(d, ev.AdmissionCheckUpdated)] == [
        ("Rejected", 'The owner is not managed by Kueue: Expecting spec.managedBy to be '
                     f'"kueue.x-k8s.io/multikueue" not "{managed_by}"')]
    _rejected_while_pending(state)


def _replicas(state, count: int, *indexes: int | str) -> None:
    _apply(state, *(ev.OwnerObserved(time=START, key=f"default/lws-{i}", replicas=count) for i in indexes))


def test_a_leaderworkerset_has_an_adapter_that_reads_no_managed_by(tmp_path: Path) -> None:
    """Kueue's LWS adapter takes every LeaderWorkerSet as MultiKueue's (it has no managedBy): no rejection, no
    read of one to wait for."""
    state = lws_state(tmp_path, 0)
    wl = state.workloads["default/lws-0"]
    assert (wl.owner, wl.component_index) == (LWS, 0)
    assert unmanaged_reason(state, wl) is None
    _replicas(state, 1, 0)
    settle(state, MK_CONFIG, now=START)
    wl = state.workloads["default/lws-0"]
    assert wl.nominated == ("worker1", "worker2") and wl.check_states["mk"].state == "Pending"


def test_a_leaderworksets_groups_are_nominated_once_all_exist_the_lowest_index_first(tmp_path: Path) -> None:
    """Kueue's MultiKueue controller waits for every Workload the set makes (its replicas, read of the set) before
    nominating any; then the lowest-indexed one is nominated, and the others wait for it."""
    state = lws_state(tmp_path, 0, 1)
    settle(state, MK_CONFIG, now=START)
    assert [state.workloads[f"default/lws-{i}"].nominated for i in (0, 1)] == [(), ()], "replicas not read yet"
    _replicas(state, 3, 0, 1)
    settle(state, MK_CONFIG, now=START)
    assert [state.workloads[f"default/lws-{i}"].nominated for i in (0, 1)] == [(), ()], "group 2 is missing"
    _replicas(state, 2, 0, 1)
    settle(state, MK_CONFIG, now=START)
    assert state.workloads["default/lws-0"].nominated == ("worker1", "worker2")
    assert state.workloads["default/lws-1"].nominated == ()


def test_a_leaderworksets_other_groups_follow_the_worker_the_first_was_admitted_on(tmp_path: Path) -> None:
    state = lws_state(tmp_path, 0, 1, 2)
    _replicas(state, 3, 0, 1, 2)
    settle(state, MK_CONFIG, now=START)
    _apply(state, ev.RemoteWorkloadObserved(time=START + 1000, key="default/lws-0", cluster="worker2", conditions=[
        o.Condition(type="Admitted", status="True", reason="Admitted", last_transition_time="2024-01-01T00:00:01Z")]))
    settle(state, MK_CONFIG, now=START + 1000)
    wls = [state.workloads[f"default/lws-{i}"] for i in (0, 1, 2)]
    assert (wls[0].cluster_name, wls[0].check_states["mk"].state) == ("worker2", "Ready")
    assert [wl.nominated for wl in wls[1:]] == [("worker2",), ("worker2",)]


def _earlier_sets(index: int, uid: str = "earlier-lws-uid") -> o.Workload:
    """Group ``index``'s Workload of an earlier LeaderWorkerSet of the same name (another UID), not yet gone."""
    doc = lws_workload(index)
    doc["metadata"]["name"] = f"earlier-{index}"
    doc["metadata"]["ownerReferences"][0]["uid"] = uid
    return load_text(fastyaml.safe_dump(doc), "workload").objects[0]


def test_a_groups_workloads_are_its_sets_by_uid_not_by_name(tmp_path: Path) -> None:
    """Kueue lists a group's Workloads by their owner's UID: the Workload an earlier set of the same name left is
    none of the group's, so the new set's group still waits for its own second Workload."""
    state = lws_state(tmp_path, 0)
    earlier = _earlier_sets(1)
    _apply(state, ev.ObjectUpserted(time=START, key=earlier.key, obj=earlier))
    assert (state.workloads["default/lws-0"].owner_uid, state.workloads[earlier.key].owner_uid) == (
        LWS_UID, "earlier-lws-uid")
    _replicas(state, 2, 0)
    settle(state, MK_CONFIG, now=START)
    assert state.workloads["default/lws-0"].nominated == (), "one of its two Workloads: the group waits"
    _apply(state, ev.ObjectUpserted(time=START, key="default/lws-1", obj=load_text(
        fastyaml.safe_dump(lws_workload(1)), "workload").objects[0]))
    _replicas(state, 2, 1)
    settle(state, MK_CONFIG, now=START)
    assert state.workloads["default/lws-0"].nominated == ("worker1", "worker2")
    assert state.workloads["default/lws-1"].nominated == ()


def _upsert(state, doc: dict) -> None:
    obj = load_text(fastyaml.safe_dump(doc), "workload").objects[0]
    _apply(state, ev.ObjectUpserted(time=START, key=obj.key, obj=obj))


def _groups(state) -> dict[str, list[str]]:
    return {uid: sorted(keys) for uid, keys in state.owner_groups.items()}


def test_a_touched_group_workload_wakes_its_sets_others_not_an_earlier_sets_of_the_same_name(tmp_path: Path) -> None:
    """The others looked at again when one of a group moves are its set's, by UID, as Kueue lists them: the
    Workloads an earlier set of the same name left (one with a component index, one without) are none of them."""
    state = lws_state(tmp_path, 0, 1)
    _apply(state, ev.ObjectUpserted(time=START, key="default/earlier-1", obj=_earlier_sets(1)))
    plain = lws_workload(2)
    plain["metadata"]["name"] = "earlier-plain"
    del plain["metadata"]["annotations"]
    plain["metadata"]["ownerReferences"][0]["uid"] = "earlier-lws-uid"
    _upsert(state, plain)
    assert _groups(state) == {LWS_UID: ["default/lws-0", "default/lws-1"],
                              "earlier-lws-uid": ["default/earlier-1", "default/earlier-plain"]}
    assert group_touched(state, {"default/lws-0": None}) == ["default/lws-1"]
    assert group_touched(state, {"default/earlier-1": None}) == ["default/earlier-plain"]
    assert group_touched(state, {"default/earlier-plain": None}) == [], "no component index: none of a group's"
    assert sorted(m.key for m in components(state, state.workloads["default/lws-1"])) == [
        "default/lws-0", "default/lws-1"]


def test_the_owner_uid_index_follows_upserts_and_deletions(tmp_path: Path) -> None:
    """A Workload of a set without the component annotations is one of the set's Workloads all the same (Kueue
    lists every Workload its owner's UID names); one adopted by another set moves to it; one deleted is gone."""
    state = lws_state(tmp_path, 0)
    plain = lws_workload(1)
    del plain["metadata"]["annotations"]
    _upsert(state, plain)
    assert _groups(state) == {LWS_UID: ["default/lws-0", "default/lws-1"]}
    _replicas(state, 2, 0)
    settle(state, MK_CONFIG, now=START)
    assert state.workloads["default/lws-0"].nominated == ("worker1", "worker2"), "both of its Workloads exist"
    adopted = lws_workload(1)
    adopted["metadata"]["ownerReferences"][0]["uid"] = "new-uid"
    _upsert(state, adopted)
    assert _groups(state) == {LWS_UID: ["default/lws-0"], "new-uid": ["default/lws-1"]}
    job_owned = lws_workload(1)
    job_owned["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j",
                                                 "controller": True}]
    _upsert(state, job_owned)
    assert _groups(state) == {LWS_UID: ["default/lws-0"]}
    assert state.workloads["default/lws-1"].owner_uid == ""
    _upsert(state, lws_workload(1))
    _apply(state, ev.ObjectDeleted(time=START, key="default/lws-0", kind="Workload"))
    assert _groups(state) == {LWS_UID: ["default/lws-1"]}


def test_a_snapshot_rebuilds_the_owner_uid_index_and_an_older_ones_unknown_uids_match_by_name(
        tmp_path: Path) -> None:
    state = lws_state(tmp_path, 0, 1)
    _apply(state, ev.ObjectUpserted(time=START, key="default/earlier-1", obj=_earlier_sets(1)))
    assert _groups(snapshot.decode(snapshot.encode(state))) == _groups(state)
    taken = snapshot.take(state)
    old = msgspec.structs.replace(taken, version=23, workloads=[
        msgspec.structs.replace(wl, owner_uid="") for wl in taken.workloads])
    restored = snapshot.restore(old)
    assert _groups(restored) == {"": ["default/earlier-1", "default/lws-0", "default/lws-1"]}
    assert group_touched(restored, {"default/lws-0": None}) == ["default/earlier-1", "default/lws-1"], "by name"
    _upsert(restored, lws_workload(0))
    assert _groups(restored) == {"": ["default/earlier-1", "default/lws-1"], LWS_UID: ["default/lws-0"]}
    assert group_touched(restored, {"default/lws-0": None}) == ["default/earlier-1", "default/lws-1"], (
        "its UID known: the others whose UID is not known still match by name")
    _apply(restored, ev.ObjectUpserted(time=START, key="default/earlier-1", obj=_earlier_sets(1)))
    assert group_touched(restored, {"default/lws-0": None}) == ["default/lws-1"]


def test_a_group_workload_whose_index_cannot_be_read_never_nominates(tmp_path: Path) -> None:
    state = lws_state(tmp_path, "x")
    assert state.workloads["default/lws-x"].component_index == -1
    _replicas(state, 1, "x")
    settle(state, MK_CONFIG, now=START)
    assert state.workloads["default/lws-x"].nominated == ()


def test_a_snapshot_keeps_a_groups_indexes_and_replicas(tmp_path: Path) -> None:
    state = lws_state(tmp_path, 0, 1)
    _replicas(state, 2, 0)
    restored = snapshot.decode(snapshot.encode(state))
    assert [(restored.workloads[f"default/lws-{i}"].component_index,
             restored.workloads[f"default/lws-{i}"].owner_replicas,
             restored.workloads[f"default/lws-{i}"].owner_uid) for i in (0, 1)] == [(0, 2, LWS_UID), (1, None, LWS_UID)]
    assert snapshot.digest(restored) == snapshot.digest(state)


def test_a_statefulset_has_an_adapter_only_with_the_statefulset_framework(tmp_path: Path) -> None:
    """Kueue's StatefulSet adapter: built with the ``statefulset`` framework, it takes every StatefulSet as
    MultiKueue's (no managedBy, nothing read); without the framework the workload's owner has no adapter."""
    state = _owned_state(tmp_path, "apps/v1", "StatefulSet")
    wl = state.workloads[KEY]
    with_sets = load_config({"integrations": {"frameworks": ["batch/job", "pod", "statefulset"]}})
    assert unmanaged_reason(state, wl, adapters_in_force(with_sets)) is None
    without = load_config({"integrations": {"frameworks": ["batch/job", "pod"]}})
    assert unmanaged_reason(state, wl, adapters_in_force(without)) == (
        'No multikueue adapter found for owner kind "apps/v1, Kind=StatefulSet"')


def test_nothing_is_decided_on_a_running_workload_while_its_check_s_config_cannot_be_read(tmp_path: Path) -> None:
    """Kueue's reconcile fails reading the MultiKueueConfig (remoteClientsForAC) and is retried: a copy finished on
    the worker is not read until the config is back, and then finishes the workload."""
    state = _state(tmp_path)
    _apply(state, *(ev.MultiKueueClusterObserved(time=START, key=w, connected=True) for w in ("worker1", "worker2")))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START, "worker1", Admitted="True"))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].cluster_name == "worker1"
    config = state.multikueue_configs["mk-config"]
    _apply(state, ev.ObjectDeleted(time=START + 1000, kind="MultiKueueConfig", key="mk-config"),
           _remote(START + 1000, "worker1", Admitted="True", Finished="True"))
    assert decide(state, MK_CONFIG, now=START + 1000) == []
    _apply(state, ev.ObjectUpserted(time=START + 2000, key="mk-config", obj=config))
    assert [type(d).__name__ for d in decide(state, MK_CONFIG, now=START + 2000)] == ["RemoteWorkloadFinished"]


SYNC_FAILED = ('Remote workload on worker cluster "worker1" is out of sync with its user job, resetting for '
               're-dispatch, Previously: "Ready"')
"""Kueue's Retry message (and Warning ``MultiKueue`` Event) for a copy finished on its worker by a sync failure
(#13047, #14997; test/integration/multikueue/jobs_test.go of the release branches)."""


def _finished_copy(t: int, reason: str, cluster: str = "worker1", **others: str) -> ev.RemoteWorkloadObserved:
    conditions = [o.Condition(type=k, status=v, reason=k, last_transition_time="2024-01-01T00:00:00Z")
                  for k, v in sorted(others.items())]
    conditions.append(o.Condition(type="Finished", status="True", reason=reason, message=f"finished {reason}",
                                  last_transition_time="2024-01-01T00:00:01Z"))
    return ev.RemoteWorkloadObserved(time=t, key=KEY, cluster=cluster, conditions=conditions)


def _running_on_worker1(tmp_path: Path, elastic: bool = False):
    """The dispatch scenario's workload admitted on worker1 (its check Ready); elastic: its Workload annotated
    ``kueue.x-k8s.io/elastic-job: "true"`` (ElasticJobsViaWorkloadSlices is on by default)."""
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    if elastic:
        wl_doc = next(d for d in objects if d["kind"] == "Workload")
        wl_doc["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    state = load_state(str(path), None, START).state
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="True", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 1000)
    wl = state.workloads[KEY]
    assert (wl.cluster_name, wl.check_states["mk"].state, wl.elastic) == ("worker1", "Ready", elastic)
    return state


@pytest.mark.parametrize("reason", ["OutOfSync", "OwnerNotFound"])
def test_a_copy_finished_by_a_sync_failure_retries_the_check_instead_of_finishing(tmp_path: Path,
                                                                                   reason: str) -> None:
    """Kueue's MultiKueue controller (#13047 OutOfSync, #14997 OwnerNotFound, both in the release branches): a copy
    finished on its worker for a reason that says the copy lost sync with its owner is no completion of the job:
    the check goes Retry (and a Warning Event is recorded), the eviction that follows resets it, and once the job
    stopped the workload is requeued, gets quota again and is dispatched anew, the finished copy forgotten."""
    state = _running_on_worker1(tmp_path)
    _apply(state, _finished_copy(START + 2000, reason, QuotaReserved="True", Admitted="True"))
    batch = decide(state, MK_CONFIG, now=START + 2000)
    assert [(type(d).__name__, getattr(d, "state", ""), getattr(d, "message", "")) for d in batch] == [
        ("AdmissionCheckUpdated", "Retry", SYNC_FAILED)]
    _apply(state, *batch)
    settle(state, MK_CONFIG, now=START + 2000)
    wl = state.workloads[KEY]
    assert wl.phase != "Finished" and wl.evicted == "AdmissionCheck" and not wl.remotes
    assert wl.check_states["mk"].state == "Pending"
    _apply(state, ev.JobStopped(time=START + 3000, key=KEY))
    settle(state, MK_CONFIG, now=START + 3000)
    assert wl.reserving and wl.cluster_name == "" and wl.nominated == ("worker1",)


@pytest.mark.parametrize("reason", ["OutOfSync", "OwnerNotFound"])
def test_a_copy_finished_by_a_sync_failure_while_the_check_is_not_ready_decides_nothing(tmp_path: Path,
                                                                                       reason: str) -> None:
    """Kueue resets the check only while it is Ready, and otherwise returns: it never finishes the workload on such a
    copy, nor goes on to the copies admitted elsewhere (the connector deletes the stale copy, which unblocks it)."""
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker2", connected=True))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _finished_copy(START + 1000, reason), _remote(START + 1000, "worker2", Admitted="True"))
    assert decide(state, MK_CONFIG, now=START + 1000) == []
    wl = state.workloads[KEY]
    assert wl.phase != "Finished" and wl.check_states["mk"].state == "Pending" and wl.cluster_name == ""


def test_an_elastic_workloads_copy_finished_out_of_sync_finishes_it_as_before(tmp_path: Path) -> None:
    """An elastic workload's slice replacement finishes copies OutOfSync: Kueue leaves them out of the reset."""
    state = _running_on_worker1(tmp_path, elastic=True)
    _apply(state, _finished_copy(START + 2000, "OutOfSync", Admitted="True"))
    batch = decide(state, MK_CONFIG, now=START + 2000)
    assert [(type(d).__name__, d.reason) for d in batch] == [("RemoteWorkloadFinished", "OutOfSync")]


@pytest.mark.parametrize("reason", ["Succeeded", "Failed"])
def test_a_copy_finished_for_any_other_reason_finishes_the_workload(tmp_path: Path, reason: str) -> None:
    state = _running_on_worker1(tmp_path)
    _apply(state, _finished_copy(START + 2000, reason, Admitted="True"))
    batch = decide(state, MK_CONFIG, now=START + 2000)
    assert [(type(d).__name__, d.reason, d.message) for d in batch] == [
        ("RemoteWorkloadFinished", reason, f"finished {reason}")]


def test_a_requeued_workload_waits_while_the_stale_copy_is_seen_and_runs_once_it_is_gone(tmp_path: Path) -> None:
    """After the Retry and the eviction the requeued workload is nominated on worker1 again, where the copy that
    finished OutOfSync may still be seen (the connector deletes it, :func:`connectors.k8s.multikueue_copies.stale`):
    nothing is decided on it meanwhile; once it is gone, a new copy admitted there runs the workload."""
    state = _running_on_worker1(tmp_path)
    _apply(state, _finished_copy(START + 2000, "OutOfSync", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 2000)
    _apply(state, ev.JobStopped(time=START + 3000, key=KEY))
    settle(state, MK_CONFIG, now=START + 3000)
    wl = state.workloads[KEY]
    assert wl.reserving and wl.nominated == ("worker1",) and wl.check_states["mk"].state == "Pending"
    _apply(state, _finished_copy(START + 4000, "OutOfSync", Admitted="True"))
    assert decide(state, MK_CONFIG, now=START + 4000) == []
    _apply(state, ev.RemoteWorkloadObserved(time=START + 5000, key=KEY, cluster="worker1", exists=False),
           _remote(START + 6000, "worker1", QuotaReserved="True", Admitted="True"))
    settle(state, MK_CONFIG, now=START + 6000)
    assert (wl.cluster_name, wl.check_states["mk"].state, wl.phase) == ("worker1", "Ready", "Admitted")


def test_a_worker_added_to_the_config_is_nominated_for_a_workload_dispatched_already(tmp_path: Path) -> None:
    """Kueue's dispatcher_test.go "should re-evaluate existing workload when worker2 is added to config": a
    MultiKueueConfig edit that adds a worker looks again at the workloads holding quota, so one nominated on the
    config's only worker is nominated on the new one too (all at once)."""
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    for obj in objects:
        if obj["kind"] == "MultiKueueConfig":
            obj["spec"]["clusters"] = ["worker1"]
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    state = load_state(str(path), None, START).state
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True),
           ev.MultiKueueClusterObserved(time=START, key="worker2", connected=True))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].nominated == ("worker1",)
    config = load_text(fastyaml.safe_dump({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
                                           "metadata": {"name": "mk-config"},
                                           "spec": {"clusters": ["worker1", "worker2"]}}), "config").objects[0]
    _apply(state, ev.ObjectUpserted(time=START + 1000, key=config.key, obj=config))
    assert [type(d).__name__ for d in decide(state, MK_CONFIG, now=START + 1000)] == ["ClustersNominated"]
    settle(state, MK_CONFIG, now=START + 1000)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")


def test_a_brief_loss_of_the_running_worker_evicts_nothing_however_old_the_check(tmp_path: Path) -> None:
    """Kueue's jobs_test.go "Should not evict admitted workloads when the connection to the admitting worker is
    briefly lost": the worker-lost timeout counts from the loss, not from when the check turned Ready, so a check
    Ready for longer than the timeout survives a worker lost and reached again at once."""
    state = _state(tmp_path)
    _apply(state, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True))
    settle(state, MK_CONFIG, now=START)
    _apply(state, _remote(START + 1000, "worker1", QuotaReserved="True", Admitted="True"),
           ev.PodsReadyChanged(time=START + 1000, key=KEY, ready=True))
    settle(state, MK_CONFIG, now=START + 1000)
    lost = START + 60 * 60 * 1000  # the check has been Ready for an hour, beyond the 15m workerLostTimeout
    _apply(state, ev.MultiKueueClusterObserved(time=lost, key="worker1", connected=False, reason="BadConfig",
                                               message="no kubeconfig"))
    assert decide(state, MK_CONFIG, now=lost) == []
    _apply(state, ev.MultiKueueClusterObserved(time=lost + 1000, key="worker1", connected=True))
    for now in (lost + 1000, lost + 16 * 60 * 1000):
        assert decide(state, MK_CONFIG, now=now) == []
    wl = state.workloads[KEY]
    assert (wl.cluster_name, wl.check_states["mk"].state, wl.reserving) == ("worker1", "Ready", True)
