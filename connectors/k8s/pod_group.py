"""Kueue's pod groups: Pods labelled ``kueue.x-k8s.io/pod-group-name`` that are admitted, run and end as one.

Pure: no client, no clock. Each Pod of a group names the group's size in ``kueue.x-k8s.io/pod-group-total-count``;
the group gets one Workload, named after the group, once that many Pods that can still run (not failed, not
deleted before reaching a node) exist. Its pod sets are the group's roles: Pods alike in what admission looks at
(the requests and ports of their containers, node selector, affinity, tolerations, runtime class, priority,
spread constraints, overhead and resource claims) share a role, named by an 8-character hash of those fields
(:func:`role_hash`, which the Pod webhook records in ``kueue.x-k8s.io/role-hash``). As Kueue
(``pkg/controller/jobs/pod/pod_controller.go``, its group parts):

* no Workload: a group none of whose Pods is gated or ended has its running Pods stopped ("Missing Workload;
  unable to restore pod templates") and, once none is left to stop, goes on as the others; none is made while
  a Pod of the group is ``Running`` (Kueue's ``IsActive``, :func:`holds_quota`; not as the newest Kueue,
  which no longer counts a ``Running`` Pod deleted past its grace period); failed or never-placed deleted
  Pods lose Kueue's finalizer; fewer runnable Pods than the total wait; Pods that disagree on the queue name
  or the total count get none, as does a group whose first Pod's ``kueue.x-k8s.io/pod-group-pod-index`` is
  not a whole number below the total (:func:`index_complaint`); runnable Pods beyond the total (the newest,
  gated ones first) are finalized and deleted (``ExcessPodDeleted``); the rest make the Workload — every Pod
  an owner (not the controller), ``kueue.x-k8s.io/is-group-workload: "true"``, at most 18 roles;
* a Workload of the group's name without that annotation, made for something else, is not the group's under
  ``PodIntegrationValidateGroupOwner`` (:func:`refuses_adoption`): the group gets none while it is there;
* a Workload: only the Pods of a role it has a pod set for are its own (:func:`of_its_roles`; others, such as a
  StatefulSet's pods of a new revision whose template changed what admission looks at, are neither started,
  stopped, removed nor counted: they stay gated); runnable Pods of a role beyond its pod set's count are excess
  too, removed the same way; failed Pods a runnable one replaces lose the finalizer; a group's succeeded Pods
  are its reclaimable pods (per role, ``ReclaimablePodsChanged``, under Kueue's ``ReclaimablePods`` gate: with
  it off none are counted), none for a serving group
  (``kueue.x-k8s.io/pod-group-serving: "true"``), which never finishes either, and whose Pods that end while
  being deleted no longer fill their role and, evicted, lose the finalizer at once (Kueue #14632);
* the group has finished once as many Pods succeeded as the total (or, with a Pod annotated
  ``kueue.x-k8s.io/retriable-in-group: "false"``, once none is still running): the Workload finishes
  ``Succeeded``, "Pods succeeded: <n>/<total>.", and then every Pod loses the finalizer; a group that has
  finished (not serving) and has no Workload (deleted since, by a retention policy say) gets none made
  again: its Pods only lose the finalizer, as Kueue's reconciler handles a finished job before one without a
  Workload;
* admitted (and shown so by the apiserver): every gated Pod is started with its role's pod set's admission —
  but never one whose Workload has a MultiKueue admission check: that runs on a worker, and its Pods here (a
  LeaderWorkerSet's, whose set has no managedBy, made by the set's controller here too) stay gated;
* the Workload being deleted (Kueue's ``resource-in-use`` finalizer holds it): every Pod not being deleted yet is
  stopped, whatever its state (``WorkloadDeleted``, "Workload is deleted"), and every Pod loses Kueue's finalizer;
  the integration then takes the finalizer off the Workload;
* evicted, or running while not admitted: every running Pod is stopped (``TerminationTarget``, then deleted); an
  evicted Workload's quota goes once no Pod of the group is ``Running``;
* a Workload none of the group's Pods has a role of, or whose maximum execution time is not its first Pod's
  (:func:`no_longer_matching`; not a prebuilt one): it no longer matches the group. As newer Kueue's reconciler (``ensureOneWorkload`` in ``jobframework/reconciler.go``): while
  a Pod is gated or ended and the Workload holds no quota, its spec is rewritten in place from the group's Pods
  (``UpdatedWorkload``, "Updated not matching Workload for suspended job: <ns>/<name>"); else it is deleted
  (``DeletedWorkload``), its running Pods stopped first (``NoMatchingWorkload``) unless one is gated or ended,
  and the group then gets a new Workload, made from its Pods, as any group without one;
* whatever the Workload, a Pod its StatefulSet holds (``kueue.x-k8s.io/pod-suspending-parent: statefulset``; the
  Pod webhook gives such pods no finalizer, as Kueue since #8530, so only those made before carry one) that
  has ended (``Succeeded``, ``Failed``), or is deleted before reaching a node, loses the finalizer, as Kueue's
  StatefulSet reconciler lets it go: so a StatefulSet scaled to zero or deleted gets rid of its pods, and one
  remakes a pod under the same name. That reconciler (of the template design,
  ``pkg/controller/jobs/statefulset/statefulset_reconciler.go``) also lets go of — lifts Kueue's scheduling gates
  (admission and topology) from and takes the finalizer off — the pods of the older revision during a rolling update (``status.currentRevision``
  differs from ``status.updateRevision`` and the pod's ``controller-revision-hash`` is the current one), and every
  pod once the StatefulSet is gone (:func:`let_go_by_statefulset`) — pods it orphaned too, found by their group's
  name as Kueue's reconciler finds them (:func:`statefulset_name`). The older revision's pods are let go only once
  the group's Workload is admitted (Kueue v0.19.7 #16401, v0.20.0 #16329): until then they stay gated, Kueue's
  finalizer on, as any of the group's pods. Before anything else, its gated pods take the StatefulSet's queue name
  when it changed (:func:`queue_relabel`, Kueue's fix of #9830).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from connectors.k8s import copied_metadata, workload_body
from connectors.k8s import max_not_ready as max_not_ready_count
from connectors.k8s.copied_metadata import ANNOTATIONS_MISMATCH, LABELS_MISMATCH, agreed
from connectors.k8s.job_events import MISSING_WORKLOAD, NOT_ADMITTED, QUEUE_LABEL
from connectors.k8s.pod_roles import (
    POD_INDEX_LABEL,
    ROLE_HASH_ANNOTATION,
    TOTAL_COUNT_ANNOTATION,
    group_name,
    role_hash,
    total_count,
)
from connectors.k8s.pod_sync import (
    EVICTED_REASON,
    NO_MATCHING_WORKLOAD_REASON,
    NOT_ADMITTED_REASON,
    WORKLOAD_DELETED_REASON,
    ManagedPod,
    finalizable,
    is_gated,
    is_ready,
    kueue_gated,
    pod_set,
)
from connectors.k8s.pod_webhook import SUSPENDING_PARENT
from connectors.k8s.pods_ready import is_admitted
from connectors.k8s.prebuilt import MISSING as PREBUILT_MISSING
from connectors.k8s.statefulset_webhook import workload_name as statefulset_group
from connectors.k8s.workload_body import compared_max_execution_seconds
from connectors.k8s.workload_finalizer import WORKLOAD_DELETED
from events import objects as o
from events.object_rules import MAX_POD_SETS
from projections import gates
from projections.cluster import ClusterState
from projections.in_use import FINALIZER as IN_USE_FINALIZER
from projections.workloads import (
    FINISHED,
    PROVREQ_ANNOTATION_PREFIX,
    WorkloadInfo,
    has_quota_reservation,
    on_hold,
)

IS_GROUP_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
RETRIABLE_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
NO_RUNNABLE_POD = "failed to find a runnable pod in the group"
PODS_STILL_RUNNING = "a pod of the group is still running: its workload is made once none is"
MAX_ROLES = MAX_POD_SETS
TOO_MANY_ROLES = f"pod group can't include more than {MAX_ROLES} roles"
"""One pod set per role within Kueue's ``jobframework.MaxPodSets``: 18 since v0.19 (#12819, which words the
message with that number; it was 8)."""
EXCESS_POD_DELETED = "ExcessPodDeleted"
ERR_WORKLOAD_COMPOSE = "ErrWorkloadCompose"
"""The Warning Event Kueue records on the Pod standing for a group too small to make its Workload."""
WORKLOAD_NAME_CONFLICT = "WorkloadNameConflict"
"""The Warning Event Kueue records on the Pod standing for a group whose name a Workload it did not make for a
group already has (:func:`refuses_adoption`)."""
OWNER_REFERENCES_ADDED = "OwnerReferencesAdded"
"""The Normal Event Kueue's pod reconciler records on a group's Workload once it made more of the group's Pods its
owners."""


def fast_admission(annotations: dict[str, str]) -> bool:
    """The group's Workload is made from its first runnable Pod, without waiting for the rest: Kueue looks only
    at whether the first Pod carries ``kueue.x-k8s.io/pod-group-fast-admission`` (any value)."""
    return FAST_ADMISSION_ANNOTATION in annotations


def is_group_workload(obs: o.Workload) -> bool:
    """A pod group's Workload, as Kueue marks it."""
    return obs.metadata.annotations.get(IS_GROUP_ANNOTATION) == "true"


def refuses_adoption(obs: o.Workload | None, validate_owner: bool) -> bool:
    """Whether the Workload ``obs`` named after a group is not the group's to take: under Kueue's
    ``PodIntegrationValidateGroupOwner`` (beta, on) one without ``kueue.x-k8s.io/is-group-workload: "true"`` was
    made by something else (a Job's, another integration's, a user's), and taking it would run the group on that
    Workload's quota. Off, the group takes the Workload of its name whatever made it."""
    return validate_owner and obs is not None and not is_group_workload(obs)


def name_conflict_message(group: str) -> str:
    """Kueue's words for a group whose name another kind of Workload has (``group``: the group's name)."""
    return (f'A Workload named "{group}" already exists but is not a pod group workload; this pod group cannot '
            "be admitted")


def group_of(pod: ManagedPod) -> str:
    """The group a Pod is in ("" none): as the integration read it (:attr:`ManagedPod.group`), else its label."""
    return pod.group or group_name(pod.metadata.labels)


def group_key(pod: ManagedPod) -> str:
    """``<namespace>/<group>`` of a Pod in a group, else ``""``."""
    name = group_of(pod)
    return f"{pod.metadata.namespace}/{name}" if name else ""


def role_of(pod: ManagedPod) -> str:
    """The Pod's role as recorded on it (the webhook's annotation, or the integration's when it decoded it)."""
    return pod.metadata.annotations.get(ROLE_HASH_ANNOTATION, "")


# --- which Pods count ------------------------------------------------------------------------------------------

def runnable_or_succeeded(pod: ManagedPod) -> bool:
    """May still run, runs or succeeded: not failed, and not deleted before reaching a node — nor, in a serving
    group (which counts no succeeded Pods), deleted and ended (:func:`ended_while_deleting`): as Kueue since
    #14632 (v0.18.7 #14795), else such a Pod, stuck deleting, still filled its role and its replacement was
    removed as excess."""
    if pod.metadata.deletion_timestamp and not pod.spec.node_name:
        return False
    if is_serving(pod) and ended_while_deleting(pod):
        return False
    return pod.status.phase != "Failed"


def ended_while_deleting(pod: ManagedPod) -> bool:
    """Being deleted (a stopped Pod) and ended: it will never run again."""
    return bool(pod.metadata.deletion_timestamp) and pod.status.phase in ("Succeeded", "Failed")


def _keep_first(pod: ManagedPod) -> tuple[bool, bool, str, str]:
    """Sort key of runnable Pods, those to keep first: with Kueue's finalizer, not gated, oldest."""
    return (not finalizable(pod), is_gated(pod), pod.metadata.creation_timestamp or "", pod.metadata.name)


def excess(pods: list[ManagedPod], count: int) -> list[ManagedPod]:
    """The runnable Pods beyond ``count``: the last by :func:`_keep_first`."""
    active = sorted((p for p in pods if runnable_or_succeeded(p)), key=_keep_first)
    return active[count:]


def finished(pods: list[ManagedPod], total: int) -> str | None:
    """The Workload's finish message once the group has finished, else None."""
    succeeded = sum(1 for p in pods if p.status.phase == "Succeeded")
    active = any(p.status.phase not in ("Succeeded", "Failed") for p in pods)
    unretriable = any(p.metadata.annotations.get(RETRIABLE_ANNOTATION) == "false" for p in pods)
    if succeeded == total or (not active and unretriable):
        return f"Pods succeeded: {succeeded}/{total}."
    return None


def _running(pod: ManagedPod) -> bool:
    """Not held back (gated or ended) and not being deleted: one to stop."""
    return not is_gated(pod) and pod.status.phase not in ("Succeeded", "Failed") and not pod.metadata.deletion_timestamp


# --- the next step ---------------------------------------------------------------------------------------------

NOTHING, WAIT, INVALID, CREATE, FINALIZE, FINISH, START, STOP, RELEASE, RECLAIM, DELETE, UPDATE = (
    "nothing", "wait", "invalid", "create", "finalize", "finish", "start", "stop", "release", "reclaim", "delete",
    "update")
NO_MATCHING_WORKLOAD = "No matching Workload; restoring pod templates according to existent Workload"
"""The ``Stopped`` message of a group's running Pods when its Workload no longer matches it (as for a Job)."""
STATEFULSET_OWNER = ("apps/v1", "StatefulSet")
REVISION_LABEL = "controller-revision-hash"
"""The label the StatefulSet controller gives each pod: the revision of the template it was made from."""


@dataclass(frozen=True)
class StatefulSetView:
    """What Kueue's StatefulSet reconciler reads of the StatefulSet holding a group: its status revisions, its
    queue name and replica count, or that it is gone."""

    current_revision: str = ""
    update_revision: str = ""
    gone: bool = False
    queue: str = ""
    replicas: int = 1


STATEFULSET_GONE = StatefulSetView(gone=True)


@dataclass(frozen=True)
class GroupStep:
    """What to do next with a group: ``remove`` (excess Pods: finalize and delete) first, ``finalize`` (Pods that
    only lose the finalizer), then ``action`` on ``pods`` (WAIT with reason ``ErrWorkloadCompose``: the Pod its
    Warning Event is recorded on)."""

    action: str = NOTHING
    pods: tuple[ManagedPod, ...] = ()
    remove: tuple[ManagedPod, ...] = ()
    finalize: tuple[ManagedPod, ...] = ()
    reason: str = ""
    message: str = ""
    release: bool = False
    kept: tuple[ManagedPod, ...] = field(default=())
    """CREATE, UPDATE: the Pods the Workload is made of."""
    reclaimable: tuple[tuple[str, int], ...] = ()
    """RECLAIM: the Workload's ``status.reclaimablePods`` as they should be, (role, count) by role."""
    let_go: tuple[ManagedPod, ...] = ()
    """Pods the StatefulSet reconciler ungates and finalizes (:func:`let_go_by_statefulset`), after ``action``
    (Kueue's pod reconciler acts on a new pod before that one does)."""
    relabel: tuple[ManagedPod, ...] = ()
    """Pods that take their StatefulSet's queue name, ``relabel_queue`` (:func:`queue_relabel`): nothing else is
    done with the group in that pass."""
    relabel_queue: str = ""


def _mismatch(pods: list[ManagedPod], first: ManagedPod, total: int) -> str:
    """Kueue's complaint about Pods (failed ones aside) that disagree with ``first`` on the queue or the total."""
    queue = first.metadata.labels.get(QUEUE_LABEL, "")
    for p in pods:
        if p.status.phase == "Failed":
            continue
        other = p.metadata.labels.get(QUEUE_LABEL, "")
        if other != queue:
            return (f"pods '{first.metadata.name}' and '{p.metadata.name}' has different queue names: "
                    f"{queue}!={other}")
        try:
            count = total_count(p.metadata.annotations)
        except ValueError as exc:
            return f"failed to extract '{TOTAL_COUNT_ANNOTATION}' annotation from the pod '{p.metadata.name}': {exc}"
        if count != total:
            return (f"pods '{first.metadata.name}' and '{p.metadata.name}' has different '{TOTAL_COUNT_ANNOTATION}' "
                    f"values: {total}!={count}")
    return ""


def next_step(pods: list[ManagedPod], wl: WorkloadInfo | None, *, managed: bool, admission_shown: bool,
              prebuilt: bool = False, fast_quota_release: bool = False, wl_deleting: bool = False,
              statefulset: StatefulSetView | None = None, remote: bool = False,
              eviction_unshown: bool = False, reclaim: bool = True) -> GroupStep:
    """What Kueue's reconciler does next with the group's Pods (sorted by name; the first stands for the group, as
    Kueue's first listed Pod does) and its Workload in the log (None: none yet, or none usable). ``prebuilt``: the
    group names its Workload (:mod:`connectors.k8s.pod_prebuilt`): none is made for it, and Kueue, finding it by
    name rather than matching it with its Pods, removes no excess Pods and lets go of no replaced ones.
    ``fast_quota_release``: Kueue's ``FastQuotaReleaseInPodIntegration`` gate (:func:`holds_quota`).
    ``wl_deleting``: the apiserver shows the Workload being deleted. Ended Pods a StatefulSet holds are let go
    besides (:func:`released_by_statefulset`), and, with ``statefulset`` (the StatefulSet holding the group, when
    known and its integration on), those :func:`let_go_by_statefulset` names (the older revision's only once
    ``wl`` is admitted, as the group would start its pods). ``remote``: the Workload runs on a
    MultiKueue worker (:func:`connectors.k8s.pod_sync.runs_on_a_worker`): its gated Pods here are never started.
    ``eviction_unshown``: ``wl`` is evicted in the log but the apiserver shows it admitted and not evicted yet
    (:func:`connectors.k8s.jobframework.eviction_unshown`): its Pods are neither stopped nor its quota given
    back until it does, as Kueue's reconciler acts on the Workload it reads. ``reclaim``: Kueue's
    ``ReclaimablePods`` gate; with it off the group's reclaimable pods are not counted (no RECLAIM step).
    First of all, the gated Pods whose queue name is not their StatefulSet's take it (:func:`queue_relabel`)."""
    relabel = queue_relabel(pods, statefulset) if managed and statefulset else ()
    if relabel:
        assert statefulset is not None
        return GroupStep(relabel=relabel, relabel_queue=statefulset.queue)
    step = _group_step(pods, wl, managed=managed, admission_shown=admission_shown, prebuilt=prebuilt,
                       fast_quota_release=fast_quota_release, wl_deleting=wl_deleting, remote=remote,
                       eviction_unshown=eviction_unshown, reclaim=reclaim)
    admitted = wl is not None and is_admitted(wl) and admission_shown and not remote
    let_go = let_go_by_statefulset(pods, statefulset, admitted=admitted) if managed and statefulset else ()
    if let_go:  # its patch takes the finalizer off too
        step = replace(step, let_go=let_go, finalize=tuple(p for p in step.finalize if p not in let_go))
    released = released_by_statefulset(pods) if managed else ()
    more = tuple(p for p in released if p not in step.finalize and p not in let_go
                 and not (step.action == FINALIZE and p in step.pods))
    return replace(step, finalize=step.finalize + more) if more else step


def queue_relabel(pods: list[ManagedPod], statefulset: StatefulSetView) -> tuple[ManagedPod, ...]:
    """The group's gated Pods a StatefulSet holds whose queue name is not the StatefulSet's, which Kueue's StatefulSet
    reconciler (``syncQueueLabel``, its fix of kubernetes-sigs/kueue#9830) gives the set's: a set sent to a missing
    queue is sent to another while none of its replicas is ready (its validating webhook allows it then), and its
    pods, gated, never become ready for the controller to roll them to the template the new name went into. None
    while the set is scaled to zero or names no queue, as Kueue. Only gated Pods: Kueue patches every Pod and its
    Pod webhook refuses the change on one already started, a patch that never goes through."""
    if statefulset.gone or not statefulset.queue or statefulset.replicas == 0:
        return ()
    return tuple(p for p in pods if held_by_statefulset(p) and is_gated(p)
                 and p.metadata.labels.get(QUEUE_LABEL, "") != statefulset.queue)


def let_go_by_statefulset(pods: list[ManagedPod], statefulset: StatefulSetView, *,
                          admitted: bool) -> tuple[ManagedPod, ...]:
    """The group's Pods a StatefulSet holds that Kueue's StatefulSet reconciler ungates and finalizes, those still
    gated (by either of Kueue's gates) or carrying the finalizer: every one once the StatefulSet is gone; during a
    rolling update (its current revision not the update one yet), those of the current revision, which the
    controller is to replace, but only once the group's Workload is ``admitted`` (as the group would start its
    pods: shown so, and not run on a MultiKueue worker). Kueue v0.19.7 #16401 / v0.20.0 #16329: ungated before,
    they ran on no quota; until then they stay gated with the finalizer, held by the group's rules."""
    updating = admitted and statefulset.current_revision != statefulset.update_revision

    def let_go(p: ManagedPod) -> bool:
        return statefulset.gone or (updating and p.metadata.labels.get(REVISION_LABEL) == statefulset.current_revision)

    return tuple(p for p in pods if held_by_statefulset(p) and (kueue_gated(p) or finalizable(p)) and let_go(p))


def statefulset_owners(obs: o.Workload, name: str, uid: str, replicas: int) -> list[dict[str, Any]] | None:
    """The group Workload's owner references as Kueue's StatefulSet reconciler keeps them (#4799), for StatefulSet
    ``name`` (``uid``) holding the group; None when they already are so. While the set has replicas it is made an
    owner, but not the controller. It is appended after the pods, so the Workload's first owner, the one that names
    its kind, stays a Pod. Scaled to zero, an owner stays one (Kueue v0.20, #12233): the Workload is put on hold
    instead (:func:`hold_step`) and stays while the set is there, whatever becomes of its pods. As Kueue's
    ``HasOwnerReference``, a reference to a set of that name counts whatever its uid."""
    if replicas == 0 or owned_by_statefulset(obs, name):
        return None
    refs = [msgspec.to_builtins(r) for r in obs.metadata.owner_references]
    return [*refs, {"apiVersion": STATEFULSET_OWNER[0], "kind": STATEFULSET_OWNER[1], "name": name, "uid": uid}]


def owned_by_statefulset(obs: o.Workload, name: str) -> bool:
    """StatefulSet ``name`` is among the Workload's owners (any uid, as Kueue's ``HasOwnerReference``)."""
    return any((r.api_version, r.kind, r.name) == (*STATEFULSET_OWNER, name) for r in obs.metadata.owner_references)


HOLD, RESIZE, RELEASE_HOLD = "hold", "resize", "release-hold"
"""What :func:`hold_step` asks for."""


def hold_step(wl: WorkloadInfo, obs: o.Workload, name: str, replicas: int) -> str | None:
    """What Kueue v0.20's StatefulSet reconciler does next with the Workload of the group StatefulSet ``name`` holds
    (#12233, #15279). Scaled to zero: :data:`HOLD` an active, unfinished Workload not on hold yet that the set owns
    or that holds quota. Scaled up while on hold: first :data:`RESIZE` it to ``replicas`` (its one pod set's count)
    once the apiserver shows it without a quota reservation, then :data:`RELEASE_HOLD`. None: nothing (or wait for
    the Workload that shows the hold written)."""
    if replicas == 0:
        if (wl.phase != FINISHED and wl.active and not on_hold(wl)
                and (owned_by_statefulset(obs, name) or wl.reserving)):
            return HOLD
        return None
    if not on_hold(wl):
        return None
    if len(obs.spec.pod_sets) == 1 and obs.spec.pod_sets[0].count != replicas:
        return None if has_quota_reservation(obs.status) else RESIZE
    return RELEASE_HOLD


def resize_patch(obs: o.Workload, replicas: int) -> list[dict[str, Any]]:
    """A JSON patch (RFC 6902) giving the Workload's one pod set the set's replica count, applied only to the
    version read (its resourceVersion tested first)."""
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": obs.metadata.resource_version},
            {"op": "replace", "path": "/spec/podSets/0/count", "value": replicas}]


def statefulset_name(pod: ManagedPod) -> str | None:
    """The name of the StatefulSet holding a Pod its webhook marked: its controller's; for an orphan (no controller
    left: its StatefulSet deleted with ``--cascade=orphan``), the one whose group it is in, as Kueue's StatefulSet
    reconciler finds the pods by the group name it derives from the StatefulSet's name: the Pod's name less its
    ordinal, when that gives the group's name (a StatefulSet names its pods ``<name>-<ordinal>``). None: neither."""
    if not held_by_statefulset(pod):
        return None
    controller = next((r for r in pod.metadata.owner_references if r.controller), None)
    if controller is not None:
        return controller.name if (controller.api_version, controller.kind) == STATEFULSET_OWNER else None
    name, _, ordinal = pod.metadata.name.rpartition("-")
    group = group_of(pod)
    if not name or not ordinal.isdigit() or not group:
        return None
    return name if group in (statefulset_group(name), statefulset_group(name, short=True)) else None


def held_by_statefulset(pod: ManagedPod) -> bool:
    """A pod made from a StatefulSet's template that Kueue's webhook marked."""
    return pod.metadata.annotations.get(SUSPENDING_PARENT) == "statefulset"


def released_by_statefulset(pods: list[ManagedPod]) -> tuple[ManagedPod, ...]:
    """The group's Pods a StatefulSet holds that have ended, or are being deleted without ever reaching a node (so
    will never end), and still carry the finalizer: Kueue's StatefulSet reconciler removes it whatever the
    Workload (a serving group never finishes, and a StatefulSet remakes a pod, or scales to zero, or is deleted,
    only once the old one is gone)."""
    return tuple(p for p in pods if held_by_statefulset(p)
                 and (p.status.phase in ("Succeeded", "Failed") or (p.metadata.deletion_timestamp
                                                                   and not p.spec.node_name))
                 and finalizable(p))


def _group_step(pods: list[ManagedPod], wl: WorkloadInfo | None, *, managed: bool, admission_shown: bool,
                prebuilt: bool, fast_quota_release: bool, wl_deleting: bool, remote: bool = False,
                eviction_unshown: bool = False, reclaim: bool = True) -> GroupStep:
    if not pods or not managed:
        return GroupStep()
    first = pods[0]
    try:
        total = total_count(first.metadata.annotations)
    except ValueError as exc:
        return GroupStep(INVALID, message=str(exc))
    if wl is None:
        if prebuilt:
            return _missing_prebuilt(pods, total)
        if not is_serving(first) and finished(pods, total) is not None:
            return GroupStep(FINALIZE, tuple(p for p in pods if finalizable(p)))
        step = _without_workload(pods, first, total)
        if step.action != STOP and any(holds_quota(p, fast_quota_release) for p in pods):
            return GroupStep(WAIT, message=PODS_STILL_RUNNING)  # Kueue's IsActive: none made while one runs
        return step
    if not prebuilt and no_longer_matching(pods, wl):
        return _not_matching(pods, first, total, wl)
    if wl.phase == FINISHED:
        return GroupStep(FINALIZE, tuple(p for p in pods if finalizable(p)))
    if wl_deleting:
        return GroupStep(STOP, tuple(p for p in pods if not p.metadata.deletion_timestamp),
                         finalize=tuple(p for p in pods if finalizable(p)), reason=WORKLOAD_DELETED_REASON,
                         message=WORKLOAD_DELETED)
    step = _with_workload(pods, first, total, wl, admission_shown and not remote, prebuilt,
                          fast_quota_release, eviction_unshown, reclaim)
    if step.action == FINALIZE or prebuilt:
        return step
    finalize = _replaced_by_role(pods, wl)
    return replace(step, finalize=finalize + tuple(p for p in _stopped_and_ended(pods, wl) if p not in finalize))


def _stopped_and_ended(pods: list[ManagedPod], wl: WorkloadInfo) -> tuple[ManagedPod, ...]:
    """The Pods of an evicted serving group that its eviction stopped and that have ended since: they lose Kueue's
    finalizer at once, without waiting for a replacement (Kueue #14632, in v0.18.7 by #14795: a StatefulSet
    cannot remake a Pod under the same name while the old one is held). A batch group keeps its succeeded Pods
    counted, and its failed ones until replaced, as before."""
    if not wl.evicted or not is_serving(pods[0]):
        return ()
    return tuple(p for p in pods if ended_while_deleting(p) and finalizable(p))


def no_longer_matching(pods: list[ManagedPod], wl: WorkloadInfo) -> bool:
    """The Workload keeps none of the group's Pods: none has a role it has a pod set for, or its maximum execution
    time is not the one the first Pod's ``kueue.x-k8s.io/max-exec-time-seconds`` says (Kueue's pod reconciler
    compares that first: the label may change while the Pods are gated). Kueue then finds it not matching,
    whatever its state."""
    if not pods:
        return False
    max_exec = compared_max_execution_seconds(pods[0].metadata.labels)
    return wl.max_execution_seconds != max_exec or not of_its_roles(pods, wl)


def _not_matching(pods: list[ManagedPod], first: ManagedPod, total: int, wl: WorkloadInfo) -> GroupStep:
    """What becomes of the Workload that no longer matches the group. As newer Kueue's reconciler: while the group
    is held back (a Pod gated or ended: Kueue's group is suspended then) and the Workload holds no quota, it is
    rewritten in place from the group's Pods (:data:`UPDATE`, the Pods a new one would be made of, under the
    same rules; a group not ready for one waits as without one). Otherwise it is deleted, its running Pods
    stopped first unless one is held back or the group has finished. A finished Workload is deleted as before."""
    held = any(is_gated(p) or p.status.phase in ("Succeeded", "Failed") for p in pods)
    if held and not wl.reserving and wl.phase != FINISHED:
        anew = _without_workload(pods, first, total)
        return replace(anew, action=UPDATE) if anew.action == CREATE else anew
    done = not is_serving(pods[0]) and finished(pods, total) is not None
    running = () if held or done else tuple(p for p in pods if _running(p))
    return GroupStep(DELETE, running, reason=NO_MATCHING_WORKLOAD_REASON, message=NO_MATCHING_WORKLOAD)


def _missing_prebuilt(pods: list[ManagedPod], total: int) -> GroupStep:
    """A group whose prebuilt Workload is missing (or not usable): finished, its Pods are let go; else its running
    Pods are stopped ("missing workload") and the rest wait."""
    if finished(pods, total) is not None:
        return GroupStep(FINALIZE, tuple(p for p in pods if finalizable(p)))
    running = tuple(p for p in pods if _running(p))
    if running:
        return GroupStep(STOP, running, reason=NO_MATCHING_WORKLOAD_REASON, message=PREBUILT_MISSING)
    return GroupStep()


def _with_workload(pods: list[ManagedPod], first: ManagedPod, total: int, wl: WorkloadInfo,
                   admission_shown: bool, prebuilt: bool = False, fast_quota_release: bool = False,
                   eviction_unshown: bool = False, reclaim: bool = True) -> GroupStep:
    if not prebuilt:
        pods = of_its_roles(pods, wl)
    remove = () if prebuilt else _excess_by_role(pods, wl)
    left = [p for p in pods if p not in remove]
    serving = is_serving(first)
    message = None if serving else finished(left, total)
    if message is not None:
        return GroupStep(FINISH, remove=remove, reason="Succeeded", message=message)
    reclaimable = () if serving or not reclaim else reclaimable_pods(left)
    if reclaim and reclaimable != wl.reclaimable:
        return GroupStep(RECLAIM, remove=remove, reclaimable=reclaimable)
    running = tuple(p for p in left if _running(p))
    if wl.evicted:
        if eviction_unshown:  # its status write may still be refused: as Kueue's reconciler, wait for it
            return GroupStep(remove=remove)
        evicted = wl.condition("Evicted")
        release = wl.reserving and not wl.job_stopped
        if running:
            return GroupStep(STOP, running, remove, reason=f"{EVICTED_REASON}DueTo{wl.evicted}",
                             message=evicted.message if evicted else "", release=release)
        if release and not any(holds_quota(p, fast_quota_release) for p in pods):
            return GroupStep(RELEASE, remove=remove)
        return GroupStep(remove=remove)
    gated = tuple(p for p in left if is_gated(p) and runnable_or_succeeded(p))
    if is_admitted(wl):
        if gated and admission_shown:
            return GroupStep(START, gated, remove)
        return GroupStep(remove=remove)
    if running:
        return GroupStep(STOP, running, remove, reason=NOT_ADMITTED_REASON, message=NOT_ADMITTED)
    return GroupStep(remove=remove)


def of_its_roles(pods: list[ManagedPod], wl: WorkloadInfo) -> list[ManagedPod]:
    """The group's Pods of a role the Workload has a pod set for: the only ones Kueue counts, starts, stops or
    removes as excess. Pods of another role (a StatefulSet's new revision, its template changed in what admission
    looks at) are left as they are: gated ones stay gated."""
    roles = {ps.name for ps in wl.spec_sets}
    return [p for p in pods if role_of(p) in roles]


def _without_workload(pods: list[ManagedPod], first: ManagedPod, total: int) -> GroupStep:
    dead = tuple(p for p in pods if not runnable_or_succeeded(p) and finalizable(p))
    if not any(is_gated(p) or p.status.phase in ("Succeeded", "Failed") for p in pods):
        running = tuple(p for p in pods if _running(p))
        if running:  # else nothing is left to stop (every Pod being deleted): Kueue goes on to make one
            return GroupStep(STOP, running, finalize=dead, reason=NO_MATCHING_WORKLOAD_REASON,
                             message=MISSING_WORKLOAD)
    active = [p for p in pods if runnable_or_succeeded(p)]
    bad_index = index_complaint(first, total)
    if bad_index:
        return GroupStep(INVALID, finalize=dead, message=bad_index)
    fast = fast_admission(first.metadata.annotations)
    if len(active) < total and not fast:
        return GroupStep(WAIT, (first,), finalize=dead, reason=ERR_WORKLOAD_COMPOSE,
                         message=f"'{group_of(first)}' group has fewer runnable pods than expected")
    complaint = _mismatch(pods, first, total)
    if complaint:
        return GroupStep(INVALID, finalize=dead, message=complaint)
    if not active:
        return GroupStep(WAIT, finalize=dead, message=NO_RUNNABLE_POD)
    remove = tuple(excess(pods, total))
    kept = tuple(p for p in active if p not in remove)
    return GroupStep(CREATE, remove=remove, finalize=dead, kept=kept)


def index_complaint(first: ManagedPod, total: int) -> str:
    """What is wrong with the index the Pod standing for the group gives itself in
    ``kueue.x-k8s.io/pod-group-pod-index`` ("" nothing, or no such label): as Kueue's reconciler reads it
    before composing the group's Workload (``validatePodGroupMetadata``), a whole number (Go's ``Atoi``: an
    optional sign, then digits) from 0 to below the group's total; else the group gets no Workload (the
    webhooks do not check it)."""
    value = first.metadata.labels.get(POD_INDEX_LABEL)
    if value is None:
        return ""
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not all("0" <= c <= "9" for c in digits) or (value[0] == "-" and int(digits) != 0):
        return f"pod '{first.metadata.name}': '{POD_INDEX_LABEL}' is {value!r}, not a whole number from 0"
    if int(digits) >= total:
        return (f"pod '{first.metadata.name}': '{POD_INDEX_LABEL}' is {int(digits)}, not below the group's "
                f"total count {total}")
    return ""


def holds_quota(pod: ManagedPod, fast_quota_release: bool) -> bool:
    """Whether the Pod is active as Kueue's ``IsActive`` reads it: it keeps an evicted group's quota held,
    and a group without a Workload gets none made while one of its Pods is (:func:`_group_step`). Active:
    ``Running`` — and, under ``FastQuotaReleaseInPodIntegration`` (alpha, off), not being deleted, so that the
    quota goes as soon as every stopped Pod is terminating rather than once each has stopped running. Not
    done: the newest Kueue no longer counts a ``Running`` Pod deleted past its grace period (one stuck on a
    lost node, say); here it stays active until it is gone (that would need the grace period, and the log's
    time passed into this pure decision)."""
    if pod.status.phase != "Running":
        return False
    return not (fast_quota_release and pod.metadata.deletion_timestamp)


def _excess_by_role(pods: list[ManagedPod], wl: WorkloadInfo) -> tuple[ManagedPod, ...]:
    """The runnable Pods of each of the Workload's roles beyond its pod set's count (the spec's: reclaimable Pods
    are still the group's)."""
    out: list[ManagedPod] = []
    for ps in wl.spec_sets:
        out += excess([p for p in pods if role_of(p) == ps.name], ps.count)
    return tuple(out)


STILL_ACTIVE = "~"
"""Sorts after every RFC 3339 time: what :func:`last_active` says of a Pod with neither a failure nor a
deletion time (Kueue reads the clock's now there, later than both)."""


def last_active(pod: ManagedPod) -> str:
    """When the Pod was last seen active, as Kueue's ``lastActiveTime`` reads it: the earlier of the time its
    containers were found failed (its ``ContainersReady`` condition, False with reason ``Failed``, the Pod
    phase's name: the condition's ``lastTransitionTime``) and its deletion; :data:`STILL_ACTIVE` when it has
    neither."""
    failed_at = STILL_ACTIVE
    ready = next((c for c in pod.status.conditions if c.type == "ContainersReady"), None)
    failed = ready is not None and ready.status == "False" and ready.reason == "Failed"
    if failed and ready is not None and ready.last_transition_time:
        failed_at = ready.last_transition_time
    return min(failed_at, pod.metadata.deletion_timestamp or STILL_ACTIVE)


def _keep_inactive_first(pods: list[ManagedPod]) -> list[ManagedPod]:
    """Failed (or never placed and deleted) Pods, those to keep first: with Kueue's finalizer, then the last to
    have been active (:func:`last_active`), then the oldest (Kueue's ``sortInactivePods``)."""
    out = sorted(pods, key=lambda p: (p.metadata.creation_timestamp or "", p.metadata.name))
    out.sort(key=last_active, reverse=True)
    out.sort(key=lambda p: not finalizable(p))
    return out


def _replaced_by_role(pods: list[ManagedPod], wl: WorkloadInfo) -> tuple[ManagedPod, ...]:
    """The inactive Pods of each role that runnable ones replace (as many as the role's runnable Pods and
    inactive ones together exceed its pod set's count, the last by :func:`_keep_inactive_first`): they lose
    Kueue's finalizer."""
    out: list[ManagedPod] = []
    for ps in wl.spec_sets:
        role = [p for p in pods if role_of(p) == ps.name]
        inactive = [p for p in role if not runnable_or_succeeded(p)]
        replaced = min(len(inactive), len(role) - ps.count)
        if replaced > 0:
            out += [p for p in _keep_inactive_first(inactive)[-replaced:] if finalizable(p)]
    return tuple(out)


def kept(pods: list[ManagedPod], wl: WorkloadInfo) -> list[ManagedPod]:
    """The Pods Kueue's reconciler keeps in the group once it finds its Workload matching, by name: per role, its
    runnable (or succeeded) Pods up to the pod set's count (the rest are excess), and the inactive ones no runnable
    Pod replaces (:func:`_keep_inactive_first`). They are the Workload's owners
    (:func:`connectors.k8s.pod_prebuilt.owners_patch`)."""
    out: list[ManagedPod] = []
    for ps in wl.spec_sets:
        role = [p for p in pods if role_of(p) == ps.name]
        active = sorted((p for p in role if runnable_or_succeeded(p)), key=_keep_first)[:ps.count]
        inactive = _keep_inactive_first([p for p in role if not runnable_or_succeeded(p)])
        replaced = max(0, min(len(inactive), len(inactive) + len(active) - ps.count))
        out += active + inactive[:len(inactive) - replaced]
    return sorted(out, key=lambda p: p.metadata.name)


def owners_added_message(count: int) -> str:
    """Kueue's ``OwnerReferencesAdded`` Event message (on the Workload)."""
    return f"Added {count} owner reference(s)"


def absent_pods(pods: list[ManagedPod], wl: WorkloadInfo) -> int:
    """How many Pods the group's Workload misses: per role, its pod set's count less its runnable (or succeeded)
    Pods; under fast admission, one per role that has none at all (its Pods are still to come)."""
    fast = bool(pods) and fast_admission(pods[0].metadata.annotations)
    absent = 0
    for ps in wl.spec_sets:
        active = sum(1 for p in pods if role_of(p) == ps.name and runnable_or_succeeded(p))
        if fast:
            absent += 1 if ps.count > 0 and active == 0 else 0
        else:
            absent += max(0, ps.count - active)
    return absent


def is_serving(first: ManagedPod) -> bool:
    """A serving group (``kueue.x-k8s.io/pod-group-serving: "true"`` on the Pod standing for it): it never
    finishes, however many of its Pods succeeded, and none of its Pods is reclaimable."""
    return first.metadata.annotations.get(SERVING_ANNOTATION) == "true"


def reclaimable_pods(pods: list[ManagedPod]) -> tuple[tuple[str, int], ...]:
    """The succeeded Pods of each role, (role, count) by role: what a group that is not serving no longer needs
    quota for (Kueue's ``ReclaimablePods`` of a pod group)."""
    counts: dict[str, int] = {}
    for p in pods:
        if p.status.phase == "Succeeded":
            counts[role_of(p)] = counts.get(role_of(p), 0) + 1
    return tuple(sorted(counts.items()))


def pods_ready(pods: list[ManagedPod], *, succeeded_ready: bool = False, max_not_ready: bool = False) -> bool:
    """The group's pods are ready when every one of them is (Kueue's ``PodsReady`` for a group).
    ``succeeded_ready`` (Kueue's ``PodIntegrationCountSucceededPodsAsReady``): a succeeded Pod of a group that is
    not serving counts as ready, so a group whose first Pods completed is not evicted at the recovery timeout.
    ``max_not_ready`` (Kueue's ``WaitForPodsReadyMaxNotReady``): with a budget every Pod names
    (:mod:`connectors.k8s.max_not_ready`), the group is ready once that few of its total count lack a ready Pod."""
    if not pods:
        return False
    done_counts = succeeded_ready and not is_serving(pods[0])
    counted = [is_ready(p) or (done_counts and p.status.phase == "Succeeded") for p in pods]
    if max_not_ready:
        try:
            total = total_count(pods[0].metadata.annotations)
        except ValueError:
            total = 0
        budget = max_not_ready_count.group_budget((p.metadata.annotations for p in pods), total)
        if budget:
            return max_not_ready_count.ready_within_budget(total, sum(counted), budget)
    return all(counted)


# --- the Workload ----------------------------------------------------------------------------------------------

def pod_sets(state: ClusterState, raw_pods: list[dict[str, Any]], fast_total: int | None = None
             ) -> list[dict[str, Any]]:
    """One pod set per role, named by its hash, of as many Pods as have that role, made from the first of them
    (:func:`connectors.k8s.pod_sync.pod_set`: its spec, its topology request under TAS). Ordered, under
    ``PodGroupSchedulingShapeOrdering`` (Kueue v0.20, on by default), by its scheduling shape (the hash of what
    admission looks at of its Pods' spec, whatever ``kueue.x-k8s.io/role-hash`` a client set), then by the first
    name of its Pods; without the gate, by name: the order the flavor assigner goes through them.
    ``fast_total`` (fast admission): the one pod set of the first Pod's role, of the group's whole total, whatever
    the roles of the Pods still to come."""
    if fast_total is not None:
        first = raw_pods[0]
        return [pod_set(state, first, raw_role(first), fast_total)]
    by_role: dict[str, dict[str, Any]] = {}
    order: dict[str, tuple[str, str]] = {}
    for raw in raw_pods:
        role, pod_name = raw_role(raw), raw["metadata"]["name"]
        if role in by_role:
            by_role[role]["count"] += 1
            order[role] = min(order[role], (role_hash(raw.get("spec") or {}), pod_name))
        else:
            by_role[role] = pod_set(state, raw, role, 1)
            order[role] = (role_hash(raw.get("spec") or {}), pod_name)
    if not state.gate(gates.POD_GROUP_SCHEDULING_SHAPE_ORDERING):
        return [by_role[name] for name in sorted(by_role)]
    return [by_role[name] for name in sorted(by_role, key=lambda name: (*order[name], name))]


def raw_role(raw: dict[str, Any]) -> str:
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ROLE_HASH_ANNOTATION) or role_hash(raw.get("spec") or {})


def owner_ref(raw: dict[str, Any]) -> dict[str, Any]:
    """A Pod as one of the group Workload's owners (not its controller)."""
    meta = raw["metadata"]
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}


def owners_with(obs: o.Workload, raw_pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Workload's owner references with every Pod of ``raw_pods`` (as stored) that is not one yet added."""
    refs = [{"apiVersion": r.api_version, "kind": r.kind, "name": r.name, "uid": r.uid,
             **({"controller": True} if r.controller else {}),
             **({"blockOwnerDeletion": True} if r.block_owner_deletion else {})}
            for r in obs.metadata.owner_references]
    known = {r["uid"] for r in refs}
    return refs + [owner_ref(raw) for raw in raw_pods if raw["metadata"]["uid"] not in known]


def workload_for(state: ClusterState, raw_pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The group's Workload, made of ``raw_pods`` (as stored; the first stands for the group): named after the
    group, a pod set per role (under fast admission one, :func:`pod_sets`), the queue name, priority and
    ``maximumExecutionTimeSeconds`` of the first Pod, its
    ProvisioningRequest annotations and ``kueue.x-k8s.io/is-group-workload: "true"``, every Pod an owner, Kueue's
    ``resource-in-use`` finalizer, and the labels and annotations to copy that the Pods carry
    (:mod:`connectors.k8s.copied_metadata`). Raises ValueError with more than 18 roles or Pods disagreeing on a
    value to copy, and what :func:`connectors.k8s.pod_sync.workload_for` raises."""
    first = raw_pods[0]["metadata"]
    labels, annotations = first.get("labels") or {}, first.get("annotations") or {}
    fast_total = total_count(annotations) if fast_admission(annotations) else None
    sets = pod_sets(state, raw_pods, fast_total)
    if len(sets) > MAX_ROLES:
        raise ValueError(TOO_MANY_ROLES)
    spec = workload_body.spec(state, labels, sets, (raw_pods[0].get("spec") or {}).get("priorityClassName"))
    wl_annotations = {k: v for k, v in annotations.items() if k.startswith(PROVREQ_ANNOTATION_PREFIX)}
    wl_annotations[IS_GROUP_ANNOTATION] = "true"
    wl_annotations.update(copied_metadata.gated_annotations(state, annotations, copied_metadata.PODS_READY_ONLY))
    named_in = annotations if state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS) else None
    meta: dict[str, Any] = {"name": group_name(labels, named_in), "namespace": first["namespace"],
                            "annotations": wl_annotations, "finalizers": [IN_USE_FINALIZER],
                            "ownerReferences": [owner_ref(r) for r in raw_pods]}
    _copy_agreed(state, raw_pods, meta)
    return workload_body.workload(meta, spec)


def _copy_agreed(state: ClusterState, raw_pods: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """Give the group's Workload (``meta``) the labels and annotations to copy that its Pods carry, over its own
    (Kueue copies them last); ValueError, Kueue's words, when two Pods carry one with different values."""
    keys = copied_metadata.keys(state)
    if not keys.labels and not keys.annotations:
        return
    pod_metas = [r["metadata"] for r in raw_pods]
    labels = agreed(keys.labels, [m.get("labels") or {} for m in pod_metas], LABELS_MISMATCH)
    annotations = agreed(keys.annotations, [m.get("annotations") or {} for m in pod_metas], ANNOTATIONS_MISMATCH)
    if labels:
        meta["labels"] = labels
    meta["annotations"].update(annotations)
