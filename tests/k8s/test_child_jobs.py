"""Which ancestor a child Job belongs to (:func:`connectors.k8s.child_jobs.managed_ancestor`, Kueue's
``FindAncestorJobManagedByKueue``): the topmost queued one of a kind Kueue runs, however many levels up, read from
what the integrations hold (:class:`connectors.k8s.child_jobs.Parents`); a missing parent, a cycle and a chain of
more than ten parents are errors. No cluster needed."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from fixtures.jobs import RecordingClient, integration, job, workload

from connectors.k8s import child_jobs
from connectors.k8s.child_jobs import (
    ChainTooLong,
    CyclicOwnership,
    OwnerMissing,
    Parents,
    managed_ancestor,
    walk_reading,
)
from connectors.k8s.decision_events import Involved
from connectors.k8s.job_events import job_events
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from projections.workloads import ADMITTED

QUEUE = "kueue.x-k8s.io/queue-name"
ALL_ON = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]}})
KINDS = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "MPIJob": "kubeflow.org/v2beta1",
         "AppWrapper": "workload.codeflare.dev/v1beta2"}


def _meta(name: str, owner: str | None = None, *, queued: bool = False) -> o.ObjectMeta:
    """``name`` is ``<Kind>-<n>``; ``owner`` (same form) its controller."""
    refs = [] if owner is None else [o.OwnerReference(api_version=KINDS[owner.split("-")[0]],
                                                      kind=owner.split("-")[0], name=owner, uid=f"uid-{owner}",
                                                      controller=True)]
    return o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", owner_references=refs,
                        labels={QUEUE: "lq"} if queued else {})


class _Object(msgspec.Struct, frozen=True):
    metadata: o.ObjectMeta


def _parents(*metas: o.ObjectMeta, kinds: tuple[str, ...] = ("JobSet", "MPIJob", "AppWrapper")) -> Parents:
    parents = Parents()
    for kind in kinds:
        parents.hold(kind, {f"ns/{m.name}": _Object(m) for m in metas if m.name.startswith(kind + "-")})
    return parents


def _walk(chain: list[o.ObjectMeta], *, manage: bool = False, config=ALL_ON, reads: list[str] | None = None,
          held: tuple[str, ...] = ("JobSet", "MPIJob", "AppWrapper")) -> str | None:
    """The ancestor's name for ``chain[0]`` (a Job), its parents the rest: those of the ``held`` kinds held,
    the others read as from the apiserver (each read's name added to ``reads``)."""
    jobs = {f"ns/{m.name}": o.Job(metadata=m) for m in chain if m.name.startswith("Job-")}
    by_name = {m.name: m for m in chain}

    async def read(namespace: str, ref: o.OwnerReference) -> o.ObjectMeta | None:
        (reads if reads is not None else []).append(ref.name)
        return by_name.get(ref.name)

    parents = _parents(*chain[1:], kinds=held)
    found = asyncio.run(walk_reading(chain[0], lambda done: parents.parent_of(config, jobs, done), read,
                                     manage))
    return found.name if found is not None else None


@pytest.mark.parametrize(("js_queued", "mpi_queued", "manage", "ancestor"), [
    (False, False, False, None),
    (True, False, False, "JobSet-1"),
    (False, True, False, "MPIJob-1"),
    (True, True, False, "MPIJob-1"),  # the topmost queued one
    (False, False, True, "MPIJob-1"),  # manageJobsWithoutQueueName: the topmost one of a kind Kueue runs
])
def test_the_ancestor_is_the_topmost_queued_one_of_a_kind_kueue_runs(js_queued: bool, mpi_queued: bool,
                                                                     manage: bool, ancestor: str | None) -> None:
    """Kueue's own examples (Job -> JobSet -> AppWrapper), with an MPIJob on top of the JobSet."""
    chain = [_meta("Job-1", "JobSet-1"), _meta("JobSet-1", "MPIJob-1", queued=js_queued),
             _meta("MPIJob-1", queued=mpi_queued)]
    assert _walk(chain, manage=manage) == ancestor


def test_the_walk_goes_on_through_a_kind_whose_integration_is_off_never_taking_it() -> None:
    """Kueue's #4824 and its walk's own examples: a parent of a kind Kueue knows whose integration is off is
    read and walked through (Job -> JobSet, off -> queued AppWrapper => the AppWrapper), never the ancestor
    itself, queued or not; with the AppWrapper integration off too there is none."""
    aw_on = load_config({"integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]}})
    chain = [_meta("Job-1", "JobSet-1"), _meta("JobSet-1", "AppWrapper-1", queued=True),
             _meta("AppWrapper-1")]
    reads: list[str] = []
    assert _walk(chain, config=aw_on, reads=reads, held=("AppWrapper",)) is None, "a queued JobSet, off: none"
    assert reads == ["JobSet-1"], "the JobSet read (nothing holds it), once; the AppWrapper held"
    assert _walk(chain, config=aw_on, manage=True) == "AppWrapper-1"
    queued_aw = [chain[0], chain[1], _meta("AppWrapper-1", queued=True)]
    assert _walk(queued_aw, config=aw_on) == "AppWrapper-1"
    assert _walk(queued_aw, config=ALL_ON) == "JobSet-1", "the AppWrapper integration off: walked through"
    jobsets_off = load_config({"integrations": {"frameworks": ["batch/job"]}})
    assert _walk(queued_aw, config=jobsets_off, manage=True) is None


def test_the_walk_stops_unread_at_a_kind_kueue_does_not_know() -> None:
    """Since Kueue's #5252 an owner of a kind no integration of Kueue's has (a CronJob) ends the walk unread;
    a Pod the pod integration runs and that is not held (not Kueue's) ends it too."""
    cron = msgspec.structs.replace(_meta("Job-1"), owner_references=[o.OwnerReference(
        api_version="batch/v1", kind="CronJob", name="nightly", uid="uid-nightly", controller=True)])
    reads: list[str] = []
    assert _walk([cron], manage=True, reads=reads) is None and reads == []
    pods = Parents()
    pods.hold("Pod", {}, complete=False)
    owned_by_pod = msgspec.structs.replace(cron, owner_references=[o.OwnerReference(
        api_version="v1", kind="Pod", name="p", uid="uid-p", controller=True)])
    pods_on = load_config({"integrations": {"frameworks": ["batch/job", "pod"]}})
    assert managed_ancestor(owned_by_pod, pods.parent_of(pods_on, {}), False) is None, "a Pod not managed: not Kueue's"


def test_a_parent_whose_integration_is_off_is_read_before_the_walk_goes_on() -> None:
    """The walk stays pure: a parent to be read from the apiserver is asked for (``Unread``), not read by
    it."""
    chain = [_meta("Job-1", "AppWrapper-1")]
    with pytest.raises(child_jobs.Unread) as asked:
        managed_ancestor(chain[0], _parents().parent_of(ALL_ON, {}), False)
    assert asked.value.ref.name == "AppWrapper-1"
    with pytest.raises(OwnerMissing, match="AppWrapper ns/AppWrapper-1, controller of a job, not found"):
        _walk(chain)


def test_a_parent_of_another_uid_than_the_reference_names_is_no_ancestor() -> None:
    """Kueue's #13802: each controller ownerReference's uid must be the parent's; a stale one (the JobSet of that
    name was recreated) ends the walk, so a queued object above it is no ancestor and the Job is top-level."""
    chain = [_meta("Job-1", "JobSet-1"), _meta("JobSet-1", "MPIJob-1", queued=True), _meta("MPIJob-1", queued=True)]
    assert _walk(chain) == "MPIJob-1"
    recreated = msgspec.structs.replace(chain[1], uid="uid-JobSet-1-again")
    assert _walk([chain[0], recreated, chain[2]]) is None
    stale_top = msgspec.structs.replace(chain[2], uid="uid-MPIJob-1-again")
    assert _walk([chain[0], chain[1], stale_top]) == "JobSet-1", "the walk keeps what it found below"


def test_a_parent_not_there_yet_is_an_error() -> None:
    with pytest.raises(OwnerMissing):
        _walk([_meta("Job-1", "JobSet-1")])
    with pytest.raises(OwnerMissing):  # a parent Job the log does not hold yet
        _walk([_meta("Job-1", "Job-2")])


@pytest.mark.parametrize(("parents", "error"), [(10, None), (11, ChainTooLong)])
def test_more_than_ten_parents_is_an_error(parents: int, error: type[Exception] | None) -> None:
    """Kueue's ``managedOwnersChainLimit``: a Job may have ten parents above it, not eleven."""
    chain = [_meta(f"Job-{i}", f"Job-{i + 1}" if i < parents else None, queued=i == parents)
             for i in range(parents + 1)]
    if error is None:
        assert _walk(chain) == f"Job-{parents}"
    else:
        with pytest.raises(error, match="ancestor depth exceeded limit of 10"):
            _walk(chain)


def test_cyclic_ownership_is_an_error() -> None:
    chain = [_meta("Job-1", "Job-2"), _meta("Job-2", "Job-3", queued=True), _meta("Job-3", "Job-2")]
    with pytest.raises(CyclicOwnership):
        _walk(chain)


def _config(*, skip: bool = False, **fields: Any) -> ev.ConfigRecorded:
    """A recorded Configuration; ``skip``: Kueue v0.20's SkipChildJobSuspension (on by default there), off unless
    asked, so a child is held for its ancestor's Workload."""
    gates = {"SkipChildJobSuspension": skip, **fields.pop("featureGates", {})}
    return ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates, **fields})


# --- the Job integration walking up --------------------------------------------------------------------------

MPIJOB_PARENT_WL = "ns/mpijob-m-12345"


def _deep_child() -> tuple[o.Job, o.ObjectMeta, o.ObjectMeta]:
    """A running Job of JobSet ``js`` (no queue), itself the MPIJob ``m``'s (queued)."""
    child = msgspec.structs.replace(job(suspend=False), metadata=msgspec.structs.replace(
        job().metadata, labels={}, owner_references=[o.OwnerReference(
            api_version=KINDS["JobSet"], kind="JobSet", name="js", uid="uid-js", controller=True)]))
    jobset = o.ObjectMeta(name="js", namespace="ns", uid="uid-js", owner_references=[o.OwnerReference(
        api_version=KINDS["MPIJob"], kind="MPIJob", name="m", uid="uid-m", controller=True)])
    mpijob = o.ObjectMeta(name="m", namespace="ns", uid="uid-m", labels={QUEUE: "lq"})
    return child, jobset, mpijob


@pytest.mark.asyncio
@pytest.mark.parametrize(("admitted", "suspended"), [(False, True), (True, False)])
async def test_a_job_two_levels_below_its_queued_ancestor_follows_that_ancestors_workload(
        admitted: bool, suspended: bool) -> None:
    child, jobset, mpijob = _deep_child()
    wl = workload()
    mpi_wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name="mpijob-m-12345", uid="wl-m", owner_references=[o.OwnerReference(
            api_version=KINDS["MPIJob"], kind="MPIJob", name="m", uid="uid-m", controller=True)]))
    config = _config(integrations={"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]})
    jobs, mirror, _ = integration(mpi_wl, child, before=(config,))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    jobs.parents.hold("JobSet", {"ns/js": _Object(jobset)})
    jobs.parents.hold("MPIJob", {"ns/m": _Object(mpijob)})
    if admitted:
        mirror.state.workloads[MPIJOB_PARENT_WL].phase = ADMITTED
    await jobs.reconcile("ns/train")
    assert [(kind, body["spec"]) for kind, _, body in client.patches] == (
        [("Job", {"suspend": True})] if suspended else []), "no Workload of its own either way"


@pytest.mark.asyncio
@pytest.mark.parametrize("default", [False, True])
async def test_under_skip_child_job_suspension_a_child_is_left_running_with_no_workload(default: bool) -> None:
    """Kueue v0.20's SkipChildJobSuspension (beta, on by default; #16370): a job with a Kueue-managed ancestor is
    not suspended whatever that ancestor's Workload (here missing), and still gets no Workload of its own."""
    child, jobset, mpijob = _deep_child()
    frameworks = {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]}
    config = (ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "integrations": frameworks})
        if default else _config(skip=True, integrations=frameworks))
    jobs, _, appended = integration(child, before=(config,))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    jobs.parents.hold("JobSet", {"ns/js": _Object(jobset)})
    jobs.parents.hold("MPIJob", {"ns/m": _Object(mpijob)})
    await jobs.reconcile("ns/train")
    assert client.patches == [] and appended == [], "create raises: no Workload either"


@pytest.mark.asyncio
async def test_a_job_with_too_many_parents_is_left_alone_with_a_warning_once_per_version() -> None:
    parents = [o.Job(metadata=_meta(f"Job-{i}", f"Job-{i + 1}" if i < 11 else None, queued=True))
               for i in range(1, 12)]
    child = msgspec.structs.replace(job(suspend=False), metadata=msgspec.structs.replace(
        job().metadata, owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name="Job-1",
                                                           uid="uid-Job-1", controller=True)]))
    jobs, _, appended = integration(*parents, child, before=(_config(),))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    await jobs.reconcile("ns/train")
    assert client.patches == [], "neither suspended nor given a Workload"
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and acted.action == child_jobs.NESTING_TOO_DEEP
    (event,) = job_events(acted, Involved("batch/v1", "Job", "ns", "train", acted.uid))
    assert (event.type, event.reason, event.message) == (
        "Warning", "JobNestingTooDeep",
        "Terminated search for Kueue-managed Job because ancestor depth exceeded limit of 10")


@pytest.mark.asyncio
@pytest.mark.parametrize(("evicted", "suspended"), [(False, False), (True, True)])
async def test_under_an_elastic_ancestor_a_child_is_held_only_once_its_workload_is_evicted(
        evicted: bool, suspended: bool) -> None:
    """With workload slices (``ElasticJobsViaWorkloadSlices``, the ancestor elastic) a scale-up leaves a new slice
    pending with no admitted one: Kueue then suspends the child only when the ancestor's Workload is evicted."""
    child, jobset, mpijob = _deep_child()
    mpijob = msgspec.structs.replace(mpijob, annotations={"kueue.x-k8s.io/elastic-job": "true"})
    wl = workload()
    mpi_wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name="mpijob-m-12345", uid="wl-m", owner_references=[o.OwnerReference(
            api_version=KINDS["MPIJob"], kind="MPIJob", name="m", uid="uid-m", controller=True)]))
    config = _config(integrations={"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]},
                     featureGates={"ElasticJobsViaWorkloadSlices": True})
    jobs, mirror, _ = integration(mpi_wl, child, before=(config,))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    jobs.parents.hold("JobSet", {"ns/js": _Object(jobset)})
    jobs.parents.hold("MPIJob", {"ns/m": _Object(mpijob)})
    if evicted:
        mirror.state.workloads[MPIJOB_PARENT_WL].evicted = "Preempted"
    await jobs.reconcile("ns/train")
    assert bool(client.patches) == suspended


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "JAXJob"])
async def test_the_connector_lets_a_job_find_a_training_job_ancestor(kind: str) -> None:
    """With a training operator kind's integration on, Kueue's walk takes a queued job of that kind as a Job's
    ancestor: the connector gives the Job integration that kind's objects, so a queued Job under a queued
    PyTorchJob is a child held for the PyTorchJob's Workload, not given a Workload of its own (double quota)."""
    from connectors.k8s.connector import Connector

    noun = kind.lower()
    config = _config(integrations={"frameworks": ["batch/job", f"kubeflow.org/{noun}"]})
    child = msgspec.structs.replace(job(suspend=False), metadata=msgspec.structs.replace(
        job().metadata, owner_references=[o.OwnerReference(
            api_version="kubeflow.org/v1", kind=kind, name="pt", uid="uid-pt", controller=True)]))
    jobs, mirror, appended = integration(child, before=(config,))
    connector = Connector(RecordingClient(), jobs.journal)  # type: ignore[arg-type]
    (training,) = [i for i in connector.kubeflow if i.KIND == kind]
    training.known["ns/pt"] = _Object(o.ObjectMeta(name="pt", namespace="ns", uid="uid-pt", labels={QUEUE: "lq"}))
    jobs.parents = connector.jobs.parents  # type: ignore[union-attr]  # what the connector registered
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert [(k, body["spec"]) for k, _, body in client.patches] == [("Job", {"suspend": True})]
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and acted.action == child_jobs.SUSPENDED, "held as a child"


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "api_version", "frameworks"), [
    ("RayCluster", "ray.io/v1", ["ray.io/raycluster"]),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", ["pod", "leaderworkerset.x-k8s.io/leaderworkerset"])])
async def test_the_connector_lets_a_job_find_every_ancestor_kind_the_webhook_reads(kind: str, api_version: str,
                                                                                  frameworks: list[str]) -> None:
    """The Job webhook walks up through every kind Kueue runs (RayClusters and LeaderWorkerSets too) and leaves a
    queued such object's Job running as its child; the reconciler must walk the same kinds, else it takes that
    Job for a top-level one and gives it a Workload of its own (double quota) where Kueue holds it as a child."""
    from connectors.k8s.connector import Connector

    config = _config(integrations={"frameworks": ["batch/job", *frameworks]})
    child = msgspec.structs.replace(job(suspend=False), metadata=msgspec.structs.replace(
        job().metadata, owner_references=[o.OwnerReference(
            api_version=api_version, kind=kind, name="p", uid="uid-p", controller=True)]))
    jobs, mirror, appended = integration(child, before=(config,))
    connector = Connector(RecordingClient(), jobs.journal)  # type: ignore[arg-type]
    held = connector.rayclusters if kind == "RayCluster" else connector.leaderworkersets
    held.known["ns/p"] = _Object(o.ObjectMeta(name="p", namespace="ns", uid="uid-p",  # type: ignore[union-attr]
                                              labels={QUEUE: "lq"}))
    jobs.parents = connector.jobs.parents  # type: ignore[union-attr]  # what the connector registered
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert [(k, body["spec"]) for k, _, body in client.patches] == [("Job", {"suspend": True})]
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and acted.action == child_jobs.SUSPENDED, "held as a child"


@pytest.mark.asyncio
async def test_a_job_in_a_namespace_the_selector_leaves_out_is_not_walked_up_nor_warned() -> None:
    """Kueue's reconciler (ManagedJobsNamespaceSelectorAlwaysRespected, locked on) leaves a job in a namespace
    ``managedJobsNamespaceSelector`` does not select before it looks for a managed ancestor: no JobNestingTooDeep."""
    parents = [o.Job(metadata=_meta(f"Job-{i}", f"Job-{i + 1}" if i < 11 else None, queued=True))
               for i in range(1, 12)]
    child = msgspec.structs.replace(job(suspend=False), metadata=msgspec.structs.replace(
        job().metadata, owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name="Job-1",
                                                           uid="uid-Job-1", controller=True)]))
    jobs, _, appended = integration(*parents, child, before=(
        _config(managedJobsNamespaceSelector={"matchLabels": {"kueue-managed": "true"}}),))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert client.patches == [] and appended == []


# --- walking through a parent whose integration is off (Kueue's #4824) ------------------------------------

AW_API = KINDS["AppWrapper"]


class _Apiserver(RecordingClient):
    """Serves GETs of the objects given (kind, metadata) as the client answers them, the body's bytes,
    recording each read; anything else is not found. Patches are recorded as :class:`RecordingClient` records
    them."""

    def __init__(self, *objects: tuple[str, o.ObjectMeta]) -> None:
        super().__init__()
        self.objects = {(kind, meta.name): meta for kind, meta in objects}
        self.reads: list[tuple[str, str]] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        from connectors.k8s.errors import NotFound

        self.reads.append((resource.kind, name))
        if (resource.kind, name) not in self.objects:
            raise NotFound(f"{resource.kind} {name} not found", 404, "NotFound")
        return msgspec.json.encode(_Object(self.objects[(resource.kind, name)]))


def _ref(api_version: str, kind: str, name: str) -> list[o.OwnerReference]:
    return [o.OwnerReference(api_version=api_version, kind=kind, name=name, uid=f"uid-{name}",
                             controller=True)]


def _job_of(refs: list[o.OwnerReference], labels: dict[str, str]) -> o.Job:
    return msgspec.structs.replace(job(suspend=False), metadata=msgspec.structs.replace(
        job().metadata, labels=labels, owner_references=refs))


@pytest.mark.asyncio
@pytest.mark.parametrize(("aw_queued", "manage"), [(True, False), (False, True)])
async def test_a_job_finds_its_ancestor_through_a_parent_whose_integration_is_off(aw_queued: bool,
                                                                                 manage: bool) -> None:
    """Kueue's #4824 (v0.12): Job -> JobSet (JobSet integration off) -> AppWrapper, queued or under
    ``manageJobsWithoutQueueName``. Kueue's walk reads the JobSet's metadata (nothing lists JobSets then: here
    a GET) and walks on to the AppWrapper, the Job's ancestor: the Job is held as its child with no Workload
    of its own. Before, the walk stopped at the JobSet and the Job was top-level (under the option given a
    Workload in no queue, so the AppWrapper's admitted job never ran)."""
    jobset = o.ObjectMeta(name="js", namespace="ns", uid="uid-js",
                          owner_references=_ref(AW_API, "AppWrapper", "aw"))
    appwrapper = o.ObjectMeta(name="aw", namespace="ns", uid="uid-aw",
                              labels={QUEUE: "lq"} if aw_queued else {})
    child = _job_of(_ref(KINDS["JobSet"], "JobSet", "js"), {})
    config = _config(integrations={"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]},
                     manageJobsWithoutQueueName=manage)
    jobs, _, appended = integration(child, before=(config,))
    client = jobs.client = _Apiserver(("JobSet", jobset))  # type: ignore[assignment]
    jobs.parents.hold("AppWrapper", {"ns/aw": _Object(appwrapper)})
    await jobs.reconcile("ns/train")
    assert [(k, body["spec"]) for k, _, body in client.patches] == [("Job", {"suspend": True})]
    (acted,) = appended
    assert isinstance(acted, ev.JobActed) and acted.action == child_jobs.SUSPENDED, "the AppWrapper's child"
    assert client.reads == [("JobSet", "js")], "the AppWrapper is held: only the JobSet is read"


@pytest.mark.asyncio
async def test_a_parent_whose_integration_is_off_and_is_not_there_leaves_the_job_alone() -> None:
    """Kueue's walk fails ``workload owner not found`` when it cannot read a parent it walks through, and the
    reconcile is retried: the queued Job is neither suspended nor given a Workload meanwhile."""
    child = _job_of(_ref(KINDS["JobSet"], "JobSet", "gone"), {QUEUE: "lq"})
    config = _config(integrations={"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]})
    jobs, _, appended = integration(child, before=(config,))
    client = jobs.client = _Apiserver()  # type: ignore[assignment]
    await jobs.reconcile("ns/train")
    assert client.patches == [] and appended == []
    assert client.reads == [("JobSet", "gone")]


@pytest.mark.asyncio
async def test_a_parent_of_a_kind_kueue_does_not_know_ends_the_walk_unread() -> None:
    """A CronJob's Job: no integration of Kueue's has that kind, so its walk stops there without reading it
    (as since Kueue's #5252) and the queued Job is top-level: stopped for its missing Workload, not held as a
    child."""
    child = _job_of(_ref("batch/v1", "CronJob", "nightly"), {QUEUE: "lq"})
    jobs, _, appended = integration(child, before=(_config(),))
    client = jobs.client = RecordingClient()  # type: ignore[assignment]  # a read fails the test
    await jobs.reconcile("ns/train")
    assert [(k, body["spec"]) for k, _, body in client.patches] == [("Job", {"suspend": True})]
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] != [child_jobs.SUSPENDED]


# --- a parent of a kind an external controller runs for Kueue (``integrations.externalFrameworks``) ---------

FOO_API = "example.com/v1"
EXTERNAL = {"frameworks": ["batch/job"], "externalFrameworks": ["Foo.v1.example.com"]}


class _DiscoveringApiserver(_Apiserver):
    """:class:`_Apiserver` that also serves the discovery document of ``example.com/v1``, where the ``Foo``
    CRD puts its resource ``foos``; reads of it recorded as ``("discovery", path)``."""

    async def request(self, method: str, path: str, **_: Any) -> bytes:
        from connectors.k8s.errors import NotFound

        self.reads.append(("discovery", path))
        if path != f"/apis/{FOO_API}":
            raise NotFound(f"GET {path}: 404", 404, "NotFound")
        return msgspec.json.encode({"kind": "APIResourceList", "resources": [
            {"name": "foos", "kind": "Foo", "namespaced": True}]})


def test_the_walk_reads_a_parent_of_an_external_framework_kind_and_takes_it_as_the_ancestor() -> None:
    """Kueue's ``isKnownOwner`` and ``getJobTypeForOwner`` know each ``integrations.externalFrameworks`` kind:
    the walk reads such a parent (nothing holds that kind: from the apiserver) and a queued one is the
    ancestor; the kind not listed ends the walk unread."""
    foo = o.ObjectMeta(name="f", namespace="ns", uid="uid-f", labels={QUEUE: "lq"})
    child = o.ObjectMeta(name="Job-1", namespace="ns", uid="uid-Job-1",
                         owner_references=_ref(FOO_API, "Foo", "f"))

    def walk(config: Any) -> tuple[str | None, list[str]]:
        reads: list[str] = []

        async def read(namespace: str, ref: o.OwnerReference) -> o.ObjectMeta | None:
            reads.append(ref.name)
            return foo if ref.name == "f" else None

        found = asyncio.run(walk_reading(child, lambda done: Parents().parent_of(config, {}, done), read,
                                         False))
        return (found.name if found is not None else None), reads

    assert walk(load_config({"integrations": EXTERNAL})) == ("f", ["f"])
    assert walk(load_config({"integrations": {"frameworks": ["batch/job"]}})) == (None, [])


@pytest.mark.asyncio
@pytest.mark.parametrize(("admitted", "suspended"), [(False, True), (True, False)])
async def test_a_job_under_a_queued_parent_of_an_external_kind_waits_for_that_parents_workload(
        admitted: bool, suspended: bool) -> None:
    """A Job whose controller is a queued ``Foo`` (an ``integrations.externalFrameworks`` kind) is that Foo's
    child, as Kueue's reconciler finds it: it gets no Workload of its own (the external controller makes the
    Foo's, owned by the Foo) and is kept suspended until that Workload is admitted. Before, it was a top-level
    Job with a Workload of its own: quota counted twice. The Foo is read from the apiserver, at the resource
    discovery names, found once."""
    foo = o.ObjectMeta(name="f", namespace="ns", uid="uid-f", labels={QUEUE: "lq"})
    child = _job_of(_ref(FOO_API, "Foo", "f"), {QUEUE: "lq"})
    wl = workload()
    foo_wl = msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name="foo-f-12345", uid="wl-f", owner_references=_ref(FOO_API, "Foo", "f")))
    jobs, mirror, appended = integration(foo_wl, child, before=(_config(integrations=EXTERNAL),))
    client = jobs.client = _DiscoveringApiserver(("Foo", foo))  # type: ignore[assignment]
    if admitted:
        mirror.state.workloads["ns/foo-f-12345"].phase = ADMITTED
    await jobs.reconcile("ns/train")
    await jobs.reconcile("ns/train")
    held = [("Job", {"suspend": True})] if suspended else []
    assert [(k, body["spec"]) for k, _, body in client.patches] == held, "once per version of the Job"
    assert [e.action for e in appended if isinstance(e, ev.JobActed)] == (
        [child_jobs.SUSPENDED] if suspended else []), "held as the Foo's child, no Workload made"
    assert client.reads == [("discovery", f"/apis/{FOO_API}"), ("Foo", "f"), ("Foo", "f")]


def test_every_kind_the_walk_knows_can_be_read_and_the_rbac_grants_it() -> None:
    """A parent the walk passes through is read from the apiserver: each kind Kueue knows (its integrations',
    on or off, and the ReplicaSet) has a resource to read it at, and ``kueue-es manifests`` grants getting
    it."""
    from connectors.k8s import job_selection
    from connectors.k8s.manifests import cluster_role
    from connectors.k8s.parent_reads import PARENT_RESOURCES

    rules = cluster_role("kueue-es")["rules"]
    for api_version, kind in sorted(job_selection.KNOWN_OWNERS):
        resource = PARENT_RESOURCES.get(kind)
        assert resource is not None and resource.api_version == api_version, kind
        assert any(resource.group in r["apiGroups"] and resource.plural in r["resources"]
                   and "get" in r["verbs"] and "resourceNames" not in r for r in rules), resource.plural
    assert not job_selection.known_owner(("batch/v1", "CronJob"))
    assert job_selection.known_owner(("kubeflow.org/v1", "MPIJob")), "an MPIJob of any version, as isMPIJob"
