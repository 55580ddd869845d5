"""Kueue's ``manageJobsWithoutQueueName`` in the Job integration (connectors/k8s/job_selection.py, jobs.py,
job_sync.py): with it on, a Job naming no queue in a managed namespace is suspended (after the fact, without the
webhook) and given a Workload with no queue name; the Workload follows the label when the suspended Job gets one
(or loses it); the child of a Kueue-run parent is left to the parent. No cluster needed."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.jobs import NAME, UID, integration, job, namespace, workload

from connectors.k8s import deployment_webhook as dw
from connectors.k8s import framework_webhook, job_selection
from connectors.k8s.jobs import JobIntegration
from connectors.k8s.jobset import JobSet
from connectors.k8s.mirror import Mirror
from connectors.k8s.pod_webhook import PodDefaulting
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from projections.workloads import ADMITTED

QUEUE = "kueue.x-k8s.io/queue-name"


def _config(**fields: object) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **fields})


ON = _config(manageJobsWithoutQueueName=True)


def _unqueued(j: o.Job, *owners: o.OwnerReference) -> o.Job:
    """``j`` without its queue label (and with ``owners``)."""
    labels = {k: v for k, v in j.metadata.labels.items() if k != QUEUE}
    return msgspec.structs.replace(j, metadata=msgspec.structs.replace(
        j.metadata, labels=labels, owner_references=list(owners)))


def _queueless(wl: o.Workload) -> o.Workload:
    return msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, queue_name=""))


class Client:
    """Serves the Job as the log holds it; records every create and patch, each of which succeeds."""

    def __init__(self, job_doc: dict[str, Any]) -> None:
        self.job_doc = job_doc
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        if resource.kind == "Pod":  # a Job's parent Pod, read as the walk passes through it: no controller
            return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace, "uid": "p"}})
        assert resource.kind == "Job"
        return msgspec.json.encode(self.job_doc)

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        self.created.append(body)
        return msgspec.json.encode(body)

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        self.patches.append((resource.kind, body))
        return msgspec.json.encode(self.job_doc)


def _setup(j: o.Job, *objs: o.KObject, before: tuple[ev.AnyEvent, ...] = (ON,)
           ) -> tuple[JobIntegration, Mirror, Client]:
    jobs, mirror, _ = integration(*objs, j, before=before)
    client = jobs.client = Client(msgspec.to_builtins(j))  # type: ignore[assignment]
    return jobs, mirror, client


def test_the_option_is_off_unless_the_configuration_turns_it_on() -> None:
    assert not load_config({}).manage_jobs_without_queue_name
    assert load_config({"manageJobsWithoutQueueName": True}).manage_jobs_without_queue_name


@pytest.mark.asyncio
async def test_a_job_without_a_queue_name_gets_a_workload_in_no_queue_only_under_the_option() -> None:
    off_jobs, _, off_client = _setup(_unqueued(job()), before=())
    await off_jobs.reconcile("ns/train")
    assert off_client.created == [] and off_client.patches == [], "by default a Job naming no queue is not Kueue's"

    jobs, _, client = _setup(_unqueued(job()))
    await jobs.reconcile("ns/train")
    (made,) = client.created
    assert made["metadata"]["name"] == NAME and "queueName" not in made["spec"], "Kueue's omits the empty name"
    assert made["spec"]["podSets"][0]["count"] == 4


@pytest.mark.asyncio
async def test_a_running_job_without_a_queue_name_is_suspended_after_the_fact() -> None:
    jobs, _, client = _setup(_unqueued(job(suspend=False)))
    await jobs.reconcile("ns/train")
    assert [(kind, body["spec"]) for kind, body in client.patches] == [("Job", {"suspend": True})]
    assert client.created == []


@pytest.mark.asyncio
async def test_a_namespace_the_selector_leaves_out_keeps_its_jobs_without_a_queue_name() -> None:
    selector = {"matchLabels": {"kueue-managed": "true"}}
    jobs, _, client = _setup(_unqueued(job(suspend=False)),
                             before=(_config(manageJobsWithoutQueueName=True, managedJobsNamespaceSelector=selector),))
    await jobs.reconcile("ns/train")
    assert client.patches == [] and client.created == []


OWNED_BY_JOB = o.OwnerReference(api_version="batch/v1", kind="Job", name="parent", uid="p", controller=True)
OWNED_BY_POD = o.OwnerReference(api_version="v1", kind="Pod", name="parent", uid="p", controller=True)
OWNED_BY_CRONJOB = o.OwnerReference(api_version="batch/v1", kind="CronJob", name="parent", uid="p", controller=True)


@pytest.mark.asyncio
@pytest.mark.parametrize(("owner", "frameworks", "managed"), [
    (OWNED_BY_JOB, ["batch/job"], False),
    (OWNED_BY_POD, ["batch/job", "pod"], False),
    (OWNED_BY_POD, ["batch/job"], True),  # the pod integration off: a Pod is walked through, not Kueue's
    (OWNED_BY_CRONJOB, ["batch/job"], True),  # no Kueue integration runs CronJobs: its Jobs are top-level
    (msgspec.structs.replace(OWNED_BY_JOB, controller=False), ["batch/job"], True),  # only the controller counts
], ids=["job", "pod-integration-on", "pod-integration-off", "cronjob", "not-controller"])
async def test_the_child_of_a_parent_kueue_runs_is_left_to_the_parent(owner: o.OwnerReference,
                                                                      frameworks: list[str], managed: bool) -> None:
    config = _config(manageJobsWithoutQueueName=True, integrations={"frameworks": frameworks})
    jobs, _, client = _setup(_unqueued(job(), owner), before=(config,))
    await jobs.reconcile("ns/train")
    assert bool(client.created) == managed, "a child gets no Workload of its own"


JOBSET_PARENT = o.OwnerReference(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js", uid="js-uid",
                                 controller=True)


def _parent_workload() -> o.Workload:
    """The JobSet's Workload (pending until the test admits it)."""
    wl = workload()
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name="jobset-js-12345", owner_references=[JOBSET_PARENT]))


def _jobset(*, queued: bool) -> JobSet:
    """The JobSet ``ns/js`` the child Jobs belong to, naming LocalQueue ``lq`` when ``queued``."""
    return JobSet(metadata=o.ObjectMeta(name="js", namespace="ns", uid="js-uid",
                                        labels={QUEUE: "lq"} if queued else {}))


def _held(jobs: JobIntegration, *jobsets: JobSet) -> None:
    """The JobSets as the JobSet integration's informer would hold them."""
    jobs.parents.hold("JobSet", {js.key: js for js in jobsets})


JOBSETS_ON = _config(integrations={"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]})
JOBSETS_HOLDING = _config(integrations={"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
                          featureGates={"SkipChildJobSuspension": False})
"""As :data:`JOBSETS_ON`, with Kueue v0.20's ``SkipChildJobSuspension`` off: a child is held for its ancestor."""


def _child(*, labels: dict[str, str], suspend: bool = False) -> o.Job:
    return msgspec.structs.replace(job(suspend=suspend), metadata=msgspec.structs.replace(
        job().metadata, labels=labels, owner_references=[JOBSET_PARENT]))


@pytest.mark.asyncio
@pytest.mark.parametrize(("queued", "parent", "labels", "suspended"), [
    (True, None, {QUEUE: "lq"}, True),  # the JobSet's Workload not made yet: the Job is its child all the same
    (True, "pending", {QUEUE: "lq"}, True),
    (True, "admitted", {QUEUE: "lq"}, False),
    (True, "pending", {}, True),  # naming no queue: its parent is Kueue's all the same
    (False, None, {QUEUE: "lq"}, True),  # its parent not Kueue's: a queued Job like any, suspended to get its own
    (False, None, {}, False),  # naming no queue, its parent not Kueue's: neither is it
], ids=["parent-workload-missing", "parent-pending", "parent-admitted", "unqueued-parent-pending",
        "unqueued-parent-queued-job", "unqueued-parent-unqueued-job"])
@pytest.mark.parametrize("skip", [False, True], ids=["holding", "skip-child-job-suspension"])
async def test_a_running_child_job_is_kept_suspended_until_its_parents_workload_is_admitted(
        queued: bool, parent: str | None, labels: dict[str, str], suspended: bool, skip: bool) -> None:
    """Reference §7.1 item 3: a queued JobSet's Job (the JobSet integration on) gets no Workload of its own and,
    with SkipChildJobSuspension off, is suspended ("Kueue managed child job suspended") while the JobSet's
    Workload is missing or not admitted. Kueue v0.20 turns that gate on (beta, #16370): the child is left as it
    is, whatever its ancestor's Workload; a Job whose parent is not Kueue's is no child, suspended as before."""
    objs = () if parent is None else (_parent_workload(),)
    jobs, mirror, client = _setup(_child(labels=labels), *objs, before=(JOBSETS_ON if skip else JOBSETS_HOLDING,))
    _held(jobs, _jobset(queued=queued))
    if parent == "admitted":
        mirror.state.workloads["ns/jobset-js-12345"].phase = ADMITTED
    await jobs.reconcile("ns/train")
    assert client.created == []
    assert client.patches == ([("Job", {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}})]
                              if suspended and not (skip and queued) else [])


@pytest.mark.asyncio
async def test_its_workload_moves_to_the_queue_the_suspended_job_names_and_back_to_none() -> None:
    jobs, mirror, client = _setup(job(), _queueless(workload()))
    await jobs.reconcile("ns/train")
    assert client.patches == [("Workload", {"metadata": {"resourceVersion": "3"}, "spec": {"queueName": "lq"}})]

    jobs, mirror, client = _setup(_unqueued(job()), workload())
    await jobs.reconcile("ns/train")
    assert client.patches == [("Workload", {"metadata": {"resourceVersion": "3"}, "spec": {"queueName": None}})], (
        "the label gone: Kueue writes the Job's empty queue name, which removes the field")


@pytest.mark.asyncio
async def test_without_the_option_a_job_losing_its_label_is_let_go() -> None:
    jobs, _, client = _setup(_unqueued(job()), workload(), before=())
    await jobs.reconcile("ns/train")
    assert client.patches == [] and client.created == []


def test_the_selection_rule() -> None:
    on = load_config({"manageJobsWithoutQueueName": True})
    ns = dict(namespace("ns").metadata.labels)
    assert job_selection.is_managed({QUEUE: "lq"}, ("batch/v1", "Job"), ns, load_config({})), (
        "a queue name is managed whatever its owner (the child-Job rule is not modelled)")
    assert job_selection.is_managed({}, None, ns, on)
    assert not job_selection.is_managed({}, None, None, on), "a namespace not known yet waits"
    assert not job_selection.is_managed({}, None, {"kubernetes.io/metadata.name": "kube-system"}, on)
    assert job_selection.raw_controller({"ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "p", "uid": UID},
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": UID, "controller": True}]}) == ("v1", "Pod")


def test_a_job_parent_counts_only_while_the_job_integration_is_on() -> None:
    """Kueue's ``IsOwnerManagedByKueue`` asks its enabled integrations only: with ``batch/job`` not among the
    frameworks a batch/v1 Job is no parent Kueue runs, so its children are not left to it (before, a Job parent
    counted always)."""
    without_jobs = load_config({"integrations": {"frameworks": ["jobset.x-k8s.io/jobset"]},
                                "manageJobsWithoutQueueName": True})
    assert not job_selection.runs_parent(("batch/v1", "Job"), without_jobs)
    assert job_selection.manages_unqueued(("batch/v1", "Job"), without_jobs)
    assert job_selection.runs_parent(("batch/v1", "Job"), load_config({"manageJobsWithoutQueueName": True}))


def test_a_parent_of_an_external_framework_kind_is_one_kueue_manages() -> None:
    """Kueue registers each ``integrations.externalFrameworks`` kind (``RegisterExternalJobType``): its
    ``isKnownOwner`` and ``IsOwnerManagedByKueue`` take a controller of exactly that apiVersion and kind for a
    parent it manages, so the walk reads it and, under ``manageJobsWithoutQueueName``, its children are left
    to it. Another version of the kind is not."""
    config = load_config({"integrations": {"externalFrameworks": ["Foo.v1.example.com"]},
                          "manageJobsWithoutQueueName": True})
    foo = ("example.com/v1", "Foo")
    assert config.external_job_kinds == frozenset({foo})
    assert config.external_job_kinds is config.external_job_kinds, "computed once per Configuration"
    other_config = msgspec.structs.replace(config, integrations=None)
    assert other_config.external_job_kinds == frozenset(), "a Configuration made from it computes its own"
    assert job_selection.runs_parent(foo, config) and not job_selection.manages_unqueued(foo, config)
    assert job_selection.known_owner(foo, config.external_job_kinds) and not job_selection.known_owner(foo)
    other = ("example.com/v2", "Foo")
    assert not job_selection.runs_parent(other, config) and job_selection.manages_unqueued(other, config)
    assert not job_selection.runs_parent(foo, load_config({"manageJobsWithoutQueueName": True}))
    for settings in (PodDefaulting.of(config), dw.ParentDefaulting.of(config, "deployment"),
                     framework_webhook.FrameworkWebhooks.reading(config, True)):
        assert settings.external_kinds == frozenset({foo}), type(settings).__name__


@pytest.mark.parametrize("listed", ["leaderworkerset.x-k8s.io/leaderworkerset", "deployment", "statefulset"])
def test_a_pod_parent_counts_while_the_pod_integration_is_on_by_a_framework_that_turns_it_on(listed: str) -> None:
    """Kueue since v0.15 (#6736) sets the pod integration up, and marks it enabled, for a framework that turns it on
    by itself: its ``IsOwnerManagedByKueue`` then takes a Pod for a parent it runs, as with ``pod`` listed, on every
    walk the webhooks make (the Job's, the Pod's, the parent frameworks')."""
    config = load_config({"integrations": {"frameworks": ["batch/job", listed]}, "manageJobsWithoutQueueName": True})
    pod = ("v1", "Pod")
    assert job_selection.runs_parent(pod, config) and not job_selection.manages_unqueued(pod, config)
    assert "pod" in PodDefaulting.of(config).frameworks
    assert "pod" in dw.ParentDefaulting.of(config, "deployment").frameworks
    assert "pod" in framework_webhook.FrameworkWebhooks.reading(config, True).frameworks
    assert not job_selection.runs_parent(pod, load_config({"manageJobsWithoutQueueName": True}))


@pytest.mark.asyncio
@pytest.mark.parametrize("parent_queued", [True, False])
async def test_a_suspended_job_naming_a_queue_gets_a_workload_of_its_own_only_when_its_parent_is_not_kueues(
        parent_queued: bool) -> None:
    """A queued JobSet's Workload is the one queued: its Job, whatever queue its template gave it, is not one more,
    also before the JobSet's Workload is made (Kueue reads the JobSet's queue-name label, not its Workload). Under
    a JobSet naming no queue, the Job is a Job like any (Kueue finds no managed ancestor)."""
    jobs, _, client = _setup(_child(labels={QUEUE: "lq"}, suspend=True), before=(JOBSETS_ON,))
    _held(jobs, _jobset(queued=parent_queued))
    await jobs.reconcile("ns/train")
    assert client.patches == [] and bool(client.created) == (not parent_queued)


@pytest.mark.asyncio
async def test_a_job_whose_parent_is_not_held_yet_is_left_alone_and_looked_at_again() -> None:
    """Kueue's reconcile fails when the controller it walks to is not there: the Job is left as it is (no Workload
    of its own) until the JobSet integration's list holds the JobSet."""
    jobs, _, client = _setup(_child(labels={QUEUE: "lq"}), before=(JOBSETS_ON,))
    _held(jobs)
    await jobs.reconcile("ns/train")
    assert client.patches == [] and client.created == []
    assert "ns/train" in jobs._retry._at, "looked at again after the retry delay"


def _parent_workload_named(name: str, created: str, *, admitted: bool = False, finished: bool = False
                           ) -> o.Workload:
    wl = _parent_workload()
    status = o.WorkloadStatus(conditions=[o.Condition(type="Finished", status="True", reason="Succeeded")]
                              if finished else [])
    return msgspec.structs.replace(wl, metadata=msgspec.structs.replace(
        wl.metadata, name=name, uid=f"uid-{name}", creation_timestamp=created), status=status)


@pytest.mark.asyncio
@pytest.mark.parametrize(("newer_finished", "suspended"), [(False, True), (True, False)],
                         ids=["newest-pending", "newest-finished"])
async def test_the_parents_workload_is_its_newest_not_finished_one(newer_finished: bool, suspended: bool) -> None:
    """Kueue's job reconciler takes the parent's newest Workload not finished (by creation time), whatever the
    names: an admitted older one does not let the child run while a newer one waits."""
    older = _parent_workload_named("jobset-js-aaaaa", "2026-01-01T00:00:00Z")
    newer = _parent_workload_named("jobset-js-bbbbb", "2026-01-01T00:00:05Z", finished=newer_finished)
    jobs, mirror, client = _setup(_child(labels={QUEUE: "lq"}), older, newer, before=(JOBSETS_HOLDING,))
    _held(jobs, _jobset(queued=True))
    mirror.state.workloads["ns/jobset-js-aaaaa"].phase = ADMITTED
    await jobs.reconcile("ns/train")
    assert client.created == []
    assert bool(client.patches) == suspended
