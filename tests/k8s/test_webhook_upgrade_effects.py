"""Objects an earlier kueue-es accepted that its newer create rules refuse (ro-diff-c M1): the Job and
SparkApplication webhooks run those rules on every update too, and they see kueue-es's own writes, so such an
object is refused on every update, kueue-es's start and stop patches among them. docs/kubernetes.md (the Job
webhook and SparkApplication paragraphs) gives the one-off remedy; these tests pin both the refusal and the
remedy the docs name."""

from __future__ import annotations

from typing import Any

from connectors.k8s import job_validation, spark_webhook

GATES = {"TopologyAwareScheduling": True, "ElasticJobsViaWorkloadSlices": True}
ELASTIC = "kueue.x-k8s.io/elastic-job"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
QUEUED = {"kueue.x-k8s.io/queue-name": "lq"}


def _job(*, suspend: bool, topology: bool = True) -> dict[str, Any]:
    """An elastic Job asking for a required topology, as an earlier kueue-es let one be made."""
    pod_annotations = {REQUIRED: "zone"} if topology else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": QUEUED, "annotations": {ELASTIC: "true"}},
            "spec": {"suspend": suspend, "parallelism": 2, "completions": 2,
                     "template": {"metadata": {"annotations": pod_annotations},
                                  "spec": {"containers": [{"name": "c"}]}}}}


def test_an_elastic_job_with_a_required_topology_made_earlier_is_refused_its_start_and_stop() -> None:
    started = job_validation.update_errors(_job(suspend=True), _job(suspend=False), GATES)
    assert started == [f"spec.template.metadata.annotations.{REQUIRED}: Forbidden: required topology is not "
                       "supported with elastic jobs"]
    assert job_validation.update_errors(_job(suspend=False), _job(suspend=True), GATES) == started, "its stop"
    # the remedy: the annotation taken off its pod template while it is suspended
    assert job_validation.update_errors(_job(suspend=True), _job(suspend=True, topology=False), GATES) == []


def _app(*, suspend: bool, elastic: bool = True) -> dict[str, Any]:
    """An elastic SparkApplication, as an earlier kueue-es let one be made."""
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "s", "namespace": "ns", "labels": QUEUED,
                         "annotations": {ELASTIC: "true"} if elastic else {}},
            "spec": {"suspend": suspend, "mode": "cluster", "driver": {"cores": 1},
                     "executor": {"instances": 1}}}


def test_an_elastic_sparkapplication_made_earlier_is_refused_its_start_and_can_only_be_made_again() -> None:
    refused = [f'metadata.annotations[{ELASTIC}]: Forbidden: elastic job is not supported for '
               '"sparkoperator.k8s.io/v1beta2, Kind=SparkApplication"']
    assert spark_webhook.update_errors(_app(suspend=True), _app(suspend=False), GATES) == refused
    dropped = spark_webhook.update_errors(_app(suspend=True), _app(suspend=True, elastic=False), GATES)
    assert dropped == [f"metadata.annotations[{ELASTIC}]: Invalid value: false: field is immutable"]
    assert spark_webhook.create_errors(_app(suspend=True, elastic=False), GATES) == [], \
        "made again without it"
