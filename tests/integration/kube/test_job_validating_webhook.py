"""Kueue's validating webhook for batch/v1 Jobs (``vjob.kb.io``), served over HTTPS by kueue-es and called by the
real apiserver on create and update.

Registered with an objectSelector on this test's label, so other tests sharing the cluster never reach it. A Job
whose prebuilt Workload name or maximum execution time Kueue refuses is refused, naming the label; a running
Job's queue name stays as it is (the apiserver hands the webhook the old object) until the same update suspends
it; a WorkloadPriorityClass label is not removed; conflicting TAS annotations on the pod template are refused,
and let through once the Configuration turns ``TopologyAwareScheduling`` off. kueue-es's own writes pass it: a
partially admitted Indexed Job whose completions follow its parallelism
(``kueue.x-k8s.io/job-completions-equal-parallelism``) is started with both smaller — which the apiserver allows
only together —, stopped, and given both back.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    job,
    kueue_es,
    namespace,
    queues,
    refused,
    validating_webhooks,
)

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND

pytestmark = pytest.mark.kube
LABEL = "kueue-es-job-validation-test"
JOBS = BY_KIND["Job"]
Q = "kueue.x-k8s.io/queue-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
WPC = "kueue.x-k8s.io/priority-class"
REQUIRED, PREFERRED = "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"
DENIED = 'admission webhook "vjob.kb.io" denied the request: '
MIN_PAR = "kueue.x-k8s.io/job-min-parallelism"
SYNC = "kueue.x-k8s.io/job-completions-equal-parallelism"


def _job(ns: str, name: str, sfx: str, *, labels: dict[str, str] | None = None, suspend: bool = True,
         template_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    doc = job(ns, name, "user-queue", suspend=suspend, labels={LABEL: sfx, **(labels or {})})
    if template_annotations:
        doc["spec"]["template"]["metadata"]["annotations"] = template_annotations
    return doc


def _served(kc, tmp_path, ns: str, sfx: str, feature_gates: dict[str, bool]):
    """The validating webhooks, for Jobs labelled ``sfx``."""
    return validating_webhooks(kc, tmp_path / f"certs-{sfx}", f"kueue-es-job-validation-{sfx}",
                               {"matchLabels": {LABEL: sfx}}, _job(ns, "probe", sfx, labels={PREBUILT: "Probe"}),
                               feature_gates)


@pytest.mark.asyncio
async def test_jobs_kueue_refuses_are_refused_naming_the_field(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "vjob")
        sfx = secrets.token_hex(3)
        async with _served(kc, tmp_path, ns, sfx, {}) as server:
            # --- create: the prebuilt Workload's name, the maximum execution time, the TAS annotations ---------
            message = await refused(kc, _job(ns, "prebuilt", sfx, labels={PREBUILT: "Bad_Name"}))
            assert (f'{DENIED}metadata.labels[{PREBUILT}]: Invalid value: "Bad_Name": a lowercase RFC 1123 '
                    "subdomain must consist of") in message
            message = await refused(kc, _job(ns, "capped", sfx, labels={MAX_EXEC: "0"}))
            assert f"{DENIED}metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0" in message
            tas = {REQUIRED: "rack", PREFERRED: "block"}
            message = await refused(kc, _job(ns, "tas", sfx, template_annotations=tas))
            assert (f"{DENIED}spec.template.metadata.annotations: Invalid value: must not contain more than one "
                    "topology annotation") in message

            # --- update: a running Job's queue name; a priority class removed ----------------------------------
            await create(kc, _job(ns, "running", sfx, suspend=False, labels={WPC: "gold"}))
            with pytest.raises(Forbidden) as denied:
                await kc.patch(JOBS, "running", {"metadata": {"labels": {Q: "other"}}}, ns)
            assert f'{DENIED}metadata.labels[{Q}]: Invalid value: "other": field is immutable' in str(denied.value)
            with pytest.raises(Forbidden) as denied:
                await kc.patch(JOBS, "running", {"metadata": {"labels": {WPC: None}}}, ns)
            assert (f'{DENIED}metadata.labels[{WPC}]: Invalid value: "": WorkloadPriorityClass cannot be removed '
                    "from a workload") in str(denied.value)
            await kc.patch(JOBS, "running", {"metadata": {"labels": {Q: "other"}}, "spec": {"suspend": True}}, ns)
            got = await get(kc, "Job", "running", ns)
            assert got["metadata"]["labels"][Q] == "other" and got["spec"]["suspend"] is True
            assert server.validations_refused >= 5 and server.validations > server.validations_refused

            # --- kueue-es's own writes: start with smaller counts, stop, give them back ------------------------
            await crds.install(kc)
            qns = (await queues(kc, "vjob-run", {"cpu": 2})).ns
            partial = _job(qns, "partial", sfx)
            partial["metadata"]["annotations"] = {MIN_PAR: "2", SYNC: "true"}
            partial["spec"].update(parallelism=4, completions=4, completionMode="Indexed")
            refused_before, seen_before = server.validations_refused, server.validations
            async with kueue_es(kc, tmp_path / "log"):
                uid = (await create(kc, partial))["metadata"]["uid"]

                async def started() -> dict[str, Any] | None:
                    got = await get(kc, "Job", "partial", qns)
                    return got if got["spec"].get("suspend") is False else None

                spec = (await eventually(started, what="the Job started"))["spec"]
                assert (spec["parallelism"], spec["completions"]) == (2, 2)
                await kc.patch(BY_KIND["Workload"], workload_name("partial", uid), {"spec": {"active": False}}, qns)

                async def restored() -> dict[str, Any] | None:
                    got = await get(kc, "Job", "partial", qns)
                    return got if got["spec"]["suspend"] and got["spec"]["parallelism"] == 4 else None

                back = await eventually(restored, what="the Job stopped and its parallelism restored")
                assert back["spec"]["completions"] == 4
            assert server.validations_refused == refused_before
            assert server.validations >= seen_before + 4, "created, started, stopped, restored: each one validated"

        # --- a gate off lets through what it governs -----------------------------------------------------------
        sfx2 = secrets.token_hex(3)
        async with _served(kc, tmp_path, ns, sfx2, {"TopologyAwareScheduling": False}):
            await create(kc, _job(ns, "tas-off", sfx2, template_annotations=tas))
