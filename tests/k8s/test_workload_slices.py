"""An elastic batch/v1 Job's workload slices, as Kueue's ``pkg/workloadslicing`` keeps them
(connectors/k8s/workload_slices.py and the Job integration's slice pass): which slice the Job runs on, a scale-down
in place, a scale-up as a new slice naming the old one, the old slice finished ``OutOfSync``, the running Job not
stopped while its new slice waits, its pods ungated once their slice is admitted, and the Job webhooks' rules
for elastic Jobs (the pod template gated; the annotation immutable). No cluster needed."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import msgspec
import pytest
from fixtures.jobs import UID, integration, job, show_finished, template

from connectors.k8s import job_validation, workload_slices
from connectors.k8s.errors import Conflict
from connectors.k8s.jobs import JobIntegration
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.mirror import Mirror
from connectors.k8s.webhook import job_patch
from events import objects as o
from events import schema as ev
from projections.workloads import ADMITTED, FINISHED, PENDING, RESERVED

ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
GATE_ON = {"ElasticJobsViaWorkloadSlices": True}
GATE_OFF = {"ElasticJobsViaWorkloadSlices": False}
PARTIAL_GATE = "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp"
PARTIAL = {**ELASTIC, "kueue.x-k8s.io/elastic-job-scale-up-strategy": "partial"}


def _slice_name(generation: int, probe: int | None = None) -> str:
    extra = str(generation) if probe is None else f"{generation}-scale-up-probe-{probe}"
    digest = hashlib.sha1(f"Job\nbatch\ntrain\n{UID}\n{extra}".encode()).hexdigest()[:5]
    return f"job-train-{digest}"


def _slice(name: str, count: int, *, created: str = "2026-01-01T00:00:00Z", replaces: str = "") -> o.Workload:
    annotations = {**ELASTIC, SLICE_NAME: _slice_name(1)}
    if replaces:
        annotations[REPLACES] = replaces
    return o.Workload(
        metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"{name}-uid", resource_version="3",
                              creation_timestamp=created, annotations=annotations,
                              owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name="train",
                                                                 uid=UID, controller=True)]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=count, template=template())]))


def _elastic_job(parallelism: int, *, suspend: bool = False, generation: int = 1,
                 annotations: dict[str, str] | None = None) -> o.Job:
    j = job(parallelism=parallelism, completions=None, suspend=suspend, annotations=annotations or ELASTIC)
    return msgspec.structs.replace(j, metadata=msgspec.structs.replace(j.metadata, generation=generation))


def _phase(mirror: Mirror, name: str, phase: str, *, evicted: bool = False, granted: int | None = None,
           stored: tuple[str, ...] | None = None) -> None:
    """``granted``: the pods the admission counts (the spec's count unless given: a partial admission);
    ``stored``: the conditions the stored Workload shows (``Type`` True, ``Type=Status`` otherwise), when
    it differs from the log (an eviction's write not done, or a condition left over); an eviction is written
    unless given."""
    info = mirror.state.workloads[f"ns/{name}"]
    info.phase = phase
    if phase in (RESERVED, ADMITTED):
        count = mirror.workloads[f"ns/{name}"].spec.pod_sets[0].count if granted is None else granted
        info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "default"}, resource_usage={"cpu": str(count)}, count=count)])
        info.set_condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5)
    if phase == ADMITTED:
        info.set_condition("Admitted", "True", "Admitted", "The workload is admitted", 5)
    if evicted:
        info.evicted = "Preempted"
        info.set_condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload", 6)
    if stored is None and evicted:
        stored = tuple(f"{c.type}={c.status}" for c in info.conditions)
    if stored is not None:
        obs = mirror.workloads[f"ns/{name}"]
        conditions = [o.Condition(type=t, status=s or "True", reason=t,
                                  last_transition_time="2026-01-01T00:00:05Z")
                      for t, _, s in (c.partition("=") for c in stored)]
        mirror.workloads[f"ns/{name}"] = msgspec.structs.replace(
            obs, status=msgspec.structs.replace(obs.status, conditions=conditions))


class Client:
    """Serves the Job as the log holds it; records every write, each of which succeeds."""

    def __init__(self, job_doc: dict[str, Any]) -> None:
        self.job_doc = job_doc
        self.patches: list[tuple[str, str, Any, str]] = []
        self.created: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.listed: list[tuple[str, Any]] = []

    async def request(self, method: str, path: str, *, query: Any = None, **kw: Any) -> bytes:
        assert method == "GET" and path == "/api/v1/namespaces/ns/pods"
        self.listed.append((path, query))
        return msgspec.json.encode({"items": self.pods})

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        assert resource.kind == "Job"
        return msgspec.json.encode(self.job_doc)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                    content_type: str = "application/merge-patch+json") -> bytes:
        self.patches.append((resource.kind, name, body, content_type))
        return msgspec.json.encode({**self.job_doc, "metadata": {**self.job_doc["metadata"], "resourceVersion": "9"}})

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        self.created.append(body)
        return msgspec.json.encode(body)


def _setup(j: o.Job, *slices: o.Workload, gate: bool = True, partial: bool | None = None
           ) -> tuple[JobIntegration, Mirror, list[ev.AnyEvent], Client]:
    """``gate``: ElasticJobsViaWorkloadSlices; ``partial``: ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp
    (None: as Kueue's default)."""
    before: tuple[ev.AnyEvent, ...] = ()
    gates = {**({} if gate else GATE_OFF), **({} if partial is None else {PARTIAL_GATE: partial})}
    if gates:
        before = (ev.ConfigRecorded(time=1, writer="test", id="gates", document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}),)
    jobs, mirror, appended = integration(*slices, j, before=before)
    client = jobs.client = Client(msgspec.to_builtins(j))  # type: ignore[assignment]
    return jobs, mirror, appended, client


def _slice_and_probe(parallelism: int, generation: int
                     ) -> tuple[str, str, tuple[JobIntegration, Mirror, list[ev.AnyEvent], Client]]:
    """A partial Job's slice of generation 2 (10 pods) and its scale-up probe (level 7) waiting behind it."""
    partial_slice, probe = _slice_name(2), _slice_name(2, probe=7)
    return partial_slice, probe, _setup(
        _elastic_job(parallelism, generation=generation, annotations=PARTIAL), _slice(partial_slice, 10),
        _slice(probe, 10, replaces=f"ns/{partial_slice}", created="2026-01-01T00:00:09Z"), partial=True)


# --- the decision -----------------------------------------------------------------------------------------------


def _pairs(mirror: Mirror, *names: str) -> list[tuple[o.Workload, Any]]:
    return [(mirror.workloads[f"ns/{n}"], mirror.state.workloads[f"ns/{n}"]) for n in names]


def test_slice_names_hash_the_generation_too() -> None:
    assert workload_slices.slice_name("Job", "batch", "train", UID, 1) == _slice_name(1)
    assert _slice_name(1) != _slice_name(2)


@pytest.mark.parametrize(("phase", "job_count", "want"), [
    (ADMITTED, 4, "keep"),
    (ADMITTED, 2, "counts"),  # a scale-down of an admitted slice: in place
    (ADMITTED, 6, "new"),  # a scale-up of an admitted slice: a new slice
    (RESERVED, 6, "new"),
    (PENDING, 6, "counts"),  # no quota held: in place
    (PENDING, 2, "counts"),
])
def test_one_live_slice(phase: str, job_count: int, want: str) -> None:
    _, mirror, _, _ = _setup(_elastic_job(job_count), _slice("a", 4))
    _phase(mirror, "a", phase)
    step = workload_slices.ensure({"main": job_count}, _pairs(mirror, "a"))
    got = "new" if step.keep is None else "counts" if step.set_counts else "keep"
    assert (got, step.applies, step.finish_old, step.error) == (want, True, None, "")


def test_other_pod_set_names_leave_the_slices_aside() -> None:
    _, mirror, _, _ = _setup(_elastic_job(4), _slice("a", 4))
    assert not workload_slices.ensure({"workers": 4}, _pairs(mirror, "a")).applies


def test_finished_slices_do_not_count() -> None:
    _, mirror, _, _ = _setup(_elastic_job(6), _slice("a", 4), _slice("b", 6, replaces="ns/a"))
    _phase(mirror, "a", FINISHED)
    _phase(mirror, "b", ADMITTED)
    step = workload_slices.ensure({"main": 6}, _pairs(mirror, "a", "b"))
    assert step.keep is not None and step.keep[0].metadata.name == "b" and not step.set_counts


_SHOWN = ("QuotaReserved", "Admitted")


@pytest.mark.parametrize(("old_phase", "evicted", "stored", "finished"), [
    (ADMITTED, False, _SHOWN, False), (PENDING, False, (), True),  # no quota held: finished
    # evicted, its quota given back: finished (still holding quota it is the Job's first, Kueue #15661:
    # test_kueue_ensure_workload_slices)
    (PENDING, True, ("Evicted",), True),
    # evicted in the log, still admitted as stored (its write may be refused)
    (ADMITTED, True, _SHOWN, False),
    (RESERVED, True, ("QuotaReserved",), False),  # the same for a slice that only holds quota
    # Kueue finishes it once the stored Workload shows Evicted=True (IsEvicted): a readmitted slice keeps its
    # Evicted=False ("Previously: ...") and is not finished for it
    (ADMITTED, False, (*_SHOWN, "Evicted=False"), False),
    # readmitted in the log, its stored Workload still the evicted one (the readmission not written yet): kept
    (ADMITTED, False, ("Evicted",), False),
])
def test_two_live_slices_the_new_one_is_the_jobs(old_phase: str, evicted: bool, stored: tuple[str, ...],
                                                 finished: bool) -> None:
    # one second apart or in the same second: the replacing slice is the newer either way
    _, mirror, _, _ = _setup(_elastic_job(8), _slice("b", 6, replaces="ns/a"), _slice("a", 4))
    _phase(mirror, "a", old_phase, evicted=evicted, stored=stored)
    step = workload_slices.ensure({"main": 8}, _pairs(mirror, "b", "a"))
    assert step.keep is not None and step.keep[0].metadata.name == "b" and step.set_counts
    assert (step.finish_old is not None and step.finish_old[0].metadata.name == "a") is finished


def test_slice_annotations() -> None:
    assert workload_slices.slice_annotations("first", []) == {**ELASTIC, SLICE_NAME: "first"}
    _, mirror, _, _ = _setup(_elastic_job(4), _slice("a", 4))
    assert workload_slices.slice_annotations("second", _pairs(mirror, "a")) == {
        **ELASTIC, REPLACES: "ns/a", SLICE_NAME: _slice_name(1)}


# --- the Job integration --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_new_elastic_job_gets_its_first_slice() -> None:
    jobs, _, _, client = _setup(_elastic_job(4, suspend=True))
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(1)
    assert body["metadata"]["annotations"] == {**ELASTIC, SLICE_NAME: _slice_name(1)}


@pytest.mark.asyncio
async def test_without_the_gate_an_annotated_job_gets_a_plain_workload() -> None:
    jobs, _, _, client = _setup(_elastic_job(4, suspend=True), gate=False)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] != _slice_name(1) and "annotations" not in body["metadata"]


@pytest.mark.asyncio
async def test_an_admitted_slice_scaled_down_takes_the_count_in_place() -> None:
    jobs, mirror, appended, client = _setup(_elastic_job(2, generation=2), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    assert client.created == [] and appended == []
    assert client.patches == [("Workload", "a", [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "3"},
        {"op": "replace", "path": "/spec/podSets/0/count", "value": 2}], "application/json-patch+json")]


@pytest.mark.asyncio
async def test_an_admitted_slice_scaled_up_gets_a_new_slice_and_the_job_runs_on() -> None:
    jobs, mirror, appended, client = _setup(_elastic_job(6, generation=2), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(2)
    assert body["metadata"]["annotations"] == {**ELASTIC, REPLACES: "ns/a", SLICE_NAME: _slice_name(1)}
    assert body["spec"]["podSets"][0]["count"] == 6
    assert client.patches == [], "neither the Job nor the old slice is touched"
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["CreatedWorkload"]


@pytest.mark.asyncio
async def test_the_running_job_is_not_stopped_while_its_new_slice_waits() -> None:
    jobs, mirror, appended, client = _setup(_elastic_job(6, generation=2), _slice("a", 4),
                                            _slice(_slice_name(2), 6, replaces="ns/a", created="2026-01-01T00:00:09Z"))
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    assert [p for p in client.patches if p[0] == "Job"] == [], "no stop"
    assert client.created == [] and [e for e in appended if isinstance(e, ev.WorkloadFinished)] == []


@pytest.mark.asyncio
async def test_once_the_new_slice_replaced_the_old_the_job_runs_on_it_and_nothing_is_deleted() -> None:
    new = _slice_name(2)
    jobs, mirror, appended, client = _setup(_elastic_job(6, generation=2), _slice("a", 4),
                                            _slice(new, 6, replaces="ns/a", created="2026-01-01T00:00:09Z"))
    _phase(mirror, "a", FINISHED)
    _phase(mirror, new, ADMITTED)
    await jobs.reconcile("ns/train")
    assert [p for p in client.patches if p[0] == "Job"] == [] and client.created == []
    assert not [e for e in appended if isinstance(e, ev.WorkloadFinished)]


@pytest.mark.asyncio
async def test_an_evicted_old_slice_beside_a_new_one_is_finished_out_of_sync() -> None:
    jobs, mirror, appended, _ = _setup(_elastic_job(6, generation=2), _slice("a", 4),
                                       _slice(_slice_name(2), 6, replaces="ns/a", created="2026-01-01T00:00:09Z"))
    _phase(mirror, "a", PENDING, evicted=True)  # its quota given back once the Job stopped (Kueue #15661)
    await jobs.reconcile("ns/train")
    (finished,) = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert (finished.key, finished.reason, finished.message) == (
        "ns/a", "OutOfSync", "The workload slice is out of sync with its parent job")


def _pod(name: str, *gates: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": f"rv-{name}"},
            "spec": {"schedulingGates": [{"name": g} for g in gates]} if gates else {"spec": {}}}


def test_ungating_a_pod_lifts_only_the_elastic_gate() -> None:
    gate, tas = "kueue.x-k8s.io/elastic-job", "kueue.x-k8s.io/topology"
    test = {"op": "test", "path": "/metadata/resourceVersion", "value": "rv-a"}
    assert workload_slices.ungate_ops(_pod("a", gate)) == [test, {"op": "remove", "path": "/spec/schedulingGates"}]
    assert workload_slices.ungate_ops(_pod("a", tas, gate)) == [
        test, {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": tas}]}]
    assert workload_slices.ungate_ops(_pod("a", tas)) is None


@pytest.mark.asyncio
@pytest.mark.parametrize("phase", [ADMITTED, PENDING])
async def test_the_pods_of_a_job_running_on_an_admitted_slice_are_ungated(phase: str) -> None:
    jobs, mirror, _, client = _setup(_elastic_job(4), _slice("a", 4))
    _phase(mirror, "a", phase)
    client.pods = [_pod("p1", "kueue.x-k8s.io/elastic-job"), _pod("p2")]
    await jobs.reconcile("ns/train")
    pod_patches = [(name, body) for kind, name, body, _ in client.patches if kind == "Pod"]
    if phase == PENDING:  # the slice waits: its pods too (and the running Job is not stopped)
        assert pod_patches == [] and client.patches == []
        return
    assert client.listed == [("/api/v1/namespaces/ns/pods",
                              [("labelSelector", f"batch.kubernetes.io/controller-uid={UID}")])]
    assert pod_patches == [("p1", [{"op": "test", "path": "/metadata/resourceVersion", "value": "rv-p1"},
                                   {"op": "remove", "path": "/spec/schedulingGates"}])]
    await jobs.reconcile("ns/train")
    assert len(client.listed) == 1, "once per version of the Job"


@pytest.mark.asyncio
async def test_a_slice_evicted_while_its_pods_are_ungated_leaves_the_rest_gated() -> None:
    """The fold may evict the slice while a pod's gate is lifted (the connector folds the log concurrently): the
    pods not yet ungated stay gated; the eviction's record brings the pass that stops the job."""
    jobs, mirror, _, client = _setup(_elastic_job(4), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    client.pods = [_pod("p1", "kueue.x-k8s.io/elastic-job"), _pod("p2", "kueue.x-k8s.io/elastic-job")]
    patch = client.patch

    async def patch_then_evicted(resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                                 content_type: str = "application/merge-patch+json") -> bytes:
        answer = await patch(resource, name, body, namespace, subresource, content_type)
        if resource.kind == "Pod":
            mirror.state.workloads["ns/a"].evicted = "Preempted"
        return answer

    client.patch = patch_then_evicted  # type: ignore[method-assign]
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Pod"] == ["p1"]
    assert jobs.stats.pods_ungated == 1


@pytest.mark.asyncio
async def test_a_pod_changed_while_its_gate_is_lifted_is_tried_again_for_the_same_job_version() -> None:
    """The TAS ungater (or anyone) may change a pod between the list and the patch, whose resourceVersion test then
    fails (the client raises the apiserver's 422 as a Conflict: tests/integration/kube/test_client_patch.py): Kueue
    requeues on that error; the Job's version does not change for a pod that stays gated, so the pass must not
    count as done."""
    jobs, mirror, _, client = _setup(_elastic_job(4), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    client.pods = [_pod("p1", "kueue.x-k8s.io/elastic-job")]
    conflicted: list[str] = []
    patch = client.patch

    async def patch_once_stale(resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "",
                               content_type: str = "application/merge-patch+json") -> bytes:
        if resource.kind == "Pod" and not conflicted:
            conflicted.append(name)
            raise Conflict("the object has been modified", 409, "Conflict")
        return await patch(resource, name, body, namespace, subresource, content_type)

    client.patch = patch_once_stale  # type: ignore[method-assign]
    await jobs.reconcile_guarded("ns/train")
    assert conflicted == ["p1"] and jobs.stats.pods_ungated == 0
    assert jobs._retry._at, "a retry is due"
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Pod"] == ["p1"]
    assert jobs.stats.pods_ungated == 1


def test_the_job_webhook_gates_an_elastic_jobs_pods() -> None:
    doc = {"metadata": {"name": "train", "namespace": "ns", "annotations": ELASTIC,
                        "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"suspend": True, "template": {"spec": {"containers": []}}}}
    gate = {"name": "kueue.x-k8s.io/elastic-job"}
    assert job_patch(doc, False, elastic_jobs=True) == [
        {"op": "add", "path": "/spec/template/spec/schedulingGates", "value": [gate]}]
    assert job_patch(doc, False, elastic_jobs=False) == []
    doc["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "other"}]
    assert job_patch(doc, False, elastic_jobs=True) == [
        {"op": "add", "path": "/spec/template/spec/schedulingGates/-", "value": gate}]
    doc["spec"]["template"]["spec"]["schedulingGates"] = [gate]
    assert job_patch(doc, False, elastic_jobs=True) == []
    doc["metadata"]["annotations"] = {}
    doc["spec"]["template"]["spec"] = {}
    assert job_patch(doc, False, elastic_jobs=True) == [], "not elastic"


# --- partial scale-up (ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp) -----------------------------------


@pytest.mark.parametrize(("partial", "annotations", "want"), [
    (True, PARTIAL, True),
    (False, PARTIAL, False),  # the gate off (Kueue's default)
    (None, PARTIAL, False),
    (True, ELASTIC, False),  # no strategy: atomic
    (True, {**ELASTIC, "kueue.x-k8s.io/elastic-job-scale-up-strategy": "atomic"}, False),
    (True, {**ELASTIC, "kueue.x-k8s.io/elastic-job-scale-up-strategy": "Partial"}, False),
    (True, {"kueue.x-k8s.io/elastic-job-scale-up-strategy": "partial"}, False),  # not elastic
])
def test_partial_scale_up_needs_the_gate_an_elastic_job_and_the_strategy(
        partial: bool | None, annotations: dict[str, str], want: bool) -> None:
    _, mirror, _, _ = _setup(_elastic_job(4), partial=partial)
    assert workload_slices.partial_scale_up(mirror.state, annotations) is want


def test_a_scale_up_probe_is_named_by_generation_and_pods_granted() -> None:
    probe = workload_slices.slice_name("Job", "batch", "train", UID, 2, probe=7)
    assert probe == _slice_name(2, probe=7)
    assert len({probe, _slice_name(2), _slice_name(2, probe=9)}) == 3


def test_granted_is_the_admissions_count_within_the_spec() -> None:
    _, mirror, _, _ = _setup(_elastic_job(10), _slice("a", 10), _slice("b", 10), _slice("c", 10))
    _phase(mirror, "a", ADMITTED, granted=7)
    _phase(mirror, "b", ADMITTED, granted=12)  # a scale-down in place lowers the spec, not the admission
    assert [workload_slices.granted(mirror.state.workloads[f"ns/{n}"]) for n in "abc"] == [
        {"main": 7}, {"main": 10}, {"main": 10}]


@pytest.mark.parametrize(("phase", "granted", "partial", "want"), [
    (ADMITTED, 7, True, "new"),  # admitted in part: a probe for the rest
    (ADMITTED, 7, False, "keep"),  # atomic: never admitted in part, nothing more asked
    (ADMITTED, 10, True, "keep"),  # all granted: probing stops
    (RESERVED, 7, True, "keep"),  # not admitted yet
])
def test_a_slice_admitted_in_part_gets_a_probe(phase: str, granted: int, partial: bool, want: str) -> None:
    _, mirror, _, _ = _setup(_elastic_job(10), _slice("a", 10))
    _phase(mirror, "a", phase, granted=granted)
    step = workload_slices.ensure({"main": 10}, _pairs(mirror, "a"), partial=partial)
    assert ("new" if step.keep is None else "keep", step.set_counts, step.error) == (want, False, "")


def test_a_probe_comes_after_the_partial_slice_it_replaces_whatever_their_names() -> None:
    """The first slice finished (replaced), the partial slice and its probe made in one second: both replace
    something, but only the partial slice is live, so the probe is the new one. Ordered by name ("p" < "s"), the
    probe was taken for the old slice and finished OutOfSync (a kube flake under load)."""
    _, mirror, _, _ = _setup(_elastic_job(10, annotations=PARTIAL), _slice("a", 5),
                             _slice("s", 10, created="2026-01-01T00:00:01Z", replaces="ns/a"),
                             _slice("p", 10, created="2026-01-01T00:00:01Z", replaces="ns/s"), partial=True)
    _phase(mirror, "a", FINISHED)
    _phase(mirror, "s", ADMITTED, granted=7)
    owned = _pairs(mirror, "a", "p", "s")
    assert [obs.metadata.name for obs, _ in workload_slices.not_finished(owned)] == ["s", "p"]
    step = workload_slices.ensure({"main": 10}, owned, partial=True)
    assert (step.keep[0].metadata.name if step.keep else None, step.finish_old, step.error) == ("p", None, "")


def test_baseline_is_what_the_old_slice_was_granted_for_each_growing_pod_set() -> None:
    _, mirror, _, _ = _setup(_elastic_job(10), _slice("a", 10))
    assert workload_slices.baseline({"main": 10}, _pairs(mirror, "a")) == {}, "no quota held: nothing to grow past"
    _phase(mirror, "a", ADMITTED, granted=7)
    assert workload_slices.baseline({"main": 10}, _pairs(mirror, "a")) == {"main": 7}
    assert workload_slices.baseline({"main": 6}, _pairs(mirror, "a")) == {}, "not growing"
    assert workload_slices.baseline({"main": 10}, []) == {}, "a first slice"


@pytest.mark.asyncio
@pytest.mark.parametrize(("partial", "annotations", "min_count"), [
    (True, PARTIAL, 5), (True, ELASTIC, None), (False, PARTIAL, None)])
async def test_a_partial_scale_up_slice_asks_for_at_least_the_old_slices_pods(
        partial: bool, annotations: dict[str, str], min_count: int | None) -> None:
    jobs, mirror, _, client = _setup(_elastic_job(10, generation=2, annotations=annotations), _slice("a", 5),
                                     partial=partial)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(2), "a scale-up is named by the generation alone"
    assert body["metadata"]["annotations"][REPLACES] == "ns/a"
    assert body["spec"]["podSets"][0]["count"] == 10
    assert body["spec"]["podSets"][0].get("minCount") == min_count


@pytest.mark.asyncio
async def test_a_slice_admitted_in_part_gets_a_probe_for_the_whole_job() -> None:
    """Kueue's KEP-12100 step 1: the Job scaled to 10, its slice admitted with 7; a further slice asks for the 10
    again, at least the 7 granted, named apart from the slice it replaces (same generation), while the Job runs on."""
    partial_slice = _slice_name(2)
    jobs, mirror, appended, client = _setup(_elastic_job(10, generation=2, annotations=PARTIAL),
                                            _slice(partial_slice, 10), partial=True)
    _phase(mirror, partial_slice, ADMITTED, granted=7)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(2, probe=7) != partial_slice
    assert body["metadata"]["annotations"] == {**ELASTIC, REPLACES: f"ns/{partial_slice}",
                                               SLICE_NAME: _slice_name(1)}
    assert (body["spec"]["podSets"][0]["count"], body["spec"]["podSets"][0]["minCount"]) == (10, 7)
    assert [p for p in client.patches if p[0] == "Job"] == [], "the Job runs on"
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["CreatedWorkload"]


@pytest.mark.asyncio
async def test_a_pending_probe_beside_its_slice_is_the_jobs_and_no_other_is_made() -> None:
    partial_slice, probe, (jobs, mirror, _, client) = _slice_and_probe(12, 3)
    _phase(mirror, partial_slice, ADMITTED, granted=7)
    await jobs.reconcile("ns/train")
    assert client.created == []
    assert client.patches == [("Workload", probe, [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "3"},
        {"op": "replace", "path": "/spec/podSets/0/count", "value": 12}], "application/json-patch+json")], \
        "KEP-12100 step 2: the Job scaled on, its waiting probe takes the count"


@pytest.mark.asyncio
async def test_only_the_pods_a_partial_admission_grants_are_ungated() -> None:
    jobs, mirror, _, client = _setup(_elastic_job(10, generation=2, annotations=PARTIAL), _slice("a", 10),
                                     partial=True)
    _phase(mirror, "a", ADMITTED, granted=7)
    gate = "kueue.x-k8s.io/elastic-job"
    client.pods = [_pod(f"p{i}") for i in range(5)] + [_pod(f"p{i}", gate) for i in range(5, 10)]
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Pod"] == ["p5", "p6"], \
        "7 granted, 5 running: 2 released, while the probe for the rest is made"
    assert [b["metadata"]["name"] for b in client.created] == [_slice_name(2, probe=7)]


@pytest.mark.asyncio
async def test_the_admitted_slice_a_new_one_waits_behind_releases_its_pods_once() -> None:
    """Pods made after the old slice was admitted (the Job's scale-up) are released as far as it was granted,
    while the new slice waits; the others wait for it."""
    jobs, mirror, _, client = _setup(_elastic_job(6, generation=2), _slice("a", 4),
                                     _slice(_slice_name(2), 6, replaces="ns/a", created="2026-01-01T00:00:09Z"))
    _phase(mirror, "a", ADMITTED)
    gate = "kueue.x-k8s.io/elastic-job"
    client.pods = [_pod(f"p{i}", gate) for i in range(6)]
    await jobs.reconcile("ns/train")
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Pod"] == ["p0", "p1", "p2", "p3"]
    assert len(client.listed) == 1, "once per version of the Job"
    assert client.created == [] and [p for p in client.patches if p[0] != "Pod"] == []


@pytest.mark.asyncio
async def test_a_scale_up_pass_repeated_before_the_watch_shows_the_new_slice_writes_nothing_again() -> None:
    """Releasing the old slice's pods and making the new slice are each done once for a version of the Job."""
    jobs, mirror, _, client = _setup(_elastic_job(6, generation=2), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    client.pods = [_pod("p0", "kueue.x-k8s.io/elastic-job")]
    for _ in range(3):
        await jobs.reconcile("ns/train")
    assert (len(client.listed), len(client.created)) == (1, 1)


# --- the Job webhook --------------------------------------------------------------------------------------------


def _doc(annotations: dict[str, str], *, suspend: bool = False, labels: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": "train", "namespace": "ns", "annotations": annotations,
                         "labels": {"kueue.x-k8s.io/queue-name": "lq", **(labels or {})}},
            "spec": {"parallelism": 2, "suspend": suspend, "template": {"spec": {"containers": []}}}}


@pytest.mark.parametrize(("old", "new", "now"), [({}, ELASTIC, "true"), (ELASTIC, {}, "false")])
def test_whether_a_job_is_elastic_does_not_change(old: dict, new: dict, now: str) -> None:
    errors = job_validation.update_errors(_doc(old), _doc(new), GATE_ON)
    # Kueue #11342: the error names the annotation where it is (metadata.annotations), not metadata.labels
    assert errors == [f"metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: {now}: field is "
                      "immutable"]
    assert job_validation.update_errors(_doc(old), _doc(new), GATE_OFF) == [], "the annotation means nothing"


def test_a_running_elastic_job_may_change_its_prebuilt_workload() -> None:
    prebuilt = "kueue.x-k8s.io/prebuilt-workload-name"
    old, new = _doc(ELASTIC, labels={prebuilt: "a"}), _doc(ELASTIC, labels={prebuilt: "b"})
    assert job_validation.update_errors(old, new, GATE_ON) == []
    assert job_validation.update_errors(old, new, GATE_OFF) == [
        f'metadata.labels[{prebuilt}]: Invalid value: "b": field is immutable']


# --- the first slice, the pods' chain name, how many pods are released -------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("suspend", [False, True])
async def test_an_elastic_job_with_active_pods_and_no_slice_gets_its_first_slice_and_runs_on(suspend: bool) -> None:
    """Kueue's reconciler neither suspends a workload-slice Job for its missing Workload nor waits for its pods to
    go: the first slice is made at once, and the pods wait at their elastic-job gate."""
    j = _elastic_job(4, suspend=suspend)
    j = msgspec.structs.replace(j, status=msgspec.structs.replace(j.status, active=2))
    jobs, _, appended, client = _setup(j)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(1)
    assert body["metadata"]["annotations"] == {**ELASTIC, SLICE_NAME: _slice_name(1)}
    assert client.patches == [], "the Job is not suspended"
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == ["CreatedWorkload"]


@pytest.mark.asyncio
async def test_a_job_started_on_its_slice_gives_its_pods_the_chain_name(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs, mirror, _, client = _setup(_elastic_job(4, suspend=True), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    monkeypatch.setattr("connectors.k8s.jobframework.admission_shown", lambda wl, obs: True)  # stored as decided
    await jobs.reconcile("ns/train")
    (start,) = [body for kind, _, body, _ in client.patches if kind == "Job"]
    assert start["spec"]["suspend"] is False
    assert start["spec"]["template"]["metadata"]["annotations"] == {
        SLICE_NAME: _slice_name(1), "kueue.x-k8s.io/workload": "a"}, "the chain's name beside the slice's own"


def test_the_chain_name_on_the_pods_is_the_slices_or_its_own_name() -> None:
    jobs, mirror, _, _ = _setup(_elastic_job(4), _slice("a", 4))
    obs = mirror.workloads["ns/a"]
    assert workload_slices.pod_slice_name(mirror.state, obs) == _slice_name(1)
    unnamed = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, annotations=ELASTIC))
    assert workload_slices.pod_slice_name(mirror.state, unnamed) == "a"
    plain = msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, annotations={}))
    assert workload_slices.pod_slice_name(mirror.state, plain) is None
    _, off, _, _ = _setup(_elastic_job(4), _slice("a", 4), gate=False)
    assert workload_slices.pod_slice_name(off.state, obs) is None, "gate off: not an elastic slice"


def _phased(name: str, phase: str, *gates: str) -> dict[str, Any]:
    return {**_pod(name, *gates), "status": {"phase": phase}}


def test_only_as_many_gated_pods_as_the_slice_counts_are_released() -> None:
    gate = "kueue.x-k8s.io/elastic-job"
    pods = [_phased("p5", "Pending", gate), _phased("p1", "Running"), _phased("p2", "Succeeded"),
            _phased("p3", "Pending", gate), _phased("p4", "Pending", gate), _phased("p6", "Failed", gate)]
    names = [p["metadata"]["name"] for p in workload_slices.pods_to_ungate(pods, 3)]
    assert names == ["p3", "p4"], "room for 3 - 1 running; the terminated ones count for nothing; lowest name first"
    assert workload_slices.pods_to_ungate(pods, 1) == []
    assert workload_slices.pods_to_ungate([_phased("p1", "Running")] * 3, 2) == []


@pytest.mark.asyncio
async def test_the_job_integration_releases_only_the_pods_its_slice_counts() -> None:
    gate = "kueue.x-k8s.io/elastic-job"
    jobs, mirror, _, client = _setup(_elastic_job(2), _slice("a", 2))
    _phase(mirror, "a", ADMITTED)
    client.pods = [_phased("p3", "Pending", gate), _phased("p1", "Running"), _phased("p2", "Pending", gate)]
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Pod"] == ["p2"]
    assert jobs.stats.pods_ungated == 1


def _reserved_doc(count: int, reclaimable: int, annotations: dict[str, str]) -> dict[str, Any]:
    """A Workload holding quota for ``count`` pods of ``main``, ``reclaimable`` of them reclaimable, as the
    apiserver hands it to the validating webhook."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "3", "annotations": annotations},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                   "admission": {"clusterQueue": "cq", "podSetAssignments": [
                       {"name": "main", "flavors": {"cpu": "a"}, "resourceUsage": {"cpu": str(count)},
                        "count": count}]},
                   "reclaimablePods": [{"name": "main", "count": reclaimable}]}}


def _patched(doc: dict[str, Any], ops: list[dict]) -> dict[str, Any]:
    """``doc`` after a JSON patch of ``test`` and ``replace`` operations (what :func:`counts_patch` writes)."""
    out = msgspec.json.decode(msgspec.json.encode(doc))
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        node = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key = int(last) if isinstance(node, list) else last
        if op["op"] == "test":
            assert node[key] == op["value"]
        else:
            node[key] = op["value"]
    return out


def _refused(new: dict[str, Any], old: dict[str, Any], gates: dict[str, bool] | None = None) -> str | None:
    from connectors.k8s.validating import refusal
    return refusal("Workload", "UPDATE", new, old, gates or {})


def test_a_scale_down_below_the_reclaimable_pods_is_not_refused() -> None:
    """Kueue (#12670): an elastic Job scaled below the pods it already reclaimed must not wedge its slice. The
    counts patch leaves ``reclaimablePods`` as it was, above the lowered count; the Job integration's next write
    lowers it, or drops it."""
    before = _reserved_doc(8, 4, {**ELASTIC, SLICE_NAME: "w"})
    obs = msgspec.convert(before, o.Workload, strict=False)
    scaled = _patched(before, workload_slices.counts_patch(obs, {"main": 2}))
    assert scaled["spec"]["podSets"][0]["count"] == 2
    assert _refused(scaled, before) is None
    from events.manifests import check_foldable
    check_foldable(msgspec.convert(scaled, o.Workload, strict=False), "stored")  # the watch takes it
    lowered = _patched(scaled, [{"op": "replace", "path": "/status/reclaimablePods/0/count", "value": 1}])
    assert _refused(lowered, scaled) is None
    dropped = msgspec.json.decode(msgspec.json.encode(scaled))
    dropped["status"]["reclaimablePods"] = []
    assert _refused(dropped, scaled) is None
    # the scale-down and the lower count in one write
    assert _refused(_patched(scaled, [{"op": "replace", "path": "/status/reclaimablePods/0/count", "value": 1}]),
                    before) is None


def test_a_slice_scaled_below_its_admitted_count_may_lower_a_reclaimable_count_still_under_its_pod_set() -> None:
    """kueue#12958 (Kueue #13044): admitted for 20 pods, scaled in place to 10, the Job's recount takes the
    reclaimable count from 9 to 0. The pod set (10) still counts more than 9: only the admission's granted count
    tells the scale-down, and the lower count is taken, as Kueue takes it; dropped as well. A slice still at its
    admitted count keeps the rule."""
    admitted = _reserved_doc(20, 9, {**ELASTIC, SLICE_NAME: "w"})
    scaled = _patched(admitted, [{"op": "replace", "path": "/spec/podSets/0/count", "value": 10}])
    recounted = _patched(scaled, [{"op": "replace", "path": "/status/reclaimablePods/0/count", "value": 0}])
    assert _refused(recounted, scaled) is None
    dropped = msgspec.json.decode(msgspec.json.encode(scaled))
    dropped["status"]["reclaimablePods"] = []
    assert _refused(dropped, scaled) is None
    lowered = _patched(admitted, [{"op": "replace", "path": "/status/reclaimablePods/0/count", "value": 0}])
    assert "Invalid value: 0: cannot be less then 9" in (_refused(lowered, admitted) or "")
    assert "Invalid value: 0: cannot be less then 9" in (_refused(recounted, scaled, GATE_OFF) or ""), "the gate off: as before"


def test_the_scale_down_leniency_is_for_workload_slices_only() -> None:
    """Another Workload, a slice that did not scale down, a count raised above the pod set, or the gate off: the
    reclaimable pods are checked as before."""
    plain = _reserved_doc(8, 4, {})
    scaled = _patched(plain, [{"op": "replace", "path": "/spec/podSets/0/count", "value": 2}])
    assert "status.reclaimablePods[main].count" in (_refused(scaled, plain) or "")
    elastic = _reserved_doc(8, 4, {**ELASTIC, SLICE_NAME: "w"})
    assert "status.reclaimablePods[main].count" in (
        _refused(_patched(elastic, [{"op": "replace", "path": "/spec/podSets/0/count", "value": 2}]), elastic,
                 GATE_OFF) or "")
    fewer = _patched(elastic, [{"op": "replace", "path": "/status/reclaimablePods/0/count", "value": 3}])
    assert "Invalid value: 3: cannot be less then 4" in (_refused(fewer, elastic) or "")
    stale = _patched(elastic, [{"op": "replace", "path": "/spec/podSets/0/count", "value": 2}])
    raised = _patched(stale, [{"op": "replace", "path": "/status/reclaimablePods/0/count", "value": 5}])
    assert "status.reclaimablePods[main].count" in (_refused(raised, stale) or "")


def _with_min_count(doc: dict[str, Any], min_count: int) -> dict[str, Any]:
    out = msgspec.json.decode(msgspec.json.encode(doc))
    out["spec"]["podSets"][0]["minCount"] = min_count
    return out


def test_a_slice_scaled_down_below_its_min_count_takes_it_down_with_the_count() -> None:
    """KEP-12100 step 4: a partial scale-up's slice (minCount 5, the old slice's pods) scaled down to 3 takes
    ``minCount`` 3 with the count; left at 5, the count would break the Workload's rule (minCount at most count)
    and the slice would keep its quota, every write of the Job integration refused. Scaled to 6, above its
    minCount, the slice keeps it."""
    before = _with_min_count(_reserved_doc(7, 0, {**ELASTIC, SLICE_NAME: "w"}), 5)
    obs = msgspec.convert(before, o.Workload, strict=False)
    ops = workload_slices.counts_patch(obs, {"main": 3})
    assert ops[1:] == [{"op": "replace", "path": "/spec/podSets/0/count", "value": 3},
                       {"op": "replace", "path": "/spec/podSets/0/minCount", "value": 3}]
    scaled = _patched(before, ops)
    assert _refused(scaled, before, {PARTIAL_GATE: True}) is None
    from events.manifests import check_foldable
    check_foldable(msgspec.convert(scaled, o.Workload, strict=False), "stored")  # the watch takes it
    assert workload_slices.counts_patch(obs, {"main": 6})[1:] == [
        {"op": "replace", "path": "/spec/podSets/0/count", "value": 6}]


def test_only_a_slice_may_lower_its_min_count_and_only_with_its_count() -> None:
    """While it holds quota, a Workload's pod sets are Kueue's, but for a smaller count; a workload slice may also
    take its minCount down to its new count, nothing else: not on its own, not below the count, not raised, nor for
    another Workload."""
    def lowered(doc: dict[str, Any], count: int, min_count: int) -> dict[str, Any]:
        return _patched(doc, [{"op": "replace", "path": "/spec/podSets/0/count", "value": count},
                              {"op": "replace", "path": "/spec/podSets/0/minCount", "value": min_count}])

    on = {PARTIAL_GATE: True}
    elastic = _with_min_count(_reserved_doc(7, 0, {**ELASTIC, SLICE_NAME: "w"}), 5)
    assert _refused(lowered(elastic, 3, 3), elastic, on) is None
    assert "immutable" in (_refused(lowered(elastic, 7, 4), elastic, on) or ""), "the count kept"
    assert "immutable" in (_refused(lowered(elastic, 4, 2), elastic, on) or ""), "below the new count"
    assert "immutable" in (_refused(lowered(elastic, 7, 6), elastic, on) or ""), "raised"
    plain = _with_min_count(_reserved_doc(7, 0, {}), 5)
    assert "immutable" in (_refused(lowered(plain, 3, 3), plain, on) or "")


# --- KEP-12100's eviction under partial scale-up: the probe is kept (Kueue #15417) --------------------------
# Kueue's pkg/workloadslicing normalizeActiveSlices, TestNormalizeActiveSlices "evicted admitted with pending
# probe, keep probe and finish evicted" (partialScaleUp: true, survivor wl-b), behind #15661's drain: the
# evicted slice is the Job's while it holds quota; once given back it alone is finished, and the probe, an
# ordinary pending replacement, is rescheduled and admits itself ("no recreation, no history lookup")


def _granted_slice(name: str, count: int, granted: int | None, **kw: Any) -> o.Workload:
    """A slice as the apiserver stores it, its admission (``granted`` pods; None: no admission) kept."""
    w = _slice(name, count, **kw)
    if granted is None:
        return w
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "default"}, resource_usage={"cpu": str(granted)}, count=granted)])
    return msgspec.structs.replace(w, status=o.WorkloadStatus(admission=admission))


def _names_of(step: workload_slices.SliceStep) -> tuple[str | None, str | None]:
    return (step.keep[0].metadata.name if step.keep else None,
            step.finish_old[0].metadata.name if step.finish_old else None)


@pytest.mark.parametrize("evicted", [True, False])
@pytest.mark.parametrize("partial", [True, False])
def test_the_evicted_slice_is_finished_and_the_probe_waiting_behind_it_kept(evicted: bool,
                                                                           partial: bool) -> None:
    """The slice a waiting probe replaces evicted (or its quota otherwise gone): while it holds quota it is
    the Job's (#15661); once given back it alone is finished ``OutOfSync`` and the probe is the Job's, under
    partial scale-up as under atomic. Readmitted (no longer evicted), nothing is finished."""
    partial_slice, probe, (_, mirror, _, _) = _slice_and_probe(10, 2)
    if evicted:
        _phase(mirror, partial_slice, ADMITTED, evicted=True, granted=7)
        drained = workload_slices.ensure({"main": 10}, _pairs(mirror, partial_slice, probe), partial=partial)
        assert _names_of(drained) == (partial_slice, None)
    _phase(mirror, partial_slice, PENDING, evicted=evicted, granted=7)  # its quota given back
    step = workload_slices.ensure({"main": 10}, _pairs(mirror, partial_slice, probe), partial=partial)
    assert (_names_of(step), step.set_counts, step.error) == ((probe, partial_slice), False, "")
    info = mirror.state.workloads[f"ns/{partial_slice}"]
    info.evicted, info.conditions = "", ()
    _phase(mirror, partial_slice, ADMITTED, granted=7, stored=_SHOWN)
    held = workload_slices.ensure({"main": 10}, _pairs(mirror, partial_slice, probe), partial=partial)
    assert _names_of(held) == (probe, None)


@pytest.mark.asyncio
async def test_an_evicted_slice_is_finished_alone_and_its_waiting_probe_stays_the_jobs() -> None:
    """The Job stopped on the evicted slice, its quota given back: only that slice is finished; the probe is
    neither finished nor recreated, no new slice is made, and the stopped Job is left waiting for it."""
    partial_slice, probe, (jobs, mirror, appended, client) = _slice_and_probe(10, 2)
    stopped = _elastic_job(10, generation=2, suspend=True, annotations=PARTIAL)
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=3, key="ns/train", uid=UID,
                                                                obj=stopped)))
    _phase(mirror, partial_slice, PENDING, evicted=True)
    await jobs.reconcile("ns/train")
    assert [(e.key, e.reason) for e in appended if isinstance(e, ev.WorkloadFinished)] == [
        (f"ns/{partial_slice}", "OutOfSync")]
    show_finished(mirror, appended)
    await jobs.reconcile("ns/train")
    assert [e.key for e in appended if isinstance(e, ev.WorkloadFinished)] == [f"ns/{partial_slice}"]
    assert client.created == [], "no new chain"
    assert [p for p in client.patches if p[0] == "Job"] == [], "the Job waits, stopped, for its probe"


def _restarting(generation: int = 2, *, suspend: bool = True) -> tuple[str, tuple[JobIntegration, Mirror,
                                                                                  list[ev.AnyEvent], Client]]:
    """A partial Job of 10 whose partial slice was evicted and finished, its probe (10, minCount 7) now
    admitted with 7 while the Job is stopped (or, ``suspend`` False, already started on it)."""
    first, partial_slice, probe = _slice_name(1), _slice_name(2), _slice_name(2, probe=7)
    probe_wl = _with_min(_slice(probe, 10, replaces=f"ns/{partial_slice}", created="2026-01-01T00:00:09Z"), 7)
    evicted = _slice(partial_slice, 10, replaces=f"ns/{first}", created="2026-01-01T00:00:05Z")
    setup = _setup(_elastic_job(10, generation=generation, suspend=suspend, annotations=PARTIAL),
                   _granted_slice(first, 5, 5), evicted, probe_wl, partial=True)
    mirror = setup[1]
    for name in (first, partial_slice):
        _phase(mirror, name, FINISHED)
    _phase(mirror, probe, ADMITTED, granted=7, stored=_SHOWN)
    return probe, setup


def _with_min(w: o.Workload, min_count: int) -> o.Workload:
    sets = [msgspec.structs.replace(ps, min_count=min_count) for ps in w.spec.pod_sets]
    return msgspec.structs.replace(w, spec=msgspec.structs.replace(w.spec, pod_sets=sets))


@pytest.mark.asyncio
async def test_a_stopped_job_is_started_on_its_probe_admitted_in_part_keeping_its_parallelism(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe admitted at its floor (7 of 10) after its predecessor went: the stopped Job is started on it
    first — its parallelism left at 10, as for any slice admitted in part (only the granted pods are released)
    — and the probe for the rest waits for the Job to run."""
    _, (jobs, _, _, client) = _restarting()
    monkeypatch.setattr("connectors.k8s.jobframework.admission_shown", lambda wl, obs: True)  # as decided
    await jobs.reconcile("ns/train")
    (start,) = [body for kind, _, body, _ in client.patches if kind == "Job"]
    assert start["spec"]["suspend"] is False and "parallelism" not in start["spec"]
    assert client.created == [], "the probe for the rest once the Job runs"


KUEUE_STARTED_LABELS = {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "lq",
                        "kueue.x-k8s.io/cluster-queue-name": "cq"}


def _started_on(first: str) -> o.PodTemplateSpec:
    """The Job's pod template once started on ``first``, the first slice of its chain, as that start wrote it:
    Kueue's pod set and queue labels, the pods naming their Workload (TopologyAwareScheduling on, Kueue's
    default) and their chain. A slice made while the Job runs so copies it."""
    return msgspec.structs.replace(template(), metadata=o.TemplateMeta(
        labels=KUEUE_STARTED_LABELS, annotations={"kueue.x-k8s.io/workload": first, SLICE_NAME: first}))


def _with_template(w: o.Workload, tmpl: o.PodTemplateSpec) -> o.Workload:
    sets = [msgspec.structs.replace(ps, template=tmpl) for ps in w.spec.pod_sets]
    return msgspec.structs.replace(w, spec=msgspec.structs.replace(w.spec, pod_sets=sets))


def _stopped_on_a_slice_made_while_running(partial: bool) -> dict[str, Any]:
    """A Job of 10 started on its first slice (5), scaled up: its slice of generation 2, made while it ran (so
    carrying the first slice's start in its template), admitted (with 7 of 10 under partial scale-up, its
    probe waiting), then evicted; no pod active. One pass stops the Job on it: the Job as that stop leaves
    it."""
    first, second, probe = _slice_name(1), _slice_name(2), _slice_name(2, probe=7)
    running = _elastic_job(10, generation=2, annotations=PARTIAL if partial else ELASTIC)
    running = msgspec.structs.replace(
        running, spec=msgspec.structs.replace(running.spec, template=_started_on(first)),
        status=msgspec.structs.replace(running.status, active=0))
    made = [_with_template(_slice(second, 10, replaces=f"ns/{first}", created="2026-01-01T00:00:05Z"),
                           _started_on(first))]
    if partial:
        made.append(_with_min(_with_template(_slice(probe, 10, replaces=f"ns/{second}",
                                                    created="2026-01-01T00:00:09Z"), _started_on(first)), 7))
    jobs, mirror, _, client = _setup(running, _granted_slice(first, 5, 5), *made, partial=partial)
    _phase(mirror, first, FINISHED)
    _phase(mirror, second, ADMITTED, evicted=True, granted=7 if partial else None)
    asyncio.run(jobs.reconcile("ns/train"))
    doc = msgspec.to_builtins(running)
    for kind, _, body, _ in client.patches:
        if kind == "Job":
            doc = merge_patched(doc, body)
    assert doc["spec"]["suspend"] is True and "template" in body["spec"], "stopped, its template restored"
    # the stop's mark, which the restore takes off once the Job shows it (this fake serves the Job unpatched)
    doc["metadata"]["annotations"].pop("kueue.x-k8s.io/stopping")
    return doc


@pytest.mark.parametrize("partial", [True, False])
def test_a_job_stopped_on_a_slice_made_while_it_ran_gets_its_template_back_as_before_its_start(
        partial: bool) -> None:
    """A slice made while the Job runs copies the Job's template with what the start on an earlier slice wrote
    into it; the Job stopped on that slice is given back its template without it (Kueue's labels and
    annotations of a start), as before any start, so that a start on another Workload does not conflict."""
    doc = _stopped_on_a_slice_made_while_running(partial)
    meta = doc["spec"]["template"].get("metadata") or {}
    assert (meta.get("labels") or {}, meta.get("annotations") or {}) == ({}, {})


@pytest.mark.asyncio
async def test_a_job_stopped_on_its_evicted_partial_slice_starts_on_its_probe_once_admitted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Job stopped on its evicted partial slice (made while it ran on the first), that slice finished and
    its probe admitted with 7: the Job starts on the probe, its pods naming the probe and the chain; nothing
    is finished ``FailedToStart`` (the start on the first slice, left in its template, would conflict)."""
    stopped = msgspec.convert(await asyncio.to_thread(_stopped_on_a_slice_made_while_running, True), o.Job)
    probe, (_, mirror, _, _) = _restarting()
    jobs, mirror, appended, client = _setup(stopped, *mirror.workloads.values(), partial=True)
    for name in (_slice_name(1), _slice_name(2)):
        _phase(mirror, name, FINISHED)
    _phase(mirror, probe, ADMITTED, granted=7, stored=_SHOWN)
    monkeypatch.setattr("connectors.k8s.jobframework.admission_shown", lambda wl, obs: True)  # as decided
    await jobs.reconcile("ns/train")
    assert [(e.key, e.reason) for e in appended if isinstance(e, ev.WorkloadFinished)] == []
    (start,) = [body for kind, _, body, _ in client.patches if kind == "Job"]
    assert start["spec"]["suspend"] is False
    annotations = start["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"kueue.x-k8s.io/workload": probe, SLICE_NAME: _slice_name(1)}


@pytest.mark.asyncio
async def test_once_started_on_its_probe_the_job_probes_for_the_rest_named_apart_from_it() -> None:
    """Running on the probe admitted with 7, the Job gets a further probe (10, minCount 7) replacing it; at
    the same generation its usual name is the admitted probe's own, so it is named apart."""
    probe, (jobs, _, _, client) = _restarting(suspend=False)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    digest = hashlib.sha1(f"Job\nbatch\ntrain\n{UID}\n2-scale-up-probe-7-readmit-3".encode()).hexdigest()[:5]
    assert body["metadata"]["name"] == f"job-train-{digest}" != probe
    assert body["metadata"]["annotations"][REPLACES] == f"ns/{probe}"
    assert (body["spec"]["podSets"][0]["count"], body["spec"]["podSets"][0]["minCount"]) == (10, 7)
    assert [p for p in client.patches if p[0] == "Job"] == []
    _, (jobs, _, _, client) = _restarting(generation=4, suspend=False)  # stopped, started since: own name
    await jobs.reconcile("ns/train")
    assert [b["metadata"]["name"] for b in client.created] == [_slice_name(4, probe=7)]


@pytest.mark.asyncio
async def test_a_job_whose_slices_are_all_finished_gets_a_new_chain_with_no_floor_from_its_history() -> None:
    """No slice of the Job live (each finished): the next slice is a first slice, replacing nothing and asking
    for the whole Job with no ``minCount`` taken from what its finished slices were granted (#15417: no
    history lookup); its usual name taken by a finished slice of the same generation, it is named apart."""
    first, partial_slice, probe = _slice_name(1), _slice_name(2), _slice_name(2, probe=7)
    jobs, mirror, _, client = _setup(
        _elastic_job(10, generation=2, annotations=PARTIAL), _granted_slice(first, 5, 5),
        _granted_slice(partial_slice, 10, 7, replaces=f"ns/{first}", created="2026-01-01T00:00:05Z"),
        _slice(probe, 10, replaces=f"ns/{partial_slice}", created="2026-01-01T00:00:09Z"), partial=True)
    for name in (first, partial_slice, probe):
        _phase(mirror, name, FINISHED)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    digest = hashlib.sha1(f"Job\nbatch\ntrain\n{UID}\n2-readmit-3".encode()).hexdigest()[:5]
    assert body["metadata"]["name"] == f"job-train-{digest}" not in (first, partial_slice, probe)
    assert body["metadata"]["annotations"] == {**ELASTIC, SLICE_NAME: body["metadata"]["name"]}
    assert "minCount" not in body["spec"]["podSets"][0]


@pytest.mark.asyncio
async def test_a_first_slice_asks_for_no_min_count_and_keeps_its_usual_name() -> None:
    jobs, _, _, client = _setup(_elastic_job(5, annotations=PARTIAL), partial=True)
    await jobs.reconcile("ns/train")
    (body,) = client.created
    assert body["metadata"]["name"] == _slice_name(1)
    assert "minCount" not in body["spec"]["podSets"][0]

@pytest.mark.asyncio
async def test_a_probe_is_made_for_the_same_version_of_the_job_as_the_slice_it_follows() -> None:
    """The scale-up slice made, then admitted in part, with nothing of the Job changed since: its probe is made (a
    pass does not take the probe for the slice already made)."""
    jobs, mirror, _, client = _setup(_elastic_job(10, generation=2, annotations=PARTIAL), _slice("a", 5),
                                     partial=True)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    made = _slice(_slice_name(2), 10, replaces="ns/a", created="2026-01-01T00:00:09Z")
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=made.key, uid=made.metadata.uid, obj=made)))
    _phase(mirror, "a", FINISHED)
    _phase(mirror, made.metadata.name, ADMITTED, granted=7)
    await jobs.reconcile("ns/train")
    assert [b["metadata"]["name"] for b in client.created] == [_slice_name(2), _slice_name(2, probe=7)]


def test_an_old_slice_is_finished_once_its_replacement_holds_quota() -> None:
    """Kueue finishes the old slice when the new one reserves quota as its replacement (the scheduler admitted
    it but the old one's finish was not written): that is the expected clean-up, not an anomaly."""
    _, mirror, _, _ = _setup(_elastic_job(8), _slice("b", 8, replaces="ns/a"), _slice("a", 4))
    _phase(mirror, "a", ADMITTED)
    _phase(mirror, "b", ADMITTED)
    step = workload_slices.ensure({"main": 8}, _pairs(mirror, "b", "a"))
    assert not step.error
    assert step.finish_old is not None and step.finish_old[0].metadata.name == "a"
    assert step.keep is not None and step.keep[0].metadata.name == "b" and not step.set_counts
    partial = workload_slices.ensure({"main": 8}, _pairs(mirror, "b", "a"), partial=True)
    # the replacement is kept, not finished with it
    assert partial.keep is not None and partial.keep[0].metadata.name == "b"
    _, mirror, _, _ = _setup(_elastic_job(8), _slice("b", 8), _slice("a", 4))  # no replacement annotation
    _phase(mirror, "a", ADMITTED)
    _phase(mirror, "b", ADMITTED)
    step = workload_slices.ensure({"main": 8}, _pairs(mirror, "b", "a"))
    assert step.error == "unexpected combination of old and new workload slices with reserved quota"


# --- Kueue's pkg/workloadslicing/workloadslicing_test.go, TestEnsureWorkloadSlices (as the oracle) ----------
# Slice "a" is Kueue's "<job>-1" (older), "b" its "<job>-2" (newer). Each row: the slices (name, count per pod
# set, replaces), their phase and whether they are evicted, the Job's counts, and what Kueue returns: the
# slice the Job runs on (None: a new slice), whether the slices apply, whether the kept slice takes the Job's
# counts, the slice finished. Rows Kueue decides otherwise are in the report
# (/work/notes/s47/oracle-prebuilt.md).

_A, _B = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def _multi(name: str, counts: dict[str, int], *, created: str = _A, replaces: str = "") -> o.Workload:
    obs = _slice(name, 1, created=created, replaces=replaces)
    base = obs.spec.pod_sets[0]
    sets = [msgspec.structs.replace(base, name=n, count=c) for n, c in counts.items()]
    return msgspec.structs.replace(obs, spec=msgspec.structs.replace(obs.spec, pod_sets=sets))


def _reserve_all(mirror: Mirror, name: str, phase: str) -> None:
    """``name`` holding quota (``phase``) for every pod set it has, each granted its count."""
    _phase(mirror, name, phase)
    info, obs = mirror.state.workloads[f"ns/{name}"], mirror.workloads[f"ns/{name}"]
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name=ps.name, flavors={"cpu": "default"}, resource_usage={"cpu": str(ps.count)}, count=ps.count)
        for ps in obs.spec.pod_sets])


_ENSURE = {
    # name: (slices [(name, counts, created, replaces, phase, evicted)], job counts,
    #        (keep, applies, set_counts, finish_old))
    "NoWorkloadSlices": ([], {"main": 1}, (None, True, False, None)),
    "OneWorkloadSlice_IncompatibleWithJob": (
        [("a", {"main": 1}, _A, "", PENDING, False)], {"different-name": 1}, (None, False, False, None)),
    "OneWorkloadSlice_CurrentWorkload": (
        [("a", {"main": 1}, _A, "", PENDING, False)], {"main": 1}, ("a", True, False, None)),
    "OneWorkloadSlice_ReservedQuota_ScaleUp": (
        [("a", {"main": 1}, _A, "", RESERVED, False)], {"main": 3}, (None, True, False, None)),
    "OneWorkloadSlice_ReservedQuota_ScaleUp_MultiplePodSets": (
        [("a", {"scale-up": 3, "scale-down": 3, "stay-the-same": 3}, _A, "", RESERVED, False)],
        {"scale-up": 4, "stay-the-same": 3, "scale-down": 1}, (None, True, False, None)),
    "OneWorkloadSlice_ReservedQuota_ScaleDown": (
        [("a", {"main": 3}, _A, "", RESERVED, False)], {"main": 1}, ("a", True, True, None)),
    "OneWorkloadSlice_ReservedQuota_ScaleDown_MultiplePodSets": (
        [("a", {"scale-down": 3, "stay-the-same": 3}, _A, "", RESERVED, False)],
        {"scale-down": 1, "stay-the-same": 3}, ("a", True, True, None)),
    "OneWorkloadSlice_UnreservedQuota_ScaleUp": (
        [("a", {"main": 1}, _A, "", PENDING, False)], {"main": 3}, ("a", True, True, None)),
    "OneWorkloadSlice_UnreservedQuota_ScaleDown": (
        [("a", {"main": 3}, _A, "", PENDING, False)], {"main": 1}, ("a", True, True, None)),
    "TwoWorkloads_BothUnreserved_NewIsCurrent": (
        [("a", {"main": 1}, _A, "", PENDING, False), ("b", {"main": 3}, _B, "", PENDING, False)],
        {"main": 3}, ("b", True, False, "a")),
    "TwoWorkloads_NewIsIncompatible": (
        [("a", {"main": 1}, _A, "", RESERVED, False), ("b", {"main": 3}, _B, "ns/a", PENDING, False)],
        {"different-key": 1}, (None, False, False, None)),
    "TwoWorkloadSlices_NewIsUnreservedAndCurrent": (
        [("a", {"main": 1}, _A, "", RESERVED, False), ("b", {"main": 3}, _B, "ns/a", PENDING, False)],
        {"main": 3}, ("b", True, False, None)),
    "TwoWorkloadSlices_NewIsUnreservedAndOutOfSync_ScaleUp": (
        [("a", {"main": 1}, _A, "", RESERVED, False), ("b", {"main": 3}, _B, "ns/a", PENDING, False)],
        {"main": 5}, ("b", True, True, None)),
    "TwoWorkloadSlices_NewIsUnreservedAndOutOfSync_ScaleDown": (
        [("a", {"main": 1}, _A, "", RESERVED, False), ("b", {"main": 3}, _B, "ns/a", PENDING, False)],
        {"main": 2}, ("b", True, True, None)),
    # Kueue #15661 (release-0.18 #15700): an evicted slice still holding quota may still own running
    # pods; it is the Job's until its quota is given back, unless an admitted replacement not evicted took
    # the pods over
    "TwoWorkloads_OldWithReservedQuotaAndEvicted_NewWithoutQuotaReservation": (
        [("a", {"main": 1}, _A, "", RESERVED, True), ("b", {"main": 3}, _B, "", PENDING, False)],
        {"main": 5}, ("a", True, False, None)),
    "EvictedOriginWithReservedReplacement_ReplacementNotAdmitted": (
        [("a", {"main": 1}, _A, "", ADMITTED, True), ("b", {"main": 2}, _B, "ns/a", RESERVED, False)],
        {"main": 2}, ("a", True, False, None)),
    "EvictedOriginWithReservedReplacement_ReplacementAdmitted": (
        [("a", {"main": 1}, _A, "", ADMITTED, True), ("b", {"main": 2}, _B, "ns/a", ADMITTED, False)],
        {"main": 2}, ("b", True, False, "a")),
    "EvictedOriginWithReservedReplacement_ReplacementAdmittedAndEvicted": (
        [("a", {"main": 1}, _A, "", ADMITTED, True), ("b", {"main": 2}, _B, "ns/a", ADMITTED, True)],
        {"main": 2}, ("a", True, False, None)),
}


@pytest.mark.parametrize("case", list(_ENSURE), ids=list(_ENSURE))
def test_kueue_ensure_workload_slices(case: str) -> None:
    slices, job_counts, (keep, applies, set_counts, finish_old) = _ENSURE[case]
    _, mirror, _, _ = _setup(_elastic_job(1),
                             *[_multi(n, c, created=t, replaces=r) for n, c, t, r, _, _ in slices])
    for name, _, _, _, phase, evicted in slices:
        if phase in (RESERVED, ADMITTED):
            _reserve_all(mirror, name, phase)
        if evicted:
            _phase(mirror, name, phase, evicted=True)
    step = workload_slices.ensure(job_counts, _pairs(mirror, *[s[0] for s in slices]))
    got = (step.keep[0].metadata.name if step.keep else None, step.applies, step.set_counts,
           step.finish_old[0].metadata.name if step.finish_old else None)
    assert (got, step.error) == ((keep, applies, set_counts, finish_old), "")


@pytest.mark.asyncio
async def test_an_evicted_slice_still_holding_quota_stops_the_job_before_its_quota_goes() -> None:
    """Kueue #15661 ("Drain evicted elastic slices before releasing quota"; release-0.18 #15700): a running
    elastic Job whose admitted slice is evicted while a scale-up slice waits is stopped on the evicted slice
    (its eviction message), which keeps its quota until no pod is active; only then, its quota given back, is
    it finished ``OutOfSync`` and the waiting slice the Job's."""
    new = _slice_name(2)
    jobs, mirror, appended, client = _setup(_elastic_job(6, generation=2), _slice("a", 4),
                                            _slice(new, 6, replaces="ns/a", created="2026-01-01T00:00:09Z"))
    _phase(mirror, "a", ADMITTED, evicted=True)
    await jobs.reconcile("ns/train")
    assert not [e for e in appended if isinstance(e, ev.WorkloadFinished)], "its quota is not given back yet"
    assert [(kind, body["spec"]) for kind, _, body, _ in client.patches if kind == "Job"] == [
        ("Job", {"suspend": True})], "stopped on the evicted slice"
    (stopped,) = [e for e in appended if isinstance(e, ev.JobActed)]
    assert (stopped.action, stopped.message) == ("Stopped", "Preempted to accommodate a workload")

    _upsert_job = ev.ObjectUpserted(time=3, key="ns/train", uid=UID,
                                    obj=_elastic_job(6, generation=2, suspend=True))
    mirror.apply(ev.Record(mirror.offset + 1, _upsert_job))
    await jobs.reconcile("ns/train")
    assert [e.key for e in appended if isinstance(e, ev.JobStopped)] == ["ns/a"], \
        "its quota goes once no pod runs"

    _phase(mirror, "a", PENDING, evicted=True)  # the JobStopped folded: no quota held
    await jobs.reconcile("ns/train")
    (finished,) = [e for e in appended if isinstance(e, ev.WorkloadFinished)]
    assert (finished.key, finished.reason) == ("ns/a", "OutOfSync")


# --- Kueue #13780 (fixes #13778): an elastic Job's priority-class label is followed by its live slices ------

_CLASSES = (o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="high"), value=100),
            o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="low"), value=10))
_LOW = o.PriorityClassRef(group="kueue.x-k8s.io", kind="WorkloadPriorityClass", name="low")
_HIGH = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}


def _classed(w: o.Workload, ref: o.PriorityClassRef | None = _LOW, priority: int | None = 10) -> o.Workload:
    return msgspec.structs.replace(w, spec=msgspec.structs.replace(w.spec, priority_class_ref=ref,
                                                                   priority=priority))


def _labelled(j: o.Job, **labels: str) -> o.Job:
    meta = msgspec.structs.replace(j.metadata, labels={**j.metadata.labels, **labels})
    return msgspec.structs.replace(j, metadata=meta)


@pytest.mark.asyncio
async def test_the_slice_an_elastic_job_runs_on_takes_the_priority_class_its_label_names_now() -> None:
    """Kueue's ``ensureOneWorkload`` applies ``UpdateWorkloadPriority`` to the compatible slice too (#13780):
    the label moved from ``low`` to ``high`` (the pod counts unchanged), the admitted slice follows,
    ``UpdatedWorkload`` "Updated workload priority class: ns/a"."""
    jobs, mirror, appended, client = _setup(_labelled(_elastic_job(4),
                                                      **{"kueue.x-k8s.io/priority-class": "high"}),
                                            _classed(_slice("a", 4)), *_CLASSES)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    assert [(kind, name, body["spec"]) for kind, name, body, _ in client.patches if kind == "Workload"] == [
        ("Workload", "a", {"priorityClassRef": _HIGH, "priority": 100})]
    assert [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("UpdatedWorkload", "Updated workload priority class: ns/a")]


@pytest.mark.asyncio
async def test_every_live_slice_of_an_elastic_job_takes_its_priority_class() -> None:
    """The whole live set (#13780: "resolved once for the whole live set"): the admitted slice a new one waits
    behind and the waiting one, one write a pass; a slice holding quota with no class is left alone (the
    apiserver refuses to add one, Kueue's #8480 guard)."""
    new = _slice_name(2)
    j = _labelled(_elastic_job(6, generation=2), **{"kueue.x-k8s.io/priority-class": "high"})
    jobs, mirror, _, client = _setup(j, _classed(_slice("a", 4)),
                                     _classed(_slice(new, 6, replaces="ns/a",
                                                     created="2026-01-01T00:00:09Z")),
                                     *_CLASSES)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Workload"] == ["a"]
    a = mirror.workloads["ns/a"]
    high = o.PriorityClassRef(**_HIGH)
    done = msgspec.structs.replace(_classed(a, high, 100), metadata=msgspec.structs.replace(
        a.metadata, resource_version="4"))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=done.key, uid=done.metadata.uid,
                                                                obj=done)))
    await jobs.reconcile("ns/train")
    assert [name for kind, name, _, _ in client.patches if kind == "Workload"] == ["a", new]

    jobs, mirror, _, client = _setup(j, _classed(_slice("a", 6), None, None), *_CLASSES)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    assert [p for p in client.patches if p[0] == "Workload"] == [], "no class added to a slice holding quota"


@pytest.mark.asyncio
async def test_a_missing_class_is_reported_once_per_job_version_however_often_its_slices_change() -> None:
    """The label names a class the log does not hold: one ``WorkloadPriorityClassNotFound`` Warning for this
    version of the Job, not one more for each status change of a live slice (an eviction, a drain; ro-diff-c
    L2)."""
    j = _labelled(_elastic_job(4), **{"kueue.x-k8s.io/priority-class": "gone"})
    jobs, mirror, appended, client = _setup(j, _classed(_slice("a", 4)), *_CLASSES)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    for rv in ("4", "5"):
        a = mirror.workloads["ns/a"]
        meta = msgspec.structs.replace(a.metadata, resource_version=rv)
        changed = msgspec.structs.replace(a, metadata=meta)
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=changed.key,
                                                                    uid=changed.metadata.uid, obj=changed)))
        await jobs.reconcile("ns/train")
    assert [(e.action, e.message) for e in appended if isinstance(e, ev.JobActed)] == [
        ("WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "gone" not found')]
    assert [p for p in client.patches if p[0] == "Workload"] == [], "the slice keeps its priority"


_POD_CLASS = o.PriorityClassRef(group="scheduling.k8s.io", kind="PriorityClass", name="pc")


@pytest.mark.asyncio
async def test_a_missing_class_is_reported_once_whatever_an_older_slice_reads() -> None:
    """An older live slice whose class the label never rewrites (a pod ``PriorityClass``, made before the
    label) looks no class up: it does not clear the once-slot between two lookups that fail, so the missing
    class is still reported once however often the newer slice changes (ro-diff-d L1)."""
    j = _labelled(_elastic_job(6), **{"kueue.x-k8s.io/priority-class": "gone"})
    a = _classed(_slice("a", 4, created="2026-01-01T00:00:00Z"), ref=_POD_CLASS, priority=5)
    b = _classed(_slice("b", 6, created="2026-01-01T00:00:01Z", replaces="ns/a"))
    jobs, mirror, appended, _ = _setup(j, a, b, *_CLASSES)
    _phase(mirror, "a", ADMITTED)
    await jobs.reconcile("ns/train")
    for rv in ("4", "5"):  # b's status changes
        w = mirror.workloads["ns/b"]
        meta = msgspec.structs.replace(w.metadata, resource_version=rv)
        changed = msgspec.structs.replace(w, metadata=meta)
        mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=changed.key,
                                                                    uid=changed.metadata.uid, obj=changed)))
        await jobs.reconcile("ns/train")
    warned = [e for e in appended
              if isinstance(e, ev.JobActed) and e.action == "WorkloadPriorityClassNotFound"]
    assert len(warned) == 1
