"""Kueue's StatefulSet MultiKueue adapter across two real apiservers (the manager, and a worker started for this
module), a kueue-es on each running ``pod`` and ``statefulset``.

A queued StatefulSet on the manager (stored as its webhook leaves it: its pods one serving group) gets its pods made
by the test, playing the StatefulSet controller the test clusters lack; the group's Workload is dispatched to the
worker and admitted there. The set, not its pods, is then copied to the worker, with Kueue's origin label, the
prebuilt Workload's name and the manager's set's UID; the manager's pods stay gated, the copy's status is not
mirrored back, and the Workload deactivated on the manager takes the set's copy and its own along.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kubehelp import create, eventually, get, scheduling_gates
from test_multikueue import (  # noqa: F401 - the worker apiserver fixture
    _admitted_on_worker,
    _clusters,
    _maybe,
    _remote,
    worker_apiserver,
)

from connectors.k8s.resources import BY_KIND, STATEFUL_SETS
from connectors.k8s.statefulset_webhook import group_marks, workload_name
from kueue_es.scheduler.config import STATEFULSET_FRAMEWORK

pytestmark = pytest.mark.kube
Q = "kueue.x-k8s.io/queue-name"


def _statefulset(ns: str, name: str) -> dict[str, Any]:
    """A queued StatefulSet of two replicas as Kueue's StatefulSet webhook stores it (its template marked)."""
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": name, "namespace": ns, "labels": {Q: "user-queue"}, "annotations": {"team": "x"}},
           "spec": {"replicas": 2, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                          "resources": {"requests": {"cpu": "500m"}}}]}}}}
    labels, annotations = group_marks(sts, "user-queue")
    template = sts["spec"]["template"]["metadata"]
    template["labels"].update({**labels, Q: "user-queue", "kueue.x-k8s.io/managed": "true"})
    template["annotations"] = {**annotations, "kueue.x-k8s.io/pod-suspending-parent": "statefulset"}
    return sts


def _replica(sts: dict[str, Any], ordinal: int) -> dict[str, Any]:
    """A pod as the StatefulSet controller makes it and Kueue's Pod webhook stores it (gated; no finalizer, #8530)."""
    meta, name = sts["spec"]["template"]["metadata"], sts["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{ordinal}", "namespace": sts["metadata"]["namespace"],
                         "labels": {**meta["labels"], "apps.kubernetes.io/pod-index": str(ordinal)},
                         "annotations": dict(meta["annotations"]),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                              "uid": sts["metadata"]["uid"], "controller": True}]},
            "spec": {**sts["spec"]["template"]["spec"], "restartPolicy": "Always",
                     "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}


async def _dispatched(c: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A queued StatefulSet ``web`` made on the manager with its two pods, its group's Workload admitted on the
    worker, and the set's copy there: (the manager's set, its copy, the Workload's name)."""
    sts = msgspec.json.decode(await c.kc.create(STATEFUL_SETS, _statefulset(c.ns, "web"), c.ns))
    for ordinal in (0, 1):
        await create(c.kc, _replica(sts, ordinal))
    wl_name = workload_name("web")
    await _admitted_on_worker(c, wl_name, "the set's group Workload to be admitted on the worker")
    remote = await eventually(lambda: _remote(c.wc, STATEFUL_SETS, "web", c.ns), timeout=60,
                              what="the set's copy on the worker")
    return sts, remote, wl_name


@pytest.mark.asyncio
async def test_a_statefulsets_group_runs_on_the_worker_on_one_copy_of_the_set(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job", "pod", STATEFULSET_FRAMEWORK],
                         []) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        sts, remote, wl_name = await _dispatched(c)
        meta = remote["metadata"]
        assert meta["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert meta["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == wl_name  # the gate on
        assert meta["labels"][Q] == "user-queue" and meta["annotations"]["team"] == "x"
        assert meta["annotations"]["kueue.x-k8s.io/multikueue-origin-uid"] == sts["metadata"]["uid"]
        assert remote["spec"]["template"] == sts["spec"]["template"]
        worker_pods = [msgspec.json.decode(raw)["metadata"] for raw in (await wc.list(BY_KIND["Pod"],
                                                                                       namespace=ns)).items]
        assert worker_pods == [], "the set is copied, not its pods"

        await wc.patch(STATEFUL_SETS, "web", {"status": {"replicas": 2, "readyReplicas": 2}}, ns,
                       subresource="status")
        await asyncio.sleep(3)  # a mirrored status would follow the copy's change at once
        assert (msgspec.json.decode(await kc.get(STATEFUL_SETS, "web", ns)).get("status") or {}).get(
            "readyReplicas") is None, "the set's status is not mirrored"
        for ordinal in (0, 1):
            assert scheduling_gates(await get(kc, "Pod", f"web-{ordinal}", ns)) == ["kueue.x-k8s.io/admission"]

        await kc.patch(BY_KIND["Workload"], wl_name, {"spec": {"active": False}}, ns)

        async def gone() -> bool:
            return (await _remote(wc, STATEFUL_SETS, "web", ns) is None
                    and await _maybe(wc, "Workload", wl_name, ns) is None)

        await eventually(gone, timeout=60, what="the set's copy and the Workload's deleted on the worker")


@pytest.mark.asyncio
async def test_the_worker_runs_the_copied_sets_pods_on_the_copied_workload(
        kube_apiserver, worker_apiserver, tmp_path) -> None:  # noqa: F811 - the imported fixture
    """On the worker, as Kueue's StatefulSet reconciler does with a copy (its origin label, the manager's set's UID in
    ``kueue.x-k8s.io/multikueue-origin-uid``): the pods the worker's StatefulSet controller makes of the copy (played
    by the test) are the group of the Workload the manager copied there, which they run on once it is admitted —
    the worker makes no Workload of its own for them."""
    async with _clusters(kube_apiserver, worker_apiserver, tmp_path, ["batch/job", "pod", STATEFULSET_FRAMEWORK],
                         []) as c:
        kc, wc, ns = c.kc, c.wc, c.ns
        _, remote, wl_name = await _dispatched(c)
        for ordinal in (0, 1):
            await create(wc, _replica(remote, ordinal))

        async def started() -> bool:
            gates = [scheduling_gates(await get(wc, "Pod", f"web-{ordinal}", ns)) for ordinal in (0, 1)]
            return all(g == [] for g in gates)

        await eventually(started, timeout=60, what="the copy's pods to be ungated on the worker")
        on_worker = [msgspec.json.decode(raw)["metadata"] for raw in (await wc.list(BY_KIND["Workload"],
                                                                                     namespace=ns)).items]
        assert [m["name"] for m in on_worker] == [wl_name], "run on the copied Workload, none made on the worker"
        for ordinal in (0, 1):
            assert scheduling_gates(await get(kc, "Pod", f"web-{ordinal}", ns)) == ["kueue.x-k8s.io/admission"], (
                "the manager's pods stay gated")
