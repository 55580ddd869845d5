"""The ``kueue.x-k8s.io/resource-in-use`` finalizer on the Workloads of Jobs, as Kueue's job reconciler and
workload controller keep it (``pkg/controller/jobframework/reconciler.go``, ``pkg/workload/workload.go``
``RemoveFinalizer`` and ``FinalizeOrphanedWorkload``, ``pkg/controller/core/workload_controller.go``).

What to do is decided purely, from the Workload as the apiserver stores it and the log's view of it; the Job
integration (:mod:`connectors.k8s.jobs`), the Pod integration (:mod:`connectors.k8s.pods_integration`) and the
retention deletions (:mod:`connectors.k8s.retention`) do the writes, the two integrations through
:func:`unfinalize` and :func:`delete_unfinalized`.

* A Workload the Job or the Pod integration creates carries the finalizer from its creation (a prebuilt one is
  given none). For the Pod integration "the Job" below is the Pod, or every Pod of a pod group, whose Workload is
  let go once none of its Pods is left (Kueue's pod reconciler: ``pkg/controller/jobs/pod/pod_controller.go``).
* It is taken off, in one merge patch of ``metadata.finalizers`` conditioned on the Workload's uid and
  resourceVersion (:func:`removal_patch`), when
  - the Workload is finished (:func:`release`: once the apiserver shows ``Finished``);
  - the Workload is being deleted (someone deleted it): first the Job is stopped ("Workload is deleted") and its
    template restored, then the finalizer goes (:func:`release`);
  - the Job is gone: each Workload it controls that is neither finished nor being deleted is finished
    ``OwnerNotFound`` (under ``FinishOrphanedWorkloads``), then loses the finalizer on the version showing it
    ``Finished`` (:func:`let_go`, the one rule of every integration's orphans). A Job
    only being deleted orphans nothing yet (Kueue's #12849): its Workloads wait for it to go, except one being
    deleted too (a foreground deletion waits for it), which just loses the finalizer;
  - the Workload has no owner any more (the Job was deleted with ``--cascade=orphan``) and is being deleted, or
    still carries the ``kueue.x-k8s.io/job-uid`` label under ``FinishOrphanedWorkloads`` (:func:`ownerless`):
    finished ``OwnerNotFound`` the same way, then the finalizer goes;
  - kueue-es deletes the Workload itself (one the Job no longer matches, one Workload too many for the Job, the
    Workload of a deleted Job, ``afterFinished`` retention): the finalizer first, then the deletion.
  A Workload already being deleted is not deleted again: taking the finalizer off lets it go.

The patch carries the resourceVersion the decision was taken on, so it never drops a finalizer someone else
added meanwhile (a conflict waits for the newer Workload the watch brings). That is always so here, as Kueue's
own removal from a Workload (a full update) always is: its ``RemoveFinalizersWithStrictPatch`` gate only changes
how its Pod integration takes ``kueue.x-k8s.io/managed`` off Pods (:func:`connectors.k8s.pod_sync.finalize_patch`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from connectors.k8s.client import KubeClient, resource_version_of
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import BY_KIND, JOB_UID_LABEL
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import MULTIKUEUE_ORIGIN_LABEL
from projections.in_use import FINALIZER
from projections.workloads import FINISHED, WorkloadInfo

STOP, REMOVE = "stop", "remove"
"""What :func:`release` says to do first with the Job's Workload."""
WORKLOAD_DELETED = "Workload is deleted"
"""The ``Stopped`` message of a running Job whose Workload is being deleted."""
OWNER_NOT_FOUND = "OwnerNotFound"
OWNER_NOT_FOUND_MESSAGE = "The workload's owner no longer exists"
"""The ``Finished`` reason and message of an orphan (Kueue's ``FinalizeOrphanedWorkload``)."""


def holds(obs: o.Workload) -> bool:
    return FINALIZER in obs.metadata.finalizers


def deleting(obs: o.Workload) -> bool:
    return bool(obs.metadata.deletion_timestamp)


def shows_finished(obs: o.Workload) -> bool:
    """Whether the apiserver shows the Workload ``Finished``: Kueue takes the finalizer off a Workload it reads
    finished, so here not before the log's decision is written."""
    return any(c.type == "Finished" and c.status == "True" for c in obs.status.conditions)


def removal_patch(obs: o.Workload) -> dict[str, Any]:
    """The merge patch that takes the finalizer off ``obs`` and keeps every other one, conditioned on its uid and
    resourceVersion."""
    rest = [f for f in obs.metadata.finalizers if f != FINALIZER]
    return {"metadata": {"uid": obs.metadata.uid, "resourceVersion": obs.metadata.resource_version,
                         "finalizers": rest or None}}


def release(obs: o.Workload, wl: WorkloadInfo, *, job_running: bool) -> str:
    """What the Job integration does about the finalizer of the Job's own Workload, finished or being deleted
    (``""``: nothing, yet): :data:`STOP` the running Job first (a Workload being deleted), then :data:`REMOVE`."""
    if wl.phase == FINISHED:
        return REMOVE if holds(obs) and shows_finished(obs) else ""
    if not deleting(obs):
        return ""
    if job_running:
        return STOP
    return REMOVE if holds(obs) else ""


def orphan_steps(obs: o.Workload, wl: WorkloadInfo | None, *, finish_orphaned: bool) -> tuple[bool, bool]:
    """``(finish, remove)`` for a Workload whose owner is gone or going: finish it ``OwnerNotFound`` (under
    ``finish_orphaned``, the ``FinishOrphanedWorkloads`` gate, when the log has it neither finished nor is it
    being deleted), take the finalizer off (when it holds it)."""
    finish = finish_orphaned and wl is not None and wl.phase != FINISHED and not deleting(obs)
    return finish, holds(obs)


def awaits_finished(obs: o.Workload, wl: WorkloadInfo | None, *, finishing: bool) -> bool:
    """Whether an orphan keeps its finalizer until the apiserver shows it ``Finished``: the log finishes it
    (``finishing``: now, :func:`orphan_steps`) or has finished it, and the Workload as read does not show it yet.
    Kueue finishes an orphan and takes the finalizer off the version that write returned
    (``FinalizeOrphanedWorkload``); here the status is the writer's to write, so the finalizer goes on the version
    the watch brings with it, never racing that write (nor letting the Workload go unseen finished)."""
    return (holds(obs) and not deleting(obs) and wl is not None and wl.uid == obs.metadata.uid
            and (finishing or wl.phase == FINISHED) and not shows_finished(obs))


async def let_go(obs: o.Workload, wl: WorkloadInfo | None, *, finish_orphaned: bool,
                 append: Callable[[WorkloadInfo, ev.AnyEvent], Awaitable[object]],
                 unfinalize: Callable[[o.Workload], Awaitable[str | None]]) -> str | None:
    """Let go of an orphan, the one rule of every integration: finish it ``OwnerNotFound`` through the log
    (``append``, under ``finish_orphaned``; :func:`orphan_steps`), then take its finalizer off (``unfinalize``) —
    on a later version when the apiserver does not show it finished yet (:func:`awaits_finished`): the watch
    brings that version, which marks the Workload's owner (or the Workload) again. Its resourceVersion after that
    (None: gone, or finished but not shown so yet: nothing to delete now)."""
    finish, remove = orphan_steps(obs, wl, finish_orphaned=finish_orphaned)
    if finish and wl is not None:
        await append(wl, ev.WorkloadFinished(time=int(time.time() * 1000), key=wl.key, uid=wl.uid,
                                             reason=OWNER_NOT_FOUND, message=OWNER_NOT_FOUND_MESSAGE))
    if awaits_finished(obs, wl, finishing=finish):
        return None
    return await unfinalize(obs) if remove else obs.metadata.resource_version


def ownerless(obs: o.Workload, *, finish_orphaned: bool) -> bool:
    """Kueue's workload controller's orphan: no owner reference at all, and being deleted or — under
    ``finish_orphaned`` — still carrying the ``kueue.x-k8s.io/job-uid`` label of the Job it was made for. A
    MultiKueue manager's copy on a worker (``kueue.x-k8s.io/multikueue-origin``) carries the manager Job's label
    and no owner until the Job's copy adopts it as its prebuilt Workload: it is no orphan."""
    if obs.metadata.owner_references:
        return False
    return deleting(obs) or (finish_orphaned and bool(obs.metadata.labels.get(JOB_UID_LABEL))
                             and MULTIKUEUE_ORIGIN_LABEL not in obs.metadata.labels)


def maybe_ownerless(obs: o.Workload) -> bool:
    """Whether :func:`ownerless` could hold whatever the gate (what the mirror marks for the Job integration)."""
    return not obs.metadata.owner_references and (deleting(obs) or bool(obs.metadata.labels.get(JOB_UID_LABEL)))


def unfinalized(obs: o.Workload, rv: str) -> o.Workload:
    """``obs`` as :func:`unfinalize` left it at resourceVersion ``rv``: what a pass that took the finalizer off
    reads from then on, so that it does not take it off again."""
    rest = [f for f in obs.metadata.finalizers if f != FINALIZER]
    return msgspec.structs.replace(obs, metadata=msgspec.structs.replace(obs.metadata, finalizers=rest,
                                                                         resource_version=rv))


async def unfinalize(client: KubeClient, obs: o.Workload) -> str | None:
    """Take the finalizer off ``obs`` (:func:`removal_patch`): the Workload's resourceVersion after it (its own when
    it held none; None: the Workload is gone). A conflict (:class:`connectors.k8s.errors.Conflict`) is raised, to
    wait for the newer Workload the watch brings."""
    if not holds(obs):
        return obs.metadata.resource_version
    try:
        out = await client.patch(BY_KIND["Workload"], obs.metadata.name, removal_patch(obs), obs.metadata.namespace)
    except NotFound:
        return None
    return resource_version_of(out) or obs.metadata.resource_version


async def delete_unfinalized(client: KubeClient, obs: o.Workload, rv: str | None) -> bool:
    """Delete ``obs`` once :func:`unfinalize` left it at resourceVersion ``rv``, conditioned on its uid and ``rv``:
    whether this deleted it (not when it is gone, ``rv`` None, or was already being deleted: then it only lost
    the finalizer)."""
    if rv is None or deleting(obs):
        return False
    try:
        await client.delete(BY_KIND["Workload"], obs.metadata.name, obs.metadata.namespace, uid=obs.metadata.uid,
                            resource_version=rv)
    except NotFound:
        return False
    return True
