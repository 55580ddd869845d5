"""Prebuilt Workloads for plain Pods and pod groups: the Pod names the Workload it runs on instead of being given one.

Pure: no client, no clock. A Pod carrying ``kueue.x-k8s.io/prebuilt-workload-name`` (label or annotation, read as
``WorkloadIdentifierAnnotations`` says: :func:`connectors.k8s.prebuilt.name_in`) runs on that Workload of its
namespace; for a group, the name the group's first Pod carries (Kueue's ``workloadName`` reads the Pod standing for
the group). As Kueue's reconciler (``pkg/controller/jobframework/reconciler.go`` ``ensureOneWorkload`` and
``handleJobWithNoWorkload``, over ``pkg/controller/jobs/pod/pod_controller.go``) does with it:

* none is ever created: while the Workload is missing a gated Pod waits, and a running one is stopped (``Stopped``
  "missing workload", the ``TerminationTarget`` reason ``NoMatchingWorkload``);
* a Workload another object controls is not the Pod's: it waits as for a missing one (:data:`FOREIGN`) — but for
  a group's Workload its LeaderWorkerSet made (:mod:`connectors.k8s.leaderworkerset`);
* a single Pod adopts one nothing controls: it becomes its controller owner and its ``kueue.x-k8s.io/job-uid``
  label the Pod's uid (:data:`ADOPT`, :func:`adoption_patch`); a group makes every one of its Pods an owner (not
  the controller) of it, as for a Workload it made (:data:`ADD_OWNERS`, :func:`owners_patch`);
* one no longer equivalent (:func:`single_matches`, :func:`group_matches`) is finished ``OutOfSync`` "The prebuilt
  workload is out of sync with its user job" and counts as missing (:data:`OUT_OF_SYNC`);
* else (:data:`USABLE`) it is the Pod's or group's Workload as a generated one is — except that for a group Kueue
  then removes no excess Pods, lets go of no replaced failed ones and counts no absent ones (its
  ``WaitingForReplacementPods`` is never turned True): those come with the matching of a Workload it made.
"""

from __future__ import annotations

from typing import Any

import msgspec

from connectors.k8s import job_sync, leaderworkerset, prebuilt
from connectors.k8s.pod_group import fast_admission, role_of, runnable_or_succeeded
from connectors.k8s.pod_roles import total_count
from connectors.k8s.pod_sync import ManagedPod, controller_ref, ended, is_gated
from connectors.k8s.resources import JOB_UID_LABEL
from connectors.k8s.workload_body import compared_max_execution_seconds
from events import objects as o
from projections.cluster import ClusterState
from projections.workloads import FINISHED, WorkloadInfo

USABLE, ADOPT, ADD_OWNERS, FOREIGN, OUT_OF_SYNC = "usable", "adopt", "add-owners", "foreign", "out-of-sync"


def name_for(pod: ManagedPod, annotation_first: bool) -> str:
    """The prebuilt Workload the Pod names (empty: none). ``annotation_first``: ``WorkloadIdentifierAnnotations``."""
    return prebuilt.name_in(pod.metadata, annotation_first)


# --- a single Pod ----------------------------------------------------------------------------------------------

def single_verdict(state: ClusterState, pod: ManagedPod, obs: o.Workload, wl: WorkloadInfo) -> str:
    """What a single Pod does with the prebuilt Workload it names (``obs`` as stored, ``wl`` in the log)."""
    controller = prebuilt.controller_uid(obs)
    if controller is None:
        return ADOPT
    if controller != pod.metadata.uid:
        return FOREIGN
    return USABLE if single_matches(state, pod, obs, wl) else OUT_OF_SYNC


def single_matches(state: ClusterState, pod: ManagedPod, obs: o.Workload, wl: WorkloadInfo) -> bool:
    """Kueue's ``EquivalentToWorkload`` for a Pod: the same maximum execution time, and one pod set alike in
    count (1), tolerations (until admitted), container and pod-level resources and resource claims — compared,
    while the Workload holds quota, with what running it makes of its pod set, else (or for a Pod still held
    back) with its spec."""
    if obs.spec.maximum_execution_time_seconds != compared_max_execution_seconds(pod.metadata.labels):
        return False
    suspended = is_gated(pod) or ended(pod) is not None
    return job_sync.pod_sets_match(state, [pod_set_of(pod)], obs, wl, suspended=suspended)


def pod_set_of(pod: ManagedPod) -> o.PodSet:
    """The pod set Kueue derives from a single Pod, with every field :func:`job_sync.same_pod_spec` compares:
    containers, init containers, tolerations, pod-level ``resources`` and ``resourceClaims`` (the Workload
    built from the Pod keeps its whole spec, so a field left out here would never match)."""
    spec = o.PodSpec(containers=list(pod.spec.containers), init_containers=list(pod.spec.init_containers),
                     tolerations=list(pod.spec.tolerations), resources=pod.spec.resources,
                     resource_claims=list(pod.spec.resource_claims))
    return o.PodSet(name="main", count=1, template=o.PodTemplateSpec(spec=spec))


def adoption_patch(pod: ManagedPod, obs: o.Workload) -> dict[str, Any]:
    """The merge patch that makes the Pod the controller of Workload ``obs`` (in place of any earlier reference to
    the same Pod) and gives it the Pod's uid label, conditioned on the Workload's resourceVersion."""
    refs = [msgspec.to_builtins(r) for r in obs.metadata.owner_references if r.uid != pod.metadata.uid]
    return {"metadata": {"resourceVersion": obs.metadata.resource_version,
                         "ownerReferences": [*refs, controller_ref(pod.metadata.name, pod.metadata.uid)],
                         "labels": {JOB_UID_LABEL: pod.metadata.uid}}}


# --- a pod group -----------------------------------------------------------------------------------------------

def group_verdict(pods: list[ManagedPod], obs: o.Workload, wl: WorkloadInfo) -> str:
    """What a group (its Pods sorted by name, the first standing for it) does with the prebuilt Workload it
    names."""
    controller = prebuilt.controller_uid(obs)
    if controller is not None and controller != pods[0].metadata.uid and not _made_by_its_set(pods[0], obs):
        return FOREIGN
    if owners_patch(pods, obs) is not None:
        return ADD_OWNERS
    return USABLE if group_matches(pods, obs, wl) else OUT_OF_SYNC


def _made_by_its_set(first: ManagedPod, obs: o.Workload) -> bool:
    """Whether the LeaderWorkerSet the group's pods belong to controls the Workload: it made it for the group
    (:mod:`connectors.k8s.leaderworkerset`), and Kueue, which checks no controller of a group's prebuilt Workload,
    runs the group on it."""
    owner = leaderworkerset.owner_of(obs)
    return owner is not None and owner[0] == first.metadata.labels.get(leaderworkerset.SET_NAME_LABEL)


def owners_patch(pods: list[ManagedPod], obs: o.Workload) -> dict[str, Any] | None:
    """The merge patch making every Pod of the group (whatever its phase) an owner of ``obs``, conditioned on its
    resourceVersion; None when each Pod's name is already among its owners. As Kueue's ``SetOwnerReference``, a
    Pod's reference replaces one to a Pod of the same name, and Kueue writes only when references were added."""
    refs = [msgspec.to_builtins(r) for r in obs.metadata.owner_references]
    added = 0
    for pod in pods:
        mine = {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}
        at = next((i for i, r in enumerate(refs) if (r.get("apiVersion"), r.get("kind"), r.get("name")) ==
                   ("v1", "Pod", pod.metadata.name)), None)
        if at is None:
            refs.append(mine)
            added += 1
        else:
            refs[at] = {**refs[at], "uid": pod.metadata.uid}
    if not added:
        return None
    return {"metadata": {"resourceVersion": obs.metadata.resource_version, "ownerReferences": refs}}


def group_roles(pods: list[ManagedPod]) -> list[tuple[str, int]] | None:
    """(role, count) of the group's runnable or succeeded Pods, by role (under fast admission, the first such
    Pod's role counting the whole total); None when Kueue could not say (no such Pod under fast admission, or a
    total it cannot read), and retries."""
    active = [p for p in pods if runnable_or_succeeded(p)]
    if fast_admission(pods[0].metadata.annotations):
        try:
            total = total_count(pods[0].metadata.annotations)
        except ValueError:
            return None
        return [(role_of(active[0]), total)] if active else None
    counts: dict[str, int] = {}
    for p in active:
        counts[role_of(p)] = counts.get(role_of(p), 0) + 1
    return sorted(counts.items())


def group_matches(pods: list[ManagedPod], obs: o.Workload, wl: WorkloadInfo) -> bool:
    """Kueue's equivalence of a group with its Workload: every role of its runnable or succeeded Pods is one of
    the Workload's pod sets, in the same order, and (unless the Workload finished) no pod set counts fewer Pods
    than the role has. A group whose roles cannot be read (:func:`group_roles`) is taken as matching: Kueue retries
    and changes nothing."""
    roles = group_roles(pods)
    if roles is None:
        return True
    done = wl.phase == FINISHED
    sets = obs.spec.pod_sets
    if not done and len(sets) < len(roles):
        return False
    at = -1
    for role, count in roles:
        at = next((i for i in range(at + 1, len(sets)) if sets[i].name == role), len(sets))
        if at == len(sets):
            return False
        if not done and sets[at].count < count:
            return False
    return True
