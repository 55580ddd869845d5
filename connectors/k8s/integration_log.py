"""What a job integration (:mod:`connectors.k8s.jobs`, :mod:`connectors.k8s.pods_integration`) puts in the log
besides its writes to the cluster: facts about a workload, appended at most once while the log has not applied
them (a reconcile that runs again before the mirror catches up must not say the same thing twice), and
``JobActed`` records of what it did to its Job or Pod, from which that object's Kubernetes Events are recorded."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from events.timefmt import parse_time
from projections.workloads import WorkloadInfo

Append = Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]]


class _Counts(Protocol):
    finished: int
    errors: int


class IntegrationLog:
    def __init__(self, append: Append, mirror: Mirror, stats: _Counts, *, kind: str, log: Any) -> None:
        self._append, self._mirror, self._stats = append, mirror, stats
        self._kind, self._log = kind, log
        self._appended: dict[tuple[str, str], int] = {}
        """(workload key, event type) -> offset of the event appended, until the mirror applied it (then it holds
        nothing back, and is dropped at the next append: this holds only what is in flight)."""

    async def append_once(self, wl: WorkloadInfo, event: ev.AnyEvent) -> bool:
        """Append ``event`` unless one of its kind for ``wl`` is still to be applied; whether it was appended."""
        tag = type(event).__struct_config__.tag  # type: ignore[attr-defined]
        applied = [k for k, at in self._appended.items() if at <= self._mirror.offset]
        for k in applied:
            del self._appended[k]
        if (wl.key, tag) in self._appended:
            return False
        (offset,) = await self._append([event])
        self._appended[(wl.key, tag)] = offset
        if tag == "WorkloadFinished":
            self._stats.finished += 1
        self._log.info("appended", kind=tag, workload=wl.key)
        return True

    async def report(self, key: str, uid: str, action: str, *, workload: str = "", cluster_queue: str = "",
                     message: str = "", creation_latency_ms: int | None = None) -> None:
        """Put in the log what was just done to the object ``key`` (its Event is recorded from there). The write
        is done: a failure here loses only the Event."""
        try:
            await self._append([ev.JobActed(time=_now(), key=key, uid=uid, kind=self._kind, action=action,
                                            workload=workload, cluster_queue=cluster_queue, message=message,
                                            creation_latency_ms=creation_latency_ms)])
        except Exception as exc:  # noqa: BLE001 - the action stands; only its Event is lost
            self._stats.errors += 1
            self._log.warning(f"could not record a {self._kind.lower()} action, its Event is lost", key=key,
                              action=action, error=str(exc))


    async def gate_removed(self, key: str, uid: str, gate: str, wl: WorkloadInfo, *,
                           group: bool = False) -> None:
        """Put in the log that the patch just made removed ``gate`` from the Pod ``key`` of ``wl``
        (:func:`record_gate_removal`)."""
        if not await record_gate_removal(self._append, self._log, key, uid, gate, wl, group=group):
            self._stats.errors += 1


async def record_gate_removal(append: Append, log: Any, key: str, uid: str, gate: str, wl: WorkloadInfo, *,
                              group: bool = False) -> bool:
    """Append that the patch just made removed ``gate`` from the Pod ``key`` (``uid``) of the admitted ``wl``
    (``group``: a pod group's Pod), at this clock, as Kueue's controllers time
    ``pod_scheduling_gate_removal_seconds`` right after their patch; whether it was appended. The patch is
    done: a failure loses only the observation."""
    try:
        await append([ev.SchedulingGateRemoved(time=_now(), key=key, uid=uid, gate=gate, workload=wl.key,
                                               workload_uid=wl.uid, is_group=group)])
    except Exception as exc:  # noqa: BLE001 - the gate is lifted; only its observation is lost
        log.warning("could not record a scheduling gate's removal, its observation is lost", pod=key,
                    gate=gate, error=str(exc))
        return False
    return True


def _now() -> int:
    return int(time.time() * 1000)


def creation_latency_ms(job: o.ObjectMeta, created: bytes) -> int | None:
    """How long after ``job`` its Workload (the apiserver's answer to its creation, ``created``) was created, in
    ms: what Kueue's job reconciler observes in ``workload_creation_latency_seconds`` after creating a Workload.
    None when there is nothing to observe: Kueue skips a job whose generation is above 1 (changed since it was
    created, so the Workload may be late for another reason), or a timestamp is missing."""
    if job.generation > 1 or not job.creation_timestamp:
        return None
    try:
        return parse_time(json.loads(created)["metadata"]["creationTimestamp"]) - parse_time(job.creation_timestamp)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
