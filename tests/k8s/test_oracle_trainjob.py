"""Kueue's ``pkg/controller/jobs/trainjob/trainjob_controller_test.go`` (the v1beta2 version) as the oracle
(session 47, oracle-lws): ``TestReconciler`` "workload is created with the corresponding podsets" — a runtime
of one replicated Job ``node`` (1 replica, parallelism 1) gives the TrainJob's Workload one pod set ``node``
of 1 pod whose topology request ranks pods by the Job's completion index within the JobSet's job index, one
sub-group (``TopologyAwareScheduling`` on, as by default)."""

from __future__ import annotations

from typing import Any

from connectors.k8s import trainjob as tj

RUNTIME: dict[str, Any] = {"template": {"spec": {"replicatedJobs": [{
    "name": "node", "replicas": 1,
    "template": {"spec": {"parallelism": 1, "template": {"spec": {
        "containers": [{"name": "node", "image": "pause"}]}}}},
}]}}}
TRAINJOB: dict[str, Any] = {"metadata": {"name": "trainjob", "namespace": "ns"},
                            "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "name": "test",
                                                    "kind": "ClusterTrainingRuntime"}}}


def test_workload_is_created_with_the_corresponding_podsets() -> None:
    pod_sets = tj.pod_sets(TRAINJOB, RUNTIME, tas=True)
    assert [(p["name"], p["count"], p.get("topologyRequest")) for p in pod_sets] == [
        ("node", 1, {"podIndexLabel": "batch.kubernetes.io/job-completion-index",
                     "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index", "subGroupCount": 1})]
