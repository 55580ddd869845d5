"""Kueue's unit tests of its JobSet, MPIJob and Kubeflow training-operator integrations as the oracle (session
47): cases of ``pkg/controller/jobs/jobset/jobset_{controller,webhook}_test.go``,
``pkg/controller/jobs/mpijob/mpijob_{controller,webhook}_test.go`` and
``pkg/controller/jobs/kubeflow/jobs/pytorchjob/pytorchjob_controller_test.go`` not pinned elsewhere, each test
id naming Kueue's case, and the rules of Kueue's webhooks those cases exercise
(``kubeflowjob.ValidateOnCreate``, ``jobframework.BaseWebhook``, ``MpiJobWebhook.ValidateCreate`` and
``ValidateUpdate``)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s import jobset as js
from connectors.k8s import jobset_webhook, mpijob, mpijob_webhook
from connectors.k8s import kubeflow_webhook as kw
from connectors.k8s.kubeflow import KINDS, PYTORCHJOB, TFJOB

Q = "kueue.x-k8s.io/queue-name"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
MORE_THAN_ONE = ('Invalid value: must not contain more than one topology annotation: ["kueue.x-k8s.io/podset-'
                 'required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
                 '"kueue.x-k8s.io/podset-unconstrained-topology"]')


def _template(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "img"}]}}
    return {**pod, "metadata": {"annotations": annotations}} if annotations else pod


def _training(kind: str, labels: dict[str, str], *, suspend: bool = True,
              replicas: dict[str, int] | None = None,
              annotations: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """A training-operator job of ``kind`` with the replica types of ``replicas`` (type -> count)."""
    training = KINDS[kind]
    specs = {t: {"replicas": n, "template": _template((annotations or {}).get(t))}
             for t, n in (replicas or {training.replica_types[-1]: 1}).items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": "job", "namespace": "ns", "labels": labels},
            "spec": {"runPolicy": {"suspend": suspend}, training.specs_field: specs}}


# --- jobframework.BaseWebhook.ValidateUpdate: the update rules, then the kind's own (TAS) rules -------------


@pytest.mark.parametrize(("old", "new"), [
    pytest.param({Q: "a"}, {Q: "Bad_Queue"},
                 id="queue name changed while suspended, not a DNS-1123 subdomain"),
    pytest.param({Q: "a", MAX_EXEC: "0"}, {Q: "a", MAX_EXEC: "0"}, id="max-exec-time 0 kept while suspended"),
    pytest.param({Q: "a", MAX_EXEC: "60"}, {Q: "a", MAX_EXEC: "abc"},
                 id="max-exec-time changed while suspended"),
])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_training_jobs_update_is_not_checked_by_the_create_rules(kind: str, old: dict[str, str],
                                                                    new: dict[str, str]) -> None:
    """Kueue serves the training operator's kinds with ``jobframework.BaseWebhook``, whose ``ValidateUpdate``
    runs ``ValidateJobOnUpdate`` (the queue name, prebuilt Workload, maximum execution time and
    WorkloadPriorityClass rules of an update) and the kind's ``ValidateOnUpdate`` (``kubeflowjob``: its TAS
    rules) only — not ``ValidateJobOnCreate``, unlike the JobSet and MPIJob webhooks, which validate the new
    object as created too. So a suspended job may be given a queue name or a ``max-exec-time-seconds`` its
    creation would have been refused for."""
    assert kw.update_errors(KINDS[kind], _training(kind, old), _training(kind, new), {}) == []


def test_a_training_jobs_update_keeps_the_update_rules_and_its_tas_rules() -> None:
    """What ``BaseWebhook.ValidateUpdate`` still refuses: the queue name changed while running
    (``validateUpdateForQueueName``), then the new job's TAS annotations
    (``KubeflowJob.ValidateOnUpdate``)."""
    old = _training("PyTorchJob", {Q: "a"}, suspend=False, replicas={"Worker": 2})
    new = _training("PyTorchJob", {Q: "b"}, suspend=False, replicas={"Worker": 2},
                    annotations={"Worker": {REQUIRED: "rack", PREFERRED: "block"}})
    assert kw.update_errors(PYTORCHJOB, old, new, {}) == [
        f'metadata.labels[{Q}]: Invalid value: "b": field is immutable',
        f"spec.pytorchReplicaSpecs[Worker].template.metadata.annotations: {MORE_THAN_ONE}"]


def test_the_jobset_and_mpijob_updates_are_checked_by_the_create_rules_too() -> None:
    """``JobSetWebhook.validateUpdate`` and ``MpiJobWebhook.ValidateUpdate`` append the create rules of the
    new object (``validateCreate`` / ``validateCommon``), so the same update is refused for these two
    kinds."""
    bad = f'metadata.labels[{Q}]: Invalid value: "Bad_Queue": '
    jobset = {"metadata": {"name": "js", "namespace": "ns", "labels": {Q: "a"}},
              "spec": {"suspend": True, "replicatedJobs": []}}
    renamed = {**jobset, "metadata": {**jobset["metadata"], "labels": {Q: "Bad_Queue"}}}
    assert jobset_webhook.update_errors(jobset, renamed, {})[0].startswith(bad)
    mpi = {"metadata": {"name": "mpi", "namespace": "ns", "labels": {Q: "a"}},
           "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {}}}
    mpi_renamed = {**mpi, "metadata": {**mpi["metadata"], "labels": {Q: "Bad_Queue"}}}
    assert mpijob_webhook.update_errors(mpi, mpi_renamed, {})[0].startswith(bad)


# --- kubeflowjob.ValidateOnCreate: the replica types' TAS errors in the kind's replica order ----------------


def test_a_tfjobs_tas_errors_come_in_its_replica_types_order() -> None:
    """``KubeflowJob.ValidateOnCreate`` walks ``OrderedReplicaTypes`` (a TFJob's: Chief, Master, PS, Worker,
    Evaluator) and ``BaseWebhook`` joins the errors unsorted: the Evaluator's come last, not by path."""
    both = {REQUIRED: "rack", PREFERRED: "block"}
    job = _training("TFJob", {Q: "lq"}, replicas={"Evaluator": 1, "PS": 1, "Worker": 2},
                    annotations={"Evaluator": both, "PS": both, "Worker": both})
    assert kw.create_errors(TFJOB, job, {}) == [
        f"spec.tfReplicaSpecs[{t}].template.metadata.annotations: {MORE_THAN_ONE}"
        for t in ("PS", "Worker", "Evaluator")]


# --- PriorityClass: an empty replica spec, an empty scheduling policy ---------------------------------------


def _pc(name: str) -> dict[str, Any]:
    return {"template": {"spec": {"priorityClassName": name, "containers": [{"name": "c"}]}}}


@pytest.mark.parametrize(("run_policy", "specs", "want"), [
    pytest.param({}, {}, None, id="none priority class name specified"),
    pytest.param({"schedulingPolicy": {}}, {"Launcher": _pc("launcher-priority")}, "launcher-priority",
                 id="runPolicy present, but without priority; fallback to launcher"),
    pytest.param({}, {"Launcher": {}, "Worker": _pc("worker-priority")}, "worker-priority",
                 id="specified on worker only"),
    pytest.param({}, {"Launcher": {}, "Worker": {"template": {"spec": {}}}}, None,
                 id="worker present, but without priority; fallback to empty"),
])
def test_mpijob_priority_class(run_policy: dict[str, Any], specs: dict[str, Any], want: str | None) -> None:
    """mpijob_controller_test.go ``TestCalcPriorityClassName`` (an empty Launcher spec, a scheduling policy
    with no class)."""
    raw = {"metadata": {"name": "pi", "namespace": "ns"},
           "spec": {"runPolicy": run_policy, "mpiReplicaSpecs": specs}}
    assert mpijob.priority_class(msgspec.convert(raw, mpijob.MPIJob)) == want


@pytest.mark.parametrize(("run_policy", "specs", "want"), [
    pytest.param({"schedulingPolicy": {}}, {"Master": _pc("master-priority")}, "master-priority",
                 id="runPolicy present, but without priority; fallback to master"),
    pytest.param({}, {"Master": {}, "Worker": _pc("worker-priority")}, "worker-priority",
                 id="specified on worker only"),
    pytest.param({}, {"Master": {}, "Worker": {"template": {"spec": {}}}}, None,
                 id="worker present, but without priority; fallback to empty"),
])
def test_pytorchjob_priority_class(run_policy: dict[str, Any], specs: dict[str, Any],
                                   want: str | None) -> None:
    """pytorchjob_controller_test.go ``TestPriorityClass`` (``KubeflowJob.PriorityClass``)."""
    raw = {"metadata": {"name": "pt", "namespace": "ns"},
           "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": specs}}
    assert PYTORCHJOB.priority_class(msgspec.convert(raw, PYTORCHJOB.ITEM)) == want


@pytest.mark.parametrize(("specs", "want"), [
    pytest.param({}, [], id="job has no replicas"),
    pytest.param({"Master": {}, "Worker": {}}, ["master", "worker"], id="job has all replicas"),
    pytest.param({"Worker": {}}, ["worker"], id="job only has the worker replica"),
])
def test_pytorchjob_ordered_replica_types(specs: dict[str, Any], want: list[str]) -> None:
    """pytorchjob_controller_test.go ``TestOrderedReplicaTypes``: a pod set per replica type present, in
    order."""
    raw = {"metadata": {"name": "pt", "namespace": "ns"}, "spec": {"pytorchReplicaSpecs": specs}}
    assert [ps["name"] for ps in PYTORCHJOB.pod_sets(raw, tas=False)] == want


# --- MpiJobWebhook: create and update errors sorted by field path -------------------------------------------


def _mpijob(labels: dict[str, str], *, suspend: bool = True, launcher: dict[str, str] | None = None,
            worker: dict[str, str] | None = None, workers: int = 3) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "job", "namespace": "default", "labels": labels},
            "spec": {"runPolicy": {"suspend": suspend}, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _template(launcher)},
                "Worker": {"replicas": workers, "template": _template(worker)}}}}


def test_mpijob_update_errors_sorted_by_field_with_the_update_rules() -> None:
    """``MpiJobWebhook.ValidateUpdate`` sorts every error, the update rules' too, by field path: the maximum
    execution time's before the queue name's, whereas ``ValidateJobOnUpdate`` finds the queue name's first."""
    old = _mpijob({Q: "a", MAX_EXEC: "60"}, suspend=False)
    new = _mpijob({Q: "b", MAX_EXEC: "90"}, suspend=False)
    assert mpijob_webhook.update_errors(old, new, {}) == [
        f'metadata.labels[{MAX_EXEC}]: Invalid value: "90": field is immutable',
        f'metadata.labels[{Q}]: Invalid value: "b": field is immutable']


def test_mpijob_per_template_errors_before_group_errors_on_the_same_field() -> None:
    """``MpiJobWebhook.validateTopologyRequest`` checks each pod set's TAS annotations, then the pod-set
    groups (``ValidatePodSetGroupingTopology``); the sort by field is stable, so on the Launcher's annotations
    the per-template error comes before the group's."""
    group = "kueue.x-k8s.io/podset-group-name"
    job = _mpijob({Q: "lq"}, launcher={REQUIRED: "rack", PREFERRED: "block", group: "g"},
                  worker={PREFERRED: "block", group: "g"})
    launcher = "spec.mpiReplicaSpecs[Launcher].template.metadata.annotations"
    worker = "spec.mpiReplicaSpecs[Worker].template.metadata.annotations"
    consistent = ("Invalid value: must specify 'kueue.x-k8s.io/podset-required-topology' or "
                  "'kueue.x-k8s.io/podset-preferred-topology' topology consistent with '{}' in group 'g'")
    assert mpijob_webhook.create_errors(job, {}) == [f"{launcher}: {MORE_THAN_ONE}",
                                                    f"{launcher}: {consistent.format(worker)}",
                                                    f"{worker}: {consistent.format(launcher)}"]


# --- JobSet: a TestPodSets shape not pinned elsewhere -------------------------------------------------------


def test_jobset_pod_sets_without_tas_annotations_under_tas() -> None:
    """jobset_controller_test.go ``TestPodSets`` "with preferred topology annotation": the replicated Job
    without annotations gets, with TopologyAwareScheduling on (by default), the ranking labels alone — its
    Jobs' index and count and the completion index — as Kueue's newer reconciler cases show for the MPIJob."""
    def rj(name: str, replicas: int, parallelism: int, completions: int,
           annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": completions, "template": _template(annotations)}}}

    raw = {"metadata": {"name": "jobset", "namespace": "ns"}, "spec": {"replicatedJobs": [
        rj("job1", 2, 1, 1), rj("job2", 3, 2, 3, {PREFERRED: "cloud.com/block"})]}}
    rank = {"podIndexLabel": "batch.kubernetes.io/job-completion-index",
            "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index"}
    assert [(ps["name"], ps["count"], ps["topologyRequest"]) for ps in js.pod_sets(raw, tas=True)] == [
        ("job1", 2, {**rank, "subGroupCount": 2}),
        ("job2", 6, {"preferred": "cloud.com/block", **rank, "subGroupCount": 3})]
