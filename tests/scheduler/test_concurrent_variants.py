"""ConcurrentAdmission's variant controller: Kueue's names for variants and the words of its activations (the
scenarios ``concurrent-admission-*`` run the whole family through the scheduler)."""

from __future__ import annotations

import yaml

from events import schema as ev
from events.manifests import load_text
from kueue_es.scheduler import settle
from kueue_es.scheduler.variants import variant_name
from kueue_es.statefile import load_state
from projections import snapshot


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
