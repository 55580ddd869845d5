"""The owning Deployment's UID a Deployment's pod's Workload carries in ``kueue.x-k8s.io/job-uid`` under Kueue's
``DeploymentJobUIDLabel`` gate (beta, on by default since v0.20).

Kueue gives a Deployment no Workload of its own: each of its pods gets one, as a single Pod. With the gate on, the
label of that Workload names the Deployment rather than the Pod, so that every Workload of one Deployment can be
selected by one label (topology spreading, ``kueuectl``). The Deployment is found up the pod's controllers: the
pod's ReplicaSet, then that ReplicaSet's Deployment, which Kueue must hold (a queue name on it, or
``manageJobsWithoutQueueName``). Whenever the chain cannot be followed (no ReplicaSet controller, one or the
Deployment not there, a Deployment Kueue does not hold) the Workload keeps the Pod's UID, as with the gate off.
Only a pod Kueue's Deployment webhook marked (``kueue.x-k8s.io/pod-suspending-parent: deployment``) is looked up.

No watch holds ReplicaSets or Deployments (kueue-es may only GET them), so they are read, through
:class:`OwnerReads`: one pass of the pod integration reads each owner once, however many of its pods it handles
(concurrently or not); the next pass reads it afresh, so a Deployment's queue name taken away is seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

from connectors.k8s.errors import NotFound
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.pod_webhook import SUSPENDING_PARENT
from connectors.k8s.resources import DEPLOYMENTS, REPLICA_SETS, Resource
from kueue_es.scheduler.config import DEPLOYMENT_FRAMEWORK

APPS_V1 = "apps/v1"


class Getter(Protocol):
    async def get(self, resource: Resource, name: str, namespace: str = "") -> bytes: ...


def controller_of(meta: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The controller owner reference of ``meta`` when it is an apps/v1 ``kind``; None otherwise."""
    ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if ref is None or ref.get("apiVersion") != APPS_V1 or ref.get("kind") != kind:
        return None
    return ref


def of_a_deployment(raw_pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ReplicaSet reference to follow for a pod Kueue's Deployment webhook marked; None: not such a pod."""
    meta = raw_pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(SUSPENDING_PARENT) != DEPLOYMENT_FRAMEWORK:
        return None
    return controller_of(meta, "ReplicaSet")


async def _read(client: Getter, resource: Resource, ref: Mapping[str, Any], namespace: str
                ) -> Mapping[str, Any] | None:
    """The metadata of the object ``ref`` names, when it is there under the UID the reference gives."""
    try:
        raw = msgspec.json.decode(await client.get(resource, ref.get("name", ""), namespace))
    except NotFound:
        return None
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict) or (ref.get("uid") and meta.get("uid") != ref.get("uid")):
        return None
    return meta


class OwnerReads:
    """The reads of the pods' ReplicaSets and Deployments, each object read once until :meth:`new_pass`."""

    def __init__(self, client: Getter) -> None:
        self.client = client
        self._reads: dict[tuple[str, str, str, str], asyncio.Task[Mapping[str, Any] | None]] = {}

    def new_pass(self) -> None:
        """Forget what was read: the next lookups read the owners again."""
        self._reads.clear()

    async def read(self, resource: Resource, ref: Mapping[str, Any], namespace: str) -> Mapping[str, Any] | None:
        """:func:`_read`, shared by every lookup of the same object in this pass (a failed read is not kept)."""
        key = (resource.kind, namespace, str(ref.get("name", "")), str(ref.get("uid", "")))
        task = self._reads.get(key)
        if task is None:
            task = self._reads[key] = asyncio.ensure_future(_read(self.client, resource, ref, namespace))
            task.add_done_callback(lambda done: self._forget_failed(key, done))
        return await asyncio.shield(task)

    def _forget_failed(self, key: tuple[str, str, str, str], done: asyncio.Task[Any]) -> None:
        if (done.cancelled() or done.exception() is not None) and self._reads.get(key) is done:
            del self._reads[key]


async def deployment_uid(owners: OwnerReads, raw_pod: Mapping[str, Any], manage_unqueued: bool) -> str | None:
    """The UID of the Deployment Kueue holds that owns ``raw_pod`` (as stored) through its ReplicaSet, the owners
    read through ``owners``; None when there is none to use (the Workload then keeps the Pod's UID)."""
    rs_ref = of_a_deployment(raw_pod)
    if rs_ref is None:
        return None
    namespace = (raw_pod.get("metadata") or {}).get("namespace", "")
    replica_set = await owners.read(REPLICA_SETS, rs_ref, namespace)
    dep_ref = controller_of(replica_set, "Deployment") if replica_set is not None else None
    deployment = await owners.read(DEPLOYMENTS, dep_ref, namespace) if dep_ref is not None else None
    if deployment is None or not (manage_unqueued or (deployment.get("labels") or {}).get(QUEUE_LABEL)):
        return None
    return deployment.get("uid") or None
