"""The ``Active`` condition of the AdmissionChecks kueue-es controls, written as Kueue's controller writes it.

kueue-es is the controller of every AdmissionCheck whose ``controllerName`` is
``kueue.x-k8s.io/provisioning-request`` (and, under the MultiKueue gate, ``kueue.x-k8s.io/multikueue``, whose
condition is :func:`projections.admissionchecks.multikueue_check_active`): such a check is ``Active=True`` (reason ``Active``) while the
ProvisioningRequestConfig its parameters name exists, else ``Active=False`` with reason ``BadParametersRef`` and
the error (:func:`projections.admissionchecks.check_active`, the same answer the scheduler acts on). Whenever a
check or a config changes, the checks whose condition differs (or was written for an older generation of the
check) get one status patch — the other conditions kept, ``lastTransitionTime`` moved only when the status flips — conditioned on the check's resourceVersion (a conflict
waits for the watch to bring the newer check). Checks of other controllers are theirs to write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import Conflict, NotFound
from connectors.k8s.journal import Journal
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.admissionchecks import MultiKueueWorld, check_active, runs_controller

log = structlog.get_logger("kueue_es.k8s.checkstatus")
ADMISSION_CHECKS = BY_KIND["AdmissionCheck"]


@dataclass
class CheckStatusStats:
    writes: int = 0
    conflicts: int = 0
    errors: int = 0


def desired_active(ac: o.AdmissionCheck, configs: dict[str, o.ProvisioningRequestConfig], now_ms: int,
                   multikueue: MultiKueueWorld | None = None) -> list[dict[str, Any]] | None:
    """The check's conditions with ``Active`` as it should be at the check's generation, or None when it already
    is (or is not ours: a MultiKueue check is ours only while ``multikueue`` is given, the gate on). An edit of the
    check that leaves its status, reason and message as they were still has the condition written, at the new
    generation (Kueue #14838 for the MultiKueue controller, #14931 for the ProvisioningRequest one)."""
    if not runs_controller(ac, multikueue):
        return None
    active, reason, message = check_active(ac, configs, multikueue)
    status = "True" if active else "False"
    current = next((c for c in ac.status.conditions if c.type == "Active"), None)
    if (current is not None and (current.status, current.reason, current.message) == (status, reason, message)
            and current.observed_generation == ac.metadata.generation):
        return None
    ltt = current.last_transition_time if current is not None and current.status == status else format_time(now_ms)
    cond = o.Condition(type="Active", status=status, reason=reason, message=message, last_transition_time=ltt,
                       observed_generation=ac.metadata.generation)
    others = [c for c in ac.status.conditions if c.type != "Active"]
    return [msgspec.to_builtins(c) for c in [*others, cond]]


class CheckStatusWriter:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0) -> None:
        self.client = client
        self.journal = journal
        self.state = journal.mirror.state
        self.stats = CheckStatusStats()
        self._retry = Retries(retry_s)
        self._dirty: set[str] = set(self.state.admission_checks)
        journal.mirror.listeners.append(self._on_applied)

    def _on_applied(self, records: list[ev.Record]) -> None:
        for r in records:
            e = r.event
            if isinstance(e, ev.ObjectUpserted):
                if isinstance(e.obj, o.AdmissionCheck):
                    self._dirty.add(e.key)
                elif isinstance(e.obj, o.ProvisioningRequestConfig | o.MultiKueueConfig | o.MultiKueueCluster):
                    self._dirty.update(self.state.admission_checks)
            elif isinstance(e, ev.ObjectDeleted) and e.kind in ("ProvisioningRequestConfig", "MultiKueueConfig",
                                                                "MultiKueueCluster"):
                self._dirty.update(self.state.admission_checks)
            elif isinstance(e, ev.MultiKueueClusterObserved | ev.ConfigRecorded):
                self._dirty.update(self.state.admission_checks)

    def _take(self) -> set[str]:
        keys = self._dirty | self._retry.due()
        self._dirty = set()
        return keys

    async def run(self) -> None:
        await KeyedWorkers(self.sync_guarded, 4).run(self._take, self.journal.subscribe(), self._retry.timeout)

    async def sync_guarded(self, name: str) -> None:
        await self._retry.attempt(self.sync, name, what="admission check status", stats=self.stats, log=log,
                                  check=name)

    async def sync(self, name: str, now_ms: int | None = None) -> None:
        ac = self.state.admission_checks.get(name)
        if ac is None:
            return
        conditions = desired_active(ac, self.state.provisioning_configs,
                                    int(time.time() * 1000) if now_ms is None else now_ms, self.state.multikueue)
        if conditions is None:
            return
        body = {"metadata": {"resourceVersion": ac.metadata.resource_version}, "status": {"conditions": conditions}}
        try:
            await self.client.patch(ADMISSION_CHECKS, name, body, subresource="status")
        except Conflict:
            self.stats.conflicts += 1  # the newer check comes through the watch and is looked at again
            return
        except NotFound:
            return
        self.stats.writes += 1
        log.info("admission check status written", check=name, active=conditions[-1]["status"],
                 reason=conditions[-1]["reason"])
