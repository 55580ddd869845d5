"""``kueue-es run --kube`` that SIGKILLs itself at a chosen point of applying its decisions (tests only).

Environment: ``CRASH_AT`` — where:

* ``status-write`` — right before its ``CRASH_COUNT``-th (1-based, default 1) Workload status write: the decision
  is in the log (fsync'd) but the cluster has not seen it;
* ``admitted-write`` — right before the first status write that makes a Workload ``Admitted=True``: the second
  phase of a two-phase admission is decided (the checks are Ready) and logged, but not written;
* ``request-create`` — right before creating the ``CRASH_COUNT``-th ProvisioningRequest (its decision logged);
* ``request-created`` — right after creating the ``CRASH_COUNT``-th ProvisioningRequest (and its PodTemplates),
  before its outcome is logged, once the cluster shows the Workload ``QuotaReserved=True``: the first phase is
  complete in the cluster, the log does not know its request exists;
* ``job-start`` — right before unsuspending a Job whose Workload is admitted (the admission written).

``CRASH_NAMESPACE``: only objects of that namespace count (other tests' objects share the cluster).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from connectors.k8s.jobs import JobIntegration
from connectors.k8s.provreqs import RequestApplier
from connectors.k8s.writer import StatusWriter
from kueue_es.cli import main

AT = os.environ["CRASH_AT"]
COUNT = int(os.environ.get("CRASH_COUNT", "1"))
NAMESPACE = os.environ.get("CRASH_NAMESPACE", "")
POINTS = ("status-write", "admitted-write", "request-create", "request-created", "job-start")
if AT not in POINTS:
    raise SystemExit(f"CRASH_AT must be one of {', '.join(POINTS)}, not {AT!r}")
_writes = 0
_creates = 0
_patch = StatusWriter._patch
_create = RequestApplier.create
_start = JobIntegration._start


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _mine(namespace: str) -> bool:
    return not NAMESPACE or namespace == NAMESPACE


def _admits(desired: dict[str, Any]) -> bool:
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in desired.get("conditions") or [])


async def _crashing_patch(self: StatusWriter, obs: Any, rv: str, desired: dict[str, Any], *rest: Any) -> str:
    """The writer's ``_patch`` (whatever it takes after ``desired``), dying at the write the run names."""
    global _writes
    if not _mine(obs.metadata.namespace):
        return await _patch(self, obs, rv, desired, *rest)
    _writes += 1
    if (AT == "status-write" and _writes == COUNT) or (AT == "admitted-write" and _admits(desired)):
        _die()
    return await _patch(self, obs, rv, desired, *rest)


def _reserved(self: RequestApplier, key: str) -> bool:
    wl = self.mirror.workloads.get(key)
    return wl is not None and any(c.type == "QuotaReserved" and c.status == "True" for c in wl.status.conditions)


async def _crashing_create(self: RequestApplier, e: Any) -> None:
    global _creates
    if not _mine(e.request.metadata.namespace):
        return await _create(self, e)
    _creates += 1
    if AT == "request-create" and _creates == COUNT:
        _die()
    await _create(self, e)
    if AT == "request-created" and _creates == COUNT:
        while not _reserved(self, e.key):
            await asyncio.sleep(0.05)
        _die()


async def _crashing_start(self: JobIntegration, job: Any, *args: Any) -> None:
    if AT == "job-start" and _mine(job.metadata.namespace):
        _die()
    await _start(self, job, *args)


StatusWriter._patch = _crashing_patch  # type: ignore[method-assign]
RequestApplier.create = _crashing_create  # type: ignore[method-assign]
JobIntegration._start = _crashing_start  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
