"""The status writer against the real apiserver: optimistic concurrency, re-checks, outcomes in the log.

The writer is driven step by step (``sync``) over a mirror the watcher filled, with decisions the real
scheduler made on it, while the test changes the Workload behind its back.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from kubehelp import KUEUE, connect, create, get, queues

from connectors.k8s import crds
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from connectors.k8s.writer import StatusWriter
from events import schema as ev
from events.log import MemoryLog
from kueue_es.scheduler import decide

pytestmark = pytest.mark.kube
WORKLOADS = BY_KIND["Workload"]
KINDS = ("Namespace", "ResourceFlavor", "AdmissionCheck", "ClusterQueue", "LocalQueue", "Workload")


def _workload(ns: str, name: str, cpu: str = "1") -> dict:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "user-queue", "podSets": [{"count": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


async def _sync_mirror(kc, journal: LocalJournal) -> None:
    """Bring the mirror up to date with the cluster: one watcher run until synced plus a moment to settle."""
    watcher = Watcher(kc, journal.mirror, journal.append, kinds=KINDS, timeout_seconds=30)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_synced(), 30)
        await asyncio.sleep(0.3)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _timed_out(kc, ns: str, name: str, stamp: str, *, requeue_at: str) -> None:
    """Show ``name`` as Kueue's workload controller leaves a Workload evicted by a PodsReady timeout at
    ``stamp``, waiting out its backoff until ``requeue_at`` (count 1)."""
    timed_out = f"Exceeded the PodsReady timeout {ns}/{name}"
    shown = (("QuotaReserved", "False", "Pending"), ("Evicted", "True", "PodsReadyTimeout"),
             ("Requeued", "False", "PodsReadyTimeout"))
    conditions = [{"type": t, "status": st, "reason": r, "message": timed_out, "lastTransitionTime": stamp}
                  for t, st, r in shown]
    await kc.patch(WORKLOADS, name, {"status": {"conditions": conditions, "requeueState": {
        "count": 1, "requeueAt": requeue_at}}}, ns, subresource="status")


async def _decide(journal: LocalJournal) -> list[ev.Record]:
    out = []
    while batch := decide(journal.mirror.state):
        offsets = await journal.append(batch)
        out += [ev.Record(o, e) for o, e in zip(offsets, batch, strict=True)]
    return out


async def _outcomes(log: MemoryLog, key: str) -> list[tuple[str, int, str]]:
    out = []
    async for r in log.read():
        e = r.event
        if isinstance(e, ev.DecisionApplied) and e.key == key:
            out.append(("applied", e.decision, ""))
        elif isinstance(e, ev.DecisionRejected) and e.key == key:
            out.append(("rejected", e.decision, e.reason))
    return out


@pytest.mark.asyncio
async def test_writes_with_preconditions_rechecks_on_conflict_and_rejects_what_no_longer_holds(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, cq, _ = await queues(kc, "writer", {"cpu": 10})
        for name in ("a", "b", "c"):
            await create(kc, _workload(ns, name))
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        await _sync_mirror(kc, journal)
        decisions = await _decide(journal)
        by_key: dict[str, list[int]] = {}
        for r in decisions:
            by_key.setdefault(r.event.key, []).append(r.offset)
        a, b, c = f"{ns}/a", f"{ns}/b", f"{ns}/c"
        assert len(by_key[a]) == 2  # QuotaReserved + WorkloadAdmitted
        writer = StatusWriter(kc, journal)

        # a: someone else wrote meanwhile (a label): 409, re-read, the decision holds, write again
        await kc.patch(WORKLOADS, "a", {"metadata": {"labels": {"team": "x"}}}, ns)
        await writer.sync(a)
        assert writer.stats.conflicts == 1 and writer.stats.writes == 1
        wl = await get(kc, "Workload", "a", ns)
        assert wl["status"]["admission"]["clusterQueue"] == cq
        assert {c_["type"]: c_["status"] for c_ in wl["status"]["conditions"]} == {
            "QuotaReserved": "True", "Admitted": "True"}
        assert wl["metadata"]["generation"] == 1  # Kueue writes it on its conditions
        assert {c_["type"]: c_.get("observedGeneration") for c_ in wl["status"]["conditions"]} == {
            "QuotaReserved": 1, "Admitted": 1}
        assert wl["metadata"]["labels"] == {"team": "x"}
        assert await _outcomes(log, a) == [("applied", off, "") for off in by_key[a]]
        assert a not in journal.mirror.pending

        # b: deactivated meanwhile: the admission no longer holds
        await kc.patch(WORKLOADS, "b", {"spec": {"active": False}}, ns)
        await writer.sync(b)
        assert await _outcomes(log, b) == [("rejected", off, "SpecChanged") for off in by_key[b]]
        assert "status" not in await get(kc, "Workload", "b", ns) or not (
            await get(kc, "Workload", "b", ns))["status"].get("admission")
        await writer.sync(b)  # blocked until the watch shows the newer version: no second attempt
        assert len(await _outcomes(log, b)) == len(by_key[b])

        # c: deleted meanwhile
        await kc.delete(WORKLOADS, "c", ns)
        await writer.sync(c)
        assert await _outcomes(log, c) == [("rejected", off, "NotFound") for off in by_key[c]]

        # idempotent: a restarted writer (nothing written since, its mirror still shows the old status)
        # finds the status already there and writes nothing
        writes = writer.stats.writes
        again = StatusWriter(kc, journal)
        journal.mirror.pending[a] = {by_key[a][-1]: "WorkloadAdmitted"}  # as if the outcome never made it
        await again.sync(a)
        assert again.stats.writes == 0 and writer.stats.writes == writes
        assert (await _outcomes(log, a))[-1] == ("applied", by_key[a][-1], "")

        # the watch brings our own write back; nothing is dirty then
        await _sync_mirror(kc, journal)
        obs = journal.mirror.workloads[a]
        assert msgspec.to_builtins(obs.status)["admission"]["clusterQueue"] == cq
        before = again.stats.writes
        await again.sync(a)
        assert again.stats.writes == before


AUDITED = {"type": "example.com/Audited", "status": "True", "reason": "Audited", "message": "by the auditor",
           "lastTransitionTime": "2026-01-01T00:00:00Z"}


async def _add_condition(kc, ns: str, name: str, condition: dict) -> None:
    """Another controller adds a condition through the status subresource (a merge patch: the whole list)."""
    shown = (await get(kc, "Workload", name, ns)).get("status", {}).get("conditions", [])
    await kc.patch(WORKLOADS, name, {"status": {"conditions": [*shown, condition]}}, ns, subresource="status")


async def _conditions(kc, ns: str, name: str) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (await get(kc, "Workload", name, ns))["status"]["conditions"]}


@pytest.mark.asyncio
async def test_a_condition_another_controller_added_survives_admission_and_eviction(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, _, _ = await queues(kc, "writer-foreign", {"cpu": 10})
        for name in ("a", "b"):
            await create(kc, _workload(ns, name))
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        await _sync_mirror(kc, journal)  # kueue-es first sees them with no status
        await _add_condition(kc, ns, "a", AUDITED)
        await _sync_mirror(kc, journal)  # a: the watch shows the condition
        await _add_condition(kc, ns, "b", AUDITED)  # b: added behind the writer's back: its write conflicts
        await _decide(journal)
        writer = StatusWriter(kc, journal)
        await writer.sync(f"{ns}/a")
        await writer.sync(f"{ns}/b")
        assert writer.stats.conflicts == 1
        for name in ("a", "b"):
            assert await _conditions(kc, ns, name) == {
                "example.com/Audited": "True", "QuotaReserved": "True", "Admitted": "True"}, name

        # a is deactivated: kueue-es evicts it, the auditor's condition stays
        await kc.patch(WORKLOADS, "a", {"spec": {"active": False}}, ns)
        await _sync_mirror(kc, journal)
        assert [type(r.event).__name__ for r in await _decide(journal) if r.event.key == f"{ns}/a"]
        await writer.sync(f"{ns}/a")
        shown = await _conditions(kc, ns, "a")
        assert shown["Evicted"] == "True" and shown["example.com/Audited"] == "True", shown


@pytest.mark.asyncio
async def test_an_external_check_controllers_state_is_folded_and_never_set_back(kube_apiserver) -> None:
    """A check whose controller kueue-es does not run: the state its controller sets on the Workload is what
    kueue-es folds (its Ready admits) and what kueue-es's next status write leaves there."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        check = "ext-" + secrets.token_hex(3)
        await create(kc, {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": check},
                          "spec": {"controllerName": "example.com/external"}})
        await kc.patch(BY_KIND["AdmissionCheck"], check, {"status": {"conditions": [{
            "type": "Active", "status": "True", "reason": "Active", "message": "ready to check",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, subresource="status")
        ns, _, _, _ = await queues(kc, "writer-ext", {"cpu": 10},
                                   admissionChecksStrategy={"admissionChecks": [{"name": check}]})
        await create(kc, _workload(ns, "a"))
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        await _sync_mirror(kc, journal)
        key = f"{ns}/a"
        assert [type(r.event).__name__ for r in await _decide(journal) if r.event.key == key] == ["QuotaReserved"]
        writer = StatusWriter(kc, journal)
        await writer.sync(key)
        (listed,) = (await get(kc, "Workload", "a", ns))["status"]["admissionChecks"]
        assert listed["state"] == "Pending"

        # the check's controller says Ready, stamped with its clock
        ready = {**listed, "state": "Ready", "message": "capacity found",
                 "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        await kc.patch(WORKLOADS, "a", {"status": {"admissionChecks": [ready]}}, ns, subresource="status")
        await _sync_mirror(kc, journal)
        assert journal.mirror.state.workloads[key].check_states[check].state == "Ready"
        assert [type(r.event).__name__ for r in await _decide(journal) if r.event.key == key] == ["WorkloadAdmitted"]
        await writer.sync(f"{ns}/a")
        wl = await get(kc, "Workload", "a", ns)
        assert {c["type"]: c["status"] for c in wl["status"]["conditions"]}["Admitted"] == "True"
        (shown,) = wl["status"]["admissionChecks"]
        assert (shown["state"], shown["message"]) == ("Ready", "capacity found")


@pytest.mark.asyncio
async def test_a_workload_rewritten_with_other_pod_sets_gets_no_admission_of_the_old_ones(kube_apiserver) -> None:
    """A job integration rewrote the Workload's pod sets while it held no quota, before the reservation's write:
    the retry rejects it (an admission naming the old pod sets would be wrong), the watch brings the rewrite, the
    fold forgets the reservation, and the scheduler reserves anew for the new pod sets."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, cq, _ = await queues(kc, "rewritten", {"cpu": 10})
        await create(kc, _workload(ns, "d"))
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        await _sync_mirror(kc, journal)
        d = f"{ns}/d"
        first = [r.offset for r in await _decide(journal) if r.event.key == d]
        writer = StatusWriter(kc, journal)
        await kc.patch(WORKLOADS, "d", {"spec": {"podSets": [{**_workload(ns, "d")["spec"]["podSets"][0],
                                                               "count": 2}]}}, ns)
        await writer.sync(d)
        assert await _outcomes(log, d) == [("rejected", off, "SpecChanged") for off in first]
        assert not (await get(kc, "Workload", "d", ns)).get("status", {}).get("admission")

        await _sync_mirror(kc, journal)
        assert not journal.mirror.state.workloads[d].reserving, "the reservation never written is forgotten"
        again = [r for r in await _decide(journal) if r.event.key == d]
        assert [type(r.event).__name__ for r in again] == ["QuotaReserved", "WorkloadAdmitted"]
        await writer.sync(d)
        admission = (await get(kc, "Workload", "d", ns))["status"]["admission"]
        assert admission["clusterQueue"] == cq and admission["podSetAssignments"][0]["count"] == 2
        assert (await _outcomes(log, d))[len(first):] == [("applied", r.offset, "") for r in again]


@pytest.mark.asyncio
async def test_a_workload_deactivated_in_its_backoff_loses_its_requeue_state(kube_apiserver) -> None:
    """A Workload evicted by a PodsReady timeout, waiting out its backoff, then deactivated: Kueue's workload
    controller does not evict it again but clears ``status.requeueState`` (a merge patch to null, Kueue
    #7734). kueue-es decides ``RequeueStateCleared`` and its status write leaves no requeueState on the
    apiserver, the eviction's conditions as they were."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, _, _ = await queues(kc, "writer-backoff", {"cpu": 10})
        await create(kc, _workload(ns, "a"))
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        later = (now + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")  # far beyond this test
        await _timed_out(kc, ns, "a", stamp, requeue_at=later)
        await kc.patch(WORKLOADS, "a", {"spec": {"active": False}}, ns)
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        await _sync_mirror(kc, journal)
        key = f"{ns}/a"
        decided = [r for r in await _decide(journal) if r.event.key == key]
        assert [type(r.event).__name__ for r in decided] == ["RequeueStateCleared", "WorkloadPending"]
        writer = StatusWriter(kc, journal)
        await writer.sync(key)
        status = (await get(kc, "Workload", "a", ns))["status"]
        assert "requeueState" not in status, status
        shown = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert shown["Evicted"] == ("True", "PodsReadyTimeout") and shown["Requeued"] == (
            "False", "PodsReadyTimeout")
        assert shown["QuotaReserved"] == ("False", "Deactivated")
        assert await _outcomes(log, key) == [("applied", r.offset, "") for r in decided]


@pytest.mark.asyncio
async def test_a_finished_backoff_leaves_no_requeue_at_on_the_apiserver(kube_apiserver) -> None:
    """A Workload evicted by a PodsReady timeout whose backoff time has passed: Kueue's workload controller
    writes Requeued=True BackoffFinished and removes ``requeueAt``, keeping the count. The writer's merge
    patch must name the dropped key (null): a nested map is merged key by key, so sending only
    ``{"count": 1}`` left the old time on the stored Workload."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns, _, _, _ = await queues(kc, "writer-backoff-done", {"cpu": 10})
        await create(kc, _workload(ns, "a"))
        now = datetime.now(UTC)
        stamp = (now - timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")  # evicted and backoff over
        await _timed_out(kc, ns, "a", stamp, requeue_at=stamp)
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        await _sync_mirror(kc, journal)
        key = f"{ns}/a"
        decided = [r for r in await _decide(journal) if r.event.key == key]
        assert type(decided[0].event).__name__ == "WorkloadRequeued", decided
        writer = StatusWriter(kc, journal)
        await writer.sync(key)
        status = (await get(kc, "Workload", "a", ns))["status"]
        assert status["requeueState"] == {"count": 1}, status
        shown = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert shown["Requeued"] == ("True", "BackoffFinished")
