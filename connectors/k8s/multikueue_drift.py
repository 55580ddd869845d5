"""Whether a MultiKueue copy's spec drifted from its manager Workload's (Kueue's
``isRemoteSpecOutOfSync``, used by ``reconcileGroup`` step 5 of its MultiKueue workload reconciler): such a
copy is deleted, and made anew where it is still to be (the reserving worker's is not: the check goes Retry
once it is seen gone).

Kueue compares the copy as its worker stored it with the manager's Workload (``equality.Semantic.DeepEqual``,
the preemption gates left out). Both sides went through the same CRD schema and Go types there. Not so with
kueue-es as the manager: its Workload CRD is its own (no defaults, unknown fields kept), while a Kueue
worker's apiserver defaults fields inside the pod templates (a gRPC probe's ``service``, a port's
``protocol``), prunes those its schema lacks, and its webhook may drop a pod set's ``minCount``. A copy
compared as stored would be drifted as soon as it is made, deleted, made again, and so on for ever.

So a copy is judged by what it was made from, never by how its worker stored it. Each copy kueue-es writes
carries :data:`MADE_FROM`: the uid and ``metadata.generation`` of the manager Workload it was made from (or
last brought in line with, by an elastic scale-down) and :func:`spec_digest` of that Workload. The copy
drifted when the manager's Workload the log holds is that same Workload (its uid), newer (a generation above
the recorded one) and its digest differs (:func:`copy_drifted`). Hence:

* a log lagging behind the manager version a copy was written from never calls it drifted;
* how the worker stored the copy (defaults, pruning, its webhook) does not matter;
* a copy without the record (made before kueue-es wrote it, by Kueue's manager, or from a manager Workload
  whose uid or generation is unknown) is never called drifted, nor one of another manager Workload of that
  name;
* a worker-side edit of the copy is not seen (Kueue deletes such a copy): a known difference.

:func:`spec_digest` holds the pod sets (name, count, ``minCount``, topology request, and the template by its
semantic digest, :mod:`events.template_digest`: quantities by value, an empty list as none), the queue and
the maximum execution time. Not the priority (class and value: written to the copy in place, as Kueue does),
nor ``active`` (a manager's deactivation goes through the eviction and the copy's DeactivationTarget;
upstream #13793 leaves ``Active`` out of ``isRemoteSpecOutOfSync``), nor the preemption gates (Kueue sets
them apart). A template without a digest (a log written before them) makes the digest unknown: nothing is
called drifted on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

from events import objects as o
from events.template_digest import stamped_from_json

MADE_FROM = "kueue-es/multikueue-made-from"
"""The copy's annotation (kueue-es's own key) recording ``<uid>/<generation>/<digest>`` of the manager
Workload it was written from. A change of what the digest covers, or how, is a new key, never a new form of
this one's value."""

_encoder = msgspec.json.Encoder(order="sorted")

DIGEST_MEMO_SIZE = 4096
"""Manager Workloads whose digest :func:`copy_drifted` keeps (all dropped when full): a pass compares every
copy of every workload that moved, a relist every copy, each on every worker."""
_digests: dict[tuple[str, str], tuple[o.Workload, str | None]] = {}


def spec_digest(manager: o.Workload) -> str | None:
    """The digest of what a copy is compared in (see the module docstring) of the manager Workload ``manager``
    (its view, pod-set templates stamped with their digests); None when a template's digest is unknown."""
    pod_sets = []
    for ps in manager.spec.pod_sets:
        if ps.template.digest is None:
            return None
        pod_sets.append(msgspec.structs.replace(ps, template=o.PodTemplateSpec(digest=ps.template.digest)))
    compared = o.WorkloadSpec(pod_sets=pod_sets, queue_name=manager.spec.queue_name,
                              maximum_execution_time_seconds=manager.spec.maximum_execution_time_seconds)
    return hashlib.sha256(_encoder.encode(compared)).hexdigest()[:32]


def made_from(manager: o.Workload) -> str | None:
    """The :data:`MADE_FROM` value of a copy written from ``manager``; None when its uid, generation or digest
    is unknown (the copy then carries none, and is never called drifted)."""
    meta = manager.metadata
    digest = spec_digest(manager)
    if not meta.uid or meta.generation < 1 or digest is None:
        return None
    return f"{meta.uid}/{meta.generation}/{digest}"


def made_from_json(raw: bytes) -> str | None:
    """:func:`made_from` of the manager Workload ``raw`` as its apiserver answered a read (decoded as the
    watch decodes it); None when it does not decode."""
    try:
        return made_from(stamped_from_json(msgspec.json.decode(raw, type=o.Workload), raw))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _record(copy_raw: Mapping[str, Any]) -> tuple[str, int, str] | None:
    """(uid, generation, digest) the copy ``copy_raw`` records, or None (none, or not of that form)."""
    annotations = (copy_raw.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(MADE_FROM) if isinstance(annotations, Mapping) else None
    parts = value.split("/") if isinstance(value, str) else []
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2]:
        return None
    return parts[0], int(parts[1]), parts[2]


def copy_drifted(manager: o.Workload, copy_raw: Mapping[str, Any]) -> bool:
    """Whether the copy ``copy_raw`` (a worker's Workload, as its watch shows it) was written from an older
    version of the manager Workload ``manager`` (as the log holds it) whose compared spec differs from it
    now."""
    record = _record(copy_raw)
    if record is None:
        return False
    uid, generation, digest = record
    if manager.metadata.uid != uid or manager.metadata.generation <= generation:
        return False
    now = _digest_of(manager)
    return now is not None and now != digest


def _digest_of(manager: o.Workload) -> str | None:
    """:func:`spec_digest` of ``manager``, computed once for that view of it (the log's views are immutable: a
    new version of the Workload is a new view)."""
    key = (manager.metadata.namespace, manager.metadata.name)
    held = _digests.get(key)
    if held is not None and held[0] is manager:
        return held[1]
    if len(_digests) >= DIGEST_MEMO_SIZE:
        _digests.clear()
    digest = spec_digest(manager)
    _digests[key] = (manager, digest)
    return digest
