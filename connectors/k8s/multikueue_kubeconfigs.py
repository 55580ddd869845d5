"""Where a MultiKueue worker's kubeconfig comes from, and the client built of it (:func:`client_from`): the key
``kubeconfig`` of a Secret in Kueue's namespace, read once and then watched (:class:`KubeconfigSecret`); a file for
``locationType: Path``, checked to be under :data:`KUBECONFIG_DIR` while MultiKueueKubeConfigPathValidation is on
(:func:`allowed_kubeconfig_path`) and read again only once it changed (:func:`file_version`); or, under
MultiKueueClusterProfile, a ClusterProfile and the Configuration's credential plugin
(:mod:`connectors.k8s.clusterprofile`).

:class:`KubeconfigSources` holds the connector's side of it, a part of
:class:`connectors.k8s.multikueue.MultiKueueConnector` (whose ``__init__`` sets the state it uses).
"""

from __future__ import annotations

import asyncio
import base64
import os
import stat
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import structlog
import yaml
from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config as kconfig

from connectors.k8s.client import KubeClient
from connectors.k8s.clusterprofile import CONNECTION_FAILED, GATE_OFF, ClusterProfiles
from connectors.k8s.follow_one import follow
from connectors.k8s.follow_one import stopped as _stopped
from connectors.k8s.kubeconfig_checks import open_error
from connectors.k8s.multikueue_worker import CONNECTING
from connectors.k8s.resources import SECRETS
from events import objects as o
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates

log = structlog.get_logger("kueue_es.k8s.multikueue")
SECRETS_KEY = "kubeconfig"


@dataclass
class KubeconfigSecret:
    """A worker's kubeconfig Secret, as its watch last showed it."""

    location: str
    namespace: str
    read: bool = False
    """Whether it was read at all (until then the worker is neither connected nor failed)."""
    data: bytes = b""
    error: str = ""
    task: asyncio.Task | None = None


def read_kubeconfig_file(location: str, resolved: bool = False) -> tuple[bytes, str]:
    """A ``locationType: Path`` kubeconfig, read only and without blocking; anything but a regular file (a FIFO
    would stall the connector) is a bad config. Through links, as Kueue's ``os.ReadFile`` reads it (a Secret
    mounted as a volume is a link to its data), unless ``location`` is ``resolved`` already (checked under
    MultiKueueKubeConfigPathValidation): a link found there then was put in after the check, and is not followed."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if resolved else 0)
    try:
        fd = os.open(location, flags)
    except OSError as exc:  # Kueue's (Go's) words: "open <path>: no such file or directory"
        return b"", open_error(location, exc)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return b"", f"spec.clusterSource.kubeConfig.location {location!r}: not a regular file"
        return f.read(), ""


class FileVersion(NamedTuple):
    """What tells one version of a file from the next without reading it: its device and inode (a file replaced
    by a rename, as a mounted Secret is, is another inode), size, and modification and change times in nanoseconds
    (every write sets both; the change time cannot be set back from user space, so a rewrite that restores the
    modification time still shows)."""

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


def file_version(location: str) -> FileVersion | None:
    """The :class:`FileVersion` of the file at ``location`` (not through a link); None: nothing there to read."""
    try:
        st = os.lstat(location)
    except OSError:
        return None
    return FileVersion(location, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


SETTLED_NS = 2_000_000_000
"""How long after it was last changed a file's version is trusted: a filesystem stamps times from a coarse clock (a
kernel tick; seconds on some), so two same-sized writes within one tick look alike; a file read this soon after a
change is read again on the next pass (as git treats a racily clean index entry). The change is the later of its
modification and change times: a modification time may be set back (``cp -p``, ``tar``), a change time not."""


KUBECONFIG_DIR = "/etc/multikueue/kubeconfigs"
"""Where Kueue reads ``locationType: Path`` kubeconfigs from under MultiKueueKubeConfigPathValidation."""
NOT_UNDER = "kubeconfig path is not under the allowed prefix"


def allowed_kubeconfig_path(location: str, allowed_dir: str) -> tuple[str, str]:
    """The file ``location`` names once cleaned and its links resolved, or why Kueue refuses it under
    MultiKueueKubeConfigPathValidation: empty, with a ``..`` left, relative, or not inside ``allowed_dir`` (a
    link out of it included; nothing is inside a directory that does not exist)."""
    if not location:
        return "", "kubeconfig path must not be empty"
    cleaned = os.path.normpath(location)
    if ".." in cleaned.split(os.sep):
        return "", f'{NOT_UNDER}: path contains ".."'
    if not os.path.isabs(cleaned):
        return "", f"{NOT_UNDER}: path must be absolute"
    try:
        allowed = os.path.realpath(allowed_dir, strict=True)
    except OSError:
        return "", f'{NOT_UNDER}: "{cleaned}" is not under "{os.path.normpath(allowed_dir)}"'
    try:
        resolved = os.path.realpath(cleaned, strict=True)
    except OSError as exc:
        return "", f"cannot resolve kubeconfig path symlinks: lstat {_first_missing(cleaned)}: " \
                   f"{(exc.strerror or str(exc)).lower()}"
    if not (resolved + os.sep).startswith(allowed.rstrip(os.sep) + os.sep):
        return "", f'{NOT_UNDER}: "{resolved}" is not under "{allowed}"'
    return resolved, ""


def _first_missing(path: str) -> str:
    """The shortest leading part of ``path`` that cannot be looked at (what a failed link resolution names)."""
    parts = path.split(os.sep)
    for end in range(2, len(parts) + 1):
        prefix = os.sep.join(parts[:end])
        if not os.path.lexists(prefix):
            return prefix
    return path


async def client_from(kubeconfig: bytes) -> KubeClient:
    cfg = kclient.Configuration()
    doc = yaml.safe_load(kubeconfig.decode())
    if not isinstance(doc, dict):
        raise ValueError("not a kubeconfig")
    await kconfig.load_kube_config_from_dict(config_dict=doc, client_configuration=cfg)
    return KubeClient(kclient.ApiClient(configuration=cfg))


def _with_reason(source: bytes, error: str) -> tuple[bytes, str, str]:
    """A kubeconfig read, or why it could not be: Kueue's cluster controller reports any failure to get the
    kubeconfig (a Secret missing, unreadable or without its key; a file it cannot open) as ``BadKubeConfig``
    "load client config failed: ..."."""
    return (source, f"load client config failed: {error}", "BadKubeConfig") if error else (source, "", "")


class KubeconfigSources:
    """The connector's reads of its workers' kubeconfigs (a base of
    :class:`connectors.k8s.multikueue.MultiKueueConnector`, which sets the state below in its ``__init__``)."""

    client: KubeClient
    retry_s: float
    watch_timeout_s: int
    kubeconfig_dir: str
    settled_ns: int
    profiles: ClusterProfiles
    _wake: asyncio.Event
    _secrets: dict[str, KubeconfigSecret]
    _files: dict[str, tuple[FileVersion, tuple[bytes, str, str]]]

    async def _kubeconfig(self, cluster: o.MultiKueueCluster,
                          config: SchedulerConfig) -> tuple[bytes, str, str] | None:
        """The worker's kubeconfig, or the error and reason Kueue's cluster controller reports (``BadKubeConfig``,
        "load client config failed: ..."; ``MultiKueueClusterProfileFeatureDisabled`` for a ClusterProfile
        reference), the reason empty without one;
        None while its Secret has not been read yet. A Secret is read once and then watched
        (:meth:`_watch_secret`), as Kueue's cluster reconciler is woken by a change of the MultiKueueCluster or of
        the Secret, not by every log move."""
        kc = cluster.spec.cluster_source.kube_config
        name = cluster.metadata.name
        if kc is not None:
            await self.profiles.forget(name)
        if kc is None or kc.location_type == "Path":
            await self._stop_secret(name)
            if kc is None:
                self._files.pop(name, None)
                return await self._profile_kubeconfig(cluster, config)
            return self._kubeconfig_file(name, kc.location, config)
        self._files.pop(name, None)
        watched = self._secrets.get(name)
        if watched is None or (watched.location, watched.namespace) != (kc.location, config.namespace):
            await self._stop_secret(name)
            watched = self._secrets[name] = KubeconfigSecret(kc.location, config.namespace)
            watched.task = asyncio.create_task(self._watch_secret(watched), name=f"mk-secret-{name}")
        return _with_reason(watched.data, watched.error) if watched.read else None

    async def _profile_kubeconfig(self, cluster: o.MultiKueueCluster,
                                  config: SchedulerConfig) -> tuple[bytes, str, str] | None:
        """A worker named by a ClusterProfile: reached with the credentials of the Configuration's plugin under
        MultiKueueClusterProfile (:mod:`connectors.k8s.clusterprofile`), refused while it is off. While its plugin
        runs (off the pass) for its first credentials, or for a profile cluster or provider that changed, it is not
        connectable yet, as a worker whose watches have not listed yet: neither reached nor lost, nothing written
        there; while it runs again for credentials expired or refused, the worker stays as it is on those until the
        new ones come."""
        name = cluster.metadata.name
        ref = cluster.spec.cluster_source.cluster_profile_ref
        if ref is None or not config.gate(gates.MULTIKUEUE_CLUSTER_PROFILE):
            await self.profiles.forget(name)
            return b"", *GATE_OFF
        cp = config.multi_kueue.cluster_profile
        read = await self.profiles.kubeconfig(name, ref.name, config.namespace, cp.providers() if cp else None)
        if read is None and self.profiles.running(name):
            return b"", CONNECTING, CONNECTION_FAILED  # as _rewatch leaves a worker until listed
        return read

    def _kubeconfig_file(self, cluster: str, location: str, config: SchedulerConfig) -> tuple[bytes, str, str]:
        """A ``locationType: Path`` kubeconfig: only from under :attr:`kubeconfig_dir` while
        MultiKueueKubeConfigPathValidation is on (Kueue's check, its reason and message), from anywhere while off.
        Read again only once the file (the one its links resolve to, under the gate) is another version
        (:func:`file_version`, taken before reading, so a change during the read shows next time), as Kueue reads
        it again when its watch of the file fires; what a pass finds unchanged is what was read before."""
        resolved = config.gate(gates.MULTIKUEUE_KUBECONFIG_PATH_VALIDATION)
        if resolved:
            location, refused = allowed_kubeconfig_path(location, self.kubeconfig_dir)
            if refused:
                self._files.pop(cluster, None)
                return b"", f"load client config failed: {refused}", "BadKubeConfig"
        version = file_version(location)
        known = self._files.get(cluster)
        if version is not None and known is not None and known[0] == version:
            return known[1]
        read = _with_reason(*read_kubeconfig_file(location, resolved))
        if version is not None and time.time_ns() - max(version.mtime_ns, version.ctime_ns) >= self.settled_ns:
            self._files[cluster] = (version, read)
        else:  # written too recently to tell from a write within the same tick: read again next time
            self._files.pop(cluster, None)
        return read

    async def _watch_secret(self, s: KubeconfigSecret) -> None:
        """Read one worker's kubeconfig Secret, then follow it. A failure to read it (a forbidden read, the
        manager's apiserver unreachable) is that worker's bad config, retried, the other workers served meanwhile
        (Kueue reports a client config it cannot load on its cluster and requeues it); once read, a watch cut
        keeps the kubeconfig in use while the Secret is read again."""
        def failed(exc: Exception) -> None:
            if not s.read or s.error:
                self._secret_read(s, b"", f'secrets "{s.location}": {exc or type(exc).__name__}')
            else:  # a kubeconfig read before stays in use (Kueue reads it from its informer's cache)
                log.warning("MultiKueue kubeconfig Secret not followed, will retry", secret=s.location,
                            error=str(exc))

        await follow(self.client, SECRETS, s.location, s.namespace, seen=partial(self._secret_seen, s),
                     failed=failed, watch_timeout_s=self.watch_timeout_s, retry_s=self.retry_s)

    def _secret_seen(self, s: KubeconfigSecret, secret: dict[str, Any] | None) -> None:
        if secret is None:  # the kind, as Kueue's cached client names what it does not find
            self._secret_read(s, b"", f'Secret "{s.location}" not found')
            return
        data = (secret.get("data") or {}).get(SECRETS_KEY)
        if not data:
            self._secret_read(s, b"", f'key "{SECRETS_KEY}" not found in secret "{s.location}"')
            return
        self._secret_read(s, base64.b64decode(data), "")

    def _secret_read(self, s: KubeconfigSecret, data: bytes, error: str) -> None:
        if s.read and (s.data, s.error) == (data, error):
            return
        s.read, s.data, s.error = True, data, error
        self._wake.set()

    async def _stop_secret(self, cluster: str) -> None:
        watched = self._secrets.pop(cluster, None)
        if watched is not None and watched.task is not None:
            await _stopped(watched.task)
