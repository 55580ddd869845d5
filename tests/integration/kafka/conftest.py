"""A real single-node Apache Kafka (KRaft) broker for the tests in this directory.

The broker is started once per test session by ``scripts/kafka.sh`` (jars
resolved by Maven from ``tools/kafka/pom.xml``), listens on a free loopback
port, keeps its data in a temporary directory and is stopped at the end.

Fixtures:

``kafka_broker`` (session)
    A :class:`KafkaBroker`: ``.bootstrap`` is ``"127.0.0.1:PORT"``;
    ``.stop()`` / ``.start()`` / ``.restart()`` stop and start the same node on
    the same port and data dir (clean shutdown); ``.kill()`` and
    ``.restart(hard=True)`` use SIGKILL instead, for crash tests. The methods
    block for a few seconds: from async tests call them through
    ``await asyncio.to_thread(kafka_broker.restart)`` so the clients' background
    tasks keep running. Tests that stop the broker must leave it running.

``kafka_bootstrap`` (session)
    Just the bootstrap string.

Every test collected under this directory is marked ``kafka``. Without
``java`` (or without ``mvn`` and no cached classpath) the fixture skips; with
them, any failure to install or start the broker is an error, never a skip.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[2]
_SCRIPT = _REPO / "scripts" / "kafka.sh"

# Upper bounds for one script call; the script has its own (shorter) timeouts.
_INSTALL_TIMEOUT_S = 900
_START_TIMEOUT_S = 180
_STOP_TIMEOUT_S = 90


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Runs before `-m` deselection; restricted to this directory because
    # conftest collection hooks see every item of the session.
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.kafka)


class KafkaScriptError(RuntimeError):
    pass


def _run(*args: str, timeout: float, env: dict[str, str] | None = None) -> str:
    cmd = [str(_SCRIPT), *args]
    try:
        proc = subprocess.run(
            cmd,
            cwd=_REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaScriptError(f"{' '.join(cmd)} timed out after {timeout}s") from exc
    if proc.returncode != 0:
        raise KafkaScriptError(
            f"{' '.join(cmd)} exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc.stdout.strip()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _free_loopback_port(avoid: set[int] | None = None) -> int:
    """A free port *outside* the ephemeral range. While the broker is down (restart tests), clients keep
    reconnecting to its port; with a port in the ephemeral range, one of them can get that very port as its
    own local port (a TCP self-connect), and the broker cannot listen on it again."""
    lo, hi = _ephemeral_range()
    candidates = [p for p in range(20000, 32000) if not lo <= p <= hi and p not in (avoid or set())]
    random.SystemRandom().shuffle(candidates)
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # pragma: no cover - all taken
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class KafkaBroker:
    """One KRaft node (broker + controller) run by ``scripts/kafka.sh``."""

    port: int
    data_dir: Path
    _env: dict[str, str]
    running: bool = False

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        """Start (or restart after stop/kill) and wait until the broker is ready."""
        out = _run("start", str(self.port), str(self.data_dir), timeout=_START_TIMEOUT_S, env=self._env)
        lines = out.splitlines()
        if not lines or lines[-1] != self.bootstrap:
            raise KafkaScriptError(f"unexpected output from kafka.sh start: {out!r}")
        self.running = True

    def stop(self) -> None:
        """Clean shutdown (SIGTERM; SIGKILL after the script's timeout)."""
        _run("stop", str(self.data_dir), timeout=_STOP_TIMEOUT_S, env=self._env)
        self.running = False

    def kill(self) -> None:
        """Crash the node (SIGKILL); ``start()`` recovers the logs."""
        _run("kill", str(self.data_dir), timeout=_STOP_TIMEOUT_S, env=self._env)
        self.running = False

    def restart(self, *, hard: bool = False) -> None:
        if hard:
            self.kill()
        else:
            self.stop()
        self.start()

    def logs(self) -> str:
        """Tail of the broker's logs (for assertion messages)."""
        try:
            return _run("logs", str(self.data_dir), timeout=30, env=self._env)
        except KafkaScriptError as exc:
            return str(exc)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    if shutil.which("java") is None:
        pytest.skip("kafka tests need a Java 17+ runtime: `java` is not on PATH")
    env = dict(os.environ)
    # If pytest dies without running finalizers, the broker follows it.
    env["KAFKA_WATCH_PID"] = str(os.getpid())
    try:
        _run("install", timeout=_INSTALL_TIMEOUT_S, env=env)
    except KafkaScriptError as exc:
        if shutil.which("mvn") is None:
            pytest.skip(
                "kafka tests need Maven to resolve the broker jars: `mvn` is not on PATH "
                f"and no cached classpath is usable ({exc})"
            )
        raise

    port = _free_loopback_port()
    env.setdefault("KAFKA_CONTROLLER_PORT", str(_free_loopback_port({port})))
    broker = KafkaBroker(
        port=port,
        data_dir=tmp_path_factory.mktemp("kafka-data"),
        _env=env,
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    return kafka_broker.bootstrap
