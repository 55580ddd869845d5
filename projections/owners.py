"""The owner references of every Workload, folded from the log.

Kueue's visibility API lists each pending workload with its ``ownerReferences`` (the Job it was made for). The
cluster fold keeps no owners — what it decides reads only whether a workload is owned by a single Pod
(``WorkloadInfo.pod_owned``), and a pending workload's memory is budgeted — so whoever answers visibility queries
from a log folds them here beside it (``kueue-es pending``); the Kubernetes connector answers from the Workload
objects its mirror already holds.
"""

from __future__ import annotations

from events import objects as o
from events import schema as ev
from events.lazy import LazyObjectUpserted, LazyWorkload


class WorkloadOwners:
    """Workload key -> its ``metadata.ownerReferences`` as last upserted; deleted workloads are dropped."""

    def __init__(self) -> None:
        self.owners: dict[str, tuple[o.OwnerReference, ...]] = {}

    def apply(self, record: ev.Record) -> None:
        e = record.event
        if isinstance(e, (ev.ObjectUpserted, LazyObjectUpserted)):
            obj = e.obj
            if isinstance(obj, (o.Workload, LazyWorkload)):
                refs = obj.metadata.owner_references
                if refs:
                    self.owners[e.key] = tuple(refs)
                else:
                    self.owners.pop(e.key, None)
        elif isinstance(e, ev.ObjectDeleted) and e.kind == "Workload":
            self.owners.pop(e.key, None)

    def __call__(self, key: str) -> tuple[o.OwnerReference, ...]:
        return self.owners.get(key, ())
