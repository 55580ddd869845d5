"""The Lease holds its duration in whole seconds: the leader's renew deadline is checked against that (review L5)."""

from __future__ import annotations

import pytest
from fixtures.fakelease import Clock, Leases

from connectors.k8s.leader import LeaseTiming
from connectors.k8s.settings import KubeSettings, validate
from events.errors import InvalidInput


@pytest.mark.parametrize(("lease", "renew"), [(10.4, 10.2), (2.5, 2.2), (10.5, 10.1)])
def test_a_renew_deadline_not_below_the_leases_whole_seconds_is_refused(lease: float, renew: float) -> None:
    """10.4 s is written as 10 (2.5 and 10.5 as 2 and 10): standbys would take over while the leader still acts."""
    with pytest.raises(InvalidInput, match=r"renew_deadline_s: must be below the Lease's duration in whole seconds"):
        validate(KubeSettings(lease_duration_s=lease, renew_deadline_s=renew, retry_period_s=0.1))


@pytest.mark.parametrize(("lease", "renew"), [(10.6, 10.2), (1.5, 1.2), (15, 10)])
def test_a_renew_deadline_below_the_leases_whole_seconds_is_taken(lease: float, renew: float) -> None:
    validate(KubeSettings(lease_duration_s=lease, renew_deadline_s=renew, retry_period_s=0.1))


@pytest.mark.asyncio
async def test_the_lease_says_the_whole_seconds_the_check_used() -> None:
    leases = Leases(Clock())
    a = leases.elector("a", LeaseTiming(lease_duration_s=10.6, renew_deadline_s=10.2, retry_period_s=1))
    assert await a.try_acquire_or_renew()
    assert leases.obj is not None and leases.obj["spec"]["leaseDurationSeconds"] == 11
