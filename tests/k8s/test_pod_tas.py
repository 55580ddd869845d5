"""Topology-aware scheduling of Kueue's plain Pods: the Pod webhook holds a Pod Kueue takes for topology placement
(the ``kueue.x-k8s.io/topology`` gate, the group index label), its Workload's pod sets carry the topology request
of its TAS annotations ranked by ``kueue.x-k8s.io/pod-group-pod-index``, starting keeps the topology gate for the
ungater, which places the group's Pods by rank; with Kueue's TopologyAwareScheduling gate off, none of it."""

from __future__ import annotations

from typing import Any

import msgspec
from patchhelp import patched

from connectors.k8s import pod_group, pod_sync
from connectors.k8s import podsetinfo as psi
from connectors.k8s.pod_roles import role_hash
from connectors.k8s.pod_webhook import PodDefaulting, pod_patch
from connectors.k8s.ungating import plan
from events import objects as o
from events import schema as ev
from events.tas_assignment import encode
from kueue_es.scheduler.config import load_config
from projections.cluster import ClusterState
from projections.workloads import PodSetInfo, WorkloadInfo

RACK, HOST = "cloud.example.com/rack", "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
INDEX = "kueue.x-k8s.io/pod-group-pod-index"
INDEX_FROM = "kueue.x-k8s.io/pod-group-pod-index-label"
ADMISSION, TOPOLOGY = {"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}
TAS_OFF = {"TopologyAwareScheduling": False, "TASFailedNodeReplacement": False,
           "TASFailedNodeReplacementFailFast": False, "TASReplaceNodeOnPodTermination": False,
           "TASHandleOverlappingFlavors": False, "TASMultiLayerTopology": False, "TASProfileMixed": False,
           "TASRecomputeAssignmentWithinSchedulingCycle": False, "TASReplaceNodeOnNodeTaints": False,
           "TASNodeFeasibilityForAllLevels": False}


def _tas_off(s: ClusterState) -> ClusterState:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": TAS_OFF}
    s.apply(ev.Record(s.offset + 1, ev.ConfigRecorded(time=2, document=doc, writer="test", id="config-tas-off")))
    return s


def _member(name: str, index: int, cpu: str = "1", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A queued Pod of group ``g`` naming its index label (``app/index``), as a user or a parent writes it."""
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/pod-group-name": "g",
                                    "app/index": str(index)},
                         "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3", INDEX_FROM: "app/index",
                                         REQUIRED: RACK, **(annotations or {})}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


# --- the webhook -------------------------------------------------------------------------------------------------

def test_under_tas_a_pod_made_kueues_is_also_topology_gated_and_gets_its_group_index() -> None:
    pod = patched(_member("a", 2), pod_patch(_member("a", 2), default_queue=False, tas=True))
    assert pod["spec"]["schedulingGates"] == [ADMISSION, TOPOLOGY]
    assert pod["metadata"]["labels"][INDEX] == "2"


def test_no_index_is_given_when_the_named_label_is_missing_or_empty_or_none_is_named() -> None:
    """Kueue #15867 (``pod_webhook_test.go`` "pod with TAS and PodGroupPodIndexLabelAnnotation naming an
    absent label" / "... naming a label with an empty value"): an empty index, which no group could be
    admitted with, is not written; one the Pod carries itself is kept."""
    unlabelled = _member("a", 0)
    del unlabelled["metadata"]["labels"]["app/index"]
    assert INDEX not in patched(unlabelled,
                                pod_patch(unlabelled, default_queue=False, tas=True))["metadata"]["labels"]
    empty = _member("a", 0)
    empty["metadata"]["labels"].update({"app/index": "", INDEX: "1"})
    assert patched(empty, pod_patch(empty, default_queue=False, tas=True))["metadata"]["labels"][INDEX] == "1"
    single = {"metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "spec": {}}
    assert INDEX not in patched(single,
                                pod_patch(single, default_queue=False, tas=True))["metadata"]["labels"]


def test_a_gate_the_pod_has_already_is_not_added_again() -> None:
    pod = _member("a", 0)
    pod["spec"]["schedulingGates"] = [TOPOLOGY]
    assert patched(pod, pod_patch(pod, default_queue=False, tas=True))["spec"]["schedulingGates"] == [
        TOPOLOGY, ADMISSION]


def test_with_tas_off_the_webhook_adds_neither_the_topology_gate_nor_the_index() -> None:
    assert PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]}})).tas
    off = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]}, "featureGates": TAS_OFF}))
    assert not off.tas
    pod = patched(_member("a", 2), pod_patch(_member("a", 2), default_queue=False, tas=off.tas))
    assert pod["spec"]["schedulingGates"] == [ADMISSION] and INDEX not in pod["metadata"]["labels"]


# --- the Workload ------------------------------------------------------------------------------------------------

def test_a_single_pods_pod_set_carries_its_topology_request_ranked_by_the_group_index() -> None:
    raw = {**_member("p", 0), "metadata": {**_member("p", 0)["metadata"], "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    (ps,) = pod_sync.workload_for(ClusterState(), raw, "pod-p-abcde")["spec"]["podSets"]
    assert ps["topologyRequest"] == {"required": RACK, "podIndexLabel": INDEX}
    (ps,) = pod_sync.workload_for(_tas_off(ClusterState()), raw, "pod-p-abcde")["spec"]["podSets"]
    assert "topologyRequest" not in ps


def test_each_role_of_a_group_carries_the_topology_request_of_its_first_pod() -> None:
    preferred = {"kueue.x-k8s.io/podset-preferred-topology": HOST}
    raws = [_member("a", 0), _member("b", 1, cpu="2", annotations=preferred), _member("c", 2)]
    del raws[1]["metadata"]["annotations"][REQUIRED]
    sets = {ps["name"]: ps for ps in pod_group.workload_for(ClusterState(), raws)["spec"]["podSets"]}
    one, two = role_hash(raws[0]["spec"]), role_hash(raws[1]["spec"])
    assert sets[one]["count"] == 2 and sets[one]["topologyRequest"] == {"required": RACK, "podIndexLabel": INDEX}
    assert sets[two]["topologyRequest"] == {"preferred": HOST, "podIndexLabel": INDEX}
    off = pod_group.workload_for(_tas_off(ClusterState()), raws)["spec"]["podSets"]
    assert all("topologyRequest" not in ps for ps in off)


# --- start and ungating ------------------------------------------------------------------------------------------

def test_a_group_admitted_by_topology_keeps_the_topology_gate_at_start_and_is_ungated_by_rank() -> None:
    """Webhook, start, then the ungater's plan: each Pod lands on the node its group index ranks it to."""
    state = ClusterState()
    state.flavors["tas"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="tas"), spec=o.ResourceFlavorSpec(
        node_labels={"pool": "tas"}, topology_name="topo"))
    raws = [patched(m, pod_patch(m, default_queue=False, tas=True))
            for m in (_member("c", 0), _member("a", 1), _member("b", 2))]
    role = role_hash(raws[0]["spec"])
    request = o.PodSetTopologyRequest(required=RACK, pod_index_label=INDEX)
    wl = WorkloadInfo(key="ns/g", uid="u", namespace="ns", name="g", queue_name="lq", created=0, priority=0,
                      priority_class="", pod_sets=(PodSetInfo(name=role, count=3, min_count=None,
                                                              requests=(("cpu", 1000),), topology=request),))
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[])
    ta = encode([HOST], [o.TopologyDomainAssignment(values=["n1"], count=2),
                         o.TopologyDomainAssignment(values=["n2"], count=1)])
    psa = o.PodSetAssignment(name=role, flavors={"cpu": "tas"}, count=3, topology_assignment=ta)
    started = []
    for raw in raws:
        pod = msgspec.convert(raw, pod_sync.ManagedPod)
        patch = pod_sync.start_patch(pod, psi.start_info(state, wl, psa))
        assert patch["spec"]["schedulingGates"] == [TOPOLOGY], "the ungater lifts the topology gate, not the start"
        meta = patch["metadata"]
        labels = {**raw["metadata"]["labels"], **meta["labels"]}
        assert labels["kueue.x-k8s.io/podset"] == role
        assert "kueue.x-k8s.io/tas" not in labels, "Kueue stopped setting it in v0.14 (#6895)"
        assert meta["annotations"]["kueue.x-k8s.io/workload"] == "g"
        started.append(o.Pod(metadata=o.ObjectMeta(name=pod.metadata.name, namespace="ns", labels=labels,
                                                   annotations=meta["annotations"]),
                             spec=o.PodSpec(scheduling_gates=[TOPOLOGY], node_selector={"pool": "tas"})))
    placed = {u.pod.metadata.name: u.node_selector[HOST] for u in plan(psa, request, started)}
    assert placed == {"c": "n1", "a": "n1", "b": "n2"}, "rank 0 and 1 on n1, rank 2 on n2 (not name order)"


def _gated_pod(labels: dict[str, str]) -> pod_sync.ManagedPod:
    meta = o.ObjectMeta(name="p", namespace="ns", resource_version="7", labels=labels)
    spec = pod_sync.ManagedPodSpec(scheduling_gates=[ADMISSION, TOPOLOGY])
    return pod_sync.ManagedPod(metadata=meta, spec=spec)


def test_starting_keeps_the_topology_gate_because_the_admission_adds_it_not_because_of_a_label() -> None:
    """Kueue sets no ``kueue.x-k8s.io/tas`` label since v0.14 (#6895) and reads none since v0.17 (#8770): what
    the admission adds (the topology gate of a ``topologyAssignment``) decides. A Pod that carries the label
    (written by an older kueue-es, or by its user) and is admitted without a topology loses both gates."""
    placed = psi.PodSetInfo(labels={"kueue.x-k8s.io/podset": "main"}, scheduling_gates=[TOPOLOGY])
    plain = psi.PodSetInfo(labels={"kueue.x-k8s.io/podset": "main"})
    assert pod_sync.start_patch(_gated_pod({}), placed)["spec"]["schedulingGates"] == [TOPOLOGY]
    old = _gated_pod({"kueue.x-k8s.io/tas": "true"})
    assert pod_sync.start_patch(old, plain)["spec"]["schedulingGates"] is None
    assert pod_sync.start_patch(old, placed)["spec"]["schedulingGates"] == [TOPOLOGY]
