"""``integrations`` as Kueue's validateIntegrations checks it: each framework one Kueue registers, none twice, and no
external framework naming the kind of a framework listed (Kueue keys both lists by the job's GroupVersionKind). Only
for a file read now: a recorded document is loaded as it was taken."""

from __future__ import annotations

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import load_recorded

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
REGISTERED = [  # Kueue's GetIntegrationsList: the names its job integrations register, sorted
    "batch/job", "deployment", "jobset.x-k8s.io/jobset", "kubeflow.org/jaxjob", "kubeflow.org/mpijob",
    "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob",
    "leaderworkerset.x-k8s.io/leaderworkerset", "pod", "ray.io/raycluster", "ray.io/rayjob", "ray.io/rayservice",
    "sparkoperator.k8s.io/sparkapplication", "statefulset", "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper"]
SUPPORTED = ", ".join(f'"{name}"' for name in REGISTERED)


def test_the_known_frameworks_are_kueue_s_registered_integrations() -> None:
    from kueue_es.scheduler.config import FRAMEWORK_KINDS
    assert sorted(FRAMEWORK_KINDS) == REGISTERED


@pytest.mark.parametrize(("integrations", "error"), [
    ({"frameworks": ["batch/job", "kubeflow.org/mxjob"]},
     f'field `integrations.frameworks[1]`: Unsupported value: "kubeflow.org/mxjob": supported values: {SUPPORTED}'),
    ({"frameworks": ["Batch/Job"]},
     f'field `integrations.frameworks[0]`: Unsupported value: "Batch/Job": supported values: {SUPPORTED}'),
    ({"frameworks": ["batch/job", "ray.io/rayjob", "batch/job"]},
     'field `integrations.frameworks[2]`: Duplicate value: "batch/job"'),
    ({"frameworks": ["batch/job"], "externalFrameworks": ["Job.v1.batch"]},
     'field `integrations.externalFrameworks[0]`: Duplicate value: "Job.v1.batch"'),
    ({"frameworks": ["batch/job", "pod"], "externalFrameworks": ["Foo.v1.example.com", "Pod.v1."]},
     'field `integrations.externalFrameworks[1]`: Duplicate value: "Pod.v1."'),
    ({"frameworks": ["batch/job", "ray.io/rayjob"], "externalFrameworks": ["RayJob.v1.ray.io"]},
     'field `integrations.externalFrameworks[0]`: Duplicate value: "RayJob.v1.ray.io"'),
])
def test_integrations_kueue_refuses_are_refused_in_its_words(integrations: dict, error: str) -> None:
    doc = {**V1BETA2, "managedJobsNamespaceSelector": {"matchLabels": {"team": "a"}}, "integrations": integrations}
    with pytest.raises(InvalidInput) as err:
        load_config(doc, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}"


@pytest.mark.parametrize("integrations", [
    {"frameworks": ["batch/job"], "externalFrameworks": ["RayJob.v1.ray.io"]},  # RayJobs not managed: no clash
    {"frameworks": ["batch/job"], "externalFrameworks": ["Job.v2.batch", "job.v1.batch"]},  # another GVK
    {"frameworks": ["batch/job", "kubeflow.org/mpijob"], "externalFrameworks": ["MPIJob.v1.kubeflow.org"]},
])
def test_an_external_framework_of_a_kind_not_managed_is_accepted(integrations: dict) -> None:
    load_config({**V1BETA2, "integrations": integrations}, "kueue.yaml")


def test_a_recorded_document_with_an_unknown_or_repeated_framework_loads() -> None:
    document = {**V1BETA2, "integrations": {"frameworks": ["batch/job", "batch/job", "example.com/widget"],
                                            "externalFrameworks": ["Job.v1.batch"]}}
    with pytest.raises(InvalidInput):
        load_config(document)
    cfg = load_recorded(ev.ConfigRecorded(time=0, document=document), 3)
    assert cfg.frameworks == ("batch/job", "batch/job", "example.com/widget")


@pytest.mark.parametrize(("frameworks", "error"), [
    (["sparkoperator.k8s.io/sparkapplication"],
     "field `integrations.frameworks[0]`: sparkoperator.k8s.io/sparkapplication integration is alpha feature. please "
     "enable SparkApplicationIntegration featuregate"),
])
def test_a_framework_kueue_cannot_set_up_stops_the_start_in_its_words(frameworks: list[str], error: str) -> None:
    """What Kueue refuses as it sets its integrations up, after validation: an alpha framework without its gate
    (CanSupportIntegration). A framework without the one it runs on is no longer among them (below)."""
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, "integrations": {"frameworks": frameworks}}, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: Configuration: {error}"


@pytest.mark.parametrize("listed", [["deployment"], ["statefulset", "batch/job", "deployment"],
                                    ["leaderworkerset.x-k8s.io/leaderworkerset"]])
def test_a_pod_based_framework_without_pod_starts_with_the_pod_integration_on(listed: list[str]) -> None:
    """Kueue since v0.15 (#6736): the Deployment, StatefulSet and LeaderWorkerSet integrations turn ``pod`` on by
    themselves (``ImplicitlyEnabledFrameworkNames``) where Kueue v0.14 refused to start ("check enabled frameworks
    list: "deployment" integration not enabled "pod""); the list reads back as written."""
    cfg = load_config({**V1BETA2, "integrations": {"frameworks": listed}}, "kueue.yaml")
    assert cfg.frameworks == tuple(listed) and cfg.enabled_frameworks == (*listed, "pod") and cfg.manages_pods
