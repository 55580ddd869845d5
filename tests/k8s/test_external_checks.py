"""An admission check whose controller kueue-es does not run: its controller sets its state on the Workload, the
fold takes it from the watched Workload (not from where kueue-es last wrote it), and the status writer never sets
it back from a log that has not seen it yet. An older state (a Workload read before kueue-es's reset on eviction
was written) is not taken back."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import Conflict
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.timefmt import format_time, parse_time
from kueue_es.scheduler import decide

T0 = parse_time("2026-01-01T00:00:00Z")
WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="10"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1, template=o.PodTemplateSpec(
                    spec=o.PodSpec(containers=[o.Container(name="c", image="i", resources=o.ResourceRequirements(
                        requests={"cpu": "1"}))])))]))


def _world() -> list[o.KObject]:
    kinds: list[tuple[type, dict[str, Any]]] = [
        (o.Namespace, {"metadata": {"name": "ns", "uid": "ns-uid"}}),
        (o.ResourceFlavor, {"metadata": {"name": "f", "uid": "f-uid"}}),
        (o.AdmissionCheck, {"metadata": {"name": "ext", "uid": "ac-uid"},
                            "spec": {"controllerName": "example.com/external"},
                            "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
                                                       "message": "", "lastTransitionTime": format_time(T0)}]}}),
        (o.ClusterQueue, {"metadata": {"name": "cq", "uid": "cq-uid"},
                          "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "ext"}]}, "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                                   "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}),
        (o.LocalQueue, {"metadata": {"name": "lq", "namespace": "ns", "uid": "lq-uid"},
                        "spec": {"clusterQueue": "cq"}}),
    ]
    return [msgspec.convert(doc, kind, from_attributes=True) for kind, doc in kinds]


class Apiserver:
    """Takes every status patch; with ``fresh``, a patch on another resourceVersion conflicts and a re-read shows
    ``fresh``."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.fresh: o.Workload | None = None

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        fresh = self.fresh
        if fresh is not None and body["metadata"]["resourceVersion"] != fresh.metadata.resource_version:
            raise Conflict("the object has been modified", 409)
        return msgspec.json.encode({"metadata": {"resourceVersion": str(100 + len(self.patches))}})

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.fresh)


def _shown(rv: str, status: dict[str, Any]) -> o.Workload:
    return msgspec.structs.replace(WL, metadata=msgspec.structs.replace(WL.metadata, resource_version=rv),
                                   status=msgspec.convert(status, o.WorkloadStatus, from_attributes=True))


def _with_check(status: dict[str, Any], **state: Any) -> dict[str, Any]:
    (check,) = status["admissionChecks"]
    return {**status, "admissionChecks": [{**check, **state}]}


async def _reserved() -> tuple[LocalJournal, Apiserver, StatusWriter, dict[str, Any]]:
    """The workload holds quota, its check listed Pending and written (the write reported, not watched: the
    fold knows it from the writer's ``DecisionApplied``); the status as written."""
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=T0, key=obj.key, uid=obj.metadata.uid, obj=obj)
                          for obj in [*_world(), WL]])
    await journal.append(decide(journal.mirror.state, now=T0 + 1000))
    api = Apiserver()
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    (body,) = api.patches
    assert [c["state"] for c in body["status"]["admissionChecks"]] == ["Pending"]
    return journal, api, writer, body["status"]


async def _watch(journal: LocalJournal, time: int, shown: o.Workload) -> None:
    await journal.append([ev.ObjectUpserted(time=time, key=WL.key, uid="wl-uid", obj=shown)])


def _tags(batch: list[ev.AnyEvent]) -> list[str]:
    return [type(e).__name__ for e in batch]


@pytest.mark.asyncio
async def test_the_external_controllers_ready_is_folded_and_admits_the_workload() -> None:
    journal, api, writer, written = await _reserved()
    ready = _with_check(written, state="Ready", message="capacity found", lastTransitionTime=format_time(T0 + 5000))
    await journal.append([ev.ObjectUpserted(time=T0 + 6000, key=WL.key, uid="wl-uid", obj=_shown("200", ready))])
    assert journal.mirror.state.workloads[WL.key].check_states["ext"].state == "Ready"
    batch = decide(journal.mirror.state, now=T0 + 7000)
    assert "WorkloadAdmitted" in _tags(batch)
    await journal.append(batch)
    await writer.sync(WL.key)
    admitted = api.patches[-1]["status"]
    assert "admissionChecks" not in admitted, "the check's state is written as its controller set it: unchanged"


@pytest.mark.asyncio
async def test_a_write_after_the_controllers_word_does_not_set_it_back() -> None:
    """The controller sets Ready behind the writer's back while kueue-es lists a second check the ClusterQueue
    gained: the retry after the conflict writes the new check and leaves the first as its controller set it."""
    journal, api, writer, written = await _reserved()
    api.fresh = _shown("300", _with_check(written, state="Ready", message="capacity found",
                                          lastTransitionTime=format_time(T0 + 5000)))
    ext2 = msgspec.structs.replace(_world()[2], metadata=o.ObjectMeta(name="ext2", uid="ac2-uid"))
    cq = _world()[3]
    strategy = msgspec.convert({"admissionChecks": [{"name": "ext"}, {"name": "ext2"}]},
                               type(cq.spec.admission_checks_strategy))
    cq = msgspec.structs.replace(cq, spec=msgspec.structs.replace(cq.spec, admission_checks_strategy=strategy))
    await journal.append([ev.ObjectUpserted(time=T0 + 6000, key=obj.key, uid=obj.metadata.uid, obj=obj)
                          for obj in (ext2, cq)])
    assert list(journal.mirror.state.workloads[WL.key].check_states) == ["ext", "ext2"]
    before = len(api.patches)
    await writer.sync(WL.key)
    first, retried = api.patches[before:]
    assert [c["state"] for c in first["status"]["admissionChecks"]] == ["Pending", "Pending"]
    assert retried["metadata"]["resourceVersion"] == "300"
    assert [(c["name"], c["state"]) for c in retried["status"]["admissionChecks"]] == [
        ("ext", "Ready"), ("ext2", "Pending")]


@pytest.mark.asyncio
async def test_a_workload_read_before_the_reset_on_eviction_does_not_bring_ready_back() -> None:
    journal, _, writer, written = await _reserved()
    ready = _with_check(written, state="Ready", message="capacity found", lastTransitionTime=format_time(T0 + 5000))
    await journal.append([ev.ObjectUpserted(time=T0 + 6000, key=WL.key, uid="wl-uid", obj=_shown("200", ready))])
    await journal.append([ev.WorkloadEvicted(time=T0 + 9000, key=WL.key, uid="wl-uid", cycle=2, input=0,
                                             reason="Preempted", message="preempted by the test")])
    reset = journal.mirror.state.workloads[WL.key].check_states["ext"]
    assert reset.state == "Pending" and reset.last_transition_time == format_time(T0 + 9000)
    # the watch shows the Workload as it was before the reset was written: the older Ready is not taken back
    stale = _with_check(ready, message="capacity found again")
    await journal.append([ev.ObjectUpserted(time=T0 + 9500, key=WL.key, uid="wl-uid", obj=_shown("201", stale))])
    assert journal.mirror.state.workloads[WL.key].check_states["ext"] == reset


@pytest.mark.asyncio
async def test_a_retry_evicted_in_the_second_it_was_set_is_reset_and_written_pending() -> None:
    """Kueue evicts on a check's Retry and resets it to Pending; the reset is stamped in the same second as the
    Retry (the eviction answers it at once). The Retry the watch still shows is the one the reset answered: the
    fold keeps Pending and the writer writes it, so the check's controller sees the reset."""
    journal, api, writer, written = await _reserved()
    retry = _with_check(written, state="Retry", message="try later", lastTransitionTime=format_time(T0 + 5000))
    await journal.append([ev.ObjectUpserted(time=T0 + 5200, key=WL.key, uid="wl-uid", obj=_shown("200", retry))])
    batch = decide(journal.mirror.state, now=T0 + 5400)
    assert "WorkloadEvicted" in _tags(batch)
    await journal.append(batch)
    reset = journal.mirror.state.workloads[WL.key].check_states["ext"]
    assert (reset.state, reset.retry_count) == ("Pending", 1)
    await journal.append([ev.ObjectUpserted(time=T0 + 5600, key=WL.key, uid="wl-uid", obj=_shown("201", retry))])
    assert journal.mirror.state.workloads[WL.key].check_states["ext"] == reset, "the Retry answered is not taken back"
    await writer.sync(WL.key)
    (check,) = api.patches[-1]["status"]["admissionChecks"]
    assert (check["state"], check["retryCount"]) == ("Pending", 1)


def _cluster_queue(*checks: str) -> o.ClusterQueue:
    cq = _world()[3]
    strategy = msgspec.convert({"admissionChecks": [{"name": c} for c in checks]},
                               type(cq.spec.admission_checks_strategy))
    return msgspec.structs.replace(cq, spec=msgspec.structs.replace(cq.spec, admission_checks_strategy=strategy))


@pytest.mark.asyncio
async def test_a_check_listed_anew_in_the_second_its_controller_set_it_is_not_set_back_by_an_older_read() -> None:
    """The ClusterQueue drops the check and lists it again in the second its controller set Ready: listed anew,
    Pending, stamped with that very second. A Workload read before the Pending was written still shows the Ready:
    seconds cannot tell the two apart, the order the watch shows a Workload's versions in can. The Ready is not
    taken back, and the writer writes the Pending; once the watch has shown it, the controller's Ready of that same
    second is its later word, and is taken."""
    journal, api, writer, written = await _reserved()
    second = format_time(journal.mirror.state.time)  # the log's time, which the listing is stamped with
    ready = _with_check(written, state="Ready", message="capacity found", lastTransitionTime=second)
    await _watch(journal, T0 + 5100, _shown("200", ready))
    assert journal.mirror.state.workloads[WL.key].check_states["ext"].state == "Ready"
    await journal.append([ev.ObjectUpserted(time=T0 + t, key=cq.key, uid=cq.metadata.uid, obj=cq)
                          for t, cq in ((5200, _cluster_queue()), (5400, _cluster_queue("ext")))])
    listed = journal.mirror.state.workloads[WL.key].check_states["ext"]
    assert (listed.state, listed.last_transition_time) == ("Pending", second)
    await _watch(journal, T0 + 5500, _shown("201", ready))  # read before the listing was written
    assert journal.mirror.state.workloads[WL.key].check_states["ext"] == listed
    await writer.sync(WL.key)
    (check,) = api.patches[-1]["status"]["admissionChecks"]
    assert (check["state"], check["lastTransitionTime"]) == ("Pending", second)
    await _watch(journal, T0 + 5600, _shown("202", {**ready, **api.patches[-1]["status"]}))
    await _watch(journal, T0 + 5800, _shown("203", ready))  # its controller's answer, in the same second
    assert journal.mirror.state.workloads[WL.key].check_states["ext"].state == "Ready"


@pytest.mark.asyncio
async def test_a_state_set_after_the_writers_own_write_is_kept_before_the_watch_shows_that_write() -> None:
    """The writer wrote a check listed anew; its controller answered Ready before the watch showed that write. The
    next write conflicts: the Ready, set after the log's word was written (this writer wrote it), is kept."""
    journal, api, writer, written = await _reserved()
    ext2 = msgspec.structs.replace(_world()[2], metadata=o.ObjectMeta(name="ext2", uid="ac2-uid"))
    ext3 = msgspec.structs.replace(_world()[2], metadata=o.ObjectMeta(name="ext3", uid="ac3-uid"))
    cq = _cluster_queue("ext", "ext2")
    await journal.append([ev.ObjectUpserted(time=T0 + 3000, key=obj.key, uid=obj.metadata.uid, obj=obj)
                          for obj in (ext2, ext3, cq)])
    await writer.sync(WL.key)
    wrote = api.patches[-1]["status"]
    assert [c["state"] for c in wrote["admissionChecks"]] == ["Pending", "Pending"]
    answered = {**written, "admissionChecks": [wrote["admissionChecks"][0], {
        **wrote["admissionChecks"][1], "state": "Ready", "message": "capacity found"}]}
    api.fresh = _shown("300", answered)
    cq = _cluster_queue("ext", "ext2", "ext3")
    await journal.append([ev.ObjectUpserted(time=T0 + 4000, key=cq.key, uid=cq.metadata.uid, obj=cq)])
    await writer.sync(WL.key)
    assert [(c["name"], c["state"]) for c in api.patches[-1]["status"]["admissionChecks"]] == [
        ("ext", "Pending"), ("ext2", "Ready"), ("ext3", "Pending")]


@pytest.mark.asyncio
async def test_a_check_listed_anew_as_the_workload_already_shows_it_takes_its_controllers_later_word() -> None:
    """The ClusterQueue drops the check and lists it again within the second it was listed in: listed anew,
    Pending, exactly as the Workload already shows it. There is nothing to write, so no write reports where it is
    written; the Workload read shows it, so what a later read shows is its controller's later word: its Ready is
    taken (and admits), not written back to Pending."""
    journal, api, writer, written = await _reserved()
    written = _with_check(written, lastTransitionTime=format_time(journal.mirror.state.time))  # listed this second
    await _watch(journal, T0 + 1100, _shown("200", written))
    await journal.append([ev.ObjectUpserted(time=T0 + t, key=cq.key, uid=cq.metadata.uid, obj=cq)
                          for t, cq in ((1200, _cluster_queue()), (1400, _cluster_queue("ext")))])
    listed = journal.mirror.state.workloads[WL.key].check_states["ext"]
    assert {**msgspec.to_builtins(listed), "name": "ext"} == written["admissionChecks"][0]
    before = len(api.patches)
    await writer.sync(WL.key)
    assert len(api.patches) == before, "the Workload shows the check as listed: nothing to write"
    ready = _with_check(written, state="Ready", message="capacity found", lastTransitionTime=format_time(T0 + 3000))
    await _watch(journal, T0 + 3100, _shown("300", ready))
    assert journal.mirror.state.workloads[WL.key].check_states["ext"].state == "Ready"
    await writer.sync(WL.key)
    assert all("admissionChecks" not in p["status"] for p in api.patches[before:]), "the Ready is not set back"
    assert "WorkloadAdmitted" in _tags(decide(journal.mirror.state, now=T0 + 3200))
