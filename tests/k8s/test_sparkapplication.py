"""Kueue's SparkApplication integration, the pure part (:mod:`connectors.k8s.sparkapplication`): the gate and the
framework, the Workload's ``driver`` and ``executor`` pod sets, what starting and stopping write, finished, active and
PodsReady — cases from Kueue's ``sparkapplication_controller_test.go`` and ``sparkapplication_podset_test.go``."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from connectors.k8s import podsetinfo
from connectors.k8s import sparkapplication as spark
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, NO_KEYS, load_config
from projections import gates
from projections.cluster import ClusterState

UID = "app-uid"
FRAMEWORK = "sparkoperator.k8s.io/sparkapplication"
GATE_ON = {"featureGates": {"SparkApplicationIntegration": True}}
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def raw_app(*, instances: int | None = 2, suspend: bool | None = True, state: str = "",
            executor_state: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    executor: dict[str, Any] = {"coreRequest": "1", "memory": "512m"}
    if instances is not None:
        executor["instances"] = instances
    body: dict[str, Any] = {"mode": "cluster", "driver": {"coreRequest": "500m", "memory": "1g"},
                            "executor": executor, **spec}
    if suspend is not None:
        body["suspend"] = suspend
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "app", "namespace": "ns", "uid": UID, "resourceVersion": "5",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": body, "status": {"applicationState": {"state": state, "errorMessage": "boom" if state else ""},
                                     "executorState": executor_state or {}}}


def view(raw: dict[str, Any]) -> spark.SparkApplication:
    return msgspec.convert(raw, spark.SparkApplication)


# --- the gate and the framework ---------------------------------------------------------------------------------


def test_the_framework_is_refused_while_the_alpha_gate_is_off() -> None:
    """Kueue's ``CanSupportIntegration``: listing the framework without the gate stops Kueue from starting."""
    assert gates.GATES[gates.SPARK_APPLICATION_INTEGRATION] == (gates.ALPHA, False)
    assert gates.SPARK_APPLICATION_INTEGRATION in gates.MODELLED
    with pytest.raises(InvalidInput, match=r"integrations.frameworks\[1\].*please enable SparkApplicationIntegration"):
        load_config({"integrations": {"frameworks": ["batch/job", FRAMEWORK]}})
    assert load_config({"integrations": {"frameworks": ["batch/job", FRAMEWORK]}, **GATE_ON}).manages_sparkapplications
    assert not load_config(GATE_ON).manages_sparkapplications, "the gate alone lists nothing"
    assert not DEFAULT.manages_sparkapplications


def test_the_workload_name_hashes_kind_group_name_and_uid() -> None:
    """Kueue's ``GetWorkloadNameForSparkApplication`` (the GVK sparkoperator.k8s.io/v1beta2 SparkApplication)."""
    digest = hashlib.sha1(f"SparkApplication\nsparkoperator.k8s.io\napp\n{UID}".encode()).hexdigest()[:5]
    assert spark.workload_name("app", UID) == f"sparkapplication-app-{digest}"


# --- pod sets ---------------------------------------------------------------------------------------------------


def test_pod_sets_are_one_driver_then_the_executor_instances() -> None:
    sets = spark.pod_sets(raw_app(), tas=False)
    assert [(ps["name"], ps["count"]) for ps in sets] == [("driver", 1), ("executor", 2)]
    driver, executor = (ps["template"]["spec"]["containers"][0] for ps in sets)
    assert driver == {"name": "spark-kubernetes-driver",
                      "resources": {"requests": {"cpu": "500m", "memory": "1408Mi"}}}, "1g + the 384Mi minimum overhead"
    assert executor == {"name": "spark-kubernetes-executor",
                        "resources": {"requests": {"cpu": "1", "memory": "896Mi"}}}


def test_no_executor_instances_count_zero_executors() -> None:
    assert [ps["count"] for ps in spark.pod_sets(raw_app(instances=None), tas=False)] == [1, 0]


def test_a_roles_limits_gpu_scheduling_fields_and_metadata_are_its_pod_sets() -> None:
    """The operator's pod defaulting, resource fields only: limits, GPU, sidecars, init containers, priority class,
    node selector, tolerations, and the role's labels over its template's."""
    toleration = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    raw = raw_app(driver={"coreLimit": "2", "memoryLimit": "2048m", "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
                          "sidecars": [{"name": "side", "image": "s"}], "initContainers": [{"name": "init"}],
                          "priorityClassName": "high", "nodeSelector": {"pool": "a"}, "tolerations": [toleration],
                          "labels": {"role": "d"}, "annotations": {"a": "1"},
                          "template": {"metadata": {"labels": {"role": "t", "t": "1"}},
                                       "spec": {"containers": [{"name": "ignored", "image": "x"}]}}})
    driver = spark.pod_sets(raw, tas=False)[0]["template"]
    assert driver["metadata"] == {"labels": {"role": "d", "t": "1"}, "annotations": {"a": "1"}}
    spec = driver["spec"]
    assert [c["name"] for c in spec["containers"]] == ["spark-kubernetes-driver", "side"]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1408Mi"},  # Spark's defaults
                                                  "limits": {"cpu": "2", "memory": "2048Mi", "nvidia.com/gpu": "1"}}
    assert spec["initContainers"] == [{"name": "init"}] and spec["priorityClassName"] == "high"
    assert spec["nodeSelector"] == {"pool": "a"} and spec["tolerations"] == [toleration]
    assert spark.priority_class(view(raw)) == "high"


@pytest.mark.parametrize(("java", "k8s"), [("512m", "512Mi"), ("2G", "2Gi"), ("4gb", "4Gi"), ("1024", "1024"),
                                           ("100k", "100Ki")])
def test_java_memory_sizes_read_as_binary_quantities(java: str, k8s: str) -> None:
    assert spark.k8s_memory(java) == k8s


def test_under_tas_each_pod_set_asks_for_its_templates_required_topology() -> None:
    raw = raw_app(executor={"instances": 3, "annotations": {REQUIRED: "cloud.com/block"}})
    driver, executor = spark.pod_sets(raw, tas=True)
    assert "topologyRequest" not in driver and executor["topologyRequest"] == {"required": "cloud.com/block"}
    assert all("topologyRequest" not in ps for ps in spark.pod_sets(raw, tas=False))


def test_the_workload_is_owned_by_the_sparkapplication_and_queued() -> None:
    body = spark.workload_for(ClusterState(), NO_KEYS, raw_app(), "wl")
    assert body["metadata"]["ownerReferences"] == [{
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": "app", "uid": UID,
        "controller": True, "blockOwnerDeletion": True}]
    assert body["spec"]["queueName"] == "lq"
    assert [(ps.name, ps.count) for ps in spark.job_pod_sets(view(raw_app(instances=4)))] == [
        ("driver", 1), ("executor", 4)]


# --- suspended, started, stopped --------------------------------------------------------------------------------


@pytest.mark.parametrize(("suspend", "suspended"), [(False, False), (True, True), (None, False)])
def test_suspended_is_spec_suspend(suspend: bool | None, suspended: bool) -> None:
    assert bool(view(raw_app(suspend=suspend)).spec.suspend) is suspended


def _admitted(*names: str) -> SimpleNamespace:
    return SimpleNamespace(admission=o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=n, flavors={"cpu": "on-demand"}, count=1) for n in names]), check_states={})


def test_start_merges_each_roles_admission_and_unsuspends() -> None:
    """Kueue's RunWithPodSetsInfo: a role's labels, annotations, tolerations and gates, its node selector; the
    template made when missing to hold the gates."""
    raw = raw_app(executor={"instances": 2, "nodeSelector": {"zone": "a"}})
    gate = {"name": "kueue.x-k8s.io/topology"}
    toleration = o.Toleration(key="t", operator="Exists")
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "d"}, labels={"x": "1"}, tolerations=[toleration]),
             podsetinfo.PodSetInfo(node_selector={"pool": "e"}, scheduling_gates=[gate], annotations={"a": "b"})]
    patch = spark.start_patch(raw, infos)
    assert patch["metadata"] == {"resourceVersion": "5"}
    spec = patch["spec"]
    assert spec["suspend"] is False
    assert spec["driver"]["nodeSelector"] == {"pool": "d"} and spec["driver"]["labels"] == {"x": "1"}
    assert spec["driver"]["tolerations"] == [{"key": "t", "operator": "Exists"}]
    assert spec["executor"]["nodeSelector"] == {"pool": "e"}, "a merge patch: zone a stays"
    assert spec["executor"]["annotations"] == {"a": "b"}
    assert spec["executor"]["template"] == {"spec": {"containers": [{"name": "spark-kubernetes-executor"}],
                                                     "schedulingGates": [gate]}}


def test_start_writes_the_node_selector_at_the_application_when_it_has_one() -> None:
    raw = raw_app(nodeSelector={"zone": "a"})
    infos = [podsetinfo.PodSetInfo(node_selector={"pool": "d"}), podsetinfo.PodSetInfo(node_selector={"pool": "d"})]
    spec = spark.start_patch(raw, infos)["spec"]
    assert spec["nodeSelector"] == {"pool": "d"}, "a merge patch: zone a stays"
    assert "nodeSelector" not in spec["driver"] and "nodeSelector" not in spec["executor"]


def test_start_needs_both_pod_sets() -> None:
    """Kueue's ``BadPodSetsInfoLenError``."""
    with pytest.raises(spark.BadPodSets, match="expecting 2 podset, got 1"):
        spark.start_infos(ClusterState(), _admitted("driver"), view(raw_app()))
    with pytest.raises(spark.BadPodSets, match="expecting 2 podsets, got 1"):
        spark.start_patch(raw_app(), [podsetinfo.PodSetInfo()])


def test_a_conflicting_admission_is_refused() -> None:
    raw = raw_app(driver={"nodeSelector": {"pool": "a"}})
    with pytest.raises(podsetinfo.MergeConflict):
        spark.start_patch(raw, [podsetinfo.PodSetInfo(node_selector={"pool": "b"}), podsetinfo.PodSetInfo()])


def test_stop_suspends_and_restores_each_role_and_the_executor_count() -> None:
    """Kueue's RestorePodSetsInfo: what the Workload's pod sets recorded, the executors' count included."""
    raw = raw_app(suspend=False, driver={"nodeSelector": {"pool": "d", "zone": "a"}, "labels": {"x": "1"}},
                  executor={"instances": 5, "nodeSelector": {"pool": "e"}})
    saved = [o.PodSet(name="driver", count=1,
                      template=o.PodTemplateSpec(spec=o.PodSpec(node_selector={"zone": "a"}))),
             o.PodSet(name="executor", count=2)]
    spec = spark.stop_patch(raw, saved)["spec"]
    assert spec["suspend"] is True
    assert spec["driver"]["nodeSelector"] == {"pool": None} and spec["driver"]["labels"] is None
    assert spec["executor"]["nodeSelector"] is None and spec["executor"]["instances"] == 2
    partial = spark.stop_patch(raw, saved[:1])["spec"]
    assert partial == {"suspend": True}, "without both pod sets nothing is given back"


def test_stop_leaves_executor_instances_unset_when_none_were_asked_for() -> None:
    """Kueue's "Should suspend a SparkApplication without executor instances when its Workload is deactivated"
    (kubernetes-sigs/kueue#15610): an executor count of 0 is given back as no ``instances`` at all. The operator's
    CRD requires ``instances`` >= 1, so writing 0 would make the apiserver refuse the whole suspending patch, and the
    application would never be stopped."""
    saved = [o.PodSet(name="driver", count=1), o.PodSet(name="executor", count=0)]
    spec = spark.stop_patch(raw_app(suspend=False, instances=None), saved)["spec"]
    assert spec["suspend"] is True and "instances" not in spec["executor"]
    spec = spark.stop_patch(raw_app(suspend=False, instances=3), saved)["spec"]
    assert spec["executor"]["instances"] is None, "one set since is taken back off"


# --- status -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("state", "expected"), [
    ("COMPLETED", ("Succeeded", "boom")), ("FAILED", ("Failed", "boom")), ("SUBMISSION_FAILED", ("Failed", "boom")),
    ("RUNNING", None), ("SUBMITTED", None), ("", None)])
def test_finished_by_the_application_state(state: str, expected: tuple[str, str] | None) -> None:
    assert spark.finished(view(raw_app(state=state))) == expected


def test_active_while_running() -> None:
    assert spark.is_active(view(raw_app(state="RUNNING")))
    assert not spark.is_active(view(raw_app(state="SUBMITTED")))


def test_pods_ready_needs_the_driver_running_and_every_executor_asked_for() -> None:
    """Kueue's PodsReady: the state turns RUNNING with the driver alone."""
    assert not spark.pods_ready(view(raw_app(state="RUNNING", executor_state={"e1": "RUNNING", "e2": "PENDING"})))
    assert spark.pods_ready(view(raw_app(state="RUNNING", executor_state={"e1": "RUNNING", "e2": "COMPLETED"})))
    assert spark.pods_ready(view(raw_app(state="RUNNING", instances=None)))
    assert not spark.pods_ready(view(raw_app(state="SUBMITTED", instances=None)))
