"""The Workload the Job integration builds for a batch/v1 Job (no cluster needed)."""

from __future__ import annotations

import asyncio
import hashlib

import msgspec
import pytest
from fixtures.jobs import namespace

from connectors.k8s.jobs import JobIntegration, _exact, workload_name
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.recorder import events_of
from connectors.k8s.workload_body import max_execution_seconds
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.log import MemoryLog

UID = "0f5e2c3a-1111-2222-3333-444455556666"


def _integration(*objs: o.KObject) -> JobIntegration:
    mirror = Mirror()
    for i, obj in enumerate(objs):
        mirror.apply(ev.Record(i, ev.ObjectUpserted(time=1, key=obj.key, obj=obj)))
    return JobIntegration(None, LocalJournal(MemoryLog(), mirror))  # type: ignore[arg-type]


def _job(**spec) -> dict:
    return {
        "metadata": {"name": "sample", "namespace": "team-a", "uid": UID,
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue", **spec.pop("labels", {})},
                     "annotations": spec.pop("annotations", {})},
        "spec": {"parallelism": 3, "completions": 2, "suspend": True, "template": {
            "metadata": {"labels": {"app": "x", "job-name": "sample", "controller-uid": UID,
                                    "batch.kubernetes.io/controller-uid": UID, "batch.kubernetes.io/job-name": "sample"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                     **spec.pop("pod", {})}}, **spec},
    }


def test_name_is_kueues() -> None:
    h = hashlib.sha1(f"Job\nbatch\nsample\n{UID}".encode()).hexdigest()[:5]
    assert workload_name("sample", UID) == f"job-sample-{h}"
    long = "j" * 300
    assert len(workload_name(long, UID)) == 253


def test_workload_for_a_job() -> None:
    wpc = o.WorkloadPriorityClass(metadata=o.ObjectMeta(name="high"), value=1000)
    jobs = _integration(wpc)
    wl = jobs.workload_for(_job(labels={"kueue.x-k8s.io/priority-class": "high",
                                        "kueue.x-k8s.io/max-exec-time-seconds": "600"},
                                annotations={"kueue.x-k8s.io/job-min-parallelism": "1",
                                             "provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60",
                                             "other": "no"}), "job-sample-abcde")
    meta, spec = wl["metadata"], wl["spec"]
    assert meta["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "sample", "uid": UID,
                                        "controller": True, "blockOwnerDeletion": True}]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": UID}
    assert meta["annotations"] == {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60"}
    assert spec["queueName"] == "user-queue"
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    assert spec["priority"] == 1000
    assert spec["maximumExecutionTimeSeconds"] == 600
    (ps,) = spec["podSets"]
    assert ps["name"] == "main" and ps["count"] == 2 and ps["minCount"] == 1
    assert ps["template"]["metadata"]["labels"] == {"app": "x", "batch.kubernetes.io/job-name": "sample"}
    assert ps["template"]["spec"]["containers"][0]["image"] == "busybox"


def test_no_min_count_when_the_recorded_configuration_turns_partial_admission_off() -> None:
    jobs = _integration()
    annotated = _job(annotations={"kueue.x-k8s.io/job-min-parallelism": "1"})
    assert jobs.workload_for(annotated, "n")["spec"]["podSets"][0]["minCount"] == 1, "the gate is on by default"
    off = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "featureGates": {"PartialAdmission": False}}
    jobs.state.apply(ev.Record(9, ev.ConfigRecorded(time=2, document=off, writer="test", id="config-off")))
    assert "minCount" not in jobs.workload_for(annotated, "n")["spec"]["podSets"][0]


def test_priority_from_the_pod_priority_class_or_the_global_default() -> None:
    pcs = [o.PriorityClass(metadata=o.ObjectMeta(name="batch"), value=50),
           o.PriorityClass(metadata=o.ObjectMeta(name="dflt"), value=7, global_default=True)]
    jobs = _integration(*pcs)
    spec = jobs.workload_for(_job(pod={"priorityClassName": "batch"}), "n")["spec"]
    assert spec["priorityClassRef"]["kind"] == "PriorityClass" and spec["priority"] == 50
    spec = jobs.workload_for(_job(), "n")["spec"]
    assert spec["priorityClassRef"]["name"] == "dflt" and spec["priority"] == 7
    assert "priority" not in _integration().workload_for(_job(), "n")["spec"]


def test_exact_map_patch() -> None:
    assert _exact({"a": "1", "b": "2"}, {"a": "1", "c": "3"}) == {"b": None, "a": "1", "c": "3"}
    assert _exact({"a": "1"}, {}) is None


def test_kube_settings_from_the_environment_and_their_checks() -> None:
    import pytest

    from connectors.k8s.settings import validate
    from events.errors import InvalidInput
    from kueue_es import config

    s = config.load(env={"KUEUE_ES_KUBE_ENABLED": "true", "KUEUE_ES_KUBE_LEASE_DURATION_S": "3",
                         "KUEUE_ES_KUBE_RENEW_DEADLINE_S": "2", "KUEUE_ES_KUBE_RETRY_PERIOD_S": "0.5",
                         "KUEUE_ES_KUBE_LEADER_ELECTION": "false"})
    assert s.kube.enabled and s.kube.lease_duration_s == 3 and not s.kube.leader_election
    assert validate(s.kube) is s.kube
    bad = config.load(env={"KUEUE_ES_KUBE_RENEW_DEADLINE_S": "20"}).kube
    with pytest.raises(InvalidInput, match="renew_deadline_s"):
        validate(bad)
    with pytest.raises(InvalidInput, match="KUEUE_ES_KUBE_NOPE"):
        config.load(env={"KUEUE_ES_KUBE_NOPE": "1"})


MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
LABEL_ERROR = f"metadata.labels[{MAX_EXEC}]: Invalid value:"


@pytest.mark.parametrize(("value", "seconds"), [("3", 3), ("0042", 42), (str(2**31 - 1), 2**31 - 1),
                                                (str(2**31), None)])
def test_max_exec_label_becomes_the_workloads_maximum_execution_time(value: str, seconds: int | None) -> None:
    """Kueue parses the label as an int32: a larger value passes its webhook but sets no limit."""
    assert max_execution_seconds({MAX_EXEC: value}) == seconds
    spec = _integration().workload_for(_job(labels={MAX_EXEC: value}), "n")["spec"]
    assert spec.get("maximumExecutionTimeSeconds") == seconds
    assert max_execution_seconds({}) is None


@pytest.mark.parametrize(("value", "message"), [
    ("0", f"{LABEL_ERROR} 0: should be greater than 0"),
    ("-5", f"{LABEL_ERROR} -5: should be greater than 0"),
    ("ten", f'{LABEL_ERROR} "ten": strconv.Atoi: parsing "ten": invalid syntax'),
    ("", f'{LABEL_ERROR} "": strconv.Atoi: parsing "": invalid syntax'),
    ("1.5", f'{LABEL_ERROR} "1.5": strconv.Atoi: parsing "1.5": invalid syntax'),
    ("9" * 20, f'{LABEL_ERROR} "{"9" * 20}": strconv.Atoi: parsing "{"9" * 20}": value out of range'),
])
def test_max_exec_label_kueues_webhook_refuses(value: str, message: str) -> None:
    """The webhook's reading refuses it; the Workload built for a Job carrying it anyway (one the webhook did
    not see) has no maximum execution time, as Kueue's job framework reads such a label as none."""
    with pytest.raises(InvalidInput) as exc:
        max_execution_seconds({MAX_EXEC: value})
    assert str(exc.value) == message
    spec = _integration().workload_for(_job(labels={MAX_EXEC: value}), "n")["spec"]
    assert "maximumExecutionTimeSeconds" not in spec


class _Creates:
    """A client that serves the Job and keeps what it is asked to create."""

    def __init__(self, job: dict) -> None:
        self.job, self.created = job, []

    async def get(self, resource, name, namespace=""):
        return msgspec.json.encode(self.job)

    async def create(self, resource, body, namespace=""):
        self.created.append(body)
        return msgspec.json.encode(body)


def test_a_job_with_a_label_the_webhook_refuses_gets_a_workload_without_a_maximum_execution_time() -> None:
    raw = _job(labels={MAX_EXEC: "0"})
    job = msgspec.convert(raw, o.Job)
    jobs = _integration()
    jobs.client = client = _Creates(raw)  # type: ignore[assignment]
    asyncio.run(jobs._create_workload(job, workload_name("sample", UID)))
    assert jobs.stats.invalid == [] and jobs.stats.created == 1
    (body,) = client.created
    assert "maximumExecutionTimeSeconds" not in body["spec"]


# --- a WorkloadPriorityClass that is not there ----------------------------------------------------------------

WPC_LABEL = "kueue.x-k8s.io/priority-class"


def test_a_missing_workload_priority_class_resolves_to_no_priority_at_all() -> None:
    """Kueue does not fall through to the pod's PriorityClass or the global default when the label names a class
    that does not exist: there is no priority to give the Workload."""
    from connectors.k8s.job_priority import WorkloadPriorityClassNotFound, missing_class, workload_priority

    state = _integration(o.PriorityClass(metadata=o.ObjectMeta(name="dflt"), value=7, global_default=True)).state
    with pytest.raises(WorkloadPriorityClassNotFound) as exc:
        workload_priority(state, {WPC_LABEL: "later"}, "dflt")
    assert exc.value.name == "later" and str(exc.value) == 'WorkloadPriorityClass "later" not found'
    assert missing_class(state, {WPC_LABEL: "later"}) == "later"
    assert missing_class(state, {}) is None and missing_class(state, {WPC_LABEL: ""}) is None
    assert workload_priority(state, {WPC_LABEL: ""}, None) == (
        {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "dflt"}, 7), "an empty label names none"
    with pytest.raises(WorkloadPriorityClassNotFound):
        _integration().workload_for(_job(labels={WPC_LABEL: "later"}), "n")


class _Cluster:
    """A client that serves the Job as stored and keeps what is created."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self.created: list[dict] = []

    async def get(self, resource, name, namespace=""):
        return msgspec.json.encode(self.job)

    async def create(self, resource, body, namespace=""):
        self.created.append(body)
        return msgspec.json.encode(body)


LONG = "j" * 100


def _short_names(on: bool, time: int) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=time, writer="test", id=f"c{time}", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"ShortWorkloadNames": on}})


async def _long_named_job(*before: ev.AnyEvent) -> tuple[dict, o.Job, LocalJournal, _Cluster, JobIntegration]:
    """A Job named ``LONG`` in ``team-a``, in a log holding ``before`` first, reconciled once."""
    raw = _job()
    raw["metadata"].update(name=LONG, resourceVersion="7")
    job = msgspec.convert(raw, o.Job)
    journal = LocalJournal(MemoryLog(), Mirror())
    cluster = _Cluster(raw)
    jobs = JobIntegration(cluster, journal)  # type: ignore[arg-type]
    team = namespace("team-a")
    await journal.append([*before, ev.ObjectUpserted(time=1, key=team.key, obj=team),
                          ev.ObjectUpserted(time=1, key=job.key, uid=UID, obj=job)])
    await jobs.reconcile(job.key)
    return raw, job, journal, cluster, jobs


@pytest.mark.parametrize("short", [False, True])
def test_short_workload_names_under_the_gate(short: bool) -> None:
    """Kueue's ShortWorkloadNames (alpha, off): on, a long Job name is cut so that the Workload's name, with its
    hash, is 63 characters, a valid label value; off, it may reach 253."""
    _, _, _, cluster, _ = asyncio.run(_long_named_job(_short_names(short, 1)))
    (body,) = cluster.created
    name = body["metadata"]["name"]
    assert name == workload_name(LONG, UID, short=short)
    assert len(name) == (63 if short else 4 + 100 + 6) and name.startswith("job-jjj")


def test_a_workload_made_under_the_other_name_setting_is_still_the_jobs() -> None:
    """Turning ShortWorkloadNames on after a Job got its (long-named) Workload does not give it a second one:
    Kueue finds a Job's Workload by its owner."""
    async def scenario() -> list[dict]:
        raw, job, journal, cluster, jobs = await _long_named_job()
        (body,) = cluster.created
        body["metadata"].update(uid="wl-uid", resourceVersion="1")
        made = msgspec.convert(body, o.Workload)
        newer = msgspec.structs.replace(job, metadata=msgspec.structs.replace(job.metadata, resource_version="8"))
        cluster.job = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "8"}}
        await journal.append([ev.ObjectUpserted(time=2, key=made.key, uid="wl-uid", obj=made), _short_names(True, 2),
                              ev.ObjectUpserted(time=2, key=job.key, uid=UID, obj=newer)])  # not the same version
        await jobs.reconcile(job.key)
        return cluster.created

    assert len(asyncio.run(scenario())) == 1


async def _workload_once_class_later_exists(jobs: JobIntegration, journal: LocalJournal, mirror: Mirror,
                                            cluster: _Cluster, key: str, kind: type, group: str, value: int) -> None:
    """The Job waits for the class ``later`` of ``kind``: another class leaves it alone, ``later`` makes it dirty,
    and the next reconcile creates its Workload with that class and its value."""
    mirror.dirty_jobs.clear()
    other = kind(metadata=o.ObjectMeta(name="other"), value=5)
    await journal.append([ev.ObjectUpserted(time=2, key="other", obj=other)])
    assert key not in mirror.dirty_jobs, "another class changes nothing for it"
    later = kind(metadata=o.ObjectMeta(name="later"), value=value)
    await journal.append([ev.ObjectUpserted(time=3, key="later", obj=later)])
    assert key in mirror.dirty_jobs, "the class it waits for makes it dirty"
    await jobs.reconcile(key)
    (body,) = cluster.created
    assert body["spec"]["priorityClassRef"] == {"group": group, "kind": kind.__name__, "name": "later"}
    assert body["spec"]["priority"] == value


def test_a_job_naming_a_missing_class_gets_a_warning_and_its_workload_once_the_class_exists() -> None:
    async def scenario() -> None:
        raw = _job(labels={WPC_LABEL: "later"})
        raw["metadata"]["resourceVersion"] = "7"
        job = msgspec.convert(raw, o.Job)
        log, mirror = MemoryLog(), Mirror()
        journal = LocalJournal(log, mirror)
        cluster = _Cluster(raw)
        jobs = JobIntegration(cluster, journal)  # type: ignore[arg-type]
        team = namespace("team-a")
        await journal.append([ev.ObjectUpserted(time=1, key=team.key, obj=team),
                              ev.ObjectUpserted(time=1, key=job.key, uid=UID, obj=job)])
        key = job.key

        async def acted() -> list[ev.JobActed]:
            return [r.event async for r in log.read(0) if isinstance(r.event, ev.JobActed)]

        await jobs.reconcile(key)
        (warned,) = await acted()
        assert (warned.key, warned.uid, warned.action, warned.message) == (
            key, UID, "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "later" not found')
        assert cluster.created == [] and jobs.stats.class_missing == 1
        (event,) = [e for r in mirror.kube_events.ready.values() for e in events_of(r)]
        assert (event.type, event.reason, event.message, event.component) == (
            "Warning", "WorkloadPriorityClassNotFound", 'WorkloadPriorityClass "later" not found',
            "batch/job-kueue-controller")

        await jobs.reconcile(key)  # the same version of the Job: reported once
        assert len(await acted()) == 1 and cluster.created == []

        await _workload_once_class_later_exists(jobs, journal, mirror, cluster, key, o.WorkloadPriorityClass,
                                                "kueue.x-k8s.io", 500)
        assert [a.action for a in await acted()] == ["WorkloadPriorityClassNotFound", "CreatedWorkload"]

    asyncio.run(scenario())


# --- a PriorityClass the pod template names that is not there -------------------------------------------------


def test_a_missing_pod_priority_class_resolves_to_no_priority_at_all() -> None:
    """Kueue's lookup of the pod template's PriorityClass fails: no fallback to the global default, no Workload."""
    from connectors.k8s.job_priority import PriorityClassNotFound, missing_pod_class, workload_priority

    state = _integration(o.PriorityClass(metadata=o.ObjectMeta(name="dflt"), value=7, global_default=True)).state
    with pytest.raises(PriorityClassNotFound) as exc:
        workload_priority(state, {}, "gone")
    assert exc.value.name == "gone" and str(exc.value) == 'PriorityClass "gone" not found'
    assert missing_pod_class(state, {}, "gone") == "gone"
    assert missing_pod_class(state, {}, "dflt") is None and missing_pod_class(state, {}, "") is None
    assert missing_pod_class(state, {WPC_LABEL: "w"}, "gone") is None, "the label's class decides, not the pod's"
    with pytest.raises(PriorityClassNotFound):
        _integration().workload_for(_job(pod={"priorityClassName": "gone"}), "n")


def test_a_job_naming_a_missing_pod_priority_class_gets_its_workload_once_the_class_exists() -> None:
    async def scenario() -> None:
        raw = _job(pod={"priorityClassName": "later"})
        raw["metadata"]["resourceVersion"] = "7"
        job = msgspec.convert(raw, o.Job)
        log, mirror = MemoryLog(), Mirror()
        journal = LocalJournal(log, mirror)
        cluster = _Cluster(raw)
        jobs = JobIntegration(cluster, journal)  # type: ignore[arg-type]
        team = namespace("team-a")
        await journal.append([ev.ObjectUpserted(time=1, key=team.key, obj=team),
                              ev.ObjectUpserted(time=1, key=job.key, uid=UID, obj=job)])
        key = job.key

        await jobs.reconcile(key)
        assert cluster.created == [] and jobs.stats.pod_class_missing == 1
        assert [r.event for r in [r async for r in log.read(0)] if isinstance(r.event, ev.JobActed)] == [], \
            "Kueue records no Event for it"
        assert not mirror.kube_events.ready
        await jobs.reconcile(key)  # the same version of the Job: once
        assert jobs.stats.pod_class_missing == 1

        # the Job changed after the log saw it: the stored version names a missing class too
        cluster.job = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "8"}}
        stale = msgspec.convert({**raw, "spec": {**raw["spec"], "template": {"spec": {"containers": []}}}}, o.Job)
        await jobs._create_workload(stale, workload_name("sample", UID))
        assert cluster.created == [] and jobs.stats.pod_class_missing == 2
        cluster.job = raw

        await _workload_once_class_later_exists(jobs, journal, mirror, cluster, key, o.PriorityClass,
                                                "scheduling.k8s.io", 300)

    asyncio.run(scenario())


class _StampingCluster(_Cluster):
    """Creates the Workload as the apiserver does, stamping its creationTimestamp."""

    async def create(self, resource, body, namespace=""):
        self.created.append(body)
        return msgspec.json.encode({**body, "metadata": {**body["metadata"],
                                                         "creationTimestamp": "2026-01-01T00:00:07Z"}})


@pytest.mark.parametrize(("generation", "latency"), [(1, 5000), (0, 5000), (2, None)])
def test_created_workload_records_how_long_after_its_job_it_came(generation: int, latency: int | None) -> None:
    """Kueue's reconciler observes workload_creation_latency_seconds for a job at generation 1 at most: the
    record of the creation carries the Workload's creationTimestamp minus the Job's."""
    async def scenario() -> None:
        raw = _job()
        raw["metadata"].update(resourceVersion="7", generation=generation, creationTimestamp="2026-01-01T00:00:02Z")
        job = msgspec.convert(raw, o.Job)
        log, mirror = MemoryLog(), Mirror()
        journal = LocalJournal(log, mirror)
        jobs = JobIntegration(_StampingCluster(raw), journal)  # type: ignore[arg-type]
        team = namespace("team-a")
        await journal.append([ev.ObjectUpserted(time=1, key=team.key, obj=team),
                              ev.ObjectUpserted(time=1, key=job.key, uid=UID, obj=job)])
        await jobs.reconcile(job.key)
        (created,) = [r.event async for r in log.read(0) if isinstance(r.event, ev.JobActed)]
        assert (created.action, created.kind, created.creation_latency_ms) == ("CreatedWorkload", "Job", latency)

    asyncio.run(scenario())


def test_a_created_workload_names_each_env_variable_once_its_last_value_where_it_first_stood() -> None:
    """Kueue's ``SanitizePodSets`` (#7425, in every release from 0.13): a container's env entries of one name
    become one in the Workload's pod template, at the place the name first stood, with its last value (a Pod
    tolerates the repetition, Kueue's Workload CRD — a list keyed by name — does not); the Job keeps its own."""
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "b"}, {"name": "A", "value": "2"}]
    raw = _job(pod={"initContainers": [{"name": "i", "image": "busybox", "env": env}]})
    raw["spec"]["template"]["spec"]["containers"][0]["env"] = env
    raw["metadata"]["resourceVersion"] = "7"
    job = msgspec.convert(raw, o.Job)
    journal = LocalJournal(MemoryLog(), Mirror())
    cluster = _Cluster(raw)
    jobs = JobIntegration(cluster, journal)  # type: ignore[arg-type]
    team = namespace("team-a")

    async def run() -> None:
        await journal.append([ev.ObjectUpserted(time=1, key=team.key, obj=team),
                              ev.ObjectUpserted(time=1, key=job.key, uid=UID, obj=job)])
        await jobs.reconcile(job.key)

    asyncio.run(run())
    (body,) = cluster.created
    spec = body["spec"]["podSets"][0]["template"]["spec"]
    want = [{"name": "A", "value": "2"}, {"name": "B", "value": "b"}]
    assert spec["containers"][0]["env"] == want and spec["initContainers"][0]["env"] == want
    assert raw["spec"]["template"]["spec"]["containers"][0]["env"] == env, "the Job's own template is left as it is"
