"""Kueue's LeaderWorkerSet reconciler tests as the oracle for what happens to a set's pods
(``pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler_test.go``, the newest version read: v1beta2, its
pods reconciled by the set's reconciler through its StatefulSets). Each case id names Kueue's case."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures import watched_jobs
from fixtures.watched_jobs import Client

from connectors.k8s import leaderworkerset as lw
from connectors.k8s.errors import NotFound
from connectors.k8s.lws_integration import POD_PREFIX, LeaderWorkerSetIntegration, SetPod

ON = {"integrations": {"frameworks": ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]}}
ADMISSION, TOPOLOGY = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"
FINALIZER = "kueue.x-k8s.io/managed"


class _NoSet(Client):
    """The apiserver has no LeaderWorkerSet (the set was deleted, its pods orphaned)."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        raise NotFound(f"{resource.kind} {namespace}/{name} not found")


def _pod(*, gates: tuple[str, ...] = (ADMISSION,), phase: str = "") -> SetPod:
    """A pod of set ``lws`` as the LeaderWorkerSet controller makes it (its StatefulSet its controller), gated by the
    Pod webhook, not yet made a member of its group, with Kueue's finalizer."""
    return msgspec.convert({"metadata": {
        "name": "lws-0", "namespace": "ns", "uid": "pod-uid", "resourceVersion": "7",
        "labels": {lw.SET_NAME_LABEL: "lws", lw.GROUP_INDEX_LABEL: "0"},
        "annotations": {lw.SUSPENDING_PARENT: lw.FRAMEWORK_NAME, "kueue.x-k8s.io/pod-group-serving": "true"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws", "uid": "sts-uid",
                             "controller": True}],
        "finalizers": [FINALIZER]},
        "spec": {"schedulingGates": [{"name": g} for g in (*gates, "other.example.com/gate")]},
        "status": {"phase": phase}}, SetPod)


async def _reconcile_orphan(pod: SetPod) -> list[tuple[str, str, dict[str, Any]]]:
    integ, _, _ = watched_jobs.integration(LeaderWorkerSetIntegration, None, config=ON)
    integ.client = client = _NoSet({}, lw.KIND)
    integ.pods.known["ns/lws-0"] = pod
    await integ.reconcile(POD_PREFIX + "ns/lws-0")
    return client.patches


@pytest.mark.asyncio
@pytest.mark.parametrize("gates", [(ADMISSION,), (ADMISSION, TOPOLOGY), (TOPOLOGY,)],
                         ids=["should ungate pods if leaderworkerset is deleted", "both of Kueue's gates",
                              "the topology gate alone"])
async def test_gated_pods_of_a_deleted_set_are_ungated_and_keep_the_finalizer(gates: tuple[str, ...]) -> None:
    """Kueue: with no LeaderWorkerSet, its pods' Kueue scheduling gates are lifted (``wantPods``: no gate) and the
    finalizer stays (the newest Kueue takes it off no longer, #8571); other gates stay."""
    assert await _reconcile_orphan(_pod(gates=gates)) == [("Pod", "lws-0", {
        "metadata": {"resourceVersion": "7"},
        "spec": {"schedulingGates": [{"name": "other.example.com/gate"}]}})]


@pytest.mark.asyncio
async def test_an_ungated_pod_of_a_deleted_set_is_left_alone() -> None:
    assert await _reconcile_orphan(_pod(gates=())) == []


@pytest.mark.asyncio
async def test_a_gated_pod_of_a_set_the_watch_has_not_shown_yet_stays_gated() -> None:
    """The pods' watch may run ahead of the sets': a set the apiserver has is not gone."""
    integ, client, _ = watched_jobs.integration(LeaderWorkerSetIntegration, None, config=ON)
    client.stored = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": lw.KIND,
                     "metadata": {"name": "lws", "namespace": "ns", "uid": "lws-uid"}}
    integ.pods.known["ns/lws-0"] = _pod()
    await integ.reconcile(POD_PREFIX + "ns/lws-0")
    assert client.patches == []
