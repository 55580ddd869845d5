"""A worker reached through a ClusterProfile whose plugin's credentials expire: Kueue's client keeps its watches while
the client library runs the plugin again (its config unchanged), so the worker stays connected on the credentials in
use until the new ones come (review-2 L4 of session 36); the worker then rebuilt on them keeps what it held of the
copies there (a copy deleted whose DELETED its watch has not shown yet stays held, what was mirrored of it stays
remembered). Fake plugin, profiles and worker apiserver; the connector's own passes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import quota_released
from test_clusterprofile_access import _answered, _profile, _profile_state, _Profiles, _token
from test_multikueue_connector import KEY, START, SecretsManager, _appending, _close, _connector, _passes

from connectors.k8s import clusterprofile as cp
from connectors.k8s import multikueue_kubeconfigs
from connectors.k8s.client import ListMeta, RawList
from connectors.k8s.errors import NotFound
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_worker import Worker
from events import schema as ev

JOB = "default/a"
ORIGIN = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
TERMINATING = {"deletionTimestamp": "2024-01-01T00:00:05Z"}
WORKLOAD_COPY = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                 "metadata": {"name": "job-a", "namespace": "default", "uid": "copy-1", "resourceVersion": "5",
                              "labels": ORIGIN, **TERMINATING}}
JOB_COPY = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "a", "namespace": "default", "uid": "job-copy-1", "resourceVersion": "6",
                         "labels": {**ORIGIN, "kueue.x-k8s.io/prebuilt-workload-name": "job-a"}, **TERMINATING}}


class Plugin:
    """The credential plugin: its n-th run answers token ``t<n>``, expiring at 1000 s + n × 1000 s (the profiles'
    clock), once :attr:`answer` is set (then cleared for the next run)."""

    def __init__(self) -> None:
        self.runs = 0
        self.answer = asyncio.Event()

    async def __call__(self, ex: Any, cluster: Any) -> cp.Credential:
        self.runs += 1
        run = self.runs
        await self.answer.wait()
        self.answer.clear()
        return cp.Credential(token=f"t{run}", expires_s=1000.0 + run * 1000.0)


class TerminatingCopies:
    """worker1's apiserver, whatever credentials reach it: the evicted workload's copies (its Workload's and its
    Job's) still listed after the manager deleted them (terminating); its watches open and show nothing more (they
    lag behind the deletes). Deletes and patches are recorded."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.patched: list[str] = []
        self.created: list[str] = []

    async def list(self, resource: Any, **_: Any) -> RawList:
        items = {"Workload": [WORKLOAD_COPY], "Job": [JOB_COPY]}.get(resource.kind, [])
        return RawList(metadata=ListMeta(resource_version="7"),
                       items=[msgspec.Raw(msgspec.json.encode(obj)) for obj in items])

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if on_open is not None:
            on_open()
        await asyncio.Event().wait()
        yield  # pragma: no cover

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        raise NotFound(f'{resource.plural} "{name}" not found', 404)

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patched.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        self.created.append(f"{resource.kind}:{namespace}/{body['metadata']['name']}")
        return msgspec.json.encode(body)

    async def close(self) -> None:
        return None


class Refreshing:
    """The connector, its worker1 named by the ClusterProfile ``p1`` and reached with the plugin's ``t1`` (the
    workload evicted: its copies there deleted, held), the profiles' clock, the plugin, the tokens clients were
    built with, and the worker's apiserver."""

    def __init__(self, mk: MultiKueueConnector, clock: list[float], plugin: Plugin, built: list[str],
                 worker: TerminatingCopies) -> None:
        self.mk, self.clock, self.plugin, self.built, self.worker = mk, clock, plugin, built, worker


def _held(deleted_owners: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The owner copies held, of the kinds holding any."""
    return {kind: held for kind, held in deleted_owners.items() if held}


async def _connected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Refreshing:
    state = _profile_state(tmp_path, "unused")
    state.apply(ev.Record(state.offset + 1, ev.WorkloadEvicted(
        time=START, cycle=9, input=0, key=KEY, uid=state.workloads[KEY].uid, reason="AdmissionCheck",
        message="evicted")))
    quota_released(state, KEY)
    plugin, worker, built = Plugin(), TerminatingCopies(), []
    monkeypatch.setattr(cp, "run_plugin", plugin)

    async def client_from(kubeconfig: bytes) -> Any:
        built.append(_token(kubeconfig))
        return worker

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", client_from)
    clock = [1000.0]
    mk = _connector(state, {})
    mk.client = SecretsManager(state, {})  # type: ignore[assignment]
    mk.profiles = _Profiles({"p1": _profile("p1", access=[{"name": "a", "cluster": {"server": "https://w1:6443"}}])},
                            clock, wake=mk._wake)
    _appending(mk)
    plugin.answer.set()  # the first run answers at once
    await _passes(mk, 4)
    w = mk.workers["worker1"]
    assert (w.connected, built) == (True, ["t1"])
    assert worker.deleted == ["Job:default/a", "Workload:default/job-a"]
    assert (w.deleted, _held(w.deleted_owners)) == ({KEY: "copy-1"}, {"Job": {JOB: "job-copy-1"}})
    w.mirrored[("Job", JOB)] = ("job-copy-1", "6")  # its last status written to the manager's Job before
    return Refreshing(mk, clock, plugin, built, worker)


@pytest.mark.asyncio
async def test_a_worker_stays_connected_on_its_credentials_while_the_plugin_gets_new_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The token expired: the plugin runs again (slowly), and meanwhile the worker is the same one, connected, its
    watches running, no client built; once the plugin answers, the worker is reached with the new token."""
    r = await _connected(tmp_path, monkeypatch)
    w = r.mk.workers["worker1"]
    try:
        r.clock[0] = 2000.0  # t1 expired
        await _passes(r.mk, 3)
        assert r.mk.profiles.running("worker1") and r.plugin.runs == 2
        assert r.mk.workers["worker1"] is w, "the worker kept while the plugin runs"
        assert w.connected and w.task is not None and not w.task.done() and r.built == ["t1"]
        r.plugin.answer.set()
        await _answered(r.mk.profiles, "worker1")
        await _passes(r.mk, 3)
        assert r.built == ["t1", "t2"] and r.mk.workers["worker1"].connected
    finally:
        r.plugin.answer.set()
        await _close(r.mk)
        await r.mk.profiles.close()


@pytest.mark.asyncio
async def test_a_worker_rebuilt_on_new_credentials_keeps_what_it_held_of_the_copies_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker rebuilt on the plugin's new token lists the evicted workload's copies again, still terminating:
    they are the ones the manager deleted (their DELETED not shown yet), so they are neither deleted nor counted
    again, and what was mirrored of the Job's copy is still remembered."""
    r = await _connected(tmp_path, monkeypatch)
    try:
        r.clock[0] = 2000.0
        r.plugin.answer.set()
        await _passes(r.mk, 2)
        await _answered(r.mk.profiles, "worker1")
        await _passes(r.mk, 3)
        new = r.mk.workers["worker1"]
        assert r.built == ["t1", "t2"] and new.connected and isinstance(new, Worker)
        assert r.worker.deleted == ["Job:default/a", "Workload:default/job-a"], "not deleted again"
        assert r.mk.stats.copies_deleted == 1
        assert new.deleted == {KEY: "copy-1"}
        assert _held(new.deleted_owners) == {"Job": {JOB: "job-copy-1"}}
        assert new.mirrored == {("Job", JOB): ("job-copy-1", "6")}
    finally:
        r.plugin.answer.set()
        await _close(r.mk)
        await r.mk.profiles.close()
