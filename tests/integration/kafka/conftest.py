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
    yield from broker_session(tmp_path_factory)


def broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """The ``kafka_broker`` fixture's body (``tests/integration/kube/conftest.py`` starts one too)."""
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


@dataclass
class SecuredBroker:
    """A KRaft node whose client listeners ask for SASL/PLAIN: ``sasl_ssl`` (TLS, certificate signed by the
    test CA in ``ca_file``, issued to 127.0.0.1) and ``sasl_plaintext``; one user, ``username``/``password``."""

    node: KafkaBroker
    sasl_ssl: str
    sasl_plaintext: str
    ca_file: Path
    username: str = "kueue-es"
    password: str = "s3cret-Passw0rd"


def _keytool(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["keytool", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise KafkaScriptError(f"keytool {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")


def _make_certificates(d: Path) -> tuple[Path, Path]:
    """A test CA and a broker key pair signed by it for IP 127.0.0.1, with the JDK's keytool (present
    wherever the broker's Java is). Returns the broker's PKCS12 keystore and the CA certificate (PEM)."""
    ca, broker, pw = "ca.p12", "broker.p12", "keystore-pw"
    _keytool("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
             "-dname", "CN=kueue-es test CA", "-ext", "bc:c", "-ext", "ku:c=keyCertSign,cRLSign",
             "-keystore", ca, "-storetype", "PKCS12", "-storepass", pw, cwd=d)
    _keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, "-storepass", pw, "-file", "ca.pem", cwd=d)
    _keytool("-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
             "-dname", "CN=127.0.0.1", "-keystore", broker, "-storetype", "PKCS12", "-storepass", pw, cwd=d)
    _keytool("-certreq", "-alias", "broker", "-keystore", broker, "-storepass", pw, "-file", "broker.csr", cwd=d)
    _keytool("-gencert", "-alias", "ca", "-keystore", ca, "-storepass", pw, "-infile", "broker.csr",
             "-outfile", "broker.pem", "-rfc", "-validity", "2", "-ext", "SAN=ip:127.0.0.1",
             "-ext", "ku:c=digitalSignature,keyEncipherment", "-ext", "eku=serverAuth", cwd=d)
    _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", broker,
             "-storepass", pw, cwd=d)
    _keytool("-importcert", "-alias", "broker", "-file", "broker.pem", "-keystore", broker, "-storepass", pw,
             cwd=d)
    return d / broker, d / "ca.pem"


@pytest.fixture(scope="session")
def secured_kafka_broker(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[SecuredBroker]:
    """A second node (``kafka_broker`` first: Java, Maven and the jars are there), with the SASL_SSL and
    SASL_PLAINTEXT listeners of :class:`SecuredBroker`; the node talks to itself over a plaintext listener."""
    if shutil.which("keytool") is None:
        pytest.skip("the secured-broker tests need the JDK's keytool next to `java`")
    certs = tmp_path_factory.mktemp("kafka-certs")
    keystore, ca_file = _make_certificates(certs)
    used: set[int] = {kafka_broker.port}
    ports = []
    for _ in range(4):
        ports.append(_free_loopback_port(used))
        used.add(ports[-1])
    sasl_ssl, sasl_plain, internal, controller = ports
    user, password = SecuredBroker.username, SecuredBroker.password
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}="{password}";'
    extra = "\n".join([
        f"listeners=SASL_SSL://127.0.0.1:{sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
        f"INTERNAL://127.0.0.1:{internal},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners=SASL_SSL://127.0.0.1:{sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
        f"INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={keystore}",
        "ssl.keystore.password=keystore-pw",
        "ssl.key.password=keystore-pw",
    ])
    env = {**kafka_broker._env, "KAFKA_CONTROLLER_PORT": str(controller), "KAFKA_EXTRA_PROPERTIES": extra}
    node = KafkaBroker(port=sasl_ssl, data_dir=tmp_path_factory.mktemp("kafka-secured-data"), _env=env)
    node.start()
    try:
        yield SecuredBroker(node, f"127.0.0.1:{sasl_ssl}", f"127.0.0.1:{sasl_plain}", ca_file)
    finally:
        node.stop()
