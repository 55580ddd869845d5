"""Kueue's newest ``pkg/controller/jobs/job/job_webhook_test.go`` (v1beta2 API,
``WorkloadIdentifierAnnotations`` and elastic-job cases; read at commit 0007870e) as an oracle for the
batch/v1 Job's validation rules that session 46's walk (an older v1beta1 version) did not reach: elastic Jobs
with partial admission or a topology request, the ``job-min-parallelism`` annotation read as an int32
(kubernetes-sigs/kueue#15499), and the prebuilt Workload's name carried as an annotation. Each case names
Kueue's test case; each calls kueue-es's own rule (:func:`connectors.k8s.job_validation.create_errors` /
:func:`~connectors.k8s.job_validation.update_errors`)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s import job_validation as jv

MIN_PAR = "kueue.x-k8s.io/job-min-parallelism"
ELASTIC = "kueue.x-k8s.io/elastic-job"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
TAS = {"TopologyAwareScheduling": True}
TAS_ELASTIC = {"TopologyAwareScheduling": True, "ElasticJobsViaWorkloadSlices": True}
IDENTIFIERS = {"WorkloadIdentifierAnnotations": True}
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
             "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
             "validation is "
             r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def job(annotations: dict[str, str] | None = None, *, labels: dict[str, str] | None = None,
        suspend: bool = True, parallelism: int = 1, completions: int | None = None,
        pod_annotations: dict[str, str] | None = None,
        indexed: bool = False) -> dict[str, Any]:
    """Kueue's ``testingutil.MakeJob("job", "default")``: suspended, parallelism 1, no queue name."""
    spec: dict[str, Any] = {"suspend": suspend, "parallelism": parallelism,
                            "template": {"metadata": {"annotations": pod_annotations or {}},
                                         "spec": {"containers": [{"name": "c", "image": "pause"}]}}}
    if completions is not None:
        spec["completions"] = completions
    if indexed:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job", "namespace": "default", "labels": labels or {},
                         "annotations": annotations or {}}, "spec": spec}


# --- TestValidateCreate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("new", "gates", "expected"), [
    pytest.param(job({ELASTIC: "true"}, pod_annotations={REQUIRED: "cloud.com/block"}), TAS_ELASTIC,
                 [f"spec.template.metadata.annotations.{REQUIRED}: Forbidden: required topology is not "
                  "supported with elastic jobs"], id="elastic job with required topology is rejected"),
    pytest.param(job({ELASTIC: "true"}, pod_annotations={PREFERRED: "cloud.com/block"}), TAS_ELASTIC,
                 [f"spec.template.metadata.annotations.{PREFERRED}: Forbidden: preferred topology is not "
                  "supported with elastic jobs"], id="elastic job with preferred topology is rejected"),
    pytest.param(job({ELASTIC: "true"}, pod_annotations={UNCONSTRAINED: "true"}), TAS_ELASTIC, [],
                 id="elastic job with unconstrained topology is accepted"),
    pytest.param(job({ELASTIC: "true"}, pod_annotations={REQUIRED: "cloud.com/block"}),
                 {"TopologyAwareScheduling": True, "ElasticJobsViaWorkloadSlices": False}, [],
                 id="(kueue-es) the elastic gate off: not elastic, the topology is allowed"),
    pytest.param(job({MIN_PAR: "2", ELASTIC: "true"}, parallelism=4, completions=6),
                 {"ElasticJobsViaWorkloadSlices": True},
                 [f'metadata.annotations[{MIN_PAR}]: Invalid value: "2": partial admission and elastic job '
                  "cannot be used together"], id="partial admission and elastic job cannot be used together"),
    pytest.param(job({MIN_PAR: "2", ELASTIC: "true"}, parallelism=4, completions=6),
                 {"ElasticJobsViaWorkloadSlices": False}, [],
                 id="(kueue-es) partial admission with the elastic gate off"),
    pytest.param(job({MIN_PAR: "NaN"}, parallelism=4, completions=6), {},
                 [f'metadata.annotations[{MIN_PAR}]: Invalid value: "NaN": strconv.ParseInt: parsing "NaN": '
                  "invalid syntax"], id="invalid partial admission annotation (format)"),
    pytest.param(job({MIN_PAR: "5"}, parallelism=4, completions=6), {},
                 [f"metadata.annotations[{MIN_PAR}]: Invalid value: 5: should be between 0 and 3"],
                 id="invalid partial admission annotation (badValue)"),
    pytest.param(job({MIN_PAR: "2147483648"}, parallelism=4, completions=6), {},
                 [f'metadata.annotations[{MIN_PAR}]: Invalid value: "2147483648": strconv.ParseInt: parsing '
                  '"2147483648": value out of range'],
                 id="invalid partial admission annotation (outside int32 range)"),
    pytest.param(job({MIN_PAR: "3"}, parallelism=4, completions=6), {}, [],
                 id="valid partial admission annotation"),
    pytest.param(job({PREBUILT: "workload name"}, parallelism=4, completions=4, indexed=True), IDENTIFIERS,
                 [f'metadata.annotations[{PREBUILT}]: Invalid value: "workload name": {SUBDOMAIN}'],
                 id="invalid prebuilt workload annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param(job({PREBUILT: "workload-name"}, parallelism=4, completions=4, indexed=True), IDENTIFIERS,
                 [], id="valid prebuilt workload annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param(job({PREBUILT: "workload-annotation"}, labels={PREBUILT: "workload-label"}), IDENTIFIERS, [],
                 id="different prebuilt workload label and annotation, label ignored"),
    pytest.param(job(labels={PREBUILT: "workload name"}, parallelism=4, completions=4, indexed=True), {},
                 [f'metadata.labels[{PREBUILT}]: Invalid value: "workload name": {SUBDOMAIN}'],
                 id="invalid prebuilt workload"),
    pytest.param(job(parallelism=4, pod_annotations={REQUIRED: "cloud.com/block", SLICE: "cloud.com/block",
                                                     SLICE_SIZE: "20"}), TAS,
                 [f'spec.template.metadata.annotations[{SLICE_SIZE}]: Invalid value: "20": must not be '
                  "greater than pod set count 4"],
                 id="invalid slice topology request - slice size larger than number of podsets"),
    pytest.param(job(pod_annotations={UNCONSTRAINED: "true", SLICE: "cloud.com/block", SLICE_SIZE: "1"}), TAS,
                 [],
                 id="valid topology request - slice-only topology - unconstrained with slices defined"),
])
def test_validate_create(new: dict, gates: dict, expected: list[str]) -> None:
    assert jv.create_errors(new, gates) == expected


# --- TestValidateUpdate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "gates", "expected"), [
    pytest.param(job({PREBUILT: "old-workload"}), job({PREBUILT: "new-workload"}, suspend=False), IDENTIFIERS,
                 [f'metadata.annotations[{PREBUILT}]: Invalid value: "new-workload": field is immutable'],
                 id="immutable prebuilt workload annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param(job(labels={PREBUILT: "old-workload"}),
                 job(labels={PREBUILT: "new-workload"}, suspend=False), {},
                 [f'metadata.labels[{PREBUILT}]: Invalid value: "new-workload": field is immutable'],
                 id="immutable prebuilt workload"),
    pytest.param(job(labels={PREBUILT: "workload-name"}), job({PREBUILT: "workload-name"}, suspend=False),
                 IDENTIFIERS, [],
                 id="migrate from label to annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param(job({MIN_PAR: "3"}, parallelism=4, completions=6),
                 job({MIN_PAR: "2"}, parallelism=4, completions=6),
                 {}, [], id="can update the kueue.x-k8s.io/job-min-parallelism annotation"),
    pytest.param(job({MIN_PAR: "3"}, parallelism=4, completions=6),
                 job({MIN_PAR: "NaN"}, parallelism=4, completions=6), {},
                 [f'metadata.annotations[{MIN_PAR}]: Invalid value: "NaN": strconv.ParseInt: parsing "NaN": '
                  "invalid syntax"],
                 id="validates kueue.x-k8s.io/job-min-parallelism annotation value (bad format)"),
    pytest.param(job({MIN_PAR: "3"}, suspend=False, parallelism=4, completions=6),
                 job({MIN_PAR: "3"}, suspend=False, parallelism=5, completions=6), {},
                 ["spec.parallelism: Forbidden: cannot change when partial admission is enabled and the job "
                  "is not suspended"],
                 id="immutable parallelism while unsuspended with partial admission enabled"),
    pytest.param(job({MIN_PAR: "3", "kueue.x-k8s.io/stopping": "true"}, parallelism=4, completions=6),
                 job({MIN_PAR: "3"}, parallelism=5, completions=6), {}, [],
                 id="mutable parallelism while suspended with partial admission enabled"),
    pytest.param(job(), job(pod_annotations={REQUIRED: "cloud.com/block", SLICE: "cloud.com/block"}), TAS,
                 [f"spec.template.metadata.annotations[{SLICE_SIZE}]: Required value: must be set when "
                  f"'{SLICE}' is specified"], id="attempt to set invalid slice topology request"),
])
def test_validate_update(old: dict, new: dict, gates: dict, expected: list[str]) -> None:
    assert jv.update_errors(old, new, gates) == expected
