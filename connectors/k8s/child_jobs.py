"""Jobs with a Kueue-managed ancestor — a queued JobSet's Jobs with the JobSet integration on, an MPIJob's launcher,
a Job's Jobs: Kueue's job reconciler calls them not top-level and gives them no Workload, since the ancestor's
Workload is the one queued and admitted. All it does is keep such a Job suspended while that Workload is missing
or not admitted (reference §7.1 item 3), so a child made early never runs on quota its ancestor does not hold —
with ``SkipChildJobSuspension`` off: Kueue v0.20 turns it on (beta), and then leaves the child as it is.

Which ancestor (Kueue's ``FindAncestorJobManagedByKueue``, ``jobframework/reconciler.go``): up the controller
ownerReferences, the topmost object of a kind an enabled integration runs that names a queue in its
``kueue.x-k8s.io/queue-name`` label — or any such object under ``manageJobsWithoutQueueName``. Its Workload
plays no part in it: a Job made under a queued JobSet before the JobSet's Workload exists is that JobSet's
child. A parent of a kind ``integrations.externalFrameworks`` lists counts as one an enabled integration runs
(its external controller makes its Workload, owned by it). The walk goes on through a parent of any other kind
Kueue knows (an integration's kind, the integration off or one kueue-es does not run as a parent, and a
ReplicaSet: :func:`~connectors.k8s.job_selection.known_owner`), reading its metadata but never taking it as
the ancestor
(Kueue's #4824: Job -> JobSet, the JobSet integration off -> queued AppWrapper finds the AppWrapper). It stops
at an object with no controller, at a controller of a kind Kueue does not know (a CronJob: unread), or at one
whose controller reference names another uid than the object of that name has (a stale reference: that object
is not its parent, Kueue's #13802). A parent that is not there (yet) is an error (:class:`OwnerMissing`: the
Job waits), so are cyclic ownership and a chain of more than :data:`CHAIN_LIMIT` parents (Warning
``JobNestingTooDeep`` on the Job). Where the parents are read, the caller's ``parent_of`` says
(:class:`Parents`). The walk is pure: a parent to be read from the apiserver is asked for (:class:`Unread`),
and :func:`walk_reading` has the caller's reader read it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple

from connectors.k8s import job_selection
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.pods_ready import is_admitted
from connectors.k8s.workload_finalizer import shows_finished
from events import objects as o
from kueue_es.scheduler.config import SchedulerConfig
from projections.workloads import WorkloadInfo

CHAIN_LIMIT = 10
"""Kueue's ``managedOwnersChainLimit``: more parents than this above a Job end the walk in an error."""
NESTING_TOO_DEEP = "JobNestingTooDeep"
NESTING_TOO_DEEP_MESSAGE = ("Terminated search for Kueue-managed Job because ancestor depth exceeded limit of "
                            f"{CHAIN_LIMIT}")
"""The Warning Event Kueue's job reconciler records on a Job whose ancestors it stopped counting."""

SUSPENDED = "Suspended"
SUSPENDED_MESSAGE = "Kueue managed child job suspended"
"""The Normal Event Kueue's job reconciler records on a child Job it suspends."""


def parent_workload(keys: Iterable[str], stored: Mapping[str, o.Workload],
                    folded: Mapping[str, WorkloadInfo]) -> WorkloadInfo | None:
    """Of the Workloads the parent controls (``keys``: the mirror's index by controller uid), the newest the
    apiserver does not show finished, as the log holds it: Kueue lists them oldest first (creation time, then uid)
    and takes the last; None when there is none, or the log does not hold it yet."""
    live = [stored[k] for k in keys if k in stored and not shows_finished(stored[k])]
    if not live:
        return None
    newest = max(live, key=lambda w: (w.metadata.creation_timestamp or "", w.metadata.uid))
    return folded.get(newest.key)


def held(job: Any, parent: WorkloadInfo | None, *, finished: bool, sliced: bool = False) -> bool:
    """Whether the child (a Job, a RayCluster: its ``spec.suspend``) is to be suspended: running, not finished,
    its parent's Workload missing or not
    admitted. ``sliced``: the Job or its ancestor is elastic (workload slices): while a scale-up's new slice waits
    there is no admitted one, so Kueue then holds the child only once that Workload is evicted."""
    if finished or job.spec.suspend:
        return False
    if parent is None:
        return True
    return bool(parent.evicted) if sliced else not is_admitted(parent)


class Parent(NamedTuple):
    """A parent the walk reads: its metadata, and whether an enabled integration runs its kind (``managed``:
    it may be the ancestor; else the walk only passes through it, Kueue's ``GetEmptyOwnerObject`` being
    nil)."""

    meta: o.ObjectMeta
    managed: bool


ParentOf = Callable[[str, o.OwnerReference], Parent | None]
"""The parent a controller ownerReference names in a namespace; None: of a kind the walk does not follow.
Raises :class:`OwnerMissing` for one that is not there, :class:`Unread` for one to be read first."""

Reads = dict[tuple[str, str], o.ObjectMeta | None]
"""The parents read for one walk (:func:`walk_reading`), by (kind, name); None: not there."""

Reader = Callable[[str, o.OwnerReference], Awaitable[o.ObjectMeta | None]]
"""Reads the metadata of the parent a reference names in a namespace (None: not there); raises
:class:`~connectors.k8s.errors.KubeError` when it cannot."""


class Unread(Exception):
    """The walk needs a parent read before it can go on: :func:`walk_reading` reads it and walks again."""

    def __init__(self, ref: o.OwnerReference) -> None:
        super().__init__(f"{ref.kind} {ref.name} is to be read")
        self.ref = ref


class AncestryError(Exception):
    """The walk up a Job's owners ended without an answer: the Job is left alone (Kueue's reconcile fails)."""


class OwnerMissing(AncestryError):
    """A parent of a kind the walk follows is not there (yet)."""

    @classmethod
    def of(cls, namespace: str, ref: o.OwnerReference) -> OwnerMissing:
        return cls(f"{ref.kind} {namespace}/{ref.name}, controller of a job, not found")


ManagedAncestry = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""Whether an object being created (namespace, raw object) has a Kueue-managed ancestor, as a webhook asks it
(:func:`connectors.k8s.webhook.ancestry_lookup`); raises :class:`AncestryError` when the walk fails,
:class:`~connectors.k8s.errors.KubeError` when a parent cannot be read."""


def refusal_status(exc: Exception) -> dict[str, Any]:
    """The status a webhook refuses an object with when its ancestors could not be walked: a parent not found as
    the apiserver says it (404), a parent that cannot be read an internal error (500), the rest forbidden (403) —
    Kueue's webhooks fail the defaulting with the walk's error."""
    if isinstance(exc, OwnerMissing):
        return {"code": 404, "reason": "NotFound", "message": str(exc)}
    if not isinstance(exc, AncestryError):
        return {"code": 500, "reason": "InternalError", "message": f"failed to get the object's owner: {exc}"}
    return {"code": 403, "reason": "Forbidden", "message": str(exc)}


class CyclicOwnership(AncestryError):
    """The walk came back to an object it had passed."""


class ChainTooLong(AncestryError):
    """More than :data:`CHAIN_LIMIT` parents above the Job."""


def managed_ancestor(job: o.ObjectMeta, parent_of: ParentOf, manage_unqueued: bool) -> o.ObjectMeta | None:
    """The topmost Kueue-managed ancestor of the object ``job`` describes (module docstring); None: it is
    top-level. ``manage_unqueued``: ``manageJobsWithoutQueueName``."""
    seen: set[str] = set()
    current, top = job, None
    while True:
        if current.uid in seen:
            raise CyclicOwnership(f"{job.namespace}/{job.name}: cyclic ownership at {current.name}")
        seen.add(current.uid)
        ref = next((r for r in current.owner_references if r.controller), None)
        if ref is None:
            return top
        found = parent_of(job.namespace, ref)
        if found is None or found.meta.uid != ref.uid:
            return top  # a parent of another uid is not the one the reference names (Kueue's #13802)
        parent, managed = found
        if managed and (manage_unqueued or parent.labels.get(QUEUE_LABEL)):
            top = parent
        current = parent
        if len(seen) > CHAIN_LIMIT:
            raise ChainTooLong(f"{job.namespace}/{job.name}: {NESTING_TOO_DEEP_MESSAGE}")


def read_parent(reads: Reads, namespace: str, ref: o.OwnerReference, managed: bool) -> Parent:
    """The parent ``ref`` names as ``reads`` has it; :class:`Unread` when it is not read yet."""
    key = (ref.kind, ref.name)
    if key not in reads:
        raise Unread(ref)
    meta = reads[key]
    if meta is None:
        raise OwnerMissing.of(namespace, ref)
    return Parent(meta, managed)


async def walk_reading(job: o.ObjectMeta, parent_of: Callable[[Reads], ParentOf], read: Reader,
                       manage_unqueued: bool) -> o.ObjectMeta | None:
    """:func:`managed_ancestor` over the lookup ``parent_of`` makes of the parents read so far: each parent it
    asks for (:class:`Unread`) is read with ``read``, once, and the walk starts again — at most one read per
    parent, :data:`CHAIN_LIMIT` and one in all, the walk itself staying pure."""
    reads: Reads = {}
    lookup = parent_of(reads)
    while True:
        try:
            return managed_ancestor(job, lookup, manage_unqueued)
        except Unread as unread:
            key = (unread.ref.kind, unread.ref.name)
            if key in reads:
                raise RuntimeError(f"{key} asked for again once read") from unread
            reads[key] = await read(job.namespace, unread.ref)


class Parents:
    """Where the job reconcilers read a job's parents, by kind: the log's Jobs, and what the integrations already
    hold in memory (the JobSets, MPIJobs, RayJobs, RayClusters, LeaderWorkerSets, AppWrappers, TrainJobs,
    RayServices, SparkApplications and training jobs their informers list, the managed Pods: every kind the Job webhook's walk reads),
    registered with :meth:`hold` — the connector does, once, and shares the registry among the Job, JobSet, MPIJob,
    training-job, RayJob, RayCluster, AppWrapper, TrainJob, RayService and SparkApplication reconcilers. A
    kind whose integration is on is read from what is held; a parent of another kind Kueue knows is read by
    the reconciler's walk from the apiserver (:func:`walk_reading`)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[Mapping[str, Any], bool]] = {}

    def hold(self, kind: str, objects: Mapping[str, Any], *, complete: bool = True) -> None:
        """Read parents of ``kind`` from ``objects`` (key -> object with ``metadata``). ``complete``: every
        object of the kind is there, so one missing is not there yet; else (the managed Pods only) one missing
        is not Kueue's and ends the walk."""
        self._held[kind] = (objects, complete)

    def held_meta(self, kind: str, namespace: str, name: str, jobs: Mapping[str, o.Job]) -> o.ObjectMeta | None:
        """The metadata of the ``kind`` object ``namespace/name`` as held in memory (Jobs from ``jobs``); None when
        the kind is not held or the object is not there (yet): the caller reads it elsewhere."""
        objects = jobs if kind == "Job" else self._held.get(kind, ({}, False))[0]
        found = objects.get(f"{namespace}/{name}")
        return None if found is None else found.metadata

    def parent_of(self, config: SchedulerConfig, jobs: Mapping[str, o.Job],
                  reads: Reads | None = None) -> ParentOf:
        """The lookup :func:`managed_ancestor` walks with, under the integrations ``config`` turns on: a
        parent from what is held (Jobs from ``jobs``, the log's) — for a kind an integration runs, only from
        there —, else one of a kind Kueue knows whose integration is off from ``reads`` (:func:`walk_reading`
        fills it), walked through and never the ancestor; one of ``config``'s external kinds
        (``integrations.externalFrameworks``) from ``reads`` too, a parent Kueue manages."""
        held = {**self._held, "Job": (jobs, True)}
        passed: Reads = {} if reads is None else reads
        external = config.external_job_kinds

        def lookup(namespace: str, ref: o.OwnerReference) -> Parent | None:
            owner = (ref.api_version, ref.kind)
            if owner in external:  # no informer lists such a kind (its name may be a held kind's)
                return read_parent(passed, namespace, ref, True)
            if not job_selection.known_owner(owner):
                return None
            runs = job_selection.runs_parent(owner, config)
            objects, complete = held.get(ref.kind, ({}, False))
            found = objects.get(f"{namespace}/{ref.name}")
            if found is not None:
                return Parent(found.metadata, runs)
            if not runs:
                return read_parent(passed, namespace, ref, False)
            if complete:
                raise OwnerMissing.of(namespace, ref)
            return None  # a Pod not Kueue's (only the managed ones are held): the walk ends
        return lookup
