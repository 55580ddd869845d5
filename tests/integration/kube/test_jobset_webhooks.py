"""Kueue's JobSet webhooks against the real apiserver, with ``jobset.x-k8s.io/jobset`` among the frameworks.

The JobSet API is served from the minimal CRD of :func:`connectors.k8s.crds.jobset_crd`; kueue-es's webhook server
answers ``mjobset.kb.io`` and ``vjobset.kb.io`` for this test's namespace only. A JobSet naming a queue created
unsuspended is stored suspended, so the JobSet controller would make no Job before admission (without the webhook it
runs until the integration suspends it after the fact); one naming no queue, in a namespace with a LocalQueue
``default``, is stored naming that queue, suspended. Once running (unsuspended as Kueue would, on admission), a
change of its queue name is refused in Kueue's words.
"""

from __future__ import annotations

import secrets
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, job, jobset_webhooks, local_queue, namespace

from connectors.k8s import child_jobs, crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.resources import JOBSETS
from events import objects as o
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"
LABEL = "kueue-es-jobset-webhook-test"


def _jobset(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}
    return {"apiVersion": JOBSETS.api_version, "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"suspend": False, "replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {"template": template}}}]}}


@pytest.mark.asyncio
async def test_a_queued_jobset_created_running_is_stored_suspended(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.jobset_crd()])
        ns = await namespace(kc, "jobset-wh", {LABEL: sfx})
        async with jobset_webhooks(kc, tmp_path / "certs", LABEL, sfx, config) as server:
            async def in_effect() -> bool:  # the apiserver picks the configurations up asynchronously
                dry = msgspec.json.decode(await kc.request(
                    "POST", JOBSETS.collection_path(ns), query=[("dryRun", "All")],
                    body=_jobset(ns, "probe", {Q: "user-queue"})))
                return dry["spec"]["suspend"] is True

            await eventually(in_effect, what="the JobSet webhook in effect")
            stored = msgspec.json.decode(await kc.create(JOBSETS, _jobset(ns, "queued", {Q: "user-queue"}), ns))
            assert stored["spec"]["suspend"] is True
            assert stored["spec"]["replicatedJobs"][0]["replicas"] == 2, "nothing else changed"

            # under a Job (an enabled kind): suspended unless the walk, reading the Job, finds it queued
            for parent_name, queue in (("unqueued-parent", ""), ("queued-parent", "user-queue")):
                parent = job(ns, parent_name, queue)
                if not queue:
                    del parent["metadata"]["labels"][Q]
                made = await create(kc, parent)
                child = _jobset(ns, f"under-{parent_name}", {Q: "user-queue"})
                child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": parent_name,
                                                         "uid": made["metadata"]["uid"], "controller": True}]
                stored_child = msgspec.json.decode(await kc.create(JOBSETS, child, ns))
                assert stored_child["spec"]["suspend"] is (not queue), parent_name

            # as a leader serves it: the parent Job read from what its connector holds (the log's Jobs), not the
            # apiserver, and the walk deciding as on the stored one
            assert server.held_parents.hits == 0, "nothing held yet: every parent above was read from the apiserver"
            for parent_name, queue in (("held-unqueued", ""), ("held-queued", "user-queue")):
                parent = job(ns, parent_name, queue)
                if not queue:
                    del parent["metadata"]["labels"][Q]
                made = await create(kc, parent)
                held_jobs = {f"{ns}/{parent_name}": SimpleNamespace(
                    metadata=msgspec.convert(made["metadata"], o.ObjectMeta, strict=False))}
                server.held_parents.attach(child_jobs.Parents(), lambda held=held_jobs: held)  # type: ignore[misc]
                child = _jobset(ns, f"under-{parent_name}", {Q: "user-queue"})
                child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": parent_name,
                                                         "uid": made["metadata"]["uid"], "controller": True}]
                stored_child = msgspec.json.decode(await kc.create(JOBSETS, child, ns))
                assert stored_child["spec"]["suspend"] is (not queue), parent_name
            assert server.held_parents.hits == 2, "both parents were answered from memory"

            await create(kc, local_queue(ns, "default", f"cq-{sfx}"))
            defaulted = msgspec.json.decode(await kc.create(JOBSETS, _jobset(ns, "unnamed", {}), ns))
            assert defaulted["metadata"]["labels"] == {Q: "default"} and defaulted["spec"]["suspend"] is True

            # suspended, its queue may change; running (as Kueue unsuspends it on admission), it may not
            await kc.patch(JOBSETS, "queued", {"metadata": {"labels": {Q: "other-queue"}}}, ns)
            await kc.patch(JOBSETS, "queued", {"spec": {"suspend": False}}, ns)
            with pytest.raises(Forbidden) as refused:
                await kc.patch(JOBSETS, "queued", {"metadata": {"labels": {Q: "user-queue"}}}, ns)
            assert f'metadata.labels[{Q}]: Invalid value: "user-queue": field is immutable' in str(refused.value)
            stored = msgspec.json.decode(await kc.get(JOBSETS, "queued", ns))
            assert stored["metadata"]["labels"][Q] == "other-queue"
