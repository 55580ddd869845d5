"""No ProvisioningRequest before the stored reservation, against the real apiserver.

Kueue's provisioning check controller creates a request only for a Workload whose stored status holds quota
(``QuotaReserved=True``, the check Pending). kueue-es decides on its log, where the reservation comes first, and
its status writer and request applier each apply the log at their own pace; so here the status writer is held
back: the log decides the reservation and the request, the cluster sees neither, and no request is created
while the stored Workload has no ``QuotaReserved=True``. Once the writer stores the reservation, the watch
brings it to the log and the applier, woken by it, creates the request: after the reservation, in the apiserver's
own order of writes.

The test waits for the applier to hold the decision rather than watching for a fixed time: the applier takes the
decisions of every workload in log order, one API call at a time, so on a loaded machine with other tests' objects
in the shared apiserver it can reach this one seconds after it is decided. Every assertion about the applier is
about this workload's decision: the other workloads in the apiserver get decisions of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, provisioning_queues, versions

from connectors.k8s.errors import Unavailable
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND, PROVISIONING_REQUESTS, Resource
from connectors.k8s.writer import StatusWriter
from events import schema as ev

pytestmark = pytest.mark.kube
WAIT = 60.0  # generous: two cores shared with other test runs
NO_RESERVATION = "the Workload holds no quota reservation"


def _reserved(wl: dict[str, Any]) -> bool:
    return any(c["type"] == "QuotaReserved" and c["status"] == "True"
               for c in (wl.get("status") or {}).get("conditions") or [])


async def _record(kc, resource: Resource, ns: str, into: list[dict[str, Any]], listening: asyncio.Event) -> None:
    """Every version of ``resource`` in ``ns`` the apiserver stores once ``listening`` is set, as an informer sees
    them: a list or watch the apiserver refuses or cuts for a while (a 429 ``storage is (re)initializing`` for a
    CRD just created, on a loaded machine) is tried again from the last resourceVersion seen, so no version is
    missed (:func:`kubehelp.versions`)."""
    while True:
        try:
            rv = (await kc.list(resource)).metadata.resource_version
            break
        except Unavailable:
            await asyncio.sleep(0.2)
    listening.set()
    async for obj in versions(kc, resource, rv, field_selector=f"metadata.namespace={ns}"):
        into.append(obj)


@pytest.mark.asyncio
async def test_the_request_waits_for_the_stored_reservation(kube_apiserver, tmp_path, monkeypatch) -> None:
    async with await connect(kube_apiserver) as kc:
        check, ns = await provisioning_queues(kc, "provwait", {"cpu": 4})

        release = asyncio.Event()
        patch = StatusWriter._patch

        async def held_patch(self: StatusWriter, obs: Any, *args: Any) -> str:
            if obs.metadata.namespace == ns:
                await release.wait()
            return await patch(self, obs, *args)

        monkeypatch.setattr(StatusWriter, "_patch", held_patch)
        workloads: list[dict[str, Any]] = []
        requests: list[dict[str, Any]] = []
        listening = [asyncio.Event(), asyncio.Event()]
        recorders = [asyncio.create_task(_record(kc, BY_KIND["Workload"], ns, workloads, listening[0])),
                     asyncio.create_task(_record(kc, PROVISIONING_REQUESTS, ns, requests, listening[1]))]
        try:
            await eventually(lambda: all(e.is_set() for e in listening), WAIT, "the recorders listening")
            async with kueue_es(kc, tmp_path / "log") as (connector, journal):
                j = await create(kc, job(ns, "j1", "user-queue", cpu="1"))
                wl_name = workload_name("j1", j["metadata"]["uid"])
                key, pr_name = f"{ns}/{wl_name}", f"{wl_name}-{check}-1"

                def decided() -> int | None:
                    """The decision's offset while it awaits its outcome; -1 once a request exists (too early)."""
                    return next((off for off, d in journal.mirror.request_decisions.items()
                                 if isinstance(d, ev.ProvisioningRequestCreated) and d.key == key),
                                -1 if requests else None)

                def too_early() -> str:
                    return "ProvisioningRequest(s) created before the reservation was stored: " + \
                        ", ".join(r["metadata"]["name"] for r in requests)

                offset = await eventually(decided, WAIT, "the request decided")
                assert not requests, too_early()
                assert journal.mirror.state.workloads[key].reserving, "the log holds the reservation"
                await eventually(lambda: connector.requests.held.get(offset) == NO_RESERVATION or requests, WAIT,
                                 f"the applier to hold the request ({NO_RESERVATION})")
                assert not requests, too_early()
                assert not _reserved(await get(kc, "Workload", wl_name, ns))

                release.set()
                pr = await eventually(lambda: next((r for r in requests if r["metadata"]["name"] == pr_name), None),
                                      WAIT, "the ProvisioningRequest")
                assert pr["metadata"]["ownerReferences"][0]["name"] == wl_name
                await eventually(lambda: key not in journal.mirror.pending, WAIT, "every decision applied")
                assert offset not in connector.requests.held
                assert [r for r in connector.requests.stats.rejections if r[0] == key] == []
        finally:
            release.set()
            for t in recorders:
                t.cancel()
            for t in recorders:
                with contextlib.suppress(asyncio.CancelledError):
                    await t

        # in the apiserver's order of writes (its resourceVersions), the reservation was stored first
        first_reserved = next(int(w["metadata"]["resourceVersion"]) for w in workloads if _reserved(w))
        (added,) = [int(r["metadata"]["resourceVersion"]) for r in requests[:1]]
        assert first_reserved < added, (first_reserved, added)
        stored = next(w for w in workloads if _reserved(w))
        assert [(c["name"], c["state"]) for c in stored["status"]["admissionChecks"]] == [(check, "Pending")]
