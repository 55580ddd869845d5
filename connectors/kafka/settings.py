"""Kafka connection settings, ``kafka://`` log URLs, and the keyword arguments aiokafka's clients take.

The settings are a frozen msgspec struct so they can sit inside :class:`kueue_es.config.Settings` and be
decoded from YAML and ``KUEUE_ES_KAFKA_*`` environment variables with errors that name the field
(``$.kafka.bootstrap``). Nothing here connects to anything.
"""

from __future__ import annotations

import ssl
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import msgspec

from events.errors import InvalidInput

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

DEFAULT_TOPIC = "kueue-es.log"
SNAPSHOT_SUFFIX = ".snapshots"


class _S(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class TlsSettings(_S):
    """TLS to the brokers (``security_protocol`` SSL or SASL_SSL)."""

    ca_file: str = ""
    """PEM bundle of the CAs that sign the brokers' certificates; empty: the system's trust store."""
    cert_file: str = ""
    """Client certificate (PEM) for mutual TLS."""
    key_file: str = ""
    key_password: str = ""
    check_hostname: bool = True


class SaslSettings(_S):
    mechanism: SaslMechanism = "PLAIN"
    username: str = ""
    password: str = ""
    password_file: str = ""
    """Read the password from this file (trailing newline stripped) instead of ``password``."""


class KafkaSettings(_S):
    """How to reach the brokers and how to lay out the topics. Defaults suit a production cluster."""

    bootstrap: str = ""
    """``host:port[,host:port...]`` of one or more brokers."""
    topic: str = DEFAULT_TOPIC
    """The log topic: one partition per scheduling shard, never expired."""
    snapshot_topic: str = ""
    """The compacted snapshot topic; empty: ``<topic>.snapshots``."""
    shards: int = 1
    """Partitions of both topics when kueue-es creates them."""
    replication_factor: int = -1
    """For created topics; -1: the broker's ``default.replication.factor`` (use 3 in production)."""
    min_insync_replicas: int = 0
    """For created topics; 0: the broker's default (use 2 with replication factor 3)."""
    create_topics: bool = True
    """Create missing topics on start (needs the CreateTopics ACL)."""
    max_batch_bytes: int = 16 << 20
    """Largest appended batch (one Kafka record): the log topic's ``max.message.bytes``."""
    max_snapshot_bytes: int = 256 << 20
    """Largest snapshot record: the snapshot topic's ``max.message.bytes``."""
    client_id: str = "kueue-es"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    tls: TlsSettings = TlsSettings()
    sasl: SaslSettings = SaslSettings()
    request_timeout_ms: int = 30_000
    transactional_id_prefix: str = "kueue-es-scheduler"
    """The scheduler of shard N of topic T uses the transactional id ``<prefix>.<T>.<N>`` (stable: fencing
    rests on it) and the consumer group ``<prefix>.<T>``."""
    transaction_timeout_ms: int = 30_000
    transaction_retry_backoff_ms: int = 5
    """Retry backoff of the scheduler's transactional producer. A transaction begun right after the previous
    commit often meets CONCURRENT_TRANSACTIONS until the commit markers are written; aiokafka's default
    (100 ms) then adds 100 ms to a decision's latency. The scheduler also retries a transaction's first
    AddPartitionsToTxn this soon (aiokafka's own wait there is a fixed 20 ms)."""
    session_timeout_ms: int = 6_000
    """Scheduler group session: how long a dead active scheduler holds its shards before a standby takes
    over (the broker's ``group.min.session.timeout.ms`` is the floor, 6 s by default)."""
    heartbeat_interval_ms: int = 1_000
    static_membership: bool = False
    """Join the scheduler group as a static member named by the replica's instance id (KIP-345): a replica
    restarted under the same name (a StatefulSet pod) gets its shards back at once instead of after the
    session timeout. A stopped static member does not leave the group, so a standby only takes over its
    shards once the session expires. Needs a stable ``scheduler.instance_id``."""
    fetch_max_wait_ms: int = 5
    """How long the broker may hold a fetch when there is nothing new (bounds decision latency)."""

    @property
    def snapshots(self) -> str:
        return self.snapshot_topic or self.topic + SNAPSHOT_SUFFIX

    def transactional_id(self, partition: int) -> str:
        return f"{self.transactional_id_prefix}.{self.topic}.{partition}"

    @property
    def group_id(self) -> str:
        return f"{self.transactional_id_prefix}.{self.topic}"


def validate(s: KafkaSettings, where: str = "$.kafka") -> KafkaSettings:
    """Checks msgspec's types cannot express; raises :class:`InvalidInput` naming the field."""
    if not s.bootstrap.strip():
        raise InvalidInput(f"{where}.bootstrap: no Kafka brokers given (host:port[,host:port...])")
    for hp in s.bootstrap.split(","):
        host, sep, port = hp.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidInput(f"{where}.bootstrap: {hp.strip()!r} is not host:port")
    if not _topic_ok(s.topic):
        raise InvalidInput(f"{where}.topic: {s.topic!r} is not a valid topic name")
    if s.snapshot_topic and not _topic_ok(s.snapshot_topic):
        raise InvalidInput(f"{where}.snapshot_topic: {s.snapshot_topic!r} is not a valid topic name")
    if s.snapshots == s.topic:
        raise InvalidInput(f"{where}.snapshot_topic: must differ from the log topic")
    for name in ("shards",):
        if getattr(s, name) < 1:
            raise InvalidInput(f"{where}.{name}: must be at least 1")
    if s.replication_factor == 0 or s.replication_factor < -1:
        raise InvalidInput(f"{where}.replication_factor: must be -1 (broker default) or at least 1")
    for name in ("max_batch_bytes", "max_snapshot_bytes", "request_timeout_ms", "transaction_timeout_ms",
                 "transaction_retry_backoff_ms",
                 "session_timeout_ms", "heartbeat_interval_ms"):
        if getattr(s, name) <= 0:
            raise InvalidInput(f"{where}.{name}: must be positive")
    if s.fetch_max_wait_ms < 0:
        raise InvalidInput(f"{where}.fetch_max_wait_ms: must not be negative")
    tls_used = s.security_protocol in ("SSL", "SASL_SSL")
    if not tls_used and (s.tls.ca_file or s.tls.cert_file or s.tls.key_file):
        raise InvalidInput(f"{where}.tls: TLS files are set but security_protocol is {s.security_protocol} "
                           "(use SSL or SASL_SSL)")
    if s.tls.key_file and not s.tls.cert_file:
        raise InvalidInput(f"{where}.tls.cert_file: a client key needs its certificate")
    if s.security_protocol.startswith("SASL"):
        if not s.sasl.username:
            raise InvalidInput(f"{where}.sasl.username: required with security_protocol {s.security_protocol}")
        if not (s.sasl.password or s.sasl.password_file):
            raise InvalidInput(f"{where}.sasl.password: required with security_protocol {s.security_protocol} "
                               "(or sasl.password_file)")
    return s


def _topic_ok(name: str) -> bool:
    return 0 < len(name) <= 249 and name not in (".", "..") and all(c.isalnum() or c in "._-" for c in name)


# --- log URLs ----------------------------------------------------------------------------------------------


def is_kafka_url(text: str) -> bool:
    return text.startswith("kafka://")


def parse_url(url: str, base: KafkaSettings | None = None) -> tuple[KafkaSettings, int]:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC[?shard=N]`` → settings (``base`` with bootstrap and topic
    replaced) and the shard (partition) named, 0 by default."""
    base = base or KafkaSettings()
    parts = urlsplit(url)
    if parts.scheme != "kafka":
        raise InvalidInput(f"--log {url}: not a kafka:// URL")
    bootstrap = parts.netloc
    topic = parts.path.lstrip("/")
    if not bootstrap:
        raise InvalidInput(f"--log {url}: no broker address (expected kafka://HOST:PORT/TOPIC)")
    if "/" in topic:
        raise InvalidInput(f"--log {url}: the path must be one topic name (expected kafka://HOST:PORT/TOPIC)")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = set(query) - {"shard"}
    if unknown:
        raise InvalidInput(f"--log {url}: unknown URL parameter {sorted(unknown)[0]!r} (only shard=N)")
    shard = 0
    if "shard" in query:
        text = query["shard"][-1]
        if not text.isdigit():
            raise InvalidInput(f"--log {url}: shard must be a number >= 0, not {text!r}")
        shard = int(text)
    settings = msgspec.structs.replace(base, bootstrap=bootstrap, topic=topic or base.topic)
    validate(settings, f"--log {url}: $.kafka")
    return settings, shard


# --- client keyword arguments ------------------------------------------------------------------------------


def client_kwargs(s: KafkaSettings) -> dict[str, Any]:
    """Connection arguments shared by aiokafka's producer, consumer and admin client."""
    kw: dict[str, Any] = {
        "bootstrap_servers": [hp.strip() for hp in s.bootstrap.split(",")],
        "client_id": s.client_id,
        "request_timeout_ms": s.request_timeout_ms,
        "security_protocol": s.security_protocol,
    }
    if s.security_protocol in ("SSL", "SASL_SSL"):
        kw["ssl_context"] = ssl_context(s.tls)
    if s.security_protocol.startswith("SASL"):
        kw["sasl_mechanism"] = s.sasl.mechanism
        kw["sasl_plain_username"] = s.sasl.username
        kw["sasl_plain_password"] = sasl_password(s.sasl)
    return kw


def ssl_context(t: TlsSettings) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=t.ca_file or None)
        if t.cert_file:
            ctx.load_cert_chain(t.cert_file, t.key_file or None, t.key_password or None)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInput(f"$.kafka.tls: cannot load the TLS files: {exc}") from None
    ctx.check_hostname = t.check_hostname
    if not t.check_hostname:
        ctx.verify_mode = ssl.CERT_REQUIRED  # still verify the chain, only not the name
    return ctx


def sasl_password(s: SaslSettings) -> str:
    if s.password_file:
        try:
            with open(s.password_file, encoding="utf-8") as f:
                return f.read().rstrip("\r\n")
        except OSError as exc:
            raise InvalidInput(f"$.kafka.sasl.password_file: {exc.strerror or exc}: {s.password_file}") from None
    return s.password
