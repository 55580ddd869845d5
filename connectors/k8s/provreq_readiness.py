"""Whether a decided ProvisioningRequest may be created now: pure, the applier (:mod:`connectors.k8s.provreqs`)
does the I/O.

Kueue's provisioning check controller (``pkg/controller/admissionchecks/provisioning/controller.go``) reads the
Workload as the apiserver stores it, and creates a request only for one that holds quota there: a
``QuotaReserved=True`` condition (with its ``status.admission``, which the request's pod sets are counted from),
neither ``Finished=True`` nor ``Evicted=True``, the check listed in ``status.admissionChecks`` and ``Pending``
(a Ready check gets no request, a Retry or Rejected one no new attempt). kueue-es decides on its log, which
knows the reservation before the status writer has stored it; so the applier holds a creation until the
Workload the watch last showed meets those terms, and looks again whenever the log moves (the watch bringing
the written reservation moves it).

Not every creation waits. One whose request the watch already shows goes ahead (it was created before a
restart, its outcome not logged: applying it again only records that). One that would wait but whose request a
later decision deletes (the workload was evicted or finished before its reservation was stored) is withdrawn:
rejected, never created, so that the deletion after it is not blocked behind it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from events import objects as o
from events import schema as ev


@dataclass(frozen=True)
class Wait:
    """Create later: ``why`` says what the stored Workload lacks."""

    why: str


@dataclass(frozen=True)
class Reject:
    """Never create: the decision's outcome is ``DecisionRejected`` with this reason and message."""

    reason: str
    message: str


def _true(w: o.Workload, type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in w.status.conditions)


def missing_reservation(stored: o.Workload, check: str) -> str | None:
    """What keeps Kueue's check controller from creating a request for ``check`` on ``stored`` (the Workload
    as the apiserver holds it), or None when nothing does."""
    status = stored.status
    if not _true(stored, "QuotaReserved") or status.admission is None:
        return "the Workload holds no quota reservation"
    if _true(stored, "Finished"):
        return "the Workload is finished"
    if _true(stored, "Evicted"):
        return "the Workload is evicted"
    state = next((s.state for s in status.admission_checks if s.name == check), None)
    if state is None:
        return f"the Workload does not list admission check {check!r}"
    if state != "Pending":
        return f"admission check {check!r} is {state}, not Pending"
    return None


def withdrawn_by(e: ev.ProvisioningRequestCreated, later: Iterable[ev.AnyEvent]) -> ev.ProvisioningRequestDeleted | None:
    """The first of ``later`` (the workload's decisions after ``e``, in log order) that deletes ``e``'s request."""
    name, namespace = e.request.metadata.name, e.request.metadata.namespace
    for d in later:
        if isinstance(d, ev.ProvisioningRequestDeleted) and d.key == e.key and (d.name, d.namespace) == (
                name, namespace):
            return d
    return None


def create_verdict(e: ev.ProvisioningRequestCreated, *, logged_uid: str | None, stored: o.Workload | None,
                   request_seen: bool, later: Iterable[ev.AnyEvent]) -> Wait | Reject | None:
    """Whether to create ``e``'s request now (None), later (:class:`Wait`) or never (:class:`Reject`).

    ``logged_uid``: the uid of the Workload the log holds under ``e.key`` (None: none); ``stored``: the Workload
    as the watch last showed it; ``request_seen``: whether the watch shows the request; ``later``: the
    ProvisioningRequest decisions after ``e`` still owed an outcome, in log order."""
    if logged_uid != e.uid:
        return Reject("NotFound", "the Workload no longer exists")
    if request_seen:
        return None
    if stored is None or stored.metadata.uid != e.uid:
        why: str | None = "the watch does not show this Workload yet"
    else:
        why = missing_reservation(stored, e.check)
    if why is None:
        return None
    deleting = withdrawn_by(e, later)
    if deleting is not None:
        return Reject("Withdrawn", f"a later decision deletes ProvisioningRequest {e.request.key} ({deleting.reason}) "
                                   f"before the Workload's stored status allowed its creation: {why}")
    return Wait(why)
