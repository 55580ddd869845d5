"""The Job webhook's answer to an AdmissionReview: Kueue's defaulting as a JSON patch."""

from __future__ import annotations

import asyncio
import base64

import msgspec
import pytest

from connectors.k8s.certs import self_signed
from connectors.k8s.errors import KubeError
from connectors.k8s.webhook import (
    WebhookServer,
    configuration,
    job_patch,
    kueue_parents,
    review,
    unqueued_lookup,
)
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"


def _job(labels: dict | None = None, suspend: bool | None = None) -> dict:
    meta: dict = {"name": "j", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    spec: dict = {"template": {}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def test_labelled_job_is_suspended() -> None:
    assert job_patch(_job({Q: "lq"}, suspend=False), False) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert job_patch(_job({Q: "lq"}), False) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert job_patch(_job({Q: "lq"}, suspend=True), True) == []


def test_default_local_queue_label_then_suspend() -> None:
    assert job_patch(_job(None, suspend=False), True) == [
        {"op": "add", "path": "/metadata/labels", "value": {Q: "default"}},
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert job_patch(_job({"app": "x"}, suspend=True), True) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"}]
    assert job_patch(_job({"app": "x"}, suspend=False), False) == [], "no queue, no default queue: not Kueue's"


P = "kueue.x-k8s.io/priority-class"


def test_default_workload_priority_class_label_whatever_the_queue() -> None:
    assert job_patch(_job(None, suspend=True), False, True) == [
        {"op": "add", "path": "/metadata/labels", "value": {P: "default"}}], "no queue name: labelled, not suspended"
    assert job_patch(_job(None, suspend=False), True, True) == [
        {"op": "add", "path": "/metadata/labels", "value": {Q: "default", P: "default"}},
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert job_patch(_job({Q: "lq"}, suspend=True), False, True) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "default"}]
    assert job_patch(_job({Q: "lq", P: "gold"}, suspend=True), False, True) == [], "a class named is kept"


@pytest.mark.parametrize("gate_on", [True, False])
def test_review_asks_for_the_default_class_only_under_the_gate(gate_on: bool) -> None:
    asked: list[str] = []

    async def no_default_queue(ns: str) -> bool:
        return False

    async def has_default_class() -> bool:
        asked.append("default")
        return True

    body = msgspec.json.encode({"request": {"uid": "u-3", "operation": "CREATE", "namespace": "team",
                                            "object": _job({Q: "lq"}, suspend=True)}})
    resp = asyncio.run(review(body, no_default_queue, has_default_class if gate_on else None))["response"]
    if gate_on:
        assert asked == ["default"]
        assert msgspec.json.decode(base64.b64decode(resp["patch"])) == [
            {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "default"}]
    else:
        assert asked == [] and "patch" not in resp


@pytest.mark.parametrize(("operation", "patched"), [("CREATE", True), ("UPDATE", False)])
def test_review_answers_with_a_json_patch_on_create_only(operation: str, patched: bool) -> None:
    asked: list[str] = []

    async def has_default(ns: str) -> bool:
        asked.append(ns)
        return True

    body = msgspec.json.encode({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": operation, "namespace": "team", "object": _job(None, suspend=False)}})
    out = asyncio.run(review(body, has_default))
    resp = out["response"]
    assert out["kind"] == "AdmissionReview" and resp["uid"] == "u-1" and resp["allowed"] is True
    if patched:
        assert resp["patchType"] == "JSONPatch" and asked == ["team"]
        assert msgspec.json.decode(base64.b64decode(resp["patch"]))[1] == {
            "op": "add", "path": "/spec/suspend", "value": True}
    else:
        assert "patch" not in resp and asked == []


@pytest.mark.parametrize("value", ["0", "soon", "30"])
def test_the_mutating_webhook_refuses_nothing(value: str) -> None:
    """As Kueue's ``mjob.kb.io``: a max-exec-time label Kueue refuses is its validating webhook's to refuse
    (``tests/k8s/test_job_validation_review.py``); here the Job is only defaulted."""
    async def no_default(ns: str) -> bool:
        return False

    job = _job({Q: "lq", "kueue.x-k8s.io/max-exec-time-seconds": value}, suspend=False)
    body = msgspec.json.encode({"request": {"uid": "u-2", "operation": "CREATE", "namespace": "team", "object": job}})
    resp = asyncio.run(review(body, no_default))["response"]
    assert resp["allowed"] is True and "patch" in resp and "status" not in resp


class _Request:
    """What the server's handlers read of an aiohttp request: its body."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def read(self) -> bytes:
        return self.body


@pytest.mark.parametrize("jobs", [True, False])
def test_with_batch_job_not_among_the_frameworks_the_job_webhooks_change_and_refuse_nothing(jobs: bool) -> None:
    """Kueue answers the Job webhooks of a framework it does not manage with no-op webhooks: an unsuspended queued
    Job is not suspended, and one its validating webhook refuses (a max-exec-time of 0) is allowed."""
    async def no_default(*_: object) -> bool:
        return False

    server = WebhookServer(no_default, jobs=jobs)
    job = _job({Q: "lq", "kueue.x-k8s.io/max-exec-time-seconds": "0"}, suspend=False)
    body = msgspec.json.encode({"request": {"uid": "u-3", "operation": "CREATE", "namespace": "team", "object": job}})

    async def answers() -> tuple[dict, dict]:
        mutated = await server._handle(_Request(body))  # type: ignore[arg-type]
        validated = await server._validate("Job", _Request(body))  # type: ignore[arg-type]
        return msgspec.json.decode(mutated.body)["response"], msgspec.json.decode(validated.body)["response"]

    mutated, validated = asyncio.run(answers())
    assert mutated["uid"] == validated["uid"] == "u-3"
    assert ("patch" in mutated) is jobs
    assert validated["allowed"] is not jobs


def test_configuration_points_at_the_webhook_with_its_ca() -> None:
    bundle = self_signed(["kueue-es-webhook.kueue-system.svc", "127.0.0.1"])
    by_url = configuration(bundle.ca_pem, url="https://127.0.0.1:9443")
    hook = by_url["webhooks"][0]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate-batch-v1-job"
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == bundle.ca_pem
    assert hook["rules"][0]["operations"] == ["CREATE"] and hook["failurePolicy"] == "Fail"
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
    by_service = configuration(bundle.ca_pem, service=("kueue-es-webhook", "kueue-system", 443))
    assert by_service["webhooks"][0]["clientConfig"]["service"] == {
        "name": "kueue-es-webhook", "namespace": "kueue-system", "port": 443, "path": "/mutate-batch-v1-job"}


# --- manageJobsWithoutQueueName ---------------------------------------------------------------------------------


def test_a_job_without_a_queue_is_suspended_when_kueue_manages_it_all_the_same() -> None:
    assert job_patch(_job({"app": "x"}, suspend=False), False, suspend_unqueued=True) == [
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert job_patch(_job(None, suspend=True), False, suspend_unqueued=True) == []
    assert job_patch(_job(None, suspend=False), False) == []


def _unqueued_review(job: dict, config: dict, namespace_labels: dict | None) -> dict:
    """The review of ``job`` being created in namespace ``team`` (labelled ``namespace_labels``; None: it cannot
    be read) under the Kueue Configuration ``config``, no LocalQueue ``default`` anywhere."""
    class Namespaces:
        async def get(self, resource: object, name: str, namespace: str = "") -> bytes:
            if namespace_labels is None:
                raise KubeError(f"namespaces {name!r} is forbidden")
            return msgspec.json.encode({"metadata": {"name": name, "labels": namespace_labels}})

    async def no_default(ns: str) -> bool:
        return False

    body = msgspec.json.encode({"request": {"uid": "u-9", "operation": "CREATE", "namespace": "team",
                                            "object": job}})
    return asyncio.run(review(body, no_default, None, unqueued_lookup(Namespaces(), load_config(config))))["response"]


def test_a_job_in_a_namespace_the_selector_leaves_out_gets_no_queue_and_is_not_suspended() -> None:
    """Kueue's #13375: managedJobsNamespaceSelector (always respected) leaves such a Job unmanaged: the webhook
    neither names the namespace's LocalQueue ``default`` on it nor suspends it, queued or not."""
    async def has_default(ns: str) -> bool:
        return True

    def patched(job: dict, selected: bool) -> list:
        async def namespace_managed(ns: str) -> bool:
            assert ns == "team"
            return selected

        body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                                "object": job}})
        return _patched(asyncio.run(review(body, has_default, namespace_managed=namespace_managed))["response"])

    suspend = {"op": "add", "path": "/spec/suspend", "value": True}
    assert patched(_job(None, suspend=False), False) == []
    assert patched(_job({Q: "lq"}, suspend=False), False) == []
    assert patched(_job({Q: "lq"}, suspend=False), True) == [suspend]
    assert patched(_job(None, suspend=False), True)[-1] == suspend


def test_a_job_in_a_namespace_the_selector_leaves_out_gets_no_default_priority_class() -> None:
    """Kueue's #15851: nor is the default WorkloadPriorityClass named on such a Job; in a selected namespace it is."""
    async def no_default(ns: str) -> bool:
        return False

    async def has_class() -> bool:
        return True

    def patched(selected: bool) -> list:
        async def namespace_managed(ns: str) -> bool:
            return selected

        body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                                "object": _job(None, suspend=False)}})
        return _patched(asyncio.run(review(body, no_default, has_class,
                                           namespace_managed=namespace_managed))["response"])

    assert patched(False) == []
    assert patched(True) == [{"op": "add", "path": "/metadata/labels", "value": {P: "default"}}]


TEAM = {"kubernetes.io/metadata.name": "team"}
ON = {"manageJobsWithoutQueueName": True}


def _patched(resp: dict) -> list:
    return msgspec.json.decode(base64.b64decode(resp["patch"])) if "patch" in resp else []


def test_review_suspends_a_job_without_a_queue_only_under_the_option_in_a_managed_namespace() -> None:
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert _patched(_unqueued_review(_job(None, suspend=False), ON, TEAM)) == suspend
    assert _patched(_unqueued_review(_job(None, suspend=False), {}, TEAM)) == []
    selected = {**ON, "managedJobsNamespaceSelector": {"matchLabels": {"kueue": "on"}}}
    assert _patched(_unqueued_review(_job(None, suspend=False), selected, TEAM)) == []
    assert _patched(_unqueued_review(_job(None, suspend=False), selected, {**TEAM, "kueue": "on"})) == suspend


def test_review_leaves_the_child_of_a_parent_kueue_runs_to_the_parent() -> None:
    child = _job(None, suspend=False)
    child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "p", "uid": "p",
                                             "controller": True}]
    assert _patched(_unqueued_review(child, ON, None)) == [], "decided by the owner: no namespace lookup"
    child["metadata"]["ownerReferences"][0]["kind"] = "CronJob"
    assert _patched(_unqueued_review(child, ON, TEAM)) == [{"op": "add", "path": "/spec/suspend", "value": True}]


def test_review_refuses_a_job_whose_namespace_cannot_be_read_under_the_option() -> None:
    resp = _unqueued_review(_job(None, suspend=False), ON, None)
    assert resp["allowed"] is False and resp["status"]["message"].startswith("failed to get namespace: ")
    assert _unqueued_review(_job({Q: "lq"}, suspend=False), ON, None)["allowed"], "a queue name needs no lookup"


def _child_of(api_version: str, kind: str, labels: dict | None = None) -> dict:
    job = _job(labels, suspend=False)
    job["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "parent", "uid": "uid-parent",
                                           "controller": True}]
    return job


def _patch_of(job: dict, parent_runs=None) -> list:
    async def has_default_queue(ns: str) -> bool:
        return True

    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": job}})
    resp = asyncio.run(review(body, has_default_queue, parent_runs=parent_runs))["response"]
    return msgspec.json.decode(base64.b64decode(resp["patch"])) if "patch" in resp else []


def test_a_child_of_a_kind_kueue_runs_gets_no_default_queue_and_is_not_suspended() -> None:
    """Reference §7.1 item 2 (Kueue's ApplyDefaultLocalQueue / WorkloadShouldBeSuspended): the parent is the one
    queued. A JobSet's Jobs, with the JobSet integration on, are left as the JobSet controller made them — before,
    in a namespace with a LocalQueue ``default``, they were given it and suspended under the running JobSet."""
    jobsets_on = kueue_parents(frozenset({"batch/job", "jobset.x-k8s.io/jobset"}))
    for labels in (None, {Q: "lq"}):
        assert _patch_of(_child_of("jobset.x-k8s.io/v1alpha2", "JobSet", labels), jobsets_on) == []
    assert _patch_of(_child_of("batch/v1", "Job")) == [], "a Job's Job: Kueue runs batch/v1 Jobs"
    suspend = {"op": "add", "path": "/spec/suspend", "value": True}
    assert _patch_of(_child_of("jobset.x-k8s.io/v1alpha2", "JobSet", {Q: "lq"})) == [suspend], \
        "the JobSet integration off: its Jobs are Jobs like any"
    assert _patch_of(_child_of("apps/v1", "Foo")) == [
        {"op": "add", "path": "/metadata/labels", "value": {Q: "default"}}, suspend], "a parent Kueue does not run"


def test_a_child_of_a_kind_kueue_runs_gets_no_default_workload_priority_class() -> None:
    """Kueue's ``ApplyDefaultWorkloadPriorityClass`` skips an object whose controller is of a kind an enabled
    integration runs (``IsOwnerManagedByKueueForObject``), as ``ApplyDefaultLocalQueue`` does: the parent's
    Workload carries the priority. A parent Kueue does not run counts for nothing."""
    async def no_default_queue(ns: str) -> bool:
        return False

    async def has_class() -> bool:
        return True

    def patched(job: dict) -> list:
        body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                                "object": job}})
        resp = asyncio.run(review(body, no_default_queue, has_class))["response"]
        return msgspec.json.decode(base64.b64decode(resp["patch"])) if "patch" in resp else []

    assert patched(_child_of("batch/v1", "Job")) == []
    assert patched(_child_of("batch/v1", "CronJob")) == [
        {"op": "add", "path": "/metadata/labels", "value": {P: "default"}}]


class _Parents:
    """The apiserver as the ancestry lookup reads it: objects by (kind, name), with their metadata, each answered
    as :meth:`connectors.k8s.client.KubeClient.get` answers, as the body's bytes (a dict here hid a lookup that
    called ``.get`` on them, refusing every child Job in a cluster)."""

    def __init__(self, *objects: tuple[str, str, dict]) -> None:
        self.objects = {(kind, name): {"metadata": {"name": name, "namespace": "team", **meta}}
                        for kind, name, meta in objects}
        self.reads: list[tuple[str, str]] = []

    async def get(self, resource, name: str, namespace: str = "", subresource: str = "") -> bytes:
        from connectors.k8s.errors import NotFound
        self.reads.append((resource.kind, name))
        if (resource.kind, name) not in self.objects:
            raise NotFound(f"{resource.kind} {name} not found", 404, "NotFound")
        return msgspec.json.encode(self.objects[(resource.kind, name)])


def _owned_by(kind: str, name: str, api_version: str = "batch/v1") -> dict:
    return {"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
                                 "controller": True}]}


def _ancestry_review(job: dict, parents: _Parents, config: dict | None = None) -> dict:
    from connectors.k8s.webhook import ancestry_lookup

    async def has_default_queue(ns: str) -> bool:
        return False

    cfg = load_config(config or {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": job}})
    return asyncio.run(review(body, has_default_queue, parent_runs=kueue_parents(frozenset(cfg.frameworks)),
                              managed_ancestry=ancestry_lookup(parents, cfg)))["response"]  # type: ignore[arg-type]


def test_the_job_webhook_walks_the_ancestors_as_kueues_does() -> None:
    """Kueue's ``WorkloadShouldBeSuspended`` walks the controllers up (``FindAncestorJobManagedByKueue``): a queued
    Job under a Job that names no queue is top-level, so suspended; one under a queued JobSet two levels up is that
    JobSet's, so left running."""
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    queued = _child_of("batch/v1", "Job", {Q: "lq"})
    queued["metadata"]["ownerReferences"][0].update(name="driver", uid="uid-driver")
    unqueued_parent = _Parents(("Job", "driver", {"uid": "uid-driver", "labels": {}}))
    assert _patched(_ancestry_review(queued, unqueued_parent)) == suspend
    assert unqueued_parent.reads == [("Job", "driver")]
    driver = {"uid": "uid-driver", **_owned_by("JobSet", "js", "jobset.x-k8s.io/v1alpha2")}
    under_jobset = _Parents(("Job", "driver", driver), ("JobSet", "js", {"uid": "uid-js", "labels": {Q: "lq"}}))
    assert _patched(_ancestry_review(queued, under_jobset)) == []
    assert _patched(_ancestry_review(_child_of("batch/v1", "Job", {Q: "lq"}),
                                     _Parents(("Job", "parent", {"uid": "uid-parent", "labels": {Q: "lq"}})))) == []
    stale = _Parents(("Job", "parent", {"uid": "uid-parent-recreated", "labels": {Q: "lq"}}))
    assert _patched(_ancestry_review(_child_of("batch/v1", "Job", {Q: "lq"}), stale)) == suspend, "Kueue's #13802"


def test_the_job_webhook_walks_up_to_a_queued_rayjob() -> None:
    """With the RayJob integration on, a queued RayJob's submitter Job has it as Kueue-managed ancestor: the walk
    reads the RayJob from the apiserver and leaves the Job running (before, the walk did not follow the kind and
    the submitter was suspended, though main's flags take the RayJob as a parent Kueue runs)."""
    config = {"integrations": {"frameworks": ["batch/job", "ray.io/rayjob"]}}
    submitter = _child_of("ray.io/v1", "RayJob", {Q: "lq"})
    rayjob = _Parents(("RayJob", "parent", {"uid": "uid-parent", "labels": {Q: "lq"}}))
    assert _patched(_ancestry_review(submitter, rayjob, config)) == []
    assert rayjob.reads == [("RayJob", "parent")]


def test_the_job_webhook_refuses_a_job_whose_ancestors_cannot_be_walked() -> None:
    """A parent Kueue follows that is not there, or cyclic ownership: Kueue's webhook fails the defaulting."""
    missing = _ancestry_review(_child_of("batch/v1", "Job", {Q: "lq"}), _Parents())
    assert missing["allowed"] is False and missing["status"]["code"] == 404
    assert "Job team/parent, controller of a job, not found" in missing["status"]["message"]
    cycle = _Parents(("Job", "parent", {"uid": "uid-parent", **_owned_by("Job", "other")}),
                     ("Job", "other", {"uid": "uid-other", **_owned_by("Job", "parent")}))
    cyclic = _ancestry_review(_child_of("batch/v1", "Job", {Q: "lq"}), cycle)
    assert cyclic["allowed"] is False and "cyclic ownership" in cyclic["status"]["message"]
    assert _ancestry_review(_child_of("apps/v1", "Foo", {Q: "lq"}), _Parents())["allowed"], "a kind not followed"


AW = "workload.codeflare.dev/v1beta2"
JOBSET = "jobset.x-k8s.io/v1alpha2"


def test_the_job_webhook_walks_through_a_parent_whose_integration_is_off() -> None:
    """Kueue's #4824 (v0.12): with the JobSet integration off, a queued Job of a JobSet an AppWrapper wraps
    has the queued AppWrapper as its Kueue-managed ancestor: the walk reads the JobSet and walks on, never
    taking the JobSet itself, so the Job is left running. Before, the walk stopped at the JobSet and the Job
    was suspended."""
    config = {"integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]}}
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    job = _child_of(JOBSET, "JobSet", {Q: "lq"})
    jobset = ("JobSet", "parent", {"uid": "uid-parent", **_owned_by("AppWrapper", "aw", AW)})
    queued_aw = _Parents(jobset, ("AppWrapper", "aw", {"uid": "uid-aw", "labels": {Q: "lq"}}))
    assert _patched(_ancestry_review(job, queued_aw, config)) == []
    assert queued_aw.reads == [("JobSet", "parent"), ("AppWrapper", "aw")]
    unqueued_aw = _Parents(jobset, ("AppWrapper", "aw", {"uid": "uid-aw", "labels": {}}))
    assert _patched(_ancestry_review(job, unqueued_aw, config)) == suspend
    queued_jobset = _Parents(("JobSet", "parent", {"uid": "uid-parent", "labels": {Q: "lq"}}))
    assert _patched(_ancestry_review(job, queued_jobset, config)) == suspend, "a disabled kind is no ancestor"
    gone = _ancestry_review(job, _Parents(), config)
    assert gone["allowed"] is False and gone["status"]["code"] == 404
    assert "JobSet team/parent, controller of a job, not found" in gone["status"]["message"]


def test_under_manage_jobs_without_queue_name_the_walk_finds_the_appwrapper_above_a_disabled_jobset() -> None:
    """Kueue's own example for ``FindAncestorJobManagedByKueue``: ``Job -> JobSet (disabled) -> AppWrapper =>
    AppWrapper`` under ``manageJobsWithoutQueueName``, the AppWrapper naming no queue."""
    from connectors.k8s.webhook import ancestry_lookup

    job = _child_of(JOBSET, "JobSet")
    api = _Parents(("JobSet", "parent", {"uid": "uid-parent", **_owned_by("AppWrapper", "aw", AW)}),
                   ("AppWrapper", "aw", {"uid": "uid-aw"}))
    frameworks = {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]}
    for manage in (True, False):
        cfg = load_config({"integrations": frameworks, "manageJobsWithoutQueueName": manage})
        assert asyncio.run(ancestry_lookup(api, cfg)("team", job)) is manage  # type: ignore[arg-type]


def test_the_job_webhook_stops_unread_at_a_kind_kueue_does_not_know() -> None:
    """A CronJob's Job: no integration has that kind, so Kueue's walk stops there (since #5252) and reads
    nothing; the queued Job is top-level, suspended."""
    api = _Parents(("CronJob", "parent", {"uid": "uid-parent", "labels": {Q: "lq"}}))
    assert _patched(_ancestry_review(_child_of("batch/v1", "CronJob", {Q: "lq"}), api)) == [
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert api.reads == []
