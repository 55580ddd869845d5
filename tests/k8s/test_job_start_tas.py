"""What starting a Job adds to its pod template: flavors, queue labels, the TAS gate and the checks' podSetUpdates;
and what the Job integration and the ungater leave alone while Kueue's TopologyAwareScheduling gate is off."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.jobs import job
from fixtures.jobs import workload as fixture_workload
from test_job_sync import _setup, _stored_admitted

from connectors.k8s import podsetinfo as psi
from connectors.k8s.jobs import JobIntegration
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.ungater import Ungater
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.tas_assignment import encode
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, PodSetInfo, WorkloadInfo

RACK = "cloud.example.com/rack"
TA = encode(["kubernetes.io/hostname"], [o.TopologyDomainAssignment(values=["n1"], count=2)])
SPOT = o.Toleration(key="spot", operator="Exists", effect="NoSchedule")


def state() -> ClusterState:
    s = ClusterState()
    s.flavors["tas"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="tas"), spec=o.ResourceFlavorSpec(
        node_labels={"pool": "tas"}, tolerations=[SPOT], topology_name="default"))
    s.flavors["gpu"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="gpu"), spec=o.ResourceFlavorSpec(
        node_labels={"pool": "gpu", "accel": "a100"}, tolerations=[SPOT]))
    return s


def workload(topology: o.PodSetTopologyRequest | None, checks: dict[str, o.AdmissionCheckState] | None = None,
             cq: str = "cq") -> WorkloadInfo:
    ps = PodSetInfo(name="main", count=2, min_count=None, requests=(("cpu", 1000),), topology=topology)
    wl = WorkloadInfo(key="ns/wl", uid="u", namespace="ns", name="wl", queue_name="lq", created=0, priority=0,
                      priority_class="", pod_sets=(ps,), check_states=checks or {})
    wl.admission = o.Admission(cluster_queue=cq, pod_set_assignments=[])
    return wl


def psa(flavors: dict[str, str], ta: o.TopologyAssignment | None = TA) -> o.PodSetAssignment:
    return o.PodSetAssignment(name="main", flavors=flavors, count=2, topology_assignment=ta)


def ready(name: str, update: o.PodSetUpdate, state: str = "Ready") -> dict[str, o.AdmissionCheckState]:
    return {name: o.AdmissionCheckState(name=name, state=state, pod_set_updates=[update])}


def test_a_tas_assignment_gates_the_pods_and_names_the_workload() -> None:
    """No ``kueue.x-k8s.io/tas`` label: Kueue stopped setting it in v0.14 (#6895); the gate and the
    annotations say a pod is TAS's."""
    info = psi.start_info(state(), workload(o.PodSetTopologyRequest(required=RACK)), psa({"cpu": "tas"}))
    assert info.scheduling_gates == [{"name": "kueue.x-k8s.io/topology"}]
    assert info.annotations == {"kueue.x-k8s.io/workload": "wl"}
    assert info.labels == {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "lq",
                           "kueue.x-k8s.io/cluster-queue-name": "cq"}
    assert info.node_selector == {"pool": "tas"} and info.tolerations == [SPOT]


@pytest.mark.parametrize(("request_", "implied"), [
    (None, True),
    (o.PodSetTopologyRequest(pod_index_label="batch.kubernetes.io/job-completion-index"), True),
    (o.PodSetTopologyRequest(pod_set_slice_required_topology=RACK, pod_set_slice_size=2), True),
    (o.PodSetTopologyRequest(required=RACK), False),
    (o.PodSetTopologyRequest(preferred=RACK), False),
    (o.PodSetTopologyRequest(unconstrained=True), False),
])
def test_implied_tas_is_annotated_unconstrained(request_: o.PodSetTopologyRequest | None, implied: bool) -> None:
    info = psi.start_info(state(), workload(request_), psa({"cpu": "tas"}))
    assert (info.annotations.get("kueue.x-k8s.io/podset-unconstrained-topology") == "true") == implied


def test_without_a_topology_no_gate_and_flavors_keep_their_first_value() -> None:
    info = psi.start_info(state(), workload(None, cq="not a label!"), psa({"cpu": "tas", "gpu": "gpu"}, ta=None))
    assert info.scheduling_gates == []
    assert "kueue.x-k8s.io/cluster-queue-name" not in info.labels
    assert info.node_selector == {"accel": "a100", "pool": "gpu"}, "flavors by name: gpu before tas"
    assert info.tolerations == [SPOT], "deduplicated"
    assert info.annotations == {"kueue.x-k8s.io/workload": "wl"}


def test_a_cluster_queue_name_that_is_no_dns_label_gets_no_label() -> None:
    info = psi.start_info(state(), workload(None, cq="team.a"), psa({"cpu": "tas"}, ta=None))
    assert info.labels == {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "lq"}


def test_without_assign_queue_labels_for_pods_only_the_pod_set_is_labelled() -> None:
    s = state()
    s.apply(ev.Record(0, ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"AssignQueueLabelsForPods": False}})))
    info = psi.start_info(s, workload(None), psa({"cpu": "tas"}, ta=None))
    assert info.labels == {"kueue.x-k8s.io/podset": "main"}


@pytest.mark.parametrize("origin", [True, False])
def test_a_multikueue_workers_copy_labels_its_pods(origin: bool) -> None:
    """Kueue #10242: on a worker, a Workload the manager copied (labelled ``multikueue-origin``) gives its pods
    ``kueue.x-k8s.io/multikueue-worker-workload-pod: "true"``; any other Workload does not."""
    wl = workload(None)
    if origin:
        wl.labels = {"kueue.x-k8s.io/multikueue-origin": "manager-1"}
    info = psi.start_info(state(), wl, psa({"cpu": "tas"}, ta=None))
    assert info.labels.get("kueue.x-k8s.io/multikueue-worker-workload-pod") == ("true" if origin else None)
    assert info.labels["kueue.x-k8s.io/podset"] == "main" and info.labels["kueue.x-k8s.io/local-queue-name"] == "lq"


def test_ready_checks_add_their_pod_set_updates() -> None:
    update = o.PodSetUpdate(name="main", annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "pr-1"},
                            labels={"team": "a"}, node_selector={"zone": "z1"},
                            tolerations=[SPOT, o.Toleration(key="gpu", operator="Exists")])
    other = o.PodSetUpdate(name="workers", labels={"ignored": "yes"})
    checks = {**ready("prov", update), **ready("other", other), **ready("later", update, state="Pending")}
    info = psi.start_info(state(), workload(None, checks), psa({"cpu": "tas"}))
    assert info.annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == "pr-1"
    assert info.labels["team"] == "a" and "ignored" not in info.labels
    assert info.node_selector == {"pool": "tas", "zone": "z1"}
    assert info.tolerations == [SPOT, o.Toleration(key="gpu", operator="Exists")]


def test_conflicting_keys_fail_the_start_with_kueues_message() -> None:
    update = o.PodSetUpdate(name="main", node_selector={"pool": "other"})
    with pytest.raises(psi.MergeConflict, match='^in admission check "prov": invalid admission check PodSetUpdate: '
                                                "conflict for nodeSelector: conflict for key=pool, value1=tas, "
                                                "value2=other"):
        psi.start_info(state(), workload(None, ready("prov", update)), psa({"cpu": "tas"}))
    template = o.PodTemplateSpec(spec=o.PodSpec(node_selector={"pool": "mine"}))
    info = psi.start_info(state(), workload(None), psa({"cpu": "tas"}))
    with pytest.raises(psi.MergeConflict, match="^invalid admission check PodSetUpdate: conflict for nodeSelector"):
        psi.onto_template(template, info)


def test_onto_a_template_keeps_what_it_has() -> None:
    template = o.PodTemplateSpec(metadata=o.TemplateMeta(labels={"app": "x"}, annotations={"a": "b"}),
                                 spec=o.PodSpec(node_selector={"disk": "ssd"}, tolerations=[SPOT],
                                                scheduling_gates=[{"name": "example.com/other"}]))
    merged = psi.onto_template(template, psi.start_info(state(), workload(None), psa({"cpu": "tas"})))
    assert merged.labels["app"] == "x" and merged.annotations == {
        "a": "b", "kueue.x-k8s.io/workload": "wl", "kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    assert merged.node_selector == {"disk": "ssd", "pool": "tas"} and merged.tolerations == [SPOT]
    assert merged.scheduling_gates == [{"name": "example.com/other"}, {"name": "kueue.x-k8s.io/topology"}]


def test_the_workload_of_a_job_carries_its_topology_request() -> None:
    jobs = JobIntegration(None, LocalJournal(MemoryLog(), Mirror()))  # type: ignore[arg-type]
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"parallelism": 2, "template": {"metadata": {"annotations": {
               "kueue.x-k8s.io/podset-required-topology": RACK}}, "spec": {"containers": []}}}}
    (ps,) = jobs.workload_for(job, "job-j-abcde")["spec"]["podSets"]
    assert ps["topologyRequest"] == {"required": RACK, "podIndexLabel": "batch.kubernetes.io/job-completion-index"}
    del job["spec"]["template"]["metadata"]
    (ps,) = jobs.workload_for(job, "job-j-abcde")["spec"]["podSets"]
    assert ps["topologyRequest"] == {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}


TAS_OFF = {"TopologyAwareScheduling": False, "TASFailedNodeReplacement": False,
           "TASFailedNodeReplacementFailFast": False, "TASReplaceNodeOnPodTermination": False,
           "TASHandleOverlappingFlavors": False, "TASMultiLayerTopology": False, "TASProfileMixed": False,
           "TASRecomputeAssignmentWithinSchedulingCycle": False, "TASReplaceNodeOnNodeTaints": False,
           "TASNodeFeasibilityForAllLevels": False}


def _record_tas_off(s: ClusterState) -> None:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": TAS_OFF}
    s.apply(ev.Record(s.offset + 1, ev.ConfigRecorded(time=2, document=doc, writer="test", id="config-tas-off")))


def test_with_tas_off_a_job_workload_has_no_topology_request() -> None:
    """Kueue's Job integration builds the topology request only with TopologyAwareScheduling on."""
    jobs = JobIntegration(None, LocalJournal(MemoryLog(), Mirror()))  # type: ignore[arg-type]
    _record_tas_off(jobs.state)
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"parallelism": 2, "template": {"metadata": {"annotations": {
               "kueue.x-k8s.io/podset-required-topology": RACK}}, "spec": {"containers": []}}}}
    (ps,) = jobs.workload_for(job, "job-j-abcde")["spec"]["podSets"]
    assert "topologyRequest" not in ps
    assert ps["template"]["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": RACK}


def test_with_tas_off_starting_adds_no_gate_label_or_workload_annotation() -> None:
    """Even an assignment that carries a topologyAssignment (made while the gate was on) starts without TAS."""
    s = state()
    _record_tas_off(s)
    info = psi.start_info(s, workload(o.PodSetTopologyRequest(required=RACK)), psa({"cpu": "tas"}))
    assert info.scheduling_gates == [] and info.annotations == {}
    assert info.labels == {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "lq",
                           "kueue.x-k8s.io/cluster-queue-name": "cq"}
    assert info.node_selector == {"pool": "tas"} and info.tolerations == [SPOT]


class _NoClient:
    """A client the ungater must not use."""

    async def patch(self, *args, **kwargs):
        raise AssertionError("the ungater patched a pod while TAS is off")


@pytest.mark.asyncio
async def test_with_tas_off_the_ungater_lifts_no_gate() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="u", resource_version="1"),
                    spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))
    pod = o.Pod(metadata=o.ObjectMeta(name="p", namespace="ns", uid="pu", resource_version="1",
                                      labels={"kueue.x-k8s.io/podset": "main"},
                                      annotations={"kueue.x-k8s.io/workload": "wl"}),
                spec=o.PodSpec(scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}]))
    await journal.append([ev.ObjectUpserted(time=1, key="ns/wl", uid="u", obj=wl),
                          ev.ObjectUpserted(time=1, key="ns/p", uid="pu", obj=pod)])
    info = journal.mirror.state.workloads["ns/wl"]
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", count=1, topology_assignment=encode(["kubernetes.io/hostname"],
                                                         [o.TopologyDomainAssignment(values=["n1"], count=1)]))])
    info.phase = ADMITTED
    _record_tas_off(journal.mirror.state)
    ungater = Ungater(_NoClient(), journal)  # type: ignore[arg-type]
    await ungater.sync("ns/wl")
    assert ungater.stats.ungated == 0


class _PatchRecorder:
    def __init__(self) -> None:
        self.patched: dict[str, dict[str, str]] = {}

    async def patch(self, resource, name: str, body: dict, namespace: str = "", *args, **kwargs) -> bytes:
        import msgspec
        self.patched[name] = body["spec"]["nodeSelector"]
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                                 "resourceVersion": "9"}})


@pytest.mark.asyncio
async def test_the_ungater_ranks_a_pod_set_groups_workers_after_its_leader() -> None:
    """A LeaderWorkerSet group (leader and workers one pod-set group): the workers' worker-index runs from 1, the
    leader being 0; Kueue's ungater takes the leader's count off it, so worker-index 1 is rank 0. Without it the
    indexes overran the worker pod set and the pods went in name order."""
    worker_index = "leaderworkerset.sigs.k8s.io/worker-index"
    journal = LocalJournal(MemoryLog(), Mirror())
    hosts = ["kubernetes.io/hostname"]
    leader_req = o.PodSetTopologyRequest(required=hosts[0], pod_set_group_name="g")
    worker_req = o.PodSetTopologyRequest(required=hosts[0], pod_set_group_name="g", pod_index_label=worker_index)
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="u", resource_version="1"),
                    spec=o.WorkloadSpec(queue_name="lq", pod_sets=[
                        o.PodSet(name="leader", count=1, topology_request=leader_req),
                        o.PodSet(name="worker", count=2, topology_request=worker_req)]))

    def member(name: str, pod_set: str, index: str) -> o.Pod:
        return o.Pod(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version="1",
                                           labels={"kueue.x-k8s.io/podset": pod_set, worker_index: index},
                                           annotations={"kueue.x-k8s.io/workload": "wl"}),
                     spec=o.PodSpec(scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}]))

    pods = [member("lead", "leader", "0"), member("w-a", "worker", "2"), member("w-b", "worker", "1")]
    await journal.append([ev.ObjectUpserted(time=1, key="ns/wl", uid="u", obj=wl),
                          *(ev.ObjectUpserted(time=1, key=f"ns/{p.metadata.name}", uid=p.metadata.uid, obj=p)
                            for p in pods)])
    info = journal.mirror.state.workloads["ns/wl"]

    def assigned(name: str, domains: list[tuple[str, int]]) -> o.PodSetAssignment:
        return o.PodSetAssignment(name=name, count=sum(c for _, c in domains), topology_assignment=encode(
            hosts, [o.TopologyDomainAssignment(values=[v], count=c) for v, c in domains]))

    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        assigned("leader", [("n0", 1)]), assigned("worker", [("n1", 1), ("n2", 1)])])
    info.phase = ADMITTED
    client = _PatchRecorder()
    await Ungater(client, journal).sync("ns/wl")  # type: ignore[arg-type]
    assert client.patched == {"lead": {hosts[0]: "n0"}, "w-b": {hosts[0]: "n1"}, "w-a": {hosts[0]: "n2"}}


class _EvictingClient:
    """The fold evicts the Workload while the Job's start is written."""

    def __init__(self, wl: WorkloadInfo) -> None:
        self.wl = wl
        self.patched: list[str] = []

    async def patch(self, resource, name, body, namespace=""):
        self.patched.append(name)
        self.wl.admission = None
        return b"{}"


@pytest.mark.asyncio
async def test_a_job_evicted_while_it_starts_is_reported_started_on_the_queue_that_admitted_it() -> None:
    wl = workload(None)
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[psa({}, ta=None)])
    client = _EvictingClient(wl)
    mirror = Mirror()
    jobs = JobIntegration(client, LocalJournal(MemoryLog(), mirror))  # type: ignore[arg-type]
    seen: list[ev.Record] = []
    mirror.listeners.append(seen.extend)
    job = o.Job(metadata=o.ObjectMeta(name="j", namespace="ns", uid="u", resource_version="1"),
                spec=o.JobSpec(suspend=True, parallelism=2))
    await jobs._start(job, wl, o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns")))
    assert client.patched == ["j"] and jobs.stats.started == 1
    (acted,) = [r.event for r in seen if isinstance(r.event, ev.JobActed)]
    assert (acted.action, acted.cluster_queue) == ("Started", "cq")


@pytest.mark.asyncio
@pytest.mark.parametrize("assigned", [True, False])
async def test_a_job_started_on_a_multikueue_copy_labels_its_template(assigned: bool) -> None:
    """The worker's Job (its Workload the manager's copy) starts with the worker mark on its template, whether the
    admission names the pod set or not."""
    wl = fixture_workload()
    wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, labels={"kueue.x-k8s.io/multikueue-origin": "manager-1"}))
    jobs, mirror, _, client = _setup(wl, job())

    def shape(info: WorkloadInfo) -> None:
        if not assigned:
            info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[])

    _stored_admitted(mirror, shape)
    await jobs.reconcile("ns/train")
    (body,) = [body for kind, _, body in client.patches if kind == "Job"]
    labels = body["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/multikueue-worker-workload-pod"] == "true"
    assert labels["kueue.x-k8s.io/podset"] == "main"
