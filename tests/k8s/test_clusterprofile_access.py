"""MultiKueueClusterProfile (alpha): a MultiKueueCluster naming a ClusterProfile is reached with the credentials
of the Configuration's ``multiKueue.clusterProfile`` plugin (:mod:`connectors.k8s.clusterprofile`). The pure
parts: the Configuration's checks, the provider chosen, what the plugin is handed and what its answer gives; the
plugin run for real; the gate's reading in the MultiKueue connector."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
import yaml
from fixtures import fastyaml
from fixtures.eventgen import fold, records
from fixtures.multikueue_states import KEY, MK_DOCUMENT, SCENARIO, START, apply
from test_multikueue_connector import (
    IdleWorker,
    SecretsManager,
    _appending,
    _close,
    _connector,
    _kubeconfig,
    _passes,
    _secret,
)

from connectors.k8s import clusterprofile as cp
from connectors.k8s import manifests
from connectors.k8s.errors import Forbidden
from connectors.k8s.kubeconfig_checks import insecure_reason
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_kubeconfigs import KubeconfigSources, client_from
from connectors.k8s.multikueue_worker import Worker
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import AccessProvider, ExecConfig, load_config
from kueue_es.statefile import load_state

V1 = "client.authentication.k8s.io/v1"
ATTEMPT_1 = "; connection attempts: 1, next connection attempt: 1970-01-01T00:16:45Z"
"""A plugin's first failure at 1000 s on the profiles' clock: Kueue's backoff progress (#13726), its 5 s wait."""


def _provider(name: str, command: str = "plugin", **exec_kw: Any) -> dict[str, Any]:
    ex = {"command": command, "apiVersion": V1, "interactiveMode": "Never", **exec_kw}
    return {"name": name, "execConfig": ex}


def _config(**cluster_profile: Any) -> Any:
    return load_config({"multiKueue": {"clusterProfile": cluster_profile}}, "cfg")


# --- the Configuration ----------------------------------------------------------------------------------------------

def test_credentials_providers_are_merged_after_access_providers_of_other_names() -> None:
    cfg = _config(accessProviders=[_provider("secretreader", "access"), _provider("kubelogin")],
                  credentialsProviders=[])
    assert [p.name for p in cfg.multi_kueue.cluster_profile.providers()] == ["secretreader", "kubelogin"]
    legacy = _config(credentialsProviders=[_provider("secretreader", "old")])
    assert [(p.name, p.exec_config.command) for p in legacy.multi_kueue.cluster_profile.providers()] == [
        ("secretreader", "old")]


@pytest.mark.parametrize(("section", "message"), [  # Kueue's words and paths (no index), every one in its order
    ({"accessProviders": [_provider("a")], "credentialsProviders": [_provider("b")]},
     "cfg: field `multiKueue.clusterProfile.credentialsProviders`: Forbidden: must not be specified when "
     "accessProviders is specified"),
    ({"accessProviders": [_provider("")]},
     "cfg: field `multiKueue.clusterProfile.accessProviders.name`: Required value: must be specified"),
    ({"credentialsProviders": [_provider("a", "")]},
     "cfg: field `multiKueue.clusterProfile.credentialsProviders.execConfig.command`: Required value: must be "
     "specified"),
    ({"accessProviders": [_provider("a"), _provider("b", apiVersion="")]},
     "cfg: field `multiKueue.clusterProfile.accessProviders.execConfig.apiVersion`: Required value: must be "
     "specified"),
    ({"accessProviders": [_provider("a", interactiveMode="")]},
     "cfg: field `multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode`: Required value: must be "
     "specified"),
    ({"accessProviders": [_provider("a", interactiveMode="Sometimes")]},
     "cfg: field `multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode`: Unsupported value: "
     '"Sometimes": supported values: "Never", "IfAvailable", "Always"'),
    ({"accessProviders": [_provider("a", env=[{"name": "", "value": "v"}])]},
     "cfg: field `multiKueue.clusterProfile.accessProviders.execConfig.env.name`: Required value: must be specified"),
    ({"accessProviders": [_provider("a", interactiveMode="", env=[{"name": "", "value": "v"}])]},  # env first
     "cfg: [field `multiKueue.clusterProfile.accessProviders.execConfig.env.name`: Required value: must be specified, "
     "field `multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode`: Required value: must be "
     "specified]"),
])
def test_the_cluster_profile_section_is_checked_as_kueue_checks_it(section: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        _config(**section)
    assert str(err.value) == message


# --- the provider chosen ----------------------------------------------------------------------------------------------

def _profile(name: str = "p", access: list[dict[str, Any]] | None = None,
             credential: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if access is not None:
        status["accessProviders"] = access
    if credential is not None:
        status["credentialProviders"] = credential
    return {"metadata": {"name": name, "namespace": "kueue-system"}, "status": status}


def _ap(name: str) -> AccessProvider:
    return AccessProvider(name=name, exec_config=ExecConfig(command="x", api_version=V1, interactive_mode="Never"))


def test_the_first_configured_provider_the_profile_offers_is_used_access_providers_over_credential_ones() -> None:
    profile = _profile(access=[{"name": "b", "cluster": {"server": "https://b:6443"}},
                               {"name": "c", "cluster": {"server": "https://c-new:6443"}}],
                       credential=[{"name": "c", "cluster": {"server": "https://c-old:6443"}}])
    provider, cluster = cp.accessor(profile, [_ap("a"), _ap("c"), _ap("b")])
    assert (provider.name, cluster["server"]) == ("c", "https://c-new:6443")
    provider, cluster = cp.accessor(_profile(credential=[{"name": "a", "cluster": {"server": "https://a"}}]),
                                    [_ap("a")])
    assert (provider.name, cluster["server"]) == ("a", "https://a")


def test_a_profile_offering_no_configured_provider_is_refused_in_the_inventory_librarys_words() -> None:
    assert cp.accessor(_profile("p1", access=[{"name": "other", "cluster": {}}]), [_ap("a")]) == (
        'no matching cluster accessor found for cluster profile "p1"')
    assert cp.accessor(_profile("p2"), []) == 'no matching cluster accessor found for cluster profile "p2"'


# --- what the plugin is handed and what its answer gives -------------------------------------------------------------

CLUSTER = {"server": "https://worker.example:6443", "certificate-authority-data": "Q0E=",
           "proxy-url": "http://proxy:3128", "insecure-skip-tls-verify": True,
           "extensions": [{"name": "other", "extension": {"x": 1}},
                          {"name": cp.EXEC_EXTENSION, "extension": {"audience": "workers"}}]}


def test_the_plugin_is_handed_the_cluster_only_when_it_asks_for_it_never_interactive() -> None:
    ex = ExecConfig(command="x", api_version=V1, interactive_mode="IfAvailable", provide_cluster_info=True)
    assert cp.exec_info(ex, CLUSTER) == {"apiVersion": V1, "kind": "ExecCredential", "spec": {
        "interactive": False, "cluster": {"server": "https://worker.example:6443",
                                          "certificate-authority-data": "Q0E=", "proxy-url": "http://proxy:3128",
                                          "config": {"audience": "workers"}}}}
    plain = ExecConfig(command="x", api_version=V1, interactive_mode="Never")
    assert cp.exec_info(plain, CLUSTER)["spec"] == {"interactive": False}


def _answer(status: Any, api_version: str = V1) -> bytes:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status}).encode()


def test_a_plugins_answer_gives_a_token_or_a_certificate_pair_with_its_expiry() -> None:
    got = cp.credential(_answer({"token": "t", "expirationTimestamp": "2030-01-01T00:00:00Z"}), V1)
    assert got == cp.Credential(token="t", expires_s=1893456000.0)
    got = cp.credential(_answer({"clientCertificateData": "CERT", "clientKeyData": "KEY"}), V1)
    assert got == cp.Credential(client_certificate_data="CERT", client_key_data="KEY")


@pytest.mark.parametrize(("stdout", "message"), [
    (b"not json", "decoding stdout: "),
    (_answer({"token": "t"}, "client.authentication.k8s.io/v1beta1"),
     f"exec plugin is configured to use API version {V1}, plugin returned version "
     "client.authentication.k8s.io/v1beta1"),
    (json.dumps({"apiVersion": V1, "kind": "ExecCredential"}).encode(), "exec plugin didn't return a status field"),
    (_answer({}), "exec plugin didn't return a token or cert/key pair"),
    (_answer({"clientCertificateData": "CERT"}), "exec plugin returned only certificate or key, not both"),
])
def test_a_wrong_answer_is_refused_in_the_client_librarys_words(stdout: bytes, message: str) -> None:
    got = cp.credential(stdout, V1)
    assert isinstance(got, str) and got.startswith(message)


def test_the_workers_kubeconfig_holds_the_profiles_server_ca_and_proxy_and_the_plugins_credentials_not_refused(
        ) -> None:
    doc = yaml.safe_load(cp.worker_kubeconfig("p", CLUSTER, cp.Credential(token="t")))
    assert doc["clusters"] == [{"name": "p", "cluster": {"server": "https://worker.example:6443",
                                                         "certificate-authority-data": "Q0E=",
                                                         "proxy-url": "http://proxy:3128"}}]
    assert doc["users"] == [{"name": "p", "user": {"token": "t"}}]
    pair = cp.worker_kubeconfig("p", CLUSTER, cp.Credential(client_certificate_data="CERT", client_key_data="KEY"))
    user = yaml.safe_load(pair)["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == b"CERT"
    assert base64.b64decode(user["client-key-data"]) == b"KEY"
    assert insecure_reason(cp.worker_kubeconfig("p", CLUSTER, cp.Credential(token="t"))) == ""


@pytest.mark.asyncio
async def test_the_workers_client_goes_through_the_profiles_proxy() -> None:
    proxied = {"server": "https://worker.example:6443", "proxy-url": "http://proxy:3128"}
    client = await client_from(cp.worker_kubeconfig("p", proxied, cp.Credential(token="t")))
    try:
        assert client.api.configuration.proxy == "http://proxy:3128"
        assert client.api.configuration.host == "https://worker.example:6443"
    finally:
        await client.close()
    direct = await client_from(cp.worker_kubeconfig("p", {"server": "https://w:6443"}, cp.Credential(token="t")))
    try:
        assert direct.api.configuration.proxy is None
    finally:
        await direct.close()


def test_a_failing_plugin_is_tried_again_after_kueues_reconnect_backoff() -> None:
    assert [cp.retry_after(n) for n in range(0, 9)] == [0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 320.0]


# --- the plugin run for real ------------------------------------------------------------------------------------------

def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "plugin.py"
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.asyncio
async def test_the_plugin_runs_with_its_env_and_exec_info_and_its_credentials_are_used(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    command = _script(tmp_path, f"""
json.dump({{"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]), "env": os.environ.get("EXTRA"),
           "args": sys.argv[1:]}}, open({str(seen)!r}, "w"))
print(json.dumps({{"apiVersion": {V1!r}, "kind": "ExecCredential", "status": {{"token": "secret-token"}}}}))
""")
    ex = msgspec.convert({"command": command, "args": ["--for", "w"], "env": [{"name": "EXTRA", "value": "1"}],
                          "apiVersion": V1, "interactiveMode": "Never", "provideClusterInfo": True}, ExecConfig)
    assert await cp.run_plugin(ex, CLUSTER) == cp.Credential(token="secret-token")
    ran = json.loads(seen.read_text())
    assert (ran["env"], ran["args"]) == ("1", ["--for", "w"])
    assert ran["info"]["spec"]["cluster"]["config"] == {"audience": "workers"}


@pytest.mark.asyncio
async def test_a_plugin_that_fails_is_missing_or_of_an_unknown_version_gives_no_credentials(tmp_path: Path) -> None:
    failing = _script(tmp_path, "sys.exit(3)")
    ex = ExecConfig(command=failing, api_version=V1, interactive_mode="Never")
    assert await cp.run_plugin(ex, {}) == f"getting credentials: exec: executable {failing} failed with exit code 3"
    missing = ExecConfig(command=str(tmp_path / "nope"), api_version=V1, interactive_mode="Never",
                         install_hint="install it")
    assert await cp.run_plugin(missing, {}) == (f"getting credentials: exec: executable {tmp_path / 'nope'} not "
                                                "found\n\ninstall it")
    old = ExecConfig(command=failing, api_version="client.authentication.k8s.io/v1alpha1", interactive_mode="Never")
    assert await cp.run_plugin(old, {}) == 'exec plugin: invalid apiVersion "client.authentication.k8s.io/v1alpha1"'


# --- the profiles followed ---------------------------------------------------------------------------------------------

class _Profiles(cp.ClusterProfiles):
    """Profiles as given, not read from an apiserver."""

    def __init__(self, shown: dict[str, dict[str, Any] | None], clock: list[float],
                 wake: asyncio.Event | None = None) -> None:
        super().__init__(client=None, wake=wake or asyncio.Event(), clock=lambda: clock[0])  # type: ignore[arg-type]
        self.shown = shown

    async def _follow(self, f: cp.FollowedProfile) -> None:
        self._read(f, self.shown.get(f.name), "")


async def _answered(profiles: cp.ClusterProfiles, cluster: str) -> None:
    """Once the plugin's run for ``cluster`` under way, if any, ended."""
    f = profiles.followed.get(cluster)
    if f is not None and f.plugin is not None:
        with contextlib.suppress(asyncio.CancelledError):
            await f.plugin


async def _settled(profiles: _Profiles, *args: Any) -> tuple[bytes, str, str] | None:
    """The worker's kubeconfig or condition once its profile was read and its plugin, if run, answered (while it
    runs again, the kubeconfig in use is the answer)."""
    got = await profiles.kubeconfig(*args)
    if got is None:
        await asyncio.sleep(0)
        got = await profiles.kubeconfig(*args)
    if profiles.running(args[0]):
        await _answered(profiles, args[0])
        got = await profiles.kubeconfig(*args)
    return got


@pytest.mark.asyncio
async def test_the_active_conditions_reasons_missing_unmatched_untrusted_and_a_failing_plugin_retried_later(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = _script(tmp_path, f"""
open({str(runs)!r}, "a").write("x")
if not os.path.exists({str(tmp_path / 'ok')!r}):
    sys.exit(1)
print(json.dumps({{"apiVersion": {V1!r}, "kind": "ExecCredential", "status": {{"token": "t"}}}}))
""")
    provider = AccessProvider(name="a", exec_config=ExecConfig(command=command, api_version=V1,
                                                               interactive_mode="Never"))
    clock = [1000.0]
    profiles = _Profiles({"untrusted": _profile("untrusted", access=[{"name": "a", "cluster": {"server": "x_y"}}]),
                          "other": _profile("other", access=[{"name": "b", "cluster": {}}]),
                          "good": _profile("good", access=[{"name": "a", "cluster": {"server": "https://w:6443"}}])},
                         clock)
    try:
        assert await _settled(profiles, "c1", "gone", "kueue-system", [provider]) == (
            b"", 'load client config failed: ClusterProfile.multicluster.x-k8s.io "gone" not found',
            "BadClusterProfile")
        assert await _settled(profiles, "c2", "other", "kueue-system", [provider]) == (
            b"", 'load client config failed: no matching cluster accessor found for cluster profile "other"',
            "BadClusterProfile")
        assert await _settled(profiles, "c3", "untrusted", "kueue-system", [provider]) == (
            b"", "load client config failed: untrusted server endpoint", "BadRestConfig")
        failed = (b"", f"getting credentials: exec: executable {command} failed with exit code 1{ATTEMPT_1}",
                  "ClientConnectionFailed")
        assert await _settled(profiles, "c4", "good", "kueue-system", [provider]) == failed
        (tmp_path / "ok").touch()
        clock[0] += 4.0  # within the 5 s backoff: not run again
        assert await profiles.kubeconfig("c4", "good", "kueue-system", [provider]) == failed
        assert runs.read_text() == "x"
        clock[0] += 1.0
        source, error, reason = await _settled(profiles, "c4", "good", "kueue-system", [provider])  # type: ignore[misc]
        assert (error, reason) == ("", "")
        assert yaml.safe_load(source)["users"] == [{"name": "good", "user": {"token": "t"}}]
        again = await profiles.kubeconfig("c4", "good", "kueue-system", [provider])
        assert again == (source, "", "") and runs.read_text() == "xx"  # kept: no expiry, nothing changed
    finally:
        await profiles.close()


@pytest.mark.asyncio
async def test_with_no_cluster_profile_section_a_profile_found_names_no_credentials_provider() -> None:
    """Kueue's sequential e2e "uses ClusterProfile as way to connect worker cluster" (the gate on, no
    ``multiKueue.clusterProfile``): Kueue reads the profile, then its no-op credentials say "no credentials provider
    configured"; a profile missing is still named as not found. (A section listing providers none of which the
    profile offers keeps the inventory library's words, above.)"""
    config = load_config({"featureGates": {"MultiKueueClusterProfile": True}}, "cfg")
    profiles = _Profiles({"clusterprofile3": _profile("clusterprofile3")}, [1000.0])
    sources = SimpleNamespace(profiles=profiles)

    async def condition(profile: str) -> tuple[bytes, str, str] | None:
        cluster = msgspec.convert({"metadata": {"name": "worker3"},
                                   "spec": {"clusterSource": {"clusterProfileRef": {"name": profile}}}},
                                  o.MultiKueueCluster)
        got = await KubeconfigSources._profile_kubeconfig(sources, cluster, config)  # type: ignore[arg-type]
        if got is None:
            await asyncio.sleep(0)
            got = await KubeconfigSources._profile_kubeconfig(sources, cluster, config)  # type: ignore[arg-type]
        return got

    try:
        assert await condition("clusterprofile3-missing") == (
            b"", 'load client config failed: ClusterProfile.multicluster.x-k8s.io "clusterprofile3-missing" not found',
            "BadClusterProfile")
        assert await condition("clusterprofile3") == (
            b"", "load client config failed: no credentials provider configured", "BadClusterProfile")
    finally:
        await profiles.close()


@pytest.mark.asyncio
async def test_a_401_before_the_expiry_runs_the_plugin_again_once_for_each_refusal(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = _script(tmp_path, f"""
open({str(runs)!r}, "a").write("x")
token = "t" + str(len(open({str(runs)!r}).read()))
print(json.dumps({{"apiVersion": {V1!r}, "kind": "ExecCredential", "status": {{
    "token": token, "expirationTimestamp": "2100-01-01T00:00:00Z"}}}}))
""")
    provider = AccessProvider(name="a", exec_config=ExecConfig(command=command, api_version=V1,
                                                               interactive_mode="Never"))
    clock = [1000.0]
    profiles = _Profiles({"good": _profile("good", access=[{"name": "a", "cluster": {"server": "https://w:6443"}}])},
                         clock)
    args = ("c", "good", "kueue-system", [provider])
    try:
        first, _, _ = await _settled(profiles, *args)  # type: ignore[misc]
        assert yaml.safe_load(first)["users"][0]["user"] == {"token": "t1"}
        assert await profiles.kubeconfig(*args) == (first, "", "") and runs.read_text() == "x"  # not expired
        profiles.wake.clear()
        assert profiles.unauthorized("c", first) is True
        assert profiles.wake.is_set()
        assert profiles.unauthorized("c", first) is False  # one refusal, one run: already dropped
        second, _, _ = await _settled(profiles, *args)  # type: ignore[misc]
        assert yaml.safe_load(second)["users"][0]["user"] == {"token": "t2"} and runs.read_text() == "xx"
        assert await profiles.kubeconfig(*args) == (second, "", "") and runs.read_text() == "xx"
        assert profiles.unauthorized("c", first) is False  # a refusal of credentials already replaced
        assert (profiles.unauthorized("other", second), profiles.unauthorized("c", b"")) == (False, False)
        assert await profiles.kubeconfig(*args) == (second, "", "") and runs.read_text() == "xx"
    finally:
        await profiles.close()


@pytest.mark.asyncio
async def test_the_kubeconfig_in_use_stays_the_answer_while_the_plugin_runs_again_for_the_same_cluster_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials expired: while the plugin runs again, the kubeconfig made with them is still the answer (the
    worker keeps its connection, as Kueue's client keeps its watches while the plugin runs). A run that fails drops
    them; a first run, or one for a profile cluster that changed, has none to offer meanwhile."""
    answers: asyncio.Queue[cp.Credential | str] = asyncio.Queue()

    async def run_plugin(ex: ExecConfig, cluster: dict[str, Any]) -> cp.Credential | str:
        return await answers.get()

    monkeypatch.setattr(cp, "run_plugin", run_plugin)
    clock = [1000.0]
    profiles = _Profiles({"p": _profile("p", access=[{"name": "a", "cluster": {"server": "https://w:6443"}}])}, clock)
    args = ("c", "p", "kueue-system", [_ap("a")])
    try:
        answers.put_nowait(cp.Credential(token="t1", expires_s=2000.0))
        first, _, _ = await _settled(profiles, *args)  # type: ignore[misc]
        clock[0] = 2000.0
        assert await profiles.kubeconfig(*args) == (first, "", "") and profiles.running("c")
        assert await profiles.kubeconfig(*args) == (first, "", "")
        answers.put_nowait("getting credentials: exec: executable x failed with exit code 1")
        await _answered(profiles, "c")
        assert await profiles.kubeconfig(*args) == (
            b"", "getting credentials: exec: executable x failed with exit code 1; connection attempts: 1, next "
            "connection attempt: 1970-01-01T00:33:25Z", "ClientConnectionFailed")
        clock[0] += 5.0  # the backoff over: run again, with nothing to offer meanwhile
        assert await profiles.kubeconfig(*args) is None and profiles.running("c")
        answers.put_nowait(cp.Credential(token="t2", expires_s=3000.0))
        second, _, _ = await _settled(profiles, *args)  # type: ignore[misc]
        assert _token(second) == "t2"
        moved = _profile("p", access=[{"name": "a", "cluster": {"server": "https://moved:6443"}}])
        profiles._read(profiles.followed["c"], moved, "")
        assert await profiles.kubeconfig(*args) is None and profiles.running("c")
    finally:
        answers.put_nowait(cp.Credential(token="last"))
        await profiles.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(("status", "told"), [(401, True), (403, False)])
async def test_the_multikueue_connector_tells_the_profiles_of_a_worker_answering_401(status: int, told: bool) -> None:
    class Refusing:
        def __init__(self) -> None:
            self.lists = 0

        async def list(self, resource: Any, **_: Any) -> Any:
            self.lists += 1
            raise Forbidden("Unauthorized" if status == 401 else "forbidden", status)

    state = fold(records([[]]))
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(None, journal, append=None, retry_s=0.001)  # type: ignore[arg-type]
    seen: list[tuple[str, bytes]] = []
    mk.profiles.unauthorized = lambda name, source: seen.append((name, source)) or True  # type: ignore[method-assign]
    mk.wait = lambda _: asyncio.sleep(0.001)  # not the backoff's 5 s and more
    client = Refusing()
    w = Worker("w1", b"kubeconfig", client=client)  # type: ignore[arg-type]
    task = asyncio.create_task(mk._watch_worker(w, "origin"))
    try:
        async with asyncio.timeout(5):
            while client.lists < 3:
                await asyncio.sleep(0.001)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert (w.connected, w.reason) == (False, "ClientConnectionFailed")
    assert bool(seen) == told and set(seen) <= {("w1", b"kubeconfig")}
    assert len(seen) <= client.lists  # once for each refusal


# --- the plugin run off the MultiKueue pass ----------------------------------------------------------------------------

def _waiting_plugin(tmp_path: Path) -> tuple[str, Path]:
    """A plugin slow to answer (a cloud identity endpoint out of reach): it writes its pid to ``started-<n>`` (the
    n-th run), then answers only once the file ``go`` is there, a token naming the server it was handed."""
    go = tmp_path / "go"
    command = _script(tmp_path, f"""
import time
runs = len([n for n in os.listdir({str(tmp_path)!r}) if n.startswith("started-")])
open(os.path.join({str(tmp_path)!r}, "started-" + str(runs + 1)), "w").write(str(os.getpid()))
while not os.path.exists({str(go)!r}):
    time.sleep(0.01)
server = json.loads(os.environ["KUBERNETES_EXEC_INFO"])["spec"]["cluster"]["server"]
print(json.dumps({{"apiVersion": {V1!r}, "kind": "ExecCredential", "status": {{"token": "for " + server}}}}))
""")
    return command, go


def _exec_provider(command: str) -> dict[str, Any]:
    return {"name": "a", "execConfig": {"command": command, "apiVersion": V1, "interactiveMode": "Never",
                                        "provideClusterInfo": True}}


async def _started(tmp_path: Path, run: int) -> int:
    """The pid of the plugin's ``run``-th run, once it started."""
    path = tmp_path / f"started-{run}"
    async with asyncio.timeout(30):
        while not (path.exists() and path.read_text()):
            await asyncio.sleep(0.01)
    return int(path.read_text())


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _token(source: bytes) -> str:
    return yaml.safe_load(source)["users"][0]["user"]["token"]


def _profile_state(tmp_path: Path, command: str) -> Any:
    """The MultiKueue dispatch scenario, its worker1 named by the ClusterProfile ``p1`` (worker2 by its Secret),
    both reached before, under a Configuration with MultiKueueClusterProfile on and ``command`` as the plugin."""
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    for obj in objects:
        if obj["kind"] == "MultiKueueCluster" and obj["metadata"]["name"] == "worker1":
            obj["spec"]["clusterSource"] = {"clusterProfileRef": {"name": "p1"}}
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    document = {**MK_DOCUMENT, "featureGates": {"MultiKueueClusterProfile": True},
                "multiKueue": {"clusterProfile": {"accessProviders": [_exec_provider(command)]}}}
    state = load_state(str(path), None, START).state
    apply(state, ev.ConfigRecorded(time=START, document=document, writer="test", id="profiles"),
          *(ev.MultiKueueClusterObserved(time=START, key=name, connected=True) for name in ("worker1", "worker2")))
    settle(state, load_config(document), now=START)
    return state


class _AskingWorker(IdleWorker):
    """A worker reached: each copy made there records what worker1's plugin had answered by then."""

    def __init__(self, mk: MultiKueueConnector, answers: list[tuple[str, bool, str]]) -> None:
        super().__init__()
        self.mk, self.answers = mk, answers

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        f = self.mk.profiles.followed["worker1"]
        self.answers.append((body["metadata"]["name"], f.got is not None, f.last_error))
        return await super().create(resource, body, namespace)


@pytest.mark.asyncio
async def test_a_slow_plugin_holds_back_its_own_worker_only_whose_copy_follows_its_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In Kueue the plugin runs inside its cluster's client: worker2 (reached through its Secret) gets the
    workload's copy while worker1's plugin has not answered, neither credentials nor its timeout; worker1 is
    meanwhile neither reached nor reported lost, and is reached with the plugin's token once it answers."""
    from connectors.k8s import multikueue_kubeconfigs

    monkeypatch.setattr(cp, "PLUGIN_TIMEOUT_S", 10.0)  # longer than the passes before the answer, never reached
    command, go = _waiting_plugin(tmp_path)
    state = _profile_state(tmp_path, command)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    mk = _connector(state, {})
    mk.client = SecretsManager(state, {"worker2-secret": _secret("worker2-secret", _kubeconfig("w2"))})  # type: ignore[assignment]
    mk.profiles = _Profiles({"p1": _profile("p1", access=[{"name": "a", "cluster": {"server": "https://w1:6443"}}])},
                            [1000.0], wake=mk._wake)
    appended = _appending(mk)
    answers: list[tuple[str, bool, str]] = []
    built: dict[str, _AskingWorker] = {}

    async def client_from(kubeconfig: bytes) -> Any:
        built[_token(kubeconfig)] = _AskingWorker(mk, answers)
        return built[_token(kubeconfig)]

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", client_from)
    try:
        await _passes(mk, 3)
        assert answers == [("job-a", False, "")]  # worker2's copy, worker1's plugin still running
        assert built["t"].created == ["Workload:default/job-a"] and mk.profiles.running("worker1")
        assert (mk.workers["worker1"].client, mk.workers["worker1"].connected) == (None, False)
        go.touch()
        await _answered(mk.profiles, "worker1")
        await _passes(mk, 3)
        assert built["for https://w1:6443"].created == ["Workload:default/job-a"]
        assert mk.workers["worker1"].connected and not mk.profiles.running("worker1")
        assert [e for e in appended if isinstance(e, ev.MultiKueueClusterObserved)] == []  # never lost meanwhile
        assert len(list(tmp_path.glob("started-*"))) == 1
    finally:
        go.touch()
        await _close(mk)
        await mk.profiles.close()


@pytest.mark.asyncio
async def test_one_run_at_a_time_and_a_run_for_a_profile_changed_or_gone_is_stopped_unused(tmp_path: Path) -> None:
    command, go = _waiting_plugin(tmp_path)
    provider = msgspec.convert(_exec_provider(command), AccessProvider)
    first = _profile("p", access=[{"name": "a", "cluster": {"server": "https://old:6443"}}])
    profiles = _Profiles({"p": first}, [1000.0])
    args = ("c", "p", "kueue-system", [provider])
    try:
        assert await profiles.kubeconfig(*args) is None and not profiles.running("c")  # not read yet
        await asyncio.sleep(0)
        assert await profiles.kubeconfig(*args) is None and profiles.running("c")
        stale = profiles.followed["c"].plugin
        old_pid = await _started(tmp_path, 1)
        assert await profiles.kubeconfig(*args) is None and profiles.followed["c"].plugin is stale  # not run again
        # --- the profile's cluster changed: the old run is stopped, its process with it, and one for it starts
        f = profiles.followed["c"]
        profiles._read(f, _profile("p", access=[{"name": "a", "cluster": {"server": "https://new:6443"}}]), "")
        assert await profiles.kubeconfig(*args) is None
        assert stale is not None and stale.cancelled() and _gone(old_pid)
        new_pid = await _started(tmp_path, 2)
        # --- the profile deleted: the run is stopped too
        profiles._read(f, None, "")
        assert await profiles.kubeconfig(*args) == (
            b"", 'load client config failed: ClusterProfile.multicluster.x-k8s.io "p" not found', "BadClusterProfile")
        assert not profiles.running("c") and _gone(new_pid)
        # --- back: run again, and its answer used once there
        profiles._read(f, _profile("p", access=[{"name": "a", "cluster": {"server": "https://new:6443"}}]), "")
        go.touch()
        source, error, reason = await _settled(profiles, *args)  # type: ignore[misc]
        assert (_token(source), error, reason) == ("for https://new:6443", "", "")
        assert len(list(tmp_path.glob("started-*"))) == 3
    finally:
        go.touch()
        await profiles.close()


@pytest.mark.asyncio
async def test_a_plugin_never_answering_times_out_off_the_pass_and_is_tried_again_after_the_backoff(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cp, "PLUGIN_TIMEOUT_S", 0.2)
    command, go = _waiting_plugin(tmp_path)
    provider = msgspec.convert(_exec_provider(command), AccessProvider)
    clock = [1000.0]
    profiles = _Profiles({"p": _profile("p", access=[{"name": "a", "cluster": {"server": "https://w:6443"}}])}, clock)
    args = ("c", "p", "kueue-system", [provider])
    timed_out = (b"", f"getting credentials: exec: executable {command} timed out{ATTEMPT_1}",
                 "ClientConnectionFailed")
    try:
        assert await _settled(profiles, *args) == timed_out
        assert profiles.wake.is_set() and not profiles.running("c")
        clock[0] += 4.0
        assert await profiles.kubeconfig(*args) == timed_out and not profiles.running("c")  # within the 5 s backoff
        clock[0] += 1.0
        go.touch()
        # the second run answers at once, but starting an interpreter can take longer than 0.2 s on a loaded host
        monkeypatch.setattr(cp, "PLUGIN_TIMEOUT_S", 60.0)
        source, _, _ = await _settled(profiles, *args)  # type: ignore[misc]
        assert _token(source) == "for https://w:6443" and len(list(tmp_path.glob("started-*"))) == 2
    finally:
        go.touch()
        await profiles.close()


@pytest.mark.asyncio
async def test_a_plugin_that_cannot_be_started_is_a_failed_run_not_a_run_lost(tmp_path: Path) -> None:
    """A run raising (an env value the system refuses) is a failure like any other: reported, tried again after
    the backoff, not started again on every pass."""
    provider = AccessProvider(name="a", exec_config=msgspec.convert(
        {"command": _script(tmp_path, "pass"), "apiVersion": V1, "interactiveMode": "Never",
         "env": [{"name": "BAD", "value": "a\0b"}]}, ExecConfig))
    clock = [1000.0]
    profiles = _Profiles({"p": _profile("p", access=[{"name": "a", "cluster": {"server": "https://w:6443"}}])},
                         clock)
    try:
        failed = (b"", f"getting credentials: embedded null byte{ATTEMPT_1}", "ClientConnectionFailed")
        assert await _settled(profiles, "c", "p", "kueue-system", [provider]) == failed
        assert await profiles.kubeconfig("c", "p", "kueue-system", [provider]) == failed
        assert not profiles.running("c")
        clock[0] += 5.0  # failing again: its second attempt, the next one 10 s on
        assert await _settled(profiles, "c", "p", "kueue-system", [provider]) == (
            b"", "getting credentials: embedded null byte; connection attempts: 2, next connection attempt: "
            "1970-01-01T00:16:55Z", "ClientConnectionFailed")
    finally:
        await profiles.close()


def test_kueue_es_may_read_and_watch_the_cluster_profiles_of_its_namespace() -> None:
    [role] = [d for d in manifests.rbac() if d["kind"] == "Role" and d["metadata"]["name"].endswith("leader-election")]
    assert {"apiGroups": [cp.GROUP], "resources": [cp.CLUSTER_PROFILES.plural],
            "verbs": ["get", "list", "watch"]} in role["rules"]
