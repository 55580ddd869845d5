"""What Kueue's pod reconciler does next with a single plain Pod, decided from the Pod and its Workload alone.

Pure: no client, no clock. :mod:`connectors.k8s.pods_integration` reads the Pod (its own watch of the Pods Kueue
manages) and the Workload (the log's, and as the apiserver stores it) and carries out the :class:`Step` this
says, one a pass, in Kueue's order (``pkg/controller/jobframework/reconciler.go`` over
``pkg/controller/jobs/pod/pod_controller.go``, for a Pod that is no pod group's):

1. a Pod being deleted only loses Kueue's finalizer (so it can go);
2. a Pod in a namespace Kueue does not manage, or without a queue name, is left alone;
3. no Workload yet: one that has ended is only finalized; one already running (its gate lifted by someone else)
   is stopped ("Missing Workload; unable to restore pod templates"); a gated one gets its Workload
   (:func:`workload_for`) — unless it names a prebuilt one (:mod:`connectors.k8s.pod_prebuilt`): then none is
   made, and a running one is stopped with "missing workload";
4. a finished Workload: the Pod is finalized (``FinishedWorkload`` on it);
5. a Workload being deleted (Kueue's ``resource-in-use`` finalizer holds it): the Pod is stopped, whatever its
   state — condition ``TerminationTarget`` (``WorkloadDeleted``, "Workload is deleted") and deleted — and the
   integration then takes the finalizer off the Workload (:mod:`connectors.k8s.workload_finalizer`);
6. the Pod ended (``Succeeded``/``Failed``): its Workload is finished, with the Pod's ``status.message``;
7. an evicted Workload, once the apiserver shows the eviction (its status write may still be refused, then
   taken back; a deactivation at once): a running Pod is stopped — marked with the condition
   ``TerminationTarget`` (``WorkloadEvictedDueTo<reason>``, the eviction's message) and deleted — and, as
   Kueue counts no pod of a single Pod active, the quota it held is given back at once (``JobStopped``), as it
   is for a Pod evicted before it ran (still gated: nothing to stop);
8. a gated Pod whose Workload is admitted, as the apiserver shows it too, is started: the admission gate is
   lifted and what the admission adds merged in (:mod:`connectors.k8s.podsetinfo`) — unless the Workload has a
   MultiKueue admission check (:func:`runs_on_a_worker`): it runs on a worker then, and its Pods here stay
   gated, as Kueue's reconciler skips local execution for Pods;
9. a running Pod whose Workload is not admitted is stopped ("Not admitted by cluster queue").

Under waitForPodsReady the Workload's PodsReady follows the Pod's ``Ready`` condition as Kueue's reconciler
writes it (:func:`pods_ready_change`), as for Jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from connectors.k8s import copied_metadata, workload_body
from connectors.k8s.copied_metadata import copied
from connectors.k8s.job_events import MISSING_WORKLOAD, NOT_ADMITTED, QUEUE_LABEL
from connectors.k8s.jobs import topology_request
from connectors.k8s.pod_roles import POD_INDEX_LABEL
from connectors.k8s.pod_webhook import ADMISSION_GATE, FINALIZER, MANAGED, MANAGED_LABEL
from connectors.k8s.pods_ready import is_admitted, pods_ready_transition
from connectors.k8s.podsetinfo import TOPOLOGY_GATE, PodSetInfo, merge
from connectors.k8s.prebuilt import MISSING as PREBUILT_MISSING
from connectors.k8s.resources import JOB_UID_LABEL
from connectors.k8s.workload_finalizer import WORKLOAD_DELETED
from connectors.k8s.workload_names import owner_workload_name
from events import objects as o
from kueue_es.scheduler.multikueue import check_of
from projections import gates
from projections.cluster import ClusterState
from projections.in_use import FINALIZER as IN_USE_FINALIZER
from projections.workloads import FINISHED, WorkloadInfo, topology_gated

TERMINATION_TARGET = "TerminationTarget"
"""The Pod condition Kueue sets on a Pod it stops, before it deletes it."""
NOT_ADMITTED_REASON, NO_MATCHING_WORKLOAD_REASON, EVICTED_REASON = "NotAdmitted", "NoMatchingWorkload", "WorkloadEvicted"
WORKLOAD_DELETED_REASON = "WorkloadDeleted"

NOTHING, FINALIZE, CREATE, STOP, RELEASE, FINISH, START = (
    "nothing", "finalize", "create", "stop", "release", "finish", "start")


class PodCondition(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    type: str
    status: str = ""
    reason: str | None = None
    last_transition_time: str | None = None
    """(Either may be null as a client writes it.) Of ``ContainersReady``: when a failed Pod's containers were
    found failed, which orders the failed Pods of a group a replacement lets go
    (:func:`connectors.k8s.pod_group.last_active`)."""


class ManagedPodSpec(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    scheduling_gates: list[dict[str, Any]] = []
    node_selector: dict[str, str] = {}
    tolerations: list[o.Toleration] = []
    node_name: str = ""
    priority_class_name: str = ""
    containers: list[o.Container] = []
    init_containers: list[o.Container] = []
    resources: o.ResourceRequirements | None = None
    resource_claims: list[o.PodResourceClaim] = []
    """With the containers, tolerations and pod-level ``resources``: what a prebuilt Workload is compared with
    (:mod:`connectors.k8s.pod_prebuilt`)."""


class ManagedPodStatus(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    phase: str = ""
    message: str = ""
    conditions: list[PodCondition] = []


class ManagedPod(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """What the pod integration reads of a Pod (the Workload's template comes from the Pod as stored, read when
    the Workload is made)."""

    metadata: o.ObjectMeta
    spec: ManagedPodSpec = ManagedPodSpec()
    status: ManagedPodStatus = ManagedPodStatus()
    group: str = ""
    """Not a Pod field: the pod group the integration read it in, under ``WorkloadIdentifierAnnotations`` its
    ``kueue.x-k8s.io/pod-group-name`` annotation first (:func:`connectors.k8s.pod_roles.group_name`); empty:
    read from its label (:func:`connectors.k8s.pod_group.group_of`)."""

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


@dataclass(frozen=True)
class Step:
    """One thing to do: ``action`` (one of the constants above) and what it needs."""

    action: str = NOTHING
    reason: str = ""
    """STOP: the ``TerminationTarget`` condition's reason; FINISH: the Workload's (``Succeeded``/``Failed``)."""
    message: str = ""
    """STOP: why (the ``Stopped`` Event's and the condition's message); FINISH: the Pod's ``status.message``."""
    release: bool = False
    """STOP: the Workload was evicted and still holds quota: give it back once the Pod is stopped."""
    finished_workload: bool = False
    """FINALIZE: the Workload finished (Kueue records ``FinishedWorkload`` on the Pod)."""


def is_managed(pod: ManagedPod) -> bool:
    """Kueue's webhook made it Kueue's (its reconciler skips a Pod without the label)."""
    return pod.metadata.labels.get(MANAGED_LABEL) == MANAGED


def is_gated(pod: ManagedPod) -> bool:
    return any(g.get("name") == ADMISSION_GATE for g in pod.spec.scheduling_gates)


def kueue_gated(pod: ManagedPod) -> bool:
    """Held by either of Kueue's scheduling gates: admission, or topology (a TAS pod the ungater has not placed)."""
    return any(g.get("name") in (ADMISSION_GATE, TOPOLOGY_GATE) for g in pod.spec.scheduling_gates)


def ended(pod: ManagedPod) -> tuple[str, str] | None:
    """``(reason, message)`` of a Pod that succeeded or failed: its Workload's finish."""
    if pod.status.phase not in ("Succeeded", "Failed"):
        return None
    return ("Succeeded" if pod.status.phase == "Succeeded" else "Failed"), pod.status.message


def is_running(pod: ManagedPod) -> bool:
    """Not held back (Kueue's ``IsSuspended`` for a Pod: gated or ended) and not on its way out."""
    return not is_gated(pod) and ended(pod) is None and not pod.metadata.deletion_timestamp


def is_ready(pod: ManagedPod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def finalizable(pod: ManagedPod) -> bool:
    return FINALIZER in pod.metadata.finalizers


def runs_on_a_worker(state: ClusterState, wl: WorkloadInfo | None) -> bool:
    """Whether ``wl`` is MultiKueue's to run on a worker: with Kueue's ``MultiKueue`` gate on, it has the state of
    an AdmissionCheck of MultiKueue's controller (one not found is not). Kueue then never ungates the Pods it
    stands for on this cluster (a Pod, a pod group, a LeaderWorkerSet's group), admitted or not."""
    return wl is not None and state.gate(gates.MULTIKUEUE) and check_of(state, wl) is not None


def next_step(pod: ManagedPod, wl: WorkloadInfo | None, *, managed: bool, admission_shown: bool,
              prebuilt: bool = False, wl_deleting: bool = False, remote: bool = False,
              eviction_unshown: bool = False) -> Step:
    """What Kueue's reconciler does next (see the module docstring). ``wl``: the Pod's Workload in the log (None:
    none yet, or none usable); ``managed``: the integration is on and the Pod Kueue's to queue — its namespace one
    it manages, and a queue name or ``manageJobsWithoutQueueName`` (:func:`connectors.k8s.job_selection.is_managed`);
    ``admission_shown``: the apiserver shows ``wl`` admitted as the log decided; ``prebuilt``: the Pod names its
    Workload (:mod:`connectors.k8s.pod_prebuilt`), so none is created for it and a running one without it is
    stopped as Kueue words it ("missing workload"); ``wl_deleting``: the apiserver shows ``wl`` being deleted;
    ``remote``: ``wl`` runs on a MultiKueue worker (:func:`runs_on_a_worker`), so the Pod is never started
    here; ``eviction_unshown``: ``wl`` is evicted in the log but the apiserver shows it admitted and not
    evicted yet (:func:`connectors.k8s.jobframework.eviction_unshown`): the Pod is left as it is until it
    does."""
    if pod.metadata.deletion_timestamp:
        return Step(FINALIZE) if finalizable(pod) else Step()
    if not managed:
        return Step()
    finish = ended(pod)
    if wl is None:
        if finish is not None:
            return Step(FINALIZE) if finalizable(pod) else Step()
        if not is_gated(pod):
            return Step(STOP, NO_MATCHING_WORKLOAD_REASON, PREBUILT_MISSING if prebuilt else MISSING_WORKLOAD)
        return Step() if prebuilt else Step(CREATE)
    if wl.phase == FINISHED:
        return Step(FINALIZE, finished_workload=True) if finalizable(pod) else Step()
    if wl_deleting:
        return Step(STOP, WORKLOAD_DELETED_REASON, WORKLOAD_DELETED)
    if finish is not None:
        return Step(FINISH, *finish)
    if wl.evicted:
        if eviction_unshown:  # its status write may still be refused: as Kueue's reconciler, wait for it
            return Step()
        evicted = wl.condition("Evicted")
        release = wl.reserving and not wl.job_stopped
        if is_running(pod):
            return Step(STOP, f"{EVICTED_REASON}DueTo{wl.evicted}", evicted.message if evicted else "", release=release)
        return Step(RELEASE) if release else Step()
    if is_gated(pod):
        return Step(START) if is_admitted(wl) and admission_shown and not remote else Step()
    if not is_admitted(wl):
        return Step(STOP, NOT_ADMITTED_REASON, NOT_ADMITTED)
    return Step()


def pods_ready_change(pod: ManagedPod, wl: WorkloadInfo) -> tuple[bool, str] | None:
    """``(ready, reason)`` to put in the log for the Workload's PodsReady under waitForPodsReady, as for a Job:
    while admitted and running, the Pod's ``Ready`` (``Started``, ``Recovered`` after a loss, else
    ``WaitForRecovery``); otherwise, or before the Pod is ready, Kueue's first write (``WaitForStart``) when none
    is shown yet. None: nothing to change."""
    return pods_ready_transition(wl, running=is_running(pod), ready=is_ready(pod))


def workload_name(pod_name: str, pod_uid: str, short: bool = False) -> str:
    """Kueue's name for the Workload of a Pod: ``pod-<name>-<hash>`` (the hash over the kind, the empty core group,
    the name and the uid); ``short``: its ``ShortWorkloadNames`` gate."""
    return owner_workload_name("Pod", "", pod_name, pod_uid, short=short)


def controller_ref(pod_name: str, pod_uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid, "controller": True,
            "blockOwnerDeletion": True}


def owner_pod(wl: o.Workload) -> tuple[str, str] | None:
    """``(pod key, pod uid)`` of the Pod that controls ``wl``, if one does."""
    for ref in wl.metadata.owner_references:
        if ref.controller and ref.kind == "Pod" and ref.api_version == "v1":
            return f"{wl.metadata.namespace}/{ref.name}", ref.uid
    return None


def workload_for(state: ClusterState, raw_pod: dict[str, Any], name: str) -> dict[str, Any]:
    """The Workload Kueue makes for a single Pod as stored (``raw_pod``): Kueue's ``resource-in-use`` finalizer,
    one pod set ``main`` of one pod whose template is the Pod's spec, the queue name, the priority (the Pod's
    ``kueue.x-k8s.io/priority-class``, else its ``priorityClassName``), ``maximumExecutionTimeSeconds`` from
    ``kueue.x-k8s.io/max-exec-time-seconds`` (:func:`connectors.k8s.workload_body.spec`), the ProvisioningRequest
    annotations, the Pod's uid label, the labels and annotations the Configuration says to copy
    (:mod:`connectors.k8s.copied_metadata`) and the Pod as controller owner; under TAS, the pod set's topology
    request (:func:`pod_set`). Raises what :func:`connectors.k8s.workload_body.spec` raises."""
    meta, spec = raw_pod["metadata"], raw_pod.get("spec") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    wl_spec = workload_body.spec(state, labels, [pod_set(state, raw_pod, "main", 1)], spec.get("priorityClassName"))
    keys = copied_metadata.keys(state)  # Kueue's own labels and annotations win over the copied ones
    wl_meta: dict[str, Any] = {"name": name, "namespace": meta["namespace"],
                               "labels": {**copied(keys.labels, labels), JOB_UID_LABEL: meta["uid"]},
                               "finalizers": [IN_USE_FINALIZER],
                               "ownerReferences": [controller_ref(meta["name"], meta["uid"])]}
    wl_annotations = copied_metadata.workload_annotations(state, keys, annotations)
    if wl_annotations:
        wl_meta["annotations"] = wl_annotations
    return workload_body.workload(wl_meta, wl_spec)


def pod_set(state: ClusterState, raw_pod: dict[str, Any], name: str, count: int) -> dict[str, Any]:
    """A pod set of ``count`` Pods like ``raw_pod`` (as stored): its spec the template, and, while Kueue's
    TopologyAwareScheduling gate is on, the topology request of the Pod's TAS annotations ranked by
    ``kueue.x-k8s.io/pod-group-pod-index`` (Kueue's ``constructPodSet``; off, it builds none)."""
    spec = msgspec.json.decode(msgspec.json.encode(raw_pod.get("spec") or {}))
    out: dict[str, Any] = {"name": name, "count": count, "template": {"spec": spec}}
    if state.tas_enabled:
        annotations = (raw_pod.get("metadata") or {}).get("annotations") or {}
        out["topologyRequest"] = topology_request(annotations, POD_INDEX_LABEL)
    return out


def start_patch(pod: ManagedPod, info: PodSetInfo) -> dict[str, Any]:
    """The merge patch that starts a gated Pod with what its admission adds (``info``): labels, annotations, node
    selector and tolerations merged in (raises :class:`connectors.k8s.podsetinfo.MergeConflict`), the admission
    gate lifted — and the topology gate too unless ``info`` brings it (a ``topologyAssignment``: the ungater
    lifts it), as Kueue does; no label decides — conditioned on the Pod's resourceVersion. The apiserver lets
    a gated Pod gain node selector entries and tolerations and lose gates, never gain them: gates ``info``
    would add are not."""
    current = PodSetInfo(annotations=dict(pod.metadata.annotations), labels=dict(pod.metadata.labels),
                         node_selector=dict(pod.spec.node_selector), tolerations=list(pod.spec.tolerations))
    merged = merge(current, msgspec.structs.replace(info, scheduling_gates=[]))
    dropped = {ADMISSION_GATE} if topology_gated(info.scheduling_gates) else {ADMISSION_GATE, TOPOLOGY_GATE}
    gates = [g for g in pod.spec.scheduling_gates if g.get("name") not in dropped]
    return {"metadata": {"resourceVersion": pod.metadata.resource_version, "labels": merged.labels or None,
                         "annotations": merged.annotations or None},
            "spec": {"nodeSelector": merged.node_selector or None,
                     "tolerations": [msgspec.to_builtins(t) for t in merged.tolerations] or None,
                     "schedulingGates": gates or None}}


def finalize_patch(pod: ManagedPod, *, strict: bool = True) -> dict[str, Any]:
    """The merge patch that drops Kueue's finalizer from the Pod: ``strict`` (Kueue's
    ``RemoveFinalizersWithStrictPatch``), conditioned on its resourceVersion, so a finalizer someone added since is
    never dropped (a conflict waits for the newer Pod); else the list as last seen, written over whatever the Pod
    holds now."""
    rest = [f for f in pod.metadata.finalizers if f != FINALIZER]
    if not strict:
        return {"metadata": {"finalizers": rest or None}}
    return {"metadata": {"resourceVersion": pod.metadata.resource_version, "finalizers": rest or None}}


def let_go_patch(pod: ManagedPod) -> dict[str, Any]:
    """The merge patch that lifts Kueue's scheduling gates (admission and topology) from the Pod and drops Kueue's
    finalizer (as Kueue's StatefulSet reconciler lets a pod go: Kueue no longer places it), conditioned on its
    resourceVersion."""
    gates = [g for g in pod.spec.scheduling_gates if g.get("name") not in (ADMISSION_GATE, TOPOLOGY_GATE)]
    patch = finalize_patch(pod)
    patch["spec"] = {"schedulingGates": gates or None}
    return patch


def queue_patch(pod: ManagedPod, queue: str) -> dict[str, Any]:
    """The merge patch that gives the Pod the queue name ``queue`` (as Kueue's StatefulSet reconciler gives a set's
    pods its own), conditioned on its resourceVersion."""
    return {"metadata": {"resourceVersion": pod.metadata.resource_version, "labels": {QUEUE_LABEL: queue}}}


def termination_condition(reason: str, message: str, now: str) -> dict[str, Any]:
    """The strategic merge patch of ``pods/status`` that marks the Pod as one Kueue stops (its conditions merge by
    type)."""
    return {"status": {"conditions": [{"type": TERMINATION_TARGET, "status": "True", "reason": reason,
                                       "message": message, "lastTransitionTime": now}]}}
