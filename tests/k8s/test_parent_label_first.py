"""ConcurrentAdmission's parent: the status writer writes nothing for a Workload whose parent label is still to be
written (by the variant writer, another worker), so the parent is never seen Admitted before it is labelled, as in
Kueue, whose workload controller labels it before the variant controller admits it. The label's outcome, applied
or rejected, marks the workload for the status writer again."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

WL = o.Workload(metadata=o.ObjectMeta(name="parent", namespace="ns", uid="p-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))
ADMISSION = o.Admission(cluster_queue="cq", pod_set_assignments=[
    o.PodSetAssignment(name="main", flavors={"cpu": "spot"}, resource_usage={"cpu": "1"}, count=1)])


class Apiserver:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(body)
        return msgspec.json.encode({"metadata": {"resourceVersion": "9"}})


async def _labelled_then_admitted() -> tuple[LocalJournal, Apiserver, StatusWriter]:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([
        ev.ObjectUpserted(time=1, key=WL.key, uid="p-uid", obj=WL),
        ev.ParentLabelled(time=2, key=WL.key, uid="p-uid", cycle=1, input=0),
        ev.ParentAdmitted(time=3, key=WL.key, uid="p-uid", cycle=2, input=1, admission=ADMISSION,
                          variant="parent-spot", message="The variant parent-spot is admitted")])
    api = Apiserver()
    return journal, api, StatusWriter(api, journal)  # type: ignore[arg-type]


def _admitted(body: dict[str, Any]) -> bool:
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in body["status"]["conditions"])


@pytest.mark.asyncio
@pytest.mark.parametrize("outcome", [ev.DecisionApplied, ev.DecisionRejected])
async def test_a_parents_status_waits_for_its_label(outcome) -> None:
    journal, api, writer = await _labelled_then_admitted()
    journal.mirror.dirty_workloads.clear()
    await writer.sync(WL.key)
    assert api.patches == [], "not admitted before the label is written"
    extra = {"reason": "NotFound", "message": "gone"} if outcome is ev.DecisionRejected else {}
    await journal.append([outcome(time=4, key=WL.key, uid="p-uid", decision=1, **extra)])
    assert WL.key in journal.mirror.dirty_workloads, "the label's outcome wakes the status writer"
    await writer.sync(WL.key)
    (body,) = api.patches
    assert _admitted(body)
