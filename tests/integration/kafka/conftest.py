"""A real single-node Apache Kafka (KRaft) broker for the tests in this directory.

The broker is started once per test session by ``scripts/kafka.sh`` (jars
resolved by Maven from ``tools/kafka/pom.xml``), listens on a free loopback
port, keeps its data in a temporary directory and is stopped at the end
(``tests/fixtures/kafka_broker.py``; the kube suite's ``run --kube`` over Kafka
uses the same node).

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

import gc
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures.kafka_broker import KafkaBroker, KafkaScriptError, free_loopback_port, shared_broker

__all__ = ["KafkaBroker", "SecuredBroker"]  # what the tests import from here

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Runs before `-m` deselection; restricted to this directory because
    # conftest collection hooks see every item of the session.
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(autouse=True)
def _collect_leaked_clients() -> Iterator[None]:
    """A Kafka client left unclosed warns from ``__del__`` (an error here) whenever the collector reaches it,
    which may be during a later test: collecting at each teardown names the test that leaked it."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    yield from shared_broker(tmp_path_factory)


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
        ports.append(free_loopback_port(used))
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
