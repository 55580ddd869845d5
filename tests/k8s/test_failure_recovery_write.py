"""FailureRecoveryPolicy's write (:mod:`connectors.k8s.failure_recovery`): decided from the log's view of the pod,
carried out only if the live pod read just before the write still calls for it, as Kueue's controller decides on
the pod it has just read (no cluster needed); a write that meets a conflict is tried again on the pod read anew."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s import forceful_termination as ft
from connectors.k8s.errors import Conflict
from connectors.k8s.failure_recovery import FailureRecovery
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from events import objects as o
from events.log import MemoryLog
from events.timefmt import format_time

DELETED = 1_704_067_200_000


class _Client:
    def __init__(self, live: dict[str, Any]) -> None:
        self.live = live
        self.patches: list[dict[str, Any]] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(self.live)

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        self.patches.append(body)
        return b"{}"


def _logged_pod() -> o.Pod:
    """The pod as the log holds it: opted in, deleted long ago, running on n1."""
    return o.Pod(metadata=o.ObjectMeta(name="p", namespace="ns", uid="u", annotations={ft.ANNOTATION: "true"},
                                       deletion_timestamp=format_time(DELETED)),
                 spec=o.PodSpec(node_name="n1"), status=o.PodStatus(phase="Running"))


def _live(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                         "annotations": {ft.ANNOTATION: "true"}, "deletionTimestamp": format_time(DELETED),
                         "deletionGracePeriodSeconds": 30},
            "spec": {"nodeName": "n1"}, "status": {"phase": phase}}


@pytest.mark.asyncio
@pytest.mark.parametrize(("phase", "written"), [("Running", True), ("Succeeded", False), ("Failed", False)])
async def test_a_pod_the_log_shows_stuck_is_forced_to_failed_only_if_it_still_is(phase: str, written: bool) -> None:
    """The log may lag: a pod whose kubelet came back and reported it Succeeded is not turned Failed."""
    client = _Client(_live(phase))
    recovery = FailureRecovery(client, LocalJournal(MemoryLog(), Mirror()))  # type: ignore[arg-type]
    await recovery._fail("ns/p", _logged_pod())
    assert bool(client.patches) == written
    if written:
        assert client.patches[0]["status"]["phase"] == "Failed"


class _ChangedMeanwhile(_Client):
    """The first write meets a 409: another controller (the node lifecycle controller's ``Ready=False``, PodGC's
    ``DisruptionTarget``) wrote the pod between the read and the write — a change the log does not keep, so no
    newer version of the pod comes to the log to bring it back."""

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "",
                    subresource: str | None = None) -> bytes:
        if not self.patches:
            self.patches.append({})
            raise Conflict("the object has been modified", 409)
        return await super().patch(resource, name, body, namespace, subresource)


@pytest.mark.asyncio
async def test_a_write_that_meets_a_conflict_is_tried_again() -> None:
    """As Kueue's reconciler, whose failed patch is requeued: the next attempt reads the live pod again."""
    client = _ChangedMeanwhile(_live("Running"))
    recovery = FailureRecovery(client, LocalJournal(MemoryLog(), Mirror()), retry_s=0)  # type: ignore[arg-type]
    await recovery._fail("ns/p", _logged_pod())
    assert (len(client.patches), recovery.stats.conflicts, recovery.stats.failed) == (1, 1, 0)
    assert recovery._retry.due() == {"ns/p"}, "the pod is looked at again"
    await recovery._fail("ns/p", _logged_pod())
    assert client.patches[-1]["status"]["phase"] == "Failed" and recovery.stats.failed == 1
