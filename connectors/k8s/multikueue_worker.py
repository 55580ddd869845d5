"""One MultiKueue worker cluster as the manager's connector sees it (:class:`Worker`): its client and connection
state, what its watches show of the copies this origin made there, and the holds that keep a lagging watch from
taking the manager back (copies deleted whose DELETED has not come, answers to writes newer than the watch,
:func:`kept`); and what MultiKueue reads of, or writes on, a worker's Workload copy (:func:`remote_conditions`,
:func:`topology_pod_sets`, :func:`remote_gates`, :func:`gate_patch`). Pure: no I/O.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from connectors.k8s.client import KubeClient, resource_version_number
from connectors.k8s.multikueue_identifiers import workload_name_of
from connectors.k8s.resources import BY_KIND, Resource
from events import objects as o
from projections.preemption_gates import BLOCKED_ON_PREEMPTION_GATES

WORKLOADS = BY_KIND["Workload"]
READ_CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Finished", BLOCKED_ON_PREEMPTION_GATES)
"""The conditions of a worker's copy MultiKueue acts on (the last under MultiKueueOrchestratedPreemption)."""
CONNECTING = "connecting"
"""The message of a worker not tried yet (not listed since its client was made, or its credential plugin running):
neither reached nor reported lost."""


@dataclass
class Opening:
    """The watches of one connection to a worker (:meth:`MultiKueueConnector._follow_opening`)."""

    unopened: set[str]
    """The kinds whose watch the worker has not answered yet: the worker is connected once none is left."""
    cut: bool = False
    """The watch that failed had opened: a cut, not a failed attempt."""


@dataclass
class Worker:
    """One worker cluster: its client, and what its watches show of the copies this origin made there."""

    name: str
    source: bytes
    """The kubeconfig the client was built from (a new one replaces the client)."""
    client: KubeClient | None = None
    connected: bool = False
    reason: str = ""
    message: str = ""
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    owners: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Owner kind (an adapter's) -> the copies of owners of that kind this origin made there, by key."""
    task: asyncio.Task | None = None
    origin: str = ""
    """The origin whose copies its watches follow (their label selector)."""
    moved: set[str] = field(default_factory=set)
    """Manager Workload keys whose copies there the watches showed changed, or whose last pass failed there,
    since the last pass."""
    relisted: bool = True
    """The watches listed afresh (a new connection): the next pass looks at every workload for this worker."""
    reconnecting: bool = False
    """A watch of a connected worker was cut (:data:`WATCH_CUTS`) and it is being listed again: skipped by the
    passes (nothing read, written or deleted there) but not reported lost unless that relist fails, as Kueue only
    reconnects a client whose watch ended, its cluster kept Active, and its workload reconciler skips it meanwhile."""
    attempts: int = 0
    """Failed connection attempts in a row (Kueue's ``failedConnAttempts``): the next one is made after
    :func:`retry_after` of them, and they show in the Active condition's message; none once every watch of a
    connection opened (a new client or origin starts afresh)."""
    opening: Opening = field(default_factory=lambda: Opening(set()))
    """The watches of its connection being made (:meth:`MultiKueueConnector._opened`)."""
    deleted: dict[str, str] = field(default_factory=dict)
    """Manager Workload key -> uid of its copy there this origin deleted, left in :attr:`workloads` until the
    watch shows it deleted: a watch lagging behind the delete still brings that copy's last versions, which are not
    the workload's copy (:meth:`MultiKueueConnector._observe`), nor is a new one made over it meanwhile."""
    deleted_owners: dict[str, dict[str, str]] = field(default_factory=dict)
    """Owner kind -> owner copy key -> uid of that copy there this origin deleted, held as :attr:`deleted` holds
    Workload copies until the watch shows it deleted (left in :attr:`owners`, or still to come from a watch that has
    not reached it): what a lagging watch still brings of it is not the workload's new run's copy (its old status
    is not mirrored), nor is a new one made over it meanwhile."""
    watched: dict[str, str] = field(default_factory=dict)
    """Kind -> the resourceVersion its listing and watch have shown this worker's objects of that kind at
    (:func:`kept`)."""
    mirrored: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(owner kind, owner copy key) -> the uid and resourceVersion of the copy there whose status was last written
    to the manager's owner (the same version is not written again); forgotten with the copy (:meth:`gone`,
    :meth:`listed`) or the worker."""

    def keep(self, r: Resource, key: str, answer: dict[str, Any]) -> dict[str, Any]:
        """The answer to this manager's write of its copy ``key`` of kind ``r`` there, held as :func:`kept` says;
        what it holds of that copy now (the answer itself when it holds none: the copy is gone)."""
        cache = self.workloads if r is WORKLOADS else self.owners.setdefault(r.kind, {})
        held = kept(cache.get(key), answer, self.watched.get(r.kind, ""))
        if held is None:
            return answer
        cache[key] = held
        return held

    def waits_for_deleted(self, kind: str, key: str) -> bool:
        """Whether the owner copy ``key`` of ``kind`` there is one this origin deleted whose DELETED the watch has
        not shown yet (:attr:`deleted_owners`): held, whatever versions of it the watch still brings."""
        uid = self.deleted_owners.get(kind, {}).get(key)
        return uid is not None and uid_of(self.owners.get(kind, {}).get(key)) in ("", uid)

    def follows(self, kind: str, key: str, obj: dict[str, Any]) -> bool:
        """Whether the watch of owner copies of ``kind`` is to show ``obj`` deleted: it holds it at ``key`` (its
        uid), or has not reached its version yet (:func:`kept`). What is remembered of such a copy is forgotten with
        it (:meth:`gone`); of another (shown deleted already), nothing is kept."""
        uid, cached = uid_of(obj), self.owners.get(kind, {}).get(key)
        return ((cached is not None and uid_of(cached) == uid)
                or (bool(uid) and kept(None, obj, self.watched.get(kind, "")) is not None))

    def hold_deleted(self, kind: str, key: str, deleted: dict[str, Any]) -> None:
        """The owner copy ``deleted`` (of ``kind``, at ``key``), whose delete the worker just accepted, is held until
        the watch shows it deleted (:attr:`deleted_owners`) if that is to come (:meth:`follows`); otherwise (no uid
        to tell it by, or its DELETED shown already) it is only taken out of :attr:`owners`."""
        if uid_of(deleted) and self.follows(kind, key, deleted):
            self.deleted_owners.setdefault(kind, {})[key] = uid_of(deleted)
        elif uid_of(self.owners.get(kind, {}).get(key)) == uid_of(deleted):
            self.owners[kind].pop(key, None)

    def listed(self, kind: str, cache: dict[str, dict[str, Any]]) -> None:
        """The copies of ``kind`` there were just listed (``cache``): what is remembered of copies the listing no
        longer holds, whose DELETED the watch from after it will not show, is forgotten."""
        if kind == WORKLOADS.kind:
            self.deleted = {key: uid for key, uid in self.deleted.items() if uid_of(cache.get(key)) == uid}
        else:
            self.deleted_owners[kind] = {key: uid for key, uid in self.deleted_owners.get(kind, {}).items()
                                         if uid_of(cache.get(key)) == uid}
        self.mirrored = {m: seen for m, seen in self.mirrored.items()
                         if m[0] != kind or uid_of(cache.get(m[1])) == seen[0]}

    def gone(self, kind: str, key: str, uid: str) -> None:
        """The watch showed the copy ``uid`` of ``kind`` at ``key`` deleted: it is no longer held, nor what was
        mirrored of it remembered."""
        held = self.deleted if kind == WORKLOADS.kind else self.deleted_owners.get(kind, {})
        if held.get(key) == uid:
            del held[key]
        if self.mirrored.get((kind, key), ("",))[0] == uid:
            del self.mirrored[kind, key]

    def hold_as(self, old: Worker) -> None:
        """This worker replaces ``old`` for the same cluster (new credentials, a new kubeconfig): what ``old`` held
        of the copies there is held here too — a copy deleted whose DELETED was not shown yet (:attr:`deleted`,
        :attr:`deleted_owners`) is still the one deleted, not a new one, and what was mirrored of a copy
        (:attr:`mirrored`) is not written again. This worker's listings forget what they no longer hold
        (:meth:`listed`)."""
        self.deleted = dict(old.deleted)
        self.deleted_owners = {kind: dict(held) for kind, held in old.deleted_owners.items()}
        self.mirrored = dict(old.mirrored)

    def copied(self) -> set[str]:
        """The manager Workload keys this origin has copies for there: a Workload copy, or an owner's copy naming
        it (left behind when its Workload copy was deleted there or collected)."""
        return set(self.workloads) | {k for cache in self.owners.values() for k in map(workload_key_of,
                                                                                        cache.values()) if k}


def remote_conditions(raw: dict[str, Any]) -> list[o.Condition]:
    """The conditions MultiKueue reads of a worker's copy, by type."""
    conds = [c for c in (raw.get("status") or {}).get("conditions") or [] if c.get("type") in READ_CONDITIONS]
    return [o.Condition(type=c["type"], status=c.get("status", ""), reason=c.get("reason", ""),
                        message=c.get("message", ""), last_transition_time=c.get("lastTransitionTime"))
            for c in sorted(conds, key=lambda c: c["type"])]


def topology_pod_sets(raw: dict[str, Any]) -> list[str]:
    """The copy's pod sets the worker placed by topology (an assignment with a ``topologyAssignment``), sorted."""
    admission = (raw.get("status") or {}).get("admission") or {}
    return sorted(psa.get("name", "") for psa in admission.get("podSetAssignments") or []
                  if psa.get("topologyAssignment"))


def kept(cached: dict[str, Any] | None, answer: dict[str, Any], watched: str = "") -> dict[str, Any] | None:
    """What the manager keeps of a worker's object it just wrote (None: nothing), ``cached`` being what its watch
    of the worker brought, which is at version ``watched`` of that kind: the write's answer, unless the watch
    already brought a later version of that object, or went past the answer's version without it (it showed the
    object deleted, or made and deleted, before the answer was read). Read late (a busy manager), the answer would
    take the manager back to the object as written, and the watch, past that version, would never bring it forward
    again: a copy admitted on the worker meanwhile would never be seen admitted, a copy deleted there would be held
    for ever. Versions are ordered as numbers (KEP-5504); one that is not a number keeps the answer."""
    was, now = (cached or {}).get("metadata") or {}, answer.get("metadata") or {}
    answered = resource_version_number(now.get("resourceVersion", ""))
    if cached is not None and was.get("uid") == now.get("uid"):
        return cached if resource_version_number(was.get("resourceVersion", "")) > answered else answer
    return cached if 0 <= answered <= resource_version_number(watched) else answer


def remote_gates(raw: dict[str, Any]) -> list[o.PreemptionGateState]:
    """A worker's copy's ``status.preemptionGates``."""
    return [o.PreemptionGateState(name=g.get("name", ""), position=g.get("position", ""),
                                  last_transition_time=g.get("lastTransitionTime"))
            for g in (raw.get("status") or {}).get("preemptionGates") or []]


def gate_patch(raw: dict[str, Any], gate: o.PreemptionGateState) -> dict[str, Any] | None:
    """The merge patch of a copy's status that shows ``gate`` as the manager opened it (None: it shows it so
    already): the copy's other gates as they are, this one replaced or added."""
    entry = {"name": gate.name, "position": gate.position, "lastTransitionTime": gate.last_transition_time}
    current = list((raw.get("status") or {}).get("preemptionGates") or [])
    if any(g.get("name") == gate.name and g.get("position") == gate.position for g in current):
        return None
    gates = [entry if g.get("name") == gate.name else g for g in current]
    if not any(g.get("name") == gate.name for g in current):
        gates.append(entry)
    return {"status": {"preemptionGates": gates}}


def workload_key_of(owner_copy: dict[str, Any]) -> str:
    """The manager Workload an owner's copy runs on (its ``kueue.x-k8s.io/prebuilt-workload-name``, annotation or
    label, whatever WorkloadIdentifierAnnotations: :func:`workload_name_of`), or ""."""
    name = workload_name_of(owner_copy)
    return f"{(owner_copy.get('metadata') or {}).get('namespace', '')}/{name}" if name else ""


def key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def uid_of(obj: dict[str, Any] | None) -> str:
    return ((obj or {}).get("metadata") or {}).get("uid", "")
