"""Leader election on a real coordination.k8s.io Lease: one holder at a time, takeover after expiry or release."""

from __future__ import annotations

import asyncio

import pytest
from kubehelp import connect, namespace

from connectors.k8s.leader import LeaderElector, LeadershipLost, LeaseTiming

pytestmark = pytest.mark.kube
FAST = LeaseTiming(lease_duration_s=2, renew_deadline_s=1.5, retry_period_s=0.2)


@pytest.mark.asyncio
async def test_one_leader_takeover_after_expiry_and_after_release(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "lease")
        a, b = (LeaderElector(kc, ns, "kueue-es", name, FAST) for name in ("a", "b"))
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        # concurrent attempts: never two winners
        results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
        assert results == [True, False]

        # a stops renewing (a crash): b takes over once the lease has not moved for its duration
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.wait_for(b.acquire(), 10)
        assert loop.time() - t0 >= FAST.lease_duration_s - 0.5
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(a.hold(), 10)  # a finds out at its next renewal
        assert not a.is_leader and b.is_leader

        # b releases: a takes over at its next attempt, without waiting for an expiry
        await b.release()
        assert await a.try_acquire_or_renew()
