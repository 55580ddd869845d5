"""The status writer sets MultiKueue's ``status.clusterName`` only over a Workload that shows the worker among its
``status.nominatedClusterNames``: Kueue's Workload webhook refuses a clusterName the old object did not nominate
(Kueue #7278), and Kueue never meets that rule (its dispatcher's nominations are stored before any copy exists).
A writer that lags the log (a restart after both the nomination and the assignment) writes the nomination first.
A status the apiserver still refuses ends in ``DecisionRejected`` with its message, as a 422 does, not in a retry
of the same write forever."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import Conflict, Forbidden, from_response
from connectors.k8s.journal import LocalJournal
from connectors.k8s.json_patch import merge_patched
from connectors.k8s.mirror import Mirror
from connectors.k8s.validating import refusal
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

CONTAINER = o.Container(name="c", image="busybox", resources=o.ResourceRequirements(requests={"cpu": "1"}))
WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1, template=o.PodTemplateSpec(
                    spec=o.PodSpec(containers=[CONTAINER])))]))
ADMISSION = o.Admission(cluster_queue="cq", pod_set_assignments=[
    o.PodSetAssignment(name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "1"}, count=1)])
DENIED = 'admission webhook "vworkload.kb.io" denied the request: '
NOT_NOMINATED = ('Workload ns/wl: field `status.clusterName`: Invalid value: "worker2": when setting clusterName it '
                 "must be one of the nominatedClusterNames")


class Apiserver:
    """One Workload behind the status subresource, as the apiserver keeps it: a merge patch conditioned on uid and
    resourceVersion, then kueue-es's own Workload webhook (:func:`connectors.k8s.validating.refusal`, registered),
    whose refusal comes back as the apiserver words a denying webhook's (403)."""

    def __init__(self, shown: o.Workload) -> None:
        self.doc: dict[str, Any] = msgspec.to_builtins(shown)
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        assert subresource == "status"
        self.patches.append(copy.deepcopy(body))
        meta = self.doc["metadata"]
        if body["metadata"] != {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}:
            raise Conflict("the object has been modified", 409)
        new = merge_patched(self.doc, {"status": body["status"]})
        problem = refusal("Workload", "UPDATE", copy.deepcopy(new), copy.deepcopy(self.doc), {})
        if problem is not None:
            status = {"code": 403, "reason": "Forbidden", "message": DENIED + problem}
            raise from_response(403, msgspec.json.encode(status), f"PATCH .../workloads/{name}/status")
        new["metadata"]["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self.doc = new
        return msgspec.json.encode(new)

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.doc)

    @property
    def status(self) -> dict[str, Any]:
        return self.doc.get("status") or {}


@pytest.mark.asyncio
async def test_the_fake_refuses_a_cluster_name_not_nominated_as_the_webhook_does() -> None:
    api = Apiserver(WL)
    with pytest.raises(Forbidden) as refused:
        await api.patch(None, "wl", {"metadata": {"uid": "wl-uid", "resourceVersion": "1"},
                                     "status": {"clusterName": "worker2"}}, "ns", "status")
    assert str(refused.value).endswith(DENIED + NOT_NOMINATED)


async def _assigned(shown: o.Workload, *nominations: list[str], cluster: str = "worker2") -> LocalJournal:
    """A log holding ``shown`` (what the apiserver shows), its quota reservation, ``nominations`` (one
    ``ClustersNominated`` each) and the copy on ``cluster`` admitted first — none of it written yet."""
    journal = LocalJournal(MemoryLog(), Mirror())
    base = {"key": WL.key, "uid": "wl-uid", "input": 0}
    await journal.append([ev.ObjectUpserted(time=1, obj=shown, key=WL.key, uid="wl-uid"),
                          ev.QuotaReserved(time=2, cycle=1, admission=ADMISSION, **base),
                          *(ev.ClustersNominated(time=3, cycle=2 + i, clusters=n, **base)
                            for i, n in enumerate(nominations)),
                          ev.WorkerClusterAssigned(time=4, cycle=9, cluster=cluster, **base)])
    return journal


async def _outcomes(journal: LocalJournal) -> list[tuple[str, str]]:
    return [(type(r.event).__name__, getattr(r.event, "message", "")) async for r in journal.log.read()
            if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]


@pytest.mark.asyncio
async def test_a_writer_behind_the_log_writes_the_nomination_before_the_cluster_name() -> None:
    """Nominated and assigned before the writer wrote either: the nomination goes first, alone (as Kueue's
    dispatcher writes it), then the rest with clusterName set and the nominations cleared."""
    journal = await _assigned(WL, ["worker1", "worker2"])
    api = Apiserver(WL)
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    first, second = api.patches
    assert first["status"] == {"nominatedClusterNames": ["worker2"]}
    assert second["metadata"]["resourceVersion"] == "2", "the second write stands on the first"
    assert second["status"]["clusterName"] == "worker2" and second["status"]["nominatedClusterNames"] is None
    assert api.status["clusterName"] == "worker2" and "nominatedClusterNames" not in api.status
    assert api.status["admission"]["clusterQueue"] == "cq"
    assert [kind for kind, _ in await _outcomes(journal)] == ["DecisionApplied"] * 3
    await writer.sync(WL.key)
    assert len(api.patches) == 2, "nothing left to write"


@pytest.mark.asyncio
async def test_a_worker_missing_from_the_nominations_shown_is_added_to_them() -> None:
    """The Workload shows an earlier round of nominations (the incremental dispatcher's, or an external one's)
    without the worker assigned: the worker joins them, those shown kept."""
    shown = msgspec.structs.replace(WL, status=o.WorkloadStatus(nominated_cluster_names=["worker1"]))
    journal = await _assigned(shown, ["worker1"], ["worker1", "worker2"])
    api = Apiserver(shown)
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    assert [p["status"] for p in api.patches][0] == {"nominatedClusterNames": ["worker1", "worker2"]}
    assert api.status["clusterName"] == "worker2"


@pytest.mark.asyncio
async def test_a_workload_showing_the_nomination_gets_one_write() -> None:
    """The contrast: the nomination on the Workload already (the writer kept up), so clusterName goes at once."""
    shown = msgspec.structs.replace(WL, status=o.WorkloadStatus(nominated_cluster_names=["worker1", "worker2"]))
    journal = await _assigned(shown, ["worker1", "worker2"])
    api = Apiserver(shown)
    await StatusWriter(api, journal).sync(WL.key)  # type: ignore[arg-type]
    (only,) = api.patches
    assert only["status"]["clusterName"] == "worker2" and only["status"]["nominatedClusterNames"] is None


class RefusesEveryClusterName(Apiserver):
    """A webhook stricter than Kueue's (another admission policy): no clusterName at all."""

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        if "clusterName" in body["status"]:
            self.patches.append(copy.deepcopy(body))
            status = {"code": 403, "reason": "Forbidden", "message": DENIED + "no MultiKueue here"}
            raise from_response(403, msgspec.json.encode(status), f"PATCH .../workloads/{name}/status")
        return await super().patch(resource, name, body, namespace, subresource)


@pytest.mark.asyncio
async def test_a_status_a_webhook_refuses_is_rejected_with_its_message_not_retried() -> None:
    """A 403 from a denying webhook is the status refused, as a 422 is: the decisions end in DecisionRejected with
    the apiserver's words, and the same write is not tried again until the watch shows a newer Workload."""
    shown = msgspec.structs.replace(WL, status=o.WorkloadStatus(nominated_cluster_names=["worker2"]))
    journal = await _assigned(shown, ["worker2"])
    api = RefusesEveryClusterName(shown)
    writer = StatusWriter(api, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)
    outcomes = await _outcomes(journal)
    assert {kind for kind, _ in outcomes} == {"DecisionRejected"}
    assert all(message.endswith(DENIED + "no MultiKueue here") for _, message in outcomes), outcomes
    assert writer.stats.errors == 0 and writer.stats.rejections[-1] == (WL.key, "Forbidden")
    await writer.sync(WL.key)
    assert len(api.patches) == 1, "not written again before the watch shows a newer Workload"


class NotAuthorized(Apiserver):
    """RBAC refuses kueue-es the status subresource: not about the status written."""

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        status = {"code": 403, "reason": "Forbidden", "message": 'workloads.kueue.x-k8s.io "wl" is forbidden: User '
                  '"system:serviceaccount:kueue-system:kueue-es" cannot patch resource "workloads/status" in API '
                  'group "kueue.x-k8s.io" in the namespace "ns"'}
        raise from_response(403, msgspec.json.encode(status), f"PATCH .../workloads/{name}/status")


@pytest.mark.asyncio
async def test_a_write_not_authorized_is_retried_not_rejected() -> None:
    """An authorization 403 says nothing of the decision: it stays pending and the write is tried again later
    (the permission granted, it goes through)."""
    journal = await _assigned(WL, ["worker2"])
    api = NotAuthorized(WL)
    writer = StatusWriter(api, journal, retry_s=3600)  # type: ignore[arg-type]
    await writer.sync_guarded(WL.key)
    assert writer.stats.errors == 1 and not await _outcomes(journal)
