"""Per-pod ProvisioningRequest identity of an elastic Job's pods under ElasticJobsViaWorkloadSlicesForProvisioningRequests
(Kueue v0.20, KEP-14615): the shared template keeps only what no slice changes, the pods take the rest as their
elastic-job gate is lifted; gate off (its default) nothing changes."""

from __future__ import annotations

import pytest

from connectors.k8s import elastic_provreq as ep
from connectors.k8s import podsetinfo as psi
from connectors.k8s import workload_slices
from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.workloads import PodSetInfo, WorkloadInfo

CONSUMES, CLASS = ep.CONSUMES_ANNOTATION, ep.CLASS_ANNOTATION
GATE = workload_slices.ELASTIC_JOB_GATE


def state(on: bool) -> ClusterState:
    s = ClusterState()
    s.flavors["f"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="f"), spec=o.ResourceFlavorSpec(node_labels={"pool": "f"}))
    if on:
        s.apply(ev.Record(0, ev.ConfigRecorded(time=1, writer="test", id="c", document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"ElasticJobsViaWorkloadSlicesForProvisioningRequests": True}})))
    return s


def update(request: str, pool: str, name: str = "main") -> o.PodSetUpdate:
    return o.PodSetUpdate(name=name, annotations={CONSUMES: request, CLASS: "queued"}, labels={"team": "a"},
                          node_selector={"example.com/pool": pool})


def workload(*updates: o.PodSetUpdate, elastic: bool = True) -> WorkloadInfo:
    checks = {f"c{i}": o.AdmissionCheckState(name=f"c{i}", state="Ready", pod_set_updates=[u])
              for i, u in enumerate(updates)}
    ps = PodSetInfo(name="main", count=2, min_count=None, requests=(("cpu", 1000),))
    wl = WorkloadInfo(key="ns/wl", uid="u", namespace="ns", name="wl", queue_name="lq", created=0, priority=0,
                      priority_class="", pod_sets=(ps,), check_states=checks, elastic=elastic)
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[])
    return wl


PSA = o.PodSetAssignment(name="main", flavors={"cpu": "f"}, count=2)


@pytest.mark.parametrize(("on", "elastic", "per_pod"), [(True, True, True), (False, True, False), (True, False, False)])
def test_an_elastic_slices_template_names_no_request(on: bool, elastic: bool, per_pod: bool) -> None:
    wl = workload(update("pr-1", "p1"), elastic=elastic)
    info = psi.start_info(state(on), wl, PSA, "wl")
    assert info.annotations[CLASS] == "queued" and info.labels["team"] == "a"
    if per_pod:
        assert CONSUMES not in info.annotations
        assert info.node_selector == {"pool": "f"}, "the flavor's labels stay, the request's node pool goes"
    else:  # gate off, or not elastic: the check's updates whole, as before
        assert info.annotations[CONSUMES] == "pr-1"
        assert info.node_selector == {"pool": "f", "example.com/pool": "p1"}


def test_a_non_elastic_start_is_unchanged_under_the_gate() -> None:
    info = psi.start_info(state(True), workload(update("pr-1", "p1")), PSA)  # no slice chain: not an elastic slice
    assert info.annotations[CONSUMES] == "pr-1"


def pod(name: str, *, gated: bool = True, annotations: dict[str, str] | None = None,
        selector: dict[str, str] | None = None) -> dict:
    spec: dict = {"schedulingGates": [{"name": GATE}]} if gated else {}
    if selector is not None:
        spec["nodeSelector"] = selector
    meta: dict = {"name": name, "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def test_identities_only_under_the_gate_for_an_elastic_slice() -> None:
    wl = workload(update("pr-2", "p2"))
    assert ep.identities(state(False), wl, {"main": 2}) is None
    assert ep.identities(state(True), workload(update("pr-2", "p2"), elastic=False), {"main": 2}) is None
    got = ep.identities(state(True), wl, {"main": 2})
    assert got == {"main": ep.PodAdmission({CONSUMES: "pr-2", CLASS: "queued"}, {"example.com/pool": "p2"})}


def test_conflicting_checks_release_no_pod_of_the_pod_set() -> None:
    wl = workload(update("pr-2", "p2"), update("pr-2", "p3"))
    assert ep.pod_admission(wl, "main") is None
    assert ep.able([pod("a"), pod("b", gated=False)], {"main": None}, lambda _: "main", workload_slices.has_gate) \
        == [pod("b", gated=False)], "released pods still count"


def test_a_pod_with_another_value_stays_gated_and_counts_for_nothing() -> None:
    adm = ep.PodAdmission({CONSUMES: "pr-2", CLASS: "queued"}, {"example.com/pool": "p2"})
    pods = [pod("a"), pod("b", annotations={CONSUMES: "pr-1"}), pod("c", selector={"example.com/pool": "p1"}),
            pod("d", annotations={CONSUMES: "pr-2"}, selector={"other": "x"})]
    kept = ep.able(pods, {"main": adm}, lambda _: "main", workload_slices.has_gate)
    assert [p["metadata"]["name"] for p in kept] == ["a", "d"]
    assert workload_slices.released_by_pod_set(kept, {"main": 1}, lambda _: "main") == [pods[0]]


def test_the_released_pod_gets_what_it_lacks() -> None:
    adm = ep.PodAdmission({CONSUMES: "pr-2", CLASS: "queued"}, {"example.com/pool": "p2"})
    assert ep.identity_ops(pod("a"), adm) == [
        {"op": "add", "path": "/metadata/annotations", "value": {CONSUMES: "pr-2", CLASS: "queued"}},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"example.com/pool": "p2"}}]
    have = pod("b", annotations={CLASS: "queued", "x": "y"}, selector={"other": "x"})
    assert ep.identity_ops(have, adm) == [
        {"op": "add", "path": "/metadata/annotations/autoscaling.x-k8s.io~1consume-provisioning-request",
         "value": "pr-2"},
        {"op": "add", "path": "/spec/nodeSelector/example.com~1pool", "value": "p2"}]
    done = pod("c", annotations={CONSUMES: "pr-2", CLASS: "queued"}, selector={"example.com/pool": "p2"})
    assert ep.identity_ops(done, adm) == []


def test_a_checks_second_update_of_the_pod_set_counts_too() -> None:
    """Kueue's elastic-job ungater (``admissionUpdateForPodSet``) merges every update naming the pod set, a
    check's second one too, where a job's start takes a check's first only (``getPodSetsInfoFromStatus``)."""
    first = update("pr-2", "p2")
    second = o.PodSetUpdate(name="main", node_selector={"example.com/zone": "z1"})
    wl = workload()
    wl.check_states = {"c0": o.AdmissionCheckState(name="c0", state="Ready", pod_set_updates=[first, second])}
    assert ep.pod_admission(wl, "main") == ep.PodAdmission(
        {CONSUMES: "pr-2", CLASS: "queued"}, {"example.com/pool": "p2", "example.com/zone": "z1"})
    clash = o.PodSetUpdate(name="main", annotations={CONSUMES: "pr-3"})
    wl.check_states = {"c0": o.AdmissionCheckState(name="c0", state="Ready", pod_set_updates=[first, clash])}
    assert ep.pod_admission(wl, "main") is None, "a conflict within one check releases no pod either"
