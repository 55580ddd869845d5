"""ConcurrentAdmission's variant controller: Kueue's names for variants, the words of its activations, who belongs
to a family (the variant the fold made read back with its uid, parents and siblings by UID) and the parent's
PodsReady on its admitted variant (the scenarios ``concurrent-admission-*`` run the whole family through the
scheduler)."""

from __future__ import annotations

import yaml

from events import schema as ev
from events.manifests import load_text
from events.timefmt import parse_time
from kueue_es.scheduler import settle
from kueue_es.scheduler.variants import variant_name
from kueue_es.statefile import load_state
from projections import snapshot
from projections.cluster import ClusterState
from projections.variants import variants_of


def test_variant_name_is_kueues():
    # sha1("Workload\nkueue.x-k8s.io\njob-sample-8f2a1\nuid-job\nspot")[:5] == "b3786"
    assert variant_name("job-sample-8f2a1", "uid-job", "spot") == "job-sample-variant-spot-b3786"
    assert variant_name("job-sample-8f2a1", "uid-job", "on-demand") == "job-sample-variant-on-demand-2f8ae"


def test_variant_name_cut_to_leave_room_for_the_hash():
    long = "job-" + "x" * 300 + "-8f2a1"
    name = variant_name(long, "uid", "spot")
    assert name is not None and len(name) == 253 and name.startswith("job-xxx")
    short = variant_name(long, "uid", "spot", short=True)
    assert short is not None and len(short) == 63 and short[:57] == name[:57] and short[-6:] == name[-6:]


def test_no_variant_for_a_parent_name_without_a_hash_part():
    assert variant_name("job", "uid", "spot") is None


STATE = """
- {apiVersion: v1, kind: Namespace, metadata: {name: team}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: reservation}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: on-demand}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: spot}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: cq}
  spec:
    namespaceSelector: {}
    concurrentAdmissionPolicy:
      migration: {mode: TryPreferredFlavors, constraints: {lastAcceptableFlavorName: reservation}}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:
      - {name: reservation, resources: [{name: cpu, nominalQuota: 1}]}
      - {name: on-demand, resources: [{name: cpu, nominalQuota: 8}]}
      - {name: spot, resources: [{name: cpu, nominalQuota: 8}]}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq, namespace: team}, spec: {clusterQueue: cq}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {name: job-a-11111, namespace: team, uid: uid-a, creationTimestamp: "2024-01-01T00:00:00Z"}
  spec:
    queueName: lq
    podSets:
    - name: main
      count: 4
      template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""
CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {ConcurrentAdmission: true}
"""


def test_variants_below_last_acceptable_flavor_are_deactivated_with_kueues_words(tmp_path):
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([*yaml.safe_load(STATE), yaml.safe_load(CONFIG)]))
    loaded = load_state(str(path))
    state = loaded.state
    decided = [d for batch in settle(state, loaded.config, now=loaded.now) for d in batch]
    made = [(d.key, d.flavor) for d in decided if isinstance(d, ev.VariantCreated)]
    assert made == [(f"team/{variant_name('job-a-11111', 'uid-a', f)}", f) for f in ("reservation", "on-demand", "spot")]
    switched = {d.key.split("-variant-")[1][:-6]: (d.active, d.message)
                for d in decided if isinstance(d, ev.VariantActivation)}
    admitted = f"team/{variant_name('job-a-11111', 'uid-a', 'on-demand')}"
    assert switched == {"spot": (False, 'Variant Workload deactivated due to being below lastAcceptableFlavor: '
                                        f'"reservation" and another Variant admitted "{admitted}"')}
    assert state.workloads[admitted].phase == "Admitted"


def test_an_admitted_parent_holds_no_quota_and_restores_so(tmp_path):
    """The parent shows its variant's admission but is no holder of its ClusterQueue's quota (Kueue's cache counts
    no parent), and a state restored from a snapshot says the same."""
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([*yaml.safe_load(STATE), yaml.safe_load(CONFIG)]))
    loaded = load_state(str(path))
    state = loaded.state
    settle(state, loaded.config, now=loaded.now)
    parent = state.workloads["team/job-a-11111"]
    assert parent.phase == "Admitted" and parent.admission is not None and parent.usage == {}
    admitted = f"team/{variant_name('job-a-11111', 'uid-a', 'on-demand')}"
    assert list(state.reserving["cq"]) == [admitted]
    assert state.usage["cq"] == {"on-demand/cpu": 4000}
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.reserving == state.reserving and snapshot.digest(restored) == snapshot.digest(state)


def test_a_variant_whose_flavor_left_the_cluster_queue_is_deleted(tmp_path):
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all([*yaml.safe_load(STATE), yaml.safe_load(CONFIG)]))
    loaded = load_state(str(path))
    state = loaded.state
    settle(state, loaded.config, now=loaded.now)
    spot = f"team/{variant_name('job-a-11111', 'uid-a', 'spot')}"
    assert spot in state.workloads
    narrowed = yaml.safe_load(STATE)[4]
    narrowed["spec"]["resourceGroups"][0]["flavors"].pop()  # spot
    (cq,) = load_text(yaml.safe_dump(narrowed), "cq.yaml").objects
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=loaded.now + 1000, key="cq", obj=cq)))
    decided = [d for batch in settle(state, loaded.config, now=loaded.now + 1000) for d in batch]
    assert [(type(d).__name__, d.key, d.flavor) for d in decided if isinstance(d, ev.VariantDeleted)] == [
        ("VariantDeleted", spot, "spot")]
    assert spot not in state.workloads


# --- who belongs to a family: a variant the fold made is the one the watch brings back with its uid (it keeps what
# the log decided of it); a parent's variants and a variant's siblings are matched by the parent's UID, so a parent
# made again under the same name starts a family of its own; the admitted variant shows its parent's PodsReady
# (Kueue's variant controller copies it), so waitForPodsReady does not evict it for want of pods of its own.

GATES = "featureGates: {ConcurrentAdmission: true}"
PODS_READY = "waitForPodsReady: {timeout: 5m}"


def _parent(uid: str) -> dict:
    parent = yaml.safe_load(STATE)[-1]
    parent["metadata"]["uid"] = uid
    return parent


def _loaded(tmp_path, *config: str):
    """:data:`STATE` with room for one family on-demand (its 4 cpus) and no lastAcceptableFlavorName."""
    docs = yaml.safe_load(STATE)
    cq = docs[4]["spec"]
    cq["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    cq["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] = 4
    conf = yaml.safe_load("\n".join(["apiVersion: config.kueue.x-k8s.io/v1beta2", "kind: Configuration", *config]))
    path = tmp_path / "family.yaml"
    path.write_text(yaml.safe_dump_all([*docs, conf]))
    return load_state(str(path))


def _apply(state: ClusterState, event: ev.AnyEvent) -> None:
    state.apply(ev.Record(state.offset + 1, event))


def _upsert(state: ClusterState, doc: dict, at: int) -> None:
    (obj,) = load_text(yaml.safe_dump(doc), "obj.yaml").objects
    _apply(state, ev.ObjectUpserted(time=at, key=obj.key, obj=obj))


def _decided(state: ClusterState, loaded, now: int) -> list[ev.Decision]:
    return [d for batch in settle(state, loaded.config, now=now) for d in batch]


def _variant(parent_uid: str, flavor: str) -> str:
    return f"team/{variant_name('job-a-11111', parent_uid, flavor)}"


def _read_back(key: str, uid: str, parent_uid: str, flavor: str) -> dict:
    """The variant as the apiserver holds it once the connector created it: its uid, the parent's spec with the
    concurrent-admission gate, and no status (the apiserver drops a create's; the status write is still to land)."""
    parent = _parent(parent_uid)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": key.split("/", 1)[1], "namespace": "team", "uid": uid,
                     "creationTimestamp": "2024-01-01T00:00:01Z",
                     "annotations": {"kueue.x-k8s.io/workload-allowed-resource-flavors": flavor},
                     "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                          "name": "job-a-11111", "uid": parent_uid, "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {**parent["spec"], "preemptionGates": [{"name": "kueue.x-k8s.io/concurrent-admission"}]},
    }


def test_a_variant_read_back_with_its_uid_keeps_what_the_log_decided(tmp_path):
    loaded = _loaded(tmp_path, GATES)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    key = _variant("uid-a", "on-demand")
    made = state.workloads[key]
    assert made.uid == "" and made.phase == "Admitted"
    before = (made.conditions, made.admission, made.gate_states, made.usage)
    _upsert(state, _read_back(key, "uid-on-demand", "uid-a", "on-demand"), loaded.now + 1000)
    wl = state.workloads[key]
    assert wl.uid == "uid-on-demand", "the variant takes the uid the apiserver gave it"
    assert (wl.phase, (wl.conditions, wl.admission, wl.gate_states, wl.usage)) == ("Admitted", before), (
        "its conditions and admission stay: the status write that shows them is still to be made")
    assert list(state.reserving["cq"]) == [key] and state.usage["cq"] == {"on-demand/cpu": 4000}
    again = _decided(state, loaded, loaded.now + 2000)
    assert not [d for d in again if d.key == key], "nothing is decided anew for it"
    restored = snapshot.decode(snapshot.encode(state))
    assert snapshot.digest(restored) == snapshot.digest(state)
    assert [v.key for v in variants_of(restored, restored.workloads["team/job-a-11111"])] == [
        v.key for v in variants_of(state, state.workloads["team/job-a-11111"])]


def test_a_variant_of_another_parent_is_not_adopted(tmp_path):
    """A Workload of the fold-made variant's name owned by another UID is another object: taken as it shows."""
    loaded = _loaded(tmp_path, GATES)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    key = _variant("uid-a", "on-demand")
    _upsert(state, _read_back(key, "uid-x", "uid-other", "on-demand"), loaded.now + 1000)
    wl = state.workloads[key]
    assert (wl.uid, wl.owner_uid, wl.phase, wl.admission) == ("uid-x", "uid-other", "Pending", None)


def test_a_parent_made_again_under_its_name_has_a_family_of_its_own(tmp_path):
    """The old parent's variants (not yet collected) are neither the new parent's nor its variants' siblings: the
    new one gets variants of its own, and its spot variant is admitted though the old on-demand one, more
    favorable, is."""
    loaded = _loaded(tmp_path, GATES)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    old_on_demand = _variant("uid-a", "on-demand")
    assert state.workloads[old_on_demand].phase == "Admitted"
    now = loaded.now + 10_000
    _apply(state, ev.ObjectDeleted(time=now, key="team/job-a-11111", kind="Workload", uid="uid-a"))
    _upsert(state, _parent("uid-b"), now)
    decided = _decided(state, loaded, now)
    made = sorted(d.flavor for d in decided if isinstance(d, ev.VariantCreated))
    assert made == ["on-demand", "reservation", "spot"], "the old parent's variants are not the new one's"
    spot = state.workloads[_variant("uid-b", "spot")]
    assert spot.phase == "Admitted", f"not passed over for the old family's variant: {spot.conditions}"
    parent = state.workloads["team/job-a-11111"]
    assert parent.phase == "Admitted" and parent.admission is not None
    assert [v.key for v in variants_of(state, parent)] == sorted(
        _variant("uid-b", f) for f in ("reservation", "on-demand", "spot"))
    assert state.workloads[old_on_demand].phase == "Admitted", "the old family is left alone"


def test_the_admitted_variant_shows_its_parents_pods_ready(tmp_path):
    """waitForPodsReady: the parent's pods (its Job's) are reported on the parent; the controller copies its
    PodsReady onto the admitted variant, which is then not evicted when the timeout runs out."""
    loaded = _loaded(tmp_path, GATES, PODS_READY)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    key = _variant("uid-a", "on-demand")
    parent = state.workloads["team/job-a-11111"]
    assert state.workloads[key].phase == "Admitted" and parent.phase == "Admitted"
    ready_at = loaded.now + 60_000
    _apply(state, ev.PodsReadyChanged(time=ready_at, key=parent.key, ready=True))
    copied = [d for d in _decided(state, loaded, ready_at + 1000) if isinstance(d, ev.VariantPodsReadySynced)]
    theirs = parent.condition("PodsReady")
    assert theirs is not None and theirs.status == "True"
    assert [(d.key, d.status, d.reason, d.message) for d in copied] == [
        (key, True, theirs.reason, theirs.message)]
    mine = state.workloads[key].condition("PodsReady")
    assert mine is not None and (mine.status, mine.reason, mine.message) == (
        theirs.status, theirs.reason, theirs.message)
    assert parse_time(mine.last_transition_time) == ready_at, "dated as the parent's"
    assert state.workloads[key].pods_ready
    late = _decided(state, loaded, loaded.now + 10 * 60_000)
    assert not [d for d in late if d.key == key], "no PodsReadyTimeout for the variant running the parent's pods"
    assert state.workloads[key].phase == "Admitted"


def test_the_variant_takes_its_parents_pods_ready_with_the_parents_generation(tmp_path):
    """Kueue's variant controller sets the parent's PodsReady condition itself on the variant
    (``SetStatusCondition``), its observedGeneration included: the parent's, not the variant's."""
    loaded = _loaded(tmp_path, GATES, PODS_READY)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    parent_doc = _parent_doc()
    parent_doc["metadata"]["generation"] = 3
    _upsert(state, parent_doc, loaded.now + 1000)
    key = _variant("uid-a", "on-demand")
    assert state.workloads[key].generation != 3
    _apply(state, ev.PodsReadyChanged(time=loaded.now + 60_000, key="team/job-a-11111", ready=True))
    _decided(state, loaded, loaded.now + 61_000)
    assert state.workloads["team/job-a-11111"].condition("PodsReady").observed_generation == 3
    assert state.workloads[key].condition("PodsReady").observed_generation == 3


def test_a_parent_evicted_by_the_variant_controller_shows_the_condition_alone(tmp_path):
    """Kueue's variant controller evicts a parent by setting its Evicted condition alone (``SetEvictedCondition``:
    "No variant is running" once its admitted variant's flavor left the ClusterQueue, "Admitted variant was
    evicted" when that variant is evicted), not through Kueue's eviction helper: the parent's
    ``schedulingStats.evictions`` gains no entry, ``evicted_workloads_total`` counts nothing, and its other
    status (admission checks, preemption gates) is left as it was."""
    loaded = _loaded(tmp_path, GATES)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    parent = state.workloads["team/job-a-11111"]
    assert parent.phase == "Admitted"
    narrowed = yaml.safe_load(STATE)[4]
    narrowed["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    del narrowed["spec"]["resourceGroups"][0]["flavors"][1]  # on-demand, the admitted variant's
    _upsert(state, narrowed, loaded.now + 1000)
    decided = _decided(state, loaded, loaded.now + 1000)
    evicted = [(d.reason, d.message) for d in decided if isinstance(d, ev.WorkloadEvicted) and d.key == parent.key]
    assert evicted == [("ConcurrentAdmission", "No variant is running")]
    evicted_cond = parent.condition("Evicted")
    assert evicted_cond is not None and (evicted_cond.status, evicted_cond.reason) == ("True", "ConcurrentAdmission")
    assert parent.evictions == (), "no schedulingStats entry: Kueue's controller does not count this eviction"
    counted = state.metrics.counters["kueue_evicted_workloads_total"]
    assert not [k for k in counted if k[1] == "ConcurrentAdmission"], counted


# --- the workload controller's rules for a workload holding quota apply to an admitted parent too: Kueue's
# Reconcile keys them on the quota reservation the parent shows (only the admission checks' skip a parent), so a
# deactivated parent is evicted (Deactivated) and its maximum execution time deactivates it, which stops the family.


def _parent_doc(**spec) -> dict:
    doc = _parent("uid-a")
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/concurrent-admission-parent": "true"}
    doc["spec"].update(spec)
    return doc


def test_a_deactivated_parent_is_evicted_as_deactivated(tmp_path):
    loaded = _loaded(tmp_path, GATES)
    state = loaded.state
    _decided(state, loaded, loaded.now)
    assert state.workloads["team/job-a-11111"].phase == "Admitted"
    _upsert(state, _parent_doc(active=False), loaded.now + 1000)
    decided = _decided(state, loaded, loaded.now + 1000)
    parent_evictions = [(type(d).__name__, d.reason, d.message) for d in decided
                        if isinstance(d, (ev.WorkloadEvicted, ev.WorkloadDeactivated)) and d.key == "team/job-a-11111"]
    assert parent_evictions == [("WorkloadDeactivated", "Deactivated", "The workload is deactivated")]
    assert all(not v.active for v in variants_of(state, state.workloads["team/job-a-11111"]))


def test_a_parents_maximum_execution_time_deactivates_it_and_its_family_stays_stopped(tmp_path):
    path = tmp_path / "state.yaml"
    docs = yaml.safe_load(STATE)
    docs[4]["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    docs[4]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] = 4
    docs[-1]["spec"]["maximumExecutionTimeSeconds"] = 60
    path.write_text(yaml.safe_dump_all([*docs, yaml.safe_load(CONFIG)]))
    loaded = load_state(str(path))
    state = loaded.state
    _decided(state, loaded, loaded.now)
    parent = state.workloads["team/job-a-11111"]
    assert parent.phase == "Admitted"
    decided = []
    for minute in range(1, 6):
        decided += _decided(state, loaded, loaded.now + minute * 61_000)
    ran_out = [(d.key, d.reason) for d in decided
               if isinstance(d, ev.WorkloadDeactivated) and d.reason.endswith("MaximumExecutionTimeExceeded")]
    assert ("team/job-a-11111", "DeactivatedDueToMaximumExecutionTimeExceeded") in ran_out, ran_out
    assert not parent.active and parent.phase == "Pending"
    readmitted = [d.key for d in decided if isinstance(d, (ev.QuotaReserved, ev.ParentAdmitted))]
    assert readmitted == [], "the family is not admitted again once its parent ran out of time"
