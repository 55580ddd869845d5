"""On a real apiserver: a preemption whose status write a ValidatingAdmissionPolicy refuses (no Workload of
the namespace may show Evicted=True) never happens, as in Kueue, whose eviction is that one write. The
victim's Job keeps running, its Workload stays admitted (in the cluster and in the fold), the preemptor waits,
and the scheduler decides the preemption again at its next cycle after Kueue's scheduling-loop backoff (1 ms
doubling; to 10 s here, :data:`projections.eviction_undo.SCHEDULER_BACKOFF_MS`), not on every turn: once the
refusal lifts, it goes through."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, priority_class, queues

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden, Invalid
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND, Resource
from events import schema as ev

pytestmark = pytest.mark.kube
JOBS, WORKLOADS = BY_KIND["Job"], BY_KIND["Workload"]
POLICIES = Resource("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1",
                    "validatingadmissionpolicies", False)
BINDINGS = Resource("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1",
                    "validatingadmissionpolicybindings", False)
NOW = "2026-01-01T00:00:00Z"
REFUSAL = "no evictions in this namespace"


def _true(obj: dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


@contextlib.asynccontextmanager
async def _refusing_evictions(kc, name: str, ns: str):  # noqa: ANN001, ANN202
    """A policy refusing any Workload status in ``ns`` that shows Evicted=True (cluster-wide objects, bound to
    ``ns`` only; deleted after)."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name}, "spec": {
                  "failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{
                      "apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["*"], "operations": ["UPDATE"],
                      "resources": ["workloads/status"]}]},
                  "validations": [{"expression": "!has(object.status) || !has(object.status.conditions) || "
                                                 "!object.status.conditions.exists(c, c.type == 'Evicted' && "
                                                 "c.status == 'True')",
                                   "message": REFUSAL}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {
                   "policyName": name, "validationActions": ["Deny"],
                   "matchResources": {"namespaceSelector": {
                       "matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    await kc.create(POLICIES, policy)
    await kc.create(BINDINGS, binding)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            await kc.delete(BINDINGS, name)
        with contextlib.suppress(Exception):
            await kc.delete(POLICIES, name)


async def _in_effect(kc, ns: str, name: str) -> bool:  # noqa: ANN001
    """A dry-run status patch showing Evicted=True on Workload ``name`` is refused by the policy."""
    patch = {"status": {"conditions": [{"type": "Evicted", "status": "True", "reason": "Probe",
                                        "message": "probe", "lastTransitionTime": NOW}]}}
    try:
        await kc.request("PATCH", WORKLOADS.object_path(name, ns, "status"), query=[("dryRun", "All")],
                         body=patch, content_type="application/merge-patch+json")
    except (Forbidden, Invalid) as exc:
        return REFUSAL in str(exc)
    return False


@pytest.mark.asyncio
async def test_a_preemption_the_apiserver_refuses_leaves_the_victim_running_and_is_retried_after_a_backoff(
        kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        ns, _, _, _ = await queues(kc, "refuse", {"cpu": 2}, sfx=sfx,
                                   preemption={"withinClusterQueue": "LowerPriority"})
        await create(kc, priority_class(f"low-{sfx}", 100))
        await create(kc, priority_class(f"high-{sfx}", 1000))
        low = await create(kc, job(ns, "low", "user-queue", cpu="2",
                                   labels={"kueue.x-k8s.io/priority-class": f"low-{sfx}"}))
        low_wl = workload_name("low", low["metadata"]["uid"])
        async with kueue_es(kc, tmp_path / "log") as (_, journal):
            key = f"{ns}/{low_wl}"

            async def records() -> list[ev.Record]:
                return [r async for r in journal.log.read()]

            def preempted(recs: list[ev.Record]) -> list[ev.Record]:
                return [r for r in recs if isinstance(r.event, ev.WorkloadPreempted) and r.event.key == key]

            async with _refusing_evictions(kc, f"refuse-evictions-{sfx}", ns):

                async def running() -> bool:
                    j = await get(kc, "Job", "low", ns)
                    return (not j["spec"].get("suspend")
                            and _true(await get(kc, "Workload", low_wl, ns), "Admitted"))

                await eventually(running, what="the low Job admitted and running")
                await kc.patch(JOBS, "low", {"status": {"startTime": NOW, "active": 1, "ready": 1}}, ns,
                               subresource="status")  # (the job controller's part: its pod runs)
                await eventually(lambda: _in_effect(kc, ns, low_wl), what="the policy in effect")
                # --- a higher-priority Job would preempt it: the eviction's write is refused ----------------
                await create(kc, job(ns, "high", "user-queue", cpu="2",
                                     labels={"kueue.x-k8s.io/priority-class": f"high-{sfx}"}))

                async def rejected() -> bool:
                    return any(isinstance(r.event, ev.DecisionRejected) and r.event.key == key
                               for r in await records())

                await eventually(rejected, what="the low Workload's eviction rejected")
                await asyncio.sleep(4.0)  # many turns of the scheduler; retries 1 ms, 2 ms ... 2 s apart
                recs = await records()
                refused = [r for r in recs if isinstance(r.event, ev.DecisionRejected) and r.event.key == key]
                # (the backoff allows at most 12 retries in 4 s, 20 with slack; a round trip may slow them)
                assert 5 <= len(preempted(recs)) <= 20, "not retried at the loop's pace, or on every turn"
                assert REFUSAL in refused[0].event.message
                # nothing happened: the Job runs, the Workload is admitted, in the cluster and in the fold
                assert not (await get(kc, "Job", "low", ns))["spec"].get("suspend")
                wl = await get(kc, "Workload", low_wl, ns)
                assert _true(wl, "Admitted") and not _true(wl, "Evicted")

                def settled() -> bool:  # a retry decided since the last refusal may be in flight: its refusal
                    folded = journal.mirror.state.workloads[key]  # undoes it in the fold
                    return (folded.phase == "Admitted" and not folded.evicted
                            and key in journal.mirror.state.refused_evictions)

                await eventually(settled, what="the fold showing the victim admitted, its eviction refused")
            # the policy gone (the apiserver drops it asynchronously): with nothing else happening to the
            # victim, the preemption decided again once its backoff ends goes through, as Kueue's retried
            # reconcile does
            await eventually(lambda: _lifted(kc, ns, low_wl), what="the policy lifted")

            async def evicted() -> bool:
                return _true(await get(kc, "Workload", low_wl, ns), "Evicted")

            await eventually(evicted, timeout=60.0, what="the low Workload evicted once the refusal lifted")
            assert len(preempted(await records())) <= 600


async def _lifted(kc, ns: str, name: str) -> bool:  # noqa: ANN001
    return not await _in_effect(kc, ns, name)
