"""A MultiKueueCluster whose ``spec.clusterSource.clusterProfileRef`` names a ClusterProfile
(``multicluster.x-k8s.io/v1alpha1``, in Kueue's namespace), under Kueue's MultiKueueClusterProfile gate (alpha,
off): how the worker is reached.

The ClusterProfile is read, then followed (Kueue watches the ClusterProfiles of its namespace while the gate is on,
so a profile made, edited or deleted later moves its clusters at once). Of its ``status.accessProviders`` (and the
deprecated ``status.credentialProviders``, an access provider listed in both taken from ``accessProviders``), the
first, in the order of the Configuration's ``multiKueue.clusterProfile`` providers, whose name one of them has is
used (:func:`accessor`): its ``cluster`` gives the worker's server and CA data, and the Configuration's provider the
credential plugin run to get credentials for it. The plugin is run as Kubernetes' client library runs one, never
interactively: its ``env`` added to kueue-es's environment, ``KUBERNETES_EXEC_INFO`` holding an ExecCredential
(with, under ``provideClusterInfo``, the worker's cluster and the profile cluster's
``client.authentication.k8s.io/exec`` extension as its ``config``), and it answers with an ExecCredential whose
status holds a bearer token or a client certificate and key (:func:`credential`). Those are used until their
``expirationTimestamp``, then the plugin is run again; a change of the profile's cluster or of the plugin runs it
again too, and so does the worker answering 401 Unauthorized to the credentials in use before they expire (as
Kubernetes' client library refreshes an exec credential the apiserver refused): once for each refusal
(:meth:`ClusterProfiles.unauthorized`), the next request, not the refused one, made with what the plugin then
answers. The worker is reached through the cluster's ``proxy-url``, when it has one, as the inventory library's
client config does (:func:`worker_kubeconfig`).

The plugin runs off the MultiKueue pass, one run at a time for each cluster (:meth:`ClusterProfiles.kubeconfig`):
a slow or hung plugin (a cloud identity endpoint out of reach) holds back its own worker only, not yet connectable
until it answers (its answer wakes a pass), while the other workers get their copies, deletions and statuses, as
in Kueue the plugin runs inside that cluster's client alone. A run whose profile changed, went or stopped being
named meanwhile is stopped, its answer unused.

The worker's Active condition, as Kueue's cluster controller sets it: the gate off, ``MultiKueueClusterProfileFeature
Disabled``; the profile missing (``ClusterProfile.multicluster.x-k8s.io "<name>" not found``) or offering no
provider the Configuration has ("no matching cluster accessor found for cluster profile ..."), or found with no
``multiKueue.clusterProfile`` in the Configuration ("no credentials provider configured", Kueue's no-op
credentials then), ``BadClusterProfile``;
a server whose host is neither an IP address nor a DNS subdomain, ``BadRestConfig`` "untrusted server endpoint"; all
"load client config failed: ...". A plugin that cannot be run, fails or answers wrongly leaves the worker
``ClientConnectionFailed`` with the client library's "getting credentials: ..." (Kueue meets it connecting to the
worker: a failed connection attempt), followed by Kueue's backoff progress ("; connection attempts: N, next
connection attempt: <time>", :func:`failed_attempt`); it is run again after Kueue's reconnect backoff (5 s doubling,
at most 320 s).

Not done: the ``clusterprofiles.multicluster.x-k8s.io/exec/additional-args`` and ``.../additional-envs``
extensions (Kueue's providers set no policy for them, so they are ignored there too). A ``proxy-url`` Kubernetes'
client library would not parse is refused as the worker's kubeconfig would be (``InsecureKubeConfig``), where Kueue,
whose client config takes it as given, fails each request to the worker instead.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog
import yaml

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.follow_one import follow, stopped
from connectors.k8s.kubeconfig_checks import trusted_server
from connectors.k8s.resources import Resource
from events.timefmt import format_time, parse_rfc3339
from kueue_es.scheduler.config import AccessProvider, ExecConfig

log = structlog.get_logger("kueue_es.k8s.clusterprofile")

GROUP = "multicluster.x-k8s.io"
CLUSTER_PROFILES = Resource("ClusterProfile", GROUP, "v1alpha1", "clusterprofiles", True, optional=True)
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
"""The kubeconfig cluster extension handed to a credential plugin as its cluster's ``config``."""
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1")
"""The ExecCredential versions Kubernetes' client library speaks with a plugin."""
BAD_PROFILE = "BadClusterProfile"
BAD_REST_CONFIG = "BadRestConfig"
CONNECTION_FAILED = "ClientConnectionFailed"
GATE_OFF = ("load client config failed: MultiKueueClusterProfile feature gate is disabled",
            "MultiKueueClusterProfileFeatureDisabled")
NO_CREDENTIALS = "no credentials provider configured"
"""Kueue's no-op ClusterProfile credentials' error, with no ``multiKueue.clusterProfile`` in the Configuration."""
RETRY_BASE_S = 5.0
RETRY_MAX_STEPS = 7
PLUGIN_TIMEOUT_S = 60.0
"""How long a credential plugin may run (the client library sets no limit; a plugin that never ends would leave its
worker unreached for good)."""


def not_found(name: str) -> str:
    return f'ClusterProfile.{GROUP} "{name}" not found'


def accessor(profile: dict[str, Any], providers: list[AccessProvider]) -> tuple[AccessProvider, dict[str, Any]] | str:
    """The Configuration's provider and the profile's cluster to reach the worker with, or why there is none."""
    status = profile.get("status") or {}
    offered: dict[str, dict[str, Any]] = {}
    for entry in [*(status.get("credentialProviders") or []), *(status.get("accessProviders") or [])]:
        if isinstance(entry, dict):
            cluster = entry.get("cluster")
            offered[str(entry.get("name", ""))] = cluster if isinstance(cluster, dict) else {}
    for p in providers:
        if p.name in offered:
            return p, offered[p.name]
    name = (profile.get("metadata") or {}).get("name", "")
    return f'no matching cluster accessor found for cluster profile "{name}"'


def exec_extension(cluster: dict[str, Any]) -> Any:
    """The cluster's ``client.authentication.k8s.io/exec`` extension (None: it has none)."""
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == EXEC_EXTENSION:
            return ext.get("extension")
    return None


def exec_info(ex: ExecConfig, cluster: dict[str, Any]) -> dict[str, Any]:
    """The ExecCredential handed to the plugin in ``KUBERNETES_EXEC_INFO``: never interactive; the worker's cluster
    only under ``provideClusterInfo``."""
    spec: dict[str, Any] = {"interactive": False}
    if ex.provide_cluster_info:
        info: dict[str, Any] = {"server": cluster.get("server", "")}
        for key in ("certificate-authority-data", "proxy-url"):
            if cluster.get(key):
                info[key] = cluster[key]
        config = exec_extension(cluster)
        if config is not None:
            info["config"] = config
        spec["cluster"] = info
    return {"apiVersion": ex.api_version, "kind": "ExecCredential", "spec": spec}


class Credential(msgspec.Struct, frozen=True):
    token: str = ""
    client_certificate_data: str = ""
    client_key_data: str = ""
    expires_s: float | None = None
    """Seconds since the epoch after which the plugin is run again (None: never)."""


def credential(stdout: bytes, api_version: str) -> Credential | str:
    """The credentials of a plugin's answer, or the client library's word for what is wrong with it."""
    try:
        doc = msgspec.json.decode(stdout)
        if not isinstance(doc, dict):
            raise msgspec.DecodeError("not an object")
    except msgspec.DecodeError as exc:
        return f"decoding stdout: {exc}"
    got = str(doc.get("apiVersion", ""))
    if got != api_version:
        return f"exec plugin is configured to use API version {api_version}, plugin returned version {got}"
    status = doc.get("status")
    if not isinstance(status, dict):
        return "exec plugin didn't return a status field"
    token = str(status.get("token") or "")
    cert, key = str(status.get("clientCertificateData") or ""), str(status.get("clientKeyData") or "")
    if not (token or cert or key):
        return "exec plugin didn't return a token or cert/key pair"
    if bool(cert) != bool(key):
        return "exec plugin returned only certificate or key, not both"
    expiry = status.get("expirationTimestamp")
    try:
        expires_s = parse_rfc3339(expiry) / 1000 if expiry else None
    except ValueError:
        return f"decoding stdout: invalid expirationTimestamp {expiry!r}"
    return Credential(token, cert, key, expires_s)


def worker_kubeconfig(profile: str, cluster: dict[str, Any], cred: Credential) -> bytes:
    """A kubeconfig reaching the worker with the plugin's credentials: the profile cluster's server, CA data and
    proxy only (what Kueue's rest config takes of it)."""
    server: dict[str, Any] = {"server": cluster.get("server", "")}
    for key in ("certificate-authority-data", "proxy-url"):
        if cluster.get(key):
            server[key] = cluster[key]
    user: dict[str, Any] = {"token": cred.token} if cred.token else {}
    if cred.client_certificate_data:
        user["client-certificate-data"] = base64.b64encode(cred.client_certificate_data.encode()).decode()
        user["client-key-data"] = base64.b64encode(cred.client_key_data.encode()).decode()
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": profile,
           "clusters": [{"name": profile, "cluster": server}], "users": [{"name": profile, "user": user}],
           "contexts": [{"name": profile, "context": {"cluster": profile, "user": profile}}]}
    return yaml.safe_dump(doc, sort_keys=True).encode()


def retry_after(failures: int) -> float:
    """Kueue's wait before reconnecting a worker after ``failures`` failed attempts in a row."""
    return RETRY_BASE_S * 2 ** (min(failures, RETRY_MAX_STEPS) - 1) if failures > 0 else 0.0


def failed_attempt(error: str, attempts: int, next_try_s: float) -> str:
    """The Active message of a worker whose connection attempts failed ``attempts`` times in a row, the next one at
    ``next_try_s`` (seconds since the epoch): Kueue's (#13726) "<error>; connection attempts: N, next connection
    attempt: <RFC 3339, UTC>"."""
    return (f"{error}; connection attempts: {attempts}, "
            f"next connection attempt: {format_time(round(next_try_s * 1000))}")


async def run_plugin(ex: ExecConfig, cluster: dict[str, Any]) -> Credential | str:
    """Run the credential plugin; its credentials, or "getting credentials: ..." in the client library's words."""
    if ex.api_version not in EXEC_API_VERSIONS:
        return f'exec plugin: invalid apiVersion "{ex.api_version}"'
    env = dict(os.environ)
    env.update({v.name: v.value for v in ex.env})
    env["KUBERNETES_EXEC_INFO"] = msgspec.json.encode(exec_info(ex, cluster)).decode()
    try:
        proc = await asyncio.create_subprocess_exec(ex.command, *ex.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError:
        hint = f"\n\n{ex.install_hint}" if ex.install_hint else ""
        return f"getting credentials: exec: executable {ex.command} not found{hint}"
    try:
        out, err = await asyncio.wait_for(proc.communicate(), PLUGIN_TIMEOUT_S)
    except TimeoutError:
        await _killed(proc)
        return f"getting credentials: exec: executable {ex.command} timed out"
    except asyncio.CancelledError:  # a stale run (its profile changed or went): its process is not left behind
        await _killed(proc)
        raise
    if err:
        log.info("MultiKueue credential plugin wrote to stderr", command=ex.command, stderr=err.decode()[-2000:])
    if proc.returncode != 0:
        return f"getting credentials: exec: executable {ex.command} failed with exit code {proc.returncode}"
    got = credential(out, ex.api_version)
    return got if isinstance(got, Credential) else f"getting credentials: {got}"


async def _killed(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()


@dataclass
class FollowedProfile:
    """One MultiKueueCluster's ClusterProfile as its watch last showed it, and the credentials last got for it."""

    name: str
    namespace: str
    read: bool = False
    profile: dict[str, Any] | None = None
    error: str = ""
    task: asyncio.Task | None = None
    used: tuple[Any, ...] = ()
    """What the credentials were got for (the profile's cluster, the provider)."""
    got: Credential | None = None
    source: bytes = b""
    """The kubeconfig last made with the plugin's credentials for :attr:`used`, in use until new ones come (kept
    while the plugin runs again, dropped when it fails or the profile no longer offers :attr:`used`)."""
    failures: int = 0
    next_try: float = 0.0
    last_error: str = ""
    plugin: asyncio.Task | None = None
    """The plugin's run under way, for :attr:`used` (never more than one)."""


@dataclass
class ClusterProfiles:
    """The ClusterProfiles the MultiKueueClusters name, each followed while named, and their workers' kubeconfigs."""

    client: KubeClient
    wake: asyncio.Event
    watch_timeout_s: int = 300
    retry_s: float = 1.0
    clock: Any = time.time
    followed: dict[str, FollowedProfile] = field(default_factory=dict)

    async def kubeconfig(self, cluster: str, profile: str, namespace: str,
                         providers: list[AccessProvider] | None) -> tuple[bytes, str, str] | None:
        """The worker's kubeconfig (with the plugin's credentials), or the message and reason of its Active condition
        (``providers`` None: the Configuration has no ``multiKueue.clusterProfile``, so a profile found gives Kueue's
        :data:`NO_CREDENTIALS`); None while its profile has not been read yet or its plugin runs (:meth:`running`) for
        credentials not got before: the read, or the plugin's answer, wakes the next pass. While the plugin runs again
        for the same profile cluster and provider (the credentials expired, or refused), the kubeconfig in use stays the
        answer until the new one comes (:meth:`_in_use`)."""
        f = self.followed.get(cluster)
        if f is None or (f.name, f.namespace) != (profile, namespace):
            await self.forget(cluster)
            f = self.followed[cluster] = FollowedProfile(profile, namespace)
            f.task = asyncio.create_task(self._follow(f), name=f"mk-profile-{cluster}")
        if not f.read:
            return None
        if f.profile is None:
            await self._unused(f)
            return b"", f"load client config failed: {f.error or not_found(profile)}", BAD_PROFILE
        found = accessor(f.profile, providers) if providers is not None else NO_CREDENTIALS
        if isinstance(found, str):
            await self._unused(f)
            return b"", f"load client config failed: {found}", BAD_PROFILE
        provider, server = found
        if not trusted_server(str(server.get("server", ""))):
            await self._unused(f)
            return b"", "load client config failed: untrusted server endpoint", BAD_REST_CONFIG
        used = (msgspec.json.encode(server), provider)
        now = self.clock()
        stale = f.got is None or (f.got.expires_s is not None and now >= f.got.expires_s)
        if used != f.used:
            await self._unused(f)
            f.used, f.failures, f.next_try = used, 0, 0.0
        elif not stale:
            return f.source, "", ""
        elif f.plugin is not None:
            return self._in_use(f)
        elif f.failures and now < f.next_try:
            return b"", failed_attempt(f.last_error, f.failures, f.next_try), CONNECTION_FAILED
        f.got = None  # being got again: a refusal of the old ones meanwhile asks for no other run
        f.plugin = asyncio.create_task(self._run(cluster, f, used, provider, server), name=f"mk-plugin-{cluster}")
        return self._in_use(f)

    @staticmethod
    def _in_use(f: FollowedProfile) -> tuple[bytes, str, str] | None:
        """While the plugin runs again: the kubeconfig made with the credentials it replaces, if any, so that the
        worker keeps its connection (and what it holds of its copies) until the new ones come, as Kueue's client,
        whose config is unchanged, keeps its watches while the client library runs the plugin again; None for a
        first run (the worker not connectable yet)."""
        return (f.source, "", "") if f.source else None

    async def _unused(self, f: FollowedProfile) -> None:
        """The profile no longer offers what the credentials were got for: the run under way, if any, is stopped,
        and the credentials and the kubeconfig made with them are not used again."""
        await self._stop_run(f)
        f.used, f.got, f.source = (), None, b""

    def running(self, cluster: str) -> bool:
        """Whether the plugin of ``cluster``'s profile runs now (its worker not connectable until it answers)."""
        f = self.followed.get(cluster)
        return f is not None and f.plugin is not None

    async def _run(self, cluster: str, f: FollowedProfile, used: tuple[Any, ...], provider: AccessProvider,
                   server: dict[str, Any]) -> None:
        """One run of the plugin, off the pass: its credentials, or its failure with the next try after Kueue's
        backoff, kept while ``f`` still wants them for ``used``, then a pass woken to take them."""
        try:
            got = await run_plugin(provider.exec_config, server)
        except Exception as exc:  # noqa: BLE001 - a plugin that cannot be run (a NUL in its env): failed, retried later
            log.warning("MultiKueue credential plugin not run", cluster=cluster, error=str(exc))
            got = f"getting credentials: {exc or type(exc).__name__}"
        finally:
            if f.plugin is asyncio.current_task():
                f.plugin = None
        if self.followed.get(cluster) is not f or f.used != used:
            return  # run for a profile since changed or no longer named: not used
        if isinstance(got, str):  # the credentials it was to replace are not used again either
            f.got, f.source, f.failures, f.last_error = None, b"", f.failures + 1, got
            f.next_try = self.clock() + retry_after(f.failures)
        else:
            f.got, f.failures, f.source = got, 0, worker_kubeconfig(f.name, server, got)
        self.wake.set()

    @staticmethod
    async def _stop_run(f: FollowedProfile) -> None:
        """Stop the plugin's run under way for ``f``, if any: what it would answer is for a profile no longer
        there as it was."""
        task, f.plugin = f.plugin, None
        if task is not None:
            await stopped(task)

    def unauthorized(self, cluster: str, source: bytes) -> bool:
        """The worker of ``cluster``, reached with the kubeconfig ``source``, answered 401 Unauthorized: when that
        holds the credentials in use (not ones already replaced), they are dropped, so that the next pass runs the
        plugin again, once (whether it fails or not, until the next refusal). Returns whether they were."""
        f = self.followed.get(cluster)
        if f is None or f.got is None or not source or f.source != source:
            return False
        log.info("MultiKueue worker refused the plugin's credentials, running the plugin again", cluster=cluster)
        f.got = None
        self.wake.set()
        return True

    async def _follow(self, f: FollowedProfile) -> None:
        def seen(obj: dict[str, Any] | None) -> None:
            self._read(f, obj, "")

        def failed(exc: Exception) -> None:
            if isinstance(exc, NotFound):  # the ClusterProfile API is not served
                self._read(f, None, f'no matches for kind "ClusterProfile" in version "{GROUP}/v1alpha1"')
            elif not f.read or f.profile is None:
                self._read(f, None, f'clusterprofiles.{GROUP} "{f.name}": {exc or type(exc).__name__}')
            else:  # the profile read before stays in use, as from Kueue's informer's cache
                log.warning("MultiKueue ClusterProfile not followed, will retry", profile=f.name, error=str(exc))

        await follow(self.client, CLUSTER_PROFILES, f.name, f.namespace, seen=seen, failed=failed,
                     watch_timeout_s=self.watch_timeout_s, retry_s=self.retry_s)

    def _read(self, f: FollowedProfile, profile: dict[str, Any] | None, error: str) -> None:
        if f.read and (f.profile, f.error) == (profile, error):
            return
        f.read, f.profile, f.error = True, profile, error
        self.wake.set()

    async def forget(self, cluster: str) -> None:
        """Stop following the profile of ``cluster`` (it names none now, or is gone)."""
        f = self.followed.pop(cluster, None)
        if f is not None:
            await self._stop_run(f)
        if f is not None and f.task is not None:
            await stopped(f.task)

    async def close(self) -> None:
        for name in sorted(self.followed):
            await self.forget(name)
