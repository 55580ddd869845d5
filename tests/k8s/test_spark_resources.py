"""Kueue v0.20 (#15833): a SparkApplication's pod sets request the CPU and memory Spark requests for its driver and
executors (:mod:`connectors.k8s.spark_resources`), after the cases of Kueue's ``sparkapplication_resources_test.go``;
a memory size that is not Java's gets the application no Workload, and is refused by the webhook under TAS."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s import spark_resources as sr
from connectors.k8s import spark_webhook
from connectors.k8s import sparkapplication as spark
from events.errors import InvalidInput


def _spec(driver: dict | None = None, executor: dict | None = None, conf: dict | None = None,
          **rest: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "Scala", "driver": driver or {}, "executor": executor or {}, **rest}
    if conf:
        spec["sparkConf"] = conf
    return spec


@pytest.mark.parametrize(("spec", "role", "cpu", "memory"), [
    (_spec(), "driver", "1", "1408Mi"),  # 1 core, 1g + the 384Mi minimum overhead
    (_spec(), "executor", "1", "1408Mi"),
    (_spec(driver={"cores": 4}), "driver", "4", "1408Mi"),
    (_spec(driver={"cores": 4, "coreRequest": "500m"}), "driver", "500m", "1408Mi"),
    (_spec(executor={"cores": 4}, conf={"spark.kubernetes.executor.request.cores": "2500m"}), "executor", "2500m",
     "1408Mi"),
    (_spec(executor={"coreRequest": "500m"}, conf={"spark.kubernetes.executor.request.cores": "2500m"}), "executor",
     "500m", "1408Mi"),
    (_spec(conf={"spark.driver.cores": "3"}), "driver", "3", "1408Mi"),
    (_spec(driver={"cores": 4}, conf={"spark.driver.cores": "3"}), "driver", "4", "1408Mi"),
    (_spec(conf={"spark.executor.memory": "8g"}), "executor", "1", "9011Mi"),  # 8192 + 819
    (_spec(executor={"memory": "1g"}, conf={"spark.executor.memory": "8g"}), "executor", "1", "1408Mi"),
    (_spec(driver={"memory": "4g"}, conf={"spark.driver.memoryOverhead": "1g"}), "driver", "1", "5120Mi"),
    (_spec(driver={"memory": "4g", "memoryOverhead": "512m"}, conf={"spark.driver.memoryOverhead": "1g"}), "driver",
     "1", "4608Mi"),
    (_spec(driver={"memory": "4g", "memoryOverhead": "512"}), "driver", "1", "4608Mi"),  # no unit: MiB
    (_spec(driver={"memory": "1g"}, memoryOverheadFactor="0"), "driver", "1", "1408Mi"),
    (_spec(driver={"memory": "2g"}, memoryOverheadFactor="0.5"), "driver", "1", "3072Mi"),
    (_spec(driver={"memory": "2g"}, memoryOverheadFactor="0.5", conf={sr.GLOBAL_FACTOR: "0.25"}), "driver", "1",
     "2560Mi"),
    (_spec(executor={"memory": "2g"}, conf={sr.GLOBAL_FACTOR: "0.25", "spark.executor.memoryOverheadFactor": "0.5"}),
     "executor", "1", "3072Mi"),
    (_spec(driver={"memory": "2g", "memoryOverhead": "100m"}, memoryOverheadFactor="0.5"), "driver", "1", "2148Mi"),
    (_spec(driver={"memory": "2g"}, type="Python"), "driver", "1", "2867Mi"),  # 2048 + 819
    (_spec(executor={"memory": "2g"}, type="R"), "executor", "1", "2867Mi"),
    (_spec(driver={"memory": "2g"}, type="Python", memoryOverheadFactor="0.1"), "driver", "1", "2432Mi"),
    (_spec(executor={"memory": "2g"}, type="Python", conf={sr.PYSPARK_MEMORY: "512m"}), "executor", "1", "3379Mi"),
    (_spec(executor={"memory": "2g"}, conf={sr.PYSPARK_MEMORY: "512m"}), "executor", "1", "2432Mi"),
    (_spec(driver={"memory": "2g"}, type="Python", conf={sr.PYSPARK_MEMORY: "512m"}), "driver", "1", "2867Mi"),
    (_spec(executor={"memory": "2g"}, conf={sr.OFF_HEAP_ENABLED: "true", sr.OFF_HEAP_SIZE: "1g"}), "executor", "1",
     "3456Mi"),
    (_spec(executor={"memory": "2g"}, conf={sr.OFF_HEAP_ENABLED: "true", sr.OFF_HEAP_SIZE: "1073741824"}),
     "executor", "1", "3456Mi"),  # no unit: bytes
    (_spec(executor={"memory": "2g"}, conf={sr.OFF_HEAP_SIZE: "1g"}), "executor", "1", "2432Mi"),
])
def test_a_role_requests_what_spark_requests(spec: dict, role: str, cpu: str, memory: str) -> None:
    assert (sr.cpu_request(spec, role), sr.memory_request(spec, role)) == (cpu, memory)


@pytest.mark.parametrize(("spec", "error"), [
    (_spec(driver={"memory": "512Mi"}), 'failed to parse memory requests: invalid Spark memory string "512Mi": '
                                        'unknown unit "mi"'),
    (_spec(driver={"memory": "8589934592p"}), "value is too large"),
    (_spec(driver={"memory": "8191p", "memoryOverhead": "8191p"}), "memory request of"),
    (_spec(driver={"memory": "8191p"}, memoryOverheadFactor="1e30"), "memory overhead of"),
    (_spec(memoryOverheadFactor="lots"), 'invalid memory overhead factor "lots": must be a non-negative number'),
    (_spec(conf={"spark.driver.cores": "four"}), "failed to parse spark.driver.cores=four"),
])
def test_what_spark_would_not_read_is_refused(spec: dict, error: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        sr.cpu_request(spec, "driver")
        sr.memory_request(spec, "driver")
    assert error in str(refused.value)


def _app(memory: str, annotations: dict | None = None) -> dict[str, Any]:
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "app", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"mode": "cluster", "suspend": True, "driver": {"memory": memory, "annotations": annotations or {}},
                     "executor": {"instances": 1}}}


def test_a_kubernetes_memory_quantity_gets_no_pod_sets_and_is_refused_under_tas() -> None:
    """Kueue builds no pod sets for it (no Workload); its webhook says why only under TopologyAwareScheduling,
    where it builds them to check the TAS annotations — and then says only that."""
    with pytest.raises(InvalidInput, match='invalid Spark memory string "2Gi"'):
        spark.pod_sets(_app("2Gi"), tas=False)
    assert spark.job_pod_sets(msgspec.convert(_app("2Gi"), spark.SparkApplication)) is None
    assert spark_webhook.create_errors(_app("2Gi"), {"TopologyAwareScheduling": False}) == []
    tas = {"TopologyAwareScheduling": True}
    assert spark_webhook.create_errors(_app("2Gi", {"kueue.x-k8s.io/podset-required-topology": ""}), tas) == [
        'failed to parse memory requests: invalid Spark memory string "2Gi": unknown unit "gi"']
    assert spark_webhook.create_errors(_app("2g"), tas) == []
