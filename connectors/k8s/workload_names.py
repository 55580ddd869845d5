"""Kueue's name for the Workload it makes for an object of any kind it runs, one rule for every integration.

``<kind in lower case>-<name>`` cut to what leaves room for the hash, then ``-`` and the first 5 hex digits of
SHA-1 over ``<Kind>\\n<group>\\n<name>\\n<uid>`` (the group empty for core kinds). The name is the same for the
same object whichever replica computes it, and differs between kinds and between objects of one name made anew.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from connectors.k8s.resources import Resource
from events import objects as o

HASH_LENGTH = 5
MAX_PREFIX, SHORT_PREFIX = 252 - HASH_LENGTH, 62 - HASH_LENGTH
"""How much of ``<kind>-<name>`` a Workload's name keeps (Kueue's ``ShortWorkloadNames`` gate: the short one,
which keeps the name a valid label value)."""


def owner_workload_name(kind: str, group: str, name: str, uid: str, *, short: bool = False,
                        extra: str | None = None) -> str:
    """The Workload name for object ``name`` (``uid``) of ``kind`` in API ``group``; ``short``: the
    ``ShortWorkloadNames`` gate; ``extra``: hashed too, after one more ``\\n`` (an elastic job's slice: its
    generation)."""
    prefix = f"{kind.lower()}-{name}"[:SHORT_PREFIX if short else MAX_PREFIX]
    hashed = f"{kind}\n{group}\n{name}\n{uid}" + (f"\n{extra}" if extra is not None else "")
    digest = hashlib.sha1(hashed.encode()).hexdigest()
    return f"{prefix}-{digest[:HASH_LENGTH]}"


def controller_ref(resource: Resource, name: str, uid: str) -> dict[str, Any]:
    """The controller ownerReference of the Workload Kueue makes for object ``name`` (``uid``) of ``resource``."""
    return {"apiVersion": resource.api_version, "kind": resource.kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def controlled_by(obs: o.Workload, resource: Resource) -> tuple[str, str] | None:
    """``(name, uid)`` of the object of ``resource``'s kind (any version of its group) that controls Workload
    ``obs`` (None: none does)."""
    for ref in obs.metadata.owner_references:
        if ref.controller and ref.kind == resource.kind and ref.api_version.startswith(f"{resource.group}/"):
            return ref.name, ref.uid
    return None


class NamedByResource:
    """The three name functions the shared job reconciler reads of a kind (``workload_name``, ``controller_ref``,
    ``owner_of``), all from the kind's :class:`Resource` (``resource``: an attribute or a property), so no kind
    spells them again."""

    resource: Resource

    def workload_name(self, name: str, uid: str, short: bool = False) -> str:
        """Kueue's name for the Workload of object ``name`` (``uid``); ``short``: the ``ShortWorkloadNames``
        gate."""
        return owner_workload_name(self.resource.kind, self.resource.group, name, uid, short=short)

    def controller_ref(self, name: str, uid: str) -> dict[str, Any]:
        """The controller ownerReference of that Workload."""
        return controller_ref(self.resource, name, uid)

    def owner_of(self, obs: o.Workload) -> tuple[str, str] | None:
        """``(name, uid)`` of the object of this kind that controls Workload ``obs`` (None: none does)."""
        return controlled_by(obs, self.resource)


@dataclass(frozen=True)
class KindNames(NamedByResource):
    """A kind module's names, bound at module level: ``workload_name = NAMES.workload_name`` and so on."""

    resource: Resource
