"""Restart safety between the two phases of a two-phase admission, with real processes killed by SIGKILL.

The TAS Job of ``test_tas_e2e`` behind a ProvisioningRequest check: the first pass reserves quota and creates the
request; the second (check Ready) places the topology and admits. Three ``kueue-es run --kube`` processes over one
log, each cut short where a restart is most likely to lose or repeat something:

1. killed (SIGKILL) once the first pass is visible in the cluster — quota reserved, request created — while the
   test, as the autoscaler, marks the request Provisioned;
2. the next process replays, relists, sees the request Provisioned, decides the check Ready and kills itself right
   before writing that: it is in the log, the cluster has not seen it, the second pass has not run;
3. the last one writes it and runs the second pass. The Workload is admitted once (one QuotaReserved, one check
   update, one WorkloadAdmitted and one request in the log, attempt 1 only), its Job runs, and every decision about
   it is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get
from test_tas_e2e import WAIT, _job, _process, _setup, _true

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import PROVISIONING_REQUESTS
from events import schema as ev
from events.filelog import FileLog

pytestmark = pytest.mark.kube

NOW = "2026-01-01T00:00:00Z"


def _decisions(log_dir, key: str) -> tuple[list[str], list[int], list[int]]:
    """(types of the decisions about ``key``, their offsets, the decision offsets reported applied)."""
    records = [r for b in FileLog.open(log_dir, readonly=True).scan() for r in b]
    decided = [r for r in records if isinstance(r.event, ev.Decision) and r.event.key == key]
    applied = sorted(r.event.decision for r in records
                     if isinstance(r.event, ev.DecisionApplied) and r.event.key == key)
    return [type(r.event).__name__ for r in decided], [r.offset for r in decided], applied


@pytest.mark.asyncio
async def test_sigkill_between_the_two_phases_admits_once(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        sfx = secrets.token_hex(3)
        env = await _setup(kc, sfx)
        ns, check = env["ns"], env["check"]
        log_dir = tmp_path / "log"

        async def workload() -> dict[str, Any] | None:
            with contextlib.suppress(NotFound):
                return await get(kc, "Workload", wl_name, ns)
            return None

        async def request(name: str) -> dict[str, Any] | None:
            with contextlib.suppress(NotFound):
                return msgspec.json.decode(await kc.get(PROVISIONING_REQUESTS, name, ns))
            return None

        # --- 1: the first pass, then SIGKILL ------------------------------------------------------------------
        async with _process(kube_apiserver, log_dir) as proc:
            job = await create(kc, _job(ns, "train", 2))
            wl_name = workload_name("train", job["metadata"]["uid"])
            key, pr_name = f"{ns}/{wl_name}", f"{wl_name}-{check}-1"

            async def reserved() -> dict[str, Any] | None:
                wl = await workload()
                return wl if wl is not None and _true(wl, "QuotaReserved") else None

            await eventually(reserved, WAIT, "QuotaReserved on the Workload")
            await eventually(lambda: request(pr_name), WAIT, "the ProvisioningRequest")
            proc.kill()
            assert await asyncio.wait_for(proc.wait(), WAIT) == -signal.SIGKILL
        types, _, _ = _decisions(log_dir, key)
        assert types.count("QuotaReserved") == 1 and "WorkloadAdmitted" not in types, types
        assert types.count("ProvisioningRequestCreated") == 1, types

        # --- the autoscaler provisions while kueue-es is down ---------------------------------------------------
        await kc.patch(PROVISIONING_REQUESTS, pr_name, {"status": {"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted",
             "lastTransitionTime": NOW},
            {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "capacity is ready",
             "lastTransitionTime": NOW}]}}, ns, subresource="status")

        # --- 2: the second pass is decided, and the process dies right before writing it -----------------------
        async with _process(kube_apiserver, log_dir, crash_before_write=1, crash_workload=wl_name) as proc:
            assert await asyncio.wait_for(proc.wait(), WAIT) == -signal.SIGKILL
        types, _, _ = _decisions(log_dir, key)
        assert types == ["QuotaReserved", "ProvisioningRequestCreated", "AdmissionCheckUpdated"], types
        wl = await workload()
        assert wl is not None and [c["state"] for c in wl["status"]["admissionChecks"]] == ["Pending"], \
            "killed before the check's Ready state was written"
        assert not _true(wl, "Admitted")
        assert (await get(kc, "Job", "train", ns))["spec"]["suspend"] is True

        # --- 3: the restart writes what the log holds; nothing is decided twice -------------------------------
        async with _process(kube_apiserver, log_dir):
            async def admitted() -> dict[str, Any] | None:
                wl = await workload()
                return wl if wl is not None and _true(wl, "Admitted") else None

            wl = await eventually(admitted, WAIT, "Admitted=True after the restart")
            (psa,) = wl["status"]["admission"]["podSetAssignments"]
            assert psa["delayedTopologyRequest"] == "Ready" and psa["topologyAssignment"]
            (state,) = wl["status"]["admissionChecks"]
            assert state["state"] == "Ready"

            async def running() -> bool:
                return not (await get(kc, "Job", "train", ns))["spec"].get("suspend")

            await eventually(running, WAIT, "the Job to run")

            def all_applied() -> tuple[list[str], list[int], list[int]] | None:
                # the request decision of the killed first process is applied again (found existing, owned by this
                # Workload), possibly after a retry: the CRD was installed just now
                d = _decisions(log_dir, key)
                return d if set(d[1]) <= set(d[2]) else None

            types, offsets, applied = await eventually(all_applied, WAIT, "every decision reported applied")
        assert types.count("QuotaReserved") == 1 and types.count("WorkloadAdmitted") == 1, types
        assert types.count("ProvisioningRequestCreated") == 1 and types.count("AdmissionCheckUpdated") == 1, types
        assert await request(f"{wl_name}-{check}-2") is None, "no second attempt"
        assert sorted(set(applied)) == applied, "each decision applied once"
