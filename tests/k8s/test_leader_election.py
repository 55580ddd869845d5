"""Leader election against a fake apiserver holding one Lease (replace conditioned on resourceVersion), on a fake
monotonic clock: who holds the Lease, which log it names, and when a leader stops acting — as orders of events,
never as timings."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from connectors.k8s.errors import AlreadyExists, Conflict, NotFound
from connectors.k8s.leader import LOG_ANNOTATION, LeaderElector, LeaseTiming

TIMING = LeaseTiming(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0


class Leases:
    """The apiserver's one Lease; ``before_replace[who]`` runs (once) between who's read and its write."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.obj: dict[str, Any] | None = None
        self.rv = 0
        self.writes: list[tuple[str, str]] = []  # (writer, holder) of every committed write
        self.before_replace: dict[str, Callable[[], None]] = {}
        self.answer_late: dict[str, float] = {}  # writer -> how long its replace's answer takes (clock seconds)

    def elector(self, who: str, timing: LeaseTiming = TIMING) -> LeaderElector:
        e = LeaderElector(_Client(self, who), "ns", "kueue-es", who, timing)  # type: ignore[arg-type]
        e._now = lambda: self.clock.t  # type: ignore[method-assign]
        return e

    def commit(self, who: str, body: dict[str, Any]) -> None:
        self.rv += 1
        obj = json.loads(json.dumps(body))
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.obj = obj
        self.writes.append((who, obj["spec"]["holderIdentity"]))

    @property
    def annotations(self) -> dict[str, str]:
        assert self.obj is not None
        return self.obj["metadata"].get("annotations") or {}


class _Client:
    def __init__(self, store: Leases, who: str) -> None:
        self.s, self.who = store, who

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        if self.s.obj is None:
            raise NotFound("no lease", 404)
        return json.dumps(self.s.obj).encode()

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        if self.s.obj is not None:
            raise AlreadyExists("exists", 409)
        self.s.commit(self.who, body)
        return json.dumps(self.s.obj).encode()

    async def replace(self, resource: Any, name: str, body: dict[str, Any], namespace: str = "", **kw: Any) -> bytes:
        if hook := self.s.before_replace.pop(self.who, None):
            hook()
        assert self.s.obj is not None
        if body["metadata"].get("resourceVersion") != self.s.obj["metadata"]["resourceVersion"]:
            raise Conflict("conflict", 409)
        self.s.commit(self.who, body)
        self.s.clock.t += self.s.answer_late.get(self.who, 0.0)
        return json.dumps(self.s.obj).encode()


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
    assert leases.annotations[LOG_ANNOTATION] == "log-a"
    await a.release()
    assert leases.annotations[LOG_ANNOTATION] == "log-a", "a released Lease still names the log that led last"


@pytest.mark.asyncio
async def test_the_next_leader_learns_which_log_led_last_and_renames_it_only_once_its_own_is_known(
        leases: Leases) -> None:
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    a.log = "log-a"
    await a.renew()
    await a.release()
    assert await b.try_acquire_or_renew()
    assert b.led_by == "log-a"
    assert leases.annotations[LOG_ANNOTATION] == "log-a", "unchanged until b's log is open and known"
    b.log = "log-b"
    await b.renew()
    assert leases.annotations[LOG_ANNOTATION] == "log-b" and b.led_by == "log-a"
    assert leases.obj is not None and leases.obj["spec"]["holderIdentity"] == "b"
