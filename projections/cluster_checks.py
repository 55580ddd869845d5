"""Admission checks' states and ProvisioningRequests in the fold.

A part of :class:`projections.cluster.ClusterState` (a mixin: the state's attributes are set by its ``__init__``,
its slots are its own). It takes a check's new state (observed from its controller, or decided by kueue-es's own)
into its workload, and keeps the ProvisioningRequests table — observed ones, those kueue-es decided to create or
delete — with the index of the requests each workload owns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections import create_failures, eviction_undo
from projections.deadlines import DueIndex
from projections.workloads import RESERVED, WorkloadInfo


class CheckStates:
    """:class:`~projections.cluster.ClusterState`'s admission check states and ProvisioningRequests."""

    __slots__ = ()

    if TYPE_CHECKING:  # ClusterState's, set by its __init__
        workloads: dict[str, WorkloadInfo]
        provisioning_requests: dict[str, o.ProvisioningRequest]
        deleted_requests: dict[str, None]
        requests_of: dict[str, dict[str, None]]
        touched: dict[str, None]
        create_retries: DueIndex
        unconfirmed_evictions: eviction_undo.KeptEvictions
        time: int

        def _sync_admitted(self, wl: WorkloadInfo, time: int) -> None: ...

    def _on_check_state(self, e: ev.AdmissionCheckStateChanged | ev.AdmissionCheckUpdated) -> None:
        """A check's new state (observed from another controller, or decided by kueue-es's own): Kueue's
        ``SetAdmissionCheckState`` — lastTransitionTime moves with the state only, retryCount is kept."""
        wl = self.workloads.get(e.key)
        if wl is None:
            return
        old = wl.check_states.get(e.check)
        retry = getattr(e, "retry_count", None)
        if retry is None and old is not None:
            retry = old.retry_count
        states = dict(wl.check_states)
        states[e.check] = o.AdmissionCheckState(
            name=e.check, state=e.state, message=e.message,
            requeue_after_seconds=e.requeue_after_seconds, retry_count=retry,
            last_transition_time=_ltt(old, e.state, e.time), pod_set_updates=list(e.pod_set_updates),
        )
        wl.check_states = dict(sorted(states.items()))
        if e.state == "Rejected" or wl.phase == RESERVED:
            # Kueue v0.20 (#14309): a rejected check takes the Admitted condition down at once; a workload holding
            # quota but not admitted shows why (the workload controller syncs it with each check's change)
            self._sync_admitted(wl, e.time)
        if wl.unshown_checks and isinstance(e, ev.AdmissionCheckStateChanged):
            # its controller's word, observed where it set it: the log's own earlier word is behind it
            wl.unshown_checks = tuple(u for u in wl.unshown_checks if u[0] != e.check)

    def _on_request_created(self, e: ev.ProvisioningRequestCreated) -> None:
        req = e.request
        key = req.key
        if key not in self.provisioning_requests:
            self.put_request(req)

    def _on_create_failed(self, e: ev.ProvisioningRequestCreateFailed) -> None:
        """The apiserver refused a creation: the request it was to make, never seen, is no longer the check's
        (Kueue's controller lists only the requests that exist), so the controller decides it again once the
        backoff has passed; the failure is kept for the check's message and that backoff."""
        wl = self.workloads.get(e.key)
        if wl is None or (e.uid and e.uid != wl.uid):
            return
        key = f"{wl.namespace}/{e.name}"
        req = self.provisioning_requests.get(key)
        if req is not None and not req.metadata.uid:
            self._pop_request(key)
        # from the log's time (the applier's clock may be behind it): the backoff is never one already run out
        wl.failed_creates = create_failures.recorded(wl.failed_creates, e.check, e.name, e.message, self.time)
        self.index_create_retry(wl)

    def forget_create_failures(self, wl: WorkloadInfo) -> None:
        """``wl`` reserves anew: the failures of the reservation before hold nothing back (Kueue's controller
        reconciles the updated Workload at once, and its backoff was reset by the reconciles in between)."""
        if wl.failed_creates:
            wl.failed_creates = ()
            self.index_create_retry(wl)

    def index_create_retry(self, wl: WorkloadInfo) -> None:
        """Index when ``wl``'s next held-back creation may be decided (once the log's time reaches it, the
        fold touches the workload: :meth:`ClusterState._create_retries_due`)."""
        later = [f.retry_at for f in wl.failed_creates if f.retry_at > self.time]
        self.create_retries.set(wl.key, min(later) if later else None)

    def _on_request_deleted(self, e: ev.ProvisioningRequestDeleted) -> None:
        if self.unconfirmed_evictions:  # deleted in the cluster: an eviction awaiting its outcome stays
            self.unconfirmed_evictions.forget(e.key)
        req = self._pop_request(f"{e.namespace}/{e.name}")
        if req is not None and req.metadata.uid:
            self.deleted_requests[req.metadata.uid] = None

    def _upsert_request(self, req: o.ProvisioningRequest) -> None:
        if req.metadata.uid in self.deleted_requests:
            return  # deleted by decision; this is an older event of it
        old = self.provisioning_requests.get(req.key)
        if old is not None:
            self._pop_request(req.key)
        self.put_request(req)
        if req.metadata.uid:
            self._created(req)

    def _created(self, req: o.ProvisioningRequest) -> None:
        """The watch shows ``req``: a creation that failed before got through, its failures are forgotten."""
        wl = self.workloads.get(request_owner(req))
        if wl is not None and any(f.name == req.metadata.name for f in wl.failed_creates):
            wl.failed_creates = tuple(f for f in wl.failed_creates if f.name != req.metadata.name)
            self.index_create_retry(wl)

    def _delete_request(self, key: str, uid: str) -> None:
        self.deleted_requests.pop(uid, None)
        req = self.provisioning_requests.get(key)
        if req is None:
            return
        known = req.metadata.uid
        if not known or (uid and uid != known):
            return  # our creation is not observed yet, or another instance of the name went away
        self._pop_request(key)

    def put_request(self, req: o.ProvisioningRequest) -> None:
        self.provisioning_requests[req.key] = req
        owner = request_owner(req)
        if owner:
            self.requests_of.setdefault(owner, {})[req.key] = None
            self.touched[owner] = None

    def _pop_request(self, key: str) -> o.ProvisioningRequest | None:
        req = self.provisioning_requests.pop(key, None)
        if req is not None:
            owner = request_owner(req)
            if owner:
                self.touched[owner] = None
            owned = self.requests_of.get(owner)
            if owned is not None:
                owned.pop(key, None)
                if not owned:
                    del self.requests_of[owner]
        return req


def _ltt(old: o.AdmissionCheckState | None, state: str, time: int) -> str:
    if old is not None and old.state == state and old.last_transition_time:
        return old.last_transition_time
    return format_time(time)


def request_owner(req: o.ProvisioningRequest) -> str:
    """Key of the Workload a ProvisioningRequest belongs to (its Workload owner reference), or ""."""
    refs = req.metadata.owner_references
    for ref in refs:
        if ref.kind == "Workload" and ref.controller:
            return f"{req.metadata.namespace}/{ref.name}"
    for ref in refs:
        if ref.kind == "Workload":
            return f"{req.metadata.namespace}/{ref.name}"
    return ""
