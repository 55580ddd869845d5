"""Leader election against a fake apiserver holding one Lease (replace conditioned on resourceVersion), on a fake
monotonic clock: who holds the Lease, which log it names, and when a leader stops acting — as orders of events,
never as timings."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from fixtures.fakelease import TIMING, Clock, Leases

from connectors.k8s.leader import LOG_ANNOTATION, LeaderElector, LeadershipLost


@pytest.fixture
def leases() -> Leases:
    return Leases(Clock())


# --- the log the Lease names ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_new_lease_names_no_log_before_and_the_leaders_log_once_known(leases: Leases) -> None:
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    assert a.led_by == "" and LOG_ANNOTATION not in leases.annotations
    a.log = "log-a"
    await a.renew()
    assert leases.annotations[LOG_ANNOTATION] == "log-a@0"
    await a.release()
    assert leases.annotations[LOG_ANNOTATION] == "log-a@0", "a released Lease still names the log that led last"


async def _b_won_after_a_led(leases: Leases) -> LeaderElector:
    """a led over ``log-a`` (named in the Lease) and released the Lease; b has just won it."""
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    a.log = "log-a"
    await a.renew()
    await a.release()
    assert await b.try_acquire_or_renew()
    return b


@pytest.mark.asyncio
async def test_the_next_leader_learns_which_log_led_last_and_renames_it_only_once_its_own_is_known(
        leases: Leases) -> None:
    b = await _b_won_after_a_led(leases)
    assert b.led_by == "log-a"
    assert leases.annotations[LOG_ANNOTATION] == "log-a@1", "carried forward until b's log is open and known"
    b.log = "log-b"
    await b.renew()
    assert leases.annotations[LOG_ANNOTATION] == "log-b@1" and b.led_by == "log-a"
    assert leases.obj is not None and leases.obj["spec"]["holderIdentity"] == "b"


@pytest.mark.asyncio
async def test_a_lease_that_changed_hands_since_the_log_was_named_names_no_log(leases: Leases) -> None:
    """A replica that names no log (an earlier version, in a rolling upgrade or a rollback) led after a's log was
    named and left the annotation as it was: a must not take its old log for the one that led last."""
    a, old = leases.elector("a"), leases.elector("old")
    old._named = lambda metadata, log_id, transitions: metadata  # type: ignore[method-assign]  # as before logs were named
    assert await a.try_acquire_or_renew()
    a.log = "log-a"
    await a.renew()
    await a.release()
    assert await old.try_acquire_or_renew()
    await old.release()
    assert leases.annotations[LOG_ANNOTATION] == "log-a@0"
    again = leases.elector("a")
    assert await again.try_acquire_or_renew()
    assert again.led_by == ""


@pytest.mark.asyncio
@pytest.mark.parametrize("stops", ["releases", "expires"])
async def test_a_leader_that_stops_before_naming_its_log_leaves_the_last_named_one_the_history(
        leases: Leases, stops: str) -> None:
    """b wins and stops during its fold (a rollout, an eviction), having acted on nothing: a, back, finds its own
    log still named as the one that led last, and folds it instead of moving it aside."""
    b = await _b_won_after_a_led(leases)
    back = leases.elector("a")
    if stops == "releases":
        await b.release()
    else:
        assert not await back.try_acquire_or_renew(), "b's Lease is not expired yet for a"
        leases.clock.t += TIMING.lease_duration_s + 1
    assert await back.try_acquire_or_renew()
    assert back.led_by == "log-a"


@pytest.mark.asyncio
async def test_the_renewal_after_a_fold_longer_than_the_renew_deadline_is_not_cut_short(leases: Leases) -> None:
    """Nothing acts before the renewal that names the log, so it is not held to the renew deadline the fold has
    passed: a slow apiserver does not make a leader nobody displaced give up (and fold again from the start)."""
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    leases.clock.t += TIMING.renew_deadline_s + 1  # the fold; the Lease (15 s) is still a's
    reading = a.client.get

    async def slow_get(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        await asyncio.sleep(0.1)  # a busy apiserver (real time: the attempt's limit is on the loop's clock)
        return await reading(*args, **kw)

    a.client.get = slow_get  # type: ignore[method-assign]
    a.log = "log-a"
    await a.renew()
    assert leases.annotations[LOG_ANNOTATION] == "log-a@0" and a.valid()


@pytest.mark.asyncio
async def test_the_same_leader_back_under_the_same_identity_finds_its_log_named(leases: Leases) -> None:
    """A restarted container keeps its pod's name: taking its own unexpired Lease back is no transition."""
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    a.log = "log-a"
    await a.renew()
    restarted = leases.elector("a")
    assert await restarted.try_acquire_or_renew()
    assert restarted.led_by == "log-a"


# --- when a leader stops acting --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_renewal_counts_from_when_it_was_sent_so_the_leader_stops_before_a_standby_takes_over(
        leases: Leases) -> None:
    """a's renewal commits at once but its answer comes 8 s late, then a is cut off. b saw the renewed Lease when
    it was written, so it may take over 15 s after; a must have stopped acting (not valid) by then."""
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()

    async def b_looks() -> None:
        assert not await b.try_acquire_or_renew()

    leases.after_commit["a"] = b_looks
    leases.answer_late["a"] = 8.0
    assert await a.try_acquire_or_renew()
    leases.partitioned.add("a")
    a_valid_at, b_won_at = [], None
    while b_won_at is None:
        leases.clock.t += 0.5
        if a.valid():
            a_valid_at.append(leases.clock.t)
        if await b.try_acquire_or_renew():
            b_won_at = leases.clock.t
    assert a_valid_at and max(a_valid_at) < b_won_at


@pytest.mark.asyncio
async def test_a_leader_whose_lease_another_took_and_released_does_not_take_it_back(leases: Leases) -> None:
    """b led meanwhile (a's renewals did not get through): a taking the released Lease again would go on as if
    nobody had, over a state b's leadership made stale."""
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    leases.clock.t += TIMING.lease_duration_s + 1
    assert await b.try_acquire_or_renew()
    await b.release()
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader and not a.valid()
    assert await a.try_acquire_or_renew() and a.led_by is not None, "as a candidate again, it may win it anew"


@pytest.mark.asyncio
async def test_a_conflict_while_leading_is_read_again_at_once_lost_if_another_holds_it(leases: Leases) -> None:
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    assert leases.obj is not None
    leases.before_replace["a"] = lambda: leases.commit("b", {**leases.obj, "spec": {  # type: ignore[dict-item]
        **leases.obj["spec"], "holderIdentity": "b"}})  # type: ignore[index]
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader and not a.valid(), "lost at once, not one retry period later"


@pytest.mark.asyncio
async def test_a_conflict_while_leading_is_read_again_at_once_renewed_if_still_ours(leases: Leases) -> None:
    """Someone else's write that left a the holder (an operator's label, say) does not cost a a renewal."""
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    assert leases.obj is not None
    labelled = {**leases.obj, "metadata": {**leases.obj["metadata"], "labels": {"team": "x"}}}
    leases.before_replace["a"] = lambda: leases.commit("operator", labelled)
    assert await a.try_acquire_or_renew()
    assert leases.writes[-1] == ("a", "a") and leases.obj["metadata"]["labels"] == {"team": "x"}


@pytest.mark.asyncio
async def test_hold_looks_at_once_when_the_last_attempt_is_a_retry_period_old(leases: Leases) -> None:
    """After the loop was busy (a long fold, a long decision pass), the renewal is not put off a whole period."""
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    written = len(leases.writes)
    leases.clock.t += TIMING.retry_period_s
    task = asyncio.create_task(a.hold())
    for _ in range(5):
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert len(leases.writes) == written + 1


@pytest.mark.asyncio
async def test_renew_is_lost_when_another_replica_took_the_lease_while_the_log_was_opened(leases: Leases) -> None:
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    leases.clock.t += TIMING.lease_duration_s + 1  # a long fold
    assert await b.try_acquire_or_renew()
    with pytest.raises(LeadershipLost):
        await a.renew()
    assert not a.is_leader and leases.writes[-1] == ("b", "b")
