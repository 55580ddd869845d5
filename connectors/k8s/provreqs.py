"""Apply the ProvisioningRequest check's decisions to the cluster; record each outcome in the log.

``ProvisioningRequestCreated`` carries every object to write. In the order the decision states: the
PodTemplates (controller owner: the Workload), then the ProvisioningRequest (controller owner: the Workload),
then each template's controller owner becomes the request, so that deleting the request takes its templates.
Each PodTemplate is its pod set's whole template as the apiserver holds the Workload (read first), with what the
decision decides put over it (:mod:`connectors.k8s.provreq_templates`), as Kueue writes it.
``ProvisioningRequestDeleted`` deletes the request, conditioned on its uid when the decision knows it.

Idempotent, so a retry or a restart that applies a decision again is harmless: an object that already exists is
success (a request of the same name owned by another Workload is not: the decision is rejected), and a request
that is already gone is deleted. A workload's decisions are applied in log order, strictly (a later one waits
while an earlier one is held or being retried); each workload on its own (:class:`KeyedWorkers`, keyed by
workload, up to ``concurrency`` (16) at a time), so a slow call holds back only its own workload's later
decisions, never another's. A decision whose Workload is gone ends with ``DecisionRejected``. A creation whose
PodTemplate or request the apiserver answers with an error (refused as invalid, denied by a webhook or policy,
throttled, a name another Workload's request holds...) ends with ``ProvisioningRequestCreateFailed`` then
``DecisionRejected``: Kueue's check controller shows ``Error creating ProvisioningRequest "<name>": <error>``
(or PodTemplate) on the check and records a Warning ``FailedCreate`` Event on each failed attempt, and retries
after a backoff, which the scheduler times in log time (:mod:`projections.create_failures`), so a refusal that
persists neither holds the quota for ever nor floods the log. A call the apiserver never answered
(unreachable, cut) is retried here after ``retry_s``, silently: nothing could be written to the Workload
meanwhile either. While the autoscaler's CRD is missing the decision waits and is retried (the check stays
Pending meanwhile).

A creation also waits, without a retry timer, until the Workload the watch last showed holds the quota reservation
Kueue's check controller requires (:mod:`connectors.k8s.provreq_readiness`): the status writer applies the log at
its own pace, and Kueue never creates a request for a Workload whose stored status has no reservation. Every move
of the log (the watch bringing the written reservation among them) has the applier look at the held workloads
again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, Conflict, KubeError, NotFound
from connectors.k8s.job_sync import same_pod_spec
from connectors.k8s.journal import Journal
from connectors.k8s.provreq_readiness import Reject, Wait, create_verdict
from connectors.k8s.provreq_templates import stored_templates, whole_template
from connectors.k8s.resources import BY_KIND, POD_TEMPLATES, PROVISIONING_REQUESTS
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from events import schema as ev
from events.message_limits import CONDITION_MESSAGE_BYTES, truncate_message
from kueue_es.scheduler.config import DEFAULT
from kueue_es.scheduler.config_record import in_force
from kueue_es.scheduler.provisioning import template_name
from projections import gates

log = structlog.get_logger("kueue_es.k8s.provreqs")
WORKLOADS = BY_KIND["Workload"]
RequestDecision = ev.ProvisioningRequestCreated | ev.ProvisioningRequestDeleted


class _Rejected(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _CreateFailed(Exception):
    """The apiserver answered a PodTemplate's or the request's create with an error (Kueue's
    ``handleError``)."""

    def __init__(self, kind: str, name: str, error: KubeError) -> None:
        super().__init__(f'Error creating {kind} "{name}": {error.detail}')
        self.message = truncate_message(str(self), CONDITION_MESSAGE_BYTES)
        self.reason = error.reason or type(error).__name__
        self.error = error


def _failed(kind: str, name: str, error: KubeError) -> Exception:
    """What a create's ``error`` means: a failed creation when the apiserver answered (but a 404, the kind not
    served, which waits); the error itself, to retry, when it gave no answer."""
    return error if isinstance(error, NotFound) or not error.status else _CreateFailed(kind, name, error)


@dataclass
class RequestStats:
    created: int = 0
    deleted: int = 0
    applied: int = 0
    rejected: int = 0
    failed: int = 0
    """Creations the apiserver refused (``ProvisioningRequestCreateFailed``)."""
    errors: int = 0
    held: int = 0
    """Times a creation was found waiting for the stored reservation (once per decision and reason)."""
    templates_replaced: int = 0
    """PodTemplates found at a decision's name unlike what it derives, replaced
    (``EnforceProvisioningPodTemplateContents``)."""
    rejections: list[tuple[str, str]] = field(default_factory=list)


class _Meta(msgspec.Struct, rename="camel"):
    uid: str = ""
    owner_references: list[dict[str, Any]] = []


class _Object(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _Template(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    template: o.PodTemplateSpec = msgspec.field(default_factory=o.PodTemplateSpec)


class RequestApplier:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16) -> None:
        self.client = client
        self.concurrency = concurrency
        self.journal = journal
        self.append = append or journal.append
        self.mirror = journal.mirror
        self.stats = RequestStats()
        self._retry = Retries(retry_s)
        self._waiting: set[str] = set()
        """Offsets (as keys of ``_retry``) waiting for their retry."""
        self._reported: set[int] = set()
        """Offsets whose outcome was appended but not applied to the mirror yet."""
        self.held: dict[int, str] = {}
        """Offsets of creations waiting for the Workload's stored reservation -> what the stored Workload lacks."""
        self._dirty: set[str] = set()
        """Workloads to look at (:meth:`_on_applied`)."""
        self.mirror.listeners.append(self._on_applied)

    async def run(self) -> None:
        """Forever: carry out the decisions of each workload the log marks (:meth:`_on_applied`), or whose retry is
        due, on :class:`KeyedWorkers`. A round over every workload, awaited whole before the log was looked at
        again, held a decision for one workload behind another's slowest call (review F7, session 35)."""
        self._dirty |= {e.key for e in self.mirror.request_decisions.values()}  # decided before a restart
        await KeyedWorkers(self.apply_workload, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _on_applied(self, records: list[ev.Record]) -> None:
        """Mark the workloads to look at: those a new decision is for, and, on any move of the log, those with a
        held creation (what it waits for, the stored reservation, comes through the watch, by the log)."""
        for r in records:
            if isinstance(r.event, RequestDecision):
                self._dirty.add(r.event.key)
        pending = self.mirror.request_decisions
        self._dirty.update(pending[off].key for off in self.held if off in pending)

    def _take(self) -> set[str]:
        due = self._retry.due()
        self._waiting -= due
        pending = self._prune()
        keys = self._dirty | {pending[int(off)].key for off in due if int(off) in pending}
        self._dirty = set()
        return keys

    def _prune(self) -> dict[int, RequestDecision]:
        """Forget what is known of decisions whose outcome the log has applied; the decisions still owed one."""
        pending = self.mirror.request_decisions
        self._reported = {off for off in self._reported if off in pending}
        self.held = {off: why for off, why in self.held.items() if off in pending}
        return pending

    async def apply_pending(self) -> None:
        """Every workload with a decision owed an outcome, once, side by side up to ``concurrency`` at a time (as
        Kueue's controller reconciles workloads concurrently): what :meth:`run` does for the workloads it is told
        of, for a caller that awaits one pass."""
        self._waiting -= self._retry.due()
        self._prune()
        self._dirty = set()  # every workload is looked at
        limit = asyncio.Semaphore(self.concurrency)

        async def one(key: str) -> None:
            async with limit:
                await self.apply_workload(key)

        async with asyncio.TaskGroup() as tg:
            for key in sorted({e.key for e in self.mirror.request_decisions.values()}):
                tg.create_task(one(key))

    async def apply_workload(self, key: str) -> None:
        """The workload's decisions without an outcome, in log order, strictly: one held, or waiting for its
        retry, holds back the workload's later ones. Other workloads' go meanwhile: one decision at a time for
        all of them, a burst's requests trailed their stored reservations by seconds
        (``benchmarks/provreq_burst.py``)."""
        pending = self.mirror.request_decisions
        offsets = sorted(off for off in self.mirror.pending.get(key, {}) if off in pending)
        for offset in offsets:
            if not await self._next(offset, offsets):
                return

    async def _next(self, offset: int, of_workload: list[int]) -> bool:
        """Apply the workload's decision at ``offset`` (``of_workload``: its decisions owed an outcome when
        :meth:`apply_workload` began); False when it holds back the workload's later ones (held, waiting for its
        retry, failed)."""
        e = self.mirror.request_decisions.get(offset)
        if e is None or offset in self._reported:
            return True
        if str(offset) in self._waiting:
            return False
        if isinstance(e, ev.ProvisioningRequestCreated):
            verdict = self._verdict(offset, e, of_workload)
            if isinstance(verdict, Wait):
                self._hold(offset, e, verdict.why)
                return False
            self.held.pop(offset, None)
            if isinstance(verdict, Reject):
                await self._outcome(offset, e, reject=(verdict.reason, verdict.message))
                return True
        return await self._apply(offset, e)

    def _verdict(self, offset: int, e: ev.ProvisioningRequestCreated, of_workload: list[int]
                 ) -> Wait | Reject | None:
        """What the mirror says about creating ``e`` now (see :func:`create_verdict`); ``of_workload``: the
        offsets of the workload's decisions owed an outcome when :meth:`apply_workload` began, in log order."""
        mirror = self.mirror
        logged = mirror.state.workloads.get(e.key)
        pending = mirror.request_decisions
        later = [pending[off] for off in of_workload if off > offset and off in pending and off not in self._reported]
        return create_verdict(e, logged_uid=logged.uid if logged is not None else None,
                              stored=mirror.workloads.get(e.key),
                              request_seen=mirror.seen("ProvisioningRequest", e.request.key) is not None,
                              later=later)

    def _hold(self, offset: int, e: ev.ProvisioningRequestCreated, why: str) -> None:
        if self.held.get(offset) == why:
            return
        self.held[offset] = why
        self.stats.held += 1
        log.info("provisioning request waits for the stored reservation", workload=e.key,
                 request=e.request.key, why=why)

    async def _apply(self, offset: int, e: RequestDecision) -> bool:
        """Apply one decision; False when it failed and will be retried."""
        try:
            if isinstance(e, ev.ProvisioningRequestCreated):
                await self.create(e)
            else:
                await self.delete(e)
        except _Rejected as exc:
            await self._outcome(offset, e, reject=(exc.reason, exc.message))
            return True
        except _CreateFailed as exc:
            await self._create_failed(offset, e, exc)  # type: ignore[arg-type]
            return True
        except NotFound as exc:  # the kind itself: the autoscaler's CRD is not installed
            self.stats.errors += 1
            log.warning("ProvisioningRequests are not served, will retry", error=str(exc), workload=e.key)
            self._later(offset, 10)
            return False
        except Exception as exc:  # noqa: BLE001 - one decision never stops the others
            self.stats.errors += 1
            log.warning("applying a ProvisioningRequest decision failed, will retry", error=str(exc),
                        workload=e.key, decision=type(e).__name__)
            self._later(offset)
            return False
        await self._outcome(offset, e)
        return True

    def _later(self, offset: int, factor: float = 1.0) -> None:
        self._retry.later(str(offset), factor)
        self._waiting.add(str(offset))

    # --- the writes ----------------------------------------------------------------------------------------

    async def create(self, e: ev.ProvisioningRequestCreated) -> None:
        req = e.request
        ns, name = req.metadata.namespace, req.metadata.name
        enforce = (in_force(self.mirror.state) or DEFAULT).gate(gates.ENFORCE_PROVISIONING_POD_TEMPLATE_CONTENTS)
        stored = await self._stored_templates(e)
        for pt in e.pod_templates:
            await self._template(pt, whole_template(msgspec.to_builtins(pt), stored.get(pt.metadata.name)), enforce)
        created = await self._create_once(PROVISIONING_REQUESTS, msgspec.to_builtins(req), ns, e.uid)
        owner = {"apiVersion": PROVISIONING_REQUESTS.api_version, "kind": "ProvisioningRequest", "name": name,
                 "uid": created.metadata.uid, "controller": True, "blockOwnerDeletion": True}
        for pt in e.pod_templates:
            await self.client.patch(POD_TEMPLATES, pt.metadata.name, {"metadata": {"ownerReferences": [owner]}},
                                    pt.metadata.namespace)
        self.stats.created += 1
        log.info("created provisioning request", workload=e.key, request=f"{ns}/{name}", attempt=e.attempt,
                 templates=[pt.metadata.name for pt in e.pod_templates])

    async def _stored_templates(self, e: ev.ProvisioningRequestCreated) -> dict[str, dict[str, Any]]:
        """PodTemplate name -> the pod set's template in the Workload as the apiserver holds it (whole, unlike the
        fold's view of it: :mod:`connectors.k8s.provreq_templates`). A Workload gone, or another of its name,
        rejects the decision."""
        ns, _, name = e.key.partition("/")
        try:
            workload = msgspec.json.decode(await self.client.get(WORKLOADS, name, ns))
        except NotFound as exc:
            raise _Rejected("NotFound", "the Workload no longer exists") from exc
        if (workload.get("metadata") or {}).get("uid") != e.uid:
            raise _Rejected("NotFound", "the Workload no longer exists")
        request = e.request.metadata.name
        return stored_templates(workload, lambda pod_set: template_name(request, pod_set))

    async def _template(self, pt: o.PodTemplate, body: dict[str, Any], enforce: bool) -> None:
        """Create the PodTemplate (``body``: ``pt`` whole), or take the one already at its name — under
        ``EnforceProvisioningPodTemplateContents`` only when it is alike what the decision derives (Kueue's pod
        template comparison, :func:`connectors.k8s.job_sync.same_pod_spec`: tolerations, each container's
        requests and limits, the pod-level resources, the resource claims); one that differs (made by
        someone else at the predictable name, or left by an earlier attempt) is deleted and made anew, so the
        request never asks capacity for pods its Workload's quota did not cover."""
        ns, name = pt.metadata.namespace, pt.metadata.name
        try:
            await self.client.create(POD_TEMPLATES, body, ns)
            return
        except AlreadyExists:
            pass
        except KubeError as exc:
            raise _failed("PodTemplate", name, exc) from exc
        if not enforce:
            return
        found = msgspec.json.decode(await self.client.get(POD_TEMPLATES, name, ns), type=_Template)
        if same_pod_spec(found.template.spec, pt.template.spec):
            return
        try:
            await self.client.delete(POD_TEMPLATES, name, ns, uid=found.metadata.uid)
        except (NotFound, Conflict):
            pass  # gone, or replaced meanwhile: the create below says which
        self.stats.templates_replaced += 1
        log.info("replacing a PodTemplate that differs from the one derived", template=f"{ns}/{name}")
        try:
            # made again meanwhile: retried, and compared anew
            await self.client.create(POD_TEMPLATES, body, ns)
        except KubeError as exc:
            raise _failed("PodTemplate", name, exc) from exc

    async def _create_once(self, resource: Any, body: dict[str, Any], ns: str, workload_uid: str) -> _Object:
        """Create, or take the existing object if it is this workload's (owned by it or by its request)."""
        name = body["metadata"]["name"]
        try:
            return msgspec.json.decode(await self.client.create(resource, body, ns), type=_Object)
        except AlreadyExists as exc:
            taken = exc
        except KubeError as exc:
            raise _failed(resource.kind, name, exc) from exc
        found = msgspec.json.decode(await self.client.get(resource, name, ns), type=_Object)
        owners = found.metadata.owner_references
        if resource is PROVISIONING_REQUESTS and not any(r.get("uid") == workload_uid for r in owners):
            # another Workload's: Kueue's create fails the same
            raise _CreateFailed(resource.kind, name, taken)
        return found

    async def delete(self, e: ev.ProvisioningRequestDeleted) -> None:
        try:
            await self.client.delete(PROVISIONING_REQUESTS, e.name, e.namespace, uid=e.request_uid)
        except NotFound:
            if not await self._served():
                raise
        except Conflict:
            pass  # the uid precondition failed: the instance the decision named is gone
        self.stats.deleted += 1
        log.info("deleted provisioning request", workload=e.key, request=f"{e.namespace}/{e.name}",
                 reason=e.reason)

    async def _served(self) -> bool:
        """Whether the apiserver serves ProvisioningRequests (a 404 then means the object is gone)."""
        try:
            await self.client.request("GET", PROVISIONING_REQUESTS.collection_path(), query=[("limit", 1)])
        except NotFound:
            return False
        return True

    async def _create_failed(self, offset: int, e: ev.ProvisioningRequestCreated, exc: _CreateFailed) -> None:
        """A refused creation ends its decision: the failure (the check's message, the Warning
        ``FailedCreate`` Event) then the rejection, appended together; the controller decides the creation
        again after a backoff in log time (:mod:`projections.create_failures`), one attempt per failure, not a
        retry here."""
        self.stats.failed += 1
        log.warning("creating a provisioning request failed", workload=e.key, error=exc.message)
        failed = ev.ProvisioningRequestCreateFailed(
            time=int(time.time() * 1000), key=e.key, uid=e.uid, decision=offset, check=e.check,
            name=e.request.metadata.name, message=exc.message, id=f"create-failed-{offset}")
        await self._outcome(offset, e, reject=(exc.reason, exc.error.detail), before=failed)

    async def _outcome(self, offset: int, e: RequestDecision, reject: tuple[str, str] | None = None,
                       before: ev.AnyEvent | None = None) -> None:
        t = int(time.time() * 1000)
        out: ev.AnyEvent
        if reject is None:
            out = ev.DecisionApplied(time=t, key=e.key, uid=e.uid, decision=offset, id=f"applied-{offset}")
            self.stats.applied += 1
        else:
            reason, message = reject
            out = ev.DecisionRejected(time=t, key=e.key, uid=e.uid, decision=offset, reason=reason,
                                      message=message, id=f"rejected-{offset}")
            self.stats.rejected += 1
            self.stats.rejections.append((e.key, reason))
            log.info("provisioning request decision rejected", workload=e.key, reason=reason, message=message)
        self._reported.add(offset)
        await self.append([out] if before is None else [before, out])
