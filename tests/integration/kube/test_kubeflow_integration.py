"""Kueue's Kubeflow training-job integrations against the real apiserver, with ``kubeflow.org/pytorchjob`` and
``kubeflow.org/tfjob`` among the frameworks.

The training operator is not installed: each kubeflow.org/v1 API is served from the minimal CRD of
:func:`connectors.k8s.crds.kubeflow_crd` and no operator runs, so the test plays it (sets the ``Succeeded`` condition
through the status subresource). A PyTorchJob that fills the ClusterQueue gets its Workload (``master`` and
``worker`` pod sets, Kueue's name), is admitted and unsuspended (``spec.runPolicy.suspend``) with the flavor's node
labels in both replicas' pod templates; a TFJob created running is suspended and gets its Workload (``chief``, ``ps``,
``worker``, in Kueue's order) held back while the PyTorchJob holds the quota; once the PyTorchJob succeeds its
Workload finishes with the condition's message and the TFJob starts.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import connect, eventually, finished_condition, get, kueue_es, queues

from connectors.k8s import crds
from connectors.k8s.kubeflow import KINDS
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
NOW = "2026-01-01T00:00:00Z"
PYTORCH, TF = KINDS["PyTorchJob"], KINDS["TFJob"]


def _job(kind: Any, ns: str, name: str, replicas: dict[str, int], *, suspend: bool | None) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}}}
    return {"apiVersion": kind.resource.api_version, "kind": kind.KIND,
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"runPolicy": {} if suspend is None else {"suspend": suspend},
                     kind.specs_field: {t: replica(n) for t, n in replicas.items()}}}


async def _now(kc: Any, kind: Any, ns: str, name: str) -> dict[str, Any]:
    return msgspec.json.decode(await kc.get(kind.resource, name, ns))


@pytest.mark.asyncio
async def test_a_queued_pytorchjob_runs_only_while_its_workload_is_admitted(kube_apiserver, tmp_path) -> None:
    config = load_config({"integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob",
                                                          "kubeflow.org/tfjob"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.kubeflow_crd(k.KIND, k.specs_field) for k in (PYTORCH, TF)])
        q = await queues(kc, "kubeflow", {"cpu": 3}, flavor_labels={"pool": "a"})
        pt = msgspec.json.decode(await kc.create(
            PYTORCH.resource, _job(PYTORCH, q.ns, "pt", {"Worker": 2, "Master": 1}, suspend=True), q.ns))
        async with kueue_es(kc, tmp_path / "log", config=config):
            wl_pt = PYTORCH.workload_name("pt", pt["metadata"]["uid"])

            async def admitted(name: str) -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", name, q.ns)
                    return wl if wl.get("status", {}).get("admission") else None
                return None

            wl = await eventually(lambda: admitted(wl_pt), what="the PyTorchJob's workload admitted")
            assert wl_pt.startswith("pytorchjob-pt-")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"

            async def started(kind: Any, name: str) -> dict[str, Any] | None:
                job = await _now(kc, kind, q.ns, name)
                return job if job["spec"]["runPolicy"].get("suspend") is False else None

            running = await eventually(lambda: started(PYTORCH, "pt"), what="the PyTorchJob unsuspended")
            for replica_type in ("Master", "Worker"):
                template = running["spec"]["pytorchReplicaSpecs"][replica_type]["template"]
                assert template["spec"]["nodeSelector"] == {"pool": "a"}, replica_type
                assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == replica_type.lower()

            # a TFJob created running (no webhook here): suspended, given its Workload, held back
            tf = msgspec.json.decode(await kc.create(
                TF.resource, _job(TF, q.ns, "tf", {"Worker": 1, "PS": 1, "Chief": 1}, suspend=None), q.ns))
            wl_tf = TF.workload_name("tf", tf["metadata"]["uid"])

            async def pending() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", wl_tf, q.ns)
                    suspended = (await _now(kc, TF, q.ns, "tf"))["spec"]["runPolicy"].get("suspend") is True
                    return wl if suspended and "admission" not in wl.get("status", {}) else None
                return None

            wl = await eventually(pending, what="the TFJob suspended, with a pending workload")
            assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("chief", 1), ("ps", 1),
                                                                                   ("worker", 1)]
            assert wl["metadata"]["ownerReferences"][0]["kind"] == "TFJob"

            # play the training operator: the PyTorchJob succeeded
            done = {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded",
                    "message": f"PyTorchJob {q.ns}/pt successfully completed.", "lastTransitionTime": NOW}
            await kc.patch(PYTORCH.resource, "pt", {"status": {"conditions": [done]}}, q.ns, subresource="status")

            cond = await finished_condition(kc, wl_pt, q.ns, "the PyTorchJob's workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", f"PyTorchJob {q.ns}/pt successfully completed.")
            tf_running = await eventually(lambda: started(TF, "tf"), what="the TFJob started in its turn")
            assert tf_running["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
