"""A real kube-apiserver + etcd for the tests in this directory.

The session fixture ``kube_apiserver`` runs ``scripts/kube.sh install`` (builds
kube-apiserver and etcd from the Go module proxy on first use, then reuses the
binaries cached under ``$KUEUE_ES_CACHE/kube/<version>/``) and
``scripts/kube.sh start`` in a temporary directory, and stops both processes at
the end of the session.

``kafka_bootstrap`` (session) is a real Kafka broker too, for ``run --kube`` over Kafka: the session's one node
(``tests/fixtures/kafka_broker.py``), shared with ``tests/integration/kafka``.

Every test collected from this directory is marked ``kube``.  When there is no
Go toolchain (and no cached binaries) the fixture skips; otherwise any failure
to build or start the cluster is a test error, never a skip.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fixtures.kafka_broker import shared_broker

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
KUBE_SH = REPO / "scripts" / "kube.sh"

EXIT_NO_GO = 3  # scripts/kube.sh: no Go toolchain and no cached binaries


@pytest.fixture(autouse=True)
def _collect_left_sockets() -> Iterator[None]:
    """After each test, collect what its cancelled requests left to the garbage collector (asyncio's transports
    of a request cut off mid-flight, on Python 3.11): collected here, where it is expected, their
    ResourceWarning cannot fail whichever later test the collector happens to run in."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection looks at the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.kube)


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    """Run scripts/kube.sh; return stdout, raise with stderr on failure."""
    proc = subprocess.run(
        ["bash", str(KUBE_SH), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise KubeShError(args, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


class KubeShError(RuntimeError):
    def __init__(self, args: tuple[str, ...], returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        super().__init__(
            f"scripts/kube.sh {' '.join(args)} exited with {returncode}\n"
            f"--- stdout\n{stdout}\n--- stderr\n{stderr}"
        )


def _parse_env(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            out[key] = value
    return out


@dataclass
class KubeCluster:
    """Handle on a running etcd + kube-apiserver started by scripts/kube.sh."""

    dir: Path
    kubeconfig: str  # admin (system:masters) client-certificate kubeconfig
    server: str  # https://127.0.0.1:<port>
    token: str  # static bearer token, also system:masters
    ca_file: str  # CA of the serving certificate (and of client certs)
    etcd_endpoint: str  # http://127.0.0.1:<port>, etcd v3 API (JSON gateway under /v3/)
    version: str  # Kubernetes version, e.g. "v1.36.4"
    etcd_version: str
    env: dict[str, str] = field(repr=False)

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port; etcd keeps running.

        The new apiserver's watch cache starts at etcd's current revision, so a
        watch resumed from an older resourceVersion gets 410 Gone (as long as
        etcd's revision moved since that resourceVersion, which any write does).
        Open watches are cut off. Returns once /readyz is ok.
        """
        _run("restart-apiserver", str(self.dir))

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision (physically) and return that revision.

        Anything the apiserver reads from etcd at an older revision then fails
        with 410 Gone. With the watch cache on (kube_apiserver), watches and
        exact-RV lists are served from the apiserver's memory and are NOT
        affected until it restarts (restart_apiserver); with
        kube_apiserver_no_watch_cache they fail at once.
        """
        return int(_run("compact", str(self.dir)).strip())

    async def arestart_apiserver(self) -> None:
        await asyncio.to_thread(self.restart_apiserver)

    async def acompact_etcd(self) -> int:
        return await asyncio.to_thread(self.compact_etcd)


@contextmanager
def _cluster(tmp_path_factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[KubeCluster]:
    try:
        _run("install")
    except KubeShError as exc:
        if exc.returncode == EXIT_NO_GO:
            pytest.skip("kube tests need a Go toolchain to build kube-apiserver and etcd (`go` not found)")
        raise
    work = tmp_path_factory.mktemp(name)
    # KUBE_OWNER_PID: kube.sh's watchdog stops the cluster if this process dies without teardown.
    full_env = dict(os.environ, KUBE_OWNER_PID=str(os.getpid()), **env)
    try:
        info = _parse_env(_run("start", str(work), env=full_env))
    except BaseException:
        _run("stop", str(work))
        raise
    try:
        yield KubeCluster(
            dir=work,
            kubeconfig=info["KUBECONFIG"],
            server=info["KUBE_SERVER"],
            token=info["KUBE_TOKEN"],
            ca_file=info["KUBE_CA"],
            etcd_endpoint=info["ETCD_ENDPOINT"],
            version=info["KUBE_VERSION"],
            etcd_version=info["ETCD_VERSION"],
            env=info,
        )
    finally:
        _run("stop", str(work))


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """etcd + kube-apiserver configured like a production apiserver (watch cache on)."""
    with _cluster(tmp_path_factory, "kube") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kube_apiserver_no_watch_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A second, independent cluster whose apiserver runs with --watch-cache=false.

    Every read and watch goes to etcd, so compact_etcd() alone makes watches
    (and reads) from older resourceVersions fail with 410 Gone. Only started
    when a test asks for it.
    """
    with _cluster(tmp_path_factory, "kube-nocache", KUBE_WATCH_CACHE="false") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    for broker in shared_broker(tmp_path_factory):
        yield broker.bootstrap
