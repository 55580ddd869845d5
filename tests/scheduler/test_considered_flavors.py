"""The flavors a reservation considered but did not simply fit on (Kueue's ``FlavorAssignmentAttempts``,
#7646, with #8024's ``preemptionMode``), carried on the ``QuotaReserved`` decision for its Event's
"; Flavors considered: ..." suffix: per pod set ``<pod set>: <flavor>(<mode or preemptionMode=...>
[;borrow=N][;reason;...])``, its flavors in name order, pod sets joined by " | "; a flavor that fit without
borrowing, and a pod set left with nothing, are left out. Expected strings follow Kueue's
``scheduler_test.go`` and its release notes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from fixtures import fastyaml

from events import schema as ev
from events.manifests import load_text
from events.message_limits import truncate_message
from events.timefmt import parse_time
from kueue_es.scheduler import decide
from kueue_es.scheduler.config import DEFAULT
from kueue_es.scheduler.considered import considered_flavors
from kueue_es.scheduler.flavors import Assignment, Granular, Mode, PodSetResult
from kueue_es.verify import verify
from projections.cluster import ClusterState

T = parse_time("2024-01-01T00:01:00Z")
BASE = """
- {apiVersion: v1, kind: Namespace, metadata: {name: team}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq, namespace: team},
   spec: {clusterQueue: cq}}
"""


def _flavors(*names: str, topology: tuple[str, ...] = ()) -> str:
    """ResourceFlavors, those in ``topology`` TAS flavors of the Topology ``hosts`` (one level: the node)."""
    out = ["""
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Topology
  metadata: {name: hosts}
  spec: {levels: [{nodeLabel: kubernetes.io/hostname}]}"""] if topology else []
    for n in names:
        spec = ", spec: {topologyName: hosts, nodeLabels: {pool: tas}}" if n in topology else ""
        out.append(f"- {{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, "
                   f"metadata: {{name: {n}}}{spec}}}")
    return "\n".join(out) + "\n"


def _cluster_queue(name: str, quotas: dict[str, int], spec: str = "") -> str:
    """A ClusterQueue of one resource group covering cpu, ``quotas`` its flavors' nominal quotas in order."""
    flavors = "".join(f"\n      - {{name: {f}, resources: [{{name: cpu, nominalQuota: {q}}}]}}"
                      for f, q in quotas.items())
    return f"""
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {{name: {name}}}
  spec:
    namespaceSelector: {{}}{spec}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:{flavors}
"""


def _workload(name: str, cpu: str = "1", *, pod_sets: dict[str, int] | None = None, priority: int = 0,
              admitted_on: str = "") -> str:
    """A Workload in ``lq`` whose pods ask for ``cpu``; ``pod_sets``: name -> count (default: ``main``: 1)."""
    sets = ", ".join(f'{{name: {p}, count: {n}, template: {{spec: {{containers: [{{name: c, resources: '
                     f'{{requests: {{cpu: "{cpu}"}}}}}}]}}}}}}'
                     for p, n in (pod_sets or {"main": 1}).items())
    status = ""
    if admitted_on:
        status = f"""
  status:
    admission: {{clusterQueue: cq, podSetAssignments: [{{name: main, flavors: {{cpu: {admitted_on}}},
                 resourceUsage: {{cpu: "{cpu}"}}, count: 1}}]}}
    conditions:
    - {{type: QuotaReserved, status: "True", reason: QuotaReserved,
       message: Quota reserved in ClusterQueue cq, lastTransitionTime: "2024-01-01T00:00:00Z"}}
    - {{type: Admitted, status: "True", reason: Admitted, message: The workload is admitted,
       lastTransitionTime: "2024-01-01T00:00:00Z"}}"""
    return f"""
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {{name: {name}, namespace: team, uid: uid-{name}, creationTimestamp: "2024-01-01T00:00:01Z"}}
  spec:
    queueName: lq
    priority: {priority}
    podSets: [{sets}]{status}
"""


def _log(objects: str) -> list[ev.Event]:
    return [ev.ObjectUpserted(time=T, key=x.key, uid=x.metadata.uid, obj=x)
            for x in load_text(fastyaml.safe_dump_all(fastyaml.safe_load(BASE + objects)), "objects").objects]


def _decide(log: list[ev.Event]) -> list[ev.Decision]:
    state = ClusterState()
    for i, e in enumerate(log):
        state.apply(ev.Record(i, e))
    return decide(state, DEFAULT)


def _reserved(objects: str, key: str = "team/w") -> ev.QuotaReserved:
    reserved = [d for d in _decide(_log(objects)) if isinstance(d, ev.QuotaReserved) and d.key == key]
    assert len(reserved) == 1, reserved
    return reserved[0]


TAS_FIRST = _flavors("one", "default", topology=("one",)) + _cluster_queue("cq", {"one": 4, "default": 4})


def test_a_tas_flavor_skipped_by_a_pod_set_asking_no_topology_is_listed_with_its_reason():
    d = _reserved(TAS_FIRST + _workload("w"))
    assert d.admission.pod_set_assignments[0].flavors == {"cpu": "default"}
    assert d.considered_flavors == 'main: one(NoFit;Flavor "one" supports only TopologyAwareScheduling)'


def test_flavors_are_listed_in_name_order_and_pod_sets_joined_by_a_bar():
    objects = _flavors("zeta", "alpha", "default", topology=("zeta", "alpha")) + \
        _cluster_queue("cq", {"zeta": 4, "alpha": 4, "default": 4})
    d = _reserved(objects + _workload("w", pod_sets={"first": 1, "second": 1}))
    each = ('alpha(NoFit;Flavor "alpha" supports only TopologyAwareScheduling), '
            'zeta(NoFit;Flavor "zeta" supports only TopologyAwareScheduling)')
    assert d.considered_flavors == f"first: {each} | second: {each}"


def test_a_summary_is_kept_to_what_an_event_shows():
    """Kueue does not cut the summary: it cuts the whole QuotaReserved Event (TruncateEventMessage, 1024
    bytes), the summary after the Event's own words. The decision keeps the summary cut the same way (the log
    is not to hold what no Event shows), which changes none of the Event's bytes."""
    names = [f"flavor-{'x' * 40}-{i}" for i in range(12)]
    objects = _flavors(*names, "default", topology=tuple(names)) + \
        _cluster_queue("cq", dict.fromkeys([*names, "default"], 4))
    d = _reserved(objects + _workload("w", pod_sets={"first": 1, "second": 1}))
    each = ", ".join(f'{n}(NoFit;Flavor "{n}" supports only TopologyAwareScheduling)' for n in sorted(names))
    summary = f"first: {each} | second: {each}"
    assert len(summary) > 2048
    assert d.considered_flavors == summary[:1020] + " ..."
    said = "Quota reserved in ClusterQueue cq, wait time since queued was 0s; Flavors considered: "
    assert truncate_message(said + d.considered_flavors) == truncate_message(said + summary)


BORROWING = _flavors("default") + _cluster_queue("cq", {"default": 1}, "\n    cohortName: all") + \
    _cluster_queue("lender", {"default": 4}, "\n    cohortName: all")


def test_the_flavor_used_is_listed_when_it_borrows():
    d = _reserved(BORROWING + _workload("w", "3"))
    assert d.admission.pod_set_assignments[0].flavors == {"cpu": "default"}
    assert d.considered_flavors == "main: default(Fit;borrow=1)"


def test_a_flavor_that_fits_without_borrowing_leaves_nothing_to_say():
    assert _reserved(BORROWING + _workload("w", "1")).considered_flavors == ""


PREEMPT_FIRST = _flavors("on-demand", "spot") + \
    _cluster_queue("cq", {"on-demand": 1, "spot": 1}, "\n    preemption: {withinClusterQueue: WITHIN}")


@pytest.mark.parametrize(("within", "possibility"), [("LowerPriority", "Preempt"), ("Never", "NoCandidates")])
def test_a_flavor_that_could_preempt_shows_its_preemption_mode(within: str, possibility: str):
    objects = PREEMPT_FIRST.replace("WITHIN", within) + _workload("low", admitted_on="on-demand") + \
        _workload("w", priority=10)
    d = _reserved(objects)
    assert d.admission.pod_set_assignments[0].flavors == {"cpu": "spot"}
    assert d.considered_flavors == (f"main: on-demand(preemptionMode={possibility};insufficient unused "
                                    "quota for cpu in flavor on-demand, 1 more needed)")


def test_the_event_field_is_optional_and_omitted_when_empty():
    """Logs written before the field decode (schema evolution: a new field has a default), and a reservation
    with nothing to say writes no key."""
    d = _reserved(BORROWING + _workload("w", "1"))
    data = msgspec.json.decode(msgspec.json.encode(d))
    assert "consideredFlavors" not in data
    assert msgspec.json.decode(msgspec.json.encode(data), type=ev.QuotaReserved).considered_flavors == ""


def test_replay_verify_takes_an_older_reservation_without_the_summary_but_not_another_summary():
    """A log written before kueue-es carried the summary holds the reservation without it: it still
    verifies. A summary the re-run does not give is a mismatch."""
    log = _log(TAS_FIRST + _workload("w"))
    batch = _decide(log)
    assert any(isinstance(d, ev.QuotaReserved) and d.considered_flavors for d in batch)

    def verified(decisions: list[ev.Decision]) -> bool:
        records = [ev.Record(i, e) for i, e in enumerate([*log, *decisions])]
        return verify(lambda: records).ok

    def with_summary(summary: str) -> list[ev.Decision]:
        return [msgspec.structs.replace(d, considered_flavors=summary)
                if isinstance(d, ev.QuotaReserved) else d for d in batch]

    assert verified(batch)
    assert verified(with_summary(""))
    assert not verified(with_summary("main: default(Fit;borrow=1)"))


def test_a_pod_set_with_no_pods_lists_the_flavors_too_small_for_one_of_its_pods():
    """Kueue v0.20's #15444: such a pod set takes the first flavor that could hold one of its pods; the
    flavors that could not are attempts. When none could, the pass over the flavors for nothing replaces
    what the first said."""
    objects = _flavors("small", "big") + _cluster_queue("cq", {"small": 1, "big": 4})
    d = _reserved(objects + _workload("w", "2", pod_sets={"idle": 0, "main": 1}))
    assert d.admission.pod_set_assignments[0].flavors == {"cpu": "big"}
    assert d.considered_flavors == (
        "idle: small(NoFit;insufficient quota for cpu in flavor small, one pod per zero-count podset "
        "request (2) > maximum capacity (1)) | main: small(NoFit;insufficient quota for cpu in flavor small, "
        "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1))")
    d = _reserved(objects + _workload("w", "8", pod_sets={"idle": 0, "main": 0}))
    assert d.admission.pod_set_assignments[0].flavors == {"cpu": "small"}
    assert d.considered_flavors == ""


def test_a_flavor_tried_for_several_resource_groups_is_listed_once_at_its_worst():
    """Kueue keeps one attempt per flavor over a pod set's resource groups: the worst mode, the least
    preemption possibility (shown over the mode), the highest borrowing level, every reason once, sorted."""
    ps = PodSetResult("main", 1, {})
    ps.attempts = [("x", Granular.NO_FIT, 0, ("b", "a")), ("x", Granular.RECLAIM, 2, ("a",)),
                   ("x", Granular.PREEMPT, 1, ()), ("w", Granular.FIT, 0, ())]
    a = Assignment([ps, PodSetResult("other", 1, {})], Mode.FIT, 0, {}, "", "")
    assert considered_flavors(a) == "main: x(preemptionMode=Preempt;borrow=2;a;b)"


def test_a_flavor_is_listed_with_its_representative_mode_and_its_highest_borrowing_level():
    """Kueue records a flavor tried as its least preferred resource's mode under the preference, with the
    highest level any of its resources borrows at. Under PreemptionOverBorrowing, f1's cpu fits by borrowing
    (fit, 1) and its memory needs a reclaim (reclaim, 0): f1 is Fit borrowing at level 1, not Reclaim; w takes
    f2."""
    spec = fastyaml.safe_load(
        (Path(__file__).parent / "scenarios/flavor-mode-stops-at-reclaim.yaml").read_text())
    objects = [x for x in spec["objects"] if x["kind"] != "Namespace"]  # BASE has it
    for x in objects:
        if x["kind"] == "ClusterQueue" and x["metadata"]["name"] == "a":
            x["spec"]["flavorFungibility"] = {"whenCanBorrow": "TryNextFlavor",
                                              "whenCanPreempt": "TryNextFlavor",
                                              "preference": "PreemptionOverBorrowing"}
    d = _reserved(fastyaml.safe_dump(objects))
    assert d.admission.pod_set_assignments[0].flavors == {"cpu": "f2", "memory": "f2"}
    assert d.considered_flavors == \
        "main: f1(Fit;borrow=1;insufficient unused quota for memory in flavor f1, 2 more needed)"
