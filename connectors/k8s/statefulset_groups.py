"""Kueue's StatefulSet reconciler, for the pod groups StatefulSets hold, as the pod integration runs it.

Kueue's ``statefulset`` integration makes no Workload of its own: a StatefulSet's pods form one pod group
(:mod:`connectors.k8s.pods_integration` reconciles it), and the set's reconciler adds its rules to that group's.
With the ``statefulset`` framework on, a group a StatefulSet holds is also looked at again when the StatefulSet's
status revisions change or it goes (:mod:`connectors.k8s.statefulsets`; pods it orphaned are traced to it by their
group's name), and its pods are let go as the set's reconciler lets them go
(:func:`connectors.k8s.pod_group.let_go_by_statefulset`: ungated and finalized; in a rolling update, only once the
group's Workload is admitted); a gated pod is given the set's changed queue name. The set is made an owner of its
group's Workload while it has replicas (Kueue #4799) and stays one at zero, so that Workload stays, deactivated or
not, while none of the group's Pods is left and the set is there to remake them. Scaled to zero, the set has its
Workload put on hold (``WorkloadOnHoldChanged``: QuotaReserved=False ``OnHold``, its quota given back); scaled up
again, the Workload is resized to the set's replicas and its hold cleared (Kueue v0.20, #12233, #15279:
:func:`connectors.k8s.pod_group.hold_step`). Under ``AdmissionGatedBy`` the group's Workload takes the set's
admission gate, and its updates are recorded on the set.

:class:`StatefulSetGroups` holds these rules; the pod integration calls them from its group passes, and shares with
them its writes done once per version of a Workload and its appends to the log.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog

from connectors.k8s import pod_group, pod_sync, statefulsets
from connectors.k8s.client import JSON_PATCH, MERGE_PATCH, KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.integration_log import Append, IntegrationLog
from connectors.k8s.job_sync import UPDATED_WORKLOAD
from connectors.k8s.mirror import Mirror
from connectors.k8s.pod_sync import ManagedPod
from connectors.k8s.resources import STATEFUL_SETS
from connectors.k8s.statefulsets import StatefulSetRevision, StatefulSetRevisions
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import SchedulerConfig
from projections.workloads import WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.pods")


class _Counts(Protocol):
    finished: int
    errors: int
    let_go: int
    relabelled: int


class PatchOnce(Protocol):
    def __call__(self, group: str, what: str, obs: o.Workload, patch: Any,
                 content_type: str = MERGE_PATCH) -> Awaitable[bool]: ...


class StatefulSetGroups:
    """The StatefulSet reconciler's part of a pod group's pass. ``revisions``: the StatefulSets as listed and
    watched; ``kept_by_set``: group key -> key of the set keeping its Workload while none of its Pods is left
    (:meth:`kept_by_owner` records it, the pod integration reads it); ``append_once``, ``patch_once``,
    ``patch_pod``: the pod integration's own, so that what it holds back as already done holds these back too."""

    def __init__(self, client: KubeClient, revisions: StatefulSetRevisions, kept_by_set: dict[str, str], *,
                 stats: _Counts, append: Append, mirror: Mirror,
                 append_once: Callable[[WorkloadInfo, ev.AnyEvent], Awaitable[bool]], patch_once: PatchOnce,
                 patch_pod: Callable[[ManagedPod, dict[str, Any]], Awaitable[bool]]) -> None:
        self.client = client
        self.revisions = revisions
        self.kept_by_set = kept_by_set
        self.stats = stats
        self._append_once = append_once
        self._patch_once = patch_once
        self._patch_pod = patch_pod
        self._sets_log = IntegrationLog(append, mirror, stats, kind=STATEFUL_SETS.kind, log=log)
        """What is recorded on a StatefulSet (the set reconciler's Events)."""

    def groups_of(self, keys: set[str], pods: Mapping[str, ManagedPod], group_of: Mapping[str, str]) -> set[str]:
        """The groups (keys ``<namespace>/<group>``) of the pods of the StatefulSets ``keys`` (whose revisions
        changed, or that came or went), and those whose Workload one of them keeps."""
        groups = set()
        for pod_key, pod in pods.items():
            name = pod_group.statefulset_name(pod)  # an orphan's too, found by its group's name
            if name is not None and f"{pod.metadata.namespace}/{name}" in keys and pod_key in group_of:
                groups.add(group_of[pod_key])
        groups.update(g for g, sts in self.kept_by_set.items() if sts in keys)
        return groups

    async def gate_synced(self, holder: StatefulSetRevision, obs: o.Workload, gate: str | None, message: str) -> None:
        """``UpdatedWorkload`` on the StatefulSet ``holder`` once its admission gate is on its group's Workload."""
        log.info("synced the workload's admission gate with its statefulset's", statefulset=holder.key,
                 workload=obs.key, gate=gate)
        await self._sets_log.report(holder.key, holder.metadata.uid, UPDATED_WORKLOAD, workload=obs.key,
                                    message=message)

    async def owned_by_statefulset(self, group: str, obs: o.Workload, sts: StatefulSetRevision) -> bool:
        """Make the StatefulSet holding the group an owner of the group's Workload while it has replicas, and keep it
        one once the set is scaled to zero (:func:`connectors.k8s.pod_group.statefulset_owners`; #4799, v0.20 keeps
        it at zero, #12233). A Workload the set owns is no orphan when all its pods are gone
        (:meth:`connectors.k8s.pods_integration.PodIntegration._group_gone`): a deactivated one keeps its uid while
        the set remakes its pods. The write is conditioned on the Workload's resourceVersion. Returns whether the
        pass ends here: written, or written and not yet shown by the watch."""
        refs = pod_group.statefulset_owners(obs, sts.metadata.name, sts.metadata.uid, sts.view.replicas)
        if refs is None:
            return False
        patch = {"metadata": {"resourceVersion": obs.metadata.resource_version, "ownerReferences": refs}}
        if not await self._patch_once(group, "set-owner", obs, patch):
            return True
        log.info("kept the statefulset among the owners of its group's workload", group=group, workload=obs.key,
                 statefulset=sts.key, owner=sts.view.replicas > 0)
        return True

    async def kept_by_owner(self, group: str, obs: o.Workload) -> tuple[bool, StatefulSetRevision | None]:
        """Whether an owner other than its Pods keeps the Workload of a group none of whose Pods is left, and the
        StatefulSet that does, if one does. The garbage collector keeps it while that owner is there. A
        LeaderWorkerSet made it before its pods, and that set's integration deletes it. A StatefulSet keeps it while
        it is there (same uid), scaled to zero too: Kueue v0.20 keeps the set among the owners then and puts the
        Workload on hold (#12233). Once the set is gone, the garbage collector would take the Workload with its last
        owner. A group a set keeps is recorded so that the set's changes, and its Workload's records, mark it."""
        self.kept_by_set.pop(group, None)
        kept = False
        for ref in obs.metadata.owner_references:
            if ref.kind == "Pod":
                continue
            if (ref.api_version, ref.kind) != pod_group.STATEFULSET_OWNER:
                kept = True
                continue
            sts = await self._statefulset_by_uid(obs.metadata.namespace, ref.name, ref.uid)
            if sts is not None:
                self.kept_by_set[group] = sts.key
                return True, sts
        return kept, None

    async def held_by_statefulset(self, group: str, wl: WorkloadInfo, obs: o.Workload,
                                  sts: StatefulSetRevision) -> bool:
        """Put the group's Workload on hold while its StatefulSet is scaled to zero, and, scaled up again, resize it
        to the set's replicas and clear the hold (:func:`connectors.k8s.pod_group.hold_step`; Kueue v0.20, #12233,
        #15279). The hold goes through the log (``WorkloadOnHoldChanged``: the fold gives the quota back, the writer
        writes QuotaReserved=False ``OnHold``); the resize is a JSON patch of the Workload conditioned on its
        resourceVersion. Returns whether the pass ends here (the rest waits for the Workload that shows it)."""
        if wl.uid != obs.metadata.uid:
            return False
        match pod_group.hold_step(wl, obs, sts.metadata.name, sts.view.replicas):
            case pod_group.HOLD | pod_group.RELEASE_HOLD as action:
                held = action == pod_group.HOLD
                if await self._append_once(wl, ev.WorkloadOnHoldChanged(time=_now(), key=wl.key, uid=wl.uid,
                                                                        on_hold=held)):
                    log.info("put the workload on hold: its statefulset is scaled to zero" if held
                             else "cleared the hold of the workload: its statefulset is scaled up",
                             group=group, workload=wl.key, statefulset=sts.key)
                return True
            case pod_group.RESIZE:
                return await self._resize(group, obs, sts)
        return False

    async def _resize(self, group: str, obs: o.Workload, sts: StatefulSetRevision) -> bool:
        """Give the Workload on hold the replica count its StatefulSet is scaled up to (Kueue #15279), once per
        version of it."""
        if not await self._patch_once(group, "resize", obs, pod_group.resize_patch(obs, sts.view.replicas),
                                      content_type=JSON_PATCH):
            return True
        log.info("resized the workload on hold to its statefulset's replicas", group=group, workload=obs.key,
                 statefulset=sts.key, replicas=sts.view.replicas)
        return True

    async def _statefulset_by_uid(self, namespace: str, name: str, uid: str) -> StatefulSetRevision | None:
        """StatefulSet ``name`` of that ``uid``, as last listed or watched, else as the apiserver has it (None: it has
        none of that uid)."""
        seen = self.revisions.get(f"{namespace}/{name}", uid)
        if seen is not None:
            return seen
        try:
            stored = statefulsets.decode(await self.client.get(STATEFUL_SETS, name, namespace))
        except NotFound:
            return None
        return stored if stored is not None and stored.metadata.uid == uid else None

    async def holding_statefulset(self, config: SchedulerConfig, pods: list[ManagedPod]) -> StatefulSetRevision | None:
        """The StatefulSet controlling the group's pods, as last listed or watched, else as the apiserver has it
        (the pods' watch may run ahead of the StatefulSets'). On a worker, a set that is a MultiKueue copy names the
        Workload the manager copied there (:func:`connectors.k8s.statefulset_multikueue.copied_workload`): the group
        runs on it as on a prebuilt one, once the StatefulSets are first listed, as the set's reconciler makes none
        for a copy. None while its integration is off, for a group no StatefulSet holds, or when the apiserver has
        none of that uid."""
        controller = _controller(pods) if config.manages_statefulsets else None
        if controller is None:
            return None
        namespace, owner = controller
        return await self._statefulset_by_uid(namespace, owner.name, owner.uid)

    async def statefulset_of(self, config: SchedulerConfig, pods: list[ManagedPod]) -> pod_group.StatefulSetView | None:
        """The StatefulSet holding the group (its pods' controller), for the set's reconciler: its revisions, or gone
        (the apiserver has none of that uid); None while its integration is off, for a group no StatefulSet holds, or
        before the StatefulSets are first listed. One the watch has not seen (yet) is asked for, as the pods' watch
        may run ahead of the StatefulSets'."""
        if not config.manages_statefulsets or not self.revisions.synced.is_set():
            return None
        controller = _controller(pods)
        if controller is None:
            return await self._orphans_statefulset(pods)
        namespace, owner = controller
        seen = self.revisions.get(f"{namespace}/{owner.name}", owner.uid)
        if seen is not None:
            return seen.view
        try:
            stored = statefulsets.decode(await self.client.get(STATEFUL_SETS, owner.name, namespace))
        except NotFound:
            return pod_group.STATEFULSET_GONE
        if stored is None:
            return None
        return stored.view if stored.metadata.uid == owner.uid else pod_group.STATEFULSET_GONE

    async def _orphans_statefulset(self, pods: list[ManagedPod]) -> pod_group.StatefulSetView | None:
        """For a group whose pods no StatefulSet controls any more (orphaned by ``--cascade=orphan``), the StatefulSet
        of the name its group was made for (:func:`connectors.k8s.pod_group.statefulset_name`), as the set's
        reconciler reads it by name: gone once the apiserver has none of that name. None: no such pod."""
        name = next((n for n in map(pod_group.statefulset_name, pods) if n is not None), None)
        if name is None:
            return None
        namespace = pods[0].metadata.namespace
        seen = self.revisions.known.get(f"{namespace}/{name}")
        if seen is not None:
            return seen.view
        try:
            stored = statefulsets.decode(await self.client.get(STATEFUL_SETS, name, namespace))
        except NotFound:
            return pod_group.STATEFULSET_GONE
        return stored.view if stored is not None else None

    async def relabel_pod(self, pod: ManagedPod, queue: str) -> None:
        """Give a StatefulSet's gated pod the set's queue name."""
        if not await self._patch_pod(pod, pod_sync.queue_patch(pod, queue)):
            return
        self.stats.relabelled += 1
        log.info("gave a statefulset's pod its queue name", pod=pod.key, queue=queue)

    async def let_go_pod(self, pod: ManagedPod) -> None:
        """Lift Kueue's scheduling gates and drop its finalizer, as the set's reconciler lets a pod go."""
        if not await self._patch_pod(pod, pod_sync.let_go_patch(pod)):
            return
        self.stats.let_go += 1
        log.info("let go of a statefulset's pod", pod=pod.key)


def holding_uid(config: SchedulerConfig, pods: list[ManagedPod]) -> str | None:
    """The uid of the StatefulSet holding the group's pods (their controller), while its integration is on: what
    the group's Workload carries as ``kueue.x-k8s.io/job-uid`` (Kueue #9897, its set reconciler's own set's uid).
    None for a group no StatefulSet holds: a plain pod group's Workload has no job uid."""
    controller = _controller(pods) if config.manages_statefulsets else None
    return controller[1].uid if controller is not None and controller[1].uid else None


def _controller(pods: list[ManagedPod]) -> tuple[str, o.OwnerReference] | None:
    """The namespace and owner reference of the StatefulSet controlling the group's pods, if one does."""
    for pod in pods:
        owner = _statefulset_owner(pod) if pod_group.held_by_statefulset(pod) else None
        if owner is not None:
            return pod.metadata.namespace, owner
    return None


def _statefulset_owner(pod: ManagedPod) -> o.OwnerReference | None:
    """The apps/v1 StatefulSet controlling the Pod, if one does."""
    return next((r for r in pod.metadata.owner_references
                 if r.controller and r.kind == STATEFUL_SETS.kind and r.api_version == STATEFUL_SETS.api_version), None)


def _now() -> int:
    return int(time.time() * 1000)
