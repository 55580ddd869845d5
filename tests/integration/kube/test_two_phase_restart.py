"""Restart safety of a two-phase admission, with ``kueue-es run --kube`` as real processes SIGKILLed mid-way.

The ClusterQueue has a ProvisioningRequest admission check: a Job's Workload first reserves quota
(``QuotaReserved``, the check Pending, a ProvisioningRequest created), then — once the request is Provisioned and
the check Ready — is ``Admitted`` and the Job runs. The test plays the cluster autoscaler (it marks the request
Provisioned) and kills kueue-es (``crashing_kube_run.py``):

* before it creates the ProvisioningRequest it decided (the decision logged, not carried out);
* after it created the request and the cluster shows the Workload holding quota (the log does not know the
  request was created); the autoscaler provisions while kueue-es is down; the next process is killed before it
  writes ``Admitted`` (the check's Ready and the admission decided and logged, not written); the next one after
  it wrote ``Admitted`` and before it unsuspends the Job.

After the last restart the Workload converges to what Kueue shows — quota reserved and admitted, the check Ready
with the request's podSetUpdates — with one reservation, one request (attempt 1), one admission in the log, all
of them applied; every version of the Workload the apiserver stored keeps its quota once reserved and its
admission once admitted; the Job is unsuspended exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get, job, provisioning_check, queues, versions
from kubeproc import ready
from kubeproc import run as kueue_es_process

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND, PROVISIONING_REQUESTS
from events import schema as ev
from events.filelog import FileLog

pytestmark = pytest.mark.kube
WAIT = 120.0  # generous: two cores shared with many other test runs
NOW = "2026-01-01T00:00:00Z"
NO_ELECTION = {"KUEUE_ES_KUBE_LEADER_ELECTION": "false"}
CLASS = "check-capacity.autoscaling.x-k8s.io"


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def _true(obj: dict[str, Any], type_: str) -> bool:
    c = _cond(obj, type_)
    return c is not None and c["status"] == "True"


async def _setup(kc, sfx: str) -> dict[str, str]:
    """4 cpu behind a ProvisioningRequest admission check (class CLASS)."""
    check = await provisioning_check(kc, sfx, CLASS)
    ns, fl, cq, _ = await queues(kc, "twophase", {"cpu": 4}, sfx=sfx, flavor_labels={"pool": sfx},
                                 admissionChecksStrategy={"admissionChecks": [{"name": check}]})
    return {"ns": ns, "check": check, "cq": cq, "flavor": fl}


class _History:
    """Every version of the namespace's Workloads and Jobs the apiserver stores, from now on (a transient one is
    not missed), across the restarts of kueue-es."""

    def __init__(self, kc, ns: str) -> None:
        self.kc, self.ns = kc, ns
        self.versions: dict[str, list[dict[str, Any]]] = {"Workload": [], "Job": []}
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> _History:
        for kind in self.versions:
            rv = (await self.kc.list(BY_KIND[kind])).metadata.resource_version
            self.tasks.append(asyncio.create_task(self._watch(kind, rv)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def _watch(self, kind: str, rv: str) -> None:
        async for obj in versions(self.kc, BY_KIND[kind], rv, field_selector=f"metadata.namespace={self.ns}"):
            self.versions[kind].append(obj)

    def of(self, kind: str, name: str) -> list[dict[str, Any]]:
        return [v for v in self.versions[kind] if v["metadata"]["name"] == name]


def _records(log_dir: Path, key: str) -> list[ev.Record]:
    log = FileLog.open(log_dir, readonly=True)
    return [r for b in log.scan() for r in b if getattr(r.event, "key", None) == key]


def _decisions(records: list[ev.Record]) -> list[str]:
    return [type(r.event).__name__ for r in records if isinstance(r.event, ev.Decision)]


def _applied(records: list[ev.Record]) -> set[int]:
    return {r.event.decision for r in records if isinstance(r.event, ev.DecisionApplied)}


def _unapplied(records: list[ev.Record]) -> list[str]:
    done = _applied(records)
    return [type(r.event).__name__ for r in records if isinstance(r.event, ev.Decision) and r.offset not in done]


async def _request(kc, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return msgspec.json.decode(await kc.get(PROVISIONING_REQUESTS, name, ns))
    except NotFound:
        return None


async def _provision(kc, name: str, ns: str) -> None:
    """What the cluster autoscaler does once the capacity is there."""
    await kc.patch(PROVISIONING_REQUESTS, name, {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted",
         "lastTransitionTime": NOW},
        {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "capacity is ready",
         "lastTransitionTime": NOW}]}}, ns, subresource="status")


async def _killed(p) -> None:
    try:
        code = await asyncio.wait_for(p.proc.wait(), WAIT)
    except TimeoutError:
        raise AssertionError(f"{p.name} was not killed: " + "\n".join(p.logs[-30:])) from None
    assert code == -signal.SIGKILL, f"{p.name} exited with {code}: " + "\n".join(p.logs[-20:])


async def _converged(kc, env: dict[str, str], history: _History, log_dir: Path, wl_name: str, pr_name: str,
                     p) -> None:
    """The last process admits the Workload and runs the Job; then everything the module docstring promises."""
    ns, check = env["ns"], env["check"]

    async def running() -> bool:
        return not (await get(kc, "Job", "j1", ns))["spec"].get("suspend")

    await eventually(running, WAIT, "the Job to run")
    key = f"{ns}/{wl_name}"
    await eventually(lambda: not _unapplied(_records(log_dir, key)), WAIT, "every decision applied")
    p.proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(p.proc.wait(), WAIT) == 0, "\n".join(p.logs[-20:])

    # the Workload as Kueue shows it
    wl = await get(kc, "Workload", wl_name, ns)
    conds = {c["type"]: (c["status"], c["reason"], c["message"]) for c in wl["status"]["conditions"]}
    assert conds == {"QuotaReserved": ("True", "QuotaReserved", f"Quota reserved in ClusterQueue {env['cq']}"),
                     "Admitted": ("True", "Admitted", "The workload is admitted"),
                     # waitForPodsReady is on by default: the Job runs, its pods are not ready (no kubelet here)
                     "PodsReady": ("False", "WaitForStart", "Not all pods are ready or succeeded")}
    assert wl["status"]["admission"]["clusterQueue"] == env["cq"]
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert psa["flavors"] == {"cpu": env["flavor"]} and psa["count"] == 1
    (state,) = wl["status"]["admissionChecks"]
    assert (state["name"], state["state"], state["message"]) == (check, "Ready", "capacity is ready")
    consume = {"autoscaling.x-k8s.io/consume-provisioning-request": pr_name,
               "autoscaling.x-k8s.io/provisioning-class-name": CLASS}
    assert state["podSetUpdates"] == [{"name": "main", "annotations": consume}]

    # one request, attempt 1, and the Job runs with it
    requests = [msgspec.json.decode(r)["metadata"] for r in (await kc.list(PROVISIONING_REQUESTS)).items]
    names = sorted(m["name"] for m in requests if m["namespace"] == ns)
    assert names == [pr_name]
    j = await get(kc, "Job", "j1", ns)
    assert j["spec"]["template"]["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] \
        == pr_name

    # the log: decided once each, all applied, nothing rejected or evicted
    records = _records(log_dir, key)
    kinds = Counter(_decisions(records))
    assert (kinds["QuotaReserved"], kinds["ProvisioningRequestCreated"], kinds["WorkloadAdmitted"]) == (1, 1, 1), kinds
    assert not {"WorkloadEvicted", "ProvisioningRequestDeleted", "QuotaReleased"} & set(kinds), kinds
    (created,) = [r.event for r in records if isinstance(r.event, ev.ProvisioningRequestCreated)]
    assert created.attempt == 1 and created.request.metadata.name == pr_name
    updates = [r.event.state for r in records if isinstance(r.event, ev.AdmissionCheckUpdated)]
    assert updates == ["Ready"]
    assert not _unapplied(records)
    assert not [r for r in records if isinstance(r.event, ev.DecisionRejected)]

    # every stored version: quota kept once reserved, admission kept once admitted, never evicted
    versions = history.of("Workload", wl_name)
    reserved = [_true(v, "QuotaReserved") for v in versions]
    admitted = [_true(v, "Admitted") for v in versions]
    assert True in reserved and False not in reserved[reserved.index(True):]
    assert True in admitted and False not in admitted[admitted.index(True):]
    assert not any(_true(v, "Evicted") for v in versions)
    # the Job: unsuspended once, never suspended again
    suspends = [bool(v["spec"].get("suspend")) for v in history.of("Job", "j1")]
    flips = [b for a, b in zip(suspends, suspends[1:], strict=False) if a != b]
    assert suspends[0] is True and flips == [False], suspends


@pytest.mark.asyncio
async def test_sigkill_before_the_provisioning_request_is_created(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        env = await _setup(kc, secrets.token_hex(3))
        ns, log_dir = env["ns"], tmp_path / "log"
        async with _History(kc, ns) as history:
            crash = {"CRASH_AT": "request-create", "CRASH_NAMESPACE": ns, **NO_ELECTION}
            async with kueue_es_process(kube_apiserver, "p1", log_dir, ns, script="crashing_kube_run.py",
                                        extra_env=crash) as p1:
                j = await create(kc, job(ns, "j1", "user-queue", cpu="1"))
                await _killed(p1)
            wl_name = workload_name("j1", j["metadata"]["uid"])
            pr_name = f"{wl_name}-{env['check']}-1"
            records = _records(log_dir, f"{ns}/{wl_name}")
            assert "ProvisioningRequestCreated" in _unapplied(records)
            assert await _request(kc, pr_name, ns) is None, "killed before the create"
            assert (await get(kc, "Job", "j1", ns))["spec"]["suspend"] is True

            async with kueue_es_process(kube_apiserver, "p2", log_dir, ns, extra_env=NO_ELECTION) as p2:
                await ready(p2, "leader")
                pr = await eventually(lambda: _request(kc, pr_name, ns), WAIT, "the ProvisioningRequest")
                assert pr["metadata"]["ownerReferences"][0]["name"] == wl_name
                # created only once the stored Workload holds its reservation, as Kueue's check controller does
                wl = await get(kc, "Workload", wl_name, ns)
                assert _true(wl, "QuotaReserved") and not _true(wl, "Admitted")
                await _provision(kc, pr_name, ns)
                await _converged(kc, env, history, log_dir, wl_name, pr_name, p2)


@pytest.mark.asyncio
async def test_sigkill_after_the_request_before_admitted_is_written_and_before_the_job_starts(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        env = await _setup(kc, secrets.token_hex(3))
        ns, check, log_dir = env["ns"], env["check"], tmp_path / "log"
        async with _History(kc, ns) as history:
            # first phase done in the cluster (quota reserved, request created); the log misses the request
            crash = {"CRASH_AT": "request-created", "CRASH_NAMESPACE": ns, **NO_ELECTION}
            async with kueue_es_process(kube_apiserver, "p1", log_dir, ns, script="crashing_kube_run.py",
                                        extra_env=crash) as p1:
                j = await create(kc, job(ns, "j1", "user-queue", cpu="1"))
                await _killed(p1)
            wl_name = workload_name("j1", j["metadata"]["uid"])
            key, pr_name = f"{ns}/{wl_name}", f"{wl_name}-{check}-1"
            assert _unapplied(_records(log_dir, key)) == ["ProvisioningRequestCreated"]
            assert await _request(kc, pr_name, ns) is not None
            wl = await get(kc, "Workload", wl_name, ns)
            assert _true(wl, "QuotaReserved") and not _true(wl, "Admitted")
            assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [(check, "Pending")]

            # kueue-es is down; the autoscaler provisions
            await _provision(kc, pr_name, ns)

            # the second phase decided and logged, the process killed before it writes Admitted
            crash = {"CRASH_AT": "admitted-write", "CRASH_NAMESPACE": ns, **NO_ELECTION}
            async with kueue_es_process(kube_apiserver, "p2", log_dir, ns, script="crashing_kube_run.py",
                                        extra_env=crash) as p2:
                await _killed(p2)
            assert "WorkloadAdmitted" in _unapplied(_records(log_dir, key))
            wl = await get(kc, "Workload", wl_name, ns)
            assert _true(wl, "QuotaReserved") and not _true(wl, "Admitted")
            assert (await get(kc, "Job", "j1", ns))["spec"]["suspend"] is True

            # admitted in the cluster, the process killed before it unsuspends the Job
            crash = {"CRASH_AT": "job-start", "CRASH_NAMESPACE": ns, **NO_ELECTION}
            async with kueue_es_process(kube_apiserver, "p3", log_dir, ns, script="crashing_kube_run.py",
                                        extra_env=crash) as p3:
                await _killed(p3)
            assert _true(await get(kc, "Workload", wl_name, ns), "Admitted")
            assert (await get(kc, "Job", "j1", ns))["spec"]["suspend"] is True

            async with kueue_es_process(kube_apiserver, "p4", log_dir, ns, extra_env=NO_ELECTION) as p4:
                await ready(p4, "leader")
                await _converged(kc, env, history, log_dir, wl_name, pr_name, p4)
