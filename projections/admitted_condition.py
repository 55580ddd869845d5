"""The Admitted condition of a workload that is not admitted, as Kueue's ``SyncAdmittedCondition`` keeps it.

A workload is admitted when it holds quota, every admission check is Ready and no pod set still waits for its
delayed topology. Short of that, Kueue says why on Admitted=False, in this order: no reservation, then checks not
all Ready, then a delayed topology request still Pending.

Under ``UnadmittedWorkloadsObservability`` (on by default since v0.20, KEP-10852) the condition is kept current on
every workload Kueue has written a QuotaReserved condition for — the scheduler's failed attempt and the workload
controller's blocker alike — and a workload without a reservation always shows ``NoReservation``, whatever its
checks. A workload with no status yet (``UnadmittedWorkloadsExplicitStatus`` off, never tried) shows none.

With the gate off Kueue writes Admitted=False only as Admitted=True goes, with its legacy reasons
(``NoReservationUnsatisfiedChecks`` when both are missing, ``UnsatisfiedChecks``), and leaves a False condition as
it is until the workload is admitted again.

Followed: Kueue's v0.20 workload controller (``Reconcile``: the QuotaReserved=False blocker and
``SyncAdmittedCondition`` in one patch for every workload not admitted) and its unit-test expectations (a new
workload with ExplicitStatus off keeps an empty status; a reserved workload whose check is not Ready shows
UnsatisfiedAdmissionChecks), with the legacy reasons of ``pkg/workload/admissionchecks.go``.
"""

from __future__ import annotations

from projections.secondpass import awaits_delayed_topology
from projections.workloads import HOLDING, WorkloadInfo

NO_RESERVATION = ("NoReservation", "The workload has no reservation")
UNSATISFIED_CHECKS = ("UnsatisfiedAdmissionChecks", "The workload has not all checks ready")
DELAYED_TOPOLOGY = ("PendingDelayedTopologyRequests", "There are pending delayed topology requests")
LEGACY_UNSATISFIED_CHECKS = ("UnsatisfiedChecks", "The workload has not all checks ready")
LEGACY_BOTH = ("NoReservationUnsatisfiedChecks", "The workload has no reservation and not all checks ready")


def unadmitted(wl: WorkloadInfo, observability: bool) -> tuple[str, str] | None:
    """The (reason, message) of Admitted=False for ``wl``, or None when it has all it needs to be admitted."""
    if wl.phase not in HOLDING:  # not reserving (no property call: asked at most events about a workload)
        return NO_RESERVATION if observability or _checks_ready(wl) else LEGACY_BOTH
    if not _checks_ready(wl):
        return UNSATISFIED_CHECKS if observability else LEGACY_UNSATISFIED_CHECKS
    if awaits_delayed_topology(wl.admission):
        return DELAYED_TOPOLOGY
    return None


def _checks_ready(wl: WorkloadInfo) -> bool:
    for s in wl.check_states.values():  # most workloads have none
        if s.state != "Ready":
            return False
    return True


def sync_unadmitted(wl: WorkloadInfo, time: int, observability: bool) -> bool:
    """Set Admitted=False on ``wl`` where Kueue would (see the module doc); True when it did. Admitted=True is
    left to the admission itself, and the admitted time to the caller."""
    adm = wl.condition("Admitted")
    if adm is None or adm.status != "True":
        if not observability or (adm is None and wl.condition("QuotaReserved") is None):
            return False
    why = unadmitted(wl, observability)
    if why is None or (adm is not None and adm.status == "False" and adm.reason == why[0] and adm.message == why[1]):
        return False
    wl.set_condition("Admitted", "False", why[0], why[1], time)
    return True
