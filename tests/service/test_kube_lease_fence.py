"""``run --kube``'s writes are fenced by the Lease (review L2): the leader renews once its log is open, naming
it, before anything acts on it, and its client sends a write only while the Lease is valid. The Lease is a fake
on a fake clock (:mod:`fixtures.fakelease`); the apiserver a recorder behind the real :class:`KubeClient`."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from fixtures.fakelease import TIMING, Clock, Leases

from connectors.k8s.client import KubeClient
from connectors.k8s.leader import LOG_ANNOTATION, LeaderElector, LeadershipLost
from connectors.k8s.resources import LEASES
from connectors.k8s.settings import KubeSettings
from kueue_es import kube_service

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}


class _Response:
    status = 200

    async def read(self) -> bytes:
        return b"{}"

    def release(self) -> None:
        pass


class Api:
    """What the apiserver was asked, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def call_api(self, path: str, method: str, **kw: Any) -> _Response:
        self.calls.append((method, path))
        return _Response()

    def writes(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[0] in MUTATING]


def fakes(monkeypatch: pytest.MonkeyPatch, leases: Leases, b: LeaderElector, *, fold_s: float,
          seen: list[str]) -> None:
    """The embedded log, whose fold lasts ``fold_s`` of the Lease's clock (b tries the Lease meanwhile), and a
    connector that writes once it runs (noting which log the Lease names then)."""

    class Log:
        def __init__(self, path: str, opts: Any, report: Any, *, events: bool = True,
                     led_by: str | None = None) -> None:
            self.identity, self.restored = "log-a", None

        async def open(self) -> Any:
            leases.clock.t += fold_s
            await b.try_acquire_or_renew()
            return SimpleNamespace(mirror=SimpleNamespace(offset=-1, state=None))

        def start(self, *args: Any) -> None:
            pass

        async def stopping(self) -> None:
            pass

        async def stopped(self, mirror: Any) -> None:
            pass

        async def close(self) -> None:
            pass

    class Connector:
        def __init__(self, client: KubeClient, journal: Any, **kw: Any) -> None:
            self.client, self.journal, self.jobs, self.ready = client, journal, None, False
            self.writer = SimpleNamespace(stats=SimpleNamespace(writes=0))
            self.watcher = SimpleNamespace(synced={})

        async def run(self) -> None:
            seen.append(leases.annotations.get(LOG_ANNOTATION, ""))
            await self.client.patch(LEASES, "some-object", {"metadata": {}}, "ns")
            await asyncio.Event().wait()

    monkeypatch.setattr(kube_service, "_EmbeddedLog", Log)
    monkeypatch.setattr(kube_service, "Connector", Connector)


async def lead(a: LeaderElector, api: Api, stop: asyncio.Event) -> None:
    settings = SimpleNamespace(kube=KubeSettings(), uses_kafka=False)
    await kube_service._lead(settings, SimpleNamespace(instance_id="a"), "log", KubeClient(api),  # type: ignore[arg-type]
                             kube_service.Health(), a, stop, lambda kind, fields: None)


@pytest.mark.asyncio
async def test_a_leader_whose_lease_was_taken_while_its_log_was_folded_writes_nothing(monkeypatch) -> None:
    leases = Leases(Clock())
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    fakes(monkeypatch, leases, b, fold_s=TIMING.lease_duration_s + 1, seen=(seen := []))
    api = Api()
    with pytest.raises(LeadershipLost):
        await lead(a, api, asyncio.Event())
    assert leases.obj is not None and leases.obj["spec"]["holderIdentity"] == "b"
    assert api.writes() == [] and seen == [], "nothing acts after the fold: the Lease moved during it"


@pytest.mark.asyncio
async def test_the_lease_names_the_log_before_the_connector_runs(monkeypatch) -> None:
    leases = Leases(Clock())
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    fakes(monkeypatch, leases, b, fold_s=1.0, seen=(seen := []))
    api, stop = Api(), asyncio.Event()
    task = asyncio.create_task(lead(a, api, stop))
    while not api.writes():
        await asyncio.sleep(0)
    stop.set()
    await task
    assert seen == ["log-a@0"] and len(api.writes()) == 1


@pytest.mark.asyncio
async def test_the_leaders_client_writes_only_while_the_lease_is_valid() -> None:
    """A write woken after the loop was blocked past the renew deadline never reaches the apiserver, whichever
    task runs first then; reads still do."""
    leases = Leases(Clock())
    a = leases.elector("a")
    assert await a.try_acquire_or_renew()
    api = Api()
    fenced = KubeClient(api, fence=a.fence)  # type: ignore[arg-type]  # as kube_service makes the leader's
    await fenced.patch(LEASES, "x", {}, "ns")
    leases.clock.t += TIMING.renew_deadline_s  # blocked since the last renewal was sent
    with pytest.raises(LeadershipLost, match="not writing"):
        await fenced.patch(LEASES, "x", {}, "ns")
    with pytest.raises(LeadershipLost):
        await fenced.delete(LEASES, "x", "ns")
    await fenced.get(LEASES, "x", "ns")
    assert [m for m, _ in api.calls] == ["PATCH", "GET"]
    assert await a.try_acquire_or_renew()
    await fenced.patch(LEASES, "x", {}, "ns")
    assert [m for m, _ in api.calls] == ["PATCH", "GET", "PATCH"]
