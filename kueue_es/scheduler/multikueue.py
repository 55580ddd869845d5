"""Kueue's MultiKueue check controller on a manager, as pure decisions (its dispatchers; the owner kinds of
:data:`ADAPTERS`).

What the workers did reaches the log as observed facts the MultiKueue connector appends
(``RemoteWorkloadObserved``: a worker's copy of a workload and its conditions; ``MultiKueueClusterObserved``: a
worker reached or lost); from those and the manager's own state this decides, for a workload whose ClusterQueue
has a MultiKueue check, in Kueue's order (the first step whether or not it holds quota, :func:`reject_unmanaged`;
the others once it does):

1. no adapter in force for its owner (:data:`ADAPTERS`: batch/v1 Jobs, plain Pods, JobSets, the Kubeflow training jobs,
   MPIJobs, RayJobs, RayClusters, RayServices, AppWrappers, TrainJobs, LeaderWorkerSets and StatefulSets have one
   here, a Pod, LeaderWorkerSet or StatefulSet, which has no managedBy, always MultiKueue's; each only while its integration framework is
   enabled, :func:`adapters_in_force`): the check is ``Rejected``, "No
   multikueue adapter found[ for owner kind ...]"; an owner whose ``spec.managedBy`` (``spec.runPolicy.managedBy`` for the Kubeflow
   kinds) is not ``kueue.x-k8s.io/multikueue`` (a Job's read of the log's Job, any other kind's of
   ``OwnerObserved``, nothing being decided on it until then): ``Rejected``, "The owner is not managed by Kueue:
   Expecting spec.managedBy to be ..." (an MPIJob's names ``spec.runPolicy.managedBy``);
   then, reading only the copies on the workers the check's MultiKueueConfig names (nothing decided while it
   cannot be read, as Kueue's reconcile fails then):
2. a copy finished on a worker (the earliest to): the workload finishes with its reason and message
   (``RemoteWorkloadFinished``) — but a copy finished by a sync failure (``OutOfSync``, an elastic workload's
   aside, or ``OwnerNotFound``: :func:`sync_failure`) is no end of the job: while the check is Ready it goes
   ``Retry``, "Remote workload on worker cluster ... is out of sync with its user job, resetting for re-dispatch,
   ..." (a Warning ``MultiKueue`` Event), otherwise nothing is decided until the connector has deleted that copy
   (:func:`connectors.k8s.multikueue_copies.stale`);
3. a copy evicted on a worker while the check is Ready: ``Retry``, "Workload evicted on worker cluster ...";
4. the first copy admitted on a worker (the earliest Admitted) while the check is not yet Ready, or Ready with
   no worker (a Workload found so, written by a Kueue from before ``status.clusterName``): that worker runs
   it — ``WorkerClusterAssigned`` (``status.clusterName``, nominations cleared) and the check ``Ready``, "The
   workload was admitted on <worker>" (the connector then deletes the other copies and copies the owner there);
   its pod sets whose topology the manager delayed (always, with a MultiKueue check) and the worker placed are
   no longer delayed here (``delayedTopologyRequest: Ready``, no topology: Kueue's ``updateDelayedTopologyRequest``);
5. the check Ready but no copy admitted any more: ``Retry`` at once ("Admitting remote no longer exists") if the
   worker is reachable or no longer one the check's MultiKueueConfig names, else once it has been unreachable
   (its MultiKueueCluster deleted, say) for ``workerLostTimeout`` ("Admitting remote lost"), counted from the
   log's time of the observation, or deletion, that lost it (Kueue's wording since v0.19, #13124);
6. otherwise, while the check is Pending and the workload is not yet on a worker, the dispatcher the
   Configuration names nominates (``ClustersNominated``), and the connector creates the copies there
   (:func:`copies_on`) — but only once every other admission check of the workload is Ready: until then no
   copy is made and none deleted, whatever the dispatcher (Kueue #9866, :func:`others_not_ready`; a copy made
   before, every check Ready then, is still read, and its admission wins as in step 4, which Kueue reads
   before that guard), and nothing is nominated but by the incremental dispatcher, Kueue's controller of its
   own, which does not look at the other checks:
   all at once, every connected worker of the check's MultiKueueConfig, in alphabetical order (workers shown
   nominated in another order are not nominated again); incremental
   (Kueue's ``workloaddispatcher``), rounds: the first at once, each next one once more than 5 minutes of log
   time passed since the last (a deadline the scheduler wakes at, :func:`round_deadlines`), each adding up to
   ``stepSize`` (3) workers of the config not yet nominated — connected or not, as Kueue does — in the config's
   order (alphabetical with MultiKueueIncrementalDispatcherRespectConfigOrder off); once every worker is
   nominated and none admitted the copy, nothing more happens until one does or the workload loses its quota;
   any other name: an external dispatcher's, which kueue-es nominates nothing for — the nominations it writes on
   the Workload are observed (``ClusterState._take_external_nominations``) and dispatched to. A LeaderWorkerSet's
   groups' Workloads go as one (:func:`group_target`): none is nominated until all of them exist, the
   lowest-indexed one is dispatched as above, and each other one is nominated the worker one of them was admitted
   on (only that one), its copies made there alone. An elastic Job's new slice goes to the worker the slice it
   replaces runs on, alone (:mod:`.multikueue_slices`).

Retry and Rejected are then acted on by the workload controller's rules (:mod:`kueue_es.scheduler.reconcile`):
eviction, which clears ``clusterName`` and the nominations (the connector then deletes every copy), or
deactivation.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from events import objects as o
from events import schema as ev
from events.timefmt import parse_time
from kueue_es.scheduler import multikueue_slices, preemption_gates
from kueue_es.scheduler.config import (
    MULTIKUEUE_ADAPTER_FRAMEWORKS,
    SchedulerConfig,
    built_in_kinds,
    external_kind,
)
from projections import gates
from projections.admissionchecks import (
    ALL_AT_ONCE_DISPATCHER,
    INCREMENTAL_DISPATCHER,
    MULTIKUEUE_CONTROLLER,
    multikueue_config_for,
)
from projections.cluster import ClusterState
from projections.workloads import FINISHED, GROUPED_OWNERS, WorkloadInfo

MANAGED_BY = MULTIKUEUE_CONTROLLER
"""An owner's ``spec.managedBy`` on a manager: it runs on a worker."""


def _job_managed_by(state: ClusterState, wl: WorkloadInfo) -> str | None:
    """A batch/v1 Job's managedBy, read of the Job the log holds (None: not observed yet)."""
    job = state.jobs.get(f"{wl.namespace}/{wl.owner[2]}")
    return None if job is None else job.spec.managed_by or ""


def _observed_managed_by(state: ClusterState, wl: WorkloadInfo) -> str | None:
    """The managedBy of an owner the log does not hold, as the connector observed it (``OwnerObserved``)."""
    return wl.owner_managed_by


JOB_ADAPTER = ("batch/v1", "Job")
JOBSET_ADAPTER = ("jobset.x-k8s.io/v1alpha2", "JobSet")
KUBEFLOW_ADAPTERS = tuple(("kubeflow.org/v1", kind) for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob",
                                                                    "JAXJob"))
"""The training operator's kinds (Kueue's ``kubeflowjob_multikueue_adapter.go``): managedBy at
``spec.runPolicy.managedBy``, read by the connector."""
MPIJOB_ADAPTER = ("kubeflow.org/v2beta1", "MPIJob")
RAYJOB_ADAPTER = ("ray.io/v1", "RayJob")
RAYCLUSTER_ADAPTER = ("ray.io/v1", "RayCluster")
RAYSERVICE_ADAPTER = ("ray.io/v1", "RayService")
APPWRAPPER_ADAPTER = ("workload.codeflare.dev/v1beta2", "AppWrapper")
TRAINJOB_ADAPTER = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
POD_ADAPTER = ("v1", "Pod")
"""A plain Pod, or a pod group (Kueue's ``pod_multikueue_adapter.go``, built with the ``pod`` framework): no
managedBy, always MultiKueue's (:func:`_always_managed`); the Pod stays gated on the manager while its copy runs on
the worker."""
LWS_ADAPTER = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
"""A LeaderWorkerSet has no managedBy: Kueue's adapter takes every one as MultiKueue's (:func:`_always_managed`),
and dispatches its groups' Workloads as one (:data:`MULTI_WORKLOAD`)."""
STATEFULSET_ADAPTER = ("apps/v1", "StatefulSet")
"""A StatefulSet has no managedBy: Kueue's adapter (the ``statefulset`` framework's) takes every one as MultiKueue's
(:func:`_always_managed`). kueue-es's StatefulSet Workloads are its pods' group's: the connector runs those whose
pods a StatefulSet holds on this adapter (:mod:`connectors.k8s.statefulset_multikueue`)."""


def _always_managed(state: ClusterState, wl: WorkloadInfo) -> str:
    """An owner kind without a managedBy field, which Kueue's adapter takes as MultiKueue's without reading it."""
    return MANAGED_BY


ADAPTERS = {
    JOB_ADAPTER: _job_managed_by,
    POD_ADAPTER: _always_managed,
    JOBSET_ADAPTER: _observed_managed_by,
    **dict.fromkeys(KUBEFLOW_ADAPTERS, _observed_managed_by),
    MPIJOB_ADAPTER: _observed_managed_by,
    RAYJOB_ADAPTER: _observed_managed_by,
    RAYCLUSTER_ADAPTER: _observed_managed_by,
    RAYSERVICE_ADAPTER: _observed_managed_by,
    APPWRAPPER_ADAPTER: _observed_managed_by,
    TRAINJOB_ADAPTER: _observed_managed_by,
    LWS_ADAPTER: _always_managed,
    STATEFULSET_ADAPTER: _always_managed,
}
"""(apiVersion, kind) of an owner MultiKueue can run on a worker -> how its ``spec.managedBy`` is read (Kueue's
MultiKueue adapters; the connector's side of each is :data:`connectors.k8s.multikueue.ADAPTERS`). A Job's is read
of the log's Job; a Pod and a LeaderWorkerSet have none, and are MultiKueue's; every other kind's is observed by
the connector, the log holding no owner of it."""
ADAPTER_FRAMEWORKS = MULTIKUEUE_ADAPTER_FRAMEWORKS
"""Each built-in adapter's integration framework: Kueue builds the adapter only while ``integrations.frameworks``
lists it (its ``GetMultiKueueAdapters``), so a kind whose framework is off has no adapter (its workloads Rejected,
"No multikueue adapter found ...")."""


def _external_managed_by(state: ClusterState, wl: WorkloadInfo) -> str | None:
    """The managedBy of an owner of a custom kind (``multiKueue.externalFrameworks``), at ``spec.managedBy``, as the
    connector observed it: Kueue's generic adapter (its rejection names ``.spec.managedBy``)."""
    return wl.owner_managed_by


OBSERVED = (_observed_managed_by, _external_managed_by)
"""The readers of a managedBy the connector observes (``OwnerObserved``)."""


def external_kinds(config: SchedulerConfig) -> tuple[tuple[str, str], ...]:
    """The custom kinds (apiVersion, kind) MultiKueue's generic adapter runs: the Configuration's
    ``multiKueue.externalFrameworks`` while MultiKueueAdaptersForCustomJobs is on (none while it is off, as Kueue
    then builds no adapter for them), in the order listed."""
    if not config.gate(gates.MULTIKUEUE_ADAPTERS_FOR_CUSTOM_JOBS):
        return ()
    kinds = (external_kind(f.name) for f in config.multi_kueue.external_frameworks)
    return tuple(dict.fromkeys(k for k in kinds if k is not None))


def adapters_in_force(config: SchedulerConfig) -> Mapping[tuple[str, str], Any]:
    """(apiVersion, kind) -> how its ``spec.managedBy`` is read, for the adapters the Configuration builds: the
    built-in ones of the enabled frameworks (:data:`ADAPTER_FRAMEWORKS`) and the generic one of each custom kind
    (:func:`external_kinds`)."""
    return _in_force(config.frameworks, external_kinds(config))


@lru_cache(maxsize=64)
def _in_force(frameworks: tuple[str, ...], external: tuple[tuple[str, str], ...]
              ) -> Mapping[tuple[str, str], Any]:
    kinds = built_in_kinds(frameworks)
    table = {kind: read for kind, read in ADAPTERS.items() if kind in kinds}
    table.update(dict.fromkeys(external, _external_managed_by))
    return MappingProxyType(table)


MANAGED_BY_FIELDS = {MPIJOB_ADAPTER: "spec.runPolicy.managedBy"}
EXTERNAL_MANAGED_BY_FIELD = ".spec.managedBy"
"""How the generic adapter of a custom kind names the field in its rejection (with a leading dot)."""
"""The field an adapter's rejection names where Kueue's does not say ``spec.managedBy`` (its Kubeflow adapters do,
though they read ``spec.runPolicy.managedBy``; its MPIJob adapter names the field it reads)."""
MULTI_WORKLOAD = GROUPED_OWNERS
"""Owner kinds (:data:`LWS_ADAPTER`) whose Workloads (one per LeaderWorkerSet group, each with its component index) MultiKueue dispatches
as one group (Kueue's ``MultiKueueMultiWorkloadAdapter``): none is nominated until all its owner makes exist; the
lowest-indexed one nominates, and the others follow the worker one of them got (:func:`group_target`)."""
REMOTE_SPEC_SYNC: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    RAYSERVICE_ADAPTER: (("spec", "serveConfigV2"),),
}
"""Owner kinds whose manager-side spec edits MultiKueue forwards to the copy running on the workload's worker
(Kueue's adapters with a remote spec syncer, under MultiKueueRemoteSpecSync) -> the fields forwarded (keys down to
each): a RayService's Serve applications (``spec.serveConfigV2``), which KubeRay updates in place. Every other kind's
copy keeps the spec it was made with."""


def _field(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value at ``keys`` in ``obj``; an absent field or an empty string are one (Go's zero string, which
    Kueue's typed objects do not tell from a field left out)."""
    value: Any = obj
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return None if value == "" else value


def remote_spec_patch(config: SchedulerConfig, owner_kind: tuple[str, str], remote: Mapping[str, Any],
                      local: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that brings the worker's copy ``remote`` of an owner of kind ``owner_kind`` ((apiVersion,
    kind)) in line with the manager's owner ``local`` in the fields :data:`REMOTE_SPEC_SYNC` forwards for the kind
    (a field the manager's lacks nulled): None when they agree already, the kind forwards none, or
    MultiKueueRemoteSpecSync is off (the copy then keeps what it was made with). Only the fields listed are
    touched: the rest of the copy's spec, its suspension at least, is the worker's Kueue's."""
    fields = REMOTE_SPEC_SYNC.get(owner_kind, ())
    if not fields or not config.gate(gates.MULTIKUEUE_REMOTE_SPEC_SYNC):
        return None
    patch: dict[str, Any] = {}
    for keys in fields:
        wanted = _field(local, keys)
        if _field(remote, keys) == wanted:
            continue
        at = patch
        for key in keys[:-1]:
            at = at.setdefault(key, {})
        at[keys[-1]] = wanted
    return patch or None


REMOTE_GONE = "Admitting remote no longer exists"
REMOTE_LOST = "Admitting remote lost"
"""The check's Retry messages when the worker running the workload shows no admitted copy any more, reachable or
lost (Kueue's since v0.19, #13124: "Reserving remote no longer exists or is not admitted" and "Reserving remote
lost" before)."""

SYNC_FAILURE_REASONS = ("OutOfSync", "OwnerNotFound")
"""The Finished reasons of a copy that say it lost sync with its owner on the worker (the copied owner no longer
matches the copied Workload, or the worker's Kueue took the copy for an orphan), not that the job ended."""


def sync_failure(state: ClusterState, wl: WorkloadInfo, reason: str) -> bool:
    """Whether a copy of ``wl`` finished for ``reason`` failed to sync rather than ran to its end: Kueue's MultiKueue
    controller retries such a workload instead of finishing it (``OutOfSync``: #13047, ``OwnerNotFound``: #14997,
    both backported to release-0.17 and 0.18; the stored newest ``workload.go`` may predate them, the released
    behaviour is followed). An elastic workload's ``OutOfSync`` is its slice replacement's and finishes it."""
    if reason == "OutOfSync":
        return not multikueue_slices.elastic(state, wl)
    return reason in SYNC_FAILURE_REASONS


_SYNC_FAILED_HEAD, _SYNC_FAILED_TAIL = "Remote workload on worker cluster ", " is out of sync with its user job, "


def sync_failed_message(cluster: str, previously: str) -> str:
    """The check's Retry message (and the Warning ``MultiKueue`` Event's) for a copy finished by a sync failure on
    ``cluster``, Kueue's wording (its integration test of #13047 and #14997). Bounded by a cluster's name, so never
    cut by Kueue's condition or Event message limits."""
    return f'{_SYNC_FAILED_HEAD}"{cluster}"{_SYNC_FAILED_TAIL}resetting for re-dispatch, Previously: "{previously}"'


def is_sync_failed(state: str, message: str) -> bool:
    """Whether a MultiKueue check update is the Retry of :func:`sync_failed_message`."""
    return state == "Retry" and message.startswith(_SYNC_FAILED_HEAD) and _SYNC_FAILED_TAIL in message


ROUND_MS = 5 * 60 * 1000
"""How long a round of the incremental dispatcher lasts: the next one starts once more than this has passed."""


class Dispatcher(NamedTuple):
    """The dispatcher in force (from the Configuration: ``multiKueue.dispatcherName`` and the gates)."""

    name: str = ALL_AT_ONCE_DISPATCHER
    step: int = 3
    """Workers the incremental dispatcher adds per round."""
    config_order: bool = True
    """The incremental dispatcher takes workers in the config's order (else alphabetically)."""


DEFAULT_DISPATCHER = Dispatcher()


def check_of(state: ClusterState, wl: WorkloadInfo) -> o.AdmissionCheckState | None:
    """The workload's MultiKueue check (the first listed, by name), or None."""
    for name in sorted(wl.check_states):
        ac = state.admission_checks.get(name)
        if ac is not None and ac.spec.controller_name == MULTIKUEUE_CONTROLLER:
            return wl.check_states[name]
    return None


def _since(c: o.Condition) -> int:
    return parse_time(c.last_transition_time) if c.last_transition_time else 0


def first_with(state: ClusterState, wl: WorkloadInfo, type_: str, workers: Container[str]
               ) -> tuple[str, o.Condition] | None:
    """The reachable worker of ``workers`` (the check's MultiKueueConfig's) whose copy turned ``type_`` True first
    (ties by worker name), with that condition. A worker not connected, whose MultiKueueCluster is gone, or that
    the config no longer names is not read, as Kueue reads only the config's workers it has a client for."""
    best: tuple[int, str, o.Condition] | None = None
    links, remotes, clusters = state.cluster_links, wl.remotes or {}, state.multikueue_clusters
    for cluster in sorted(remotes):
        link = links.get(cluster)
        if link is None or not link.connected or cluster not in clusters or cluster not in workers:
            continue
        for c in remotes[cluster].conditions:
            if c.type == type_ and c.status == "True" and (best is None or _since(c) < best[0]):
                best = (_since(c), cluster, c)
    return None if best is None else (best[1], best[2])


def _update(wl: WorkloadInfo, check: o.AdmissionCheckState, state: str, message: str, base: dict
            ) -> ev.AdmissionCheckUpdated:
    return ev.AdmissionCheckUpdated(key=wl.key, uid=wl.uid, check=check.name, state=state, message=message,
                                    requeue_after_seconds=check.requeue_after_seconds, **base)


def unmanaged_reason(state: ClusterState, wl: WorkloadInfo,
                     adapters: Mapping[tuple[str, str], Any] = ADAPTERS) -> str | None:
    """Why Kueue rejects the workload on a manager (no adapter in force, :func:`adapters_in_force`, for its owner,
    or an owner not handed to MultiKueue), or None."""
    if not wl.owner:
        return "No multikueue adapter found"
    api_version, kind = wl.owner[0], wl.owner[1]
    managed_by_of = adapters.get((api_version, kind))
    if managed_by_of is None:
        group, _, version = api_version.rpartition("/")
        gvk = f"{group}/{version}, Kind={kind}" if group else f"/{version}, Kind={kind}"
        return f"No multikueue adapter found for owner kind {gvk!r}".replace("'", '"')
    managed_by = managed_by_of(state, wl)
    if managed_by is None:
        return None  # not observed yet: Kueue's read would fail and retry
    if managed_by != MANAGED_BY:
        field = (EXTERNAL_MANAGED_BY_FIELD if managed_by_of is _external_managed_by
                 else MANAGED_BY_FIELDS.get((api_version, kind), "spec.managedBy"))
        return f'The owner is not managed by Kueue: Expecting {field} to be "{MANAGED_BY}" not "{managed_by}"'
    return None


def reject_unmanaged(state: ClusterState, wl: WorkloadInfo, base: dict,
                     adapters: Mapping[tuple[str, str], Any] = ADAPTERS) -> list[ev.Decision]:
    """The MultiKueue check Rejected (:func:`unmanaged_reason`) of a workload whose owner MultiKueue cannot run,
    whether or not it holds quota: Kueue's MultiKueue controller checks the adapter and the owner's managedBy
    before it looks at quota or workers, so such a workload is rejected before it reserves (and preempts for)
    any. None when its check is missing or Rejected already, or its owner's managedBy is not read yet."""
    check = check_of(state, wl)
    if check is None or check.state == "Rejected" or owner_unread(wl, adapters):
        return []
    rejected = unmanaged_reason(state, wl, adapters)
    return [] if rejected is None else [_update(wl, check, "Rejected", rejected, base)]


def owner_unread(wl: WorkloadInfo, adapters: Mapping[tuple[str, str], Any] = ADAPTERS) -> bool:
    """Whether the workload's owner is of a kind the log does not hold (any but a Job) whose adapter is in force,
    and its managedBy was not observed yet: Kueue's read of it comes before any decision, so none is made until it
    is."""
    return (bool(wl.owner) and adapters.get((wl.owner[0], wl.owner[1])) in OBSERVED
            and wl.owner_managed_by is None)


def lost_for(state: ClusterState, cluster: str, now: int) -> int | None:
    """How long (ms) worker ``cluster`` has been unreachable by ``now``; None while it is reachable. A worker never
    observed counts as lost since the log's first look at it could not happen (from 0)."""
    link = state.cluster_links.get(cluster)
    if link is not None and link.connected:
        return None
    return now - (link.since if link is not None else 0)


def components(state: ClusterState, wl: WorkloadInfo) -> list[WorkloadInfo] | None:
    """The Workloads made by ``wl``'s owner, ``wl`` among them, when that owner is of a kind whose Workloads are
    dispatched as one group and ``wl`` says it is one of them (:data:`MULTI_WORKLOAD`); None otherwise. In no
    particular order: whatever is read of them does not depend on one. Read from the fold's index by owner UID
    (:attr:`ClusterState.owner_groups`), as Kueue lists them in ``wl``'s namespace by its owner's UID (a Workload
    left by an earlier owner of the same name is none of them); one whose owner's UID is not known (restored from
    an older snapshot, until its next upsert) is matched by its owner's name instead."""
    if wl.component_index is None or not wl.owner or (wl.owner[0], wl.owner[1]) not in MULTI_WORKLOAD:
        return None
    groups, workloads = state.owner_groups, state.workloads
    owner, namespace, uid = wl.owner, wl.namespace, wl.owner_uid
    keys = [*groups.get(uid, ()), *groups.get("", ())] if uid else [k for ks in groups.values() for k in ks]
    members = [workloads[k] for k in keys]
    return [w for w in members if w.namespace == namespace and (w.owner_uid == uid if uid and w.owner_uid
                                                                 else w.owner == owner)]


WAIT = ""
""":func:`group_target`: the workload waits (no nominations, no copies made)."""


def group_target(state: ClusterState, wl: WorkloadInfo) -> str | None:
    """Where a workload of a group (:func:`components`) not yet on a worker goes, as Kueue's MultiKueue workload
    controller dispatches its owner's Workloads: :data:`WAIT` until every Workload its owner makes exists (its
    observed ``spec.replicas``; unread: waiting for the read), and while another of the group's workers differ;
    the worker another of them was admitted on (``status.clusterName``); else, for the lowest-indexed one, None:
    dispatched as any other workload; the others (or one whose index cannot be read) wait for it. None too for a
    workload outside any group."""
    members = components(state, wl)
    if members is None:
        return None
    if wl.owner_replicas is None or len(members) < wl.owner_replicas:
        return WAIT
    clusters = {m.cluster_name for m in members if m.key != wl.key and m.cluster_name}
    if len(clusters) > 1:
        return WAIT  # Kueue refuses to choose between them ("component workloads assigned to different clusters")
    if clusters:
        return clusters.pop()
    index = wl.component_index
    if index is None or index < 0 or any(0 <= (m.component_index if m.component_index is not None else -1) < index
                                         for m in members if m.key != wl.key):
        return WAIT
    return None


def group_touched(state: ClusterState, touched: dict[str, None]) -> list[str]:
    """The other Workloads of the groups (:func:`components`) some touched workload belongs to, sorted: Kueue's
    MultiKueue controller looks at a group's Workloads again once all exist and when one of them is admitted on a
    worker. Read from the fold's owner-UID index: nothing is looked at for a touched workload of no group."""
    if not state.owner_groups:
        return []
    others: set[str] = set()
    seen: set[tuple[str, ...]] = set()  # the groups listed already: each once, however many of it were touched
    for key in touched:
        wl = state.workloads.get(key)
        if wl is None or wl.component_index is None:
            continue
        group = (wl.owner_uid,) if wl.owner_uid else (wl.namespace, *wl.owner)
        if group in seen:
            continue
        seen.add(group)
        others.update(m.key for m in components(state, wl) or ())
    return sorted(others.difference(touched))


def reconcile_workload(state: ClusterState, wl: WorkloadInfo, base: dict, now: int, worker_lost_ms: int,
                       dispatcher: Dispatcher = DEFAULT_DISPATCHER,
                       adapters: Mapping[tuple[str, str], Any] = ADAPTERS,
                       gate_timeout_ms: int | None = None) -> list[ev.Decision]:
    """The MultiKueue controller's decisions for a workload holding quota (none when it has no MultiKueue check,
    or it is Rejected, or nothing changes), with the adapters in force ``adapters`` (:func:`adapters_in_force`);
    under MultiKueueOrchestratedPreemption (``gate_timeout_ms``: its single-cluster preemption timeout) the copy
    whose preemption gate opens (:mod:`.preemption_gates`)."""
    check = check_of(state, wl)
    if check is None or check.state == "Rejected" or wl.evicted:
        return []
    rejected = reject_unmanaged(state, wl, base, adapters)
    if rejected or owner_unread(wl, adapters):
        return rejected  # an owner not read yet: woken by the OwnerObserved that reads it
    workers = _config_clusters(state, check.name)
    if workers is None:
        return []  # Kueue's read of the config fails and is retried: woken when the config comes
    finished = first_with(state, wl, "Finished", workers)
    if finished is not None:
        cluster, cond = finished
        if sync_failure(state, wl, cond.reason):
            if check.state != "Ready":
                return []  # Kueue returns: reset once, never finished on it (the connector drops the copy)
            return [_update(wl, check, "Retry", sync_failed_message(cluster, check.state), base)]
        return [ev.RemoteWorkloadFinished(key=wl.key, uid=wl.uid, cluster=cluster, reason=cond.reason,
                                          message=cond.message, **base)]
    evicted = first_with(state, wl, "Evicted", workers)
    if evicted is not None and check.state == "Ready":
        return [_update(wl, check, "Retry", f'Workload evicted on worker cluster: "{wl.cluster_name}", resetting '
                        f'for re-admission. Previously: "{check.state}"', base)]
    admitted = first_with(state, wl, "Admitted", workers)
    if admitted is not None:
        if check.state != "Pending" and (check.state != "Ready" or wl.cluster_name):
            return []  # (a Ready check with no worker: found so, written by a Kueue before clusterName)
        cluster = admitted[0]
        out: list[ev.Decision] = []
        if not wl.cluster_name:
            placed = wl.remotes[cluster].topology_pod_sets if wl.remotes else ()
            ready = [psa.name for psa in (wl.admission.pod_set_assignments if wl.admission is not None else ())
                     if psa.delayed_topology_request == "Pending" and psa.name in placed]
            out.append(ev.WorkerClusterAssigned(key=wl.key, uid=wl.uid, cluster=cluster, topology_ready=ready,
                                                **base))
        message = f'The workload was admitted on "{cluster}"'
        if check.state != "Ready" or check.message != message:
            out.append(_update(wl, check, "Ready", message, base))
        return out
    if check.state == "Ready":
        # a worker the config no longer names is neither reachable nor unavailable to Kueue: no grace
        lost = lost_for(state, wl.cluster_name, now) if wl.cluster_name in workers else None
        if lost is None:
            return [_update(wl, check, "Retry", REMOTE_GONE, base)]
        if lost < worker_lost_ms:
            return []  # woken when the timeout runs out (lost_deadlines)
        return [_update(wl, check, "Retry", REMOTE_LOST, base)]
    if check.state != "Pending" or wl.cluster_name:
        return []
    if gate_timeout_ms is not None:
        opened = preemption_gates.open_gate(wl, base, now, gate_timeout_ms)
        if opened:
            return opened
    waiting = others_not_ready(wl, check.name)  # Kueue's controller nominates only once they are Ready
    worker = multikueue_slices.slice_worker(state, wl)
    if worker is not None:  # an elastic slice goes where the slice it replaces runs, and there alone
        return [] if waiting or list(wl.nominated) == [worker] else [
            ev.ClustersNominated(key=wl.key, uid=wl.uid, clusters=[worker], **base)]
    target = group_target(state, wl)
    if target is not None:
        if (waiting or target == WAIT or target in wl.nominated
                or target not in (nominees(state, check.name) or ())):
            return []  # a worker of the group not reachable now: Kueue's reconcile fails and is tried again
        return [ev.ClustersNominated(key=wl.key, uid=wl.uid, clusters=[target], **base)]
    if dispatcher.name == ALL_AT_ONCE_DISPATCHER:
        nominated = None if waiting else nominees(state, check.name)
        if nominated is not None and sorted(wl.nominated) == nominated:
            return []  # the same workers, in whatever order they show: Kueue patches only a new set
    elif dispatcher.name == INCREMENTAL_DISPATCHER:  # a controller of its own: other checks not waited for
        nominated = next_round(state, wl, check.name, dispatcher, now)
    else:
        return []  # an external dispatcher's nominations are observed on the Workload
    if nominated is None or list(wl.nominated) == nominated:
        return []
    return [ev.ClustersNominated(key=wl.key, uid=wl.uid, clusters=nominated, **base)]


def others_not_ready(wl: WorkloadInfo, check: str) -> bool:
    """Whether some admission check of ``wl`` other than its MultiKueue check ``check`` is not Ready: Kueue's
    MultiKueue workload controller then returns before it nominates or touches a copy (Kueue #9866, in v0.20
    and cherry-picked to 0.16 as #10405), lest the Job start on a worker before those checks are satisfied."""
    return any(s.state != "Ready" for n, s in wl.check_states.items() if n != check)


def copies_on(state: ClusterState, wl: WorkloadInfo) -> tuple[str, ...] | None:
    """The workers the copies of ``wl`` are to be on, which the MultiKueue connector makes there and deletes
    from every other worker: its worker, else its nominations (a LeaderWorkerSet group's workload: the worker
    its group goes to, :func:`group_target`); none once it holds no quota, is evicted or finished, or has no
    MultiKueue check. None while they are held back, none made and none deleted, as Kueue's controller returns
    before it touches them: for a workload on no worker yet, while its group waits (:data:`WAIT`) or while
    another of its checks is not Ready (:func:`others_not_ready`), whatever the dispatcher, an external one
    too. A copy made before (every check Ready then) is still read meanwhile, and its admission wins as any
    (Kueue reads the copies before its guard)."""
    check = check_of(state, wl)
    if wl.phase == FINISHED or not wl.reserving or wl.evicted or check is None:
        return ()
    if wl.cluster_name:
        return (wl.cluster_name,)
    target = group_target(state, wl)
    if target == WAIT or others_not_ready(wl, check.name):
        return None
    return wl.nominated if target is None else (target,)


def nominees(state: ClusterState, check: str) -> list[str] | None:
    """The all-at-once dispatcher's nominations: every worker of the check's MultiKueueConfig that is connected,
    in alphabetical order, as Kueue writes them (its ``nominatedClusterSetsEqual`` sorts the list before the
    patch sets it); None when the config cannot be read."""
    ac = state.admission_checks.get(check)
    if ac is None:
        return None
    config, _ = multikueue_config_for(ac, state.multikueue_configs)
    if config is None:
        return None
    links = state.cluster_links
    return sorted({c for c in config.spec.clusters
                   if c in state.multikueue_clusters and (link := links.get(c)) is not None
                   and link.connected})


def _config_clusters(state: ClusterState, check: str) -> list[str] | None:
    ac = state.admission_checks.get(check)
    if ac is None:
        return None
    config, _ = multikueue_config_for(ac, state.multikueue_configs)
    return None if config is None else list(config.spec.clusters)


def _not_nominated(wl: WorkloadInfo, clusters: list[str], dispatcher: Dispatcher) -> list[str]:
    taken = set(wl.nominated)
    rest = [c for c in clusters if c not in taken]
    return rest if dispatcher.config_order else sorted(rest)


def next_round(state: ClusterState, wl: WorkloadInfo, check: str, dispatcher: Dispatcher, now: int
               ) -> list[str] | None:
    """The incremental dispatcher's nominations now: those so far plus up to ``dispatcher.step`` workers of the
    check's MultiKueueConfig not nominated yet, once the round in progress (if any) is over; None while it is not,
    when every worker is nominated already, or when the config cannot be read."""
    if wl.nominated and now - wl.nominated_at <= ROUND_MS:
        return None  # woken when the round is over (round_deadlines)
    clusters = _config_clusters(state, check)
    if clusters is None:
        return None
    rest = _not_nominated(wl, clusters, dispatcher)
    if not rest:
        return None  # Kueue's "no more workers to nominate": the nominations stay as they are
    return [*wl.nominated, *rest[:dispatcher.step]]


def round_deadlines(state: ClusterState, dispatcher: Dispatcher) -> list[tuple[int, str]]:
    """(when its round is over, key) of every workload the incremental dispatcher has a next round for, in time
    order (:func:`round_over`). Empty unless that dispatcher is in force. Only the workloads with nominations are
    looked at (the fold's index of them, in no order that matters: the answer is sorted)."""
    if dispatcher.name != INCREMENTAL_DISPATCHER:
        return []
    wls = state.workloads
    out = [(at, key) for key in state.dispatched
           if (wl := wls.get(key)) is not None and (at := round_over(state, wl, dispatcher)) is not None]
    return sorted(out)


def round_over(state: ClusterState, wl: WorkloadInfo, dispatcher: Dispatcher) -> int | None:
    """When ``wl``'s round of the incremental dispatcher is over, if it has a next one: it holds quota, is on no
    worker yet, its MultiKueue check is Pending and workers of its config are not nominated yet."""
    if not wl.nominated or wl.cluster_name or not wl.reserving or wl.evicted:
        return None
    check = check_of(state, wl)
    if check is None or check.state != "Pending":
        return None
    clusters = _config_clusters(state, check.name)
    return wl.nominated_at + ROUND_MS + 1 if clusters and _not_nominated(wl, clusters, dispatcher) else None


def gate_deadlines(state: ClusterState, timeout_ms: int) -> list[tuple[int, str]]:
    """MultiKueueOrchestratedPreemption: (when it may open another copy's preemption gate, key) of every workload
    holding quota, on no worker yet, its MultiKueue check Pending, whose blocked copies wait for the
    single-cluster preemption timeout since a gate was opened, in time order (:mod:`.preemption_gates`). Only the
    workloads holding quota are looked at (the fold's index of them), in no order that matters: the answer is sorted."""
    out = []
    wls = state.workloads
    for keys in state.reserving.values():
        for key in keys:
            wl = wls[key]
            if not wl.remotes or not wl.reserving or wl.evicted or wl.cluster_name:
                continue
            check = check_of(state, wl)
            if check is None or check.state != "Pending":
                continue
            _, at = preemption_gates.next_gate(wl, None, timeout_ms)
            if at is not None:
                out.append((at, key))
    return sorted(out)


def lost_deadlines(state: ClusterState, worker_lost_ms: int) -> list[tuple[int, str]]:
    """(when its worker counts as lost, key) of every workload whose MultiKueue check is Ready on a worker that is
    unreachable now, in time order (:func:`lost_at`): the rule that sets such a check to Retry acts then. Empty at
    once while every worker is reachable (the common case: no workload is looked at), and then only the workloads
    placed on a worker are looked at (the fold's index of them, in no order that matters: the answer is sorted)."""
    lost = lost_workers(state, worker_lost_ms)
    if not lost:
        return []
    wls = state.workloads
    out = [(at, key) for key in state.dispatched
           if (wl := wls.get(key)) is not None and (at := lost_at(state, wl, lost)) is not None]
    return sorted(out)


def lost_workers(state: ClusterState, worker_lost_ms: int) -> dict[str, int]:
    """Worker -> when it counts as lost, for every worker unreachable now."""
    return {name: link.since + worker_lost_ms for name, link in state.cluster_links.items() if not link.connected}


def lost_at(state: ClusterState, wl: WorkloadInfo, lost: dict[str, int]) -> int | None:
    """When ``wl``'s worker counts as lost (``lost``: :func:`lost_workers`), if ``wl`` holds quota, is not evicted
    and its MultiKueue check is Ready on that worker."""
    if wl.cluster_name not in lost or not wl.reserving or wl.evicted:
        return None
    check = check_of(state, wl)
    return lost[wl.cluster_name] if check is not None and check.state == "Ready" else None
