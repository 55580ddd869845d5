"""Kueue's unit tests of its JobSet, MPIJob and Kubeflow training-operator integrations as the oracle (session
47): cases of ``pkg/controller/jobs/jobset/jobset_{controller,webhook}_test.go``,
``pkg/controller/jobs/mpijob/mpijob_{controller,webhook}_test.go`` and
``pkg/controller/jobs/kubeflow/jobs/pytorchjob/pytorchjob_controller_test.go`` not pinned elsewhere, each test id
naming Kueue's case, and the rules of Kueue's webhooks those cases exercise (``kubeflowjob.ValidateOnCreate``,
``jobframework.BaseWebhook``, ``MpiJobWebhook.ValidateCreate``/``ValidateUpdate``)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s import jobset_webhook, mpijob_webhook
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


def _training(kind: str, labels: dict[str, str], *, suspend: bool = True, replicas: dict[str, int] | None = None,
              annotations: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """A training-operator job of ``kind`` with the replica types of ``replicas`` (type -> count)."""
    training = KINDS[kind]
    specs = {t: {"replicas": n, "template": _template((annotations or {}).get(t))}
             for t, n in (replicas or {training.replica_types[-1]: 1}).items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": "job", "namespace": "ns", "labels": labels},
            "spec": {"runPolicy": {"suspend": suspend}, training.specs_field: specs}}


# --- jobframework.BaseWebhook.ValidateUpdate: the update rules, then the kind's own (TAS) rules ------------------


@pytest.mark.parametrize(("old", "new"), [
    pytest.param({Q: "a"}, {Q: "Bad_Queue"}, id="queue name changed while suspended, not a DNS-1123 subdomain"),
    pytest.param({Q: "a", MAX_EXEC: "0"}, {Q: "a", MAX_EXEC: "0"}, id="max-exec-time 0 kept while suspended"),
    pytest.param({Q: "a", MAX_EXEC: "60"}, {Q: "a", MAX_EXEC: "abc"}, id="max-exec-time changed while suspended"),
])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_training_jobs_update_is_not_checked_by_the_create_rules(kind: str, old: dict[str, str],
                                                                    new: dict[str, str]) -> None:
    """Kueue serves the training operator's kinds with ``jobframework.BaseWebhook``, whose ``ValidateUpdate`` runs
    ``ValidateJobOnUpdate`` (queue name, prebuilt Workload, maximum execution time, WorkloadPriorityClass rules of an
    update) and the kind's ``ValidateOnUpdate`` (``kubeflowjob``: its TAS rules) only — not ``ValidateJobOnCreate``,
    unlike the JobSet and MPIJob webhooks, which validate the new object as created too. So a suspended job may be
    given a queue name or a ``max-exec-time-seconds`` that its creation would have been refused for."""
    assert kw.update_errors(KINDS[kind], _training(kind, old), _training(kind, new), {}) == []


def test_a_training_jobs_update_keeps_the_update_rules_and_its_tas_rules() -> None:
    """What ``BaseWebhook.ValidateUpdate`` still refuses: the queue name changed while running
    (``validateUpdateForQueueName``), then the new job's TAS annotations (``KubeflowJob.ValidateOnUpdate``)."""
    old = _training("PyTorchJob", {Q: "a"}, suspend=False, replicas={"Worker": 2})
    new = _training("PyTorchJob", {Q: "b"}, suspend=False, replicas={"Worker": 2},
                    annotations={"Worker": {REQUIRED: "rack", PREFERRED: "block"}})
    assert kw.update_errors(PYTORCHJOB, old, new, {}) == [
        f'metadata.labels[{Q}]: Invalid value: "b": field is immutable',
        f"spec.pytorchReplicaSpecs[Worker].template.metadata.annotations: {MORE_THAN_ONE}"]


def test_the_jobset_and_mpijob_updates_are_checked_by_the_create_rules_too() -> None:
    """``JobSetWebhook.validateUpdate`` and ``MpiJobWebhook.ValidateUpdate`` append the create rules of the new
    object (``validateCreate`` / ``validateCommon``), so the same update is refused for these two kinds."""
    bad = f'metadata.labels[{Q}]: Invalid value: "Bad_Queue": '
    jobset = {"metadata": {"name": "js", "namespace": "ns", "labels": {Q: "a"}},
              "spec": {"suspend": True, "replicatedJobs": []}}
    renamed = {**jobset, "metadata": {**jobset["metadata"], "labels": {Q: "Bad_Queue"}}}
    assert jobset_webhook.update_errors(jobset, renamed, {})[0].startswith(bad)
    mpi = {"metadata": {"name": "mpi", "namespace": "ns", "labels": {Q: "a"}},
           "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {}}}
    mpi_renamed = {**mpi, "metadata": {**mpi["metadata"], "labels": {Q: "Bad_Queue"}}}
    assert mpijob_webhook.update_errors(mpi, mpi_renamed, {})[0].startswith(bad)


# --- kubeflowjob.ValidateOnCreate: the replica types' TAS errors in the kind's replica order ---------------------


def test_a_tfjobs_tas_errors_come_in_its_replica_types_order() -> None:
    """``KubeflowJob.ValidateOnCreate`` walks ``OrderedReplicaTypes`` (a TFJob's: Chief, Master, PS, Worker,
    Evaluator) and ``BaseWebhook`` joins the errors unsorted: the Evaluator's come last, not by path."""
    both = {REQUIRED: "rack", PREFERRED: "block"}
    job = _training("TFJob", {Q: "lq"}, replicas={"Evaluator": 1, "PS": 1, "Worker": 2},
                    annotations={"Evaluator": both, "PS": both, "Worker": both})
    assert kw.create_errors(TFJOB, job, {}) == [
        f"spec.tfReplicaSpecs[{t}].template.metadata.annotations: {MORE_THAN_ONE}"
        for t in ("PS", "Worker", "Evaluator")]
