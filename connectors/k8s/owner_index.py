"""Small pieces the job integrations that list and watch their own objects (Pods, JobSets) share with each other
and with the Job integration: which Workloads an object of a name controls, which objects a record of the log
touches, and doing an action once per version of an object.

Why here: the log holds no Pods or JobSets, so the mirror cannot say which of them a Workload belongs to (as its
``owned_by`` does for Jobs); each of these integrations keeps that index from the Workloads the log applies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from connectors.k8s.job_priority import PRIORITY_LABEL
from events import objects as o
from events import schema as ev

if TYPE_CHECKING:
    from connectors.k8s.mirror import Mirror


class OwnerIndex:
    """Workload key <-> key of the object that controls it (its controller ownerReference, read by ``owner_key``)."""

    def __init__(self, owner_key: Callable[[o.Workload], str | None]) -> None:
        self.owner_key = owner_key
        self.owner_of: dict[str, str] = {}
        """Workload key -> key of the object that controls it."""
        self.owned: dict[str, set[str]] = {}
        """Object key -> the Workloads an object of that name controls (any uid: one made anew under the name)."""

    def add(self, wl_key: str, obs: o.Workload) -> str | None:
        """Record the controller of Workload ``obs``: its key (None: no object of this kind controls it)."""
        owner = self.owner_key(obs)
        if owner is None:
            return None
        self.owner_of[wl_key] = owner
        self.owned.setdefault(owner, set()).add(wl_key)
        return owner

    def remove(self, wl_key: str) -> str | None:
        """Forget a Workload that is gone: the key of the object that controlled it (None: none)."""
        owner = self.owner_of.pop(wl_key, None)
        if owner is not None:
            owned = self.owned.get(owner, set())
            owned.discard(wl_key)
            if not owned:
                self.owned.pop(owner, None)
        return owner

    def touched(self, event: ev.AnyEvent, objects: Mapping[str, Any]) -> set[str]:
        """Keys of ``objects`` an event of the log touches, indexing the Workloads it brings or takes: the
        controller of a Workload that changed or went, every object of a namespace that changed or of the
        Configuration, and those a priority class may let have a Workload (none yet, or one naming it)."""
        keys: set[str] = set()
        if isinstance(event, ev.ObjectUpserted):
            obj = event.obj
            if isinstance(obj, o.Workload):
                found = self.add(event.key, obj)
                if found is not None:
                    keys.add(found)
            elif isinstance(obj, o.Namespace):
                prefix = f"{obj.metadata.name}/"
                keys.update(k for k in objects if k.startswith(prefix))
            elif isinstance(obj, (o.WorkloadPriorityClass, o.PriorityClass)):
                named = obj.metadata.name if isinstance(obj, o.WorkloadPriorityClass) else None
                keys.update(k for k, j in objects.items()
                            if k not in self.owned or j.metadata.labels.get(PRIORITY_LABEL) == named)
        elif isinstance(event, ev.ObjectDeleted) and event.kind == "Workload":
            found = self.remove(event.key)
            if found is not None:
                keys.add(found)
        elif isinstance(event, ev.ConfigRecorded):
            keys.update(objects)
        owner = self.owner_of.get(event.key)
        if owner is not None:
            keys.add(owner)
        return keys


@contextlib.contextmanager
def following(mirror: Mirror, owners: OwnerIndex, on_applied: Callable[[list[ev.Record]], None]) -> Iterator[None]:
    """For the block: ``owners`` indexes the Workloads ``mirror`` holds now, and ``on_applied`` is told every batch
    of records the log applies (and keeps the index from them: :meth:`OwnerIndex.touched`) — an integration's
    watch of the log, from its start to its end."""
    for key, obs in mirror.workloads.items():
        owners.add(key, obs)
    mirror.listeners.append(on_applied)
    try:
        yield
    finally:
        mirror.listeners.remove(on_applied)


async def once(acted: dict[str, tuple[str, str]], key: str, marker: tuple[str, str],
               work: Coroutine[Any, Any, Any]) -> None:
    """Run ``work`` unless ``marker`` (an action, the version of the object it acts on) is the last one recorded
    for ``key`` in ``acted``: a view that has not caught up with a write yet does not repeat it. A failed run
    is forgotten, so the next pass tries again — unless another run recorded its own meanwhile (a namesake's)."""
    if acted.get(key) == marker:
        work.close()
        return
    acted[key] = marker
    try:
        await work
    except BaseException:
        if acted.get(key) == marker:
            del acted[key]
        raise
