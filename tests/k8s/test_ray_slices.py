"""An elastic RayCluster and RayJob on workload slices (Kueue's generic job reconciler with ``pkg/workloadslicing``, the
RayCluster's pod sets): its first slice made at once, a worker group scaled down in place, a scale-up as a new slice
naming the old one while the cluster runs on, the old slice finished ``OutOfSync`` once evicted, the cluster started
with the chain's name on its templates, and its pods released pod set by pod set as the slice grants them; a
RayJob's worker counts read from the RayCluster it runs on under the autoscaler. No cluster needed."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs

from connectors.k8s import raycluster as rc
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.mirror import Mirror
from connectors.k8s.ray_integration import RayClusterIntegration, RayJobIntegration, RayServiceIntegration
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED, PENDING

UID = "rc-uid"
ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
GATE = {"name": "kueue.x-k8s.io/elastic-job"}
PODSET = "kueue.x-k8s.io/podset"
ON = {"integrations": {"frameworks": ["batch/job", "ray.io/raycluster"]}}
TEMPLATE = {"spec": {"containers": [{"name": "ray", "image": "ray:2", "resources": {"requests": {"cpu": "1"}}}],
                     "schedulingGates": [GATE]}}


def _slice_name(generation: int) -> str:
    digest = hashlib.sha1(f"RayCluster\nray.io\nrc\n{UID}\n{generation}".encode()).hexdigest()[:5]
    return f"raycluster-rc-{digest}"


def _raw(workers: int, *, suspend: bool = False, generation: int = 1, elastic: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rc", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                            "generation": generation, "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if elastic:
        meta["annotations"] = dict(ELASTIC)
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
            "spec": {"suspend": suspend, "enableInTreeAutoscaling": True, "headGroupSpec": {"template": TEMPLATE},
                     "workerGroupSpecs": [{"groupName": "Workers", "replicas": workers, "template": TEMPLATE}]},
            "status": {"state": "" if suspend else "ready"}}


def _slice(name: str, workers: int, *, created: str = "2026-01-01T00:00:00Z", replaces: str = "") -> o.Workload:
    wl = watched_jobs.owned_workload(name, ("ray.io/v1", "RayCluster", "rc", UID),
                                     [o.PodSet(name="head", count=1), o.PodSet(name="workers", count=workers)],
                                     uid=f"{name}-uid")
    annotations = {**ELASTIC, SLICE_NAME: _slice_name(1)}
    if replaces:
        annotations[REPLACES] = replaces
    meta = msgspec.structs.replace(wl.metadata, creation_timestamp=created, annotations=annotations)
    return msgspec.structs.replace(wl, metadata=meta)


def _admit(mirror: Mirror, name: str, *, evicted: bool = False, granted: dict[str, int] | None = None) -> None:
    """``granted``: the pods the admission counts by pod set (the spec's counts unless given: a partial one)."""
    info = mirror.state.workloads[f"ns/{name}"]
    info.phase = ADMITTED
    counts = {ps.name: ps.count for ps in mirror.workloads[f"ns/{name}"].spec.pod_sets} | (granted or {})
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "default"}, resource_usage={"cpu": str(c)}, count=c)
        for n, c in counts.items()])
    info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)
    if evicted:  # the eviction written: the stored Workload shows it too
        info.evicted = "Preempted"
        info.set_condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload", 6)
        stored = mirror.workloads[f"ns/{name}"]
        mirror.workloads[f"ns/{name}"] = msgspec.structs.replace(
            stored, status=msgspec.structs.replace(stored.status, conditions=list(info.conditions)))


class Client(watched_jobs.Client):
    """Also lists the cluster's pods and takes JSON patches."""

    def __init__(self, stored: dict[str, Any]) -> None:
        super().__init__(stored, "RayCluster")
        self.pods: list[dict[str, Any]] = []
        self.listed: list[Any] = []

    async def request(self, method: str, path: str, *, query: Any = None, **kw: Any) -> bytes:
        assert method == "GET" and path == "/api/v1/namespaces/ns/pods"
        self.listed.append(query)
        return msgspec.json.encode({"items": self.pods})

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = "application/merge-patch+json") -> bytes:
        return await super().patch(resource, name, body, namespace, subresource)


def _setup(raw: dict[str, Any], *slices: o.Workload, config: dict[str, Any] | None = None
           ) -> tuple[RayClusterIntegration, Mirror, list[ev.AnyEvent], Client]:
    integ, _, appended = watched_jobs.integration(RayClusterIntegration, raw, *slices,
                                                  config=ON if config is None else config)
    client = integ.client = Client(raw)
    return integ, integ.mirror, appended, client


def _pod(name: str, podset: str, *, gated: bool = True, phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "ray", "image": "ray:2"}]}
    if gated:
        spec["schedulingGates"] = [GATE]
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "7", "labels": {PODSET: podset}},
            "spec": spec, "status": {"phase": phase}}


@pytest.mark.asyncio
@pytest.mark.parametrize("suspend", [True, False])
async def test_an_elastic_raycluster_gets_its_first_slice_at_once(suspend: bool) -> None:
    """Kueue's reconciler lets a workload-slice job stay active: a running elastic RayCluster is not suspended for
    its first slice, which is named with its generation hashed in and names itself as the chain."""
    integ, _, appended, client = _setup(_raw(2, suspend=suspend))
    await integ.reconcile("ns/rc")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(1)
    assert body["metadata"]["annotations"] == {**ELASTIC, SLICE_NAME: _slice_name(1)}
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("head", 1), ("workers", 2)]
    assert client.patches == [], "not suspended first"
    assert watched_jobs.actions(appended) == [("RayCluster", "CreatedWorkload")]


@pytest.mark.asyncio
async def test_the_elastic_annotation_does_nothing_with_the_gate_off() -> None:
    off = {**ON, "featureGates": {"ElasticJobsViaWorkloadSlices": False}}
    integ, _, _, client = _setup(_raw(2, suspend=False), config=off)
    await integ.reconcile("ns/rc")
    assert client.created == [] and [p[2]["spec"] for p in client.patches] == [{"suspend": True}]


@pytest.mark.asyncio
async def test_a_worker_group_scaled_down_is_written_to_the_admitted_slice_in_place() -> None:
    integ, mirror, _, client = _setup(_raw(2), _slice("a", 3))
    _admit(mirror, "a")
    await integ.reconcile("ns/rc")
    assert client.created == []
    (patch,) = client.patches
    assert patch[:2] == ("Workload", "a") and patch[2] == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "3"},
        {"op": "replace", "path": "/spec/podSets/1/count", "value": 2}]
    assert integ.stats.slice_counts == 1


@pytest.mark.asyncio
async def test_a_scale_up_makes_a_new_slice_naming_the_old_one_while_the_cluster_runs_on() -> None:
    integ, mirror, appended, client = _setup(_raw(4, generation=2), _slice("a", 2))
    _admit(mirror, "a")
    await integ.reconcile("ns/rc")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(2)
    assert body["metadata"]["annotations"] == {**ELASTIC, REPLACES: "ns/a", SLICE_NAME: _slice_name(1)}
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("head", 1), ("workers", 4)]
    assert [p for p in client.patches if p[0] == "RayCluster"] == [], "not stopped"


@pytest.mark.asyncio
async def test_a_running_cluster_is_not_stopped_while_its_new_slice_waits_and_keeps_its_pods_released() -> None:
    new = _slice_name(2)
    integ, mirror, _, client = _setup(_raw(4, generation=2), _slice("a", 2),
                                      _slice(new, 4, replaces="ns/a", created="2026-01-01T00:00:05Z"))
    _admit(mirror, "a")
    assert mirror.state.workloads[f"ns/{new}"].phase == PENDING
    client.pods = [_pod("w-0", "workers", gated=False), _pod("w-1", "workers"), _pod("w-2", "workers")]
    await integ.reconcile("ns/rc")
    assert client.created == [] and [p for p in client.patches if p[0] == "RayCluster"] == []
    assert [p[1] for p in client.patches if p[0] == "Pod"] == ["w-1"], "the old slice grants 2 workers"


@pytest.mark.asyncio
async def test_the_cluster_on_its_admitted_slice_has_its_pods_released_pod_set_by_pod_set() -> None:
    """Kueue's elastic-job ungater: in each pod set, as many gated pods as the slice grants beyond those already
    released, lowest name first; a terminated pod counts for neither; a pod of no granted pod set stays gated."""
    integ, mirror, _, client = _setup(_raw(2), _slice("a", 2))
    _admit(mirror, "a")
    client.pods = [_pod("head-x", "head"), _pod("w-2", "workers"), _pod("w-1", "workers"),
                   _pod("w-0", "workers", phase="Succeeded"), _pod("w-3", "workers"), _pod("stray", "")]
    await integ.reconcile("ns/rc")
    assert client.listed == [[("labelSelector", "ray.io/cluster=rc")]]
    pods = [(name, body) for kind, name, body in client.patches if kind == "Pod"]
    assert [name for name, _ in pods] == ["head-x", "w-1", "w-2"]
    assert pods[0][1] == [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                          {"op": "remove", "path": "/spec/schedulingGates"}]
    assert integ.stats.pods_ungated == 3


@pytest.mark.asyncio
async def test_a_suspended_cluster_is_started_on_its_slice_with_the_chain_name(monkeypatch: pytest.MonkeyPatch) -> None:
    integ, mirror, _, client = _setup(_raw(2, suspend=True), _slice("a", 2))
    _admit(mirror, "a")
    monkeypatch.setattr("connectors.k8s.jobframework.admission_shown", lambda wl, obs: True)  # stored as decided
    await integ.reconcile("ns/rc")
    (start,) = [body for kind, _, body in client.patches if kind == "RayCluster"]
    spec = start["spec"]
    assert spec["suspend"] is False
    head = spec["headGroupSpec"]["template"]["metadata"]
    assert head["annotations"] == {SLICE_NAME: _slice_name(1), "kueue.x-k8s.io/workload": "a"}
    assert spec["workerGroupSpecs"][0]["template"]["metadata"]["annotations"][SLICE_NAME] == _slice_name(1)
    assert spec["workerGroupSpecs"][0]["template"]["spec"]["schedulingGates"] == [GATE], "pods wait for a slice"


@pytest.mark.asyncio
async def test_an_evicted_old_slice_beside_a_new_one_stops_the_cluster_then_is_finished_out_of_sync() -> None:
    """Kueue #15661: the evicted slice still holds quota, so the cluster is stopped on it first; once its
    quota is given back it is finished ``OutOfSync`` and the waiting slice is the cluster's."""
    new = _slice_name(2)
    integ, mirror, appended, client = _setup(_raw(4, generation=2), _slice("a", 2),
                                             _slice(new, 4, replaces="ns/a", created="2026-01-01T00:00:05Z"))
    _admit(mirror, "a", evicted=True)
    await integ.reconcile("ns/rc")
    assert [e for e in appended if isinstance(e, ev.WorkloadFinished)] == []
    (stop,) = [body for kind, _, body in client.patches if kind == "RayCluster"]
    assert stop["spec"]["suspend"] is True
    info = mirror.state.workloads["ns/a"]
    info.phase, info.admission = PENDING, None  # the quota given back once the cluster stopped
    await integ.reconcile("ns/rc")
    finished = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert [(e.key, e.reason) for e in finished] == [("ns/a", "OutOfSync")]


@pytest.mark.asyncio
async def test_a_cluster_whose_slice_is_evicted_is_stopped_with_its_templates_restored() -> None:
    integ, mirror, _, client = _setup(_raw(2), _slice("a", 2))
    _admit(mirror, "a", evicted=True)
    await integ.reconcile("ns/rc")
    (stop,) = [body for kind, _, body in client.patches if kind == "RayCluster"]
    assert stop["spec"]["suspend"] is True


def _started_on(first: str, podset: str) -> dict[str, Any]:
    """The metadata the start on slice ``first`` (the first of its chain) wrote into a template of pod set
    ``podset``: Kueue's pod set label, the pods naming their Workload and chain."""
    return {"labels": {PODSET: podset}, "annotations": {"kueue.x-k8s.io/workload": first, SLICE_NAME: first}}


@pytest.mark.asyncio
async def test_a_cluster_stopped_on_a_slice_made_while_it_ran_gets_its_templates_back_as_before_its_start(
        ) -> None:
    """The cluster started on its first slice, scaled up: the new slice, made while it ran, copies its
    templates with that start in them. Evicted, the cluster is stopped on it with its templates given back
    without what the start wrote (so a start on another Workload does not conflict with it)."""
    first, new = _slice_name(1), _slice_name(2)
    raw = _raw(4, generation=2)
    for path, podset in ((("headGroupSpec",), "head"), (("workerGroupSpecs", 0), "workers")):
        holder: Any = raw["spec"]
        for part in path:
            holder = holder[part]
        holder["template"] = {**TEMPLATE, "metadata": _started_on(first, podset)}
    sets = [o.PodSet(name=n, count=c, template=o.PodTemplateSpec(
        metadata=o.TemplateMeta(**_started_on(first, n)), spec=o.PodSpec(scheduling_gates=[GATE])))
        for n, c in (("head", 1), ("workers", 4))]
    made = watched_jobs.owned_workload(new, ("ray.io/v1", "RayCluster", "rc", UID), sets, uid=f"{new}-uid")
    made = msgspec.structs.replace(made, metadata=msgspec.structs.replace(
        made.metadata, creation_timestamp="2026-01-01T00:00:05Z",
        annotations={**ELASTIC, SLICE_NAME: first, REPLACES: f"ns/{first}"}))
    integ, mirror, _, client = _setup(raw, made)
    _admit(mirror, new, evicted=True)
    await integ.reconcile("ns/rc")
    (stop,) = [body for kind, _, body in client.patches if kind == "RayCluster"]
    spec = merge_patched(raw["spec"], stop["spec"])
    assert spec["suspend"] is True
    for template in (spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]):
        assert not template.get("metadata"), "nothing of the start left"
        assert template["spec"]["schedulingGates"] == [GATE]


# --- an elastic RayJob: its worker counts read from the RayCluster it runs on ------------------------------------

JOB_UID = "job-uid"
CLUSTER = "job-raycluster-x"
JOB_ON = {"integrations": {"frameworks": ["batch/job", "ray.io/rayjob"]}}


def _job_slice_name(generation: int) -> str:
    digest = hashlib.sha1(f"RayJob\nray.io\njob\n{JOB_UID}\n{generation}".encode()).hexdigest()[:5]
    return f"rayjob-job-{digest}"


def _raw_job(workers: int, *, autoscaling: bool = True, suspend: bool = False) -> dict[str, Any]:
    cluster = _raw(workers)["spec"]
    cluster["enableInTreeAutoscaling"] = autoscaling
    del cluster["suspend"]
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "job", "namespace": "ns", "uid": JOB_UID, "resourceVersion": "5", "generation": 1,
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": dict(ELASTIC)},
            "spec": {"suspend": suspend, "shutdownAfterJobFinishes": True, "submissionMode": "K8sJobMode",
                     "rayClusterSpec": cluster},
            "status": {"jobDeploymentStatus": "Suspended" if suspend else "Running",
                       **({} if suspend else {"rayClusterName": CLUSTER})}}


def _live_cluster(workers: int, *, groups: tuple[str, ...] = ("Workers",), owner_uid: str = JOB_UID) -> Any:
    raw = _raw(workers)
    raw["metadata"].update(name=CLUSTER, uid="cluster-uid", ownerReferences=[
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": owner_uid, "controller": True}])
    raw["spec"]["workerGroupSpecs"] = [{**raw["spec"]["workerGroupSpecs"][0], "groupName": g} for g in groups]
    return msgspec.convert(raw, rc.RayCluster)


def _job_slice(name: str, workers: int, *, created: str = "2026-01-01T00:00:00Z") -> o.Workload:
    wl = watched_jobs.owned_workload(name, ("ray.io/v1", "RayJob", "job", JOB_UID),
                                     [o.PodSet(name="head", count=1), o.PodSet(name="workers", count=workers),
                                      o.PodSet(name="submitter", count=1)], uid=f"{name}-uid")
    meta = msgspec.structs.replace(wl.metadata, creation_timestamp=created,
                                   annotations={**ELASTIC, SLICE_NAME: _job_slice_name(1)})
    return msgspec.structs.replace(wl, metadata=meta)


def _job_setup(raw: dict[str, Any], *slices: o.Workload, live: Any = None, config: dict[str, Any] | None = None
               ) -> tuple[RayJobIntegration, Mirror, list[ev.AnyEvent], Client]:
    integ, _, appended = watched_jobs.integration(RayJobIntegration, raw, *slices,
                                                  config=JOB_ON if config is None else config)
    client = integ.client = Client(raw)
    client.kind = "RayJob"
    if live is not None:
        integ.clusters.known[live.key] = live
    integ.clusters.synced.set()
    return integ, integ.mirror, appended, client


@pytest.mark.asyncio
async def test_an_elastic_rayjob_gets_its_first_slice_with_its_submitter() -> None:
    integ, _, _, client = _job_setup(_raw_job(2, suspend=True))
    await integ.reconcile("ns/job")
    (body,) = client.created
    assert body["metadata"]["name"] == _job_slice_name(1)
    assert body["metadata"]["annotations"] == {**ELASTIC, SLICE_NAME: _job_slice_name(1)}
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [
        ("head", 1), ("workers", 2), ("submitter", 1)]


@pytest.mark.asyncio
async def test_an_autoscaled_rayjob_scales_up_through_a_new_slice_as_its_cluster_grows() -> None:
    """Kueue's ``UpdatePodSets``: with the autoscaler on, the worker counts are the live RayCluster's (the RayJob's
    own spec is not changed); a cluster grown past the admitted slice makes a new slice naming it."""
    integ, mirror, _, client = _job_setup(_raw_job(2), _job_slice("a", 2), live=_live_cluster(4))
    _admit(mirror, "a")
    await integ.reconcile("ns/job")
    (body,) = client.created
    assert body["metadata"]["annotations"][REPLACES] == "ns/a"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [
        ("head", 1), ("workers", 4), ("submitter", 1)]
    assert [p for p in client.patches if p[0] == "RayJob"] == [], "not stopped"


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["no autoscaler", "not its cluster", "no cluster"])
async def test_a_rayjobs_counts_are_its_own_without_an_autoscaled_cluster_it_controls(case: str) -> None:
    live = None if case == "no cluster" else _live_cluster(4, owner_uid="other" if case == "not its cluster" else JOB_UID)
    integ, mirror, _, client = _job_setup(_raw_job(2, autoscaling=case != "no autoscaler"), _job_slice("a", 2),
                                          live=live)
    _admit(mirror, "a")
    await integ.reconcile("ns/job")
    assert client.created == [] and [p for p in client.patches if p[0] == "Workload"] == []


RECORDED = {"kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes": '[{"name":"workers","count":4}]',
            "kueue.x-k8s.io/raycluster-generation": "child-uid-3"}


@pytest.mark.asyncio
@pytest.mark.parametrize("gate", [True, False])
async def test_a_manager_rayjobs_counts_follow_the_worker_counts_recorded_on_it_under_the_gate(gate: bool) -> None:
    """MultiKueueRayInTreeAutoscaling: a RayJob handed to MultiKueue has no cluster on the manager; the worker's
    counts recorded on it (:mod:`connectors.k8s.multikueue_ray_autoscaling`) are its workers' — a new slice. Gate
    off, the annotation is not read."""
    raw = _raw_job(2)
    raw["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    raw["metadata"]["annotations"].update(RECORDED)
    config = {**JOB_ON, "featureGates": {"MultiKueueRayInTreeAutoscaling": gate}}
    integ, mirror, _, client = _job_setup(raw, _job_slice("a", 2), config=config)
    _admit(mirror, "a")
    await integ.reconcile("ns/job")
    if not gate:
        assert client.created == [] and [p for p in client.patches if p[0] == "Workload"] == []
        return
    (body,) = client.created
    assert body["metadata"]["annotations"][REPLACES] == "ns/a"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [
        ("head", 1), ("workers", 4), ("submitter", 1)]


def _named_over(kind: str, name: str, uid: str, extra: str) -> str:
    digest = hashlib.sha1(f"{kind}\nray.io\n{name}\n{uid}\n{extra}".encode()).hexdigest()[:5]
    return f"{kind.lower()}-{name}-{digest}"


@pytest.mark.asyncio
async def test_a_manager_rayjobs_new_slice_is_named_over_its_generation_and_the_recorded_revision() -> None:
    """Kueue's ``GetWorkloadNameExtraPart`` (``raycluster/common.go``, RayJob's ElasticWorkloadNameProvider):
    the slice name is hashed over ``<generation>_<kueue.x-k8s.io/raycluster-generation>``. The reflected
    resize leaves the RayJob's generation as it was, so the admitted slice holds the name of generation 1
    alone, and the new one takes Kueue's name, not a readmission's."""
    raw = _raw_job(2)
    raw["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    raw["metadata"]["annotations"].update(RECORDED)
    config = {**JOB_ON, "featureGates": {"MultiKueueRayInTreeAutoscaling": True}}
    integ, mirror, _, client = _job_setup(raw, _job_slice(_job_slice_name(1), 2), config=config)
    _admit(mirror, _job_slice_name(1))
    await integ.reconcile("ns/job")
    (body,) = client.created
    assert body["metadata"]["name"] == _named_over("RayJob", "job", JOB_UID, "1_child-uid-3")
    assert body["metadata"]["annotations"][REPLACES] == f"ns/{_job_slice_name(1)}"


@pytest.mark.asyncio
async def test_a_manager_rayclusters_new_slice_is_named_over_its_generation_and_the_recorded_revision(
) -> None:
    """The same for a RayCluster handed to MultiKueue (KEP-13243: both kinds fold the revision into the name;
    the Ray MultiKueue adapter computes the RayCluster's slice name with the same extra)."""
    raw = _raw(2)
    raw["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    raw["metadata"]["annotations"].update(RECORDED)
    integ, mirror, _, client = _setup(raw, _slice(_slice_name(1), 2),
                                      config={**ON, "featureGates": {"MultiKueueRayInTreeAutoscaling": True}})
    _admit(mirror, _slice_name(1))
    await integ.reconcile("ns/rc")
    (body,) = client.created
    assert body["metadata"]["name"] == _named_over("RayCluster", "rc", UID, "1_child-uid-3")
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("head", 1), ("workers", 4)]


@pytest.mark.asyncio
@pytest.mark.parametrize("gate", [True, False])
async def test_a_manager_rayclusters_counts_follow_the_worker_counts_recorded_on_it_under_the_gate(
        gate: bool) -> None:
    """The same for a RayCluster handed to MultiKueue: its spec says 2, the worker's autoscaler made it 1 — the
    admitted slice lowered in place; gate off, nothing."""
    raw = _raw(2)
    raw["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    raw["metadata"]["annotations"].update(RECORDED, **{
        "kueue.x-k8s.io/multikueue-runtime-podset-replica-sizes": '[{"name":"workers","count":1}]'})
    integ, mirror, _, client = _setup(raw, _slice("a", 2),
                                      config={**ON, "featureGates": {"MultiKueueRayInTreeAutoscaling": gate}})
    _admit(mirror, "a")
    await integ.reconcile("ns/rc")
    assert client.created == []
    patches = [p for p in client.patches if p[0] == "Workload"]
    if not gate:
        assert patches == []
        return
    (patch,) = patches
    assert patch[2][-1] == {"op": "replace", "path": "/spec/podSets/1/count", "value": 1}


@pytest.mark.asyncio
async def test_a_cluster_worker_group_the_rayjob_lacks_leaves_its_slices_alone() -> None:
    integ, mirror, _, client = _job_setup(_raw_job(2), _job_slice("a", 2),
                                          live=_live_cluster(4, groups=("Workers", "extra")))
    _admit(mirror, "a")
    await integ.reconcile("ns/job")
    assert (client.created, client.patches) == ([], [])


@pytest.mark.asyncio
async def test_a_rayjobs_cluster_pods_are_released_and_its_cluster_changing_marks_it() -> None:
    integ, mirror, _, client = _job_setup(_raw_job(2), _job_slice("a", 2), live=_live_cluster(2))
    _admit(mirror, "a")
    client.pods = [_pod("head-x", "head"), _pod("w-0", "workers"), _pod("w-1", "workers"), _pod("w-2", "workers")]
    await integ.reconcile("ns/job")
    assert client.listed == [[("labelSelector", f"ray.io/cluster={CLUSTER}")]]
    assert [name for kind, name, _ in client.patches if kind == "Pod"] == ["head-x", "w-0", "w-1"]
    integ.dirty.clear()
    integ._cluster_changed({f"ns/{CLUSTER}"})
    assert integ.dirty == {"ns/job"}, "the RayJob that controls the cluster is looked at again"


# --- an elastic RayService: counted by its active RayCluster ------------------------------------------------------

SVC_UID = "svc-uid"
SVC_ON = {"integrations": {"frameworks": ["batch/job", "ray.io/rayservice"]}}


def _raw_service(workers: int) -> dict[str, Any]:
    config = _raw(workers)["spec"]
    config["suspend"] = False
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "svc", "namespace": "ns", "uid": SVC_UID, "resourceVersion": "5", "generation": 1,
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": dict(ELASTIC)},
            "spec": {"rayClusterConfig": config},
            "status": {"activeServiceStatus": {"rayClusterName": "svc-rc"}}}


@pytest.mark.asyncio
async def test_an_autoscaled_rayservice_scales_up_through_a_new_slice_as_its_active_cluster_grows() -> None:
    raw = _raw(4)
    raw["metadata"].update(name="svc-rc", uid="rc2-uid", ownerReferences=[
        {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "svc", "uid": SVC_UID, "controller": True}])
    live = msgspec.convert(raw, rc.RayCluster)
    old = watched_jobs.owned_workload("a", ("ray.io/v1", "RayService", "svc", SVC_UID),
                                      [o.PodSet(name="head", count=1), o.PodSet(name="workers", count=2)], uid="a-uid")
    old = msgspec.structs.replace(old, metadata=msgspec.structs.replace(old.metadata, annotations={**ELASTIC}))
    integ, _, _ = watched_jobs.integration(RayServiceIntegration, _raw_service(2), old, config=SVC_ON)
    client = integ.client = Client(_raw_service(2))
    client.kind = "RayService"
    integ.clusters.known[live.key] = live
    integ.clusters.synced.set()
    _admit(integ.mirror, "a")
    client.pods = [_pod("w-0", "workers")]
    await integ.reconcile("ns/svc")
    (body,) = client.created
    assert body["metadata"]["annotations"][REPLACES] == "ns/a"
    assert [(ps["name"], ps["count"]) for ps in body["spec"]["podSets"]] == [("head", 1), ("workers", 4)]
    assert client.listed == [[("labelSelector", "ray.io/cluster=svc-rc")]], "its active cluster's pods released"
    integ.dirty.clear()
    integ._cluster_changed({"ns/svc-rc"})
    assert integ.dirty == {"ns/svc"}


@pytest.mark.parametrize(("revision", "extra"), [("7", "1_7"), ("", "1"), (None, "1")])
def test_a_rayservices_slices_are_named_over_its_generation_and_any_recorded_revision(
        revision: str | None, extra: str) -> None:
    """RayService is Kueue's third ``ElasticWorkloadNameProvider`` over ``GetWorkloadNameExtraPart``: an empty
    revision counts as none."""
    raw = _raw_service(2)
    if revision is not None:
        raw["metadata"]["annotations"]["kueue.x-k8s.io/raycluster-generation"] = revision
    integ, _, _ = watched_jobs.integration(RayServiceIntegration, raw, config=SVC_ON)
    service = integ.known["ns/svc"]
    assert integ._slice_name(service) == _named_over("RayService", "svc", SVC_UID, extra)



# --- KEP-12100: partial scale-up of a Ray kind ---------------------------------------------------------------------

PARTIAL_ON = {**ON, "featureGates": {"ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp": True}}
STRATEGY = "kueue.x-k8s.io/elastic-job-scale-up-strategy"


def _partial_raw(workers: int, generation: int = 1) -> dict[str, Any]:
    raw = _raw(workers, generation=generation)
    raw["metadata"]["annotations"][STRATEGY] = "partial"
    return raw


def _probe_name(generation: int, level: int) -> str:
    extra = f"{generation}-scale-up-probe-{level}"
    return f"raycluster-rc-{hashlib.sha1(f'RayCluster{chr(10)}ray.io{chr(10)}rc{chr(10)}{UID}{chr(10)}{extra}'.encode()).hexdigest()[:5]}"


@pytest.mark.asyncio
async def test_a_partial_rayclusters_scale_up_slice_asks_for_at_least_what_its_workers_were_granted() -> None:
    """KEP-12100 for a RayCluster: a growing worker group's minCount is the pods the admitted slice was granted
    there; the head, which does not grow, gets none. Atomic (no annotation, or the gate off), none at all."""
    integ, mirror, _, client = _setup(_partial_raw(5, generation=2), _slice("a", 2), config=PARTIAL_ON)
    _admit(mirror, "a")
    await integ.reconcile("ns/rc")
    (body,) = client.created
    assert [(ps["name"], ps["count"], ps.get("minCount")) for ps in body["spec"]["podSets"]] == [
        ("head", 1, None), ("workers", 5, 2)]
    for raw, config in ((_raw(5, generation=2), PARTIAL_ON), (_partial_raw(5, generation=2), ON)):
        integ, mirror, _, client = _setup(raw, _slice("a", 2), config=config)
        _admit(mirror, "a")
        await integ.reconcile("ns/rc")
        assert [ps.get("minCount") for ps in client.created[0]["spec"]["podSets"]] == [None, None]


@pytest.mark.asyncio
async def test_a_raycluster_admitted_in_part_probes_for_the_rest_and_releases_only_the_granted_pods() -> None:
    """Its slice granted 3 of 5 workers: a scale-up probe asks for the whole cluster again, named by the pods
    granted in all (head and workers: 4), its minCount the granted workers; 3 worker pods are released."""
    integ, mirror, _, client = _setup(_partial_raw(5, generation=2), _slice("b", 5), config=PARTIAL_ON)
    _admit(mirror, "b", granted={"workers": 3})
    client.pods = [_pod(f"w-{i}", "workers") for i in range(5)]
    await integ.reconcile("ns/rc")
    (probe,) = client.created
    assert probe["metadata"]["name"] == _probe_name(2, 4)
    assert probe["metadata"]["annotations"][REPLACES] == "ns/b"
    assert [(ps["name"], ps["count"], ps.get("minCount")) for ps in probe["spec"]["podSets"]] == [
        ("head", 1, None), ("workers", 5, 3)]
    assert [name for kind, name, _ in client.patches if kind == "Pod"] == ["w-0", "w-1", "w-2"]
