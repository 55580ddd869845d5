"""``run --kube``'s writes are fenced by the Lease (review L2): the leader renews once its log is open, naming
it, before anything acts on it, and its client sends a write only while the Lease is valid. The Lease is a fake
on a fake clock (:mod:`fixtures.fakelease`); the apiserver a recorder behind the real :class:`KubeClient`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fixtures import eventgen as g
from fixtures.fakelease import TIMING, Clock, Leases

from connectors.k8s.client import KubeClient
from connectors.k8s.leader import LOG_ANNOTATION, LeaderElector, LeadershipLost
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import LEASES
from connectors.k8s.settings import KubeSettings, validate
from connectors.kafka.scheduler_service import ServiceOptions
from events.errors import InvalidInput
from kueue_es import kube_service
from kueue_es.config import load
from kueue_es.scheduler.config import load_config

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}


class _Response:
    status = 200

    async def read(self) -> bytes:  # whatever is read is there, a CRD established
        return b'{"metadata": {"resourceVersion": "1"}, "status": {"conditions": [{"type": "Established", ' \
               b'"status": "True"}]}}'

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

    async def close(self) -> None:
        pass


def fake_connector(monkeypatch: pytest.MonkeyPatch, leases: Leases, seen: list[str]) -> None:
    """A connector that writes once it runs (noting which log the Lease names then), and never lists everything."""

    class Connector:
        def __init__(self, client: KubeClient, journal: Any, **kw: Any) -> None:
            self.client, self.journal, self.jobs, self.ready = client, journal, None, False
            self.writer = SimpleNamespace(stats=SimpleNamespace(writes=0))
            self.watcher = SimpleNamespace(synced={}, wait_synced=asyncio.Event().wait)

        async def run(self) -> None:
            seen.append(leases.annotations.get(LOG_ANNOTATION, ""))
            await self.client.patch(LEASES, "some-object", {"metadata": {}}, "ns")
            await asyncio.Event().wait()

    monkeypatch.setattr(kube_service, "Connector", Connector)


def fakes(monkeypatch: pytest.MonkeyPatch, leases: Leases, b: LeaderElector, *, fold_s: float,
          seen: list[str]) -> None:
    """The embedded log, whose fold lasts ``fold_s`` of the Lease's clock (b tries the Lease meanwhile), and
    :func:`fake_connector`."""

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

    monkeypatch.setattr(kube_service, "_EmbeddedLog", Log)
    fake_connector(monkeypatch, leases, seen)


async def lead(a: LeaderElector, api: Api, stop: asyncio.Event, *, path: str = "log", opts: Any = None,
               kube: KubeSettings | None = None, webhook: Any = None) -> None:
    settings = SimpleNamespace(kube=kube or KubeSettings(), uses_kafka=False)
    await kube_service._lead(settings, opts or SimpleNamespace(instance_id="a"), path, KubeClient(api),  # type: ignore[arg-type]
                             kube_service.Health(), a, stop, lambda kind, fields: None, webhook=webhook)


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


# --- the Lease during the fold -----------------------------------------------------------------------------------

FOLD_BATCHES = 40  # a second of the Lease's clock each: the fold outlasts the Lease (15 s) more than twice


def at_once(coro: Coroutine[Any, Any, bool]) -> bool:
    """Run to its end now a coroutine that never waits (the fake Lease answers at once)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return bool(done.value)
    coro.close()
    raise AssertionError("it waited")


async def a_log_of(path: Path, batches: int) -> str:
    """An embedded log of ``batches`` batches (no checkpoint: the fold is from the beginning); its identity."""
    backend = kube_service._EmbeddedLog(str(path), ServiceOptions(checkpoints_kept=0), lambda *_: None, led_by="")
    journal = await backend.open()
    for i in range(batches):
        await journal.append([g.upsert(g.namespace(f"ns-{i}"), 1_700_000_000_000 + i)])
    await backend.close()
    return backend.identity


class Fold:
    """a, back over the log the Lease names (:data:`FOLD_BATCHES` batches, no checkpoint), folds it: each batch takes
    a second of the Lease's clock, after which b looks at the Lease (``b_won``) and ``during`` runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, leases: Leases, b: LeaderElector,
                 during: Any = lambda batch: None) -> None:
        self.folded: list[int] = []
        self.b_won: list[bool] = []
        self.renewed: list[int] = []
        applying, start = Mirror.apply_batch, len(leases.writes)

        def slow(mirror: Mirror, records: list) -> None:
            applying(mirror, records)
            self.folded.append(records[-1].offset)
            leases.clock.t += 1.0
            during(len(self.folded))
            self.b_won.append(at_once(b.try_acquire_or_renew()))
            self.renewed.append(sum(1 for w in leases.writes[start:] if w == ("a", "a")))

        monkeypatch.setattr(Mirror, "apply_batch", slow)
        monkeypatch.setattr(kube_service, "FOLD_PACE_EVENTS", 1)


async def a_back_over_its_log(leases: Leases, path: Path) -> tuple[LeaderElector, LeaderElector, str]:
    """a led over the log at ``path`` and is back (the same identity: the Lease names its log); b stands by."""
    identity = await a_log_of(path, FOLD_BATCHES)
    before = leases.elector("a")
    assert await before.try_acquire_or_renew()
    before.log = identity
    await before.renew()
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew() and a.led_by == identity
    assert not await b.try_acquire_or_renew()
    return a, b, identity


def lead_over(a: LeaderElector, api: Api, stop: asyncio.Event, path: Path) -> asyncio.Task[None]:
    return asyncio.create_task(lead(a, api, stop, path=str(path),
                                    opts=ServiceOptions(checkpoints_kept=0, instance_id="a")))


@pytest.mark.asyncio
async def test_a_fold_longer_than_the_lease_keeps_it_renewed_so_no_standby_takes_it_over(monkeypatch,
                                                                                       tmp_path) -> None:
    """Review-2 H1: the fold lasts 40 s, the Lease 15 s, and b looks every second. Renewed all along the fold, the
    Lease stays a's; a acts once every batch is folded, naming its log."""
    leases = Leases(Clock())
    a, b, identity = await a_back_over_its_log(leases, tmp_path / "log")
    fold = Fold(monkeypatch, leases, b)
    fake_connector(monkeypatch, leases, seen := [])
    api, stop = Api(), asyncio.Event()
    task = lead_over(a, api, stop, tmp_path / "log")
    while not api.writes() and not task.done():
        await asyncio.sleep(0)
    stop.set()
    await task
    assert len(fold.folded) == FOLD_BATCHES and not any(fold.b_won), "b never took the Lease over during the fold"
    assert fold.renewed[-1] >= FOLD_BATCHES // TIMING.lease_duration_s, "renewed during the fold"
    assert seen == [f"{identity}@0"] and len(api.writes()) == 1, "a acted once folded, naming its log"


@pytest.mark.asyncio
async def test_a_lease_taken_over_during_the_fold_stops_it_and_nothing_acts(monkeypatch, tmp_path) -> None:
    """a is cut off from the apiserver for 20 s of its fold: b takes the Lease over, and a's first renewal once
    back finds it b's. The fold stops there, and nothing acts."""
    leases = Leases(Clock())
    a, b, _ = await a_back_over_its_log(leases, tmp_path / "log")

    def cut_off(batch: int) -> None:
        if batch == 1:
            leases.partitioned.add("a")
        elif batch == 21:
            leases.partitioned.discard("a")

    fold = Fold(monkeypatch, leases, b, during=cut_off)
    fake_connector(monkeypatch, leases, seen := [])
    api = Api()
    with pytest.raises(LeadershipLost):
        await lead_over(a, api, asyncio.Event(), tmp_path / "log")
    assert any(fold.b_won) and len(fold.folded) < FOLD_BATCHES, "the fold stopped once the Lease was found b's"
    assert api.writes() == [] and seen == []


# --- the cluster's set-up: the leader's, once it may act ---------------------------------------------------------

SET_UP = ("customresourcedefinitions", "webhookconfigurations")


def set_up_writes(api: Api) -> list[tuple[str, str]]:
    return [w for w in api.writes() if any(kind in w[1] for kind in SET_UP)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.asyncio
async def test_a_standby_installs_no_crds_and_registers_no_webhook(monkeypatch, tmp_path) -> None:
    """Review L8: a standby (in a rolling upgrade, of another version) would rewrite the CRDs and the webhook
    configurations under the running leader. It serves the webhook, and writes neither."""
    leases, api = Leases(Clock()), Api()
    other = leases.elector("other")
    assert await other.try_acquire_or_renew()

    async def connect(cls: Any, kubeconfig: str = "", context: str = "") -> KubeClient:
        return KubeClient(api)  # type: ignore[arg-type]

    monkeypatch.setattr(kube_service.KubeClient, "connect", classmethod(connect))
    monkeypatch.setattr(kube_service, "LeaderElector", lambda client, ns, name, identity, timing: leases.elector(
        identity))
    settings = load(env={}, overrides={"log": str(tmp_path / "log"), "kube": {
        "install_crds": True, "webhook_port": free_port(), "webhook_address": "127.0.0.1", "webhook_register": True,
        "webhook_secret": "kueue-es-webhook-server-cert", "webhook_url": "https://127.0.0.1", "health_port": 0}})
    opts = SimpleNamespace(config=load_config({}), instance_id="standby")
    stop, reports = asyncio.Event(), []

    def report(kind: str, fields: dict[str, Any]) -> None:
        reports.append(kind)
        if kind == "standby":
            stop.set()

    await kube_service.serve(settings, opts, stop, report)
    assert reports == ["standby", "stopped"]
    assert set_up_writes(api) == [], "neither the CRDs nor the webhook configurations"


@pytest.mark.asyncio
async def test_the_leader_installs_the_crds_and_registers_the_webhook_once_the_lease_names_its_log(
        monkeypatch) -> None:
    """The set-up is the leader's first act: after the renewal naming its log, through the fenced client, before
    the connector runs; the CRDs convert through the webhook it registers."""
    leases = Leases(Clock())
    a, b = leases.elector("a"), leases.elector("b")
    assert await a.try_acquire_or_renew()
    fakes(monkeypatch, leases, b, fold_s=1.0, seen=(seen := []))
    registered: list[tuple[str, bool]] = []

    async def registration(client: KubeClient) -> None:
        registered.append((leases.annotations.get(LOG_ANNOTATION, ""), client.fence is not None))

    webhook = SimpleNamespace(registration=registration, ca_pem=b"the CA", held_parents=SimpleNamespace(
        detach=lambda: None))
    api, stop = Api(), asyncio.Event()
    kube = KubeSettings(install_crds=True, webhook_port=9443, webhook_register=True, webhook_secret="cert")
    task = asyncio.create_task(lead(a, api, stop, kube=kube, webhook=webhook))
    while len(api.writes()) == len(set_up_writes(api)) and not task.done():
        await asyncio.sleep(0)
    stop.set()
    await task
    crd_writes = set_up_writes(api)
    assert crd_writes and api.writes()[:len(crd_writes)] == crd_writes, "the CRDs before the connector acts"
    assert registered == [("log-a@0", True)], "registered once the Lease names the log, fenced by it"
    assert seen == ["log-a@0"]


@pytest.mark.parametrize(("shared", "refused"), [({}, True), ({"webhook_secret": "cert"}, False),
                                                 ({"webhook_cert_dir": "/certs"}, False),
                                                 ({"leader_election": False}, False)])
def test_registering_the_webhook_under_leader_election_needs_one_ca_for_every_replica(shared: dict,
                                                                                       refused: bool) -> None:
    """Without a shared Secret (or mounted certificate) each replica signs its own CA: the one the leader
    registers is not the one the others serve with, and the apiserver refuses their answers."""
    k = KubeSettings(webhook_port=9443, webhook_register=True, **shared)
    if refused:
        with pytest.raises(InvalidInput, match=r"\$\.kube\.webhook_register: under leader election needs "
                                               r"\$\.kube\.webhook_secret or \$\.kube\.webhook_cert_dir"):
            validate(k)
    else:
        validate(k)
