"""Kueue's SparkApplication integration against the real apiserver, with ``sparkoperator.k8s.io/sparkapplication``
among the frameworks and ``SparkApplicationIntegration`` on.

The Spark operator is not installed: the sparkoperator.k8s.io/v1beta2 API is served from the minimal CRD of
:func:`connectors.k8s.crds.sparkapplication_crd` and no operator runs, so the test plays it. A queued
SparkApplication gets its Workload (Kueue's name; the ``driver`` and ``executor`` pod sets with the roles' cores and
memory), is admitted, and is unsuspended with the flavor's node labels in the driver's and executors' node selectors
and the pod-set labels in their labels; once the test sets its state ``COMPLETED`` its Workload is finished.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kubehelp import admitted_workload, connect, eventually, finished_condition, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s import sparkapplication as spark
from connectors.k8s.resources import SPARK_APPLICATIONS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"


def _app(ns: str) -> dict[str, Any]:
    return {"apiVersion": SPARK_APPLICATIONS.api_version, "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": ns, "labels": {Q: "user-queue"}},
            "spec": {"type": "Scala", "mode": "cluster", "image": "spark:3.5.0", "sparkVersion": "3.5.0",
                     "mainClass": "org.apache.spark.examples.SparkPi", "suspend": True,
                     "driver": {"coreRequest": "1", "memory": "512m", "serviceAccount": "spark"},
                     "executor": {"coreRequest": "1", "memory": "512m", "instances": 2}}}


@pytest.mark.asyncio
async def test_a_queued_sparkapplication_runs_on_its_admitted_workload_and_finishes_it(kube_apiserver,
                                                                                      tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "sparkoperator.k8s.io/sparkapplication"]},
                          "featureGates": {"SparkApplicationIntegration": True}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.sparkapplication_crd()])
        q = await queues(kc, "spark", {"cpu": 4, "memory": "4Gi"}, flavor_labels={"pool": "a"})
        app = msgspec.json.decode(await kc.create(SPARK_APPLICATIONS, _app(q.ns), q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_name = spark.workload_name("pi", app["metadata"]["uid"])

            wl = await admitted_workload(kc, wl_name, q.ns, "the SparkApplication's workload admitted")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("driver", 1), ("executor", 2)]
            driver = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
            assert driver["resources"]["requests"] == {"cpu": "1", "memory": "512Mi"}
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "SparkApplication"

            async def started() -> dict[str, Any] | None:
                obj = msgspec.json.decode(await kc.get(SPARK_APPLICATIONS, "pi", q.ns))
                return obj if obj["spec"].get("suspend") is False else None

            running = await eventually(started, what="the SparkApplication unsuspended")
            for role in ("driver", "executor"):
                assert running["spec"][role]["nodeSelector"] == {"pool": "a"}, role
                assert running["spec"][role]["labels"]["kueue.x-k8s.io/podset"] == role
            assert running["spec"]["executor"]["instances"] == 2
            assert running["spec"]["mainClass"] == "org.apache.spark.examples.SparkPi", "the rest of the spec kept"

            # play the Spark operator: the application ran and completed
            await kc.patch(SPARK_APPLICATIONS, "pi", {"status": {"applicationState": {"state": "COMPLETED"}}}, q.ns,
                           subresource="status")

            cond = await finished_condition(kc, wl_name, q.ns, "the SparkApplication's workload finished")
            assert cond["reason"] == "Succeeded"
