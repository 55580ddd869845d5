"""Kueue's SparkApplication integration against the real apiserver, with ``sparkoperator.k8s.io/sparkapplication``
among the frameworks and ``SparkApplicationIntegration`` on.

The Spark operator is not installed: the sparkoperator.k8s.io/v1beta2 API is served from the minimal CRD of
:func:`connectors.k8s.crds.sparkapplication_crd` and no operator runs, so the test plays it. A queued
SparkApplication gets its Workload (Kueue's name; the ``driver`` and ``executor`` pod sets with the roles' cores and
memory as Spark requests them), is admitted, and is unsuspended with the flavor's node labels in the driver's and executors' node selectors
and the pod-set labels in their labels; once the test sets its state ``COMPLETED`` its Workload is finished.

With the pod integration on too, the Pods the operator would make are left to the application: the driver Pod (its
controller the SparkApplication) and an executor Pod (its controller the driver Pod) are neither gated nor made
Kueue's, and the executor gets a non-controller ownerReference to its queued SparkApplication
(``mpod.sparkapplication.kb.io``), while a plain queued Pod beside them is gated.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import (
    admitted_workload,
    connect,
    eventually,
    finished_condition,
    free_port,
    kueue_es,
    namespace,
    queues,
    scheduling_gates,
)

from connectors.k8s import crds, spark_executor_webhook
from connectors.k8s import sparkapplication as spark
from connectors.k8s.certs import self_signed
from connectors.k8s.pod_webhook import PodDefaulting, reviewer
from connectors.k8s.resources import BY_KIND, SPARK_APPLICATIONS
from connectors.k8s.webhook import (
    MUTATING_CONFIGS,
    WebhookServer,
    ancestry_lookup,
    default_queue_lookup,
    register,
)
from connectors.k8s.webhook import configuration as mutating
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
            assert driver["resources"]["requests"] == {"cpu": "1", "memory": "896Mi"}, "512m + 384Mi of overhead"
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


def _spark_pod(ns: str, name: str, role: str, owner: dict[str, Any]) -> dict[str, Any]:
    labels = {"spark-role": role, "sparkoperator.k8s.io/app-name": "pi",
              "sparkoperator.k8s.io/launched-by-spark-operator": "true", Q: "user-queue"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
            "spec": {"containers": [{"name": f"spark-kubernetes-{role}", "image": "spark:3.5.0"}]}}


def _controller(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True}


@pytest.mark.asyncio
async def test_the_driver_and_executor_pods_are_left_to_the_sparkapplication(kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod",
                                                          "sparkoperator.k8s.io/sparkapplication"]},
                          "featureGates": {"SparkApplicationIntegration": True}})
    pods, sfx = BY_KIND["Pod"], secrets.token_hex(3)
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.sparkapplication_crd()])
        ns = await namespace(kc, "spark-pods", {"kueue-es-spark-test": sfx})
        bundle = self_signed(["127.0.0.1"])
        _, cert, key = bundle.write(tmp_path / "certs")
        queues_lookup = default_queue_lookup(kc)
        server = WebhookServer(queues_lookup, None, {}, reviewer(kc, PodDefaulting.of(config), queues_lookup,
                                                                ancestry_lookup(kc, config)),
                               parents=spark_executor_webhook.reviewers(True, kc))
        port = free_port()
        await server.start("127.0.0.1", port, str(cert), str(key))
        name = f"kueue-es-spark-test-{sfx}"
        try:
            await register(kc, mutating(bundle.ca_pem, url=f"https://127.0.0.1:{port}", name=name,
                                        namespace_selector={"matchLabels": {"kueue-es-spark-test": sfx}},
                                        pods=True, sparkapplications=True))
            plain = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "plain", "namespace": ns, "labels": {Q: "user-queue"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}

            async def in_effect() -> bool:
                with contextlib.suppress(Exception):
                    out = await kc.request("POST", pods.collection_path(ns), query=[("dryRun", "All")], body=plain)
                    return "kueue.x-k8s.io/admission" in scheduling_gates(msgspec.json.decode(out))
                return False

            await eventually(in_effect, what="the pod webhook in effect")
            app = msgspec.json.decode(await kc.create(SPARK_APPLICATIONS, _app(ns), ns))
            # play the operator and the driver: the driver Pod under the application, an executor under the driver
            driver = msgspec.json.decode(await kc.create(pods, _spark_pod(ns, "pi-driver", "driver",
                                                                          _controller(app)), ns))
            executor = msgspec.json.decode(await kc.create(pods, _spark_pod(ns, "pi-exec-1", "executor",
                                                                            _controller(driver)), ns))
            for pod in (driver, executor):
                assert scheduling_gates(pod) == [], pod["metadata"]["name"]
                assert "kueue.x-k8s.io/managed" not in pod["metadata"]["labels"], pod["metadata"]["name"]
                assert "kueue.x-k8s.io/managed" not in (pod["metadata"].get("finalizers") or [])
            refs = executor["metadata"]["ownerReferences"]
            assert [(r["kind"], r["name"], r.get("controller"), r.get("blockOwnerDeletion")) for r in refs] == [
                ("Pod", "pi-driver", True, None), ("SparkApplication", "pi", False, False)]
            assert refs[1]["uid"] == app["metadata"]["uid"]
            assert driver["metadata"]["ownerReferences"] == [_controller(app)], "the driver is not touched"
        finally:
            with contextlib.suppress(Exception):
                await kc.delete(MUTATING_CONFIGS, name)
            await server.stop()
